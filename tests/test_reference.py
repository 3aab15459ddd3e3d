"""The reference pages in docs/reference are what ``python -m jiyi.reference`` makes of
the code now: a change to a command, a route, a tool or a method that is not followed
by a regeneration fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

from jiyi import reference

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "reference"


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    return {name: build() for name, build in reference.BUILDERS.items()}


def test_checked_in_pages_are_up_to_date(built: dict[str, str]) -> None:
    for name, text in built.items():
        page = PAGES / f"{name}.md"
        assert page.read_text(encoding="utf-8") == text, (
            f"{page} is out of date: run python -m jiyi.reference"
        )


def test_the_pages_cover_every_command_route_tool_and_method(built: dict[str, str]) -> None:
    from jiyi import Memory
    from jiyi.cli import build_parser

    for path, _, _ in reference._commands(build_parser(), "jiyi"):
        assert f"## `{path}`" in built["cli"], path
    assert "## `jiyi mcp`" in built["cli"] and "`--mem0-names`" in built["cli"]
    for route in ("POST /v1/memories`", "POST /mem0/v1/memories/`", "GET /v1/profile`"):
        assert f"### `{route}" in built["rest"], route
    # what a success answers, not only "Successful Response"
    search = built["rest"].split("### `POST /v1/memories/search`", 1)[1].split("### ", 1)[0]
    assert "| 200 | Successful Response: `SearchResponse` (fields: `hits`) |" in search
    listed = built["rest"].split("### `GET /v1/sessions/{session_id}/messages`", 1)[1].split("### ", 1)[0]
    assert "`array of Message` (fields: `role`, `content`," in listed
    profile = built["rest"].split("### `GET /v1/profile`", 1)[1].split("### ", 1)[0]
    assert "give user_id or project_id, not both" in profile and "session_id" not in profile
    for tool in (
        "memory_save",
        "memory_end_session",
        "memory_profile",
        "memory_compress",
        "memory_uncompress",
        "add_memories",
        "delete_all_memories",
    ):
        assert f"## `{tool}`" in built["mcp"], tool
    for method in ("add", "search", "remember", "working", "context", "open"):
        assert f"### `{method}`" in built["python"] and hasattr(Memory, method)
    assert "0x" not in "".join(built.values())  # no addresses: the output is the same on every run


def test_check_names_a_stale_page(
    tmp_path: Path, built: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {f"{n}.md" for n in reference.PAGES}
    assert reference.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "mcp.md").write_text(built["mcp"].replace("memory_save", "memory_keep"), encoding="utf-8")
    capsys.readouterr()
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1
    assert "mcp.md" in capsys.readouterr().err
