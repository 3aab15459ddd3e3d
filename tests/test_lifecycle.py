"""Memory lifecycle: episode decay, access-based decay, expiry, retention (seeds 001, 003, 004).

A fake clock simulates months of use on a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jiyi.driver import arun, run
from jiyi.errors import InvalidInput, NotFound
from jiyi.lifecycle import (
    LifecyclePolicy,
    MaintenanceReport,
    decay_score,
    decide_item,
    episode_importance,
    maintain_flow,
)
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.store.base import HistoryAction, Touch, Write
from jiyi.store.sqlite import SQLiteStore

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, days: float) -> None:
        self.now = T0 + timedelta(days=days)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "life.db"), clock=clock, background=False) as m:
        yield m


IDLE_ARCHIVED = LifecyclePolicy(archive_idle=True)
"""These tests exercise decay archiving, which a policy has to ask for."""


def maintain(
    mem: Memory, *, dry_run: bool = False, policy: LifecyclePolicy | None = None
) -> MaintenanceReport:
    flow = maintain_flow(mem.runtime, now=mem.runtime.now(), policy=policy or IDLE_ARCHIVED, dry_run=dry_run)
    return run(flow, mem.runtime)


def add(mem: Memory, content: str, **kw: Any) -> MemoryItem:
    result = mem.add(content, user_id="alice", **kw)
    assert result.item is not None, result.decision
    return result.item


def use(mem: Memory, item_id: str) -> None:
    mem.store.execute(Write((Touch(mem.runtime.tenant_id, (item_id,), mem.runtime.now()),)))


def actions(report: MaintenanceReport) -> dict[str, str]:
    return {c.item_id: c.action for c in report.changes}


def last_event(mem: Memory, item_id: str) -> Any:
    return mem.history(item_id)[-1]


# ---------------------------------------------------------------- episodes (seed 001)


def test_episode_importance_halves_every_90_days_and_is_archived_below_floor(
    mem: Memory, clock: Clock
) -> None:
    ep = mem.add_episode("Planned the Kyoto trip with Alice", importance=0.8, user_id="alice")
    clock.at(90)
    report = maintain(mem)
    assert actions(report) == {ep.id: "decay"}
    assert mem.get(ep.id).importance == pytest.approx(0.4, abs=1e-3)
    event = last_event(mem, ep.id)
    assert event.action == HistoryAction.UPDATE and event.actor == "lifecycle"
    assert "0.80 -> 0.40 after 90 days (half-life 90)" in event.reason

    clock.at(180)  # decay is from the original importance: no compounding
    maintain(mem)
    assert mem.get(ep.id).importance == pytest.approx(0.2, abs=1e-3)

    clock.at(269)  # 0.8 * 0.5 ** (269/90) = 0.1006
    report = maintain(mem)
    assert mem.get(ep.id).status == Status.ACTIVE
    assert report.counts["archive"] == 0

    clock.at(272)  # 0.8 * 0.5 ** (272/90) = 0.098
    report = maintain(mem)
    assert actions(report) == {ep.id: "archive"}
    archived = mem.get(ep.id)
    assert archived.status == Status.ARCHIVED
    event = last_event(mem, ep.id)
    assert event.action == HistoryAction.ARCHIVE
    assert event.reason == "episode importance 0.10 < 0.1 after 272 days (half-life 90)"
    assert event.before["status"] == "active" and event.after["status"] == "archived"

    # archived items are left alone by later passes
    clock.at(400)
    assert maintain(mem).changes == []


def test_episode_deleted_below_floor_with_delete_policy(mem: Memory, clock: Clock) -> None:
    ep = mem.add_episode("Debugged the flaky CI runner", importance=0.5, user_id="alice")
    clock.at(400)
    report = maintain(mem, policy=LifecyclePolicy(action_below_floor="delete", archive_idle=True))
    assert actions(report) == {ep.id: "delete"}
    with pytest.raises(NotFound):
        mem.get(ep.id)
    event = last_event(mem, ep.id)  # the audit history outlives the item
    assert event.action == HistoryAction.PURGE
    assert event.reason == "episode importance 0.02 < 0.1 after 400 days (half-life 90)"


def test_restored_episode_is_kept(mem: Memory, clock: Clock) -> None:
    ep = mem.add_episode("Moved the blog to a static site", importance=0.5, user_id="alice")
    clock.at(300)
    maintain(mem)
    assert mem.get(ep.id).status == Status.ARCHIVED
    mem.update(ep.id, status="active")
    assert mem.history(ep.id)[-1].action == HistoryAction.RESTORE
    clock.at(310)
    assert maintain(mem).changes == []
    assert mem.get(ep.id).status == Status.ACTIVE


# ---------------------------------------------------------------- access-based decay (seed 003)


def test_rarely_used_item_is_archived_and_restorable(mem: Memory, clock: Clock) -> None:
    item = add(mem, "Alice's favourite editor is Helix")
    # never used: half-life 30 days, score < 0.2 after 30 * log2(5) = 69.7 days
    clock.at(69)
    assert maintain(mem).changes == []
    clock.at(71)
    report = maintain(mem)
    assert actions(report) == {item.id: "archive"}
    assert mem.get(item.id).status == Status.ARCHIVED
    event = last_event(mem, item.id)
    assert event.action == HistoryAction.ARCHIVE
    assert event.reason.startswith("decay score 0.19 < 0.2: unused for 71 days, 0 use(s)")

    restored = mem.update(item.id, status="active", reason="still true")
    assert restored.status == Status.ACTIVE
    clock.at(72)  # the restore restarted its clock
    assert maintain(mem).changes == []
    assert mem.get(item.id).status == Status.ACTIVE
    assert [e.action for e in mem.history(item.id)] == [
        HistoryAction.ADD,
        HistoryAction.ARCHIVE,
        HistoryAction.RESTORE,
    ]


def test_often_used_item_survives_months(mem: Memory, clock: Clock) -> None:
    busy = add(mem, "Alice deploys with Kamal to Hetzner")
    idle = add(mem, "Alice once tried the Zig language")
    for week in range(1, 53):
        clock.at(7 * week)
        use(mem, busy.id)
        if week % 4 == 0:
            maintain(mem)
    assert mem.get(busy.id).status == Status.ACTIVE
    assert mem.get(busy.id).access_count == 52
    assert mem.get(idle.id).status == Status.ARCHIVED


def test_uses_stretch_the_half_life(mem: Memory, clock: Clock) -> None:
    item = add(mem, "Alice keeps notes in Obsidian")
    for _ in range(10):
        use(mem, item.id)
    # half-life 30 * (1 + ln 11) = 101.9 days: at 150 idle days the score is ~0.36
    clock.at(150)
    assert maintain(mem).changes == []
    clock.at(240)  # 0.5 ** (240 / 101.9) = 0.195
    assert actions(maintain(mem)) == {item.id: "archive"}


def test_pattern_retention_90_days(mem: Memory, clock: Clock) -> None:
    pattern = add(mem, "Split refactors into rename, move, then behaviour change", memory_type="pattern")
    for _ in range(20):  # heavily used, so only the retention rule can archive it
        use(mem, pattern.id)
    clock.at(89)
    assert maintain(mem).changes == []
    clock.at(91)
    report = maintain(mem)
    assert actions(report) == {pattern.id: "archive"}
    assert report.changes[0].reason == "pattern unused for 91 days > retention 90 days"


# ---------------------------------------------------------------- expiry, protection


def test_expired_items_archived(mem: Memory, clock: Clock) -> None:
    item = add(mem, "Alice is on call this week", expires_at=T0 + timedelta(days=7))
    clock.at(6)
    assert maintain(mem).changes == []
    clock.at(8)
    report = maintain(mem)
    assert actions(report) == {item.id: "expire"} and report.counts["expire"] == 1
    assert mem.get(item.id).status == Status.ARCHIVED
    event = last_event(mem, item.id)
    assert event.action == HistoryAction.ARCHIVE and event.reason.startswith("expired at 2025-01-08")


def test_pinned_and_important_items_never_touched(mem: Memory, clock: Clock) -> None:
    pinned = add(mem, "Alice's employee id is A-1042", tags=["pinned"])
    important = add(mem, "Alice is allergic to penicillin", importance=0.95)
    big_episode = mem.add_episode("Alice's wedding day", importance=0.95, user_id="alice")
    expired_pinned = add(
        mem, "Alice's badge expires soon", tags=["pinned"], expires_at=T0 + timedelta(days=1)
    )
    clock.at(2000)
    report = maintain(mem)
    assert report.changes == []
    assert report.counts["keep"] == 4
    for item_id in (pinned.id, important.id, big_episode.id, expired_pinned.id):
        got = mem.get(item_id)
        assert got.status == Status.ACTIVE and got.version == 1


def test_resources_exempt_from_access_decay(clock: Clock) -> None:
    doc = MemoryItem.build(
        content="Chapter 1 of the handbook", user_id="alice", tags=["resource"], created_at=T0, updated_at=T0
    )
    plain = doc.evolve(tags=[])
    later = T0 + timedelta(days=365)
    assert decide_item(doc, later, IDLE_ARCHIVED).action == "keep"
    assert decide_item(plain, later, IDLE_ARCHIVED).action == "archive"
    assert decide_item(plain.evolve(status=Status.ARCHIVED), later, IDLE_ARCHIVED).action == "keep"


def test_pure_scores() -> None:
    policy = LifecyclePolicy()
    ep = MemoryItem.build(
        content="x", user_id="u", tags=["episode"], importance=0.6, created_at=T0, updated_at=T0
    )
    assert episode_importance(ep, T0 + timedelta(days=90), policy) == pytest.approx(0.3)
    item = MemoryItem.build(content="y", user_id="u", created_at=T0, updated_at=T0)
    assert decay_score(item, T0, policy) == 1.0
    assert decay_score(item, T0 + timedelta(days=30), policy) == pytest.approx(0.5)
    assert 0.0 < decay_score(item, T0 + timedelta(days=3000), policy) < 1e-9


def test_policy_validation() -> None:
    with pytest.raises(InvalidInput):
        LifecyclePolicy(action_below_floor="shred")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        LifecyclePolicy(episode_half_life_days=0)
    with pytest.raises(InvalidInput):
        LifecyclePolicy(item_decay_floor=1.5)
    with pytest.raises(InvalidInput):
        LifecyclePolicy(retention_days={"messages": -1})


# ---------------------------------------------------------------- messages (seed 004)


def test_messages_older_than_30_days_removed(mem: Memory, clock: Clock) -> None:
    mem.add_messages("s1", [("user", "hello"), ("assistant", "hi Alice")], user_id="alice")
    mem.add_messages("s2", [("user", "old question")], user_id="alice")
    clock.at(20)
    mem.add_messages("s1", [("user", "newer message")], user_id="alice")
    clock.at(35)
    report = maintain(mem)
    assert report.messages_removed == 3 and report.sessions_touched == 2
    assert [m.content for m in mem.messages("s1")] == ["newer message"]
    assert mem.messages("s2") == []
    clock.at(49)
    assert maintain(mem).messages_removed == 0
    clock.at(51)
    assert maintain(mem).messages_removed == 1
    assert mem.messages("s1") == []


def test_messages_retention_disabled(mem: Memory, clock: Clock) -> None:
    mem.add_messages("s1", [("user", "hello")])
    clock.at(1000)
    assert maintain(mem, policy=LifecyclePolicy(retention_days={"messages": None})).messages_removed == 0
    assert len(mem.messages("s1")) == 1


# ---------------------------------------------------------------- dry run, audit, drivers


def _populate(mem: Memory, clock: Clock) -> None:
    mem.add_episode("Reviewed the Q1 roadmap", importance=0.5, user_id="alice")
    mem.add_episode("Fixed the login bug", importance=0.9, user_id="alice")
    add(mem, "Alice prefers tabs over spaces")
    add(mem, "Alice's visa appointment is on Friday", expires_at=T0 + timedelta(days=5))
    add(mem, "Use feature flags for risky launches", memory_type=MemoryType.PATTERN)
    add(mem, "Alice's home city is Lisbon", tags=["pinned"])
    mem.add_messages("s1", [("user", "first"), ("assistant", "second")], user_id="alice")
    clock.at(100)


def test_dry_run_changes_nothing_but_reports_the_same(mem: Memory, clock: Clock) -> None:
    _populate(mem, clock)
    before = mem.export()
    dry = maintain(mem, dry_run=True)
    assert dry.dry_run
    assert mem.export() == before
    assert len(mem.messages("s1")) == 2
    assert dry.messages_removed == 2
    assert {c.action for c in dry.changes} >= {"decay", "archive", "expire"}

    real = maintain(mem)
    assert not real.dry_run
    assert real.changes == dry.changes
    assert real.counts == dry.counts
    assert real.messages_removed == dry.messages_removed
    assert mem.export() != before
    assert mem.messages("s1") == []


def test_every_change_has_a_history_event_with_its_reason(mem: Memory, clock: Clock) -> None:
    _populate(mem, clock)
    report = maintain(mem, policy=LifecyclePolicy(action_below_floor="delete", archive_idle=True))
    assert report.changes
    expected = {
        "decay": HistoryAction.UPDATE,
        "archive": HistoryAction.ARCHIVE,
        "expire": HistoryAction.ARCHIVE,
        "delete": HistoryAction.PURGE,
    }
    for change in report.changes:
        event = mem.history(change.item_id)[-1]
        assert event.action == expected[change.action]
        assert event.reason == change.reason and event.reason
        assert event.actor == "lifecycle"
        assert event.at == clock.now
    assert sum(v for k, v in report.counts.items() if k != "keep") == len(report.changes)
    assert report.to_json_dict()["scanned"] == 6


def test_small_batches(mem: Memory, clock: Clock) -> None:
    facts = [
        "Alice drinks oolong tea every morning",
        "Alice's laptop runs Fedora Linux",
        "Alice plays the cello on weekends",
        "Alice's manager is called Bruno",
        "Alice commutes by bicycle",
        "Alice's cat is named Miso",
        "Alice studies Japanese at night school",
    ]
    ids = [add(mem, fact).id for fact in facts]
    assert len(set(ids)) == 7
    clock.at(200)
    report = run(
        maintain_flow(mem.runtime, now=mem.runtime.now(), dry_run=False, batch_size=2, policy=IDLE_ARCHIVED),
        mem.runtime,
    )
    assert sorted(actions(report)) == sorted(ids)
    assert all(mem.get(i).status == Status.ARCHIVED for i in ids)


async def test_async_driver(tmp_path: Path, clock: Clock) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), clock=clock) as amem:
        ep = await amem.add_episode("Shipped v2", importance=0.8, user_id="alice")
        clock.at(90)
        report = await arun(maintain_flow(amem.runtime, now=amem.runtime.now()), amem.runtime)
        assert actions(report) == {ep.id: "decay"}
        assert (await amem.get(ep.id)).importance == pytest.approx(0.4, abs=1e-3)
