"""Compression of old, rarely used memories (seed 002 §2.2), on real SQLite files.

A fake clock makes memories old; the offline USE-m3 embedder finds near-duplicates and
clusters in Chinese and English. The LLM path runs against a scripted model and, once,
the real HTTP client against a scripted OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jiyi.errors import InvalidInput, LLMError, NotFound
from jiyi.lifecycle.condense import condense, read_compression
from jiyi.llm.base import ScriptedChatModel
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, RelationType, Source, Status
from jiyi.store.base import HistoryAction, Op, Write
from jiyi.store.sqlite import SQLiteStore
from jiyi.text.tokens import count_tokens

T0 = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)
OLD = T0 - timedelta(days=60)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class CountingStore(SQLiteStore):
    """A real SQLite store that also records which operations ran (to count transactions)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ops: list[Op[Any]] = []

    def execute(self, op: Any) -> Any:
        self.ops.append(op)
        return super().execute(op)

    def writes(self) -> int:
        return sum(isinstance(op, Write) for op in self.ops)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(CountingStore(tmp_path / "c.db"), clock=clock, background=False) as m:
        yield m


def load(
    mem: Memory, rows: list[tuple[str, str]], *, user: str = "u", when: datetime = OLD, **extra: Any
) -> list[str]:
    """Store memories as they are (no gate, so paraphrases stay separate), created ``when``."""
    records = [
        {
            "content": content,
            "memory_type": kind,
            "user_id": user,
            "created_at": when.isoformat(),
            "updated_at": when.isoformat(),
            **extra,
        }
        for kind, content in rows
    ]
    known = {i.id for i in active(mem, user)}
    mem.import_items(records)
    return [i.id for i in active(mem, user) if i.id not in known]


def active(mem: Memory, user: str = "u") -> list[MemoryItem]:
    # The stored profile item is left out of a plain list (it is shown as the profile);
    # asking for its tag reaches it.
    items = mem.list(user_id=user, statuses="active", limit=1000).items
    profile = mem.list(user_id=user, statuses="active", tags=["profile"], limit=1000).items
    return items + [p for p in profile if p.id not in {i.id for i in items}]


def tokens(items: list[MemoryItem]) -> int:
    return sum(count_tokens(i.content) for i in items)


# Facts a user told an assistant over months, several of them more than once in other words.
HISTORY: list[tuple[str, str]] = [
    ("preference", "User prefers dark mode in every editor"),
    ("preference", "The user likes using dark mode in editors"),
    ("preference", "User always turns on dark mode in the editor"),
    ("preference", "User prefers tabs over spaces for indentation"),
    ("preference", "User prefers concise answers without long explanations"),
    ("preference", "User likes answers that are short and to the point"),
    ("preference", "用户喜欢喝绿茶"),
    ("preference", "用户爱喝绿茶"),
    ("preference", "用户平时最喜欢喝绿茶"),
    ("preference", "用户喜欢用 Vim 写代码"),
    ("preference", "用户偏好使用 Vim 编辑器编程"),
    ("preference", "用户写代码时喜欢用 Vim"),
    ("preference", "用户喜欢安静的工作环境"),
    ("fact", "User lives in Berlin"),
    ("fact", "User's home city is Berlin"),
    ("fact", "User works as a data engineer at a logistics company"),
    ("fact", "User has a cat named Mochi"),
    ("fact", "User's cat is called Mochi"),
    ("fact", "The user owns a cat whose name is Mochi"),
    ("fact", "用户的女儿今年六岁"),
    ("fact", "用户有一个六岁的女儿"),
    ("fact", "用户毕业于浙江大学"),
    ("fact", "用户的母语是中文"),
    ("fact", "用户对花生过敏"),
    ("fact", "用户花生过敏"),
    ("habit", "User goes running every morning before work"),
    ("habit", "用户每天早上跑步"),
    ("habit", "用户每天早晨都会去跑步"),
    ("habit", "用户每周五晚上打羽毛球"),
    ("habit", "User reads technical books on weekends"),
    ("habit", "用户周末会读技术书籍"),
]

# (query, a pattern the memory that answers it must contain)
QUESTIONS = [
    ("what colour theme does the user use in the editor", "dark mode"),
    ("tabs or spaces", "tabs"),
    ("how long should answers be", "concise"),
    ("用户喜欢喝什么", "绿茶"),
    ("用户用什么编辑器写代码", "Vim"),
    ("用户喜欢什么样的工作环境", "安静"),
    ("where does the user live", "Berlin"),
    ("what is the user's job", "data engineer"),
    ("what is the name of the user's cat", "Mochi"),
    ("用户的孩子多大了", "六岁"),
    ("用户在哪所大学毕业", "浙江大学"),
    ("用户的母语", "中文"),
    ("用户对什么过敏", "花生"),
    ("does the user exercise in the morning", "running|跑步"),
    ("用户什么时候打羽毛球", "羽毛球"),
    ("what does the user read on weekends", "technical books|技术书籍"),
]


def found_in_top5(mem: Memory, user: str = "u") -> dict[str, bool]:
    out = {}
    for query, needle in QUESTIONS:
        hits = mem.search(query, user_id=user, limit=5, touch=False)
        out[query] = any(re.search(needle, h.item.content, re.I) for h in hits)
    return out


# ------------------------------------------------------------------ (a) smaller, and still found


def test_old_rarely_used_memories_shrink_and_every_fact_is_still_found(mem: Memory) -> None:
    load(mem, HISTORY)
    before = active(mem)
    assert all(found_in_top5(mem).values())

    report = mem.compress(user_id="u")

    after = active(mem)
    ratio = tokens(after) / tokens(before)
    print(
        f"\nactive memory: {len(before)} items / {tokens(before)} tokens -> "
        f"{len(after)} items / {tokens(after)} tokens (ratio {ratio:.2f})"
    )
    for group in report.groups:
        for core in group.cores:
            print(f"  {group.kind:<10} {len(core.source_ids)} -> {core.content}")
    assert ratio < 0.75, ratio
    assert len(after) < len(before) * 0.7
    assert report.tokens_before - report.tokens_after == tokens(before) - tokens(after)
    assert report.compressed == len(before) - len(after) + report.created
    assert {g.kind for g in report.groups} == {"cluster", "duplicates"}
    found = found_in_top5(mem)
    assert all(found.values()), [q for q, ok in found.items() if not ok]
    # Every original is archived, not deleted, and still readable.
    archived = mem.list(user_id="u", statuses="archived", limit=1000).items
    assert len(archived) == report.compressed
    assert {i.id for i in archived} == {s for g in report.groups for s in g.source_ids}


def test_duplicates_keep_the_best_supported_wording(mem: Memory) -> None:
    load(mem, [("fact", "The user owns a cat whose name is Mochi"), ("fact", "User's cat is called Mochi")])
    load(mem, [("fact", "User has a cat named Mochi")], confidence=1.0, mention_count=3)
    report = mem.compress(user_id="u")
    (group,) = report.groups
    assert group.kind == "duplicates" and group.cores[0].content == "User has a cat named Mochi"
    (core,) = active(mem)
    assert core.mention_count == 3 + 1 + 1 and core.confidence == 1.0


def test_the_merge_is_deterministic(tmp_path: Path, clock: Clock) -> None:
    rows = [
        {"id": f"m{i}", "content": c, "memory_type": t, "user_id": "u", "created_at": OLD.isoformat()}
        for i, (t, c) in enumerate(HISTORY)
    ]
    texts = []
    for name in ("one.db", "two.db"):
        with Memory(SQLiteStore(tmp_path / name), clock=clock, background=False) as m:
            m.import_items(list(reversed(rows)) if name == "two.db" else rows)
            report = m.compress(user_id="u")
            texts.append(sorted((c.content, c.source_ids) for g in report.groups for c in g.cores))
    assert texts[0] == texts[1] and texts[0]


# ------------------------------------------------------------------ (b) what is never compressed


def test_recent_often_used_pinned_important_and_special_items_are_untouched(
    mem: Memory, clock: Clock
) -> None:
    load(mem, HISTORY[:6])  # old: the dark-mode paraphrases, tabs, concise answers
    keep = {
        "recent": load(
            mem, [("preference", "User prefers dark mode in the terminal too")], when=T0 - timedelta(days=3)
        ),
        "used": load(mem, [("preference", "User really likes dark mode in editors")], access_count=9),
        "pinned": load(mem, [("preference", "User uses dark mode in every editor")], tags=["pinned"]),
        "important": load(mem, [("preference", "User prefers dark mode for editors")], importance=0.95),
        "episode": load(mem, [("event", "Session about dark mode settings")], tags=["episode"]),
        "profile": load(mem, [("fact", "Profile: developer who likes dark mode")], tags=["profile"]),
        "resource": load(mem, [("context", "Dark mode guide, chapter 1")], tags=["resource"]),
        "thread": load(mem, [("context", "user: I turned on dark mode")], thread_id="chat-1"),
    }
    special = {name: mem.get(ids[0]) for name, ids in keep.items()}
    report = mem.compress(user_id="u")
    assert report.groups and report.compressed >= 3
    compressed = {s for g in report.groups for s in g.source_ids}
    for name, item in special.items():
        now = mem.get(item.id)
        assert item.id not in compressed, name
        assert now.status == Status.ACTIVE and now.version == item.version and now == item, name
    assert report.skipped["recently used or changed"] == 1
    assert report.skipped["often used"] == 1
    assert report.skipped["pinned"] == 1 and report.skipped["important"] == 1
    assert report.skipped["tagged episode"] == 1 and report.skipped["tagged profile"] == 1
    assert report.skipped["tagged resource"] == 1 and report.skipped["part of a thread"] == 1


# ------------------------------------------------------------------ (c) small groups


def test_groups_below_three_are_untouched_except_true_near_duplicates(mem: Memory) -> None:
    load(
        mem,
        [
            ("preference", "User prefers concise answers without long explanations"),
            (
                "preference",
                "User likes answers that are short and to the point",
            ),  # related (0.6), not a duplicate
            ("fact", "用户的女儿今年六岁"),
            ("fact", "用户有一个六岁的女儿"),  # the same fact in other words
            ("habit", "User reads technical books on weekends"),  # alone in its type
        ],
    )
    before = {i.content: i for i in active(mem)}
    report = mem.compress(user_id="u")
    (group,) = report.groups
    assert group.kind == "duplicates" and group.memory_type.value == "fact"
    assert len(group.cores) == 1 and group.cores[0].content in ("用户的女儿今年六岁", "用户有一个六岁的女儿")
    after = {i.content: i for i in active(mem)}
    for text in (
        "User prefers concise answers without long explanations",
        "User likes answers that are short and to the point",
        "User reads technical books on weekends",
    ):
        assert after[text] == before[text]
    assert len(after) == 4
    # With min_group=2 the two related preferences become one core memory.
    report = mem.compress(user_id="u", min_group=2)
    assert [g.kind for g in report.groups] == ["cluster"]


# ------------------------------------------------------------------ (d) the core memory, relations, history, one write


def test_core_memories_link_to_archived_originals_with_history(mem: Memory, clock: Clock) -> None:
    ids = load(
        mem,
        [
            ("preference", "用户喜欢用 Vim 写代码"),
            ("preference", "用户偏好使用 Vim 编辑器编程"),
            ("preference", "User prefers tabs over spaces for indentation"),
            ("preference", "User prefers dark mode in every editor"),
            ("preference", "The user likes using dark mode in editors"),
        ],
        user="dev",
        project_id="p1",
        session_id="s1",
    )
    mem.update(ids[0], tags=["editor"], confidence=0.8, importance=0.7, mention_count=4)
    clock.now += timedelta(days=40)
    originals = {i.id: i for i in active(mem, "dev")}
    writes_before = mem.store.writes()  # type: ignore[attr-defined]
    report = mem.compress(user_id="dev")
    assert mem.store.writes() == writes_before + 1  # type: ignore[attr-defined]
    (group,) = report.groups
    assert group.kind == "cluster" and set(group.source_ids) == set(originals)
    cores = [mem.get(c.item_id) for c in group.cores if c.item_id]
    assert cores and all(c.status == Status.ACTIVE for c in cores)
    covered: set[str] = set()
    for core in cores:
        sources = {r.target_id for r in core.relations if r.type == RelationType.DERIVED_FROM}
        covered |= sources
        parts = [originals[s] for s in sources]
        assert core.scope_key == "user:dev" and core.memory_type.value == "preference"
        assert core.tenant_id == parts[0].tenant_id and core.source == Source.SYSTEM
        assert core.project_id == "p1" and core.session_id == "s1"
        assert core.confidence == max(p.confidence for p in parts)
        assert core.importance == max(p.importance for p in parts)
        assert core.mention_count == sum(p.mention_count for p in parts)
        assert set(core.tags) == {t for p in parts for t in p.tags}
        assert core.metadata["compressed_from"]["id"] == group.group_id
        (event,) = mem.history(core.id)
        assert event.action == HistoryAction.ADD and event.actor == "lifecycle"
        assert "core memory of" in event.reason and "offline" in event.reason
    assert covered == set(originals)
    for oid, before in originals.items():
        now = mem.get(oid)
        assert now.status == Status.ARCHIVED and now.version == before.version + 1
        assert now.metadata["compressed_into"]["id"] == group.group_id
        assert set(now.metadata["compressed_into"]["cores"]) <= {c.id for c in cores}
        last = mem.history(oid)[-1]
        assert last.action == HistoryAction.ARCHIVE and last.actor == "lifecycle"
        assert last.reason.startswith("compressed into core memory ") and "merged" in last.reason
        assert last.before is not None and last.before["status"] == "active"


def test_a_failure_inside_the_transaction_leaves_nothing_half_done(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "f.db"
    with Memory(SQLiteStore(db), clock=clock, background=False) as m:
        load(m, HISTORY[:13])
        before = m.export(user_id="u")
        # The database itself fails at the first archived original, after core rows went in.
        with sqlite3.connect(db) as conn:
            conn.execute(
                "CREATE TRIGGER full BEFORE INSERT ON history WHEN NEW.action = 'archive' "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        with pytest.raises(Exception, match="disk full"):
            m.compress(user_id="u")
        assert m.export(user_id="u") == before


# ------------------------------------------------------------------ (e) undo


def test_uncompress_restores_the_originals_and_archives_the_core(mem: Memory, clock: Clock) -> None:
    load(mem, HISTORY)
    before = {i.id: i.content for i in active(mem)}
    report = mem.compress(user_id="u")
    group = next(g for g in report.groups if g.kind == "cluster")
    core_id = group.cores[0].item_id
    assert core_id is not None
    clock.now += timedelta(hours=1)
    result = mem.uncompress(core_id)
    assert {i.id for i in result.restored} == set(group.source_ids)
    assert {i.id for i in result.archived} == {c.item_id for c in group.cores}
    for sid in group.source_ids:
        item = mem.get(sid)
        assert item.status == Status.ACTIVE and "compressed_into" not in item.metadata
        assert item.content == before[sid]
        last = mem.history(sid)[-1]
        assert last.action == HistoryAction.RESTORE and "compression undone" in last.reason
    for core in group.cores:
        assert core.item_id is not None
        assert mem.get(core.item_id).status == Status.ARCHIVED
        assert mem.history(core.item_id)[-1].action == HistoryAction.ARCHIVE
    # The other compressions stay as they were.
    others = {c.item_id for g in report.groups if g is not group for c in g.cores}
    assert all(mem.get(i).status == Status.ACTIVE for i in others if i)
    with pytest.raises(InvalidInput, match="already undone"):
        mem.uncompress(core_id)
    with pytest.raises(InvalidInput, match="not a core memory"):
        mem.uncompress(group.source_ids[0])
    with pytest.raises(NotFound):
        mem.uncompress("no-such-id")


def test_a_core_compressed_again_must_be_undone_top_down(mem: Memory, clock: Clock) -> None:
    load(mem, [("fact", "用户的女儿今年六岁"), ("fact", "用户有一个六岁的女儿")])
    first = mem.compress(user_id="u").groups[0].cores[0].item_id
    assert first is not None
    clock.now += timedelta(days=45)
    load(mem, [("fact", "用户女儿六岁了")], when=clock.now - timedelta(days=40))
    second = mem.compress(user_id="u").groups[0]
    assert first in second.source_ids and second.cores[0].item_id is not None
    with pytest.raises(InvalidInput, match="compressed again"):
        mem.uncompress(first)
    mem.uncompress(second.cores[0].item_id)
    mem.uncompress(first)
    assert len(active(mem)) == 3


# ------------------------------------------------------------------ (f) dry run


def test_dry_run_lists_groups_and_writes_nothing(mem: Memory) -> None:
    load(mem, HISTORY)
    exported = mem.export(user_id="u")
    writes = mem.store.writes()  # type: ignore[attr-defined]
    dry = mem.compress(user_id="u", dry_run=True)
    assert dry.dry_run and dry.groups and dry.created >= len(dry.groups)
    assert all(c.item_id is None and c.content for g in dry.groups for c in g.cores)
    assert mem.export(user_id="u") == exported and mem.store.writes() == writes  # type: ignore[attr-defined]
    data = dry.to_json_dict()
    assert data["groups"][0]["cores"][0]["content"] and data["tokens_after"] < data["tokens_before"]
    real = mem.compress(user_id="u")
    assert [[c.content for c in g.cores] for g in real.groups] == [
        [c.content for c in g.cores] for g in dry.groups
    ]


def test_bad_arguments_are_refused_with_the_reason(mem: Memory) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"older_than_days": -1}, "older_than_days"),
        ({"min_group": 1}, "min_group"),
        ({"max_core": 0}, "max_core"),
        ({"max_access": 1.5}, "max_access"),
        ({"duplicate_threshold": 2}, "duplicate_threshold"),
        ({"memory_types": ["feelings"]}, "memory_types"),
        ({"user_id": ""}, "user_id"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidInput) as err:
            mem.compress(**kwargs)
        assert err.value.field == field, kwargs


# ------------------------------------------------------------------ (g) with a language model


def _statements(prompt: str) -> list[str]:
    return re.findall(r"^\[\d+\] (.*)$", prompt, re.M)


def test_llm_writes_the_core_memories(tmp_path: Path, clock: Clock) -> None:
    def answer(messages: list[dict[str, str]]) -> str:
        statements = _statements(messages[-1]["content"])
        if any("Vim" in s for s in statements):
            return json.dumps(
                {
                    "memories": [
                        {
                            "content": "用户写代码用 Vim 编辑器，偏好深色模式和 tab 缩进",
                            "sources": list(range(1, len(statements) + 1)),
                        }
                    ]
                },
                ensure_ascii=False,
            )
        return json.dumps(
            {"memories": [{"content": statements[0], "sources": list(range(1, len(statements) + 1))}]}
        )

    model = ScriptedChatModel(function=answer)
    with Memory(SQLiteStore(tmp_path / "llm.db"), clock=clock, background=False, llm=model) as m:
        load(
            m,
            [
                ("preference", "用户喜欢用 Vim 写代码"),
                ("preference", "用户偏好使用 Vim 编辑器编程"),
                ("preference", "User prefers tabs over spaces for indentation"),
                ("preference", "User prefers dark mode in every editor"),
                ("fact", "用户的女儿今年六岁"),
                ("fact", "用户有一个六岁的女儿"),
            ],
        )
        report = m.compress(user_id="u")
        kinds = sorted((g.kind, g.method) for g in report.groups)
        assert kinds == [("cluster", "llm:scripted"), ("duplicates", "llm:scripted")]
        cluster = next(g for g in report.groups if g.kind == "cluster")
        assert [c.content for c in cluster.cores] == ["用户写代码用 Vim 编辑器，偏好深色模式和 tab 缩进"]
        core = m.get(cluster.cores[0].item_id or "")
        assert {r.target_id for r in core.relations} == set(cluster.source_ids)
        assert "llm:scripted" in m.history(core.id)[0].reason
        calls = model.calls
        assert len(calls) == 2 and all(c.json_mode for c in calls)
        prompt = next(c for c in calls if "Vim" in c.prompt)
        assert "1 to 3 core memories" in prompt.prompt and len(_statements(prompt.prompt)) == 4
        dup_prompt = next(c for c in calls if "Vim" not in c.prompt)
        assert "exactly 1 core memory" in dup_prompt.prompt
        # The core keeps its sources' words (one says "Vim 编辑器"), so it answers the
        # question by words as well as meaning; without them it tied with the daughter.
        hits = m.search("用户用什么编辑器", user_id="u", limit=3)
        assert hits[0].item.id == core.id
        assert hits[0].score > hits[1].score + 0.01


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("I would merge them like this: both facts matter.", "JSON"),
        ('{"memories": [{"content": "用户的女儿六岁", "sources": [1]}]}', "not covered|in no core"),
        ('{"memories": []}', "no core memory"),
        ('{"memories": [{"content": "用户的女儿六岁"}]}', "sources"),
    ],
)
def test_a_bad_llm_answer_raises_after_one_repair_and_writes_nothing(
    tmp_path: Path, clock: Clock, bad: str, why: str
) -> None:
    model = ScriptedChatModel([bad, bad])
    with Memory(SQLiteStore(tmp_path / "bad.db"), clock=clock, background=False, llm=model) as m:
        load(m, [("fact", "用户的女儿今年六岁"), ("fact", "用户有一个六岁的女儿")])
        before = m.export(user_id="u")
        with pytest.raises(LLMError, match=why):
            m.compress(user_id="u")
        assert m.export(user_id="u") == before
        assert len(model.calls) == 2
        assert "could not be used" in model.calls[1].messages[-1]["content"]


def test_a_repaired_llm_answer_is_used(tmp_path: Path, clock: Clock) -> None:
    good = '{"memories": [{"content": "用户有一个六岁的女儿", "sources": [1, 2]}]}'
    model = ScriptedChatModel(['{"memories": [{"content": "x", "sources": [7]}]}', good])
    with Memory(SQLiteStore(tmp_path / "fix.db"), clock=clock, background=False, llm=model) as m:
        load(m, [("fact", "用户的女儿今年六岁"), ("fact", "用户有一个六岁的女儿")])
        report = m.compress(user_id="u")
        assert report.groups[0].cores[0].content == "用户有一个六岁的女儿"
        assert len(model.calls) == 2


def test_llm_answers_are_checked() -> None:
    statements = ["User lives in Berlin", "User's home city is Berlin", "User works as a data engineer"]
    ok = read_compression(
        '```json\n{"memories": [{"content": "User lives in Berlin", "sources": ["1", 2]}, '
        '{"content": "User is a data engineer", "sources": [3]}]}\n```',
        statements,
        max_core=3,
    )
    assert [c.sources for c in ok] == [(0, 1), (2,)]
    with pytest.raises(LLMError, match="at most 1"):
        read_compression(
            '{"memories": [{"content": "a b", "sources": [1, 2]}, {"content": "c d", "sources": [3]}]}',
            statements,
            max_core=1,
        )
    with pytest.raises(LLMError, match="longer than the statements"):
        read_compression(
            json.dumps({"memories": [{"content": " ".join(statements * 3), "sources": [1, 2, 3]}]}),
            statements,
            max_core=3,
        )
    with pytest.raises(LLMError, match=r"within 1\.\.3"):
        read_compression(
            '{"memories": [{"content": "x y", "sources": [0, 1, 2, 3]}]}', statements, max_core=3
        )


def test_llm_through_the_openai_client_and_a_scripted_server(tmp_path: Path, clock: Clock) -> None:
    from jiyi.llm.openai import OpenAIChatModel
    from tests.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.script_chat("sure! here it is: {{{")  # unusable: repaired by the retry
        server.script_chat('{"memories": [{"content": "User\'s cat is called Mochi", "sources": [1, 2]}]}')
        model = OpenAIChatModel(
            "scripted", base_url=server.base_url, api_key="sk-test", backoff=0.0, max_wait=0.1
        )
        with Memory(SQLiteStore(tmp_path / "http.db"), clock=clock, background=False, llm=model) as m:
            load(m, [("fact", "User has a cat named Mochi"), ("fact", "User's cat is called Mochi")])
            report = m.compress(user_id="u")
            assert [c.content for g in report.groups for c in g.cores] == ["User's cat is called Mochi"]
            assert report.groups[0].method == "llm:openai:scripted"
        sent = server.requests_to("chat/completions")
        assert len(sent) == 2 and "User has a cat named Mochi" in json.dumps(sent[0].json)


# ------------------------------------------------------------------ (h) async


def test_async_driver_compresses_and_undoes(tmp_path: Path, clock: Clock) -> None:
    async def scenario() -> None:
        async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), clock=clock) as m:
            await m.import_items(
                [
                    {"content": c, "memory_type": t, "user_id": "u", "created_at": OLD.isoformat()}
                    for t, c in HISTORY[:13]
                ]
            )
            report = await m.compress(user_id="u")
            assert report.groups and report.tokens_after < report.tokens_before
            page = await m.list(user_id="u", statuses="active", limit=100)
            assert len(page.items) == 13 - report.compressed + report.created
            core_id = report.groups[0].cores[0].item_id
            assert core_id is not None
            undone = await m.uncompress(core_id)
            assert {i.id for i in undone.restored} == set(report.groups[0].source_ids)

    asyncio.run(scenario())


# ------------------------------------------------------------------ the offline merge


def test_condense_joins_distinct_statements_and_shares_the_subject() -> None:
    assert condense(["用户喜欢喝绿茶。", "用户住在上海", "用户喜欢喝绿茶"]) == "用户喜欢喝绿茶；住在上海"
    assert condense(["The user is vegetarian.", "The user lives in Berlin"]) == (
        "The user is vegetarian; lives in Berlin"
    )
    # A statement another one already holds, word for word, adds nothing.
    assert condense(["User likes tea", "User likes tea and coffee"]) == "User likes tea and coffee"
    assert condense(["User likes tea", "User likes teams"]) == "User likes tea; teams"
    # Negations are never shared: each part keeps its "not".
    assert condense(["I don't like meetings", "I don't like cold weather"]) == (
        "I don't like meetings; don't like cold weather"
    )
    assert condense(["用户不喜欢开会", "用户不喜欢冷天"]) == "用户不喜欢开会；不喜欢冷天"
    assert condense(["不要在周末打电话", "不要用 Java"]) == "不要在周末打电话；不要用 Java"
    mixed = condense(["User lives in Berlin", "用户的猫叫 Mochi", "用户的狗叫 Bobo"])
    assert mixed == "User lives in Berlin; 用户的猫叫 Mochi；狗叫 Bobo"


# ------------------------------------------------------------------ the command line


def test_cli_compress_dry_run_then_compress_then_undo(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "cli.db"
    with Memory(SQLiteStore(db), clock=clock, background=False) as m:
        load(m, HISTORY[:13])

    def jiyi(*args: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    dry = jiyi("compress", "--user", "u", "--older-than", "30", "--dry-run", "--json")
    assert dry["dry_run"] and dry["groups"] and dry["tokens_after"] < dry["tokens_before"]
    text = subprocess.run(
        [sys.executable, "-m", "jiyi.cli", "--db", str(db), "compress", "--user", "u", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0 and f"would compress {dry['compressed']} into {dry['created']}" in text.stdout
    both = jiyi("maintain", "--compress", "--dry-run", "--json")
    assert both["compression"]["groups"] == dry["groups"] and "counts" in both
    done = jiyi("compress", "--user", "u", "--json")
    assert [g["cores"][0]["content"] for g in done["groups"]] == [
        g["cores"][0]["content"] for g in dry["groups"]
    ]
    core_id = done["groups"][0]["cores"][0]["id"]
    undone = jiyi("compress", "--undo", core_id, "--json")
    assert set(undone["restored"]) == set(done["groups"][0]["source_ids"])


# ------------------------------------------------------------------ the docs


def test_the_compression_page_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "compression.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/compression.md", "exec"), {})
        # Comment lines right after a print show what it prints; they must stay true.
        shown: list[str] = []
        lines = block.splitlines()
        for before, line in itertools.pairwise(lines):
            follows_output = "print(" in before or (bool(shown) and before == "# " + shown[-1])
            if line.startswith("# ") and follows_output:
                shown.append(line[2:])
        printed = capsys.readouterr().out.splitlines()
        assert len(shown) >= 4 and all(line in printed for line in shown), (shown, printed)


def test_owner_only_memories_of_different_creators_are_never_merged(mem: Memory) -> None:
    from jiyi.store.base import Viewer

    texts = {
        "k1": [
            "The team deploys on Fridays",
            "Deploys happen every Friday",
            "Friday is deploy day for the team",
        ],
        "k2": [
            "The team deploys on Fridays at noon",
            "We ship to production each Friday",
            "Production deploys are on Fridays",
        ],
    }
    when = OLD.isoformat()
    mem.import_items(
        [
            {
                "content": t,
                "memory_type": "fact",
                "project_id": "p",
                "visibility": "owner_only",
                "metadata": {"created_by": who},
                "created_at": when,
                "updated_at": when,
            }
            for who, rows in texts.items()
            for t in rows
        ]
    )
    report = mem.compress(project_id="p")
    assert report.groups and all(g.source_ids for g in report.groups)
    for group in report.groups:
        creators = {mem.get(i).metadata["created_by"] for i in group.source_ids}
        assert len(creators) == 1, group
        for core in group.cores:
            assert core.item_id is not None and mem.get(core.item_id).metadata["created_by"] in creators
    for who, rows in texts.items():
        seen = mem.list(project_id="p", statuses="active", viewer=Viewer(actor=who, projects=("p",))).items
        assert seen and {i.metadata["created_by"] for i in seen} == {who}
        # Every fact of each creator is still found by that creator.
        for text in rows:
            hits = mem.search(text, project_id="p", viewer=Viewer(actor=who, projects=("p",)), touch=False)
            assert hits and hits[0].item.metadata["created_by"] == who


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"dry_run": "yes"}, "dry_run"), ({"tenant_id": 5}, "tenant_id"), ({"actor": 5}, "actor")],
)
def test_bad_caller_arguments_are_invalid_input(mem: Memory, kwargs: dict[str, Any], field: str) -> None:
    load(mem, HISTORY)
    before = [(i.id, i.version) for i in active(mem)]
    with pytest.raises(InvalidInput) as err:
        mem.compress(**kwargs)
    assert err.value.field == field
    assert [(i.id, i.version) for i in active(mem)] == before
    with pytest.raises(InvalidInput) as err:
        mem.uncompress(before[0][0], tenant_id=5)
    assert err.value.field == "tenant_id"
