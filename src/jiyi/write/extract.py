"""What extractors produce, and the protocol they share.

An extractor reads conversation turns (anything with ``role`` and ``content``) and
returns :class:`Extracted` candidates. Candidates still go through the write gate and
reconciliation; an extractor only says what the user *stated*, never guesses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from jiyi.model import MemoryType

Language = Literal["zh", "en"]


class ChatTurn(Protocol):
    """One message of a conversation: ``role`` is "user", "assistant", "system" or "tool"."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class Turn:
    """A plain :class:`ChatTurn`."""

    role: str
    content: str


@dataclass(frozen=True)
class Extracted:
    """One memory candidate found in a conversation."""

    content: str
    """The memory as it will be stored, in the language of the input."""
    memory_type: MemoryType
    confidence: float
    """How sure the extractor is that the user stated this (hedged statements score low)."""
    importance: float = 0.5
    structured: dict[str, Any] | None = None
    """Key/value facts ({"key": "favourite_language", "value": "Python"}), decisions
    ({"choice": ..., "rejected": [...], "reason": ...}), constraints, ..."""
    key: str | None = None
    """A stable slot name for key/value facts, so a later value can supersede an earlier one."""
    source_text: str = ""
    """The span of the turn it came from."""
    turn_index: int | None = None
    """Index of the turn in the input sequence."""
    language: Language = "en"
    reasons: tuple[str, ...] = field(default_factory=tuple)
    """Why it was extracted (which rule or model), for the audit history."""


class Extractor(Protocol):
    """Finds memory candidates in conversation turns."""

    def extract(self, turns: Sequence[ChatTurn]) -> list[Extracted]: ...
