"""An MCP server for jiyi: the memory tools over stdio or streamable HTTP.

The server advertises exactly the tools of :mod:`jiyi.integrations.tools`
(``memory_save``, ``memory_search``, ``memory_delete``, ``memory_stats``,
``memory_context``, ``memory_add_document``, ``memory_get_document``,
``memory_compress``, ``memory_uncompress``; when a user or
project is served, the read-only ``memory_profile``; when a user, project or agent is
served, ``memory_suggest`` and ``memory_learn``; when a session is served,
``memory_end_session``) with the same JSON Schemas, and answers every call through the
same dispatcher, so the tool logic exists once. It is built on the official MCP Python
SDK's low-level :class:`mcp.server.lowlevel.Server` (``MCPServer``, the SDK's high-level
API, derives schemas from Python signatures; here the schemas already exist).

Whose memory it serves (user, project, session, agent, and the tenant - with API keys,
the key's) is fixed when the server starts: a client cannot read or write anyone else's
memories. Per-memory visibility (``owner_only``) is not applied to the tools' reads.

Over stdio the server is local and trusted (the client spawned it). Over streamable
HTTP it takes API keys as the REST service does (:mod:`jiyi.server.auth`): with
``keys`` every request needs ``Authorization: Bearer <key>`` (or ``X-API-Key``), else
401; the tenant is the key's, each tool call acts as the key (its id is the ``actor``
in the history), a ``viewer`` key may only read (the tools of :data:`WRITE_TOOLS`
answer ``forbidden``), only an ``owner`` or ``admin`` key may compress (the tools of
:data:`EDIT_ANY_TOOLS` archive memories whoever made them), an ``editor`` key deletes only memories it created (and
``memory_learn`` updates only its own learnings, recording a new one otherwise), and a key
that is not a member of the served project may not use it. Without keys the server
binds to a loopback address only (:func:`serve` refuses any other host), where the
SDK's DNS-rebinding protection applies.

A call the model got wrong (bad or missing arguments, an unknown id, a refused write)
is a normal result with ``isError`` set and ``{"error": {"code", "message", "field", "problems"}}`` as its
content, so the model can read it and try again. An unknown tool name is a protocol
error (JSON-RPC ``-32602``), as the MCP specification asks.

Start it with ``jiyi mcp`` (see :func:`run`) or embed :func:`build_server`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from jiyi.config import GateConfig
from jiyi.errors import ConfigError, NotFound
from jiyi.integrations import mem0_tools
from jiyi.integrations.tools import AsyncMemoryTools, MemoryTools, error_result
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import Scope, scope_key
from jiyi.server.auth import LOOPBACK, ApiKeys, Principal
from jiyi.server.limits import RateLimiter
from jiyi.server.storage import open_memory
from jiyi.store.base import creator_of
from jiyi.who import Caller, Owner

log = logging.getLogger("jiyi.mcp")

Transport = Literal["stdio", "streamable-http"]
DEFAULT_PORT = 8765
DEFAULT_USER = "default"
PRINCIPAL = "jiyi.principal"
"""Where :class:`ApiKeyAuth` puts the caller (a :class:`Principal`) in the ASGI scope."""
EDIT_ANY_TOOLS = frozenset({"memory_compress", "memory_uncompress"}) | mem0_tools.DESTRUCTIVE
"""The tools that change memories whoever created them: owner and admin keys only."""
WRITE_TOOLS = (
    frozenset({"memory_save", "memory_delete", "memory_learn", "memory_add_document", "memory_end_session"})
    | mem0_tools.WRITE
    | EDIT_ANY_TOOLS
)
"""The tools a ``viewer`` key may not call (they change memory)."""
ToolSet = MemoryTools | AsyncMemoryTools

INSTRUCTIONS = (
    "Long-term memory for this user (jiyi). Save durable facts and preferences with memory_save "
    "when the user says 「记住」「帮我记住」「我是…」 or 'remember that ...'; recall them with "
    "memory_search (Chinese and English queries both work) before answering questions that depend "
    "on who the user is or on earlier decisions; memory_context loads background for a task; "
    "memory_profile shows the user's (and project's) profile: who they are and how they want answers; "
    "memory_suggest gives a plan that worked for a similar task and its known risks, memory_learn "
    "records what worked or failed; memory_add_document keeps a whole text; memory_compress merges old, "
    "rarely used memories (memory_uncompress undoes it); memory_end_session, when offered, closes the "
    "conversation."
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
    # Marks the learnings it used as used: bookkeeping, not a change the user would see.
    "memory_suggest": types.ToolAnnotations(
        title="Suggest a proven plan and its risks", read_only_hint=True, open_world_hint=False
    ),
    "memory_learn": types.ToolAnnotations(
        title="Record a skill, failure pattern or decomposition",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=False,
        open_world_hint=False,
    ),
    "memory_add_document": types.ToolAnnotations(
        title="Keep a document", read_only_hint=False, destructive_hint=False, open_world_hint=False
    ),
    "memory_get_document": types.ToolAnnotations(
        title="Read a stored document", read_only_hint=True, open_world_hint=False
    ),
    "memory_compress": types.ToolAnnotations(
        title="Compress old, rarely used memories",
        read_only_hint=False,
        destructive_hint=True,  # the originals are archived (memory_uncompress restores them)
        idempotent_hint=False,
        open_world_hint=False,
    ),
    "memory_uncompress": types.ToolAnnotations(
        title="Undo a compression",
        read_only_hint=False,
        destructive_hint=True,  # the core memories are archived
        idempotent_hint=False,
        open_world_hint=False,
    ),
    "memory_end_session": types.ToolAnnotations(
        title="End this session",
        read_only_hint=False,
        destructive_hint=True,  # its session memories are archived
        idempotent_hint=True,
        open_world_hint=False,
    ),
    # mem0 OpenMemory's names (jiyi mcp --mem0-names)
    "add_memories": types.ToolAnnotations(
        title="Save a memory (memory_save)",
        read_only_hint=False,
        destructive_hint=False,
        open_world_hint=False,
    ),
    "search_memory": types.ToolAnnotations(
        title="Search memories (memory_search)", read_only_hint=True, open_world_hint=False
    ),
    "list_memories": types.ToolAnnotations(title="List memories", read_only_hint=True, open_world_hint=False),
    "delete_all_memories": types.ToolAnnotations(
        title="Archive every memory", read_only_hint=False, destructive_hint=True, open_world_hint=False
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
    keys: ApiKeys | None = None,
    name: str = "jiyi",
    mem0_names: bool = False,
) -> Server[Any]:
    """An MCP server whose tools act on ``memory`` for the given scope ids.

    With an :class:`~jiyi.memory.AsyncMemory` calls are awaited on the event loop; with a
    :class:`~jiyi.memory.Memory` each call runs in a worker thread.

    With ``keys`` every call acts as the API key its HTTP request carried (see the module
    docstring; serve it with :func:`http_app`, which checks the key): the tenant is the
    key's, so ``tenant_id`` must not be given.

    ``mem0_names=True`` also offers the tool names of mem0's OpenMemory server
    (``add_memories``, ``search_memory``, ``list_memories``, ``delete_all_memories``) as
    aliases of jiyi's tools (:mod:`jiyi.integrations.mem0_tools`).
    """
    if keys is not None and tenant_id is not None:
        raise ConfigError("with API keys the tenant comes from each key; do not pass tenant_id")
    scope = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
    tools = _ToolServer(memory, scope, tenant_id, keys, mem0_names=mem0_names)
    return Server(
        name,
        version=_version(),
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )


def advertised_tools(
    memory: Memory | AsyncMemory,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    mem0_names: bool = False,
) -> list[types.Tool]:
    """The tools a server built with these arguments lists (for the reference page)."""
    scope = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
    return list(_ToolServer(memory, scope, None, None, mem0_names=mem0_names).tools)


class _ToolServer:
    """The MCP tools of one served scope: their schemas, and each call dispatched to the
    agent tools as the calling key (with keys) or as the server itself."""

    def __init__(
        self,
        memory: Memory | AsyncMemory,
        scope: dict[str, str | None],
        tenant_id: str | None,
        keys: ApiKeys | None,
        *,
        mem0_names: bool = False,
    ) -> None:
        self.memory = memory
        self.mem0_names = mem0_names
        self.scope = scope
        self.keys = keys
        self.dispatcher = self.tools_for(Caller(tenant_id=tenant_id, actor="memory_tools"))
        self.served = {scope_key(Scope(s), self.dispatcher.ids[f"{s}_id"]) for s in self.dispatcher.scopes}
        self.per_key: dict[str, ToolSet] = {}
        self.schemas = {s["function"]["name"]: s["function"] for s in self.dispatcher.schemas()}
        self.tools = [
            types.Tool(
                name=fn["name"],
                description=fn["description"],
                input_schema=fn["parameters"],
                annotations=_ANNOTATIONS.get(fn["name"]),
            )
            for fn in self.schemas.values()
        ]

    def tools_for(self, caller: Caller) -> ToolSet:
        owner = Owner(**self.scope)
        if isinstance(self.memory, AsyncMemory):
            return AsyncMemoryTools(
                self.memory, owner=owner, caller=caller, profile_tool=True, mem0_names=self.mem0_names
            )
        return MemoryTools(
            self.memory, owner=owner, caller=caller, profile_tool=True, mem0_names=self.mem0_names
        )

    def dispatcher_of(self, who: Principal) -> ToolSet:
        # Each key reads as itself: its tenant, and its viewer for project visibility.
        found = self.per_key.get(who.key_id)
        if found is None or found.caller != who.caller:
            found = self.per_key[who.key_id] = self.tools_for(who.caller)
        return found

    @staticmethod
    async def dispatch(acting: ToolSet, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(acting, AsyncMemoryTools):
            return await acting.call(tool, arguments)
        return await anyio.to_thread.run_sync(functools.partial(acting.call, tool, arguments))

    async def creator(self, acting: ToolSet, item_id: str) -> tuple[bool, str | None]:
        """Whether the item exists in the served scopes, and who created it:
        ``metadata.created_by`` (set by the REST service), else the actor of its first
        history event (the tools record the calling key there)."""
        mem = acting.memory
        tenant = acting.tenant_id
        try:
            if isinstance(mem, AsyncMemory):
                item = await mem.get(item_id, tenant_id=tenant)
                events = await mem.history(item_id, tenant_id=tenant)
            else:
                item = await anyio.to_thread.run_sync(functools.partial(mem.get, item_id, tenant_id=tenant))
                events = await anyio.to_thread.run_sync(
                    functools.partial(mem.history, item_id, tenant_id=tenant)
                )
        except NotFound:
            return False, None
        if item.scope_key not in self.served:  # the tool answers not_found, as for a missing id
            return False, None
        return True, creator_of(item) or (events[0].actor if events else None)

    async def refusal(
        self, who: Principal, acting: ToolSet, tool: str, arguments: Mapping[str, Any]
    ) -> str | None:
        """Why the key ``who`` may not make this call, or None when it may."""
        project_id = self.scope["project_id"]
        if project_id is not None and not who.member_of(project_id):
            return f"this key is not a member of project {project_id!r}"
        if tool in WRITE_TOOLS and not who.role.can_write:
            return f"{who.role.a_key} can only read; {tool} is not allowed"
        if tool in EDIT_ANY_TOOLS and not who.role.can_edit_any:
            what = "archive every memory" if tool in mem0_tools.DESTRUCTIVE else "compress memories"
            return f"{who.role.a_key} cannot {what}; {tool} needs an owner or admin key"
        memory_id = arguments.get("memory_id")
        if tool == "memory_delete" and not who.role.can_edit_any and isinstance(memory_id, str):
            found, made_by = await self.creator(acting, memory_id)
            if found and made_by != who.key_id:  # not found: the tool answers not_found
                return f"{who.role.a_key} can only delete memories it created"
        return None

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in self.schemas:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; this server has: {', '.join(self.schemas)}",
            )
        arguments = params.arguments or {}
        acting = self.dispatcher
        if self.keys is not None:
            request = getattr(ctx, "request", None)
            who = request.scope.get(PRINCIPAL) if request is not None else None
            if not isinstance(who, Principal):
                return _as_result(
                    error_result("unauthorized", "this server takes calls with an API key only")
                )
            acting = self.dispatcher_of(who)
            why = await self.refusal(who, acting, params.name, arguments)
            if why is not None:
                return _as_result(error_result("forbidden", why))
        return _as_result(await self.dispatch(acting, params.name, arguments))

    def input_schema(self, tool: str) -> Mapping[str, Any] | None:
        fn = self.schemas.get(tool)
        return None if fn is None else fn["parameters"]


def _as_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error="error" in result,
    )


class ApiKeyAuth:
    """ASGI middleware in front of the MCP HTTP app: every HTTP request needs a valid API
    key (``Authorization: Bearer <key>`` or ``X-API-Key: <key>``), else 401 in the REST
    service's error shape. The caller's :class:`Principal` goes into the ASGI scope
    (:data:`PRINCIPAL`, read by the tool handler), and as the SDK's authenticated user,
    so an MCP session can only be used with the key that opened it.

    Failed attempts (no key, a wrong key) are limited per client address to
    ``failures_per_minute`` (None: no limit); past it, 429 with ``Retry-After``, so keys
    cannot be guessed at full speed."""

    def __init__(self, app: ASGIApp, keys: ApiKeys, *, failures_per_minute: int | None = 60) -> None:
        self.app = app
        self.keys = keys
        self.failures = RateLimiter(failures_per_minute) if failures_per_minute else None

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "").strip()
        who = self.keys.verify(token) if token else None
        if who is None:
            wait = self._failed(scope)
            if wait is not None:
                await _refuse(
                    send, 429, "rate_limited", f"too many failed key checks; retry in {wait} s", wait
                )
            elif not token:
                await _refuse(
                    send,
                    401,
                    "unauthorized",
                    "missing API key: send Authorization: Bearer <key> or X-API-Key",
                )
            else:
                await _refuse(send, 401, "unauthorized", "invalid API key")
            return
        user = AuthenticatedUser(AccessToken(token=who.key_id, client_id=who.key_id, scopes=[who.role.value]))
        await self.app({**scope, "user": user, PRINCIPAL: who}, receive, send)

    def _failed(self, scope: AsgiScope) -> int | None:
        """Count a failed attempt against the client's address: None while within the
        limit, else the whole seconds to wait."""
        if self.failures is None:
            return None
        client = scope.get("client")
        wait = self.failures.check(f"client:{client[0] if client else '?'}")
        return None if wait is None else max(1, math.ceil(wait))


async def _refuse(send: Send, status: int, code: str, message: str, retry_after: int | None = None) -> None:
    body = json.dumps(
        {"error": {"code": code, "message": message, "field": None, "problems": [message]}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(
    server: Server[Any], *, keys: ApiKeys | None, host: str = "127.0.0.1", path: str = "/mcp"
) -> ASGIApp:
    """The streamable HTTP app of ``server``: behind :class:`ApiKeyAuth` with ``keys``
    (build the server with the same keys); without, only for a loopback ``host``."""
    check_http_bind(host, keys)
    app: ASGIApp = server.streamable_http_app(streamable_http_path=path, host=host)
    return app if keys is None else ApiKeyAuth(app, keys)


def check_http_bind(host: str, keys: ApiKeys | None) -> None:
    """Without keys, HTTP only on a loopback address: anyone reaching the port could
    otherwise read, write and delete the served memories."""
    if keys is None and host not in LOOPBACK:
        raise ConfigError(
            f"refusing to serve MCP over HTTP on {host} without API keys: pass a keys file "
            "(jiyi mcp --keys FILE; create keys with jiyi keys create) or bind to 127.0.0.1"
        )
    if keys is not None and not len(keys):
        raise ConfigError("the keys file holds no keys; create one first (jiyi keys create)")


def _load_keys(transport: Transport, host: str, keys_file: str | Path | None) -> ApiKeys | None:
    if transport == "stdio":
        if keys_file is not None:
            raise ConfigError("API keys are for --transport streamable-http; stdio is local and trusted")
        return None
    keys = None if keys_file is None else ApiKeys.load(keys_file)
    check_http_bind(host, keys)
    return keys


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
    keys_file: str | Path | None = None,
    redis: str | None = None,
    mem0_names: bool = False,
    read_url: str | None = None,
) -> None:
    """:func:`run`, for callers that already have an event loop."""
    if transport not in ("stdio", "streamable-http"):
        raise ValueError(f"unknown transport {transport!r}; use 'stdio' or 'streamable-http'")
    keys = _load_keys(transport, host, keys_file)
    if keys is not None and tenant_id is not None:
        raise ConfigError("with API keys the tenant comes from each key; do not pass a tenant")
    if user_id is None and project_id is None and session_id is None and agent_id is None:
        user_id = DEFAULT_USER
    memory = open_memory(
        db_path, redis=redis, read_url=read_url, embedder=embedder, gate=gate or GateConfig.from_env()
    )
    async with memory:
        server = build_server(
            memory,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            keys=keys,
            mem0_names=mem0_names,
        )
        if transport == "stdio":
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        import uvicorn

        app = http_app(server, keys=keys, host=host, path=path)
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
    keys_file: str | Path | None = None,
    redis: str | None = None,
    mem0_names: bool = False,
    read_url: str | None = None,
) -> None:
    """Serve the memory tools on the store ``db_path`` names until stopped.

    ``db_path`` is a SQLite file path, ``sqlite:///path.db`` or ``postgresql://user@host/db``
    (see :func:`jiyi.store.open.open_store`); ``redis`` an optional Redis URL shared with
    the other processes on that store (it must answer); ``read_url`` a PostgreSQL read
    replica for searches, lists and gets.

    ``transport="stdio"`` talks MCP over stdin/stdout (for desktop clients that spawn
    the server); ``"streamable-http"`` listens on ``http://{host}:{port}{path}``
    (localhost by default, with the SDK's DNS-rebinding protection). The scope ids say
    whose memory is served; with none given it is user ``"default"``. ``gate`` defaults
    to the ``MEMORY_*`` environment settings, ``embedder`` to the offline default.

    ``keys_file`` (streamable HTTP only; the key file of :mod:`jiyi.server.auth`) makes
    every request need one of its keys, whose tenant and role it then acts with (see the
    module docstring; ``tenant_id`` must then be None). Without it, HTTP is allowed on a
    loopback address only: any other ``host`` raises :class:`~jiyi.errors.ConfigError`
    before anything starts.

    ``mem0_names`` adds mem0 OpenMemory's tool names as aliases (see :func:`build_server`).
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
            keys_file=keys_file,
            redis=redis,
            mem0_names=mem0_names,
            read_url=read_url,
        )
    )
