"""Temporal validity on two axes: when a fact was true (valid_from / valid_to) and when jiyi
learned it (created_at) and retired it (its history). A supersede closes the old fact's
validity and keeps it; search answers for now by default and for a past date with as_of."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.memory import Memory
from jiyi.model import Status

T0 = datetime(2026, 2, 2, 9, tzinfo=UTC)


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
    with Memory.open(tmp_path / "valid.db", clock=clock, background=False) as m:
        yield m


def _move(mem: Memory, clock: Clock) -> tuple[str, str]:
    mem.remember([("user", "I prefer tabs for indentation.")], session_id="s1", user_id="u")
    mem.process_jobs()
    clock.now = T0 + timedelta(days=30)
    mem.remember(
        [("user", "I no longer prefer tabs; I prefer spaces for indentation now.")],
        session_id="s2",
        user_id="u",
    )
    mem.process_jobs()
    items = mem.list(user_id="u").items
    old = next(i for i in items if "tabs for indentation" in i.content and i.status == Status.SUPERSEDED)
    new = next(i for i in items if "spaces" in i.content and i.status == Status.ACTIVE)
    return old.id, new.id


def test_a_supersede_closes_the_old_validity_and_keeps_it(mem: Memory, clock: Clock) -> None:
    old_id, new_id = _move(mem, clock)
    old, new = mem.get(old_id), mem.get(new_id)
    assert old.valid_to == new.valid_from == T0 + timedelta(days=30)
    assert old.valid_at(T0 + timedelta(days=10)) and not old.valid_at(T0 + timedelta(days=31))
    assert [e.action.value for e in mem.history(old_id)] == ["add", "supersede"]


def test_search_answers_for_now_by_default_and_for_a_past_date_with_as_of(mem: Memory, clock: Clock) -> None:
    old_id, new_id = _move(mem, clock)
    clock.now = T0 + timedelta(days=40)
    now_hits = mem.search("tabs or spaces for indentation?", user_id="u")
    assert now_hits[0].item.id == new_id and all(h.item.id != old_id for h in now_hits)
    then = mem.search("tabs or spaces for indentation?", user_id="u", as_of=T0 + timedelta(days=10))
    assert then[0].item.id == old_id and all(h.item.id != new_id for h in then)
    before = mem.search("tabs or spaces for indentation?", user_id="u", as_of=T0 - timedelta(days=1))
    assert before == []  # jiyi knew nothing yet
    assert mem.get(old_id).access_count == 0  # a look into the past does not count as a use


def test_unrelated_facts_do_not_close_each_other(mem: Memory, clock: Clock) -> None:
    sister = mem.add("My sister lives in Berlin", user_id="u").item
    clock.now += timedelta(days=3)
    me = mem.add("I live in Munich", user_id="u").item
    assert sister is not None and me is not None
    assert mem.get(sister.id).status == Status.ACTIVE and mem.get(sister.id).valid_to is None
