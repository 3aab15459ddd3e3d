"""A search's usage write (counters and retrieval log) on SQLite is committed by the
store's own thread after the search has answered (jiyi.store.usage.UsageWriter): the
search does not wait for it, nothing is lost, and the store's next operation sees it.
Real SQLite files; another process's write lock is a real second connection."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jiyi.memory import Memory
from jiyi.store.base import Touch, Write
from jiyi.store.sqlite import SQLiteStore, _Checkpoints

EMBEDDER = "hash:256"


def _store_with_tea(path: Path) -> str:
    with Memory.open(path, embedder=EMBEDDER, background=False) as m:
        tea = m.add("Alice drinks green tea every morning", user_id="alice", infer=False).item
        assert tea is not None
        return tea.id


def _counts(path: Path, item_id: str) -> tuple[int, int]:
    """The item's access_count and the number of logged accesses, read by a plain connection."""
    with sqlite3.connect(path) as raw:
        count = raw.execute("SELECT access_count FROM items WHERE id = ?", (item_id,)).fetchone()[0]
        logged = raw.execute("SELECT count(*) FROM memory_access").fetchone()[0]
    return int(count), int(logged)


def test_a_search_answers_while_its_usage_write_waits_for_the_file(tmp_path: Path) -> None:
    """Another connection holds the write lock while the search runs: the search answers,
    and its usage write commits once the lock is free. (Written before answering, it
    would have waited out the store's timeout, failed and been dropped.)"""
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    m = Memory(SQLiteStore(path, timeout=20.0), embedder=EMBEDDER, background=False)
    try:
        assert [h.item.id for h in m.search("green tea", user_id="alice")] == [tea]
        assert _counts(path, tea) == (0, 0)  # not committed yet: the lock is held
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # The store's next operation waits for it.
    assert m.get(tea).access_count == 1
    assert len(m.retrievals(item_id=tea).accesses) == 1
    m.close()
    assert _counts(path, tea) == (1, 1)


def test_queued_usage_writes_commit_together(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    store = SQLiteStore(path)
    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    store._send_usage([Write((Touch("default", (tea,), at),)) for _ in range(3)])
    assert _counts(path, tea) == (3, 0)
    store.close()


def test_closing_the_store_sends_what_is_queued(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    with Memory(SQLiteStore(path), embedder=EMBEDDER, background=False) as m:
        m.search("green tea", user_id="alice")
        m.search("tea in the morning", user_id="alice")
    assert _counts(path, tea) == (2, 2)


@pytest.mark.parametrize("background", [True, False])
def test_another_reader_sees_the_usage_write(tmp_path: Path, background: bool) -> None:
    """In the background, after ``flush()``; switched off (A/B runs), once the search answers."""
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    store = SQLiteStore(path)
    store._background_usage = background
    with Memory(store, embedder=EMBEDDER, background=False) as m:
        m.search("green tea", user_id="alice")
        if background:
            store.flush()
        assert _counts(path, tea) == (1, 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_searches_and_writes_its_own_usage(tmp_path: Path) -> None:
    """A store used before a fork (its writer thread running) still works in the child:
    the child's search is not stuck waiting for the parent's thread."""
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    m = Memory(SQLiteStore(path), embedder=EMBEDDER, background=False)
    m.search("green tea", user_id="alice")  # the writer thread now runs in this process
    m.store.flush()  # type: ignore[attr-defined]
    pid = os.fork()
    if pid == 0:  # the child: search, let the store write, report by exit status
        code = 1
        try:
            m.search("green tea", user_id="alice")
            code = 0 if m.get(tea).access_count == 2 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    m.close()
    assert _counts(path, tea) == (2, 2)


def test_usage_commits_leave_the_log_checkpoint_to_a_thread_of_its_own(tmp_path: Path) -> None:
    """A usage commit skips SQLite's in-commit log checkpoint (a search would wait for its
    syncs); the store checkpoints on its own thread, so a store that only searches still
    keeps its log short, and every count is in the file."""
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    store = SQLiteStore(path)
    with Memory(store, embedder=EMBEDDER) as m:
        for _ in range(600):
            assert m.search("green tea", user_id="alice")
        store.flush()
        store._checkpoints.wait()
        conn = sqlite3.connect(path)
        try:
            log = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        finally:
            conn.close()
    # 600 usage commits without a checkpoint leave ~5,300 pages (~8.9 each: the row, the
    # usage-columns index, the retrieval log's rows and indexes); so did passive checkpoints
    # alone on a busy disk (a commit always came while one ran, so the log never restarted).
    # A log past _Checkpoints.RESTART_AT has the next usage commit checkpoint inside the
    # commit: measured 51-910 pages after 600 searches, with or without a disk-bound writer
    # running beside them.
    assert log < 2 * _Checkpoints.RESTART_AT
    assert _counts(path, tea) == (600, 600)


def _log_pages(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        conn.close()


def test_a_log_that_missed_its_restart_is_checkpointed_inside_the_next_usage_commit(tmp_path: Path) -> None:
    """When a passive checkpoint finds the log past RESTART_AT (commits kept coming while
    checkpoints ran, so it never restarted), the next usage commit checkpoints inside the
    commit, as SQLite does by default, and the log starts again from its beginning."""
    path = tmp_path / "m.db"
    tea = _store_with_tea(path)
    store = SQLiteStore(path)
    with Memory(store, embedder=EMBEDDER) as m:
        store._checkpoints.every = 10**9  # no checkpoint thread: the log only grows
        for _ in range(250):
            m.search("green tea", user_id="alice")
        store.flush()
        grown = _log_pages(path)
        assert grown >= _Checkpoints.RESTART_AT
        store._checkpoints._run(store._connect, 250)  # what the thread does, here
        assert store._checkpoints.in_commit
        m.search("green tea", user_id="alice")  # checkpoints inside its commit
        m.search("green tea", user_id="alice")  # the log restarts at this commit
        store.flush()
        assert not store._checkpoints.in_commit
        assert _log_pages(path) < 100 < grown
    assert _counts(path, tea) == (252, 252)
