"""mem0's REST paths under /mem0 (jiyi.server.routes.mem0), in process over
``httpx.ASGITransport`` into a real SQLite file: the bodies mem0's client sends, the
results mem0's Memory returns, and jiyi's keys, tenancy, visibility and roles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.memory import AsyncMemory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.store.sqlite import SQLiteStore

BASE = "/mem0/v1"


@dataclass
class Env:
    client: httpx.AsyncClient
    keys: dict[str, str]

    async def call(self, who: str, method: str, url: str, **kw: Any) -> httpx.Response:
        # mem0's client authenticates with "Authorization: Token <key>"
        headers = {"Authorization": f"Token {self.keys[who]}"}
        return await self.client.request(method, BASE + url, headers=headers, **kw)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "mem0.db"), embedder="hash:256")
    keys = ApiKeys()
    made = {
        name: keys.add(tenant, role)[1]
        for name, tenant, role in [
            ("owner", "acme", "owner"),
            ("editor", "acme", "editor"),
            ("editor2", "acme", "editor"),
            ("viewer", "acme", "viewer"),
            ("other", "globex", "owner"),
        ]
    }
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield Env(client, made)
    await memory.aclose()


async def _add(env: Env, who: str, text: str, **extra: Any) -> str:
    body = {"messages": [{"role": "user", "content": text}], "user_id": "alice", "infer": False, **extra}
    r = await env.call(who, "POST", "/memories/", json=body)
    assert r.status_code == 200, r.text
    [result] = r.json()["results"]
    assert result["event"] == "ADD" and result["memory"] == text
    memory_id: str = result["id"]
    return memory_id


async def test_the_mem0_calls_round_trip(env: Env) -> None:
    r = await env.call("owner", "GET", "/ping/")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    # the body mem0's MemoryClient.add sends, output_format and version included
    body = {
        "messages": [{"role": "user", "content": "I am allergic to peanuts"}],
        "user_id": "alice",
        "metadata": {"source": "chat"},
        "output_format": "v1.1",
        "version": "v2",
    }
    r = await env.call("owner", "POST", "/memories/", json=body)
    assert r.status_code == 200, r.text
    [added] = r.json()["results"]
    assert added["event"] == "ADD" and "peanut" in added["memory"]
    tea = await _add(env, "owner", "Alice drinks green tea every morning")

    listed = (await env.call("owner", "GET", "/memories/", params={"user_id": "alice"})).json()["results"]
    assert {m["id"] for m in listed} == {added["id"], tea}
    assert all(m["user_id"] == "alice" and m["hash"] for m in listed)

    r = await env.call(
        "owner", "POST", "/memories/search/", json={"query": "green tea", "user_id": "alice", "top_k": 1}
    )
    [hit] = r.json()["results"]
    assert hit["id"] == tea and isinstance(hit["score"], float)
    r = await env.call(
        "owner",
        "POST",
        "/memories/search/",
        json={"query": "peanuts", "user_id": "alice", "filters": {"source": "chat"}},
    )
    assert [h["id"] for h in r.json()["results"]] == [added["id"]]

    got = (await env.call("owner", "GET", f"/memories/{tea}/")).json()
    assert got["memory"] == "Alice drinks green tea every morning"
    r = await env.call(
        "owner", "PUT", f"/memories/{tea}/", json={"text": "Alice drinks oolong tea every morning"}
    )
    assert r.status_code == 200, r.text
    assert (
        (await env.call("owner", "GET", f"/memories/{tea}/"))
        .json()["memory"]
        .startswith("Alice drinks oolong")
    )
    events = (await env.call("owner", "GET", f"/memories/{tea}/history/")).json()
    assert [e["event"] for e in events] == ["ADD", "UPDATE"]
    assert events[1]["old_memory"].endswith("green tea every morning")

    assert (await env.call("owner", "DELETE", f"/memories/{tea}/")).status_code == 200
    assert (await env.call("owner", "GET", f"/memories/{tea}/")).json()["error"]["code"] == "not_found"
    r = await env.call("owner", "DELETE", "/memories/", params={"user_id": "alice"})
    assert r.status_code == 200, r.text
    assert (await env.call("owner", "GET", "/memories/", params={"user_id": "alice"})).json() == {
        "results": []
    }


async def test_bad_calls_answer_jiyis_error_shape(env: Env) -> None:
    r = await env.call("owner", "GET", "/memories/")
    assert r.status_code == 422 and r.json()["error"]["field"] == "user_id"
    r = await env.call(
        "owner",
        "POST",
        "/memories/search/",
        json={"query": "x", "user_id": "a", "filters": {"k": {"bad": 1}}},
    )
    assert r.status_code == 422 and "unknown operator" in r.json()["error"]["message"]
    r = await env.call(
        "owner", "POST", "/memories/", json={"messages": "hello there", "user_id": "a", "app_id": "x"}
    )
    assert r.status_code == 422 and "app_id" in r.text
    r = await env.client.get(BASE + "/memories/", params={"user_id": "alice"})
    assert r.status_code == 401
    r = await env.client.get(BASE + "/ping/", headers={"Authorization": "Token nope"})
    assert r.status_code == 401


async def test_tenants_and_roles_hold(env: Env) -> None:
    mine = await _add(env, "editor", "Alice works on the billing service")
    theirs = await _add(env, "editor2", "Alice prefers short answers in reviews")
    # another tenant sees nothing, not even by id
    assert (await env.call("other", "GET", f"/memories/{mine}/")).status_code == 404
    r = await env.call("other", "GET", "/memories/", params={"user_id": "alice"})
    assert r.json() == {"results": []}
    assert (await env.call("other", "GET", f"/memories/{mine}/history/")).status_code == 404
    # a viewer reads but never writes
    assert (await env.call("viewer", "GET", f"/memories/{mine}/")).status_code == 200
    r = await env.call(
        "viewer", "POST", "/memories/", json={"messages": "I like jazz music", "user_id": "alice"}
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    # an editor changes only its own memories, and cannot wipe a user
    r = await env.call("editor", "PUT", f"/memories/{theirs}/", json={"text": "Alice prefers long answers"})
    assert r.status_code == 403
    assert (await env.call("editor", "DELETE", f"/memories/{theirs}/")).status_code == 403
    r = await env.call(
        "editor",
        "PUT",
        f"/memories/{mine}/",
        json={"text": "Alice works on the search service", "metadata": {"created_by": "forged"}},
    )
    assert r.status_code == 200, r.text
    assert (await env.call("editor", "GET", f"/memories/{mine}/")).json()["metadata"][
        "created_by"
    ] != "forged"
    assert (await env.call("editor", "DELETE", "/memories/", params={"user_id": "alice"})).status_code == 403
    assert (await env.call("editor", "DELETE", f"/memories/{mine}/")).status_code == 200
    # the audit history names the key that acted
    events = (await env.call("owner", "GET", f"/memories/{theirs}/history/")).json()
    assert events[0]["actor_id"] is not None


async def test_openapi_lists_the_mem0_paths_apart_from_jiyis(env: Env) -> None:
    doc = (await env.client.get("/openapi.json")).json()
    paths = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert {
        ("post", "/mem0/v1/memories/"),
        ("get", "/mem0/v1/memories/"),
        ("delete", "/mem0/v1/memories/"),
        ("post", "/mem0/v1/memories/search/"),
        ("get", "/mem0/v1/memories/{memory_id}/"),
        ("put", "/mem0/v1/memories/{memory_id}/"),
        ("delete", "/mem0/v1/memories/{memory_id}/"),
        ("get", "/mem0/v1/memories/{memory_id}/history/"),
    } <= paths
    assert ("post", "/v1/memories") in paths  # jiyi's own, untouched
