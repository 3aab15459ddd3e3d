"""jiyi.text.prefilter: a pattern is skipped only over a text that holds no match of it."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from jiyi.text import holidays, quarters, seasons, time_words, timeparse
from jiyi.text.prefilter import folded, needed, scan

DATA = Path(__file__).resolve().parent.parent / "bench" / "data"


def _patterns() -> list[re.Pattern[str]]:
    """Every compiled pattern the time modules hold, alone or first in a tuple."""
    found: dict[int, re.Pattern[str]] = {}

    def take(value: object) -> None:
        if isinstance(value, re.Pattern):
            found[id(value)] = value
        elif isinstance(value, tuple | list):
            for v in value:
                take(v)
        elif hasattr(value, "pattern") and isinstance(value.pattern, re.Pattern):
            found[id(value.pattern)] = value.pattern

    for module in (timeparse, time_words, seasons, quarters, holidays):
        for value in vars(module).values():
            take(value)
    return list(found.values())


def _texts() -> list[str]:
    """Texts in ten languages that name times: every query and memory of the data sets."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for name in (
        "time_phrases_held.json",
        "multilingual_temporal.json",
        "multilingual_temporal_held.json",
        "multilingual_told_times.json",
        "lunar_holidays_held.json",
    ):
        walk(json.loads((DATA / name).read_text(encoding="utf-8")))
    # and every phrase the time modules' own tests read
    for name in ("test_timeparse.py", "test_holidays.py"):
        tree = ast.parse((Path(__file__).parent / name).read_text(encoding="utf-8"))
        out += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return list(dict.fromkeys(t for t in out if len(t) > 2))


def test_needed_reads_the_strings_every_match_holds() -> None:
    assert needed(re.compile(r"\b(?:hace|vor)\s+\d+\s+días")) == ("días",)
    assert set(needed(re.compile(r"\b(?:hace|vor)\s+\d+")) or ()) == {"hace", "vor"}
    assert needed(re.compile(r"Last (?:Week|Month)", re.I)) == ("last ",)
    # Optional parts, classes of characters and repeats that may be empty need nothing.
    assert needed(re.compile(r"(?:ago)?\d+")) is None
    assert needed(re.compile(r"[a-z]+")) is None
    assert needed(re.compile(r"ago|\d+")) is None
    assert needed(re.compile(r"(?:ab)+c*")) == ("ab",)


def test_lowercasing_that_is_no_stand_in_runs_the_pattern() -> None:
    assert folded("Hace Dos Días") == "hace dos días"
    for text in ("İl y a deux jours", "ſince May", "ΟΔΟΣ last week"):
        assert folded(text) is None
    # "ſ" matches "s" case-insensitively: the pattern still runs, and finds it.
    pattern = re.compile(r"\bsince\b", re.I)
    assert [m.span() for m in scan(pattern, "ſince May")] == [(0, 5)]
    assert list(scan(pattern, "Since May"))
    assert not list(scan(pattern, "in May"))


_TEXTS = _texts()


@pytest.mark.parametrize("pattern", _patterns(), ids=lambda p: p.pattern[:40])
def test_scan_finds_what_finditer_finds(pattern: re.Pattern[str]) -> None:
    for text in _TEXTS:
        for t in (text, text.lower(), text.upper()):
            assert [m.span() for m in scan(pattern, t)] == [m.span() for m in pattern.finditer(t)], t


def test_the_texts_hold_matches_of_most_patterns() -> None:
    """So the test above compares matches, not two empty lists."""
    texts = _TEXTS
    patterns = _patterns()
    matched = [p for p in patterns if any(p.search(t) or p.search(t.lower()) for t in texts)]
    assert len(matched) >= 0.75 * len(patterns), (len(matched), len(patterns))
