"""The embedded default backend: one SQLite file.

* WAL journal: many readers, one writer. Each thread reads through its own connection;
  writes go through one connection under a lock, inside ``BEGIN IMMEDIATE`` so that
  two *processes* writing the same file queue on SQLite's lock instead of failing.
* Async is not a second code path: :meth:`SQLiteStore.aexecute` runs the same
  :meth:`execute` on a reader pool or the single writer thread (Datasette's pattern).
* Keyword index: an FTS5 table over pre-segmented terms (see :mod:`jiyi.text.tokenize`)
  with a hashed scope token in its own column, so a scope filter is an index lookup.
* Vectors: float32 blobs, scored exactly with numpy inside the requested scope.
* Migrations: an append-only list, each applied in its own transaction and recorded
  in ``schema_migrations``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from jiyi.errors import InvalidInput, StoreCorrupt, StoreError, StoreReadOnly
from jiyi.model import MemoryItem
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AppendMessages,
    CacheGet,
    CachePut,
    Candidate,
    ClaimJobs,
    ClearRows,
    CountEvents,
    DeleteCheckpoints,
    DeleteMessages,
    DumpRows,
    Filter,
    GetCheckpoint,
    GetHistory,
    GetItems,
    GetMessages,
    GetStats,
    HistoryEvent,
    ListCheckpoints,
    ListItems,
    ListJobs,
    LoadRows,
    Op,
    Page,
    Purge,
    PutCheckpoint,
    PutJob,
    RecordEvent,
    Retrieve,
    RowPage,
    Store,
    StoreStats,
    Touch,
    Upsert,
    Vector,
    VectorsFor,
    Write,
    check_row_kind,
    vector_from_text,
    vector_to_text,
)
from jiyi.store.sqlcommon import (
    decode_cursor,
    encode_cursor,
    from_blob,
    scope_token,
    tenant_token,
    to_blob,
    ts,
)

R = TypeVar("R")

APPLICATION_ID = 0x4A495949  # "JIYI": marks the file as ours

# Append-only: never edit a released entry, add a new one.
MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "initial schema",
        (
            """CREATE TABLE items (
                pk INTEGER PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                tenant_id TEXT NOT NULL,
                scope TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                user_id TEXT, project_id TEXT, session_id TEXT, agent_id TEXT,
                memory_type TEXT NOT NULL,
                status TEXT NOT NULL,
                visibility TEXT NOT NULL,
                source TEXT NOT NULL,
                source_id TEXT,
                confidence REAL NOT NULL,
                importance REAL NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                occurred_at TEXT,
                last_used_at TEXT,
                expires_at TEXT,
                access_count INTEGER NOT NULL,
                mention_count INTEGER NOT NULL,
                version INTEGER NOT NULL,
                doc TEXT NOT NULL
            )""",
            "CREATE INDEX items_scope ON items(tenant_id, scope_key, status)",
            "CREATE INDEX items_created ON items(tenant_id, created_at, id)",
            """CREATE TABLE item_tags (
                pk INTEGER NOT NULL REFERENCES items(pk) ON DELETE CASCADE,
                tag TEXT NOT NULL,
                PRIMARY KEY (pk, tag)
            ) WITHOUT ROWID""",
            "CREATE INDEX item_tags_tag ON item_tags(tag)",
            """CREATE TABLE vectors (
                pk INTEGER PRIMARY KEY REFERENCES items(pk) ON DELETE CASCADE,
                model TEXT NOT NULL,
                dim INTEGER NOT NULL,
                vec BLOB NOT NULL
            )""",
            "CREATE VIRTUAL TABLE items_fts USING fts5(scope, terms, tokenize = 'unicode61 remove_diacritics 2')",
            """CREATE TABLE history (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                item_id TEXT NOT NULL,
                tenant_id TEXT NOT NULL,
                action TEXT NOT NULL,
                at TEXT NOT NULL,
                version INTEGER NOT NULL,
                reason TEXT NOT NULL,
                actor TEXT,
                before TEXT,
                after TEXT
            )""",
            "CREATE INDEX history_item ON history(tenant_id, item_id, seq)",
            "CREATE TABLE rate_events (key TEXT NOT NULL, at TEXT NOT NULL)",
            "CREATE INDEX rate_events_key ON rate_events(key, at)",
            """CREATE TABLE embedding_cache (
                model TEXT NOT NULL,
                text_hash TEXT NOT NULL,
                vec BLOB NOT NULL,
                PRIMARY KEY (model, text_hash)
            ) WITHOUT ROWID""",
        ),
    ),
    (
        "index version counter and thread order",
        (
            # Bumped by writes that change what search sees (not by usage counters), so
            # readers can keep a scope's vectors in memory until the index really changes.
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            "INSERT INTO meta VALUES ('index_version', 0)",
            "CREATE INDEX items_thread ON items(tenant_id, scope_key, session_id)",
        ),
    ),
    (
        "session messages, checkpoints and the job queue",
        (
            """CREATE TABLE messages (
                tenant_id TEXT NOT NULL,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                id TEXT NOT NULL,
                role TEXT NOT NULL,
                created_at TEXT NOT NULL,
                doc TEXT NOT NULL,
                PRIMARY KEY (tenant_id, session_id, seq)
            ) WITHOUT ROWID""",
            """CREATE TABLE checkpoints (
                tenant_id TEXT NOT NULL,
                session_id TEXT NOT NULL,
                id TEXT NOT NULL,
                created_at TEXT NOT NULL,
                doc TEXT NOT NULL,
                PRIMARY KEY (tenant_id, session_id, id)
            ) WITHOUT ROWID""",
            "CREATE INDEX checkpoints_time ON checkpoints(tenant_id, session_id, created_at)",
            """CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                tenant_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                status TEXT NOT NULL,
                run_after TEXT NOT NULL,
                locked_until TEXT,
                created_at TEXT NOT NULL,
                doc TEXT NOT NULL
            )""",
            "CREATE INDEX jobs_runnable ON jobs(status, run_after)",
        ),
    ),
    (
        "explicit threads for context",
        (
            "ALTER TABLE items ADD COLUMN thread_id TEXT",
            "UPDATE items SET thread_id = json_extract(doc, '$.thread_id')",
            "DROP INDEX items_thread",
            "CREATE INDEX items_thread ON items(tenant_id, scope_key, thread_id)",
            "UPDATE meta SET value = value + 1 WHERE key = 'index_version'",
        ),
    ),
    (
        "creator column for owner_only visibility",
        (
            # Derived from the document, so it can never disagree with it; only string
            # creators count (Viewer.sees says the same). No index: the visibility test runs
            # on rows the scope index already chose.
            "ALTER TABLE items ADD COLUMN created_by TEXT GENERATED ALWAYS AS ("
            "CASE json_type(doc, '$.metadata.created_by') WHEN 'text' "
            "THEN json_extract(doc, '$.metadata.created_by') END) VIRTUAL",
        ),
    ),
]

SCOPE_CACHE_ENTRIES = 16


def _version_keys(tenant_id: str, scope_key: str | None) -> str:
    # meta keys of the per-scope counters; \x1f cannot occur in a validated id's scope key
    return f"v\x1f{tenant_id}" if scope_key is None else f"v\x1f{tenant_id}\x1f{scope_key}"


def _bump_scope(conn: sqlite3.Connection, tenant_id: str, scope_key: str) -> None:
    """Mark one scope (and its tenant) changed, so only readers cached on it rebuild."""
    conn.executemany(
        "INSERT INTO meta VALUES (?, 1) ON CONFLICT(key) DO UPDATE SET value = value + 1",
        [(_version_keys(tenant_id, scope_key),), (_version_keys(tenant_id, None),)],
    )


def _scope_version(conn: sqlite3.Connection, f: Filter) -> tuple[int, ...]:
    """What a cached scope was built from: the store-wide counter (migrations, bulk loads)
    and the counters of the filter's scopes (of its tenant when it names none)."""
    keys = ["index_version"] + (
        [_version_keys(f.tenant_id, k) for k in f.scope_keys] or [_version_keys(f.tenant_id, None)]
    )
    found = dict(
        conn.execute(
            f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})", keys
        ).fetchall()
    )
    return tuple(int(found.get(k, 0)) for k in keys)


_ITEM_COLUMNS = (
    "id, tenant_id, scope, scope_key, user_id, project_id, session_id, agent_id, memory_type, status, "
    "visibility, source, source_id, confidence, importance, created_at, updated_at, occurred_at, "
    "last_used_at, expires_at, access_count, mention_count, version, doc, thread_id"
)


def _item_row(item: MemoryItem) -> tuple[Any, ...]:
    return (
        item.id,
        item.tenant_id,
        item.scope.value,
        item.scope_key,
        item.user_id,
        item.project_id,
        item.session_id,
        item.agent_id,
        item.memory_type.value,
        item.status.value,
        item.visibility.value,
        item.source.value,
        item.source_id,
        item.confidence,
        item.importance,
        ts(item.created_at),
        ts(item.updated_at),
        ts(item.occurred_at),
        ts(item.last_used_at),
        ts(item.expires_at),
        item.access_count,
        item.mention_count,
        item.version,
        item.model_dump_json(),
        item.thread_id,
    )


def _load_item(doc: str) -> MemoryItem:
    return MemoryItem.model_validate_json(doc)


def _filter_sql(f: Filter, alias: str = "i") -> tuple[str, list[Any]]:
    """WHERE clause (without the keyword) and its parameters for a :class:`Filter`."""
    a = alias
    clauses = [f"{a}.tenant_id = ?"]
    params: list[Any] = [f.tenant_id]
    if f.scope_keys:
        clauses.append(f"{a}.scope_key IN ({','.join('?' * len(f.scope_keys))})")
        params.extend(f.scope_keys)
    if f.statuses:
        clauses.append(f"{a}.status IN ({','.join('?' * len(f.statuses))})")
        params.extend(s.value for s in f.statuses)
    if f.memory_types:
        clauses.append(f"{a}.memory_type IN ({','.join('?' * len(f.memory_types))})")
        params.extend(t.value for t in f.memory_types)
    for tag in f.tags:
        clauses.append(f"EXISTS (SELECT 1 FROM item_tags t WHERE t.pk = {a}.pk AND t.tag = ?)")
        params.append(tag)
    if not f.include_expired:
        if f.now is None:
            raise InvalidInput("a filter that hides expired items needs 'now'", field="now")
        clauses.append(f"({a}.expires_at IS NULL OR {a}.expires_at > ?)")
        params.append(ts(f.now))
    for column, op, value in (
        ("created_at", ">=", f.created_after),
        ("created_at", "<", f.created_before),
        ("occurred_at", ">=", f.occurred_after),
        ("occurred_at", "<", f.occurred_before),
    ):
        if value is not None:
            clauses.append(f"{a}.{column} {op} ?")
            params.append(ts(value))
    if f.visibilities:
        clauses.append(f"{a}.visibility IN ({','.join('?' * len(f.visibilities))})")
        params.extend(v.value for v in f.visibilities)
    viewer = f.viewer
    if viewer is not None and not viewer.sees_all:
        # Viewer.sees as SQL: other scopes and public items pass; members items need a
        # membership; owner_only items their creator.
        seen = [f"{a}.scope <> 'project'", f"{a}.visibility = 'public'"]
        if viewer.projects is None:
            seen.append(f"{a}.visibility = 'members'")
        elif viewer.projects:
            seen.append(
                f"({a}.visibility = 'members' AND {a}.project_id IN ({','.join('?' * len(viewer.projects))}))"
            )
            params.extend(viewer.projects)
        if viewer.actor is not None:
            seen.append(f"({a}.visibility = 'owner_only' AND {a}.created_by = ?)")
            params.append(viewer.actor)
        clauses.append(f"({' OR '.join(seen)})")
    return " AND ".join(clauses), params


def _kinds(change: LoadRows | ClearRows) -> tuple[str, ...]:
    return (change.kind,) if isinstance(change, LoadRows) else change.kinds


# DumpRows: per kind, the key columns (a keyset cursor; None: an offset cursor) and the columns.
_DUMP_KEYS: dict[str, tuple[str, ...] | None] = {
    "items": ("pk",),
    "history": ("seq",),
    "messages": ("tenant_id", "session_id", "seq"),
    "checkpoints": ("tenant_id", "session_id", "id"),
    "jobs": ("id",),
    "embedding_cache": ("model", "text_hash"),
    "rate_events": None,
}
_DUMP_SQL = {
    "items": "SELECT i.pk, i.id, i.doc, f.terms, v.model, v.dim, v.vec FROM items i "
    "LEFT JOIN items_fts f ON f.rowid = i.pk LEFT JOIN vectors v ON v.pk = i.pk",
    "history": "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before, after FROM history",
    "messages": "SELECT tenant_id, session_id, seq, doc FROM messages",
    "checkpoints": "SELECT tenant_id, session_id, id, doc FROM checkpoints",
    "jobs": "SELECT id, doc FROM jobs",
    "embedding_cache": "SELECT model, text_hash, vec FROM embedding_cache",
    "rate_events": "SELECT key, at FROM rate_events",
}


def _dump_row(kind: str, r: tuple[Any, ...]) -> dict[str, Any]:
    match kind:
        case "items":
            vectors = (
                []
                if r[4] is None
                else [{"model": r[4], "dim": int(r[5]), "vec": vector_to_text(from_blob(r[6]))}]
            )
            return {"id": r[1], "doc": r[2], "terms": r[3] or "", "vectors": vectors}
        case "history":
            keys = (
                "seq",
                "item_id",
                "tenant_id",
                "action",
                "at",
                "version",
                "reason",
                "actor",
                "before",
                "after",
            )
            return dict(zip(keys, r, strict=True))
        case "messages" | "checkpoints":
            last = "seq" if kind == "messages" else "id"
            return {"tenant_id": r[0], "session_id": r[1], last: r[2], "doc": r[3]}
        case "jobs":
            return {"id": r[0], "doc": r[1]}
        case "embedding_cache":
            return {"model": r[0], "text_hash": r[1], "vec": vector_to_text(from_blob(r[2]))}
    return {"key": r[0], "at": r[1]}


def _dump_cursor(after: str | None, size: int) -> list[Any]:
    if after is None:
        return []
    try:
        data = json.loads(after)
        if not isinstance(data, list) or len(data) != size:
            raise ValueError
    except ValueError:
        raise InvalidInput(
            f"dump cursor {after[:40]!r} is not one this store issued", field="after"
        ) from None
    return data


def _time_text(value: Any) -> str | None:
    """Fixed-width UTC text of a dumped time (text in either backend's spelling)."""
    if value is None:
        return None
    try:
        return ts(datetime.fromisoformat(str(value)))
    except ValueError:
        raise InvalidInput(f"{value!r} is not a time", field="at") from None


def _fts_query(f: Filter, terms: Sequence[str]) -> str:
    if f.scope_keys:
        scopes = " OR ".join(f'"{scope_token(f.tenant_id, k)}"' for k in f.scope_keys)
    else:
        scopes = f'"{tenant_token(f.tenant_id)}"'
    words = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return f"scope : ({scopes}) AND terms : ({words})"


def _map_error(exc: sqlite3.Error, path: str) -> StoreError:
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return StoreReadOnly(f"cannot write {path}: the database is read-only ({exc})")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreCorrupt(f"{path} is not a usable jiyi database: {exc}")
    if "unable to open" in text:
        return StoreError(f"cannot open {path}: {exc} (does the directory exist?)")
    return StoreError(f"database error on {path}: {exc}")


def _top(scores: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` best scores where ``mask`` holds, best first."""
    idx = np.flatnonzero(mask)
    if k <= 0 or idx.size == 0:
        return []
    sub = scores[idx]
    k = min(k, idx.size)
    part = np.argpartition(-sub, k - 1)[:k]
    return [int(i) for i in idx[part[np.argsort(-sub[part], kind="stable")]]]


@dataclass
class _ScopeRows:
    """A scope's items in thread order: vectors as one matrix, neighbours as index arrays."""

    version: tuple[int, ...]
    pks: np.ndarray
    ids: list[str]
    index: dict[int, int]
    occurred: list[str | None]
    expires: list[str | None]
    expiring: np.ndarray
    """Rows that have an expiry time (usually few): only these need checking per query."""
    matrix: np.ndarray | None
    has_vector: np.ndarray
    prev: np.ndarray
    next: np.ndarray

    @classmethod
    def build(cls, version: tuple[int, ...], rows: list[tuple[Any, ...]], dim: int) -> _ScopeRows:
        n = len(rows)
        threads = [r[2] for r in rows]
        # Neighbours: consecutive rows of the same (non-null) thread; rows come thread-ordered.
        same = np.array(
            [t is not None and i > 0 and threads[i - 1] == t for i, t in enumerate(threads)], dtype=bool
        )
        idx = np.arange(n, dtype=np.int64)
        prev = np.where(same, idx - 1, -1)
        nxt = np.full(n, -1, dtype=np.int64)
        nxt[:-1] = np.where(same[1:], idx[1:], -1)
        has_vector = np.array([r[6] is not None for r in rows], dtype=bool)
        matrix = None
        if dim:
            # One join and one frombuffer instead of a conversion per row (100k rows: ~0.2 s vs ~0.8 s).
            zero = bytes(4 * dim)
            matrix = np.frombuffer(
                b"".join(r[6] if r[6] is not None else zero for r in rows), dtype=np.float32
            )
            matrix = matrix.reshape(n, dim) if n else np.zeros((0, dim), dtype=np.float32)
        expires = [r[5] for r in rows]
        return cls(
            version=version,
            pks=np.array([r[0] for r in rows], dtype=np.int64),
            ids=[r[1] for r in rows],
            index={r[0]: i for i, r in enumerate(rows)},
            occurred=[r[4] for r in rows],
            expires=expires,
            expiring=np.array([i for i, e in enumerate(expires) if e is not None], dtype=np.int64),
            matrix=matrix,
            has_vector=has_vector,
            prev=prev,
            next=nxt,
        )

    def in_time(self, ranges: Sequence[tuple[datetime, datetime]], months: Sequence[int]) -> np.ndarray:
        bounds = [(ts(a), ts(b)) for a, b in ranges]
        wanted = {f"-{m:02d}-" for m in months}
        return np.array(
            [
                o is not None and (any(a <= o < b for a, b in bounds if a and b) or o[4:8] in wanted)
                for o in self.occurred
            ],
            dtype=bool,
        )


class SQLiteStore(Store):
    """A jiyi store in one SQLite file (``":memory:"`` for a private in-memory store)."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        readers: int = 4,
        timeout: float = 30.0,
        migrate: bool = True,
    ):
        self.path = str(path)
        self.read_only = read_only
        self._auto_migrate = migrate  # False: open as is (for 'jiyi migrate --status')
        self._timeout = timeout
        self._memory = self.path == ":memory:"
        if self._memory:
            # One shared connection: separate in-memory connections would be separate databases.
            self._uri = f"file:jiyi-{uuid.uuid4().hex}?mode=memory&cache=shared"
        else:
            p = Path(self.path)
            if p.is_dir():
                raise InvalidInput(
                    f"{self.path} is a directory; give a file path for the database", field="path"
                )
            if not p.parent.exists():
                raise InvalidInput(f"directory {p.parent} does not exist", field="path")
            if read_only and not p.exists():
                raise InvalidInput(f"{self.path} does not exist (opened read-only)", field="path")
            mode = "ro" if read_only else "rwc"
            self._uri = f"file:{p.resolve()}?mode={mode}"
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._writer = self._connect()
        self._readers = ThreadPoolExecutor(max_workers=max(1, readers), thread_name_prefix="jiyi-read")
        self._write_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jiyi-write")
        try:
            self._check_and_migrate()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self._uri, uri=True, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _map_error(exc, self.path) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise _map_error(exc, self.path) from exc
        with self._conns_lock:
            self._all_conns.append(conn)
        return conn

    def _reader(self) -> sqlite3.Connection:
        if self._memory:
            return self._writer
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if self._memory:
            with self._write_lock:
                yield self._writer
            return
        yield self._reader()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        with self._write_lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _map_error(exc, self.path) from exc
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise _map_error(exc, self.path) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._readers.shutdown(wait=True)
        self._write_thread.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._all_conns:
                conn.close()
            self._all_conns.clear()

    # ------------------------------------------------------------ schema

    def _check_and_migrate(self) -> None:
        conn = self._writer
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            raise _map_error(exc, self.path) from exc
        if app_id not in (0, APPLICATION_ID) or (
            app_id == 0 and tables and "schema_migrations" not in tables
        ):
            raise StoreCorrupt(f"{self.path} is a SQLite file but not a jiyi database; refusing to touch it")
        if not self._auto_migrate:
            return
        if self.pending_migrations() and self.read_only:
            raise StoreReadOnly(f"{self.path} needs schema migrations but was opened read-only")
        if not self._memory and not self.read_only:
            # Only once the file is known to be ours: WAL rewrites the file header.
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.Error as exc:
                raise _map_error(exc, self.path) from exc
        self.migrate()

    def applied_migrations(self) -> list[int]:
        with self._read() as conn:
            try:
                return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
            except sqlite3.OperationalError:
                return []

    def pending_migrations(self) -> list[tuple[int, str]]:
        done = set(self.applied_migrations())
        return [(v, name) for v, (name, _) in enumerate(MIGRATIONS, start=1) if v not in done]

    def migrate(self) -> list[tuple[int, str]]:
        """Apply pending migrations, each in its own transaction. Returns what was applied."""
        applied: list[tuple[int, str]] = []
        if not self.pending_migrations():
            return applied
        with self._transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for version, (name, statements) in enumerate(MIGRATIONS, start=1):
            with self._transaction() as conn:
                # Re-check inside the lock: another process may have applied it meanwhile.
                if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (version, name),
                )
                applied.append((version, name))
        return applied

    # ------------------------------------------------------------ dispatch

    def execute(self, op: Op[R]) -> R:
        try:
            return cast(R, self._dispatch(op))
        except sqlite3.Error as exc:
            raise _map_error(exc, self.path) from exc

    async def aexecute(self, op: Op[R]) -> R:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        pool = self._write_thread if isinstance(op, Write | ClaimJobs) else self._readers
        return await asyncio.get_running_loop().run_in_executor(pool, self.execute, op)

    def _dispatch(self, op: Op[Any]) -> Any:
        match op:
            case Write():
                return self._write(op)
            case GetItems():
                return self._get_items(op)
            case ListItems():
                return self._list_items(op)
            case Retrieve():
                return self._retrieve(op)
            case GetHistory():
                return self._history(op)
            case GetStats():
                return self._stats(op)
            case CountEvents():
                with self._read() as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM rate_events WHERE key = ? AND at >= ?", (op.key, ts(op.since))
                    ).fetchone()
                return int(row[0])
            case CacheGet():
                return self._cache_get(op)
            case VectorsFor():
                return self._vectors_for(op)
            case GetMessages():
                return self._get_messages(op)
            case GetCheckpoint():
                return self._get_checkpoint(op)
            case ListCheckpoints():
                with self._read() as conn:
                    rows = conn.execute(
                        "SELECT doc FROM checkpoints WHERE tenant_id = ? AND session_id = ? "
                        "ORDER BY created_at DESC, id DESC LIMIT ?",
                        (op.tenant_id, op.session_id, max(1, op.limit)),
                    ).fetchall()
                return [Checkpoint.model_validate_json(r[0]) for r in rows]
            case ListJobs():
                return self._list_jobs(op)
            case ClaimJobs():
                return self._claim_jobs(op)
            case DumpRows():
                return self._dump_rows(op)
        raise InvalidInput(f"SQLiteStore does not know operation {type(op).__name__}")

    # ------------------------------------------------------------ reads

    def _get_items(self, op: GetItems) -> list[MemoryItem]:
        if not op.ids:
            return []
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT id, doc FROM items WHERE tenant_id = ? AND id IN ({','.join('?' * len(op.ids))})",
                (op.tenant_id, *op.ids),
            ).fetchall()
        by_id = {r[0]: _load_item(r[1]) for r in rows}
        return [by_id[i] for i in op.ids if i in by_id]

    def _list_items(self, op: ListItems) -> Page:
        where, params = _filter_sql(op.filter)
        order = "DESC" if op.descending else "ASC"
        if op.cursor:
            created_at, item_id = decode_cursor(op.cursor)
            cmp = "<" if op.descending else ">"
            where += f" AND (i.created_at, i.id) {cmp} (?, ?)"
            params += [created_at, item_id]
        limit = max(1, op.limit)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT i.doc, i.created_at, i.id FROM items i WHERE {where} "
                f"ORDER BY i.created_at {order}, i.id {order} LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_cursor(rows[-1][1], rows[-1][2]) if more and rows else None
        return Page(items=[_load_item(r[0]) for r in rows], next_cursor=cursor)

    def _scope_rows(self, conn: sqlite3.Connection, op: Retrieve) -> _ScopeRows:
        """Every item of the filter (expiry aside) with its vector and thread order, cached
        per reader thread until the index version changes."""
        f = op.filter
        dim = 0 if op.vector is None else int(op.vector.shape[0])
        key = (replace(f, now=None, include_expired=True), op.model_id, dim)
        version = _scope_version(conn, f)
        cache: OrderedDict[Any, _ScopeRows] = getattr(self._local, "scopes", None) or OrderedDict()
        self._local.scopes = cache
        hit = cache.get(key)
        if hit is not None and hit.version == version:
            cache.move_to_end(key)
            return hit
        where, params = _filter_sql(replace(f, include_expired=True))
        rows = conn.execute(
            f"SELECT i.pk, i.id, i.thread_id, coalesce(i.occurred_at, i.created_at), i.occurred_at, "
            f"i.expires_at, v.vec FROM items i LEFT JOIN vectors v ON v.pk = i.pk AND v.model = ? AND v.dim = ? "
            f"WHERE {where} ORDER BY i.thread_id, coalesce(i.occurred_at, i.created_at), i.pk",
            (op.model_id, dim, *params),
        ).fetchall()
        built = _ScopeRows.build(version, rows, dim)
        cache[key] = built
        while len(cache) > SCOPE_CACHE_ENTRIES:
            cache.popitem(last=False)
        return built

    def _retrieve(self, op: Retrieve) -> list[Candidate]:
        f = op.filter
        with self._read() as conn:
            rows = self._scope_rows(conn, op)
            n = len(rows.pks)
            if n == 0:
                return []
            live = np.ones(n, dtype=bool)
            if not f.include_expired:
                if f.now is None:
                    raise InvalidInput("a filter that hides expired items needs 'now'", field="now")
                now = ts(f.now) or ""
                for i in rows.expiring:
                    expiry = rows.expires[i]
                    if expiry is not None and expiry <= now:
                        live[i] = False
            chosen: dict[int, None] = {}
            cosines: np.ndarray | None = None
            if op.vector is not None and rows.matrix is not None:
                cosines = rows.matrix @ op.vector
                usable = live & rows.has_vector
                for idx in _top(cosines, usable, op.vector_k):
                    chosen[idx] = None
                if op.time_ranges or op.time_months:
                    in_time = usable & rows.in_time(op.time_ranges, op.time_months)
                    for idx in _top(cosines, in_time, op.vector_k):
                        chosen[idx] = None
            keyword: dict[int, float] = {}
            if op.terms and op.keyword_k > 0:
                where, params = _filter_sql(f)
                hits = conn.execute(
                    f"SELECT i.pk, -bm25(items_fts, 0.0, 1.0) AS score FROM items_fts "
                    f"JOIN items i ON i.pk = items_fts.rowid "
                    f"WHERE items_fts MATCH ? AND {where} ORDER BY score DESC LIMIT ?",
                    (_fts_query(f, op.terms), *params, op.keyword_k),
                ).fetchall()
                for pk, score in hits:
                    found = rows.index.get(pk)
                    if found is not None:
                        keyword[found] = float(score)
                        chosen[found] = None
            for _ in range(max(0, op.neighbours)):
                for idx in list(chosen):
                    for other in (rows.prev[idx], rows.next[idx]):
                        if other >= 0 and live[other]:
                            chosen[other] = None
            if not chosen:
                return []
            order = list(chosen)
            pks = [int(rows.pks[i]) for i in order]
            docs = dict(
                conn.execute(
                    f"SELECT pk, doc FROM items WHERE pk IN ({','.join('?' * len(pks))})", pks
                ).fetchall()
            )

        def cos_at(i: int) -> float | None:
            ok = i >= 0 and cosines is not None and bool(rows.has_vector[i])
            return float(cosines[i]) if ok and cosines is not None else None

        out: list[Candidate] = []
        for idx, pk in zip(order, pks, strict=True):
            if pk not in docs:
                continue
            prev_i, next_i = int(rows.prev[idx]), int(rows.next[idx])
            has_vec = cosines is not None and bool(rows.has_vector[idx])
            out.append(
                Candidate(
                    item=_load_item(docs[pk]),
                    cosine=cos_at(idx),
                    keyword=keyword.get(idx),
                    vector=rows.matrix[idx] if has_vec and rows.matrix is not None else None,
                    prev_id=rows.ids[prev_i] if prev_i >= 0 else None,
                    next_id=rows.ids[next_i] if next_i >= 0 else None,
                    prev_cosine=cos_at(prev_i),
                    next_cosine=cos_at(next_i),
                    prev_keyword=keyword.get(prev_i),
                    next_keyword=keyword.get(next_i),
                )
            )
        return out

    def _history(self, op: GetHistory) -> list[HistoryEvent]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before, after "
                "FROM history WHERE tenant_id = ? AND item_id = ? ORDER BY seq",
                (op.tenant_id, op.item_id),
            ).fetchall()
        return [
            HistoryEvent.model_validate(
                {
                    "seq": r[0],
                    "item_id": r[1],
                    "tenant_id": r[2],
                    "action": r[3],
                    "at": r[4],
                    "version": r[5],
                    "reason": r[6],
                    "actor": r[7],
                    "before": json.loads(r[8]) if r[8] else None,
                    "after": json.loads(r[9]) if r[9] else None,
                }
            )
            for r in rows
        ]

    def _stats(self, op: GetStats) -> StoreStats:
        where, params = _filter_sql(op.filter)
        with self._read() as conn:
            total, avg_c, avg_i = conn.execute(
                f"SELECT count(*), avg(confidence), avg(importance) FROM items i WHERE {where}", params
            ).fetchone()
            groups: dict[str, dict[str, int]] = {}
            for column in ("memory_type", "scope", "status"):
                rows = conn.execute(
                    f"SELECT {column}, count(*) FROM items i WHERE {where} GROUP BY {column} ORDER BY {column}",
                    params,
                ).fetchall()
                groups[column] = {r[0]: int(r[1]) for r in rows}
        return StoreStats(
            total=int(total),
            by_type=groups["memory_type"],
            by_scope=groups["scope"],
            by_status=groups["status"],
            avg_confidence=None if avg_c is None else float(avg_c),
            avg_importance=None if avg_i is None else float(avg_i),
        )

    def _cache_get(self, op: CacheGet) -> dict[str, Vector]:
        if not op.hashes:
            return {}
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT text_hash, vec FROM embedding_cache WHERE model = ? "
                f"AND text_hash IN ({','.join('?' * len(op.hashes))})",
                (op.model_id, *op.hashes),
            ).fetchall()
        return {h: from_blob(v) for h, v in rows}

    def _vectors_for(self, op: VectorsFor) -> dict[str, Vector]:
        if not op.ids:
            return {}
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT i.id, v.vec FROM items i JOIN vectors v ON v.pk = i.pk WHERE i.tenant_id = ? "
                f"AND v.model = ? AND i.id IN ({','.join('?' * len(op.ids))})",
                (op.tenant_id, op.model_id, *op.ids),
            ).fetchall()
        return {i: from_blob(v) for i, v in rows}

    # ------------------------------------------------------------ writes

    def _write(self, op: Write) -> None:
        if self.read_only:
            raise StoreReadOnly(f"cannot write {self.path}: it was opened read-only")
        with self._transaction() as conn:
            # Upserts and purges bump only their scope's version (see _bump_scope); bulk
            # loads and clears change everything at once.
            if any(isinstance(c, LoadRows | ClearRows) and "items" in _kinds(c) for c in op.changes):
                conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'index_version'")
            for change in op.changes:
                match change:
                    case Upsert():
                        self._upsert(conn, change)
                    case Purge():
                        self._purge(conn, change)
                    case Touch():
                        self._touch(conn, change)
                    case RecordEvent():
                        conn.execute("INSERT INTO rate_events VALUES (?, ?)", (change.key, ts(change.at)))
                    case CachePut():
                        conn.executemany(
                            "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)",
                            [(change.model_id, h, to_blob(v)) for h, v in change.entries],
                        )
                    case AppendMessages():
                        self._append_messages(conn, change)
                    case DeleteMessages():
                        conn.executemany(
                            "DELETE FROM messages WHERE tenant_id = ? AND session_id = ? AND seq = ?",
                            [(change.tenant_id, change.session_id, q) for q in change.seqs],
                        )
                    case PutCheckpoint():
                        c = change.checkpoint
                        conn.execute(
                            "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                            (c.tenant_id, c.session_id, c.id, ts(c.created_at), c.model_dump_json()),
                        )
                    case DeleteCheckpoints():
                        conn.executemany(
                            "DELETE FROM checkpoints WHERE tenant_id = ? AND session_id = ? AND id = ?",
                            [(change.tenant_id, change.session_id, i) for i in change.ids],
                        )
                    case PutJob():
                        self._put_job(conn, change.job)
                    case LoadRows():
                        self._load_rows(conn, change)
                    case ClearRows():
                        for kind in change.kinds:
                            check_row_kind(kind)
                            if kind == "items":
                                conn.execute("DELETE FROM items_fts")
                            conn.execute(f"DELETE FROM {kind}")

    # ------------------------------------------------------------ sessions and jobs

    def _get_messages(self, op: GetMessages) -> list[Message]:
        with self._read() as conn:
            if op.last is not None:
                rows = conn.execute(
                    "SELECT doc FROM (SELECT seq, doc FROM messages WHERE tenant_id = ? AND session_id = ? "
                    "ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                    (op.tenant_id, op.session_id, max(0, op.last)),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT doc FROM messages WHERE tenant_id = ? AND session_id = ? AND seq > ? ORDER BY seq",
                    (op.tenant_id, op.session_id, -1 if op.after_seq is None else op.after_seq),
                ).fetchall()
        return [Message.model_validate_json(r[0]) for r in rows]

    def _append_messages(self, conn: sqlite3.Connection, change: AppendMessages) -> None:
        next_seq: dict[tuple[str, str], int] = {}
        for m in change.messages:
            key = (m.tenant_id, m.session_id)
            seq = m.seq
            if seq is None:
                if key not in next_seq:
                    row = conn.execute(
                        "SELECT max(seq) FROM messages WHERE tenant_id = ? AND session_id = ?", key
                    ).fetchone()
                    next_seq[key] = 0 if row[0] is None else int(row[0]) + 1
                seq = next_seq[key]
                next_seq[key] = seq + 1
            stored = m.model_copy(update={"seq": seq})
            try:
                conn.execute(
                    "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        m.tenant_id,
                        m.session_id,
                        seq,
                        m.id,
                        m.role,
                        ts(m.created_at),
                        stored.model_dump_json(),
                    ),
                )
            except sqlite3.IntegrityError:
                raise InvalidInput(
                    f"session {m.session_id!r} already has a message at position {seq}", field="seq"
                ) from None

    def _get_checkpoint(self, op: GetCheckpoint) -> Checkpoint | None:
        with self._read() as conn:
            if op.checkpoint_id is None:
                row = conn.execute(
                    "SELECT doc FROM checkpoints WHERE tenant_id = ? AND session_id = ? "
                    "ORDER BY created_at DESC, id DESC LIMIT 1",
                    (op.tenant_id, op.session_id),
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT doc FROM checkpoints WHERE tenant_id = ? AND session_id = ? AND id = ?",
                    (op.tenant_id, op.session_id, op.checkpoint_id),
                ).fetchone()
        return None if row is None else Checkpoint.model_validate_json(row[0])

    @staticmethod
    def _put_job(conn: sqlite3.Connection, job: Job) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.id,
                job.tenant_id,
                job.kind,
                job.status,
                ts(job.run_after),
                ts(job.locked_until),
                ts(job.created_at),
                job.model_dump_json(),
            ),
        )

    def _list_jobs(self, op: ListJobs) -> list[Job]:
        clauses, params = ["1 = 1"], []
        if op.statuses:
            clauses.append(f"status IN ({','.join('?' * len(op.statuses))})")
            params += list(op.statuses)
        if op.kinds:
            clauses.append(f"kind IN ({','.join('?' * len(op.kinds))})")
            params += list(op.kinds)
        if op.tenant_id is not None:
            clauses.append("tenant_id = ?")
            params.append(op.tenant_id)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT doc FROM jobs WHERE {' AND '.join(clauses)} ORDER BY created_at, id LIMIT ?",
                (*params, max(1, op.limit)),
            ).fetchall()
        return [Job.model_validate_json(r[0]) for r in rows]

    def _claim_jobs(self, op: ClaimJobs) -> list[Job]:
        if self.read_only:
            raise StoreReadOnly(f"cannot claim jobs in {self.path}: it was opened read-only")
        now = ts(op.now)
        kinds = f" AND kind IN ({','.join('?' * len(op.kinds))})" if op.kinds else ""
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT doc FROM jobs WHERE run_after <= ? AND (status = 'queued' OR "
                f"(status = 'running' AND locked_until < ?)){kinds} ORDER BY run_after, created_at LIMIT ?",
                (now, now, *op.kinds, max(1, op.limit)),
            ).fetchall()
            claimed = []
            until = op.now + timedelta(seconds=op.lease_seconds)
            for (doc,) in rows:
                job = Job.model_validate_json(doc)
                job = job.model_copy(
                    update={
                        "status": "running",
                        "attempts": job.attempts + 1,
                        "locked_by": op.worker,
                        "locked_until": until,
                        "updated_at": op.now,
                    }
                )
                self._put_job(conn, job)
                claimed.append(job)
        return claimed

    def _upsert(self, conn: sqlite3.Connection, change: Upsert) -> None:
        item = change.item
        row = conn.execute("SELECT pk, tenant_id, scope_key FROM items WHERE id = ?", (item.id,)).fetchone()
        values = _item_row(item)
        _bump_scope(conn, item.tenant_id, item.scope_key)
        if row is None:
            cur = conn.execute(
                f"INSERT INTO items ({_ITEM_COLUMNS}) VALUES ({','.join('?' * len(values))})", values
            )
            pk = cur.lastrowid
        else:
            pk, tenant, old_scope = row
            if tenant != item.tenant_id:
                raise InvalidInput(f"id {item.id!r} is already taken; choose another id", field="id")
            if old_scope != item.scope_key:
                _bump_scope(conn, tenant, old_scope)
            sets = ", ".join(f"{c.strip()} = ?" for c in _ITEM_COLUMNS.split(","))
            conn.execute(f"UPDATE items SET {sets} WHERE pk = ?", (*values, pk))
            conn.execute("DELETE FROM items_fts WHERE rowid = ?", (pk,))
            conn.execute("DELETE FROM item_tags WHERE pk = ?", (pk,))
        conn.execute(
            "INSERT INTO items_fts (rowid, scope, terms) VALUES (?, ?, ?)",
            (
                pk,
                f"{scope_token(item.tenant_id, item.scope_key)} {tenant_token(item.tenant_id)}",
                change.terms,
            ),
        )
        conn.executemany("INSERT INTO item_tags VALUES (?, ?)", [(pk, t) for t in item.tags])
        if change.vector is not None:
            if not change.model_id:
                raise InvalidInput("a vector needs the model_id that produced it", field="model_id")
            conn.execute(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                (pk, change.model_id, int(change.vector.shape[0]), to_blob(change.vector)),
            )
        self._record(conn, change.event)

    def _purge(self, conn: sqlite3.Connection, change: Purge) -> None:
        row = conn.execute(
            "SELECT pk, scope_key FROM items WHERE id = ? AND tenant_id = ?",
            (change.item_id, change.tenant_id),
        ).fetchone()
        if row is None:
            return  # nothing of this tenant's to purge: nothing to record either
        _bump_scope(conn, change.tenant_id, row[1])
        conn.execute("DELETE FROM items_fts WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM items WHERE pk = ?", (row[0],))
        self._record(conn, change.event)

    def _touch(self, conn: sqlite3.Connection, change: Touch) -> None:
        when = ts(change.at)
        conn.executemany(
            "UPDATE items SET last_used_at = ?, access_count = access_count + 1, "
            "doc = json_set(doc, '$.last_used_at', ?, '$.access_count', access_count + 1) "
            "WHERE tenant_id = ? AND id = ?",
            [(when, when, change.tenant_id, i) for i in change.ids],
        )

    @staticmethod
    def _record(conn: sqlite3.Connection, e: HistoryEvent) -> None:
        conn.execute(
            "INSERT INTO history (item_id, tenant_id, action, at, version, reason, actor, before, after) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                e.item_id,
                e.tenant_id,
                e.action.value,
                ts(e.at),
                e.version,
                e.reason,
                e.actor,
                None if e.before is None else json.dumps(e.before, ensure_ascii=False),
                None if e.after is None else json.dumps(e.after, ensure_ascii=False),
            ),
        )

    # ------------------------------------------------------------ bulk copy

    def _dump_rows(self, op: DumpRows) -> RowPage:
        kind = check_row_kind(op.kind)
        keys = _DUMP_KEYS[kind]
        limit = max(1, op.limit)
        sql = _DUMP_SQL[kind]
        params: list[Any] = []
        alias = "i." if kind == "items" else ""
        start = 0
        if keys is None:
            offset = _dump_cursor(f"[{op.after}]" if op.after is not None else None, 1)
            start = int(offset[0]) if offset else 0
            sql += " ORDER BY key, at LIMIT ? OFFSET ?"
            params += [limit, start]
        else:
            cursor = _dump_cursor(op.after, len(keys))
            cols = ", ".join(alias + k for k in keys)
            if cursor:
                sql += f" WHERE ({cols}) > ({', '.join('?' * len(keys))})"
                params += cursor
            sql += f" ORDER BY {cols} LIMIT ?"
            params.append(limit)
        table = kind
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
            total = None
            if op.after is None:
                total = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        out = [_dump_row(kind, r) for r in rows]
        next_after: str | None = None
        if len(rows) == limit:
            if keys is None:
                next_after = str(start + len(rows))
            else:
                last = out[-1]
                values = [rows[-1][0]] if kind == "items" else [last[k] for k in keys]
                next_after = json.dumps(values, ensure_ascii=False)
        return RowPage(rows=out, next_after=next_after, total=total)

    def _load_rows(self, conn: sqlite3.Connection, change: LoadRows) -> None:
        kind = check_row_kind(change.kind)
        for row in change.rows:
            try:
                match kind:
                    case "items":
                        self._load_item(conn, row)
                    case "history":
                        conn.execute(
                            "INSERT INTO history (seq, item_id, tenant_id, action, at, version, reason, actor, "
                            "before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (
                                int(row["seq"]),
                                row["item_id"],
                                row["tenant_id"],
                                row["action"],
                                _time_text(row["at"]),
                                int(row["version"]),
                                row["reason"],
                                row["actor"],
                                row["before"],
                                row["after"],
                            ),
                        )
                    case "messages":
                        m = Message.model_validate_json(row["doc"])
                        conn.execute(
                            "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (
                                m.tenant_id,
                                m.session_id,
                                int(row["seq"]),
                                m.id,
                                m.role,
                                ts(m.created_at),
                                row["doc"],
                            ),
                        )
                    case "checkpoints":
                        c = Checkpoint.model_validate_json(row["doc"])
                        conn.execute(
                            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                            (c.tenant_id, c.session_id, c.id, ts(c.created_at), row["doc"]),
                        )
                    case "jobs":
                        j = Job.model_validate_json(row["doc"])
                        conn.execute(
                            "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (
                                j.id,
                                j.tenant_id,
                                j.kind,
                                j.status,
                                ts(j.run_after),
                                ts(j.locked_until),
                                ts(j.created_at),
                                row["doc"],
                            ),
                        )
                    case "embedding_cache":
                        conn.execute(
                            "INSERT INTO embedding_cache VALUES (?, ?, ?)",
                            (row["model"], row["text_hash"], to_blob(vector_from_text(row["vec"]))),
                        )
                    case "rate_events":
                        conn.execute(
                            "INSERT INTO rate_events VALUES (?, ?)", (row["key"], _time_text(row["at"]))
                        )
            except KeyError as exc:
                raise InvalidInput(
                    f"a dumped {kind} row lacks {exc.args[0]!r}", field=str(exc.args[0])
                ) from None
            except sqlite3.IntegrityError as exc:
                raise InvalidInput(f"cannot load a {kind} row: it is already there ({exc})") from None

    def _load_item(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        doc = row["doc"]
        item = _load_item(doc)
        values = (*_item_row(item)[:-2], doc, item.thread_id)
        if conn.execute("SELECT 1 FROM items WHERE id = ?", (item.id,)).fetchone():
            raise InvalidInput(f"cannot load item {item.id!r}: that id is already taken", field="id")
        cur = conn.execute(
            f"INSERT INTO items ({_ITEM_COLUMNS}) VALUES ({','.join('?' * len(values))})", values
        )
        pk = cur.lastrowid
        conn.execute(
            "INSERT INTO items_fts (rowid, scope, terms) VALUES (?, ?, ?)",
            (
                pk,
                f"{scope_token(item.tenant_id, item.scope_key)} {tenant_token(item.tenant_id)}",
                str(row["terms"]),
            ),
        )
        conn.executemany("INSERT INTO item_tags VALUES (?, ?)", [(pk, t) for t in item.tags])
        for v in row.get("vectors") or ():
            vec = vector_from_text(v["vec"])
            if vec.shape[0] != int(v["dim"]):
                raise InvalidInput(f"item {item.id!r}: vector has {vec.shape[0]} numbers, not {v['dim']}")
            conn.execute(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                (pk, v["model"], int(v["dim"]), to_blob(vec)),
            )
