"""kill -9 between the database and the files, in both directions, loses nothing.

Each test runs a real subprocess that writes through ``Memory(..., files=DIR)`` with the
test-only hook ``JIYI_FILES_CRASH_AT=<point>`` (see :mod:`jiyi.files.disk`), which sends
it SIGKILL at that point: no cleanup, no ``finally``. The test then opens the same
database and files again (which repairs from the journal) and checks that the files and
the database agree and that every write and every edit is there exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from jiyi.cli import main
from jiyi.files.layout import encode_name
from jiyi.memory import Memory
from jiyi.model import MemoryType, Status

CHILD = """
import sys
from jiyi.memory import Memory

db, root, mode = sys.argv[1:4]
mem = Memory.open(db, files=root, background=False)
if mode == "api":
    mem.add("下周三去北京参加架构评审会议", user_id="alice", memory_type="event")
else:
    mem.sync_files(user_id="alice")
print("finished without being killed")
"""

API_TEXT = "下周三去北京参加架构评审会议"


def md(root: Path, name: str = "memory.md") -> Path:
    return root / "default" / "user" / encode_name("alice") / name


def run_child(tmp_path: Path, db: Path, root: Path, mode: str, point: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "JIYI_FILES_CRASH_AT": point, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, str(script), str(db), str(root), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)


def contents(mem: Memory) -> Counter[str]:
    """Active memories of alice by text (a duplicate shows up as a count of 2)."""
    page = mem.list(user_id="alice", statuses=["active"], limit=1000)
    return Counter(i.content for i in page.items)


def assert_in_step(mem: Memory, root: Path) -> None:
    report = mem.sync_files(dry_run=True)
    assert report.ok, (report.conflicts, report.errors)
    assert report.changes == (), report.changes
    assert not any((root / ".jiyi" / "journal").glob("*.json"))


def line_of(path: Path, item_id: str) -> str:
    return next(line for line in path.read_text(encoding="utf-8").splitlines() if f"id:{item_id} " in line)


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    db, root = tmp_path / "m.db", tmp_path / "memories"
    with Memory.open(db, files=root, background=False) as mem:
        ids = {}
        for key, text, kind in [
            ("keep", "I prefer concise answers with code examples", "preference"),
            ("changed", "我住在杭州，每天骑自行车上班", "fact"),
            ("deleted", "The team meets every Friday afternoon for a retro", "habit"),
            ("moved", "We chose Next.js over Remix because the team knows React", "fact"),
        ]:
            item = mem.add(text, user_id="alice", memory_type=kind).item
            assert item is not None
            ids[key] = item.id
    return db, root, ids


def person_edits(root: Path, ids: dict[str, str]) -> None:
    """A changed line (Chinese), a deleted line, a moved line, two new lines (en, zh)."""
    path = md(root)
    text = path.read_text(encoding="utf-8")
    text = text.replace("我住在杭州，每天骑自行车上班", "我搬到了成都，现在每天坐地铁上班")
    text = text.replace(line_of(path, ids["deleted"]) + "\n", "")
    moving = line_of(path, ids["moved"])
    text = text.replace(moving + "\n", "").replace("## decision\n", f"## decision\n{moving}\n")
    text = text.replace("## event\n", "## event\n- Flew to Berlin for the KubeCon conference in March\n")
    text = text.replace("## constraint\n", "## constraint\n- 我对花生过敏，点餐时必须避开\n")
    path.write_text(text, encoding="utf-8")


def assert_edits_applied(mem: Memory, root: Path, ids: dict[str, str]) -> None:
    assert mem.get(ids["changed"]).content == "我搬到了成都，现在每天坐地铁上班"
    assert mem.get(ids["deleted"]).status is Status.ARCHIVED
    assert mem.get(ids["moved"]).memory_type is MemoryType.DECISION
    assert mem.get(ids["keep"]).status is Status.ACTIVE
    counts = contents(mem)
    assert counts["Flew to Berlin for the KubeCon conference in March"] == 1
    assert counts["我对花生过敏，点餐时必须避开"] == 1
    assert max(counts.values()) == 1
    text = md(root).read_text(encoding="utf-8")
    assert "我搬到了成都" in text and ids["deleted"] not in text
    assert "- 我对花生过敏，点餐时必须避开 <!-- id:" in text
    assert "Flew to Berlin for the KubeCon conference in March <!-- id:" in text
    hit = mem.search("用户现在住在哪里", user_id="alice", limit=1)[0]
    assert hit.item.id == ids["changed"]


@pytest.mark.parametrize(
    "point", ["sync-journaled", "sync-db-partial", "sync-db-applied", "sync-file-written"]
)
def test_kill_during_sync_of_a_persons_edits(
    tmp_path: Path, prepared: tuple[Path, Path, dict[str, str]], point: str
) -> None:
    db, root, ids = prepared
    person_edits(root, ids)
    run_child(tmp_path, db, root, "sync", point)
    assert any((root / ".jiyi" / "journal").glob("*.json"))  # the intent survived the kill
    with Memory.open(db, files=root, background=False) as mem:  # opening repairs
        assert_edits_applied(mem, root, ids)
        assert_in_step(mem, root)


@pytest.mark.parametrize("point", ["api-journaled", "api-committed", "api-file-written"])
def test_kill_during_an_api_write(
    tmp_path: Path, prepared: tuple[Path, Path, dict[str, str]], point: str
) -> None:
    db, root, _ = prepared
    run_child(tmp_path, db, root, "api", point)
    with Memory.open(db, files=root, background=False) as mem:
        committed = point != "api-journaled"  # killed before the database write: no write
        assert contents(mem)[API_TEXT] == (1 if committed else 0)
        assert (API_TEXT in md(root).read_text(encoding="utf-8")) == committed
        assert_in_step(mem, root)


def test_kill_after_an_api_write_while_the_file_has_unsynced_edits(
    tmp_path: Path, prepared: tuple[Path, Path, dict[str, str]]
) -> None:
    db, root, ids = prepared
    person_edits(root, ids)
    run_child(tmp_path, db, root, "api", "api-committed")
    with Memory.open(db, files=root, background=False) as mem:
        assert_edits_applied(mem, root, ids)  # the person's edits were merged, not overwritten
        assert contents(mem)[API_TEXT] == 1
        assert API_TEXT in md(root).read_text(encoding="utf-8")
        assert_in_step(mem, root)


def test_jiyi_sync_repairs_too(tmp_path: Path, prepared: tuple[Path, Path, dict[str, str]]) -> None:
    db, root, ids = prepared
    person_edits(root, ids)
    run_child(tmp_path, db, root, "sync", "sync-db-partial")
    assert main(["--db", str(db), "sync", "--files", str(root)]) == 0
    with Memory.open(db, files=root, background=False) as mem:
        assert_edits_applied(mem, root, ids)
        assert_in_step(mem, root)
