"""The retrieval log (seed 002's context graph): which memories served which query, for
whom, by whom, when, with their scores.

Writing: :func:`record_access` is called by :func:`jiyi.read.search.search` and
:func:`jiyi.read.context.context` once the final hits are known. It writes one
:class:`~jiyi.store.base.MemoryAccess` (the query, redacted as every stored text is, with
one :class:`~jiyi.store.base.Retrieved` per served memory) in the same write as the
:class:`~jiyi.store.base.Touch` of the served memories, so both land or neither does, and
it never fails the search that called it: a failure is logged (``jiyi.retrievals``) and
the hits are returned all the same.

How it relates to access-based decay (:mod:`jiyi.lifecycle.maintain`): the decay score
reads an item's ``last_used_at`` and ``access_count``. Those two are the log's summary,
kept on the item by the same transaction that appends to the log: ``last_used_at`` is
the time of the item's latest access and ``access_count`` the number of accesses that
served it. They stay when retention drops old log rows, so pruning the log never makes
a memory look less used than it was.

Reading: :func:`retrievals` pages through the log (newest first) and :func:`why_retrieved`
answers "why was this memory retrieved": the queries that served it, with its rank and
scores in each. A ``viewer`` sees an access only when it may read the project it was made
for, and sees only the served memories it may see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput, StoreReadOnly
from jiyi.items import require
from jiyi.model import as_utc, new_id
from jiyi.runtime import Runtime
from jiyi.store.base import (
    ACCESS_KINDS,
    AccessKind,
    AccessPage,
    GetItems,
    ListAccesses,
    MemoryAccess,
    RecordAccess,
    Retrieved,
    Touch,
    Viewer,
    Write,
)
from jiyi.validate import check_limit, check_text
from jiyi.write.gate import scrub

log = logging.getLogger("jiyi.retrievals")


def check_kind(kind: str) -> AccessKind:
    if kind not in ACCESS_KINDS:
        raise InvalidInput(f"log_as must be one of {', '.join(ACCESS_KINDS)}, got {kind!r}", field="log_as")
    return kind


def record_access(
    rt: Runtime,
    tenant_id: str,
    kind: AccessKind,
    query: str,
    served: Sequence[Retrieved],
    at: datetime,
    *,
    owner: dict[str, str | None],
    actor: str | None = None,
) -> Flow[None]:
    """Append one access to the log and count the use of every served memory, in one
    write. Never raises: on a read-only store nothing is kept, and any other failure is
    logged and swallowed (a search must not fail because its log could not be written)."""
    access = MemoryAccess(
        id=_access_id(at),
        tenant_id=tenant_id,
        at=at,
        kind=kind,
        query=scrub(rt.gate, tenant_id, query),
        retrieved=tuple(served),
        user_id=owner.get("user_id"),
        project_id=owner.get("project_id"),
        session_id=owner.get("session_id"),
        agent_id=owner.get("agent_id"),
        actor=actor,
    )
    ids = tuple(r.item_id for r in served)
    changes = (Touch(tenant_id, ids, at), RecordAccess(access)) if ids else (RecordAccess(access),)
    try:
        yield from call(Write(changes))
    except StoreReadOnly:
        pass  # searching a read-only store works; its usage is just not kept
    except Exception:
        log.warning("the retrieval log could not be written; the search goes on", exc_info=True)


def _access_id(at: datetime) -> str:
    """A new access id that sorts by time: the log's keys grow at their end, which keeps
    each search's insert cheap (random ids scatter it over the whole index)."""
    micros = int(as_utc(at).timestamp() * 1_000_000)
    return f"{max(micros, 0):014x}{new_id()[:18]}"


def retrievals(
    rt: Runtime,
    /,
    *,
    item_id: str | None = None,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[AccessPage]:
    """The retrieval log, newest first, ``limit`` accesses at a time; pass
    ``page.next_cursor`` to go on. Each access holds its query (redacted), when, what
    kind of call (``search``, ``context`` or ``tool``), whose memory was searched, who
    asked (``actor``) and every memory it served with rank, score, similarity and
    relevance. Filters: ``item_id`` (accesses that served it), the owner ids, ``since``
    (inclusive) and ``until`` (exclusive). ``viewer`` sees the accesses made for projects
    it may read, and in them only the memories it may see; an ``item_id`` it may not see
    is :class:`~jiyi.errors.NotFound`."""
    check_limit(limit)
    owner = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
    for name, value in owner.items():
        if value is not None:
            check_text(value, name)
    tenant = rt.tenant(tenant_id)
    if item_id is not None:
        yield from require(rt, item_id, tenant, viewer)
    op = ListAccesses(
        tenant,
        item_id=item_id,
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        since=None if since is None else as_utc(since),
        until=None if until is None else as_utc(until),
        limit=limit,
        cursor=cursor,
    )
    page = yield from call(op)
    if viewer is None or viewer.sees_all:
        return page
    return AccessPage((yield from _visible(tenant, page.accesses, viewer)), page.next_cursor)


def _visible(tenant: str, accesses: list[MemoryAccess], viewer: Viewer) -> Flow[list[MemoryAccess]]:
    """``accesses`` as ``viewer`` may see them: those made for a project it is not a member
    of are left out, and in the others the memories it may not see (or that are gone)."""
    shown = [a for a in accesses if a.project_id is None or viewer.member_of(a.project_id)]
    ids = tuple(dict.fromkeys(r.item_id for a in shown for r in a.retrieved))
    items = (yield from call(GetItems(tenant, ids))) if ids else []
    seen = {i.id for i in items if viewer.sees(i)}
    return [
        MemoryAccess(
            id=a.id,
            tenant_id=a.tenant_id,
            at=a.at,
            kind=a.kind,
            query=a.query,
            retrieved=tuple(r for r in a.retrieved if r.item_id in seen),
            user_id=a.user_id,
            project_id=a.project_id,
            session_id=a.session_id,
            agent_id=a.agent_id,
            actor=a.actor,
        )
        for a in shown
    ]


@dataclass(frozen=True)
class ServedFor:
    """One query that served a memory, with the memory's rank and scores in its answer."""

    access_id: str
    at: datetime
    kind: AccessKind
    query: str
    rank: int
    score: float
    similarity: float | None
    relevance: float | None
    user_id: str | None
    project_id: str | None
    session_id: str | None
    agent_id: str | None
    actor: str | None


@dataclass(frozen=True)
class WhyRetrieved:
    """Why a memory was retrieved: the queries that served it (newest first, a page at a
    time), beside the usage summary decay reads (``access_count``, ``last_used_at``)."""

    item_id: str
    access_count: int
    last_used_at: datetime | None
    served: list[ServedFor]
    next_cursor: str | None


def why_retrieved(
    rt: Runtime,
    /,
    item_id: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[WhyRetrieved]:
    """ "Why was this memory retrieved?": every logged query that served ``item_id``, newest
    first, with the memory's rank, score, similarity and relevance in that answer.
    :class:`~jiyi.errors.NotFound` for a memory the tenant (or ``viewer``) does not have."""
    item = yield from require(rt, item_id, rt.tenant(tenant_id), viewer)
    page = yield from retrievals(
        rt,
        item_id=item.id,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        tenant_id=item.tenant_id,
        viewer=viewer,
    )
    served = [
        ServedFor(
            access_id=a.id,
            at=a.at,
            kind=a.kind,
            query=a.query,
            rank=r.rank,
            score=r.score,
            similarity=r.similarity,
            relevance=r.relevance,
            user_id=a.user_id,
            project_id=a.project_id,
            session_id=a.session_id,
            agent_id=a.agent_id,
            actor=a.actor,
        )
        for a in page.accesses
        for r in a.retrieved
        if r.item_id == item.id
    ]
    return WhyRetrieved(item.id, item.access_count, item.last_used_at, served, page.next_cursor)
