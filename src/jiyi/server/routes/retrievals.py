"""The retrieval log: which memories served which query, and why one memory was retrieved.
A key sees the accesses made for projects it may read, and in them only the memories it
may see (:func:`jiyi.read.retrievals.retrievals`)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from jiyi.server.deps import READ, ItemId, Mine, Reader, ScopeQuery
from jiyi.server.schemas import (
    MemoryAccessOut,
    RetrievalsResponse,
    RetrievedOut,
    ServedForOut,
    WhyRetrievedResponse,
)
from jiyi.store.base import MemoryAccess

router = APIRouter(tags=["retrievals"])

Limit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[str | None, Query(max_length=2000, description="next_cursor of the page before")]
Since = Annotated[datetime | None, Query(description="From this time on (inclusive).")]
Until = Annotated[datetime | None, Query(description="Before this time (exclusive).")]


def access_out(a: MemoryAccess) -> MemoryAccessOut:
    return MemoryAccessOut(
        id=a.id,
        at=a.at,
        kind=a.kind,
        query=a.query,
        user_id=a.user_id,
        project_id=a.project_id,
        session_id=a.session_id,
        agent_id=a.agent_id,
        actor=a.actor,
        retrieved=[RetrievedOut(**asdict(r)) for r in a.retrieved],
    )


@router.get("/v1/retrievals", summary="The retrieval log, newest first, a page at a time", responses=READ)
async def list_retrievals(
    who: Reader,
    memory: Mine,
    item_id: ScopeQuery = None,
    user_id: ScopeQuery = None,
    project_id: ScopeQuery = None,
    session_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> RetrievalsResponse:
    page = await memory.retrievals(
        item_id=item_id,
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return RetrievalsResponse(accesses=[access_out(a) for a in page.accesses], next_cursor=page.next_cursor)


@router.get(
    "/v1/memories/{item_id}/retrievals",
    summary="Why a memory was retrieved: the queries that served it",
    responses=READ,
)
async def why_retrieved(
    item_id: ItemId,
    who: Reader,
    memory: Mine,
    since: Since = None,
    until: Until = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> WhyRetrievedResponse:
    why = await memory.why_retrieved(item_id, since=since, until=until, limit=limit, cursor=cursor)
    return WhyRetrievedResponse(
        item_id=why.item_id,
        access_count=why.access_count,
        last_used_at=why.last_used_at,
        served=[ServedForOut(**asdict(s)) for s in why.served],
        next_cursor=why.next_cursor,
    )
