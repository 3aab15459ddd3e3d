"""Procedural memory: recording skills, failure patterns and task decompositions, and
suggesting a plan (and known risks) for a new task."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from jiyi.memory import AsyncMemory
from jiyi.model import MemoryItem, Scope, owner_scope
from jiyi.server.deps import READ, WRITE, Mine, Reader, Writer, dump_entries, member_writes, same_tenant
from jiyi.server.schemas import (
    DecompositionLearning,
    FailureLearning,
    LearningRequest,
    SkillLearning,
    SuggestionOut,
    SuggestRequest,
)

router = APIRouter(tags=["procedural"])


async def _record(memory: AsyncMemory, body: LearningRequest, where: dict[str, Any]) -> MemoryItem:
    """The record_* call for the body's kind, with the scope and caller in ``where``."""
    if isinstance(body, SkillLearning):
        return await memory.record_skill(
            body.name,
            dump_entries(body.workflow),
            description=body.description,
            task=body.task,
            succeeded=body.succeeded,
            **where,
        )
    if isinstance(body, FailureLearning):
        return await memory.record_failure(
            body.pattern,
            indicators=body.indicators,
            mitigation=body.mitigation,
            severity=body.severity,
            description=body.description,
            **where,
        )
    assert isinstance(body, DecompositionLearning)
    return await memory.record_decomposition(
        body.task, body.subtasks, strategy=body.strategy, succeeded=body.succeeded, **where
    )


@router.post(
    "/v1/learnings",
    summary="Record a skill run, a failure pattern or a task decomposition",
    description="Recording the same skill, failure pattern or plan again updates its counts "
    "(a new version of the same memory) instead of adding one.",
    status_code=201,
    responses=WRITE,
)
async def record_learning(
    body: Annotated[LearningRequest, Body(discriminator="kind")], who: Writer, memory: Mine
) -> MemoryItem:
    same_tenant(who, body.tenant_id)
    scope = Scope(body.scope) if body.scope else owner_scope(body.user_id, body.project_id, body.agent_id)
    member_writes(who, scope, body.project_id)
    where: dict[str, Any] = {
        "user_id": body.user_id,
        "project_id": body.project_id,
        "agent_id": body.agent_id,
        "scope": body.scope,
        "visibility": body.visibility.value,
        "metadata": {"created_by": who.key_id},
        # Editors change only what they created: another key's learning stays as it is.
        "own_only": not who.role.can_edit_any,
    }
    return await _record(memory, body, where)


@router.post(
    "/v1/suggest",
    summary="Advice for a task: a plan that worked for a similar one, and known risks",
    responses=READ,
)
async def suggest(body: SuggestRequest, who: Reader, memory: Mine) -> SuggestionOut:
    same_tenant(who, body.tenant_id)
    result = await memory.suggest(
        body.task,
        user_id=body.user_id,
        project_id=body.project_id,
        agent_id=body.agent_id,
        min_similarity=body.min_similarity,
        min_success_rate=body.min_success_rate,
    )
    return SuggestionOut.model_validate(result.to_json_dict())
