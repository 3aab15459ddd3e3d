"""Progress of long commands on stderr (jiyi.cli.progress): forced on with
JIYI_PROGRESS, it shows each command's work; it is quiet under --json and, by default,
when stderr is not a terminal (as under pytest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jiyi.cli import main
from jiyi.memory import Memory

EMBEDDER = ["--embedder", "hash:256"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main([*EMBEDDER, *args]) == 0
    return capsys.readouterr().err


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """A jiyi export of 150 memories (more than one embedding batch)."""
    with Memory.open(tmp_path / "source.db", embedder="hash:256") as mem:
        for i in range(150):
            mem.add(f"note number {i} about project apollo", user_id="alice", infer=False)
        path = tmp_path / "export.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            mem.export_jsonl(fh)
    return path


@pytest.mark.parametrize("mode", ["always", "plain"])
def test_forced_progress_shows_every_long_command(
    mode: str,
    tmp_path: Path,
    export: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JIYI_PROGRESS", mode)
    db = str(tmp_path / "m.db")
    err = _run(capsys, "--db", db, "import", str(export))
    assert "embedding" in err and "150/150" in err, err
    err = _run(capsys, "copy", "--from", db, "--to", str(tmp_path / "copy.db"))
    assert "items" in err and "150/150" in err, err
    err = _run(capsys, "--db", db, "maintain", "--dry-run")
    assert "maintain" in err and "150" in err, err
    files = str(tmp_path / "context")
    err = _run(capsys, "--db", db, "--files", files, "sync", "--user", "alice")
    assert "sync (scopes)" in err and "1/1" in err, err
    if mode == "always":  # rich draws bars with terminal codes; plain writes lines
        assert "\x1b[" in err
    else:
        assert "embedding        150/150\n" in _run(
            capsys, "--db", str(tmp_path / "again.db"), "import", str(export)
        )


def test_quiet_under_json_and_off_a_terminal(
    tmp_path: Path, export: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JIYI_PROGRESS", "always")
    db = str(tmp_path / "m.db")
    capsys.readouterr()
    assert main([*EMBEDDER, "--db", db, "import", str(export), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"imported": 150} and out.err == ""
    monkeypatch.delenv("JIYI_PROGRESS")  # auto: stderr is not a terminal under pytest
    assert _run(capsys, "--db", db, "maintain", "--dry-run") == ""
    assert _run(capsys, "copy", "--from", db, "--to", str(tmp_path / "copy.db")) == ""
