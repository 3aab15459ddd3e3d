"""Prometheus metrics and structured request logs for the REST service (seed 002, section 7).

``GET /metrics`` answers the Prometheus text format *without* authentication, so that
scrapers need no API key. It therefore shows no tenant ids and no content: only counts
summed over every tenant this app knows of (the memory's default tenant, the tenants of
the API keys and the tenants seen in requests, at most :data:`MAX_TENANTS`), latencies,
gate decisions and cache counters. Put the port behind a firewall (or pass
``metrics=False`` to :func:`~jiyi.server.app.create_app`) when even counts are private.

Metrics (each app has its own :class:`~prometheus_client.CollectorRegistry`):

* ``jiyi_memories{type}`` - memories by type (every status), read at scrape time;
* ``jiyi_memories_by_status{status}`` - memories by status, read at scrape time;
* ``jiyi_memory_avg_importance`` - mean importance, weighted by each tenant's count;
* ``jiyi_request_seconds{method,route}`` - request latency histogram (route = path
  template such as ``/v1/memories/{item_id}``, never the raw path); p50/p99 come from
  ``histogram_quantile``;
* ``jiyi_search_seconds`` - latency of the library search behind ``/v1/memories/search``;
* ``jiyi_gate_decisions_total{action,reason}`` - write-gate decisions of ``POST
  /v1/memories`` (reason: :func:`reason_category`);
* ``jiyi_extraction_queue_depth`` - queued background jobs (all tenants) at scrape time;
* ``jiyi_cache_hits_total{cache}`` / ``jiyi_cache_misses_total{cache}`` - ``cache="redis"``
  when the store is a :class:`~jiyi.store.redis_cache.RedisCachedStore`, ``cache="query"``
  when the in-process query-embedding cache counts its hits.

Every request is logged on logger ``jiyi.http`` as one JSON object (``request_id``,
``method``, ``path``, ``route``, ``status``, ``duration_ms``, ``tenant``); the request id
is the caller's ``X-Request-ID`` when it is a short token, else a new one, and is echoed
in the response's ``X-Request-ID`` header.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jiyi.memory import AsyncMemory
from jiyi.server.auth import ApiKeys
from jiyi.store.base import ListJobs
from jiyi.write.gate import GateDecision

log = logging.getLogger("jiyi.http")

MAX_TENANTS = 1000
"""At most this many tenants are summed at scrape time (one stats read each)."""
MAX_QUEUE_SCAN = 100_000
"""Queued jobs are counted by listing them, up to this many."""
REQUEST_ID_HEADER = "X-Request-ID"
UNMATCHED = "<unmatched>"

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

# reject reasons of jiyi.write.gate, by their opening words
_REJECT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("too short", "too_short"),
    ("too long", "too_long"),
    ("low value", "low_value"),
    ("confidence ", "low_confidence"),
    ("rate limit", "rate_limit"),
    ("nothing but sensitive data", "sensitive_only"),
)


def reason_category(decision: GateDecision) -> str:
    """A short stable label for a gate decision.

    ``added`` and ``duplicate`` (reinforced) for accepted text; for refusals one of
    ``too_short``, ``too_long``, ``low_value``, ``low_confidence``, ``rate_limit``,
    ``sensitive_only`` or ``other``.
    """
    if decision.action in ("add", "supersede", "update", "merge"):
        return "added"
    if decision.action in ("reinforce", "none"):
        return "duplicate"
    first = decision.reasons[0].lower() if decision.reasons else ""
    for prefix, label in _REJECT_PREFIXES:
        if first.startswith(prefix):
            return label
    return "other"


def request_id_from(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The caller's request id when it is a short safe token, else a new one."""
    for name, value in headers:
        if name.lower() == b"x-request-id":
            text = value.decode("latin-1").strip()
            if _REQUEST_ID.match(text):
                return text
            break
    return uuid.uuid4().hex


class _CacheCollector(Collector):
    """Hit/miss counters kept by the store or the memory, read at scrape time."""

    def __init__(self, memory: AsyncMemory) -> None:
        self._memory = memory

    def _sources(self) -> Iterator[tuple[str, int, int]]:
        stats = getattr(self._memory.store, "stats", None)  # RedisCachedStore.stats
        if stats is not None and isinstance(getattr(stats, "hits", None), int):
            yield "redis", stats.hits, stats.misses
        lru = getattr(self._memory.runtime, "query_cache", None)  # counted once it keeps counts
        if lru is not None and isinstance(getattr(lru, "hits", None), int):
            yield "query", lru.hits, lru.misses

    def collect(self) -> Iterable[Metric]:
        hits = CounterMetricFamily("jiyi_cache_hits", "Cache hits.", labels=["cache"])
        misses = CounterMetricFamily("jiyi_cache_misses", "Cache misses.", labels=["cache"])
        for name, hit, miss in self._sources():
            hits.add_metric([name], hit)
            misses.add_metric([name], miss)
        return [hits, misses]


class Metrics:
    """The metrics of one app, in a registry of its own."""

    def __init__(self, memory: AsyncMemory, keys: ApiKeys | None = None) -> None:
        self.memory = memory
        self.keys = keys
        self.registry = CollectorRegistry(auto_describe=True)
        self._tenants: dict[str, None] = {memory.runtime.tenant_id: None}
        r = self.registry
        self.memories = Gauge("jiyi_memories", "Memories by type (every status).", ["type"], registry=r)
        self.by_status = Gauge("jiyi_memories_by_status", "Memories by status.", ["status"], registry=r)
        self.avg_importance = Gauge(
            "jiyi_memory_avg_importance", "Mean importance of the memories.", registry=r
        )
        self.request_seconds = Histogram(
            "jiyi_request_seconds", "HTTP request latency.", ["method", "route"], registry=r
        )
        self.search_seconds = Histogram("jiyi_search_seconds", "Latency of memory searches.", registry=r)
        self.gate_decisions = Counter(
            "jiyi_gate_decisions", "Write-gate decisions.", ["action", "reason"], registry=r
        )
        self.queue_depth = Gauge(
            "jiyi_extraction_queue_depth", "Queued background jobs (every tenant).", registry=r
        )
        r.register(_CacheCollector(memory))

    def see_tenant(self, tenant: str) -> None:
        if tenant not in self._tenants and len(self._tenants) < MAX_TENANTS:
            self._tenants[tenant] = None

    def gate(self, decision: GateDecision) -> None:
        self.gate_decisions.labels(action=decision.action, reason=reason_category(decision)).inc()

    async def refresh(self) -> None:
        """Read the store-backed gauges (counts, importance, queue depth)."""
        by_type: dict[str, int] = {}
        by_status: dict[str, int] = {}
        weighted = 0.0
        counted = 0
        if self.keys is not None:
            for record in self.keys.records():
                self.see_tenant(record.tenant)
        for tenant in list(self._tenants):
            stats = await self.memory.stats(tenant_id=tenant)
            for key, n in stats.by_type.items():
                by_type[key] = by_type.get(key, 0) + n
            for key, n in stats.by_status.items():
                by_status[key] = by_status.get(key, 0) + n
            if stats.avg_importance is not None and stats.total:
                weighted += stats.avg_importance * stats.total
                counted += stats.total
        self.memories.clear()
        for key, n in by_type.items():
            self.memories.labels(type=key).set(n)
        self.by_status.clear()
        for key, n in by_status.items():
            self.by_status.labels(status=key).set(n)
        self.avg_importance.set(weighted / counted if counted else 0.0)
        queued = await self.memory.store.aexecute(ListJobs(("queued",), tenant_id=None, limit=MAX_QUEUE_SCAN))
        self.queue_depth.set(len(queued))

    async def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        await self.refresh()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestMetrics:
    """ASGI middleware: request id, latency histogram and one JSON log line per request.

    The tenant comes from ``request.state.tenant``, which the auth dependency sets.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope.get("headers", []))
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route_obj = scope.get("route")
            route = getattr(route_obj, "path", None) or UNMATCHED
            method = str(scope.get("method", ""))
            self.metrics.request_seconds.labels(method=method, route=route).observe(elapsed)
            tenant = state.get("tenant")
            if isinstance(tenant, str):
                self.metrics.see_tenant(tenant)
            record = {
                "request_id": request_id,
                "method": method,
                "path": str(scope.get("path", "")),
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
                "tenant": tenant if isinstance(tenant, str) else None,
            }
            log.info(json.dumps(record, ensure_ascii=False), extra={"http": record})
