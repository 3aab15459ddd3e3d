"""docs/interfaces.md, the table of what each capability is called on each interface, is
true: every method, command, route and tool it names exists, and every public method of
``Memory`` has a row (a new one must say where it is reachable)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from jiyi import Memory, reference
from jiyi.cli import build_parser
from jiyi.integrations.tools import MemoryTools

PAGE = Path(__file__).resolve().parent.parent / "docs" / "interfaces.md"
NAME = re.compile(r"`([^`]+)`")


def _rows() -> list[list[str]]:
    """The table's rows: capability, library, command line, REST, MCP, why not."""
    rows = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 6 and cells[0] not in ("capability", "---"):
            rows.append(cells)
    assert len(rows) > 30
    return rows


def _commands() -> set[str]:
    """``jiyi add``, ``jiyi learn skill`` ...: every command and subcommand."""
    return {path for path, _, _ in reference._commands(build_parser(), "jiyi")}


def _routes() -> set[str]:
    memory, app = reference._rest_app()
    try:
        paths = app.openapi()["paths"]
    finally:
        memory.store.close()
    return {f"{method.upper()} {path}" for path, ops in paths.items() for method in ops}


def _tools(tmp_path: Path) -> set[str]:
    with Memory.open(tmp_path / "t.db", embedder="hash:256", background=False) as mem:
        tools = MemoryTools(
            mem, user_id="u", session_id="s", agent_id="a", profile_tool=True, mem0_names=True
        )
        return set(tools.names)


def test_every_name_in_the_table_exists(tmp_path: Path) -> None:
    methods = {name for name, _, _ in reference._members(Memory)} | set(dir(Memory))
    commands, routes, tools = _commands(), _routes(), _tools(tmp_path)
    for capability, library, cli, rest, mcp, why in _rows():
        for name in NAME.findall(library):
            assert name in methods, (capability, name)
        for name in NAME.findall(cli):
            assert name in commands, (capability, name)
        for name in NAME.findall(rest):
            assert name in routes, (capability, name)
        for name in NAME.findall(mcp):
            assert name in tools, (capability, name)
        # a missing interface says why
        assert why or "—" not in (cli, rest, mcp), capability


def test_every_public_method_of_memory_has_a_row() -> None:
    named = {name for row in _rows() for name in NAME.findall(row[1])}
    public = {name for name, _, _ in reference._members(Memory)}
    assert public - named == set(), "add a row to docs/interfaces.md"
