"""The memories themselves: add (through the write gate), search, list, read, change,
delete and history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, TypeVar

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, MemoryType, Status, owner_scope
from jiyi.server.deps import (
    READ,
    WRITE,
    ItemId,
    Mine,
    Reader,
    ScopeQuery,
    Telemetry,
    Writer,
    decision_out,
    member_writes,
    owned,
    same_tenant,
)
from jiyi.server.errors import ErrorResponse
from jiyi.server.schemas import (
    AddRequest,
    AddResponse,
    HistoryEventOut,
    PageResponse,
    RefusedDetail,
    RefusedResponse,
    SearchHitOut,
    SearchRequest,
    SearchResponse,
    UpdateRequest,
)

router = APIRouter(tags=["memories"])

# fields an update may set to null (clearing them); for the others null means "unchanged"
_NULLABLE = frozenset({"summary", "structured", "occurred_at", "expires_at"})


@router.post(
    "/v1/memories",
    summary="Add a memory through the write gate",
    status_code=201,
    response_model=AddResponse,
    responses={
        **WRITE,
        422: {"model": RefusedResponse | ErrorResponse, "description": "Refused or invalid"},
    },
)
async def add_memory(
    body: AddRequest, who: Writer, memory: Mine, telemetry: Telemetry
) -> AddResponse | JSONResponse:
    same_tenant(who, body.tenant_id)
    scope = body.scope or owner_scope(body.user_id, body.project_id, body.agent_id, body.session_id)
    member_writes(who, scope, body.project_id)
    result = await memory.bound(owner=body.owner()).add(
        body.content,
        memory_type=body.memory_type,
        scope=body.scope,
        confidence=body.confidence,
        importance=body.importance,
        tags=body.tags,
        metadata={**body.metadata, "created_by": who.key_id},
        source=body.source,
        source_id=body.source_id,
        occurred_at=body.occurred_at,
        expires_at=body.expires_at,
        raw=body.raw,
        summary=body.summary,
        structured=body.structured,
        visibility=body.visibility.value,
    )
    telemetry.gate(result.decision)
    decision = decision_out(result.decision)
    if result.item is None:
        message = "memory refused: " + "; ".join(result.decision.reasons)
        refused = RefusedResponse(error=RefusedDetail(message=message, decision=decision))
        return JSONResponse(refused.model_dump(mode="json"), status_code=422)
    return AddResponse(item=result.item, decision=decision)


@router.post("/v1/memories/search", summary="Search memories", responses=READ)
async def search_memories(
    body: SearchRequest, who: Reader, memory: Mine, telemetry: Telemetry
) -> SearchResponse:
    same_tenant(who, body.tenant_id)
    with telemetry.search_seconds.time():
        hits = await memory.bound(owner=body.owner()).search(
            body.query,
            memory_types=body.memory_types,
            statuses=body.statuses,
            tags=body.tags,
            occurred_after=body.occurred_after,
            occurred_before=body.occurred_before,
            limit=body.limit,
            threshold=body.threshold,
            min_relevance=body.min_relevance,
            include_expired=body.include_expired,
            explain=body.explain,
            as_of=body.as_of,
        )
    return SearchResponse(
        hits=[
            SearchHitOut(
                item=h.item,
                score=h.score,
                similarity=h.similarity,
                relevance=h.relevance,
                breakdown=h.breakdown,
            )
            for h in hits
        ]
    )


@router.get("/v1/memories", summary="List memories, a page at a time", responses=READ)
async def list_memories(
    who: Reader,
    memory: Mine,
    user_id: ScopeQuery = None,
    project_id: ScopeQuery = None,
    session_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    memory_types: Annotated[
        list[MemoryType] | None, Query(description="Repeat for several; `memory_type` says the same.")
    ] = None,
    memory_type: Annotated[list[MemoryType] | None, Query(include_in_schema=False)] = None,
    statuses: Annotated[
        list[Status] | None, Query(description="Default: every status. `status` says the same.")
    ] = None,
    status: Annotated[list[Status] | None, Query(include_in_schema=False)] = None,
    tags: Annotated[
        list[str] | None, Query(description="Every tag must be present. `tag` says the same.")
    ] = None,
    tag: Annotated[list[str] | None, Query(include_in_schema=False)] = None,
    include_expired: bool = True,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=2000, description="next_cursor of the page before")
    ] = None,
    newest_first: bool = False,
    include_turns: Annotated[
        bool, Query(description="Include the raw conversation turns that remembering keeps.")
    ] = False,
) -> PageResponse:
    page = await memory.list(
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        # The library's names, or the singular a query string repeats: one list either way.
        memory_types=_either(memory_types, memory_type),
        statuses=_either(statuses, status),
        tags=_either(tags, tag) or (),
        include_expired=include_expired,
        limit=limit,
        cursor=cursor,
        newest_first=newest_first,
        include_turns=include_turns,
    )
    return PageResponse(items=page.items, next_cursor=page.next_cursor)


@router.get("/v1/memories/{item_id}", summary="One memory", responses=READ)
async def get_memory(item_id: ItemId, who: Reader, memory: Mine) -> MemoryItem:
    return await memory.get(item_id)


@router.patch("/v1/memories/{item_id}", summary="Change a memory", responses=WRITE)
async def update_memory(item_id: ItemId, body: UpdateRequest, who: Writer, memory: Mine) -> MemoryItem:
    same_tenant(who, body.tenant_id)
    changes = {
        k: v
        for k, v in body.model_dump(exclude_unset=True, exclude={"tenant_id", "reason"}).items()
        if v is not None or k in _NULLABLE
    }
    if not changes:
        raise InvalidInput("nothing to update: pass at least one field to change")
    if not who.role.can_edit_any or "metadata" in changes:
        old = await owned(memory, who, item_id)
        if "metadata" in changes:
            # created_by records who made the item; no update may forge or drop it
            meta = {k: v for k, v in changes["metadata"].items() if k != "created_by"}
            if "created_by" in old.metadata:
                meta["created_by"] = old.metadata["created_by"]
            changes["metadata"] = meta
    return await memory.update(item_id, reason=body.reason, **changes)


@router.delete(
    "/v1/memories/{item_id}", summary="Delete a memory (soft: archived; hard=true: purged)", responses=WRITE
)
async def delete_memory(
    item_id: ItemId,
    who: Writer,
    memory: Mine,
    hard: bool = False,
    reason: Annotated[str, Query(max_length=2000)] = "",
    with_sources: Annotated[
        bool,
        Query(
            description="Also the conversation turn it was taken from and the session summaries "
            "quoting it, so its words answer no search again."
        ),
    ] = False,
) -> MemoryItem:
    if not who.role.can_edit_any:
        await owned(memory, who, item_id)
    return await memory.delete(item_id, hard=hard, reason=reason, with_sources=with_sources)


@router.get("/v1/memories/{item_id}/history", summary="A memory's changes", responses=READ)
async def memory_history(item_id: ItemId, who: Reader, memory: Mine) -> list[HistoryEventOut]:
    events = await memory.history(item_id)
    return [
        HistoryEventOut(
            item_id=e.item_id,
            action=e.action.value,
            at=e.at,
            version=e.version,
            reason=e.reason,
            actor=e.actor,
            before=e.before,
            after=e.after,
            seq=e.seq,
        )
        for e in events
    ]


T = TypeVar("T")


def _either(plural: Sequence[T] | None, singular: Sequence[T] | None) -> Sequence[T] | None:
    if plural is None or singular is None:
        return plural if plural is not None else singular
    return [*plural, *singular]
