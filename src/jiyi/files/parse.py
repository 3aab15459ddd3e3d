"""Reading a person's memory.md / learnings.md back into entries.

What a file may hold, line by line:

* the header comment (first thing in the file) and the ``# title``: regenerated;
* ``## <type>`` section headings (``## preference``, ``## facts`` ...; case and a plural
  ``s`` do not matter);
* ``- text <!-- id:ID -->`` memory lines (``*`` and ``+`` work too), followed by indented
  continuation lines for multi-line text; a line without an id is a new memory;
* comments and horizontal rules: kept where they are, not memories.

Anything else is a :class:`Problem` with its line number. Problem lines are never
applied and never lost: they are kept verbatim (:class:`~jiyi.files.document.Extras`),
and an id on such a line is *held* (neither archived nor changed) until the line is fixed.
A file without any section heading is *blocked*: nothing in it is applied and it is not
rewritten (a truncated file must not archive every memory).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from jiyi.files.document import PREAMBLE, TAIL, Entry, Extras, normal_text
from jiyi.model import MemoryType

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_TITLE = re.compile(r"^#\s")
_BULLET = re.compile(r"^[-*+](?:[ \t]+(.*))?$")
_ID = re.compile(r"^(?P<text>.*?)\s*<!--\s*id:(?P<id>[^\s<>]+)\s*-->\s*$")
_LOOSE_ID = re.compile(r"<!--.*?\bid\s*:\s*([^\s<>]*)")
_RULE = re.compile(r"^\s*([-*_])(?:\s*\1){2,}\s*$")
_TYPES = {t.value: t for t in MemoryType}
KNOWN = ", ".join(t.value for t in MemoryType)


@dataclass(frozen=True)
class Line:
    """One memory line of a file (with continuation lines joined into its text)."""

    file: str
    line: int
    item_id: str | None
    entry: Entry
    raw: tuple[str, ...]


@dataclass(frozen=True)
class Problem:
    """A line that could not be applied, and why (``line`` None: the whole file)."""

    file: str
    line: int | None
    message: str
    text: str = ""


@dataclass
class ParsedFile:
    name: str
    lines: list[Line] = field(default_factory=list)
    extras: Extras = field(default_factory=Extras)
    problems: list[Problem] = field(default_factory=list)
    held: set[str] = field(default_factory=set)
    blocked: bool = False


def section_type(title: str) -> MemoryType | None:
    """``preference``, ``Preferences``, ``FACTS`` ... -> the memory type; else None."""
    name = title.strip().lower()
    if name in _TYPES:
        return _TYPES[name]
    if name.endswith("s") and name[:-1] in _TYPES:
        return _TYPES[name[:-1]]
    return None


def _dedent(line: str) -> str:
    if line.startswith("  "):
        return line[2:]
    if line.startswith(("\t", " ")):
        return line[1:]
    return line


_UNCLOSED = "the comment opened here is never closed with -->; nothing was applied"


def _comment_end(lines: list[str], start: int) -> int | None:
    """Index of the line that closes the comment opened on ``lines[start]``."""
    opened = lines[start].index("<!--")
    if "-->" in lines[start][opened + 4 :]:
        return start
    for j in range(start + 1, len(lines)):
        if "-->" in lines[j]:
            return j
    return None


class _Reader:
    def __init__(self, name: str, text: str) -> None:
        self.out = ParsedFile(name)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.lines = text.removeprefix("\ufeff").split("\n")
        self.where = PREAMBLE
        self.sections = 0
        self.item: list[tuple[int, str]] | None = None  # the memory line being read
        self.blanks = 0  # blank lines since, kept only if the memory line goes on

    def problem(self, line: int | None, message: str, text: str = "") -> None:
        self.out.problems.append(Problem(self.out.name, line, message, text))

    def keep(self, line: int, raw: list[str] | tuple[str, ...]) -> None:
        self.out.extras.add(self.where, line, tuple(r.rstrip() for r in raw))

    def hold_ids(self, raw: list[str] | tuple[str, ...]) -> None:
        for text in raw:
            strict = _ID.match(text)
            loose = None if strict else _LOOSE_ID.search(text)
            value = strict.group("id") if strict else (loose.group(1).rstrip("-") if loose else "")
            if value:
                self.out.held.add(unquote(value))

    def block(self, line: int | None, message: str) -> ParsedFile:
        self.problem(line, message)
        self.out.blocked = True
        return self.out

    def read(self) -> ParsedFile:
        i = self.skip_header()
        while i is not None and i < len(self.lines):
            i = self.step(i)
        if i is None:  # blocked
            return self.out
        if self.item is not None:
            self.finish(self.item)
        if self.sections == 0:
            return self.block(
                None,
                "no section heading (## preference, ## fact ...) in this file, so nothing in it was "
                "applied; put the headings back (or delete the file to have it written again)",
            )
        return self.out

    def skip_header(self) -> int | None:
        """Where the body starts, past the header comment and the title (None: blocked)."""
        lines, n = self.lines, len(self.lines)
        i = 0
        while i < n and not lines[i].strip():
            i += 1
        if i < n and lines[i].lstrip().startswith("<!--"):
            end = _comment_end(lines, i)
            if end is None:
                self.block(i + 1, _UNCLOSED)
                return None
            i = end + 1
        while i < n and not lines[i].strip():
            i += 1
        if i < n and _TITLE.match(lines[i]):
            i += 1
        return i

    def step(self, i: int) -> int | None:
        """Read line ``i``; where reading goes on (None: blocked)."""
        if self.item is not None:
            if self.continues(i):
                return i + 1
            self.finish(self.item)
            self.item, self.blanks = None, 0
        return self.read_line(i)

    def continues(self, i: int) -> bool:
        """Whether line ``i`` belongs to the memory line being read (blank lines count
        only if an indented line follows)."""
        raw = self.lines[i]
        assert self.item is not None
        if not raw.strip():
            self.blanks += 1
            return True
        if raw[0] in " \t":
            self.item.extend((i + 1, "") for _ in range(self.blanks))
            self.item.append((i + 1, raw))
            self.blanks = 0
            return True
        return False

    def read_line(self, i: int) -> int | None:
        """Read line ``i`` outside a memory line; where reading goes on (None: blocked)."""
        raw, number = self.lines[i], i + 1
        stripped = raw.strip()
        if not stripped:
            return i + 1
        if raw.lstrip().startswith("<!--"):
            end = _comment_end(self.lines, i)
            if end is None:
                self.block(number, _UNCLOSED)
                return None
            self.keep(number, self.lines[i : end + 1])
            return end + 1
        if _HEADING.match(raw):
            return self.heading(i)
        if _BULLET.match(raw.rstrip()):
            self.item = [(number, raw)]
        elif _RULE.match(raw):
            self.keep(number, [raw])
        else:
            self.problem(
                number,
                "not a memory line: start it with '- ' under a section heading, or indent it "
                "to continue the line above",
                stripped,
            )
            self.keep(number, [raw])
            self.hold_ids([raw])
        return i + 1

    def heading(self, i: int) -> int:
        raw, number = self.lines[i], i + 1
        found = _HEADING.match(raw)
        assert found is not None
        kind = section_type(found.group(2)) if len(found.group(1)) == 2 else None
        if kind is not None:
            self.where = kind.value
            self.sections += 1
            return i + 1
        j = i + 1
        while j < len(self.lines) and not _HEADING.match(self.lines[j]):
            j += 1
        block = self.lines[i:j]
        while block and not block[-1].strip():
            block.pop()
        held = [line for line in block[1:] if line.strip()]
        self.problem(
            number,
            f"unknown section {raw.strip()!r} (sections are ## followed by one of: {KNOWN}); "
            f"{len(held)} line(s) under it were not applied",
            raw.strip(),
        )
        self.out.extras.add(TAIL, number, tuple(line.rstrip() for line in block))
        self.hold_ids(block[1:])
        self.where = TAIL
        return j

    def finish(self, item: list[tuple[int, str]]) -> None:
        number, first = item[0]
        raw = [text for _, text in item]
        bullet = _BULLET.match(first.rstrip())
        assert bullet is not None
        body = bullet.group(1) or ""
        found = _ID.match(body)
        item_id: str | None = None
        if found:
            item_id = unquote(found.group("id"))
            body = found.group("text")
        elif _LOOSE_ID.search(body):
            self.problem(
                number,
                "the id comment is damaged: write it as <!-- id:... --> at the end of the line "
                "(or remove it to add the line as a new memory)",
                body.strip(),
            )
            self.keep(number, raw)
            self.hold_ids(raw)
            return
        text = normal_text("\n".join([body, *(_dedent(r) for r in raw[1:])]))
        if self.where == PREAMBLE:
            self.problem(number, "outside any section: move it under a heading such as ## fact", text)
            self.keep(number, raw)
            self.hold_ids(raw)
            return
        if self.where == TAIL:  # cannot happen: unknown sections take their lines whole
            self.keep(number, raw)
            return
        if not text:
            if item_id is not None:
                self.problem(number, "the memory's text is empty: delete the whole line to archive it", "")
                self.keep(number, raw)
                self.out.held.add(item_id)
            return  # an empty new bullet holds nothing to keep
        entry = Entry(MemoryType(self.where), text)
        self.out.lines.append(Line(self.out.name, number, item_id, entry, tuple(r.rstrip() for r in raw)))


def parse_file(name: str, text: str) -> ParsedFile:
    """Entries, kept lines, problems and held ids of one file's text."""
    return _Reader(name, text).read()


@dataclass
class ScopeParse:
    """Both files of a scope, read together (a line may move between them)."""

    files: dict[str, ParsedFile]
    by_id: dict[str, Line]
    new: list[Line]
    problems: list[Problem]
    held: set[str]

    @property
    def blocked(self) -> set[str]:
        return {name for name, f in self.files.items() if f.blocked}


def parse_scope(texts: Mapping[str, str | None]) -> ScopeParse:
    """Parse each file (None: not UTF-8 text, so blocked) and find ids used twice."""
    files: dict[str, ParsedFile] = {}
    for name, text in texts.items():
        if text is None:
            files[name] = ParsedFile(
                name,
                problems=[Problem(name, None, "the file is not UTF-8 text; nothing in it was applied")],
                blocked=True,
            )
        else:
            files[name] = parse_file(name, text)
    by_id: dict[str, Line] = {}
    new: list[Line] = []
    problems: list[Problem] = []
    held: set[str] = set()
    for parsed in files.values():
        problems.extend(parsed.problems)
        held |= parsed.held
        if parsed.blocked:
            continue
        for line in parsed.lines:
            if line.item_id is None:
                new.append(line)
                continue
            first = by_id.get(line.item_id)
            if first is None:
                by_id[line.item_id] = line
                continue
            problems.append(
                Problem(
                    line.file,
                    line.line,
                    f"id {line.item_id} is also on {first.file} line {first.line}; this copy was not "
                    "applied (remove the id comment to add it as a new memory)",
                    line.entry.text,
                )
            )
            parsed.extras.add(line.entry.memory_type.value, line.line, line.raw)
    # An id on a readable line is applied from there; a damaged copy elsewhere is just kept.
    return ScopeParse(files, by_id, new, problems, held - by_id.keys())
