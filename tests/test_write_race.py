"""Identical writes at the same moment make one item (issue 15, item 3).

The write pipeline's duplicate check and its write are atomic per scope (a guard on the
scope's clock, :class:`jiyi.store.base.Guard`): 16 identical ``add()`` calls released
together — threads sharing one Memory, separate processes with their own stores, and
concurrent REST requests — leave exactly one item, reinforced by all the others, on
SQLite and on PostgreSQL. Before the guard, 16 threads made up to 16 items.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem
from jiyi.store.base import Store
from jiyi.store.open import open_store
from jiyi.store.postgres import PostgresStore
from jiyi.store.sqlite import SQLiteStore
from tests.pg import give_back, pg_dsn, take_schema  # noqa: F401

EMBEDDER = "hash:256"
WRITERS = 16
TEXT = "Alice's favourite tea is jasmine green tea, brewed for two minutes"


def _items(mem: Memory, user: str = "alice") -> list[MemoryItem]:
    return mem.list(user_id=user, limit=100).items


def _check_one_item(mem: Memory, actions: list[str]) -> None:
    items = _items(mem)
    assert len(items) == 1, [i.content for i in items]
    assert sorted(actions) == ["add"] + ["reinforce"] * (WRITERS - 1)
    # No reinforcement was lost either: each one counted on the stored item.
    assert items[0].mention_count == WRITERS
    history = [e.action.value for e in mem.history(items[0].id)]
    assert history == ["add"] + ["reinforce"] * (WRITERS - 1)


def _race_threads(mem: Memory, add: Callable[[], str]) -> list[str]:
    barrier = threading.Barrier(WRITERS)
    actions: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer() -> None:
        try:
            barrier.wait(timeout=30)
            action = add()
            with lock:
                actions.append(action)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return actions


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "race.db")
        return
    dsn: str = request.getfixturevalue("pg_dsn")
    schema = take_schema()
    PostgresStore(dsn, schema=schema).close()  # migrated before the writers start
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    give_back(dsn, schema)


def test_identical_adds_from_threads_make_one_item(store_url: str) -> None:
    with Memory(open_store(store_url), embedder=EMBEDDER) as mem:
        actions = _race_threads(mem, lambda: mem.add(TEXT, user_id="alice").decision.action)
        _check_one_item(mem, actions)


def test_identical_extractions_from_threads_make_one_item(tmp_path: Path) -> None:
    """The extraction path (store_extracted) takes the same guard."""
    from jiyi.driver import run
    from jiyi.model import MemoryType
    from jiyi.write.extract import Extracted
    from jiyi.write.pipeline import store_extracted

    with Memory(SQLiteStore(tmp_path / "x.db"), embedder=EMBEDDER) as mem:
        cand = Extracted(TEXT, MemoryType.PREFERENCE, 0.9, reasons=("test",))

        def extract() -> str:
            flow = store_extracted(mem.runtime, [cand], session_id=None, user_id="alice")
            (outcome,) = run(flow, mem.runtime)
            return outcome.action

        actions = _race_threads(mem, extract)
        items = _items(mem)
        assert len(items) == 1 and sorted(actions) == ["add"] + ["reinforce"] * (WRITERS - 1)
        assert items[0].mention_count == WRITERS


def _process_writer(url: str, go: Any, out: Any) -> None:
    with Memory(open_store(url), embedder=EMBEDDER, background=False) as mem:
        mem.add("warm-up so that imports and the embedder are ready", user_id="warm")
        go.wait(timeout=60)
        out.put(mem.add(TEXT, user_id="alice").decision.action)


def test_identical_adds_from_processes_make_one_item(store_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Barrier(WRITERS)
    out = ctx.Queue()
    procs = [ctx.Process(target=_process_writer, args=(store_url, go, out)) for _ in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    actions = [out.get(timeout=5) for _ in range(WRITERS)]
    with Memory(open_store(store_url), embedder=EMBEDDER) as mem:
        _check_one_item(mem, actions)


async def test_identical_adds_over_rest_make_one_item(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from jiyi.server.app import create_app
    from jiyi.server.auth import ApiKeys

    store: Store = SQLiteStore(tmp_path / "rest.db")
    memory = AsyncMemory(store, embedder=EMBEDDER)
    keys = ApiKeys()
    key = keys.add("acme", "editor")[1]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-API-Key": key}
        ) as client:
            replies = await asyncio.gather(
                *(
                    client.post("/v1/memories", json={"content": TEXT, "user_id": "alice"})
                    for _ in range(WRITERS)
                )
            )
            assert all(r.status_code in (200, 201) for r in replies), [r.text for r in replies]
            actions = sorted(r.json()["decision"]["action"] for r in replies)
            listed = (await client.get("/v1/memories", params={"user_id": "alice"})).json()["items"]
    finally:
        await memory.aclose()
    assert actions == ["add"] + ["reinforce"] * (WRITERS - 1)
    assert len(listed) == 1 and listed[0]["mention_count"] == WRITERS


def test_racing_adds_leave_the_memory_files_nothing_to_repair(tmp_path: Path) -> None:
    """A write refused by its guard changed nothing: its files intent is closed, not left
    for the next start to repair."""
    from jiyi.files import workspace_of

    with Memory(SQLiteStore(tmp_path / "f.db"), embedder=EMBEDDER, files=tmp_path / "ctx") as mem:
        actions = _race_threads(mem, lambda: mem.add(TEXT, user_id="alice").decision.action)
        _check_one_item(mem, actions)
        mirror = workspace_of(mem.store)
        assert mirror is not None
        assert not mirror.journal.pending()
        text = (tmp_path / "ctx" / "default" / "user" / "alice" / "memory.md").read_text(encoding="utf-8")
        assert text.count("jasmine green tea") == 1
