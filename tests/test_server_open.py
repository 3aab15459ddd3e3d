"""``jiyi serve`` and ``jiyi mcp`` open their store from a URL: ``sqlite:///...``, a plain
path (SQLite, as before) or ``postgresql://...``.

Real stores only: SQLite files in ``tmp_path`` and, when it can be started, the private
pgvector server of :mod:`tests.pg`. One real ``serve`` and one real MCP process run on
a ``sqlite:///`` URL in subprocesses; everything else runs in process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("fastapi")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.app import create_app
from jiyi.server.mcp import run as run_mcp
from jiyi.server.run import serve
from jiyi.server.storage import open_memory
from tests.pg import give_back, pg_dsn, take_schema, with_params  # noqa: F401

EMBEDDER = "hash:256"


async def _remember_and_find(memory: AsyncMemory, content: str) -> str:
    """Through the REST app over ``memory`` (single-tenant mode): add, search, readiness."""
    app = create_app(memory, rate_limit_per_minute=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        r = await client.post("/v1/memories", json={"content": content, "user_id": "alice"})
        assert r.status_code == 201, r.text
        item_id: str = r.json()["item"]["id"]
        r = await client.post("/v1/memories/search", json={"query": content, "user_id": "alice"})
        assert r.json()["hits"][0]["item"]["id"] == item_id
    return item_id


def _stored(path: Path, item_id: str) -> str:
    with Memory.open(path, embedder=EMBEDDER) as mem:
        return mem.get(item_id).content


@pytest.mark.parametrize("form", ["sqlite:////absolute", "sqlite:///relative", "str path", "Path"])
async def test_a_sqlite_url_or_a_plain_path_opens_the_same_file(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "memory.db"
    target: str | Path = {
        "sqlite:////absolute": f"sqlite:///{path}",  # path starts with "/": four slashes
        "sqlite:///relative": "sqlite:///memory.db",
        "str path": str(path),
        "Path": path,
    }[form]
    memory = open_memory(target, embedder=EMBEDDER)
    try:
        item_id = await _remember_and_find(memory, "Alice keeps her notes in Markdown")
    finally:
        await memory.aclose()
    assert _stored(path, item_id) == "Alice keeps her notes in Markdown"


def test_serve_and_mcp_refuse_an_unknown_scheme_before_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="unknown store URL scheme 'mysql'"):
        serve("mysql://db.example/memory", port=9, embedder=EMBEDDER)
    with pytest.raises(InvalidInput, match="unknown store URL scheme 'mysql'"):
        run_mcp("mysql://db.example/memory", embedder=EMBEDDER)
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the URL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until_healthy(proc: subprocess.Popen[bytes], base: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)


def test_jiyi_serve_on_a_sqlite_url(tmp_path: Path) -> None:
    db = tmp_path / "srv.db"
    port = _free_port()
    code = (
        "from jiyi.server.run import serve; "
        f"serve({'sqlite:///' + str(db)!r}, port={port}, embedder={EMBEDDER!r}, log_level='warning')"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_healthy(proc, base)
        r = httpx.post(f"{base}/v1/memories", json={"content": "Bob drinks green tea", "user_id": "bob"})
        assert r.status_code == 201, r.text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
    assert _stored(db, r.json()["item"]["id"]) == "Bob drinks green tea"


async def test_jiyi_mcp_on_a_sqlite_url(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    code = f"from jiyi.server.mcp import run; run({'sqlite:///' + str(db)!r}, embedder={EMBEDDER!r})"
    # The SDK passes the child only a few variables by default; it needs this PYTHONPATH.
    params = StdioServerParameters(command=sys.executable, args=["-c", code], env=dict(os.environ))
    with anyio.fail_after(30):
        async with Client(params) as client:
            saved = await client.call_tool("memory_save", {"content": "我是一名前端工程师"})
            assert not saved.is_error and saved.structured_content is not None, saved.content
            memory_id = saved.structured_content["id"]
    assert _stored(db, memory_id) == "我是一名前端工程师"


async def test_a_postgresql_url_serves_the_rest_api(pg_dsn: str) -> None:  # noqa: F811
    schema = take_schema()
    url = with_params(pg_dsn, schema=schema)
    try:
        memory = open_memory(url, embedder=EMBEDDER)
        try:
            item_id = await _remember_and_find(memory, "the deploy runs from the main branch")
        finally:
            await memory.aclose()
        again = open_memory(url, embedder=EMBEDDER)  # a second opening sees what the first wrote
        try:
            assert (await again.get(item_id)).content == "the deploy runs from the main branch"
        finally:
            await again.aclose()
    finally:
        give_back(pg_dsn, schema)
