"""When a time-bound statement stops being true: "until Friday", "下周前", "by the end of
the month". Extraction sets a memory's ``expires_at`` from it, so the lifecycle pass
retires the fact on its own date instead of letting it linger or fade at random.

Only bounded phrases count ("until", "till", "by", "before", "through"; "之前", "以前",
"前", "为止", "截止"): "on Friday" says when, not until when. The answer is the end of the
named period (the end of Friday, of next week, of the month), in UTC, relative to when
the statement was made. Pure and offline.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["expiry_of"]

_WEEKDAYS_EN = {
    name: i
    for i, names in enumerate(
        (
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        )
    )
    for name in names
}
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTHS_EN = {
    m: i + 1
    for i, ms in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        )
    )
    for m in ms
}
_ZH_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}

_EN_BOUND = re.compile(
    r"\b(?:until|till|til|through|thru|by|before|up to)\s+(?:the\s+)?(?P<x>[\w ,.'-]{2,40})", re.I
)
_ZH_BOUND = re.compile(r"(?:到|直到|截止到?)?(?P<x>[\w\u4e00-\u9fff]{1,12}?)(?:之前|以前|前|为止|截止)")


def _day_end(day: datetime) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)


def _month_end(year: int, month: int) -> datetime:
    return datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


def _next_weekday(now: datetime, weekday: int) -> datetime:
    ahead = (weekday - now.weekday()) % 7
    return _day_end(now + timedelta(days=ahead))


def _week_end(now: datetime, weeks_ahead: int) -> datetime:
    monday = now - timedelta(days=now.weekday()) + timedelta(weeks=weeks_ahead)
    return _day_end(monday + timedelta(days=6))


def _en_period(text: str, now: datetime) -> datetime | None:
    t = text.lower().strip(" ,.")
    if t.startswith(("today", "tonight", "end of today", "end of the day", "eod")):
        return _day_end(now)
    if t.startswith("tomorrow"):
        return _day_end(now + timedelta(days=1))
    if re.match(r"(?:the\s+)?end of (?:the|this) week|this weekend|the weekend|weekend", t):
        return _week_end(now, 0)
    if t.startswith("next week") or re.match(r"end of next week", t):
        return _week_end(now, 1)
    if re.match(r"(?:the\s+)?end of (?:the|this) month|month end", t):
        return _month_end(now.year, now.month)
    if t.startswith(("next month", "end of next month")):
        return _month_end(now.year + now.month // 12, now.month % 12 + 1)
    if re.match(r"(?:the\s+)?end of (?:the|this) year|year end", t):
        return datetime(now.year + 1, 1, 1, tzinfo=UTC)
    word = re.match(r"(?:next\s+|this\s+)?([a-z]+)", t)
    if word and word.group(1) in _WEEKDAYS_EN:
        return _next_weekday(now, _WEEKDAYS_EN[word.group(1)])
    date = re.match(
        r"([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b|(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+)", t
    )
    if date:
        month_name = date.group(1) or date.group(4)
        day = int(date.group(2) or date.group(3))
        if month_name in _MONTHS_EN:
            return _dated(now, _MONTHS_EN[month_name], day)
    iso = re.match(r"(\d{4})-(\d{2})-(\d{2})", t)
    if iso:
        try:
            return _day_end(datetime(int(iso[1]), int(iso[2]), int(iso[3]), tzinfo=UTC))
        except ValueError:
            return None
    return None


def _dated(now: datetime, month: int, day: int) -> datetime | None:
    """The next such day on or after ``now`` (a date without a year)."""
    for year in (now.year, now.year + 1):
        try:
            end = _day_end(datetime(year, month, day, tzinfo=UTC))
        except ValueError:
            return None
        if end > now:
            return end
    return None


def _zh_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text in _ZH_DIGITS:
        return _ZH_DIGITS[text]
    if len(text) == 2 and text[0] == "十" and text[1] in _ZH_DIGITS:
        return 10 + _ZH_DIGITS[text[1]]
    if len(text) == 2 and text[1] == "十" and text[0] in _ZH_DIGITS:
        return _ZH_DIGITS[text[0]] * 10
    if len(text) == 3 and text[1] == "十":
        return _ZH_DIGITS.get(text[0], 0) * 10 + _ZH_DIGITS.get(text[2], 0)
    return None


def _zh_period(text: str, now: datetime) -> datetime | None:
    t = text
    if t.endswith(("今天", "今晚", "今日")):
        return _day_end(now)
    if t.endswith(("明天", "明日")):
        return _day_end(now + timedelta(days=1))
    if t.endswith("后天"):
        return _day_end(now + timedelta(days=2))
    if t.endswith(("本周末", "这周末", "周末", "本周", "这周", "这个星期", "本星期")):
        return _week_end(now, 0)
    if t.endswith(("下周", "下星期", "下个星期", "下周末")):
        return _week_end(now, 1)
    if t.endswith(("月底", "本月", "这个月", "月末")):
        return _month_end(now.year, now.month)
    if t.endswith(("下个月", "下月")):
        return _month_end(now.year + now.month // 12, now.month % 12 + 1)
    if t.endswith(("年底", "今年", "年末")):
        return datetime(now.year + 1, 1, 1, tzinfo=UTC)
    week = re.search(r"(下)?(?:周|星期|礼拜)([一二三四五六日天])$", t)
    if week:
        end = _next_weekday(now, _WEEKDAYS_ZH[week.group(2)])
        return end + timedelta(weeks=1) if week.group(1) and end - now <= timedelta(days=7) else end
    date = re.search(
        r"(\d{1,2}|[一二三四五六七八九十]{1,3})月(\d{1,2}|[一二三四五六七八九十]{1,3})[日号]$", t
    )
    if date:
        month, day = _zh_number(date.group(1)), _zh_number(date.group(2))
        if month and day:
            return _dated(now, month, day)
    return None


def expiry_of(text: str, said_at: datetime) -> datetime | None:
    """When the statement ``text`` (made at ``said_at``) stops being true, or None when it
    names no bound ("until Friday" -> the end of that Friday)."""
    now = said_at if said_at.tzinfo else said_at.replace(tzinfo=UTC)
    for m in _EN_BOUND.finditer(text):
        end = _en_period(m.group("x"), now)
        if end is not None:
            return end
    for m in _ZH_BOUND.finditer(text):
        end = _zh_period(m.group("x"), now)
        if end is not None:
            return end
    return None
