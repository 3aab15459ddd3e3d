"""Ids are unique per tenant, in every backend (issue 15, item 4).

Before, an item id was unique across all tenants: another tenant could import
``profile-<hash>`` (computable from tenant, scope and name) first and block that profile
for good, and "id already taken" on import told whether an id existed in any tenant.
Now the same id in two tenants is two items, and existing stores are migrated in place.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import psycopg
import pytest

import jiyi.store.sqlite as sqlite_store
from jiyi.memory import AsyncMemory, Memory
from jiyi.profile import profile_item_id
from jiyi.store.base import GetHistory, GetItems, Retrieve, Store, Write
from jiyi.store.open import open_store
from jiyi.store.postgres import MIGRATIONS as PG_MIGRATIONS
from jiyi.store.postgres import PostgresStore
from jiyi.store.sqlite import SQLiteStore
from jiyi.testing.conformance import MODEL, flt, get, keyword_ids, make_item, put, unit, upsert
from jiyi.text.tokenize import query_terms
from tests.pg import drop_schema, give_back, new_schema, pg_dsn, take_schema  # noqa: F401

EMBEDDER = "hash:256"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "ids.db")
        return
    dsn: str = request.getfixturevalue("pg_dsn")
    schema = take_schema()
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    give_back(dsn, schema)


def test_another_tenant_cannot_block_a_profile(store_url: str) -> None:
    with Memory(open_store(store_url), embedder=EMBEDDER) as mem:
        taken = profile_item_id("acme", "user", "alice")
        squat = {"id": taken, "content": "squatting on acme's profile id", "user_id": "mallory"}
        assert mem.import_items([squat], tenant_id="evil").imported == 1
        profile = mem.set_profile(user_id="alice", tenant_id="acme", profession="engineer")
        assert profile["profession"] == "engineer" and profile.item_id == taken
        assert mem.profile(user_id="alice", tenant_id="acme")["profession"] == "engineer"
        assert mem.get(taken, tenant_id="evil").content == "squatting on acme's profile id"


def test_import_answers_alike_whether_an_id_exists_elsewhere_or_not(store_url: str) -> None:
    with Memory(open_store(store_url), embedder=EMBEDDER) as mem:
        mine = mem.add("Acme's build runs on Fridays", user_id="ops", tenant_id="acme").item
        assert mine is not None
        probe = {"content": "probe text of another tenant", "user_id": "x"}
        existing = mem.import_items([{**probe, "id": mine.id}], tenant_id="evil")
        fresh = mem.import_items([{**probe, "id": "never-used-anywhere"}], tenant_id="evil")
        assert (existing.imported, fresh.imported) == (1, 1)
        assert mem.get(mine.id, tenant_id="acme") == mine  # untouched
        assert [e.action.value for e in mem.history(mine.id, tenant_id="acme")] == ["add"]
        assert mem.get(mine.id, tenant_id="evil").content == probe["content"]


async def test_rest_import_of_another_tenants_ids_keeps_them_apart(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from jiyi.server.app import create_app
    from jiyi.server.auth import ApiKeys

    memory = AsyncMemory(SQLiteStore(tmp_path / "rest.db"), embedder=EMBEDDER)
    keys = ApiKeys()
    acme, evil = keys.add("acme", "owner")[1], keys.add("evil", "owner")[1]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r = await c.post(
                "/v1/memories",
                json={"content": "acme secret plan", "user_id": "a"},
                headers={"X-API-Key": acme},
            )
            taken = r.json()["item"]["id"]
            replies = [
                await c.post(
                    "/v1/import",
                    content=json.dumps({"id": i, "content": "probe text", "user_id": "x"}).encode(),
                    headers={"X-API-Key": evil},
                )
                for i in (taken, "fresh-id-1")
            ]
            assert [(r.status_code, r.json()) for r in replies] == [
                (200, {"imported": 1, "embedded": 1, "retrievals": 0})
            ] * 2
            got = (await c.get(f"/v1/memories/{taken}", headers={"X-API-Key": acme})).json()
            assert got["content"] == "acme secret plan"
            got = (await c.get(f"/v1/memories/{taken}", headers={"X-API-Key": evil})).json()
            assert got["content"] == "probe text" and got["tenant_id"] == "evil"
    finally:
        await memory.aclose()


# ---------------------------------------------------------------- upgrading existing stores


def _two_tenants_before(store: Store) -> tuple[list[object], np.ndarray]:
    rng = np.random.default_rng(5)
    items = [
        make_item("kept across the upgrade alpha", tags=("x", "y")),
        make_item("another tenant's beta", tenant_id="t2"),
        make_item("threaded gamma", thread_id="th"),
    ]
    put(store, *items, vectors=[unit(rng) for _ in items])
    return list(items), unit(rng)


def _check_after_upgrade(store: Store, items: list[object], q: np.ndarray) -> None:
    for item in items:
        assert get(store, item) == item  # type: ignore[arg-type]
    a = items[0]
    assert keyword_ids(store, "alpha") == {a.id}  # type: ignore[attr-defined]
    cands = store.execute(Retrieve(flt(), MODEL, q, query_terms("alpha"), 10, 10))
    assert {c.item.id for c in cands} == {items[0].id, items[2].id}  # type: ignore[attr-defined]
    assert all(c.vector is not None for c in cands)
    # The same id now lives in another tenant next to the old one.
    twin = make_item("the twin in t2", id=a.id, tenant_id="t2")  # type: ignore[attr-defined]
    store.execute(Write((upsert(twin),)))
    assert get(store, twin) == twin and get(store, a) == a  # type: ignore[arg-type]
    assert store.execute(GetItems("t2", (a.id,))) == [twin]  # type: ignore[attr-defined]
    assert len(store.execute(GetHistory("t1", a.id))) == 1  # type: ignore[attr-defined]


def test_sqlite_store_is_migrated_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    names = [name for name, _ in sqlite_store.MIGRATIONS]
    before = names.index("item ids unique per tenant")
    with monkeypatch.context() as m:
        m.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:before])
        with SQLiteStore(path) as store:
            items, q = _two_tenants_before(store)
    with sqlite3.connect(path) as conn:
        assert "UNIQUE" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'items'").fetchone()[0]
    with SQLiteStore(path) as store:
        assert before + 1 in store.applied_migrations()
        _check_after_upgrade(store, items, q)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert triggers == {"items_changes_insert", "items_changes_update", "items_changes_delete"}
        # Purging cascades to the rebuilt child tables.
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM items")
        assert conn.execute("SELECT count(*) FROM vectors").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM item_tags").fetchone() == (0,)


def test_postgres_store_is_migrated_in_place(pg_dsn: str) -> None:  # noqa: F811
    schema = new_schema()
    version = [name for name, _ in PG_MIGRATIONS].index("item ids unique per tenant") + 1
    s = f'"{schema}"'
    try:
        with PostgresStore(pg_dsn, schema=schema) as store:
            items, q = _two_tenants_before(store)
        # Back to the schema before the migration, data kept.
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {s}.items DROP CONSTRAINT items_tenant_id_key")
            conn.execute(f"ALTER TABLE {s}.items ADD CONSTRAINT items_id_key UNIQUE (id)")
            conn.execute(f"DELETE FROM {s}.jiyi_schema_migrations WHERE version = %s", (version,))
        with PostgresStore(pg_dsn, schema=schema) as store:
            assert version in store.applied_migrations()
            _check_after_upgrade(store, items, q)
        with psycopg.connect(pg_dsn) as conn:
            names = {
                r[0]
                for r in conn.execute(
                    "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass", (f"{s}.items",)
                )
            }
        assert "items_tenant_id_key" in names and "items_id_key" not in names
    finally:
        drop_schema(pg_dsn, schema)
