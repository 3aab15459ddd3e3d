"""REST edges found by the attack run of issue 15 (item 7): guessing keys is rate limited
per client address, OPTIONS answers the path's methods, and the OpenAPI document states
constraints the server enforces (numbers are numbers, an add needs a scope)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.memory import AsyncMemory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.store.sqlite import SQLiteStore

EMBEDDER = "hash:256"


@pytest.fixture
async def app_key(tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "edges.db"), embedder=EMBEDDER)
    keys = ApiKeys()
    key = keys.add("acme", "owner")[1]
    yield create_app(memory, keys=keys, rate_limit_per_minute=3), key
    await memory.aclose()


def _client(app: Any, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://t")


async def test_bad_keys_are_rate_limited_per_client_address(app_key: tuple[Any, str]) -> None:
    app, key = app_key
    async with _client(app, "10.0.0.1") as guesser, _client(app, "10.0.0.2") as other:
        for _ in range(3):
            assert (
                await guesser.get("/v1/stats", headers={"X-API-Key": "jiyi_bad.guess"})
            ).status_code == 401
        assert (await guesser.get("/v1/stats")).status_code == 429  # a missing key counts too
        r = await guesser.get("/v1/stats", headers={"X-API-Key": "jiyi_bad.guess"})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["code"] == "rate_limited"
        # A valid key keeps its own budget; another address its own.
        assert (await guesser.get("/v1/stats", headers={"X-API-Key": key})).status_code == 200
        assert (await other.get("/v1/stats", headers={"X-API-Key": "jiyi_bad.guess"})).status_code == 401


async def test_options_answers_the_paths_methods(app_key: tuple[Any, str]) -> None:
    app, _ = app_key
    async with _client(app, "10.0.0.3") as c:
        r = await c.options("/v1/memories")
        assert (r.status_code, r.headers["Allow"]) == (204, "GET, OPTIONS, POST")
        r = await c.options("/v1/memories/some-id")
        assert (r.status_code, r.headers["Allow"]) == (204, "DELETE, GET, OPTIONS, PATCH")
        assert (await c.options("/v1/no-such-route")).status_code == 404
        r = await c.request("PATCH", "/healthz")
        assert (r.status_code, r.headers["Allow"]) == (405, "GET, OPTIONS")


async def test_numbers_are_numbers_and_the_schema_says_what_is_enforced(app_key: tuple[Any, str]) -> None:
    app, key = app_key
    async with _client(app, "10.0.0.4") as c:
        c.headers["X-API-Key"] = key
        r = await c.post("/v1/suggest", json={"task": "deploy the app", "min_success_rate": False})
        assert r.status_code == 422 and r.json()["error"]["field"] == "min_success_rate"
        r = await c.post(
            "/v1/memories", json={"content": "Bob likes tea", "user_id": "bob", "confidence": True}
        )
        assert r.status_code == 422
        r = await c.post(
            "/v1/memories", json={"content": "Bob likes green tea", "user_id": "bob", "confidence": 1}
        )
        assert r.status_code == 201, r.text
        doc = (await c.get("/openapi.json")).json()
    add = doc["components"]["schemas"]["AddRequest"]
    assert {tuple(x["required"]) for x in add["anyOf"]} == {
        ("user_id",),
        ("project_id",),
        ("session_id",),
        ("agent_id",),
    }
    assert "MEMORY_MIN_LENGTH" in add["properties"]["content"]["description"]


async def test_mcp_http_limits_failed_key_checks_per_client_address() -> None:
    pytest.importorskip("mcp")
    from starlette.responses import PlainTextResponse

    from jiyi.server.mcp import ApiKeyAuth

    keys = ApiKeys()
    key = keys.add("acme", "owner")[1]
    app = ApiKeyAuth(PlainTextResponse("mcp here"), keys, failures_per_minute=2)
    async with _client(app, "10.0.0.5") as guesser, _client(app, "10.0.0.6") as other:
        codes = [
            (await guesser.post("/mcp", headers={"X-API-Key": "jiyi_x.guess"})).status_code for _ in range(3)
        ]
        assert codes == [401, 401, 429]
        r = await guesser.post("/mcp")
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["retry-after"]) >= 1
        assert (await guesser.post("/mcp", headers={"X-API-Key": key})).text == "mcp here"
        assert (await other.post("/mcp", headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_serve_loads_the_embedder_before_the_first_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from jiyi.server.run import _warm_up

    calls: list[list[str]] = []

    def counting(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[1.0, 0.0, 0.0] for _ in texts]

    memory = AsyncMemory(SQLiteStore(tmp_path / "warm.db"), embedder=counting)
    await _warm_up(memory)
    assert calls == [["jiyi"]]
    await memory.aclose()

    def down(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedding endpoint refused the connection")

    memory = AsyncMemory(SQLiteStore(tmp_path / "down.db"), embedder=down)
    await _warm_up(memory)  # serving goes on; the log says why searches will fail
    assert "the embedder did not answer at start" in caplog.text and "refused" in caplog.text
    await memory.aclose()
