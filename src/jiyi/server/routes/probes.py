"""Liveness, readiness and the Prometheus scrape (none needs a key)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from jiyi.model import DEFAULT_TENANT
from jiyi.server.deps import Mem, Telemetry
from jiyi.server.errors import error_responses
from jiyi.server.schemas import Health

router = APIRouter(tags=["probes"])

# separate so create_app(metrics=False) can leave it out
metrics_router = APIRouter(tags=["probes"])


@router.get("/healthz", summary="Liveness")
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", summary="Readiness: the store answers", responses=error_responses(503))
async def readyz(memory: Mem) -> Health:
    await memory.list(tenant_id=DEFAULT_TENANT, limit=1)
    return Health(status="ready")


@metrics_router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def prometheus_metrics(telemetry: Telemetry) -> Response:
    body, content_type = await telemetry.render()
    return Response(body, media_type=content_type)
