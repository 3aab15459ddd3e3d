"""The servers: ``jiyi serve`` (REST), ``jiyi keys`` (its API keys), ``jiyi mcp``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from jiyi.cli.common import (
    EXIT_OK,
    Parser,
    duration,
    embedder_spec,
    emit,
    files_arg,
    files_dir,
    integer,
    json_arg,
    llm_spec,
    port,
    read_url,
    redis_url,
    scope,
    scope_args,
    store_target,
)
from jiyi.errors import ConfigError, InvalidInput, install_hint

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    _register_serve(sub)
    _register_keys(sub)
    p = sub.add_parser("mcp", help="run the MCP server (stdio or streamable HTTP)")
    p.add_argument(
        "--transport",
        default="stdio",
        choices=["stdio", "streamable-http"],
        help="stdio for a desktop client (default), streamable-http to serve over HTTP",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="with streamable-http: address to bind (default 127.0.0.1)"
    )
    p.add_argument("--port", type=port, default=8766, help="with streamable-http: port (default 8766)")
    p.add_argument(
        "--keys",
        metavar="FILE",
        help="streamable HTTP: API key file; every request then needs a key, and acts in its "
        "tenant with its role (required unless bound to a loopback address)",
    )
    p.add_argument(
        "--mem0-names",
        action="store_true",
        help="also offer mem0 OpenMemory's tool names (add_memories, search_memory, list_memories, "
        "delete_all_memories) as aliases of jiyi's tools",
    )
    scope_args(p)
    p.set_defaults(handler=cmd_mcp)


def _register_serve(sub: Subparsers) -> None:
    p = sub.add_parser(
        "serve",
        help="run the REST service (and the background worker)",
        description="Run the REST service and a job worker on the store --db names. Several can "
        "share one postgresql:// store: give them all the same --redis (before the command, "
        "like --db) to share the rate limit and the maintenance schedule; see docs/deploy.md.",
    )
    files_arg(p, "keep memory.md / learnings.md under DIR and sync edits to them as they happen")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=8765, help="port (default 8765)")
    p.add_argument(
        "--keys", metavar="FILE", help="API key file (required unless bound to a loopback address)"
    )
    p.add_argument("--rate-limit", type=integer, default=600, metavar="N", help="requests per minute per key")
    p.add_argument(
        "--max-body", type=integer, default=1_000_000, metavar="BYTES", help="largest request body"
    )
    p.add_argument(
        "--maintain-every",
        type=duration,
        default=86400.0,
        metavar="DURATION",
        help="run the lifecycle pass (decay, expiry, retention) for every tenant this often, "
        "e.g. 30m, 6h, 1d (default 1d); 0 turns the schedule off",
    )
    p.set_defaults(handler=cmd_serve)


def _register_keys(sub: Subparsers) -> None:
    p = sub.add_parser("keys", help="create, list or revoke API keys for the REST and MCP services")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", parser_class=Parser, required=True)
    k = keys.add_parser("create", help="create a key (printed once; only its hash is stored)")
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    k.add_argument("--tenant", required=True, metavar="ID", help="tenant the key may see")
    k.add_argument(
        "--role",
        default="editor",
        choices=["owner", "admin", "editor", "viewer"],
        help="what the key may do (default editor: edits what it created; see docs/permissions.md)",
    )
    k.add_argument(
        "--projects",
        metavar="A,B",
        help="editor/viewer keys: the projects the key is a member of, comma-separated "
        "(default: every project; '' for none)",
    )
    k.add_argument("--label", metavar="TEXT", help="a note to tell keys apart in 'jiyi keys list'")
    k = keys.add_parser(
        "list", help="list the keys: id, tenant, role, projects, created, label (never secrets)"
    )
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    json_arg(k)
    k = keys.add_parser("revoke", help="revoke a key by its id (see jiyi keys list)")
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    k.add_argument("key_id", metavar="ID", help="the key's public id")
    p.set_defaults(handler=cmd_keys)


def _missing_extra(exc: ModuleNotFoundError, extra: str, command: str) -> ConfigError:
    """A package of an optional extra is not installed: say which and how to add it (one
    line, not a traceback). A missing module of jiyi itself is a bug: raised as it is."""
    if (exc.name or "").split(".")[0] == "jiyi":
        raise exc
    return ConfigError(
        f"{command} needs the '{extra}' extra ({exc.name} is not installed): {install_hint(extra)}"
    )


def cmd_serve(ns: argparse.Namespace) -> int:
    try:
        from jiyi.server.run import serve
    except ModuleNotFoundError as exc:
        raise _missing_extra(exc, "server", "jiyi serve") from None

    serve(
        store_target(ns),
        host=ns.host,
        port=ns.port,
        keys_file=ns.keys,
        redis=redis_url(ns),
        read_url=read_url(ns),
        embedder=embedder_spec(ns),
        llm=llm_spec(ns),
        max_body_bytes=ns.max_body,
        rate_limit_per_minute=ns.rate_limit,
        maintain_every=ns.maintain_every or None,
        files=files_dir(ns),
    )
    return EXIT_OK


def cmd_keys(ns: argparse.Namespace) -> int:
    from jiyi.server.auth import create_key, revoke_key

    if ns.keys_command == "create":
        projects = None
        if ns.projects is not None:
            projects = [p.strip() for p in ns.projects.split(",")] if ns.projects.strip() else []
        print(create_key(ns.keys, ns.tenant, ns.role, label=ns.label, projects=projects))
        print("store this key now: only its hash is kept", file=sys.stderr)
        return EXIT_OK
    if ns.keys_command == "list":
        return _list_keys(ns)
    if not revoke_key(ns.keys, ns.key_id):
        raise InvalidInput(f"no key {ns.key_id!r} in {ns.keys}")
    print(f"revoked {ns.key_id}", file=sys.stderr)
    return EXIT_OK


def _list_keys(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from jiyi.server.auth import ApiKeys

    if not Path(ns.keys).exists():
        raise InvalidInput(f"no key file {ns.keys}; create a key with jiyi keys create", field="keys")
    rows = [
        {
            "id": r.id,
            "tenant": r.tenant,
            "role": r.role.value,
            "projects": None if r.projects is None else list(r.projects),
            "created_at": r.created_at,
            "label": r.label,
        }
        for r in ApiKeys.load(ns.keys).records()
    ]
    if ns.json:
        emit(rows)
        return EXIT_OK
    for row in rows:
        projects = "every project" if row["projects"] is None else ",".join(row["projects"]) or "no project"
        label = f"  {row['label']}" if row["label"] else ""
        print(f"{row['id']}  {row['tenant']}  {row['role']}  {projects}  {row['created_at']}{label}")
    if not rows:
        print(f"no keys in {ns.keys}", file=sys.stderr)
    return EXIT_OK


def cmd_mcp(ns: argparse.Namespace) -> int:
    from jiyi.config import GateConfig

    try:
        from jiyi.server.mcp import run
    except ModuleNotFoundError as exc:
        raise _missing_extra(exc, "mcp", "jiyi mcp") from None

    run(
        store_target(ns),
        transport=ns.transport,
        host=ns.host,
        port=ns.port,
        redis=redis_url(ns),
        read_url=read_url(ns),
        embedder=embedder_spec(ns),
        gate=GateConfig.from_env(),
        keys_file=ns.keys,
        mem0_names=ns.mem0_names,
        **scope(ns),
    )
    return EXIT_OK
