"""Stores written before 1b0e5ce kept an assistant's turns (the resources ``remember()``
keeps) at confidence 1.0; new ones get the gate's minimum confidence (0.7). The schema
migration "assistant turns at the gate's minimum confidence" lowers the old ones, in
SQLite and in PostgreSQL: only assistant turn resources, never one a person updated by
hand, each change in the history, and running it again changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jiyi.config import GateConfig
from jiyi.memory import Memory
from jiyi.model import MemoryItem
from jiyi.store.base import HistoryAction
from jiyi.store.open import open_store
from jiyi.store.postgres import MIGRATIONS as PG_MIGRATIONS
from jiyi.store.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tests.pg import drop_schema, new_schema, pg_dsn  # noqa: F401

NAME = "assistant turns at the gate's minimum confidence"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(store url, a function that forgets the migration was applied)."""
    if request.param == "sqlite":
        path = tmp_path / "turns.db"
        version = [n for n, _ in SQLITE_MIGRATIONS].index(NAME) + 1

        def forget_sqlite() -> None:
            with sqlite3.connect(path) as conn:
                conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))

        yield str(path), forget_sqlite
        return
    dsn = request.getfixturevalue("pg_dsn")
    schema = new_schema()
    version = [n for n, _ in PG_MIGRATIONS].index(NAME) + 1

    def forget_pg() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = %s', (version,))

    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}", forget_pg
    finally:
        drop_schema(dsn, schema)


def _memory(url: str, **options: Any) -> Memory:
    return Memory(open_store(url), background=False, embedder="hash:256", **options)


def _turns(mem: Memory, user: str) -> dict[str, MemoryItem]:
    return {i.content: i for i in mem.list(user_id=user, tags=["turn"]).items}


def test_old_assistant_turns_are_lowered_once_and_recorded(backend: tuple[str, Any]) -> None:
    url, forget = backend
    said = [
        ("user", "I am allergic to shellfish, please remember that"),
        ("assistant", "Noted: you are allergic to shellfish, so I will avoid suggesting seafood dishes."),
    ]
    # The code before 1b0e5ce kept every turn at 1.0: a gate whose minimum is 1.0 does the same.
    with _memory(url, gate=GateConfig(min_confidence=1.0)) as old:
        old.remember(said, session_id="s1", user_id="ann")
        old.remember(
            [("user", "What should I cook tonight?"), ("assistant", "How about a mushroom risotto tonight?")],
            session_id="s2",
            user_id="ann",
        )
        old.process_jobs()
        before = _turns(old, "ann")
        assert {i.confidence for i in before.values()} == {1.0}
        # One assistant turn a person set by hand: the migration leaves it as it is.
        kept = old.update(before[said[1][1]].id, confidence=1.0, importance=0.6, reason="I trust this one")
        # Not a turn: an assistant's memory written through add() is not touched either.
        note = old.add(
            "The assistant suggested risotto",
            user_id="ann",
            infer=False,
            confidence=1.0,
            metadata={"role": "assistant"},
        ).item
        assert note is not None
    forget()
    with _memory(url) as mem:
        after = _turns(mem, "ann")
        lowered = after["How about a mushroom risotto tonight?"]
        assert lowered.confidence == 0.7
        assert lowered.version == before[lowered.content].version + 1
        assert (
            lowered.model_copy(update={"confidence": 1.0, "version": before[lowered.content].version})
            == (before[lowered.content])
        )
        event = mem.history(lowered.id)[-1]
        assert event.action == HistoryAction.UPDATE and event.actor == "migration"
        assert event.before is not None and event.before["confidence"] == 1.0
        assert event.after is not None and event.after["confidence"] == 0.7
        assert event.after["version"] == lowered.version
        assert after[said[0][1]].confidence == 1.0 and after["What should I cook tonight?"].confidence == 1.0
        assert after[said[1][1]].confidence == 1.0 and after[said[1][1]].version == kept.version
        assert mem.get(note.id).confidence == 1.0
        # still found by search (the items load and are indexed as before)
        hits = [h.item.content for h in mem.search("allergic to shellfish", user_id="ann", touch=False)]
        assert said[0][1] in hits
        events = {i.id: len(mem.history(i.id)) for i in after.values()}
    forget()
    with _memory(url) as again:  # a second run changes nothing
        assert _turns(again, "ann") == after
        assert {i.id: len(again.history(i.id)) for i in after.values()} == events
