"""What every router of the REST service shares: the per-app state, the auth
dependencies and the tenancy checks (see :mod:`jiyi.server.app` for the rules).

Handlers receive the library handle and the caller as FastAPI dependencies
(:data:`Mine` — the library bound to the caller —, :data:`Reader`, :data:`Writer`,
:data:`Admin`); the values behind them
live in one :class:`ServerState` on ``app.state.jiyi``, set by
:func:`~jiyi.server.app.create_app`, so routers hold no state of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Path, Query, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from jiyi.memory import AsyncMemory
from jiyi.model import DEFAULT_TENANT, MAX_ID_LENGTH, MemoryItem, Scope
from jiyi.server.auth import LOOPBACK, ApiKeys, Principal, Role
from jiyi.server.errors import ApiError, error_responses
from jiyi.server.limits import Limiter
from jiyi.server.metrics import Metrics
from jiyi.server.schedule import MaintenanceScheduler
from jiyi.server.schemas import GateDecisionOut
from jiyi.server.worker import JobWorker
from jiyi.write.gate import GateDecision

if TYPE_CHECKING:
    from redis.asyncio import Redis

LOCAL_KEY_ID = "local"
NDJSON = "application/x-ndjson"

READ = error_responses(401, 404, 422, 429, 503)
WRITE = error_responses(401, 403, 404, 413, 422, 429, 503)

ItemId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="A memory id.")]
SessionId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)]
ScopeQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description=(
            "Whose memories: any of user_id, project_id, session_id, agent_id (several are read "
            "together). Where an operation takes none (listing, export, stats), none means every "
            "memory of the key's tenant."
        ),
    ),
]


@dataclass(frozen=True)
class ServerState:
    """One app's collaborators; ``keys=None`` is single-tenant mode."""

    memory: AsyncMemory
    keys: ApiKeys | None
    limiter: Limiter | None
    telemetry: Metrics
    scheduler: MaintenanceScheduler | None
    worker: JobWorker | None = None
    redis: Redis | None = None
    """The client the shared limiter and lease use (``--redis``); closed with the app."""


def known_tenants(keys: ApiKeys | None) -> list[str]:
    """The tenants the server serves: those of its keys (read afresh, as keys change)."""
    return [r.tenant for r in keys.records()] if keys is not None else [DEFAULT_TENANT]


def server_state(request: Request) -> ServerState:
    state = request.app.state.jiyi
    assert isinstance(state, ServerState)
    return state


def current_memory(request: Request) -> AsyncMemory:
    return server_state(request).memory


def current_metrics(request: Request) -> Metrics:
    return server_state(request).telemetry


State = Annotated[ServerState, Depends(server_state)]
Mem = Annotated[AsyncMemory, Depends(current_memory)]
Telemetry = Annotated[Metrics, Depends(current_metrics)]

# auto_error=False: principal() answers a missing key itself, in the API's error shape
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="ApiKey")
bearer = HTTPBearer(auto_error=False, scheme_name="Bearer")


def _local_principal(request: Request) -> Principal:
    """Single-tenant mode: the owner of ``default``, but only over a loopback address."""
    server = request.scope.get("server")
    if not server or server[0] not in LOOPBACK:
        raise ApiError(401, "this server has no API keys configured; it answers on 127.0.0.1 only")
    return Principal(key_id=LOCAL_KEY_ID, tenant=DEFAULT_TENANT, role=Role.OWNER)


def _key_principal(keys: ApiKeys, token: str | None) -> Principal:
    if not token:
        raise ApiError(
            401,
            "missing API key: send X-API-Key or Authorization: Bearer",
            headers={"WWW-Authenticate": "Bearer"},
        )
    found = keys.verify(token)
    if found is None:
        raise ApiError(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return found


async def principal(
    request: Request,
    api_key: Annotated[str | None, Security(api_key_header)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Principal:
    """The caller: authenticated, rate limited and held to its own tenant."""
    state = server_state(request)
    try:
        if state.keys is None:
            who = _local_principal(request)
        else:
            who = _key_principal(state.keys, api_key or (credentials.credentials if credentials else None))
    except ApiError:
        # Failed attempts count against the client's address (its own bucket, apart from
        # every key's), so keys cannot be guessed at full speed: past the limit, 429.
        if state.limiter is not None:
            await state.limiter.aenforce(f"client:{request.client.host if request.client else '?'}")
        raise
    request.state.tenant = who.tenant  # for the request log (jiyi.server.metrics)
    if state.limiter is not None:
        await state.limiter.aenforce(who.key_id)
    same_tenant(who, request.query_params.get("tenant_id"))
    return who


async def writer(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.role.can_write:
        raise ApiError(403, f"{who.role.a_key} can only read")
    return who


async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.role.can_edit_any:
        raise ApiError(403, f"{who.role.a_key} cannot do this; it needs an owner or admin key")
    return who


Reader = Annotated[Principal, Depends(principal)]
Writer = Annotated[Principal, Depends(writer)]
Admin = Annotated[Principal, Depends(admin)]


async def callers_memory(request: Request, who: Reader) -> AsyncMemory:
    """The library seen as this request's caller: every operation receives the key's
    tenant, viewer and actor (``Principal.caller``), so routes never pass them by hand.
    The role check stays with :data:`Writer`/:data:`Admin`; FastAPI resolves the
    principal once per request, so the key is verified and rate limited once."""
    return current_memory(request).bound(caller=who.caller)


Mine = Annotated[AsyncMemory, Depends(callers_memory)]


def same_tenant(principal: Principal, tenant_id: str | None) -> None:
    """A tenant other than the key's answers 404: other tenants do not exist for it."""
    if tenant_id is not None and tenant_id != principal.tenant:
        raise ApiError(
            404, f"no tenant {tenant_id[:MAX_ID_LENGTH]!r} is visible to this key", field="tenant_id"
        )


def member_writes(who: Principal, scope: Scope, project_id: str | None) -> None:
    """A key may create project memories only in projects it is a member of."""
    if scope is Scope.PROJECT and project_id is not None and not who.member_of(project_id):
        raise ApiError(
            403, f"this key is not a member of project {project_id[:MAX_ID_LENGTH]!r}", field="project_id"
        )


async def owned(memory: AsyncMemory, who: Principal, item_id: str) -> MemoryItem:
    """The item, checked to be changeable by ``who`` (editors: only their own; an item
    the key may not see is 404, as if it did not exist). ``memory`` is bound to ``who``."""
    item = await memory.get(item_id)
    if not who.role.can_edit_any and item.metadata.get("created_by") != who.key_id:
        raise ApiError(403, "an editor key can only change memories it created")
    return item


def decision_out(decision: GateDecision) -> GateDecisionOut:
    return GateDecisionOut(
        action=decision.action,
        reasons=list(decision.reasons),
        redacted=list(decision.redacted),
        duplicate_of=decision.duplicate_of,
        similarity=decision.similarity,
    )


def dump_entries(values: list[Any]) -> list[Any]:
    """Pydantic entries of a list as plain values (strings stay strings) for the library."""
    return [v if isinstance(v, str) else v.model_dump() for v in values]
