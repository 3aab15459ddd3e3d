"""Named holidays as windows in time: "at Christmas", "last Thanksgiving", "Easter 2023",
"2023年国庆", "五一"; and in the other languages the default embedder reads, "en Navidad",
"à la Toussaint", "Ostern 2024", "去年のお盆", "어린이날".

A holiday is a few days of a year (Christmas: 24-26 December; Thanksgiving: the US fourth
Thursday of November to the Sunday after), ±1 day where people talk about it the day after.
Without a year the holiday is one of several years: a query asks about its most recent
occurrences (:data:`RECENT`; "last Christmas" only the one before now, "this Christmas" this
year's, "next Christmas" the one after now; "去年国庆", "작년 어린이날" last year's). A memory's own text is not read for holidays
(:func:`jiyi.text.timeparse.told_windows`): one said on the day is found by when it was said.
Lunar holidays (除夕, 春节, 中秋, 端午, 추석, 설날, "Chinese New Year") are days of the Chinese
lunisolar calendar, read through ``borax`` (1900-2100; Korea's calendar, a day apart in a rare
year, is taken as China's); the Orthodox Easter and the days counted from it (Масленица,
Троица) through the Julian calendar.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta

from jiyi.text.prefilter import scan

RECENT = 3
"""Years a holiday named without one stands for in a query: its last three occurrences."""

AHEAD = timedelta(days=60)
"""How far ahead an occurrence still counts as recent: a plan ("we're hosting Christmas")
is told weeks before the day."""


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The ``n``-th ``weekday`` (Monday 0) of a month."""
    first = date(year, month, 1)
    return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))


def _easter(year: int) -> date:
    """Easter Sunday of the Gregorian calendar (the anonymous algorithm of 1876, as Meeus gives it)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    el = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * el) // 451
    month, day = divmod(h + el - 7 * m + 114, 31)
    return date(year, month, day + 1)


def _orthodox_easter(year: int) -> date:
    """Easter Sunday of the Orthodox churches: the Julian calendar's (Meeus), moved onto the
    Gregorian one by the two calendars' difference that year."""
    a, b, c = year % 4, year % 7, year % 19
    d = (19 * c + 15) % 30
    e = (2 * a + 4 * b - d + 34) % 7
    month, day = divmod(d + e + 114, 31)
    return date(year, month, day + 1) + timedelta(days=year // 100 - year // 400 - 2)


@functools.lru_cache(maxsize=1024)
def _lunar_day(year: int, month: int, day: int) -> date:
    """The Gregorian date of a day of the Chinese lunisolar calendar, in the lunar year that
    begins in Gregorian ``year`` (ValueError outside 1900-2100)."""
    # Imported when a query first names a lunar holiday (~40 ms), not with every search.
    from borax.calendars.lunardate import LunarDate

    solar: date = LunarDate(year, month, day).to_solar_date()
    return solar


def _lunar(month: int, day: int, shift: int = 0) -> Callable[[int], date]:
    """A lunar day as a function of the Gregorian year it falls in (``shift`` days moved:
    除夕 is the day before the first of the first month)."""
    return lambda year: _lunar_day(year, month, day) + timedelta(days=shift)


@functools.lru_cache(maxsize=256)
def _qingming(year: int) -> date:
    """清明: the day of the solar term, 4 or 5 April."""
    from borax.calendars.lunardate import TermUtils

    found: date = TermUtils.nth_term_day(year, term_name="清明")
    return found


def _days(
    first: Callable[[int], date], before: int = 1, after: int = 1
) -> Callable[[int], tuple[date, date]]:
    """A holiday's window in a year: ``before`` days before its first day to ``after`` days
    after it (the end is the day after the window)."""
    return lambda year: (first(year) - timedelta(days=before), first(year) + timedelta(days=after + 1))


def _fixed(month: int, day: int, before: int = 1, after: int = 1) -> Callable[[int], tuple[date, date]]:
    return _days(lambda year: date(year, month, day), before, after)


# Longer names first: a span is read once, so "Christmas Eve" is not also "Christmas".
_HOLIDAYS: list[tuple[re.Pattern[str], Callable[[int], tuple[date, date]]]] = [
    # The lunar ones first: "Chinese New Year's Eve" is not New Year's Eve, "正月初一" not 正月.
    (
        re.compile(r"\b(?:chinese|lunar)\s+new\s+year'?s\s+eve\b|除夕|大年三十|年三十", re.I),
        _days(_lunar(1, 1, -1), 0, 1),
    ),
    # The Spring Festival holiday runs from the eve to the sixth day; Korea's is three days.
    (
        re.compile(
            r"\b(?:chinese|lunar)\s+new\s+year\b|\bspring\s+festival\b|春节|过年|大年初一|正月初一|农历新年|旧正月",
            re.I,
        ),
        _days(_lunar(1, 1), 1, 6),
    ),
    (re.compile(r"\bseollal\b|\btết\b|설날|설\s*연휴|설\s*명절|구정", re.I), _days(_lunar(1, 1), 1, 2)),
    (re.compile(r"\blantern\s+festival\b|元宵节|正月十五", re.I), _days(_lunar(1, 15), 0, 1)),
    (
        re.compile(r"\bqingming(?:\s+festival)?\b|\btomb[-\s]sweeping(?:\s+day)?\b|清明(?:节|假期)?", re.I),
        _days(_qingming, 1, 2),
    ),
    (
        re.compile(r"\bdragon\s+boat\s+festival\b|\bduanwu\b|端午(?:节|假期)?|단오", re.I),
        _days(_lunar(5, 5), 1, 2),
    ),
    (
        re.compile(
            r"\bmid[-\s]?autumn(?:\s+festival)?\b|\bmoon\s+festival\b|\bchuseok\b"
            r"|中秋(?:节|假期)?|中秋の名月|十五夜|お月見|추석|한가위",
            re.I,
        ),
        _days(_lunar(8, 15), 1, 1),
    ),
    (
        re.compile(r"\bdouble\s+ninth(?:\s+festival)?\b|\bchung\s+yeung\b|重阳节?", re.I),
        _days(_lunar(9, 9), 0, 1),
    ),
    (
        re.compile(r"\bbuddha'?s\s+birthday\b|부처님\s*오신\s*날|석가\s*탄신일|초파일|佛诞", re.I),
        _days(_lunar(4, 8), 0, 1),
    ),
    # Russian: the Orthodox Easter and the days counted from it.
    (
        re.compile(r"\bвербн\w*\s+воскресень\w*", re.I),
        _days(lambda y: _orthodox_easter(y) - timedelta(days=7), 0, 1),
    ),
    (re.compile(r"\bпасх\w*", re.I), _days(_orthodox_easter, 2, 1)),
    (
        re.compile(r"\bмаслен(?:н)?иц\w*|\bмасленичн\w*", re.I),  # the week before Lent
        _days(lambda y: _orthodox_easter(y) - timedelta(days=49), 6, 1),
    ),
    (
        re.compile(r"\bтроиц[аеуы]\b", re.I),
        _days(lambda y: _orthodox_easter(y) + timedelta(days=49), 1, 1),
    ),
    (re.compile(r"\bchristmas\s+eve\b|平安夜", re.I), _fixed(12, 24)),
    (re.compile(r"\bnew\s+year'?s\s+eve\b|跨年夜", re.I), _fixed(12, 31)),  # 除夕 is lunar
    (re.compile(r"\b(?:christmas|xmas)\b|圣诞节?", re.I), _fixed(12, 24, 0, 2)),
    (re.compile(r"\bnew\s+year'?s(?:\s+day)?\b|元旦", re.I), _fixed(1, 1)),
    (re.compile(r"\bhalloween\b|万圣节", re.I), _fixed(10, 31)),
    (re.compile(r"\bvalentine'?s(?:\s+day)?\b|情人节", re.I), _fixed(2, 14)),
    (
        re.compile(r"\b(?:independence\s+day|fourth\s+of\s+july|4th\s+of\s+july|july\s+4th)\b", re.I),
        _fixed(7, 4),
    ),
    (re.compile(r"\bthanksgiving\b|感恩节", re.I), _days(lambda y: _nth_weekday(y, 11, 3, 4), 1, 3)),
    (re.compile(r"\beaster\b|复活节", re.I), _days(_easter, 2, 1)),
    (re.compile(r"\bmother'?s\s+day\b|母亲节", re.I), _days(lambda y: _nth_weekday(y, 5, 6, 2), 0, 0)),
    (re.compile(r"\bfather'?s\s+day\b|父亲节", re.I), _days(lambda y: _nth_weekday(y, 6, 6, 3), 0, 0)),
    (re.compile(r"\blabou?r\s+day\b", re.I), _days(lambda y: _nth_weekday(y, 9, 0, 1), 2, 0)),
    (re.compile(r"国庆(?:节|假期|长假)?|十一长假|十一假期", re.I), _fixed(10, 1, 0, 6)),
    (re.compile(r"劳动节|五一(?:假期|长假)?", re.I), _fixed(5, 1, 0, 4)),
    # The same and each country's own in Spanish, French, German, Portuguese, Italian,
    # Russian, Japanese and Korean (the lunar and Orthodox ones above).
    (
        re.compile(
            r"\b(?:nochebuena|réveillon\s+de\s+noël|heilig(?:abend|en\s+abend)|véspera\s+de\s+natal"
            r"|vigilia\s+di\s+natale)\b|クリスマスイブ|크리스마스\s*이브",
            re.I,
        ),
        _fixed(12, 24),
    ),
    (
        re.compile(
            r"\b(?:nochevieja|saint-sylvestre|silvester|réveillon|san\s+silvestro)\b|大晦日|섣달\s*그믐", re.I
        ),
        _fixed(12, 31),
    ),
    (
        re.compile(r"\b(?:navidad(?:es)?|noël|weihnachten|natal|natale)\b|クリスマス|크리스마스", re.I),
        _fixed(12, 24, 0, 2),
    ),
    (re.compile(r"\bрождеств[оае]\b", re.I), _fixed(1, 7)),  # the Orthodox Christmas
    (re.compile(r"年末年始|お正月|正月", re.I), _fixed(12, 29, 0, 5)),
    (
        re.compile(
            r"\b(?:año\s+nuevo|nouvel\s+an|neujahr|ano\s+novo|capodanno|новый\s+год|новогодн\w*)\b|元日|신정|새해\s*첫날",
            re.I,
        ),
        _fixed(1, 1),
    ),
    (re.compile(r"\bsemana\s+santa\b", re.I), _days(_easter, 7, 1)),
    (re.compile(r"\b(?:pascua|pâques|ostern|páscoa|pasqua)\b", re.I), _days(_easter, 2, 1)),
    (
        re.compile(r"\b(?:pentecostés|pentecôte|pfingsten|pentecostes|pentecoste)\b", re.I),
        _days(lambda y: _easter(y) + timedelta(days=49), 2, 1),
    ),
    (
        re.compile(r"\b(?:carnaval|karneval|fasching|carnevale)\b", re.I),
        _days(lambda y: _easter(y) - timedelta(days=47), 5, 1),
    ),
    (re.compile(r"ハロウィン|할로윈|핼러윈", re.I), _fixed(10, 31)),
    (
        re.compile(
            r"\b(?:san\s+valentín|saint-valentin|valentinstag|san\s+valentino|день\s+святого\s+валентина)\b|バレンタイン|발렌타인|밸런타인",
            re.I,
        ),
        _fixed(2, 14),
    ),
    (re.compile(r"\b(?:le\s+)?14\s+juillet\b|\bfête\s+nationale\b", re.I), _fixed(7, 14)),
    (re.compile(r"\btoussaint\b", re.I), _fixed(11, 1)),
    (re.compile(r"\bferragosto\b", re.I), _fixed(8, 15)),
    (re.compile(r"\bмайски[ехй]\b(?:\s+праздник\w*)?", re.I), _fixed(5, 1, 0, 9)),
    (re.compile(r"ゴールデンウィーク|\bGW\b", re.I), _fixed(4, 29, 0, 6)),
    (re.compile(r"お盆", re.I), _fixed(8, 13, 0, 3)),
    (re.compile(r"어린이날", re.I), _fixed(5, 5)),
]
_BEFORE = re.compile(
    r"\b(?P<which>last|this|next)\s+$|(?P<year>(?:19|20)\d\d)\s*[年년]\s*の?\s*$"
    r"|(?P<zh>去年|今年|明年|昨年|来年|작년|올해|내년)\s*の?\s*$",
    re.I,
)
# A year after the name ("Christmas of 2021", "Navidad de 2022"), matched at the name's end.
_AFTER = re.compile(r"\s*(?:(?:of|in|de|del|di|von)\s+)?(?P<year>(?:19|20)\d\d)\b")
_ZH_YEARS = {
    **dict.fromkeys(("去年", "昨年", "작년"), -1),
    "今年": 0,
    "올해": 0,
    **dict.fromkeys(("明年", "来年", "내년"), 1),
}
"""Years named relative to this one: "去年国庆" is last year's, whenever in this year it is asked."""


def holiday_windows(
    text: str, now: datetime, recent: int = RECENT, year: int | None = None
) -> Iterator[tuple[tuple[datetime, datetime], tuple[int, int]]]:
    """Each holiday ``text`` names, as windows with the span of ``text`` that named it (a year
    or "last" / "this" / "next" beside it included). ``year``: the year the text names apart
    from the holiday ("на Масленицу в прошлом году"), for one named without its own."""
    low = text.lower()
    if not any(w in low for w in WORDS):
        return
    for pattern, window in _HOLIDAYS:
        for m in scan(pattern, text):
            start, end = m.span()
            before = _BEFORE.search(text, max(0, start - 12), start)
            after = _AFTER.match(text, end)
            if after is not None:
                yield _utc(window(int(after["year"]))), (start, after.end())
                continue
            if before is not None and (before["year"] or before["zh"]):
                year = int(before["year"]) if before["year"] else now.year + _ZH_YEARS[before["zh"]]
                yield _utc(window(year)), (before.start(), end)
                continue
            which = None if before is None else before["which"].lower()
            span = (start, end) if before is None else (before.start(), end)
            if year is not None:
                yield _utc(window(year)), span
                continue
            for found in _occurrences(window, now, which, recent):
                yield found, span


def _occurrences(
    window: Callable[[int], tuple[date, date]], now: datetime, which: str | None, recent: int
) -> Iterator[tuple[datetime, datetime]]:
    """The windows a holiday named without a year stands for, counted from ``now``."""
    if which == "this":
        yield _utc(window(now.year))
        return
    years = [_utc(window(y)) for y in range(now.year - recent - 1, now.year + 2)]
    if which == "next":
        yield next(w for w in years if w[0] > now)
        return
    past = [w for w in years if w[0] <= now + (timedelta(0) if which == "last" else AHEAD)]
    yield from past[-(1 if which == "last" else recent) :]


def _utc(days: tuple[date, date]) -> tuple[datetime, datetime]:
    first, after = days
    return (
        datetime(first.year, first.month, first.day, tzinfo=UTC),
        datetime(after.year, after.month, after.day, tzinfo=UTC),
    )


WORDS = (
    "christmas",
    "xmas",
    "new year",
    "halloween",
    "valentine",
    "independence day",
    "fourth of july",
    "4th of july",
    "thanksgiving",
    "easter",
    "mother",
    "father",
    "labor day",
    "labour day",
    "平安夜",
    "跨年",
    "圣诞",
    "元旦",
    "万圣节",
    "情人节",
    "感恩节",
    "复活节",
    "母亲节",
    "父亲节",
    "国庆",
    "十一长假",
    "十一假期",
    "劳动节",
    "五一",
    "nochebuena",
    "réveillon",
    "heilig",
    "natal",
    "nochevieja",
    "sylvest",
    "silvest",
    "navidad",
    "noël",
    "weihnachten",
    "рождеств",
    "正月",
    "年末年始",
    "año nuevo",
    "nouvel an",
    "neujahr",
    "ano novo",
    "capodanno",
    "новый год",
    "новогодн",
    "元日",
    "신정",
    "새해",
    "semana santa",
    "pascua",
    "pâques",
    "ostern",
    "páscoa",
    "pasqua",
    "pente",
    "pfingsten",
    "carnaval",
    "karneval",
    "fasching",
    "carnevale",
    "ハロウィン",
    "할로윈",
    "핼러윈",
    "valent",
    "juillet",
    "fête nationale",
    "toussaint",
    "ferragosto",
    "майск",
    "ゴールデンウィーク",
    "gw",
    "お盆",
    "어린이날",
    "크리스마스",
    "クリスマス",
    "大晦日",
    "그믐",
    "chinese new year",
    "lunar new year",
    "spring festival",
    "seollal",
    "tết",
    "除夕",
    "年三十",
    "春节",
    "过年",
    "大年初一",
    "正月",
    "农历新年",
    "旧正月",
    "설날",
    "연휴",
    "명절",
    "구정",
    "lantern festival",
    "元宵",
    "qingming",
    "tomb",
    "清明",
    "dragon boat",
    "duanwu",
    "端午",
    "단오",
    "autumn",
    "moon festival",
    "chuseok",
    "中秋",
    "十五夜",
    "お月見",
    "추석",
    "한가위",
    "double ninth",
    "chung yeung",
    "重阳",
    "buddha",
    "부처님",
    "석가",
    "초파일",
    "佛诞",
    "вербн",
    "пасх",
    "маслен",
    "троиц",
)
"""What a text must hold (lowercased) to name a holiday: the cheap test before the patterns."""
