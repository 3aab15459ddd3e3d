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

The routes live in :mod:`jiyi.server.routes`, one router per area; what they share
(auth, tenancy checks, the library handle) is in :mod:`jiyi.server.deps`.
"""

import functools
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from jiyi.memory import AsyncMemory
from jiyi.server import docs, errors, web
from jiyi.server.auth import LOOPBACK, ApiKeys
from jiyi.server.deps import ServerState, known_tenants
from jiyi.server.limits import BodySizeLimit, Limiter, RateLimiter
from jiyi.server.metrics import Metrics, RequestMetrics
from jiyi.server.routes import (
    context,
    documents,
    mem0,
    memories,
    probes,
    procedural,
    profile,
    retrievals,
    sessions,
    tenant,
)
from jiyi.server.schedule import MaintenanceScheduler
from jiyi.server.worker import JobWorker

__all__ = ["LOOPBACK", "create_app"]

DESCRIPTION = (
    "Every call acts in the tenant of its API key (`X-API-Key: ...` or "
    '`Authorization: Bearer ...`). Errors are `{"error": {"code", "message", "field", "problems"}}` '
    "with stable codes; `problems` lists every problem found. Ids of other tenants answer 404."
)


def create_app(
    memory: AsyncMemory,
    *,
    keys: ApiKeys | None = None,
    max_body_bytes: int = 1_000_000,
    rate_limit_per_minute: int | None = 600,
    start_worker: bool = False,
    metrics: bool = True,
    maintain_every: float | None = None,
    redis: str | None = None,
    replica: str | None = None,
) -> FastAPI:
    """The REST application over ``memory`` (which the caller opens and closes).

    ``keys=None`` is single-tenant mode (tenant ``default``, loopback servers only; see
    the module docstring). ``rate_limit_per_minute=None`` disables the rate limit.
    ``start_worker=True`` drains queued extraction jobs in a background task.
    ``metrics=False`` removes the unauthenticated ``GET /metrics`` (see
    :mod:`jiyi.server.metrics`); request ids and JSON request logs stay.
    ``maintain_every`` (seconds) runs the lifecycle pass for every tenant at start-up and
    then on that schedule (see :mod:`jiyi.server.schedule`); None leaves it to ``jiyi maintain``.
    ``redis`` (a Redis URL) makes this app one of several replicas: the per-key rate limit
    and the maintenance lease are shared through it (:mod:`jiyi.server.shared`).
    ``replica`` names this process in job locks and leases (default ``host:pid:random``).
    """
    # The server's JobWorker (start_worker) runs the queue, never remember()'s in-process one.
    memory.background = False
    state = _state(memory, keys, rate_limit_per_minute, maintain_every, redis, replica)
    app = FastAPI(
        title="jiyi",
        summary="Long-term memory for LLM agents (Chinese and English).",
        description=DESCRIPTION,
        version="1",
        lifespan=_lifespan(state, start_worker),
        docs_url=None,  # served from bundled files by jiyi.server.docs (no CDN)
        redoc_url=None,
    )
    app.state.jiyi = state
    app.state.maintenance = state.scheduler
    app.state.metrics = state.telemetry
    errors.install(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=state.telemetry)  # outermost: sees every request
    _include_routes(app, metrics=metrics)
    return app


def _state(
    memory: AsyncMemory,
    keys: ApiKeys | None,
    rate_limit_per_minute: int | None,
    maintain_every: float | None,
    redis: str | None,
    replica: str | None,
) -> ServerState:
    replica = replica or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    limiter: Limiter | None = RateLimiter(rate_limit_per_minute) if rate_limit_per_minute else None
    lease = client = None
    if redis is not None:  # a replica: share the limit and the schedule (needs the redis extra)
        from jiyi.server.shared import RedisLease, RedisRateLimiter, redis_client

        client = redis_client(redis)
        lease = RedisLease(client, owner=replica)
        limiter = RedisRateLimiter(client, rate_limit_per_minute) if rate_limit_per_minute else None
    # the scheduler asks for the tenants on every pass: keys may be added while it runs
    tenants = functools.partial(known_tenants, keys)
    scheduler = None
    if maintain_every is not None:
        scheduler = MaintenanceScheduler(memory, tenants, maintain_every, lease=lease)
    worker = JobWorker(memory, f"serve-{replica}")
    return ServerState(memory, keys, limiter, Metrics(memory, keys), scheduler, worker, client)


def _lifespan(
    state: ServerState, start_worker: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if start_worker and state.worker is not None:
            state.worker.start()
        if state.scheduler is not None:
            state.scheduler.start()
        try:
            yield
        finally:
            if state.scheduler is not None:
                await state.scheduler.stop()
            if state.worker is not None:
                await state.worker.stop()  # finishes or releases the job in hand
            if state.redis is not None:
                await state.redis.aclose()

    return lifespan


def _include_routes(app: FastAPI, *, metrics: bool) -> None:
    app.include_router(probes.router)
    if metrics:
        app.include_router(probes.metrics_router)
    for area in (memories, retrievals, context, documents, procedural, profile, sessions, tenant, mem0):
        app.include_router(area.router)
    web.install(app)  # GET / and /ui/: the web page, not in OpenAPI
    docs.install(app)  # GET /docs and /redoc, offline
