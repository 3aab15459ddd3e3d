"""Whole-tenant routes: counts, export and import, background jobs, the lifecycle
schedule's status, and compression (``POST /v1/compress``, ``POST /v1/compress/undo``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from jiyi.errors import InvalidInput
from jiyi.jsonl import decode_jsonl
from jiyi.server.deps import NDJSON, READ, WRITE, Admin, Mine, Reader, ScopeQuery, State, same_tenant
from jiyi.server.errors import error_responses
from jiyi.server.schedule import MaintenanceStatus
from jiyi.server.schemas import CompressRequest, ImportResponse, StatsResponse, UncompressRequest
from jiyi.session.model import Job

router = APIRouter(tags=["tenant"])

JobStatus = Literal["queued", "running", "done", "failed"]


def _parse_jsonl(body: bytes) -> list[dict[str, Any]]:
    records = decode_jsonl(body, source="the import body", field="body")
    if not records:
        raise InvalidInput("the import body holds no records (one JSON object per line)", field="body")
    return records


@router.get(
    "/v1/maintenance",
    summary="The lifecycle schedule and this tenant's last scheduled pass",
    responses=READ,
)
async def maintenance(who: Admin, state: State) -> MaintenanceStatus:
    scheduler = state.scheduler
    if scheduler is None:
        return MaintenanceStatus(enabled=False)
    last = scheduler.last.get(who.tenant)
    return MaintenanceStatus(
        enabled=True,
        interval_seconds=scheduler.interval,
        passes=scheduler.passes,
        last=None if last is None else last.to_json_dict(),
    )


@router.get("/v1/stats", summary="Counts by type, scope and status", responses=READ)
async def stats(
    who: Reader,
    memory: Mine,
    user_id: ScopeQuery = None,
    project_id: ScopeQuery = None,
    session_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    include_turns: Annotated[
        bool, Query(description="Include the raw conversation turns that remembering keeps.")
    ] = False,
) -> StatsResponse:
    result = await memory.stats(
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        include_turns=include_turns,
    )
    return StatsResponse(**asdict(result))


@router.get(
    "/v1/export",
    summary="Every memory of the tenant (or of the given scopes) as JSON lines",
    response_class=StreamingResponse,
    responses={
        200: {"description": "One memory per line", "content": {NDJSON: {"schema": {"type": "string"}}}},
        **READ,
    },
)
async def export(
    who: Reader,
    memory: Mine,
    user_id: ScopeQuery = None,
    project_id: ScopeQuery = None,
    session_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    retrievals: Annotated[
        bool,
        Query(
            description='Also the retrieval log: one {"retrieval": ...} line per access, after the memories.'
        ),
    ] = False,
) -> StreamingResponse:
    rows = await memory.export(
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        retrievals=retrievals,
    )

    def lines() -> Iterator[str]:
        for row in rows:
            yield json.dumps(row, ensure_ascii=False) + "\n"

    return StreamingResponse(lines(), media_type=NDJSON)


@router.post(
    "/v1/import",
    summary="Load memories from JSON lines (owner/admin; all or nothing)",
    responses=error_responses(401, 403, 413, 422, 429, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "One memory per line, as written by /v1/export. tenant_id is replaced by the key's. "
            "Sensitive data is redacted from every text field unless trusted=true (a restore of jiyi's own "
            "export, kept verbatim).",
            "content": {NDJSON: {"schema": {"type": "string"}}},
        }
    },
)
async def import_memories(
    request: Request,
    who: Admin,
    memory: Mine,
    trusted: Annotated[
        bool, Query(description="A restore of jiyi's own export: keep every field verbatim (no redaction).")
    ] = False,
) -> ImportResponse:
    records = _parse_jsonl(await request.body())
    for record in records:
        record["tenant_id"] = who.tenant  # a key imports into its own tenant only
    result = await memory.import_items(records, trusted=trusted)
    return ImportResponse(imported=result.imported, embedded=result.embedded, retrievals=result.retrievals)


@router.get("/v1/jobs", summary="Background jobs of this tenant", responses=READ)
async def jobs(
    who: Reader,
    memory: Mine,
    status: Annotated[list[JobStatus] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[Job]:
    return await memory.jobs(statuses=status or (), limit=limit)


@router.post(
    "/v1/compress",
    summary="Merge old, rarely used memories into core memories (owner/admin; reversible)",
    responses=WRITE,
)
async def compress(body: CompressRequest, who: Admin, memory: Mine) -> dict[str, Any]:
    """``Memory.compress``: near-duplicates become one memory, clusters of related memories
    of one scope and type become 1-3 core memories; originals are archived and linked."""
    same_tenant(who, body.tenant_id)
    report = await memory.compress(
        user_id=body.user_id,
        project_id=body.project_id,
        session_id=body.session_id,
        agent_id=body.agent_id,
        memory_types=body.memory_types or None,
        older_than_days=body.older_than_days,
        max_access=body.max_access,
        dry_run=body.dry_run,
        actor=who.key_id,
    )
    return report.to_json_dict()


@router.post(
    "/v1/compress/undo", summary="Undo the compression that made a core memory (owner/admin)", responses=WRITE
)
async def uncompress(body: UncompressRequest, who: Admin, memory: Mine) -> dict[str, Any]:
    """``Memory.uncompress``: the originals are restored and that compression's core memories archived."""
    same_tenant(who, body.tenant_id)
    result = await memory.uncompress(body.core_id, actor=who.key_id)
    return result.to_json_dict()
