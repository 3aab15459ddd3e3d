"""Seasons and quarters as time windows (jiyi.text.seasons and jiyi.text.quarters through
jiyi.text.timeparse)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from jiyi import Memory
from jiyi.text.timeparse import time_windows, told_windows

NOW = datetime(2025, 11, 20, 10, tzinfo=UTC)  # autumn


def days(query: str, now: datetime = NOW) -> list[tuple[date, date]]:
    """The query's ranges as (first day inside, last day inside)."""
    return [(a.date(), (b - timedelta(microseconds=1)).date()) for a, b in time_windows(query, now).ranges]


SUMMER_2025 = [(date(2025, 6, 1), date(2025, 8, 31))]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we do last summer?", SUMMER_2025),
        ("el verano pasado", SUMMER_2025),
        ("l'été dernier", SUMMER_2025),
        ("letzten Sommer", SUMMER_2025),
        ("no verão passado", SUMMER_2025),
        ("l'estate scorsa", SUMMER_2025),
        ("прошлым летом", SUMMER_2025),
        ("지난 여름", SUMMER_2025),
        ("上个暑假", SUMMER_2025),
        ("この夏", SUMMER_2025),
        ("올여름", SUMMER_2025),
        # The last one that has ended; this year's; the first to begin after now.
        ("last winter", [(date(2024, 12, 1), date(2025, 2, 28))]),
        ("this winter", [(date(2025, 12, 1), date(2026, 2, 28))]),
        ("next spring", [(date(2026, 3, 1), date(2026, 5, 31))]),
        ("au printemps dernier", [(date(2025, 3, 1), date(2025, 5, 31))]),
        # With its year.
        ("in the summer of 2019", [(date(2019, 6, 1), date(2019, 8, 31))]),
        ("Summer 2023", [(date(2023, 6, 1), date(2023, 8, 31))]),
        ("el verano de 2023", [(date(2023, 6, 1), date(2023, 8, 31))]),
        ("летом 2023 года", [(date(2023, 6, 1), date(2023, 8, 31))]),
        ("during the winter of 2022", [(date(2022, 1, 1), date(2022, 2, 28)), (date(2022, 12, 1), date(2022, 12, 31))]),
        # A year named apart: its months of that year.
        ("去年夏天去哪玩了", [(date(2024, 6, 1), date(2024, 6, 30)), (date(2024, 7, 1), date(2024, 7, 31)), (date(2024, 8, 1), date(2024, 8, 31))]),
        ("작년 여름에 뭐 했어?", [(date(2024, 6, 1), date(2024, 6, 30)), (date(2024, 7, 1), date(2024, 7, 31)), (date(2024, 8, 1), date(2024, 8, 31))]),
    ],
)  # fmt: skip
def test_a_season_of_a_known_year(query: str, expected: list[tuple[date, date]]) -> None:
    assert days(query) == expected


def test_a_season_in_summer_is_last_year_s_as_last() -> None:
    assert days("last summer", datetime(2025, 7, 10, tzinfo=UTC)) == [(date(2024, 6, 1), date(2024, 8, 31))]
    # A winter's January belongs to the December before it.
    assert days("this winter", datetime(2025, 1, 15, tzinfo=UTC)) == [(date(2024, 12, 1), date(2025, 2, 28))]


@pytest.mark.parametrize(
    ("query", "months"),
    [
        ("What do we do in the summer?", (6, 7, 8)),
        ("en invierno", (12, 1, 2)),
        ("im Winter", (12, 1, 2)),
        ("летом", (6, 7, 8)),
        ("夏天", (6, 7, 8)),
        ("夏休み", (6, 7, 8)),
        ("겨울 방학", (12, 1, 2)),
    ],
)
def test_a_season_without_a_year_is_its_months(query: str, months: tuple[int, ...]) -> None:
    windows = time_windows(query, NOW)
    assert (windows.ranges, windows.months) == ((), months)


@pytest.mark.parametrize(
    "text",
    [
        "What did James enjoy doing on cold winter days?",  # no marker of time
        "When did Evan's son fall off his bike?",
        "What are her plans for the summer?",  # a plan is said before its season
        "I participated in the Spring Fling Market",  # a name
        "j'ai été malade",  # "been"
        "5 лет назад было",  # years, not summer (read as a distance back)
        "村上春樹が好き",
    ],
)
def test_no_season(text: str) -> None:
    windows = time_windows(text, NOW)
    assert not windows.months and all(
        b - a < timedelta(days=80) or b - a > timedelta(days=300) for a, b in windows.ranges
    ), text


def test_a_memory_tells_only_of_a_season_of_a_known_year() -> None:
    said = datetime(2023, 3, 1, tzinfo=UTC)
    assert told_windows("We went to the beach last summer", said).ranges == (
        (datetime(2022, 6, 1, tzinfo=UTC), datetime(2022, 9, 1, tzinfo=UTC)),
    )
    assert not told_windows("I love the beach in the summer", said)


def test_a_search_finds_what_was_said_last_summer() -> None:
    said = [
        ("Went kayaking on the lake with my brother", datetime(2025, 7, 12, 10, tzinfo=UTC)),
        ("Went kayaking on the river with my brother", datetime(2025, 10, 4, 10, tzinfo=UTC)),
        ("Went kayaking on the bay with my brother", datetime(2025, 11, 15, 10, tzinfo=UTC)),
    ]
    with Memory.open(":memory:", clock=lambda: NOW) as mem:
        mem.import_items([{"content": c, "user_id": "u", "occurred_at": t} for c, t in said])
        for query in (
            "Where did I go kayaking with my brother last summer?",
            "¿Dónde fui en kayak con mi hermano el verano pasado?",
        ):
            hits = mem.search(query, user_id="u", touch=False)
            assert hits[0].item.content == said[0][0], query


Q3_2025 = [(date(2025, 7, 1), date(2025, 9, 30))]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we ship last quarter?", Q3_2025),
        ("上个季度的销售额是多少？", Q3_2025),
        ("el trimestre pasado", Q3_2025),
        ("letztes Quartal", Q3_2025),
        ("в прошлом квартале", Q3_2025),
        ("前四半期", Q3_2025),
        ("지난 분기", Q3_2025),
        ("this quarter", [(date(2025, 10, 1), date(2025, 12, 31))]),
        ("next quarter", [(date(2026, 1, 1), date(2026, 3, 31))]),
        ("Q3 2024", [(date(2024, 7, 1), date(2024, 9, 30))]),
        ("2024 Q1", [(date(2024, 1, 1), date(2024, 3, 31))]),
        ("the third quarter of 2023", [(date(2023, 7, 1), date(2023, 9, 30))]),
        ("el tercer trimestre de 2024", [(date(2024, 7, 1), date(2024, 9, 30))]),
    ],
)
def test_a_quarter_of_a_known_year(query: str, expected: list[tuple[date, date]]) -> None:
    assert days(query) == expected


def test_a_quarter_by_its_number_alone_is_its_months() -> None:
    for query in ("in Q3", "第3四半期", "3분기", "im dritten Quartal"):
        windows = time_windows(query, NOW)
        assert (windows.ranges, windows.months) == ((), (7, 8, 9)), query
    # A year named apart makes them that year's.
    assert days("去年第四季度") == [
        (date(2024, 10, 1), date(2024, 10, 31)),
        (date(2024, 11, 1), date(2024, 11, 30)),
        (date(2024, 12, 1), date(2024, 12, 31)),
    ]
    for text in ("a quarter of the cake", "three quarters of them"):
        assert not time_windows(text, NOW), text
