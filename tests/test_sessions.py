"""Conversation memory through the Python API: sessions, the background pipeline,
reconciliation, episodes, checkpoints, documents and hierarchical context."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.config import SessionConfig
from jiyi.errors import InvalidInput, NotFound
from jiyi.llm.base import ScriptedChatModel
from jiyi.memory import AsyncMemory, Memory
from jiyi.store.sqlite import SQLiteStore
from jiyi.text.tokens import count_message_tokens


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "s.db"), clock=clock, background=False) as m:
        yield m


def active(mem: Memory, user: str) -> list[str]:
    return [i.content for i in mem.list(user_id=user, statuses=["active"]).items]


# ------------------------------------------------------------------ session buffer


def test_messages_and_working_window(mem: Memory) -> None:
    mem.add_messages(
        "s1",
        [
            ("system", "You are a helpful assistant."),
            ("user", "我叫李雷，在深圳做后端开发"),
            ("assistant", "你好李雷！"),
        ],
    )
    mem.add_messages(
        "s1", [{"role": "user", "content": "Can you help me plan a trip to Chengdu next month?"}]
    )
    msgs = mem.messages("s1")
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert all(m.token_count == count_message_tokens(m.role, m.content) for m in msgs)
    budget = msgs[0].token_count + msgs[-1].token_count
    window = mem.working_window("s1", max_tokens=budget)
    assert [m.role for m in window] == ["system", "user"]
    assert window[-1].content.startswith("Can you help")
    with pytest.raises(InvalidInput, match="role"):
        mem.add_messages("s1", [("robot", "beep")])
    with pytest.raises(InvalidInput, match="no messages"):
        mem.add_messages("s1", [])


def test_compaction_keeps_system_messages_and_the_budget(tmp_path: Path, clock: Clock) -> None:
    cfg = SessionConfig(max_turns=6, keep_recent=2)
    with Memory(SQLiteStore(tmp_path / "c.db"), clock=clock, background=False, session=cfg) as mem:
        mem.add_messages("s", [("system", "Answer briefly.")])
        result = None
        for i in range(4):
            result = mem.remember(
                [
                    ("user", f"Question {i}: how do I configure feature {i} of the build system?"),
                    ("assistant", f"Set option {i} in build.toml."),
                ],
                session_id="s",
                user_id="u",
            )
        assert result is not None and result.compacted is not None
        comp = result.compacted
        assert comp.removed == 6 and comp.tokens_after < comp.tokens_before
        msgs = mem.messages("s")
        assert msgs[0].content == "Answer briefly."
        summaries = [m for m in msgs if m.metadata.get("kind") == "summary"]
        assert len(summaries) == 1 and summaries[0].role == "system"
        assert len([m for m in msgs if m.role in ("user", "assistant")]) == 2
        assert sum(m.token_count for m in msgs) == comp.tokens_after
        # the removed turns became an episode
        mem.process_jobs()
        episodes = mem.search("build system options", user_id="u", tags=["episode"])
        assert episodes and "episode" in episodes[0].item.tags


# ------------------------------------------------------------------ the pipeline: extract -> gate -> reconcile -> store


def test_remember_returns_at_once_and_the_worker_stores_typed_memories(mem: Memory) -> None:
    result = mem.remember(
        [
            ("user", "帮我记住：我对花生过敏"),
            ("assistant", "好的，我记住了。"),
            ("user", "我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React"),
        ],
        session_id="s1",
        user_id="han",
    )
    assert result.job_id is not None
    assert mem.list(user_id="han").items == []  # nothing extracted yet: it is queued
    assert [j.status for j in mem.jobs()] == ["queued"]
    reports = mem.process_jobs()
    assert [r.status for r in reports] == ["done"]
    items = mem.list(user_id="han").items
    kinds = {i.memory_type.value for i in items}
    assert "decision" in kinds
    assert any("花生" in i.content for i in items)
    decision = next(i for i in items if i.memory_type.value == "decision")
    assert decision.structured and decision.structured.get("choice") == "Next.js"
    assert mem.history(decision.id)[0].reason.startswith("add")
    assert mem.jobs(statuses=["done"])[0].id == result.job_id


def test_preference_changed_a_week_later_supersedes_the_old_one(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "I prefer tabs for indentation.")], session_id="w1", user_id="ann")
    mem.process_jobs()
    old = mem.search("indentation preference", user_id="ann")[0].item
    clock.now += timedelta(days=7)
    mem.remember(
        [("user", "I no longer prefer tabs; I prefer spaces for indentation now.")],
        session_id="w2",
        user_id="ann",
    )
    mem.process_jobs()
    hits = mem.search("how does ann like to indent code?", user_id="ann")
    assert "spaces" in hits[0].item.content
    assert all(h.item.id != old.id for h in hits)
    stale = mem.get(old.id)
    assert stale.status.value == "superseded"
    assert any(r.type.value == "superseded_by" for r in stale.relations)
    assert [e.action.value for e in mem.history(old.id)] == ["add", "supersede"]
    both = mem.search("indentation", user_id="ann", statuses=["active", "superseded"])
    ids = [h.item.id for h in both]
    assert ids.index(old.id) > ids.index(hits[0].item.id)


def test_chinese_preference_change_and_reinforcement(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "我喜欢喝美式咖啡")], session_id="z1", user_id="wang")
    mem.process_jobs()
    mem.remember([("user", "我喜欢喝美式咖啡。")], session_id="z2", user_id="wang")
    mem.process_jobs()
    items = [i for i in mem.list(user_id="wang").items if "咖啡" in i.content]
    assert len(items) == 1 and items[0].mention_count == 2
    clock.now += timedelta(days=7)
    mem.remember([("user", "我不再喜欢喝美式咖啡了，现在只喝茶")], session_id="z3", user_id="wang")
    mem.process_jobs()
    assert mem.get(items[0].id).status.value == "superseded"


def test_hedged_statements_are_refused_by_the_gate(mem: Memory) -> None:
    mem.remember([("user", "我好像喜欢 Python，不太确定")], session_id="h", user_id="zhao")
    reports = mem.process_jobs()
    # the turn itself is kept as a resource (what was said); nothing is extracted from it
    outcomes = [o for o in reports[0].outcomes if o.action != "resource"]
    assert outcomes and all(o.action == "rejected" for o in outcomes)
    assert "confidence" in outcomes[0].reason
    assert mem.list(user_id="zhao").items == []


def test_failed_jobs_are_retried_then_visible(tmp_path: Path, clock: Clock) -> None:
    broken = ScriptedChatModel([RuntimeError("model exploded")] * 10)
    cfg = SessionConfig(job_attempts=2, job_backoff_seconds=0.0)
    with Memory(
        SQLiteStore(tmp_path / "f.db"), clock=clock, background=False, llm=broken, session=cfg
    ) as mem:
        mem.remember([("user", "Remember that my passport expires in 2027")], session_id="s", user_id="u")
        first = mem.process_jobs()
        assert first[0].status == "failed" or first[0].status == "queued"
        mem.process_jobs()
        job = mem.jobs()[0]
        assert job.status == "failed" and job.attempts == 2 and "model exploded" in (job.last_error or "")


def test_llm_pipeline_with_scripted_model(tmp_path: Path, clock: Clock) -> None:
    extraction = json.dumps(
        {
            "memories": [
                {
                    "content": "用户的女儿叫小雨",
                    "memory_type": "fact",
                    "confidence": 0.95,
                    "importance": 0.7,
                    "turn": 0,
                }
            ]
        },
        ensure_ascii=False,
    )
    model = ScriptedChatModel([extraction])
    with Memory(SQLiteStore(tmp_path / "l.db"), clock=clock, background=False, llm=model) as mem:
        mem.remember([("user", "我女儿叫小雨，今年五岁")], session_id="s", user_id="li")
        assert mem.process_jobs()[0].status == "done"
        assert active(mem, "li") == ["用户的女儿叫小雨"]
        assert len(model.calls) == 1


def test_background_worker_drains_the_queue(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "b.db")) as mem:
        mem.remember(
            [("user", "Remember that the staging server is in Frankfurt")], session_id="s", user_id="ops"
        )
        assert mem.wait_for_jobs(timeout=30)
        assert any("Frankfurt" in c for c in active(mem, "ops"))


async def test_async_remember_and_worker(tmp_path: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db")) as mem:
        mem.start_worker(interval=0.05)
        await mem.remember(
            [("user", "I am a data engineer at a logistics company")], session_id="s", user_id="kim"
        )
        import asyncio

        for _ in range(200):
            if not await mem.jobs(statuses=["queued", "running"]):
                break
            await asyncio.sleep(0.05)
        page = await mem.list(user_id="kim")
        assert any("data engineer" in i.content for i in page.items)


# ------------------------------------------------------------------ ending a session


def _episode_jobs(mem: Memory) -> list[list[str]]:
    """The turns of every episode job, oldest job first."""
    return [[t["content"] for t in j.payload["turns"]] for j in mem.jobs() if j.kind == "episode"]


def test_ending_a_session_twice_queues_one_episode(mem: Memory, clock: Clock) -> None:
    mem.remember(
        [("user", "We picked Hangzhou for the launch"), ("assistant", "Noted: Hangzhou.")],
        session_id="s",
        user_id="li",
    )
    first = mem.end_session("s", user_id="li")
    assert first.episode_job_id and not first.already_ended and first.turns == 2
    clock.now += timedelta(minutes=5)
    again = mem.end_session("s", user_id="li")
    assert again.already_ended and again.episode_job_id is None and again.turns == 0
    assert again.ended_at == first.ended_at  # when it was ended, not when it was asked again
    assert _episode_jobs(mem) == [["We picked Hangzhou for the launch", "Noted: Hangzhou."]]
    # the end is recorded in the session, but is no turn of it: not in the working window
    assert [m.metadata.get("kind") for m in mem.messages("s")][-1] == "session_end"
    assert all(m.metadata.get("kind") != "session_end" for m in mem.working_window("s"))
    mem.process_jobs()
    assert len(mem.search("launch city", user_id="li", tags=["episode"])) == 1


def test_an_episode_jiyi_writes_is_held_less_surely_than_what_was_said(mem: Memory) -> None:
    from jiyi.session.flows import EPISODE_CONFIDENCE

    mem.remember([("user", "We picked Hangzhou for the launch")], session_id="s", user_id="li")
    mem.end_session("s", user_id="li")
    mem.process_jobs()
    (episode,) = mem.list(user_id="li", tags=["episode"]).items
    assert episode.confidence == EPISODE_CONFIDENCE < 1.0  # a user's kept turn has 1.0
    # an episode handed in by a caller is theirs to rate
    assert mem.add_episode("Planned the launch", user_id="li").confidence == 1.0


def test_two_ends_at_once_queue_one_episode(mem: Memory) -> None:
    """One end reads the session, another ends it meanwhile: the first one's write is
    refused (the session scope's clock moved) and it reads again, finding the end."""
    from jiyi.errors import WriteConflict
    from jiyi.session import flows
    from jiyi.store.base import Write

    mem.remember([("user", "We picked Hangzhou for the launch")], session_id="s", user_id="li")
    store = mem.runtime.store
    slow = flows.end_session(mem.runtime, "s", user_id="li")
    op = next(slow)
    while not isinstance(op, Write):  # the slow end has read the session, not yet written
        op = slow.send(store.execute(op))
    fast = mem.end_session("s", user_id="li")
    assert fast.episode_job_id and not fast.already_ended
    with pytest.raises(WriteConflict):
        store.execute(op)
    op = slow.throw(WriteConflict("the session scope moved"))
    late = None
    while late is None:
        try:
            op = slow.send(store.execute(op))
        except StopIteration as done:
            late = done.value
    assert late.already_ended and late.episode_job_id is None
    assert _episode_jobs(mem) == [["We picked Hangzhou for the launch"]]


def test_turns_after_an_end_form_an_episode_of_their_own(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "The budget is two million")], session_id="s", user_id="li")
    mem.end_session("s", user_id="li")
    clock.now += timedelta(hours=1)
    mem.remember([("user", "One more thing: the venue holds 300 people")], session_id="s", user_id="li")
    resumed = mem.end_session("s", user_id="li")
    assert not resumed.already_ended and resumed.turns == 1 and resumed.episode_job_id
    assert _episode_jobs(mem) == [
        ["The budget is two million"],
        ["One more thing: the venue holds 300 people"],
    ]
    assert mem.end_session("s", user_id="li").already_ended


def test_compaction_after_an_end_does_not_summarise_the_ended_turns_again(
    tmp_path: Path, clock: Clock
) -> None:
    cfg = SessionConfig(max_turns=4, keep_recent=1)
    with Memory(SQLiteStore(tmp_path / "c.db"), clock=clock, background=False, session=cfg) as mem:
        mem.remember(
            [("user", f"Fact {i} about the build system") for i in range(3)], session_id="s", user_id="u"
        )
        mem.end_session("s", user_id="u")
        clock.now += timedelta(minutes=1)  # jobs are listed oldest first
        result = mem.remember(
            [("user", "A later note about the deploy"), ("user", "And one about the tests")],
            session_id="s",
            user_id="u",
        )
        assert result.compacted is not None and result.compacted.removed == 4
        assert _episode_jobs(mem) == [
            [f"Fact {i} about the build system" for i in range(3)],
            ["A later note about the deploy"],
        ]
        clock.now += timedelta(minutes=1)
        ended = mem.end_session("s", user_id="u")
        assert ended.turns == 1 and _episode_jobs(mem)[-1] == ["And one about the tests"]


def test_the_end_mark_does_not_make_a_session_members_only(mem: Memory) -> None:
    """``project_id`` files the episode under a project; the session itself (of no
    project) stays readable by a viewer of another project, before and after its end."""
    from jiyi.store.base import Viewer

    outsider = Viewer(actor="bob", projects=("other",))
    mem.remember([("user", "We chose Hangzhou for the launch")], session_id="s", user_id="li")
    mem.end_session("s", user_id="li", project_id="launch")
    assert len(mem.messages("s", viewer=outsider)) == 2
    assert mem.end_session("s", viewer=outsider).already_ended


def test_ending_a_session_that_has_no_message_records_nothing(mem: Memory) -> None:
    ended = mem.end_session("nothing-here")
    assert ended.episode_job_id is None and not ended.already_ended
    assert mem.messages("nothing-here") == []


async def test_async_end_session_is_idempotent(tmp_path: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), background=False) as mem:
        await mem.remember([("user", "我们决定周三发布")], session_id="s", user_id="li")
        first = await mem.end_session("s", user_id="li")
        again = await mem.end_session("s", user_id="li")
        assert first.episode_job_id and not first.already_ended
        assert again.already_ended and again.episode_job_id is None
        assert len([j for j in await mem.jobs() if j.kind == "episode"]) == 1


# ------------------------------------------------------------------ checkpoints


def test_restoring_a_checkpoint_from_before_an_end_does_not_summarise_its_turns_again(
    mem: Memory, clock: Clock
) -> None:
    mem.add_messages("s", [("user", "We picked Hangzhou for the launch"), ("assistant", "Noted.")])
    saved = mem.save_checkpoint("s")
    mem.add_messages("s", [("user", "And the date is May 3")])
    assert mem.end_session("s").turns == 3
    clock.now += timedelta(minutes=5)
    mem.restore_checkpoint("s", saved.id)
    # the end's episode already holds the two restored turns
    assert [m.content for m in mem.working_window("s")] == ["We picked Hangzhou for the launch", "Noted."]
    assert mem.end_session("s").already_ended
    mem.add_messages("s", [("user", "Let us move it to May 10")])
    assert mem.end_session("s").turns == 1
    assert _episode_jobs(mem) == [
        ["We picked Hangzhou for the launch", "Noted.", "And the date is May 3"],
        ["Let us move it to May 10"],
    ]


def test_checkpoint_round_trip_restores_exactly(mem: Memory, clock: Clock) -> None:
    mem.add_messages("s", [("user", "Book me a flight to Osaka"), ("assistant", "Which date?")])
    saved = mem.save_checkpoint(
        "s",
        agent_state={"todo": ["pick date", "book"], "step": 1},
        tool_states={"flights": {"query": "KIX"}},
        pending_tool_calls=[{"id": "call_1", "name": "book_flight", "arguments": {"to": "KIX"}}],
        label="before booking",
    )
    before = mem.messages("s")
    clock.now += timedelta(minutes=5)
    mem.add_messages("s", [("user", "Actually make it Tokyo"), ("assistant", "Booking Tokyo...")])
    restored = mem.restore_checkpoint("s", saved.id)
    assert restored == saved
    assert mem.messages("s") == before
    later = mem.save_checkpoint("s", label="after")
    assert [c.id for c in mem.list_checkpoints("s")] == [later.id, saved.id]
    assert mem.restore_checkpoint("s", replace_messages=False).id == later.id
    assert mem.prune_checkpoints("s", keep_last=1) == 1
    assert [c.id for c in mem.list_checkpoints("s")] == [later.id]
    with pytest.raises(NotFound):
        mem.restore_checkpoint("s", "nope")


# ------------------------------------------------------------------ documents


def test_documents_are_chunked_and_reassembled(mem: Memory) -> None:
    paragraphs = [
        f"Section {i}. The deployment runbook step {i} says to check service {i} health and logs. " * 20
        for i in range(30)
    ]
    text = "\n\n".join(paragraphs)
    chunks = mem.add_document(text, title="Runbook", project_id="ops")
    assert len(chunks) > 1
    parents = {c.metadata["parent_id"] for c in chunks}
    assert len(parents) == 1
    assert mem.get_document(parents.pop()) == text
    hits = mem.search("service 17 health", project_id="ops", limit=3)
    assert hits and "resource" in hits[0].item.tags
    with pytest.raises(InvalidInput, match="not stored"):
        mem.add_document("ok thanks", project_id="ops")


# ------------------------------------------------------------------ hierarchical context


def test_context_counts_recent_turns_not_system_messages(mem: Memory) -> None:
    """A system prompt or an end mark among the last messages does not take a recent
    turn's place."""
    mem.add_messages("s", [("system", "Answer briefly.")])
    mem.remember([("user", f"Turn {i} about the launch plan") for i in range(4)], session_id="s", user_id="u")
    mem.end_session("s", user_id="u")
    ctx = mem.context("launch plan", user_id="u", session_id="s", recent=3)
    recent = [e.text for e in ctx.entries if e.source == "recent"]
    assert recent == [f"user: Turn {i} about the launch plan" for i in (1, 2, 3)]


def test_context_assembles_recent_semantic_and_summary(mem: Memory) -> None:
    mem.add("User prefers concise answers with code", user_id="u", memory_type="preference")
    mem.add("项目必须支持 PostgreSQL 16", user_id="u", memory_type="constraint")
    mem.add("User's cat is named Mochi", user_id="u", memory_type="fact")
    mem.add_episode(
        "Last week we migrated the billing service to PostgreSQL 16 and fixed two bugs.",
        user_id="u",
        key_topics=["billing", "PostgreSQL"],
    )
    mem.add_messages(
        "now", [("user", "Let's continue with the database work"), ("assistant", "Sure, where were we?")]
    )
    ctx = mem.context("database migration status", user_id="u", session_id="now", budget_tokens=400)
    sources = [e.source for e in ctx.entries]
    assert sources[:2] == ["recent", "recent"]
    assert "semantic" in sources and "summary" in sources
    assert (
        "## Constraints" in ctx.text
        and "## Recent Conversation" in ctx.text
        and "## Past Sessions" in ctx.text
    )
    assert ctx.tokens <= 400 + 50
    assert len(ctx.entries) <= 10
    small = mem.context("database migration status", user_id="u", session_id="now", budget_tokens=40)
    assert sum(e.tokens for e in small.entries) <= 40 and small.dropped > 0
    with_profile = mem.context("anything", user_id="u", profile="Name: Wang; prefers zh-CN")
    assert with_profile.text.startswith("# USER MEMORY\n\n## Profile")


@pytest.mark.parametrize("budget", [5, 10, 20, 30, 40, 60, 100, 200])
def test_context_never_exceeds_a_tiny_budget_and_shows_no_empty_heading(mem: Memory, budget: int) -> None:
    from jiyi.text.tokens import count_tokens

    mem.add("I work as a data scientist at a logistics company", user_id="u", memory_type="fact")
    mem.add("我平时用 Python 和 SQL 做数据分析", user_id="u", memory_type="skill")
    mem.add(
        "We decided to use PostgreSQL because the team knows it well", user_id="u", memory_type="decision"
    )
    mem.add_messages("now", [("user", "what database do we use?"), ("assistant", "PostgreSQL, since May.")])
    ctx = mem.context("database", user_id="u", session_id="now", budget_tokens=budget, min_relevance=None)
    # Headings and markup count: the text itself fits, not only the entries.
    assert count_tokens(ctx.text) == ctx.tokens <= budget
    blocks = ctx.text.split("\n\n")[1:] if ctx.text else []
    for block in blocks:  # every "## Heading" has at least one line under it
        heading, _, body = block.partition("\n")
        assert heading.startswith("## ") and body.strip(), ctx.text
    if budget >= 100:
        assert "## Decisions" in ctx.text and "## Recent Conversation" in ctx.text


# ------------------------------------------------------------------ the real HTTP client against a scripted server


def test_conversation_through_the_openai_client_and_a_scripted_server(tmp_path: Path, clock: Clock) -> None:
    from jiyi.llm.openai import OpenAIChatModel
    from tests.openai_server import ScriptedOpenAIServer

    first = {
        "memories": [
            {
                "content": "用户偏好用 Vim 写代码",
                "memory_type": "preference",
                "confidence": 0.9,
                "key": "editor",
                "turn": 0,
            }
        ]
    }
    second = {
        "memories": [
            {
                "content": "用户现在改用 VS Code 写代码",
                "memory_type": "preference",
                "confidence": 0.95,
                "key": "editor",
                "turn": 0,
            }
        ]
    }
    decision = {"action": "supersede", "target": 0, "content": None, "reason": "the user switched editors"}
    episode = {
        "summary": "用户从 Vim 换到了 VS Code",
        "key_topics": ["编辑器"],
        "actions_taken": ["换编辑器"],
        "outcomes": ["改用 VS Code"],
        "importance": 0.6,
    }
    with ScriptedOpenAIServer() as server:
        server.script_chat("not json at all {{{")  # a broken answer: repaired by a retry
        server.script_chat(json.dumps(first, ensure_ascii=False))
        server.script("/v1/chat/completions", status=429, headers={"Retry-After": "0"})  # rate-limited once
        server.script_chat(json.dumps(second, ensure_ascii=False))
        server.script_chat(json.dumps(decision, ensure_ascii=False))
        server.script_chat(json.dumps(episode, ensure_ascii=False))
        model = OpenAIChatModel(
            "scripted", base_url=server.base_url, api_key="sk-test", backoff=0.0, max_wait=0.1
        )
        with Memory(SQLiteStore(tmp_path / "http.db"), clock=clock, background=False, llm=model) as mem:
            mem.remember([("user", "我一般用 Vim 写代码")], session_id="a", user_id="dev")
            assert mem.process_jobs()[0].status == "done"
            clock.now += timedelta(days=7)
            mem.remember([("user", "我现在改用 VS Code 了")], session_id="b", user_id="dev")
            assert mem.process_jobs()[0].status == "done"
            assert mem.end_session("b", user_id="dev").episode_job_id is not None
            assert mem.process_jobs()[0].status == "done"
            current = [h for h in mem.search("用什么编辑器", user_id="dev") if "episode" not in h.item.tags]
            assert current[0].item.content == "用户现在改用 VS Code 写代码"
            old = next(i for i in mem.list(user_id="dev").items if "Vim" in i.content)
            assert old.status.value == "superseded"
            assert "switched editors" in mem.history(old.id)[-1].reason
            episodes = mem.search("编辑器", user_id="dev", tags=["episode"])
            assert episodes[0].item.structured == {
                "key_topics": ["编辑器"],
                "actions_taken": ["换编辑器"],
                "outcomes": ["改用 VS Code"],
            }
        chats = server.requests_to("/v1/chat/completions")
        assert len(chats) == 6
        assert all(r.headers.get("authorization") == "Bearer sk-test" for r in chats)
        reconcile_prompt = json.dumps(chats[4].json, ensure_ascii=False)
        assert old.id not in reconcile_prompt  # stored ids never reach the model


def test_extracted_items_keep_when_and_who(mem: Memory, clock: Clock) -> None:
    said = clock.now
    mem.remember(
        [{"role": "user", "content": "I am a pastry chef in Lyon", "name": "Claire"}],
        session_id="p",
        user_id="c",
    )
    clock.now += timedelta(hours=3)
    mem.process_jobs()
    item = mem.list(user_id="c").items[0]
    assert item.occurred_at == said
    assert item.created_at == clock.now
    assert item.metadata.get("speaker") == "Claire"
    assert mem.messages("p")[0].created_at == said


def test_an_llm_that_is_down_falls_back_to_the_rules_and_says_so(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing said is lost when the model endpoint fails: the offline rules extract, and
    the job's result and the log say that they did."""
    import socket

    from jiyi.llm.openai import OpenAIChatModel

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(
        "down", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test", backoff=0.0, max_wait=0.1
    )
    with Memory(SQLiteStore(tmp_path / "down.db"), clock=clock, background=False, llm=model) as mem:
        mem.remember([("user", "我对花生过敏")], session_id="a", user_id="u")
        with caplog.at_level("WARNING", logger="jiyi"):
            (report,) = mem.process_jobs()
        assert report.status == "done"
        job = next(j for j in mem.jobs() if j.id == report.job_id)
        assert job.result is not None and "offline rules" in job.result["notes"][0]
        assert any("offline rules" in r.getMessage() for r in caplog.records)
        assert any("花生" in i.content for i in mem.list(user_id="u").items)


def test_project_statements_go_to_the_project_when_one_is_named(mem: Memory) -> None:
    mem.remember(
        [
            ("user", "项目必须支持 PostgreSQL 16"),
            ("user", "We decided to use FastAPI for the API layer."),
            ("user", "I prefer concise answers"),
        ],
        session_id="s-proj",
        user_id="li",
        project_id="apollo",
    )
    mem.process_jobs()
    items = mem.list(user_id="li", project_id="apollo").items
    scopes = {i.content: i.scope.value for i in items}
    assert scopes["项目必须支持 PostgreSQL 16"] == "project"
    assert next(s for c, s in scopes.items() if "FastAPI" in c) == "project"
    assert next(s for c, s in scopes.items() if "concise" in c) == "user"
    # Another member of the project sees its decisions; the person's preference stays theirs.
    other = {i.content for i in mem.list(project_id="apollo").items}
    assert "项目必须支持 PostgreSQL 16" in other and not any("concise" in c for c in other)
    profile = mem.profile(project_id="apollo").to_json_dict()
    assert "PostgreSQL 16" in str(profile)


def test_a_summary_of_several_lines_is_one_entry_of_the_context() -> None:
    from jiyi.read.context import ContextEntry, format_context

    summary = "- Fact: I live in Munich\n- Preference: I prefer tea over coffee"
    text = format_context([ContextEntry("summary", summary, 12)])
    assert "## Past Sessions\n- - Fact: I live in Munich\n  - Preference: I prefer tea over coffee" in text
