"""The README's source map ("Where things live") names every module, and only real ones."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "jiyi"
NAME = re.compile(r"[A-Za-z_][\w.]*\.(?:py|js|html|css|svg)|[A-Za-z_]\w*/(?=[\s(,]|$)")


def _source_map() -> dict[str, str]:
    """Top-level entry -> the text describing it (its line and continuation lines)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Where things live", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    current: list[str] = []
    for line in section.splitlines():
        if not line.startswith("  ") or line.startswith("    "):
            if current and line.startswith("    "):
                for name in current:
                    entries[name] += " " + line.strip()
            elif not line.startswith("  "):
                current = []
            continue
        head, _, text = line.strip().partition("  ")
        current = head.split()
        for name in current:
            entries[name] = text
    return entries


def _described(directory: Path) -> set[str]:
    return {
        p.name if p.is_file() else p.name + "/"
        for p in directory.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())
    }


def test_every_top_level_module_and_package_is_in_the_map() -> None:
    entries = _source_map()
    assert set(entries) == _described(PACKAGE), "update README.md's 'Where things live'"


def test_every_module_of_a_package_is_named_in_its_entry() -> None:
    for name, text in _source_map().items():
        if not name.endswith("/"):
            continue
        named = set(NAME.findall(text))
        missing = _described(PACKAGE / name.rstrip("/")) - named
        assert not missing, f"README's entry for {name} does not name {sorted(missing)}"


def test_every_file_the_map_names_exists() -> None:
    for name, text in _source_map().items():
        base = PACKAGE / name.rstrip("/") if name.endswith("/") else PACKAGE
        for mentioned in NAME.findall(text):
            found = list(base.rglob(mentioned.rstrip("/"))) or list(PACKAGE.rglob(mentioned.rstrip("/")))
            assert found, f"README's entry for {name} names {mentioned}, which does not exist"


def test_no_function_is_longer_than_80_lines() -> None:
    """Small functions named for what they do (ruff's C901/PLR0912/PLR0915 bound their
    complexity; this bounds their length, docstring included)."""
    import ast

    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long
