"""PostgreSQL search in few round trips (issue 14): a ``Retrieve`` runs its vector and
keyword searches side by side in one pipelined snapshot and commits with its last
statement, and a search's usage write is one round trip that does not wait for the disk.

Searches must find what they found before: the same hits, in the same order, with the
same scores, as a store that runs each primitive on its own in a plain transaction (the
way every search ran before pipelining), on the exact and on the HNSW path.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool

from jiyi.embed.hashing import HashEmbedder
from jiyi.errors import JiyiError
from jiyi.memory import AsyncMemory, Memory
from jiyi.read.rank import SearchHit
from jiyi.store.base import Filter, Op, Retrieve, VectorHits
from jiyi.store.postgres import PostgresStore
from jiyi.store.retrieve import retrieve
from tests.pg import drop_schema, new_schema, pg_dsn  # noqa: F401

TENANT = "pipe"
WORDS = "report meeting budget deploy garden harbor coffee tennis 预算 会议 报告 部署 咖啡 花园".split()
TIMES = ("", "last month", "上个月", "in March", "yesterday", "去年")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class OneByOne(PostgresStore):
    """Each primitive of a ``Retrieve`` on its own (:func:`jiyi.store.retrieve.retrieve`);
    give it a pool of connections that are not in autocommit, so no session is pipelined
    and every read runs in a plain transaction: the path searches took before."""

    def execute(self, op: Op[Any]) -> Any:
        if isinstance(op, Retrieve):
            return retrieve(op, super().execute)
        return super().execute(op)


def _records(rng: random.Random, user: str, n: int, threads: bool = True) -> list[dict[str, Any]]:
    out = []
    for k in range(n):
        when = START + timedelta(days=rng.randint(0, 330), minutes=k)
        record: dict[str, Any] = {
            "content": " ".join(rng.choices(WORDS, k=rng.randint(3, 8))) + f" note {user} {k}",
            "memory_type": rng.choice(("fact", "event", "decision", "preference")),
            "user_id": user,
            "occurred_at": when,
            "created_at": when,
            "importance": round(rng.uniform(0.2, 0.9), 2),
        }
        if threads and k % 4 == 0:
            record["thread_id"] = f"{user}-thread-{k % 9}"
        out.append(record)
    return out


@pytest.fixture(scope="module")
def stores(pg_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore, PostgresStore]]:  # noqa: F811
    """One schema: user "big" (400 memories, searched through HNSW: approximate_from is
    150) and "small" (60, exact), with threads and times; the pipelined store, the
    one-primitive-at-a-time reference over it, and a store on the reference's pool (not in
    autocommit: its Retrieve runs the searches side by side, but in a plain transaction)."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema, approximate_from=150)
    pool = ConnectionPool(pg_dsn, kwargs={"autocommit": False}, min_size=1, max_size=2, open=True)
    reference = OneByOne(pool=pool, approximate_from=150, schema=schema)
    reference._cache_items = False  # every candidate parsed from its document
    borrowed = PostgresStore(pool=pool, approximate_from=150, schema=schema)
    rng = random.Random(5)
    with Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT) as mem:
        mem.import_items(_records(rng, "big", 400) + _records(rng, "small", 60))
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{schema}".items, "{schema}".vectors')
        yield store, reference, borrowed
    borrowed.close()
    reference.close()
    pool.close()
    drop_schema(pg_dsn, schema)


def _queries(n: int) -> list[str]:
    rng = random.Random(9)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) + " " + rng.choice(TIMES) for _ in range(n)]


def _seen(hits: list[SearchHit]) -> list[tuple[str, float, float]]:
    return [(h.item.id, h.score, h.similarity) for h in hits]


def test_the_big_scope_walks_hnsw_and_the_small_one_is_exact(stores: Any) -> None:
    store = stores[0]
    vector = HashEmbedder(512).embed(["report budget"])[0]
    now = datetime.now(UTC)
    for user, walks in (("big", True), ("small", False)):
        ask = VectorHits(Filter(TENANT, (f"user:{user}",), now=now), "hash:512", vector, 30)
        assert ("vectors_hnsw_512" in store.explain(ask)) is walks, user


def test_pipelined_searches_find_what_one_primitive_at_a_time_finds(stores: Any) -> None:
    """Same hits, order, scores and similarities, sync and async, on both paths."""
    store, reference, borrowed = stores
    queries = _queries(30)
    pipelined = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
    plain = Memory(reference, embedder=HashEmbedder(512), tenant_id=TENANT)
    unpipelined = Memory(borrowed, embedder=HashEmbedder(512), tenant_id=TENANT)
    expected: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
    found = 0
    for user in ("big", "small"):
        for q in queries:
            want = _seen(plain.search(q, user_id=user, touch=False))
            assert _seen(pipelined.search(q, user_id=user, touch=False)) == want, (user, q)
            assert _seen(unpipelined.search(q, user_id=user, touch=False)) == want, (user, q)
            expected[user, q] = want
            found += len(want)
    assert found > 2 * len(queries) * 5  # most searches find something

    async def main() -> None:
        amem = AsyncMemory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        for (user, q), want in expected.items():
            assert _seen(await amem.search(q, user_id=user, touch=False)) == want, (user, q)

    asyncio.run(main())


def test_usage_written_in_the_background_is_seen_by_the_next_read_and_kept_at_close(
    pg_dsn: str,  # noqa: F811
) -> None:
    """A search returns before its usage write (counters and retrieval log) is sent; the
    store's next operation waits for it, so a get, a log listing and the next search see
    it, sync and async, as when the write was synchronous; close sends what is queued."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        mem.import_items(_records(random.Random(3), "small", 30))
        for _ in range(3):
            hits = mem.search("report budget", user_id="small")
            assert hits
            got = mem.get(hits[0].item.id)
            assert got is not None and got.access_count >= 1
        counts = {h.item.id: mem.get(h.item.id).access_count for h in hits}  # type: ignore[union-attr]
        assert len(mem.retrievals(user_id="small").accesses) == 3

        async def asearch() -> int:
            amem = AsyncMemory(store, embedder=HashEmbedder(512), tenant_id=TENANT, background=False)
            await amem.search("report budget", user_id="small")
            return len((await amem.retrievals(user_id="small")).accesses)

        assert asyncio.run(asearch()) == 4
        # Concurrent searches: what queues while a write is out goes in one transaction.
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: mem.search("garden coffee", user_id="small"), range(40)))
        for _ in range(5):  # queued, then close sends them
            mem.search("garden coffee", user_id="small")
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(f'SELECT count(*) FROM "{schema}".memory_access').fetchone()
            assert row is not None and row[0] == 49
            row = conn.execute(
                f'SELECT count(*) FROM "{schema}".memory_access_items a JOIN "{schema}".memory_access m '
                "ON m.id = a.access_id WHERE m.query = 'garden coffee'"
            ).fetchone()
            served = row[0] if row else 0
            row = conn.execute(
                f'SELECT sum(access_count) FROM "{schema}".items WHERE user_id = %s', ("small",)
            ).fetchone()
            assert row is not None and row[0] == served + 4 * 10  # the "report budget" searches: 10 hits each
            for item_id, n in counts.items():
                row = conn.execute(
                    f'SELECT access_count FROM "{schema}".items WHERE id = %s', (item_id,)
                ).fetchone()
                assert row is not None and row[0] >= n
    finally:
        store.close()
        drop_schema(pg_dsn, schema)


def test_searches_read_items_anew_once_their_document_or_usage_changes(
    pg_dsn: str,  # noqa: F811
) -> None:
    """Candidates are kept by their stored document's text (PostgresStore's item cache): an
    update shows at once, and so do the usage counts a search's write left."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        mem.import_items(_records(random.Random(4), "plain", 20, threads=False))
        first = mem.search("report budget", user_id="plain")[0].item
        again = mem.search("report budget", user_id="plain")[0].item
        assert again.id == first.id and again.access_count == first.access_count + 1
        assert again.last_used_at is not None
        mem.update(first.id, importance=0.95, tags=["changed"])
        hit = next(h.item for h in mem.search("report budget", user_id="plain") if h.item.id == first.id)
        assert tuple(hit.tags) == ("changed",) and hit.importance == 0.95
        assert hit == mem.get(first.id).model_copy(  # type: ignore[union-attr]
            update={"access_count": hit.access_count, "last_used_at": hit.last_used_at}
        )
    finally:
        store.close()
        drop_schema(pg_dsn, schema)


def test_a_failed_pipelined_search_rolls_back_and_the_connection_serves_the_next(
    pg_dsn: str,  # noqa: F811
) -> None:
    """A statement that fails inside a pipelined read (a table gone) raises, and the one
    pooled connection is rolled back: the next search, sync or async, works."""
    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema, max_size=1)
    try:
        mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        mem.import_items(_records(random.Random(1), "small", 30))
        before = _seen(mem.search("report budget", user_id="small", touch=False))
        assert before

        def rename(a: str, b: str) -> None:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f'ALTER TABLE "{schema}".{a} RENAME TO {b}')

        async def asearch() -> list[tuple[str, float, float]]:
            amem = AsyncMemory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
            return _seen(await amem.search("report budget", user_id="small", touch=False))

        rename("keyword_terms", "keyword_terms_away")
        with pytest.raises(JiyiError):
            mem.search("report budget", user_id="small", touch=False)
        with pytest.raises(JiyiError):
            asyncio.run(asearch())
        rename("keyword_terms_away", "keyword_terms")
        assert _seen(mem.search("report budget", user_id="small", touch=False)) == before
        assert asyncio.run(asearch()) == before
    finally:
        store.close()
        drop_schema(pg_dsn, schema)


def test_only_a_searchs_usage_write_commits_without_waiting_for_the_disk(
    pg_dsn: str,  # noqa: F811
) -> None:
    """Triggers note synchronous_commit as each write sees it: off for the usage write
    (counters and retrieval log, sync and async), on for the item writes. (The test server
    has it off for speed; the store's connections here have it on, as a real server does.)"""
    schema = new_schema()
    store = PostgresStore(make_conninfo(pg_dsn, options="-c synchronous_commit=on"), schema=schema)
    s = f'"{schema}"'
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {s}.seen (what text, sync text)")
            conn.execute(
                f"CREATE FUNCTION {s}.note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"INSERT INTO {s}.seen VALUES (TG_TABLE_NAME || ' ' || TG_OP, "
                "current_setting('synchronous_commit')); RETURN NULL; END $$"
            )
            for table in ("items", "memory_access"):
                conn.execute(
                    f"CREATE TRIGGER note AFTER INSERT OR UPDATE ON {s}.{table} "
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.note()"
                )
        mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        mem.add("the budget report is due on Friday", user_id="small")
        assert mem.search("budget report", user_id="small")

        async def asearch() -> None:
            amem = AsyncMemory(store, embedder=HashEmbedder(512), tenant_id=TENANT, background=False)
            assert await amem.search("budget", user_id="small")

        asyncio.run(asearch())
        store.flush()  # the usage writes are sent in the background
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            seen = conn.execute(f"SELECT what, sync FROM {s}.seen").fetchall()
        usage = [sync for what, sync in seen if what == "memory_access INSERT"]
        item_writes = [sync for what, sync in seen if what == "items INSERT"]
        assert usage == ["off", "off"]
        assert item_writes and set(item_writes) == {"on"}
        # The touch's UPDATE of the counters runs in the same transaction as the log.
        assert [sync for what, sync in seen if what == "items UPDATE"] == ["off", "off"]
    finally:
        store.close()
        drop_schema(pg_dsn, schema)


def test_the_keyword_index_per_scope_is_built_over_an_existing_store_and_keeps_the_hits(
    pg_dsn: str,  # noqa: F811
) -> None:
    """The migration "keyword index by scope and term" (which replaced "keyword index per
    scope") indexes the rows already stored; a keyword search of one user finds the same
    (id, score) list without it and with it, and with it reads only that user's rows
    holding the words (the other user's are never fetched)."""
    from jiyi.store.base import KeywordHits, Write
    from jiyi.store.postgres import MIGRATIONS
    from jiyi.testing.conformance import flt, make_item, upsert
    from jiyi.text.tokenize import query_terms

    schema = new_schema()
    try:
        with PostgresStore(pg_dsn, schema=schema) as store:
            crowd = [make_item(f"common filler {k} budget", user_id="bob") for k in range(3000)]
            mine = [make_item(f"common word{k % 5} note {k}", user_id="alice") for k in range(40)]
            store.execute(Write(tuple(upsert(i) for i in (*crowd, *mine))))
        name = "keyword index by scope and term"
        version = next(v for v, (n, _) in enumerate(MIGRATIONS, 1) if n == name)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP INDEX "{schema}".items_scope_terms')
            conn.execute(f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = %s', (version,))
        ops = [
            KeywordHits(flt(scope_keys=("user:alice",)), query_terms(q), 10)
            for q in ("common", "common word3")
        ]
        with PostgresStore(pg_dsn, schema=schema, migrate=False) as before:
            assert before.pending_migrations() == [(version, name)]
            expected = [[(h.id, h.score) for h in before.execute(op)] for op in ops]
        assert all(len(hits) == 10 for hits in expected)
        with PostgresStore(pg_dsn, schema=schema) as upgraded:
            assert upgraded.pending_migrations() == []
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f'ANALYZE "{schema}".items')
            assert [[(h.id, h.score) for h in upgraded.execute(op)] for op in ops] == expected
            plan = upgraded.explain(ops[0], analyze=True)
        assert "Bitmap Index Scan on items_scope_terms" in plan
        assert "Bitmap Index Scan on items_tsv " not in plan
        # Only alice's 40 rows holding the word reach the scoring (not bob's 3,000).
        assert re.search(r"Bitmap Heap Scan on items h \(actual rows=40(\.00)? ", plan), plan
    finally:
        drop_schema(pg_dsn, schema)


def test_without_pipeline_mode_searches_run_one_statement_at_a_time(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A libpq before 14 has no pipeline mode: no session is pipelined, and searches
    (with their usage writes) still work and find the same hits."""
    import jiyi.store.postgres as pg_store

    store = stores[0]
    mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
    queries = _queries(4)
    want = {(u, q): _seen(mem.search(q, user_id=u, touch=False)) for u in ("big", "small") for q in queries}
    monkeypatch.setattr(pg_store, "PIPELINE", False)
    assert pg_store._opening(False, False, True) is None
    assert pg_store._opening(True, True, True) is None
    for (user, q), hits in want.items():
        assert _seen(mem.search(q, user_id=user, touch=False)) == hits, (user, q)
    assert mem.search(queries[0], user_id="small")  # the usage write, in autocommit


def test_thread_links_are_asked_only_when_a_hit_is_in_a_thread(
    pg_dsn: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The vector and keyword statements say which hits are in a thread; when none is, the
    thread-links statement (whose answer would be empty) is not sent, and the hits are
    those of the one-primitive-at-a-time path all the same."""
    import jiyi.store.postgres as pg_store

    schema = new_schema()
    store = PostgresStore(pg_dsn, schema=schema)
    pool = ConnectionPool(pg_dsn, kwargs={"autocommit": False}, min_size=1, max_size=1, open=True)
    reference = OneByOne(pool=pool, schema=schema)
    try:
        mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
        flat = [
            {k: v for k, v in r.items() if k != "thread_id"} for r in _records(random.Random(2), "flat", 40)
        ]
        mem.import_items(flat + _records(random.Random(3), "threads", 40))
        plain = Memory(reference, embedder=HashEmbedder(512), tenant_id=TENANT)
        sent: list[str] = []
        inner = pg_store._run_batch_sync

        def spy(conn: Any, queries: Any) -> Any:
            sent.extend(q.sql for q in queries)
            return inner(conn, queries)

        monkeypatch.setattr(pg_store, "_run_batch_sync", spy)
        for user, links in (("flat", False), ("threads", True)):
            for q in _queries(6):
                sent.clear()
                hits = _seen(mem.search(q, user_id=user, touch=False))
                assert hits == _seen(plain.search(q, user_id=user, touch=False)), (user, q)
                if hits:
                    assert any(sql.startswith("WITH t AS MATERIALIZED") for sql in sent) is links, (user, q)
    finally:
        reference.close()
        pool.close()
        store.close()
        drop_schema(pg_dsn, schema)


def test_a_windowed_search_walks_both_vector_searches_in_one_batch(
    stores: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query naming a time asks two vector searches (plain, and inside the windows): the
    scope size is asked once and both walks go in one batch (or the plain search's walk
    and the exact scan of the window's rows, when they are few: WINDOW_EXACT_MAX); a scope
    searched exactly is scanned once for both (one statement, each search's k nearest in
    its part), with the hits of the one-primitive-at-a-time path."""
    import jiyi.store.postgres as pg_store

    store, reference = stores[0], stores[1]
    mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
    plain = Memory(reference, embedder=HashEmbedder(512), tenant_id=TENANT)
    batches: list[list[str]] = []
    inner = pg_store._run_batch_sync

    def spy(conn: Any, queries: Any) -> Any:
        batches.append([q.sql for q in queries])
        return inner(conn, queries)

    monkeypatch.setattr(pg_store, "_run_batch_sync", spy)
    ranges = "%(r_from0)s AND v.occurred_at"  # the exact scan of the window's rows
    for user, most, walks, scans in (("big", 0, 2, 0), ("big", 10_000, 1, 1), ("small", 10_000, 0, 0)):
        monkeypatch.setattr(pg_store, "WINDOW_EXACT_MAX", most)
        for q in ("report budget last month", "会议 上个月"):
            batches.clear()
            hits = _seen(mem.search(q, user_id=user, touch=False))
            sent = list(batches)
            assert hits == _seen(plain.search(q, user_id=user, touch=False)), (user, q)
            assert sum("hnsw.iterative_scan" in sql for batch in sent for sql in batch) == 1, (user, q)
            if walks:
                batch = next(b for b in sent if any(sql.startswith("WITH near AS") for sql in b))
                assert sum(sql.startswith("WITH near AS") for sql in batch) == walks, (user, q, batch)
                assert sum(ranges in sql for sql in batch) == scans, (user, q, batch)
                assert sum(sql.startswith("WITH near AS") or ranges in sql for b in sent for sql in b) == 2
            else:
                scan = [sql for batch in sent for sql in batch if sql.startswith("WITH scoped AS")]
                assert len(scan) == 1 and scan[0].count(" UNION ALL ") == 1, scan


def test_settings_undone_and_redone_between_two_plans_are_not_sent() -> None:
    """A walk's batch ends by setting plan_cache_mode back, the keyword round's begins by
    setting it to generic again: neither goes, the other settings and statements do."""
    import jiyi.store.postgres as pg_store

    walk, rnd = pg_store._Query("SELECT 1"), pg_store._Query("SELECT 2")
    batch = (
        pg_store._NO_SORT,
        pg_store._GENERIC_PLAN,
        walk,
        pg_store._ANY_PLAN,
        pg_store._ANY_SORT,
        pg_store._GENERIC_PLAN,
        rnd,
        pg_store._ANY_PLAN,
    )
    assert pg_store._sent_settings(batch) == {0, 1, 2, 4, 6, 7}
    assert pg_store._sent_settings((walk, pg_store._ANY_PLAN, rnd, pg_store._GENERIC_PLAN)) == {0, 1, 2, 3}
