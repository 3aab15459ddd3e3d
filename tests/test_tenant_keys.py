"""The schema is distributable by tenant, and no statement reaches across tenants.

Past one PostgreSQL, a deployment shards by ``tenant_id`` (e.g. Citus with ``tenant_id``
as every table's distribution column). That needs, on every table that holds a tenant's
data: ``tenant_id`` on the table, leading its primary key, every unique constraint and
foreign key (a distributed table's keys must hold the distribution column, and colocated
tables join on it), and leading every btree index (so a tenant's rows are one index
range, wherever they live). These tests introspect a freshly migrated store of each
backend and check exactly that; every table and index that is not held to it is listed
below with the reason.

The second half reads the SQL of the store modules: every statement that touches a tenant
table names ``tenant_id`` (or is built around a filter that does), but for the listed
maintenance statements that work on every tenant by design. The last test runs one
tenant's calls on PostgreSQL and checks every statement the server receives: each one on a
tenant table binds that tenant, and none binds another.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from jiyi.store.base import Filter
from jiyi.store.sqlite import SQLiteStore
from tests.pg import drop_schema, new_schema, pg_dsn  # noqa: F401

SRC = Path(__file__).resolve().parents[1] / "src" / "jiyi" / "store"

GLOBAL_TABLES = {
    "schema_migrations": "SQLite's migration log: the schema's state, no tenant's data",
    "jiyi_schema_migrations": "PostgreSQL's migration log: the schema's state, no tenant's data",
    "embedding_cache": "content-addressed (model, hash of a text) -> vector, shared by every tenant "
    "by design, holds no text; in Citus distribute it by text_hash on its own (never joined)",
    "rate_events": "keyed by rate_key(tenant, session), whose leading part is the tenant, as one "
    "opaque string; never joined; in Citus distribute it by key",
    "jobs": "the background queue: workers claim runnable jobs of every tenant at once "
    "(FOR UPDATE SKIP LOCKED), which a table sharded by tenant cannot do; it holds jobs in flight "
    "and recent outcomes only; in Citus keep it on the coordinator (a local table)",
    "meta": "SQLite only: counters that tell in-process search caches the file changed",
}

TENANT_TABLES_PG = {
    "items",
    "vectors",
    "history",
    "messages",
    "checkpoints",
    "keyword_stats",
    "keyword_scopes",
    "keyword_terms",
    "scope_clock",
    "memory_access",
    "memory_access_items",
}

NON_BTREE = {
    "gin": "a GIN index holds values (tags, keyword lexemes), not keys; each shard builds its own over "
    "its tenants, and every query reaching it also has a tenant_id condition",
    "hnsw": "an approximate vector index holds vectors, not keys; each shard builds its own",
    "ivfflat": "an approximate vector index holds vectors, not keys; each shard builds its own",
}

# SQLite is one file and is never sharded; its item tables keep SQLite's rowid (the
# table's own b-tree key, not a constraint) and two side tables keyed by it, reached only
# from an items row that a tenant-led index found.
SQLITE_ROWID_TABLES = {
    "items": "pk INTEGER PRIMARY KEY is the rowid (FTS rows and the change log refer to it)",
    "history": "seq INTEGER PRIMARY KEY AUTOINCREMENT is the rowid (history order)",
    "scope_changes": "seq INTEGER PRIMARY KEY AUTOINCREMENT is the rowid (the change log's order)",
    "vectors": "an items row's vector, keyed by the items rowid",
}
SQLITE_ITEM_CHILDREN = {
    "vectors": "an items row's vector, keyed by the items rowid (SQLite only)",
    "item_tags": "an items row's tags, keyed by the items rowid; item_tags_tag finds rows by tag for "
    "filters that already chose the tenant's rows (SQLite only)",
}
SQLITE_FTS = "items_fts"  # FTS5 table and its shadow tables: rowid = items.pk, scope text per row


# ---------------------------------------------------------------- SQLite


def _sqlite_schema(path: Path) -> dict[str, tuple[list[str], list[str], list[tuple[str, bool, list[str]]]]]:
    """table -> (columns, declared primary key, [(index, unique, columns)])."""
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        out = {}
        for table in tables:
            info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
            columns = [r[1] for r in info]
            pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
            indexes = []
            for _, name, unique, _origin, _partial in conn.execute(f'PRAGMA index_list("{table}")'):
                cols = [r[2] for r in conn.execute(f'PRAGMA index_info("{name}")')]
                indexes.append((name, bool(unique), cols))
            out[table] = (columns, pk, indexes)
        return out
    finally:
        conn.close()


def test_sqlite_tenant_tables_lead_every_key_and_index_with_tenant_id(tmp_path: Path) -> None:
    schema = _sqlite_schema(tmp_path / "fresh.db")
    problems = []
    for table, (columns, pk, indexes) in schema.items():
        if table in GLOBAL_TABLES or table.startswith(SQLITE_FTS):
            continue
        if table in SQLITE_ITEM_CHILDREN:
            assert "pk" in columns and "tenant_id" not in columns, table  # the reason above still holds
            continue
        if "tenant_id" not in columns:
            problems.append(f"{table}: no tenant_id column")
            continue
        rowid = table in SQLITE_ROWID_TABLES and len(pk) == 1
        if pk and pk[0] != "tenant_id" and not rowid:
            problems.append(f"{table}: primary key {pk}")
        for name, unique, cols in indexes:
            if not cols or cols[0] != "tenant_id":
                problems.append(f"{table}: {'unique ' if unique else ''}index {name} on {cols}")
    assert problems == []
    # Every listed exception names a table that exists, so the list cannot go stale.
    for table in (*SQLITE_ROWID_TABLES, *SQLITE_ITEM_CHILDREN, "meta", "schema_migrations"):
        assert table in schema, table


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    """A brand-new schema, migrated from nothing by opening a store on it."""
    from jiyi.store.postgres import PostgresStore

    name = new_schema()
    PostgresStore(pg_dsn, schema=name).close()
    yield name
    drop_schema(pg_dsn, name)


_PG_KEYS = """
SELECT c.relname, con.conname, con.contype::text,
       array(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.n ORDER BY k.o)
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE ns.nspname = %s AND con.contype IN ('p', 'u', 'f') ORDER BY 1, 2
"""
_PG_INDEXES = """
SELECT t.relname, ic.relname, am.amname::text, x.indisunique,
       array(SELECT coalesce(a.attname::text, '<expression>') FROM unnest(x.indkey) WITH ORDINALITY k(n, o)
             LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n
             WHERE k.o <= x.indnkeyatts ORDER BY k.o)
FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_am am ON am.oid = ic.relam JOIN pg_namespace ns ON ns.oid = t.relnamespace
WHERE ns.nspname = %s ORDER BY 1, 2
"""


def test_postgres_tenant_tables_lead_every_key_and_index_with_tenant_id(pg_dsn: str, pg_schema: str) -> None:  # noqa: F811
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        tables = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT table_name::text, array_agg(column_name::text) FROM information_schema.columns "
                "WHERE table_schema = %s GROUP BY 1",
                (pg_schema,),
            )
        }
        keys = conn.execute(_PG_KEYS, (pg_schema,)).fetchall()
        indexes = conn.execute(_PG_INDEXES, (pg_schema,)).fetchall()
    assert set(tables) == TENANT_TABLES_PG | (set(tables) & set(GLOBAL_TABLES)), "a new table: classify it"
    problems = []
    for table in sorted(TENANT_TABLES_PG):
        if "tenant_id" not in tables[table]:
            problems.append(f"{table}: no tenant_id column")
    for table, name, kind, cols in keys:
        if table in TENANT_TABLES_PG and cols[:1] != ["tenant_id"]:
            problems.append(f"{table}: {_KEY_KINDS[kind]} {name} on {cols}")
    seen_kinds = set()
    for table, name, method, unique, cols in indexes:
        if table not in TENANT_TABLES_PG:
            continue
        if method in NON_BTREE and not unique:
            seen_kinds.add(method)
            continue
        if cols[:1] != ["tenant_id"]:
            problems.append(f"{table}: {method} index {name} on {cols}")
    assert problems == []
    # Every tenant table has a primary key (Citus needs one to distribute it) ...
    assert {t for t, _, kind, _ in keys if kind == "p"} >= TENANT_TABLES_PG
    # ... and the vectors table is colocated with its items: a foreign key on (tenant_id, pk).
    assert ("vectors", ("tenant_id", "pk")) in {(t, tuple(c)) for t, _, kind, c in keys if kind == "f"}
    assert "gin" in seen_kinds


# ---------------------------------------------------------------- no cross-tenant statement


_KEY_KINDS = {"p": "primary key", "u": "unique", "f": "foreign key"}
_TENANT_TABLES_SQL = TENANT_TABLES_PG | {"item_tags", "scope_changes", "items_fts"}
_REF = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(?:\{[^}]*\}\.)?([a-z_]+)\b")
# A condition on the tenant (``x.tenant_id = ...``, ``tenant_id IN``), or an insert whose
# columns or conflict key name it (the row carries its tenant). A selected tenant_id is neither.
_NAMES_TENANT = re.compile(
    r"tenant_id\s*(?:=|IN\b)|INSERT INTO [^(]*\([^)]*\btenant_id\b|ON CONFLICT \(tenant_id\b"
)

# (module, where: a function or a module-level name) -> why it may touch tenant tables
# without naming a tenant. MIGRATIONS (schema changes of every tenant at once) are skipped.
CROSS_TENANT_ALLOWED = {
    ("postgres.py", "_DUMP_SQL"): "DumpRows: a whole-store copy (jiyi copy), every tenant by design",
    ("postgres.py", "_clear_rows"): "ClearRows: a copy that overwrites the whole store",
    ("postgres.py", "_load_rows"): "LoadRows: a copy's history sequence moves past the loaded rows",
    ("sqlite.py", "_DUMP_SQL"): "DumpRows: a whole-store copy (jiyi copy), every tenant by design",
    ("sqlite.py", "_clear_rows"): "ClearRows: a copy that overwrites the whole store",
    ("sqlite.py", "_scope_state"): "the change log's position (one number for the file's search caches)",
    ("sqlite.py", "_prune_changes"): "trims the change log of the whole file (maintenance)",
    ("sqlite.py", "_bring_up_to_date"): "reads the change log of the scopes a cache holds (named by key)",
    (
        "sqlite.py",
        "_filter_sql",
    ): "tag conditions on item_tags, inside a filter whose first clause is the tenant",
    ("sqlite.py", "_changed_rows_sql"): "rows by rowid that the tenant's change log named",
    ("sqlite.py", "load_hits"): "rows by rowid that a tenant-filtered search found",
    ("sqlite.py", "_upsert"): "the item's own rowid, found or created by (tenant_id, id) just before",
    ("sqlite.py", "_purge"): "the item's own rowid, found by (tenant_id, id) just before",
    ("sqlite.py", "_set_vectors"): "the item's own rowid, found by (tenant_id, id) just before",
    ("sqlite.py", "_session_change"): "VALUES (tenant_id, ...): the row carries its tenant",
    ("sqlite.py", "_append_messages"): "VALUES (tenant_id, ...): the row carries its tenant",
    ("sqlite.py", "_load_rows"): "LoadRows: a copy's rows, each carrying its tenant",
    ("sqlite.py", "_load_item"): "LoadRows: a copy's item, its rowid just created",
}

# Helpers whose output is a tenant's filter: a placeholder of their result names the tenant.
_FILTER_HELPERS = ("_filter_sql",)


def _text(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(
        str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"  # type: ignore[attr-defined]
        for v in node.values
    )


def _filter_names(func: ast.AST) -> set[str]:
    """Names a function binds to the SQL of a filter (``where, params = _filter_sql(...)``)."""
    names = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        call = node.value
        if isinstance(call, ast.Subscript):
            call = call.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) in _FILTER_HELPERS:
            for target in node.targets:
                first = target.elts[0] if isinstance(target, ast.Tuple) else target
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def _tenant_blind_statements(module: str) -> list[tuple[str, int, str]]:
    """(where, line, statement) of every SQL text touching a tenant table without naming a
    tenant: neither ``tenant_id`` nor a filter (or module constant) that holds it."""
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    constants = {
        t.id: _text(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant | ast.JoinedStr)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, where: str, filters: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name, filters | _filter_names(child))
            elif isinstance(child, ast.Assign | ast.AnnAssign) and node is tree:
                name = ast.unparse(child.targets[0] if isinstance(child, ast.Assign) else child.target)
                if name != "MIGRATIONS":
                    visit(child, name, filters)
            elif isinstance(child, ast.Constant | ast.JoinedStr) and isinstance(
                getattr(child, "value", ""), str | list
            ):
                text = _text(child)
                tables = {t for t in _REF.findall(text) if t in _TENANT_TABLES_SQL}
                holders = [
                    n
                    for n in re.findall(r"\{([^}]*)\}", text)
                    if n in filters or _NAMES_TENANT.search(constants.get(n, ""))
                ]
                if tables and not _NAMES_TENANT.search(text) and not holders:
                    found.append((where, child.lineno, " ".join(text.split())[:120]))
            else:
                visit(child, where, filters)

    visit(tree, "<module>", set())
    return found


@pytest.mark.parametrize("module", ["postgres.py", "sqlite.py", "sqlcommon.py"])
def test_every_statement_on_a_tenant_table_names_the_tenant(module: str) -> None:
    blind = _tenant_blind_statements(module)
    unexplained = [b for b in blind if (module, b[0]) not in CROSS_TENANT_ALLOWED]
    assert unexplained == []
    used = {(module, where) for where, _, _ in blind}
    stale = {key for key in CROSS_TENANT_ALLOWED if key[0] == module} - used
    assert stale == set(), "an allowed exception no longer happens: remove it"


def test_the_filter_helpers_put_the_tenant_first() -> None:
    from jiyi.store import postgres, sqlite

    flt = Filter(tenant_id="acme", include_expired=True)
    pg_sql, pg_params = postgres._filter_sql(flt, "i")
    assert pg_sql.startswith("i.tenant_id = %(f_tenant)s") and pg_params["f_tenant"] == "acme"
    lite_sql, lite_params = sqlite._filter_sql(flt, "i")
    assert lite_sql.startswith("i.tenant_id = ?") and lite_params[0] == "acme"


def test_a_store_written_before_the_tenant_keys_is_upgraded_in_place(pg_dsn: str, pg_schema: str) -> None:  # noqa: F811
    from jiyi.memory import Memory
    from jiyi.store.postgres import MIGRATIONS, PostgresStore

    s = f'"{pg_schema}"'

    # Memory objects that are not closed: closing one closes the store they share.
    def search(store: PostgresStore, tenant: str) -> list[tuple[str, float]]:
        mem = Memory(store, embedder="hash:64", background=False, tenant_id=tenant)
        return [(h.item.id, round(h.score, 6)) for h in mem.search("green tea", user_id="alice")]

    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        for tenant in ("acme", "globex"):
            mem = Memory(store, embedder="hash:64", background=False, tenant_id=tenant)
            mem.add(f"{tenant}: Alice drinks green tea", user_id="alice", infer=False)
            mem.add(f"{tenant}: Alice lives by the sea", user_id="alice", infer=False)
        before = {t: search(store, t) for t in ("acme", "globex")}
    assert all(len(hits) == 2 for hits in before.values())
    # Back to the keys the migrations before "tenant_id leads every key" made.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in (
            f"ALTER TABLE {s}.vectors DROP CONSTRAINT vectors_item_fkey",
            f"ALTER TABLE {s}.vectors DROP CONSTRAINT vectors_pkey",
            f"ALTER TABLE {s}.items DROP CONSTRAINT items_pkey",
            f"ALTER TABLE {s}.items ADD PRIMARY KEY (pk)",
            f"ALTER TABLE {s}.vectors DROP COLUMN tenant_id",
            f"ALTER TABLE {s}.vectors ADD PRIMARY KEY (pk)",
            f"ALTER TABLE {s}.vectors ADD FOREIGN KEY (pk) REFERENCES {s}.items (pk) ON DELETE CASCADE",
            f"ALTER TABLE {s}.history DROP CONSTRAINT history_pkey",
            f"ALTER TABLE {s}.history ADD PRIMARY KEY (seq)",
        ):
            conn.execute(statement)
        version = next(v for v, (name, _) in enumerate(MIGRATIONS, 1) if name == "tenant_id leads every key")
        conn.execute(f"DELETE FROM {s}.jiyi_schema_migrations WHERE version = %s", (version,))
    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        assert store.pending_migrations() == []
        assert {t: search(store, t) for t in ("acme", "globex")} == before
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        wrong = conn.execute(
            f"SELECT count(*) FROM {s}.vectors v JOIN {s}.items i ON i.pk = v.pk WHERE v.tenant_id <> i.tenant_id"
        ).fetchone()
        assert wrong == (0,)
        assert conn.execute(f"SELECT count(*) FROM {s}.vectors").fetchone() == (4,)


# ---------------------------------------------------------------- no cross-tenant statement, run


_TABLE_IN_SQL = re.compile(r'\b(?:FROM|JOIN|INTO|UPDATE)\s+"[^"]+"\.([a-z_]+)\b')


def _bound_values(params: object) -> set[str]:
    """Every string a statement binds (lists flattened)."""
    out: set[str] = set()
    rows = params if isinstance(params, list | tuple) else [params]
    for row in rows:
        if isinstance(row, dict):
            for value in row.values():
                values = value if isinstance(value, list | tuple) else [value]
                out.update(v for v in values if isinstance(v, str))
    return out


def test_every_statement_a_tenants_calls_run_binds_that_tenant_only(
    pg_dsn: str,  # noqa: F811
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the static check reads, run: every statement PostgreSQL receives for tenant
    ``acme``'s calls (writes, searches, sessions, jobs, profiles, history, export) that
    touches a tenant table binds ``acme``, and no statement binds the other tenant."""
    import io

    from jiyi.memory import Memory
    from jiyi.store import postgres
    from jiyi.store.postgres import PostgresStore

    store = PostgresStore(pg_dsn, schema=pg_schema)
    other = Memory(store, embedder="hash:64", background=False, tenant_id="globex")
    other.add("globex: Alice drinks green tea every morning", user_id="alice")
    seen: list[tuple[str, set[str]]] = []
    run = postgres._run_sync

    def recording(conn: object, q: postgres._Query) -> object:
        seen.append((q.sql, _bound_values(q.batch if q.batch is not None else q.params)))
        return run(conn, q)  # type: ignore[arg-type]

    monkeypatch.setattr(postgres, "_run_sync", recording)
    mem = Memory(store, embedder="hash:64", background=False, tenant_id="acme")
    added = mem.add("Alice drinks green tea every morning", user_id="alice")
    mem.add("Alice drinks green tea every morning.", user_id="alice")  # a reinforcement
    mem.add("我们决定用 PostgreSQL，因为团队熟悉它", project_id="apollo", memory_type="decision")
    mem.search("what does Alice drink?", user_id="alice", explain=True)
    mem.search("数据库", project_id="apollo")
    mem.list(user_id="alice")
    mem.update(added.item.id, importance=0.9, reason="asked twice")
    mem.history(added.item.id)
    mem.stats()
    mem.remember(
        [("user", "remember that I am allergic to peanuts"), ("assistant", "noted")],
        session_id="s1",
        user_id="alice",
    )
    mem.process_jobs(worker="w")
    mem.messages("s1")
    mem.save_checkpoint("s1", agent_state={"todo": ["x"]})
    mem.profile(user_id="alice")
    mem.context("what should I eat?", user_id="alice", session_id="s1")
    mem.export_jsonl(io.StringIO(), user_id="alice")
    mem.delete(added.item.id)
    mem.delete(added.item.id, hard=True)
    monkeypatch.undo()
    store.close()

    assert len(seen) > 50  # 141 when written, 115 of them on tenant tables (every one of them)
    problems = []
    for sql, bound in seen:
        tables = {t for t in _TABLE_IN_SQL.findall(sql) if t in TENANT_TABLES_PG}
        if any("globex" in value for value in bound):
            problems.append(f"binds the other tenant: {sql[:100]}")
        elif tables and "acme" not in bound:
            problems.append(f"does not bind the tenant: {' '.join(sql.split())[:140]}")
    assert problems == []
