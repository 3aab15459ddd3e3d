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
