"""GET /metrics, the request id and the JSON request log, in process on a real SQLite file."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from jiyi.memory import AsyncMemory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.server.metrics import _CacheCollector, reason_category, request_id_from
from jiyi.store.sqlite import SQLiteStore
from jiyi.write.gate import GateDecision

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
async def mem(tmp_path: Path) -> AsyncIterator[AsyncMemory]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "metrics.db"), embedder="hash:256")
    yield memory
    await memory.aclose()


@pytest.fixture
def keys() -> ApiKeys:
    return ApiKeys()


@pytest.fixture
async def client(mem: AsyncMemory, keys: ApiKeys) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(mem, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        yield c


async def scrape(client: httpx.AsyncClient) -> tuple[str, Samples]:
    r = await client.get("/metrics")  # no API key: scrapers need none
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return r.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_scrape_after_adds_and_searches(client: httpx.AsyncClient, keys: ApiKeys) -> None:
    acme = {"X-API-Key": keys.add("acme", "owner")[1]}
    globex = {"X-API-Key": keys.add("globex", "owner")[1]}

    async def add(headers: dict[str, str], content: str, **kw: Any) -> httpx.Response:
        return await client.post(
            "/v1/memories", headers=headers, json={"content": content, "user_id": "alice", **kw}
        )

    assert (
        await add(acme, "用户偏好使用 PostgreSQL 数据库", memory_type="preference", importance=0.8)
    ).status_code == 201
    assert (
        await add(acme, "The team decided to ship on Friday", memory_type="decision", importance=0.4)
    ).status_code == 201
    assert (
        await add(globex, "Bob works as a nurse in Hangzhou", memory_type="fact", importance=0.6)
    ).status_code == 201
    r = await add(acme, "用户偏好使用 PostgreSQL 数据库", memory_type="preference")
    assert r.status_code == 201 and r.json()["decision"]["action"] == "reinforce"
    assert (await add(acme, "hi")).status_code == 422
    for query in ("PostgreSQL", "ship date"):
        r = await client.post("/v1/memories/search", headers=acme, json={"query": query, "user_id": "alice"})
        assert r.status_code == 200, r.text
    r = await client.post(
        "/v1/sessions/s1/messages",
        headers=acme,
        json={
            "messages": [{"role": "user", "content": "I live in Hangzhou and work as a nurse"}],
            "user_id": "alice",
        },
    )
    assert r.status_code == 201 and r.json()["job_id"]

    text, samples = await scrape(client)
    # counts over every tenant, but no tenant ids
    assert value(samples, "jiyi_memories", type="preference") == 1
    assert value(samples, "jiyi_memories", type="decision") == 1
    assert value(samples, "jiyi_memories", type="fact") == 1
    assert value(samples, "jiyi_memories_by_status", status="active") == 3
    assert "acme" not in text and "globex" not in text
    avg = value(samples, "jiyi_memory_avg_importance")
    assert 0.4 <= avg <= 0.8
    # gate decisions
    assert value(samples, "jiyi_gate_decisions_total", action="add", reason="added") == 3
    assert value(samples, "jiyi_gate_decisions_total", action="reinforce", reason="duplicate") == 1
    assert value(samples, "jiyi_gate_decisions_total", action="reject", reason="too_short") == 1
    # latencies
    assert value(samples, "jiyi_search_seconds_count") == 2
    assert value(samples, "jiyi_request_seconds_count", method="POST", route="/v1/memories/search") == 2
    assert value(samples, "jiyi_request_seconds_count", method="POST", route="/v1/memories") == 5
    assert "# TYPE jiyi_request_seconds histogram" in text
    # the queued extraction job
    assert value(samples, "jiyi_extraction_queue_depth") == 1
    # the SQLite store keeps no cache counters: the families exist, without samples
    assert "# TYPE jiyi_cache_hits_total counter" in text


async def test_histograms_grow_and_routes_are_templates(client: httpx.AsyncClient, keys: ApiKeys) -> None:
    owner = {"X-API-Key": keys.add("acme", "owner")[1]}
    _, before = await scrape(client)
    for n in range(3):
        assert (await client.get(f"/v1/memories/missing-{n}", headers=owner)).status_code == 404
    assert (await client.get("/no/such/path")).status_code == 404
    text, after = await scrape(client)
    name = "jiyi_request_seconds_count"
    route = {"method": "GET", "route": "/v1/memories/{item_id}"}
    assert value(after, name, **route) - value(before, name, **route) == 3
    assert value(after, name, method="GET", route="<unmatched>") == 1
    assert (
        value(after, name, method="GET", route="/metrics")
        == value(before, name, method="GET", route="/metrics") + 1
    )
    assert "missing-0" not in text
    assert value(after, "jiyi_memories", type="fact") == 0  # empty store: no samples, no error
    assert value(after, "jiyi_memory_avg_importance") == 0.0


async def test_request_id_echoed_generated_and_logged(
    client: httpx.AsyncClient, keys: ApiKeys, caplog: pytest.LogCaptureFixture
) -> None:
    owner = {"X-API-Key": keys.add("acme", "owner")[1]}
    with caplog.at_level(logging.INFO, logger="jiyi.http"):
        r = await client.get("/v1/stats", headers={**owner, "X-Request-ID": "req-123"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "req-123"
        r2 = await client.get("/healthz")
        r3 = await client.get("/v1/stats", headers={"X-Request-ID": "bad id\twith spaces"})
    generated = r2.headers["x-request-id"]
    assert generated and generated != "req-123"
    assert r3.status_code == 401 and r3.headers["x-request-id"] != "bad id\twith spaces"

    lines = [json.loads(rec.getMessage()) for rec in caplog.records if rec.name == "jiyi.http"]
    first = next(line for line in lines if line["request_id"] == "req-123")
    assert first["method"] == "GET" and first["path"] == "/v1/stats" and first["route"] == "/v1/stats"
    assert first["status"] == 200 and first["tenant"] == "acme" and first["duration_ms"] >= 0
    assert any(line["request_id"] == generated and line["tenant"] is None for line in lines)
    assert any(line["status"] == 401 and line["tenant"] is None for line in lines)
    assert all(hasattr(rec, "http") for rec in caplog.records if rec.name == "jiyi.http")


async def test_single_tenant_mode_and_metrics_off(mem: AsyncMemory) -> None:
    app = create_app(mem)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        r = await c.post(
            "/v1/memories",
            json={"content": "Alice prefers green tea", "memory_type": "preference", "user_id": "alice"},
        )
        assert r.status_code == 201, r.text
        _, samples = await scrape(c)
        assert value(samples, "jiyi_memories", type="preference") == 1

    off = create_app(mem, metrics=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=off), base_url="http://127.0.0.1") as c:
        r = await c.get("/metrics")
        assert r.status_code == 404 and r.headers["x-request-id"]


def test_reason_categories() -> None:
    def reject(reason: str) -> str:
        return reason_category(GateDecision("reject", (reason,)))

    assert reject("too short: 2 characters, minimum is 5") == "too_short"
    assert reject("too long: 9000 characters, maximum is 4000; split it") == "too_long"
    assert reject("low value: greeting") == "low_value"
    assert reject("confidence 0.10 is below the minimum 0.30") == "low_confidence"
    assert reject("rate limit: session 's' already had 3 automatic extractions") == "rate_limit"
    assert reject("nothing but sensitive data is left after redaction") == "sensitive_only"
    assert reject("something new") == "other"
    assert reason_category(GateDecision("add", ("no duplicate in scope",))) == "added"
    assert reason_category(GateDecision("reinforce", ("duplicate of x",))) == "duplicate"


def test_request_id_from_headers() -> None:
    assert request_id_from([(b"X-Request-Id", b"abc.DEF_1:2-3")]) == "abc.DEF_1:2-3"
    assert len(request_id_from([(b"x-request-id", b"x" * 200)])) == 32
    assert len(request_id_from([])) == 32


def test_cache_counters_of_a_caching_store() -> None:
    """A store with ``stats.hits/misses`` (RedisCachedStore) shows up as cache="redis"."""
    fake = SimpleNamespace(store=SimpleNamespace(stats=SimpleNamespace(hits=7, misses=2)), runtime=None)
    families = {f.name: f for f in _CacheCollector(fake).collect()}  # type: ignore[arg-type]
    assert [(s.labels, s.value) for s in families["jiyi_cache_hits"].samples] == [({"cache": "redis"}, 7)]
    assert [(s.labels, s.value) for s in families["jiyi_cache_misses"].samples] == [({"cache": "redis"}, 2)]
