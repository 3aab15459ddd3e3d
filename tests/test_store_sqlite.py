"""The SQLite backend: the whole conformance suite (file and ``":memory:"``) plus file-only checks."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from jiyi.errors import InvalidInput, StoreCorrupt, StoreReadOnly
from jiyi.store.base import GetItems, ListItems, Retrieve, Store, Write
from jiyi.store.sqlite import MIGRATIONS, SQLiteStore
from tests.conformance import (
    MODEL,
    StoreConformance,
    all_ids,
    flt,
    make_item,
    put,
    unit,
    upsert,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    path = tmp_path / "jiyi.db" if request.param == "file" else ":memory:"
    s = SQLiteStore(path)
    yield s
    s.close()


class TestSQLiteConformance(StoreConformance):
    """Every conformance test, on a file and in memory."""


# ---------------------------------------------------------------- file-only behaviour


def _sql(path: Path, query: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_migrations_are_recorded_and_reopening_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as s:
        assert isinstance(s, SQLiteStore)
        assert s.pending_migrations() == []
        assert s.applied_migrations() == list(range(1, len(MIGRATIONS) + 1))
        put(s, make_item("persisted"))
    rows = _sql(path, "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
    assert [(v, n) for v, n, _ in rows] == [(v, name) for v, (name, _) in enumerate(MIGRATIONS, start=1)]
    assert _sql(path, "PRAGMA application_id") == [(0x4A495949,)]

    with SQLiteStore(path) as s2:
        assert isinstance(s2, SQLiteStore)
        assert s2.pending_migrations() == []
        assert s2.migrate() == []
        assert all_ids(s2) != []  # data survived the reopen
    assert _sql(path, "SELECT version, name, applied_at FROM schema_migrations ORDER BY version") == rows


def test_fresh_store_reports_what_it_applied(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "fresh.db") as s:
        assert isinstance(s, SQLiteStore)
        assert s.migrate() == []  # __init__ already migrated


def test_non_sqlite_file_raises_store_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "random.db"
    data = np.random.default_rng(0).bytes(8192)
    path.write_bytes(data)
    with pytest.raises(StoreCorrupt):
        SQLiteStore(path)
    assert path.read_bytes() == data


def _foreign_db(path: Path, application_id: int = 0) -> bytes:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE foo (x INTEGER, y TEXT)")
        conn.execute("INSERT INTO foo VALUES (1, 'bar')")
        if application_id:
            conn.execute(f"PRAGMA application_id = {application_id}")
        conn.commit()
    finally:
        conn.close()
    return path.read_bytes()


def test_foreign_sqlite_file_raises_store_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    _foreign_db(path)
    with pytest.raises(StoreCorrupt):
        SQLiteStore(path)
    assert _sql(path, "SELECT * FROM foo") == [(1, "bar")]
    assert {r[0] for r in _sql(path, "SELECT name FROM sqlite_master")} == {"foo"}


def test_sqlite_file_of_another_application_raises_store_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "other-app.db"
    _foreign_db(path, application_id=0x12345678)
    with pytest.raises(StoreCorrupt):
        SQLiteStore(path)
    assert _sql(path, "SELECT * FROM foo") == [(1, "bar")]


def test_foreign_sqlite_file_is_left_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    before = _foreign_db(path)
    with pytest.raises(StoreCorrupt):
        SQLiteStore(path)
    assert path.read_bytes() == before
    assert _sql(path, "PRAGMA journal_mode") == [("delete",)]


def _open_connections() -> dict[int, sqlite3.Connection]:
    def is_open(conn: sqlite3.Connection) -> bool:
        try:
            conn.total_changes  # noqa: B018 - raises on a closed connection
        except sqlite3.ProgrammingError:
            return False
        return True

    # isinstance() on every live object can wake lazy modules (e.g. torch's) that warn.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {id(o): o for o in gc.get_objects() if isinstance(o, sqlite3.Connection) and is_open(o)}


def test_refused_file_is_not_left_open(tmp_path: Path) -> None:
    path = tmp_path / "random.db"
    path.write_bytes(np.random.default_rng(1).bytes(8192))
    gc.collect()
    gc.disable()
    try:
        before = _open_connections()
        with pytest.raises(StoreCorrupt):
            SQLiteStore(path)
        leaked = _open_connections().keys() - before.keys()
    finally:
        gc.enable()
        gc.collect()
    assert not leaked


def test_foreign_file_refusal_closes_its_connections(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    _foreign_db(path)
    gc.collect()
    gc.disable()
    try:
        before = _open_connections()
        with pytest.raises(StoreCorrupt):
            SQLiteStore(path)
        leaked = _open_connections().keys() - before.keys()
    finally:
        gc.enable()
        gc.collect()
    assert not leaked


def test_read_only_store_reads_but_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    item = make_item("read me only")
    with SQLiteStore(path) as s:
        put(s, item)
    with SQLiteStore(path, read_only=True) as ro:
        assert ro.execute(GetItems(item.tenant_id, (item.id,))) == [item]
        assert all_ids(ro) == [item.id]
        with pytest.raises(StoreReadOnly):
            ro.execute(Write((upsert(make_item("nope")),)))
        with pytest.raises(StoreReadOnly):
            ro.execute(Write(()))
    with SQLiteStore(path) as s:
        assert all_ids(s) == [item.id]


async def test_read_only_store_refuses_async_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    SQLiteStore(path).close()
    with SQLiteStore(path, read_only=True) as ro:
        with pytest.raises(StoreReadOnly):
            await ro.aexecute(Write((upsert(make_item("nope")),)))
        assert (await ro.aexecute(ListItems(flt()))).items == []


def test_read_only_store_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        SQLiteStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_path_in_missing_directory_raises_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        SQLiteStore(tmp_path / "no" / "such" / "dir" / "jiyi.db")
    assert not (tmp_path / "no").exists()


def test_directory_as_path_raises_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        SQLiteStore(tmp_path)


def test_wal_mode_is_on_for_files(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with SQLiteStore(path) as s:
        put(s, make_item("wal"))
        assert _sql(path, "PRAGMA journal_mode") == [("wal",)]
    assert _sql(path, "PRAGMA journal_mode") == [("wal",)]


def test_memory_stores_are_private(tmp_path: Path) -> None:
    with SQLiteStore(":memory:") as a, SQLiteStore(":memory:") as b:
        put(a, make_item("only in a"))
        assert len(all_ids(a)) == 1
        assert all_ids(b) == []
    assert not list(tmp_path.iterdir())


def test_file_store_readers_see_committed_writes_across_stores(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    rng = np.random.default_rng(0)
    q = unit(rng)
    with SQLiteStore(path) as writer, SQLiteStore(path) as reader:
        put(writer, make_item("shared fig"), vectors=[q])
        cands = reader.execute(Retrieve(flt(), MODEL, q, ("fig",), vector_k=5, keyword_k=5))
        assert len(cands) == 1


def test_a_write_rebuilds_only_the_cached_scopes_it_touched(tmp_path: Path) -> None:
    path = tmp_path / "scopes.db"
    rng = np.random.default_rng(1)
    q = unit(rng)
    alice, bob = ("user:alice",), ("user:bob",)
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        put(store, make_item("alice fig"), make_item("bob fig", user_id="bob"), vectors=[q, q])

        def search(scopes: tuple[str, ...]) -> list[str]:
            found = store.execute(Retrieve(flt(scope_keys=scopes), MODEL, q, (), vector_k=10, keyword_k=0))
            return sorted(c.item.content for c in found)

        def cached() -> dict[tuple[str, ...], object]:
            return {k[0].scope_keys: v for k, v in store._local.scopes.items()}

        assert (
            search(alice) == ["alice fig"]
            and search(bob) == ["bob fig"]
            and search(())
            == [
                "alice fig",
                "bob fig",
            ]
        )
        before = cached()
        # Another connection (as another process would) writes into bob's scope only.
        put(other, make_item("bob plum", user_id="bob"), vectors=[q])
        assert search(alice) == ["alice fig"]
        assert search(bob) == ["bob fig", "bob plum"]
        assert search(()) == ["alice fig", "bob fig", "bob plum"]  # the tenant-wide view changed too
        after = cached()
        assert after[alice] is before[alice]  # untouched scope: no rebuild
        assert after[bob] is not before[bob] and after[()] is not before[()]
        # Moving an item between scopes invalidates both.
        moved = make_item("moving fig", user_id="bob")
        store.execute(Write((upsert(moved, q),)))
        assert "moving fig" in search(bob)
        store.execute(Write((upsert(moved.evolve(user_id="alice"), q),)))
        assert search(alice) == ["alice fig", "moving fig"] and "moving fig" not in search(bob)
        store.execute(Write((upsert(moved.evolve(user_id="carol"), q),)))
        assert search(alice) == ["alice fig"] and search(("user:carol",)) == ["moving fig"]


_WRITER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    from jiyi.model import MemoryItem
    from jiyi.store.base import HistoryAction, HistoryEvent, Upsert, Write
    from jiyi.store.sqlite import SQLiteStore

    path, name, ready_dir, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    with SQLiteStore(path) as store:
        (ready_dir / name).touch()
        deadline = time.monotonic() + 30
        while len(list(ready_dir.iterdir())) < 2:  # start writing together
            if time.monotonic() > deadline:
                sys.exit("the other writer never started")
            time.sleep(0.005)
        for k in range(n):
            item = MemoryItem.build(id=f"{name}-{k:03d}", tenant_id="t1", content=f"written by {name} {k}", user_id="alice")
            event = HistoryEvent(item_id=item.id, tenant_id="t1", action=HistoryAction.ADD, at=item.created_at,
                                 version=1, after=item.to_json_dict())
            store.execute(Write((Upsert(item, f"written by {name} {k}", event),)))
    """
)


@pytest.mark.parametrize("precreate", [True, False], ids=["existing-file", "fresh-file"])
def test_two_processes_write_the_same_file(tmp_path: Path, precreate: bool) -> None:
    path = tmp_path / "multi.db"
    ready = tmp_path / "ready"
    ready.mkdir()
    if precreate:
        SQLiteStore(path).close()
    env = {**os.environ, "PYTHONWARNINGS": "error::ResourceWarning"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER_SCRIPT, str(path), name, str(ready), "200"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"writer failed:\n{out}\n{err}"
    with SQLiteStore(path) as s:
        ids = all_ids(s, page_size=500)
    assert len(ids) == len(set(ids)) == 400
    assert set(ids) == {f"p{w}-{k:03d}" for w in (1, 2) for k in range(200)}
    assert _sql(path, "PRAGMA integrity_check") == [("ok",)]
    assert _sql(path, "SELECT count(*) FROM history") == [(400,)]
