"""Time expressions in queries, in English and Chinese, as windows on ``occurred_at``.

``time_windows("what did we decide on 8 May 2023?", now)`` returns the day 2023-05-08;
"last week", "上个月", "昨天" are taken relative to ``now``; a month without a year
("in June", "六月") matches that month of any year. The search boosts memories that
happened inside a window; nothing is filtered out, so a wrong guess costs little.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

_MONTHS: dict[str, int] = {}
for _i in range(1, 13):
    _MONTHS[calendar.month_name[_i].lower()] = _i
    _MONTHS[calendar.month_abbr[_i].lower()] = _i
_MONTHS["sept"] = 9
_MP = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ZH_NUM = {
    "一": 1,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
    "十一": 11,
    "十二": 12,
}
_ZH_MONTH = "十二|十一|十|一|二|三|四|五|六|七|八|九"

_EN_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MP})\.?,?\s+(\d{{4}})\b", re.I
)
_EN_MONTH_DAY_YEAR = re.compile(rf"\b({_MP})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_EN_MONTH_YEAR = re.compile(rf"\b({_MP})\.?,?\s+(\d{{4}})\b", re.I)
_EN_MONTH = re.compile(rf"\b(?:in|during|of|since|this|last|early|late|mid)[\s-]+({_MP})\b(?![\s,]+\d)", re.I)
_EN_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b", re.I)
_ZH_DAY = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_MONTH_YEAR = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月")
_ZH_MONTH_DAY = re.compile(r"(?<![\d年])(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_MONTH_ONLY = re.compile(rf"(?<![\d年])(\d{{1,2}}|{_ZH_MONTH})\s*月(?:份)?(?!\s*\d)")
_ZH_YEAR = re.compile(r"(\d{4})\s*年(?!\s*\d{1,2}\s*月)")
_ZH_REL_YEAR_MONTH = re.compile(rf"(去年|今年|前年|明年)\s*(\d{{1,2}}|{_ZH_MONTH})\s*月(?:份)?")
_ZH_REL_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1}

_RELATIVE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:yesterday)\b|昨天|昨日", re.I), "yesterday"),
    (re.compile(r"\b(?:today|tonight)\b|今天|今日|今晚", re.I), "today"),
    (re.compile(r"\bday before yesterday\b|前天", re.I), "day_before"),
    (re.compile(r"\blast weekend\b|上周末|上个周末", re.I), "last_weekend"),
    (re.compile(r"\blast week\b|上周|上个星期|上星期|上礼拜", re.I), "last_week"),
    (re.compile(r"\bthis week\b|这周|本周|这个星期", re.I), "this_week"),
    (re.compile(r"\blast month\b|上个月|上月", re.I), "last_month"),
    (re.compile(r"\bthis month\b|这个月|本月", re.I), "this_month"),
    (re.compile(r"\blast year\b|去年", re.I), "last_year"),
    (re.compile(r"\byear before last\b|前年", re.I), "year_before_last"),
    (re.compile(r"\bthis year\b|今年", re.I), "this_year"),
]
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b"
    r"|(\d+|[一两二三四五六七八九十])\s*(天|周|个星期|个月|年)前",
    re.I,
)
_WORD_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@dataclass(frozen=True)
class TimeWindows:
    """Half-open UTC ranges, plus months (1-12) that match in any year."""

    ranges: tuple[tuple[datetime, datetime], ...] = ()
    months: tuple[int, ...] = ()
    spans: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    """Where in the query the expressions were found."""
    counted: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    """The spans among them that count a distance back from now ("a week ago", "four
    weeks ago", "三天前"): their words are no keywords. The asker counted from the day of
    asking; a memory counts from its own day ("about a week ago", "a few weeks ago"), so the
    same words there mean another time. A named span ("last weekend", "last month",
    "昨天") keeps its words: it is what people say on both sides, and the memory that says
    "last month" is often the answer."""

    def __bool__(self) -> bool:
        return bool(self.ranges or self.months)

    def contains(self, when: datetime | None) -> bool:
        if when is None:
            return False
        return any(start <= when < end for start, end in self.ranges) or when.month in self.months


def _day(y: int, m: int, d: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(y, m, d, tzinfo=UTC)
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def _month(y: int, m: int) -> tuple[datetime, datetime] | None:
    if not 1 <= m <= 12:
        return None
    start = datetime(y, m, 1, tzinfo=UTC)
    end = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _year(y: int) -> tuple[datetime, datetime]:
    return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)


def _relative(kind: str, now: datetime) -> tuple[datetime, datetime]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week_start = today - timedelta(days=today.weekday())
    month_start = today.replace(day=1)
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "yesterday":
        return today - timedelta(days=1), today
    if kind == "day_before":
        return today - timedelta(days=2), today - timedelta(days=1)
    if kind == "last_weekend":
        return week_start - timedelta(days=2), week_start
    if kind == "last_week":
        return week_start - timedelta(days=7), week_start
    if kind == "this_week":
        return week_start, week_start + timedelta(days=7)
    if kind == "last_month":
        prev = (month_start - timedelta(days=1)).replace(day=1)
        return prev, month_start
    if kind == "this_month":
        nxt = (month_start + timedelta(days=32)).replace(day=1)
        return month_start, nxt
    if kind == "last_year":
        return _year(today.year - 1)
    if kind == "year_before_last":
        return _year(today.year - 2)
    return _year(today.year)  # this_year


def _ago(amount: int, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """A window around "N units ago", as wide as the unit, so vague answers still match."""
    days = {
        "day": 1,
        "天": 1,
        "week": 7,
        "周": 7,
        "个星期": 7,
        "month": 30,
        "个月": 30,
        "year": 365,
        "年": 365,
    }[unit]
    centre = now - timedelta(days=days * amount)
    half = timedelta(days=max(1, days // 2))
    return centre - half, centre + half


@dataclass
class _Found:
    """Windows and months found so far, and the spans of the query they came from: a span
    is read once, by the most specific expression."""

    ranges: list[tuple[datetime, datetime]] = field(default_factory=list)
    months: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)

    def free(self, span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in self.spans)

    def add(self, window: tuple[datetime, datetime] | None, span: tuple[int, int]) -> bool:
        if window is not None and self.free(span):
            self.ranges.append(window)
            self.spans.append(span)
            return True
        return False

    def add_month(self, month: int, span: tuple[int, int]) -> None:
        if self.free(span):
            self.months.append(month)
            self.spans.append(span)


def time_windows(query: str, now: datetime) -> TimeWindows:
    """Every time expression of ``query`` as windows; empty when there is none."""
    found = _Found()
    # Most specific first, so "8 May 2023" is not also read as "May 2023".
    _days(query, now, found)
    _months_of_years(query, now, found)
    for pattern, kind in _RELATIVE:
        for m in pattern.finditer(query):
            found.add(_relative(kind, now), m.span())
    counted: list[tuple[int, int]] = []
    for m in _AGO.finditer(query):
        if found.add(_ago_window(m, now), m.span()):
            counted.append(m.span())
    for m in _EN_YEAR.finditer(query):
        found.add(_year(int(m[1])), m.span(1))
    for m in _ZH_YEAR.finditer(query):
        found.add(_year(int(m[1])), m.span())
    for m in _EN_MONTH.finditer(query):
        found.add_month(_MONTHS[m[1].lower()], m.span(1))
    for m in _ZH_MONTH_ONLY.finditer(query):
        value = int(m[1]) if m[1].isdigit() else _ZH_NUM[m[1]]
        if 1 <= value <= 12:
            found.add_month(value, m.span())
    return TimeWindows(
        tuple(found.ranges), tuple(dict.fromkeys(found.months)), tuple(found.spans), tuple(counted)
    )


def _days(query: str, now: datetime, found: _Found) -> None:
    """Dates with a day: "8 May 2023", "May 8, 2023", "2023-05-08", "2023年5月8日", "5月8日"."""
    for m in _EN_DAY_MONTH_YEAR.finditer(query):
        found.add(_day(int(m[3]), _MONTHS[m[2].lower()], int(m[1])), m.span())
    for m in _EN_MONTH_DAY_YEAR.finditer(query):
        found.add(_day(int(m[3]), _MONTHS[m[1].lower()], int(m[2])), m.span())
    for m in _ISO_DAY.finditer(query):
        found.add(_day(int(m[1]), int(m[2]), int(m[3])), m.span())
    for m in _ZH_DAY.finditer(query):
        found.add(_day(int(m[1]), int(m[2]), int(m[3])), m.span())
    for m in _ZH_MONTH_DAY.finditer(query):
        found.add(_day(now.year, int(m[1]), int(m[2])), m.span())


def _months_of_years(query: str, now: datetime, found: _Found) -> None:
    """Months of a given year: "去年三月", "May 2023", "2023年5月"."""
    for m in _ZH_REL_YEAR_MONTH.finditer(query):
        value = int(m[2]) if m[2].isdigit() else _ZH_NUM[m[2]]
        found.add(_month(now.year + _ZH_REL_YEARS[m[1]], value), m.span())
    for m in _EN_MONTH_YEAR.finditer(query):
        found.add(_month(int(m[2]), _MONTHS[m[1].lower()]), m.span())
    for m in _ZH_MONTH_YEAR.finditer(query):
        found.add(_month(int(m[1]), int(m[2])), m.span())


def _ago_window(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The window of an "N units ago" match, English ("3 weeks ago") or Chinese ("三周前")."""
    if m[1]:
        amount = int(m[1]) if m[1].isdigit() else _WORD_NUM[m[1].lower()]
        return _ago(amount, m[2].lower(), now)
    amount = int(m[3]) if m[3].isdigit() else (2 if m[3] == "两" else _ZH_NUM[m[3]])
    return _ago(amount, m[4], now)


def without_spans(query: str, spans: tuple[tuple[int, int], ...]) -> str:
    """``query`` with the time expressions blanked, so their words are not keywords too."""
    chars = list(query)
    for start, end in spans:
        for i in range(start, min(end, len(chars))):
            chars[i] = " "
    return "".join(chars)
