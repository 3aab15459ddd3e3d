"""Nothing a user told us vanishes silently: a simulated year of use with an injected
clock loses no memory that was not explicitly expired or deleted; time-bound facts
expire on their own date; session-scope memories end with their session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.lifecycle import LifecyclePolicy
from jiyi.memory import Memory
from jiyi.model import Status
from jiyi.text.expiry import expiry_of

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)  # a Monday


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory.open(tmp_path / "year.db", clock=clock, background=False, embedder="hash:256") as m:
        yield m


def test_a_year_of_daily_maintenance_keeps_every_long_term_memory(mem: Memory, clock: Clock) -> None:
    facts = ["我是一名前端工程师", "我对花生过敏", "My manager is called Ana", "I am a vegetarian"]
    ids = [mem.add(f, user_id="u").item.id for f in facts]  # type: ignore[union-attr]
    expiring = mem.add("The staging password rotates soon", user_id="u", expires_at=T0 + timedelta(days=40))
    assert expiring.item is not None
    archived_on: dict[str, int] = {}
    for day in range(1, 366):
        clock.now = T0 + timedelta(days=day)
        for change in mem.maintain().changes:
            if change.action in ("archive", "delete", "expire"):
                archived_on[change.item_id] = day
    assert all(mem.get(i).status == Status.ACTIVE for i in ids)  # idle, never used, still kept
    assert archived_on == {expiring.item.id: 40}  # only what was set to expire, on its day
    assert "前端工程师" in str(mem.profile(user_id="u").to_json_dict())


def test_idle_archiving_is_an_explicit_policy(mem: Memory, clock: Clock) -> None:
    item = mem.add("I collect vintage postcards", user_id="u").item
    assert item is not None
    clock.now = T0 + timedelta(days=200)
    kept = mem.maintain()
    assert mem.get(item.id).status == Status.ACTIVE
    assert any("archive_idle" in c.reason for c in kept.changes) or kept.counts.get("archive", 0) == 0
    mem.maintain(policy=LifecyclePolicy(archive_idle=True))
    assert mem.get(item.id).status == Status.ARCHIVED


def test_extraction_sets_the_expiry_of_time_bound_facts(mem: Memory, clock: Clock) -> None:
    mem.remember(
        [("user", "Remember that I work from the Berlin office until Friday")], session_id="s", user_id="u"
    )
    mem.remember([("user", "记住：我下周三之前都在上海出差")], session_id="s2", user_id="u")
    mem.process_jobs()
    items = {i.content: i for i in mem.list(user_id="u").items}
    berlin = next(i for c, i in items.items() if "Berlin" in c)
    shanghai = next(i for c, i in items.items() if "上海" in c)
    assert berlin.expires_at == datetime(2026, 1, 10, tzinfo=UTC)  # the end of that Friday
    assert shanghai.expires_at == datetime(2026, 1, 15, tzinfo=UTC)  # the end of next Wednesday
    clock.now = datetime(2026, 1, 10, 1, tzinfo=UTC)
    mem.maintain()
    assert mem.get(berlin.id).status == Status.ARCHIVED
    assert mem.get(shanghai.id).status == Status.ACTIVE


def test_session_scope_memories_end_with_their_session(mem: Memory) -> None:
    note = mem.add("Draft the release notes in this session", session_id="s9", scope="session").item
    kept = mem.add("I prefer release notes in English", user_id="u").item
    assert note is not None and kept is not None
    mem.end_session("s9", user_id="u")
    assert mem.get(note.id).status == Status.ARCHIVED
    assert mem.history(note.id)[-1].reason == "its session ended"
    assert mem.get(kept.id).status == Status.ACTIVE


# Until when a statement holds, said at T0 (also bench/design_libs.py's input against dateparser).
EXPIRY_CASES = [
    ("I am in Tokyo until Friday", datetime(2026, 1, 10, tzinfo=UTC)),
    ("The office is closed till tomorrow", datetime(2026, 1, 7, tzinfo=UTC)),
    ("Budget approval is needed by the end of the month", datetime(2026, 2, 1, tzinfo=UTC)),
    ("The promo code works until January 20th", datetime(2026, 1, 21, tzinfo=UTC)),
    ("这周末之前不要给我打电话", datetime(2026, 1, 12, tzinfo=UTC)),
    ("我在上海待到1月15日为止", datetime(2026, 1, 16, tzinfo=UTC)),
    ("月底前要交报告", datetime(2026, 2, 1, tzinfo=UTC)),
    ("I met her on Friday", None),
    ("我喜欢周五去游泳", None),
    ("I have lived in Berlin since 2019", None),
]


@pytest.mark.parametrize(("text", "expected"), EXPIRY_CASES)
def test_expiry_phrases(text: str, expected: datetime | None) -> None:
    assert expiry_of(text, T0) == expected
