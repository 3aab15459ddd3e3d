"""docs/mcp.md's client configurations (Claude Desktop, Cursor, VS Code) are valid JSON
in each client's shape, and every ``jiyi`` command line on the page is one that
``jiyi mcp`` accepts, with what the snippet means (stdio, the served ids, the URL)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from jiyi.cli import build_parser
from jiyi.cli.common import scope

PAGE = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"
TEXT = PAGE.read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", TEXT, flags=re.S)


def _servers(config: dict[str, Any]) -> dict[str, Any]:
    servers = config.get("mcpServers", config.get("servers"))
    assert isinstance(servers, dict) and servers, config
    return servers


def test_every_stdio_snippet_is_a_valid_jiyi_mcp_command() -> None:
    configs = [json.loads(block) for block in _blocks("json")]
    assert len(configs) == 5
    spawned = [s for c in configs for s in _servers(c).values() if "command" in s]
    assert len(spawned) == 3  # Claude Desktop, Cursor, VS Code
    for server in spawned:
        assert Path(server["command"]).name == "jiyi" and Path(server["command"]).is_absolute()
        ns = build_parser().parse_args(server["args"])
        assert ns.command == "mcp" and ns.transport == "stdio", server
        assert scope(ns)["user_id"] == "alice"
        assert Path(ns.db).is_absolute()  # --db after the command is the global option
    # VS Code's shape: "servers" with a type; Claude Desktop's and Cursor's: "mcpServers"
    assert any("servers" in c and all("type" in s for s in c["servers"].values()) for c in configs)


def test_every_http_snippet_points_at_the_servers_default_path_and_port() -> None:
    default = build_parser().parse_args(["mcp", "--transport", "streamable-http"])
    remote = [s for c in map(json.loads, _blocks("json")) for s in _servers(c).values() if "url" in s]
    assert len(remote) == 2
    for server in remote:
        url = urlparse(server["url"])
        assert url.path == "/mcp" and url.port == default.port, server
        assert server["headers"]["Authorization"].startswith("Bearer ")


def test_every_command_line_on_the_page_parses() -> None:
    lines = [line for block in _blocks("sh") for line in block.splitlines() if line.startswith("jiyi ")]
    assert len(lines) == 5
    for line in lines:
        argv = shlex.split(line.split("#", 1)[0])
        ns = build_parser().parse_args(argv[1:])
        assert ns.command == "mcp", line
