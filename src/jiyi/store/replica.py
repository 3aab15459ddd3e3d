"""Reads from a PostgreSQL read replica, writes to the primary.

:class:`ReplicaStore` holds two stores of one schema: the primary (every write, and every
read that a write decides from) and a read replica, e.g. a streaming hot standby of the
primary, which answers searches, lists and gets. Opened by
``open_store(url, read_url=...)``, ``Memory.open(url, read_url=...)`` or the CLI's
``--read-db`` / ``JIYI_READ_DB``. PostgreSQL only: a SQLite file has no replicas.

Read your writes. A replica lags the primary (by milliseconds, or by more under load), so
a tenant's reads go to the primary from the moment this process starts a write for it
until ``read_your_writes`` seconds (default 5) after its last write ends:

* a write decision (the write pipeline reads its scope's :class:`~jiyi.store.base.ScopeClock`,
  then the nearest items, then writes) reads the primary: the clock read opens the window
  for at least :data:`DECISION_SECONDS`, so deduplication and reconciliation never decide
  from a stale copy;
* an ``add`` followed by a ``search``, ``get`` or ``list`` of the same tenant in this
  process sees the add.

Per tenant, so one busy tenant does not move every tenant's reads to the primary. Usage
counters (:class:`~jiyi.store.base.Touch`, written by every search) open no window: a
stale ``access_count`` on the replica harms nothing, and neither do the embedding cache and
rate events (global tables the primary answers). A store copy opens it for every tenant. Across processes nothing is shared: a client that writes
through one server and at once reads through another may read the replica before the
write reaches it (pin such clients to one server, or give that server no replica).

With Redis (``redis=``), the Redis cache sits in front of the primary only
(:func:`~jiyi.store.open.open_store` builds it so): what the replica answers is never cached
in Redis, so a lagging replica cannot leave a stale copy there for every process.

Reads that must see the newest state always go to the primary: the scope clock, rate
counts, the job queue (claims and listings), store dumps. Everything not listed in
:data:`REPLICA_READS` goes to the primary.

A replica that does not answer when opened is refused (:class:`~jiyi.errors.StoreUnavailable`
naming its host), as is one whose schema version differs from the primary's. Once running,
a read the replica fails to answer (no connection within
:data:`~jiyi.store.open.REPLICA_TIMEOUT`, 2 s, or a connection lost) is answered by the
primary, and the replica is left alone for ``retry_seconds`` (default 10; a warning on
``jiyi.replica`` says so, and another when it answers again): reads keep working, at the
primary's cost, and at most one read per ``retry_seconds`` waits for a dead replica.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, TypeVar

from jiyi.errors import ConfigError, StoreUnavailable
from jiyi.store.base import (
    AppendMessages,
    CachePut,
    ClearRows,
    DeleteCheckpoints,
    DeleteMessages,
    GetCheckpoint,
    GetHistory,
    GetItems,
    GetMessages,
    GetStats,
    Guard,
    KeywordHits,
    ListCheckpoints,
    ListItems,
    LoadHits,
    LoadRows,
    Op,
    Purge,
    PutCheckpoint,
    PutJob,
    RecordEvent,
    Retrieve,
    ScopeClock,
    SetVectors,
    Store,
    ThreadLinks,
    Touch,
    Upsert,
    VectorHits,
    VectorsFor,
    Write,
)

R = TypeVar("R")
log = logging.getLogger("jiyi.replica")

REPLICA_READS: tuple[type, ...] = (
    GetItems,
    ListItems,
    Retrieve,
    VectorHits,
    KeywordHits,
    ThreadLinks,
    LoadHits,
    GetHistory,
    GetStats,
    VectorsFor,
    GetMessages,
    GetCheckpoint,
    ListCheckpoints,
)
"""Reads the replica may answer: each names one tenant (``filter.tenant_id`` or ``tenant_id``)."""

DECISION_SECONDS = 10.0
"""The default of ``ReplicaStore.decision_seconds``: how long a tenant's reads stay on the
primary after a write decision reads its scope clock (the decision reads the nearest items
right after; a model, if asked, comes later)."""
_ALL = "\x00every tenant"  # the window key of a write that names no tenant


def _read_tenant(op: Op[Any]) -> str:
    flt = getattr(op, "filter", None)
    return str(flt.tenant_id if flt is not None else op.tenant_id)  # type: ignore[attr-defined]


def _written_tenants(op: Write) -> set[str]:
    """The tenants whose replica reads a write makes stale; ``_ALL`` for a store copy.

    Usage counters (Touch) and the global tables (the embedding cache, rate events: read
    from the primary only) make none stale."""
    tenants: set[str] = set()
    for change in op.changes:
        match change:
            case Touch() | CachePut() | RecordEvent():
                continue
            case Upsert():
                tenants.add(change.item.tenant_id)
            case Purge() | Guard() | DeleteMessages() | DeleteCheckpoints() | SetVectors():
                tenants.add(change.tenant_id)
            case AppendMessages():
                tenants.update(m.tenant_id for m in change.messages)
            case PutCheckpoint():
                tenants.add(change.checkpoint.tenant_id)
            case PutJob():
                tenants.add(change.job.tenant_id)
            case LoadRows() | ClearRows():
                tenants.add(_ALL)
    return tenants


class ReplicaStore(Store):
    """``primary`` for writes and fresh reads, ``replica`` for the reads of
    :data:`REPLICA_READS` outside a tenant's read-your-writes window. Closes both."""

    def __init__(
        self,
        primary: Store,
        replica: Store,
        *,
        read_your_writes: float = 5.0,
        retry_seconds: float = 10.0,
        decision_seconds: float = DECISION_SECONDS,
    ) -> None:
        if min(read_your_writes, retry_seconds, decision_seconds) < 0:
            raise ConfigError("read_your_writes, retry_seconds and decision_seconds must be >= 0")
        self.primary = primary
        self.replica = replica
        self.read_your_writes = float(read_your_writes)
        self.retry_seconds = float(retry_seconds)
        self.decision_seconds = float(decision_seconds)
        self.replica_reads = 0
        """Reads the replica answered (for tests and metrics)."""
        self.primary_reads = 0
        """Reads of :data:`REPLICA_READS` that went to the primary (window, or replica down)."""
        self._lock = threading.Lock()
        self._fresh_until: dict[str, float] = {}
        self._down_until = 0.0

    def __repr__(self) -> str:
        return f"ReplicaStore({self.primary!r}, replica={self.replica!r})"

    def __getattr__(self, name: str) -> Any:
        # Backend extras (migrate, explain, schema ...) are the primary's.
        if name in ("primary", "replica"):
            raise AttributeError(name)
        return getattr(self.primary, name)

    # ------------------------------------------------------------ routing

    def _open_window(self, tenants: set[str], seconds: float) -> None:
        """Read these tenants from the primary for at least ``seconds`` from now."""
        until = time.monotonic() + seconds
        with self._lock:
            for tenant in tenants:
                self._fresh_until[tenant] = max(until, self._fresh_until.get(tenant, 0.0))
            if len(self._fresh_until) > 10_000:  # forget closed windows
                now = time.monotonic()
                self._fresh_until = {t: u for t, u in self._fresh_until.items() if u > now}

    def _use_replica(self, op: Op[Any]) -> bool:
        if isinstance(op, ScopeClock):
            # A write decision starts: its reads of the nearest items follow at once.
            self._open_window({op.tenant_id}, max(self.read_your_writes, self.decision_seconds))
            return False
        if not isinstance(op, REPLICA_READS):
            return False
        now = time.monotonic()
        with self._lock:
            fresh = max(self._fresh_until.get(_read_tenant(op), 0.0), self._fresh_until.get(_ALL, 0.0))
            use = now >= fresh and now >= self._down_until
        if not use:
            self.primary_reads += 1
        return use

    def _replica_failed(self, exc: StoreUnavailable) -> None:
        with self._lock:
            first = self._down_until == 0.0
            self._down_until = time.monotonic() + self.retry_seconds
        if first:
            log.warning("read replica failed (%s); reading from the primary", exc)

    def _replica_answered(self) -> None:
        self.replica_reads += 1
        if self._down_until:
            with self._lock:
                if self._down_until:
                    self._down_until = 0.0
                    log.warning("read replica answers again; reads go to it")

    def _before_write(self, op: Op[Any]) -> None:
        if isinstance(op, Write):
            self._open_window(_written_tenants(op), self.read_your_writes)

    # ------------------------------------------------------------ drivers

    def execute(self, op: Op[R]) -> R:
        if self._use_replica(op):
            try:
                result = self.replica.execute(op)
            except StoreUnavailable as exc:
                self._replica_failed(exc)
            else:
                self._replica_answered()
                return result
            self.primary_reads += 1
        self._before_write(op)
        try:
            return self.primary.execute(op)
        finally:
            self._before_write(op)  # the window runs from the end of the write

    async def aexecute(self, op: Op[R]) -> R:
        if self._use_replica(op):
            try:
                result = await self.replica.aexecute(op)
            except StoreUnavailable as exc:
                self._replica_failed(exc)
            else:
                self._replica_answered()
                return result
            self.primary_reads += 1
        self._before_write(op)
        try:
            return await self.primary.aexecute(op)
        finally:
            self._before_write(op)

    def close(self) -> None:
        try:
            self.replica.close()
        finally:
            self.primary.close()
