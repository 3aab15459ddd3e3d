"""The offline summary of a conversation: what the user stated, one short line each.

A summary that pastes the highest-scoring sentences keeps three of twenty facts and drops
the rest. Without a language model, the honest summary is a digest of what was *stated*:

* every statement the offline rule extractor (:class:`~jiyi.write.extract_rules.RuleExtractor`)
  finds in the user's turns (facts, preferences, decisions with their reasons, rules,
  skills, habits) becomes one line, labelled with its kind, in the user's own words;
* de-duplicated: the same statement said twice is one line, and a later value of the same
  slot (a new city, a changed preference, with the extractor's key) replaces the earlier
  line;
* the user's other statements (not small talk) that no rule read, the most central
  first, then what they asked, then what the assistant reports as done or resolved:
  at most :data:`EXTRA_LINES` of each, while room is left;
* bounded: lines are cut to :data:`LINE_TOKENS`, and when the whole is over the budget
  the lowest-priority lines go first (the assistant's, then the unread notes); stated
  lines are shortened before any of them is dropped.

Lines keep the conversation's order and are written with labels in its language.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from jiyi.model import MemoryType
from jiyi.text.tokens import count_tokens, truncate_to_tokens
from jiyi.write.extract import Language, Turn
from jiyi.write.extract_rules import RuleExtractor

__all__ = [
    "EXTRA_LINES",
    "LINE_TOKENS",
    "DigestLine",
    "covered",
    "fit_lines",
    "note_line",
    "stated_lines",
    "user_lines",
]

LINE_TOKENS = 48
"""The longest line, in tokens, before the budget asks for shorter ones."""
_MIN_LINE_TOKENS = 10
EXTRA_LINES = 4
"""At most this many lines of each other kind (the user's unread statements, their
questions, what the assistant did)."""

_LABELS: dict[Language, dict[str, str]] = {
    "en": {
        MemoryType.FACT.value: "Fact",
        MemoryType.PREFERENCE.value: "Preference",
        MemoryType.DECISION.value: "Decision",
        MemoryType.CONSTRAINT.value: "Rule",
        MemoryType.SKILL.value: "Skill",
        MemoryType.HABIT.value: "Habit",
        "note": "User",
        "asked": "Asked",
        "assistant": "Assistant",
    },
    "zh": {
        MemoryType.FACT.value: "事实",
        MemoryType.PREFERENCE.value: "偏好",
        MemoryType.DECISION.value: "决定",
        MemoryType.CONSTRAINT.value: "规则",
        MemoryType.SKILL.value: "技能",
        MemoryType.HABIT.value: "习惯",
        "note": "用户",
        "asked": "提问",
        "assistant": "助手",
    },
}
STATED, NOTE, ASSISTANT = 0, 1, 2
"""Line ranks: what is dropped last to first."""


@dataclass(frozen=True)
class DigestLine:
    kind: str
    text: str
    order: tuple[int, int]
    """(turn index, place in the turn): the conversation's order."""
    rank: int
    score: float = 0.0
    """Within a rank, higher is kept first."""

    def render(self, language: Language, max_tokens: int) -> str:
        label = _LABELS[language].get(self.kind, self.kind)
        sep = "：" if language == "zh" else ": "
        return f"- {label}{sep}{truncate_to_tokens(self.text, max_tokens)}"


_extractor = RuleExtractor()


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def stated_lines(user_turns: Sequence[tuple[int, str]]) -> tuple[list[DigestLine], list[str]]:
    """One line per statement the user made in ``(turn index, text)``, de-duplicated:
    a repeated statement keeps its first line, a later value of the same key replaces
    the earlier one. Also every statement read, replaced ones included (for :func:`covered`)."""
    found = _extractor.extract([Turn("user", text) for _, text in user_turns])
    by_key: dict[str, int] = {}
    seen: set[str] = set()
    lines: list[DigestLine | None] = []
    for n, e in enumerate(found):
        norm = _norm(e.content)
        if not norm or norm in seen:
            continue
        seen.add(norm)
        turn = user_turns[e.turn_index][0] if e.turn_index is not None else 0
        line = DigestLine(e.memory_type.value, e.content, (turn, n), STATED, e.confidence)
        if e.key is not None and e.key in by_key:
            lines[by_key[e.key]] = None  # the newer value of the same slot stands
        if e.key is not None:
            by_key[e.key] = len(lines)
        lines.append(line)
    return [line for line in lines if line is not None], [e.content for e in found]


_USER_LABELS = frozenset(
    label
    for labels in _LABELS.values()
    for kind, label in labels.items()
    if kind not in ("asked", "assistant")
)
_LINE = re.compile(r"^-\s*(?P<label>[^:：\n]{1,20}?)\s*[:：]\s*(?P<text>.+)$")


def user_lines(summary: str) -> list[str]:
    """The texts of an offline digest's lines of what the user said or stated (a summary's
    other lines, and one written otherwise, give none)."""
    out = []
    for line in summary.splitlines():
        m = _LINE.match(line.strip())
        if m and m.group("label") in _USER_LABELS:
            out.append(m.group("text"))
    return out


def covered(sentence: str, statements: Sequence[str]) -> bool:
    """The sentence was read as a statement (its clause is inside the sentence, or the reverse)."""
    s = _norm(sentence)
    return any((n := _norm(text)) and (n in s or s in n) for text in statements)


def note_line(kind: str, text: str, order: tuple[int, int], score: float) -> DigestLine:
    return DigestLine(kind, text, order, ASSISTANT if kind == "assistant" else NOTE, score)


def fit_lines(lines: Sequence[DigestLine], language: Language, max_lines: int, max_tokens: int) -> str:
    """The lines in conversation order within ``max_lines`` and ``max_tokens``.

    Lower-ranked lines go first when over a limit; stated lines are shortened (down to
    a floor) before one of them is dropped, and the newest stated lines are the last to go.
    """
    ranked = sorted(lines, key=lambda x: (x.rank, -x.score, x.order))
    # Every stated line, but only the few most central of the rest: a chatty session
    # is not pasted back whole.
    taken: dict[str, int] = {}
    kept = []
    for line in ranked:
        if line.rank > STATED and taken.get(line.kind, 0) >= EXTRA_LINES:
            continue
        taken[line.kind] = taken.get(line.kind, 0) + 1
        kept.append(line)
    kept = kept[:max_lines]

    def render(chosen: Sequence[DigestLine], cap: int) -> str:
        return "\n".join(x.render(language, cap) for x in sorted(chosen, key=lambda x: x.order))

    while kept and kept[-1].rank > STATED and count_tokens(render(kept, LINE_TOKENS)) > max_tokens:
        kept.pop()
    cap = LINE_TOKENS
    while cap > _MIN_LINE_TOKENS and count_tokens(render(kept, cap)) > max_tokens:
        cap = max(_MIN_LINE_TOKENS, cap * 3 // 4)
    # Over the budget even with short lines: the oldest stated lines go first.
    kept.sort(key=lambda x: (x.rank, x.order), reverse=True)
    while len(kept) > 1 and count_tokens(render(kept, cap)) > max_tokens:
        kept.pop()
    text = render(kept, cap)
    return text if count_tokens(text) <= max_tokens else truncate_to_tokens(text, max_tokens)
