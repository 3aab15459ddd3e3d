"""The Memory API on real SQLite files: the sync driver, and the async driver on the same flows."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.config import GateConfig
from jiyi.errors import InvalidInput, NotFound, StoreCorrupt, StoreReadOnly
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import Status
from jiyi.store.sqlite import SQLiteStore


class Clock:
    """An injected clock, so time windows are tested without sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "m.db"), clock=clock) as m:
        yield m


def count_rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# ------------------------------------------------------------------ add and the gate


def test_add_returns_item_and_reasons(mem: Memory) -> None:
    result = mem.add("我喜欢用 Python 写代码", memory_type="preference", user_id="alice")
    assert result.item is not None and result.decision.action == "add"
    assert result.item.memory_type.value == "preference" and result.item.scope_key == "user:alice"
    assert any("no duplicate" in r for r in result.decision.reasons)
    assert mem.get(result.item.id) == result.item


def test_duplicate_reinforces_instead_of_adding(mem: Memory) -> None:
    first = mem.add("I prefer dark mode in every editor", user_id="bob", memory_type="preference").item
    assert first is not None
    again = mem.add("I prefer dark mode in every editor.", user_id="bob", memory_type="preference")
    assert again.decision.action == "reinforce" and again.decision.duplicate_of == first.id
    assert again.item is not None and again.item.id == first.id
    assert again.item.mention_count == 2 and again.item.confidence == pytest.approx(0.95)
    for _ in range(3):
        mem.add("I prefer dark mode in every editor", user_id="bob", memory_type="preference")
    assert mem.get(first.id).confidence == 1.0  # capped
    assert mem.stats(user_id="bob").total == 1
    assert [e.action.value for e in mem.history(first.id)] == ["add"] + ["reinforce"] * 4


def test_duplicates_are_per_scope(mem: Memory) -> None:
    mem.add("I prefer dark mode in every editor", user_id="bob")
    other = mem.add("I prefer dark mode in every editor", user_id="carol")
    assert other.decision.action == "add"


def test_refusals_say_why_and_store_nothing(mem: Memory, tmp_path: Path) -> None:
    for text, why in [("hi", "too short"), ("thanks, bye!", "low value"), ("x" * 2001, "too long")]:
        result = mem.add(text, user_id="alice")
        assert result.item is None and result.decision.action == "reject"
        assert why in result.decision.reasons[0]
    low = mem.add("我好像喜欢 Python", user_id="alice", confidence=0.5)
    assert low.item is None and "confidence" in low.decision.reasons[0]
    assert count_rows(tmp_path / "m.db", "items") == 0


def test_pii_redacted_before_storage(mem: Memory, tmp_path: Path) -> None:
    result = mem.add("My email is jane.doe@corp.com and my SSN is 123-45-6789", user_id="jane")
    assert result.item is not None
    assert "jane.doe@corp.com" not in result.item.content and "123-45-6789" not in result.item.content
    assert set(result.decision.redacted) == {"email", "ssn"}
    raw = (tmp_path / "m.db").read_bytes()
    assert b"jane.doe@corp.com" not in raw and b"123-45-6789" not in raw


def test_automatic_extractions_are_rate_limited_per_session(mem: Memory, clock: Clock) -> None:
    texts = ["User works at a bakery", "User owns two cats", "User lives in Shanghai", "User plays the cello"]
    results = [mem.add(t, user_id="u", session_id="s1", automatic=True) for t in texts]
    assert [r.decision.action for r in results] == ["add", "add", "add", "reject"]
    assert "rate limit" in results[3].decision.reasons[0]
    assert mem.add("User plays the cello", user_id="u", session_id="s2", automatic=True).item is not None
    assert mem.add("User plays the cello", user_id="u", session_id="s1").decision.action == "reinforce"
    clock.now += timedelta(hours=24, seconds=1)
    assert mem.add("User collects stamps", user_id="u", session_id="s1", automatic=True).item is not None


def test_gate_thresholds_configurable(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "g.db"), gate=GateConfig(min_length=2, min_confidence=0.2)) as m:
        assert m.add("猫咪", user_id="u", confidence=0.3).item is not None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": 3}, "content"),
        ({"memory_type": "gossip"}, "memory_type"),
        ({"confidence": 7}, "confidence"),
        ({"scope": "galaxy"}, "scope"),
        ({"user_id": ""}, "user_id"),
    ],
)
def test_bad_add_input(mem: Memory, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"content": "valid memory text", "user_id": "u", **kwargs}
    content = args.pop("content")
    with pytest.raises(InvalidInput) as err:
        mem.add(content, **args)  # type: ignore[arg-type]
    assert err.value.field == field


def test_add_needs_an_owner(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="user_id"):
        mem.add("valid memory text")


# ------------------------------------------------------------------ search


def test_search_breakdown_and_touch(mem: Memory, clock: Clock) -> None:
    added = mem.add("我们决定用 Next.js 而不是 Remix", user_id="t", memory_type="decision").item
    mem.add("我每天早上喝咖啡", user_id="t", memory_type="habit")
    assert added is not None
    hits = mem.search("选了哪个前端框架 Next.js", user_id="t", explain=True)
    assert hits[0].item.id == added.id
    parts = {k: v for k, v in hits[0].breakdown.items() if k.startswith("contribution.")}
    assert set(parts) == {"contribution.similarity", "contribution.confidence", "contribution.scope"}
    assert sum(parts.values()) == pytest.approx(hits[0].score)
    assert hits[0].breakdown["contribution.scope"] == pytest.approx(0.6 * 0.2)
    got = mem.get(added.id)
    assert got.access_count == 1 and got.last_used_at == clock.now
    mem.search("Next.js", user_id="t", touch=False)
    assert mem.get(added.id).access_count == 1


def test_search_several_scopes_with_priority(mem: Memory) -> None:
    mem.add("The deploy target is Kubernetes on AWS", user_id="u", memory_type="context")
    mem.add("The deploy target is Kubernetes on AWS for this project", project_id="p", memory_type="context")
    mem.add("The deploy target is Kubernetes on AWS in this session", session_id="s", memory_type="context")
    hits = mem.search("where do we deploy", user_id="u", project_id="p", session_id="s")
    assert [h.item.scope.value for h in hits] == ["session", "project", "user"]
    assert len(mem.search("where do we deploy", user_id="u")) == 1


def test_search_filters(mem: Memory, clock: Clock) -> None:
    mem.add("User enjoys hiking in the Alps", user_id="f", memory_type="preference", tags=["outdoor"])
    mem.add(
        "User went hiking in the Alps last summer",
        user_id="f",
        memory_type="event",
        occurred_at=clock.now - timedelta(days=200),
    )
    expiring = mem.add(
        "User is hiking this weekend",
        user_id="f",
        memory_type="context",
        expires_at=clock.now + timedelta(days=1),
    )
    assert expiring.item is not None
    assert {h.item.memory_type.value for h in mem.search("hiking", user_id="f", memory_types=["event"])} == {
        "event"
    }
    assert [h.item.content for h in mem.search("hiking", user_id="f", tags=["outdoor"])] == [
        "User enjoys hiking in the Alps"
    ]
    recent = mem.search("hiking", user_id="f", occurred_after=clock.now - timedelta(days=30))
    assert recent == []
    clock.now += timedelta(days=2)
    assert all(h.item.id != expiring.item.id for h in mem.search("hiking", user_id="f"))
    assert any(h.item.id == expiring.item.id for h in mem.search("hiking", user_id="f", include_expired=True))


def test_search_leaves_out_archived_unless_asked(mem: Memory) -> None:
    item = mem.add("User's favourite food is dumplings", user_id="a").item
    assert item is not None
    mem.delete(item.id)
    assert mem.search("favourite food", user_id="a") == []
    assert mem.search("favourite food", user_id="a", statuses=["archived"])[0].item.id == item.id


def test_min_relevance_answers_nothing_relevant_and_threshold_is_relative(mem: Memory) -> None:
    mem.add("User's favourite food is dumplings", user_id="a")
    assert mem.search("quantum chromodynamics lecture notes", user_id="a", min_relevance=0.5) == []
    assert mem.search("What food does the user love?", user_id="a", min_relevance=0.5)
    # Similarity is relative to the search's own pool (the best match is at least 0.5),
    # so a similarity floor keeps the best of whatever there is.
    hits = mem.search("quantum chromodynamics lecture notes", user_id="a", threshold=0.5)
    assert [h.similarity >= 0.5 for h in hits] == [True]


def test_mmr_avoids_near_duplicates(mem: Memory) -> None:
    mem.add("User likes green tea in the morning", user_id="m")
    mem.add("User drinks green tea every morning before work", user_id="m")
    mem.add("User likes green tea in the mornings a lot", user_id="m", memory_type="habit")
    mem.add("User's brother is a pilot", user_id="m")
    top2 = mem.search("green tea", user_id="m", limit=2)
    assert len(top2) == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": ""}, "query"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_000}, "limit"),
        ({"threshold": 2.0}, "threshold"),
        ({"memory_types": ["nope"]}, "memory_types"),
    ],
)
def test_bad_search_input(mem: Memory, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"query": "anything", "user_id": "u", **kwargs}
    query = args.pop("query")
    with pytest.raises(InvalidInput) as err:
        mem.search(query, **args)  # type: ignore[arg-type]
    assert err.value.field == field


def test_search_needs_a_scope(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="at least one scope"):
        mem.search("anything")


# ------------------------------------------------------------------ get / list / update / delete / history


def test_unknown_and_foreign_ids_are_not_found(mem: Memory) -> None:
    item = mem.add("Tenant A's secret plan is to expand to Osaka", user_id="u", tenant_id="A").item
    assert item is not None
    with pytest.raises(NotFound):
        mem.get("does-not-exist")
    for call in (
        lambda: mem.get(item.id, tenant_id="B"),
        lambda: mem.update(item.id, tenant_id="B", importance=0.1),
        lambda: mem.delete(item.id, tenant_id="B"),
        lambda: mem.history(item.id, tenant_id="B"),
    ):
        with pytest.raises(NotFound, match="no memory"):
            call()
    assert mem.search("Osaka", user_id="u", tenant_id="B") == []
    assert mem.list(tenant_id="B").items == []
    assert mem.get(item.id, tenant_id="A").version == 1


def test_list_pagination(mem: Memory, clock: Clock) -> None:
    start = clock.now
    mem.import_items(
        {
            "content": f"Numbered fact number {i} ",
            "memory_type": "fact",
            "user_id": "p",
            "created_at": start + timedelta(seconds=i),
        }
        for i in range(23)
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = mem.list(user_id="p", limit=10, cursor=cursor)
        seen += [i.content for i in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == 23 and len(set(seen)) == 23
    assert seen[0].startswith("Numbered fact number 0 ")
    assert (
        mem.list(user_id="p", limit=1, newest_first=True)
        .items[0]
        .content.startswith("Numbered fact number 22 ")
    )
    with pytest.raises(InvalidInput, match="cursor"):
        mem.list(cursor="garbage!")


def test_update_versions_and_history(mem: Memory) -> None:
    item = mem.add("User lives in Beijing", user_id="h", memory_type="fact").item
    assert item is not None
    new = mem.update(item.id, content="User lives in Shenzhen", reason="moved")
    assert new.version == 2 and new.content == "User lives in Shenzhen"
    assert mem.search("Shenzhen", user_id="h")[0].item.id == item.id
    events = mem.history(item.id)
    assert [e.action.value for e in events] == ["add", "update"]
    assert events[1].before is not None and events[1].before["content"] == "User lives in Beijing"
    assert events[1].after is not None and events[1].after["content"] == "User lives in Shenzhen"
    assert events[1].reason == "moved"
    for bad, field in [
        ({"version": 9}, "version"),
        ({"colour": "red"}, "colour"),
        ({"confidence": 3}, "confidence"),
    ]:
        with pytest.raises(InvalidInput) as err:
            mem.update(item.id, **bad)
        assert err.value.field == field
    assert mem.get(item.id).version == 2


def test_soft_and_hard_delete_are_audited(mem: Memory, tmp_path: Path) -> None:
    item = mem.add("User's cat is called Mochi", user_id="d").item
    assert item is not None
    archived = mem.delete(item.id, reason="user asked")
    assert archived.status is Status.ARCHIVED
    restored = mem.update(item.id, status="active")
    assert restored.status is Status.ACTIVE
    mem.delete(item.id, hard=True)
    with pytest.raises(NotFound):
        mem.get(item.id)
    actions = [e.action.value for e in mem.history(item.id)]
    assert actions == ["add", "archive", "restore", "purge"]
    assert count_rows(tmp_path / "m.db", "vectors") == 0


def _said(mem: Memory, user: str, session: str, *turns: str) -> None:
    """Each turn said to remember() in one session, the session ended and its jobs run."""
    for text in turns:
        mem.remember([("user", text), ("assistant", "Noted.")], session_id=session, user_id=user)
    mem.end_session(session, user_id=user)
    while mem.process_jobs(worker="test"):
        pass


def test_deleting_with_its_sources_forgets_the_words_everywhere(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "f.db"), background=False) as mem:
        _said(mem, "ana", "s1", "我对猫毛过敏。", "I prefer tea over coffee.")
        allergy = next(i for i in mem.list(user_id="ana").items if i.content == "我对猫毛过敏")
        holders = mem.holders(allergy.id)
        # the turn it was taken from, and the session's summary quoting it
        assert {h.content for h in holders if "turn" in h.tags} == {"我对猫毛过敏。"}
        (summary,) = [h for h in holders if "episode" in h.tags]
        assert "tea" in summary.content
        mem.delete(allergy.id, hard=True, with_sources=True)
        for query in ("我对什么过敏？", "cat allergy 猫毛"):
            assert all("猫毛" not in h.item.content for h in mem.search(query, user_id="ana")), query
        # The summary said more: only its line quoting the memory went.
        rest = mem.get(summary.id)
        assert "猫毛" not in rest.content and "tea" in rest.content
        assert [e.action.value for e in mem.history(summary.id)][-1] == "update"
        assert any("tea" in h.item.content for h in mem.search("what do I drink?", user_id="ana"))


def test_deleting_without_its_sources_leaves_them_and_says_where(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "f.db"), background=False) as mem:
        _said(mem, "ana", "s1", "我对猫毛过敏。")
        allergy = next(i for i in mem.list(user_id="ana").items if i.content == "我对猫毛过敏")
        held = {h.id for h in mem.holders(allergy.id)}
        mem.delete(allergy.id)  # soft, sources left
        assert held and all(mem.get(i).status is Status.ACTIVE for i in held)
        mem.update(allergy.id, status="active")
        mem.delete(allergy.id, with_sources=True)  # soft: archived with it, all reversible
        assert all(mem.get(i).status is Status.ARCHIVED for i in held)


def test_a_change_keeps_what_else_the_older_statement_said(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "c.db"), background=False) as mem:
        _said(mem, "bob", "a", "I live in Munich and work as a nurse.")
        _said(mem, "bob", "b", "I moved to Berlin last month.")
        assert (
            mem.search("where do I live now?", user_id="bob")[0].item.content
            == "I moved to Berlin last month"
        )
        # The older statement is retired; what else it said is a memory of its own.
        job = mem.search("what is my job?", user_id="bob")[0].item
        assert job.content == "I work as a nurse" and job.status is Status.ACTIVE
        assert "key" not in job.metadata and job.structured is None  # the changed slot was the old one's
        old = mem.get(job.relations[-1].target_id)
        assert old.content == "I live in Munich and work as a nurse" and old.status is Status.SUPERSEDED


@pytest.mark.parametrize(
    ("before", "after", "query", "title"),
    [
        (
            "I work as a software engineer at Stripe.",
            "I just got promoted to senior engineer!",
            "what is my job?",
            "senior engineer",
        ),
        ("我是一名软件工程师", "我上个月升职成了高级工程师", "我现在做什么工作？", "高级工程师"),
    ],
)
def test_a_promotion_is_the_current_profession(
    tmp_path: Path, before: str, after: str, query: str, title: str
) -> None:
    with Memory(SQLiteStore(tmp_path / "p.db"), background=False) as mem:
        _said(mem, "ann", "a", before)
        _said(mem, "ann", "b", after)
        assert mem.search(query, user_id="ann")[0].item.content.rstrip("!") == after.rstrip("!")
        assert mem.profile(user_id="ann")["profession"] == title
        older = [
            i
            for i in mem.list(user_id="ann", statuses="superseded").items
            if i.content.rstrip(".") == before.rstrip(".")
        ]
        assert len(older) == 1


def test_stats(mem: Memory) -> None:
    mem.add(
        "User prefers tabs over spaces", user_id="s", memory_type="preference", confidence=0.8, importance=0.2
    )
    mem.add(
        "Project must support Python 3.11",
        project_id="x",
        memory_type="constraint",
        confidence=1.0,
        importance=0.6,
    )
    s = mem.stats()
    assert s.total == 2 and s.by_type == {"constraint": 1, "preference": 1}
    assert s.by_scope == {"project": 1, "user": 1} and s.by_status == {"active": 2}
    assert s.avg_confidence == pytest.approx(0.9) and s.avg_importance == pytest.approx(0.4)
    assert mem.stats(user_id="s").total == 1


def test_scoped_reset(mem: Memory) -> None:
    mem.add("User one likes jazz music", user_id="r1")
    mem.add("User two likes rock music", user_id="r2")
    assert mem.reset(user_id="r1") == 1
    assert mem.stats().total == 1
    with pytest.raises(InvalidInput, match="at least one scope"):
        mem.reset()


# ------------------------------------------------------------------ export / import


def test_export_import_round_trip_is_identical(mem: Memory, tmp_path: Path, clock: Clock) -> None:
    a = mem.add(
        "用户的生日是五月一日", user_id="e", memory_type="fact", tags=["生日"], metadata={"来源": "chat"}
    ).item
    b = mem.add(
        "User prefers metric units", user_id="e", memory_type="preference", occurred_at=clock.now
    ).item
    assert a is not None and b is not None
    mem.update(b.id, importance=0.9)
    mem.delete(a.id)
    buf = io.StringIO()
    assert mem.export_jsonl(buf) == 2
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    with Memory(SQLiteStore(tmp_path / "copy.db")) as other:
        assert other.import_items(lines).imported == 2
        again = io.StringIO()
        other.export_jsonl(again)
        assert again.getvalue() == buf.getvalue()
        assert other.search("birthday", user_id="e", statuses=["archived"])[0].item.id == a.id
        # The same file again stores nothing twice, and says so.
        twice = other.import_items(lines)
        assert (twice.imported, twice.replaced) == (2, 2) and other.stats().total == 2


def test_import_minimal_records_and_all_or_nothing(mem: Memory, tmp_path: Path) -> None:
    good = {
        "content": "Caroline: I went to a support group",
        "memory_type": "event",
        "user_id": "conv1",
        "id": "D1:3",
        "occurred_at": "2023-05-08T13:56:00",
        "metadata": {"dia_id": "D1:3"},
    }
    result = mem.import_items([good])
    assert result.imported == 1 and mem.get("D1:3").metadata == {"dia_id": "D1:3"}
    before = count_rows(tmp_path / "m.db", "items")
    bad = [dict(good, id="D1:4"), {"content": "no owner here", "memory_type": "fact"}]
    with pytest.raises(InvalidInput, match="record 2"):
        mem.import_items(bad)
    with pytest.raises(InvalidInput, match="record 1: memory_type must be one of: "):
        mem.import_items([dict(good, id="x", memory_type="rumour")])
    with pytest.raises(InvalidInput, match="more than once"):
        mem.import_items([dict(good, id="dup"), dict(good, id="dup")])
    assert count_rows(tmp_path / "m.db", "items") == before


# ------------------------------------------------------------------ files that are not what they should be


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreCorrupt, match=r"not a (usable )?jiyi database"):
        Memory(SQLiteStore(path))
    assert path.read_bytes() == b"this is not a database at all" * 100


def test_read_only_store_searches_but_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with Memory(SQLiteStore(path)) as m:
        m.add("User likes oolong tea", user_id="u")
    with Memory(SQLiteStore(path, read_only=True)) as ro:
        assert ro.search("oolong", user_id="u")[0].item.content == "User likes oolong tea"
        with pytest.raises(StoreReadOnly, match="read-only"):
            ro.add("User likes black tea too", user_id="u")
    with Memory(SQLiteStore(path)) as m:
        assert m.stats().total == 1


# ------------------------------------------------------------------ async: same flows, other driver


async def test_async_api_matches_sync(tmp_path: Path) -> None:
    async with AsyncMemory.open(tmp_path / "a.db") as mem:
        added = await mem.add("我最喜欢的编程语言是 Rust", user_id="z", memory_type="preference")
        assert added.item is not None and added.decision.action == "add"
        again = await mem.add("我最喜欢的编程语言是 Rust。", user_id="z", memory_type="preference")
        assert again.decision.action == "reinforce"
        hits = await mem.search("what programming language does the user like", user_id="z")
        assert hits[0].item.id == added.item.id
        updated = await mem.update(added.item.id, importance=0.9)
        assert updated.version == 2
        page = await mem.list(user_id="z")
        assert [i.id for i in page.items] == [added.item.id]
        assert [e.action.value for e in await mem.history(added.item.id)] == ["add", "reinforce", "update"]
        assert (await mem.stats()).total == 1
        exported = await mem.export()
        assert exported[0]["id"] == added.item.id
        buf = io.StringIO()
        assert await mem.export_jsonl(buf) == 1 and added.item.id in buf.getvalue()
        await mem.delete(added.item.id, hard=True)
        with pytest.raises(NotFound):
            await mem.get(added.item.id)
    public = {n for n in dir(Memory) if not n.startswith("_")}
    assert sorted(n for n in public if not hasattr(AsyncMemory, n)) == []  # every method, awaited
    closing = AsyncMemory.open(tmp_path / "b.db")
    await closing.close()


async def test_async_concurrent_adds_lose_nothing(tmp_path: Path) -> None:
    import asyncio

    topics = ["chess", "violin", "sailing", "pottery", "origami", "fencing", "baking", "archery"]
    async with AsyncMemory.open(tmp_path / "c.db") as mem:
        results = await asyncio.gather(
            *(
                mem.add(f"User {n} has practised {topic} for {n + 2} years", user_id=f"user{n}")
                for n, topic in enumerate(topics)
            )
        )
        assert all(r.item is not None for r in results)
        assert (await mem.stats()).total == len(topics)


def test_optional_reranker_reorders_and_explains(tmp_path: Path) -> None:
    def prefers_tea(query: str, texts: list[str]) -> list[float]:
        return [1.0 if "tea" in t else 0.0 for t in texts]

    with Memory(SQLiteStore(tmp_path / "r.db"), reranker=prefers_tea, rerank_weight=1.0) as m:
        m.add("User drinks coffee every morning", user_id="r")
        m.add("User drinks green tea in the afternoon", user_id="r")
        hits = m.search("what does the user drink in the morning", user_id="r", explain=True)
        assert "tea" in hits[0].item.content
        assert hits[0].breakdown["rerank.normalised"] == 1.0


def test_changing_the_wording_drops_what_was_extracted_from_the_old_one(mem: Memory) -> None:
    fact = mem.add("我是前端工程师", user_id="u", structured={"profession": "前端工程师"}).item
    assert fact is not None
    changed = mem.update(fact.id, content="我是后端工程师")
    assert changed.structured is None
    assert mem.profile(user_id="u")["profession"] == "后端工程师"
    kept = mem.update(fact.id, content="我是全栈工程师", structured={"profession": "全栈工程师"})
    assert kept.structured == {"profession": "全栈工程师"}
    assert mem.update(fact.id, importance=0.8).structured == {"profession": "全栈工程师"}
    # A learning's text is its record written out: a new text is read back into it.
    skill = mem.record_skill("deep_research", ["web_search", "summarize"], user_id="u")
    reworded = mem.update(skill.id, content="Skill deep_research: web_search → read_url → summarize")
    assert reworded.structured is not None and skill.structured is not None
    assert [s["tool"] for s in reworded.structured["workflow"]] == ["web_search", "read_url", "summarize"]
    assert reworded.structured["successes"] == skill.structured["successes"]
    with pytest.raises(InvalidInput):
        mem.update(skill.id, content="Deep research: search, then summarise")
    assert mem.get(skill.id).version == reworded.version  # the refused text changed nothing


def test_context_with_the_largest_counts_is_capped_at_the_search_limit(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db", embedder="hash:64") as mem:
        mem.add("We decided to use PostgreSQL for the main database", user_id="u", memory_type="decision")
        ctx = mem.context("which database?", user_id="u", semantic=1000, summaries=1000)
        assert "PostgreSQL" in ctx.text
        assert mem.context("which database?", user_id="u", semantic=5000).by_source == {"semantic": 1}
