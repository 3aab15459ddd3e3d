"""Named holidays as time windows (jiyi.text.holidays through jiyi.text.timeparse)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from jiyi import Memory
from jiyi.text.holidays import _easter, _orthodox_easter
from jiyi.text.timeparse import EARLIEST, time_windows, told_windows

NOW = datetime(2024, 1, 10, 9, tzinfo=UTC)


def days(query: str, now: datetime = NOW) -> list[tuple[date, date]]:
    """The query's ranges as (first day inside, last day inside)."""
    return [(a.date(), (b - timedelta(microseconds=1)).date()) for a, b in time_windows(query, now).ranges]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we do at Christmas 2022?", [(date(2022, 12, 24), date(2022, 12, 26))]),
        ("Christmas of 2021", [(date(2021, 12, 24), date(2021, 12, 26))]),
        ("last Christmas", [(date(2023, 12, 24), date(2023, 12, 26))]),
        ("this Christmas", [(date(2024, 12, 24), date(2024, 12, 26))]),
        ("next Thanksgiving", [(date(2024, 11, 27), date(2024, 12, 1))]),  # 4th Thursday: 28 Nov
        ("Thanksgiving 2023", [(date(2023, 11, 22), date(2023, 11, 26))]),  # 23 Nov
        ("Easter 2024", [(date(2024, 3, 29), date(2024, 4, 1))]),  # Good Friday to Easter Monday
        ("Mother's Day 2023", [(date(2023, 5, 14), date(2023, 5, 14))]),
        ("on Halloween 2023", [(date(2023, 10, 30), date(2023, 11, 1))]),
        ("2023年国庆去了哪里", [(date(2023, 10, 1), date(2023, 10, 7))]),
        ("去年圣诞节吃了什么", [(date(2023, 12, 24), date(2023, 12, 26))]),
        ("2023年五一去哪玩了", [(date(2023, 5, 1), date(2023, 5, 5))]),
        # Last year's, wherever in this year it is asked (not the latest before now).
        ("去年国庆去了哪里", [(date(2023, 10, 1), date(2023, 10, 7))]),
        # Other languages: each country's own and the shared ones, with a year or last year.
        ("¿Qué hicimos en Navidad de 2022?", [(date(2022, 12, 24), date(2022, 12, 26))]),
        ("Ostern 2023", [(date(2023, 4, 7), date(2023, 4, 10))]),
        ("去年のお盆はどこに行った？", [(date(2023, 8, 13), date(2023, 8, 16))]),
        ("2023年のゴールデンウィーク", [(date(2023, 4, 29), date(2023, 5, 5))]),
        ("작년 어린이날에 뭐 했지?", [(date(2023, 5, 4), date(2023, 5, 6))]),
        ("Ferragosto 2023", [(date(2023, 8, 14), date(2023, 8, 16))]),
    ],
)
def test_a_holiday_of_a_year(query: str, expected: list[tuple[date, date]]) -> None:
    assert days(query) == expected


def test_a_holiday_without_a_year_is_its_recent_occurrences() -> None:
    assert days("What did we do for Christmas?") == [
        (date(y, 12, 24), date(y, 12, 26)) for y in (2021, 2022, 2023)
    ]
    # Christmas Eve is not also Christmas; a plan weeks ahead counts the coming one.
    assert days("on Christmas Eve", datetime(2023, 12, 1, tzinfo=UTC))[-1] == (
        date(2023, 12, 23),
        date(2023, 12, 25),
    )


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("¿Qué hicimos en Nochevieja?", date(2023, 12, 31)),
        ("Qu'est-ce qu'on a fait à la Toussaint ?", date(2023, 11, 1)),
        ("Wo waren wir an Silvester?", date(2023, 12, 31)),
        ("Что мы делали на майских праздниках?", date(2023, 5, 5)),
        ("Semana Santa", date(2023, 4, 5)),
        ("お正月は何をした？", date(2024, 1, 2)),
    ],
)
def test_holidays_in_other_languages(query: str, day: date) -> None:
    """Named without a year, as in English: the latest occurrence holds the day."""
    assert any(first <= day <= last for first, last in days(query)), days(query)


def test_a_memory_text_is_not_read_for_holidays() -> None:
    """A plan names the holiday it is for, a year the text does not say; the memory's own
    time finds it instead (test_a_search_finds_what_was_said_on_the_holiday)."""
    said = datetime(2026, 2, 10, tzinfo=UTC)
    assert not told_windows("国庆打算去云南 帮我排个五天的行程", said)
    assert not told_windows("We're hosting Christmas for the whole family", said)


def test_bounded_and_no_holiday() -> None:
    assert time_windows("What did I do before Christmas 2023?", NOW).ranges == (
        (EARLIEST, datetime(2023, 12, 24, tzinfo=UTC)),
    )
    for text in ("my mother is a nurse", "happy new year", "at the easterly end", "我父亲是医生"):
        assert not time_windows(text, NOW), text
    # A year outside the calendar gives no window and no error.
    assert not time_windows("Christmas", datetime(9999, 12, 31, tzinfo=UTC))


def test_easter_dates() -> None:
    assert [_easter(y) for y in (2019, 2024, 2025, 2038)] == [
        date(2019, 4, 21),
        date(2024, 3, 31),
        date(2025, 4, 20),
        date(2038, 4, 25),
    ]


def test_a_search_finds_what_was_said_on_the_holiday() -> None:
    """Nothing in the memories names the holiday; one was said on the day (without the
    window the two more recent ones rank first)."""
    said = [
        ("We took the kids for a long walk by the river", datetime(2022, 12, 25, 10, tzinfo=UTC)),
        ("We took the kids to the cinema", datetime(2023, 8, 12, 10, tzinfo=UTC)),
        ("We took the kids to the zoo", datetime(2023, 10, 1, 10, tzinfo=UTC)),
    ]
    with Memory.open(":memory:", clock=lambda: NOW) as mem:
        mem.import_items([{"content": c, "user_id": "u", "occurred_at": t} for c, t in said])
        for query in ("What did we do with the kids at Christmas?", "圣诞节我们和孩子们做了什么？"):
            hits = mem.search(query, user_id="u", touch=False)
            assert hits[0].item.content.endswith("river"), query


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Days of the Chinese lunisolar calendar: 22 January 2023, 10 February 2024.
        ("去年春节回老家了吗", [(date(2023, 1, 21), date(2023, 1, 28))]),
        ("2023年除夕吃了什么", [(date(2023, 1, 21), date(2023, 1, 22))]),
        # "Chinese New Year's Eve" is not also New Year's Eve (31 December).
        ("Chinese New Year's Eve 2024", [(date(2024, 2, 9), date(2024, 2, 10))]),
        ("2023年元宵节", [(date(2023, 2, 5), date(2023, 2, 6))]),
        ("2024年清明去扫墓了吗", [(date(2024, 4, 3), date(2024, 4, 6))]),
        ("2024年端午", [(date(2024, 6, 9), date(2024, 6, 12))]),
        ("Mid-Autumn Festival 2023", [(date(2023, 9, 28), date(2023, 9, 30))]),
        ("작년 추석에 뭐 했어?", [(date(2023, 9, 28), date(2023, 9, 30))]),
        ("2023년 설날", [(date(2023, 1, 21), date(2023, 1, 24))]),
        ("2023年重阳节", [(date(2023, 10, 23), date(2023, 10, 24))]),
        # The Orthodox Easter (5 May 2024) and the days counted from it.
        ("Пасха 2024", [(date(2024, 5, 3), date(2024, 5, 6))]),
        ("Масленица 2025", [(date(2025, 2, 24), date(2025, 3, 3))]),
    ],
)
def test_lunar_and_orthodox_holidays(query: str, expected: list[tuple[date, date]]) -> None:
    assert days(query) == expected


def test_a_lunar_holiday_without_a_year_is_its_recent_occurrences() -> None:
    # The coming one is a month ahead: a plan counts it (AHEAD).
    assert days("过年的时候吃了什么") == [
        (date(2022, 1, 31), date(2022, 2, 7)),
        (date(2023, 1, 21), date(2023, 1, 28)),
        (date(2024, 2, 9), date(2024, 2, 16)),
    ]
    assert days("last Lunar New Year", datetime(2024, 3, 1, tzinfo=UTC)) == [
        (date(2024, 2, 9), date(2024, 2, 16))
    ]
    # Outside the lunar calendar's table (1900-2100): no window, no error.
    assert not time_windows("春节", datetime(2150, 6, 1, tzinfo=UTC))


def test_orthodox_easter_dates() -> None:
    assert [_orthodox_easter(y) for y in (2021, 2023, 2024, 2025)] == [
        date(2021, 5, 2),
        date(2023, 4, 16),
        date(2024, 5, 5),
        date(2025, 4, 20),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we do at Christmas last year?", [(date(2023, 12, 24), date(2023, 12, 26))]),
        ("¿Qué hicimos el año pasado en Semana Santa?", [(date(2023, 4, 2), date(2023, 4, 10))]),
        ("Что мы ели на Масленицу в прошлом году?", [(date(2023, 2, 20), date(2023, 2, 27))]),
    ],
)
def test_a_year_named_apart_from_the_holiday(query: str, expected: list[tuple[date, date]]) -> None:
    """Not the whole year, nor the holiday's recent occurrences: that year's holiday."""
    assert days(query) == expected


def test_a_search_finds_what_was_said_at_mid_autumn() -> None:
    said = [
        ("和爸妈一起在阳台上吃月饼赏月", datetime(2023, 9, 29, 21, tzinfo=UTC)),
        ("和爸妈一起在阳台上吃火锅", datetime(2023, 11, 18, 19, tzinfo=UTC)),
        ("和爸妈一起在阳台上喝茶聊天", datetime(2023, 12, 30, 15, tzinfo=UTC)),
    ]
    with Memory.open(":memory:", clock=lambda: NOW) as mem:
        mem.import_items([{"content": c, "user_id": "u", "occurred_at": t} for c, t in said])
        for query in (
            "中秋节和爸妈在阳台上做了什么？",
            "What did I do with my parents at Mid-Autumn Festival?",
        ):
            hits = mem.search(query, user_id="u", touch=False)
            assert hits[0].item.content == said[0][0], query
