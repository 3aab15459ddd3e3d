"""An MCP server for jiyi: the memory tools over stdio or streamable HTTP.

The server advertises exactly the tools of :mod:`jiyi.integrations.tools`
(``memory_save``, ``memory_search``, ``memory_delete``, ``memory_stats``,
``memory_context`` and, when a user or project is served, the read-only
``memory_profile``) with the same JSON Schemas, and answers every call through the
same dispatcher, so the tool logic exists once. It is built on the official MCP Python
SDK's low-level :class:`mcp.server.lowlevel.Server` (``MCPServer``, the SDK's high-level
API, derives schemas from Python signatures; here the schemas already exist).

Whose memory it serves (tenant, user, project, session, agent) is fixed when the
server starts: a client cannot read or write anyone else's memories.

A call the model got wrong (bad or missing arguments, an unknown id, a refused write)
is a normal result with ``isError`` set and ``{"error": {"code", "message"}}`` as its
content, so the model can read it and try again. An unknown tool name is a protocol
error (JSON-RPC ``-32602``), as the MCP specification asks.

Start it with ``jiyi mcp`` (see :func:`run`) or embed :func:`build_server`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from jiyi.config import GateConfig
from jiyi.integrations.tools import AsyncMemoryTools, MemoryTools
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.storage import open_memory

log = logging.getLogger("jiyi.mcp")

Transport = Literal["stdio", "streamable-http"]
DEFAULT_PORT = 8765
DEFAULT_USER = "default"

INSTRUCTIONS = (
    "Long-term memory for this user (jiyi). Save durable facts and preferences with memory_save "
    "when the user says 「记住」「帮我记住」「我是…」 or 'remember that ...'; recall them with "
    "memory_search (Chinese and English queries both work) before answering questions that depend "
    "on who the user is or on earlier decisions; memory_context loads background for a task; "
    "memory_profile shows the user's (and project's) profile: who they are and how they want answers."
)

_ANNOTATIONS: dict[str, types.ToolAnnotations] = {
    "memory_save": types.ToolAnnotations(
        title="Save a memory", read_only_hint=False, destructive_hint=False, open_world_hint=False
    ),
    "memory_search": types.ToolAnnotations(
        title="Search memories", read_only_hint=True, open_world_hint=False
    ),
    "memory_delete": types.ToolAnnotations(
        title="Delete a memory", read_only_hint=False, destructive_hint=True, open_world_hint=False
    ),
    "memory_stats": types.ToolAnnotations(
        title="Memory statistics", read_only_hint=True, open_world_hint=False
    ),
    "memory_context": types.ToolAnnotations(
        title="Load background context", read_only_hint=True, open_world_hint=False
    ),
    "memory_profile": types.ToolAnnotations(
        title="Read the user/project profile", read_only_hint=True, open_world_hint=False
    ),
}


def build_server(
    memory: Memory | AsyncMemory,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    name: str = "jiyi",
) -> Server[Any]:
    """An MCP server whose tools act on ``memory`` for the given scope ids.

    With an :class:`~jiyi.memory.AsyncMemory` calls are awaited on the event loop; with a
    :class:`~jiyi.memory.Memory` each call runs in a worker thread.
    """
    scope: dict[str, Any] = {
        "user_id": user_id,
        "project_id": project_id,
        "session_id": session_id,
        "agent_id": agent_id,
        "tenant_id": tenant_id,
    }
    dispatcher: MemoryTools | AsyncMemoryTools = (
        AsyncMemoryTools(memory, **scope, profile_tool=True)
        if isinstance(memory, AsyncMemory)
        else MemoryTools(memory, **scope, profile_tool=True)
    )
    schemas = {s["function"]["name"]: s["function"] for s in dispatcher.schemas()}
    tools = [
        types.Tool(
            name=fn["name"],
            description=fn["description"],
            input_schema=fn["parameters"],
            annotations=_ANNOTATIONS.get(fn["name"]),
        )
        for fn in schemas.values()
    ]

    async def dispatch(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(dispatcher, AsyncMemoryTools):
            return await dispatcher.call(tool, arguments)
        return await anyio.to_thread.run_sync(functools.partial(dispatcher.call, tool, arguments))

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in schemas:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; this server has: {', '.join(schemas)}",
            )
        result = await dispatch(params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    def input_schema(tool: str) -> Mapping[str, Any] | None:
        fn = schemas.get(tool)
        return None if fn is None else fn["parameters"]

    return Server(
        name,
        version=_version(),
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _version() -> str:
    from jiyi import __version__

    return __version__


async def serve(
    db_path: str | Path,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    path: str = "/mcp",
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    embedder: str | None = None,
    gate: GateConfig | None = None,
    log_level: str = "warning",
) -> None:
    """:func:`run`, for callers that already have an event loop."""
    if transport not in ("stdio", "streamable-http"):
        raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'streamable-http'")
    if user_id is None and project_id is None and session_id is None and agent_id is None:
        user_id = DEFAULT_USER
    memory = open_memory(db_path, embedder=embedder, gate=gate or GateConfig.from_env())
    async with memory:
        server = build_server(
            memory,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
        )
        if transport == "stdio":
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        import uvicorn

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower())
        await uvicorn.Server(config).serve()


def run(
    db_path: str | Path,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    path: str = "/mcp",
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    embedder: str | None = None,
    gate: GateConfig | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the memory tools on the store ``db_path`` names until stopped.

    ``db_path`` is a SQLite file path, ``sqlite:///path.db`` or ``postgresql://user@host/db``
    (see :func:`jiyi.store.open.open_store`).

    ``transport="stdio"`` talks MCP over stdin/stdout (for desktop clients that spawn
    the server); ``"streamable-http"`` listens on ``http://{host}:{port}{path}``
    (localhost by default, with the SDK's DNS-rebinding protection). The scope ids say
    whose memory is served; with none given it is user ``"default"``. ``gate`` defaults
    to the ``MEMORY_*`` environment settings, ``embedder`` to the offline default.
    """
    anyio.run(
        functools.partial(
            serve,
            db_path,
            transport=transport,
            host=host,
            port=port,
            path=path,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            embedder=embedder,
            gate=gate,
            log_level=log_level,
        )
    )
