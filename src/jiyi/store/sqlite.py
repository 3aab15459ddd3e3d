"""The embedded default backend: one SQLite file.

* WAL journal: many readers, one writer. Each thread reads through its own connection;
  writes go through one connection under a lock, inside ``BEGIN IMMEDIATE`` so that
  two *processes* writing the same file queue on SQLite's lock instead of failing.
* Async is not a second code path: :meth:`SQLiteStore.aexecute` runs the same
  :meth:`execute` on a reader pool or the single writer thread (Datasette's pattern).
* Keyword index: an FTS5 table over pre-segmented terms (see :mod:`jiyi.text.tokenize`)
  with hashed scope and tenant tokens in their own column; it holds each row's terms.
  Search scores BM25 in memory over the searched scopes' cached posting lists
  (:class:`_Collection`; :mod:`jiyi.store.keywords`, FTS5's formula), not with ``MATCH``:
  FTS5's ``bm25()`` counts the whole table, so one user's scores moved when another
  wrote, and its per-row calls were the slowest part of a search's store work.
* Vectors: float32 blobs, scored exactly with numpy inside the requested scope. Each
  reader thread keeps a searched filter's rows in memory; triggers log which item rows
  change per scope (``scope_changes``), so a cached filter is patched with just those
  rows instead of being re-read after every write.
* Search: those cached rows (and the FTS5 table) answer the search primitives of
  :mod:`jiyi.store.base`; ``Retrieve`` is the shared flow of :mod:`jiyi.store.retrieve`
  over them, driven inside one read transaction, so a filter's rows are brought up to
  date once per search and the cosines to its query vector computed once.
* Usage write: a search's counters and retrieval-log rows are committed by a thread of
  the store's own (:class:`~jiyi.store.usage.UsageWriter`, as PostgreSQL's), so the search
  answers first; the store's next operation other than a search's reads waits for them,
  and closing sends what is queued (:meth:`SQLiteStore.flush` for a reader of the file
  that is not this store). As on PostgreSQL, the counters go to the ``access_count`` and
  ``last_used_at`` columns only, and reads lay them over the document's copies (which
  the item's next full write refreshes): a touched document would otherwise be parsed
  again by every search that finds it. Ad-hoc SQL should read those two from the columns.
* Migrations: an append-only list, each applied in its own transaction and recorded
  in ``schema_migrations``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from jiyi.driver import Handler, drive
from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput, StoreCorrupt, StoreError, StoreReadOnly, WriteConflict
from jiyi.model import MemoryItem, load_stored
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AccessPage,
    AppendMessages,
    CacheGet,
    CachePut,
    Change,
    ClaimJobs,
    ClearRows,
    CountEvents,
    DeleteCheckpoints,
    DeleteMessages,
    DumpRows,
    Filter,
    ForgetAccesses,
    GetCheckpoint,
    GetHistory,
    GetItems,
    GetMessages,
    GetStats,
    Guard,
    HistoryEvent,
    Hit,
    KeywordHits,
    Link,
    ListAccesses,
    ListCheckpoints,
    ListItems,
    ListJobs,
    Loaded,
    LoadHits,
    LoadRows,
    MemoryAccess,
    Op,
    Page,
    Purge,
    PutCheckpoint,
    PutJob,
    RecordAccess,
    RecordEvent,
    Retrieve,
    RowPage,
    ScopeClock,
    SetVectors,
    Store,
    StoreStats,
    ThreadLinks,
    Touch,
    Upsert,
    Vector,
    VectorHits,
    VectorsFor,
    Write,
    check_row_kind,
    detached,
    keyword_collection,
    vector_from_text,
    vector_to_text,
)
from jiyi.store.keywords import KeywordIndex, best_first
from jiyi.store.retrieve import retrieve_flow
from jiyi.store.sqlcommon import (
    ACCESS_COLUMNS,
    ACCESS_TABLES,
    SERVED_COLUMNS,
    DumpPage,
    access_conditions,
    access_of,
    access_params,
    claimed_job,
    decode_cursor,
    dumped_access,
    dumped_time,
    encode_cursor,
    from_blob,
    history_event,
    load_item,
    loaded_access,
    pending,
    read_item,
    scope_token,
    served_params,
    tenant_token,
    to_blob,
    ts,
    viewer_clause,
    with_usage,
)
from jiyi.store.usage import UsageWriter

R = TypeVar("R")

APPLICATION_ID = 0x4A495949  # "JIYI": marks the file as ours

_CHANGE_TRIGGERS: tuple[str, ...] = (
    """CREATE TRIGGER items_changes_insert AFTER INSERT ON items BEGIN
        INSERT INTO scope_changes (tenant_id, scope_key, pk)
        VALUES (new.tenant_id, new.scope_key, new.pk);
    END""",
    """CREATE TRIGGER items_changes_update AFTER UPDATE OF
        id, tenant_id, scope, scope_key, user_id, project_id, session_id, agent_id,
        memory_type, status, visibility, created_at, occurred_at, expires_at, version,
        thread_id ON items BEGIN
        INSERT INTO scope_changes (tenant_id, scope_key, pk)
        VALUES (new.tenant_id, new.scope_key, new.pk);
        INSERT INTO scope_changes (tenant_id, scope_key, pk)
        SELECT old.tenant_id, old.scope_key, old.pk
        WHERE old.tenant_id <> new.tenant_id OR old.scope_key <> new.scope_key;
    END""",
    """CREATE TRIGGER items_changes_delete AFTER DELETE ON items BEGIN
        INSERT INTO scope_changes (tenant_id, scope_key, pk)
        VALUES (old.tenant_id, old.scope_key, old.pk);
    END""",
)
"""The triggers of "scope change log for incremental search caches", made again when the
items table is rebuilt."""

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
    (
        "scope change log for incremental search caches",
        (
            # Which item rows changed, per scope, in commit order: a reader that cached a
            # scope at log position S re-reads only the rows logged after S. Triggers (not
            # the Python write path) fill it, so every writer of the file logs, whatever
            # its code; item_tags and vectors only change together with their items row.
            # An UPDATE that sets none of these columns (usage counters) is not logged.
            """CREATE TABLE scope_changes (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                tenant_id TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                pk INTEGER NOT NULL
            )""",
            "CREATE INDEX scope_changes_scope ON scope_changes(tenant_id, scope_key, seq)",
            """CREATE TRIGGER items_changes_insert AFTER INSERT ON items BEGIN
                INSERT INTO scope_changes (tenant_id, scope_key, pk)
                VALUES (new.tenant_id, new.scope_key, new.pk);
            END""",
            """CREATE TRIGGER items_changes_update AFTER UPDATE OF
                id, tenant_id, scope, scope_key, user_id, project_id, session_id, agent_id,
                memory_type, status, visibility, created_at, occurred_at, expires_at, version,
                thread_id ON items BEGIN
                INSERT INTO scope_changes (tenant_id, scope_key, pk)
                VALUES (new.tenant_id, new.scope_key, new.pk);
                INSERT INTO scope_changes (tenant_id, scope_key, pk)
                SELECT old.tenant_id, old.scope_key, old.pk
                WHERE old.tenant_id <> new.tenant_id OR old.scope_key <> new.scope_key;
            END""",
            """CREATE TRIGGER items_changes_delete AFTER DELETE ON items BEGIN
                INSERT INTO scope_changes (tenant_id, scope_key, pk)
                VALUES (old.tenant_id, old.scope_key, old.pk);
            END""",
            # Every entry after this position is still in the log (older ones are pruned).
            "INSERT INTO meta VALUES ('changes_floor', 0)",
            "UPDATE meta SET value = value + 1 WHERE key = 'index_version'",
        ),
    ),
    (
        "item ids unique per tenant",
        (
            # An id was unique across tenants: one tenant could take an id another tenant
            # computes (a profile's) and learn that an id existed elsewhere. SQLite cannot
            # change a constraint in place, so the item tables are rebuilt with the same pks
            # (the FTS rows and the change log refer to them) and the new tables renamed
            # over the old ones (the references follow the renames).
            """CREATE TABLE items_new (
                pk INTEGER PRIMARY KEY,
                id TEXT NOT NULL,
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
                doc TEXT NOT NULL,
                thread_id TEXT,
                created_by TEXT GENERATED ALWAYS AS (
                    CASE json_type(doc, '$.metadata.created_by') WHEN 'text'
                    THEN json_extract(doc, '$.metadata.created_by') END) VIRTUAL,
                UNIQUE (tenant_id, id)
            )""",
            "INSERT INTO items_new (pk, id, tenant_id, scope, scope_key, user_id, project_id, session_id, "
            "agent_id, memory_type, status, visibility, source, source_id, confidence, importance, "
            "created_at, updated_at, occurred_at, last_used_at, expires_at, access_count, mention_count, "
            "version, doc, thread_id) SELECT pk, id, tenant_id, scope, scope_key, user_id, project_id, "
            "session_id, agent_id, memory_type, status, visibility, source, source_id, confidence, "
            "importance, created_at, updated_at, occurred_at, last_used_at, expires_at, access_count, "
            "mention_count, version, doc, thread_id FROM items",
            """CREATE TABLE item_tags_new (
                pk INTEGER NOT NULL REFERENCES items_new(pk) ON DELETE CASCADE,
                tag TEXT NOT NULL,
                PRIMARY KEY (pk, tag)
            ) WITHOUT ROWID""",
            "INSERT INTO item_tags_new (pk, tag) SELECT pk, tag FROM item_tags",
            """CREATE TABLE vectors_new (
                pk INTEGER PRIMARY KEY REFERENCES items_new(pk) ON DELETE CASCADE,
                model TEXT NOT NULL,
                dim INTEGER NOT NULL,
                vec BLOB NOT NULL
            )""",
            "INSERT INTO vectors_new (pk, model, dim, vec) SELECT pk, model, dim, vec FROM vectors",
            # Children first, so dropping items cascades to nothing; its triggers and
            # indexes go with it and are made again below.
            "DROP TABLE item_tags",
            "DROP TABLE vectors",
            "DROP TABLE items",
            "ALTER TABLE items_new RENAME TO items",
            "ALTER TABLE item_tags_new RENAME TO item_tags",
            "ALTER TABLE vectors_new RENAME TO vectors",
            "CREATE INDEX items_scope ON items(tenant_id, scope_key, status)",
            "CREATE INDEX items_created ON items(tenant_id, created_at, id)",
            "CREATE INDEX items_thread ON items(tenant_id, scope_key, thread_id)",
            "CREATE INDEX item_tags_tag ON item_tags(tag)",
            *_CHANGE_TRIGGERS,
            "UPDATE meta SET value = value + 1 WHERE key = 'index_version'",
        ),
    ),
    (
        "retrieval log",
        (
            # Seed 002's context graph: one row per search / context / tool call and one per
            # memory it served. Append-only; tenant_id leads every key and index.
            """CREATE TABLE memory_access (
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                at TEXT NOT NULL,
                kind TEXT NOT NULL,
                query TEXT NOT NULL,
                user_id TEXT, project_id TEXT, session_id TEXT, agent_id TEXT,
                actor TEXT,
                PRIMARY KEY (tenant_id, id)
            ) WITHOUT ROWID""",
            "CREATE INDEX memory_access_at ON memory_access(tenant_id, at, id)",
            "CREATE INDEX memory_access_user ON memory_access(tenant_id, user_id, at)",
            """CREATE TABLE memory_access_items (
                tenant_id TEXT NOT NULL,
                access_id TEXT NOT NULL,
                rank INTEGER NOT NULL,
                item_id TEXT NOT NULL,
                at TEXT NOT NULL,
                score REAL NOT NULL,
                similarity REAL,
                relevance REAL,
                PRIMARY KEY (tenant_id, access_id, rank)
            ) WITHOUT ROWID""",
            # Every index costs each search's log write (one row per hit): the served rows
            # have only this one; retention finds them through their accesses.
            "CREATE INDEX memory_access_items_item ON memory_access_items(tenant_id, item_id, at)",
        ),
    ),
    (
        "assistant turns at the gate's minimum confidence",
        (
            # remember() keeps an assistant's turn with the gate's minimum confidence (0.7)
            # since 1b0e5ce; turns kept before stayed at 1.0 and crowd the person's own words
            # out of a search. Only turn resources said by the assistant, still at 1.0 and never
            # updated by hand; each change is recorded in the history (before and after).
            # Running it again changes nothing (none is left at 1.0).
            """CREATE TEMP TABLE migrating AS SELECT pk FROM items
            WHERE confidence = 1.0 AND json_extract(doc, '$.metadata.role') = 'assistant'
            AND pk IN (SELECT pk FROM item_tags WHERE tag = 'turn')
            AND pk IN (SELECT pk FROM item_tags WHERE tag = 'resource')
            AND NOT EXISTS (SELECT 1 FROM history h WHERE h.tenant_id = items.tenant_id
                AND h.item_id = items.id AND h.action = 'update')""",
            """INSERT INTO history (item_id, tenant_id, action, at, version, reason, actor, before, after)
            SELECT id, tenant_id, 'update',
                strftime('%Y-%m-%dT%H:%M:%S', 'now') || substr(strftime('%f', 'now'), 3) || '000Z',
                version + 1,
                'an assistant''s turn is kept with the gate''s minimum confidence (0.7), a person''s with 1.0',
                'migration', doc, json_set(doc, '$.confidence', 0.7, '$.version', version + 1)
            FROM items WHERE pk IN (SELECT pk FROM migrating) ORDER BY pk""",
            """UPDATE items SET confidence = 0.7, version = version + 1,
                doc = json_set(doc, '$.confidence', 0.7, '$.version', version + 1)
            WHERE pk IN (SELECT pk FROM migrating)""",
            "DROP TABLE migrating",
            "UPDATE meta SET value = value + 1 WHERE key = 'index_version'",
        ),
    ),
    (
        "usage columns index",
        (
            # A search reads the usage columns of its ~130 candidates (their documents are
            # cached, _RowItems). The search before it wrote usage, which empties the reader's
            # page cache; this covering index is a few pages, the rows are one page each.
            "CREATE INDEX items_usage ON items(tenant_id, pk, access_count, last_used_at)",
        ),
    ),
]
# A migration that changes items rows without going through the triggers above (or that
# changes what a cached scope holds) must bump 'index_version', so caches are rebuilt.

SCOPE_CACHE_ENTRIES = 32
"""Cached filters per reader thread: a search of a scope uses two (its filter's rows, with
vectors, and its keyword collection's, without), so this keeps 16 scopes' searches warm."""
CHANGE_LOG_KEEP = 20_000
"""Change-log entries kept after pruning; the log is pruned when twice this many build up.
A cached scope older than what is kept is rebuilt instead of patched."""
LARGE_SCOPE = 16_384
"""From this many rows on, cosines use einsum: single-threaded and measured ~1.5-2x faster
than BLAS gemv on 100k x 512 (which is faster below); both give each row the same bits
wherever it sits in the matrix."""


def _version_keys(tenant_id: str, scope_key: str | None) -> str:
    # meta keys of the per-scope counters; \x1f cannot occur in a validated id's scope key
    return f"v\x1f{tenant_id}" if scope_key is None else f"v\x1f{tenant_id}\x1f{scope_key}"


def _bump_scope(conn: sqlite3.Connection, tenant_id: str, scope_key: str) -> None:
    """Mark one scope (and its tenant) changed, so only readers cached on it look again."""
    conn.executemany(
        "INSERT INTO meta VALUES (?, 1) ON CONFLICT(key) DO UPDATE SET value = value + 1",
        [(_version_keys(tenant_id, scope_key),), (_version_keys(tenant_id, None),)],
    )


def _clock_key(tenant_id: str, scope_key: str) -> str:
    # meta key of a scope's guard clock (jiyi.store.base.Guard); "g" keeps it apart from
    # the search counters' "v" keys
    return f"g\x1f{tenant_id}\x1f{scope_key}"


def _check_guards(conn: sqlite3.Connection, guards: Sequence[Guard]) -> None:
    """Advance each guarded scope's clock, or refuse the write if another writer did first.
    Runs inside BEGIN IMMEDIATE: no other connection or process can write in between."""
    for g in guards:
        key = _clock_key(g.tenant_id, g.scope_key)
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        now = 0 if row is None else int(row[0])
        if now != g.seen:
            raise WriteConflict(
                f"scope {g.scope_key!r} changed while this write was decided (clock {g.seen} -> {now})"
            )
        conn.execute(
            "INSERT INTO meta VALUES (?, 1) ON CONFLICT(key) DO UPDATE SET value = value + 1", (key,)
        )


@dataclass(frozen=True)
class _ScopeState:
    """Where the database stands for one filter, read inside the reader's snapshot."""

    version: tuple[int, ...]
    """The store-wide counter (migrations, bulk loads) and the counters of the filter's
    scopes (of its tenant when it names none)."""
    seq: int
    """The change log's last position."""
    floor: int
    """Every log entry after this position is still there."""


def _scope_state(conn: sqlite3.Connection, f: Filter) -> _ScopeState:
    keys = ["index_version", "changes_floor"] + (
        [_version_keys(f.tenant_id, k) for k in f.scope_keys] or [_version_keys(f.tenant_id, None)]
    )
    found = dict(
        conn.execute(
            f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))}) "
            "UNION ALL SELECT '', coalesce(max(seq), 0) FROM scope_changes",
            keys,
        ).fetchall()
    )
    return _ScopeState(
        version=tuple(int(found.get(k, 0)) for k in keys if k != "changes_floor"),
        seq=int(found[""]),
        floor=int(found.get("changes_floor", 0)),
    )


def _prune_changes(conn: sqlite3.Connection) -> None:
    """Keep the change log short: once it holds twice :data:`CHANGE_LOG_KEEP` entries,
    drop all but the last ``CHANGE_LOG_KEEP`` (one range delete on the primary key)."""
    top = int(conn.execute("SELECT coalesce(max(seq), 0) FROM scope_changes").fetchone()[0])
    floor = int(conn.execute("SELECT value FROM meta WHERE key = 'changes_floor'").fetchone()[0])
    if top - floor > 2 * CHANGE_LOG_KEEP:
        floor = top - CHANGE_LOG_KEEP
        conn.execute("DELETE FROM scope_changes WHERE seq <= ?", (floor,))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'changes_floor'", (floor,))


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
    for tag in f.without_tags:
        clauses.append(f"NOT EXISTS (SELECT 1 FROM item_tags t WHERE t.pk = {a}.pk AND t.tag = ?)")
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
    if viewer is not None:
        projects = viewer.projects or ()
        seen = viewer_clause(viewer, a, f"{a}.project_id IN ({','.join('?' * len(projects))})", "?")
        if seen is not None:
            clauses.append(seen)
            params.extend(projects)
            if viewer.actor is not None:
                params.append(viewer.actor)
    return " AND ".join(clauses), params


def _kinds(change: LoadRows | ClearRows) -> tuple[str, ...]:
    return (change.kind,) if isinstance(change, LoadRows) else change.kinds


# DumpRows: the columns of every row kind.
_DUMP_SQL = {
    "items": "SELECT i.pk, i.id, i.doc, f.terms, v.model, v.dim, v.vec, i.access_count, i.last_used_at FROM items i "
    "LEFT JOIN items_fts f ON f.rowid = i.pk LEFT JOIN vectors v ON v.pk = i.pk",
    "history": "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before, after FROM history",
    "messages": "SELECT tenant_id, session_id, seq, doc FROM messages",
    "checkpoints": "SELECT tenant_id, session_id, id, doc FROM checkpoints",
    "jobs": "SELECT id, doc FROM jobs",
    "embedding_cache": "SELECT model, text_hash, vec FROM embedding_cache",
    "rate_events": "SELECT key, at FROM rate_events",
    "retrievals": f"SELECT {ACCESS_COLUMNS} FROM memory_access",
}


def _dump_row(kind: str, r: tuple[Any, ...]) -> dict[str, Any]:
    match kind:
        case "items":
            vectors = (
                []
                if r[4] is None
                else [{"model": r[4], "dim": int(r[5]), "vec": vector_to_text(from_blob(r[6]))}]
            )
            doc = r[2]
            stored = load_item(doc)
            if (stored.access_count, ts(stored.last_used_at)) != (r[7], r[8]):  # touched since written
                doc = with_usage(stored, r[7], r[8]).model_dump_json()
            return {"id": r[1], "doc": doc, "terms": r[3] or "", "vectors": vectors}
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


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every statement inside sees the same committed state (WAL),
    so a cached scope's log position always matches the rows it holds."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        _end_read(conn)


def _end_read(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # an error may have ended it already
        conn.execute("COMMIT")


def _map_error(exc: sqlite3.Error, path: str) -> StoreError:
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return StoreReadOnly(f"cannot write {path}: the database is read-only ({exc})")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreCorrupt(f"{path} is not a usable jiyi database: {exc}")
    if "unable to open" in text:
        return StoreError(f"cannot open {path}: {exc} (does the directory exist?)")
    return StoreError(f"database error on {path}: {exc}")


def _micros(text: str) -> int:
    """Microseconds since 1970 of a time text written by :func:`ts` (string order = time order)."""
    return int(np.datetime64(text[:-1], "us").astype(np.int64))


def _occurred_arrays(values: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``occurred_at`` texts as (microseconds, present?, month 1..12) arrays, parsed in C."""
    present = np.array([v is not None for v in values], dtype=bool)
    times = np.array([v[:-1] if v is not None else "NaT" for v in values], dtype="datetime64[us]")
    months = times.astype("datetime64[M]").astype(np.int64) % 12 + 1
    return times.astype(np.int64), present, months.astype(np.int8)


def _changed_rows_sql(dim: int, where: str) -> str:
    """The columns a cached scope holds (the vector of the searched model and dimension
    only, and the keyword index's terms) for the pks in a JSON array parameter that match ``where``. CROSS JOIN makes
    SQLite look the pks up one by one instead of scanning the filter's rows."""
    vec, join = (
        ("v.vec", " LEFT JOIN vectors v ON v.pk = i.pk AND v.model = ? AND v.dim = ?")
        if dim
        else ("NULL", "")
    )
    return (
        f"SELECT i.pk, i.id, i.thread_id, coalesce(i.occurred_at, i.created_at), i.occurred_at, "
        f"i.expires_at, {vec}, f.c1 FROM json_each(?) c CROSS JOIN items i ON i.pk = c.value{join} "
        f"LEFT JOIN items_fts_content f ON f.id = i.pk WHERE {where}"
    )


class _ScopeRows:
    """One filter's items (expiry aside) as search needs them, cached per reader thread
    and patched from the change log instead of re-read when a few rows change.

    Rows sit in *slots*: vectors are rows of one matrix (with room to grow), a removed
    row's slot is reused. Thread order (``(occurred_at or created_at, pk)`` inside one
    ``thread_id``) is kept as a sorted member list per thread plus ``prev``/``next`` slot
    links. Nothing here depends on which slot a row got: ties in score are broken by
    thread order, so a patched scope answers exactly as a freshly built one.
    """

    def __init__(self, state: _ScopeState, dim: int, capacity: int) -> None:
        self.version = state.version
        self.seq = state.seq
        self.dim = dim
        self.n = 0
        """Slots in use, live or free."""
        self.index: dict[int, int] = {}
        """pk -> slot of every live row."""
        self.slot_of: dict[str, int] = {}
        """item id -> slot of every live row."""
        self.free: list[int] = []
        self.ids: list[str] = []
        self.threads: list[str | None] = []
        self.sortkeys: list[str] = []
        self.expiring: dict[int, str] = {}
        """slot -> expires_at of the (usually few) rows that expire: only these are checked per query."""
        self.members: dict[str, list[tuple[str, int, int]]] = {}
        """thread -> its rows as sorted (sort key, pk, slot)."""
        self.patches = 0
        self.pks = np.zeros(capacity, dtype=np.int64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.has_vector = np.zeros(capacity, dtype=bool)
        self.prev = np.full(capacity, -1, dtype=np.int64)
        self.next = np.full(capacity, -1, dtype=np.int64)
        self.occurred = np.zeros(capacity, dtype=np.int64)
        self.has_occurred = np.zeros(capacity, dtype=bool)
        self.month = np.zeros(capacity, dtype=np.int8)
        self.stamps = np.zeros(capacity, dtype=np.int64)
        """Per slot, the change-log position as of which the row was read: a row changes
        only through logged writes, so (pk, index version, stamp) names one document."""
        self.matrix: np.ndarray | None = np.zeros((capacity, dim), dtype=np.float32) if dim else None

    def _grow(self, capacity: int) -> None:
        def grown(a: np.ndarray, fill: Any = 0) -> np.ndarray:
            out = np.full((capacity, *a.shape[1:]), fill, dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self.pks, self.alive, self.has_vector = grown(self.pks), grown(self.alive), grown(self.has_vector)
        self.prev, self.next = grown(self.prev, -1), grown(self.next, -1)
        self.occurred, self.has_occurred = grown(self.occurred), grown(self.has_occurred)
        self.month, self.stamps = grown(self.month), grown(self.stamps)
        if self.matrix is not None:
            self.matrix = grown(self.matrix)

    @classmethod
    def build(
        cls,
        state: _ScopeState,
        dim: int,
        rows: list[tuple[Any, ...]],
        vectors: sqlite3.Cursor | None,
    ) -> _ScopeRows:
        """From ``rows`` in thread order (the columns of :func:`_changed_rows_sql` without the
        vector) and, when ``dim``, a cursor over ``(pk, vec)`` of the same rows in any order."""
        n = len(rows)
        self = cls(state, dim, n + max(16, n // 16))
        self.n = n
        self.pks[:n] = [r[0] for r in rows]
        self.alive[:n] = True
        self.stamps[:n] = state.seq
        self.index = {r[0]: i for i, r in enumerate(rows)}
        self.slot_of = {r[1]: i for i, r in enumerate(rows)}
        self.ids = [r[1] for r in rows]
        self.threads = [r[2] for r in rows]
        self.sortkeys = [r[3] for r in rows]
        self.occurred[:n], self.has_occurred[:n], self.month[:n] = _occurred_arrays([r[4] for r in rows])
        self.expiring = {i: r[5] for i, r in enumerate(rows) if r[5] is not None}
        # Neighbours: consecutive rows of the same (non-null) thread; rows come thread-ordered.
        threads = self.threads
        same = np.array(
            [t is not None and i > 0 and threads[i - 1] == t for i, t in enumerate(threads)], dtype=bool
        )
        idx = np.arange(n, dtype=np.int64)
        self.prev[:n] = np.where(same, idx - 1, -1)
        if n:
            self.next[: n - 1] = np.where(same[1:], idx[1:], -1)
        for i, r in enumerate(rows):
            if r[2] is not None:
                self.members.setdefault(r[2], []).append((r[3], r[0], i))
        if vectors is not None and self.matrix is not None:
            # Chunks of one join + frombuffer each: a conversion per row costs ~4x more.
            index = self.index
            while chunk := vectors.fetchmany(4096):
                pks, blobs = zip(*chunk, strict=True)
                slots = np.fromiter(map(index.__getitem__, pks), dtype=np.int64, count=len(pks))
                block = np.frombuffer(b"".join(blobs), dtype=np.float32)
                self.matrix[slots] = block.reshape(len(pks), dim)
                self.has_vector[slots] = True
        return self

    # ------------------------------------------------------------ patching

    def apply(self, state: _ScopeState, found: list[tuple[Any, ...]], changed: Sequence[int]) -> None:
        """Bring the rows to ``state``: ``changed`` are the pks logged since :attr:`seq`,
        ``found`` those of them that match the filter now (with their current values)."""
        placed = set()
        for row in found:
            self._put(row, state.seq)
            placed.add(row[0])
        for pk in changed:
            if pk not in placed and pk in self.index:
                self._remove(pk)
        self.version, self.seq = state.version, state.seq
        self.patches += 1

    def _put(self, row: tuple[Any, ...], seq: int) -> None:
        pk, item_id, thread, sortkey, occurred, expires, vec, _terms = row
        slot = self.index.get(pk)
        if slot is None:
            slot = self._new_slot(pk)
        else:
            self._unlink(slot)
        self.stamps[slot] = seq
        if self.slot_of.get(self.ids[slot]) == slot:
            del self.slot_of[self.ids[slot]]
        self.slot_of[item_id] = slot
        self.ids[slot], self.threads[slot], self.sortkeys[slot] = item_id, thread, sortkey
        if occurred is None:
            self.has_occurred[slot] = False
        else:
            (
                self.occurred[slot : slot + 1],
                self.has_occurred[slot : slot + 1],
                self.month[slot : slot + 1],
            ) = _occurred_arrays([occurred])
        if expires is None:
            self.expiring.pop(slot, None)
        else:
            self.expiring[slot] = expires
        if self.matrix is not None:
            if vec is not None:
                self.matrix[slot] = np.frombuffer(vec, dtype=np.float32)
            self.has_vector[slot] = vec is not None
        self._link(slot)

    def _new_slot(self, pk: int) -> int:
        if self.free:
            slot = self.free.pop()
        else:
            if self.n == len(self.pks):
                self._grow(max(self.n + 64, self.n * 3 // 2))  # amortised: appends stay cheap
            slot = self.n
            self.n += 1
            self.ids.append("")
            self.threads.append(None)
            self.sortkeys.append("")
        self.pks[slot] = pk
        self.alive[slot] = True
        self.index[pk] = slot
        return slot

    def _remove(self, pk: int) -> None:
        slot = self.index.pop(pk)
        if self.slot_of.get(self.ids[slot]) == slot:
            del self.slot_of[self.ids[slot]]
        self._unlink(slot)
        self.alive[slot] = self.has_vector[slot] = self.has_occurred[slot] = False
        self.expiring.pop(slot, None)
        self.threads[slot] = None
        self.free.append(slot)

    def _unlink(self, slot: int) -> None:
        """Take a row out of its thread, joining the rows before and after it."""
        thread = self.threads[slot]
        if thread is not None:
            members = self.members[thread]
            j = bisect_left(members, (self.sortkeys[slot], int(self.pks[slot])))
            del members[j]
            before = members[j - 1][2] if j > 0 else -1
            after = members[j][2] if j < len(members) else -1
            if before >= 0:
                self.next[before] = after
            if after >= 0:
                self.prev[after] = before
            if not members:
                del self.members[thread]
        self.prev[slot] = self.next[slot] = -1

    def _link(self, slot: int) -> None:
        thread = self.threads[slot]
        if thread is None:
            return
        members = self.members.setdefault(thread, [])
        entry = (self.sortkeys[slot], int(self.pks[slot]), slot)
        j = bisect_left(members, entry)
        members.insert(j, entry)
        before = members[j - 1][2] if j > 0 else -1
        after = members[j + 1][2] if j + 1 < len(members) else -1
        self.prev[slot], self.next[slot] = before, after
        if before >= 0:
            self.next[before] = slot
        if after >= 0:
            self.prev[after] = slot

    # ------------------------------------------------------------ queries

    def live(self, now: str | None) -> np.ndarray:
        """Live slots, and (given ``now``) not expired at ``now``."""
        live = self.alive[: self.n].copy()
        if now is not None:
            for slot, expiry in self.expiring.items():
                if expiry <= now:
                    live[slot] = False
        return live

    def cosines(self, vector: Vector) -> np.ndarray:
        assert self.matrix is not None
        m = self.matrix[: self.n]
        return np.einsum("ij,j->i", m, vector) if self.n >= LARGE_SCOPE else m @ vector

    def order_key(self, slot: int) -> tuple[bool, str, str, int]:
        """Thread order (as ``ORDER BY thread_id, time, pk`` with NULL threads first)."""
        thread = self.threads[slot]
        return (thread is not None, thread or "", self.sortkeys[slot], int(self.pks[slot]))

    def top(self, scores: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
        """Slots of the ``k`` best scores where ``mask`` holds, best first; equal scores in
        thread order, so the answer does not depend on where rows sit."""
        idx = np.flatnonzero(mask)
        if k <= 0 or idx.size == 0:
            return []
        sub = scores[idx]
        if k < idx.size:
            if np.isnan(sub).any():
                sub = np.where(np.isnan(sub), -np.inf, sub)
            kth = np.partition(sub, idx.size - k)[idx.size - k]
            keep = sub >= kth  # the k best and any ties with the k-th
            idx, sub = idx[keep], sub[keep]
        slots: list[int] = idx.tolist()
        values: list[float] = sub.tolist()
        if len(set(values)) == len(values) and not np.isnan(sub).any():
            # No ties (so the thread order decides nothing): sort by the score alone.
            order = sorted(range(len(slots)), key=values.__getitem__, reverse=True)
        else:
            order = sorted(range(len(slots)), key=lambda j: (-values[j], self.order_key(slots[j])))
        return [slots[j] for j in order[:k]]

    def in_time(self, ranges: Sequence[tuple[datetime, datetime]], months: Sequence[int]) -> np.ndarray:
        n = self.n
        hit = np.zeros(n, dtype=bool)
        occurred = self.occurred[:n]
        for a, b in ranges:
            lo, hi = _micros(ts(a) or ""), _micros(ts(b) or "")
            hit |= (occurred >= lo) & (occurred < hi)
        if months:
            hit |= np.isin(self.month[:n], np.array(months, dtype=np.int64))
        return hit & self.has_occurred[:n]


class _Collection:
    """A keyword collection's rows (:func:`~jiyi.store.base.keyword_collection`): pk -> slot and the documents'
    posting lists (:class:`~jiyi.store.keywords.KeywordIndex`), cached and patched from the
    change log like :class:`_ScopeRows` (whose patching it shares), without their vectors,
    threads and times: a first search of a scope builds both."""

    dim = 0

    def __init__(self, state: _ScopeState, rows: list[tuple[int, str | None]]) -> None:
        self.version = state.version
        self.seq = state.seq
        self.patches = 0
        self.index: dict[int, int] = {pk: slot for slot, (pk, _) in enumerate(rows)}
        self.free: list[int] = []
        self.pks = np.array([pk for pk, _ in rows] or [0], dtype=np.int64)
        self.keywords = KeywordIndex(len(rows))
        self.keywords.load((slot, terms) for slot, (_, terms) in enumerate(rows))

    def apply(self, state: _ScopeState, found: list[tuple[Any, ...]], changed: Sequence[int]) -> None:
        """As :meth:`_ScopeRows.apply` (``found``: rows of :func:`_changed_rows_sql`, terms last)."""
        placed = set()
        for row in found:
            pk = row[0]
            slot = self.index.get(pk)
            if slot is None:
                slot = self.free.pop() if self.free else len(self.index)
                if slot >= len(self.pks):
                    self.pks = np.concatenate(
                        (self.pks, np.zeros(max(64, len(self.pks) // 2), dtype=np.int64))
                    )
                self.index[pk] = slot
                self.pks[slot] = pk
            self.keywords.put(slot, row[-1])
            placed.add(pk)
        for pk in changed:
            if pk not in placed and pk in self.index:
                slot = self.index.pop(pk)
                self.keywords.remove(slot)
                self.free.append(slot)
        self.version, self.seq = state.version, state.seq
        self.patches += 1


CacheKey = tuple[Filter, str | None, int]
"""A cached scope: the filter (expiry aside), the model and the dimension of its vectors
(None and 0: no vectors, for keyword and thread lookups; -1: a keyword collection)."""


RowKey = tuple[int, int, int]
"""A row as a cached scope read it: pk, index version and change-log position (the
scope's :attr:`_ScopeRows.stamps`)."""


class _RowItems:
    """The items a reader thread's searches parsed, by :data:`RowKey` (least recently used
    out first), with their index terms and the usage columns each carries.

    A search loads every candidate (~130 in a LoCoMo-sized scope) and the same rows come
    back search after search. A row's document changes only through writes the change log
    records (a search's touch writes the usage columns alone), so a key names one document:
    a search reads and parses the documents of the rows it has not seen yet only, and for
    the rest reads the usage columns, laid over the cached item when a touch moved them.
    Not thread-safe: one per reader thread.
    """

    def __init__(self, size: int = 4096) -> None:
        self._data: OrderedDict[RowKey, tuple[MemoryItem, str | None, tuple[int, str | None]]] = OrderedDict()
        self._key_of: dict[int, RowKey] = {}  # each pk's latest key: an older one goes at once
        self._size = size

    def missing(self, keys: list[RowKey]) -> dict[int, RowKey]:
        """The keys not here, by pk (one call a search rather than one per candidate)."""
        data = self._data
        return {key[0]: key for key in keys if key not in data}

    def put(self, key: RowKey, item: MemoryItem, terms: str | None) -> None:
        older = self._key_of.get(key[0])
        if older is not None and older != key:
            self._data.pop(older, None)
        self._key_of[key[0]] = key
        self._data[key] = (item, terms, (item.access_count, ts(item.last_used_at)))
        while len(self._data) > self._size:
            gone, _ = self._data.popitem(last=False)
            if self._key_of.get(gone[0]) == gone:
                del self._key_of[gone[0]]

    def used(
        self, keys: list[RowKey], usage: dict[int, tuple[int, str | None]]
    ) -> list[tuple[MemoryItem, str | None] | None]:
        """Per key, its item with its usage columns (``usage``, by pk) laid over it, and its
        terms; None for a key not here or without usage columns. An overlaid item replaces
        the cached one (copied once per touch). One call for a search's ~130 keys."""
        data = self._data
        out: list[tuple[MemoryItem, str | None] | None] = []
        for key in keys:
            found = usage.get(key[0])
            if found is None or (entry := data.get(key)) is None:
                out.append(None)
                continue
            item, terms, was = entry
            data.move_to_end(key)
            if was != found:
                item = with_usage(item, *found)
                data[key] = (item, terms, found)
            out.append((item, terms))
        return out


def _items_of(local: threading.local) -> _RowItems:
    items: _RowItems | None = getattr(local, "row_items", None)
    if items is None:
        items = local.row_items = _RowItems()
    return items


_Cached = _ScopeRows | _Collection


def _cache_of(local: threading.local) -> OrderedDict[CacheKey, _Cached]:
    cache: OrderedDict[CacheKey, _Cached] | None = getattr(local, "scopes", None)
    if cache is None:
        cache = local.scopes = OrderedDict()
    return cache


class _Search:
    """The search primitives over one read snapshot and one reader thread's scope caches.

    All the primitives of one ``Retrieve`` run on the same snapshot, so a filter's cached
    rows are brought up to date (or built) once, and the cosines to one query vector are
    computed once; a primitive run alone gets a view of its own.
    """

    def __init__(
        self, conn: sqlite3.Connection, cache: OrderedDict[CacheKey, _Cached], items: _RowItems
    ) -> None:
        self.conn = conn
        self.cache = cache
        self.items = items
        self._rows: dict[CacheKey, _Cached] = {}
        self._bases: dict[int, tuple[Filter, Filter]] = {}
        self._cosines: dict[tuple[int, int], tuple[Vector, np.ndarray]] = {}
        self._live: dict[tuple[int, str | None], np.ndarray] = {}
        self._states: dict[tuple[str, tuple[str, ...]], _ScopeState] = {}
        """The log state per (tenant, scopes), read once per snapshot: a search's filter and
        its keyword collection name the same scopes."""

    @property
    def handlers(self) -> dict[type, Handler]:
        """The primitives by type, made on each use: kept on the object, its bound methods
        would make a reference cycle, and every search would leave this object (with its
        cosines and masks) for the cyclic garbage collector instead of freeing it on return."""
        return {
            VectorHits: self.vector_hits,
            KeywordHits: self.keyword_hits,
            ThreadLinks: self.thread_links,
            LoadHits: self.load_hits,
        }

    # ------------------------------------------------------------ the primitives

    def vector_hits(self, op: VectorHits) -> list[Hit]:
        rows = self.rows(op.filter, op.model_id, int(op.vector.shape[0]))
        if not rows.index:
            return []
        live = self.live(rows, op.filter)
        if rows.matrix is None:
            return []
        cosines = self.cosines(rows, op.vector)
        usable = live & rows.has_vector[: rows.n]
        if op.time_ranges or op.time_months:
            usable &= rows.in_time(op.time_ranges, op.time_months)
        return [Hit(rows.ids[s], float(cosines[s])) for s in rows.top(cosines, usable, op.k)]

    def keyword_hits(self, op: KeywordHits) -> list[Hit]:
        """BM25 over the searched scopes, all statuses (the tenant when none is named; what
        the viewer may see), as PostgreSQL scores it: the collection's cached posting lists
        (:class:`_Collection`; FTS5's formula) score, and the filter's cached rows decide
        what is admitted. Equal scores come in pk order. When too few of the best pass the
        filter, it takes more."""
        if not op.terms or op.k <= 0:
            return []
        rows = self.rows(op.filter, None, None)
        if not rows.index:
            return []
        live = self.live(rows, op.filter)
        collection = self.collection(keyword_collection(op.filter))
        slots, scores = collection.keywords.scores(op.terms)
        pks = collection.pks[slots]
        want = op.k + 16
        while True:
            out: list[Hit] = []
            for j in best_first(slots, scores, pks, want):
                slot = rows.index.get(int(pks[j]))
                if slot is not None and live[slot]:
                    out.append(Hit(rows.ids[slot], float(scores[j])))
                    if len(out) == op.k:
                        return out
            if want >= len(slots):
                return out
            want *= 4

    def thread_links(self, op: ThreadLinks) -> dict[str, Link]:
        rows = self.rows(op.filter, None, None)
        if not rows.index:
            return {}
        live = self.live(rows, op.filter)
        slot_of, threads = rows.slot_of, rows.threads
        seeds = [s for i in op.ids if (s := slot_of.get(i)) is not None and threads[s] is not None]
        before = after = np.array(seeds, dtype=np.int64)
        near = [before]
        for _ in range(max(0, op.reach)):
            before, after = rows.prev[before], rows.next[after]
            before, after = before[before >= 0], after[after >= 0]
            near += [before, after]
        slots = np.unique(np.concatenate(near))
        ids = rows.ids
        return {
            ids[s]: Link(None if p < 0 else ids[p], None if n < 0 else ids[n], alive)
            for s, p, n, alive in zip(
                slots.tolist(),
                rows.prev[slots].tolist(),
                rows.next[slots].tolist(),
                live[slots].tolist(),
                strict=True,
            )
        }

    def load_hits(self, op: LoadHits) -> dict[str, Loaded]:
        dim = None if op.vector is None else int(op.vector.shape[0])
        rows = self.rows(op.filter, op.model_id, dim)
        slot_of = rows.slot_of
        wanted = dict.fromkeys(i for i in op.ids if i in slot_of)
        ids = [*wanted, *(i for i in dict.fromkeys(op.context_ids) if i in slot_of and i not in wanted)]
        m = len(wanted)  # the first m of ids are asked for; the rest need only their cosines
        slots = np.fromiter(map(slot_of.__getitem__, ids), dtype=np.int64, count=len(ids))
        cosines: list[float | None] = [None] * len(ids)
        vectors: list[Vector | None] = [None] * m
        if op.vector is not None and rows.matrix is not None:
            has = rows.has_vector[slots].tolist()
            values = self.cosines(rows, op.vector)[slots].tolist()
            block = rows.matrix[slots[:m]]  # a copy: the cached matrix is patched in place later
            cosines = [c if h else None for c, h in zip(values, has, strict=True)]
            vectors = [block[j] if h else None for j, h in enumerate(has[:m])]
        out: dict[str, Loaded] = {}
        if m:
            parsed, epoch = self.items, rows.version[0]
            pks = rows.pks[slots[:m]].tolist()
            keys = [
                (pk, epoch, stamp) for pk, stamp in zip(pks, rows.stamps[slots[:m]].tolist(), strict=True)
            ]
            if missing := parsed.missing(keys):
                # Only rows not parsed yet; the index terms from FTS5's own content table (its
                # column c1 is `terms`): a join through the virtual table costs three times as much.
                for pk, doc, terms in self.conn.execute(
                    "SELECT i.pk, i.doc, f.c1 FROM items i LEFT JOIN items_fts_content f ON f.id = i.pk "
                    f"WHERE i.pk IN ({','.join('?' * len(missing))})",
                    list(missing),
                ):
                    parsed.put(missing[pk], load_item(doc), terms)
            usage = {
                pk: (count, used)
                for pk, count, used in self.conn.execute(
                    "SELECT pk, access_count, last_used_at FROM items "
                    f"WHERE tenant_id = ? AND pk IN ({','.join('?' * m)})",  # the covering index items_usage
                    (op.filter.tenant_id, *pks),
                )
            }
            for j, (item_id, got) in enumerate(zip(wanted, parsed.used(keys, usage), strict=True)):
                if got is not None:
                    item, terms = got
                    out[item_id] = Loaded(
                        item if op.shared_items else detached(item), vectors[j], cosines[j], terms
                    )
        for j in range(m, len(ids)):
            out[ids[j]] = Loaded(None, None, cosines[j], None)
        return out

    # ------------------------------------------------------------ shared within the snapshot

    def live(self, rows: _ScopeRows, f: Filter) -> np.ndarray:
        now: str | None = None
        if not f.include_expired:
            if f.now is None:
                raise InvalidInput("a filter that hides expired items needs 'now'", field="now")
            now = ts(f.now)
        key = (id(rows), now)
        found = self._live.get(key)
        if found is None:
            found = self._live[key] = rows.live(now)
        return found

    def cosines(self, rows: _ScopeRows, vector: Vector) -> np.ndarray:
        key = (id(rows), id(vector))
        found = self._cosines.get(key)
        if found is None:
            # The vector is kept with its cosines, so its id stays its own meanwhile.
            found = self._cosines[key] = (vector, rows.cosines(vector))
        return found[1]

    def rows(self, f: Filter, model_id: str | None, dim: int | None) -> _ScopeRows:
        """The filter's cached rows with vectors of ``model_id`` and ``dim``; with ``dim``
        None, whichever the filter has (keywords and threads do not need vectors)."""
        base = self._base(f)
        key: CacheKey = (base, model_id, dim or 0)
        if dim is None:
            same = [k for k in self._rows if k[0] == base and k[2] >= 0] or [
                k for k in self.cache if k[0] == base and k[2] >= 0
            ]
            key = same[-1] if same else (base, None, 0)
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = self._cached(key, lambda state: self._build_rows(key, state))
        assert isinstance(found, _ScopeRows)
        return found

    def collection(self, f: Filter) -> _Collection:
        """The keyword collection of filter ``f`` (:func:`~jiyi.store.base.keyword_collection`),
        cached like rows."""
        base = self._base(f)
        key: CacheKey = (base, None, -1)
        found = self._rows.get(key)
        if found is None:
            where, params = _filter_sql(base)

            def build(state: _ScopeState) -> _Collection:
                return _Collection(
                    state,
                    self.conn.execute(
                        f"SELECT i.pk, f.c1 FROM items i LEFT JOIN items_fts_content f ON f.id = i.pk WHERE {where}",
                        params,
                    ).fetchall(),
                )

            found = self._rows[key] = self._cached(key, build)
        assert isinstance(found, _Collection)
        return found

    def _base(self, f: Filter) -> Filter:
        """``f`` with expiry aside: what a cache entry is kept for."""
        known = self._bases.get(id(f))
        if known is None or known[0] is not f:
            known = self._bases[id(f)] = (f, replace(f, now=None, include_expired=True))
        return known[1]

    def _cached(self, key: CacheKey, build: Callable[[_ScopeState], _Cached]) -> _Cached:
        """The cache entry of ``key``, cached per reader thread; a cached entry that others
        wrote to is patched from the change log (the rows logged since it was last brought
        up to date), or rebuilt when the log no longer reaches back that far or the gap is
        large. Call inside a snapshot."""
        f, model_id, _ = key
        conn, cache = self.conn, self.cache
        state = self._states.get((f.tenant_id, f.scope_keys))
        if state is None:
            state = self._states[(f.tenant_id, f.scope_keys)] = _scope_state(conn, f)
        hit = cache.get(key)
        if hit is not None:
            try:
                current = _bring_up_to_date(conn, f, model_id, hit, state)
            except BaseException:
                del cache[key]  # possibly half patched: never use it again
                raise
            if current:
                cache.move_to_end(key)
                return hit
            del cache[key]  # release its memory before building the replacement
        built = build(state)
        cache[key] = built
        while len(cache) > SCOPE_CACHE_ENTRIES:
            cache.popitem(last=False)
        return built

    def _build_rows(self, key: CacheKey, state: _ScopeState) -> _ScopeRows:
        """Every item of the filter (expiry aside) with its vector and thread order."""
        f, model_id, dim = key
        conn = self.conn
        where, params = _filter_sql(f)
        rows = conn.execute(
            f"SELECT i.pk, i.id, i.thread_id, coalesce(i.occurred_at, i.created_at), i.occurred_at, "
            f"i.expires_at FROM items i WHERE {where} "
            f"ORDER BY i.thread_id, coalesce(i.occurred_at, i.created_at), i.pk",
            params,
        ).fetchall()
        # Vectors in a second query, unsorted: sorting 2 KB blobs along with the rows made
        # SQLite's sorter the slowest part of a rebuild (100k rows: ~0.9-2 s vs ~0.5 s).
        vectors = (
            conn.execute(
                f"SELECT i.pk, v.vec FROM items i JOIN vectors v ON v.pk = i.pk AND v.model = ? "
                f"AND v.dim = ? WHERE {where}",
                (model_id, dim, *params),
            )
            if dim
            else None
        )
        return _ScopeRows.build(state, dim, rows, vectors)


def _bring_up_to_date(
    conn: sqlite3.Connection, f: Filter, model_id: str | None, rows: _Cached, state: _ScopeState
) -> bool:
    """Patch ``rows`` (of filter ``f``, expiry aside) to ``state``; False when a rebuild is
    needed instead."""
    if rows.version == state.version and rows.seq <= state.seq:
        # Nothing of these scopes was logged since: later patches can start from here.
        rows.seq = state.seq
        return True
    if rows.version[0] != state.version[0] or not state.floor <= rows.seq <= state.seq:
        return False  # bulk load or clear, the log was pruned, or the file was replaced
    live = len(rows.index)
    if len(rows.free) > max(1024, live):
        return False  # mostly holes: a rebuild compacts
    most = 64 + live // 4  # beyond this, re-reading everything is about as fast
    # Named scopes: their index from the cached position on; the whole tenant: the
    # primary key range from there ('+' keeps SQLite off the tenant's index entries).
    scopes = (
        f"tenant_id = ? AND scope_key IN ({','.join('?' * len(f.scope_keys))})"
        if f.scope_keys
        else "+tenant_id = ?"
    )
    changed = [
        int(r[0])
        for r in conn.execute(
            f"SELECT DISTINCT pk FROM scope_changes WHERE seq > ? AND {scopes} LIMIT ?",
            (rows.seq, f.tenant_id, *f.scope_keys, most + 1),
        )
    ]
    if len(changed) > most:
        return False
    found: list[tuple[Any, ...]] = []
    if changed:
        where, params = _filter_sql(f)
        vector_params = (model_id, rows.dim) if rows.dim else ()
        found = conn.execute(
            _changed_rows_sql(rows.dim, where),
            (json.dumps(changed), *vector_params, *params),
        ).fetchall()
    rows.apply(state, found, changed)
    return True


class _Checkpoints:
    """The log checkpoints of a store's search usage writes (see
    :meth:`SQLiteStore._send_usage`): one after as many usage commits as filled
    :data:`PAGES` log pages the last time (16 at first), each on a thread of its own.

    A passive checkpoint lets the log restart (at the next commit) only if no commit
    came while it ran. Under a steady stream of searches, or a slow disk, one always
    does, and the log would grow without end; so once a checkpoint finds the log past
    :data:`RESTART_AT`, the next usage commit runs SQLite's own checkpoint inside the
    commit instead (no commit can come between), and the log restarts after it."""

    PAGES = 1000
    """SQLite's default ``wal_autocheckpoint``: the log length that calls for one."""

    RESTART_AT = 1500
    """A log this long at a checkpoint has missed its restart (one is due every ~PAGES)."""

    def __init__(self) -> None:
        self.commits = 0  # usage commits since the last checkpoint began
        self.every = 16
        self.in_commit = False  # the next usage commit checkpoints as SQLite does
        self._last_log = 0
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None

    def start(self, connect: Callable[[], sqlite3.Connection]) -> None:
        """Start a checkpoint if one is due and none is running (called by the usage
        writer's thread only)."""
        if self.commits < self.every or (self._thread is not None and self._thread.is_alive()):
            return
        counted, self.commits = self.commits, 0
        self._thread = threading.Thread(
            target=self._run, args=(connect, counted), name="jiyi-wal-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self, connect: Callable[[], sqlite3.Connection], counted: int) -> None:
        try:
            if self._conn is None:
                self._conn = connect()
            _, log, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except (sqlite3.Error, StoreError):
            self.commits += counted  # due again after the next usage commit
            return
        # Pages these commits added: the growth since the last checkpoint, or all of the
        # log if it restarted in between (then fewer than they added: a guess on the low side).
        added = log - self._last_log if log > self._last_log else log
        self._last_log = log
        if added > 0:
            self.every = max(1, min(1024, int(self.PAGES * counted / added)))
        if log >= self.RESTART_AT:
            self.in_commit = True

    def wait(self) -> None:
        """Wait for a running checkpoint (before the store closes its connections)."""
        if self._thread is not None:
            self._thread.join()


SYNCHRONOUS = ("normal", "full")


def _check_synchronous(value: str) -> str:
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in SYNCHRONOUS:
        raise InvalidInput(f"synchronous must be 'normal' or 'full', not {value!r}", field="synchronous")
    return str(mode)


class SQLiteStore(Store):
    """A jiyi store in one SQLite file (``":memory:"`` for a private in-memory store).

    ``synchronous``: ``"normal"`` (the default) syncs the WAL at checkpoints only: a
    crash of the process loses nothing committed, but a power loss or OS crash may lose
    the last commits (never corrupts the file). ``"full"`` syncs the WAL at every commit,
    so a commit that returned survives a power loss too; each write costs one more fsync
    (see docs/benchmarks.md). Also ``sqlite:///path.db?synchronous=full``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        readers: int = 4,
        timeout: float = 30.0,
        migrate: bool = True,
        synchronous: str = "normal",
    ):
        self.path = str(path)
        self.synchronous = _check_synchronous(synchronous)
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
        self._background_usage = True  # False: a search waits for its usage write (A/B, tests)
        self._checkpoints = _Checkpoints()
        self._usage = UsageWriter(self._send_usage, self._after_usage)
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
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
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
        self._usage.close()  # the queued usage writes go in first
        self._closed = True
        self._checkpoints.wait()
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
            self._enter_wal(conn)
        self.migrate()

    def _enter_wal(self, conn: sqlite3.Connection) -> None:
        # When several processes open a new file at once, the switch to WAL can answer
        # "database is locked" at once, without SQLite's busy handler: retry it ourselves
        # for as long as any other statement would wait.
        deadline = time.monotonic() + self._timeout
        pause = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise _map_error(exc, self.path) from exc
            except sqlite3.Error as exc:
                raise _map_error(exc, self.path) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def applied_migrations(self) -> list[int]:
        with self._read() as conn:
            try:
                return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
            except sqlite3.OperationalError:
                return []

    def pending_migrations(self) -> list[tuple[int, str]]:
        return pending(MIGRATIONS, self.applied_migrations())

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
        if self._in_background(op):
            return cast(R, None)
        self._usage.before(op)
        return self._execute_now(op)

    def _execute_now(self, op: Op[R]) -> R:
        try:
            return cast(R, self._dispatch(op))
        except sqlite3.Error as exc:
            raise _map_error(exc, self.path) from exc

    def flush(self) -> None:
        """Wait until every search usage write this store sent in the background (counters
        and retrieval log, see :class:`~jiyi.store.usage.UsageWriter`) has committed. The
        store's own operations do this first; call it before reading the file another way."""
        self._usage.flush()

    def _in_background(self, op: Op[Any]) -> bool:
        """Hand a search's usage write to the background writer (True), unless it is off."""
        return self._background_usage and not self._closed and not self.read_only and self._usage.take(op)

    def _send_usage(self, ops: list[Write]) -> None:
        """Queued search usage writes as one write (one commit), without the log checkpoint
        SQLite runs inside a commit once the log is long (it syncs the log and the file:
        ~10-20 ms on a busy disk, which the caller's next search waited for, about one
        search in 25 at LoCoMo scale); :meth:`_after_usage` starts it on its own."""
        change = Write(tuple(change for op in ops for change in op.changes))
        if self._memory:
            self._execute_now(change)
            return
        checkpoints = self._checkpoints
        with self._write_lock:
            if checkpoints.in_commit:  # the log missed its restart (see _Checkpoints)
                checkpoints.in_commit = False
                self._execute_now(change)
                return
            conn = self._writer
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            try:
                self._execute_now(change)
            finally:
                conn.execute(f"PRAGMA wal_autocheckpoint = {_Checkpoints.PAGES}")
        checkpoints.commits += 1

    def _after_usage(self) -> None:
        """Start the checkpoint the usage commits skipped, once due (:class:`_Checkpoints`),
        on a thread and a connection of its own: a passive checkpoint, as SQLite's own,
        which neither readers nor writers wait for. Other writes checkpoint as they commit."""
        if not self._memory and not self._closed:
            self._checkpoints.start(self._connect)

    async def aexecute(self, op: Op[R]) -> R:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if self._in_background(op):
            return cast(R, None)
        await self._usage.abefore(op)
        pool = self._write_thread if isinstance(op, Write | ClaimJobs) else self._readers
        return await asyncio.get_running_loop().run_in_executor(pool, self._execute_now, op)

    def _dispatch(self, op: Op[Any]) -> Any:
        if isinstance(op, Retrieve):
            return self._search(retrieve_flow(op))
        if isinstance(op, VectorHits | KeywordHits | ThreadLinks | LoadHits):
            return self._search(call(op))
        handler = self._handlers.get(type(op))
        if handler is None:
            raise InvalidInput(f"SQLiteStore does not know operation {type(op).__name__}")
        return handler(op)

    @cached_property
    def _handlers(self) -> dict[type, Callable[[Any], Any]]:
        """Every other operation, by type."""
        return {
            Write: self._write,
            GetItems: self._get_items,
            ListItems: self._list_items,
            GetHistory: self._history,
            GetStats: self._stats,
            CountEvents: self._count_events,
            CacheGet: self._cache_get,
            VectorsFor: self._vectors_for,
            GetMessages: self._get_messages,
            GetCheckpoint: self._get_checkpoint,
            ListCheckpoints: self._list_checkpoints,
            ListJobs: self._list_jobs,
            ClaimJobs: self._claim_jobs,
            DumpRows: self._dump_rows,
            ScopeClock: self._scope_clock,
            ListAccesses: self._list_accesses,
        }

    def _scope_clock(self, op: ScopeClock) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT value FROM meta WHERE key = ?", (_clock_key(op.tenant_id, op.scope_key),)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def _count_events(self, op: CountEvents) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT count(*) FROM rate_events WHERE key = ? AND at >= ?", (op.key, ts(op.since))
            ).fetchone()
        return int(row[0])

    def _list_checkpoints(self, op: ListCheckpoints) -> list[Checkpoint]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT doc FROM checkpoints WHERE tenant_id = ? AND session_id = ? "
                "ORDER BY created_at DESC, id DESC LIMIT ?",
                (op.tenant_id, op.session_id, max(1, op.limit)),
            ).fetchall()
        return [load_stored(Checkpoint, r[0]) for r in rows]

    # ------------------------------------------------------------ reads

    def _get_items(self, op: GetItems) -> list[MemoryItem]:
        if not op.ids:
            return []
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT id, doc, access_count, last_used_at FROM items WHERE tenant_id = ? "
                f"AND id IN ({','.join('?' * len(op.ids))})",
                (op.tenant_id, *op.ids),
            ).fetchall()
        by_id = {r[0]: read_item(r[1], r[2], r[3]) for r in rows}
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
                f"SELECT i.doc, i.created_at, i.id, i.access_count, i.last_used_at FROM items i WHERE {where} "
                f"ORDER BY i.created_at {order}, i.id {order} LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_cursor(rows[-1][1], rows[-1][2]) if more and rows else None
        return Page(items=[read_item(r[0], r[3], r[4]) for r in rows], next_cursor=cursor)

    @staticmethod
    def _with_served(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> list[MemoryAccess]:
        """``memory_access`` rows (:data:`ACCESS_COLUMNS`) with what each served."""
        by_access: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for tenant in {r[0] for r in rows}:
            ids = [r[1] for r in rows if r[0] == tenant]
            for r in conn.execute(
                f"SELECT {SERVED_COLUMNS} FROM memory_access_items WHERE tenant_id = ? "
                f"AND access_id IN ({','.join('?' * len(ids))})",
                (tenant, *ids),
            ):
                by_access.setdefault((tenant, r[0]), []).append(r)
        return [access_of(r, by_access.get((r[0], r[1]), [])) for r in rows]

    def _list_accesses(self, op: ListAccesses) -> AccessPage:
        conditions, params = access_conditions(op, lambda name: f":{name}", ts)
        if op.item_id is not None:
            conditions.append(
                "a.id IN (SELECT access_id FROM memory_access_items WHERE tenant_id = :tenant AND item_id = :item)"
            )
            params["item"] = op.item_id
        where = "".join(f" AND {c}" for c in conditions)
        limit = max(1, op.limit)
        params["limit"] = limit + 1
        with self._read() as conn, _snapshot(conn):
            rows = conn.execute(
                f"SELECT {', '.join('a.' + c for c in ACCESS_COLUMNS.split(', '))} FROM memory_access a "
                f"WHERE a.tenant_id = :tenant{where} ORDER BY a.at DESC, a.id DESC LIMIT :limit",
                params,
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            found = self._with_served(conn, rows)
        cursor = encode_cursor(rows[-1][2], rows[-1][1]) if more and rows else None
        return AccessPage(found, cursor)

    def _search(self, flow: Flow[R]) -> R:
        """Run a search flow on one read snapshot, over this thread's scope caches."""
        with self._read() as conn, _snapshot(conn):
            return drive(flow, _Search(conn, _cache_of(self._local), _items_of(self._local)).handlers)

    def _history(self, op: GetHistory) -> list[HistoryEvent]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before, after "
                "FROM history WHERE tenant_id = ? AND item_id = ? ORDER BY seq",
                (op.tenant_id, op.item_id),
            ).fetchall()
        return [history_event(r, r[4]) for r in rows]

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
            # Upserts and purges bump only their scope's version (see _bump_scope), and the
            # rows they touch are logged (scope_changes); bulk loads and clears change
            # everything at once.
            _check_guards(conn, [c for c in op.changes if isinstance(c, Guard)])
            if any(isinstance(c, LoadRows | ClearRows) and "items" in _kinds(c) for c in op.changes):
                conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'index_version'")
            for change in op.changes:
                self._apply(conn, change)
            if any(isinstance(c, Upsert | Purge | SetVectors | LoadRows | ClearRows) for c in op.changes):
                _prune_changes(conn)  # triggers on items logged these changes

    def _apply(self, conn: sqlite3.Connection, change: Change) -> None:
        match change:
            case Guard():
                pass  # checked before every other change (_check_guards)
            case Upsert():
                self._upsert(conn, change)
            case Purge():
                self._purge(conn, change)
            case Touch():
                self._touch(conn, change)
            case RecordAccess() | ForgetAccesses():
                self._access_log(conn, change)
            case RecordEvent():
                conn.execute("INSERT INTO rate_events VALUES (?, ?)", (change.key, ts(change.at)))
            case CachePut():
                conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)",
                    [(change.model_id, h, to_blob(v)) for h, v in change.entries],
                )
            case SetVectors():
                self._set_vectors(conn, change)
            case AppendMessages():
                self._append_messages(conn, change)
            case DeleteMessages() | DeleteCheckpoints() | PutCheckpoint():
                self._session_change(conn, change)
            case PutJob():
                self._put_job(conn, change.job)
            case LoadRows():
                self._load_rows(conn, change)
            case ClearRows():
                self._clear_rows(conn, change)

    @staticmethod
    def _clear_rows(conn: sqlite3.Connection, change: ClearRows) -> None:
        for kind in change.kinds:
            check_row_kind(kind)
            if kind == "items":
                conn.execute("DELETE FROM items_fts")
            for table in ACCESS_TABLES if kind == "retrievals" else (kind,):
                conn.execute(f"DELETE FROM {table}")

    @staticmethod
    def _session_change(
        conn: sqlite3.Connection, change: DeleteMessages | DeleteCheckpoints | PutCheckpoint
    ) -> None:
        if isinstance(change, PutCheckpoint):
            c = change.checkpoint
            conn.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                (c.tenant_id, c.session_id, c.id, ts(c.created_at), c.model_dump_json()),
            )
        elif isinstance(change, DeleteMessages):
            conn.executemany(
                "DELETE FROM messages WHERE tenant_id = ? AND session_id = ? AND seq = ?",
                [(change.tenant_id, change.session_id, q) for q in change.seqs],
            )
        else:
            conn.executemany(
                "DELETE FROM checkpoints WHERE tenant_id = ? AND session_id = ? AND id = ?",
                [(change.tenant_id, change.session_id, i) for i in change.ids],
            )

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
        return [load_stored(Message, r[0]) for r in rows]

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
        return None if row is None else load_stored(Checkpoint, row[0])

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
                job = claimed_job(job, op.worker, until, op.now)
                self._put_job(conn, job)
                claimed.append(job)
        return claimed

    def _upsert(self, conn: sqlite3.Connection, change: Upsert) -> None:
        item = change.item
        # Ids are unique per tenant: another tenant's item of the same id is another item.
        row = conn.execute(
            "SELECT pk, scope_key FROM items WHERE tenant_id = ? AND id = ?", (item.tenant_id, item.id)
        ).fetchone()
        values = _item_row(item)
        _bump_scope(conn, item.tenant_id, item.scope_key)
        if row is None:
            cur = conn.execute(
                f"INSERT INTO items ({_ITEM_COLUMNS}) VALUES ({','.join('?' * len(values))})", values
            )
            pk = cur.lastrowid
        else:
            pk, old_scope = row
            if old_scope != item.scope_key:
                _bump_scope(conn, item.tenant_id, old_scope)
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

    @staticmethod
    def _set_vectors(conn: sqlite3.Connection, change: SetVectors) -> None:
        if change.vectors and not change.model_id:
            raise InvalidInput("a vector needs the model_id that produced it", field="model_id")
        scopes: set[str] = set()
        for item_id, vector in change.vectors:
            row = conn.execute(
                "SELECT pk, scope_key FROM items WHERE tenant_id = ? AND id = ?", (change.tenant_id, item_id)
            ).fetchone()
            if row is None:
                continue
            pk, scope = row
            conn.execute(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                (pk, change.model_id, int(vector.shape[0]), to_blob(vector)),
            )
            # the items trigger does not see a vector change: log the row for cached scopes
            conn.execute(
                "INSERT INTO scope_changes (tenant_id, scope_key, pk) VALUES (?, ?, ?)",
                (change.tenant_id, scope, pk),
            )
            scopes.add(scope)
        for scope in sorted(scopes):
            _bump_scope(conn, change.tenant_id, scope)

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
        conn.execute(
            "DELETE FROM memory_access_items WHERE tenant_id = ? AND item_id = ?",
            (change.tenant_id, change.item_id),
        )
        self._record(conn, change.event)

    @staticmethod
    def _load_access(conn: sqlite3.Connection, access: MemoryAccess, ignore: str = "") -> None:
        """Insert one access and what it served (``ignore=" ON CONFLICT DO NOTHING"``: keep one
        already there; without it a copy's duplicate is refused)."""
        conn.execute(
            f"INSERT INTO memory_access (tenant_id, id, at, kind, query, user_id, project_id, session_id, agent_id, actor) VALUES (:tenant_id, "
            f":id, :at, :kind, :query, :user_id, :project_id, :session_id, :agent_id, :actor){ignore}",
            access_params(access),
        )
        conn.executemany(
            "INSERT INTO memory_access_items (tenant_id, access_id, rank, item_id, at, score, "
            "similarity, relevance) VALUES (:tenant_id, :access_id, :rank, :item_id, :at, :score, "
            f":similarity, :relevance){ignore}",
            served_params(access),
        )

    @classmethod
    def _access_log(cls, conn: sqlite3.Connection, change: RecordAccess | ForgetAccesses) -> None:
        if isinstance(change, RecordAccess):
            cls._load_access(conn, change.access, " ON CONFLICT DO NOTHING")
            return
        t = change.tenant_id
        if change.user_id is not None:
            conn.execute(
                "DELETE FROM memory_access_items WHERE tenant_id = ? AND access_id IN "
                "(SELECT id FROM memory_access WHERE tenant_id = ? AND user_id = ?)",
                (t, t, change.user_id),
            )
            conn.execute("DELETE FROM memory_access WHERE tenant_id = ? AND user_id = ?", (t, change.user_id))
        if change.before is not None:
            cutoff = ts(change.before)
            conn.execute(
                "DELETE FROM memory_access_items WHERE tenant_id = ? AND access_id IN "
                "(SELECT id FROM memory_access WHERE tenant_id = ? AND at < ?)",
                (t, t, cutoff),
            )
            conn.execute("DELETE FROM memory_access WHERE tenant_id = ? AND at < ?", (t, cutoff))

    def _touch(self, conn: sqlite3.Connection, change: Touch) -> None:
        when = ts(change.at)
        conn.executemany(
            # The columns only: reads lay them over the document's copies (see with_usage).
            "UPDATE items SET last_used_at = ?, access_count = access_count + 1 WHERE tenant_id = ? AND id = ?",
            [(when, change.tenant_id, i) for i in change.ids],
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
        page = DumpPage.of(op)
        order, params = page.order(lambda name: "?")
        table = ACCESS_TABLES[0] if page.kind == "retrievals" else page.kind
        with self._read() as conn, _snapshot(conn):
            rows = conn.execute(_DUMP_SQL[page.kind] + order, list(params.values())).fetchall()
            total = None
            if op.after is None:
                total = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            if page.kind == "retrievals":
                out = [dumped_access(a) for a in self._with_served(conn, rows)]
                return RowPage(rows=out, next_after=page.next_after(rows, out), total=total)
        out = [_dump_row(page.kind, r) for r in rows]
        return RowPage(rows=out, next_after=page.next_after(rows, out), total=total)

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
                                ts(dumped_time(row["at"])),
                                int(row["version"]),
                                row["reason"],
                                row["actor"],
                                row["before"],
                                row["after"],
                            ),
                        )
                    case "messages":
                        m = load_stored(Message, row["doc"])
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
                        c = load_stored(Checkpoint, row["doc"])
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
                            "INSERT INTO rate_events VALUES (?, ?)", (row["key"], ts(dumped_time(row["at"])))
                        )
                    case "retrievals":
                        self._load_access(conn, loaded_access(row))
            except KeyError as exc:
                raise InvalidInput(
                    f"a dumped {kind} row lacks {exc.args[0]!r}", field=str(exc.args[0])
                ) from None
            except sqlite3.IntegrityError as exc:
                raise InvalidInput(f"cannot load a {kind} row: it is already there ({exc})") from None

    def _load_item(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        doc = row["doc"]
        item = load_item(doc)
        values = (*_item_row(item)[:-2], doc, item.thread_id)
        if conn.execute(
            "SELECT 1 FROM items WHERE tenant_id = ? AND id = ?", (item.tenant_id, item.id)
        ).fetchone():
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
