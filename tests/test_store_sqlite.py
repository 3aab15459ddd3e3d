"""The SQLite backend: the whole conformance suite (file and ``":memory:"``) plus file-only checks."""

from __future__ import annotations

import gc
import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import jiyi.store.sqlite as sqlite_backend
from jiyi.errors import InvalidInput, StoreCorrupt, StoreReadOnly
from jiyi.model import MemoryItem, MemoryType, Scope, Status, Visibility
from jiyi.store.base import (
    Candidate,
    GetItems,
    ListItems,
    Purge,
    Retrieve,
    Store,
    Touch,
    Upsert,
    Viewer,
    Write,
)
from jiyi.store.sqlcommon import ts
from jiyi.store.sqlite import MIGRATIONS, SQLiteStore
from jiyi.testing.conformance import (
    DIM,
    MODEL,
    NOW,
    T0,
    TENANT,
    StoreConformance,
    all_ids,
    flt,
    get,
    make_item,
    purge,
    put,
    unit,
    upsert,
)
from jiyi.text.tokenize import query_terms

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


def test_a_reader_sees_another_stores_rewrites_and_touches_of_items_it_parsed(tmp_path: Path) -> None:
    """The reader keeps parsed items by row and log position, its keyword documents by scope:
    another store's rewrite (a new document, new terms) and touch (usage columns only) show."""
    path = tmp_path / "shared.db"
    q = unit(np.random.default_rng(2))
    item = make_item("the blue fig tree")
    with SQLiteStore(path) as writer, SQLiteStore(path) as reader:
        put(writer, item, vectors=[q])

        def found(*words: str) -> list[Candidate]:
            return reader.execute(Retrieve(flt(), MODEL, q, words, vector_k=5, keyword_k=5))

        (first,) = found("fig")
        assert first.item.content == "the blue fig tree"
        assert first.keyword is not None
        put(writer, item.evolve(content="the red plum tree", version=2), vectors=[q])
        (second,) = found("plum")
        assert (second.item.content, second.item.version) == ("the red plum tree", 2)
        assert second.keyword is not None
        assert found("fig")[0].keyword is None  # the old words are gone from the keyword index
        writer.execute(Write((Touch(TENANT, (item.id,), NOW),)))
        writer.flush()
        (third,) = found("plum")
        assert (third.item.access_count, third.item.last_used_at) == (1, NOW)
        assert third.item.content == "the red plum tree"


def test_a_write_patches_only_the_cached_scopes_it_touched(tmp_path: Path) -> None:
    path = tmp_path / "scopes.db"
    rng = np.random.default_rng(1)
    q = unit(rng)
    alice, bob = ("user:alice",), ("user:bob",)
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        put(store, make_item("alice fig"), make_item("bob fig", user_id="bob"), vectors=[q, q])

        def search(scopes: tuple[str, ...]) -> list[str]:
            found = store.execute(Retrieve(flt(scope_keys=scopes), MODEL, q, (), vector_k=10, keyword_k=0))
            return sorted(c.item.content for c in found)

        def cached() -> dict[tuple[str, ...], tuple[object, int]]:
            return {k[0].scope_keys: (v, v.patches) for k, v in store._local.scopes.items()}

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
        assert after[alice] == before[alice]  # untouched scope: neither rebuilt nor patched
        for touched in (bob, ()):  # patched in place from the change log, not rebuilt
            assert after[touched][0] is before[touched][0] and after[touched][1] == before[touched][1] + 1
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


# ---------------------------------------------------------------- incremental scope caches
#
# A reader keeps each searched filter's rows in memory and patches them from the change
# log when others write. Patched answers must equal those of a store that builds the
# same filter from scratch, after any sequence of writes.

_WORDS = ("apple", "banana", "cherry", "grape", "melon", "苹果", "香蕉", "葡萄")
_TIMES = (
    None,
    T0,
    T0,  # equal times: thread order falls back to insertion order
    T0 + timedelta(hours=1),
    T0 - timedelta(days=40),
    T0 - timedelta(days=400),
)
_SCOPES: tuple[dict[str, Any], ...] = (
    {"scope": Scope.USER, "user_id": "alice"},
    {"scope": Scope.USER, "user_id": "bob"},
    {"scope": Scope.PROJECT, "project_id": "p1", "user_id": None},
    {"scope": Scope.PROJECT, "project_id": "p2", "user_id": None},
)


def _exact_vector(r: random.Random) -> np.ndarray:
    # Entries in {-1, -.5, 0, .5, 1}: every dot product is exact in float32 whatever the
    # summation order, so scores (and their ties) are bit-identical however rows are laid out.
    return np.array(r.choices((-1.0, -0.5, 0.0, 0.5, 1.0), k=DIM), dtype=np.float32)


def _random_fields(r: random.Random) -> dict[str, Any]:
    creator = r.choice((None, "ann", "ben"))
    return {
        **r.choice(_SCOPES),
        "content": " ".join(r.choices(_WORDS, k=r.randint(1, 3))),
        "thread_id": r.choice((None, "t1", "t1", "t2")),
        "occurred_at": r.choice(_TIMES),
        "expires_at": r.choice((None, None, None, NOW - timedelta(days=1), NOW + timedelta(days=1))),
        "status": r.choice((Status.ACTIVE, Status.ACTIVE, Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED)),
        "visibility": r.choice(tuple(Visibility)),
        "memory_type": r.choice((MemoryType.FACT, MemoryType.PREFERENCE)),
        "tags": r.choice(((), (), ("x",))),
        "metadata": {} if creator is None else {"created_by": creator},
    }


def _random_vector_upsert(r: random.Random, item: MemoryItem, new: bool) -> Upsert:
    roll = r.random()
    if roll < 0.15 and not new:
        return upsert(item)  # no vector: the stored one stays
    if roll < 0.25:
        return upsert(item, _exact_vector(r), model_id="other-model")  # replaces this model's
    if roll < 0.3:
        return upsert(item)
    return upsert(item, _exact_vector(r))


_FILTERS: tuple[dict[str, Any], ...] = (
    {"scope_keys": ("user:alice",)},
    {"scope_keys": ("user:alice", "project:p1")},
    {},
    {"scope_keys": ("project:p1", "project:p2"), "viewer": Viewer(actor="ann", projects=("p1",))},
    {"statuses": (Status.ACTIVE, Status.SUPERSEDED), "viewer": Viewer(actor="ben", projects=())},
    {"scope_keys": ("user:bob",), "include_expired": True, "statuses": (Status.ARCHIVED,)},
    {"memory_types": (MemoryType.PREFERENCE,), "tags": ("x",)},
)


def _random_retrieve(r: random.Random) -> Retrieve:
    windows: dict[str, Any] = {}
    if r.random() < 0.3:
        windows["time_ranges"] = ((T0 - timedelta(days=50), T0 - timedelta(days=30)),)
    if r.random() < 0.3:
        windows["time_months"] = (r.randint(1, 12),)
    return Retrieve(
        flt(**r.choice(_FILTERS)),
        MODEL,
        None if r.random() < 0.15 else _exact_vector(r),
        query_terms(" ".join(r.choices(_WORDS, k=2))) if r.random() < 0.8 else (),
        vector_k=r.randint(1, 4),
        keyword_k=r.randint(0, 4),
        neighbours=r.randint(0, 2),
        **windows,
    )


def _answer(cands: list[Candidate]) -> list[tuple[Any, ...]]:
    return [
        (
            c.item,
            c.cosine,
            c.keyword,
            None if c.vector is None else c.vector.tobytes(),
            c.prev_id,
            c.next_id,
            c.prev_cosine,
            c.next_cosine,
            c.prev_keyword,
            c.next_keyword,
        )
        for c in cands
    ]


def _fresh_answer(path: Path, op: Retrieve) -> list[tuple[Any, ...]]:
    with SQLiteStore(path) as fresh:  # a new store has no cache: it builds the filter's rows
        return _answer(fresh.execute(op))


def _cache_counts(store: Store) -> int:
    """How many times the calling thread's cached scopes were patched."""
    return sum(v.patches for v in getattr(cast(SQLiteStore, store)._local, "scopes", {}).values())


@pytest.mark.parametrize(
    ("seed", "keep"), [(1, None), (2, None), (3, None), (4, 6)], ids=["s1", "s2", "s3", "s4-short-log"]
)
def test_patched_scope_caches_answer_like_a_fresh_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, keep: int | None
) -> None:
    """Seeded random writes (inserts, replacements that move scope, thread, time, status,
    visibility, creator, expiry, tags or vector; purges; touches; rolled-back writes),
    half of them through a second store on the same file, each followed by searches of
    the long-lived store compared with a store that builds from scratch."""
    if keep is not None:
        monkeypatch.setattr(sqlite_backend, "CHANGE_LOG_KEEP", keep)  # prune all the time
    r = random.Random(seed)
    path = tmp_path / "prop.db"
    items: dict[str, MemoryItem] = {}
    patched = 0
    with SQLiteStore(path) as live, SQLiteStore(path) as other:
        for _ in range(15):  # a base for the first searches to cache
            item = make_item(**_random_fields(r))
            items[item.id] = item
            live.execute(Write((_random_vector_upsert(r, item, new=True),)))
        for step in range(90):
            writer = r.choice((live, other))
            roll = r.random()
            changes: list[Any] = []
            for _ in range(r.choice((1, 1, 1, 3))):
                if roll < 0.4 or not items:
                    item = make_item(**_random_fields(r))
                    changes.append(_random_vector_upsert(r, item, new=True))
                elif roll < 0.8:
                    old = items[r.choice(sorted(items))]
                    item = old.evolve(**_random_fields(r), version=old.version + 1)
                    changes.append(_random_vector_upsert(r, item, new=False))
                elif roll < 0.9:
                    item = items[r.choice(sorted(items))]
                    changes.append(purge(item))
                else:
                    item = items[r.choice(sorted(items))]
                    changes.append(Touch(TENANT, (item.id,), NOW))
            if r.random() < 0.1:
                # A write that fails at its last change: none of it may show, in the log either.
                doomed = make_item(**_random_fields(r))
                broken = Upsert(doomed, "x", upsert(doomed).event, vector=_exact_vector(r), model_id=None)
                with pytest.raises(InvalidInput):
                    writer.execute(Write((*changes, broken)))
            else:
                writer.execute(Write(tuple(changes)))
                # A lone Touch is a usage write, sent from the writer's background thread:
                # another reader of the file (the fresh store) sees it once flushed.
                writer.flush()
                for change in changes:
                    if isinstance(change, Upsert):
                        items[change.item.id] = change.item
                    elif isinstance(change, Purge):
                        items.pop(change.item_id, None)
            for _ in range(3):
                op = _random_retrieve(r)
                before = _cache_counts(live)
                got = _answer(live.execute(op))
                patched += _cache_counts(live) - before
                assert got == _fresh_answer(path, op), (seed, step, op)
    if keep is None:
        assert patched > 100  # the caches really were patched, not rebuilt every time
    log_size = _sql(path, "SELECT count(*) FROM scope_changes")[0][0]
    assert isinstance(log_size, int) and log_size <= 2 * (keep or sqlite_backend.CHANGE_LOG_KEEP) + 3


def test_a_pruned_log_or_a_large_gap_rebuilds_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gap.db"
    rng = np.random.default_rng(5)
    q = unit(rng)
    alice = flt(scope_keys=("user:alice",))
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        put(store, *[make_item(f"alice {k}") for k in range(20)], vectors=[unit(rng) for _ in range(20)])

        def search() -> tuple[list[str], object]:
            found = store.execute(Retrieve(alice, MODEL, q, (), vector_k=100, keyword_k=0))
            return sorted(c.item.id for c in found), store._local.scopes[
                (replace(alice, now=None, include_expired=True), MODEL, DIM)
            ]

        ids, cached = search()
        assert len(ids) == 20
        # More changed rows than 64 + a quarter of the scope: re-reading all is cheaper.
        put(other, *[make_item(f"alice new {k}") for k in range(70)], vectors=[unit(rng) for _ in range(70)])
        ids, rebuilt = search()
        assert len(ids) == 90 and rebuilt is not cached
        # Small change, but the log no longer reaches back to the cached position.
        monkeypatch.setattr(sqlite_backend, "CHANGE_LOG_KEEP", 2)
        for k in range(6):
            put(other, make_item(f"bob {k}", user_id="bob"), vectors=[unit(rng)])
        put(other, make_item("alice last"), vectors=[unit(rng)])
        floor = _sql(path, "SELECT value FROM meta WHERE key = 'changes_floor'")[0][0]
        assert isinstance(floor, int) and floor > 0
        ids, again = search()
        assert len(ids) == 91 and again is not rebuilt


def test_touch_writes_the_usage_columns_only(tmp_path: Path) -> None:
    """A search's usage write leaves the document alone (reads lay the columns over it), so
    the items a search parsed stay parsed: only the touched ones are copied, once."""
    path = tmp_path / "touch.db"
    item = make_item("counted but not rewritten")
    with SQLiteStore(path) as store:
        put(store, item)
        doc = _sql(path, "SELECT doc FROM items")
        store.execute(Write((Touch(TENANT, (item.id,), NOW),)))
        store.flush()  # a touch alone may go to the background usage writer
        assert _sql(path, "SELECT doc FROM items") == doc
        assert _sql(path, "SELECT access_count, last_used_at FROM items") == [(1, ts(NOW))]
        got = get(store, item)
        assert got is not None
        assert (got.access_count, got.last_used_at) == (1, NOW)
        store.execute(Write((upsert(got.evolve(content="rewritten later")),)))  # a full write
        assert json.loads(_sql(path, "SELECT doc FROM items")[0][0])["access_count"] == 1


def test_usage_updates_and_rolled_back_writes_log_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    item = make_item("logged once")
    with SQLiteStore(path) as store:
        put(store, item)
        assert _sql(path, "SELECT tenant_id, scope_key FROM scope_changes") == [(TENANT, "user:alice")]
        store.execute(Write((Touch(TENANT, (item.id,), NOW),)))
        bad = make_item("never")
        no_model = Upsert(bad, "x", upsert(bad).event, vector=unit(np.random.default_rng(0)))
        with pytest.raises(InvalidInput):
            store.execute(Write((upsert(bad), no_model)))
        assert _sql(path, "SELECT count(*) FROM scope_changes") == [(1,)]
        store.execute(Write((upsert(item.evolve(user_id="bob")),)))  # a move logs both scopes
        assert _sql(path, "SELECT scope_key FROM scope_changes ORDER BY seq") == [
            ("user:alice",),
            ("user:bob",),
            ("user:alice",),
        ]


def test_returned_vectors_do_not_change_when_the_cache_is_patched(tmp_path: Path) -> None:
    path = tmp_path / "copy.db"
    rng = np.random.default_rng(6)
    first, second = unit(rng), unit(rng)
    item = make_item("changing vector")
    with SQLiteStore(path) as store:
        put(store, item, vectors=[first])
        (cand,) = store.execute(Retrieve(flt(), MODEL, first, (), vector_k=1, keyword_k=0))
        store.execute(Write((upsert(item.evolve(version=2), second),)))
        (again,) = store.execute(Retrieve(flt(), MODEL, first, (), vector_k=1, keyword_k=0))
        assert cand.vector is not None and again.vector is not None
        assert cand.vector.tobytes() == first.tobytes() and again.vector.tobytes() == second.tobytes()


_CHANGER_SCRIPT = textwrap.dedent(
    """
    import sys
    from jiyi.model import MemoryItem
    from jiyi.store.base import GetItems, HistoryAction, HistoryEvent, Purge, Upsert, Write
    from jiyi.store.sqlite import SQLiteStore

    def event(item, action=HistoryAction.UPDATE):
        return HistoryEvent(item_id=item.id, tenant_id="t1", action=action, at=item.created_at, version=1)

    with SQLiteStore(sys.argv[1]) as store:
        items = store.execute(GetItems("t1", tuple(f"base-{k:03d}" for k in range(40))))
        changes = []
        for k, item in enumerate(items):
            if k % 4 == 0:
                changes.append(Purge("t1", item.id, event(item, HistoryAction.PURGE)))
            elif k % 4 == 1:
                changes.append(Upsert(item.evolve(user_id="bob"), item.content, event(item)))
            elif k % 4 == 2:
                changes.append(Upsert(item.evolve(thread_id="other", content="moved thread"), "moved thread", event(item)))
        new = MemoryItem.build(id="from-child", tenant_id="t1", content="child fig", user_id="alice", thread_id="main")
        changes.append(Upsert(new, "child fig", event(new, HistoryAction.ADD)))
        store.execute(Write(tuple(changes)))
    """
)


def test_another_process_writes_are_patched_in(tmp_path: Path) -> None:
    path = tmp_path / "procs.db"
    rng = np.random.default_rng(8)
    base = [
        make_item(
            f"base fig {k}", id=f"base-{k:03d}", thread_id="main", occurred_at=T0 + timedelta(minutes=k)
        )
        for k in range(300)
    ]
    q = unit(rng)
    with SQLiteStore(path) as store:
        put(store, *base, vectors=[unit(rng) for _ in base])
        ops = [
            Retrieve(flt(scope_keys=("user:alice",)), MODEL, q, query_terms("fig"), 20, 20, neighbours=2),
            Retrieve(flt(), MODEL, None, query_terms("moved thread"), 0, 20, neighbours=1),
        ]
        for op in ops:
            store.execute(op)
        cached = {id(v): v.patches for v in store._local.scopes.values()}
        done = subprocess.run(
            [sys.executable, "-c", _CHANGER_SCRIPT, str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        for op in ops:
            assert _answer(store.execute(op)) == _fresh_answer(path, op)
        assert {id(v): v.patches - 1 for v in store._local.scopes.values()} == cached


def test_upgrading_a_populated_file_adds_the_change_log(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    rng = np.random.default_rng(9)
    q = unit(rng)
    old = [make_item(f"from before the log {k}") for k in range(5)]
    with SQLiteStore(path) as store:
        put(store, *old, vectors=[unit(rng) for _ in old])
    version = [name for name, _ in MIGRATIONS].index("scope change log for incremental search caches") + 1
    conn = sqlite3.connect(path)  # back to the schema before the change log, data kept
    for trigger in ("items_changes_insert", "items_changes_update", "items_changes_delete"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE scope_changes")
    conn.execute("DELETE FROM meta WHERE key = 'changes_floor'")
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
    conn.commit()
    conn.close()
    with SQLiteStore(path) as store:
        assert isinstance(store, SQLiteStore) and version in store.applied_migrations()
        op = Retrieve(flt(), MODEL, q, query_terms("before"), 10, 10)
        assert len(store.execute(op)) == 5
        store.execute(Write((purge(old[0]), upsert(make_item("after the log")))))
        assert _answer(store.execute(op)) == _fresh_answer(path, op)
        assert sum(v.patches for v in store._local.scopes.values()) == 1


def test_the_parse_cache_keeps_an_items_latest_document_only() -> None:
    """A changed row (a touch rewrites the usage counters) replaces the item's older
    document in the parse cache; either document still reads as itself."""
    from jiyi.store.sqlcommon import ItemCache

    item = MemoryItem(content="Alice prefers green tea", user_id="alice")
    other = MemoryItem(content="Bob prefers coffee", user_id="bob")
    old, new = item.model_dump_json(), item.model_copy(update={"access_count": 1}).model_dump_json()
    cache = ItemCache(size=8)
    assert cache.shared(old).access_count == 0
    cache.shared(other.model_dump_json())
    assert cache.shared(new).access_count == 1
    assert len(cache._data) == 2
    assert cache.shared(old).access_count == 0  # read again, and again the only copy
    assert len(cache._data) == 2


def test_search_items_come_from_the_parse_cache_as_private_copies(tmp_path: Path) -> None:
    """A search parses each stored document once per reader thread (jiyi.store.sqlcommon.
    ItemCache); what it returns is still the stored row: a caller changing a returned
    item's dicts changes nothing for the next search, and a changed row is read anew."""
    from jiyi.memory import Memory

    with Memory(SQLiteStore(tmp_path / "m.db"), embedder="hash:64") as mem:
        added = mem.add(
            "Alice prefers green tea in the morning",
            user_id="alice",
            metadata={"origin": {"app": "chat", "tags": ["a"]}},
        ).item
        assert added is not None
        # touch=False: the document stays the same, so the second search hits the cache.
        first = mem.search("green tea", user_id="alice", touch=False)[0].item
        first.metadata["origin"]["tags"].append("changed by the caller")
        first.metadata["new"] = 1
        again = mem.search("green tea", user_id="alice", touch=False)[0].item
        assert again.metadata == {"origin": {"app": "chat", "tags": ["a"]}}
        assert again is not first
        mem.search("green tea", user_id="alice")  # a touch rewrites the document
        assert mem.search("green tea", user_id="alice")[0].item.access_count == 1
        mem.update(added.id, content="Alice prefers jasmine tea in the morning")
        assert (
            mem.search("tea", user_id="alice")[0].item.content == "Alice prefers jasmine tea in the morning"
        )
