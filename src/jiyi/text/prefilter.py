"""Skip a regular expression over a text that cannot hold a match of it.

The time patterns (:mod:`jiyi.text.timeparse`, :mod:`jiyi.text.time_words`, seasons,
quarters, holidays) are a hundred alternations of words in ten languages. Python's engine
tries each at every position of a text, so reading the times a long memory tells of cost
~2.5 ms per 1,000 characters, most of it in patterns of languages the text is not in.

:func:`scan` is ``pattern.finditer(text)``, except that it first asks whether the text holds
one of the pattern's :func:`needed` strings: strings, read off the pattern's parse, one of
which every match contains ("ago" for "N days ago", one of "hace", "il", "vor", "há", ... for
"hace tres semanas"). It tests them on the text lowercased; where lowercasing is not a
faithful stand-in for the engine's case-insensitive match (a character that lowercases to
two, as "İ", or that matches a letter it does not lowercase to, as "ſ" matches "s"), the
pattern runs as it is. Either way the matches are the same: only the work differs.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterator
from typing import Any

# The standard library's own parse of a pattern and its opcodes (Python 3.11+); no stubs.
_P: Any = importlib.import_module("re._parser")
_C: Any = importlib.import_module("re._constants")

MAX_NEEDED = 64
"""A pattern with more alternatives than this needs no string (the test would cost more
than it saves)."""

# Characters that match a letter case-insensitively without lowercasing to it, and Σ, which
# lowercases to ς or σ by its place in a word.
_UNFAITHFUL = ("ı", "ſ", "Σ")

_Needed = frozenset[str]


@functools.lru_cache(maxsize=512)
def needed(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lowercase strings one of which every match of ``pattern`` contains, or None when the
    parse gives none (an optional part, a class of characters, a backreference...)."""
    found = _of_sequence(_P.parse(pattern.pattern, pattern.flags))
    return None if found is None else tuple(sorted(found, key=lambda s: (-len(s), s)))


def _better(a: _Needed, b: _Needed) -> _Needed:
    """Of two sets that both hold, the more selective: longer strings, then fewer."""
    key_a, key_b = (min(map(len, a)), -len(a)), (min(map(len, b)), -len(b))
    return a if key_a >= key_b else b


def _of_sequence(items: Any) -> _Needed | None:
    """What a sequence of parsed items needs: any one item's needs will do (every match of
    the sequence holds a match of each item), and contiguous literals make one string."""
    best: _Needed | None = None
    run: list[str] = []
    for op, arg in items:
        if op is _C.LITERAL:
            run.append(chr(arg).lower())
            continue
        if run:
            literal = frozenset({"".join(run)})
            best = literal if best is None else _better(best, literal)
            run = []
        part = _of_item(op, arg)
        if part is not None:
            best = part if best is None else _better(best, part)
    if run:
        literal = frozenset({"".join(run)})
        best = literal if best is None else _better(best, literal)
    return best


def _of_item(op: Any, arg: Any) -> _Needed | None:
    if op is _C.SUBPATTERN:
        return _of_sequence(arg[-1])
    if op is _C.ATOMIC_GROUP:
        return _of_sequence(arg)
    if op is _C.BRANCH:
        union: set[str] = set()
        for alternative in arg[1]:
            part = _of_sequence(alternative)
            if part is None:
                return None  # an alternative that needs nothing: the branch needs nothing
            union |= part
            if len(union) > MAX_NEEDED:
                return None
        return frozenset(union)
    if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT):
        low, _, item = arg
        return _of_sequence(item) if low >= 1 else None
    # A class of characters, an assertion, "." ...: nothing that must be there.
    return None


@functools.lru_cache(maxsize=64)
def folded(text: str) -> str | None:
    """``text`` lowercased, or None when lowercasing is no faithful stand-in for a
    case-insensitive match (see the module docstring). Kept per text: a text is scanned by
    every pattern in turn."""
    low = text.lower()
    if len(low) != len(text) or any(c in text for c in _UNFAITHFUL):
        return None
    return low


def scan(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, skipped when ``text`` holds none of the strings every
    match needs (:func:`needed`)."""
    need = needed(pattern)
    if need is not None:
        low = folded(text)
        if low is not None and not any(s in low for s in need):
            return iter(())
    return pattern.finditer(text)
