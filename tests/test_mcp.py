"""The MCP server, driven by the MCP SDK's own client over stdio and streamable HTTP.

Each transport runs the real ``jiyi.server.mcp.run`` in a subprocess on a SQLite file
in ``tmp_path``; the processes are always stopped before the test ends.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import jiyi
from jiyi.errors import ConfigError
from jiyi.memory import Memory
from jiyi.server.auth import create_key, parse_token
from jiyi.server.mcp import build_server, run

TOOL_NAMES = {
    "memory_save",
    "memory_search",
    "memory_delete",
    "memory_stats",
    "memory_context",
    "memory_profile",
    "memory_suggest",
    "memory_learn",
    "memory_add_document",
    "memory_get_document",
    "memory_compress",
    "memory_uncompress",
}
PLAN = {
    "kind": "decomposition",
    "task": "部署前端应用到生产环境",
    "subtasks": ["运行测试", "构建镜像", "灰度发布"],
    "strategy": "sequential",
    "succeeded": True,
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
    assert bad.structured_content["error"]["code"] == "invalid_input"
    assert "integer" in bad.content[0].text  # type: ignore[union-attr]

    missing = await client.call_tool("memory_delete", {"memory_id": "no-such-id"})
    assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"

    with pytest.raises(MCPError) as info:
        await client.call_tool("memory_forget_everything", {})
    assert "memory_save" in info.value.message

    # The server is still serving after the bad calls.
    ctx = await client.call_tool("memory_context", {"query": "frontend work"})
    assert not ctx.is_error and "前端工程师" in ctx.structured_content["text"]
    await procedural_and_documents(client)


async def procedural_and_documents(client: Client) -> None:
    """The tools beyond the seed's: learnings, suggestions and documents."""
    learned = await client.call_tool("memory_learn", PLAN)
    assert not learned.is_error and learned.structured_content["status"] == "recorded"
    advice = await client.call_tool("memory_suggest", {"task": "部署前端应用到生产环境"})
    assert advice.structured_content["found"], advice.structured_content
    assert advice.structured_content["subtasks"] == PLAN["subtasks"]
    wrong = await client.call_tool("memory_learn", {"kind": "failure", "pattern": "x"})
    assert wrong.is_error and wrong.structured_content["error"]["code"] == "invalid_input"
    assert "'mitigation'" in wrong.structured_content["error"]["message"]

    text = "Apollo 的发布流程：先跑测试，再构建镜像，最后灰度发布。" * 30
    added = await client.call_tool("memory_add_document", {"text": text, "title": "发布流程"})
    assert not added.is_error, added.structured_content
    whole = await client.call_tool(
        "memory_get_document", {"parent_id": added.structured_content["parent_id"]}
    )
    assert whole.structured_content["text"] == text and whole.structured_content["title"] == "发布流程"
    gone = await client.call_tool("memory_get_document", {"parent_id": "no-such-document"})
    assert gone.is_error and gone.structured_content["error"]["field"] == "parent_id"


async def test_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    # The SDK starts the server with a minimal environment: point it at the jiyi under test.
    env = {**get_default_environment(), "PYTHONPATH": str(Path(jiyi.__file__).parents[1])}
    params = StdioServerParameters(
        command=sys.executable, args=["-c", server_code(db, user_id="alice")], env=env
    )
    with anyio.fail_after(30):
        async with Client(params) as client:
            await exercise(client)
    # The data is in the file: a second server on it sees the memory (and the learning).
    with Memory.open(db) as mem:
        assert mem.stats(user_id="alice").by_type["fact"] == 1
        assert mem.suggest("部署前端应用到生产环境", user_id="alice").found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[str]:
    """``run(..., transport="streamable-http")`` in a subprocess on 127.0.0.1; its URL."""
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            server_code(tmp_path / "m.db", transport="streamable-http", port=port, **options),
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


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path, user_id="alice") as url:
        yield url


async def test_streamable_http(http_server: str) -> None:
    with anyio.fail_after(30):
        async with Client(http_server) as client:
            await exercise(client)
        # A second connection is a new session on the same memory.
        async with Client(http_server) as again:
            stats = await again.call_tool("memory_stats", {})
            assert stats.structured_content["by_type"]["fact"] == 1


async def test_in_process_with_a_sync_memory(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db") as mem:
        server = build_server(mem, user_id="alice", tenant_id="t1")
        async with Client(server) as client:
            await exercise(client)
        # Bound to tenant t1: nothing leaked into the default tenant.
        assert mem.stats(user_id="alice").total == 0
        assert mem.stats(user_id="alice", tenant_id="t1").by_type["fact"] == 1


async def test_a_served_session_can_be_ended(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db") as mem:
        server = build_server(mem, user_id="alice", session_id="s1")
        async with Client(server) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == TOOL_NAMES | {"memory_end_session"}
            assert listed["memory_end_session"].annotations.destructive_hint  # type: ignore[union-attr]
            assert listed["memory_suggest"].annotations.read_only_hint  # type: ignore[union-attr]
            assert not listed["memory_learn"].annotations.read_only_hint  # type: ignore[union-attr]
            saved = await client.call_tool(
                "memory_save",
                {"content": "这次对话在调试登录页的样式问题", "memory_type": "context", "scope": "session"},
            )
            mem.remember(
                [("user", "登录页的按钮错位了"), ("assistant", "先检查 flex 布局")],
                session_id="s1",
                user_id="alice",
            )
            ended = await client.call_tool("memory_end_session", {})
            assert not ended.is_error and ended.structured_content["episode_job_id"], ended.structured_content
            again = await client.call_tool("memory_end_session", {})
            assert (
                again.structured_content["already_ended"]
                and again.structured_content["episode_job_id"] is None
            )
            assert [j.kind for j in mem.jobs()].count("episode") == 1
            extra = await client.call_tool("memory_end_session", {"session_id": "s2"})
            assert extra.is_error and extra.structured_content["error"]["field"] == "session_id"
        assert mem.get(saved.structured_content["id"]).status.value == "archived"
        # Without a session there is nothing to end: the tool is not offered.
        async with Client(build_server(mem, user_id="alice")) as client:
            assert "memory_end_session" not in {t.name for t in (await client.list_tools()).tools}


async def test_compress_and_undo_it_over_mcp(tmp_path: Path) -> None:
    """The library's compress/uncompress, as MCP tools with the same argument names and errors."""
    with Memory.open(tmp_path / "m.db") as mem:
        for text in (
            "Alice's team deploys the billing service with Helm charts",
            "The billing service of Alice's team is deployed using Helm charts",
            "Alice's team uses Helm charts to deploy the billing service",
        ):
            mem.add(text, user_id="alice", memory_type="fact", infer=False)
        async with Client(build_server(mem, user_id="alice")) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert listed["memory_compress"].annotations.destructive_hint  # type: ignore[union-attr]
            done = await client.call_tool("memory_compress", {"older_than_days": 0})
            assert not done.is_error and done.structured_content["compressed"] == 3, done.structured_content
            core_id = done.structured_content["groups"][0]["cores"][0]["id"]
            undone = await client.call_tool("memory_uncompress", {"core_id": core_id})
            assert not undone.is_error and len(undone.structured_content["restored"]) == 3
            again = await client.call_tool("memory_uncompress", {"core_id": core_id})
            assert again.is_error and again.structured_content["error"]["field"] == "core_id"
            bad = await client.call_tool("memory_compress", {"older_than_days": -1})
            assert bad.is_error and bad.structured_content["error"] == {
                "code": "invalid_input",
                "message": "older_than_days must be at least 0, got -1",
                "field": "older_than_days",
                "problems": ["older_than_days must be at least 0, got -1"],
            }
        assert mem.stats(user_id="alice").by_status == {"active": 3, "archived": 1}  # the undone core


# ---------------------------------------------------------------- HTTP with API keys


@contextlib.asynccontextmanager
async def keyed_client(url: str, key: str, header: str = "Authorization") -> AsyncIterator[Client]:
    value = f"Bearer {key}" if header == "Authorization" else key
    async with (
        create_mcp_http_client(headers={header: value}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}


def post_initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(url, json=INITIALIZE, headers={**base, **headers}, timeout=10)


async def test_streamable_http_with_keys(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    owner = create_key(keys_file, "acme", "owner")
    editor = create_key(keys_file, "acme", "editor")
    viewer = create_key(keys_file, "acme", "viewer")
    other = create_key(keys_file, "globex", "owner")
    forged = f"{owner[: owner.rindex('_')]}_not-the-secret"
    with serving(tmp_path, user_id="alice", keys_file=str(keys_file)) as url:
        # No key, a wrong key, a forged secret: 401 before any MCP is spoken.
        for headers in (
            {},
            {"Authorization": "Bearer nope"},
            {"Authorization": f"Bearer {forged}"},
            {"X-API-Key": "x"},
        ):
            r = await anyio.to_thread.run_sync(post_initialize, url, headers)
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["error"]["code"] == "unauthorized" and r.headers["www-authenticate"] == "Bearer"
        with anyio.fail_after(60):
            async with keyed_client(url, owner) as client:
                await exercise(client)  # a valid key works (the same checks as without keys)
                owners = (
                    await client.call_tool("memory_search", {"query": "job", "k": 5})
                ).structured_content
                memory_id = owners["results"][0]["id"]

            async with keyed_client(url, viewer, header="X-API-Key") as client:
                found = await client.call_tool("memory_search", {"query": "what is the user's job?"})
                assert not found.is_error and found.structured_content["results"][0]["id"] == memory_id
                advice = await client.call_tool("memory_suggest", {"task": "部署前端应用到生产环境"})
                assert not advice.is_error and advice.structured_content["found"]  # reading is allowed
                for tool, args in (
                    ("memory_save", {"content": "The user prefers tea over coffee"}),
                    ("memory_delete", {"memory_id": memory_id, "hard": True}),
                    ("memory_learn", {**PLAN, "succeeded": False}),
                    ("memory_add_document", {"text": "A viewer's document must not be kept. " * 20}),
                    ("memory_compress", {"older_than_days": 0}),
                    ("memory_uncompress", {"core_id": memory_id}),
                ):
                    refused = await client.call_tool(tool, args)
                    assert refused.is_error, tool
                    assert refused.structured_content["error"]["code"] == "forbidden", (
                        refused.structured_content
                    )

            async with keyed_client(url, editor) as client:
                refused = await client.call_tool("memory_delete", {"memory_id": memory_id, "hard": True})
                assert refused.structured_content["error"]["code"] == "forbidden"  # not the editor's
                # Compression archives memories whoever made them: owners and admins only.
                refused = await client.call_tool("memory_compress", {"older_than_days": 0})
                assert refused.structured_content["error"]["code"] == "forbidden"
                saved = await client.call_tool(
                    "memory_save", {"content": "The user prefers green tea to coffee"}
                )
                assert saved.structured_content["status"] == "stored", saved.structured_content
                own = await client.call_tool("memory_delete", {"memory_id": saved.structured_content["id"]})
                assert own.structured_content["status"] == "archived", own.structured_content
                # The owner's plan is not the editor's to change: the editor's run is its own learning.
                learned = await client.call_tool("memory_learn", {**PLAN, "succeeded": False})
                assert learned.structured_content["status"] == "recorded", learned.structured_content

            async with keyed_client(url, other) as client:  # another tenant: nothing is visible
                assert (await client.call_tool("memory_stats", {})).structured_content["total"] == 0
                gone = await client.call_tool("memory_delete", {"memory_id": memory_id, "hard": True})
                assert gone.structured_content["error"]["code"] == "not_found"

    # The tenant came from the key; the viewer and the other tenant changed nothing.
    with Memory.open(tmp_path / "m.db") as mem:
        assert mem.stats(user_id="alice").total == 0
        kept = mem.get(memory_id, tenant_id="acme")
        assert kept.status.value == "active"
        assert mem.stats(user_id="alice", tenant_id="acme").by_type["fact"] == 2
        # The owner's plan kept its one successful run: the viewer's and editor's failures did not count.
        advice = mem.suggest("部署前端应用到生产环境", user_id="alice", tenant_id="acme")
        assert advice.found and advice.success_rate == 1.0 and advice.usage_count == 1
        assert [e.actor for e in mem.history(memory_id, tenant_id="acme")] == [parse_token(owner)[0]]  # type: ignore[index]


def refused_to_start(args: list[str]) -> str:
    """Run a server command that must refuse to start; its stderr. (Had it started, it
    would serve until the timeout: the test fails instead of hanging.)"""
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stderr
    return proc.stderr


def test_http_without_keys_binds_to_loopback_only(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    for host in ("0.0.0.0", "::"):
        code = server_code(db, transport="streamable-http", host=host, port=free_port())
        assert "refusing to serve MCP over HTTP" in refused_to_start(["-c", code])
    # The command line says why, in one line.
    cli = ["-m", "jiyi.cli", "--db", str(db), "mcp", "--transport", "streamable-http", "--host", "0.0.0.0"]
    err = refused_to_start([*cli, "--port", str(free_port())])
    assert "without API keys" in err and "Traceback" not in err
    assert not db.exists()  # refused before anything was opened

    empty = tmp_path / "empty.json"
    with pytest.raises(ConfigError, match="holds no keys"):
        run(db, transport="streamable-http", host="0.0.0.0", keys_file=empty)
    with pytest.raises(ConfigError, match="stdio"):
        run(db, keys_file=empty)
    keys_file = tmp_path / "keys.json"
    create_key(keys_file, "acme", "owner")
    with pytest.raises(ConfigError, match="tenant comes from each key"):
        run(db, transport="streamable-http", keys_file=keys_file, tenant_id="acme")
    assert not db.exists()


async def test_streamable_http_keys_must_be_members_of_the_served_project(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    outsider = create_key(keys_file, "acme", "editor", projects=["gemini"])
    member = create_key(keys_file, "acme", "viewer", projects=["apollo"])
    with serving(tmp_path, project_id="apollo", keys_file=str(keys_file)) as url, anyio.fail_after(60):
        async with keyed_client(url, outsider) as client:
            for tool, args in (("memory_stats", {}), ("memory_save", {"content": "Apollo ships in May"})):
                refused = await client.call_tool(tool, args)
                assert refused.structured_content["error"]["code"] == "forbidden", refused.structured_content
                assert "not a member of project 'apollo'" in refused.structured_content["error"]["message"]
        async with keyed_client(url, member) as client:
            stats = await client.call_tool("memory_stats", {})
            assert not stats.is_error and stats.structured_content["total"] == 0


# ---------------------------------------------------------------- mem0 OpenMemory's tool names

MEM0_NAMES = {"add_memories", "search_memory", "list_memories", "delete_all_memories"}


async def test_mem0_names_are_aliases_of_jiyis_tools(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db") as mem:
        async with Client(build_server(mem, user_id="alice")) as client:  # off unless asked
            assert not MEM0_NAMES & {t.name for t in (await client.list_tools()).tools}
        async with Client(build_server(mem, user_id="alice", mem0_names=True)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == TOOL_NAMES | MEM0_NAMES
            assert listed["add_memories"].input_schema["required"] == ["text"]
            assert listed["delete_all_memories"].annotations.destructive_hint  # type: ignore[union-attr]
            added = await client.call_tool("add_memories", {"text": "The user is a frontend engineer"})
            assert added.structured_content["status"] == "stored", added.structured_content
            again = await client.call_tool("memory_save", {"content": "The user is a frontend engineer"})
            assert again.structured_content["status"] == "reinforced"  # one write pipeline
            await client.call_tool("add_memories", {"text": "The user prefers dark mode in every editor"})
            found = await client.call_tool("search_memory", {"query": "what is the user's job?"})
            assert found.structured_content["results"][0]["id"] == added.structured_content["id"]
            listed_now = (await client.call_tool("list_memories", {})).structured_content
            assert listed_now["count"] == 2
            assert listed_now["results"][0]["memory"] == "The user is a frontend engineer"
            bad = await client.call_tool("add_memories", {"content": "x"})
            assert bad.is_error and bad.structured_content["error"]["code"] == "invalid_input"
            gone = await client.call_tool("delete_all_memories", {})
            assert gone.structured_content == {"status": "archived", "count": 2}
            assert (await client.call_tool("list_memories", {})).structured_content["count"] == 0
        # archived, not purged: the history says who did it and why
        item = mem.get(added.structured_content["id"])
        assert item.status.value == "archived"
        assert "delete_all_memories" in (mem.history(item.id)[-1].reason or "")


async def test_mem0_names_with_keys_keep_the_roles(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    owner = create_key(keys_file, "acme", "owner")
    editor = create_key(keys_file, "acme", "editor")
    viewer = create_key(keys_file, "acme", "viewer")
    with serving(tmp_path, user_id="alice", keys_file=str(keys_file), mem0_names=True) as url:
        with anyio.fail_after(60):
            async with keyed_client(url, viewer) as client:
                refused = await client.call_tool("add_memories", {"text": "The user likes jazz music"})
                assert refused.structured_content["error"]["code"] == "forbidden"
            async with keyed_client(url, editor) as client:
                saved = await client.call_tool("add_memories", {"text": "The user likes jazz music"})
                assert saved.structured_content["status"] == "stored", saved.structured_content
                refused = await client.call_tool("delete_all_memories", {})
                assert refused.structured_content["error"]["code"] == "forbidden"
            async with keyed_client(url, owner) as client:
                listed = (await client.call_tool("list_memories", {})).structured_content
                assert [m["memory"] for m in listed["results"]] == ["The user likes jazz music"]
                gone = await client.call_tool("delete_all_memories", {})
                assert gone.structured_content["count"] == 1
    with Memory.open(tmp_path / "m.db") as mem:
        assert mem.stats(user_id="alice", tenant_id="acme").by_status == {"archived": 1}


def test_the_cli_passes_mem0_names() -> None:
    from jiyi.cli import build_parser

    ns = build_parser().parse_args(["mcp", "--mem0-names", "--user", "alice"])
    assert ns.mem0_names is True and ns.handler.__name__ == "cmd_mcp"
