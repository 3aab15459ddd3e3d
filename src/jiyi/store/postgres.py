"""The server backend: PostgreSQL with pgvector, behind the same narrow interface as SQLite.

Install with the ``postgres`` extra (psycopg 3 and psycopg-pool); the server
needs the pgvector extension (``CREATE EXTENSION vector`` is run when it is missing).

* **One implementation, two drivers.** Every operation is a *plan*: a generator that
  builds each SQL statement once, yields it and receives its rows back (the pattern of
  :mod:`jiyi.effects`). :func:`jiyi.driver.drive` runs plans on a
  ``psycopg_pool.ConnectionPool`` connection; :func:`jiyi.driver.adrive` runs the very same
  plans on ``psycopg.AsyncConnection`` objects, real async I/O without threads; each
  attempt's handler table takes its connection at the first statement. No SQL or logic
  is written twice. The async connections
  come from a small per-event-loop pool without background tasks rather than
  ``AsyncConnectionPool``, whose worker tasks swallow cancellation and can hang the end
  of ``asyncio.run`` when the store outlives the loop (see :class:`_LoopPool`).
* **Vectors** live in their own table keyed by the item's ``(tenant_id, pk)``, with the model id and
  the dimension, in an *untyped* ``vector`` column: the model, and so the dimension, is
  chosen at run time, and several may coexist. Every query is filtered by tenant and
  usually by scope, and a btree on ``(tenant_id, scope_key, status)`` (covering ``pk``,
  expiry and time, so the scan does not read the wide item rows) reaches a user's rows
  directly. So a search of a scope under ``approximate_from`` items (default 20,000)
  materialises the filter's live rows that have a vector, with their cosine distance
  (``<=>``), in a narrow ``MATERIALIZED`` CTE and sorts that: a top-N heap sort, exact,
  equal to numpy brute force as with SQLite. Each vector row also holds its item's
  ``scope_key`` (kept equal by the writes), so a named scope's vectors are read through
  ``vectors_scope`` and matched to the filter's items in one hash join; the migration
  "vectors stored by scope" clusters the table on it once, putting each scope's vectors
  on consecutive pages, and an operator's later ``CLUSTER vectors`` (docs/deploy.md)
  does so again for rows written since. Larger scopes cost a read and a distance
  per row (100k rows: hundreds of ms), so they go through an HNSW index instead: one
  partial expression index per common dimension (``vec::vector(d)`` where ``dim = d``,
  :data:`HNSW_DIMENSIONS`), walked with pgvector's iterative scan (>= 0.8), which keeps
  going while the tenant, scope and status filters reject rows; a walk inside a query's
  time windows tests each row's own copy of its item's ``occurred_at`` (kept equal by the
  writes, as ``scope_key``), so rows outside them are passed over without reading their
  item; time ranges of named scopes holding fewer than ``WINDOW_EXACT_MAX`` rows (counted
  with the scope's size) are read exactly instead, through the index
  ``vectors_scope_time``: a few days' rows cost less than a walk past all the others. A
  scope too small a part of the index to yield k rows within ``hnsw.max_scan_tuples`` is
  searched exactly, as is any scope when the index is missing. Approximate, measured
  recall in docs/benchmarks.md; the hits are ordered by the exact distance. The scope's size
  comes from ``keyword_scopes`` in the same transaction (:meth:`PostgresStore.explain`
  shows the chosen plan). The cost: every insert of an indexed dimension also inserts
  into the graph (docs/deploy.md). ``dimensions=`` pins one dimension and refuses
  vectors of any other.
* **Search** answers the four primitives of :mod:`jiyi.store.base` (vector hits, keyword
  hits, thread links, loading hits), one statement each; ``Retrieve`` is the shared flow
  of :mod:`jiyi.store.retrieve` over them, run on one connection in a repeatable-read,
  read-only transaction, so its statements see one state as a single statement would.
  That transaction is pipelined (psycopg's pipeline mode): BEGIN goes with the first
  statements, the vector and keyword searches run side by side (their statements share
  round trips), and COMMIT goes with the last statement, so a ``Retrieve`` of a large
  scope takes 4 round trips (scope size and keyword statistics; the HNSW walk and the
  first keyword round; thread links; loading the hits and COMMIT) where it took 10
  (BEGIN, the snapshot and sort settings and COMMIT each took one); a further keyword
  round or a time-window search adds one each, and thread links are not asked when the
  vector and keyword statements found no hit in a thread (3 round trips then).
  Candidates are kept by their stored document's text, so one that comes back unchanged
  is not parsed again. Thread positions are numbered only in the threads of the items
  asked about.
* **Keyword index**: PostgreSQL's parser keeps a whole run of Han characters as one
  token, so the index stores the pre-segmented terms of :mod:`jiyi.text.tokenize`
  (Latin diacritics folded, as SQLite FTS5's ``remove_diacritics`` does) and a generated
  ``to_tsvector('simple', terms)`` column under a GIN index. A query is an OR of the
  terms, each quoted and escaped for ``to_tsquery``. The score is FTS5's BM25 (k1 1.2,
  b 0.75, IDF floored at 1e-6), computed from the stored term positions. Its collection
  is the *searched scopes* (the tenant when none is named), all statuses, as if they
  were one FTS5 table of their own: document count and total length per scope are kept
  in ``keyword_scopes`` (per tenant in ``keyword_stats``) by the same transactions that
  write items, and so are document frequencies per scope and term (``keyword_terms``,
  with a highest frequency and a shortest length that bound a term's score). A search of
  named scopes reads those, then scores in rounds only the rows whose terms' bounds add
  up to more than a level (an AND/OR ``tsquery`` over the scope's own lexemes, which a
  GIN index keyed by scope and term answers from short posting lists), down to the
  k-th score found: the exact top k without reading the thousands of rows that hold
  just a common word (MaxScore-style). A search of the whole tenant, or by a viewer
  who may not see every project item, reads every row holding a query term and counts
  frequencies in that pass (the viewer gets the statistics of what they see). So other
  scopes' content neither slows a search nor shifts its scores. Scores are positive, higher is better, and equal SQLite's when its file holds
  just the searched scopes (SQLite's FTS5 counts its whole table). (pg_trgm is not used:
  not every install has it, and trigrams cannot match two-character Chinese words.)
* **Documents** (and history snapshots) are ``json``, not ``jsonb``: ``jsonb`` reorders
  object keys and refuses ``\u0000``, so an item would not come back byte-for-byte
  (``model_dump_json`` equal), which the conformance suite demands; ``json`` keeps the
  text verbatim, is still validated and works with ``->``/``->>`` in ad-hoc SQL. The
  columns that filters use mirror SQLite's, times as ``timestamptz`` and keys with the
  ``"C"`` collation so ordering — and therefore cursors — match SQLite's.
* **Usage counters**: ``Touch`` (every search's usage write) updates only the
  ``access_count`` and ``last_used_at`` columns, in one statement (with the retrieval
  log's inserts), and reads lay the columns over the document's copies, which the next
  full write of the item refreshes; ad-hoc SQL should read those two fields from the
  columns. It is one round trip (BEGIN, ``SET LOCAL synchronous_commit = off``, the
  statement and COMMIT pipelined): a crash of the server may lose the last moments'
  counts and log rows, never an item (docs/deploy.md); every other write commits
  synchronously. It is sent by a thread of the store's own
  (:class:`~jiyi.store.usage.UsageWriter`), so the search does not wait for it; the
  store's next operation other than a search's reads waits until it is in, and closing
  the store sends what is queued.
* **Sessions and jobs**: messages, checkpoints and jobs are ``json`` documents with key
  columns. Appends to a session queue on a per-session advisory lock, so a batch gets
  consecutive ``seq`` numbers as under SQLite's single writer; workers claim jobs with
  ``FOR UPDATE SKIP LOCKED``, so concurrent claims never hand out a job twice and never
  wait on each other.
* **Distributable by tenant**: ``tenant_id`` leads every primary, unique and foreign key and
  every btree index of the tables that hold a tenant's data, and every statement on them
  names the tenant (tests/test_tenant_keys.py; docs/deploy.md says how to shard).
* **Migrations**: an append-only list, each applied in its own transaction under
  ``pg_advisory_xact_lock`` and recorded in ``jiyi_schema_migrations``, so several
  processes starting at once apply each migration exactly once.
* **Faults**: a server that cannot be reached raises :class:`~jiyi.errors.StoreUnavailable`
  naming host and port (or socket) but never the password. A connection that died while
  idle in the pool is noticed when it is checked out and replaced; one that drops during
  an operation makes that operation fail (the server rolls its transaction back) and
  the next call gets a fresh connection. Reads, and writes that had not begun, are
  retried once on a new connection; a deadlock or serialisation failure is retried too,
  because PostgreSQL rolled the whole transaction back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import selectors
import struct
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, TypeVar, cast

import numpy as np

from jiyi.driver import AsyncHandler, Handler, adrive, drive
from jiyi.effects import Flow
from jiyi.errors import InvalidInput, StoreCorrupt, StoreError, StoreUnavailable, WriteConflict
from jiyi.model import MemoryItem, as_utc, load_stored
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AccessPage,
    AppendMessages,
    CacheGet,
    CachePut,
    Candidate,
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
    creator_of,
    keyword_collection,
    vector_from_text,
    vector_to_text,
)
from jiyi.store.keywords import K1 as BM25_K1
from jiyi.store.keywords import SCOPE_TOKENS as FTS5_SCOPE_TOKENS  # so both backends score alike
from jiyi.store.keywords import B as BM25_B
from jiyi.store.retrieve import from_hits, hit_asks
from jiyi.store.sqlcommon import (
    ACCESS_COLUMNS,
    ACCESS_TABLES,
    DUMP_KEYS,
    DumpPage,
    access_conditions,
    access_of,
    access_params,
    claimed_job,
    decode_cursor,
    dumped_access,
    dumped_time,
    encode_cursor,
    history_event,
    load_item,
    loaded_access,
    pending,
    served_params,
    thread_items,
    ts,
    viewer_clause,
)
from jiyi.store.usage import UsageWriter, usage_write
from jiyi.text.tokenize import fold_term, fold_terms

try:
    import psycopg
    import psycopg.errors as pg_errors
    from psycopg.abc import Buffer
    from psycopg.adapt import Dumper, Loader
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import Format, TransactionStatus
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout
    from psycopg_pool.abc import ConninfoParam, KwargsParam
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from jiyi.errors import ConfigError, install_hint

    raise ConfigError(
        f"the PostgreSQL backend needs psycopg 3 and psycopg-pool: {install_hint('postgres')}"
    ) from exc

R = TypeVar("R")

PIPELINE = psycopg.capabilities.has_pipeline()
"""Whether this libpq has pipeline mode (14 or newer; psycopg[binary] bundles one): else
every session runs its statements one round trip at a time, as before."""
Rows = list[tuple[Any, ...]]
Conn = psycopg.Connection[Any]
AConn = psycopg.AsyncConnection[Any]

_SCOPED_TSV = "tsv || array_to_tsvector(ARRAY[tenant_id || ' ' || scope_key])"
"""The expression of the first keyword index per scope (migration "keyword index per
scope"; replaced by "keyword index by scope and term")."""


def scope_prefix(tenant_id: str, scope_key: str) -> str:
    """What the keyword index by scope and term puts before a scope's terms (the SQL
    function ``scope_terms`` of that migration computes the same)."""
    return hashlib.md5(f"{tenant_id} {scope_key}".encode(), usedforsecurity=False).hexdigest()[:8]


_HNSW_DIMS = (384, 512, 768, 1024, 1536)
_HNSW_INDEXES = tuple(
    "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_am WHERE amname = 'hnsw') THEN EXECUTE "
    f"'CREATE INDEX IF NOT EXISTS vectors_hnsw_{d} ON {{s}}.vectors "
    f"USING hnsw ((vec::{{vector}}({d})) {{vector_schema}}.vector_cosine_ops) WHERE dim = {d}'; "
    "END IF; END $$"
    for d in _HNSW_DIMS
)
"""The partial HNSW index of each common dimension (see the migration that adds them)."""

# Append-only: never edit a released entry, add a new one. ``{s}`` is the quoted schema,
# ``{vector}`` the schema-qualified pgvector type.
MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "initial schema",
        (
            """CREATE TABLE {s}.items (
                pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                id text COLLATE "C" NOT NULL UNIQUE,
                tenant_id text COLLATE "C" NOT NULL,
                scope text COLLATE "C" NOT NULL,
                scope_key text COLLATE "C" NOT NULL,
                user_id text, project_id text, session_id text, agent_id text,
                memory_type text COLLATE "C" NOT NULL,
                status text COLLATE "C" NOT NULL,
                visibility text NOT NULL,
                source text NOT NULL,
                source_id text,
                confidence double precision NOT NULL,
                importance double precision NOT NULL,
                created_at timestamptz NOT NULL,
                updated_at timestamptz NOT NULL,
                occurred_at timestamptz,
                last_used_at timestamptz,
                expires_at timestamptz,
                access_count bigint NOT NULL,
                mention_count bigint NOT NULL,
                version bigint NOT NULL,
                tags text[] NOT NULL,
                doc json NOT NULL,
                terms text NOT NULL,
                n_terms integer NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector('pg_catalog.simple'::regconfig, terms)) STORED
            )""",
            "CREATE INDEX items_scope ON {s}.items (tenant_id, scope_key, status)",
            "CREATE INDEX items_created ON {s}.items (tenant_id, created_at, id)",
            "CREATE INDEX items_tags ON {s}.items USING gin (tags)",
            "CREATE INDEX items_tsv ON {s}.items USING gin (tsv)",
            """CREATE TABLE {s}.vectors (
                pk bigint PRIMARY KEY REFERENCES {s}.items (pk) ON DELETE CASCADE,
                model text COLLATE "C" NOT NULL,
                dim integer NOT NULL,
                vec {vector} NOT NULL
            )""",
            """CREATE TABLE {s}.keyword_stats (
                tenant_id text COLLATE "C" PRIMARY KEY,
                docs bigint NOT NULL,
                tokens bigint NOT NULL
            )""",
            """CREATE TABLE {s}.history (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                item_id text COLLATE "C" NOT NULL,
                tenant_id text COLLATE "C" NOT NULL,
                action text NOT NULL,
                at timestamptz NOT NULL,
                version bigint NOT NULL,
                reason text NOT NULL,
                actor text,
                before json,
                after json
            )""",
            "CREATE INDEX history_item ON {s}.history (tenant_id, item_id, seq)",
            'CREATE TABLE {s}.rate_events (key text COLLATE "C" NOT NULL, at timestamptz NOT NULL)',
            "CREATE INDEX rate_events_key ON {s}.rate_events (key, at)",
            """CREATE TABLE {s}.embedding_cache (
                model text COLLATE "C" NOT NULL,
                text_hash text COLLATE "C" NOT NULL,
                vec {vector} NOT NULL,
                PRIMARY KEY (model, text_hash)
            )""",
        ),
    ),
    (
        "session messages, checkpoints and the job queue",
        (
            """CREATE TABLE {s}.messages (
                tenant_id text COLLATE "C" NOT NULL,
                session_id text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                id text NOT NULL,
                role text NOT NULL,
                created_at timestamptz NOT NULL,
                doc json NOT NULL,
                PRIMARY KEY (tenant_id, session_id, seq)
            )""",
            """CREATE TABLE {s}.checkpoints (
                tenant_id text COLLATE "C" NOT NULL,
                session_id text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                created_at timestamptz NOT NULL,
                doc json NOT NULL,
                PRIMARY KEY (tenant_id, session_id, id)
            )""",
            "CREATE INDEX checkpoints_time ON {s}.checkpoints (tenant_id, session_id, created_at, id)",
            """CREATE TABLE {s}.jobs (
                id text COLLATE "C" PRIMARY KEY,
                tenant_id text COLLATE "C" NOT NULL,
                kind text COLLATE "C" NOT NULL,
                status text COLLATE "C" NOT NULL,
                run_after timestamptz NOT NULL,
                locked_until timestamptz,
                created_at timestamptz NOT NULL,
                doc json NOT NULL
            )""",
            "CREATE INDEX jobs_runnable ON {s}.jobs (status, run_after)",
            "CREATE INDEX jobs_created ON {s}.jobs (created_at, id)",
        ),
    ),
    (
        "explicit threads for context",
        (
            'ALTER TABLE {s}.items ADD COLUMN thread_id text COLLATE "C"',
            "UPDATE {s}.items SET thread_id = doc->>'thread_id'",
            "CREATE INDEX items_thread ON {s}.items (tenant_id, scope_key, thread_id)",
        ),
    ),
    (
        "vectors stored inline",
        (
            # pgvector's default storage moves a 512-d vector (2 KB) out of line (TOAST), so
            # every distance fetches it again: measured 87 ms vs 28.5 ms for 30k rows.
            "ALTER TABLE {s}.vectors ALTER COLUMN vec SET STORAGE PLAIN",
        ),
    ),
    (
        "creator column for owner_only visibility",
        (
            # Written with every item (creator_of: string creators only, as Viewer.sees).
            # Not a generated column: PostgreSQL's json operators refuse documents holding
            # \u0000, which items may; the backfill parses a copy with it made a space. No
            # index: the visibility test runs on rows the scope index already chose.
            'ALTER TABLE {s}.items ADD COLUMN created_by text COLLATE "C"',
            "UPDATE {s}.items i SET created_by = x.d -> 'metadata' ->> 'created_by' "
            "FROM (SELECT pk, replace(doc::text, '\\u0000', '\\u0020')::json AS d FROM {s}.items) x "
            "WHERE x.pk = i.pk AND json_typeof(x.d -> 'metadata' -> 'created_by') = 'string'",
        ),
    ),
    (
        "keyword statistics per scope",
        (
            # BM25's collection is the searched scopes (see the module notes): their
            # document count and length are kept here by the transactions that write items.
            """CREATE TABLE {s}.keyword_scopes (
                tenant_id text COLLATE "C" NOT NULL,
                scope_key text COLLATE "C" NOT NULL,
                docs bigint NOT NULL,
                tokens bigint NOT NULL,
                PRIMARY KEY (tenant_id, scope_key)
            )""",
            "INSERT INTO {s}.keyword_scopes (tenant_id, scope_key, docs, tokens) "
            "SELECT tenant_id, scope_key, count(*), sum(n_terms) FROM {s}.items GROUP BY tenant_id, scope_key",
        ),
    ),
    (
        "scope index covering the vector scan",
        (
            # A search's vector scan then finds its rows (and their expiry and time) from the
            # index alone, not from the wide item rows: 100k rows of one scope in 8 ms, not 60.
            "CREATE INDEX items_scope_cover ON {s}.items (tenant_id, scope_key, status) "
            "INCLUDE (pk, expires_at, occurred_at)",
            "DROP INDEX {s}.items_scope",
        ),
    ),
    (
        "guard clocks per scope",
        (
            # jiyi.store.base.Guard: a write decided from a reading of its scope commits only
            # if no other guarded write of the scope committed since; the row's lock orders them.
            """CREATE TABLE {s}.scope_clock (
                tenant_id text COLLATE "C" NOT NULL,
                scope_key text COLLATE "C" NOT NULL,
                version bigint NOT NULL,
                PRIMARY KEY (tenant_id, scope_key)
            )""",
        ),
    ),
    (
        "item ids unique per tenant",
        (
            # An id was unique across tenants: one tenant could take an id another tenant
            # computes (a profile's) and learn that an id existed elsewhere.
            "ALTER TABLE {s}.items DROP CONSTRAINT items_id_key",
            "ALTER TABLE {s}.items ADD CONSTRAINT items_tenant_id_key UNIQUE (tenant_id, id)",
        ),
    ),
    (
        "tenant_id leads every key",
        (
            # So the schema can be distributed by tenant (e.g. Citus, distribution column
            # tenant_id: a distributed table's primary and unique keys must hold it, and a
            # foreign key must join on it). tests/test_tenant_keys.py checks every key.
            'ALTER TABLE {s}.vectors ADD COLUMN tenant_id text COLLATE "C"',
            "UPDATE {s}.vectors v SET tenant_id = i.tenant_id FROM {s}.items i WHERE i.pk = v.pk",
            "ALTER TABLE {s}.vectors ALTER COLUMN tenant_id SET NOT NULL",
            "ALTER TABLE {s}.vectors DROP CONSTRAINT vectors_pk_fkey",
            "ALTER TABLE {s}.vectors DROP CONSTRAINT vectors_pkey",
            "ALTER TABLE {s}.items DROP CONSTRAINT items_pkey",
            "ALTER TABLE {s}.items ADD CONSTRAINT items_pkey PRIMARY KEY (tenant_id, pk)",
            "ALTER TABLE {s}.vectors ADD CONSTRAINT vectors_pkey PRIMARY KEY (tenant_id, pk)",
            "ALTER TABLE {s}.vectors ADD CONSTRAINT vectors_item_fkey FOREIGN KEY (tenant_id, pk) "
            "REFERENCES {s}.items (tenant_id, pk) ON DELETE CASCADE",
            "ALTER TABLE {s}.history DROP CONSTRAINT history_pkey",
            "ALTER TABLE {s}.history ADD CONSTRAINT history_pkey PRIMARY KEY (tenant_id, seq)",
        ),
    ),
    (
        "retrieval log",
        (
            # Seed 002's context graph: one row per search / context / tool call and one per
            # memory it served. Append-only; tenant_id leads every key and index.
            """CREATE TABLE {s}.memory_access (
                tenant_id text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                at timestamptz NOT NULL,
                kind text NOT NULL,
                query text NOT NULL,
                user_id text COLLATE "C",
                project_id text COLLATE "C",
                session_id text COLLATE "C",
                agent_id text COLLATE "C",
                actor text,
                PRIMARY KEY (tenant_id, id)
            )""",
            "CREATE INDEX memory_access_at ON {s}.memory_access (tenant_id, at, id)",
            "CREATE INDEX memory_access_user ON {s}.memory_access (tenant_id, user_id, at)",
            """CREATE TABLE {s}.memory_access_items (
                tenant_id text COLLATE "C" NOT NULL,
                access_id text COLLATE "C" NOT NULL,
                rank integer NOT NULL,
                item_id text COLLATE "C" NOT NULL,
                at timestamptz NOT NULL,
                score double precision NOT NULL,
                similarity double precision,
                relevance double precision,
                PRIMARY KEY (tenant_id, access_id, rank)
            )""",
            # Each index costs every search's log write; retention finds served rows by access.
            "CREATE INDEX memory_access_items_item ON {s}.memory_access_items (tenant_id, item_id, at)",
        ),
    ),
    (
        "approximate vector indexes for large scopes",
        # HNSW needs a fixed dimension and the column is untyped: one partial expression
        # index per common embedding size (searched as ``vec::vector(d)`` with ``dim = d``).
        # Only scopes of APPROXIMATE_FROM items or more are searched through them (see
        # PostgresStore._vector_hits). Building them over an existing store takes minutes
        # per million vectors, and blocks writes meanwhile; IF NOT EXISTS lets an operator
        # build them beforehand with CREATE INDEX CONCURRENTLY (docs/deploy.md).
        # pgvector before 0.5 has no HNSW: the store then stays exact (and so before 0.8).
        _HNSW_INDEXES,
    ),
    (
        "keyword document frequencies per scope",
        (
            # A search of a large scope reads its BM25 document frequencies here instead of
            # counting them over every matching row, and skips rows of frequent terms that
            # cannot reach the top k (PostgresStore._keyword_pruned). max_tf and min_len
            # bound a term's score; they only widen (a removal leaves them), so stay bounds.
            """CREATE TABLE {s}.keyword_terms (
                tenant_id text COLLATE "C" NOT NULL,
                scope_key text COLLATE "C" NOT NULL,
                term text COLLATE "C" NOT NULL,
                docs bigint NOT NULL,
                max_tf integer NOT NULL,
                min_len integer NOT NULL,
                PRIMARY KEY (tenant_id, scope_key, term)
            )""",
            "INSERT INTO {s}.keyword_terms (tenant_id, scope_key, term, docs, max_tf, min_len) "
            "SELECT i.tenant_id, i.scope_key, u.lexeme, count(*), max(coalesce(array_length(u.positions, 1), 1)), "
            "min(i.n_terms) FROM {s}.items i CROSS JOIN LATERAL unnest(i.tsv) u GROUP BY 1, 2, 3",
        ),
    ),
    (
        "assistant turns at the gate's minimum confidence",
        (
            # As SQLite's migration of the same name: assistant turn resources still at 1.0
            # and never updated by hand go to 0.7, each change in the history. The documents
            # are edited as text (json keeps them verbatim; a jsonb round trip would reorder
            # their keys): the top-level fields are the only '"confidence":1.0,"importance":'
            # and '"version":N,"relations":' of model_dump_json's output of a turn.
            """CREATE TEMP TABLE migrating ON COMMIT DROP AS SELECT pk,
                regexp_replace(
                    replace(doc::text, ',"confidence":1.0,"importance":', ',"confidence":0.7,"importance":'),
                    ',"version":[0-9]+,"relations":', ',"version":' || (version + 1) || ',"relations":'
                ) AS after
            FROM {s}.items
            WHERE confidence = 1.0 AND doc->'metadata'->>'role' = 'assistant'
            AND tags @> ARRAY['resource', 'turn']::text[]
            AND strpos(doc::text, ',"confidence":1.0,"importance":') > 0
            AND NOT EXISTS (SELECT 1 FROM {s}.history h WHERE h.tenant_id = items.tenant_id
                AND h.item_id = items.id AND h.action = 'update')""",
            """INSERT INTO {s}.history (item_id, tenant_id, action, at, version, reason, actor, before, after)
            SELECT i.id, i.tenant_id, 'update', now(), i.version + 1,
                'an assistant''s turn is kept with the gate''s minimum confidence (0.7), a person''s with 1.0',
                'migration', i.doc, m.after::json
            FROM {s}.items i JOIN migrating m ON m.pk = i.pk ORDER BY i.tenant_id, i.pk""",
            """UPDATE {s}.items i SET confidence = 0.7, version = i.version + 1, doc = m.after::json
            FROM migrating m WHERE m.pk = i.pk""",
        ),
    ),
    (
        "keyword index per scope",
        (
            # Each row's terms plus one lexeme naming its tenant and scope (no term holds a
            # space): a keyword round of a scope asks for (terms) AND (its scope), and the
            # GIN index intersects the two, so other users' rows holding a common word are
            # never read (PostgresStore._keyword_pruned).
            f"CREATE INDEX IF NOT EXISTS items_scope_tsv ON {{s}}.items USING gin (({_SCOPED_TSV}))",
        ),
    ),
    (
        "scope key on vectors",
        (
            # The exact scan of a scope reads its vectors through vectors_scope instead of one
            # primary-key lookup per item; writes keep the copy equal to items.scope_key.
            # Filling it writes a new version of every row, and each would go into the HNSW
            # graphs one by one (hours per million vectors): they are dropped here and built
            # once by the next migration, over the reordered table.
            *(f"DROP INDEX IF EXISTS {{s}}.vectors_hnsw_{d}" for d in _HNSW_DIMS),
            'ALTER TABLE {s}.vectors ADD COLUMN scope_key text COLLATE "C"',
            "UPDATE {s}.vectors v SET scope_key = i.scope_key FROM {s}.items i "
            "WHERE i.tenant_id = v.tenant_id AND i.pk = v.pk",
            "ALTER TABLE {s}.vectors ALTER COLUMN scope_key SET NOT NULL",
            "CREATE INDEX vectors_scope ON {s}.vectors (tenant_id, scope_key, pk)",
        ),
    ),
    (
        "vectors stored by scope",
        (
            # A migration of its own: CLUSTER in the fill's transaction would copy the rows
            # the fill replaced too (still "recently dead" to it), doubling the table. Now a
            # 1,000-item user's vectors sit on ~330 consecutive pages instead of 1,000 pages
            # scattered over the table; rows written later go to the end until the next
            # `CLUSTER vectors`, which uses the index marked here (docs/deploy.md).
            "CLUSTER {s}.vectors USING vectors_scope",
            "ANALYZE {s}.vectors",  # the planner's statistics of the new column, at once
            *_HNSW_INDEXES,
        ),
    ),
    (
        "keyword index by scope and term",
        (
            # One lexeme per (scope, term): "<8 hex of md5(tenant scope)> <term>" (no term
            # holds a space). A keyword round of a scope then reads the short posting lists
            # of its own words, where "keyword index per scope" intersected each word's list
            # over every scope with the scope's (5.4 ms of a 6.7 ms round at 1M over 1,000
            # users). A prefix shared by two scopes only lets the other's rows through to the
            # round's filter, which drops them.
            "CREATE OR REPLACE FUNCTION {s}.scope_terms(tenant text, scope text, terms tsvector) "
            "RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ "
            "SELECT array_to_tsvector(ARRAY(SELECT left(md5(tenant || ' ' || scope), 8) || ' ' || u.lexeme "
            "FROM unnest(terms) AS u(lexeme, positions, weights))) $$",
            "CREATE INDEX IF NOT EXISTS items_scope_terms ON {s}.items "
            "USING gin ({s}.scope_terms(tenant_id, scope_key, tsv))",
            "DROP INDEX IF EXISTS {s}.items_scope_tsv",
        ),
    ),
    (
        "keyword indexes without a pending list",
        (
            # With fastupdate (GIN's default) new entries wait in a pending list that every
            # search of the index reads through, until a vacuum merges it. A search's usage
            # write rewrites its hits' rows, mostly not in place on full pages, so each adds
            # their terms there: at 1,000 items per user, 600 searches made the keyword
            # rounds 4.4x dearer (1.27 -> 5.55 ms of server CPU a search; docs/benchmarks.md,
            # session 15). Without it each write puts its entries in place.
            *(
                stmt
                for index in ("items_scope_terms", "items_tsv", "items_tags")
                for stmt in (
                    f"ALTER INDEX {{s}}.{index} SET (fastupdate = off)",
                    f"SELECT gin_clean_pending_list('{{s}}.{index}'::regclass)",  # what waits there now
                )
            ),
        ),
    ),
    (
        "room on items' pages for usage writes",
        (
            # A search's usage write rewrites its hits' rows. On a full page (a bulk load
            # fills them) the new version goes to another page and every index of items,
            # three of them GIN, gets entries for it; with room on the page it stays there
            # (HOT) and no index changes: 57% -> 84% of touches at 100k in one user, the
            # usage write's server CPU 1.45 -> 1.20 ms mean (docs/benchmarks.md, session 15).
            # Pages written from now on keep the room; existing ones get it when the table
            # is rewritten (VACUUM FULL or CLUSTER, docs/deploy.md), not here: a rewrite
            # locks the table, too long at a million items for an upgrade to take unasked.
            "ALTER TABLE {s}.items SET (fillfactor = 85)",
        ),
    ),
    (
        "item times on vectors",
        (
            # A search whose query names a time walks the HNSW index for rows inside its
            # windows. Tested on the item's occurred_at, every index row walked cost an item
            # lookup (822 walked for 30 kept: 4.4 of its ~14 ms at 100k in one user,
            # docs/benchmarks.md, session 17); tested on this copy, in the vector row the walk
            # reads anyway, only the rows inside reach the item. Writes keep it equal to
            # items.occurred_at. As "scope key on vectors": the fill writes a new version of
            # every row with a time, so the HNSW graphs are dropped first and built once by
            # the next migration, over the rewritten table.
            *(f"DROP INDEX IF EXISTS {{s}}.vectors_hnsw_{d}" for d in _HNSW_DIMS),
            "ALTER TABLE {s}.vectors ADD COLUMN occurred_at timestamptz",
            "UPDATE {s}.vectors v SET occurred_at = i.occurred_at FROM {s}.items i "
            "WHERE i.tenant_id = v.tenant_id AND i.pk = v.pk AND i.occurred_at IS NOT NULL",
        ),
    ),
    (
        "vectors rewritten after the time fill",
        (
            # Its own transaction, as "vectors stored by scope": without the replaced row
            # versions, still in scope order, then the HNSW indexes the fill dropped.
            "CLUSTER {s}.vectors USING vectors_scope",
            "ANALYZE {s}.vectors",
            *_HNSW_INDEXES,
        ),
    ),
    (
        "vectors by scope and time",
        (
            # A large scope's search inside a few days or weeks holding few rows reads them
            # exactly through this index, where the HNSW walk had to pass over every row
            # outside them (WINDOW_EXACT_MAX; docs/benchmarks.md, session 35).
            "CREATE INDEX IF NOT EXISTS vectors_scope_time ON {s}.vectors (tenant_id, scope_key, occurred_at)",
        ),
    ),
]
HNSW_DIMENSIONS = frozenset(_HNSW_DIMS)
"""The vector sizes with an HNSW index (migration "approximate vector indexes for large
scopes"): all-MiniLM/bge-small, USE-m3 and hash:512, bge-base/mpnet, bge-m3/bge-large,
OpenAI text-embedding-3-small/ada-002. Other sizes are always searched exactly."""
APPROXIMATE_FROM = 20_000
"""Scopes holding this many items or more are searched through the HNSW index; smaller
ones exactly (docs/benchmarks.md, PostgreSQL at scale: where the two cost the same)."""
HNSW_EF_SEARCH = 100
"""The HNSW candidate list per search (pgvector's default is 40); at least the k asked."""
HNSW_MAX_SCAN = 20_000
"""At most this many index rows per walk (pgvector's default): bounds a search's time. A
scope too small a part of the index to yield k rows within it is searched exactly."""
WINDOW_EXACT_MAX = 2_000
"""A large scope's search inside time ranges that hold fewer rows than this reads them
exactly (index "vectors_scope_time") instead of walking the HNSW index past every row
outside them. Each row read costs a heap page and its item's lookup (a range's rows lie
apart in a table ordered by scope), the walk less the more rows lie inside: at 100k in one
user, an empty week 12 ms against 130 ms for the walk, a week of ~1,000 rows 12-18 against
53-61 ms, a month of 4,169 rows 50-67 against 20-25 ms (docs/benchmarks.md, session 35)."""

MIGRATION_LOCK = 0x4A49594900000001  # pg_advisory_xact_lock key shared by every jiyi schema
SESSION_LOCKS = 0x4A4959  # two-key advisory locks (this, hashtext(session)) serialise appends
MAX_DIMENSIONS = 16000  # pgvector's limit for the vector type
KEYWORD_FIRST_LEVEL = 0.8
"""A pruned keyword search (:meth:`PostgresStore._keyword_pruned`) first reads the rows
whose terms' score bounds add up to more than this share of all the query terms' bounds."""
KEYWORD_SCAN_ROWS = 2_000
"""A pruned keyword search of a collection this small, or whose terms' document
frequencies add up to no more, scores all their rows in one round (rounds would cost
more than they save)."""
KEYWORD_LEVEL_STEP = 0.75
"""While a pruned keyword search has found fewer than k rows, the next round's level is the
last one times this."""
KEYWORD_MAX_GROUPS = 8
"""A pruned keyword search's round asks the GIN index for the rows holding one of at most
this many sets of terms (:func:`reaching`); when more would be needed (many query terms),
for the rows holding any term but the lowest-bound ones (a wider condition, but short)."""


def _bm25_idf(n: str, df: str) -> str:
    """FTS5's IDF (floored at 1e-6) of SQL expressions ``n`` (documents) and ``df``."""
    return f"greatest(ln(greatest({n} - {df} + 0.5, 0.5) / ({df} + 0.5)), 1e-6)"


def _query_lexemes(terms: str, wanted: str | None = None) -> str:
    """Rows ``(pk, term, tf, n_terms)`` (and ``wanted``, that SQL condition on ``h``, when
    given) of the rows ``h`` that a ``FROM ... WHERE ...) z`` written after it reads: one
    per query term (the text[] parameter ``terms``) among each row's lexemes, with its
    count. Marking the terms (``setweight`` looks each term up) and
    keeping the marked (``ts_filter``) spares turning every lexeme of every row read into a
    row only to drop it (a third of the unnest's server time at 100k memories in one scope).
    The unnest is in the select list (a ProjectSet, value per call), not a lateral function
    scan, which fills and reads a tuplestore per row: 12% of a 1,600-row round's time.
    Right because ``tsv`` is generated by ``to_tsvector``: every lexeme has positions, all
    of weight D."""
    inner, outer = ("", "") if wanted is None else (f", ({wanted}) AS wanted", ", z.wanted")
    return (
        "SELECT z.pk, (z.u).lexeme AS term, coalesce(array_length((z.u).positions, 1), 1)::float8 AS tf, "
        f"z.n_terms{outer} FROM (SELECT h.pk, h.n_terms{inner}, "
        f"unnest(ts_filter(setweight(h.tsv, 'A', %({terms})s::text[]), '{{a}}')) AS u"
    )


def _bm25_sum(avgdl: str) -> str:
    """The BM25 score of a document: the sum over ``kw_hits k`` joined to ``kw_terms t``, in
    term order, so a document's score is the same to the last bit whichever rows a
    statement read with it (a tie is then broken the same way, by pk). The length term in
    float8 rather than numeric: the same value (a quarter-integer, exact in both), at a
    fraction of the cost per row. ``kw_terms`` must be materialized: inlined, its IDF
    (``ln`` and all) is worked out again for every row of ``kw_hits``."""
    return (
        f"sum(t.idf * (k.tf * {BM25_K1 + 1}) / (k.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * "
        f"(k.n_terms + {FTS5_SCOPE_TOKENS})::float8 / {avgdl})) ORDER BY k.term)"
    )


def bm25_bound(n: float, avgdl: float, df: float, max_tf: int, min_len: int) -> float:
    """Above any score a term of ``df`` documents (of ``n``, average length ``avgdl``) can
    give a document, when no document holds it more than ``max_tf`` times and none that
    holds it has fewer than ``min_len`` terms: BM25 grows with the frequency and shrinks
    with the length. A hair above (1e-9), so float rounding never makes it a tie."""
    idf = max(math.log(max(n - df + 0.5, 0.5) / (df + 0.5)), 1e-6)
    tf = max(max_tf, 1)
    norm = 1 - BM25_B + BM25_B * (min_len + FTS5_SCOPE_TOKENS) / avgdl
    return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * norm) * (1 + 1e-9)


class _TooMany(Exception):
    pass


def reaching(
    bounds: Sequence[tuple[str, float]], level: float, limit: int | None = None
) -> list[list[str]] | None:
    """The smallest sets of terms whose score bounds add up to more than ``level``: a
    document holding none of these sets scores at most ``level`` (its terms' bounds do
    not add up to more). ``bounds`` highest first; each set is in that order. None when
    there are more than ``limit`` sets."""
    out: list[list[str]] = []
    rest = [0.0] * (len(bounds) + 1)  # rest[i]: the bounds of terms i.. added up
    for i in range(len(bounds) - 1, -1, -1):
        rest[i] = rest[i + 1] + bounds[i][1]

    def walk(start: int, chosen: list[str], total: float) -> None:
        for i in range(start, len(bounds)):
            if total + rest[i] <= level:
                return  # the terms left cannot make up the difference
            term, bound = bounds[i]
            if total + bound > level:  # minimal: its last term has its lowest bound
                out.append([*chosen, term])
                if limit is not None and len(out) > limit:
                    raise _TooMany
            else:
                walk(i + 1, [*chosen, term], total + bound)

    try:
        walk(0, [], 0.0)
    except _TooMany:
        return None
    return out


def _reaching_query(
    bounds: Sequence[tuple[str, float]], level: float, wide: bool, prefixes: Sequence[str]
) -> tuple[str, bool]:
    """``tsquery`` text, over the keyword index by scope and term of the scopes whose
    :func:`scope_prefix` are ``prefixes``, for rows that may score over ``level``, and
    whether it is the wide form: the sets of :func:`reaching` (an OR of ANDs), or when
    there are too many of them (or ``wide``), any term but the lowest-bound ones that add
    up to ``level`` or less. A lower level's rows include every higher level's, in either
    form, as long as the wide form, once taken, is kept."""
    groups = None if wide else reaching(bounds, level, KEYWORD_MAX_GROUPS)
    if groups is None:
        count, low = len(bounds), 0.0
        while count and low + bounds[count - 1][1] <= level:
            low += bounds[count - 1][1]
            count -= 1
        groups = [[t] for t, _ in bounds[:count]]
        wide = True
    return " | ".join(
        "(" + " & ".join(tsquery_operand(f"{p} {t}") for t in g) + ")" for p in prefixes for g in groups
    ), wide


_VECTOR_ROW = "v.tenant_id = i.tenant_id AND v.pk = i.pk AND v.model = %(model)s AND v.dim = %(dim)s"
"""Joins ``vectors v`` to ``items i``: the row of the searched model and dimension."""

_VECTOR_UPSERT = (
    "INSERT INTO {s}.vectors (tenant_id, pk, scope_key, occurred_at, model, dim, vec) "
    "VALUES (%(tenant)s, %(pk)s, %(scope)s, %(occurred)s, %(model)s, %(dim)s, %(vec)s) ON CONFLICT (tenant_id, pk) "
    "DO UPDATE SET scope_key = EXCLUDED.scope_key, occurred_at = EXCLUDED.occurred_at, "
    "model = EXCLUDED.model, dim = EXCLUDED.dim, vec = EXCLUDED.vec"
)
"""An item's vector (one per item: a new model's replaces the old), with the item's scope
and occurred time."""

_VECTOR_ITEM = (
    "UPDATE {s}.vectors SET scope_key = %(scope)s, occurred_at = %(occurred)s "
    "WHERE tenant_id = %(tenant)s AND pk = %(pk)s"
)
"""An item moved to another scope or time without a new vector: its vector row follows it
(the exact scan finds a scope's vectors by their own ``scope_key``, a windowed walk tests
their own ``occurred_at``)."""

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

_ITEM_COLUMNS = (
    "id",
    "tenant_id",
    "scope",
    "scope_key",
    "user_id",
    "project_id",
    "session_id",
    "agent_id",
    "memory_type",
    "status",
    "visibility",
    "source",
    "source_id",
    "confidence",
    "importance",
    "created_at",
    "updated_at",
    "occurred_at",
    "last_used_at",
    "expires_at",
    "access_count",
    "mention_count",
    "version",
    "tags",
    "doc",
    "terms",
    "n_terms",
    "thread_id",
    "created_by",
)
_ITEM_CASTS = {"tags": "::text[]", "doc": "::json"}
_ITEM_VALUES = ", ".join(f"%({c})s{_ITEM_CASTS.get(c, '')}" for c in _ITEM_COLUMNS)
_ITEM_SETS = ", ".join(f"{c} = %({c})s{_ITEM_CASTS.get(c, '')}" for c in _ITEM_COLUMNS)


# ---------------------------------------------------------------- small helpers


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


def tsquery_operand(term: str) -> str:
    """One term as a quoted operand of ``to_tsquery`` or of a ``::tsquery`` literal (both
    read the same quoting): backslashes and quotes doubled, so ``& | ! ( ) : * < >`` and
    friends, or a space, inside a term are just characters."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _filter_sql(f: Filter, a: str) -> tuple[str, dict[str, Any]]:
    """WHERE conditions (without the keyword) over alias ``a`` and their named parameters."""
    clauses = [f"{a}.tenant_id = %(f_tenant)s"]
    params: dict[str, Any] = {"f_tenant": f.tenant_id}
    if f.scope_keys:
        clauses.append(f"{a}.scope_key = ANY(%(f_scopes)s::text[])")
        params["f_scopes"] = list(f.scope_keys)
    if f.statuses:
        clauses.append(f"{a}.status = ANY(%(f_statuses)s::text[])")
        params["f_statuses"] = [s.value for s in f.statuses]
    if f.memory_types:
        clauses.append(f"{a}.memory_type = ANY(%(f_types)s::text[])")
        params["f_types"] = [t.value for t in f.memory_types]
    if f.tags:
        clauses.append(f"{a}.tags @> %(f_tags)s::text[]")
        params["f_tags"] = list(f.tags)
    if f.without_tags:
        clauses.append(f"NOT ({a}.tags && %(f_without_tags)s::text[])")
        params["f_without_tags"] = list(f.without_tags)
    if not f.include_expired:
        if f.now is None:
            raise InvalidInput("a filter that hides expired items needs 'now'", field="now")
        clauses.append(f"({a}.expires_at IS NULL OR {a}.expires_at > %(f_now)s)")
        params["f_now"] = as_utc(f.now)
    for name, column, op, value in (
        ("f_created_after", "created_at", ">=", f.created_after),
        ("f_created_before", "created_at", "<", f.created_before),
        ("f_occurred_after", "occurred_at", ">=", f.occurred_after),
        ("f_occurred_before", "occurred_at", "<", f.occurred_before),
    ):
        if value is not None:
            clauses.append(f"{a}.{column} {op} %({name})s")
            params[name] = as_utc(value)
    if f.visibilities:
        clauses.append(f"{a}.visibility = ANY(%(f_visibilities)s::text[])")
        params["f_visibilities"] = [v.value for v in f.visibilities]
    viewer = f.viewer
    if viewer is not None:
        seen = viewer_clause(viewer, a, f"{a}.project_id = ANY(%(f_projects)s::text[])", "%(f_actor)s")
        if seen is not None:
            clauses.append(seen)
            # (psycopg ignores named parameters a query does not use)
            params.update(f_projects=list(viewer.projects or ()), f_actor=viewer.actor)
    return " AND ".join(clauses), params


_NO_LEN = 2**31 - 1
"""``min_len`` of a removal: ``least`` keeps the stored one (the bounds only widen)."""


@dataclass
class _Tally:
    """A write's keyword statistics changes: per (tenant, scope key) [documents, tokens];
    per (tenant, scope key, term) [documents, highest term frequency, shortest length]."""

    scopes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    terms: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)

    def item(self, tenant: str, scope_key: str, sign: int, n_terms: int, lexemes: Sequence[Any]) -> None:
        """One document added (sign 1) or removed (-1): its length and its ``(lexeme, tf)``
        pairs (:data:`_LEXEMES`). A removal leaves the frequency and length bounds alone."""
        totals = self.scopes.setdefault((tenant, scope_key), [0, 0])
        totals[0] += sign
        totals[1] += sign * n_terms
        for lexeme, tf in lexemes:
            t = self.terms.setdefault((tenant, scope_key, lexeme), [0, 0, _NO_LEN])
            t[0] += sign
            if sign > 0:
                t[1] = max(t[1], int(tf))
                t[2] = min(t[2], n_terms)

    def clear(self) -> None:
        self.scopes.clear()
        self.terms.clear()


_LEXEMES = "ARRAY(SELECT ARRAY[u.lexeme, coalesce(array_length(u.positions, 1), 1)::text] FROM unnest(tsv) u)"
"""A written row's keyword terms and their frequencies, ``[[lexeme, tf], ...]``: in a
statement's select list or RETURNING (``tsv`` is the row's)."""


def _version(text: str) -> tuple[int, ...]:
    """``"0.8.5"`` -> (0, 8, 5); a part that is not a number ends it."""
    parts: list[int] = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


@dataclass(frozen=True)
class _Sized:
    """A large scope's vector search: the scope-size statement (:meth:`PostgresStore._scope_size`),
    the HNSW walk, and for time ranges of named scopes the exact scan over them
    (:meth:`PostgresStore._range_scan`), taken when the size statement counts fewer rows
    inside them than :data:`WINDOW_EXACT_MAX`."""

    size: _Query
    walk: _Query
    ranges: _Query | None = None

    def by_range(self, size_row: Sequence[Any]) -> _Query | None:
        """The exact scan over the ranges when the search reads them so, given the size
        statement's row (the walk chosen, and few rows inside); else None."""
        if self.ranges is not None and size_row[-1] and size_row[-2] < WINDOW_EXACT_MAX:
            return self.ranges
        return None


def _one_scan(asks: Sequence[VectorHits]) -> bool:
    """Can one exact scan answer ``asks`` (:meth:`PostgresStore._exact_scan`)? They search
    the same rows for the same vector, and at most one has time windows (the statement's
    window parameters are one set)."""
    first = asks[0]
    return (
        all(
            a.filter == first.filter
            and a.model_id == first.model_id
            and (a.vector is first.vector or np.array_equal(a.vector, first.vector))
            for a in asks[1:]
        )
        and sum(bool(a.time_ranges or a.time_months) for a in asks) <= 1
    )


def _in_windows(column: str) -> str:
    """``column`` (an occurred time) falls inside one of the ranges or months of a
    ``VectorHits``' time windows (parameters t_from, t_to, t_months)."""
    return (
        f"{column} IS NOT NULL "
        "AND (EXISTS (SELECT 1 FROM unnest(%(t_from)s::timestamptz[], %(t_to)s::timestamptz[]) "
        f"AS r(a, b) WHERE {column} >= r.a AND {column} < r.b) "
        f"OR extract(month FROM {column} AT TIME ZONE 'UTC')::int = ANY(%(t_months)s::int[]))"
    )


def _in_ranges(column: str, ranges: Sequence[tuple[datetime, datetime]]) -> tuple[str, dict[str, Any]]:
    """``column`` inside one of ``ranges`` (half open, as :func:`_in_windows` tests them),
    written as bounds an index on it can use, and the parameters (r_from0, r_to0, ...)."""
    tests: list[str] = []
    params: dict[str, Any] = {}
    for n, (start, end) in enumerate(ranges):
        params |= {f"r_from{n}": as_utc(start), f"r_to{n}": as_utc(end)}
        tests.append(f"({column} >= %(r_from{n})s AND {column} < %(r_to{n})s)")
    return f"({' OR '.join(tests)})", params


def _window_params(op: VectorHits) -> dict[str, Any]:
    """The parameters of :func:`_in_windows` for ``op``'s time windows."""
    return {
        "t_from": [as_utc(a) for a, _ in op.time_ranges],
        "t_to": [as_utc(b) for _, b in op.time_ranges],
        "t_months": list(op.time_months),
    }


def _job_row(j: Job, doc: str) -> dict[str, Any]:
    """Parameters of one row of the jobs table (``doc`` is the job's exact JSON text)."""
    return {
        "id": j.id,
        "tenant": j.tenant_id,
        "kind": j.kind,
        "status": j.status,
        "run_after": j.run_after,
        "locked_until": j.locked_until,
        "created_at": j.created_at,
        "doc": doc,
    }


def _item_params(item: MemoryItem, terms: str) -> dict[str, Any]:
    return {
        "id": item.id,
        "tenant_id": item.tenant_id,
        "scope": item.scope.value,
        "scope_key": item.scope_key,
        "user_id": item.user_id,
        "project_id": item.project_id,
        "session_id": item.session_id,
        "agent_id": item.agent_id,
        "memory_type": item.memory_type.value,
        "status": item.status.value,
        "visibility": item.visibility.value,
        "source": item.source.value,
        "source_id": item.source_id,
        "confidence": item.confidence,
        "importance": item.importance,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "occurred_at": item.occurred_at,
        "last_used_at": item.last_used_at,
        "expires_at": item.expires_at,
        "access_count": item.access_count,
        "mention_count": item.mention_count,
        "version": item.version,
        "tags": list(item.tags),
        "doc": item.model_dump_json(),
        "terms": terms,
        "n_terms": len(terms.split()),
        "thread_id": item.thread_id,
        "created_by": creator_of(item),
    }


# What a read of items selects (alias i) to rebuild an item: see _read_item.
_READ_ITEM = "i.doc::text, i.access_count, i.last_used_at"


def _read_item(
    doc: str, access_count: int, last_used_at: datetime | None, parse: Callable[[str], MemoryItem] = load_item
) -> MemoryItem:
    """A stored item: its document with the usage columns laid over it. Touch updates only
    the columns (a search's usage write is then one cheap statement); every other write
    rewrites the whole document, columns included. ``parse``: a cache's reader, for items
    a search only reads (:class:`~jiyi.store.sqlcommon.ItemCache`)."""
    item = parse(doc)
    if item.access_count != access_count or item.last_used_at != last_used_at:
        item = item.model_copy(update={"access_count": int(access_count), "last_used_at": _utc(last_used_at)})
    return item


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _cursor_time(text: str, cursor: str) -> datetime:
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError as exc:
        raise InvalidInput(f"cursor {cursor[:40]!r} is not one this store issued", field="cursor") from exc


# DumpRows: the columns of every row kind.
_DUMP_SQL = {
    "items": "SELECT i.pk, i.id, i.doc::text, i.terms, v.model, v.dim, v.vec, i.access_count, i.last_used_at, "
    "i.tenant_id "
    "FROM {s}.items i "
    "LEFT JOIN {s}.vectors v ON v.tenant_id = i.tenant_id AND v.pk = i.pk",
    "history": "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before::text, after::text "
    "FROM {s}.history",
    "messages": "SELECT tenant_id, session_id, seq, doc::text FROM {s}.messages",
    "checkpoints": "SELECT tenant_id, session_id, id, doc::text FROM {s}.checkpoints",
    "jobs": "SELECT id, doc::text FROM {s}.jobs",
    "embedding_cache": "SELECT model, text_hash, vec FROM {s}.embedding_cache",
    "rate_events": "SELECT key, at FROM {s}.rate_events",
    # Each access with its served rows as JSON (float8 in JSON is exact: shortest round trip).
    "retrievals": f"SELECT {', '.join('a.' + c for c in ACCESS_COLUMNS.split(', '))}, "
    "(SELECT coalesce(json_agg(json_build_array(h.access_id, h.rank, h.item_id, h.score, h.similarity, "
    "h.relevance)), '[]') FROM {s}.memory_access_items h WHERE h.tenant_id = a.tenant_id "
    "AND h.access_id = a.id)::text FROM {s}.memory_access a",
}


# Keyset cursors along the primary keys, which tenant_id leads (DUMP_KEYS has pk and seq
# alone, SQLite's). Within a tenant, the order of items and of history is kept.
_DUMP_KEYS = {**DUMP_KEYS, "items": ("tenant_id", "pk"), "history": ("tenant_id", "seq")}


def _dump_row(kind: str, r: Sequence[Any]) -> dict[str, Any]:
    match kind:
        case "items":
            vectors = [] if r[4] is None else [{"model": r[4], "dim": int(r[5]), "vec": vector_to_text(r[6])}]
            doc = r[2]
            stored = load_item(doc)
            if (stored.access_count, stored.last_used_at) != (r[7], r[8]):  # touched since written
                doc = _read_item(doc, r[7], r[8]).model_dump_json()
            return {"id": r[1], "doc": doc, "terms": r[3], "vectors": vectors}
        case "history":
            return {
                "seq": int(r[0]),
                "item_id": r[1],
                "tenant_id": r[2],
                "action": r[3],
                "at": ts(r[4]),
                "version": int(r[5]),
                "reason": r[6],
                "actor": r[7],
                "before": r[8],
                "after": r[9],
            }
        case "messages":
            return {"tenant_id": r[0], "session_id": r[1], "seq": int(r[2]), "doc": r[3]}
        case "checkpoints":
            return {"tenant_id": r[0], "session_id": r[1], "id": r[2], "doc": r[3]}
        case "jobs":
            return {"id": r[0], "doc": r[1]}
        case "embedding_cache":
            return {"model": r[0], "text_hash": r[1], "vec": vector_to_text(r[2])}
        case "retrievals":
            return dumped_access(access_of(r[:10], json.loads(r[10])))
    return {"key": r[0], "at": ts(r[1])}


# LoadRows: the statement that inserts dumped rows of every kind but items (see _load_params).
_LOAD_SQL = {
    "history": "INSERT INTO {s}.history (seq, item_id, tenant_id, action, at, version, reason, actor, "
    "before, after) OVERRIDING SYSTEM VALUE VALUES (%(seq)s, %(item_id)s, %(tenant)s, "
    "%(action)s, %(at)s, %(version)s, %(reason)s, %(actor)s, %(before)s::json, %(after)s::json)",
    "messages": "INSERT INTO {s}.messages (tenant_id, session_id, seq, id, role, created_at, doc) "
    "VALUES (%(tenant)s, %(session)s, %(seq)s, %(id)s, %(role)s, %(at)s, %(doc)s::json)",
    "checkpoints": "INSERT INTO {s}.checkpoints (tenant_id, session_id, id, created_at, doc) "
    "VALUES (%(tenant)s, %(session)s, %(id)s, %(at)s, %(doc)s::json)",
    "jobs": "INSERT INTO {s}.jobs (id, tenant_id, kind, status, run_after, locked_until, created_at, "
    "doc) VALUES (%(id)s, %(tenant)s, %(kind)s, %(status)s, %(run_after)s, %(locked_until)s, "
    "%(created_at)s, %(doc)s::json)",
    "embedding_cache": "INSERT INTO {s}.embedding_cache (model, text_hash, vec) VALUES (%(model)s, %(hash)s, %(vec)s)",
    "rate_events": "INSERT INTO {s}.rate_events (key, at) VALUES (%(key)s, %(at)s)",
}


# ---------------------------------------------------------------- connection description


@dataclass(frozen=True)
class _Target:
    """Where the server is, for messages: never holds or prints the password."""

    where: str
    secrets: tuple[str, ...]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def _describe(conninfo: str | None, kwargs: Mapping[str, Any]) -> _Target:
    if conninfo is None:  # a pool that computes its connection string on each connect
        return _Target("the server of the given pool", ())
    try:
        params: dict[str, Any] = {**conninfo_to_dict(conninfo), **kwargs}
    except psycopg.Error:
        raise InvalidInput(
            "the PostgreSQL DSN is not a valid connection string "
            "(expected e.g. 'postgresql://user@host:5432/dbname' or 'host=... dbname=...')",
            field="dsn",
        ) from None
    host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "")
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    if not host:
        where = f"the default local socket (port {port})"
    elif host.startswith(("/", "@")):
        where = f"socket {host}/.s.PGSQL.{port}"
    else:
        where = f"{host}:{port}"
    extras = [f"{k} {params[k]!r}" for k in ("dbname", "user") if params.get(k)]
    if extras:
        where += f" ({', '.join(extras)})"
    secrets = tuple(
        s for s in (str(params.get("password") or ""), os.environ.get("PGPASSWORD", "")) if len(s) >= 3
    )
    return _Target(where, secrets)


# ---------------------------------------------------------------- pgvector wire format


class _VectorDumper(Dumper):
    """numpy array -> pgvector binary (uint16 dim, uint16 unused, big-endian float32s)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        arr = np.ascontiguousarray(obj, dtype=">f4")
        return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()


class _VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> Vector:
        view = memoryview(data)
        dim = int.from_bytes(view[:2], "big")
        return np.frombuffer(view, dtype=">f4", count=dim, offset=4).astype(np.float32)


def _socket_has_input(conn: Conn | AConn) -> bool:
    """True if an idle connection's socket is readable: the server closed it or said something."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    with selectors.DefaultSelector() as sel:
        sel.register(conn.fileno(), selectors.EVENT_READ)
        return bool(sel.select(0))


def _alive(conn: Conn) -> bool:
    """Is a pooled connection usable? A round trip only when something arrived while it was
    idle (the server's goodbye after pg_terminate_backend or a restart); else one poll()."""
    try:
        if _socket_has_input(conn):
            ConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


async def _acheck(conn: AConn) -> None:
    if _socket_has_input(conn):
        await AsyncConnectionPool.check_connection(conn)


def _close_now(conn: AConn) -> None:
    """Close an async connection from any thread, loop or none: its ``close()`` never suspends."""
    coro = conn.close()
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()


class _LoopPool:
    """Async connections for one event loop, with no background tasks.

    psycopg_pool's ``AsyncConnectionPool`` keeps worker tasks in the loop that catch
    ``CancelledError``; a store that outlives a loop (several ``asyncio.run`` calls, or
    ``AsyncMemory.aclose`` calling the synchronous ``close``) then hangs that loop's
    shutdown. Here connections are opened by the task that needs one, idle ones wait in
    a list, and closing is synchronous, so a loop can end at any moment.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        connect: Callable[[], Awaitable[AConn]],
        max_size: int,
        timeout: float,
    ) -> None:
        self._loop = loop
        self._connect = connect
        self._max_size = max_size
        self._timeout = timeout
        self._idle: list[AConn] = []
        self._size = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    async def acquire(self) -> AConn:
        try:
            async with asyncio.timeout(self._timeout):
                while True:
                    if self.closed:
                        raise PoolClosed("the store is closed")
                    while self._idle:
                        conn = self._idle.pop()
                        try:
                            await _acheck(conn)
                        except Exception:
                            self._discard(conn)
                        else:
                            return conn
                    if self._size < self._max_size:
                        self._size += 1
                        try:
                            return await self._connect()
                        except BaseException:
                            self._size -= 1
                            self._wake()
                            raise
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    except BaseException:
                        if waiter.done() and not waiter.cancelled():
                            self._wake()  # pass on the turn we were given
                        raise
                    finally:
                        with suppress(ValueError):
                            self._waiters.remove(waiter)
        except TimeoutError:
            raise PoolTimeout(f"no connection within {self._timeout:g}s") from None

    def release(self, conn: AConn) -> None:
        if self.closed or conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
            self._discard(conn)
        else:
            self._idle.append(conn)
        self._wake()

    def _discard(self, conn: AConn) -> None:
        _close_now(conn)
        self._size -= 1

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        """Close idle connections now; ones in use close when they are released.

        Callable from any thread; tasks waiting for a connection learn it in their loop."""
        self.closed = True
        while self._idle:
            self._discard(self._idle.pop())
        with suppress(RuntimeError):  # the loop is already closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        while self._waiters:
            self._wake()


# ---------------------------------------------------------------- plans


@dataclass(frozen=True)
class _Query:
    """One statement for a driver to run. ``batch`` makes it an ``executemany``.
    ``deferred``: its rows are not needed (a setting, a write without RETURNING); in a
    pipelined session it is sent with the next statement whose rows are, or at the end."""

    sql: str
    params: Mapping[str, Any] | None = None
    batch: Sequence[Mapping[str, Any]] | None = None
    deferred: bool = False


@dataclass(frozen=True)
class _Batch:
    """Statements to send together, in this order (in a pipelined session, one round trip);
    the answer is each one's rows."""

    queries: tuple[_Query, ...]


@dataclass(frozen=True)
class _Gather:
    """Search primitives that do not depend on each other (a ``Retrieve``'s first step,
    :func:`~jiyi.store.retrieve.hit_asks`), answered in this order. Their plans run side by
    side (:func:`_side_by_side`), so their statements share round trips."""

    asks: tuple[VectorHits | KeywordHits, ...]
    threaded: set[str] = field(default_factory=set, compare=False)
    """Filled by the searches: the rows they read that are in a thread."""


Plan = Generator[_Query | _Batch, Any, R]


def _in_turn(plans: Sequence[Plan[Any]]) -> Plan[list[Any]]:
    """One plan after the other (they share settings that must not interleave)."""
    out: list[Any] = []
    for plan in plans:
        out.append((yield from plan))
    return out


def _side_by_side(plans: Sequence[Plan[Any]]) -> Generator[_Batch, list[Rows], list[Any]]:
    """Run ``plans`` together: each step sends the next statements of every unfinished plan
    as one batch (in plan order) and gives each plan its rows. Their answers, in order."""
    results: list[Any] = [None] * len(plans)
    waiting: dict[int, _Query | _Batch] = {}

    def step(i: int, sent: Any) -> None:
        try:
            waiting[i] = plans[i].send(sent)
        except StopIteration as stop:
            waiting.pop(i, None)
            results[i] = stop.value

    for i in range(len(plans)):
        step(i, None)
    while waiting:
        order = sorted(waiting)
        parts = [(i, waiting[i]) for i in order]
        sent = [p.queries if isinstance(p, _Batch) else (p,) for _, p in parts]
        flat = tuple(q for qs in sent for q in qs)
        kept = _sent_settings(flat)
        answered = iter((yield _Batch(tuple(flat[k] for k in kept))))
        rows = [next(answered) if k in kept else [] for k in range(len(flat))]
        at = 0
        for (i, asked), qs in zip(parts, sent, strict=True):
            got = rows[at : at + len(qs)]
            at += len(qs)
            step(i, got if isinstance(asked, _Batch) else got[0])
    return results


def _sent_settings(queries: Sequence[_Query]) -> set[int]:
    """The positions of ``queries`` worth sending. Plans side by side each set
    ``plan_cache_mode`` around their own statement, so a batch of a walk and a keyword round
    sets it back to the default and at once to generic again, with nothing planned between
    (only other settings): both are left out (2 of a search's ~15 statements)."""
    idle: set[int] = set()
    for i, q in enumerate(queries):
        if q is _ANY_PLAN:
            j = i + 1
            while j < len(queries) and (queries[j] is _ANY_SORT or queries[j] is _NO_SORT):
                j += 1
            if j < len(queries) and queries[j] is _GENERIC_PLAN:
                idle |= {i, j}
    return {i for i in range(len(queries)) if i not in idle}


def _run_batch_sync(conn: Conn, queries: Sequence[_Query]) -> list[Rows]:
    """In pipeline mode: send ``queries``, then read the rows of those not deferred (the
    first read flushes them all: one round trip)."""
    cursors = []
    for q in queries:
        cur = conn.cursor(binary=True)
        if q.batch is not None:
            cur.executemany(q.sql, q.batch)
        else:
            cur.execute(q.sql, q.params)
        cursors.append(cur)
    return [[] if q.deferred else cur.fetchall() for q, cur in zip(queries, cursors, strict=True)]


async def _run_batch_async(conn: AConn, queries: Sequence[_Query]) -> list[Rows]:
    cursors = []
    for q in queries:
        cur = conn.cursor(binary=True)
        if q.batch is not None:
            await cur.executemany(q.sql, q.batch)
        else:
            await cur.execute(q.sql, q.params)
        cursors.append(cur)
    return [[] if q.deferred else await cur.fetchall() for q, cur in zip(queries, cursors, strict=True)]


def _run_last_sync(conn: Conn, q: _Query, commit: Callable[[], Any]) -> Rows:
    """In pipeline mode: send ``q``, then ``commit`` (COMMIT and the pipeline's closing
    Sync: one round trip for both), then read its rows."""
    cur = conn.cursor(binary=True)
    cur.execute(q.sql, q.params)
    commit()
    return [] if q.deferred else cur.fetchall()


async def _run_last_async(conn: AConn, q: _Query, commit: Callable[[], Awaitable[Any]]) -> Rows:
    cur = conn.cursor(binary=True)
    await cur.execute(q.sql, q.params)
    await commit()
    return [] if q.deferred else await cur.fetchall()


def _run_sync(conn: Conn, q: _Query) -> Rows:
    with conn.cursor(binary=True) as cur:
        if q.batch is not None:
            cur.executemany(q.sql, q.batch)
            return []
        cur.execute(q.sql, q.params)
        return cur.fetchall() if cur.description is not None else []


async def _run_async(conn: AConn, q: _Query) -> Rows:
    async with conn.cursor(binary=True) as cur:
        if q.batch is not None:
            await cur.executemany(q.sql, q.batch)
            return []
        await cur.execute(q.sql, q.params)
        return await cur.fetchall() if cur.description is not None else []


def _single(query: _Query, convert: Callable[[Rows], R]) -> Plan[R]:
    rows = yield query
    return convert(rows)


def _done(value: R) -> Plan[R]:
    yield from ()
    return value


_NO_SORT = _Query("SET LOCAL enable_sort TO off", deferred=True)
"""Before an HNSW search: the planner would otherwise cost a sort of the scope below the
walk (it cannot know the walk was chosen, see PostgresStore._scope_size)."""
_ANY_SORT = _Query("SET LOCAL enable_sort TO DEFAULT", deferred=True)
"""After an HNSW search: the rest of the transaction plans as usual."""

_GENERIC_PLAN = _Query("SET LOCAL plan_cache_mode TO force_generic_plan", deferred=True)
"""Before a keyword round or an HNSW walk: their plan does not depend on the values (the
keyword index by scope and term, or the HNSW index, then the rows by primary key), so the
plan made once per connection (psycopg prepares a statement run 5 times) is used again.
PostgreSQL's own choice kept planning them anew each time (its estimate of the generic
plan is higher), 0.4-0.7 ms of a search's server time per statement at 100k memories in
one scope (docs/benchmarks.md, session 15)."""
_ANY_PLAN = _Query("SET LOCAL plan_cache_mode TO DEFAULT", deferred=True)
"""After them: the rest of the transaction plans as PostgreSQL chooses."""

_SNAPSHOT_SQL = _Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
"""The first statement of a read of several statements (a ``Retrieve``'s primitives): they
all see one state, as one statement would."""

_SNAPSHOT_BEGIN = ("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",)
"""The same, opening a pipelined read (see :func:`_pipelined`)."""

_USAGE_BEGIN = ("BEGIN", "SET LOCAL synchronous_commit TO off")
"""A search's usage write (counters and the retrieval log) commits without waiting for its
WAL to reach the disk: a crash may lose the last moments' counts and log rows (at most
about three times ``wal_writer_delay``, 0.6 s by default), never an item, and never leaves
them half written (docs/deploy.md). Every other write commits synchronously."""


@contextmanager
def _pipelined(conn: Conn, opening: Sequence[str]) -> Iterator[None]:
    """A transaction in pipeline mode: ``opening`` (BEGIN, settings) goes with the first
    statement, COMMIT with the closing Sync, so a plan of n dependent statements costs n
    round trips (plus one when its last statement's rows are needed), not n + 2 or more.
    On failure the transaction is rolled back."""
    done = False
    try:
        with conn.pipeline():
            for sql in opening:
                conn.execute(sql)
            yield
            conn.execute("COMMIT")
        done = True
    finally:
        if not done and not conn.closed and not conn.broken:
            with suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()


@asynccontextmanager
async def _apipelined(conn: AConn, opening: Sequence[str]) -> AsyncIterator[None]:
    """:func:`_pipelined` on an async connection."""
    done = False
    try:
        async with conn.pipeline():
            for sql in opening:
                await conn.execute(sql)
            yield
            await conn.execute("COMMIT")
        done = True
    finally:
        if not done and not conn.closed and not conn.broken:
            with suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    await conn.rollback()


class _Session:
    """One attempt at an operation: the handler table that drives its plan.

    ``write``: the operation writes (retried only if it had not begun); ``single``: it is
    one statement, atomic alone (a read runs in autocommit, no BEGIN/COMMIT round trips);
    else it runs in a transaction, a repeatable-read one for a read. The connection is taken at the
    plan's first statement (a plan that needs none, or that fails while building it, never
    touches the pool); ``stack`` gives it back when the attempt ends, committing or rolling
    back first. A search primitive that a ``Retrieve`` flow yields runs its own plan on the
    same connection and snapshot.

    Reads of several statements and a search's usage write are pipelined (:func:`_opening`):
    BEGIN goes with the first statement, settings and other deferred statements with the
    next one, COMMIT with the last one when its operation is ``last`` (a ``Retrieve``'s
    ``LoadHits``), whose rows are then read after the commit."""

    def __init__(
        self, store: PostgresStore, write: bool, single: bool, stack: ExitStack, last: type | None = None
    ) -> None:
        self.store, self.write, self.single, self.stack, self.last = store, write, single, stack, last
        self.conn: Conn | None = None
        self.begun = False  # BEGIN went through: a write's statements may have run
        self.pipelined = False
        self.pipe = ExitStack()  # the pipelined transaction, closed by run_last or with stack

    @property
    def handlers(self) -> dict[type, Handler]:
        """Made on each use: kept on the session, its bound methods would make a reference
        cycle, left for the cyclic garbage collector after every operation."""
        return {
            _Query: self.run,
            _Batch: self.run_batch,
            _Gather: self.run_gather,
            Op: self.run_op,
        }

    def run(self, query: _Query) -> Rows:
        return self.run_batch(_Batch((query,)))[0]

    def run_batch(self, batch: _Batch) -> list[Rows]:
        conn = self.conn if self.conn is not None else self._open()
        if self.pipelined:
            return _run_batch_sync(conn, batch.queries)
        return [_run_sync(conn, q) for q in batch.queries]

    def run_op(self, op: Op[Any]) -> Any:
        handlers = self.handlers
        if self.last is not None and isinstance(op, self.last):
            handlers = {**handlers, _Query: self.run_last}
        return drive(self.store._plan(op)[0](), handlers)

    def run_last(self, query: _Query) -> Rows:
        """The last statement of the session: in a pipeline, sent with COMMIT and the
        closing Sync (one round trip), its rows read afterwards."""
        conn = self.conn if self.conn is not None else self._open()
        if not self.pipelined:
            return _run_sync(conn, query)
        self.pipelined = False
        return _run_last_sync(conn, query, self.pipe.close)

    def run_gather(self, gather: _Gather) -> list[Any]:
        return drive(self.store._gathered(gather), self.handlers)

    def _open(self) -> Conn:
        self.conn = conn = self.stack.enter_context(self.store._connection())
        opening = _opening(self.write, self.single, conn.autocommit)
        if opening is not None:
            self.stack.enter_context(self.pipe)
            self.pipe.enter_context(_pipelined(conn, opening))
            self.pipelined = True
        elif not self.single or not conn.autocommit:
            self.stack.enter_context(conn.transaction())
        self.begun = True
        if not self.single and not self.write and not self.pipelined:
            _run_sync(conn, _SNAPSHOT_SQL)
        return conn

    def retry(self, exc: BaseException, attempt: int) -> bool:
        return _may_retry(exc, self.conn, attempt, self.write and self.begun)


class _AsyncSession:
    """:class:`_Session` on an async connection."""

    def __init__(
        self, store: PostgresStore, write: bool, single: bool, stack: AsyncExitStack, last: type | None = None
    ) -> None:
        self.store, self.write, self.single, self.stack, self.last = store, write, single, stack, last
        self.conn: AConn | None = None
        self.begun = False
        self.pipelined = False
        self.pipe = AsyncExitStack()

    @property
    def handlers(self) -> dict[type, AsyncHandler]:
        """Made on each use: kept on the session, its bound methods would make a reference
        cycle, left for the cyclic garbage collector after every operation."""
        return {
            _Query: self.run,
            _Batch: self.run_batch,
            _Gather: self.run_gather,
            Op: self.run_op,
        }

    async def run(self, query: _Query) -> Rows:
        return (await self.run_batch(_Batch((query,))))[0]

    async def run_batch(self, batch: _Batch) -> list[Rows]:
        conn = self.conn if self.conn is not None else await self._open()
        if self.pipelined:
            return await _run_batch_async(conn, batch.queries)
        return [await _run_async(conn, q) for q in batch.queries]

    async def run_op(self, op: Op[Any]) -> Any:
        handlers = self.handlers
        if self.last is not None and isinstance(op, self.last):
            handlers = {**handlers, _Query: self.run_last}
        return await adrive(self.store._plan(op)[0](), handlers)

    async def run_last(self, query: _Query) -> Rows:
        conn = self.conn if self.conn is not None else await self._open()
        if not self.pipelined:
            return await _run_async(conn, query)
        self.pipelined = False
        return await _run_last_async(conn, query, self.pipe.aclose)

    async def run_gather(self, gather: _Gather) -> list[Any]:
        return await adrive(self.store._gathered(gather), self.handlers)

    async def _open(self) -> AConn:
        self.conn = conn = await self.stack.enter_async_context(self.store._aconnection())
        opening = _opening(self.write, self.single, conn.autocommit)
        if opening is not None:
            await self.stack.enter_async_context(self.pipe)
            await self.pipe.enter_async_context(_apipelined(conn, opening))
            self.pipelined = True
        elif not self.single or not conn.autocommit:
            await self.stack.enter_async_context(conn.transaction())
        self.begun = True
        if not self.single and not self.write and not self.pipelined:
            await _run_async(conn, _SNAPSHOT_SQL)
        return conn

    def retry(self, exc: BaseException, attempt: int) -> bool:
        return _may_retry(exc, self.conn, attempt, self.write and self.begun)


def _opening(write: bool, single: bool, autocommit: bool) -> tuple[str, ...] | None:
    """How a pipelined session opens its transaction, or None for one that is not
    pipelined: reads of several statements (one snapshot) and a search's usage write
    (``single`` writes are only those, see PostgresStore._plan). A connection that is not
    in autocommit (a borrowed pool's) begins its own transactions, and a libpq before 14
    has no pipeline mode: not pipelined then."""
    if not autocommit or not PIPELINE:
        return None
    if not write and not single:
        return _SNAPSHOT_BEGIN
    if write and single:
        return _USAGE_BEGIN
    return None


def _may_retry(exc: BaseException, conn: Conn | AConn | None, attempt: int, wrote: bool) -> bool:
    """May a failed attempt be made again? After a deadlock or serialisation failure (the
    server rolled the whole transaction back), or once after a lost connection unless a
    write may have run some of its statements."""
    if attempt >= 3 or not isinstance(exc, psycopg.Error):
        return False
    if isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        return True
    lost = conn is not None and conn.broken
    return lost and attempt < 2 and not wrote


# ---------------------------------------------------------------- the store


class PostgresStore(Store):
    """A jiyi store in a PostgreSQL schema (default ``jiyi``) of a pgvector-enabled database.

    Give a ``dsn`` (``postgresql://user:pw@host:5432/db`` or ``host=... dbname=...``) and the
    store makes its own pools, or an open ``psycopg_pool.ConnectionPool`` that it borrows
    (it does not close it; async calls get a pool of their own with the same settings).
    ``timeout`` bounds connecting and waiting for a pooled connection, in seconds.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        min_size: int = 1,
        max_size: int = 10,
        dimensions: int | None = None,
        schema: str = "jiyi",
        timeout: float = 10.0,
        migrate: bool = True,
        approximate_from: int | None = APPROXIMATE_FROM,
    ) -> None:
        if (dsn is None) == (pool is None):
            raise InvalidInput("give exactly one of dsn= or pool= to PostgresStore", field="dsn")
        if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
            raise InvalidInput(
                f"schema must be a plain identifier (letters, digits, _; at most 63), got {schema!r}",
                field="schema",
            )
        if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
            raise InvalidInput(f"dimensions must be within 1..{MAX_DIMENSIONS}", field="dimensions")
        if not 0 <= min_size <= max_size or max_size < 1:
            raise InvalidInput(
                f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}",
                field="max_size",
            )
        self.schema = schema
        self.dimensions = dimensions
        self.approximate_from = approximate_from  # None: every vector search is exact
        self._s = quote_ident(schema)
        self._timeout = timeout
        self._max_size = max_size
        self._auto_migrate = migrate  # False: open as is (for 'jiyi migrate --status'), create nothing
        self._closed = False
        self._lock = threading.Lock()
        self._loop_pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        # Set by _bootstrap: where pgvector lives, and our adapters for its type.
        self._vector_schema = ""
        self._can_walk = False
        self._vector_type = ""
        self._cosine = ""
        self._vector_oid = 0
        self._dumper: type[Dumper] = _VectorDumper
        self._background_usage = True  # False: a search waits for its usage write (A/B, tests)
        self._usage = UsageWriter(self._send_usage)
        # Items parsed for searches, per thread, by stored document (a candidate that comes
        # back unchanged is not parsed again); False: parse every candidate (A/B, tests).
        self._cache_items = True
        self._item_caches = threading.local()

        if pool is not None:
            self._borrow(pool)
        else:
            assert dsn is not None
            self._open_pool(dsn, min_size, max_size)

    def _borrow(self, pool: ConnectionPool[Any]) -> None:
        """Use the caller's pool (not closed by :meth:`close`); async calls get their own
        pool with the same settings (possibly callables)."""
        self._conninfo: ConninfoParam = pool.conninfo
        self._kwargs: KwargsParam | None = pool.kwargs
        self._target = _describe(
            pool.conninfo if isinstance(pool.conninfo, str) else None,
            pool.kwargs if isinstance(pool.kwargs, dict) else {},
        )
        self._pool = pool
        self._owns_pool = False
        borrowed: Conn | None = None
        try:
            with self._connection() as borrowed:
                self._bootstrap(borrowed)
        except psycopg.Error as exc:
            raise self._map_error(exc, borrowed) from exc

    def _open_pool(self, dsn: str, min_size: int, max_size: int) -> None:
        """Bootstrap the schema on a first connection, then open a pool of our own."""
        self._conninfo = dsn
        self._target = _describe(dsn, {})
        given = conninfo_to_dict(dsn)
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            kwargs["connect_timeout"] = max(2, math.ceil(self._timeout))
        if "application_name" not in given:
            kwargs["application_name"] = "jiyi"
        self._kwargs = kwargs
        try:
            with psycopg.connect(dsn, **kwargs) as conn:
                self._bootstrap(conn)
        except psycopg.Error as exc:
            raise self._map_error(exc, None) from exc
        self._pool = ConnectionPool(
            dsn,
            kwargs=kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=self._timeout,
            name=f"jiyi-{self.schema}",
        )
        self._owns_pool = True
        self._pool.open(wait=False)

    def __repr__(self) -> str:
        return f"PostgresStore({self._target.where}, schema={self.schema!r})"

    # ------------------------------------------------------------ connections

    def _adapt(self, conn: Conn | AConn) -> None:
        if conn.adapters.get_loader(self._vector_oid, Format.BINARY) is not _VectorLoader:
            conn.adapters.register_dumper(np.ndarray, self._dumper)
            conn.adapters.register_loader(self._vector_oid, _VectorLoader)

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        # Checked here rather than by the pool's ``check=``, which sleeps a second or more
        # after each failure; a dead connection goes back broken (the pool drops it).
        for _ in range(self._max_size + 1):
            with self._pool.connection(timeout=self._timeout) as conn:
                if not _alive(conn):
                    continue
                if self._vector_oid:
                    self._adapt(conn)
                yield conn
                return
        raise PoolTimeout("every pooled connection was dead")

    def _loop_pool(self) -> _LoopPool:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise PoolClosed("the store is closed")
            pool = self._loop_pools.get(loop)
            if pool is None:
                for dead in [lp for lp in self._loop_pools if lp.is_closed()]:
                    self._loop_pools.pop(dead).close()
                pool = _LoopPool(loop, self._aconnect, self._max_size, self._timeout)
                self._loop_pools[loop] = pool
            return pool

    async def _aconnect(self) -> AConn:
        conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
        kwargs = (self._kwargs() if callable(self._kwargs) else self._kwargs) or {}
        return await psycopg.AsyncConnection.connect(conninfo, **kwargs)

    @asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[AConn]:
        pool = self._loop_pool()
        conn = await pool.acquire()
        try:
            self._adapt(conn)
            yield conn
        finally:
            pool.release(conn)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._usage.close()  # the queued usage writes go out first, on the pool
        with self._lock:
            pools = list(self._loop_pools.values())
            self._loop_pools.clear()
        for pool in pools:
            pool.close()
        if self._owns_pool:
            self._pool.close()

    # ------------------------------------------------------------ errors

    def _map_error(self, exc: BaseException, conn: Conn | AConn | None) -> Exception:
        where = self._target.where
        message = self._target.redact(str(exc).strip()).replace("\n", " ")
        if isinstance(exc, PoolTimeout):
            return StoreUnavailable(
                f"no connection to PostgreSQL at {where} within {self._timeout:g}s "
                "(is the server up and max_size large enough?)"
            )
        if isinstance(exc, PoolClosed):
            return StoreError(f"store {self!r} is closed")
        if isinstance(exc, psycopg.DataError | pg_errors.ProgramLimitExceeded):
            return InvalidInput(f"PostgreSQL cannot store this value: {message}")
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return StoreError(f"permission denied on PostgreSQL at {where}: {message}")
        if isinstance(exc, psycopg.OperationalError):
            if conn is None:
                return StoreUnavailable(f"cannot reach PostgreSQL at {where}: {message}")
            if conn.broken or isinstance(exc, pg_errors.AdminShutdown | pg_errors.CannotConnectNow):
                return StoreUnavailable(
                    f"lost the connection to PostgreSQL at {where} during the operation "
                    f"(its transaction did not commit; the next call reconnects): {message}"
                )
        return StoreError(f"database error on PostgreSQL at {where}: {message}")

    # ------------------------------------------------------------ schema

    def _bootstrap(self, conn: Conn, create: bool | None = None) -> list[tuple[int, str]]:
        """Create pgvector, the schema and the migrations table; find pgvector; migrate.

        With ``create`` False (the default when opened with ``migrate=False``) nothing is
        created or migrated: the store is opened as it is. Returns the migrations applied."""
        if create is None:
            create = self._auto_migrate
        s = self._s
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            has_log = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{s}.jiyi_schema_migrations",)
            ).fetchone()
            others = conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm')",
                (self.schema,),
            ).fetchone()
            if has_log is not None and not has_log[0] and others is not None and others[0]:
                raise StoreCorrupt(
                    f"schema {self.schema!r} at {self._target.where} holds tables that are not a jiyi "
                    "store; refusing to touch it (choose another schema=)"
                )
            if create and not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
                try:
                    with conn.transaction():
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except (pg_errors.UndefinedFile, pg_errors.FeatureNotSupported) as exc:
                    raise StoreError(
                        f"PostgreSQL at {self._target.where} does not have the pgvector extension "
                        f"installed (https://github.com/pgvector/pgvector): {exc}"
                    ) from exc
                except pg_errors.InsufficientPrivilege as exc:
                    raise StoreError(
                        f"pgvector is not enabled in this database and the user may not enable it: "
                        f"ask an administrator to run CREATE EXTENSION vector ({exc})"
                    ) from exc
            if create:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {s}.jiyi_schema_migrations (version integer PRIMARY KEY, "
                    "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
            row = conn.execute(
                "SELECT t.oid, n.nspname, e.extversion FROM pg_extension e JOIN pg_type t ON t.typnamespace = e.extnamespace "
                "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector' AND t.typname = 'vector'"
            ).fetchone()
        if row is None and not create:
            return []  # no pgvector yet: usable for pending_migrations() and migrate() only
        if row is None:
            raise StoreError(f"pgvector's vector type is missing at {self._target.where}")
        oid, vector_schema = int(row[0]), str(row[1])
        vs = quote_ident(vector_schema)
        self._vector_schema = vs
        self._vector_type = f"{vs}.vector"
        self._cosine = f"OPERATOR({vs}.<=>)"
        self._vector_oid = oid
        self._dumper = cast(type[Dumper], type("VectorDumper", (_VectorDumper,), {"oid": oid}))
        # Iterative index scans (and the hnsw.* settings a walk uses) came in pgvector 0.8:
        # older servers search every scope exactly.
        self._can_walk = _version(str(row[2])) >= (0, 8)
        return self._migrate(conn) if create else []

    def _applied(self, conn: Conn) -> list[int]:
        exists = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{self._s}.jiyi_schema_migrations",)
        ).fetchone()
        if exists is None or not exists[0]:
            return []
        rows = conn.execute(f"SELECT version FROM {self._s}.jiyi_schema_migrations ORDER BY version")
        return [int(r[0]) for r in rows]

    def _migrate(self, conn: Conn) -> list[tuple[int, str]]:
        applied: list[tuple[int, str]] = []
        with conn.transaction():
            done = set(self._applied(conn))
        for version, (name, statements) in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                # Re-check under the lock: another process may have applied it meanwhile.
                if conn.execute(
                    f"SELECT 1 FROM {self._s}.jiyi_schema_migrations WHERE version = %s", (version,)
                ).fetchone():
                    continue
                for statement in statements:
                    conn.execute(
                        statement.format(
                            s=self._s, vector=self._vector_type, vector_schema=self._vector_schema
                        )
                    )
                conn.execute(
                    f"INSERT INTO {self._s}.jiyi_schema_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )
            applied.append((version, name))
        return applied

    def _admin(self, fn: Callable[[Conn], R]) -> R:
        if self._closed:
            raise StoreError(f"store {self!r} is closed")
        conn: Conn | None = None
        try:
            with self._connection() as conn, conn.transaction():
                return fn(conn)
        except psycopg.Error as exc:
            raise self._map_error(exc, conn) from exc

    def applied_migrations(self) -> list[int]:
        return self._admin(self._applied)

    def pending_migrations(self) -> list[tuple[int, str]]:
        return pending(MIGRATIONS, self.applied_migrations())

    def migrate(self) -> list[tuple[int, str]]:
        """Apply pending migrations, each in its own transaction. Returns what was applied."""
        if self._closed:
            raise StoreError(f"store {self!r} is closed")
        conn: Conn | None = None
        try:
            with self._connection() as conn:
                return self._bootstrap(conn, create=True)
        except psycopg.Error as exc:
            raise self._map_error(exc, conn) from exc

    # ------------------------------------------------------------ dispatch

    def execute(self, op: Op[R]) -> R:
        if self._closed:
            raise StoreError(f"store {self!r} is closed")
        if self._in_background(op):
            return cast(R, None)
        self._usage.before(op)
        return self._execute_now(op)

    def flush(self) -> None:
        """Wait until every search usage write this store has sent in the background
        (counters and retrieval log, see :class:`~jiyi.store.usage.UsageWriter`) has
        committed. The store's own reads do this first; call it before reading them
        through another connection."""
        self._usage.flush()

    def _in_background(self, op: Op[Any]) -> bool:
        """Hand a search's usage write to the background writer (True), unless it is off."""
        return self._background_usage and self._usage.take(op)

    def _send_usage(self, ops: list[Write]) -> None:
        """Search usage writes (see :class:`~jiyi.store.usage.UsageWriter`) in one
        transaction, pipelined as one is (:func:`_opening`): their statements go with BEGIN
        and COMMIT, one round trip. Retried whole after a deadlock or serialisation failure
        (nothing of it committed), as any write."""
        if len(ops) == 1:
            self._execute_now(ops[0])
            return

        def plan() -> Plan[None]:
            for op in ops:
                yield from self._write(op)

        self._run_plan(plan, True, True)

    def _execute_now(self, op: Op[R]) -> R:
        make, write, single = self._plan(op)
        return self._run_plan(make, write, single, LoadHits if isinstance(op, Retrieve) else None)

    def _run_plan(
        self, make: Callable[[], Plan[R]], write: bool, single: bool, last: type[Op[Any]] | None = None
    ) -> R:
        """Run a plan on one pooled connection, again from the start after a failure that
        left nothing committed (:meth:`_Session.retry`)."""
        attempt = 0
        while True:
            attempt += 1
            stack = ExitStack()
            session = _Session(self, write, single, stack, last)
            try:
                with stack:  # gives the connection back, committing or rolling back first
                    return drive(make(), session.handlers)
            except psycopg.Error as exc:
                if session.retry(exc, attempt):
                    continue
                raise self._map_error(exc, session.conn) from exc

    async def aexecute(self, op: Op[R]) -> R:
        if self._closed:
            raise StoreError(f"store {self!r} is closed")
        if self._in_background(op):
            return cast(R, None)
        await self._usage.abefore(op)
        make, write, single = self._plan(op)
        attempt = 0
        while True:
            attempt += 1
            astack = AsyncExitStack()
            asession = _AsyncSession(
                self, write, single, astack, LoadHits if isinstance(op, Retrieve) else None
            )
            try:
                async with astack:
                    return await adrive(make(), asession.handlers)
            except psycopg.Error as exc:
                if asession.retry(exc, attempt):
                    continue
                raise self._map_error(exc, asession.conn) from exc

    def _plan(self, op: Op[R]) -> tuple[Callable[[], Flow[R]], bool, bool]:
        """A factory of fresh plans for ``op`` (one per attempt), whether it writes, and
        whether it is a single statement (atomic alone: no BEGIN/COMMIT round trips).

        Reads build their statement here, so bad input fails before any I/O. A
        ``Retrieve`` is the shared flow over the search primitives, on one snapshot."""
        match op:
            case Write():
                # A search's usage write (a Touch and its RecordAccess) is one statement
                # (see _write), pipelined with its BEGIN and COMMIT (_opening).
                single = usage_write(op) is not None
                return (lambda: cast(Plan[R], self._write(op))), True, single
            case ClaimJobs():
                return (lambda: cast(Plan[R], self._claim_jobs(op))), True, False
            case Retrieve():
                return (lambda: cast(Flow[R], self._retrieve(op))), False, False
        build = self._reads.get(type(op))
        if build is None:
            raise InvalidInput(f"PostgresStore does not know operation {type(op).__name__}")
        # A vector search that may go through HNSW sets the scan's options for its transaction;
        # a keyword search of named scopes reads their statistics, then their rows.
        single = not (
            (isinstance(op, VectorHits) and self._may_approximate(op.vector))
            or (isinstance(op, KeywordHits) and op.filter.scope_keys)
        )
        return cast(Callable[[], Plan[R]], build(op)), False, single

    def _retrieve(self, op: Retrieve) -> Flow[list[Candidate]]:
        """:func:`~jiyi.store.retrieve.retrieve_flow`, with the vector and keyword searches
        run side by side (:class:`_Gather`): in a pipelined session their statements share
        round trips."""
        asks = hit_asks(op)
        gather = _Gather(asks)
        found = (yield gather) if asks else []
        return (yield from from_hits(op, asks, found, threads=bool(gather.threaded)))

    def _gathered(self, gather: _Gather) -> Generator[_Batch, list[Rows], list[Any]]:
        """The answers to ``gather.asks``, in order: the vector searches one after the other
        (each may set the index scan's options for the transaction), side by side with the
        keyword search."""
        vectors = [a for a in gather.asks if isinstance(a, VectorHits)]
        keyword = [a for a in gather.asks if not isinstance(a, VectorHits)]
        plans: list[Plan[Any]] = []
        t = gather.threaded
        if vectors:
            plans.append(self._vectors_together(vectors, t))
        plans += [_in_turn([self._keyword_hits(a, t)()]) for a in keyword if isinstance(a, KeywordHits)]
        groups = yield from _side_by_side(plans)
        answers = iter([hits for group in groups for hits in group])
        by_kind = {id(a): next(answers) for a in (*vectors, *keyword)}
        return [by_kind[id(a)] for a in gather.asks]

    def _vectors_together(self, asks: list[VectorHits], threaded: set[str]) -> Plan[list[Any]]:
        """The answers to a Retrieve's vector searches (the plain one, and the one inside its
        time windows): the same statements, in the same order, as one after the other would
        run, but sharing a round trip. They differ only in the windows, so the scope-size
        statement (the walk's choice and options) is asked once and both walks, or both
        exact scans, go in one batch; one after the other, the windowed search asked the
        same size again and waited a round trip for it before its walk (and an exact scan
        waited for the other's)."""
        if len(asks) == 1:  # (its statements are built once, by _vector_hits)
            return (yield from _in_turn([self._vector_hits(asks[0], threaded)()]))
        exact: list[_Query] = []
        sized: list[_Sized] = []
        for ask in asks:
            queries = self._vector_queries(ask)
            if queries is None:
                break
            exact.append(queries[0])
            if queries[1] is not None:
                sized.append(queries[1])
        if len(exact) != len(asks) or len(sized) not in (0, len(asks)):
            return (yield from _in_turn([self._vector_hits(a, threaded)() for a in asks]))
        # The size statement of the search inside time ranges, if any: it also counts them.
        size = next((z.size for z in sized if z.ranges is not None), sized[0].size) if sized else None
        row = (yield size)[0] if size is not None else None
        if row is not None and row[-1]:
            # Walks with sorting off and one generic plan; an exact scan over time ranges
            # after them, with both back to their defaults.
            by_range = [z.by_range(row) for z in sized]
            walks = [z.walk for z, scan in zip(sized, by_range, strict=True) if scan is None]
            scans = [scan for scan in by_range if scan is not None]
            got = yield _Batch((_NO_SORT, _GENERIC_PLAN, *walks, _ANY_PLAN, _ANY_SORT, *scans))
            walked, scanned = iter(got[2 : 2 + len(walks)]), iter(got[4 + len(walks) :])
            found = [next(walked) if scan is None else next(scanned) for scan in by_range]
        elif _one_scan(asks):
            rows = yield self._exact_scan(asks)
            found = [[r for r in rows if r[3] == n] for n in range(len(asks))]
        else:
            found = yield _Batch(tuple(exact))
        threaded.update(r[0] for hits in found for r in hits if r[2])
        return [[Hit(r[0], 1.0 - float(r[1])) for r in hits] for hits in found]

    def _may_approximate(self, vector: Vector) -> bool:
        return (
            self._can_walk
            and self.approximate_from is not None
            and int(np.shape(vector)[0]) in HNSW_DIMENSIONS
        )

    @cached_property
    def _reads(self) -> dict[type, Callable[[Any], Callable[[], Plan[Any]]]]:
        """Per read op, the method that builds its plan factory."""
        return {
            GetItems: self._get_items,
            ListItems: self._list_items,
            VectorHits: self._vector_hits,
            KeywordHits: self._keyword_hits,
            ThreadLinks: self._thread_links,
            LoadHits: self._load_hits,
            GetHistory: self._history,
            GetStats: self._stats,
            CountEvents: self._count_events,
            CacheGet: self._cache_get,
            VectorsFor: self._vectors_for,
            GetMessages: self._get_messages,
            GetCheckpoint: self._get_checkpoint,
            ListCheckpoints: self._list_checkpoints,
            ListJobs: self._list_jobs,
            DumpRows: self._dump_rows,
            ScopeClock: self._scope_clock,
            ListAccesses: self._list_accesses,
        }

    def explain(self, op: Op[Any], *, analyze: bool = False) -> str:
        """The query plan PostgreSQL chooses (``EXPLAIN``) for a search primitive's statement,
        or for the first one a ``Retrieve`` runs (its vector hits, else its keyword hits),
        to check exactness; "" when there is none. A primitive of several statements (a
        pruned keyword search) is run, and each statement's plan shown in turn."""
        if isinstance(op, Retrieve):
            if op.vector is not None and op.vector_k > 0:
                op = VectorHits(op.filter, op.model_id, op.vector, op.vector_k)
            else:
                op = KeywordHits(op.filter, op.terms, op.keyword_k)
        options = "ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF" if analyze else "COSTS OFF"
        if not isinstance(op, VectorHits):
            make = self._plan(op)[0]

            def each(conn: Conn) -> Rows:  # read only: a write's plan is refused, not run
                _run_sync(conn, _SNAPSHOT_SQL)
                plan, out = cast(Plan[Any], make()), []
                with suppress(StopIteration):
                    asked = next(plan)
                    while True:
                        if isinstance(asked, _Batch):  # settings around a statement (a keyword round)
                            rows = []
                            for q in asked.queries:
                                if not q.deferred:
                                    out += _run_sync(conn, _Query(f"EXPLAIN ({options}) {q.sql}", q.params))
                                rows.append(_run_sync(conn, q))
                            asked = plan.send(rows)
                            continue
                        out += _run_sync(conn, _Query(f"EXPLAIN ({options}) {asked.sql}", asked.params))
                        asked = plan.send(_run_sync(conn, asked))
                return out

            return "\n".join(str(r[0]) for r in self._admin(each))
        queries = self._vector_queries(op)
        if queries is None:
            return ""
        query, sized = queries

        def run(conn: Conn) -> Rows:  # in one transaction (_admin), so the scan's options hold
            chosen = query
            if sized is not None and (row := _run_sync(conn, sized.size)[0])[-1]:  # the path a search takes
                scan = sized.by_range(row)
                if scan is None:
                    _run_sync(conn, _NO_SORT)
                chosen = sized.walk if scan is None else scan
            return _run_sync(conn, _Query(f"EXPLAIN ({options}) {chosen.sql}", chosen.params))

        return "\n".join(str(r[0]) for r in self._admin(run))

    # ------------------------------------------------------------ reads

    def _vector_param(self, vector: Vector, what: str) -> Vector:
        arr = np.asarray(vector, dtype=np.float32)
        if arr.ndim != 1 or not 1 <= arr.shape[0] <= MAX_DIMENSIONS:
            raise InvalidInput(
                f"{what} must be one row of 1..{MAX_DIMENSIONS} numbers, got shape {arr.shape}",
                field="vector",
            )
        if self.dimensions is not None and arr.shape[0] != self.dimensions:
            raise InvalidInput(
                f"{what} has {arr.shape[0]} dimensions but this store holds {self.dimensions}", field="vector"
            )
        return arr

    def _get_items(self, op: GetItems) -> Callable[[], Plan[list[MemoryItem]]]:
        if not op.ids:
            return lambda: _done([])
        query = _Query(
            f"SELECT i.id, {_READ_ITEM} FROM {self._s}.items i WHERE i.tenant_id = %(tenant)s "
            "AND i.id = ANY(%(ids)s::text[])",
            {"tenant": op.tenant_id, "ids": list(op.ids)},
        )

        def convert(rows: Rows) -> list[MemoryItem]:
            by_id = {r[0]: _read_item(*r[1:4]) for r in rows}
            return [by_id[i] for i in op.ids if i in by_id]

        return lambda: _single(query, convert)

    def _list_items(self, op: ListItems) -> Callable[[], Plan[Page]]:
        where, params = _filter_sql(op.filter, "i")
        order = "DESC" if op.descending else "ASC"
        if op.cursor:
            created_at, item_id = decode_cursor(op.cursor)
            cmp = "<" if op.descending else ">"
            where += f" AND (i.created_at, i.id) {cmp} (%(c_at)s, %(c_id)s)"
            params |= {"c_at": _cursor_time(created_at, op.cursor), "c_id": item_id}
        limit = max(1, op.limit)
        params["limit"] = limit + 1
        query = _Query(
            f"SELECT {_READ_ITEM}, i.created_at, i.id FROM {self._s}.items i WHERE {where} "
            f"ORDER BY i.created_at {order}, i.id {order} LIMIT %(limit)s",
            params,
        )

        def convert(rows: Rows) -> Page:
            more = len(rows) > limit
            rows = rows[:limit]
            last = rows[-1] if rows else None
            cursor = encode_cursor(cast(str, ts(last[3])), last[4]) if more and last else None
            return Page(items=[_read_item(*r[:3]) for r in rows], next_cursor=cursor)

        return lambda: _single(query, convert)

    # ------------------------------------------------------------ search primitives

    def _query_vector(self, model_id: str, vector: Vector) -> tuple[str, dict[str, Any]]:
        """The cosine distance of ``v.vec`` (a vectors row of the model and dimension) to the
        query vector, and its parameters. NaN (a zero vector) counts as orthogonal, as
        numpy's dot product says; every primitive computes it the same way, to the bit."""
        params = {
            "qvec": self._vector_param(vector, "the query vector"),
            "model": model_id,
            "dim": int(vector.shape[0]),
        }
        return f"coalesce(nullif(v.vec {self._cosine} %(qvec)s, 'NaN'::float8), 1.0::float8)", params

    def _vector_hits(self, op: VectorHits, threaded: set[str] | None = None) -> Callable[[], Plan[list[Hit]]]:
        """Exact for scopes under ``approximate_from`` items; larger ones through the HNSW
        index of the vector's dimension, when it has one. The scope's size comes from
        ``keyword_scopes`` (kept by every write), in a first statement that also sets the
        index scan's options for this transaction. ``threaded`` collects the hits that
        are in a thread."""
        queries = self._vector_queries(op)
        if queries is None:
            return lambda: _done([])
        exact, sized = queries

        def convert(rows: Rows) -> list[Hit]:
            if threaded is not None:
                threaded.update(r[0] for r in rows if r[2])
            return [Hit(r[0], 1.0 - float(r[1])) for r in rows]

        if sized is None:
            return lambda: _single(exact, convert)

        def plan() -> Plan[list[Hit]]:
            rows = yield sized.size
            if not rows[0][-1]:
                return convert((yield exact))
            if (scan := sized.by_range(rows[0])) is not None:
                return convert((yield scan))
            walked = yield _Batch((_NO_SORT, _GENERIC_PLAN, sized.walk, _ANY_PLAN, _ANY_SORT))
            return convert(walked[2])

        return plan

    def _vector_queries(self, op: VectorHits) -> tuple[_Query, _Sized | None] | None:
        """The exact statement, and when the store may search approximately the scope-size
        statement, the approximate one and, for a search inside time ranges of named
        scopes, the exact one over those ranges (None when there is nothing to search)."""
        where, params = _filter_sql(op.filter, "i")
        dist, more = self._query_vector(op.model_id, op.vector)
        params |= more | {"k": op.k}
        if op.k <= 0:
            return None
        windowed = bool(op.time_ranges or op.time_months)
        if windowed:
            params |= _window_params(op)
        exact = self._exact_scan((op,))
        dim = int(op.vector.shape[0])
        if not self._may_approximate(op.vector):
            return exact, None
        ranges = op.time_ranges if op.filter.scope_keys and not op.time_months else ()
        scan = self._range_scan(where, dist, params, ranges) if ranges else None
        if windowed:
            # The vector row's copy of the time: the walk drops rows outside the windows
            # before their item is looked up (migration "item times on vectors").
            where += " AND " + _in_windows("v.occurred_at")
        return exact, _Sized(
            self._scope_size(op.filter, op.k, dim, ranges), self._approximate(where, dist, dim, params), scan
        )

    def _range_scan(
        self, where: str, dist: str, params: dict[str, Any], ranges: tuple[tuple[datetime, datetime], ...]
    ) -> _Query:
        """The exact k nearest of named scopes inside time ``ranges``, their rows read
        through the index "vectors_scope_time": a few days' or weeks' rows of a large scope,
        where the HNSW walk passes over every row outside them. ``where``, ``dist`` and
        ``params``: the search's filter, distance and parameters (:meth:`_vector_queries`)."""
        s = self._s
        inside, more = _in_ranges("v.occurred_at", ranges)
        return _Query(
            f"WITH scoped AS MATERIALIZED (SELECT i.pk, {dist} AS dist "
            f"FROM {s}.vectors v JOIN {s}.items i ON {_VECTOR_ROW} WHERE {where} "
            f"AND v.tenant_id = %(f_tenant)s AND v.scope_key = ANY(%(f_scopes)s::text[]) AND {inside}) "
            f"SELECT i.id, x.dist, i.thread_id IS NOT NULL FROM "
            f"(SELECT pk, dist FROM scoped ORDER BY dist, pk LIMIT %(k)s) x "
            f"JOIN {s}.items i ON i.tenant_id = %(f_tenant)s AND i.pk = x.pk ORDER BY x.dist, x.pk",
            params | more,
        )

    def _exact_scan(self, asks: Sequence[VectorHits]) -> _Query:
        """One exact scan of the scope's vectors answering ``asks`` (the same filter, model
        and vector; at most one with time windows): each row is (id, distance, in a thread,
        the ask's position), each ask's k nearest by (distance, pk). A Retrieve whose query
        names a time asks two searches that differ only in the windows: computing the
        scope's distances once serves both (two scans cost it twice, ~1.3-1.8 ms of server
        time at 1,000 memories a scope). Planned for each search's values, not once (a
        generic plan cannot tell a scope's share of the table: with a few scopes and
        PostgreSQL's default page costs it reads every scope's vectors, docs/benchmarks.md
        session 18)."""
        s = self._s
        op = asks[0]
        where, params = _filter_sql(op.filter, "i")
        dist, more = self._query_vector(op.model_id, op.vector)
        params |= more
        parts = []
        for n, ask in enumerate(asks):
            test = ""
            params[f"k_{n}"] = ask.k
            if ask.time_ranges or ask.time_months:
                params |= _window_params(ask)
                test = f"WHERE {_in_windows('occurred_at')} "
            parts.append(
                f"(SELECT {n} AS part, pk, dist FROM scoped {test}ORDER BY dist, pk LIMIT %(k_{n})s)"
            )
        # Named scopes: their vectors are read through vectors_scope (together on disk once
        # the table is clustered) and matched to the filter's items by pk (a hash join),
        # rather than looked up one primary key per item.
        by_scope = " AND v.scope_key = ANY(%(f_scopes)s::text[])" if op.filter.scope_keys else ""
        return _Query(
            f"WITH scoped AS MATERIALIZED (SELECT i.pk, i.occurred_at, {dist} AS dist "
            f"FROM {s}.items i JOIN {s}.vectors v ON {_VECTOR_ROW} WHERE {where}{by_scope}) "
            f"SELECT i.id, x.dist, i.thread_id IS NOT NULL, x.part FROM ({' UNION ALL '.join(parts)}) x "
            f"JOIN {s}.items i ON i.tenant_id = %(f_tenant)s AND i.pk = x.pk ORDER BY x.part, x.dist, x.pk",
            params,
        )

    def _scope_size(
        self, f: Filter, k: int, dim: int, ranges: tuple[tuple[datetime, datetime], ...] = ()
    ) -> _Query:
        """Whether to walk the HNSW index (its last column), and the walk's options for the
        rest of the transaction. Yes when the searched scopes hold ``approximate_from``
        items or more (all statuses: an upper bound on the rows with a vector) and they are
        a large enough part of the index for the walk to find k of them within
        ``hnsw.max_scan_tuples`` (4x margin); no when the index is missing. Iterative scan:
        while the filter rejects the nearest rows (other scopes, archived items, other
        models), the walk goes on instead of returning fewer than k. With time ``ranges``,
        the column before it counts the scopes' vector rows inside them, up to
        :data:`WINDOW_EXACT_MAX` (:meth:`_range_scan` below that)."""
        if f.scope_keys:
            count = (
                f"SELECT coalesce(sum(docs), 0) FROM {self._s}.keyword_scopes "
                "WHERE tenant_id = %(t)s AND scope_key = ANY(%(scopes)s::text[])"
            )
        else:
            count = f"SELECT coalesce(sum(docs), 0) FROM {self._s}.keyword_stats WHERE tenant_id = %(t)s"
        params: dict[str, Any] = {
            "t": f.tenant_id,
            "scopes": list(f.scope_keys),
            "ef": str(min(1000, max(HNSW_EF_SEARCH, k))),
            "need": 4 * k,
            "from": self.approximate_from,
            "index": f"{self._s}.vectors_hnsw_{dim}",
        }
        inside = ""
        if ranges:
            test, more = _in_ranges("occurred_at", ranges)
            params |= more
            inside = (
                f"(SELECT count(*) FROM (SELECT 1 FROM {self._s}.vectors WHERE tenant_id = %(t)s "
                f"AND scope_key = ANY(%(scopes)s::text[]) AND {test} LIMIT {WINDOW_EXACT_MAX}) w), "
            )
        # With the walk chosen, sorting is off around it (_NO_SORT, _ANY_SORT).
        return _Query(
            "SELECT n, set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            f"set_config('hnsw.ef_search', %(ef)s, true), set_config('hnsw.max_scan_tuples', '{HNSW_MAX_SCAN}', true), "
            f"{inside}walk FROM (SELECT n, n >= %(from)s AND rows IS NOT NULL "
            f"AND n * {HNSW_MAX_SCAN}.0 >= greatest(rows, 0) * %(need)s AS walk "
            f"FROM ({count}) c(n), (SELECT (SELECT reltuples FROM pg_class WHERE oid = to_regclass(%(index)s))) r(rows)) d",
            params,
        )

    def _approximate(self, where: str, dist: str, dim: int, params: dict[str, Any]) -> _Query:
        """The k nearest rows in HNSW order (``dim = d`` and the cast spelled as the
        partial index is, so the planner can use it), filtered as the scan goes, then
        ordered by the same distance the exact path computes. k is written into the
        statement: the plan made once for it (:data:`_GENERIC_PLAN`) then knows how few rows
        come out of the walk, and fetches their items by primary key (with the limit a
        parameter, a hash join over the tenant's items)."""
        s = self._s
        return _Query(
            f"WITH near AS MATERIALIZED (SELECT i.pk, {dist} AS dist FROM {s}.vectors v "
            f"JOIN {s}.items i ON i.tenant_id = v.tenant_id AND i.pk = v.pk "
            f"WHERE v.dim = {dim} AND v.model = %(model)s "
            f"AND {where} "
            f"ORDER BY v.vec::{self._vector_type}({dim}) {self._cosine} %(qvec)s LIMIT {int(params['k'])}) "
            f"SELECT i.id, x.dist, i.thread_id IS NOT NULL FROM near x JOIN {s}.items i "
            f"ON i.tenant_id = %(f_tenant)s AND i.pk = x.pk ORDER BY x.dist, x.pk",
            params,
        )

    def _keyword_hits(
        self, op: KeywordHits, threaded: set[str] | None = None
    ) -> Callable[[], Plan[list[Hit]]]:
        """BM25's collection is the searched scopes (the tenant when none is named), whatever
        their status: as if they were one FTS5 table of their own (see the module notes).
        Named scopes that the searcher sees whole are searched with pruning
        (:meth:`_keyword_pruned`); otherwise every row holding a query term is read
        (:meth:`_keyword_scan`). Both give the same scores. ``threaded`` collects the rows
        read that are in a thread (every hit among them)."""
        f = op.filter
        terms = list(dict.fromkeys(t for t in (fold_term(t) for t in op.terms) if t))
        if not terms or op.k <= 0:
            return lambda: _done([])
        if f.scope_keys and (f.viewer is None or f.viewer.sees_all):
            return self._keyword_pruned(op, terms, threaded)
        return self._keyword_scan(op, terms, threaded)

    def _keyword_scan(
        self, op: KeywordHits, terms: list[str], threaded: set[str] | None = None
    ) -> Callable[[], Plan[list[Hit]]]:
        """Every row of the collection holding a query term, once per term it holds
        (``kw_hits``), gives the document frequencies and, for rows the filter admits, the
        scores: one statement."""
        s = self._s
        f = op.filter
        wanted, params = _filter_sql(f, "h")
        params |= {
            "kw_terms": terms,
            "kw_query": " | ".join(tsquery_operand(t) for t in terms),
            "k": op.k,
        }
        stats, in_scopes = self._keyword_collection(f, params)
        query = _Query(
            f"WITH kw_stats AS MATERIALIZED ({stats}), "
            f"kw_hits AS MATERIALIZED ({_query_lexemes('kw_terms', wanted)} FROM {s}.items h "
            f"WHERE h.tenant_id = %(f_tenant)s{in_scopes} "
            "AND h.tsv @@ to_tsquery('pg_catalog.simple', %(kw_query)s)) z), "
            f"kw_terms AS MATERIALIZED (SELECT d.term, {_bm25_idf('st.n', 'd.df')} AS idf "
            "FROM (SELECT term, count(*)::float8 AS df FROM kw_hits "
            "GROUP BY term) d CROSS JOIN kw_stats st), "
            f"kw_top AS (SELECT k.pk, {_bm25_sum('st.avgdl')} AS score "
            "FROM kw_hits k JOIN kw_terms t ON t.term = k.term CROSS JOIN kw_stats st "
            "WHERE k.wanted GROUP BY k.pk ORDER BY score DESC, k.pk LIMIT %(k)s) "
            f"SELECT i.id, kt.score, i.thread_id IS NOT NULL FROM kw_top kt JOIN {s}.items i "
            "ON i.tenant_id = %(f_tenant)s AND i.pk = kt.pk ORDER BY kt.score DESC, kt.pk",
            params,
        )

        def convert(rows: Rows) -> list[Hit]:
            if threaded is not None:
                threaded.update(r[0] for r in rows if r[2])
            return [Hit(r[0], float(r[1])) for r in rows]

        return lambda: _single(query, convert)

    def _keyword_pruned(
        self, op: KeywordHits, terms: list[str], threaded: set[str] | None = None
    ) -> Callable[[], Plan[list[Hit]]]:
        """The exact top k of searched scopes (a collection all may see) without reading every
        row that holds a query term. A first statement reads the collection's size and each
        term's document frequency and score bound (``keyword_terms``, kept by every write).
        Then rounds score rows (every query term of each row, as in one pass) whose terms'
        bounds add up to more than a level (:func:`reaching`, a ``to_tsquery`` of ANDs that
        the GIN index answers without reading other rows), each round excluding the rows
        earlier ones read: :data:`KEYWORD_FIRST_LEVEL` of the bounds' sum first, lowered
        while fewer than k rows are found, then the k-th score found. Once the k-th score
        is at least the level, no row left unread can reach it (its bounds add up to no
        more), so the top k is exact; the thousands of rows holding a common word alone are
        never read."""
        s = self._s
        wanted, params = _filter_sql(op.filter, "h")
        params |= {
            "kw_terms": terms,
            "k": op.k,
        }
        stats, _ = self._keyword_collection(op.filter, params)
        first = _Query(
            f"WITH st AS ({stats}) SELECT st.n, st.avgdl, d.term, d.df, d.max_tf, d.min_len FROM st LEFT JOIN "
            "(SELECT term, sum(docs)::float8 AS df, max(max_tf) AS max_tf, min(min_len) AS min_len "
            f"FROM {s}.keyword_terms WHERE tenant_id = %(f_tenant)s AND scope_key = ANY(%(f_scopes)s::text[]) "
            "AND term = ANY(%(kw_terms)s::text[]) AND docs > 0 GROUP BY term) d ON true",
            params,
        )
        score = self._keyword_round(wanted)

        def plan() -> Plan[list[Hit]]:
            rows = yield first
            known = {str(r[2]): (float(r[3]), int(r[4]), int(r[5])) for r in rows if r[2] is not None}
            if not known:
                return []
            n, avgdl = float(rows[0][0]), float(rows[0][1])
            bounds = sorted(
                ((t, bm25_bound(n, avgdl, *known[t])) for t in known), key=lambda r: (-r[1], r[0])
            )
            more = params | {
                "n": n,
                "avgdl": avgdl,
                "t_all": list(known),
                "t_df": [d[0] for d in known.values()],
            }
            top: list[tuple[float, int, str]] = []
            prefixes = [scope_prefix(op.filter.tenant_id, key) for key in op.filter.scope_keys]
            level, read, wide = KEYWORD_FIRST_LEVEL * sum(b for _, b in bounds), "", False
            if min(n, sum(d[0] for d in known.values())) <= KEYWORD_SCAN_ROWS:
                level = 0.0
            while True:
                if level < bounds[-1][1]:
                    level = 0.0  # every row holding a term
                query, wide = _reaching_query(bounds, level, wide, prefixes)
                if query != read:  # else this level admits no row the last one did not
                    ran = yield _Batch(
                        (
                            _GENERIC_PLAN,
                            _Query(score, more | {"kw_query": f"({query}) & !({read})" if read else query}),
                            _ANY_PLAN,
                        )
                    )
                    got = ran[1]
                    if threaded is not None:
                        threaded.update(str(r[0]) for r in got if r[3])
                    found = {h[1]: h for h in top} | {
                        int(r[2]): (float(r[1]), int(r[2]), str(r[0])) for r in got
                    }
                    top = sorted(found.values(), key=lambda h: (-h[0], h[1]))[: op.k]
                    read = query
                kth = top[-1][0] if len(top) >= op.k else None
                if level == 0.0 or (kth is not None and kth >= level):
                    return [Hit(hit_id, hit_score) for hit_score, _, hit_id in top]
                level = kth if kth is not None else level * KEYWORD_LEVEL_STEP

        return plan

    def _keyword_round(self, wanted: str) -> str:
        """One round of :meth:`_keyword_pruned`: the rows of the searched scopes (``wanted``,
        alias h) that the round's ``tsquery`` admits, through the keyword index by scope and term,
        scored on every query term; the top k with their pk and whether each is in a thread."""
        s = self._s
        return (
            f"WITH kw_terms AS MATERIALIZED (SELECT term, {_bm25_idf('%(n)s::float8', 'df')} AS idf "
            "FROM unnest(%(t_all)s::text[], %(t_df)s::float8[]) AS x(term, df)), "
            f"kw_hits AS ({_query_lexemes('t_all')} FROM {s}.items h "
            f"WHERE {wanted} AND {s}.scope_terms(h.tenant_id, h.scope_key, h.tsv) @@ %(kw_query)s::tsquery) z), "
            f"kw_top AS (SELECT k.pk, {_bm25_sum('%(avgdl)s::float8')} AS score "
            "FROM kw_hits k JOIN kw_terms t ON t.term = k.term GROUP BY k.pk ORDER BY score DESC, k.pk LIMIT %(k)s) "
            f"SELECT i.id, kt.score, kt.pk, i.thread_id IS NOT NULL FROM kw_top kt JOIN {s}.items i "
            "ON i.tenant_id = %(f_tenant)s AND i.pk = kt.pk"
        )

    def _keyword_collection(self, f: Filter, params: dict[str, Any]) -> tuple[str, str]:
        """The document count and average length of BM25's collection (a statement), and
        the condition that keeps ``kw_hits`` (alias h) inside it. Other scopes' words
        neither cost time nor shift the scores. A viewer who may not see every project item
        gets the collection they see, counted on the spot, so hidden items' words do not
        show through the scores either."""
        s = self._s
        viewer = f.viewer
        if viewer is not None and not viewer.sees_all:
            seen = keyword_collection(f)
            seen_sql, more = _filter_sql(seen, "h")
            params |= more
            return (
                "SELECT count(*)::float8 AS n, "
                f"coalesce(sum(h.n_terms), 0)::float8 / greatest(count(*), 1) + {FTS5_SCOPE_TOKENS} "
                f"AS avgdl FROM {s}.items h WHERE {seen_sql}"
            ), f" AND {seen_sql}"
        if f.scope_keys:
            return (
                "SELECT coalesce(sum(docs), 0)::float8 AS n, "
                f"coalesce(sum(tokens), 0)::float8 / greatest(coalesce(sum(docs), 0), 1) + {FTS5_SCOPE_TOKENS} "
                f"AS avgdl FROM {s}.keyword_scopes WHERE tenant_id = %(f_tenant)s "
                "AND scope_key = ANY(%(f_scopes)s::text[])"
            ), " AND h.scope_key = ANY(%(f_scopes)s::text[])"
        return (
            f"SELECT docs::float8 AS n, tokens::float8 / greatest(docs, 1) + {FTS5_SCOPE_TOKENS} AS avgdl "
            f"FROM {s}.keyword_stats WHERE tenant_id = %(f_tenant)s"
        ), ""

    def _thread_links(self, op: ThreadLinks) -> Callable[[], Plan[dict[str, Link]]]:
        """Positions are numbered only in the threads of ``ids``, over the filter's rows
        (expired ones too, as threads go through expired turns). The thread ids are one
        array computed first, an index condition whatever the planner believes of the
        scope's size (stale statistics once made this a scan of the scope per item)."""
        s = self._s
        f = op.filter
        where, params = _filter_sql(replace(f, include_expired=True), "i")
        live = "TRUE"
        if not f.include_expired:
            params |= _filter_sql(f, "i")[1]
            live = "(i.expires_at IS NULL OR i.expires_at > %(f_now)s)"
        if not op.ids:
            return lambda: _done({})
        params |= {"ids": list(op.ids), "reach": max(0, op.reach)}
        query = _Query(
            f"WITH t AS MATERIALIZED (SELECT i.id, i.thread_id, {live} AS live, row_number() OVER w AS pos, "
            f"lag(i.id) OVER w AS prev, lead(i.id) OVER w AS next FROM {s}.items i WHERE {where} "
            f"AND i.thread_id = ANY(ARRAY(SELECT DISTINCT x.thread_id FROM {s}.items x "
            "WHERE x.tenant_id = %(f_tenant)s AND x.id = ANY(%(ids)s::text[]) AND x.thread_id IS NOT NULL)) "
            "WINDOW w AS (PARTITION BY i.thread_id ORDER BY coalesce(i.occurred_at, i.created_at), i.pk)) "
            "SELECT DISTINCT b.id, b.prev, b.next, b.live FROM t a JOIN t b ON b.thread_id = a.thread_id "
            "AND b.pos BETWEEN a.pos - %(reach)s AND a.pos + %(reach)s WHERE a.id = ANY(%(ids)s::text[])",
            params,
        )
        return lambda: _single(query, lambda rows: {r[0]: Link(r[1], r[2], bool(r[3])) for r in rows})

    def _load_hits(self, op: LoadHits) -> Callable[[], Plan[dict[str, Loaded]]]:
        s = self._s
        where, params = _filter_sql(replace(op.filter, include_expired=True), "i")
        cosine, vec, join = "NULL::float8", "NULL", ""
        if op.vector is not None:
            dist, more = self._query_vector(op.model_id, op.vector)
            params |= more
            cosine = f"CASE WHEN v.pk IS NOT NULL THEN {dist} END"
            vec = "CASE WHEN i.id = ANY(%(ids)s::text[]) THEN v.vec END"
            join = f" LEFT JOIN {s}.vectors v ON {_VECTOR_ROW}"
        every = list(dict.fromkeys((*op.ids, *op.context_ids)))
        if not every:
            return lambda: _done({})
        params |= {"ids": list(op.ids), "every": every}
        query = _Query(
            f"SELECT i.id, i.id = ANY(%(ids)s::text[]), {cosine}, {vec}, "
            # terms for every row (short): spares a third ANY() over the ids per row
            f"CASE WHEN i.id = ANY(%(ids)s::text[]) THEN i.doc::text END, i.access_count, i.last_used_at, i.terms "
            f"FROM {s}.items i{join} WHERE {where} AND i.id = ANY(%(every)s::text[])",
            params,
        )

        parse = thread_items(self._item_caches).shared if op.shared_items and self._cache_items else load_item

        def convert(rows: Rows) -> dict[str, Loaded]:
            out: dict[str, Loaded] = {}
            for item_id, asked, dist, vector, doc, count, used, terms in rows:
                cos = None if dist is None else 1.0 - float(dist)
                item = _read_item(doc, count, used, parse) if asked else None
                out[item_id] = Loaded(
                    item,
                    vector if item is not None and dist is not None else None,
                    cos,
                    terms if asked else None,
                )
            return out

        return lambda: _single(query, convert)

    def _count_events(self, op: CountEvents) -> Callable[[], Plan[int]]:
        query = _Query(
            f"SELECT count(*) FROM {self._s}.rate_events WHERE key = %(key)s AND at >= %(since)s",
            {"key": op.key, "since": as_utc(op.since)},
        )
        return lambda: _single(query, lambda rows: int(rows[0][0]))

    def _scope_clock(self, op: ScopeClock) -> Callable[[], Plan[int]]:
        query = _Query(
            f"SELECT version FROM {self._s}.scope_clock WHERE tenant_id = %(tenant)s AND scope_key = %(scope)s",
            {"tenant": op.tenant_id, "scope": op.scope_key},
        )
        return lambda: _single(query, lambda rows: int(rows[0][0]) if rows else 0)

    def _list_checkpoints(self, op: ListCheckpoints) -> Callable[[], Plan[list[Checkpoint]]]:
        query = _Query(
            f"SELECT doc::text FROM {self._s}.checkpoints WHERE tenant_id = %(tenant)s "
            "AND session_id = %(session)s ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
            {"tenant": op.tenant_id, "session": op.session_id, "limit": max(1, op.limit)},
        )
        return lambda: _single(query, lambda rows: [load_stored(Checkpoint, r[0]) for r in rows])

    # ------------------------------------------------------------ other reads

    def _history(self, op: GetHistory) -> Callable[[], Plan[list[HistoryEvent]]]:
        query = _Query(
            "SELECT seq, item_id, tenant_id, action, at, version, reason, actor, before::text, after::text "
            f"FROM {self._s}.history WHERE tenant_id = %(tenant)s AND item_id = %(id)s ORDER BY seq",
            {"tenant": op.tenant_id, "id": op.item_id},
        )

        def convert(rows: Rows) -> list[HistoryEvent]:
            return [history_event(r, as_utc(r[4])) for r in rows]

        return lambda: _single(query, convert)

    def _stats(self, op: GetStats) -> Callable[[], Plan[StoreStats]]:
        where, params = _filter_sql(op.filter, "i")
        query = _Query(
            "SELECT GROUPING(i.memory_type, i.scope, i.status), i.memory_type, i.scope, i.status, "
            f"count(*), avg(i.confidence), avg(i.importance) FROM {self._s}.items i WHERE {where} "
            "GROUP BY GROUPING SETS ((), (i.memory_type), (i.scope), (i.status))",
            params,
        )

        def convert(rows: Rows) -> StoreStats:
            groups: dict[int, dict[str, int]] = {0b011: {}, 0b101: {}, 0b110: {}}
            total, avg_c, avg_i = 0, None, None
            for g, memory_type, scope, status, count, ac, ai in rows:
                if g == 0b111:
                    total, avg_c, avg_i = int(count), ac, ai
                else:
                    key = {0b011: memory_type, 0b101: scope, 0b110: status}[g]
                    groups[g][key] = int(count)
            by_type, by_scope, by_status = ({k: d[k] for k in sorted(d)} for d in groups.values())
            return StoreStats(
                total=total,
                by_type=by_type,
                by_scope=by_scope,
                by_status=by_status,
                avg_confidence=None if avg_c is None else float(avg_c),
                avg_importance=None if avg_i is None else float(avg_i),
            )

        return lambda: _single(query, convert)

    def _cache_get(self, op: CacheGet) -> Callable[[], Plan[dict[str, Vector]]]:
        if not op.hashes:
            return lambda: _done({})
        query = _Query(
            f"SELECT text_hash, vec FROM {self._s}.embedding_cache "
            "WHERE model = %(model)s AND text_hash = ANY(%(hashes)s::text[])",
            {"model": op.model_id, "hashes": list(op.hashes)},
        )
        return lambda: _single(query, lambda rows: {r[0]: r[1] for r in rows})

    def _vectors_for(self, op: VectorsFor) -> Callable[[], Plan[dict[str, Vector]]]:
        if not op.ids:
            return lambda: _done({})
        query = _Query(
            f"SELECT i.id, v.vec FROM {self._s}.items i JOIN {self._s}.vectors v "
            "ON v.tenant_id = i.tenant_id AND v.pk = i.pk "
            "WHERE i.tenant_id = %(tenant)s AND v.model = %(model)s AND i.id = ANY(%(ids)s::text[])",
            {"tenant": op.tenant_id, "model": op.model_id, "ids": list(op.ids)},
        )
        return lambda: _single(query, lambda rows: {r[0]: r[1] for r in rows})

    def _get_messages(self, op: GetMessages) -> Callable[[], Plan[list[Message]]]:
        params: dict[str, Any] = {"tenant": op.tenant_id, "session": op.session_id}
        where = f"FROM {self._s}.messages WHERE tenant_id = %(tenant)s AND session_id = %(session)s"
        if op.last is not None:
            params["last"] = max(0, op.last)
            sql = f"SELECT doc FROM (SELECT seq, doc::text AS doc {where} ORDER BY seq DESC LIMIT %(last)s) m ORDER BY seq"
        else:
            params["after"] = -1 if op.after_seq is None else op.after_seq
            sql = f"SELECT doc::text {where} AND seq > %(after)s ORDER BY seq"
        query = _Query(sql, params)
        return lambda: _single(query, lambda rows: [load_stored(Message, r[0]) for r in rows])

    def _get_checkpoint(self, op: GetCheckpoint) -> Callable[[], Plan[Checkpoint | None]]:
        params: dict[str, Any] = {"tenant": op.tenant_id, "session": op.session_id}
        sql = f"SELECT doc::text FROM {self._s}.checkpoints WHERE tenant_id = %(tenant)s AND session_id = %(session)s"
        if op.checkpoint_id is None:
            sql += " ORDER BY created_at DESC, id DESC LIMIT 1"
        else:
            sql += " AND id = %(id)s"
            params["id"] = op.checkpoint_id
        query = _Query(sql, params)
        return lambda: _single(query, lambda rows: load_stored(Checkpoint, rows[0][0]) if rows else None)

    def _list_jobs(self, op: ListJobs) -> Callable[[], Plan[list[Job]]]:
        clauses = ["TRUE"]
        params: dict[str, Any] = {"limit": max(1, op.limit)}
        if op.statuses:
            clauses.append("status = ANY(%(statuses)s::text[])")
            params["statuses"] = list(op.statuses)
        if op.kinds:
            clauses.append("kind = ANY(%(kinds)s::text[])")
            params["kinds"] = list(op.kinds)
        if op.tenant_id is not None:
            clauses.append("tenant_id = %(tenant)s")
            params["tenant"] = op.tenant_id
        query = _Query(
            f"SELECT doc::text FROM {self._s}.jobs WHERE {' AND '.join(clauses)} "
            "ORDER BY created_at, id LIMIT %(limit)s",
            params,
        )
        return lambda: _single(query, lambda rows: [Job.model_validate_json(r[0]) for r in rows])

    # ------------------------------------------------------------ writes

    def _write(self, op: Write) -> Plan[None]:
        usage = usage_write(op)
        if usage is not None:
            yield from self._touch(*usage)
            return
        stats = _Tally()
        # Guards first, in key order (so two writers never wait on each other's clocks).
        for guard in sorted(
            (c for c in op.changes if isinstance(c, Guard)), key=lambda g: (g.tenant_id, g.scope_key)
        ):
            yield from self._guard(guard)
        for change in op.changes:
            match change:
                case Guard():
                    pass
                case Upsert():
                    yield from self._upsert(change, stats)
                case Purge():
                    yield from self._purge(change, stats)
                case SetVectors():
                    yield from self._set_vectors(change)
                case Touch():
                    yield from self._touch(change)
                case RecordAccess():
                    yield from self._touch(None, change)
                case AppendMessages():
                    yield from self._append_messages(change)
                case LoadRows():
                    yield from self._load_rows(change, stats)
                case ClearRows():
                    yield from self._clear_rows(change, stats)
                case _:
                    statement = self._statement(change)
                    if statement is not None:
                        yield statement
        yield from self._keyword_stats(stats)

    def _clear_rows(self, change: ClearRows, stats: _Tally) -> Generator[_Query, Rows, None]:
        for kind in change.kinds:
            check_row_kind(kind)
            for table in ACCESS_TABLES if kind == "retrievals" else (kind,):
                yield _Query(f"DELETE FROM {self._s}.{table}")
            if kind == "items":
                yield _Query(f"DELETE FROM {self._s}.keyword_stats")
                yield _Query(f"DELETE FROM {self._s}.keyword_scopes")
                yield _Query(f"DELETE FROM {self._s}.keyword_terms")
                stats.clear()

    def _guard(self, g: Guard) -> Generator[_Query, Rows, None]:
        """Advance the scope's clock from ``g.seen``, or refuse the write. Under READ COMMITTED
        a second writer's UPDATE waits for the first one's commit, then finds the version
        changed and matches nothing; two first INSERTs meet on the primary key the same way."""
        params = {"tenant": g.tenant_id, "scope": g.scope_key, "seen": g.seen}
        if g.seen == 0:
            rows = yield _Query(
                f"INSERT INTO {self._s}.scope_clock (tenant_id, scope_key, version) "
                "VALUES (%(tenant)s, %(scope)s, 1) ON CONFLICT DO NOTHING RETURNING version",
                params,
            )
        else:
            rows = yield _Query(
                f"UPDATE {self._s}.scope_clock SET version = version + 1 WHERE tenant_id = %(tenant)s "
                "AND scope_key = %(scope)s AND version = %(seen)s RETURNING version",
                params,
            )
        if not rows:
            raise WriteConflict(
                f"scope {g.scope_key!r} changed while this write was decided (clock {g.seen})"
            )

    def _statement(self, change: Change) -> _Query | None:
        """The one statement of a simple change (None: nothing to do)."""
        s = self._s
        match change:
            case RecordEvent():
                return _Query(
                    f"INSERT INTO {s}.rate_events (key, at) VALUES (%(key)s, %(at)s)",
                    {"key": change.key, "at": as_utc(change.at)},
                )
            case CachePut() if change.entries:
                # Sorted (stably: the last duplicate still wins) so that concurrent
                # writers lock rows in one order and cannot deadlock.
                entries = sorted(change.entries, key=lambda e: e[0])
                return _Query(
                    f"INSERT INTO {s}.embedding_cache (model, text_hash, vec) "
                    "VALUES (%(model)s, %(hash)s, %(vec)s) ON CONFLICT (model, text_hash) "
                    "DO UPDATE SET vec = EXCLUDED.vec",
                    batch=[
                        {"model": change.model_id, "hash": h, "vec": self._vector_param(v, "a cached vector")}
                        for h, v in entries
                    ],
                )
            case DeleteMessages() if change.seqs:
                return _Query(
                    f"DELETE FROM {s}.messages WHERE tenant_id = %(tenant)s "
                    "AND session_id = %(session)s AND seq = ANY(%(seqs)s::bigint[])",
                    {"tenant": change.tenant_id, "session": change.session_id, "seqs": list(change.seqs)},
                )
            case PutCheckpoint():
                c = change.checkpoint
                return _Query(
                    f"INSERT INTO {s}.checkpoints (tenant_id, session_id, id, created_at, doc) "
                    "VALUES (%(tenant)s, %(session)s, %(id)s, %(at)s, %(doc)s::json) "
                    "ON CONFLICT (tenant_id, session_id, id) DO UPDATE SET "
                    "created_at = EXCLUDED.created_at, doc = EXCLUDED.doc",
                    {
                        "tenant": c.tenant_id,
                        "session": c.session_id,
                        "id": c.id,
                        "at": c.created_at,
                        "doc": c.model_dump_json(),
                    },
                )
            case DeleteCheckpoints() if change.ids:
                return _Query(
                    f"DELETE FROM {s}.checkpoints WHERE tenant_id = %(tenant)s "
                    "AND session_id = %(session)s AND id = ANY(%(ids)s::text[])",
                    {"tenant": change.tenant_id, "session": change.session_id, "ids": list(change.ids)},
                )
            case PutJob():
                return self._put_jobs([change.job])
            case ForgetAccesses() if change.user_id is not None or change.before is not None:
                return self._forget_accesses(change)
            case CachePut() | DeleteMessages() | DeleteCheckpoints() | ForgetAccesses():
                return None  # nothing to put or delete
        raise InvalidInput(f"PostgresStore cannot write {type(change).__name__}")

    def _keyword_stats(self, stats: _Tally) -> Generator[_Query, Rows, None]:
        """Apply a write's document count and length changes per scope and term, per scope
        and per tenant."""
        yield from self._keyword_terms(stats)
        scopes = sorted((key, d) for key, d in stats.scopes.items() if d != [0, 0])
        if not scopes:
            return
        tenants: dict[str, list[int]] = {}
        for (tenant, _), (docs, tokens) in scopes:
            totals = tenants.setdefault(tenant, [0, 0])
            totals[0] += docs
            totals[1] += tokens
        # Last, and in key order (scopes, then tenants, as every write does): these rows are
        # then locked only briefly and never in an order that could deadlock.
        yield _Query(
            f"INSERT INTO {self._s}.keyword_scopes AS k (tenant_id, scope_key, docs, tokens) "
            "SELECT * FROM unnest(%(tenants)s::text[], %(scopes)s::text[], %(docs)s::bigint[], "
            "%(tokens)s::bigint[]) ON CONFLICT (tenant_id, scope_key) DO UPDATE SET "
            "docs = k.docs + EXCLUDED.docs, tokens = k.tokens + EXCLUDED.tokens",
            {
                "tenants": [key[0] for key, _ in scopes],
                "scopes": [key[1] for key, _ in scopes],
                "docs": [d[0] for _, d in scopes],
                "tokens": [d[1] for _, d in scopes],
            },
        )
        changed = sorted((t, d) for t, d in tenants.items() if d != [0, 0])
        if changed:
            yield _Query(
                f"INSERT INTO {self._s}.keyword_stats AS k (tenant_id, docs, tokens) "
                "SELECT * FROM unnest(%(tenants)s::text[], %(docs)s::bigint[], %(tokens)s::bigint[]) "
                "ON CONFLICT (tenant_id) DO UPDATE SET docs = k.docs + EXCLUDED.docs, "
                "tokens = k.tokens + EXCLUDED.tokens",
                {
                    "tenants": [t for t, _ in changed],
                    "docs": [d[0] for _, d in changed],
                    "tokens": [d[1] for _, d in changed],
                },
            )

    def _keyword_terms(self, stats: _Tally) -> Generator[_Query, Rows, None]:
        """Per scope and term: the documents holding it, and bounds of its frequency and of
        their length that only ever widen (BM25's per-term maximum for a pruned search,
        :meth:`_keyword_pruned`). In key order, like every write, so writers never deadlock; a
        term no document of its scope holds any more is dropped."""
        changed = sorted((key, d) for key, d in stats.terms.items() if d[0] != 0 or d[1] > 0)
        if not changed:
            return
        columns = {
            "tenants": [key[0] for key, _ in changed],
            "scopes": [key[1] for key, _ in changed],
            "terms": [key[2] for key, _ in changed],
        }
        yield _Query(
            f"INSERT INTO {self._s}.keyword_terms AS k (tenant_id, scope_key, term, docs, max_tf, min_len) "
            "SELECT * FROM unnest(%(tenants)s::text[], %(scopes)s::text[], %(terms)s::text[], "
            "%(docs)s::bigint[], %(tf)s::int[], %(len)s::int[]) ON CONFLICT (tenant_id, scope_key, term) "
            "DO UPDATE SET docs = k.docs + EXCLUDED.docs, max_tf = greatest(k.max_tf, EXCLUDED.max_tf), "
            "min_len = least(k.min_len, EXCLUDED.min_len)",
            columns
            | {
                "docs": [d[0] for _, d in changed],
                "tf": [d[1] for _, d in changed],
                "len": [d[2] for _, d in changed],
            },
        )
        if any(d[0] < 0 for _, d in changed):
            yield _Query(
                f"DELETE FROM {self._s}.keyword_terms k USING unnest(%(tenants)s::text[], %(scopes)s::text[], "
                "%(terms)s::text[]) AS x(tenant_id, scope_key, term) WHERE k.tenant_id = x.tenant_id "
                "AND k.scope_key = x.scope_key AND k.term = x.term AND k.docs <= 0",
                columns,
            )

    def _upsert(self, change: Upsert, stats: _Tally) -> Generator[_Query, Rows, None]:
        item = change.item
        vector: Vector | None = None
        if change.vector is not None:
            if not change.model_id:
                raise InvalidInput("a vector needs the model_id that produced it", field="model_id")
            vector = self._vector_param(change.vector, "the item's vector")
        values = _item_params(item, fold_terms(change.terms))
        while True:
            # Ids are unique per tenant: another tenant's item of the same id is another item.
            rows = yield _Query(
                f"SELECT pk, scope_key, n_terms, occurred_at, {_LEXEMES} FROM {self._s}.items "
                "WHERE tenant_id = %(tenant)s AND id = %(id)s FOR UPDATE",
                {"tenant": item.tenant_id, "id": item.id},
            )
            if rows:
                pk, old_scope, old_terms, old_occurred, old_lexemes = rows[0]
                new = yield _Query(
                    f"UPDATE {self._s}.items SET {_ITEM_SETS} WHERE tenant_id = %(tenant_id)s AND pk = %(pk)s "
                    f"RETURNING {_LEXEMES}",
                    {**values, "pk": pk},
                )
                stats.item(item.tenant_id, old_scope, -1, int(old_terms), old_lexemes)
                lexemes = new[0][0]
                if vector is None and (old_scope != item.scope_key or old_occurred != item.occurred_at):
                    yield _Query(
                        _VECTOR_ITEM.format(s=self._s),
                        {
                            "tenant": item.tenant_id,
                            "pk": pk,
                            "scope": item.scope_key,
                            "occurred": item.occurred_at,
                        },
                    )
                break
            rows = yield _Query(
                f"INSERT INTO {self._s}.items ({', '.join(_ITEM_COLUMNS)}) VALUES ({_ITEM_VALUES}) "
                f"ON CONFLICT (tenant_id, id) DO NOTHING RETURNING pk, {_LEXEMES}",
                values,
            )
            if rows:  # else another transaction inserted this id meanwhile: update it instead
                pk, lexemes = rows[0]
                break
        stats.item(item.tenant_id, item.scope_key, 1, values["n_terms"], lexemes)
        if vector is not None:
            yield _Query(
                _VECTOR_UPSERT.format(s=self._s),
                {
                    "tenant": item.tenant_id,
                    "pk": pk,
                    "scope": item.scope_key,
                    "occurred": item.occurred_at,
                    "model": change.model_id,
                    "dim": int(vector.shape[0]),
                    "vec": vector,
                },
            )
        yield self._record(change.event)

    def _set_vectors(self, change: SetVectors) -> Generator[_Query, Rows, None]:
        if not change.vectors:
            return
        if not change.model_id:
            raise InvalidInput("a vector needs the model_id that produced it", field="model_id")
        # Sorted, as the embedding cache's rows, so that two writers lock in one order.
        rows = [
            {
                "tenant": change.tenant_id,
                "id": item_id,
                "model": change.model_id,
                "dim": int(vec.shape[0]),
                "vec": self._vector_param(vec, "a re-embedded vector"),
            }
            for item_id, vec in sorted(change.vectors, key=lambda e: e[0])
        ]
        yield _Query(
            f"INSERT INTO {self._s}.vectors (tenant_id, pk, scope_key, occurred_at, model, dim, vec) "
            f"SELECT tenant_id, pk, scope_key, occurred_at, %(model)s, %(dim)s, %(vec)s FROM {self._s}.items "
            "WHERE tenant_id = %(tenant)s AND id = %(id)s ON CONFLICT (tenant_id, pk) "
            "DO UPDATE SET model = EXCLUDED.model, dim = EXCLUDED.dim, vec = EXCLUDED.vec",
            batch=rows,
        )

    def _purge(self, change: Purge, stats: _Tally) -> Generator[_Query, Rows, None]:
        rows = yield _Query(
            f"DELETE FROM {self._s}.items WHERE id = %(id)s AND tenant_id = %(tenant)s "
            f"RETURNING scope_key, n_terms, {_LEXEMES}",
            {"id": change.item_id, "tenant": change.tenant_id},
        )
        if not rows:
            return  # nothing of this tenant's to purge: nothing to record either
        stats.item(change.tenant_id, rows[0][0], -1, int(rows[0][1]), rows[0][2])
        yield _Query(
            f"DELETE FROM {self._s}.memory_access_items WHERE tenant_id = %(tenant)s AND item_id = %(id)s",
            {"id": change.item_id, "tenant": change.tenant_id},
        )
        yield self._record(change.event)

    def _append_messages(self, change: AppendMessages) -> Generator[_Query, Rows, None]:
        # Appends to one session queue on a lock (taken in one order, so no deadlocks),
        # so each batch gets consecutive positions, as with SQLite's single writer.
        for tenant, session in sorted(
            {(m.tenant_id, m.session_id) for m in change.messages if m.seq is None}
        ):
            yield _Query(
                "SELECT pg_advisory_xact_lock(%(space)s, hashtext(%(key)s))",
                {"space": SESSION_LOCKS, "key": f"{self.schema}\x1f{tenant}\x1f{session}"},
            )
        next_seq: dict[tuple[str, str], int] = {}
        for m in change.messages:
            key = (m.tenant_id, m.session_id)
            seq = m.seq
            if seq is None:
                if key not in next_seq:
                    rows = yield _Query(
                        f"SELECT coalesce(max(seq) + 1, 0) FROM {self._s}.messages "
                        "WHERE tenant_id = %(tenant)s AND session_id = %(session)s",
                        {"tenant": m.tenant_id, "session": m.session_id},
                    )
                    next_seq[key] = int(rows[0][0])
                seq = next_seq[key]
                next_seq[key] = seq + 1
            stored = m.model_copy(update={"seq": seq})
            rows = yield _Query(
                f"INSERT INTO {self._s}.messages (tenant_id, session_id, seq, id, role, created_at, doc) "
                "VALUES (%(tenant)s, %(session)s, %(seq)s, %(id)s, %(role)s, %(at)s, %(doc)s::json) "
                "ON CONFLICT DO NOTHING RETURNING seq",
                {
                    "tenant": m.tenant_id,
                    "session": m.session_id,
                    "seq": seq,
                    "id": m.id,
                    "role": m.role,
                    "at": m.created_at,
                    "doc": stored.model_dump_json(),
                },
            )
            if not rows:
                raise InvalidInput(
                    f"session {m.session_id!r} already has a message at position {seq}", field="seq"
                )

    def _put_jobs(self, jobs: Sequence[Job]) -> _Query:
        return _Query(
            f"INSERT INTO {self._s}.jobs (id, tenant_id, kind, status, run_after, locked_until, created_at, doc) "
            "VALUES (%(id)s, %(tenant)s, %(kind)s, %(status)s, %(run_after)s, %(locked_until)s, %(created_at)s, "
            "%(doc)s::json) ON CONFLICT (id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, kind = EXCLUDED.kind, "
            "status = EXCLUDED.status, run_after = EXCLUDED.run_after, locked_until = EXCLUDED.locked_until, "
            "created_at = EXCLUDED.created_at, doc = EXCLUDED.doc",
            batch=[_job_row(j, j.model_dump_json()) for j in jobs],
        )

    def _claim_jobs(self, op: ClaimJobs) -> Plan[list[Job]]:
        now = as_utc(op.now)
        params: dict[str, Any] = {"now": now, "limit": max(1, op.limit)}
        kinds = ""
        if op.kinds:
            kinds = " AND kind = ANY(%(kinds)s::text[])"
            params["kinds"] = list(op.kinds)
        # SKIP LOCKED: concurrent workers take different jobs instead of queueing on the same rows.
        rows = yield _Query(
            f"SELECT doc::text FROM {self._s}.jobs WHERE run_after <= %(now)s AND (status = 'queued' "
            f"OR (status = 'running' AND locked_until < %(now)s)){kinds} "
            "ORDER BY run_after, created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED",
            params,
        )
        until = now + timedelta(seconds=op.lease_seconds)
        claimed = []
        for (doc,) in rows:
            job = Job.model_validate_json(doc)
            claimed.append(claimed_job(job, op.worker, until, now))
        if claimed:
            yield self._put_jobs(claimed)
        return claimed

    def _touch(
        self, change: Touch | None, access: RecordAccess | None = None
    ) -> Generator[_Query, Rows, None]:
        """A search's usage write: the counters of ``change`` and the log entry ``access``,
        in one statement (the log's inserts are CTEs of the counters' UPDATE)."""
        s = self._s
        ctes: list[str] = []
        params: dict[str, Any] = {}
        if access is not None:
            a = access.access
            params |= {f"a_{k}": v for k, v in access_params(a).items()} | {"a_at": as_utc(a.at)}
            ctes.append(
                f"e AS (INSERT INTO {s}.memory_access (tenant_id, id, at, kind, query, user_id, project_id, session_id, agent_id, actor) "
                "VALUES (%(a_tenant_id)s, %(a_id)s, "
                "%(a_at)s, %(a_kind)s, %(a_query)s, %(a_user_id)s, %(a_project_id)s, %(a_session_id)s, "
                "%(a_agent_id)s, %(a_actor)s) ON CONFLICT DO NOTHING)"
            )
            served = served_params(a)
            if served:
                params |= {
                    "h_items": [r["item_id"] for r in served],
                    "h_ranks": [r["rank"] for r in served],
                    "h_scores": [r["score"] for r in served],
                    "h_sims": [r["similarity"] for r in served],
                    "h_rels": [r["relevance"] for r in served],
                }
                ctes.append(
                    f"h AS (INSERT INTO {s}.memory_access_items (tenant_id, access_id, rank, item_id, at, "
                    "score, similarity, relevance) SELECT %(a_tenant_id)s, %(a_id)s, u.rank, u.item_id, "
                    "%(a_at)s, u.score, u.similarity, u.relevance FROM unnest(%(h_items)s::text[], "
                    "%(h_ranks)s::int[], %(h_scores)s::float8[], %(h_sims)s::float8[], %(h_rels)s::float8[]) "
                    "AS u(item_id, rank, score, similarity, relevance) ON CONFLICT DO NOTHING)"
                )
        if change is None or not change.ids:
            if ctes:
                yield _Query(f"WITH {', '.join(ctes)} SELECT 1", params, deferred=True)
            return
        # One statement: the columns are the truth for these two fields (the document's
        # copies are overlaid on reading, see _read_item), so the document is not rewritten
        # and a search's usage write is one round trip (pipelined, see _USAGE_BEGIN).
        # Rows are locked in pk order, so concurrent touches cannot deadlock; an id listed
        # twice counts twice, as in SQLite; "+" on the newest row version loses no count.
        ctes += [
            "n AS (SELECT id, count(*) AS n FROM unnest(%(ids)s::text[]) AS u(id) GROUP BY id)",
            f"l AS (SELECT i.pk, n.n FROM {s}.items i JOIN n ON n.id = i.id "
            "WHERE i.tenant_id = %(tenant)s ORDER BY i.pk FOR UPDATE OF i)",
        ]
        yield _Query(
            f"WITH {', '.join(ctes)} "
            f"UPDATE {s}.items i SET last_used_at = %(at)s, access_count = i.access_count + l.n "
            "FROM l WHERE i.tenant_id = %(tenant)s AND i.pk = l.pk",
            params | {"tenant": change.tenant_id, "ids": list(change.ids), "at": as_utc(change.at)},
            deferred=True,
        )

    def _forget_accesses(self, change: ForgetAccesses) -> _Query:
        s = self._s
        who = []
        if change.user_id is not None:
            who.append("user_id = %(user)s")
        if change.before is not None:
            who.append("at < %(before)s")
        return _Query(
            f"WITH gone AS (DELETE FROM {s}.memory_access WHERE tenant_id = %(tenant)s "
            f"AND ({' OR '.join(who)}) RETURNING id) DELETE FROM {s}.memory_access_items h "
            "USING gone WHERE h.tenant_id = %(tenant)s AND h.access_id = gone.id",
            {
                "tenant": change.tenant_id,
                "user": change.user_id,
                "before": None if change.before is None else as_utc(change.before),
            },
        )

    def _list_accesses(self, op: ListAccesses) -> Callable[[], Plan[AccessPage]]:
        s = self._s
        conditions, params = access_conditions(op, lambda name: f"%({name})s", lambda t: t)
        if op.item_id is not None:
            conditions.append(
                f"a.id IN (SELECT access_id FROM {s}.memory_access_items WHERE tenant_id = %(tenant)s "
                "AND item_id = %(item)s)"
            )
            params["item"] = op.item_id
        where = "".join(f" AND {c}" for c in conditions)
        limit = max(1, op.limit)
        params["limit"] = limit + 1
        # One statement (so one snapshot): each access with its served rows as JSON.
        query = _Query(
            f"SELECT {', '.join('a.' + c for c in ACCESS_COLUMNS.split(', '))}, "
            "(SELECT coalesce(json_agg(json_build_array(h.access_id, h.rank, h.item_id, h.score, "
            f"h.similarity, h.relevance)), '[]') FROM {s}.memory_access_items h "
            "WHERE h.tenant_id = a.tenant_id AND h.access_id = a.id)::text "
            f"FROM {s}.memory_access a WHERE a.tenant_id = %(tenant)s{where} "
            "ORDER BY a.at DESC, a.id DESC LIMIT %(limit)s",
            params,
        )

        def convert(rows: Rows) -> AccessPage:
            more = len(rows) > limit
            rows = rows[:limit]
            cursor = encode_cursor(cast(str, ts(rows[-1][2])), rows[-1][1]) if more and rows else None
            return AccessPage([access_of(r[:10], json.loads(r[10])) for r in rows], cursor)

        return lambda: _single(query, convert)

    def _record(self, e: HistoryEvent) -> _Query:
        return _Query(
            f"INSERT INTO {self._s}.history (item_id, tenant_id, action, at, version, reason, actor, before, after) "
            "VALUES (%(item_id)s, %(tenant)s, %(action)s, %(at)s, %(version)s, %(reason)s, %(actor)s, "
            "%(before)s::json, %(after)s::json)",
            {
                "item_id": e.item_id,
                "tenant": e.tenant_id,
                "action": e.action.value,
                "at": as_utc(e.at),
                "version": e.version,
                "reason": e.reason,
                "actor": e.actor,
                "before": _json(e.before),
                "after": _json(e.after),
            },
        )

    # ------------------------------------------------------------ bulk copy

    def _dump_rows(self, op: DumpRows) -> Callable[[], Plan[RowPage]]:
        page = DumpPage.of(op, _DUMP_KEYS)
        order, params = page.order(lambda name: f"%({name})s")
        query = _Query(_DUMP_SQL[page.kind].format(s=self._s) + order, params)
        table = ACCESS_TABLES[0] if page.kind == "retrievals" else page.kind
        count = _Query(f"SELECT count(*) FROM {self._s}.{table}") if op.after is None else None

        def plan() -> Plan[RowPage]:
            rows = yield query
            total = None
            if count is not None:
                total = int((yield count)[0][0])
            out = [_dump_row(page.kind, r) for r in rows]
            return RowPage(rows=out, next_after=page.next_after(rows, out), total=total)

        return plan

    def _load_rows(self, change: LoadRows, stats: _Tally) -> Generator[_Query, Rows, None]:
        kind = check_row_kind(change.kind)
        if not change.rows:
            return
        try:
            if kind == "items":
                for row in change.rows:
                    yield from self._load_item(row, stats)
                return
            if kind == "retrievals":
                for row in change.rows:
                    yield from self._load_access(loaded_access(row))
                return
            batch = [self._load_params(kind, r) for r in change.rows]
        except KeyError as exc:
            raise InvalidInput(f"a dumped {kind} row lacks {exc.args[0]!r}", field=str(exc.args[0])) from None
        yield _Query(_LOAD_SQL[kind].format(s=self._s), batch=batch)
        if kind == "history":
            # Later appends continue after the highest loaded seq.
            yield _Query(
                f"SELECT setval(pg_get_serial_sequence(%(table)s, 'seq'), "
                f"(SELECT coalesce(max(seq), 0) + 1 FROM {self._s}.history), false)",
                {"table": f"{self._s}.history"},
            )

    def _load_access(self, access: MemoryAccess) -> Generator[_Query, Rows, None]:
        """A dumped access as it was (an id already logged is refused, as for other kinds)."""
        s = self._s
        params = access_params(access) | {"at": as_utc(access.at)}
        yield _Query(
            f"INSERT INTO {s}.memory_access (tenant_id, id, at, kind, query, user_id, project_id, session_id, agent_id, actor) "
            "VALUES (%(tenant_id)s, %(id)s, %(at)s, "
            "%(kind)s, %(query)s, %(user_id)s, %(project_id)s, %(session_id)s, %(agent_id)s, %(actor)s)",
            params,
        )
        served = [r | {"at": params["at"]} for r in served_params(access)]
        if served:
            yield _Query(
                f"INSERT INTO {s}.memory_access_items (tenant_id, access_id, rank, item_id, at, score, "
                "similarity, relevance) VALUES (%(tenant_id)s, %(access_id)s, %(rank)s, %(item_id)s, %(at)s, "
                "%(score)s, %(similarity)s, %(relevance)s)",
                batch=served,
            )

    def _load_params(self, kind: str, r: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters of :data:`_LOAD_SQL` for one dumped row of ``kind`` (not items)."""
        match kind:
            case "history":
                return {
                    "seq": int(r["seq"]),
                    "item_id": r["item_id"],
                    "tenant": r["tenant_id"],
                    "action": r["action"],
                    "at": dumped_time(r["at"]),
                    "version": int(r["version"]),
                    "reason": r["reason"],
                    "actor": r["actor"],
                    "before": r["before"],
                    "after": r["after"],
                }
            case "messages":
                m = load_stored(Message, r["doc"])
                return {
                    "tenant": m.tenant_id,
                    "session": m.session_id,
                    "seq": int(r["seq"]),
                    "id": m.id,
                    "role": m.role,
                    "at": m.created_at,
                    "doc": r["doc"],
                }
            case "checkpoints":
                c = load_stored(Checkpoint, r["doc"])
                return {
                    "tenant": c.tenant_id,
                    "session": c.session_id,
                    "id": c.id,
                    "at": c.created_at,
                    "doc": r["doc"],
                }
            case "jobs":
                return _job_row(Job.model_validate_json(r["doc"]), r["doc"])
            case "embedding_cache":
                vec = self._vector_param(vector_from_text(r["vec"]), "a cached vector")
                return {"model": r["model"], "hash": r["text_hash"], "vec": vec}
        return {"key": r["key"], "at": dumped_time(r["at"])}

    def _load_item(self, row: Mapping[str, Any], stats: _Tally) -> Generator[_Query, Rows, None]:
        doc = row["doc"]
        item = load_item(doc)
        values = _item_params(item, fold_terms(str(row["terms"])))
        values["doc"] = doc
        vectors = []
        for v in row.get("vectors") or ():
            vec = self._vector_param(vector_from_text(v["vec"]), "the item's vector")
            if vec.shape[0] != int(v["dim"]):
                raise InvalidInput(f"item {item.id!r}: vector has {vec.shape[0]} numbers, not {v['dim']}")
            vectors.append((str(v["model"]), vec))
        rows = yield _Query(
            f"INSERT INTO {self._s}.items ({', '.join(_ITEM_COLUMNS)}) VALUES ({_ITEM_VALUES}) "
            f"ON CONFLICT (tenant_id, id) DO NOTHING RETURNING pk, {_LEXEMES}",
            values,
        )
        if not rows:
            raise InvalidInput(f"cannot load item {item.id!r}: that id is already taken", field="id")
        pk = rows[0][0]
        stats.item(item.tenant_id, item.scope_key, 1, values["n_terms"], rows[0][1])
        for model, vec in vectors:
            yield _Query(
                _VECTOR_UPSERT.format(s=self._s),
                {
                    "tenant": item.tenant_id,
                    "pk": pk,
                    "scope": item.scope_key,
                    "occurred": item.occurred_at,
                    "model": model,
                    "dim": int(vec.shape[0]),
                    "vec": vec,
                },
            )
