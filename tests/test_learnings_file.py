"""learnings.md edits round-trip for procedural learnings, on real SQLite files and real
files: a person's edit of a skill, failure pattern or decomposition line reaches the
record ``suggest()`` reads (zh and en), counts stay as recorded, a line that no longer
reads as its kind is reported and kept, and ``record_*`` builds on the edited version."""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jiyi.errors import InvalidInput
from jiyi.files.layout import encode_name
from jiyi.files.learnings import (
    LearningSyntaxError,
    describe_learning,
    learning_kind,
    parse_learning,
    split_counts,
)
from jiyi.memory import Memory
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.store.sqlite import SQLiteStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memories"


@pytest.fixture
def mem(tmp_path: Path, root: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "m.db"), clock=Clock(), files=root, background=False) as m:
        yield m


def learnings(root: Path, user: str = "alice") -> Path:
    return root / "default" / "user" / encode_name(user) / "learnings.md"


def line_of(path: Path, item_id: str) -> str:
    return next(line for line in path.read_text(encoding="utf-8").splitlines() if f"id:{item_id} " in line)


def edit_line(path: Path, item_id: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` inside the line of ``item_id`` only."""
    line = line_of(path, item_id)
    assert old in line, (old, line)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(line, line.replace(old, new, 1), 1), encoding="utf-8")


def assert_in_step(mem: Memory) -> None:
    report = mem.sync_files(dry_run=True, user_id="alice")
    assert report.ok, (report.conflicts, report.errors)
    assert report.changes == (), report.changes


# ------------------------------------------------------------------ the three kinds, zh and en

SKILL_TASK = {"en": "Research competitors in the electric bike market", "zh": "调研电动自行车市场的竞争对手"}
FAILURE_TASK = {"en": "Send the invoices asap please", "zh": "请尽快把发票全部发出去"}
PLAN_TASK = {"en": "Plan a three-day trip to Kyoto", "zh": "规划一次三天的京都旅行"}


def record_skill(mem: Memory, lang: str) -> MemoryItem:
    if lang == "en":
        return mem.record_skill(
            "deep_research",
            ["web_search", "read_url", {"tool": "summarize", "max_words": 300}],
            description="research a topic in depth",
            task=SKILL_TASK["en"],
            user_id="alice",
        )
    return mem.record_skill(
        "深度调研",
        ["网页搜索", "阅读链接", {"tool": "总结", "max_words": 300}],
        description="深入研究一个主题",
        task=SKILL_TASK["zh"],
        user_id="alice",
    )


def record_failure(mem: Memory, lang: str) -> MemoryItem:
    if lang == "en":
        return mem.record_failure(
            "rate_limit",
            indicators=["urgent", "asap"],
            mitigation="run the calls one by one",
            severity=3,
            user_id="alice",
        )
    return mem.record_failure(
        "限流", indicators=["紧急", "尽快"], mitigation="串行执行，避免限流", severity=3, user_id="alice"
    )


def record_plan(mem: Memory, lang: str, subtasks: list[str] | None = None) -> MemoryItem:
    default = {
        "en": ["Book flights", "Book a hotel", "List sights per day"],
        "zh": ["订机票", "订酒店", "列出每天的景点"],
    }
    return mem.record_decomposition(
        PLAN_TASK[lang], subtasks or default[lang], strategy="sequential", succeeded=True, user_id="alice"
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_kind_is_one_line_that_reads_as_its_content_plus_counts(
    mem: Memory, root: Path, lang: str
) -> None:
    items = [record_skill(mem, lang), record_failure(mem, lang), record_plan(mem, lang)]
    path = learnings(root)
    for item in items:
        shown = line_of(path, item.id).removeprefix("- ").rsplit(" <!--", 1)[0]
        assert shown == describe_learning(item)
        kind = learning_kind(item)
        assert kind is not None
        body, counts = split_counts(kind, shown)
        assert body == item.content  # search sees the words the file shows
        assert counts is not None and sum(counts) >= 1
    text = path.read_text(encoding="utf-8")
    if lang == "zh":
        assert "技能 深度调研（深入研究一个主题）：网页搜索 → 阅读链接 → 总结（成功 1 次，失败 0 次）" in text
        assert "失败模式 限流（严重度 3）：征兆：紧急、尽快；对策：串行执行，避免限流（出现 1 次）" in text
        assert (
            "把「规划一次三天的京都旅行」拆成 3 个串行子任务：订机票；订酒店；列出每天的景点（1 次中成功 1 次）"
            in text
        )
    else:
        assert (
            "Skill deep_research (research a topic in depth): web_search → read_url → summarize "
            "(1 success, 0 failures)" in text
        )
        assert (
            "Failure pattern rate_limit (severity 3): signs: urgent, asap; mitigation: run the calls one by one "
            "(seen 1 time)" in text
        )
        assert (
            "Split “Plan a three-day trip to Kyoto” into 3 sequential subtasks: Book flights; Book a hotel"
            in text
        )
    assert_in_step(mem)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_edited_skill_line_changes_the_workflow_suggest_returns(
    mem: Memory, root: Path, lang: str
) -> None:
    skill = record_skill(mem, lang)
    path = learnings(root)
    old, new = ("read_url", "fetch_pdf → read_pdf") if lang == "en" else ("阅读链接", "下载PDF → 阅读PDF")
    edit_line(path, skill.id, old, new)
    report = mem.sync_files(user_id="alice")
    assert report.ok, report.errors
    [change] = report.changes
    assert (change.action, change.direction, change.item_id) == ("changed", "to_db", skill.id)
    assert "workflow" in change.detail
    got = mem.suggest(SKILL_TASK[lang], user_id="alice")
    assert got.kind == "skill" and got.item_id == skill.id
    tools = [s["tool"] for s in got.workflow]
    expected = (
        ["web_search", "fetch_pdf", "read_pdf", "summarize"]
        if lang == "en"
        else ["网页搜索", "下载PDF", "阅读PDF", "总结"]
    )
    assert tools == expected
    assert [s["step"] for s in got.workflow] == [1, 2, 3, 4]
    assert got.workflow[3]["max_words"] == 300  # a step's extra fields stay with its tool
    stored = mem.get(skill.id)
    assert split_counts("skill", describe_learning(stored) or "")[0] == stored.content  # search sees it too
    assert new.split(" → ")[0] in stored.content
    assert (stored.structured or {})["successes"] == 1 and (stored.structured or {})["tasks"] == [
        SKILL_TASK[lang]
    ]
    events = mem.history(skill.id)
    assert events[-1].actor == "files" and "skill edited in the file (workflow)" in events[-1].reason
    assert_in_step(mem)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_edited_failure_line_changes_mitigation_signs_and_severity(
    mem: Memory, root: Path, lang: str
) -> None:
    failure = record_failure(mem, lang)
    path = learnings(root)
    if lang == "en":
        edit_line(path, failure.id, "run the calls one by one", "wait 10 seconds between calls")
        edit_line(path, failure.id, "severity 3", "severity 5")
        edit_line(path, failure.id, "urgent, asap", "urgent, asap, right now")
        task, word = "Do it right now", "right now"
    else:
        edit_line(path, failure.id, "串行执行，避免限流", "每次调用间隔十秒")
        edit_line(path, failure.id, "严重度 3", "严重度 5")
        edit_line(path, failure.id, "紧急、尽快", "紧急、尽快、马上")
        task, word = "马上把报表发给老板", "马上"
    report = mem.sync_files(user_id="alice")
    assert report.ok, report.errors
    risks = mem.suggest(task, user_id="alice").risks
    assert [r.item_id for r in risks] == [failure.id]
    risk = risks[0]
    assert risk.mitigation == ("wait 10 seconds between calls" if lang == "en" else "每次调用间隔十秒")
    assert risk.severity == 5 and risk.matched_indicators == (word,)
    stored = mem.get(failure.id)
    assert stored.importance == pytest.approx(0.9)  # severity 5 is protected, as when recorded
    assert (stored.structured or {})["occurrences"] == 1
    assert_in_step(mem)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_edited_decomposition_line_changes_subtasks_and_strategy(
    mem: Memory, root: Path, lang: str
) -> None:
    plan = record_plan(mem, lang)
    path = learnings(root)
    if lang == "en":
        edit_line(
            path,
            plan.id,
            "3 sequential subtasks: Book flights; Book a hotel",
            "3 parallel subtasks: Book trains; Book a ryokan",
        )
        expected: tuple[str, ...] = ("Book trains", "Book a ryokan", "List sights per day")
    else:
        edit_line(path, plan.id, "3 个串行子任务：订机票；订酒店", "4 个并行子任务：订火车票；订民宿；办签证")
        expected = ("订火车票", "订民宿", "办签证", "列出每天的景点")
    report = mem.sync_files(user_id="alice")
    assert report.ok, report.errors
    got = mem.suggest(PLAN_TASK[lang], user_id="alice")
    assert got.kind == "decomposition" and got.item_id == plan.id
    assert got.subtasks == expected and got.strategy == "parallel"
    n = len(expected)  # the number in the line is recomputed from the subtasks
    assert (f"{n} parallel subtasks" if lang == "en" else f"{n} 个并行子任务") in line_of(path, plan.id)
    assert_in_step(mem)


# ------------------------------------------------------------------ record_* builds on the edit


def test_record_after_an_edit_builds_on_the_edited_version(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    failure = record_failure(mem, "zh")
    plan = record_plan(mem, "zh")
    path = learnings(root)
    edit_line(path, skill.id, "read_url", "fetch_pdf")
    edit_line(path, skill.id, "research a topic in depth", "dig into a topic")
    edit_line(path, failure.id, "紧急、尽快", "紧急、今天之内")
    edit_line(path, plan.id, "订酒店", "订民宿")
    assert mem.sync_files(user_id="alice").ok
    before = path.read_text(encoding="utf-8")

    # A failed run keeps the stored (edited) workflow and counts the failure on top.
    again = mem.record_skill("Deep Research", ["web_search"], succeeded=False, user_id="alice")
    assert again.id == skill.id
    data = again.structured or {}
    assert [s["tool"] for s in data["workflow"]] == ["web_search", "fetch_pdf", "summarize"]
    assert (data["successes"], data["failures"], data["description"]) == (1, 1, "dig into a topic")
    # Seen again: the edited signs are merged with the new one, occurrences go up.
    seen = mem.record_failure(
        "限流", indicators=["赶时间"], mitigation="串行执行，避免限流", severity=3, user_id="alice"
    )
    assert seen.id == failure.id
    assert (seen.structured or {})["indicators"] == ["紧急", "今天之内", "赶时间"]
    assert (seen.structured or {})["occurrences"] == 2
    # The edited plan, followed again, is the same decomposition: its counts go up.
    used = record_plan(mem, "zh", ["订机票", "订民宿", "列出每天的景点"])
    assert used.id == plan.id and (used.structured or {})["usage_count"] == 2

    after = path.read_text(encoding="utf-8")
    diff = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    # Each record changed exactly its own line (git-friendly): three lines out, three in.
    assert len(diff) == 6, diff
    assert "fetch_pdf" in line_of(path, skill.id) and "(1 success, 1 failure)" in line_of(path, skill.id)
    assert "征兆：紧急、今天之内、赶时间" in line_of(path, failure.id)
    assert "订民宿" in line_of(path, plan.id) and "（2 次中成功 2 次）" in line_of(path, plan.id)
    assert_in_step(mem)


# ------------------------------------------------------------------ counts stay as recorded


def test_edited_counts_are_kept_as_recorded_and_reported(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    plan = record_plan(mem, "zh")
    path = learnings(root)
    edit_line(path, skill.id, "(1 success, 0 failures)", "(40 successes, 0 failures)")
    edit_line(path, plan.id, "订酒店", "订民宿")
    edit_line(path, plan.id, "（1 次中成功 1 次）", "（9 次中成功 9 次）")
    report = mem.sync_files(user_id="alice")
    assert report.ok
    by_id = {c.item_id: c for c in report.changes}
    assert by_id[skill.id].direction == "to_file"  # only the counts changed: the file is put right
    assert "counts are kept as recorded (1 success, 0 failures)" in by_id[skill.id].detail
    assert by_id[plan.id].direction == "to_db" and "counts are kept" in by_id[plan.id].detail
    assert (mem.get(skill.id).structured or {})["successes"] == 1
    stored = mem.get(plan.id).structured or {}
    assert (stored["usage_count"], stored["subtasks"][1]) == (1, "订民宿")
    assert "(1 success, 0 failures)" in line_of(path, skill.id)
    assert "（1 次中成功 1 次）" in line_of(path, plan.id)
    assert_in_step(mem)


def test_a_run_recorded_while_a_person_edits_is_no_conflict(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    edit_line(path, skill.id, "read_url", "fetch_pdf")
    # Meanwhile an agent records a run with the same workflow: only the counts change.
    mem.record_skill("deep_research", ["web_search", "read_url", "summarize"], user_id="alice")
    assert "read_url" not in line_of(path, skill.id)  # the person's unsynced edit is left alone
    report = mem.sync_files(user_id="alice")
    assert report.ok and not report.conflicts
    data = mem.get(skill.id).structured or {}
    assert [s["tool"] for s in data["workflow"]] == ["web_search", "fetch_pdf", "summarize"]
    assert data["successes"] == 2
    assert "fetch_pdf → summarize (2 successes, 0 failures)" in line_of(path, skill.id)


def test_different_changes_on_both_sides_are_a_conflict_until_resolved(mem: Memory, root: Path) -> None:
    failure = record_failure(mem, "en")
    path = learnings(root)
    edit_line(path, failure.id, "run the calls one by one", "back off and retry")
    mem.record_failure(
        "rate_limit", indicators=["urgent"], mitigation="use a queue", severity=3, user_id="alice"
    )
    report = mem.sync_files(user_id="alice")
    [conflict] = report.conflicts
    assert conflict.item_id == failure.id and "back off and retry" in (conflict.file_text or "")
    assert "use a queue" in (conflict.db_text or "")
    assert "back off and retry" in line_of(path, failure.id)  # neither side overwritten
    assert (mem.get(failure.id).structured or {})["mitigation"] == "use a queue"
    assert mem.sync_files(user_id="alice").conflicts  # reported again
    assert mem.sync_files(user_id="alice", prefer="file").ok
    assert mem.suggest("urgent: send it", user_id="alice").risks[0].mitigation == "back off and retry"
    assert (mem.get(failure.id).structured or {})["occurrences"] == 2  # counts from the database
    assert_in_step(mem)


# ------------------------------------------------------------------ malformed edits


@pytest.mark.parametrize(
    ("kind", "old", "new", "why"),
    [
        ("skill", "): web_search", ") web_search", "no ':' between"),
        ("skill", ": web_search → read_url → summarize", ":", "no steps"),
        ("failure", "severity 3", "severity 7", "from 1 to 5"),
        ("failure", "signs: urgent, asap; ", "", "no 'signs:'"),
        ("failure", "urgent, asap", "!!!", "no words to look for"),
        ("decomposition", "“Plan a three-day trip to Kyoto”", "Plan a three-day trip to Kyoto", "in quotes"),
        ("decomposition", "sequential subtasks", "ordered subtasks", "parallel|sequential"),
    ],
)
def test_a_line_that_no_longer_reads_is_reported_kept_and_changes_nothing(
    mem: Memory, root: Path, kind: str, old: str, new: str, why: str
) -> None:
    item = {"skill": record_skill, "failure": record_failure, "decomposition": record_plan}[kind](mem, "en")
    path = learnings(root)
    original = line_of(path, item.id)
    edit_line(path, item.id, old, new)
    broken = line_of(path, item.id)
    number = path.read_text(encoding="utf-8").splitlines().index(broken) + 1
    for _ in range(2):  # reported at every sync until fixed, never applied, never lost
        report = mem.sync_files(user_id="alice")
        [error] = report.errors
        assert error.file.endswith("learnings.md") and error.line == number
        assert why in error.message and "left as it was" in error.message
        assert not report.ok and not report.changes
        assert line_of(path, item.id) == broken
        stored = mem.get(item.id)
        assert stored.structured == item.structured and stored.content == item.content
        assert stored.status is Status.ACTIVE
    # An agent's run meanwhile does not touch the person's line ...
    if kind == "skill":
        mem.record_skill("deep_research", ["web_search", "read_url", "summarize"], user_id="alice")
        assert line_of(path, item.id) == broken
    # ... and putting the line right applies (the counts are the database's).
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(broken, original), encoding="utf-8")
    report = mem.sync_files(user_id="alice")
    assert report.ok, report.errors
    assert_in_step(mem)


def test_a_malformed_chinese_line_is_reported_in_the_same_way(mem: Memory, root: Path) -> None:
    plan = record_plan(mem, "zh")
    path = learnings(root)
    edit_line(path, plan.id, "拆成 3 个串行子任务：", "拆成三步：")
    report = mem.sync_files(user_id="alice")
    [error] = report.errors
    assert "task decomposition" in error.message and "把「任务」拆成 N 个并行|串行子任务" in error.message
    assert mem.get(plan.id).structured == plan.structured
    assert "拆成三步" in line_of(path, plan.id)


# ------------------------------------------------------------------ other ways to edit


def test_formatting_a_line_differently_changes_nothing_but_the_line(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    edit_line(path, skill.id, "web_search → read_url → summarize", "web_search ->  read_url->summarize")
    report = mem.sync_files(user_id="alice")
    assert report.ok
    [change] = report.changes
    assert change.direction == "to_file" and change.action == "changed"
    assert mem.get(skill.id).version == skill.version  # the record did not change
    assert "web_search → read_url → summarize" in line_of(path, skill.id)


def test_english_and_chinese_punctuation_are_both_read(mem: Memory, root: Path) -> None:
    failure = record_failure(mem, "en")
    path = learnings(root)
    line = line_of(path, failure.id)
    rewritten = (
        f"- 失败模式 rate_limit（严重度 2）：征兆：urgent、限流；对策：排队执行 <!-- id:{failure.id} -->"
    )
    path.write_text(path.read_text(encoding="utf-8").replace(line, rewritten), encoding="utf-8")
    assert mem.sync_files(user_id="alice").ok
    data = mem.get(failure.id).structured or {}
    assert (data["severity"], data["indicators"], data["mitigation"]) == (2, ["urgent", "限流"], "排队执行")
    assert mem.get(failure.id).content.startswith("失败模式 rate_limit（严重度 2）")  # worded like its words
    assert line_of(path, failure.id).endswith("（出现 1 次） <!-- id:" + failure.id + " -->")


def test_sensitive_data_written_into_a_line_is_redacted_from_the_record(mem: Memory, root: Path) -> None:
    failure = record_failure(mem, "en")
    path = learnings(root)
    edit_line(path, failure.id, "run the calls one by one", "mail ops@example.com and wait")
    assert mem.sync_files(user_id="alice").ok
    stored = mem.get(failure.id)
    assert "ops@example.com" not in str(stored.structured) and "ops@example.com" not in stored.content
    assert "ops@example.com" not in path.read_text(encoding="utf-8")


def test_moving_a_learning_out_of_its_section_makes_it_a_plain_memory(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    line = line_of(path, skill.id)
    text = path.read_text(encoding="utf-8").replace(line + "\n", "")
    path.write_text(text.replace("## pattern\n", "## pattern\n" + line + "\n"), encoding="utf-8")
    report = mem.sync_files(user_id="alice")
    assert report.ok
    [change] = report.changes
    assert change.action == "moved" and "no longer a skill" in change.detail
    stored = mem.get(skill.id)
    assert stored.memory_type is MemoryType.PATTERN and stored.structured is None
    assert line_of(path, skill.id) == f"- {skill.content} <!-- id:{skill.id} -->"
    assert not mem.suggest(SKILL_TASK["en"], user_id="alice").found
    assert any(e.before and e.before.get("structured") for e in mem.history(skill.id))  # kept in history


def test_an_archived_learning_put_back_with_an_edit_is_restored_with_it(mem: Memory, root: Path) -> None:
    plan = record_plan(mem, "en")
    path = learnings(root)
    line = line_of(path, plan.id)
    path.write_text(path.read_text(encoding="utf-8").replace(line + "\n", ""), encoding="utf-8")
    assert mem.sync_files(user_id="alice").ok
    assert mem.get(plan.id).status is Status.ARCHIVED
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("## pattern\n", "## pattern\n" + line.replace("Book a hotel", "Book a ryokan") + "\n"),
        encoding="utf-8",
    )
    report = mem.sync_files(user_id="alice")
    assert report.ok and [c.action for c in report.changes] == ["restored"]
    stored = mem.get(plan.id)
    assert stored.status is Status.ACTIVE and (stored.structured or {})["subtasks"][1] == "Book a ryokan"
    assert_in_step(mem)


def test_a_line_without_its_counts_is_no_edit(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    # As a person (or an older jiyi, which showed the content alone) may leave it.
    old_line = f"- {skill.content} <!-- id:{skill.id} -->"
    path.write_text(
        path.read_text(encoding="utf-8").replace(line_of(path, skill.id), old_line), encoding="utf-8"
    )
    report = mem.sync_files(user_id="alice")
    assert report.ok and all(c.direction == "to_file" for c in report.changes)
    assert line_of(path, skill.id).endswith("(1 success, 0 failures) <!-- id:" + skill.id + " -->")
    assert mem.get(skill.id).version == skill.version


def test_a_dry_run_reports_the_edit_and_writes_nothing(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "zh")
    path = learnings(root)
    edit_line(path, skill.id, "阅读链接", "下载PDF")
    text = path.read_text(encoding="utf-8")
    report = mem.sync_files(user_id="alice", dry_run=True)
    assert [(c.action, c.direction) for c in report.changes] == [("changed", "to_db")]
    assert path.read_text(encoding="utf-8") == text
    assert mem.get(skill.id).version == skill.version


def test_plain_memories_under_the_learning_headings_are_untouched(mem: Memory, root: Path) -> None:
    item = mem.add(
        "Release checklist: run the tests → tag the commit (seen 2 times)",
        user_id="alice",
        memory_type="skill",
    ).item
    assert item is not None and learning_kind(item) is None
    path = learnings(root)
    edit_line(path, item.id, "(seen 2 times)", "(seen 3 times)")
    assert mem.sync_files(user_id="alice").ok
    assert mem.get(item.id).content.endswith("(seen 3 times)")  # its text is its text


# ------------------------------------------------------------------ the grammar itself


def _item(structured: dict[str, Any], memory_type: MemoryType) -> MemoryItem:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    return MemoryItem.build(
        content="x" * 5,
        memory_type=memory_type,
        scope="user",
        user_id="u",
        tenant_id="t",
        structured=structured,
        created_at=now,
        updated_at=now,
    )


# Values made of the grammar's own punctuation: every one must survive a round trip.
_value = (
    st.text(alphabet=list('ab 中文:：()（）→->,，、;；"“”「」\\sS'), min_size=1, max_size=10)
    .map(lambda s: " ".join(s.split()))
    .filter(bool)
)
_values = st.lists(_value, min_size=1, max_size=4)
_signs = st.lists(_value.map(lambda s: "中" + s), min_size=1, max_size=4)  # a sign needs a word
_about = st.one_of(st.none(), _value)


def _check_round_trip(item: MemoryItem) -> None:
    line = describe_learning(item)
    assert line is not None, item.structured
    parsed = parse_learning(item, line, redact_pii=False)
    assert parsed.structured == item.structured, (line, parsed.structured)
    assert parsed.changed == () and parsed.claimed is not None


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(name=_value, about=_about, steps=_values)
def test_any_skill_reads_back_from_its_line(name: str, about: str | None, steps: list[str]) -> None:
    data: dict[str, Any] = {
        "kind": "skill",
        "skill_name": name,
        "workflow": [{"step": i + 1, "tool": t} for i, t in enumerate(steps)],
        "successes": 2,
        "failures": 1,
    }
    if about:
        data["description"] = about
    _check_round_trip(_item(data, MemoryType.SKILL))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(name=_value, about=_about, signs=_signs, what=_value, severity=st.integers(1, 5))
def test_any_failure_pattern_reads_back_from_its_line(
    name: str, about: str | None, signs: list[str], what: str, severity: int
) -> None:
    data: dict[str, Any] = {
        "kind": "failure",
        "pattern": name,
        "indicators": signs,
        "mitigation": what,
        "severity": severity,
        "occurrences": 3,
    }
    if about:
        data["description"] = about
    _check_round_trip(_item(data, MemoryType.PATTERN))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(task=_value, subtasks=_values, parallel=st.booleans())
def test_any_decomposition_reads_back_from_its_line(task: str, subtasks: list[str], parallel: bool) -> None:
    data = {
        "kind": "decomposition",
        "query_pattern": task,
        "subtasks": subtasks,
        "strategy": "parallel" if parallel else "sequential",
        "success_rate": 0.75,
        "usage_count": 4,
    }
    _check_round_trip(_item(data, MemoryType.PATTERN))


def test_delimiters_inside_values_are_escaped_only_when_needed() -> None:
    plain = _item(
        {
            "kind": "skill",
            "skill_name": "gh",
            "workflow": [{"step": 1, "tool": "github:create_issue"}],
            "successes": 1,
            "failures": 0,
        },
        MemoryType.SKILL,
    )
    assert describe_learning(plain) == "Skill gh: github:create_issue (1 success, 0 failures)"
    odd = _item(
        {
            "kind": "skill",
            "skill_name": "a (v2)",
            "workflow": [{"step": 1, "tool": "x → y"}],
            "successes": 1,
            "failures": 0,
        },
        MemoryType.SKILL,
    )
    assert describe_learning(odd) == "Skill a \\(v2\\): x \\→ y (1 success, 0 failures)"


def test_parse_learning_checks_its_input() -> None:
    skill = _item(
        {
            "kind": "skill",
            "skill_name": "s",
            "workflow": [{"step": 1, "tool": "t"}],
            "successes": 1,
            "failures": 0,
        },
        MemoryType.SKILL,
    )
    with pytest.raises(LearningSyntaxError, match="no steps"):
        parse_learning(skill, "Skill s:")
    with pytest.raises(InvalidInput, match="must be a string"):
        parse_learning(skill, None)  # type: ignore[arg-type]
    with pytest.raises(LearningSyntaxError, match="limit is 200"):
        parse_learning(skill, "Skill s: " + "t" * 201)
    plain = skill.evolve(structured=None)
    with pytest.raises(InvalidInput, match="not a skill, failure pattern or task decomposition"):
        parse_learning(plain, "Skill s: t")
    # A skill under another heading is not shown (nor read) as a skill.
    assert describe_learning(skill.evolve(memory_type=MemoryType.FACT)) is None


# ------------------------------------------------------------------ crashes


CHILD = """
import sys
from jiyi.memory import Memory

mem = Memory.open(sys.argv[1], files=sys.argv[2], background=False)
mem.sync_files(user_id="alice")
print("finished without being killed")
"""


@pytest.mark.parametrize("point", ["sync-db-partial", "sync-db-applied", "sync-file-written"])
def test_kill_while_learning_edits_are_applied_loses_nothing(tmp_path: Path, point: str) -> None:
    db, root = tmp_path / "m.db", tmp_path / "memories"
    with Memory.open(db, files=root, background=False) as mem:
        skill, failure, plan = record_skill(mem, "en"), record_failure(mem, "zh"), record_plan(mem, "en")
    path = learnings(root)
    # Written loosely on purpose: after the crash the applied edit must still agree with it.
    edit_line(path, skill.id, "web_search → read_url → summarize", "web_search -> fetch_pdf -> summarize")
    edit_line(path, failure.id, "串行执行，避免限流", "排队执行")
    edit_line(path, plan.id, "Book a hotel", "Book a ryokan")
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "JIYI_FILES_CRASH_AT": point, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, str(script), str(db), str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    with Memory.open(db, files=root, background=False) as mem:  # opening repairs
        assert [s["tool"] for s in (mem.get(skill.id).structured or {})["workflow"]] == [
            "web_search",
            "fetch_pdf",
            "summarize",
        ]
        assert (mem.get(failure.id).structured or {})["mitigation"] == "排队执行"
        assert (mem.get(plan.id).structured or {})["subtasks"][1] == "Book a ryokan"
        assert all(mem.get(i).version == 2 for i in (skill.id, failure.id, plan.id))  # applied once
        assert "web_search → fetch_pdf → summarize (1 success, 0 failures)" in line_of(path, skill.id)
        report = mem.sync_files(dry_run=True)
        assert report.ok and report.changes == (), (report.conflicts, report.changes)
        assert not any((root / ".jiyi" / "journal").glob("*.json"))


def test_a_line_that_agrees_with_a_record_changed_meanwhile_is_no_conflict(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    edit_line(path, skill.id, "web_search → read_url", "web_search->fetch_pdf")
    # The same change reaches the database another way before the sync.
    data = dict(skill.structured or {})
    data["workflow"] = [
        {**s, "tool": "fetch_pdf"} if s["tool"] == "read_url" else s for s in data["workflow"]
    ]
    mem.update(skill.id, structured=data)
    report = mem.sync_files(user_id="alice")
    assert report.ok and not report.conflicts
    assert "web_search → fetch_pdf → summarize" in line_of(path, skill.id)
    assert_in_step(mem)


def test_an_edit_made_when_edits_changed_only_the_text_is_read_back(mem: Memory, root: Path) -> None:
    skill = record_skill(mem, "en")
    path = learnings(root)
    # What an older jiyi left behind: the sync changed the content only (actor "files"),
    # and both the file and its sync state show that text, without counts.
    edited = skill.content.replace("read_url", "fetch_pdf")
    # (update() now reads a learning's new text back into its record; passing the old
    # record explicitly reproduces what the older sync stored)
    mem.update(skill.id, content=edited, structured=skill.structured, actor="files")
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            line_of(path, skill.id), f"- {edited} <!-- id:{skill.id} -->"
        ),
        encoding="utf-8",
    )
    state_path = root / ".jiyi" / "state" / "default" / "user" / "alice.json"
    state = json.loads(state_path.read_text(encoding="utf-8"))
    state["base"][skill.id][1] = edited
    state_path.write_text(json.dumps(state), encoding="utf-8")
    assert (mem.get(skill.id).structured or {})["workflow"][1]["tool"] == "read_url"  # the old bug

    report = mem.sync_files(user_id="alice")
    assert report.ok and not report.conflicts
    assert [(c.action, c.direction) for c in report.changes] == [("changed", "to_db")]
    tools = [s["tool"] for s in mem.suggest(SKILL_TASK["en"], user_id="alice").workflow]
    assert tools == ["web_search", "fetch_pdf", "summarize"]
    assert line_of(path, skill.id).endswith("summarize (1 success, 0 failures) <!-- id:" + skill.id + " -->")
    assert_in_step(mem)
