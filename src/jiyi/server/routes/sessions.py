"""Sessions: remembering messages (which queues extraction), reading them back,
checkpoints, and ending a session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from jiyi.model import MAX_ID_LENGTH, owner_scope
from jiyi.server.deps import (
    READ,
    WRITE,
    Mine,
    Reader,
    SessionId,
    Writer,
    member_writes,
    same_tenant,
    server_state,
)
from jiyi.server.schemas import (
    CheckpointRequest,
    CompactionOut,
    EndSessionRequest,
    RememberRequest,
    RememberResponse,
    SessionEnded,
)
from jiyi.session.model import Checkpoint, Message

router = APIRouter(tags=["sessions"])

CheckpointId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)]


@router.post(
    "/v1/sessions/{session_id}/messages",
    summary="Remember messages (queues extraction)",
    status_code=201,
    responses=WRITE,
)
async def remember(
    session_id: SessionId, body: RememberRequest, who: Writer, memory: Mine, request: Request
) -> RememberResponse:
    same_tenant(who, body.tenant_id)
    # Extraction files what it finds under the broadest scope given (as store_extracted does).
    member_writes(who, owner_scope(body.user_id, body.project_id, body.agent_id), body.project_id)
    result = await memory.remember(
        [m.model_dump(exclude_none=True) for m in body.messages],
        session_id=session_id,
        user_id=body.user_id,
        project_id=body.project_id,
        agent_id=body.agent_id,
    )
    if (worker := server_state(request).worker) is not None:
        worker.wake()  # extract now, not at the next poll
    compacted = None
    if (c := result.compacted) is not None:
        compacted = CompactionOut(
            removed=c.removed,
            tokens_before=c.tokens_before,
            tokens_after=c.tokens_after,
            summary=c.summary,
            episode_job_id=c.episode_job_id,
        )
    return RememberResponse(
        messages=result.messages,
        job_id=result.job_id,
        compacted=compacted,
        turns_skipped=result.turns_skipped,
    )


@router.get("/v1/sessions/{session_id}/messages", summary="A session's messages", responses=READ)
async def session_messages(
    session_id: SessionId,
    who: Reader,
    memory: Mine,
    last: Annotated[int | None, Query(ge=1, le=100_000, description="Only the last N")] = None,
) -> list[Message]:
    return await memory.messages(session_id, last=last)


@router.post(
    "/v1/sessions/{session_id}/checkpoints",
    summary="Save a checkpoint of the session",
    status_code=201,
    responses=WRITE,
)
async def save_checkpoint(
    session_id: SessionId, body: CheckpointRequest, who: Writer, memory: Mine
) -> Checkpoint:
    same_tenant(who, body.tenant_id)
    return await memory.save_checkpoint(
        session_id,
        agent_state=body.agent_state,
        tool_states=body.tool_states,
        pending_tool_calls=body.pending_tool_calls,
        label=body.label,
        metadata=body.metadata,
    )


@router.get(
    "/v1/sessions/{session_id}/checkpoints",
    summary="A session's checkpoints, newest first",
    responses=READ,
)
async def list_checkpoints(
    session_id: SessionId, who: Reader, memory: Mine, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[Checkpoint]:
    return await memory.list_checkpoints(session_id, limit=limit)


@router.post(
    "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}/restore",
    summary="Restore a checkpoint (the session's messages become the checkpoint's)",
    responses=WRITE,
)
async def restore_checkpoint(
    session_id: SessionId,
    checkpoint_id: CheckpointId,
    who: Writer,
    memory: Mine,
    replace_messages: bool = True,
) -> Checkpoint:
    return await memory.restore_checkpoint(session_id, checkpoint_id, replace_messages=replace_messages)


@router.post(
    "/v1/sessions/{session_id}/end",
    summary="End a session: archive its session memories, queue an episode of its remaining turns",
    responses=WRITE,
)
async def end_session(
    session_id: SessionId, body: EndSessionRequest, who: Writer, memory: Mine, request: Request
) -> SessionEnded:
    same_tenant(who, body.tenant_id)
    ended = await memory.end_session(
        session_id, user_id=body.user_id, project_id=body.project_id, agent_id=body.agent_id
    )
    if ended.episode_job_id is not None and (worker := server_state(request).worker) is not None:
        worker.wake()  # summarise now, not at the next poll
    return SessionEnded.model_validate(ended.to_json_dict())
