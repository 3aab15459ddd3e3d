"""Seasons as windows in time: "last summer", "in the winter of 2022", "去年夏天", "el verano
pasado", "l'été dernier", "letzten Sommer", "прошлым летом", "지난 여름", "夏休み".

The seasons are the northern hemisphere's months: spring March to May, summer June to August,
autumn September to November, winter December to February. A season with "last" is the latest
one that has ended ("last summer", asked in July, is last year's), "this" the one of this year
(a winter's January and February belong to the December before them), "next" the first to
begin after now; with a year, that year's months (a winter's: January, February and December
of it). Named with a marker of time alone ("in the summer", "en verano", "летом", "夏天", "여름에")
it is its months of any year; a year named apart from it ("去年夏天", "작년 여름", "el verano de
2023") then makes them that year's (:func:`jiyi.text.timeparse._months_of_the_year`). A season
named with no marker ("winter days", "j'ai été") is no time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from jiyi.text.prefilter import scan

MONTHS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11), "winter": (12, 1, 2)}
"""Each season's months, in the order they come."""

_YEAR = r"(?P<year>(?:19|20)\d\d)"


@dataclass(frozen=True)
class _Language:
    """One language's season phrases: ``pattern`` has the groups ``before`` (a word before the
    season), ``season``, ``after`` (a word after it) and ``year``; ``which`` tells, from the
    before or after word, whether it is the last, this or the next season or a mere marker of
    time (``in``); ``seasons`` gives each season word's season."""

    pattern: re.Pattern[str]
    which: tuple[tuple[re.Pattern[str], str], ...]
    seasons: tuple[tuple[re.Pattern[str], str], ...]
    bare: re.Pattern[str] | None = None
    """Season words that mark a time by themselves ("летом": in summer; "夏天")."""
    lead: re.Pattern[str] | None = None
    """What, just before a season, marks it as a time without being part of its phrase: a year
    read apart ("去年の夏", "작년 여름")."""

    def season(self, word: str) -> str:
        return next(season for test, season in self.seasons if test.fullmatch(word))

    def kind(self, word: str | None) -> str | None:
        if not word:
            return None
        return next((kind for test, kind in self.which if test.fullmatch(word.strip())), None)


def _make(
    before: str,
    seasons: dict[str, str],
    after: str = "",
    year: str = "",
    bare: str | None = None,
    lead: str | None = None,
    **which: str,
) -> _Language:
    """A language's :class:`_Language` from its regular expressions: ``before`` / ``after``
    the words around a season, ``seasons`` each season word's season, ``year`` what joins a
    year after it, ``which`` (``last``, ``this``, ``next``, ``in``) which of the words around
    says what."""
    words = "|".join(sorted(seasons, key=len, reverse=True))
    tail = rf"(?:\s*(?P<after>{after}))?" if after else ""
    pattern = re.compile(rf"(?:(?P<before>{before})\s*)?(?P<season>{words}){tail}(?:\s*(?:{year}){_YEAR}\b)?")
    return _Language(
        pattern,
        tuple((re.compile(test), kind) for kind, test in which.items()),
        tuple((re.compile(word), season) for word, season in seasons.items()),
        None if bare is None else re.compile(bare),
        None if lead is None else re.compile(lead),
    )


_EN = _make(
    r"\b(?:last|past|this|next|coming|(?:in|during|over|through|throughout)(?:\s+the)?)",
    {
        r"\bspring\b": "spring",
        r"\bsummer\b": "summer",
        r"\bautumn\b": "autumn",
        r"\bfall\b": "autumn",
        r"\bwinter\b": "winter",
    },
    year=r"(?:of\s+)?",
    last=r"last|past",
    this=r"this",
    next=r"next|coming",
    **{"in": r"(?:in|during|over|through|throughout)(?:\s+the)?"},
)

_OTHERS: tuple[_Language, ...] = (
    # Spanish
    _make(
        r"\b(?:est[ea]|(?:el|la)\s+próxim[oa]|(?:en|durante)(?:\s+(?:el|la))?)",
        {r"primavera\b": "spring", r"verano\b": "summer", r"otoño\b": "autumn", r"invierno\b": "winter"},
        after=r"pasad[oa]\b|que\s+viene\b|próxim[oa]\b",
        year=r"(?:de|del)\s+",
        last=r"pasad[oa]",
        this=r"est[ea]",
        next=r"(?:(?:el|la)\s+)?próxim[oa]|que\s+viene",
        **{"in": r"(?:en|durante)(?:\s+(?:el|la))?"},
    ),
    # French ("été" alone is also "been")
    _make(
        r"\b(?:cet?te?|au|(?:en|pendant|durant)(?:\s+l')?)",
        {r"printemps\b": "spring", r"été\b": "summer", r"automne\b": "autumn", r"hiver\b": "winter"},
        after=r"derni[eè]re?\b|prochaine?\b",
        year=r"(?:de\s+)?",
        last=r"derni[eè]re?",
        this=r"cet?te?",
        next=r"prochaine?",
        **{"in": r"au|(?:en|pendant|durant)(?:\s+l')?"},
    ),
    # German
    _make(
        r"\b(?:(?:im\s+)?(?:letzten|vergangenen|nächsten|kommenden)|dies(?:en|es|em)|in\s+diesem|im|während\s+des)",
        {
            r"frühling\b": "spring",
            r"frühjahr\b": "spring",
            r"sommer\b": "summer",
            r"herbst\b": "autumn",
            r"winter\b": "winter",
        },
        last=r"(?:im\s+)?(?:letzten|vergangenen)",
        this=r"dies(?:en|es|em)|in\s+diesem",
        next=r"(?:im\s+)?(?:nächsten|kommenden)",
        **{"in": r"im|während\s+des"},
    ),
    # Portuguese
    _make(
        r"\b(?:neste|nesse|este|esse|(?:no|na)\s+próxim[oa]|no|na|durante\s+o|em)",
        {r"primavera\b": "spring", r"verão\b": "summer", r"outono\b": "autumn", r"inverno\b": "winter"},
        after=r"passad[oa]\b|que\s+vem\b",
        year=r"de\s+",
        last=r"passad[oa]",
        this=r"neste|nesse|este|esse",
        next=r"(?:no|na)\s+próxim[oa]|que\s+vem",
        **{"in": r"no|na|durante\s+o|em"},
    ),
    # Italian
    _make(
        r"(?:\b(?:lo|la)\s+scors[oa]|\bscors[oa]|\bquest[oa]?'?|\b(?:la\s+|il\s+)?prossim[oa]|\bin|\bd'|\bnell'|\bdurante\s+(?:l'|il|la))",
        {r"primavera\b": "spring", r"estate\b": "summer", r"autunno\b": "autumn", r"inverno\b": "winter"},
        after=r"scors[oa]\b|prossim[oa]\b",
        year=r"(?:del\s+)?",
        last=r"(?:(?:lo|la)\s+)?scors[oa]",
        this=r"quest[oa]?'?",
        next=r"(?:(?:la|il)\s+)?prossim[oa]",
        **{"in": r"in|d'|nell'|durante\s+(?:l'|il|la)"},
    ),
    # Russian: the instrumental ("летом", "зимой") is "in summer" by itself.
    _make(
        r"\b(?:прошл\w+|эт\w+|следующ\w+|будущ\w+)",
        {r"весн\w*": "spring", r"лет(?:ом|о|а|е)\b": "summer", r"осен\w*": "autumn", r"зим\w*": "winter"},
        year=r"",
        bare=r"летом|весной|осенью|зимой",
        last=r"прошл\w+",
        this=r"эт\w+",
        next=r"следующ\w+|будущ\w+",
    ),
    # Chinese: a season word marks a time by itself ("去年夏天": the year is read apart).
    _make(
        r"(?:上个|这个|下个)",
        {
            "春天": "spring",
            "春季": "spring",
            "夏天": "summer",
            "夏季": "summer",
            "暑假": "summer",
            "秋天": "autumn",
            "秋季": "autumn",
            "冬天": "winter",
            "冬季": "winter",
            "寒假": "winter",
        },
        bare=r".+",
        last=r"上个",
        this=r"这个",
        next=r"下个",
    ),
    # Japanese: one character, so only in "この夏", "夏休み", "夏に", "去年の夏".
    _make(
        r"(?:この|今度の|次の)",
        {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"},
        after=r"休み|に(?!く)|の間",
        lead=r"の$",
        this=r"この",
        next=r"今度の|次の",
        **{"in": r"休み|に|の間"},
    ),
    # Korean: "올여름" is this summer; "작년 여름" takes its year apart.
    _make(
        r"(?:지난|이번|올|다음)",
        {"봄": "spring", "여름": "summer", "가을": "autumn", "겨울": "winter"},
        after=r"에|\s?방학|철|\s?동안",
        lead=r"(?:작년|올해|내년|\d{4}\s*년)\s*$",
        last=r"지난",
        this=r"이번|올",
        next=r"다음",
        **{"in": r"에|\s?방학|철|\s?동안"},
    ),
)

_CUES = (
    "spring", "summer", "autumn", "fall", "winter",
    "primavera", "verano", "otoño", "invierno", "printemps", "été", "automne", "hiver",
    "frühling", "frühjahr", "sommer", "herbst", "verão", "outono", "inverno", "estate", "autunno",
    "весн", "лет", "осен", "зим", "春", "夏", "秋", "冬", "暑假", "寒假", "봄", "여름", "가을", "겨울",
)  # fmt: skip
"""What a text must hold (lowercased) to name a season: the cheap test before the patterns."""


@dataclass(frozen=True)
class Period:
    """A season (or a quarter, :mod:`jiyi.text.quarters`) a text names: its ``span``, and
    either ``ranges`` (of a known year) or ``months`` (of any year)."""

    span: tuple[int, int]
    ranges: tuple[tuple[datetime, datetime], ...] = ()
    months: tuple[int, ...] = ()


def season_times(text: str, now: datetime, definite_only: bool = False) -> Iterator[Period]:
    """Each season ``text`` names, read from ``text`` lowercased (spans line up with ``text``
    when lowercasing keeps its length). ``definite_only``: only a season of a known year
    (last, this, next or a year named with it), as a memory's own text is read."""
    low = text.lower()
    if not any(c in low for c in _CUES):
        return
    taken: list[tuple[int, int]] = []
    for lang in (_EN, *_OTHERS):
        for m in scan(lang.pattern, low):
            span = m.span()
            if any(span[0] < b and a < span[1] for a, b in taken) or _a_name(text, m):
                continue
            found = _read(lang, m, low, now, definite_only)
            if found is not None:
                taken.append(span)
                yield Period(span, *found)


_NAME_AFTER = re.compile(r"\s+[A-Z]")


def _a_name(text: str, m: re.Match[str]) -> bool:
    """A capitalised season before another capitalised word names something ("the Spring
    Fling Market", "Summer Camp"), not a time."""
    start, end = m.span("season")
    return text[start : start + 1].isupper() and _NAME_AFTER.match(text, end) is not None


def _read(
    lang: _Language, m: re.Match[str], low: str, now: datetime, definite_only: bool
) -> tuple[tuple[tuple[datetime, datetime], ...], tuple[int, ...]] | None:
    season = lang.season(m["season"])
    # "au printemps dernier", "no verão passado": the word that says which wins over "in".
    kinds = {lang.kind(m["before"]), lang.kind(m.groupdict().get("after"))} - {None}
    kind = next((k for k in ("last", "this", "next", "in") if k in kinds), None)
    if m["year"]:
        return _of_year(season, int(m["year"])), ()
    if kind in ("last", "this", "next"):
        return (_relative(season, kind, now),), ()
    marked = (
        kind == "in"
        or (lang.bare is not None and lang.bare.fullmatch(m["season"]) is not None)
        or (lang.lead is not None and lang.lead.search(low, max(0, m.start() - 8), m.start()) is not None)
    )
    if definite_only or not marked:
        return None
    return (), MONTHS[season]


def _range(season: str, year: int) -> tuple[datetime, datetime]:
    """The season that begins in ``year`` (a winter runs into the next year)."""
    first = MONTHS[season][0]
    end_year, end_month = (year + 1, 3) if season == "winter" else (year, first + 3)
    return datetime(year, first, 1, tzinfo=UTC), datetime(end_year, end_month, 1, tzinfo=UTC)


def _of_year(season: str, year: int) -> tuple[tuple[datetime, datetime], ...]:
    """A season named with its year: its months of that year (a winter: January and February,
    then December)."""
    if season != "winter":
        return (_range(season, year),)
    return (
        (datetime(year, 1, 1, tzinfo=UTC), datetime(year, 3, 1, tzinfo=UTC)),
        (datetime(year, 12, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)),
    )


def _relative(season: str, kind: str, now: datetime) -> tuple[datetime, datetime]:
    """The last (ended by ``now``), this (this year's; a winter's January and February are the
    December before's) or the next (the first to begin after ``now``) occurrence."""
    if kind == "this":
        year = now.year - 1 if season == "winter" and now.month < 3 else now.year
        return _range(season, year)
    occurrences = [_range(season, y) for y in range(now.year - 2, now.year + 2)]
    if kind == "last":
        return [w for w in occurrences if w[1] <= now][-1]
    return next(w for w in occurrences if w[0] > now)
