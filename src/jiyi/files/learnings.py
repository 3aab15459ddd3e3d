"""The line grammar of procedural learnings in learnings.md (see docs/files.md).

A skill, failure pattern or task decomposition recorded by :mod:`jiyi.procedural` is
shown as one line rendered from its ``structured`` record (what :meth:`suggest` reads),
in the language of its own words, followed by its counts::

    Skill deep_research (research a topic): web_search → read_url → summarize (3 successes, 1 failure)
    技能 深度调研（研究一个主题）：web_search → read_url → summarize（成功 3 次，失败 1 次）
    Failure pattern rate_limit (severity 4): signs: urgent, asap; mitigation: run them one by one (seen 2 times)
    失败模式 rate_limit（严重度 4）：征兆：紧急、尽快；对策：串行执行（出现 2 次）
    Split “Plan a trip” into 2 sequential subtasks: Book flights; Book a hotel (3 of 4 runs succeeded)
    把「规划旅行」拆成 2 个并行子任务：订机票；订酒店（4 次中成功 3 次）

The part before the counts is the item's ``content`` as :mod:`jiyi.procedural` writes
it, so search sees the same words. :func:`parse_learning` reads an edited line back
into the record: both languages and both kinds of punctuation are accepted, ``->`` for
``→``, and the counts may be left out. Counts record real runs, so they are never read
from a line (the database keeps them). A value that contains the grammar's own
punctuation (a tool named ``a → b``) is written with a backslash before it (``a \\→ b``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jiyi.errors import InvalidInput
from jiyi.model import DECOMPOSITION, FAILURE, SKILL, MemoryItem, MemoryType
from jiyi.procedural import (
    MAX_ITEMS,
    MAX_NAME,
    MAX_TEXT,
    decomposition_content,
    failure_content,
    skill_content,
)
from jiyi.text.pii import PiiKind, redact_value
from jiyi.text.tokenize import query_terms

HOME: dict[str, MemoryType] = {
    SKILL: MemoryType.SKILL,
    FAILURE: MemoryType.PATTERN,
    DECOMPOSITION: MemoryType.PATTERN,
}
"""The section (memory type) each kind of learning lives under."""

Counts = tuple[int, ...]
"""skill: (successes, failures); failure: (occurrences,); decomposition: (successes, uses)."""

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ESCAPABLE = frozenset(':：()（）→>,，、;；"“”「」\\')
_HIDDEN = "\x00"  # stands for an escaped character while delimiters are looked for

_SHAPE = {
    SKILL: "Skill NAME (DESCRIPTION): STEP → STEP (N successes, M failures)",
    FAILURE: "Failure pattern NAME (DESCRIPTION; severity 1-5): signs: WORDS, WORDS; mitigation: WHAT TO DO",
    DECOMPOSITION: "Split “TASK” into N parallel|sequential subtasks: SUBTASK; SUBTASK",
}
_SHAPE_ZH = {
    SKILL: "技能 名称（说明）：步骤 → 步骤（成功 N 次，失败 M 次）",
    FAILURE: "失败模式 名称（说明，严重度 1-5）：征兆：词、词；对策：做法",
    DECOMPOSITION: "把「任务」拆成 N 个并行|串行子任务：子任务；子任务",
}

_I = re.IGNORECASE
_COUNTS = {
    SKILL: (
        re.compile(r"\s*[(（]\s*(\d+)\s*success(?:es)?\s*[,，、;；]\s*(\d+)\s*failures?\s*[)）]$", _I),
        re.compile(r"\s*[(（]\s*成功\s*(\d+)\s*次\s*[,，、;；]\s*失败\s*(\d+)\s*次\s*[)）]$"),
    ),
    FAILURE: (
        re.compile(r"\s*[(（]\s*seen\s*(\d+)\s*times?\s*[)）]$", _I),
        re.compile(r"\s*[(（]\s*出现\s*(\d+)\s*次\s*[)）]$"),
    ),
    DECOMPOSITION: (
        re.compile(r"\s*[(（]\s*(\d+)\s*of\s*(\d+)\s*runs?\s*succeeded\s*[)）]$", _I),
        re.compile(r"\s*[(（]\s*(\d+)\s*次中成功\s*(\d+)\s*次\s*[)）]$"),
    ),
}
_SKILL_START = re.compile(r"^(?:skill\b|技能)\s*", _I)
_HEAD_END = re.compile(r":(?=\s|$)|：")
_STEP_SEP = re.compile(r"→|->")
_FAILURE_START = re.compile(r"^(?:failure\s+pattern\b|失败模式)\s*", _I)
_MITIGATION = re.compile(r"(?:mitigation|对策)\s*[:：]", _I)
_SIGNS = re.compile(r"(?:signs|indicators|征兆)\s*[:：]", _I)
_SEVERITY = re.compile(
    r"^(?:(?P<about>.*)[;；,，])?\s*(?:severity|严重度)\s*[:：]?\s*(?P<value>[^\s;；,，]*)\s*$", _I
)
_LIST_SEP = re.compile(r"[,，、]")
_SPLIT_START = re.compile(r"^(?:split\b|把)\s*", _I)
_OPEN_QUOTE = '“"「'
_PLAN = re.compile(
    r"[”\"」]\s*(?:into|拆成)\s*(?:\d+\s*)?(?:个\s*)?(?P<how>parallel|sequential|并行|串行)\s*"
    r"(?:subtasks?|子任务)\s*[:：]",
    _I,
)
_SUBTASK_SEP = re.compile(r"[;；]")
_OPENERS, _CLOSERS = "(（", ")）"


class LearningSyntaxError(InvalidInput):
    """An edited line that does not read as its kind of learning; the message says how
    the line should look."""


@dataclass(frozen=True)
class ParsedLearning:
    """An edited line read back: the new ``structured`` record and ``content`` (other
    fields of the record, e.g. counts and example tasks, are kept from the item)."""

    kind: str
    structured: dict[str, Any]
    content: str
    changed: tuple[str, ...]
    """The record's fields the line changed (``workflow``, ``mitigation`` ...)."""
    importance: float | None
    """A failure pattern's importance follows its severity (as when recorded); else None."""
    claimed: Counts | None
    """The counts written in the line, if any (never applied)."""


@dataclass(frozen=True)
class _View:
    kind: str
    fields: dict[str, Any]
    counts: Counts
    zh: bool


# ---------------------------------------------------------------- escaped text


@dataclass(frozen=True)
class _Src:
    """A line with its escapes resolved: ``plain`` holds the characters, ``mask`` the
    same with every escaped character hidden, so delimiters are only found in ``mask``."""

    plain: str
    mask: str

    @classmethod
    def read(cls, text: str) -> _Src:
        return cls.located(text)[0]

    @classmethod
    def located(cls, text: str) -> tuple[_Src, list[int]]:
        """The resolved text, and where each of its characters starts in ``text``."""
        if "\\" not in text:  # the usual case: nothing escaped
            return cls(text, text), list(range(len(text) + 1))
        plain: list[str] = []
        mask: list[str] = []
        at: list[int] = []
        i = 0
        while i < len(text):
            ch = text[i]
            at.append(i)
            if ch == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPABLE:
                plain.append(text[i + 1])
                mask.append(_HIDDEN)
                i += 2
            else:
                plain.append(ch)
                mask.append(ch)
                i += 1
        at.append(len(text))
        return cls("".join(plain), "".join(mask)), at

    def cut(self, start: int, end: int | None = None) -> _Src:
        return _Src(self.plain[start:end], self.mask[start:end])

    def strip(self) -> _Src:
        start = len(self.mask) - len(self.mask.lstrip())
        return self.cut(start, len(self.mask.rstrip()))

    def split(self, sep: re.Pattern[str]) -> list[str]:
        """The pieces between separators, stripped, empty ones dropped."""
        out: list[str] = []
        start = 0
        for found in sep.finditer(self.mask):
            out.append(self.plain[start : found.start()].strip())
            start = found.end()
        out.append(self.plain[start:].strip())
        return [p for p in out if p]

    def last(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        matches = list(pattern.finditer(self.mask))
        return matches[-1] if matches else None


def _escape_min(value: str) -> str:
    """Only what a reader needs to get the backslashes back."""
    if "\\" not in value:
        return value
    out: list[str] = []
    for i, ch in enumerate(value):
        if ch == "\\" and (i + 1 == len(value) or value[i + 1] in _ESCAPABLE):
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def _escape_all(value: str) -> str:
    return "".join(f"\\{ch}" if ch in _ESCAPABLE else ch for ch in value)


def _closing_group(src: _Src) -> tuple[str, _Src] | None:
    """``NAME (ABOUT)`` -> (NAME, ABOUT) when the text ends with a bracketed group that
    has something before it (nested brackets are matched)."""
    if not src.mask or src.mask[-1] not in _CLOSERS:
        return None
    depth = 0
    for i in range(len(src.mask) - 1, -1, -1):
        ch = src.mask[i]
        if ch in _CLOSERS:
            depth += 1
        elif ch in _OPENERS:
            depth -= 1
            if depth == 0:
                name = src.plain[:i].strip()
                return (name, src.cut(i + 1, len(src.mask) - 1).strip()) if name else None
    return None


# ---------------------------------------------------------------- the three grammars


def _zh(*texts: object) -> bool:
    """Chinese wording when any of the learning's own words are Chinese (as recorded)."""
    return any(isinstance(t, str) and _HAN.search(t) for t in texts)


def _fail(kind: str, why: str) -> LearningSyntaxError:
    return LearningSyntaxError(
        f"this line no longer reads as a {_NOUN[kind]} ({why}); write it as `{_SHAPE[kind]}` "
        f"or `{_SHAPE_ZH[kind]}`",
        field="content",
    )


_NOUN = {SKILL: "skill", FAILURE: "failure pattern", DECOMPOSITION: "task decomposition"}


def _render_skill(f: Mapping[str, Any], zh: bool, esc: Callable[[str], str]) -> str:
    about = f["description"]
    steps = " → ".join(esc(s) for s in f["steps"])
    if zh:
        return f"技能 {esc(f['name'])}{f'（{esc(about)}）' if about else ''}：{steps}"
    return f"Skill {esc(f['name'])}{f' ({esc(about)})' if about else ''}: {steps}"


def _parse_skill(src: _Src) -> dict[str, Any]:
    start = _SKILL_START.match(src.mask)
    if start is None:
        raise _fail(SKILL, "it should start with 'Skill' or '技能'")
    rest = src.cut(start.end())
    colon = rest.last(_HEAD_END)
    if colon is None:
        raise _fail(SKILL, "no ':' between the skill's name and its steps")
    head = rest.cut(0, colon.start()).strip()
    steps = rest.cut(colon.end()).split(_STEP_SEP)
    if not steps:
        raise _fail(SKILL, "no steps after the ':'")
    group = _closing_group(head)
    name, about = (group[0], group[1].plain) if group else (head.plain, "")
    if not name:
        raise _fail(SKILL, "the skill has no name")
    return {"name": name, "description": about or None, "steps": steps}


def _render_failure(f: Mapping[str, Any], zh: bool, esc: Callable[[str], str]) -> str:
    about = f["description"]
    if zh:
        head = f"{esc(about)}，" if about else ""
        return (
            f"失败模式 {esc(f['pattern'])}（{head}严重度 {f['severity']}）："
            f"征兆：{'、'.join(esc(i) for i in f['indicators'])}；对策：{esc(f['mitigation'])}"
        )
    head = f"{esc(about)}; " if about else ""
    return (
        f"Failure pattern {esc(f['pattern'])} ({head}severity {f['severity']}): "
        f"signs: {', '.join(esc(i) for i in f['indicators'])}; mitigation: {esc(f['mitigation'])}"
    )


def _parse_failure(src: _Src) -> dict[str, Any]:
    start = _FAILURE_START.match(src.mask)
    if start is None:
        raise _fail(FAILURE, "it should start with 'Failure pattern' or '失败模式'")
    rest = src.cut(start.end())
    mitigation = rest.last(_MITIGATION)
    if mitigation is None:
        raise _fail(FAILURE, "no 'mitigation:' / '对策：'")
    what = rest.cut(mitigation.end()).strip().plain
    rest = rest.cut(0, mitigation.start())
    signs = rest.last(_SIGNS)
    if signs is None:
        raise _fail(FAILURE, "no 'signs:' / '征兆：' before the mitigation")
    words = rest.cut(signs.end()).strip()
    if words.mask and words.mask[-1] in ";；":
        words = words.cut(0, -1)
    head = rest.cut(0, signs.start()).strip()
    if head.mask and head.mask[-1] in ":：":
        head = head.cut(0, -1).strip()
    group = _closing_group(head)
    if group is None:
        raise _fail(FAILURE, "the pattern's name should be followed by its severity in brackets")
    name, inner = group
    sev = _SEVERITY.match(inner.mask)
    if sev is None:
        raise _fail(FAILURE, "no 'severity N' / '严重度 N' in the brackets")
    value = inner.plain[sev.start("value") : sev.end("value")]
    if not value.isdecimal() or not 1 <= int(value) <= 5:
        raise _fail(FAILURE, f"severity must be a whole number from 1 to 5, not {value or 'nothing'!r}")
    about = inner.plain[: sev.end("about")].strip() if sev.group("about") is not None else ""
    if not what:
        raise _fail(FAILURE, "the mitigation is empty")
    return {
        "pattern": name,
        "description": about or None,
        "severity": int(value),
        "indicators": words.split(_LIST_SEP),
        "mitigation": what,
    }


def _render_decomposition(f: Mapping[str, Any], zh: bool, esc: Callable[[str], str]) -> str:
    subtasks, n = f["subtasks"], len(f["subtasks"])
    if zh:
        how = "并行" if f["strategy"] == "parallel" else "串行"
        return f"把「{esc(f['task'])}」拆成 {n} 个{how}子任务：{'；'.join(esc(s) for s in subtasks)}"
    plural = "" if n == 1 else "s"
    return (
        f"Split “{esc(f['task'])}” into {n} {f['strategy']} subtask{plural}: "
        f"{'; '.join(esc(s) for s in subtasks)}"
    )


def _parse_decomposition(src: _Src) -> dict[str, Any]:
    start = _SPLIT_START.match(src.mask)
    if start is None:
        raise _fail(DECOMPOSITION, "it should start with 'Split' or '把'")
    at = start.end()
    if at >= len(src.mask) or src.mask[at] not in _OPEN_QUOTE:
        raise _fail(DECOMPOSITION, "the task should be in quotes: “...” or 「...」")
    plan = _PLAN.search(src.mask, at + 1)
    if plan is None:
        raise _fail(
            DECOMPOSITION, "no “... into N parallel|sequential subtasks:” / 「...」拆成 N 个并行|串行子任务："
        )
    task = src.plain[at + 1 : plan.start()].strip()
    if not task:
        raise _fail(DECOMPOSITION, "the task is empty")
    subtasks = src.cut(plan.end()).split(_SUBTASK_SEP)
    if not subtasks:
        raise _fail(DECOMPOSITION, "no subtasks after the ':'")
    how = plan.group("how").lower()
    strategy = "parallel" if how in ("parallel", "并行") else "sequential"
    return {"task": task, "strategy": strategy, "subtasks": subtasks}


_RENDER = {SKILL: _render_skill, FAILURE: _render_failure, DECOMPOSITION: _render_decomposition}
_PARSE = {SKILL: _parse_skill, FAILURE: _parse_failure, DECOMPOSITION: _parse_decomposition}


def _counts_text(kind: str, counts: Counts, zh: bool) -> str:
    if kind == SKILL:
        ok, bad = counts
        if zh:
            return f"（成功 {ok} 次，失败 {bad} 次）"
        return f" ({ok} success{'' if ok == 1 else 'es'}, {bad} failure{'' if bad == 1 else 's'})"
    if kind == FAILURE:
        (seen,) = counts
        return f"（出现 {seen} 次）" if zh else f" (seen {seen} time{'' if seen == 1 else 's'})"
    ok, uses = counts
    return (
        f"（{uses} 次中成功 {ok} 次）" if zh else f" ({ok} of {uses} run{'' if uses == 1 else 's'} succeeded)"
    )


def split_counts(kind: str, text: str) -> tuple[str, Counts | None]:
    """A line of ``kind`` (whitespace runs made single spaces) without its trailing
    counts, escapes left as written, and the counts it shows (None when it shows none)."""
    line = " ".join(text.split())
    src, at = _Src.located(line)
    for pattern in _COUNTS.get(kind, ()):
        found = pattern.search(src.mask)
        if found is None:
            continue
        numbers = tuple(int(g) for g in found.groups())
        if pattern is _COUNTS[DECOMPOSITION][1]:
            numbers = (numbers[1], numbers[0])  # 「N 次中成功 S 次」 names the uses first
        return line[: at[found.start()]], numbers
    return line, None


# ---------------------------------------------------------------- reading stored records


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _strings(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return list(value)


def _view(item: MemoryItem) -> _View | None:
    """The learning's visible fields, counts and language; None when the item is not a
    readable skill, failure pattern or decomposition in its own section."""
    data = item.structured
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    if not isinstance(kind, str) or HOME.get(kind) is not item.memory_type:
        return None
    about = _string(data.get("description"))
    if kind == SKILL:
        name, workflow = _string(data.get("skill_name")), data.get("workflow")
        if name is None or not isinstance(workflow, list) or not workflow:
            return None
        steps = [s.get("tool") if isinstance(s, dict) else None for s in workflow]
        if not all(isinstance(s, str) and s.strip() for s in steps):
            return None
        tasks = _strings(data.get("tasks")) or []
        fields: dict[str, Any] = {"name": name, "description": about, "steps": steps}
        counts: Counts = (_count(data.get("successes")), _count(data.get("failures")))
        return _View(kind, fields, counts, _zh(name, about, *tasks))
    if kind == FAILURE:
        pattern, mitigation = _string(data.get("pattern")), _string(data.get("mitigation"))
        severity = data.get("severity")
        indicators = _strings(data.get("indicators"))
        if pattern is None or mitigation is None or indicators is None:
            return None
        if isinstance(severity, bool) or not isinstance(severity, int) or not 1 <= severity <= 5:
            return None
        fields = {
            "pattern": pattern,
            "description": about,
            "severity": severity,
            "indicators": indicators,
            "mitigation": mitigation,
        }
        return _View(
            kind,
            fields,
            (max(1, _count(data.get("occurrences"))),),
            _zh(pattern, about, mitigation, *indicators),
        )
    task, subtasks, strategy = (
        _string(data.get("query_pattern")),
        _strings(data.get("subtasks")),
        data.get("strategy"),
    )
    if task is None or not subtasks or strategy not in ("parallel", "sequential"):
        return None
    uses, rate = _count(data.get("usage_count")), data.get("success_rate")
    ok = (
        round(rate * uses)
        if isinstance(rate, int | float) and not isinstance(rate, bool) and 0 <= rate <= 1
        else 0
    )
    fields = {"task": task, "strategy": strategy, "subtasks": subtasks}
    return _View(kind, fields, (ok, uses), _zh(task, *subtasks))


def _render_text(view: _View) -> str | None:
    """The line without counts, escaped only as much as a reader needs: plain when that
    reads back to the same fields, every delimiter escaped otherwise; None when even
    that does not (e.g. a value with a line break, set through the API)."""
    frozen = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in view.fields.items())
    return _render_frozen(view.kind, frozen, view.zh)


@lru_cache(maxsize=4096)  # a sync renders each learning a few times
def _render_frozen(kind: str, frozen: tuple[tuple[str, Any], ...], zh: bool) -> str | None:
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in frozen}
    for esc in (_escape_min, _escape_all):
        text = _RENDER[kind](fields, zh, esc)
        try:
            again = _PARSE[kind](_Src.read(" ".join(text.split())))
        except LearningSyntaxError:
            continue
        if again == fields:
            return text
    return None


def learning_kind(item: MemoryItem) -> str | None:
    """``"skill"``, ``"failure"`` or ``"decomposition"`` when learnings.md shows ``item``
    in the line grammar of that kind; None for any other memory."""
    view = _view(item)
    return view.kind if view is not None and _render_text(view) is not None else None


def describe_learning(item: MemoryItem) -> str | None:
    """The learnings.md line of a procedural learning (its record and counts, in the
    language of its words); None when ``item`` is not one (its content is shown instead)."""
    view = _view(item)
    if view is None:
        return None
    text = _render_text(view)
    return None if text is None else text + _counts_text(view.kind, view.counts, view.zh)


def stored_counts(item: MemoryItem) -> Counts | None:
    """The counts a learning's line shows."""
    view = _view(item)
    return None if view is None else view.counts


# ---------------------------------------------------------------- reading an edited line


def _check(kind: str, fields: dict[str, Any]) -> None:
    """The limits :mod:`jiyi.procedural` puts on recorded learnings."""

    def limit(value: str, what: str, max_len: int) -> None:
        if len(value) > max_len:
            raise _fail(kind, f"{what} is {len(value)} characters long; the limit is {max_len}")

    def many(values: Sequence[str], what: str) -> None:
        if len(values) > MAX_ITEMS:
            raise _fail(kind, f"{len(values)} {what}; the limit is {MAX_ITEMS}")

    if fields.get("description"):
        limit(fields["description"], "the description", MAX_TEXT)
    if kind == SKILL:
        limit(fields["name"], "the name", MAX_NAME)
        many(fields["steps"], "steps")
        for step in fields["steps"]:
            limit(step, f"step {step[:20]!r}", MAX_NAME)
    elif kind == FAILURE:
        limit(fields["pattern"], "the name", MAX_NAME)
        limit(fields["mitigation"], "the mitigation", MAX_TEXT)
        if not fields["indicators"]:
            raise _fail(kind, "no signs: list the words in a task that announce this failure")
        many(fields["indicators"], "signs")
        for word in fields["indicators"]:
            limit(word, f"sign {word[:20]!r}", MAX_NAME)
            if not query_terms(word) and not _HAN.search(word):
                raise _fail(kind, f"the sign {word!r} has no words to look for in a task")
    else:
        limit(fields["task"], "the task", MAX_TEXT)
        many(fields["subtasks"], "subtasks")
        for sub in fields["subtasks"]:
            limit(sub, f"subtask {sub[:20]!r}", MAX_TEXT)


def _workflow(old: object, tools: Sequence[str]) -> list[dict[str, Any]]:
    """Steps numbered 1.. in the line's order; a step keeps the extra fields (e.g.
    ``max_words``) of the old step with the same tool."""
    spare: dict[str, list[dict[str, Any]]] = {}
    for step in old if isinstance(old, list) else []:
        if isinstance(step, dict) and isinstance(step.get("tool"), str):
            extra = {k: v for k, v in step.items() if k not in ("step", "tool")}
            spare.setdefault(step["tool"], []).append(extra)
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        kept = spare.get(tool)
        out.append({"step": i + 1, "tool": tool, **(kept.pop(0) if kept else {})})
    return out


def parse_learning(
    item: MemoryItem, text: str, *, redact_pii: bool | Collection[PiiKind] = True
) -> ParsedLearning:
    """Read an edited learnings.md line of the learning ``item`` back into its record.

    The line's name, description, steps, signs, mitigation, severity, task, subtasks
    and strategy replace the item's; its counts, example tasks, other wordings and extra
    step fields are kept (counts record real runs and are never read from a line). The
    new ``content`` is worded as :mod:`jiyi.procedural` words it. Raises
    :class:`LearningSyntaxError` (an :class:`~jiyi.errors.InvalidInput`) naming what is
    wrong when the line does not read as the item's kind, and InvalidInput when ``item``
    is not a learning. Sensitive data never enters procedural memory, as when it is
    recorded: ``redact_pii`` is on/off or the kinds to redact (the tenant's policy).
    """
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, not {type(text).__name__}", field="text")
    view = _view(item)
    if view is None:
        raise InvalidInput(
            f"memory {item.id} is not a skill, failure pattern or task decomposition", field="id"
        )
    kind = view.kind
    body, claimed = split_counts(kind, text)
    fields = _PARSE[kind](_Src.read(body))
    _check(kind, fields)
    fields = redact_value(fields, None if redact_pii is True else () if redact_pii is False else redact_pii)
    data: dict[str, Any] = dict(item.structured or {})
    if fields.get("description"):
        data["description"] = fields["description"]
    else:
        data.pop("description", None)
    importance: float | None = None
    if kind == SKILL:
        data["skill_name"] = fields["name"]
        data["workflow"] = _workflow(data.get("workflow"), fields["steps"])
        zh = _zh(fields["name"], fields["description"], *(_strings(data.get("tasks")) or []))
        content = skill_content(fields["name"], data["workflow"], fields["description"], zh)
    elif kind == FAILURE:
        for key in ("pattern", "indicators", "mitigation", "severity"):
            data[key] = fields[key]
        zh = _zh(fields["pattern"], fields["description"], fields["mitigation"], *fields["indicators"])
        content = failure_content(
            fields["pattern"],
            fields["indicators"],
            fields["mitigation"],
            fields["severity"],
            fields["description"],
            zh,
        )
        importance = 0.5 + 0.1 * (fields["severity"] - 1)  # as record_failure sets it
    else:
        data["query_pattern"] = fields["task"]
        data["subtasks"] = fields["subtasks"]
        data["strategy"] = fields["strategy"]
        zh = _zh(fields["task"], *fields["subtasks"])
        content = decomposition_content(fields["task"], fields["subtasks"], fields["strategy"], zh)
    names = {"name": "skill_name", "steps": "workflow", "task": "query_pattern"}
    changed = tuple(names.get(k, k) for k, v in fields.items() if view.fields.get(k) != v)
    return ParsedLearning(kind, data, content, changed, importance, claimed)


def counts_note(kind: str, counts: Counts, zh: bool = False) -> str:
    """What a report says when a line's counts were edited: they are kept."""
    shown = _counts_text(kind, counts, zh).strip().strip("()（）")
    return f"the counts are kept as recorded ({shown}): they count real runs and are not read from the file"
