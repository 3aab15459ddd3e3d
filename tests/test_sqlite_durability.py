"""``synchronous=full`` for SQLite users who need commits to survive a power loss
(issue 15, item 8): a constructor option and a URL parameter, checked on every connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from jiyi.errors import InvalidInput
from jiyi.memory import Memory
from jiyi.store.open import open_store
from jiyi.store.sqlite import SQLiteStore

NORMAL, FULL = 1, 2  # PRAGMA synchronous values


def _modes(store: SQLiteStore) -> set[int]:
    """The setting on the writer and on a reader connection."""
    with store._read() as reader:
        return {int(c.execute("PRAGMA synchronous").fetchone()[0]) for c in (store._writer, reader)}


def test_default_is_normal(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        assert store.synchronous == "normal"
        assert _modes(store) == {NORMAL}


@pytest.mark.parametrize("url", ["sqlite:///{p}?synchronous=full", "sqlite:///{p}?synchronous=FULL"])
def test_full_from_the_url(tmp_path: Path, url: str) -> None:
    store = open_store(url.format(p=tmp_path / "b.db"))
    assert isinstance(store, SQLiteStore)
    with store:
        assert store.synchronous == "full"
        assert _modes(store) == {FULL}
        assert Path(store.path) == tmp_path / "b.db"  # the parameter is not part of the path


def test_full_from_memory_open(tmp_path: Path) -> None:
    with Memory.open(f"sqlite:///{tmp_path / 'c.db'}?synchronous=full", embedder="hash:64") as mem:
        assert mem.add("Carol keeps her notes in Markdown", user_id="carol").item is not None
        store = mem.store
        assert isinstance(store, SQLiteStore) and _modes(store) == {FULL}


@pytest.mark.parametrize(
    "url", ["sqlite:///{p}?synchronous=off", "sqlite:///{p}?synchronous=", "sqlite:///{p}?journal=delete"]
)
def test_bad_values_are_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(InvalidInput):
        open_store(url.format(p=tmp_path / "d.db"))
    with pytest.raises(InvalidInput, match="synchronous"):
        SQLiteStore(tmp_path / "e.db", synchronous="extra")
