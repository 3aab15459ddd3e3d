"""User and project profiles on real SQLite files: aggregation (Chinese and English),
explicit edits, history, context injection, CLI, REST, MCP and the async driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import jiyi.profile as profile_module
from jiyi.errors import InvalidInput, NotFound
from jiyi.integrations.tools import MemoryTools
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, Status
from jiyi.profile import PROFILE_TAG, KeyDecision, Profile
from jiyi.profile_rules import written_in
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys, parse_token
from jiyi.store.base import Viewer
from jiyi.store.sqlite import SQLiteStore
from jiyi.text.tokens import count_tokens


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "m.db"), clock=clock, background=False) as m:
        yield m


def remember(mem: Memory, clock: Clock, text: str, memory_type: str, **scope: Any) -> MemoryItem:
    """Add one memory a minute after the previous one; it must be stored, not merged."""
    clock.now += timedelta(minutes=1)
    result = mem.add(text, memory_type=memory_type, **scope)
    assert result.item is not None and result.decision.action == "add", (text, result.decision)
    return result.item


def ids(*items: MemoryItem) -> set[str]:
    return {i.id for i in items}


# ------------------------------------------------------------------ aggregation


def test_user_profile_from_chinese_items(mem: Memory, clock: Clock) -> None:
    name = remember(mem, clock, "我的名字叫张伟", "fact", user_id="zw")
    job = remember(mem, clock, "我是前端工程师", "fact", user_id="zw")
    city = remember(mem, clock, "我住在杭州", "fact", user_id="zw")
    skill = remember(mem, clock, "我熟悉 React 和 TypeScript", "skill", user_id="zw")
    tools = remember(mem, clock, "我常用 VS Code 和 Git", "habit", user_id="zw")
    style = remember(mem, clock, "我喜欢简洁的回答", "preference", user_id="zw")
    lang = remember(mem, clock, "以后请用中文回答", "constraint", user_id="zw")
    rule = remember(mem, clock, "我对花生过敏", "constraint", user_id="zw")
    trait = remember(mem, clock, "我是个急性子", "fact", user_id="zw")
    remember(mem, clock, "我不喜欢用 Java 写代码", "preference", user_id="zw")

    p = mem.profile(user_id="zw")
    assert (p.scope, p.scope_id, p.item_id) == ("user", "zw", None)
    assert p["username"] == "张伟" and p.fields["username"].evidence == (name.id,)
    assert p["profession"] == "前端工程师" and p.fields["profession"].evidence == (job.id,)
    # An allergy is the user's background (health), not a custom instruction.
    assert p["background"] == "我住在杭州; 我对花生过敏"
    assert set(p.fields["background"].evidence) == ids(city, rule)
    assert p["expertise_areas"] == ("React",)
    assert p["programming_languages"] == ("TypeScript",)  # Java was a dislike
    assert set(p.fields["programming_languages"].evidence) == ids(skill)
    assert p["frequently_used_tools"] == ("VS Code", "Git")
    assert p.fields["frequently_used_tools"].evidence == (tools.id,)
    assert p["communication_style"] == "concise" and p.fields["communication_style"].evidence == (style.id,)
    assert p["language_preference"] == "zh-CN" and p.fields["language_preference"].evidence == (lang.id,)
    assert p["content"] is None
    assert p["characteristics"] == ("急性子",) and p.fields["characteristics"].evidence == (trait.id,)
    assert p["response_format"] is None and p.fields["response_format"].evidence == ()
    assert all(f.source == "aggregated" for f in p.fields.values())

    text = p.to_prompt()
    assert text.startswith("User profile:\n- Name: 张伟\n- Profession: 前端工程师")
    assert "- Programming languages: TypeScript" in text and "Response format" not in text


def test_user_profile_files_what_is_about_the_user_only(mem: Memory, clock: Clock) -> None:
    """Issue 16: a project rule and an allergy were custom instructions, a team's framework a
    frequently used tool, a Chinese speaker's language en. (Stored as given, infer=False:
    this is about filing, not about one decision superseding another.)"""
    remember(mem, clock, "项目必须支持 PostgreSQL 16", "constraint", user_id="zm", infer=False)
    remember(mem, clock, "服务器不能用 root 账户登录", "constraint", user_id="zm", infer=False)
    remember(
        mem,
        clock,
        "我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React",
        "decision",
        user_id="zm",
        infer=False,
    )
    remember(mem, clock, "我女儿对花生过敏", "fact", user_id="zm", infer=False)
    allergy = remember(mem, clock, "我对青霉素过敏", "constraint", user_id="zm", infer=False)
    asthma = remember(mem, clock, "我有哮喘", "fact", user_id="zm", infer=False)
    rule = remember(mem, clock, "以后给我写的代码都要加类型注解", "constraint", user_id="zm", infer=False)
    mine = remember(mem, clock, "我决定以后用 Neovim 写代码", "decision", user_id="zm", infer=False)
    tools = remember(
        mem, clock, "我经常用 VS Code、Docker、Kubernetes 和 GitHub Actions", "habit", user_id="zm"
    )

    p = mem.profile(user_id="zm")
    assert p["content"] == "以后给我写的代码都要加类型注解" and p.fields["content"].evidence == (rule.id,)
    assert p["background"] == "我有哮喘; 我对青霉素过敏"  # both kept, newest first
    assert set(p.fields["background"].evidence) == ids(allergy, asthma)
    assert set(p["frequently_used_tools"]) == {"Neovim", "VS Code", "Docker", "Kubernetes", "GitHub Actions"}
    assert set(p.fields["frequently_used_tools"].evidence) == ids(mine, tools)
    assert p["characteristics"] == ()
    # every item is Chinese, whatever the share of English names in it
    assert p["language_preference"] == "zh-CN" and p.fields["language_preference"].source == "aggregated"

    # said in the project, the same rules and decisions are the project's
    for text, kind in (
        ("项目必须支持 PostgreSQL 16", "constraint"),
        ("我们决定用 Next.js 而不是 Remix", "decision"),
    ):
        remember(mem, clock, text, kind, project_id="web", infer=False)
    remember(mem, clock, "我对花生过敏", "constraint", project_id="web", infer=False)
    project = mem.profile(project_id="web")
    assert project["constraints"] == ("项目必须支持 PostgreSQL 16",)
    assert [d.decision for d in project["key_decisions"]] == ["我们决定用 Next.js 而不是 Remix"]
    assert project["tech_stack"] == ("Next.js", "PostgreSQL")


def test_a_statement_that_dropped_its_subject_is_the_users(mem: Memory, clock: Clock) -> None:
    # Said in the user's own turns, as Chinese chat drops 我 and notes drop "I".
    for text in ("对花生过敏。", "住在上海浦东。", "Allergic to penicillin."):
        mem.remember([{"role": "user", "content": text}], session_id="s", user_id="pd")
        clock.now += timedelta(minutes=1)
    mem.process_jobs()
    background = mem.profile(user_id="pd")["background"]
    assert isinstance(background, str)
    assert {"对花生过敏", "住在上海浦东", "Allergic to penicillin"} <= set(background.split("; "))
    # someone else's, with the subject said, stays out
    remember(mem, clock, "我女儿对花生过敏", "fact", user_id="pd2", infer=False)
    assert mem.profile(user_id="pd2")["background"] is None


def test_user_profile_from_english_items_first_and_third_person(mem: Memory, clock: Clock) -> None:
    remember(mem, clock, "I work as a data scientist", "fact", user_id="al")
    remember(mem, clock, "My name is Alice", "fact", user_id="al")
    remember(mem, clock, "I'm experienced with PyTorch and SQL", "skill", user_id="al")
    remember(mem, clock, "User prefers detailed explanations with code examples", "preference", user_id="al")
    remember(mem, clock, "Please answer in English", "constraint", user_id="al")
    remember(mem, clock, "I usually work in Jupyter and Vim", "habit", user_id="al")
    remember(mem, clock, "I live in Berlin", "fact", user_id="al")
    remember(mem, clock, "I work at Zalando", "fact", user_id="al")
    remember(mem, clock, "The user is a night owl", "fact", user_id="al")
    remember(mem, clock, "Never put secrets in code samples", "constraint", user_id="al")
    # Newer but hedged: an unsure statement never beats a confident one.
    remember(mem, clock, "I might be a teacher next year, maybe", "fact", user_id="al")

    p = mem.profile(user_id="al")
    assert p["username"] == "Alice"
    assert p["profession"] == "data scientist"
    assert p["programming_languages"] == ("SQL",)
    assert p["expertise_areas"] == ("PyTorch",)
    assert p["communication_style"] == "detailed"
    assert p["response_format"] == "code"
    assert p["language_preference"] == "en"
    assert p["frequently_used_tools"] == ("Jupyter", "Vim")
    assert p["background"] == "I work at Zalando; I live in Berlin"
    assert p["characteristics"] == ("night owl",)
    assert p["content"] == "Never put secrets in code samples"


@pytest.mark.parametrize(
    ("texts", "language"),
    [
        (["私は大阪で編集者として働いています", "柴犬のハナを飼っています", "辛い食べ物は苦手です"], "ja"),
        (["저는 부산에서 간호사로 일해요", "고양이 두 마리를 키워요", "매운 음식을 좋아해요"], "ko"),
        # Latin letters are not English: a Spanish writer is given no language at all.
        (["Soy arquitecta en Sevilla", "Tengo un perro llamado Toby", "Voy al trabajo en bicicleta"], None),
        (["Я работаю врачом в Новосибирске", "У нас есть кот Барсик", "Я люблю кататься на лыжах"], None),
    ],
)
def test_the_language_of_the_users_writing_is_read_from_its_script_and_words(
    mem: Memory, clock: Clock, texts: list[str], language: str | None
) -> None:
    for text in texts:
        remember(mem, clock, text, "fact", user_id="w")
    p = mem.profile(user_id="w")
    assert p["language_preference"] == language


def test_written_in_tells_japanese_from_chinese_and_english_from_other_latin_text() -> None:
    assert written_in("我常用 VS Code、Docker 和 GitHub Actions") == "zh-CN"
    assert written_in("私は東京で働いています") == "ja"  # kanji with kana
    assert written_in("I live in Berlin") == "en"
    assert written_in("Ich arbeite in Berlin und wohne am See") is None
    assert written_in("Me llamo Lucía y soy arquitecta") is None
    assert written_in("Voy al trabajo en bicicleta") is None
    assert written_in("Ik werk in Amsterdam en dat is leuk") is None
    assert written_in("Prefers dark mode") == "en"  # a note's telegraphic English
    assert written_in("Я работаю врачом") is None  # Cyrillic: Russian, Ukrainian, Bulgarian...


def test_project_profile_from_chinese_items(mem: Memory, clock: Clock) -> None:
    goal = remember(mem, clock, "项目目标是做一个面向中小企业的支付平台", "context", project_id="pay")
    when = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
    clock.now += timedelta(minutes=1)
    chose = mem.add(
        "我们选择了 Next.js 而不是 Remix，因为 SSR 更成熟",
        memory_type="decision",
        project_id="pay",
        occurred_at=when,
    ).item
    assert chose is not None
    kafka = remember(mem, clock, "我们决定用 Kafka 做消息队列，由于需要高吞吐", "decision", project_id="pay")
    pg = remember(mem, clock, "项目必须支持 PostgreSQL 16", "constraint", project_id="pay")
    review = remember(mem, clock, "代码必须经过 code review 才能合并", "constraint", project_id="pay")
    phase = remember(mem, clock, "当前在开发支付模块", "context", project_id="pay")
    remember(mem, clock, "后端用 Go 和 Redis", "fact", project_id="pay")
    remember(mem, clock, "不能用 MongoDB 存账务数据", "constraint", project_id="pay")

    p = mem.profile(project_id="pay")
    assert p["project_goal"] == "做一个面向中小企业的支付平台" and p.fields["project_goal"].evidence == (
        goal.id,
    )
    assert p["current_phase"] == "开发支付模块" and p.fields["current_phase"].evidence == (phase.id,)
    stack = p["tech_stack"]
    assert isinstance(stack, tuple)
    assert {"Next.js", "Kafka", "PostgreSQL", "Go", "Redis"} <= set(stack)
    assert "Remix" not in stack and "MongoDB" not in stack  # rejected / forbidden
    decisions = p["key_decisions"]
    assert decisions == (
        KeyDecision("我们决定用 Kafka 做消息队列", "需要高吞吐", kafka.created_at),
        KeyDecision("我们选择了 Next.js 而不是 Remix", "SSR 更成熟", when),
    )
    assert p["constraints"] == ("不能用 MongoDB 存账务数据", "项目必须支持 PostgreSQL 16")
    assert p.fields["constraints"].evidence[1] == pg.id
    assert p["team_conventions"] == ("代码必须经过 code review 才能合并",)
    assert p.fields["team_conventions"].evidence == (review.id,)
    text = p.to_prompt()
    assert "- Key decisions:\n  - 我们决定用 Kafka 做消息队列 (reason: 需要高吞吐;" in text
    assert "(reason: SSR 更成熟; 2024-05-06)" in text


def test_project_profile_from_english_items(mem: Memory, clock: Clock) -> None:
    remember(
        mem, clock, "The goal of the project is to build an offline-first note app", "context", project_id="n"
    )
    remember(mem, clock, "We decided to use SQLite because it needs no server", "decision", project_id="n")
    remember(mem, clock, "We're currently in the beta testing phase", "context", project_id="n")
    remember(mem, clock, "All commits must follow Conventional Commits", "constraint", project_id="n")
    remember(mem, clock, "The app must work without network access", "constraint", project_id="n")
    remember(mem, clock, "We use Flutter for the mobile client", "fact", project_id="n")

    p = mem.profile(project_id="n")
    assert p["project_goal"] == "build an offline-first note app"
    assert p["current_phase"] == "beta testing phase"
    assert set(p["tech_stack"] or ()) == {"SQLite", "Flutter"}
    decisions = p["key_decisions"]
    assert isinstance(decisions, tuple)
    (decision,) = decisions
    assert isinstance(decision, KeyDecision)
    assert (decision.decision, decision.reason) == ("We decided to use SQLite", "it needs no server")
    assert p["constraints"] == ("The app must work without network access",)
    assert p["team_conventions"] == ("All commits must follow Conventional Commits",)


def test_extracted_items_use_their_structured_parts(mem: Memory, clock: Clock) -> None:
    """Through the real pipeline: remember -> rule extraction -> profile."""
    mem.remember(
        [("user", "我的名字叫王芳，我是一名后端工程师。我熟悉 Go"), ("assistant", "好的")],
        session_id="s1",
        user_id="wf",
    )
    mem.process_jobs()
    extracted = mem.list(user_id="wf").items
    assert any(i.structured for i in extracted)
    p = mem.profile(user_id="wf")
    assert p["username"] == "王芳" and p["profession"] == "后端工程师"
    assert p["programming_languages"] == ("Go",)
    # structured set by a caller (or an LLM extractor) is used as it is
    remember(mem, clock, "Job title recorded from the HR system", "fact", user_id="hr")
    clock.now += timedelta(minutes=1)
    mem.add(
        "Occupation noted from the onboarding form",
        memory_type="fact",
        user_id="hr",
        structured={"key": "occupation", "value": "site reliability engineer"},
    )
    assert mem.profile(user_id="hr")["profession"] == "site reliability engineer"


@pytest.mark.parametrize(
    ("turns", "name"),
    [
        (["I'm Zhang Wei", "Call me Dave"], "Dave"),
        (["我叫张伟", "叫我小张就行"], "小张"),
        (["我的英文名是Dave"], "Dave"),
    ],
)
def test_a_preferred_name_is_the_profiles_name(
    mem: Memory, clock: Clock, turns: list[str], name: str
) -> None:
    """Through the real pipeline: what the user wants to be called lands in ``username``."""
    for turn in turns:
        clock.now += timedelta(minutes=1)
        mem.remember([("user", turn)], session_id="s1", user_id="pn")
        mem.process_jobs()
    assert mem.profile(user_id="pn")["username"] == name


def test_what_the_project_builds_is_its_goal(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "我在做一个记账小程序")], session_id="s1", project_id="zh")
    mem.remember([("user", "I'm building a Rust CLI for log search")], session_id="s2", project_id="en")
    mem.process_jobs()
    assert mem.profile(project_id="zh")["project_goal"] == "一个记账小程序"
    assert mem.profile(project_id="en")["project_goal"] == "a Rust CLI for log search"


def test_newest_confident_evidence_wins_and_lists_follow_support(mem: Memory, clock: Clock) -> None:
    old = remember(mem, clock, "我是一名产品经理", "fact", user_id="u")
    new = remember(mem, clock, "我现在是一名数据分析师", "fact", user_id="u")
    unsure = remember(mem, clock, "我好像是一名摄影师", "fact", user_id="u")  # newest, but hedged
    p = mem.profile(user_id="u")
    assert p["profession"] == "数据分析师" and unsure.id not in p.fields["profession"].evidence
    assert p.fields["profession"].evidence == (new.id,) and old.id not in p.fields["profession"].evidence

    remember(mem, clock, "I often use Docker at work", "habit", user_id="v")
    remember(mem, clock, "I write shell scripts in Vim every day", "habit", user_id="v")
    remember(mem, clock, "For notes I use Vim too", "habit", user_id="v")
    assert mem.profile(user_id="v")["frequently_used_tools"] == ("Vim", "Docker")  # support, then recency


def test_work_is_bounded_to_the_newest_items_per_type(
    mem: Memory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tool in ("Emacs", "Jira", "Figma", "Postman"):
        remember(mem, clock, f"I open {tool} every single morning", "habit", user_id="b")
    monkeypatch.setattr(profile_module, "ITEMS_PER_TYPE", 2)
    assert mem.profile(user_id="b")["frequently_used_tools"] == ("Postman", "Figma")


# ------------------------------------------------------------------ explicit edits


def test_explicit_edit_wins_and_clearing_restores_aggregation(mem: Memory, clock: Clock) -> None:
    job = remember(mem, clock, "I work as a data scientist", "fact", user_id="al")
    clock.now += timedelta(minutes=1)
    p = mem.set_profile(
        user_id="al",
        actor="alice",
        profession="ML engineer",
        programming_languages=["Python", "Rust", "python"],
        language_preference="zh_cn",
    )
    assert p.item_id is not None
    f = p.fields["profession"]
    assert (f.value, f.source, f.evidence) == ("ML engineer", "explicit", (p.item_id,))
    assert p["programming_languages"] == ("Python", "Rust")
    assert p["language_preference"] == "zh-CN"
    assert p.explicit.keys() == {"profession", "programming_languages", "language_preference"}

    # one item per scope, context type, tagged, never aggregated, never searched
    stored = mem.get(p.item_id)
    assert stored.memory_type.value == "context" and PROFILE_TAG in stored.tags
    assert stored.structured == {
        "profession": "ML engineer",
        "programming_languages": ["Python", "Rust"],
        "language_preference": "zh-CN",
    }
    assert all(h.item.id != p.item_id for h in mem.search("ML engineer Python Rust", user_id="al"))
    clock.now += timedelta(minutes=1)
    again = mem.set_profile(user_id="al", profession="research engineer")
    assert again.item_id == p.item_id and mem.list(user_id="al", tags=[PROFILE_TAG]).items == [
        mem.get(p.item_id)
    ]
    assert again["programming_languages"] == ("Python", "Rust")

    clock.now += timedelta(minutes=1)
    cleared = mem.set_profile(user_id="al", profession=None)
    f = cleared.fields["profession"]
    assert (f.value, f.source, f.evidence) == ("data scientist", "aggregated", (job.id,))
    assert cleared["programming_languages"] == ("Python", "Rust")

    clock.now += timedelta(minutes=1)
    empty = mem.set_profile(user_id="al", programming_languages=None, language_preference=None)
    assert empty.explicit == {} and mem.get(p.item_id).status == Status.ARCHIVED
    clock.now += timedelta(minutes=1)
    back = mem.set_profile(user_id="al", communication_style="Technical")
    assert back["communication_style"] == "technical" and mem.get(p.item_id).status == Status.ACTIVE

    events = mem.history(p.item_id)
    assert [e.action.value for e in events] == ["add", "update", "update", "archive", "restore"]
    assert events[0].actor == "alice" and events[0].reason.startswith("profile: set profession")
    assert events[2].reason == "cleared profession"
    assert events[1].before is not None and events[1].before["structured"]["profession"] == "ML engineer"
    assert [e.at for e in events] == sorted(e.at for e in events)

    # setting what is already set writes nothing
    assert mem.set_profile(user_id="al", communication_style="technical") == back
    assert len(mem.history(p.item_id)) == 5


def test_explicit_profile_is_no_visible_memory(mem: Memory, clock: Clock) -> None:
    """set_profile keeps its fields in one audited item, but that item is not a
    'context' memory a person lists, counts or finds: the profile is where it shows."""
    fact = remember(mem, clock, "I work as a data scientist", "fact", user_id="al")
    clock.now += timedelta(minutes=1)
    p = mem.set_profile(user_id="al", profession="ML engineer", response_format="markdown")
    assert p.item_id is not None

    assert [i.id for i in mem.list(user_id="al").items] == [fact.id]
    assert mem.list(user_id="al", memory_types=["context"]).items == []
    assert mem.list().items == [fact] and mem.list(newest_first=True, limit=1).items == [fact]
    stats = mem.stats(user_id="al")
    assert stats.total == 1 and "context" not in stats.by_type
    for query in ("ML engineer", "Profile of user al", "markdown"):
        assert all(h.item.id != p.item_id for h in mem.search(query, user_id="al", limit=20))
    ctx = mem.context("what does al do?", user_id="al", budget_tokens=400)
    assert "Profile of user al (set explicitly)" not in ctx.text and "ML engineer" in ctx.text

    # still reachable for provenance: by id, its history, by asking for its tag, in an export
    assert mem.get(p.item_id).structured == {"profession": "ML engineer", "response_format": "markdown"}
    assert [e.action.value for e in mem.history(p.item_id)] == ["add"]
    assert [i.id for i in mem.list(user_id="al", tags=[PROFILE_TAG]).items] == [p.item_id]
    assert p.item_id in {r["id"] for r in mem.export(user_id="al")}


def test_project_explicit_decisions_and_archive_by_hand(mem: Memory, clock: Clock) -> None:
    remember(mem, clock, "We decided to use Redis because it is fast", "decision", project_id="p")
    p = mem.set_profile(
        project_id="p",
        key_decisions=[
            {"decision": "Use PostgreSQL", "reason": "JSON support", "at": "2024-05-01T12:00:00Z"},
            "Ship weekly",
        ],
        current_phase="beta",
    )
    assert p["key_decisions"] == (
        KeyDecision("Use PostgreSQL", "JSON support", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        KeyDecision("Ship weekly"),
    )
    assert p.to_json_dict()["fields"]["key_decisions"]["value"][0] == {
        "decision": "Use PostgreSQL",
        "reason": "JSON support",
        "at": "2024-05-01T12:00:00+00:00",
    }
    assert p.item_id is not None
    mem.delete(p.item_id)  # archived through the normal API: the explicit values are gone
    after = mem.profile(project_id="p")
    assert after.explicit == {} and after.fields["key_decisions"].source == "aggregated"


@pytest.mark.parametrize(
    ("scope", "fields", "field"),
    [
        ({"user_id": "u"}, {"project_goal": "x"}, "project_goal"),
        ({"user_id": "u"}, {"favourite_colour": "red"}, "favourite_colour"),
        ({"user_id": "u"}, {"profession": 42}, "profession"),
        ({"user_id": "u"}, {"profession": "   "}, "profession"),
        ({"user_id": "u"}, {"programming_languages": "Python"}, "programming_languages"),
        ({"user_id": "u"}, {"programming_languages": ["Python", 3]}, "programming_languages[1]"),
        ({"user_id": "u"}, {"communication_style": "chatty"}, "communication_style"),
        ({"user_id": "u"}, {"language_preference": "the tongue of angels"}, "language_preference"),
        ({"project_id": "p"}, {"key_decisions": [{"choice": "x"}]}, "key_decisions[0]"),
        ({"project_id": "p"}, {"key_decisions": [{"decision": "x", "at": "soon"}]}, "key_decisions[0].at"),
        ({"project_id": "p"}, {"key_decisions": {"decision": "x"}}, "key_decisions"),
        ({"project_id": "p"}, {}, "project_goal"),
        ({"user_id": "u", "project_id": "p"}, {"profession": "x"}, "project_id"),
        ({}, {"profession": "x"}, "user_id"),
        ({"user_id": ""}, {"profession": "x"}, "user_id"),
    ],
)
def test_bad_edits_name_the_field_and_write_nothing(
    mem: Memory, scope: dict[str, Any], fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.set_profile(**scope, **fields)
    assert info.value.field == field
    assert mem.stats().total == 0


def test_profile_reads_validate_and_stay_in_their_tenant(mem: Memory, clock: Clock) -> None:
    with pytest.raises(InvalidInput):
        mem.profile()
    with pytest.raises(InvalidInput):
        mem.profile(user_id="a", project_id="b")
    remember(mem, clock, "我是一名律师", "fact", user_id="x")
    mem.set_profile(user_id="x", username="小李")
    other = mem.profile(user_id="x", tenant_id="other")
    assert other.empty and other.item_id is None and other.to_prompt() == ""


def test_viewer_sees_only_visible_project_items(mem: Memory, clock: Clock) -> None:
    clock.now += timedelta(minutes=1)
    mem.add(
        "We chose Kafka for events because of replay",
        memory_type="decision",
        project_id="p",
        visibility="public",
    )
    clock.now += timedelta(minutes=1)
    mem.add("We picked Vault for secrets since it rotates keys", memory_type="decision", project_id="p")
    mem.set_profile(project_id="p", current_phase="alpha")
    outsider = Viewer(actor="k1", projects=("other",))
    seen = mem.profile(project_id="p", viewer=outsider)
    decisions = [d.decision for d in seen["key_decisions"] or () if isinstance(d, KeyDecision)]
    assert decisions == ["We chose Kafka for events"]
    assert seen["current_phase"] is None  # the profile item is for members
    with pytest.raises(NotFound):
        mem.set_profile(project_id="p", current_phase="beta", viewer=outsider)
    member = mem.profile(project_id="p", viewer=Viewer(actor="k2", projects=("p",)))
    assert member["current_phase"] == "alpha" and len(member["key_decisions"] or ()) == 2


# ------------------------------------------------------------------ context


def test_context_includes_the_profile_within_budget(mem: Memory, clock: Clock) -> None:
    remember(mem, clock, "我是前端工程师", "fact", user_id="zw")
    remember(mem, clock, "我熟悉 React 和 TypeScript", "skill", user_id="zw")
    remember(mem, clock, "以后请用中文回答", "constraint", user_id="zw")
    remember(mem, clock, "项目目标是做一个面向中小企业的支付平台", "context", project_id="pay")
    mem.set_profile(user_id="zw", content="回答时先给结论，再给理由")

    ctx = mem.context("写一个 React 组件", user_id="zw", project_id="pay", budget_tokens=400)
    assert ctx.profile is not None and ctx.profile.startswith("User profile:")
    assert "Project profile:\n- Goal: 做一个面向中小企业的支付平台" in ctx.profile
    assert ctx.text.startswith("# USER MEMORY\n\n## Profile\nUser profile:")
    assert "- Custom instructions: 回答时先给结论，再给理由" in ctx.text
    assert count_tokens(ctx.profile) + sum(e.tokens for e in ctx.entries) <= 400
    assert all(PROFILE_TAG not in (e.item.tags if e.item else ()) for e in ctx.entries)

    small = mem.context("写一个 React 组件", user_id="zw", project_id="pay", budget_tokens=40)
    assert small.profile is not None and count_tokens(small.profile) <= 20
    assert count_tokens(small.profile) + sum(e.tokens for e in small.entries) <= 40

    off = mem.context("写一个 React 组件", user_id="zw", include_profile=False)
    assert off.profile is None and "## Profile" not in off.text
    given = mem.context("写一个 React 组件", user_id="zw", profile="Name: Wang")
    assert given.profile == "Name: Wang"
    nobody = mem.context("写一个 React 组件", user_id="nobody")
    assert nobody.profile is None


# ------------------------------------------------------------------ async driver


async def test_async_driver(tmp_path: Path) -> None:
    clock = Clock()
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), clock=clock) as amem:
        added = await amem.add("I work as a data scientist", memory_type="fact", user_id="al")
        assert added.item is not None
        p = await amem.profile(user_id="al")
        assert isinstance(p, Profile) and p["profession"] == "data scientist"
        clock.now += timedelta(minutes=1)
        p = await amem.set_profile(user_id="al", response_format="markdown")
        assert p.fields["response_format"].source == "explicit"
        text = await amem.profile_prompt(user_id="al")
        assert text == "User profile:\n- Profession: data scientist\n- Response format: markdown"
        ctx = await amem.context("data pipelines", user_id="al")
        assert ctx.profile == text


# ------------------------------------------------------------------ CLI


def jiyi(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "JIYI_EMBEDDER": "hash:256"}
    proc = subprocess.run(
        [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"jiyi {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def test_cli_profile(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    jiyi(db, "add", "我是一名前端工程师", "--user", "bob")
    shown = jiyi(db, "profile", "--user-id", "bob").stdout
    assert "profession" in shown and "前端工程师" in shown and "from 1 memory" in shown

    out = json.loads(
        jiyi(
            db,
            "profile",
            "--user-id",
            "bob",
            "--set",
            "programming_languages=TypeScript, Go",
            "--set",
            "communication_style=concise",
            "--json",
        ).stdout
    )
    assert out["fields"]["programming_languages"] == {
        "value": ["TypeScript", "Go"],
        "source": "explicit",
        "evidence": [out["fields"]["communication_style"]["evidence"][0]],
    }
    assert out["text"].startswith("User profile:")
    cleared = json.loads(
        jiyi(db, "profile", "--user-id", "bob", "--clear", "programming_languages", "--json").stdout
    )
    assert cleared["fields"]["programming_languages"]["value"] == []
    assert cleared["fields"]["communication_style"]["value"] == "concise"

    decisions = json.dumps([{"decision": "Use Go", "reason": "speed"}])
    project = json.loads(
        jiyi(db, "profile", "--project-id", "p", "--set", f"key_decisions={decisions}", "--json").stdout
    )
    assert project["fields"]["key_decisions"]["value"] == [
        {"decision": "Use Go", "reason": "speed", "at": None}
    ]

    bad = jiyi(db, "profile", "--user-id", "bob", "--set", "project_goal=x", check=False)
    assert bad.returncode == 1 and "project_goal is a project profile field" in bad.stderr
    for name in ("user_id", "tenant_id", "actor"):
        refused = jiyi(db, "profile", "--user-id", "bob", "--set", f"{name}=x", check=False)
        assert refused.returncode == 1 and f"'{name}' is not a user profile field" in refused.stderr
    usage = jiyi(db, "profile", "--user-id", "bob", "--project-id", "p", check=False)
    assert usage.returncode == 2


# ------------------------------------------------------------------ REST


@pytest.fixture
async def rest(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str], AsyncMemory]]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "rest.db"), embedder="hash:256")
    keys = ApiKeys()
    made = {
        name: keys.add(tenant, role)[1]
        for name, tenant, role in [
            ("owner", "acme", "owner"),
            ("editor", "acme", "editor"),
            ("editor2", "acme", "editor"),
            ("viewer", "acme", "viewer"),
            ("other", "globex", "owner"),
        ]
    }
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, made, memory
    await memory.aclose()


async def test_rest_profile_contract(rest: tuple[httpx.AsyncClient, dict[str, str], AsyncMemory]) -> None:
    client, keys, _ = rest
    owner, editor, viewer, other = ({"X-API-Key": keys[k]} for k in ("owner", "editor", "viewer", "other"))
    r = await client.post(
        "/v1/memories", json={"content": "I work as a data scientist", "user_id": "alice"}, headers=owner
    )
    assert r.status_code == 201
    memory_id = r.json()["item"]["id"]

    got = await client.get("/v1/profile", params={"user_id": "alice"}, headers=viewer)
    assert got.status_code == 200
    body = got.json()
    assert body["scope"] == "user" and body["scope_id"] == "alice"
    assert body["fields"]["profession"] == {
        "value": "data scientist",
        "source": "aggregated",
        "evidence": [memory_id],
    }
    assert body["fields"]["programming_languages"] == {"value": [], "source": "aggregated", "evidence": []}
    assert body["text"] == "User profile:\n- Profession: data scientist"

    patched = await client.patch(
        "/v1/profile",
        params={"user_id": "alice"},
        json={"fields": {"profession": "ML engineer", "frequently_used_tools": ["VS Code"]}},
        headers=editor,
    )
    assert patched.status_code == 200, patched.text
    fields = patched.json()["fields"]
    assert fields["profession"]["source"] == "explicit" and fields["profession"]["value"] == "ML engineer"
    item_id = fields["profession"]["evidence"][0]
    history = (await client.get(f"/v1/memories/{item_id}/history", headers=owner)).json()
    editor_key = parse_token(keys["editor"])
    assert editor_key is not None
    assert [e["action"] for e in history] == ["add"] and history[0]["actor"] == editor_key[0]
    # Another editor may not change (or clear) the profile this editor set; an owner may.
    other_editor = {"X-API-Key": keys["editor2"]}
    for fields in ({"profession": "pilot"}, {"profession": None}):
        refused = await client.patch(
            "/v1/profile", params={"user_id": "alice"}, json={"fields": fields}, headers=other_editor
        )
        assert refused.status_code == 403, refused.text
    again = await client.patch(
        "/v1/profile", params={"user_id": "alice"}, json={"fields": {"profession": "ML lead"}}, headers=editor
    )
    assert again.status_code == 200 and again.json()["fields"]["profession"]["value"] == "ML lead"

    cleared = await client.patch(
        "/v1/profile", params={"user_id": "alice"}, json={"fields": {"profession": None}}, headers=owner
    )
    assert cleared.json()["fields"]["profession"]["value"] == "data scientist"

    project = await client.patch(
        "/v1/profile",
        params={"project_id": "pay"},
        json={
            "fields": {
                "key_decisions": [{"decision": "Use Go", "reason": "speed", "at": "2024-05-01T00:00:00Z"}]
            }
        },
        headers=owner,
    )
    assert project.status_code == 200, project.text
    assert project.json()["fields"]["key_decisions"]["value"] == [
        {"decision": "Use Go", "reason": "speed", "at": "2024-05-01T00:00:00Z"}
    ]
    assert project.json()["scope"] == "project"

    # a viewer key cannot write; another tenant sees nothing
    denied = await client.patch(
        "/v1/profile", params={"user_id": "alice"}, json={"fields": {"profession": "x"}}, headers=viewer
    )
    assert denied.status_code == 403
    theirs = (await client.get("/v1/profile", params={"user_id": "alice"}, headers=other)).json()
    assert theirs["text"] == "" and all(not f["evidence"] for f in theirs["fields"].values())

    # errors name the field
    for params, payload, field in [
        ({"user_id": "alice"}, {"fields": {"project_goal": "x"}}, "project_goal"),
        ({"user_id": "alice"}, {"fields": {"communication_style": "chatty"}}, "communication_style"),
        ({"user_id": "alice"}, {"fields": {"tenant_id": "x"}}, "tenant_id"),
        ({"user_id": "alice", "project_id": "p"}, {"fields": {"profession": "x"}}, "project_id"),
    ]:
        bad = await client.patch("/v1/profile", params=params, json=payload, headers=owner)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text
    # Whose profile may be said in the body too, as in every other request body.
    in_body = {"user_id": "bob", "fields": {"profession": "chef"}}
    patched = await client.patch("/v1/profile", json=in_body, headers=owner)
    assert patched.status_code == 200 and patched.json()["scope_id"] == "bob", patched.text
    twice = await client.patch("/v1/profile", params={"user_id": "carl"}, json=in_body, headers=owner)
    assert twice.status_code == 422 and twice.json()["error"]["field"] == "user_id", twice.text
    same = await client.patch("/v1/profile", params={"user_id": "bob"}, json=in_body, headers=owner)
    assert same.status_code == 200
    neither = await client.get("/v1/profile", headers=owner)
    assert neither.status_code == 422 and neither.json()["error"]["field"] == "user_id"


# ------------------------------------------------------------------ agent tools and MCP


def test_memory_profile_tool(mem: Memory, clock: Clock) -> None:
    remember(mem, clock, "我是前端工程师", "fact", user_id="zw")
    remember(mem, clock, "项目目标是做一个面向中小企业的支付平台", "context", project_id="pay")
    assert "memory_profile" not in MemoryTools(mem, user_id="zw").names
    tools = MemoryTools(mem, user_id="zw", project_id="pay", session_id="s", profile_tool=True)
    assert "memory_profile" in tools.names
    schema = next(t for t in tools.schemas() if t["function"]["name"] == "memory_profile")
    assert schema["function"]["parameters"]["properties"]["scope"]["enum"] == ["user", "project"]
    both = tools.call("memory_profile", {})
    assert [p["scope"] for p in both["profiles"]] == ["user", "project"]
    assert both["profiles"][0]["fields"]["profession"]["value"] == "前端工程师"
    assert "programming_languages" not in both["profiles"][0]["fields"]  # only what is known
    only = tools.call("memory_profile", '{"scope": "project"}')
    assert only["profiles"][0]["text"].startswith("Project profile:")
    assert tools.call("memory_profile", {"scope": "agent"})["error"]["code"] == "invalid_input"
    assert "memory_profile" not in MemoryTools(mem, session_id="s", profile_tool=True).names


async def test_mcp_memory_profile_tool(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from jiyi.server.mcp import build_server

    with Memory.open(tmp_path / "m.db") as m:
        m.add("I work as a data scientist", memory_type="fact", user_id="alice")
        server = build_server(m, user_id="alice")
        with anyio.fail_after(30):
            async with Client(server) as client:
                listed = await client.list_tools()
                tool = next(t for t in listed.tools if t.name == "memory_profile")
                assert tool.annotations is not None and tool.annotations.read_only_hint
                result = await client.call_tool("memory_profile", {})
                assert not result.is_error
                (profile,) = result.structured_content["profiles"]
                assert profile["fields"]["profession"]["value"] == "data scientist"
                assert "Profession: data scientist" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.profile_prompt(user_id="u", max_tokens=-1), "max_tokens"),
        (lambda m: m.profile_prompt(user_id="u", max_tokens="50"), "max_tokens"),
        (lambda m: m.profile_prompt(), "user_id"),
        (lambda m: m.profile(user_id="u", viewer="key-1"), "viewer"),
        (lambda m: m.set_profile(user_id="u", profession="x", viewer="key-1"), "viewer"),
        (lambda m: m.set_profile(user_id="u", profession="x", actor=5), "actor"),
    ],
)
def test_bad_caller_arguments_are_invalid_input_and_write_nothing(mem: Memory, call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        call(mem)
    assert err.value.field == field
    assert mem.list(limit=10).items == []
    assert mem.profile_prompt(user_id="u", max_tokens=0) == ""
