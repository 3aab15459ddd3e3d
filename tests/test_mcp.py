"""The MCP server, driven by the MCP SDK's own client over stdio and streamable HTTP.

Each transport runs the real ``jiyi.server.mcp.run`` in a subprocess on a SQLite file
in ``tmp_path``; the processes are always stopped before the test ends.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from jiyi.memory import Memory
from jiyi.server.mcp import build_server

TOOL_NAMES = {
    "memory_save",
    "memory_search",
    "memory_delete",
    "memory_stats",
    "memory_context",
    "memory_profile",
}


def server_code(db: Path, **options: Any) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in options.items())
    return f"from jiyi.server.mcp import run; run({str(db)!r}, {args})"


async def exercise(client: Client) -> None:
    """What every transport must do: list, save, search, count, and survive bad calls."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOL_NAMES
    save = next(t for t in listed.tools if t.name == "memory_save")
    assert save.input_schema["required"] == ["content"]
    assert "记住" in (save.description or "")

    saved = await client.call_tool("memory_save", {"content": "我是一名前端工程师", "memory_type": "fact"})
    assert not saved.is_error
    assert saved.structured_content["status"] == "stored"
    memory_id = saved.structured_content["id"]

    found = await client.call_tool("memory_search", {"query": "what is the user's job?", "k": 3})
    assert not found.is_error
    results = found.structured_content["results"]
    assert results[0]["id"] == memory_id and results[0]["content"] == "我是一名前端工程师"
    assert memory_id in found.content[0].text  # type: ignore[union-attr]

    stats = await client.call_tool("memory_stats", {})
    assert stats.structured_content["total"] == 1
    assert stats.structured_content["by_type"] == {"fact": 1}

    bad = await client.call_tool("memory_search", {"query": "x", "k": "many"})
    assert bad.is_error
    assert bad.structured_content["error"]["code"] == "invalid_arguments"
    assert "integer" in bad.content[0].text  # type: ignore[union-attr]

    missing = await client.call_tool("memory_delete", {"memory_id": "no-such-id"})
    assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"

    with pytest.raises(MCPError) as info:
        await client.call_tool("memory_forget_everything", {})
    assert "memory_save" in info.value.message

    # The server is still serving after the bad calls.
    ctx = await client.call_tool("memory_context", {"query": "frontend work"})
    assert not ctx.is_error and "前端工程师" in ctx.structured_content["text"]


async def test_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    params = StdioServerParameters(command=sys.executable, args=["-c", server_code(db, user_id="alice")])
    with anyio.fail_after(30):
        async with Client(params) as client:
            await exercise(client)
    # The data is in the file: a second server on it sees the memory.
    with Memory.open(db) as mem:
        assert mem.stats(user_id="alice").total == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            server_code(tmp_path / "m.db", transport="streamable-http", port=port, user_id="alice"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {(tmp_path / 'server.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("server did not start within 30 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


async def test_streamable_http(http_server: str) -> None:
    with anyio.fail_after(30):
        async with Client(http_server) as client:
            await exercise(client)
        # A second connection is a new session on the same memory.
        async with Client(http_server) as again:
            stats = await again.call_tool("memory_stats", {})
            assert stats.structured_content["total"] == 1


async def test_in_process_with_a_sync_memory(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db") as mem:
        server = build_server(mem, user_id="alice", tenant_id="t1")
        async with Client(server) as client:
            await exercise(client)
        # Bound to tenant t1: nothing leaked into the default tenant.
        assert mem.stats(user_id="alice").total == 0
        assert mem.stats(user_id="alice", tenant_id="t1").total == 1
