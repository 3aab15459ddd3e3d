"""Chunking long resources (seed 004): ~2000-token chunks with ~200 tokens of overlap.

A long answer or document is stored as several chunks that share a parent id (the
seed's ``qa_id``) and carry ``chunk_index`` / ``chunk_count``; at read time the chunks of
one parent are put back together with :func:`reassemble`. Chunks keep their character
offsets into the original text, so reassembly is exact: the overlap is dropped by
offset, never by guessing where the texts match.

:func:`chunk_text` cuts at the best boundary near the end of the token budget: a blank
line, then a line break, then the end of a sentence (``。！？!?`` and ``. `` followed
by a space), then a clause mark (``，,；;：:、``), then a space. Chinese text without any
of these is cut between characters; an English word is only cut when it alone is over
the budget. The next chunk starts about ``overlap_tokens`` before the cut, at a
sentence or word start when there is one.

:func:`resource_skip_reason` says which texts are not worth storing as resources at all:
shorter than 50 characters, error messages and small talk. All functions are pure.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from jiyi.errors import InvalidInput
from jiyi.text.lowvalue import low_value_reason
from jiyi.text.tokens import count_tokens

MAX_DOCUMENT_CHARS = 1_000_000
"""The longest document the agent tools, MCP and REST accept (characters)."""

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "MAX_DOCUMENT_CHARS",
    "MIN_RESOURCE_CHARS",
    "Chunk",
    "chunk_text",
    "reassemble",
    "resource_skip_reason",
]

DEFAULT_MAX_TOKENS = 2000
DEFAULT_OVERLAP_TOKENS = 200
MIN_RESOURCE_CHARS = 50
"""Shorter texts carry too little to be worth storing as a resource (seed 004)."""


@dataclass(frozen=True)
class Chunk:
    """One piece of a text: ``text == original[start:end]``."""

    text: str
    index: int
    """Position among the chunks of its text, from 0 (the seed's ``chunk_index``)."""
    count: int
    """How many chunks the text was cut into (the seed's ``chunk_count``)."""
    start: int
    """Character offset of the chunk's first character in the original text."""
    end: int
    """Character offset just after the chunk's last character."""


# Split points, as the position where the next piece starts, by strength.
_PARAGRAPH, _LINE, _SENTENCE, _CLAUSE, _SPACE = 5, 4, 3, 2, 1
_BOUNDARIES: tuple[tuple[int, re.Pattern[str]], ...] = (
    (_PARAGRAPH, re.compile(r"\n[^\S\n]*\n\s*")),
    (_LINE, re.compile(r"\n\s*")),
    (_SENTENCE, re.compile(r"[。！？!?…]+[”’」』）)\]\"']*\s*|\.+[”’)\]\"']*(?:\s+|$)")),
    (_CLAUSE, re.compile(r"[，,；;：:、]\s*")),
    (_SPACE, re.compile(r"\s+")),
)


def _boundaries(text: str) -> dict[int, list[int]]:
    """Sorted split positions for each strength (a position keeps its strongest kind only)."""
    strength: dict[int, int] = {}
    for kind, pattern in _BOUNDARIES:
        for m in pattern.finditer(text):
            pos = m.end()
            if 0 < pos < len(text) and strength.get(pos, 0) < kind:
                strength[pos] = kind
    by_kind: dict[int, list[int]] = {kind: [] for kind, _ in _BOUNDARIES}
    for pos in sorted(strength):
        by_kind[strength[pos]].append(pos)
    return by_kind


def _is_word_char(ch: str) -> bool:
    """Letters and digits of scripts that put spaces between words (not Han, kana or Hangul)."""
    if not (ch.isalnum() or ch in "_'"):
        return False
    return not ("\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or "\uac00" <= ch <= "\ud7af")


def _is_continuation(ch: str) -> bool:
    return unicodedata.combining(ch) != 0 or ch in "\u200d\ufe0e\ufe0f" or "\U0001f3fb" <= ch <= "\U0001f3ff"


def _safe_cut(text: str, pos: int, floor: int) -> int:
    """``pos`` moved back so it splits neither a character cluster nor an English word (not below ``floor``)."""
    cut = pos
    while cut > floor + 1 and cut < len(text) and _is_continuation(text[cut]):
        cut -= 1
    if 0 < cut < len(text) and _is_word_char(text[cut - 1]) and _is_word_char(text[cut]):
        word_start = cut
        while word_start > floor and _is_word_char(text[word_start - 1]):
            word_start -= 1
        if word_start > floor:
            cut = word_start
    return cut


class _Fitter:
    """Finds where a chunk may end without counting tokens of long prefixes over and over.

    ``count_tokens`` is exact but costs a pass over the text, so the search first
    guesses from the characters-per-token ratio seen so far and corrects the guess (a
    secant step) until the budget is bracketed within ~2 %, then checks boundaries in
    that bracket one by one.
    """

    def __init__(self, text: str, max_tokens: int, total_tokens: int) -> None:
        self.text = text
        self.n = len(text)
        self.max_tokens = max_tokens
        self.ratio = max(0.25, self.n / max(1, total_tokens))

    def fits(self, start: int, end: int) -> bool:
        return count_tokens(self.text[start:end]) <= self.max_tokens

    def bracket(self, start: int) -> tuple[int, int]:
        """``(lo, hi)``: ``text[start:lo]`` fits and ``text[start:hi]`` does not (``hi == n + 1`` when the rest fits)."""
        n, budget = self.n, self.max_tokens
        lo, hi = start, n + 1
        guess = min(n, start + max(1, int(budget * self.ratio)))
        for _ in range(8):
            used = count_tokens(self.text[start:guess])
            if used <= budget:
                lo = guess
                if guess >= n:
                    return n, n + 1
            else:
                hi = guess
            margin = max(8, (lo - start) // 50)
            if hi - lo <= margin:
                break
            aimed = start + int((guess - start) * budget / max(1, used))
            if used <= budget:
                guess = min(hi - 1, n, max(aimed, lo + margin))
            else:
                guess = max(lo + 1, min(aimed, hi - margin))
        if hi > n and lo < n:  # never tried the whole rest
            if self.fits(start, n):
                return n, n + 1
            hi = n
        if lo > start:
            self.ratio = max(0.25, (lo - start) / max(1, count_tokens(self.text[start:lo])))
        return lo, hi

    def exact(self, start: int, lo: int, hi: int) -> int:
        """The largest end in ``[lo, hi)`` that fits, by bisection (at least ``start + 1``)."""
        hi = min(hi, self.n + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.fits(start, mid):
                lo = mid
            else:
                hi = mid
        return max(lo, start + 1)

    def tail(self, floor: int, end: int, tokens: int) -> int:
        """The smallest ``s >= floor`` with ``count_tokens(text[s:end]) <= tokens``."""
        width = max(16, int(tokens * self.ratio * 1.5))
        lo, hi = max(floor, end - width), end  # text[hi:end] fits
        while lo > floor and count_tokens(self.text[lo:end]) <= tokens:
            hi = lo
            lo = max(floor, end - 2 * (end - lo))
        if count_tokens(self.text[lo:end]) <= tokens:
            return lo
        while hi - lo > 1:  # text[lo:end] does not fit, text[hi:end] does
            mid = (lo + hi) // 2
            if count_tokens(self.text[mid:end]) <= tokens:
                hi = mid
            else:
                lo = mid
        return hi


def _pick_end(fitter: _Fitter, start: int, lo: int, hi: int, low: int, bounds: dict[int, list[int]]) -> int:
    """Where a chunk starting at ``start`` ends: the strongest boundary after ``low`` that fits.

    Ends up to ``lo`` are known to fit; ends in ``(lo, hi)`` are counted one by one, or,
    when there are many, the exact fit is found first.
    """
    exact = False
    for kind in (_PARAGRAPH, _LINE, _SENTENCE, _CLAUSE, _SPACE):
        positions = bounds[kind]
        first_unsure = bisect.bisect_right(positions, max(lo, low))
        last = bisect.bisect_left(positions, hi) - 1
        if last - first_unsure + 1 > 2 and not exact:
            lo = fitter.exact(start, lo, hi)
            hi, exact = lo + 1, True
            first_unsure = bisect.bisect_right(positions, max(lo, low))
            last = bisect.bisect_left(positions, hi) - 1
        for i in range(last, first_unsure - 1, -1):
            if fitter.fits(start, positions[i]):
                return positions[i]
        sure = first_unsure - 1  # the last position up to lo
        if sure >= 0 and positions[sure] > low:
            return positions[sure]
    fit = lo if exact else fitter.exact(start, lo, hi)
    return _safe_cut(fitter.text, fit, max(start, low))


def _pick_next_start(text: str, floor: int, end: int, bounds: dict[int, list[int]]) -> int:
    """Where the next chunk starts: the first sentence (else word) start in [floor, end)."""
    middle = floor + (end - floor) // 2
    for kind, limit in (
        (_PARAGRAPH, middle),
        (_LINE, middle),
        (_SENTENCE, middle),
        (_CLAUSE, end),
        (_SPACE, end),
    ):
        positions = bounds[kind]
        i = bisect.bisect_left(positions, floor)
        if i < len(positions) and positions[i] < limit:
            return positions[i]
    cut = floor
    while cut < end and (
        _is_continuation(text[cut]) or (_is_word_char(text[cut - 1]) and _is_word_char(text[cut]))
    ):
        cut += 1
    return floor if cut >= end else cut  # one long word: cut inside it, as its chunks already do


def chunk_text(
    text: str, *, max_tokens: int = DEFAULT_MAX_TOKENS, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS
) -> list[Chunk]:
    """Cut ``text`` into chunks of at most ``max_tokens`` that overlap by about ``overlap_tokens``.

    Together the chunks cover the whole text; ``chunk.text == text[chunk.start:chunk.end]``.
    A text within the budget is one chunk; the empty text gives no chunks. Raises
    :class:`InvalidInput` unless ``max_tokens >= 2`` (one character can cost 2 tokens)
    and ``0 <= overlap_tokens < max_tokens``.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, not {type(text).__name__}", field="text")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise InvalidInput(f"max_tokens must be an integer >= 2, not {max_tokens!r}", field="max_tokens")
    if (
        isinstance(overlap_tokens, bool)
        or not isinstance(overlap_tokens, int)
        or not 0 <= overlap_tokens < max_tokens
    ):
        raise InvalidInput(
            f"overlap_tokens must be an integer within 0..{max_tokens - 1}, not {overlap_tokens!r}",
            field="overlap_tokens",
        )
    if not text:
        return []
    total = count_tokens(text)
    if total <= max_tokens:
        return [Chunk(text, 0, 1, 0, len(text))]
    bounds = _boundaries(text)
    fitter = _Fitter(text, max_tokens, total)
    spans: list[tuple[int, int]] = []
    start, previous_end = 0, 0
    while True:
        lo, hi = fitter.bracket(start)
        if hi > len(text):
            spans.append((start, len(text)))
            break
        # Do not end in the first half of the chunk, nor inside the previous chunk's overlap.
        low = min(max(start + (lo - start) // 2, previous_end), lo - 1)
        end = _pick_end(fitter, start, lo, hi, low, bounds)
        if end <= previous_end:
            end = fitter.exact(start, lo, hi)
        spans.append((start, end))
        next_start = end
        if overlap_tokens:
            floor = fitter.tail(start + 1, end, overlap_tokens)
            next_start = _pick_next_start(text, floor, end, bounds)
            if not fitter.fits(next_start, end + 1):  # no room after the overlap
                next_start = end
        start, previous_end = next_start, end
    count = len(spans)
    return [Chunk(text[s:e], i, count, s, e) for i, (s, e) in enumerate(spans)]


def reassemble(chunks: Sequence[Chunk]) -> str:
    """The original text from all chunks of it (any order), overlaps removed by offset.

    Raises :class:`InvalidInput` when chunks are missing, duplicated, inconsistent
    (text length not ``end - start``, overlaps that disagree) or leave a gap.
    """
    if not chunks:
        return ""
    ordered = sorted(chunks, key=lambda c: c.index)
    count = ordered[0].count
    if [c.index for c in ordered] != list(range(len(ordered))) or any(c.count != count for c in ordered):
        raise InvalidInput(
            f"need chunks 0..{count - 1} of one text exactly once, got indexes {[c.index for c in ordered]}",
            field="chunks",
        )
    if len(ordered) != count:
        raise InvalidInput(f"got {len(ordered)} of {count} chunks", field="chunks")
    if ordered[0].start != 0:
        raise InvalidInput(f"chunk 0 starts at {ordered[0].start}, not 0", field="chunks")
    rebuilt = ""
    covered = 0
    for chunk in ordered:
        if len(chunk.text) != chunk.end - chunk.start:
            raise InvalidInput(
                f"chunk {chunk.index} has {len(chunk.text)} characters but spans {chunk.start}..{chunk.end}",
                field="chunks",
            )
        if chunk.start > covered:
            raise InvalidInput(
                f"chunk {chunk.index} starts at {chunk.start}: characters {covered}..{chunk.start} are missing",
                field="chunks",
            )
        overlap = covered - chunk.start
        if overlap > len(chunk.text) or rebuilt[chunk.start : covered] != chunk.text[:overlap]:
            raise InvalidInput(
                f"chunk {chunk.index} does not agree with the text before it where they overlap",
                field="chunks",
            )
        rebuilt += chunk.text[overlap:]
        covered = chunk.end
    return rebuilt


def resource_skip_reason(text: str) -> str | None:
    """Why ``text`` should not be stored as a resource, or ``None`` when it should."""
    stripped = text.strip()
    why = low_value_reason(stripped) if stripped else "it is empty"
    if why:
        return why
    if len(stripped) < MIN_RESOURCE_CHARS:
        return f"too short: {len(stripped)} characters, a resource needs at least {MIN_RESOURCE_CHARS}"
    return None
