"""The REST service: thin FastAPI handlers over :class:`~jiyi.memory.AsyncMemory`.

Each handler parses its input, calls the library (once; a change by an ``editor`` key
first reads the item to check who created it) and returns; errors are mapped in
:mod:`jiyi.server.errors`.

Tenancy: the tenant of every call is the API key's. Nothing in a body or a query
string can change it; a ``tenant_id`` that differs from the key's answers 404, and so
does an id that belongs to another tenant (never 403: other tenants do not exist).

Visibility: every read passes the key's :class:`~jiyi.store.base.Viewer` to the library,
so a project memory the key may not see is absent from lists, counts, search, context
and export, and its id answers 404 on every route (docs/permissions.md).

Without keys (``keys=None``) the service runs in single-tenant mode: every request acts
as the ``owner`` of tenant ``default`` - but only on a server bound to a loopback address
(127.0.0.1, ::1); anywhere else every request answers 401. An empty :class:`ApiKeys`
does *not* mean single-tenant mode: it means nobody gets in.
"""

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Path, Query, Request, Security
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from jiyi.errors import InvalidInput
from jiyi.jsonl import decode_jsonl
from jiyi.memory import AsyncMemory
from jiyi.model import DEFAULT_TENANT, MAX_ID_LENGTH, MemoryItem, MemoryType, Scope, Status, owner_scope
from jiyi.server import errors, web
from jiyi.server.auth import ApiKeys, Principal, Role
from jiyi.server.errors import ApiError, error_responses
from jiyi.server.limits import BodySizeLimit, RateLimiter
from jiyi.server.metrics import Metrics, RequestMetrics
from jiyi.server.schedule import MaintenanceScheduler, MaintenanceStatus
from jiyi.server.schemas import (
    AddRequest,
    AddResponse,
    CheckpointRequest,
    CompactionOut,
    ContextEntryOut,
    ContextRequest,
    ContextResponse,
    DecompositionLearning,
    FailureLearning,
    GateDecisionOut,
    Health,
    HistoryEventOut,
    ImportResponse,
    LearningRequest,
    PageResponse,
    ProfilePatch,
    ProfileResponse,
    RefusedDetail,
    RefusedResponse,
    RememberRequest,
    RememberResponse,
    SearchHitOut,
    SearchRequest,
    SearchResponse,
    SkillLearning,
    StatsResponse,
    SuggestionOut,
    SuggestRequest,
    UpdateRequest,
)
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import ListJobs
from jiyi.write.gate import GateDecision

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
LOCAL_KEY_ID = "local"
NDJSON = "application/x-ndjson"

# fields an update may set to null (clearing them); for the others null means "unchanged"
_NULLABLE = frozenset({"summary", "structured", "occurred_at", "expires_at"})

READ = error_responses(401, 404, 422, 429, 503)
WRITE = error_responses(401, 403, 404, 413, 422, 429, 503)

ItemId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="A memory id.")]
SessionId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)]
ScopeQuery = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH)]


def _decision(decision: GateDecision) -> GateDecisionOut:
    return GateDecisionOut(
        action=decision.action,
        reasons=list(decision.reasons),
        redacted=list(decision.redacted),
        duplicate_of=decision.duplicate_of,
        similarity=decision.similarity,
    )


def _same_tenant(principal: Principal, tenant_id: str | None) -> None:
    if tenant_id is not None and tenant_id != principal.tenant:
        raise ApiError(
            404, f"no tenant {tenant_id[:MAX_ID_LENGTH]!r} is visible to this key", field="tenant_id"
        )


def _member_writes(who: Principal, scope: Scope, project_id: str | None) -> None:
    """A key may create project memories only in projects it is a member of."""
    if scope is Scope.PROJECT and project_id is not None and not who.member_of(project_id):
        raise ApiError(
            403, f"this key is not a member of project {project_id[:MAX_ID_LENGTH]!r}", field="project_id"
        )


def _parse_jsonl(body: bytes) -> list[dict[str, Any]]:
    records = decode_jsonl(body, source="the import body", field="body")
    if not records:
        raise InvalidInput("the import body holds no records (one JSON object per line)", field="body")
    return records


def create_app(
    memory: AsyncMemory,
    *,
    keys: ApiKeys | None = None,
    max_body_bytes: int = 1_000_000,
    rate_limit_per_minute: int | None = 600,
    start_worker: bool = False,
    metrics: bool = True,
    maintain_every: float | None = None,
) -> FastAPI:
    """The REST application over ``memory`` (which the caller opens and closes).

    ``keys=None`` is single-tenant mode (tenant ``default``, loopback servers only; see
    the module docstring). ``rate_limit_per_minute=None`` disables the rate limit.
    ``start_worker=True`` drains queued extraction jobs in a background task.
    ``metrics=False`` removes the unauthenticated ``GET /metrics`` (see
    :mod:`jiyi.server.metrics`); request ids and JSON request logs stay.
    ``maintain_every`` (seconds) runs the lifecycle pass for every tenant at start-up and
    then on that schedule (see :mod:`jiyi.server.schedule`); None leaves it to ``jiyi maintain``.
    """
    limiter = RateLimiter(rate_limit_per_minute) if rate_limit_per_minute else None

    def known_tenants() -> list[str]:
        return [r.tenant for r in keys.records()] if keys is not None else [DEFAULT_TENANT]

    scheduler = (
        MaintenanceScheduler(memory, known_tenants, maintain_every) if maintain_every is not None else None
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if start_worker:
            memory.start_worker()
        if scheduler is not None:
            scheduler.start()
        try:
            yield
        finally:
            if scheduler is not None:
                await scheduler.stop()

    app = FastAPI(
        title="jiyi",
        summary="Long-term memory for LLM agents (Chinese and English).",
        description=(
            "Every call acts in the tenant of its API key (`X-API-Key: ...` or "
            '`Authorization: Bearer ...`). Errors are `{"error": {"code", "message", "field"}}` '
            "with stable codes. Ids of other tenants answer 404."
        ),
        version="1",
        lifespan=lifespan,
    )
    errors.install(app)
    app.state.maintenance = scheduler
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    telemetry = Metrics(memory, keys)
    app.state.metrics = telemetry
    app.add_middleware(RequestMetrics, metrics=telemetry)  # outermost: sees every request

    api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="ApiKey")
    bearer = HTTPBearer(auto_error=False, scheme_name="Bearer")

    async def principal(
        request: Request,
        api_key: Annotated[str | None, Security(api_key_header)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> Principal:
        if keys is None:
            server = request.scope.get("server")
            if not server or server[0] not in LOOPBACK:
                raise ApiError(401, "this server has no API keys configured; it answers on 127.0.0.1 only")
            who = Principal(key_id=LOCAL_KEY_ID, tenant=DEFAULT_TENANT, role=Role.OWNER)
        else:
            token = api_key or (credentials.credentials if credentials else None)
            if not token:
                raise ApiError(
                    401,
                    "missing API key: send X-API-Key or Authorization: Bearer",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            found = keys.verify(token)
            if found is None:
                raise ApiError(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
            who = found
        request.state.tenant = who.tenant  # for the request log (jiyi.server.metrics)
        if limiter is not None:
            limiter.enforce(who.key_id)
        _same_tenant(who, request.query_params.get("tenant_id"))
        return who

    async def writer(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.role.can_write:
            raise ApiError(403, f"a {who.role.value} key can only read")
        return who

    async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.role.can_edit_any:
            raise ApiError(403, f"a {who.role.value} key cannot do this; it needs an owner or admin key")
        return who

    Reader = Annotated[Principal, Depends(principal)]
    Writer = Annotated[Principal, Depends(writer)]
    Admin = Annotated[Principal, Depends(admin)]

    async def owned(who: Principal, item_id: str) -> MemoryItem:
        """The item, checked to be changeable by ``who`` (editors: only their own; an item
        the key may not see is 404, as if it did not exist)."""
        item = await memory.get(item_id, tenant_id=who.tenant, viewer=who.viewer)
        if not who.role.can_edit_any and item.metadata.get("created_by") != who.key_id:
            raise ApiError(403, "an editor key can only change memories it created")
        return item

    # ------------------------------------------------------------ probes

    @app.get("/healthz", tags=["probes"], summary="Liveness")
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get(
        "/readyz", tags=["probes"], summary="Readiness: the store answers", responses=error_responses(503)
    )
    async def readyz() -> Health:
        await memory.list(tenant_id=DEFAULT_TENANT, limit=1)
        return Health(status="ready")

    if metrics:

        @app.get("/metrics", tags=["probes"], summary="Prometheus metrics", include_in_schema=False)
        async def prometheus_metrics() -> Response:
            body, content_type = await telemetry.render()
            return Response(body, media_type=content_type)

    # ------------------------------------------------------------ memories

    @app.post(
        "/v1/memories",
        tags=["memories"],
        summary="Add a memory through the write gate",
        status_code=201,
        response_model=AddResponse,
        responses={
            **WRITE,
            422: {"model": RefusedResponse | errors.ErrorResponse, "description": "Refused or invalid"},
        },
    )
    async def add_memory(body: AddRequest, who: Writer) -> AddResponse | JSONResponse:
        _same_tenant(who, body.tenant_id)
        scope = body.scope or owner_scope(body.user_id, body.project_id, body.agent_id, body.session_id)
        _member_writes(who, scope, body.project_id)
        result = await memory.add(
            body.content,
            memory_type=body.memory_type,
            user_id=body.user_id,
            project_id=body.project_id,
            session_id=body.session_id,
            agent_id=body.agent_id,
            scope=body.scope,
            tenant_id=who.tenant,
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
            actor=who.key_id,
            viewer=who.viewer,
        )
        telemetry.gate(result.decision)
        decision = _decision(result.decision)
        if result.item is None:
            refused = RefusedResponse(
                error=RefusedDetail(
                    message="memory refused: " + "; ".join(result.decision.reasons), decision=decision
                )
            )
            return JSONResponse(refused.model_dump(mode="json"), status_code=422)
        return AddResponse(item=result.item, decision=decision)

    @app.post("/v1/memories/search", tags=["memories"], summary="Search memories", responses=READ)
    async def search_memories(body: SearchRequest, who: Reader) -> SearchResponse:
        _same_tenant(who, body.tenant_id)
        with telemetry.search_seconds.time():
            hits = await memory.search(
                body.query,
                user_id=body.user_id,
                project_id=body.project_id,
                session_id=body.session_id,
                agent_id=body.agent_id,
                tenant_id=who.tenant,
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
                viewer=who.viewer,
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

    @app.get("/v1/memories", tags=["memories"], summary="List memories, a page at a time", responses=READ)
    async def list_memories(
        who: Reader,
        user_id: ScopeQuery = None,
        project_id: ScopeQuery = None,
        session_id: ScopeQuery = None,
        agent_id: ScopeQuery = None,
        memory_type: Annotated[list[MemoryType] | None, Query()] = None,
        status: Annotated[list[Status] | None, Query(description="Default: every status.")] = None,
        tag: Annotated[list[str] | None, Query(description="Every tag must be present.")] = None,
        include_expired: bool = True,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        cursor: Annotated[
            str | None, Query(max_length=2000, description="next_cursor of the page before")
        ] = None,
        newest_first: bool = False,
    ) -> PageResponse:
        page = await memory.list(
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=who.tenant,
            memory_types=memory_type,
            statuses=status,
            tags=tag or (),
            include_expired=include_expired,
            limit=limit,
            cursor=cursor,
            newest_first=newest_first,
            viewer=who.viewer,
        )
        return PageResponse(items=page.items, next_cursor=page.next_cursor)

    @app.get("/v1/memories/{item_id}", tags=["memories"], summary="One memory", responses=READ)
    async def get_memory(item_id: ItemId, who: Reader) -> MemoryItem:
        return await memory.get(item_id, tenant_id=who.tenant, viewer=who.viewer)

    @app.patch("/v1/memories/{item_id}", tags=["memories"], summary="Change a memory", responses=WRITE)
    async def update_memory(item_id: ItemId, body: UpdateRequest, who: Writer) -> MemoryItem:
        _same_tenant(who, body.tenant_id)
        changes = {
            k: v
            for k, v in body.model_dump(exclude_unset=True, exclude={"tenant_id", "reason"}).items()
            if v is not None or k in _NULLABLE
        }
        if not changes:
            raise InvalidInput("nothing to update: pass at least one field to change")
        if not who.role.can_edit_any or "metadata" in changes:
            old = await owned(who, item_id)
            if "metadata" in changes:
                meta = {k: v for k, v in changes["metadata"].items() if k != "created_by"}
                if "created_by" in old.metadata:
                    meta["created_by"] = old.metadata["created_by"]
                changes["metadata"] = meta
        return await memory.update(
            item_id, tenant_id=who.tenant, reason=body.reason, actor=who.key_id, viewer=who.viewer, **changes
        )

    @app.delete(
        "/v1/memories/{item_id}",
        tags=["memories"],
        summary="Delete a memory (soft: archived; hard=true: purged)",
        responses=WRITE,
    )
    async def delete_memory(
        item_id: ItemId,
        who: Writer,
        hard: bool = False,
        reason: Annotated[str, Query(max_length=2000)] = "",
    ) -> MemoryItem:
        if not who.role.can_edit_any:
            await owned(who, item_id)
        return await memory.delete(
            item_id, hard=hard, reason=reason, tenant_id=who.tenant, actor=who.key_id, viewer=who.viewer
        )

    @app.get(
        "/v1/memories/{item_id}/history", tags=["memories"], summary="A memory's changes", responses=READ
    )
    async def memory_history(item_id: ItemId, who: Reader) -> list[HistoryEventOut]:
        events = await memory.history(item_id, tenant_id=who.tenant, viewer=who.viewer)
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

    # ------------------------------------------------------------ context

    @app.post("/v1/context", tags=["context"], summary="Assemble prompt context", responses=READ)
    async def build_context(body: ContextRequest, who: Reader) -> ContextResponse:
        _same_tenant(who, body.tenant_id)
        ctx = await memory.context(
            body.query,
            user_id=body.user_id,
            project_id=body.project_id,
            session_id=body.session_id,
            agent_id=body.agent_id,
            tenant_id=who.tenant,
            budget_tokens=body.budget_tokens,
            max_items=body.max_items,
            recent=body.recent,
            semantic=body.semantic,
            summaries=body.summaries,
            profile=body.profile,
            viewer=who.viewer,
        )
        return ContextResponse(
            text=ctx.text,
            tokens=ctx.tokens,
            dropped=ctx.dropped,
            profile=ctx.profile,
            by_source=ctx.by_source,
            entries=[
                ContextEntryOut(
                    source=e.source,
                    text=e.text,
                    tokens=e.tokens,
                    score=e.score,
                    item_id=e.item.id if e.item else None,
                    message_id=e.message.id if e.message else None,
                )
                for e in ctx.entries
            ],
        )

    # ------------------------------------------------------------ procedural memory

    @app.post(
        "/v1/learnings",
        tags=["procedural"],
        summary="Record a skill run, a failure pattern or a task decomposition",
        description="Recording the same skill, failure pattern or plan again updates its counts "
        "(a new version of the same memory) instead of adding one.",
        status_code=201,
        responses=WRITE,
    )
    async def record_learning(
        body: Annotated[LearningRequest, Body(discriminator="kind")], who: Writer
    ) -> MemoryItem:
        _same_tenant(who, body.tenant_id)
        scope = Scope(body.scope) if body.scope else owner_scope(body.user_id, body.project_id, body.agent_id)
        _member_writes(who, scope, body.project_id)
        where: dict[str, Any] = {
            "user_id": body.user_id,
            "project_id": body.project_id,
            "agent_id": body.agent_id,
            "scope": body.scope,
            "tenant_id": who.tenant,
            "visibility": body.visibility.value,
            "metadata": {"created_by": who.key_id},
            "actor": who.key_id,
            "viewer": who.viewer,
            # Editors change only what they created: another key's learning stays as it is.
            "own_only": not who.role.can_edit_any,
        }
        if isinstance(body, SkillLearning):
            steps = [s if isinstance(s, str) else s.model_dump() for s in body.workflow]
            return await memory.record_skill(
                body.name,
                steps,
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

    @app.post(
        "/v1/suggest",
        tags=["procedural"],
        summary="Advice for a task: a plan that worked for a similar one, and known risks",
        responses=READ,
    )
    async def suggest(body: SuggestRequest, who: Reader) -> SuggestionOut:
        _same_tenant(who, body.tenant_id)
        result = await memory.suggest(
            body.task,
            user_id=body.user_id,
            project_id=body.project_id,
            agent_id=body.agent_id,
            tenant_id=who.tenant,
            min_similarity=body.min_similarity,
            min_success_rate=body.min_success_rate,
            viewer=who.viewer,
        )
        return SuggestionOut.model_validate(result.to_json_dict())

    # ------------------------------------------------------------ profiles

    @app.get(
        "/v1/profile",
        tags=["profiles"],
        summary="A user's or a project's profile (give user_id or project_id)",
        description="Aggregated from the scope's memories; explicitly set fields win. Each field "
        "says its source (explicit or aggregated) and the ids of the memories behind it.",
        responses=READ,
    )
    async def get_profile(
        who: Reader, user_id: ScopeQuery = None, project_id: ScopeQuery = None
    ) -> ProfileResponse:
        profile = await memory.profile(
            user_id=user_id, project_id=project_id, tenant_id=who.tenant, viewer=who.viewer
        )
        return ProfileResponse.model_validate(profile.to_json_dict())

    @app.patch(
        "/v1/profile",
        tags=["profiles"],
        summary="Set or clear profile fields explicitly (give user_id or project_id)",
        responses=WRITE,
    )
    async def patch_profile(
        body: ProfilePatch, who: Writer, user_id: ScopeQuery = None, project_id: ScopeQuery = None
    ) -> ProfileResponse:
        _same_tenant(who, body.tenant_id)
        values: dict[str, Any] = {}
        for name, value in body.fields.items():
            if name in ("user_id", "project_id", "tenant_id", "actor", "viewer"):
                raise InvalidInput(f"unknown profile field {name!r}", field=name)
            values[name] = (
                [v if isinstance(v, str) else v.model_dump() for v in value]
                if isinstance(value, list)
                else value
            )
        if not who.role.can_edit_any:
            current = await memory.profile(
                user_id=user_id, project_id=project_id, tenant_id=who.tenant, viewer=who.viewer
            )
            if current.item_id is not None:
                await owned(who, current.item_id)  # editors: only a profile they set first
        profile = await memory.set_profile(
            user_id=user_id,
            project_id=project_id,
            tenant_id=who.tenant,
            actor=who.key_id,
            viewer=who.viewer,
            **values,
        )
        return ProfileResponse.model_validate(profile.to_json_dict())

    # ------------------------------------------------------------ sessions

    @app.post(
        "/v1/sessions/{session_id}/messages",
        tags=["sessions"],
        summary="Remember messages (queues extraction)",
        status_code=201,
        responses=WRITE,
    )
    async def remember(session_id: SessionId, body: RememberRequest, who: Writer) -> RememberResponse:
        _same_tenant(who, body.tenant_id)
        # Extraction files what it finds under the broadest scope given (as store_extracted does).
        _member_writes(who, owner_scope(body.user_id, body.project_id, body.agent_id), body.project_id)
        result = await memory.remember(
            [m.model_dump(exclude_none=True) for m in body.messages],
            session_id=session_id,
            user_id=body.user_id,
            project_id=body.project_id,
            agent_id=body.agent_id,
            tenant_id=who.tenant,
        )
        compacted = None
        if result.compacted is not None:
            c = result.compacted
            compacted = CompactionOut(
                removed=c.removed,
                tokens_before=c.tokens_before,
                tokens_after=c.tokens_after,
                summary=c.summary,
                episode_job_id=c.episode_job_id,
            )
        return RememberResponse(messages=result.messages, job_id=result.job_id, compacted=compacted)

    @app.get(
        "/v1/sessions/{session_id}/messages",
        tags=["sessions"],
        summary="A session's messages",
        responses=READ,
    )
    async def session_messages(
        session_id: SessionId,
        who: Reader,
        last: Annotated[int | None, Query(ge=1, le=100_000, description="Only the last N")] = None,
    ) -> list[Message]:
        return await memory.messages(session_id, tenant_id=who.tenant, last=last)

    @app.post(
        "/v1/sessions/{session_id}/checkpoints",
        tags=["sessions"],
        summary="Save a checkpoint of the session",
        status_code=201,
        responses=WRITE,
    )
    async def save_checkpoint(session_id: SessionId, body: CheckpointRequest, who: Writer) -> Checkpoint:
        _same_tenant(who, body.tenant_id)
        return await memory.save_checkpoint(
            session_id,
            agent_state=body.agent_state,
            tool_states=body.tool_states,
            pending_tool_calls=body.pending_tool_calls,
            label=body.label,
            metadata=body.metadata,
            tenant_id=who.tenant,
        )

    @app.get(
        "/v1/sessions/{session_id}/checkpoints",
        tags=["sessions"],
        summary="A session's checkpoints, newest first",
        responses=READ,
    )
    async def list_checkpoints(
        session_id: SessionId, who: Reader, limit: Annotated[int, Query(ge=1, le=1000)] = 50
    ) -> list[Checkpoint]:
        return await memory.list_checkpoints(session_id, limit=limit, tenant_id=who.tenant)

    @app.post(
        "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}/restore",
        tags=["sessions"],
        summary="Restore a checkpoint (the session's messages become the checkpoint's)",
        responses=WRITE,
    )
    async def restore_checkpoint(
        session_id: SessionId,
        checkpoint_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)],
        who: Writer,
        replace_messages: bool = True,
    ) -> Checkpoint:
        return await memory.restore_checkpoint(
            session_id, checkpoint_id, replace_messages=replace_messages, tenant_id=who.tenant
        )

    # ------------------------------------------------------------ whole tenant

    @app.get(
        "/v1/maintenance",
        tags=["tenant"],
        summary="The lifecycle schedule and this tenant's last scheduled pass",
        responses=READ,
    )
    async def maintenance(who: Admin) -> MaintenanceStatus:
        if scheduler is None:
            return MaintenanceStatus(enabled=False)
        last = scheduler.last.get(who.tenant)
        return MaintenanceStatus(
            enabled=True,
            interval_seconds=scheduler.interval,
            passes=scheduler.passes,
            last=None if last is None else last.to_json_dict(),
        )

    @app.get("/v1/stats", tags=["tenant"], summary="Counts by type, scope and status", responses=READ)
    async def stats(
        who: Reader,
        user_id: ScopeQuery = None,
        project_id: ScopeQuery = None,
        session_id: ScopeQuery = None,
        agent_id: ScopeQuery = None,
    ) -> StatsResponse:
        result = await memory.stats(
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=who.tenant,
            viewer=who.viewer,
        )
        return StatsResponse(**asdict(result))

    @app.get(
        "/v1/export",
        tags=["tenant"],
        summary="Every memory of the tenant (or of the given scopes) as JSON lines",
        response_class=StreamingResponse,
        responses={
            200: {"description": "One memory per line", "content": {NDJSON: {"schema": {"type": "string"}}}},
            **READ,
        },
    )
    async def export(
        who: Reader,
        user_id: ScopeQuery = None,
        project_id: ScopeQuery = None,
        session_id: ScopeQuery = None,
        agent_id: ScopeQuery = None,
    ) -> StreamingResponse:
        rows = await memory.export(
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=who.tenant,
            viewer=who.viewer,
        )

        def lines() -> Iterator[str]:
            for row in rows:
                yield json.dumps(row, ensure_ascii=False) + "\n"

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.post(
        "/v1/import",
        tags=["tenant"],
        summary="Load memories from JSON lines (owner/admin; all or nothing)",
        responses=error_responses(401, 403, 413, 422, 429, 503),
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "One memory per line, as written by /v1/export. tenant_id is replaced by the key's.",
                "content": {NDJSON: {"schema": {"type": "string"}}},
            }
        },
    )
    async def import_memories(request: Request, who: Admin) -> ImportResponse:
        records = _parse_jsonl(await request.body())
        for record in records:
            record["tenant_id"] = who.tenant
        result = await memory.import_items(records, tenant_id=who.tenant, actor=who.key_id)
        return ImportResponse(imported=result.imported, embedded=result.embedded)

    @app.get("/v1/jobs", tags=["tenant"], summary="Background jobs of this tenant", responses=READ)
    async def jobs(
        who: Reader,
        status: Annotated[list[Literal["queued", "running", "done", "failed"]] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[Job]:
        # AsyncMemory.jobs() lists every tenant's jobs; the store op takes the tenant.
        return await memory.store.aexecute(ListJobs(tuple(status or ()), tenant_id=who.tenant, limit=limit))

    # ------------------------------------------------------------ web page (GET /, /ui/; not in OpenAPI)

    web.install(app)

    return app
