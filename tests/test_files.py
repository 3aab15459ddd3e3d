"""memory.md / learnings.md as the source of truth, on real SQLite files and real files:
API writes reach the files, a person's edits reach search, conflicts are reported until
resolved, bad lines are reported and kept, the async driver, the watcher and the CLI."""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.cli import main
from jiyi.errors import ConfigError, InvalidInput
from jiyi.files import FileMirrorStore, watch_files
from jiyi.files.layout import decode_name, encode_name
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryType, Status
from jiyi.store.sqlite import SQLiteStore


class Clock:
    """An injected clock that moves one second per reading, so creation order is the
    order of the calls (and files list items in that order)."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memories"


@pytest.fixture
def mem(tmp_path: Path, root: Path, clock: Clock) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "m.db"), clock=clock, files=root, background=False) as m:
        yield m


def md(root: Path, user: str = "alice", name: str = "memory.md") -> Path:
    return root / "default" / "user" / encode_name(user) / name


def line_of(path: Path, item_id: str) -> str:
    return next(line for line in path.read_text(encoding="utf-8").splitlines() if f"id:{item_id} " in line)


def section_of(path: Path, item_id: str) -> str:
    section = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif f"id:{item_id} " in line:
            return section
    raise AssertionError(f"{item_id} is not in {path}")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def add(mem: Memory, text: str, kind: str = "fact", user: str = "alice") -> str:
    item = mem.add(text, user_id=user, memory_type=kind).item
    assert item is not None, text
    return item.id


def assert_in_step(mem: Memory, user_id: str | None = None) -> None:
    """File and database agree: a dry run finds nothing to do."""
    report = mem.sync_files(dry_run=True, user_id=user_id)
    assert report.ok, (report.conflicts, report.errors)
    assert report.changes == (), report.changes


# ------------------------------------------------------------------ API writes -> files


def test_api_add_update_delete_show_up_in_the_file(mem: Memory, root: Path, clock: Clock) -> None:
    pref = add(mem, "I prefer concise answers with code examples", "preference")
    fact = add(mem, "我在杭州做前端工程师，主要写 React")
    skill = add(mem, "Deep research: search the web, read the sources, then summarise", "skill")
    path, learn = md(root), md(root, name="learnings.md")
    assert section_of(path, pref) == "preference" and section_of(path, fact) == "fact"
    assert section_of(learn, skill) == "skill" and skill not in path.read_text(encoding="utf-8")

    mem.update(fact, content="我在上海做后端工程师，主要写 Go")
    assert line_of(path, fact) == f"- 我在上海做后端工程师，主要写 Go <!-- id:{fact} -->"
    mem.update(pref, memory_type="habit")
    assert section_of(path, pref) == "habit"
    mem.delete(fact)
    assert fact not in path.read_text(encoding="utf-8")
    mem.update(fact, status="active")  # restored through the API: back in the file
    assert section_of(path, fact) == "fact"
    mem.delete(fact, hard=True)
    assert fact not in path.read_text(encoding="utf-8")

    # Not in the files: episodes, profiles, document chunks, expired memories.
    mem.add_episode("We discussed the billing migration plan in detail", user_id="alice")
    mem.add("Alice is a senior engineer who likes Go and cycling", user_id="alice", tags=["profile"])
    mem.add_document("Chapter one. " * 40, user_id="alice", title="notes")
    gone = add(mem, "The office wifi password rotates every Monday morning")
    mem.update(gone, expires_at=clock.now - timedelta(hours=1))
    text = path.read_text(encoding="utf-8")
    assert "billing migration" not in text and "cycling" not in text and "Chapter one" not in text
    assert gone not in text
    assert_in_step(mem, user_id="alice")


def test_same_database_renders_byte_identically_and_one_item_is_one_line(mem: Memory, root: Path) -> None:
    for text, kind in [
        ("I prefer dark mode in every editor", "preference"),
        ("我们决定用 PostgreSQL 16，因为需要逻辑复制", "decision"),
        ("The billing service must answer within 200 ms", "constraint"),
        ("Line one of a longer note\nline two, indented in the file\n\nline four after a blank", "context"),
    ]:
        add(mem, text, kind)
    path = md(root)
    before = path.read_bytes()
    assert "  line two, indented in the file\n\n  line four after a blank" in before.decode()
    assert re.search(r"\d{4}-\d\d-\d\d", before.decode()) is None  # no volatile data

    # Render again from nothing but the database: the same bytes.
    path.unlink()
    shutil.rmtree(root / ".jiyi")
    report = mem.sync_files(user_id="alice")
    assert report.ok and path.read_bytes() == before

    add(mem, "I usually review pull requests after lunch", "habit")
    diff = [
        d for d in difflib.ndiff(before.decode().splitlines(), path.read_text().splitlines()) if d[0] in "+-"
    ]
    assert len(diff) == 1 and diff[0].startswith("+ - I usually review pull requests after lunch")
    assert_in_step(mem, user_id="alice")


def test_layout_ids_are_safe_directory_names(mem: Memory, root: Path) -> None:
    for user in ("Bob Smith", "..", ".hidden", "张三/../x", "a" * 200):
        add(mem, "Likes long walks along the river on Sundays", user=user)
        name = encode_name(user)
        assert name not in (".", "..") and not name.startswith(".") and "/" not in name
        assert len(name.encode()) <= 120
        assert md(root, user).is_file()
        if "~" not in name:
            assert decode_name(name) == user
    assert encode_name("Bob") != encode_name("bob")  # case-insensitive file systems
    assert (root / ".gitignore").read_text() == ".jiyi/\n"
    report = mem.sync_files()  # every scope, long names found through their state
    assert report.ok and len(report.scopes) == 5 and report.changes == ()


# ------------------------------------------------------------------ a person's edits -> database


def test_edits_in_chinese_and_english_show_up_in_search(mem: Memory, root: Path) -> None:
    city = add(mem, "我住在杭州，每天骑自行车上班")
    lang = add(mem, "My favourite programming language is Python", "preference")
    old = add(mem, "The team meets every Friday afternoon for a retro", "habit")
    moved = add(mem, "We chose Next.js over Remix because the team knows React", "fact")
    path = md(root)
    edit(path, "我住在杭州，每天骑自行车上班", "我搬到了成都，现在每天坐地铁上班")
    edit(path, "My favourite programming language is Python", "My favourite programming language is Rust")
    text = path.read_text(encoding="utf-8")
    text = text.replace(line_of(path, old) + "\n", "")  # delete a line
    moving = line_of(path, moved)
    text = text.replace(moving + "\n", "").replace("## decision\n", f"## decision\n{moving}\n")
    text = text.replace("## preference\n", "## preference\n- 我喜欢喝手冲咖啡，不加糖\n")
    text = text.replace("## event\n", "## event\n- Flew to Berlin for the KubeCon conference in March\n")
    path.write_text(text, encoding="utf-8")

    report = mem.sync_files(user_id="alice")
    assert report.ok, (report.conflicts, report.errors)
    got = {(c.action, c.item_id) for c in report.changes if c.direction == "to_db"}
    assert {("changed", city), ("changed", lang), ("archived", old), ("moved", moved)} <= got
    assert sum(1 for c in report.changes if c.action == "added") == 2

    hit = mem.search("用户住在哪个城市？怎么通勤？", user_id="alice", limit=1)[0]
    assert hit.item.id == city and "成都" in hit.item.content
    assert (
        mem.search("which language does the user like to program in", user_id="alice", limit=1)[0].item.id
        == lang
    )
    assert mem.search("咖啡", user_id="alice", limit=1)[0].item.content == "我喜欢喝手冲咖啡，不加糖"
    berlin = mem.search("conference trip to Germany", user_id="alice", limit=1)[0].item
    assert berlin.memory_type is MemoryType.EVENT and berlin.source_id == "default/user/alice/memory.md"
    assert mem.get(old).status is Status.ARCHIVED
    assert mem.get(moved).memory_type is MemoryType.DECISION
    assert all(h.item.id != old for h in mem.search("retro on Friday", user_id="alice"))
    last = mem.history(city)[-1]
    assert last.actor == "files" and "text edited" in last.reason and "memory.md line" in last.reason
    assert mem.history(old)[-1].reason == "memory.md: the line was deleted from the file"
    # New lines got their ids in the file; file and database agree.
    assert re.search(r"- 我喜欢喝手冲咖啡，不加糖 <!-- id:\w+ -->", path.read_text(encoding="utf-8"))
    assert_in_step(mem, user_id="alice")


def test_deleted_line_archives_and_putting_it_back_restores(mem: Memory, root: Path) -> None:
    item = add(mem, "The staging database is reset every night at 2am", "context")
    path = md(root)
    line = line_of(path, item)
    edit(path, line + "\n", "")
    mem.sync_files(user_id="alice")
    assert mem.get(item).status is Status.ARCHIVED
    edit(path, "## context\n", f"## context\n{line}\n")  # e.g. git checkout of the old file
    report = mem.sync_files(user_id="alice")
    assert [(c.action, c.item_id) for c in report.changes] == [("restored", item)]
    assert mem.get(item).status is Status.ACTIVE
    assert_in_step(mem, user_id="alice")


def test_multi_line_memory_edited_in_its_continuation(mem: Memory, root: Path) -> None:
    item = add(mem, "Release checklist:\n1. run the tests\n2. tag the commit", "skill")
    path = md(root, name="learnings.md")
    edit(path, "  2. tag the commit", "  2. tag the commit\n  3. 发布到 PyPI")
    mem.sync_files(user_id="alice")
    assert mem.get(item).content == "Release checklist:\n1. run the tests\n2. tag the commit\n3. 发布到 PyPI"
    assert_in_step(mem, user_id="alice")


def test_line_moved_between_files_changes_the_type(mem: Memory, root: Path) -> None:
    item = add(mem, "When a deploy fails, roll back first and investigate after", "fact")
    path, learn = md(root), md(root, name="learnings.md")
    line = line_of(path, item)
    edit(path, line + "\n", "")
    edit(learn, "## pattern\n", f"## pattern\n{line}\n")
    mem.sync_files(user_id="alice")
    assert mem.get(item).memory_type is MemoryType.PATTERN
    assert item in learn.read_text() and item not in path.read_text()


def test_a_person_can_start_a_new_scope_by_writing_its_file(mem: Memory, root: Path) -> None:
    path = root / "default" / "project" / "apollo" / "memory.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        "## decision\n- 前端统一使用 TypeScript 严格模式\n\n## constraint\n- Ship before the Q3 freeze\n"
    )
    odd = root / "default" / "user" / "Bob" / "memory.md"  # not how jiyi spells "Bob"
    odd.parent.mkdir(parents=True)
    odd.write_text("## fact\n- Bob plays the cello\n")
    report = mem.sync_files()
    assert [e.file for e in report.errors] == ["default/user/Bob"] and "%42ob" in report.errors[0].message
    assert report.count("to_db", "added") == 2
    hit = mem.search("which language settings does the frontend use", project_id="apollo", limit=1)[0]
    assert (
        hit.item.content == "前端统一使用 TypeScript 严格模式" and hit.item.memory_type is MemoryType.DECISION
    )
    assert "<!-- id:" in path.read_text() and path.read_text().startswith("<!-- jiyi: semantic memory")
    odd.parent.rename(odd.parent.with_name("%42ob"))  # as the error says
    report = mem.sync_files()
    assert report.ok and mem.search("cello", user_id="Bob", limit=1)[0].item.content == "Bob plays the cello"
    assert_in_step(mem)


# ------------------------------------------------------------------ both sides at once


def test_api_write_never_overwrites_unsynced_edits_and_sync_merges_both(mem: Memory, root: Path) -> None:
    first = add(mem, "I prefer tea over coffee in the afternoon", "preference")
    path = md(root)
    edit(path, "I prefer tea over coffee in the afternoon", "I prefer green tea over coffee in the afternoon")
    edited = path.read_bytes()
    second = add(mem, "我每周一早上写周报", "habit")
    assert path.read_bytes() == edited  # the person's edit was left alone
    report = mem.sync_files(user_id="alice")
    assert report.ok
    assert {(c.action, c.direction, c.item_id) for c in report.changes} == {
        ("changed", "to_db", first),
        ("added", "to_file", second),
    }
    assert mem.get(first).content == "I prefer green tea over coffee in the afternoon"
    assert section_of(path, second) == "habit"
    assert_in_step(mem, user_id="alice")


def test_conflict_is_reported_until_the_line_is_edited_to_match(mem: Memory, root: Path) -> None:
    item = add(mem, "The deadline for the mobile app is the end of June", "constraint")
    path = md(root)
    edit(path, "end of June", "end of July")  # the person's version, not yet synced
    mem.update(item, content="The deadline for the mobile app is mid August")  # the API's version
    for _ in range(2):  # reported again at every sync
        report = mem.sync_files(user_id="alice")
        assert not report.ok and len(report.conflicts) == 1
        c = report.conflicts[0]
        assert (c.item_id, c.file_text, c.db_text) == (
            item,
            "The deadline for the mobile app is the end of July",
            "The deadline for the mobile app is mid August",
        )
        assert c.line is not None and f"id:{item}" in path.read_text().splitlines()[c.line - 1]
        assert "end of July" in line_of(path, item)  # the file keeps the person's text
        assert mem.get(item).content.endswith("mid August")  # the database keeps its own
    # An API write elsewhere does not touch the conflicting line.
    add(mem, "The design review happens on Thursdays", "habit")
    assert "end of July" in line_of(path, item)
    edit(path, "the end of July", "mid August")
    report = mem.sync_files(user_id="alice")
    assert report.ok and report.conflicts == ()
    assert_in_step(mem, user_id="alice")


@pytest.mark.parametrize("prefer", ["file", "db"])
def test_conflict_resolved_by_prefer(mem: Memory, root: Path, prefer: str) -> None:
    item = add(mem, "我们用 GitHub Actions 做持续集成", "decision")
    path = md(root)
    edit(path, "GitHub Actions", "GitLab CI")
    mem.update(item, content="我们用 Jenkins 做持续集成")
    assert len(mem.sync_files(user_id="alice").conflicts) == 1
    report = mem.sync_files(user_id="alice", prefer=prefer)  # type: ignore[arg-type]
    assert report.ok
    want = "我们用 GitLab CI 做持续集成" if prefer == "file" else "我们用 Jenkins 做持续集成"
    assert mem.get(item).content == want and want in line_of(path, item)
    assert_in_step(mem, user_id="alice")


def test_deleted_in_file_but_edited_in_database_is_a_conflict(mem: Memory, root: Path) -> None:
    item = add(mem, "Customer data must stay in the EU region", "constraint")
    other = add(mem, "Invoices are sent on the first day of each month", "fact")
    path = md(root)
    edit(path, line_of(path, item) + "\n", "")
    mem.update(item, content="Customer data must stay in the EU or Swiss regions")
    edit(path, line_of(path, other) + "\n", "")
    mem.delete(other)  # deleted on both sides: fine
    report = mem.sync_files(user_id="alice")
    assert [(c.item_id, c.file_text) for c in report.conflicts] == [(item, None)]
    assert mem.get(item).status is Status.ACTIVE and item not in path.read_text()
    report = mem.sync_files(user_id="alice", prefer="file")
    assert report.ok and mem.get(item).status is Status.ARCHIVED
    assert_in_step(mem, user_id="alice")


# ------------------------------------------------------------------ bad input


def test_malformed_lines_are_reported_with_line_numbers_and_never_lost(mem: Memory, root: Path) -> None:
    keep = add(mem, "The API gateway rate limit is 100 requests per second", "constraint")
    held = add(mem, "The nightly backup runs at 3am", "context")
    dup = add(mem, "Staging deploys happen on every merge to main", "context")
    path = md(root)
    text = path.read_text(encoding="utf-8")
    held_line, dup_line = line_of(path, held), line_of(path, dup)
    text = text.replace(held_line + "\n", "")
    text = text.replace("# Memory: user alice\n", "# Memory: user alice\n- a bullet before any section\n")
    text = text.replace("## fact\n", "## fact\njust some words without a bullet\n- ok\n")
    text = text.replace("## habit\n", f"## habit\n{dup_line}\n- broken id <!-- id: -->\n")
    text += f"\n## Notes\n{held_line}\nfree text\n"
    path.write_text(text, encoding="utf-8")
    numbered = {i + 1: line for i, line in enumerate(text.splitlines())}

    report = mem.sync_files(user_id="alice")
    assert not report.ok
    by_text = {e.message.split(":")[0].split(" (")[0]: e for e in report.errors}
    assert set(by_text) >= {
        "outside any section",
        "not a memory line",
        "not added",
        "the id comment is damaged",
        "unknown section '## Notes'",
    }
    for e in report.errors:
        assert e.line is not None and e.file == "default/user/alice/memory.md"
    assert numbered[by_text["not a memory line"].line or 0] == "just some words without a bullet"
    assert numbered[by_text["unknown section '## Notes'"].line or 0] == "## Notes"
    assert any("also on" in e.message for e in report.errors)  # the duplicated id
    # Nothing applied: the held line (under an unknown heading) is not archived.
    assert mem.get(held).status is Status.ACTIVE and mem.get(keep).status is Status.ACTIVE
    assert mem.stats(user_id="alice").total == 3
    after = path.read_text(encoding="utf-8")
    for kept in (
        "- a bullet before any section",
        "just some words without a bullet",
        "- ok",
        "free text",
        "- broken id <!-- id: -->",
        held_line,
    ):
        assert kept in after, kept
    assert after.count(f"id:{dup}") == 2
    again = mem.sync_files(user_id="alice")  # reported again, still kept, still not applied
    assert len(again.errors) == len(report.errors) and path.read_text(encoding="utf-8") == after


def test_a_file_without_headings_is_not_applied(mem: Memory, root: Path) -> None:
    item = add(mem, "Prefers written updates over meetings", "preference")
    path = md(root)
    path.write_text("", encoding="utf-8")  # e.g. truncated by a broken editor
    report = mem.sync_files(user_id="alice")
    assert any("no section heading" in e.message for e in report.errors)
    assert mem.get(item).status is Status.ACTIVE and path.read_text() == ""
    path.unlink()  # a deleted file is written again, archiving nothing
    report = mem.sync_files(user_id="alice")
    assert report.ok and item in path.read_text() and mem.get(item).status is Status.ACTIVE


def test_bad_arguments_and_missing_files_option(tmp_path: Path, mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="prefer"):
        mem.sync_files(prefer="mine")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="user_id"):
        mem.sync_files(user_id="")
    with (
        Memory(SQLiteStore(tmp_path / "plain.db"), background=False) as plain,
        pytest.raises(ConfigError, match="files=DIR"),
    ):
        plain.sync_files()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidInput, match="not a directory"):
        Memory(SQLiteStore(tmp_path / "x.db"), files=tmp_path / "afile")


def test_dry_run_writes_nothing(mem: Memory, root: Path) -> None:
    item = add(mem, "I prefer pair programming for tricky bugs", "preference")
    path = md(root)
    edit(path, "pair programming", "mob programming")
    edit(path, "## fact\n", "## fact\n- The repository moved to a monorepo last spring\n- no\n")
    before, state = path.read_bytes(), sorted((root / ".jiyi" / "state").rglob("*.json"))[0].read_bytes()
    report = mem.sync_files(user_id="alice", dry_run=True)
    assert report.dry_run and {c.action for c in report.changes} == {"changed", "added"}
    assert any(e.message.startswith("would not be added: too short") for e in report.errors)
    assert (
        path.read_bytes() == before and mem.get(item).content == "I prefer pair programming for tricky bugs"
    )
    assert sorted((root / ".jiyi" / "state").rglob("*.json"))[0].read_bytes() == state
    assert mem.stats(user_id="alice").total == 1


def test_a_new_database_is_rebuilt_from_the_files(tmp_path: Path, root: Path, mem: Memory) -> None:
    add(mem, "我对花生过敏，点餐时要避开", "constraint")
    add(mem, "Prefers answers in English with Chinese terms in brackets", "preference")
    saved = md(root).read_text(encoding="utf-8")
    with Memory(SQLiteStore(tmp_path / "new.db"), files=root, background=False) as fresh:
        report = fresh.sync_files()
        assert report.ok and report.count("to_db", "added") == 2
        assert fresh.search("有什么食物过敏吗", user_id="alice", limit=1)[0].item.content.startswith(
            "我对花生过敏"
        )
        assert md(root).read_text(encoding="utf-8") != saved  # new ids
        assert_in_step(fresh, user_id="alice")


# ------------------------------------------------------------------ concurrency, async, watcher


def test_writes_and_syncs_from_two_threads_end_in_step(tmp_path: Path, root: Path) -> None:
    db = tmp_path / "shared.db"
    with (
        Memory.open(db, files=root, background=False) as api,
        Memory.open(db, files=root, background=False) as cli,
    ):
        texts = [
            f"Project note number {i}: the {w} service owns its own schema"
            for i, w in enumerate(["billing", "search", "auth", "mail", "media", "chat", "ledger", "audit"])
        ]
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for text in texts:
                    api.add(text, user_id="alice", memory_type="context")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        while thread.is_alive():
            report = cli.sync_files(user_id="alice")
            assert report.ok, (report.conflicts, report.errors)
        thread.join()
        assert not errors
        cli.sync_files(user_id="alice")
        text = md(root).read_text(encoding="utf-8")
        assert all(t in text for t in texts)
        assert_in_step(cli, user_id="alice")


async def test_async_driver_writes_and_syncs(tmp_path: Path, root: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), files=root) as amem:
        result = await amem.add("我习惯用 Vim 写代码", user_id="alice", memory_type="habit")
        assert result.item is not None
        path = md(root)
        assert section_of(path, result.item.id) == "habit"
        edit(path, "我习惯用 Vim 写代码", "我习惯用 VS Code 写代码")
        edit(path, "## decision\n", "## decision\n- We store all timestamps in UTC\n")
        report = await amem.sync_files(user_id="alice")
        assert report.ok and report.count("to_db") == 2
        hits = await amem.search("用什么编辑器写代码", user_id="alice", limit=1)
        assert hits[0].item.content == "我习惯用 VS Code 写代码"
        await amem.delete(result.item.id)
        assert result.item.id not in path.read_text(encoding="utf-8")
        again = await amem.sync_files(user_id="alice", dry_run=True)
        assert again.ok and again.changes == ()


def wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_watcher_syncs_an_edit(mem: Memory, root: Path) -> None:
    item = add(mem, "I usually go running before work", "habit")
    reports: list[object] = []
    watcher = watch_files(mem, interval=0.05, on_report=reports.append)
    try:
        time.sleep(0.2)
        assert reports == []  # jiyi's own writes are not edits
        edit(md(root), "running before work", "swimming before work")
        wait_for(lambda: mem.get(item).content == "I usually go swimming before work")
        add(mem, "Prefers morning meetings to afternoon ones", "preference")  # jiyi's write: no sync
        time.sleep(0.3)
        assert len(reports) == 1
    finally:
        watcher.stop()
    assert not watcher.alive


def test_watcher_waits_for_a_file_to_hold_still(mem: Memory, root: Path) -> None:
    """An editor that truncates and then writes: the half-written file is never synced (its
    missing lines would read as deleted), only the file once it stopped changing."""
    item = add(mem, "I usually go running before work", "habit")
    reports: list[object] = []
    watcher = watch_files(mem, interval=60, start=False, on_report=reports.append)
    assert watcher.poll() == [] and watcher.poll() == []  # jiyi's own file: no edit
    path = md(root)
    text = path.read_text(encoding="utf-8")
    path.write_text("", encoding="utf-8")  # caught between truncating and writing
    assert watcher.poll() == []
    time.sleep(0.01)  # a new modification time, as a real edit has
    path.write_text(text.replace("running", "swimming"), encoding="utf-8")
    assert watcher.poll() == [] and reports == []
    assert len(watcher.poll()) == 1 and len(reports) == 1
    assert mem.get(item).content == "I usually go swimming before work"
    assert mem.get(item).status == Status.ACTIVE
    assert [h.action for h in mem.history(item)].count("archive") == 0


async def test_watcher_with_async_memory(tmp_path: Path, root: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "w.db"), files=root) as amem:
        item = (await amem.add("Reviews code in the morning", user_id="bob", memory_type="habit")).item
        assert item is not None
        watcher = watch_files(amem, interval=0.05)
        try:
            edit(md(root, "bob"), "in the morning", "in the evening")
            deadline = time.monotonic() + 30
            while (await amem.get(item.id)).content != "Reviews code in the evening":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        finally:
            await asyncio.to_thread(watcher.stop)


def test_jiyi_serve_with_files_writes_and_watches(tmp_path: Path, root: Path) -> None:
    import socket
    import subprocess
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "from jiyi.server.run import serve; "
        f"serve({str(tmp_path / 'srv.db')!r}, port={port}, files={str(root)!r}, watch_interval=0.1, "
        "log_level='warning')"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=30) as c:
            added = c.post("/v1/memories", json={"content": "我喜欢在周末爬山", "user_id": "zoe"})
            assert added.status_code == 201, added.text
            item_id = added.json()["item"]["id"]
            path = md(root, "zoe")
            assert f"- 我喜欢在周末爬山 <!-- id:{item_id} -->" in path.read_text(encoding="utf-8")
            edit(path, "我喜欢在周末爬山", "我喜欢在周末去海边冲浪")
            wait_for(lambda: c.get(f"/v1/memories/{item_id}").json()["content"] == "我喜欢在周末去海边冲浪")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()


# ------------------------------------------------------------------ CLI


def test_cli_sync(tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.db"
    assert (
        main(
            [
                "--db",
                str(db),
                "--files",
                str(root),
                "add",
                "I prefer short stand-ups",
                "--user",
                "li",
                "--type",
                "preference",
            ]
        )
        == 0
    )
    path = md(root, "li")
    edit(path, "short stand-ups", "very short stand-ups")
    edit(path, "## fact\n", "## fact\n- 我在深圳的一家游戏公司工作\n")
    capsys.readouterr()
    assert main(["--db", str(db), "sync", "--files", str(root), "--user-id", "li", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "default/user/li/memory.md" in out and "dry run" in out and "changed" in out
    assert main(["--db", str(db), "sync", "--files", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    changes = data["files"]["default/user/li/memory.md"]["changes"]
    assert {c["action"] for c in changes} == {"changed", "added"} and data["ok"]
    # A conflict: exit code 1 until resolved.
    item_id = re.search(r"very short stand-ups <!-- id:(\w+)", path.read_text()).group(1)  # type: ignore[union-attr]
    assert main(["--db", str(db), "update", item_id, "--text", "I prefer no stand-ups at all"]) == 0
    edit(path, "very short stand-ups", "stand-ups under ten minutes")
    capsys.readouterr()
    assert main(["--db", str(db), "--files", str(root), "sync"]) == 1
    captured = capsys.readouterr()
    assert "CONFLICT" in captured.out and "1 conflict(s)" in captured.err
    assert main(["--db", str(db), "sync", "--files", str(root), "--prefer", "db"]) == 0
    assert "I prefer no stand-ups at all" in path.read_text()
    assert main(["--db", str(db), "sync"]) == 1  # no files directory given
    assert "--files DIR" in capsys.readouterr().err


def test_cli_sync_on_the_demo_store(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    assert main(["--db", str(db), "demo", "--keep"]) == 0
    monkeypatch.setenv("JIYI_FILES", str(root))
    capsys.readouterr()
    assert main(["--db", str(db), "sync"]) == 0
    out = capsys.readouterr().out
    path = md(root, "demo-user")
    text = path.read_text(encoding="utf-8")
    assert "default/user/demo-user/memory.md  (written)" in out
    assert "Next.js" in text and "PostgreSQL 16" in text and "13800138000" not in text


def test_files_wrapper_refuses_a_second_root(tmp_path: Path) -> None:
    store = FileMirrorStore(SQLiteStore(tmp_path / "s.db"), tmp_path / "one")
    with pytest.raises(InvalidInput, match="already keeps its files"):
        Memory(store, files=tmp_path / "two")
    store.close()


def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "files.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}  # the page's blocks continue one another
    for block in blocks:
        exec(compile(block, "docs/files.md", "exec"), namespace)


# ------------------------------------------------------------------ the file format, without a database


@pytest.mark.parametrize(
    ("item_id", "content"),
    [
        ("plain", "I prefer dark mode"),
        ("note 1 --> <b>", "an id with spaces and markup"),
        ("x%y#z", "  leading spaces and trailing ones   "),
        ("c1", "- starts like a bullet\n## looks like a heading\n<!-- id:fake --> inside"),
        ("c2", "code:\n    indented four\n\tand a tab\n\n\nafter two blank lines"),
        ("c3", "ends with a comment <!-- not an id -->"),
        ("中文", "第一行\r\n第二行\r第三行"),
    ],
)
def test_any_content_and_id_round_trip_through_the_file(item_id: str, content: str) -> None:
    from jiyi.files.document import Entry, Extras, Placed, normal_text
    from jiyi.files.layout import ScopeRef
    from jiyi.files.parse import parse_file
    from jiyi.files.render import render_file
    from jiyi.model import Scope

    ref = ScopeRef("default", Scope.USER, "Ünïcode user")
    shown = {
        item_id: Placed(Entry(MemoryType.FACT, normal_text(content)), "2025-01-01T00:00:00.000000Z"),
        "other": Placed(Entry(MemoryType.HABIT, "another line"), "2025-01-02T00:00:00.000000Z"),
    }
    text = render_file("memory.md", ref, shown, Extras())
    parsed = parse_file("memory.md", text)
    assert parsed.problems == [] and not parsed.blocked
    assert {line.item_id: line.entry for line in parsed.lines} == {k: v.entry for k, v in shown.items()}
    assert render_file("memory.md", ref, shown, parsed.extras) == text


def test_lenient_reading_of_what_people_write() -> None:
    from jiyi.files.parse import parse_file

    text = (
        "\ufeff# My notes\r\n\r\n## Preferences\r\n* likes tea <!-- id:a -->\r\n+ likes cake\r\n"
        "## FACTS\n- lives in Paris <!--id:b-->\n---\n<!-- a note of mine\n   over two lines -->\n"
    )
    parsed = parse_file("memory.md", text)
    assert parsed.problems == []
    got = [(line.item_id, line.entry.memory_type.value, line.entry.text) for line in parsed.lines]
    assert got == [
        ("a", "preference", "likes tea"),
        (None, "preference", "likes cake"),
        ("b", "fact", "lives in Paris"),
    ]
    assert parsed.extras.lines("fact") == ["---", "<!-- a note of mine", "   over two lines -->"]
    unclosed = parse_file("memory.md", "## fact\n- x <!-- id:a -->\n<!-- never closed\n- y\n")
    assert unclosed.blocked and "never closed" in unclosed.problems[0].message
