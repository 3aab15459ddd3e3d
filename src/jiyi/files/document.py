"""The values a file is made of: one memory line (:class:`Entry`), its place in the
order (:class:`Placed`) and the lines kept verbatim because they could not be applied
(:class:`Extras`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jiyi.files.learnings import describe_learning
from jiyi.model import MemoryItem, MemoryType, as_utc

PREAMBLE = "preamble"
TAIL = "tail"


def normal_text(text: str) -> str:
    """Content as a file shows it: line ends unified, trailing spaces and blank edge
    lines dropped, the first line without leading spaces. Comparisons use this form, so
    a render and a parse of the same content always agree."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if lines:
        lines[0] = lines[0].lstrip()
    return "\n".join(lines)


def at_key(value: datetime) -> str:
    """A creation time as fixed-width UTC text, so text order is time order."""
    return as_utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Entry:
    """What a line says: its section (the memory type) and its text (normal form)."""

    memory_type: MemoryType
    text: str

    @classmethod
    def of(cls, item: MemoryItem) -> Entry:
        # A procedural learning shows its record (what suggest() reads) and its counts.
        line = describe_learning(item)
        return cls(item.memory_type, normal_text(item.content if line is None else line))


@dataclass(frozen=True)
class Placed:
    """An entry and its sort key (the item's creation time): files list items in
    (created_at, id) order, so one new item adds one line at a stable place."""

    entry: Entry
    at: str

    @classmethod
    def of(cls, item: MemoryItem) -> Placed:
        return cls(Entry.of(item), at_key(item.created_at))

    def to_json(self) -> list[str]:
        return [self.entry.memory_type.value, self.entry.text, self.at]

    @classmethod
    def from_json(cls, data: Any) -> Placed:
        kind, text, at = data
        return cls(Entry(MemoryType(kind), str(text)), str(at))


@dataclass
class Extras:
    """Lines of one file kept verbatim (malformed lines, refused additions, unknown
    sections, comments), by where they stood: the preamble, a section (by type value)
    or the tail. Each block remembers its line number so blocks keep file order."""

    blocks: dict[str, list[tuple[int, tuple[str, ...]]]] = field(default_factory=dict)

    def add(self, where: str, line: int, lines: tuple[str, ...] | list[str]) -> None:
        if lines:
            self.blocks.setdefault(where, []).append((line, tuple(lines)))

    def lines(self, where: str) -> list[str]:
        out: list[str] = []
        for _, block in sorted(self.blocks.get(where, []), key=lambda b: b[0]):
            out.extend(block)
        return out

    def places(self) -> list[str]:
        return [w for w, blocks in self.blocks.items() if blocks]

    def to_json(self) -> dict[str, list[str]]:
        return {where: self.lines(where) for where in sorted(self.places())}

    @classmethod
    def from_json(cls, data: Any) -> Extras:
        extras = cls()
        if isinstance(data, dict):
            for where, lines in data.items():
                if isinstance(lines, list):
                    extras.add(str(where), 0, tuple(str(x) for x in lines))
        return extras
