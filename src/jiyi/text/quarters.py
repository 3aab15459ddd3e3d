"""Quarters of the year as windows in time: "last quarter", "Q3 2024", "the third quarter of
2023", "上个季度", "2024年第三季度", "el trimestre pasado", "im dritten Quartal", "前四半期",
"지난 분기".

A quarter with "last", "this" or "next" is counted from the quarter now is in; one named by
its number with a year is that year's; by its number alone, its three months of any year (a
year named apart, "去年第四季度", then makes them that year's, as for months:
:func:`jiyi.text.timeparse._months_of_the_year`). Calendar quarters only: a company's fiscal
year is not known here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

from jiyi.text.prefilter import scan
from jiyi.text.seasons import Period

_NUMBERS = {
    **dict.fromkeys(("1", "一", "１", "first", "1st", "primer", "primero", "premier", "ersten", "primeiro", "primo", "первом"), 1),
    **dict.fromkeys(("2", "二", "２", "second", "2nd", "segundo", "deuxième", "zweiten", "secondo", "втором"), 2),
    **dict.fromkeys(("3", "三", "３", "third", "3rd", "tercer", "tercero", "troisième", "dritten", "terceiro", "terzo", "третьем"), 3),
    **dict.fromkeys(("4", "四", "４", "fourth", "4th", "cuarto", "quatrième", "vierten", "quarto", "четвёртом", "четвертом"), 4),
}  # fmt: skip
_N = "|".join(sorted(_NUMBERS, key=len, reverse=True))
_YEAR = r"(?P<year>(?:19|20)\d\d)"

# (pattern, kind): "last", "this", "next", or "number" (a group ``n``, maybe ``year``).
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), kind)
    for p, kind in (
        (
            r"\b(?:(?:the\s+)?(?:last|previous|past)\s+quarter|(?:el\s+)?(?:trimestre\s+pasado|último\s+trimestre)"
            r"|(?:le\s+)?trimestre\s+dernier|(?:im\s+)?(?:letzten|vergangenen)\s+quartal|letztes\s+quartal"
            r"|(?:o\s+|no\s+)?trimestre\s+passado|(?:lo\s+)?scorso\s+trimestre|(?:il\s+)?trimestre\s+scorso"
            r"|(?:в\s+)?прошлом\s+квартале)\b|前四半期|上个?季度|지난\s*분기",
            "last",
        ),
        (
            r"\b(?:this\s+quarter|este\s+trimestre|ce\s+trimestre|(?:in\s+)?diese[mns]?\s+quartal"
            r"|neste\s+trimestre|questo\s+trimestre|(?:в\s+)?этом\s+квартале)\b|今四半期|这个?季度|本季度|이번\s*분기",
            "this",
        ),
        (
            r"\b(?:next\s+quarter|(?:el\s+)?próximo\s+trimestre|(?:le\s+)?trimestre\s+prochain"
            r"|(?:im\s+)?nächsten\s+quartal|nächstes\s+quartal|(?:no\s+)?próximo\s+trimestre"
            r"|(?:il\s+)?prossimo\s+trimestre|(?:в\s+)?следующем\s+квартале)\b|来四半期|下个?季度|다음\s*분기",
            "next",
        ),
        # Q3 2024, 2024 Q3, the third quarter of 2023, 第三季度, 第3四半期, 3분기, el tercer trimestre de 2024
        (rf"\b{_YEAR}\s*(?:年\s*)?q(?P<n>[1-4])\b", "number"),
        (rf"\bq(?P<n>[1-4])(?:\s*(?:of\s+)?{_YEAR})?\b", "number"),
        (
            rf"\b(?:the\s+)?(?P<n>{_N})\s+(?:quarter|trimestre|quartal|квартале)\b(?:\s+(?:of|de|del|des|von|dell'anno)\s+{_YEAR})?",
            "number",
        ),
        (r"第\s*(?P<n>[1-4１-４一二三四])\s*(?:季度|四半期)", "number"),
        (r"(?<!\d)(?P<n>[1-4])\s*분기", "number"),
    )
)

_CUES = ("quarter", "q1", "q2", "q3", "q4", "trimestre", "quartal", "квартал", "季度", "四半期", "분기")


def quarter_times(text: str, now: datetime) -> Iterator[Period]:
    """Each quarter ``text`` names, read from ``text`` lowercased (the caller checks that its
    spans line up with ``text``)."""
    low = text.lower()
    if not any(c in low for c in _CUES):
        return
    taken: list[tuple[int, int]] = []
    for pattern, kind in _PATTERNS:
        for m in scan(pattern, low):
            span = m.span()
            if any(span[0] < b and a < span[1] for a, b in taken):
                continue
            taken.append(span)
            if kind != "number":
                yield Period(span, ranges=(_relative(kind, now),))
                continue
            n = _NUMBERS[m["n"]]
            year = m.groupdict().get("year")
            if year:
                yield Period(span, ranges=(_quarter(int(year), n),))
            else:
                yield Period(span, months=tuple(range(3 * n - 2, 3 * n + 1)))


def _quarter(year: int, n: int) -> tuple[datetime, datetime]:
    start = datetime(year, 3 * n - 2, 1, tzinfo=UTC)
    return start, datetime(year + (n == 4), 1 if n == 4 else 3 * n + 1, 1, tzinfo=UTC)


def _relative(kind: str, now: datetime) -> tuple[datetime, datetime]:
    """The quarter before ("last"), of ("this") or after ("next") the one ``now`` is in."""
    index = now.year * 4 + (now.month - 1) // 3 + {"last": -1, "this": 0, "next": 1}[kind]
    return _quarter(index // 4, index % 4 + 1)
