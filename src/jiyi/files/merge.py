"""The three-way merge of a scope's files (F), its database items (D) and the state at
the last sync (B, the common ancestor). Pure: :func:`plan_sync` decides, the flow applies
the database actions, :func:`finish_sync` turns their outcomes into the files to write.

Per memory id (``==`` compares section and text):

=========================  ============================================================
F == B, D == B             nothing to do
F == B, D != B             the database changed: the file follows (a line is added,
                           changed, moved or removed)
F != B, D == B             the file changed: update the text (re-embedded) or the type
                           (moved line); archive (deleted line); restore (line put back)
F != B, D != B, F == D     both made the same change: fine
F != B, D != B, F != D     CONFLICT: reported, neither side overwritten (the file keeps
                           the person's line), reported again until resolved by editing
                           the line to match or by ``prefer="file"`` / ``prefer="db"``
=========================  ============================================================

A procedural learning (skill, failure pattern, decomposition) is compared without the
counts at the end of its line: counts are the database's, never read from a file. An
edited learning line is read back into the learning's record (:mod:`.learnings`); a
line that no longer reads as its kind is reported and kept, like any unreadable line.

A line without an id is added through the write gate, unless the database gained the
same text since the last sync (both added it). A line whose id the database has no
trace of at all (a new or wiped database) is added again: the file is the source of
truth. Lines that cannot be applied are reported with their line numbers and kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jiyi.config import GateConfig
from jiyi.errors import InvalidInput
from jiyi.files.document import Entry, Extras, Placed, at_key, normal_text
from jiyi.files.layout import FILE_NAMES, ScopeRef, file_for, is_file_memory
from jiyi.files.learnings import HOME, counts_note, learning_kind, parse_learning, split_counts
from jiyi.files.parse import Line, Problem, ScopeParse
from jiyi.files.render import render_file
from jiyi.files.report import FileChange, FileConflict, FileError
from jiyi.files.state import ScopeState, digest
from jiyi.model import MemoryItem, Status
from jiyi.write.gate import GateDecision, screen

Prefer = Literal["file", "db"] | None


@dataclass(frozen=True)
class Known:
    """What the database says about an id the files show but the scope's visible items
    lack: the item in another state or scope, or only history (purged), or nothing."""

    item: MemoryItem | None
    purged: bool = False


@dataclass(frozen=True)
class Action:
    """One database change a sync makes (through the Memory API, actor ``files``)."""

    kind: Literal["update", "archive", "restore", "add"]
    file: str
    item_id: str | None  # add: None
    line: Line | None  # the person's line (archive: None)
    changes: tuple[tuple[str, Any], ...] = ()
    reason: str = ""
    replaces: str | None = None  # add: the id the line carried (a memory the database lost)
    at: str = ""
    base_before: Placed | None = None
    detail: str = ""


@dataclass(frozen=True)
class Applied:
    """How an action went: the item it produced, the gate's decision (add), or an error."""

    item: MemoryItem | None = None
    decision: GateDecision | None = None
    error: str | None = None


@dataclass
class Plan:
    ref: ScopeRef
    rel: Callable[[str], str]
    shown: dict[str, Placed] = field(default_factory=dict)
    base: dict[str, Placed] = field(default_factory=dict)
    overrides: dict[str, Placed | None] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)
    conflicts: list[FileConflict] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    extras: dict[str, Extras] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    frozen: set[str] = field(default_factory=set)  # ids whose entries stay exactly as they were
    screened: _Screen | None = None

    def error(self, problem: Problem) -> None:
        self.errors.append(FileError(self.rel(problem.file), problem.line, problem.message, problem.text))

    def keep_line(self, line: Line, message: str) -> None:
        """Report a line and keep it verbatim where it stood."""
        self.error(Problem(line.file, line.line, message, line.entry.text))
        self.extras.setdefault(line.file, Extras()).add(line.entry.memory_type.value, line.line, line.raw)


class _Screen:
    """The gate's content checks, cached per text: redaction decides whether a line and
    a stored memory say the same thing; refusals are predicted for dry runs."""

    def __init__(self, gate: GateConfig, tenant_id: str) -> None:
        self.gate = gate
        self.tenant_id = tenant_id
        self._cache: dict[str, str | GateDecision] = {}

    def __call__(self, text: str) -> str | GateDecision:
        hit = self._cache.get(text)
        if hit is None:
            result = screen(text, 1.0, self.gate, self.tenant_id)
            hit = result if isinstance(result, GateDecision) else normal_text(result.text)
            self._cache[text] = hit
        return hit

    def same(self, line: Entry | None, stored: Entry | None) -> bool:
        if line is None or stored is None:
            return line is None and stored is None
        if line.memory_type is not stored.memory_type:
            return False
        return line.text == stored.text or self(line.text) == stored.text


def _describe(entry: Entry) -> str:
    return f"## {entry.memory_type.value}"


_NOUN = {"skill": "skill", "failure": "failure pattern", "decomposition": "task decomposition"}


def _key(entry: Entry | None, kind: str | None) -> Entry | None:
    """What the merge compares: a learning's line without its counts."""
    if entry is None or kind is None or entry.memory_type is not HOME[kind]:
        return entry
    return Entry(entry.memory_type, split_counts(kind, entry.text)[0])


def _counts_edited(kind: str | None, f: Entry | None, b: Entry | None, d: Entry | None) -> str:
    """A note when a person changed a learning line's counts (they are kept), else ""."""
    if kind is None or f is None or d is None or f.memory_type is not HOME[kind]:
        return ""
    claimed = split_counts(kind, f.text)[1]
    if claimed is None or (b is not None and split_counts(kind, b.text)[1] == claimed):
        return ""
    stored = split_counts(kind, d.text)[1]
    return "" if stored is None or stored == claimed else counts_note(kind, stored)


def _why_hidden(item: MemoryItem) -> str:
    if item.thread_id is not None:
        return "is a piece of a conversation or document"
    if "episode" in item.tags:
        return "is an episode summary"
    return "is a profile"


def plan_sync(
    ref: ScopeRef,
    parse: ScopeParse,
    state: ScopeState | None,
    visible: Mapping[str, MemoryItem],
    known: Mapping[str, Known],
    *,
    prefer: Prefer,
    now: datetime,
    gate: GateConfig,
    rel: Callable[[str], str],
) -> Plan:
    """Decide every id's fate; database actions are listed, not run."""
    screened = _Screen(gate, ref.tenant_id)
    plan = Plan(ref, rel, blocked=parse.blocked, screened=screened)
    base0 = dict(state.base) if state else {}
    over0 = dict(state.overrides) if state else {}
    for name, parsed in parse.files.items():
        plan.extras[name] = parsed.extras if not parsed.blocked else Extras()
    for problem in parse.problems:
        plan.error(problem)
    stored = {i: Placed.of(item) for i, item in visible.items()}
    held = set(parse.held)
    if plan.blocked:
        _freeze_blocked(plan, parse.by_id, state, base0, stored, over0, held)
    _carry_held(plan, held, base0, over0)
    _new_lines(plan, parse, base0, stored, held, screened)
    merge = _Merge(plan, screened, parse.by_id, base0, stored, visible, known, prefer, at_key(now))
    for item_id in sorted((parse.by_id.keys() | base0.keys() | stored.keys()) - held - plan.shown.keys()):
        merge.decide(item_id)
    plan.actions.sort(key=lambda a: (a.file, a.line.line if a.line else 0))
    return plan


def _freeze_blocked(
    plan: Plan,
    lines: Mapping[str, Line],
    state: ScopeState | None,
    base0: Mapping[str, Placed],
    stored: Mapping[str, Placed],
    over0: Mapping[str, Placed | None],
    held: set[str],
) -> None:
    """Anything tied to a file nothing could be read from stays exactly as it was."""
    for item_id in base0.keys() | stored.keys() | over0.keys():
        homes = {
            file_for(p.entry.memory_type)
            for p in (base0.get(item_id), stored.get(item_id), over0.get(item_id))
            if p is not None
        }
        if homes & plan.blocked:
            plan.frozen.add(item_id)
            held.add(item_id)
            if item_id in lines:  # e.g. moved out of the unreadable file: keep the line
                plan.keep_line(
                    lines[item_id],
                    f"memory {item_id} also belongs to {', '.join(sorted(homes & plan.blocked))}, "
                    "which could not be read; this line is applied once that file is fixed",
                )
    for name in plan.blocked:
        plan.extras[name] = (state.extras.get(name) if state else None) or Extras()


def _carry_held(
    plan: Plan, held: set[str], base0: Mapping[str, Placed], over0: Mapping[str, Placed | None]
) -> None:
    """Held ids keep their base. A frozen id keeps its override; any other held id's
    line is kept verbatim, so its base entry is not shown as well (override None)."""
    for item_id in held:
        if item_id in base0:
            plan.base[item_id] = base0[item_id]
        if item_id in plan.frozen:
            if item_id in over0:
                plan.overrides[item_id] = over0[item_id]
        elif item_id in base0:
            plan.overrides[item_id] = None  # its line is kept verbatim


@dataclass(frozen=True)
class _Sides:
    """One id's three versions (file, base, database) and the item it stands for now."""

    item_id: str
    line: Line | None
    f: Entry | None
    b: Entry | None
    d: Entry | None
    at: str  # when it was stored (now, for a line new to both)
    info: Known | None
    item: MemoryItem | None  # the visible item
    kind: str | None  # a learning's kind: its counts are not compared

    @property
    def keys(self) -> tuple[Entry | None, Entry | None, Entry | None]:
        return _key(self.f, self.kind), _key(self.b, self.kind), _key(self.d, self.kind)

    @property
    def untraced(self) -> bool:
        """The database has no trace of the id (a new or rebuilt database)."""
        info = self.info
        return self.d is None and info is not None and info.item is None and not info.purged


@dataclass(frozen=True)
class _Merge:
    """The three-way decision per id (module docstring), written into ``plan``."""

    plan: Plan
    screened: _Screen
    lines: Mapping[str, Line]
    base0: Mapping[str, Placed]
    stored: Mapping[str, Placed]
    visible: Mapping[str, MemoryItem]
    known: Mapping[str, Known]
    prefer: Prefer
    now_key: str

    def sides(self, item_id: str) -> _Sides:
        line = self.lines.get(item_id)
        source = self.stored.get(item_id) or self.base0.get(item_id)
        info = self.known.get(item_id)
        item_now = self.visible.get(item_id) or (info.item if info is not None else None)
        return _Sides(
            item_id,
            line,
            line.entry if line else None,
            self.base0[item_id].entry if item_id in self.base0 else None,
            self.stored[item_id].entry if item_id in self.stored else None,
            source.at if source else self.now_key,
            info,
            self.visible.get(item_id),
            learning_kind(item_now) if item_now is not None else None,
        )

    def decide(self, item_id: str) -> None:
        s = self.sides(item_id)
        fk, bk, dk = s.keys
        file_changed, db_changed = fk != bk, dk != bk
        if s.line is not None and s.untraced:  # the file is the truth
            _readd(self.plan, item_id, s.line, self.base0.get(item_id), "the database had no record of it")
        elif not file_changed and not db_changed:
            self.unchanged(s)
        elif not file_changed and _text_ahead(s.kind, s.f, s.b, s.item):
            self.to_db(s)
        elif not file_changed:
            self.to_file(s)
        elif not db_changed:
            self.to_db(s)
        elif self.screened.same(fk, dk) or _reads_as(self.plan, s.line, s.item):
            self.agreed(s)
        elif self.prefer == "file":
            self.to_db(s)
        elif self.prefer == "db":
            _to_file(self.plan, item_id, s.f, self.stored.get(item_id))
        else:
            _conflict(self.plan, item_id, s.line, s.f, s.d, self.base0, s.at)

    def unchanged(self, s: _Sides) -> None:
        """Neither side changed what is compared."""
        if s.f is not None and s.f != s.d:  # a learning's counts (or spacing) differ: the database's
            _to_file(self.plan, s.item_id, s.f, self.stored[s.item_id], _counts_edited(s.kind, s.f, s.b, s.d))
        elif s.f is not None:
            _show(self.plan, s.item_id, Placed(s.f, s.at))
            self.plan.base[s.item_id] = self.base0[s.item_id]

    def agreed(self, s: _Sides) -> None:
        """Both sides made the same change."""
        if s.d is not None and s.f != s.d:
            _to_file(self.plan, s.item_id, s.f, self.stored[s.item_id], _counts_edited(s.kind, s.f, s.b, s.d))
        elif s.d is not None:
            _show(self.plan, s.item_id, self.stored[s.item_id])
            self.plan.base[s.item_id] = self.stored[s.item_id]

    def to_db(self, s: _Sides) -> None:
        """The file changed: the person's version goes into the database."""
        _to_db(self.plan, s.item_id, s.line, s.item, s.info, self.base0.get(s.item_id), s.at)

    def to_file(self, s: _Sides) -> None:
        """The database changed: the file follows (a changed count is noted)."""
        _to_file(self.plan, s.item_id, s.f, self.stored.get(s.item_id), _counts_edited(s.kind, s.f, s.b, s.d))


def _show(plan: Plan, item_id: str, placed: Placed) -> None:
    plan.shown[item_id] = placed


def _new_lines(
    plan: Plan,
    parse: ScopeParse,
    base0: Mapping[str, Placed],
    stored: Mapping[str, Placed],
    held: set[str],
    screened: _Screen,
) -> None:
    """Lines without an id: the same text the database gained since the last sync is
    the same memory (added on both sides, or a crash between the two); others are added."""
    pool: dict[tuple[str, str], str] = {}
    for item_id, placed in sorted(stored.items(), key=lambda kv: (kv[1].at, kv[0])):
        if item_id not in base0 and item_id not in parse.by_id and item_id not in held:
            pool.setdefault((placed.entry.memory_type.value, placed.entry.text), item_id)
    for line in parse.new:
        kind = line.entry.memory_type.value
        verdict = screened(line.entry.text)
        match = pool.pop((kind, line.entry.text), None)
        if match is None and isinstance(verdict, str):
            match = pool.pop((kind, verdict), None)
        if match is not None:
            _show(plan, match, stored[match])
            plan.base[match] = stored[match]
            continue
        plan.actions.append(
            Action("add", line.file, None, line, reason=f"{line.file} line {line.line}: added in the file")
        )


def _to_file(plan: Plan, item_id: str, f: Entry | None, d: Placed | None, note: str = "") -> None:
    """The database's version goes into the file (``note``: why the person's counts went)."""
    if d is None:
        plan.base.pop(item_id, None)
        if f is not None:
            plan.changes.append(
                FileChange(plan.rel(file_for(f.memory_type)), "removed", "to_file", item_id, f.text)
            )
        return
    _show(plan, item_id, d)
    plan.base[item_id] = d
    e = d.entry
    where = plan.rel(file_for(e.memory_type))
    if f is None:
        plan.changes.append(FileChange(where, "added", "to_file", item_id, e.text, detail=_describe(e)))
        return
    if f.text != e.text:
        detail = f"was: {f.text}" + (f"; {note}" if note else "")
        plan.changes.append(FileChange(where, "changed", "to_file", item_id, e.text, detail=detail))
    if f.memory_type is not e.memory_type:
        plan.changes.append(
            FileChange(where, "moved", "to_file", item_id, e.text, detail=f"{_describe(f)} -> {_describe(e)}")
        )


def _to_db(
    plan: Plan,
    item_id: str,
    line: Line | None,
    item: MemoryItem | None,
    info: Known | None,
    base_before: Placed | None,
    at: str,
) -> None:
    """The person's version goes into the database (as an action), and into the file."""
    if line is None:
        _archive(plan, item_id, item, base_before)
    elif item is not None:
        kind = learning_kind(item)
        if kind is not None and line.entry.memory_type is item.memory_type:
            _learning_to_db(plan, item_id, line, item, kind, base_before, at)
        else:
            _edit(plan, item_id, line, item, kind, base_before, at)
    else:
        _bring_back(plan, item_id, line, info, base_before)


def _archive(plan: Plan, item_id: str, item: MemoryItem | None, base_before: Placed | None) -> None:
    """A deleted line archives its memory."""
    if item is None:  # deleted on both sides
        plan.base.pop(item_id, None)
        return
    name = file_for(item.memory_type)
    plan.actions.append(
        Action(
            "archive",
            name,
            item_id,
            None,
            reason=f"{name}: the line was deleted from the file",
            base_before=base_before,
        )
    )


def _edit(
    plan: Plan,
    item_id: str,
    line: Line,
    item: MemoryItem,
    kind: str | None,
    base_before: Placed | None,
    at: str,
) -> None:
    """An edited or moved line updates its memory."""
    f = line.entry
    current = Entry.of(item)
    changes: list[tuple[str, Any]] = []
    what: list[str] = []
    if f.text != current.text:
        changes.append(("content", f.text))
        what.append("text edited")
        gate = plan.screened.gate if plan.screened else None
        if gate is not None and item.confidence < gate.min_confidence:
            # A person wrote this text: it is no longer a low-confidence guess.
            changes.append(("confidence", gate.min_confidence))
    if f.memory_type is not current.memory_type:
        changes.append(("memory_type", f.memory_type))
        what.append(f"moved from {_describe(current)} to {_describe(f)}")
    detail = f"{_describe(current)} -> {_describe(f)}" if current.memory_type is not f.memory_type else ""
    if kind is not None:  # a learning moved out of its section becomes a plain memory
        changes.append(("structured", None))
        detail += f"; no longer a {_NOUN[kind]} that suggest() uses (its record stays in its history)"
    plan.actions.append(
        Action(
            "update",
            line.file,
            item_id,
            line,
            tuple(changes),
            reason=f"{line.file} line {line.line}: {', '.join(what)} in the file",
            at=at,
            base_before=base_before,
            detail=detail,
        )
    )


def _bring_back(plan: Plan, item_id: str, line: Line, info: Known | None, base_before: Placed | None) -> None:
    """A line whose memory the scope's visible items lack: added again, restored, or
    kept and reported when the memory is not one the files may change."""
    found = info.item if info else None
    if found is None:
        why = (
            "the memory was deleted for good" if info and info.purged else "the database had no record of it"
        )
        _readd(plan, item_id, line, base_before, why)
        return
    why_not = _not_restorable(plan, item_id, found)
    if why_not is not None:
        plan.keep_line(line, why_not)
        _hold(plan, item_id, base_before)
        return
    _restore(plan, item_id, line, found, base_before)


def _not_restorable(plan: Plan, item_id: str, found: MemoryItem) -> str | None:
    """Why a line may not bring ``found`` back into this file, or None."""
    if found.scope_key != plan.ref.key:
        return (
            f"id {item_id} belongs to {found.scope.value} {found.scope_id}, not to this file's "
            f"{plan.ref.describe()}; remove the id comment to add it here as a new memory"
        )
    if found.status is Status.SUPERSEDED:
        newer = next((r.target_id for r in found.relations if r.type.value == "superseded_by"), None)
        return (
            f"memory {item_id} was superseded"
            + (f" by {newer}" if newer else "")
            + "; edit the newer memory's line instead (or remove the id comment to add this as new)"
        )
    if found.thread_id is not None or {"episode", "profile"} & set(found.tags):
        return f"memory {item_id} {_why_hidden(found)}, which the files do not hold"
    return None


def _restore(plan: Plan, item_id: str, line: Line, found: MemoryItem, base_before: Placed | None) -> None:
    """Archived or expired: the line was put back, so the memory comes back."""
    f = line.entry
    current = Entry.of(found)
    changes: list[tuple[str, Any]] = [("status", Status.ACTIVE)]
    if found.expires_at is not None:
        changes.append(("expires_at", None))
    kind = learning_kind(found)
    if kind is not None and f.memory_type is found.memory_type:
        if _key(f, kind) != _key(current, kind):
            edited = _learning_changes(plan, line, found)
            if isinstance(edited, str):
                _keep_learning(plan, item_id, line, kind, edited, base_before)
                return
            changes.extend(edited[0])
    else:
        if f.text != current.text:
            changes.append(("content", f.text))
        if kind is not None:
            changes.append(("structured", None))
    if f.memory_type is not current.memory_type:
        changes.append(("memory_type", f.memory_type))
    plan.actions.append(
        Action(
            "restore",
            line.file,
            item_id,
            line,
            tuple(changes),
            reason=f"{line.file} line {line.line}: the line was put back in the file",
            at=at_key(found.created_at),
            base_before=base_before,
        )
    )


def _learning_changes(plan: Plan, line: Line, item: MemoryItem) -> tuple[list[tuple[str, Any]], str] | str:
    """The changes an edited learning line makes (and which fields it changed), or why
    the line does not read as the learning's kind."""
    gate = plan.screened.gate if plan.screened else None
    try:
        parsed = parse_learning(
            item, line.entry.text, redact_pii=gate.redaction(item.tenant_id) if gate else True
        )
    except InvalidInput as exc:
        return str(exc)
    changes: list[tuple[str, Any]] = []
    if parsed.structured != item.structured:
        changes.append(("structured", parsed.structured))
    if parsed.content != item.content:
        changes.append(("content", parsed.content))
        if gate is not None and item.confidence < gate.min_confidence:
            changes.append(("confidence", gate.min_confidence))  # as for any edited line
    if parsed.importance is not None and abs(parsed.importance - item.importance) > 1e-9:
        changes.append(("importance", parsed.importance))  # a failure's follows its severity
    return changes, ", ".join(parsed.changed)


def _text_ahead(kind: str | None, f: Entry | None, b: Entry | None, item: MemoryItem | None) -> bool:
    """A learning whose line a person edited before lines were read back into records
    (files of that time show no counts): its text is newer than its record, so the
    line is read back now instead of being overwritten by the old record."""
    if kind is None or item is None or f is None or f != b or f.memory_type is not item.memory_type:
        return False
    return split_counts(kind, f.text)[1] is None and f.text == normal_text(item.content)


def _reads_as(plan: Plan, line: Line | None, item: MemoryItem | None) -> bool:
    """Whether a learning's line, however it is written, says what its record says (an
    edit that reached the database before a crash, then agrees with it)."""
    if line is None or item is None or line.entry.memory_type is not item.memory_type:
        return False
    if learning_kind(item) is None:
        return False
    edited = _learning_changes(plan, line, item)
    return not isinstance(edited, str) and all(name != "structured" for name, _ in edited[0])


def _keep_learning(
    plan: Plan, item_id: str, line: Line, kind: str, why: str, base_before: Placed | None
) -> None:
    plan.keep_line(
        line,
        f"{why}. The {_NOUN[kind]} was left as it was; this line stays as you wrote it and is "
        "reported at every sync until it reads as one again",
    )
    _hold(plan, item_id, base_before)


def _learning_to_db(
    plan: Plan, item_id: str, line: Line, item: MemoryItem, kind: str, base_before: Placed | None, at: str
) -> None:
    """An edited learning line: its fields go into the learning's record (counts stay)."""
    edited = _learning_changes(plan, line, item)
    if isinstance(edited, str):
        _keep_learning(plan, item_id, line, kind, edited, base_before)
        return
    changes, fields = edited
    current = Entry.of(item)
    note = _counts_edited(kind, line.entry, base_before.entry if base_before else None, current)
    if not changes:  # the same record written differently (spacing, punctuation): the usual form
        _to_file(plan, item_id, line.entry, Placed(current, at), note)
        return
    plan.actions.append(
        Action(
            "update",
            line.file,
            item_id,
            line,
            tuple(changes),
            reason=f"{line.file} line {line.line}: {_NOUN[kind]} edited in the file ({fields})",
            at=at,
            base_before=base_before,
            detail="; ".join(x for x in (f"changed {fields}" if fields else "", note) if x),
        )
    )


def _readd(plan: Plan, item_id: str, line: Line, base_before: Placed | None, why: str) -> None:
    plan.actions.append(
        Action(
            "add",
            line.file,
            None,
            line,
            reason=f"{line.file} line {line.line}: added again ({why})",
            replaces=item_id,
            base_before=base_before,
        )
    )


def _hold(plan: Plan, item_id: str, base_before: Placed | None) -> None:
    if base_before is not None:
        plan.base[item_id] = base_before
        plan.overrides[item_id] = None


def _conflict(
    plan: Plan,
    item_id: str,
    line: Line | None,
    f: Entry | None,
    d: Entry | None,
    base0: Mapping[str, Placed],
    at: str,
) -> None:
    """Report; keep the person's line in the file and the database as it is. The base
    stays, so the next sync finds the same conflict until it is resolved."""
    if f is not None:
        _show(plan, item_id, Placed(f, at))
    if item_id in base0:
        plan.base[item_id] = base0[item_id]
    name = line.file if line else file_for((d or base0[item_id].entry).memory_type)
    plan.conflicts.append(
        FileConflict(
            plan.rel(name),
            item_id,
            line.line if line else None,
            f.text if f else None,
            d.text if d else None,
            f.memory_type.value if f else None,
            d.memory_type.value if d else None,
        )
    )


# ---------------------------------------------------------------- after the actions ran


@dataclass
class Finished:
    texts: dict[str, str | None]  # None: leave that file alone
    state: ScopeState | None  # None: nothing to write for this scope
    changes: list[FileChange]
    errors: list[FileError]


def preview(plan: Plan) -> tuple[list[FileChange], list[FileError]]:
    """The database changes a dry run would make, and the additions the gate's content
    checks would refuse (duplicates are only found when the sync runs)."""
    changes: list[FileChange] = []
    errors: list[FileError] = []
    for a in plan.actions:
        line = a.line
        text = line.entry.text if line else (a.base_before.entry.text if a.base_before else "")
        if a.kind == "add" and line is not None and plan.screened is not None:
            verdict = plan.screened(text)
            if isinstance(verdict, GateDecision):
                errors.append(
                    FileError(
                        plan.rel(a.file), line.line, f"would not be added: {'; '.join(verdict.reasons)}", text
                    )
                )
                continue
        kind = {"update": "changed", "archive": "archived", "restore": "restored", "add": "added"}[a.kind]
        if a.kind == "update" and "memory_type" in dict(a.changes) and "content" not in dict(a.changes):
            kind = "moved"
        changes.append(
            FileChange(
                plan.rel(a.file), kind, "to_db", a.item_id, text, line.line if line else None, a.detail
            )
        )
    return changes, errors


def finish_sync(
    plan: Plan,
    results: list[tuple[Action, Applied]],
    state: ScopeState | None,
    *,
    now: datetime,
    files_exist: bool,
) -> Finished:
    """Fold the actions' outcomes into what the files show and the new base; render."""
    changes: list[FileChange] = []
    errors: list[FileError] = []
    for action, result in results:
        if action.kind in ("update", "restore"):
            _finish_update(plan, action, result, now, changes, errors)
        elif action.kind == "archive":
            _finish_archive(plan, action, result, changes, errors)
        else:
            _finish_add(plan, action, result, now, changes)
    _settle_overrides(plan)
    has_any = bool(plan.shown) or any(e.places() for e in plan.extras.values())
    if not has_any and state is None and not files_exist:
        return Finished({}, None, changes, errors)
    texts, new_state = _render(plan, state)
    return Finished(texts, new_state, changes, errors)


def _failed(plan: Plan, action: Action, message: str) -> FileError:
    line = action.line
    return FileError(
        plan.rel(action.file), line.line if line else None, message, line.entry.text if line else ""
    )


def _finish_update(
    plan: Plan,
    action: Action,
    result: Applied,
    now: datetime,
    changes: list[FileChange],
    errors: list[FileError],
) -> None:
    """An update or restore: the file shows the stored item, or keeps the line on failure."""
    line = action.line
    assert action.item_id is not None
    assert line is not None
    if result.item is None:
        errors.append(_failed(plan, action, f"not applied: {result.error}"))
        plan.shown[action.item_id] = Placed(line.entry, action.at or at_key(now))
        if action.base_before is not None:
            plan.base[action.item_id] = action.base_before
        return
    _adopt(plan, result.item, now)
    kinds = dict(action.changes)
    moved = "memory_type" in kinds and "content" not in kinds
    verb = "restored" if action.kind == "restore" else ("moved" if moved else "changed")
    changes.append(
        FileChange(
            plan.rel(action.file),
            verb,
            "to_db",
            action.item_id,
            Entry.of(result.item).text,
            line.line,
            action.detail,
        )
    )


def _finish_archive(
    plan: Plan, action: Action, result: Applied, changes: list[FileChange], errors: list[FileError]
) -> None:
    """An archive: the memory leaves the files; on failure its base stays (so the next
    sync tries again) and the deleted line stays deleted."""
    assert action.item_id is not None
    if result.item is None:
        errors.append(_failed(plan, action, f"could not archive memory {action.item_id}: {result.error}"))
        if action.base_before is not None:
            plan.base[action.item_id] = action.base_before
            plan.overrides[action.item_id] = None
        return
    plan.shown.pop(action.item_id, None)
    plan.base.pop(action.item_id, None)
    text = action.base_before.entry.text if action.base_before else normal_text(result.item.content)
    changes.append(FileChange(plan.rel(action.file), "archived", "to_db", action.item_id, text))


def _finish_add(
    plan: Plan, action: Action, result: Applied, now: datetime, changes: list[FileChange]
) -> None:
    """An add: the line gets its memory's id, or is kept and reported when refused."""
    line = action.line
    assert line is not None
    decision = result.decision
    if result.item is None or decision is None:
        reasons = "; ".join(decision.reasons) if decision else (result.error or "")
        plan.keep_line(line, f"not added: {reasons}")
        if action.replaces is not None and action.base_before is not None:
            plan.base[action.replaces] = action.base_before
            plan.overrides[action.replaces] = None
        return
    if action.replaces is not None:
        plan.shown.pop(action.replaces, None)
        plan.base.pop(action.replaces, None)
    known_line = result.item.id in plan.shown or result.item.id in plan.overrides
    if decision.action != "reinforce" or not known_line:
        # A reinforced memory keeps its own line (a conflict on it stays a conflict).
        _adopt(plan, result.item, now)
    if decision.action == "reinforce":
        changes.append(
            FileChange(
                plan.rel(action.file),
                "reinforced",
                "to_db",
                result.item.id,
                line.entry.text,
                line.line,
                f"same as memory {result.item.id} (cosine {decision.similarity or 0:.2f}): it was "
                "confirmed again instead of adding a copy",
            )
        )
    else:
        detail = "; ".join(r for r in decision.reasons if r.startswith("redacted"))
        changes.append(
            FileChange(
                plan.rel(action.file),
                "added",
                "to_db",
                result.item.id,
                normal_text(result.item.content),
                line.line,
                detail,
            )
        )


def _settle_overrides(plan: Plan) -> None:
    """Where the files will differ from the base, record it; drop overrides with nothing
    left to override."""
    base, shown, overrides = plan.base, plan.shown, plan.overrides
    for item_id in base.keys() | shown.keys():
        if item_id in plan.frozen:
            continue  # its file was not read: it shows what it showed before
        if item_id not in overrides and shown.get(item_id) != base.get(item_id):
            overrides[item_id] = shown.get(item_id)
    for item_id in [i for i in overrides if i not in base and overrides[i] is None]:
        del overrides[item_id]


def _render(plan: Plan, state: ScopeState | None) -> tuple[dict[str, str | None], ScopeState]:
    """Each file's text (None: an unreadable file is left alone) and the new state."""
    texts: dict[str, str | None] = {}
    shas: dict[str, str | None] = {}
    for name in FILE_NAMES:
        if name in plan.blocked:
            texts[name] = None
            shas[name] = state.files.get(name) if state else None
            continue
        text = render_file(name, plan.ref, plan.shown, plan.extras.get(name) or Extras())
        texts[name] = text
        shas[name] = digest(text)
    new_state = ScopeState(
        plan.ref,
        serial=state.serial if state else 0,
        files=shas,
        base=dict(plan.base),
        overrides=plan.overrides,
        extras={name: e for name, e in plan.extras.items() if e.places()},
    )
    return texts, new_state


def _adopt(plan: Plan, item: MemoryItem, now: datetime) -> None:
    """Show a stored item as the database now has it (if the files hold it)."""
    if is_file_memory(item, now) and item.scope_key == plan.ref.key:
        placed = Placed.of(item)
        plan.overrides.pop(item.id, None)
        plan.shown[item.id] = placed
        plan.base[item.id] = placed
    else:
        plan.shown.pop(item.id, None)
        plan.base.pop(item.id, None)
        plan.overrides.pop(item.id, None)
