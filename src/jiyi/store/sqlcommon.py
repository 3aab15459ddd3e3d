"""Helpers shared by the SQL backends: time format, cursors, scope tokens, vector blobs,
the viewer condition, item documents, rows of the retrieval log, and the paging of
:class:`~jiyi.store.base.DumpRows`."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, as_utc, load_stored, stored_snapshot
from jiyi.session.model import Job
from jiyi.store.base import (
    DumpRows,
    HistoryEvent,
    ListAccesses,
    MemoryAccess,
    Retrieved,
    Vector,
    Viewer,
    check_row_kind,
    detached,
)

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def ts(value: datetime | None) -> str | None:
    """Fixed-width UTC text, so string order is time order."""
    if value is None:
        return None
    v = as_utc(value)
    # strftime("%Y") does not zero-pad years below 1000 on Linux, which would break ordering.
    return f"{v.year:04d}-{v:%m-%dT%H:%M:%S.%f}Z"


def viewer_clause(viewer: Viewer, a: str, in_projects: str, actor: str) -> str | None:
    """:meth:`Viewer.sees` as a condition over alias ``a`` (None: the viewer sees all).

    Other scopes and public items pass; ``members`` items need a membership, written by
    the backend as ``in_projects`` (``project_id`` among the viewer's projects, bound
    by the caller when ``viewer.projects`` is non-empty); ``owner_only`` items need their
    creator, the placeholder ``actor`` (bound when ``viewer.actor`` is set). Placeholders
    appear in that order."""
    if viewer.sees_all:
        return None
    seen = [f"{a}.scope <> 'project'", f"{a}.visibility = 'public'"]
    if viewer.projects is None:
        seen.append(f"{a}.visibility = 'members'")
    elif viewer.projects:
        seen.append(f"({a}.visibility = 'members' AND {in_projects})")
    if viewer.actor is not None:
        seen.append(f"({a}.visibility = 'owner_only' AND {a}.created_by = {actor})")
    return f"({' OR '.join(seen)})"


def encode_cursor(created_at: str, item_id: str) -> str:
    raw = json.dumps([created_at, item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not (isinstance(data, list) and len(data) == 2 and all(isinstance(x, str) for x in data)):
            raise ValueError
        created_at, item_id = data
        datetime.strptime(created_at[-27:], _TIME_FORMAT)  # must be a time this module wrote
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cursor {cursor[:40]!r} is not one this store issued", field="cursor") from exc
    return created_at, item_id


def _token(prefix: str, *parts: str) -> str:
    # A hash keeps arbitrary ids (spaces, colons, CJK) out of the keyword tokenizer's way.
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=10).hexdigest()
    return f"{prefix}{digest}"


def scope_token(tenant_id: str, scope_key: str) -> str:
    return _token("s", tenant_id, scope_key)


def tenant_token(tenant_id: str) -> str:
    return _token("t", tenant_id)


def to_blob(vector: Vector) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype=np.float32)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pending(migrations: Sequence[tuple[str, Any]], applied: Iterable[int]) -> list[tuple[int, str]]:
    """The (version, name) of the migrations not yet ``applied`` (versions count from 1)."""
    done = set(applied)
    return [(v, name) for v, (name, _) in enumerate(migrations, start=1) if v not in done]


def history_event(row: Sequence[Any], at: datetime | str) -> HistoryEvent:
    """A history row (``seq, item_id, tenant_id, action, at, version, reason, actor,
    before, after``, the snapshots as JSON text) as an event at ``at`` (its time, read)."""
    seq, item_id, tenant_id, action, _, version, reason, actor, before, after = row
    return HistoryEvent.model_validate(
        {
            "seq": seq,
            "item_id": item_id,
            "tenant_id": tenant_id,
            "action": action,
            "at": at,
            "version": version,
            "reason": reason,
            "actor": actor,
            "before": stored_snapshot(before),
            "after": stored_snapshot(after),
        }
    )


def claimed_job(job: Job, worker: str, until: datetime, now: datetime) -> Job:
    """``job`` as :class:`~jiyi.store.base.ClaimJobs` hands it out: running, leased to
    ``worker`` until ``until``, one attempt more."""
    return job.model_copy(
        update={
            "status": "running",
            "attempts": job.attempts + 1,
            "locked_by": worker,
            "locked_until": until,
            "updated_at": now,
        }
    )


def load_item(doc: str) -> MemoryItem:
    """An item from its stored JSON document (readable even when it breaks today's limits:
    see :func:`jiyi.model.load_stored`)."""
    return load_stored(MemoryItem, doc)


def with_usage(item: MemoryItem, access_count: int, last_used_at: str | None) -> MemoryItem:
    """``item``, read from its document, with SQLite's usage columns (``last_used_at`` as
    :func:`ts` text) laid over the document's copies. A search's touch updates only the
    columns, as PostgreSQL's does; every other write rewrites the document with them."""
    if item.access_count == access_count and ts(item.last_used_at) == last_used_at:
        return item
    used = None if last_used_at is None else as_utc(datetime.fromisoformat(last_used_at))
    return item.model_copy(update={"access_count": int(access_count), "last_used_at": used})


def read_item(doc: str, access_count: int, last_used_at: str | None) -> MemoryItem:
    """A stored item: its document with the usage columns laid over it (:func:`with_usage`)."""
    return with_usage(load_item(doc), access_count, last_used_at)


class ItemCache:
    """Items parsed from their stored JSON documents, keyed by the document itself (least
    recently used out first).

    A search loads every candidate (a LoCoMo-sized scope: ~130 per search), and parsing and
    validating a document is most of what the store spends on it, though the same items
    come back search after search. Keyed by the whole document, a changed row simply
    misses. :meth:`load` hands out a :func:`~jiyi.store.base.detached` copy, which a caller
    may change; :meth:`shared` the cached value itself, for a reader that only reads (a
    search's candidates: it copies the few it returns). Not thread-safe: keep one per thread.
    """

    def __init__(self, size: int = 2048) -> None:
        self._data: OrderedDict[str, MemoryItem] = OrderedDict()
        self._size = size
        # Each item's latest document here: a changed row replaces its older document
        # instead of leaving it to age out, so the cache holds about one entry per item.
        self._doc_of: dict[str, str] = {}

    def shared(self, doc: str) -> MemoryItem:
        item = self._data.get(doc)
        if item is None:
            item = self._data[doc] = load_item(doc)
            older = self._doc_of.get(item.id)
            self._doc_of[item.id] = doc
            if older is not None and older != doc:
                self._data.pop(older, None)
            if len(self._data) > self._size:
                gone, out = self._data.popitem(last=False)
                if self._doc_of.get(out.id) == gone:
                    del self._doc_of[out.id]
        else:
            self._data.move_to_end(doc)
        return item

    def load(self, doc: str) -> MemoryItem:
        return detached(self.shared(doc))


def thread_items(local: threading.local) -> ItemCache:
    """This thread's parsed items (an :class:`ItemCache` is kept per thread)."""
    items: ItemCache | None = getattr(local, "items", None)
    if items is None:
        items = local.items = ItemCache()
    return items


def dumped_time(value: Any) -> datetime | None:
    """A time of a dumped row (text in either backend's spelling), in UTC."""
    if value is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(value)))
    except ValueError:
        raise InvalidInput(f"{value!r} is not a time", field="at") from None


# ---------------------------------------------------------------- the retrieval log

ACCESS_COLUMNS = "tenant_id, id, at, kind, query, user_id, project_id, session_id, agent_id, actor"
"""The columns of ``memory_access`` in the order :func:`access_of` reads them."""
SERVED_COLUMNS = "access_id, rank, item_id, score, similarity, relevance"
"""The columns of ``memory_access_items`` read back, in the order :func:`access_of` reads them."""
OWNER_FIELDS = ("user_id", "project_id", "session_id", "agent_id")


def access_params(access: MemoryAccess) -> dict[str, Any]:
    """An access as named parameters (``at`` as fixed-width UTC text)."""
    return {
        "tenant_id": access.tenant_id,
        "id": access.id,
        "at": ts(access.at),
        "kind": access.kind,
        "query": access.query,
        "user_id": access.user_id,
        "project_id": access.project_id,
        "session_id": access.session_id,
        "agent_id": access.agent_id,
        "actor": access.actor,
    }


def served_params(access: MemoryAccess) -> list[dict[str, Any]]:
    """One parameter set per served memory of ``access``."""
    return [
        {
            "tenant_id": access.tenant_id,
            "access_id": access.id,
            "rank": r.rank,
            "item_id": r.item_id,
            "at": ts(access.at),
            "score": float(r.score),
            "similarity": None if r.similarity is None else float(r.similarity),
            "relevance": None if r.relevance is None else float(r.relevance),
        }
        for r in access.retrieved
    ]


def access_of(row: Sequence[Any], served: Sequence[Sequence[Any]]) -> MemoryAccess:
    """A ``memory_access`` row (:data:`ACCESS_COLUMNS`) with its served rows
    (:data:`SERVED_COLUMNS`, any order)."""
    tenant_id, access_id, at, kind, query, user_id, project_id, session_id, agent_id, actor = row
    retrieved = tuple(
        Retrieved(
            item_id=str(r[2]),
            rank=int(r[1]),
            score=float(r[3]),
            similarity=None if r[4] is None else float(r[4]),
            relevance=None if r[5] is None else float(r[5]),
        )
        for r in sorted(served, key=lambda r: int(r[1]))
    )
    when = at if isinstance(at, datetime) else datetime.fromisoformat(str(at))
    return MemoryAccess(
        id=access_id,
        tenant_id=tenant_id,
        at=as_utc(when),
        kind=kind,
        query=query,
        retrieved=retrieved,
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        actor=actor,
    )


ACCESS_TABLES = ("memory_access", "memory_access_items")
"""The tables of the ``retrievals`` row kind (:class:`~jiyi.store.base.DumpRows`)."""


def dumped_access(access: MemoryAccess) -> dict[str, Any]:
    """A ``retrievals`` row of :class:`~jiyi.store.base.DumpRows`."""
    doc = json.dumps(access.to_json_dict(), ensure_ascii=False)
    return {"tenant_id": access.tenant_id, "id": access.id, "doc": doc}


def loaded_access(row: Mapping[str, Any]) -> MemoryAccess:
    """The access of a dumped ``retrievals`` row."""
    try:
        data = json.loads(row["doc"])
    except (TypeError, ValueError):
        raise InvalidInput("a dumped retrievals row's doc is not JSON", field="doc") from None
    return MemoryAccess.from_json_dict(data)


def access_conditions(
    op: ListAccesses, mark: Callable[[str], str], time: Callable[[datetime], Any]
) -> tuple[list[str], dict[str, Any]]:
    """The conditions of a :class:`ListAccesses` over ``memory_access a`` but the tenant's
    (``a.tenant_id`` = the parameter ``tenant``, written by the caller's SQL) and the
    item's (the caller joins the served rows its own way), with the backend's placeholders
    (``mark(name)``) and their values; times as ``time(utc datetime)`` gives them."""
    where: list[str] = []
    params: dict[str, Any] = {"tenant": op.tenant_id}
    for name in OWNER_FIELDS:
        value = getattr(op, name)
        if value is not None:
            where.append(f"a.{name} = {mark(name)}")
            params[name] = value
    if op.since is not None:
        where.append(f"a.at >= {mark('since')}")
        params["since"] = time(as_utc(op.since))
    if op.until is not None:
        where.append(f"a.at < {mark('until')}")
        params["until"] = time(as_utc(op.until))
    if op.cursor:
        at, access_id = decode_cursor(op.cursor)
        where.append(f"(a.at, a.id) < ({mark('c_at')}, {mark('c_id')})")
        params |= {"c_at": time(as_utc(datetime.fromisoformat(at))), "c_id": access_id}
    return where, params


# ---------------------------------------------------------------- DumpRows pages

DUMP_KEYS: dict[str, tuple[str, ...] | None] = {
    "items": ("pk",),
    "history": ("seq",),
    "messages": ("tenant_id", "session_id", "seq"),
    "checkpoints": ("tenant_id", "session_id", "id"),
    "jobs": ("id",),
    "embedding_cache": ("model", "text_hash"),
    "rate_events": None,
    "retrievals": ("tenant_id", "id"),
}
"""Per row kind, the key columns of its keyset cursor (None: an offset cursor)."""


@dataclass(frozen=True)
class DumpPage:
    """Where one :class:`~jiyi.store.base.DumpRows` page starts and how the next one is
    named, for both SQL backends; only the placeholder spelling differs between them."""

    kind: str
    limit: int
    keys: tuple[str, ...] | None
    after: tuple[Any, ...]
    """The key values to resume after (empty: from the start)."""
    start: int
    """The offset, for a kind without keys."""

    @classmethod
    def of(cls, op: DumpRows, keys_of: Mapping[str, tuple[str, ...] | None] = DUMP_KEYS) -> DumpPage:
        """``keys_of`` overrides :data:`DUMP_KEYS` for a backend whose keys differ."""
        kind = check_row_kind(op.kind)
        keys = keys_of[kind]
        limit = max(1, op.limit)
        if keys is None:
            offset = _dump_cursor(None if op.after is None else f"[{op.after}]", 1)
            return cls(kind, limit, None, (), int(offset[0]) if offset else 0)
        return cls(kind, limit, keys, tuple(_dump_cursor(op.after, len(keys))), 0)

    def order(self, mark: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
        """What follows the kind's ``SELECT``: condition, order and limit, with the backend's
        placeholders (``mark(name)``) and their values, in the order they appear."""
        if self.keys is None:
            return f" ORDER BY key, at LIMIT {mark('limit')} OFFSET {mark('offset')}", {
                "limit": self.limit,
                "offset": self.start,
            }
        cols = ", ".join(("i." if self.kind == "items" else "") + k for k in self.keys)
        params = {f"k{n}": v for n, v in enumerate(self.after)}
        where = f" WHERE ({cols}) > ({', '.join(mark(k) for k in params)})" if params else ""
        return f"{where} ORDER BY {cols} LIMIT {mark('limit')}", {**params, "limit": self.limit}

    def next_after(self, rows: Sequence[Sequence[Any]], out: Sequence[dict[str, Any]]) -> str | None:
        """The cursor of the next page (None after the last): ``rows`` as read, ``out`` as dumped."""
        if len(rows) < self.limit:
            return None
        if self.keys is None:
            return str(self.start + len(rows))
        if self.kind == "items":
            # An items row starts with its pk; keyed by tenant too, it ends with its tenant_id.
            last = rows[-1]
            values = [int(last[0])] if self.keys == ("pk",) else [last[-1], int(last[0])]
        else:
            values = [out[-1][k] for k in self.keys]
        return json.dumps(values, ensure_ascii=False)


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
