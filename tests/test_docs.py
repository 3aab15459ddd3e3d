"""Docs that tests keep honest: the README's Python runs, its CLI commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jiyi.cli import build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_python_examples_run() -> None:
    # ```python blocks must run as they are; ```py blocks show code that needs a server.
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_cli_commands_exist() -> None:
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    command = r"([a-z][\w-]*)"  # add, end-session, ...; not --version
    used = set(re.findall(rf"^jiyi {command}", README, re.M)) | set(re.findall(rf"; jiyi {command}", README))
    assert used, "README shows no CLI commands"
    assert used <= commands, used - commands


def test_quickstart_is_two_commands_and_ci_runs_the_test_one() -> None:
    quick = README.split("## Quickstart", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, re.M)
    assert commands == ["make demo", "make test"]
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


def test_architecture_page_examples_run() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/architecture.md", "exec"), {})


def test_privacy_page_examples_run() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "privacy.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/privacy.md", "exec"), {})


def test_mem0_migration_page_examples_run() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "migrate-from-mem0.md").read_text(
        encoding="utf-8"
    )
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 4
    for block in blocks:
        exec(compile(block, "docs/migrate-from-mem0.md", "exec"), {})
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    shell = "".join(re.findall(r"```sh\n(.*?)```", page, re.S))
    used = set(re.findall(r"^jiyi (\w+)", shell, re.M))
    assert used and used <= commands


def test_working_memory_page_examples_run() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "working-memory.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/working-memory.md", "exec"), {})


def test_procedural_page_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Library, async and agent-tool examples of docs/procedural.md (they write their
    stores in the working directory)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "procedural.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert any("memory_learn" in b for b in blocks)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}  # later blocks go on with the earlier ones' memory
    for block in blocks:
        exec(compile(block, "docs/procedural.md", "exec"), namespace)
