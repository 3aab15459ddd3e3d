"""Time expressions in queries and in memories, English and Chinese, as windows in time.

``time_windows("what did we decide on 8 May 2023?", now)`` returns the day 2023-05-08;
"last week", "上个月", "昨天", "大前天", "tomorrow", "下周" are taken relative to ``now``; a
distance back ("four weeks ago", "a couple of days ago", "前几天", "三个月前") is a window
around that point, except that "two weekends ago" / "the weekend before last" is that
weekend; "in the past two weeks" / "最近两周" is a window up to now; a month
without a year ("in June", "六月") matches that month of any year. A request for a
suggestion ("recommend something to watch tonight") names when the user will act, so
"tonight" there gives no window. A time after a word that bounds it ("before May 2023",
"as of September 2023", "since June", "截至2023年9月", "2023年5月之后") is open on one side:
before the month begins, up to its end, from its start, after its end. The search boosts
memories said inside a window, or whose text tells of a time inside it
(:func:`told_windows`, counted from when it was said); nothing is filtered out, so a wrong
guess costs little.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from jiyi.text import time_words
from jiyi.text.holidays import RECENT, holiday_windows
from jiyi.text.prefilter import scan
from jiyi.text.quarters import quarter_times
from jiyi.text.seasons import season_times

_A = TypeVar("_A")

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
_EN_MONTH = re.compile(
    rf"\b(?:in|during|of|since|this|last|early|late|mid|between|from)[\s-]+({_MP})\b(?![\s,]+\d)", re.I
)
# A month named first or second in a span of months: "March to May 2023", "from March to
# May", "March-May", "between March and May" (joined by _Found.settle).
_EN_TO = r"(?:\s+(?:to|until|till|through|thru)\s+|\s*[-–]\s*)"
_EN_MONTH_FIRST = re.compile(rf"\b({_MP})\b(?={_EN_TO}(?:{_MP})\b)", re.I)
_EN_MONTH_SECOND = re.compile(  # after "and" only with "between": "March and may go" is a verb
    rf"(?:\b(?:{_MP}){_EN_TO}|\bbetween\s+(?:{_MP})\s+and\s+)({_MP})\b(?![\s,]+\d)", re.I
)
_EN_YEAR = re.compile(
    r"\b(?:in|during|of|since|before|after|until|till|by|through|as of|prior to|up to|from|between"
    r"|early|mid|late)[\s-]+((?:19|20)\d\d)\b",
    re.I,
)
_EN_YEAR_SECOND = re.compile(  # "from 2019 to 2021", "between 2019 and 2021", "2019-2021"
    r"(?:\b(?:from|between)\s+)?\b(?:19|20)\d\d(?:\s+(?:to|and|until|till|through)\s+|\s*[-–]\s*)((?:19|20)\d\d)\b",
    re.I,
)
_ZH_DAY = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_MONTH_YEAR = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月")
_ZH_MONTH_DAY = re.compile(r"(?<![\d年])(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_MONTH_ONLY = re.compile(rf"(?<![\d年])(\d{{1,2}}|{_ZH_MONTH})\s*月(?:份)?(?!\s*\d)")
_ZH_YEAR = re.compile(r"(\d{4})\s*年(?!\s*\d{1,2}\s*月)")
_ZH_REL_YEAR_MONTH = re.compile(rf"(去年|今年|前年|明年)\s*(\d{{1,2}}|{_ZH_MONTH})\s*月(?:份)?")
_ZH_REL_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1}

# The start and the end of a year, as its first two and last two months: the year itself, if
# named, is read apart ("the end of last year", "去年年底", "a finales del año pasado", "в конце
# прошлого года"), so the span stops before it (a lookahead), or after it in "2024年初". With
# a year in digits ("early 2023", "the end of 2023") the whole year is read, as before.
_YEAR_WORD = (
    r"(?=\s+(?:of\s+)?(?:the\s+|this\s+|last\s+|next\s+)?year\b"
    r"|\s+del?\s+(?:este\s+|el\s+)?año\b|\s+del\s+año\b|\s+(?:de\s+l'|d')année\b"
    r"|\s+(?:des|dieses|letzten|vergangenen|nächsten)\s+jahres\b|\s+d[oe]\s+(?:este\s+)?ano\b"
    r"|\s+(?:dell'|d')anno\b|\s+(?:этого\s+|прошлого\s+|следующего\s+)?года\b)"
)
_YEAR_PARTS = (
    (
        re.compile(
            rf"\b(?:(?:at\s+)?the\s+(?:beginning|start)\s+of|early|(?:a\s+)?(?:principios|comienzos|inicios)"
            rf"|(?:au\s+|en\s+)?début|anfang|(?:no\s+)?início|all'inizio|в\s+начале){_YEAR_WORD}"
            r"|(?:(?<=\d年)|(?<!\d)年)(?:初|头)|年始|연초",
            re.I,
        ),
        (1, 2),
    ),
    (
        re.compile(
            rf"\b(?:(?:at\s+)?the\s+end\s+of|late|(?:a\s+)?finales|(?:en\s+|à\s+la\s+)?fin|ende|(?:no\s+)?(?:fim|final)"
            rf"|alla\s+fine|в\s+конце){_YEAR_WORD}"
            r"|(?:(?<=\d年)|(?<!\d)年)(?:底|末|尾)|연말",
            re.I,
        ),
        (11, 12),
    ),
)

# "the year" with no word of which: this one ("since the start of the year").
_THE_YEAR = re.compile(
    r"\s+(?:(?:of\s+)?the\s+year|del?\s+año|de\s+l'année|d'année|des\s+jahres|d[oe]\s+ano|dell'anno|d'anno|года)\b"
    r"(?!\s+(?:pasado|passado|derni|prochain|scorso|prossimo|que\s+v))",
    re.I,
)


_YEAR_PART_CUES = ("year", "año", "année", "jahr", "ano", "anno", "год", "年", "연")


def _year_parts(query: str, now: datetime, found: _Found) -> None:
    """The start or the end of a year (:data:`_YEAR_PARTS`): of "the year", this year's; of a
    year named apart, that year's (:func:`_months_of_the_year`); else its months of any year."""
    low = query.lower()
    if not any(c in low for c in _YEAR_PART_CUES):
        return  # the cheap test: every phrase read here names a year
    for pattern, (first, last) in _YEAR_PARTS:
        for m in scan(pattern, query):
            this = _THE_YEAR.match(query, m.end())
            if this is None:
                found.add_months((first, last), m.span())
                continue
            end = datetime(now.year + (last == 12), last % 12 + 1, 1, tzinfo=UTC)
            found.add((datetime(now.year, first, 1, tzinfo=UTC), end), (m.start(), this.end()))


# Longer phrases first: a span is read once, so "大前天" is not also "前天", nor "上上周" "上周".
_RELATIVE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"大前天"), "three_days_before"),
    (re.compile(r"\bday before yesterday\b|前天", re.I), "day_before"),
    (re.compile(r"\blast night\b|昨晚|昨天晚上", re.I), "last_night"),
    (re.compile(r"\b(?:yesterday)\b|昨天|(?<!一)昨日", re.I), "yesterday"),
    (
        re.compile(
            r"\b(?:today|tonight|this (?:morning|afternoon|evening)|earlier today)\b|今天|今日|今晚|今早",
            re.I,
        ),
        "today",
    ),
    (re.compile(r"\bweekend before last\b|上上(?:个)?周末", re.I), "weekend_before_last"),
    (re.compile(r"\bweek before last\b|上上周|上上个星期|上上星期", re.I), "week_before_last"),
    (re.compile(r"\b(?:last|this past|past) weekend\b|上周末|上个周末", re.I), "last_weekend"),
    (re.compile(r"\blast week\b(?!\s+of\b)|上周|上个星期|上星期|上礼拜", re.I), "last_week"),
    (re.compile(r"\bthis weekend\b|这周末|本周末|这个周末", re.I), "this_weekend"),
    (re.compile(r"\bthis week\b|这周|本周|这个星期", re.I), "this_week"),
    (re.compile(r"\bmonth before last\b|上上个月|上上月", re.I), "month_before_last"),
    (re.compile(r"\blast month\b(?!\s+of\b)|上个月|上月", re.I), "last_month"),
    (re.compile(r"\bthis month\b|这个月|本月", re.I), "this_month"),
    (re.compile(r"\blast year\b(?!\s+of\b)|去年", re.I), "last_year"),
    (re.compile(r"大前年"), "three_years_back"),
    (re.compile(r"\byear before last\b|前年", re.I), "year_before_last"),
    (re.compile(r"\bthis year\b|今年", re.I), "this_year"),
    # Ahead: a query rarely names them, a memory often does ("my exam is next week").
    (re.compile(r"\bday after tomorrow\b|后天", re.I), "day_after"),
    (re.compile(r"\btomorrow\b|明天|明日|明早|明晚", re.I), "tomorrow"),
    (re.compile(r"\bnext weekend\b|下周末|下个周末", re.I), "next_weekend"),
    (re.compile(r"\bnext week\b|下周|下个星期|下星期|下礼拜", re.I), "next_week"),
    (re.compile(r"\bnext month\b|下个月|下月", re.I), "next_month"),
    (re.compile(r"\byear after next\b|后年", re.I), "year_after_next"),
    (re.compile(r"\bnext year\b|明年", re.I), "next_year"),
]
_EN_NUMBER = r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_EN_VAGUE = r"a\s+couple\s+of|a\s+couple|couple\s+of|a\s+few|few|several"
_AGO = re.compile(
    rf"\b(?:(?P<en_n>{_EN_NUMBER})|(?P<en_vague>{_EN_VAGUE}))\s+(?P<en_unit>day|weekend|week|month|year)s?\s+ago\b"
    r"|(?P<zh_n>\d+|[一两二三四五六七八九十])\s*(?P<zh_unit>天|个周末|周|个星期|个月|年)前"
    r"|(?P<zh_vague>几|好几|两三|三四|三五)\s*(?P<zh_vague_unit>天|周|个星期|个月|年)前"
    # "前几天" / "前两天": a few days back (only days: "前几年" is as often "the first few years").
    r"|前(?P<zh_days>几|两)天",
    re.I,
)
# A request for a suggestion or a plan ("recommend a show to watch tonight", "what should I
# cook today", "这周末推荐去哪玩") names when the user will act, not when the memory it needs
# was told: a time that includes now gives it no window (a time before now still does).
_REQUEST = re.compile(
    r"\b(?:recommend|recommendations?|suggest|suggestions?|ideas?|advice|should\s+I|what\s+to|where\s+to)\b"
    r"|推荐|建议|该[做吃去买看穿玩]|应该|有什么好",
    re.I,
)
# A day of a week: "last Friday", "this Tuesday", "next Monday", "上周五", "这周三", "周日",
# "下星期一". "on Friday" alone is left out: it is a plan as often as a memory.
_WEEKDAYS = {
    **{
        d: i
        for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
    },
    **{d: i for i, d in enumerate("一二三四五六")},
    "日": 6,
    "天": 6,
}
_WEEKDAY = re.compile(
    r"\b(?P<en>last|this|next)\s+(?P<en_day>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b(?!s)"
    r"|(?<!每)(?P<zh>上上|上|这|本|下)?\s*(?:个)?(?:周|星期|礼拜)(?P<zh_day>[一二三四五六日天])",
    re.I,
)
_ZH_WEEKS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1}


def _weekday(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The day a :data:`_WEEKDAY` match names: "last Friday" the latest Friday before today,
    "next Friday" the first after it, "this Friday" / "这周五" this week's (Monday first),
    "上周五" last week's, "周五" alone the latest up to today."""
    if m["en"]:
        return _day_of_week(m["en"].lower(), _WEEKDAYS[m["en_day"].lower()], now)
    if m["zh"] is None:
        return _day_of_week("latest", _WEEKDAYS[m["zh_day"]], now)
    return _day_of_week(_ZH_WEEKS[m["zh"]], _WEEKDAYS[m["zh_day"]], now)


def _day_of_week(which: str | int, day: int, now: datetime) -> tuple[datetime, datetime]:
    """Day ``day`` (Monday 0) of a week: ``which`` "last" the latest before today, "next"
    the first after it, "this" this week's, "latest" the latest up to today; a number, that
    day of the week so many weeks from this one."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if which == "last":
        start = today - timedelta(days=(today.weekday() - day - 1) % 7 + 1)
    elif which == "next":
        start = today + timedelta(days=(day - today.weekday() - 1) % 7 + 1)
    elif which == "latest":
        start = today - timedelta(days=(today.weekday() - day) % 7)
    else:
        weeks = 0 if which == "this" else int(which)
        start = today + timedelta(days=7 * weeks + day - today.weekday())
    return start, start + timedelta(days=1)


_CURRENT = frozenset({"today", "this_weekend", "this_week", "this_month", "this_year"})
# "in the past two weeks", "over the last few months", "最近两周", "过去三个月": up to now
# (not "the last two weeks of August").
_WITHIN = re.compile(
    rf"\b(?:the\s+)?(?:past|last)\s+(?:(?P<en_n>{_EN_NUMBER})|(?P<en_vague>{_EN_VAGUE}))\s+(?P<en_unit>day|week|month|year)s?\b(?!\s+of\b)"
    r"|\b(?:the|this)\s+past\s+(?P<en_one>day|week|month|year)\b(?!\s+of\b)"
    r"|(?:最近|过去|(?<![附接靠亲将])近)\s*(?:(?P<zh_n>\d+|[一两二三四五六七八九十])|(?P<zh_vague>几|两三|三四|三五))"
    r"\s*(?P<zh_unit>天|周|个星期|个月|年)",
    re.I,
)
_WORD_NUM = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
# Vague counts as a range of units back: "a couple" 1-3, "a few" / "几" 1-6.
_COUPLE = (1, 3)
_FEW = (1, 6)


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

    def hold(self, told: TimeWindows) -> bool:
        """Whether a time a memory tells of (``told``, :func:`told_windows`) lies inside these
        windows: the middle of one of its ranges inside a window at most twice as long as
        that window (a month without a year counts as 31 days), or a month both name. So
        "last week", said on 2 July, is inside "in June"; "last year" is inside "in 2022"
        but not inside "in June"."""
        for start, end in told.ranges:
            middle, length = start + (end - start) / 2, end - start
            if any(a <= middle < b and length <= 2 * (b - a) for a, b in self.ranges):
                return True
            if middle.month in self.months and length <= _MONTH_SPAN:
                return True
        return any(m in self.months for m in told.months)


_MONTH_SPAN = timedelta(days=62)
"""The longest told range a month without a year holds: twice 31 days, as for a window."""
_NONE = TimeWindows()
# What a memory's text must hold to tell of a time away from when it was said: a distance
# back or ahead, a month or a date (a time that includes the moment of saying, "today",
# "this month", adds nothing to it). A test of ~10 us that ~90% of conversational turns fail,
# before the ~20 patterns of :func:`time_windows` (~200 us on a 100-character turn; both
# measured on a machine that adds 10M integers in Python in 1.1 s).
_TOLD_WORDS = (
    *(m for m in _MONTHS if len(m) > 3 or m == "may"),
    "ago",
    "yesterday",
    "last",
    "before",
    "昨",
    "前天",
    "天前",
    "周前",
    "星期前",
    "月前",
    "年前",
    "上周",
    "上个",
    "上星期",
    "上礼拜",
    "去年",
    "前年",
    "前几天",
    "前两天",
    "tomorrow",
    "next",
    "明天",
    "明日",
    "明早",
    "明晚",
    "后天",
    "下周",
    "下个",
    "下星期",
    "下礼拜",
    "明年",
    *time_words.TOLD_CUES,
)
_TOLD_DATE = re.compile(r"(?:19|20)\d\d|\d\s*[月日号]|[一二三四五六七八九十]月")


def _tells_a_time(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in _TOLD_WORDS) or _TOLD_DATE.search(text) is not None


@functools.lru_cache(maxsize=16384)
def told_windows(text: str, said_at: datetime) -> TimeWindows:
    """The times a memory's text tells of, counted from when it was said: "we went camping
    last week", said on 2 July, tells of the week of 19 June. Cached: a memory is read once
    per process, however many searches it appears in."""
    if not _tells_a_time(text):
        return _NONE
    # No holidays: a memory names one it plans for as often as one it remembers ("国庆打算去
    # 云南", said in February, is for the coming October), and its own time says the rest.
    return time_windows(text, said_at, recent=0)


# Each returns None for a time outside the calendar ("0000年", "9999年12月", "February 30"):
# no window then, and never an error, since a memory's own text is read too.


def _day(y: int, m: int, d: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(y, m, d, tzinfo=UTC)
        return start, start + timedelta(days=1)
    except (ValueError, OverflowError):
        return None


def _month(y: int, m: int) -> tuple[datetime, datetime] | None:
    if not 1 <= m <= 12:
        return None
    try:
        return datetime(y, m, 1, tzinfo=UTC), datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC)
    except ValueError:
        return None


def _year(y: int) -> tuple[datetime, datetime] | None:
    try:
        return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
    except ValueError:
        return None


# Named times as offsets. Days from today: (first day, the day after the last). Said after
# midnight, "last night" is a few hours ago: yesterday and today.
_DAY_SPANS = {
    "today": (0, 1),
    "yesterday": (-1, 0),
    "day_before": (-2, -1),
    "three_days_before": (-3, -2),
    "last_night": (-1, 1),
    "tomorrow": (1, 2),
    "day_after": (2, 3),
}
# Days from this week's Monday.
_WEEK_SPANS = {
    "weekend_before_last": (-9, -7),
    "week_before_last": (-14, -7),
    "last_weekend": (-2, 0),
    "last_week": (-7, 0),
    "this_weekend": (5, 7),
    "this_week": (0, 7),
    "next_week": (7, 14),
    "next_weekend": (12, 14),
}
_MONTH_SHIFTS = {"month_before_last": -2, "last_month": -1, "this_month": 0, "next_month": 1}
_YEAR_SHIFTS = {
    "three_years_back": -3,
    "year_before_last": -2,
    "last_year": -1,
    "this_year": 0,
    "next_year": 1,
    "year_after_next": 2,
}


def _month_start(day: datetime, shift: int) -> datetime:
    """The first day of the month ``shift`` months from ``day``'s."""
    index = day.year * 12 + day.month - 1 + shift
    return day.replace(year=index // 12, month=index % 12 + 1, day=1)


def _relative(kind: str, now: datetime) -> tuple[datetime, datetime] | None:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind in _DAY_SPANS:
        first, after = _DAY_SPANS[kind]
        return today + timedelta(days=first), today + timedelta(days=after)
    if kind in _WEEK_SPANS:
        week_start = today - timedelta(days=today.weekday())
        first, after = _WEEK_SPANS[kind]
        return week_start + timedelta(days=first), week_start + timedelta(days=after)
    if kind in _MONTH_SHIFTS:
        shift = _MONTH_SHIFTS[kind]
        return _month_start(today, shift), _month_start(today, shift + 1)
    return _year(today.year + _YEAR_SHIFTS[kind])


_UNIT_DAYS = {
    "day": 1,
    "天": 1,
    "week": 7,
    "周": 7,
    "个星期": 7,
    "month": 30,
    "个月": 30,
    "year": 365,
    "年": 365,
}


def _weekends_back(nearest: int, farthest: int, now: datetime) -> tuple[datetime, datetime]:
    """From the Saturday of the weekend ``farthest`` back to the end of the one ``nearest``
    back: the first back is last weekend ("two weekends ago" is the weekend before last)."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday())
    return monday - timedelta(days=7 * (farthest - 1) + 2), monday - timedelta(days=7 * (nearest - 1))


_WEEKEND_UNITS = frozenset({"weekend", "个周末"})


def _ago(amount: int, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """A window around "N units ago", as wide as the unit, so vague answers still match; N
    weekends ago is that weekend (a weekend is a named time, not a distance)."""
    if unit in _WEEKEND_UNITS:
        return _weekends_back(amount, amount, now)
    days = _UNIT_DAYS[unit]
    centre = now - timedelta(days=days * amount)
    half = timedelta(days=max(1, days // 2))
    return centre - half, centre + half


def _ago_between(units: tuple[int, int], unit: str, now: datetime) -> tuple[datetime, datetime]:
    """A window from ``units[1]`` to ``units[0]`` units back ("a few weeks ago": 1-6 weeks),
    half a unit wider on each side as :func:`_ago` is."""
    if unit in _WEEKEND_UNITS:
        return _weekends_back(*units, now)
    days = _UNIT_DAYS[unit]
    half = timedelta(days=max(1, days // 2))
    return now - timedelta(days=days * units[1]) - half, now - timedelta(days=days * units[0]) + half


EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
"""The open ends of a bounded time ("before May 2023": EARLIEST up to 1 May 2023)."""

# Words that make a time a bound, by what they keep: "before" the time's start, "until" its
# end, "since" from its start, "after" from its end. English before the time, Chinese before
# ("截至") or after it ("之前"); bare 前 / 后 are left out: "9月前往" is "went in September".
_BOUND_BEFORE = re.compile(
    r"(?:\b(?P<before>before|prior to|earlier than)|\b(?P<until>until|till|up to|up until|as of|by|through)"
    r"|\b(?P<since>since)|\b(?P<after>after|later than)"
    r"|(?P<zh_until>截至|截止到|截止|直到)|(?P<zh_since>自从|自))"
    r"\s*(?:(?:the\s+)?(?:very\s+)?(?:end|start|beginning|middle)\s+of\s+)?$",
    re.I,
)
_BOUND_AFTER = re.compile(
    r"^\s*(?:(?P<before>之前|以前)|(?P<after>之后|以后)|(?P<since>以来|起|开始|onwards?\b)|(?P<until>为止))",
    re.I,
)


# "the week before", "two days after", "the Monday before": a time counted from the one named,
# not a bound (that window stays on the named time).
_COUNTED_FROM = re.compile(
    r"\b(?:days?|nights?|mornings?|afternoons?|evenings?|weeks?|weekends?|fortnight|months?|years?"
    r"|mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?)\s*$",
    re.I,
)


def _bounded(
    window: tuple[datetime, datetime], text: str, span: tuple[int, int]
) -> tuple[datetime, datetime]:
    """``window`` opened on one side when a word bounds the time at ``span`` of ``text``
    (:data:`_BOUND_BEFORE`, :data:`_BOUND_AFTER`); as it is otherwise."""
    m = _BOUND_BEFORE.search(text, max(0, span[0] - 40), span[0])
    if m is not None and _COUNTED_FROM.search(text, max(0, m.start() - 20), m.start()):
        return window
    m = m or _BOUND_AFTER.search(text[span[1] : span[1] + 6])
    if m is None:
        return window
    kind = (m.lastgroup or "").removeprefix("zh_")
    start, end = window
    if kind == "before":
        return EARLIEST, start
    if kind == "until":
        return EARLIEST, end
    if kind == "since":
        return start, LATEST
    return end, LATEST  # after


# What joins two times into one span: "between March and May 2023", "from 8 May to 20 May",
# "March to May", "2023年3月到5月", "3月至5月". "and" alone joins nothing ("in March and May"
# are two months): it needs "between" before the first time.
_JOIN = re.compile(r"\s*(?:(?P<and>and)|to|until|till|through|thru|[-–—~～到至])\s*$", re.I)
_BETWEEN = re.compile(r"\bbetween\s+(?:the\s+)?$", re.I)


@dataclass
class _Found:
    """Windows and months found so far in ``text`` (:attr:`times`), and the spans of it they
    came from: a span is read once, by the most specific expression."""

    text: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    # Each range or month with its span, in the order found: joined and bounded at the end.
    times: list[tuple[tuple[int, int], tuple[datetime, datetime] | int]] = field(default_factory=list)
    # Spans of holidays named without a year, read as their recent occurrences.
    recurring: list[tuple[int, int]] = field(default_factory=list)

    def free(self, span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in self.spans)

    def add(self, window: tuple[datetime, datetime] | None, span: tuple[int, int]) -> bool:
        if window is not None and self.free(span):
            self.times.append((span, window))
            self.spans.append(span)
            return True
        return False

    def add_all(self, windows: list[tuple[datetime, datetime]], span: tuple[int, int]) -> None:
        """Several windows read from one span (a holiday over several years)."""
        if windows and self.free(span):
            self.times.extend((span, w) for w in windows)
            self.spans.append(span)

    def add_month(self, month: int, span: tuple[int, int]) -> None:
        if self.free(span):
            self.times.append((span, month))
            self.spans.append(span)

    def add_months(self, months: tuple[int, ...], span: tuple[int, int]) -> None:
        """Several months of any year read from one span (a season)."""
        if months and self.free(span):
            self.times.extend((span, month) for month in months)
            self.spans.append(span)

    def settle(self) -> tuple[list[tuple[datetime, datetime]], list[int]]:
        """The ranges and months found. Two times joined ("between March and May 2023") are
        one range from the first's start to the second's end, a month without a year taking
        the other's year; two months without a year, every month from one to the other. A
        time left alone is bounded by a word before or after it (:func:`_bounded`)."""
        ranges: list[tuple[datetime, datetime]] = []
        months: list[int] = []
        times = sorted(self.times, key=lambda t: t[0])
        i = 0
        while i < len(times):
            (a_span, a), joined = times[i], None
            if i + 1 < len(times):
                b_span, b = times[i + 1]
                gap = _JOIN.fullmatch(self.text, a_span[1], b_span[0])
                if gap is not None and (
                    gap["and"] is None or _BETWEEN.search(self.text, max(0, a_span[0] - 20), a_span[0])
                ):
                    joined = _joined(a, b)
            i += 1 if joined is None else 2
            time = (
                joined
                if joined is not None
                else _bounded(a, self.text, a_span)
                if isinstance(a, tuple)
                else [a]
            )
            if isinstance(time, tuple):
                ranges.append(time)
            else:
                months.extend(time)
        return _months_of_the_year(ranges, months)


def _months_of_the_year(
    ranges: list[tuple[datetime, datetime]], months: list[int]
) -> tuple[list[tuple[datetime, datetime]], list[int]]:
    """A year named apart from its months is theirs: "in January this year", "en enero de
    este año", "올해 1월" is that January, not the whole year or every January."""
    if not months or len(ranges) != 1:
        return ranges, months
    if not _one_calendar_year(ranges[0]):
        return ranges, months
    year = ranges[0][0].year
    return [w for w in (_month(year, m) for m in months) if w is not None], []


def _one_calendar_year(window: tuple[datetime, datetime]) -> bool:
    """Whether ``window`` is 1 January of a year up to 1 January of the next: a year named
    apart ("this year", "去年", "2024년"), which a month or holiday named beside it narrows."""
    start, end = window
    return (start.month, start.day, end.month, end.day, end.year - start.year) == (1, 1, 1, 1, 1)


def _joined(
    a: tuple[datetime, datetime] | int, b: tuple[datetime, datetime] | int
) -> tuple[datetime, datetime] | list[int] | None:
    """The span from ``a`` to ``b`` (:meth:`_Found.settle`); None when ``b`` ends before ``a``
    starts, or a month without a year falls outside the calendar."""
    if isinstance(a, int) and isinstance(b, int):
        return [(a - 1 + k) % 12 + 1 for k in range((b - a) % 12 + 1)]
    first: tuple[datetime, datetime] | None
    last: tuple[datetime, datetime] | None
    if isinstance(a, int):
        assert isinstance(b, tuple)
        first, last = _month(b[0].year - (a > b[0].month), a), b  # "between November and February 2023": 2022
    elif isinstance(b, int):
        first, last = a, _month(a[0].year + (b < a[0].month), b)  # "2023年11月到2月": February 2024
    else:
        first, last = a, b
    if first is None or last is None or last[1] <= first[0]:
        return None
    return first[0], last[1]


def _in_range(
    window: Callable[[_A, datetime], tuple[datetime, datetime] | None], arg: _A, now: datetime
) -> tuple[datetime, datetime] | None:
    """``window(arg, now)``, or None when it falls outside the calendar ("4500 years ago",
    said of the pyramids, is before year 1), as :func:`_day` and its kin do."""
    try:
        return window(arg, now)
    except (OverflowError, ValueError):
        return None


def time_windows(query: str, now: datetime, recent: int = RECENT) -> TimeWindows:
    """Every time expression of ``query`` as windows; empty when there is none. A holiday
    named without a year stands for its ``recent`` latest occurrences (:mod:`jiyi.text.holidays`;
    0, as for a memory's own text: holidays are not read, nor seasons of no known year)."""
    found = _Found(query)
    # Most specific first, so "8 May 2023" is not also read as "May 2023".
    _days(query, now, found)
    _months_of_years(query, now, found)
    _holidays(query, now, recent, found)
    _seasons(query, now, recent, found)
    _year_parts(query, now, found)
    ahead = _REQUEST.search(query) is not None
    for m in scan(_WEEKDAY, query):
        # In a request, a day of this week names when the user will act (as "tonight").
        if not (
            ahead and ((m["en"] or "").lower() == "this" or (m["zh"] in (None, "这", "本") and not m["en"]))
        ):
            found.add(_in_range(_weekday, m, now), m.span())
    for pattern, kind in _RELATIVE:
        if ahead and kind in _CURRENT:
            continue
        for m in scan(pattern, query):
            found.add(_in_range(_relative, kind, now), m.span())
    counted: list[tuple[int, int]] = []
    for m in scan(_AGO, query):
        if found.add(_in_range(_ago_window, m, now), m.span()):
            counted.append(m.span())
    for m in scan(_WITHIN, query):
        if found.add(_in_range(_within_window, m, now), m.span()):
            counted.append(m.span())
    _other_languages(query, now, ahead, found, counted)
    _years_and_months(query, found)
    _holidays_of_the_year(query, now, found)
    ranges, months = found.settle()
    return TimeWindows(tuple(ranges), tuple(dict.fromkeys(months)), tuple(found.spans), tuple(counted))


def _other_languages(
    query: str, now: datetime, ahead: bool, found: _Found, counted: list[tuple[int, int]]
) -> None:
    """The same times in Spanish, French, German, Portuguese, Italian, Russian, Japanese and
    Korean (:mod:`jiyi.text.time_words`): days, weeks, months and years relative to now, a
    distance back, a month with or without its year."""
    low = query.lower()
    if len(low) != len(query) or (
        low.isascii() and time_words.ASCII_CUES.isdisjoint(_ASCII_WORD.findall(low))
    ):
        return  # (spans would not line up; or, in ASCII, nothing these patterns read)
    for pattern, which in time_words.WEEKDAY:
        if ahead and which in ("this", 0):
            continue  # in a request, a day of this week names when the user will act
        for m in scan(pattern, low):
            day = (which, time_words.weekday_number(m))
            found.add(_in_range(lambda wd, at: _day_of_week(*wd, at), day, now), m.span())
    for pattern, kind in time_words.RELATIVE:
        if ahead and kind in _CURRENT:
            continue
        for m in scan(pattern, low):
            found.add(_in_range(_relative, kind, now), m.span())
    for m in scan(time_words.AGO, low):
        if found.add(_in_range(_ago_amount, time_words.ago_amount(m), now), m.span()):
            counted.append(m.span())
    _other_months_and_years(query, low, found)


def _other_months_and_years(query: str, low: str, found: _Found) -> None:
    """Months, with their year or without, then years alone, in the languages of
    :func:`_other_languages` (``low``: ``query`` lowercased)."""
    for pattern in (time_words.MONTH, time_words.MONTH_YEAR):
        for m in scan(pattern, low):
            if time_words.written_as_month(query[m.start("month") : m.end("month")]):
                _add_month(found, m, time_words.month_number(m["month"]), m.span("month"))
    for m in scan(time_words.KO_MONTH, low):
        if 1 <= int(m["month"]) <= 12:
            _add_month(found, m, int(m["month"]), m.span())
    for pattern in time_words.YEAR:
        for m in scan(pattern, low):
            found.add(_year(int(m["year"])), m.span())


def _add_month(found: _Found, m: re.Match[str], month: int, alone: tuple[int, int]) -> None:
    """A month named with its year (the match's ``year`` group) as that month's window; one
    without, as a month of any year, read from the span ``alone``."""
    if m["year"]:
        found.add(_month(int(m["year"]), month), m.span())
    else:
        found.add_month(month, alone)


_ASCII_WORD = re.compile(r"[a-z]+")


def _holidays(query: str, now: datetime, recent: int, found: _Found) -> None:
    """Named holidays: "at Christmas", "last Thanksgiving", "2023年国庆" (:func:`holiday_windows`)."""
    if recent < 1:
        return
    spans: dict[tuple[int, int], list[tuple[datetime, datetime]]] = {}
    try:
        for window, span in holiday_windows(query, now, recent):
            spans.setdefault(span, []).append(window)
    except (OverflowError, ValueError):  # a year outside the calendar: no window, as _day
        return
    for span, windows in spans.items():
        if found.free(span) and len(windows) > 1:
            found.recurring.append(span)
        found.add_all(windows, span)


def _seasons(query: str, now: datetime, recent: int, found: _Found) -> None:
    """Seasons and quarters: "last summer", "in the winter of 2022", "去年夏天", "el verano
    pasado" (:func:`season_times`), "last quarter", "Q3 2024", "上个季度" (:func:`quarter_times`);
    in a memory's own text (``recent`` 0) only a season of a known year."""
    if len(query.lower()) != len(query):
        return  # the spans of the lowercased text would not line up
    try:
        for period in (*season_times(query, now, definite_only=recent < 1), *quarter_times(query, now)):
            if period.ranges:
                found.add_all(list(period.ranges), period.span)
            else:
                found.add_months(period.months, period.span)
    except (OverflowError, ValueError):  # a year outside the calendar: no window, as _day
        return


def _holidays_of_the_year(query: str, now: datetime, found: _Found) -> None:
    """A year named apart from a holiday is the holiday's: "Christmas last year", "на
    Масленицу в прошлом году", "el año pasado en Semana Santa" is that year's, not the whole
    year or the holiday's recent occurrences (as :func:`_months_of_the_year` does for months)."""
    if not found.recurring:
        return
    years = [(span, w) for span, w in found.times if isinstance(w, tuple) and _one_calendar_year(w)]
    if len(years) != 1:
        return
    year_span, (first, _) = years[0]
    try:
        kept = {
            span: [w for w, _ in holiday_windows(query[span[0] : span[1]], now, year=first.year)]
            for span in found.recurring
        }
    except (OverflowError, ValueError):  # a year outside the calendar: leave both as they are
        return
    found.times = [(span, w) for span, w in found.times if span != year_span and span not in kept] + [
        (span, w) for span, windows in kept.items() for w in windows
    ]


def _years_and_months(query: str, found: _Found) -> None:
    """Years alone ("in 2019", "from 2019 to 2021", "2019年") and months without a year ("in
    June", "March to May", "六月"), read last: the least specific."""
    for m in scan(_EN_YEAR, query):
        found.add(_year(int(m[1])), m.span(1))
    for m in scan(_EN_YEAR_SECOND, query):
        # "and" joins years only after "between": "the 2019 and 2021 models" are two.
        if m[0].lower().startswith(("from", "between")) or "and" not in m[0].lower():
            found.add(_year(int(m[1])), m.span(1))
    for m in scan(_ZH_YEAR, query):
        found.add(_year(int(m[1])), m.span())
    for pattern in (_EN_MONTH, _EN_MONTH_FIRST, _EN_MONTH_SECOND):
        for m in scan(pattern, query):
            found.add_month(_MONTHS[m[1].lower()], m.span(1))
    for m in scan(_ZH_MONTH_ONLY, query):
        value = int(m[1]) if m[1].isdigit() else _ZH_NUM[m[1]]
        if 1 <= value <= 12:
            found.add_month(value, m.span())


def _days(query: str, now: datetime, found: _Found) -> None:
    """Dates with a day: "8 May 2023", "May 8, 2023", "2023-05-08", "2023年5月8日", "5月8日"."""
    for m in scan(_EN_DAY_MONTH_YEAR, query):
        found.add(_day(int(m[3]), _MONTHS[m[2].lower()], int(m[1])), m.span())
    for m in scan(_EN_MONTH_DAY_YEAR, query):
        found.add(_day(int(m[3]), _MONTHS[m[1].lower()], int(m[2])), m.span())
    for m in scan(_ISO_DAY, query):
        found.add(_day(int(m[1]), int(m[2]), int(m[3])), m.span())
    for m in scan(_ZH_DAY, query):
        found.add(_day(int(m[1]), int(m[2]), int(m[3])), m.span())
    for m in scan(_ZH_MONTH_DAY, query):
        found.add(_day(now.year, int(m[1]), int(m[2])), m.span())


def _months_of_years(query: str, now: datetime, found: _Found) -> None:
    """Months of a given year: "去年三月", "May 2023", "2023年5月"."""
    for m in scan(_ZH_REL_YEAR_MONTH, query):
        value = int(m[2]) if m[2].isdigit() else _ZH_NUM[m[2]]
        found.add(_month(now.year + _ZH_REL_YEARS[m[1]], value), m.span())
    for m in scan(_EN_MONTH_YEAR, query):
        found.add(_month(int(m[2]), _MONTHS[m[1].lower()]), m.span())
    for m in scan(_ZH_MONTH_YEAR, query):
        found.add(_month(int(m[1]), int(m[2])), m.span())


def _count(word: str) -> int:
    """A count in digits or words: "3", "three", "三", "两"."""
    if word.isdigit():
        return int(word)
    return _WORD_NUM.get(word.lower()) or (2 if word == "两" else _ZH_NUM[word])


def _vague(word: str) -> tuple[int, int]:
    """The range of units a vague count means: "a couple of" / "两(三)" :data:`_COUPLE`, else
    ("a few", "several", "几") :data:`_FEW`."""
    return _COUPLE if "couple" in word.lower() or word in ("两", "两三") else _FEW


def _ago_amount(amount: tuple[int | str, str], now: datetime) -> tuple[datetime, datetime]:
    """The window of a distance back in another language (:func:`time_words.ago_amount`): a
    count, or "few" / "couple" (:func:`_ago_between`)."""
    count, unit = amount
    if isinstance(count, str):
        return _ago_between(_COUPLE if count == "couple" else _FEW, unit, now)
    return _ago(count, unit, now)


def _ago_window(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The window of an "N units ago" match, English ("3 weeks ago", "a few weeks ago") or
    Chinese ("三周前", "几个月前", "前几天")."""
    unit = (m["en_unit"] or m["zh_unit"] or m["zh_vague_unit"] or "天").lower()
    if count := m["en_n"] or m["zh_n"]:
        return _ago(_count(count), unit, now)
    return _ago_between(_vague(m["en_vague"] or m["zh_vague"] or m["zh_days"]), unit, now)


def _within_window(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The window of a "the past N units" match: from N units back to the end of today."""
    end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    if m["en_one"]:
        back, unit = 1, m["en_one"]
    else:
        unit = m["en_unit"] or m["zh_unit"]
        count = m["en_n"] or m["zh_n"]
        back = _count(count) if count else _vague(m["en_vague"] or m["zh_vague"])[1]
    return now - timedelta(days=_UNIT_DAYS[unit.lower()] * back), end


def without_spans(query: str, spans: tuple[tuple[int, int], ...]) -> str:
    """``query`` with the time expressions blanked, so their words are not keywords too."""
    chars = list(query)
    for start, end in spans:
        for i in range(start, min(end, len(chars))):
            chars[i] = " "
    return "".join(chars)
