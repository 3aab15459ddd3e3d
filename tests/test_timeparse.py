"""Time phrases of a query as windows on ``occurred_at`` (jiyi.text.timeparse)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from jiyi.text.timeparse import EARLIEST, LATEST, time_windows, told_windows

# A Tuesday evening; the week starts on Monday 2022-04-11.
NOW = datetime(2022, 4, 12, 22, 57, tzinfo=UTC)


def days(query: str, now: datetime = NOW) -> list[tuple[date, date]]:
    """The query's ranges as (first day inside, last day inside)."""
    return [
        (start.date(), (end - timedelta(microseconds=1)).date())
        for start, end in time_windows(query, now).ranges
    ]


def days_ago(n: int) -> datetime:
    return (NOW - timedelta(days=n)).replace(hour=20)


def at(y: int, m: int, d: int, h: int = 12) -> datetime:
    return datetime(y, m, d, h, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("what did we decide on 8 May 2021?", date(2021, 5, 8), date(2021, 5, 8)),
        ("2021年5月8日我们定了什么", date(2021, 5, 8), date(2021, 5, 8)),
        ("what happened yesterday", date(2022, 4, 11), date(2022, 4, 11)),
        ("前天吃了什么", date(2022, 4, 10), date(2022, 4, 10)),
        ("大前天吃了什么", date(2022, 4, 9), date(2022, 4, 9)),
        ("what did I do last week", date(2022, 4, 4), date(2022, 4, 10)),
        ("上上周去了哪里", date(2022, 3, 28), date(2022, 4, 3)),
        ("the week before last", date(2022, 3, 28), date(2022, 4, 3)),
        ("上个月买了什么", date(2022, 3, 1), date(2022, 3, 31)),
        ("上上个月买了什么", date(2022, 2, 1), date(2022, 2, 28)),
        ("what did I buy this morning", date(2022, 4, 12), date(2022, 4, 12)),
        # Said after midnight, "last night" was a few hours ago.
        ("where did I go last night", date(2022, 4, 11), date(2022, 4, 12)),
        # Ahead of now: what a memory says of its plans.
        ("my exam is tomorrow", date(2022, 4, 13), date(2022, 4, 13)),
        ("后天出发", date(2022, 4, 14), date(2022, 4, 14)),
        ("the day after tomorrow", date(2022, 4, 14), date(2022, 4, 14)),
        ("we fly out next week", date(2022, 4, 18), date(2022, 4, 24)),
        ("下周末去爬山", date(2022, 4, 23), date(2022, 4, 24)),
        ("what did we do this weekend", date(2022, 4, 16), date(2022, 4, 17)),
        ("what did we do this past weekend", date(2022, 4, 9), date(2022, 4, 10)),
        ("这周末去了哪里", date(2022, 4, 16), date(2022, 4, 17)),
        ("下个月搬家", date(2022, 5, 1), date(2022, 5, 31)),
        ("next year I start school", date(2023, 1, 1), date(2023, 12, 31)),
    ],
)
def test_named_times(query: str, first: date, last: date) -> None:
    assert days(query) == [(first, last)]
    # A named time keeps its words as keywords.
    assert time_windows(query, NOW).counted == ()


def test_longer_phrases_are_read_once() -> None:
    # "大前天" holds "前天", "上上周" holds "上周": each is one window, not two.
    assert len(time_windows("大前天", NOW).ranges) == 1
    assert len(time_windows("上上周", NOW).ranges) == 1
    assert len(time_windows("上上个月", NOW).ranges) == 1
    assert len(time_windows("the day after tomorrow", NOW).ranges) == 1
    assert len(time_windows("下周末", NOW).ranges) == 1


@pytest.mark.parametrize(
    ("query", "inside_days_ago", "outside_days_ago"),
    [
        ("I mentioned cooking something a couple of days ago", (1, 2, 3), (6, 10)),
        ("a couple days ago", (1, 2, 3), (6,)),
        ("a few days ago I said", (1, 3, 6), (9, 20)),
        ("several weeks ago", (7, 21, 42), (2, 60)),
        ("a couple of months ago", (30, 60, 90), (130,)),
        ("two days ago", (2,), (5,)),
        ("ten days ago", (10,), (3, 20)),
        ("four weeks ago", (27, 28, 30), (14, 40)),
        ("我前几天说过的那家店", (1, 3, 6), (10,)),
        ("前两天买的", (1, 2, 3), (7,)),
        ("两三天前提到的", (2, 3), (8,)),
        ("几个月前定的计划", (40, 120), (5,)),
        ("三天前去了哪里", (3,), (7,)),
    ],
)
def test_counted_back(
    query: str, inside_days_ago: tuple[int, ...], outside_days_ago: tuple[int, ...]
) -> None:
    windows = time_windows(query, NOW)
    assert len(windows.ranges) == 1
    # Counted back from the day of asking: the words are not keywords.
    assert windows.counted == windows.spans
    for n in inside_days_ago:
        assert windows.contains(days_ago(n)), n
    for n in outside_days_ago:
        assert not windows.contains(days_ago(n)), n


@pytest.mark.parametrize(
    "query",
    [
        "what did we do in the first few weeks",  # no "ago": not counted back
        "工作的前几年很辛苦",  # "the first few years", not "a few years ago"
        "how many days ago did I go",  # asks the distance, names none
    ],
)
def test_no_window(query: str) -> None:
    assert not time_windows(query, NOW)


def test_month_without_year_matches_any_year() -> None:
    w = time_windows("what did I plant in June?", NOW)
    assert w.months == (6,)
    assert w.contains(at(2019, 6, 3)) and not w.contains(at(2022, 5, 30))


@pytest.mark.parametrize(
    ("query", "inside_days_ago", "outside_days_ago"),
    [
        ("How many times did I bake in the past two weeks?", (0, 5, 13), (20,)),
        ("what did I buy over the last few months", (10, 100, 170), (250,)),
        ("the past week", (0, 6), (9,)),
        ("最近两周我买了什么", (0, 13), (16,)),
        ("过去三个月去过哪些地方", (1, 80), (100,)),
        ("最近几天", (0, 5), (8,)),
    ],
)
def test_up_to_now(query: str, inside_days_ago: tuple[int, ...], outside_days_ago: tuple[int, ...]) -> None:
    windows = time_windows(query, NOW)
    assert len(windows.ranges) == 1 and windows.counted == windows.spans
    assert windows.contains(NOW)  # up to the moment of asking
    for n in inside_days_ago:
        assert windows.contains(days_ago(n)), n
    for n in outside_days_ago:
        assert not windows.contains(days_ago(n)), n


def test_part_of_a_named_month_is_not_up_to_now() -> None:
    # "the last two weeks of August" names weeks of August, not the two weeks before asking.
    w = time_windows("Where was Dave in the last two weeks of August 2023?", NOW)
    assert w.ranges == ((datetime(2023, 8, 1, tzinfo=UTC), datetime(2023, 9, 1, tzinfo=UTC)),)
    assert not time_windows("附近三天有什么活动", NOW)


@pytest.mark.parametrize(
    "query",
    [
        "Can you recommend a show or movie for me to watch tonight?",
        "I've got some free time tonight, any documentary recommendations?",
        "What should I cook today?",
        "今晚推荐看什么电影",
        "这周末应该去哪玩",
        "Any ideas for what to do this weekend?",
    ],
)
def test_a_request_for_now_names_no_window(query: str) -> None:
    # The user will act tonight; what they told us that fits may be from any day.
    assert not time_windows(query, NOW)


def test_a_request_still_counts_a_time_before_now() -> None:
    assert time_windows("recommend a restaurant like the one I went to last week", NOW)
    assert time_windows("what did I eat tonight", NOW)
    assert time_windows("我今天吃了什么", NOW)


def test_a_memory_tells_of_a_time_counted_from_when_it_was_said() -> None:
    said = datetime(2023, 7, 3, 10, tzinfo=UTC)  # a Monday
    june = time_windows("When did Melanie go camping in June?", NOW)
    assert june.hold(told_windows("We went camping last week, the kids loved it", said))
    assert june.hold(told_windows("上周我们去露营了", said))
    # A year is no month: "last year" is not "in June" ...
    assert not june.hold(told_windows("Last year we went camping", said))
    # ... but it is "in 2022".
    assert time_windows("What did I do in 2022?", NOW).hold(told_windows("Last year we went camping", said))
    assert not june.hold(told_windows("I like green tea", said))
    # A plan told before the month it is for.
    july = time_windows("Where did I go in July?", NOW)
    assert july.hold(
        told_windows("I'm going to a conference in Denver next week", datetime(2023, 6, 28, tzinfo=UTC))
    )
    # A month without a year, on both sides.
    assert june.hold(told_windows("We always go camping in June", said))
    # Counted from when it was said, not from now: "yesterday" on 3 July is 2 July.
    assert time_windows("What did I do on 2 July 2023?", NOW).hold(
        told_windows("Yesterday I baked bread", said)
    )
    assert not time_windows("What did I do on 3 July 2023?", NOW).hold(
        told_windows("Yesterday I baked bread", said)
    )


@pytest.mark.parametrize(
    "text",
    [
        "La semana pasada fuimos de acampada con los niños",
        "On est partis camper la semaine dernière",
        "Letzte Woche waren wir zelten",
        "Fomos acampar na semana passada",
        "Siamo andati in campeggio la settimana scorsa",
        "На прошлой неделе мы ходили в поход",
        "先週キャンプに行った",
        "지난주에 캠핑 다녀왔어",
        "Fuimos de acampada hace una semana",
        "Hace diez días fui de acampada",
        "Vor zwei Wochen waren wir zelten",
        "Две недели назад мы ходили в поход",
        "2주 전에 캠핑 갔어",
        "10日前にキャンプに行った",
        "В июне мы ходили в поход",
        "6월에 캠핑 갔어",
    ],
)
def test_a_memory_in_another_language_tells_of_a_time_too(text: str) -> None:
    said = datetime(2023, 7, 3, 10, tzinfo=UTC)  # a Monday: last week is 26 June - 2 July
    assert time_windows("When did we go camping in June?", NOW).hold(told_windows(text, said))
    assert not time_windows("When did we go camping in July?", NOW).hold(told_windows(text, said))


@pytest.mark.parametrize(
    "text",
    [
        "The pyramids were built 4500 years ago",
        "100000 years ago",
        "in the past 99999 years",
        "9999年前",
        "0000年5月",
        "9999年12月31日",
        "December 31, 9999",
        "最近99999年",
    ],
)
def test_a_time_outside_the_calendar_gives_no_window_and_no_error(text: str) -> None:
    # A memory's own text is read too: it must never fail a search.
    assert not time_windows(text, NOW)
    assert not told_windows(text, NOW)
    assert not time_windows("tomorrow", datetime(9999, 12, 31, tzinfo=UTC))


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        # Before the time begins; up to its end; from its start; after its end.
        ("What did I do before March 2021?", None, date(2021, 2, 28)),
        ("How many pets did Andrew have, as of September 2021?", None, date(2021, 9, 30)),
        ("What will be finished by the end of 2021?", None, date(2021, 12, 31)),
        ("What has Nate done since June 2021?", date(2021, 6, 1), None),
        ("Where did I live before 2019?", None, date(2018, 12, 31)),
        ("What did I buy after 2019?", date(2020, 1, 1), None),
        ("What happened after 8 May 2021?", date(2021, 5, 9), None),
        ("What did I cook since last month?", date(2022, 3, 1), None),
        ("截至2021年9月，他有几只宠物？", None, date(2021, 9, 30)),
        ("2021年5月之后他做了什么", date(2021, 6, 1), None),
        ("2021年3月以前我住在哪里", None, date(2021, 2, 28)),
        ("自2021年6月以来读了哪些书", date(2021, 6, 1), None),
    ],
)
def test_a_bounding_word_opens_the_window_on_one_side(
    query: str, first: date | None, last: date | None
) -> None:
    ((start, end),) = time_windows(query, NOW).ranges
    assert (start == EARLIEST) == (first is None) and (end == LATEST) == (last is None)
    if first is not None:
        assert start.date() == first
    if last is not None:
        assert (end - timedelta(microseconds=1)).date() == last
    # A time long before an open start, or long after an open end, is inside.
    inside = at(2000, 1, 1) if first is None else at(3000, 1, 1)
    assert time_windows(query, NOW).contains(inside)


def test_months_joined_without_a_year_are_every_month_between() -> None:
    assert time_windows("What do I grow from March to May?", NOW).months == (3, 4, 5)
    assert time_windows("between November and February", NOW).months == (11, 12, 1, 2)
    assert time_windows("3月到5月我在哪里", NOW).months == (3, 4, 5)
    # "and" joins only after "between": two months, or a month and a verb.
    assert days("in March and May 2021") == [(date(2021, 5, 1), date(2021, 5, 31))]
    assert time_windows("in March and May 2021", NOW).months == (3,)
    assert time_windows("I went there in March and may go again", NOW).months == (3,)


# A Wednesday, for days of the week.
WEDNESDAY = datetime(2024, 3, 13, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("What did I do last Friday?", date(2024, 3, 8)),
        ("Who did I meet for lunch last Wednesday?", date(2024, 3, 6)),  # not today
        ("this Monday", date(2024, 3, 11)),
        ("next Friday", date(2024, 3, 15)),
        ("上周五我吃了什么", date(2024, 3, 8)),
        ("上个星期五", date(2024, 3, 8)),
        ("上上周二", date(2024, 2, 27)),
        ("这周一", date(2024, 3, 11)),
        ("下周日", date(2024, 3, 24)),
        # Alone: the latest one up to today.
        ("星期天去哪了", date(2024, 3, 10)),
        ("周三开会说了什么", date(2024, 3, 13)),
    ],
)
def test_a_day_of_the_week(query: str, day: date) -> None:
    assert days(query, WEDNESDAY) == [(day, day)]


@pytest.mark.parametrize(
    "query",
    [
        "I work on Mondays",
        "我每周三去健身",
        "周五推荐看什么电影",
        "What should I cook this Friday?",
        "Los viernes voy al gimnasio",  # a day alone, in any language
        "金曜日に歯医者の予約がある",
    ],
)
def test_a_habit_or_a_request_names_no_day(query: str) -> None:
    assert not time_windows(query, WEDNESDAY)


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        # A time counted from the named one is not a bound: the window stays on the named time.
        ("What did John do the week before August 3, 2021?", date(2021, 8, 3), date(2021, 8, 3)),
        ("What did we do on the Monday before July 24, 2021?", date(2021, 7, 24), date(2021, 7, 24)),
        ("What did we plan for the Saturday after October 28, 2021?", date(2021, 10, 28), date(2021, 10, 28)),
        ("What did I do two weeks before 11 August 2021?", date(2021, 8, 11), date(2021, 8, 11)),
        # "during" and "in" name the time itself; bare 前 is "went" in 9月前往.
        ("Did Andrew have a dog during March 2021?", date(2021, 3, 1), date(2021, 3, 31)),
        ("我2021年9月前往北京", date(2021, 9, 1), date(2021, 9, 30)),
        # Two times joined are one window.
        ("What did I do between March and May 2021?", date(2021, 3, 1), date(2021, 5, 31)),
        ("between March 2021 and May 2021", date(2021, 3, 1), date(2021, 5, 31)),
        ("from March 2021 until May 2021", date(2021, 3, 1), date(2021, 5, 31)),
        ("March-May 2021", date(2021, 3, 1), date(2021, 5, 31)),
        ("Where was I between 8 May 2021 and 20 May 2021?", date(2021, 5, 8), date(2021, 5, 20)),
        # A month without a year takes the other's: November before February is the year before.
        ("between November and February 2021", date(2020, 11, 1), date(2021, 2, 28)),
        ("2021年3月到5月我做了什么", date(2021, 3, 1), date(2021, 5, 31)),
        ("2020年11月至2月", date(2020, 11, 1), date(2021, 2, 28)),
        ("from last week to yesterday", date(2022, 4, 4), date(2022, 4, 11)),
        ("What did I do from 2019 to 2021?", date(2019, 1, 1), date(2021, 12, 31)),
        ("between 2019 and 2021", date(2019, 1, 1), date(2021, 12, 31)),
        ("in 2019-2021", date(2019, 1, 1), date(2021, 12, 31)),
        # "the last week of" a month is no "last week"; the month's window stays whole (a
        # narrower one lost a LoCoMo question whose "beginning of January" was the 23rd).
        ("the last week of June 2021", date(2021, 6, 1), date(2021, 6, 30)),
        ("the last month of 2021", date(2021, 1, 1), date(2021, 12, 31)),
        ("in early 2021", date(2021, 1, 1), date(2021, 12, 31)),
        ("mid-2021", date(2021, 1, 1), date(2021, 12, 31)),
    ],
)
def test_one_window(query: str, first: date, last: date) -> None:
    assert days(query) == [(first, last)]


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("¿Qué película vi la semana pasada?", date(2022, 4, 4), date(2022, 4, 10)),
        ("Qu'est-ce que j'ai fait la semaine dernière ?", date(2022, 4, 4), date(2022, 4, 10)),
        ("Was habe ich letzte Woche gekauft?", date(2022, 4, 4), date(2022, 4, 10)),
        ("O que eu comi ontem?", date(2022, 4, 11), date(2022, 4, 11)),
        ("Dove sono andato il mese scorso?", date(2022, 3, 1), date(2022, 3, 31)),
        ("Что я делал на прошлой неделе?", date(2022, 4, 4), date(2022, 4, 10)),
        ("先週どこに行った？", date(2022, 4, 4), date(2022, 4, 10)),
        ("先月何を買った？", date(2022, 3, 1), date(2022, 3, 31)),
        ("지난달에 뭐 했어?", date(2022, 3, 1), date(2022, 3, 31)),
        ("어제 뭐 먹었어?", date(2022, 4, 11), date(2022, 4, 11)),
        ("Was war im Mai 2021?", date(2021, 5, 1), date(2021, 5, 31)),
        ("¿Qué pasó en noviembre de 2021?", date(2021, 11, 1), date(2021, 11, 30)),
        ("2021년 11월에 뭐 했어?", date(2021, 11, 1), date(2021, 11, 30)),
        ("Mañana voy al médico", date(2022, 4, 13), date(2022, 4, 13)),
        # A day of a week (NOW is a Tuesday; this week began on Monday 11 April).
        ("¿Qué cené el viernes pasado?", date(2022, 4, 8), date(2022, 4, 8)),
        ("Qu'est-ce que j'ai fait lundi dernier ?", date(2022, 4, 11), date(2022, 4, 11)),
        ("Was habe ich letzten Donnerstag gekauft?", date(2022, 4, 7), date(2022, 4, 7)),
        ("O que fiz na sexta-feira passada?", date(2022, 4, 8), date(2022, 4, 8)),
        ("Com'è andata la partita di giovedì scorso?", date(2022, 4, 7), date(2022, 4, 7)),
        ("Что я делал в прошлую среду?", date(2022, 4, 6), date(2022, 4, 6)),
        ("先週の土曜日どこに行った？", date(2022, 4, 9), date(2022, 4, 9)),
        ("지난주 금요일에 뭐 먹었어?", date(2022, 4, 8), date(2022, 4, 8)),
        ("이번 주 월요일에 누구 만났어?", date(2022, 4, 11), date(2022, 4, 11)),
        # A year named apart from its month is that month's.
        ("올해 1월에 간 맛집은 어디였지?", date(2022, 1, 1), date(2022, 1, 31)),
        ("¿Qué hice en marzo del año pasado?", date(2021, 3, 1), date(2021, 3, 31)),
        ("What did I read in January this year?", date(2022, 1, 1), date(2022, 1, 31)),
        # A year alone.
        ("¿Qué hice en 2019?", date(2019, 1, 1), date(2019, 12, 31)),
        ("Qu'ai-je fait en 2019 ?", date(2019, 1, 1), date(2019, 12, 31)),
        ("Was habe ich im Jahr 2019 gemacht?", date(2019, 1, 1), date(2019, 12, 31)),
        ("O que fiz em 2019?", date(2019, 1, 1), date(2019, 12, 31)),
        ("Cosa ho fatto nel 2019?", date(2019, 1, 1), date(2019, 12, 31)),
        ("Что я делал в 2019 году?", date(2019, 1, 1), date(2019, 12, 31)),
        ("2019년에 뭐 했어?", date(2019, 1, 1), date(2019, 12, 31)),
    ],
)
def test_named_times_in_other_languages(query: str, first: date, last: date) -> None:
    assert days(query) == [(first, last)]
    assert time_windows(query, NOW).counted == ()


@pytest.mark.parametrize(
    ("query", "back"),
    [
        ("¿Qué compré hace tres semanas?", 21),
        ("Qu'ai-je acheté il y a 2 mois ?", 60),
        ("Was habe ich vor zwei Wochen gekauft?", 14),
        ("Onde fui 10 dias atrás?", 10),
        ("Cosa ho fatto tre settimane fa?", 21),
        ("Что я купил три недели назад?", 21),
        ("2週間前に何を買った？", 14),
        ("3주 전에 뭐 샀어?", 21),
        ("한 달 전에 어디 갔어?", 30),
        ("Où suis-je parti il y a dix jours ?", 10),
        ("¿Qué hice hace doce días?", 12),
        ("Was war vor elf Tagen?", 11),
        ("열흘 전에 어디 갔어?", 10),
        ("十日前に何をした？", 10),
    ],
)
def test_counted_back_in_other_languages(query: str, back: int) -> None:
    found = time_windows(query, NOW)
    ((start, end),) = found.ranges
    assert start < NOW - timedelta(days=back) < end
    assert found.counted  # a distance back: its words are no keywords


@pytest.mark.parametrize(
    ("query", "month"),
    [
        ("¿Qué compré en mayo?", 5),
        ("Où étais-je en mars ?", 3),
        ("Было холодно в марте", 3),
        ("3월에 뭐 했어?", 3),
    ],
)
def test_a_month_without_its_year_in_other_languages(query: str, month: int) -> None:
    assert time_windows(query, NOW).months == (month,)


@pytest.mark.parametrize(
    "query",
    [
        "When did Jolene return home from Rio de Janeiro?",  # a name's part, not January
        "Fuimos a la Plaza de Mayo",
        "Cinco de Mayo party ideas",
        "Recommend a film for esta noche",
        "What did I do this Mars mission?",
    ],
)
def test_month_names_inside_names_give_no_window(query: str) -> None:
    assert not time_windows(query, NOW)


def test_a_year_of_birth_or_a_number_is_no_year() -> None:
    for text in ("2019년생이야", "I paid 2019 en total", "The meeting in room 2019"):
        assert not time_windows(text, NOW), text


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        # A longer word holding a shorter one is not read as it: 一昨日 is not 昨日.
        ("一昨日何をした？", date(2022, 4, 10), date(2022, 4, 10)),
        ("大前年去了哪里", date(2019, 1, 1), date(2019, 12, 31)),
        ("재작년에 뭐 했어?", date(2020, 1, 1), date(2020, 12, 31)),
        ("一昨年はどこに住んでた？", date(2020, 1, 1), date(2020, 12, 31)),
        ("再来年", date(2024, 1, 1), date(2024, 12, 31)),
        ("后年", date(2024, 1, 1), date(2024, 12, 31)),
        ("지지난 주에 누구 만났어?", date(2022, 3, 28), date(2022, 4, 3)),
        ("先々月", date(2022, 2, 1), date(2022, 2, 28)),
        ("vorletzte Woche", date(2022, 3, 28), date(2022, 4, 3)),
        ("в позапрошлом году", date(2020, 1, 1), date(2020, 12, 31)),
        ("el año antepasado", date(2020, 1, 1), date(2020, 12, 31)),
        # A distance back in years in Korean; a count no number says.
        ("2년 전에 어디 살았어?", date(2019, 10, 13), date(2020, 10, 11)),
        ("hace unos días", date(2022, 4, 5), date(2022, 4, 12)),
        ("il y a quelques jours", date(2022, 4, 5), date(2022, 4, 12)),
        ("vor ein paar Tagen", date(2022, 4, 5), date(2022, 4, 12)),
        ("несколько дней назад", date(2022, 4, 5), date(2022, 4, 12)),
        ("数日前", date(2022, 4, 5), date(2022, 4, 12)),
        ("며칠 전에", date(2022, 4, 5), date(2022, 4, 12)),
        ("un paio di settimane fa", date(2022, 3, 19), date(2022, 4, 8)),
    ],
)
def test_more_named_times_in_other_languages(query: str, first: date, last: date) -> None:
    assert days(query) == [(first, last)]


@pytest.mark.parametrize(
    "query",
    [
        # NOW is Tuesday 12 April 2022: last weekend is 9-10 April, the one before 2-3 April.
        "What did I do the weekend before last?",
        "where did we eat two weekends ago?",
        "上上周末去了哪里",
        "两个周末前",
        "¿Qué hice hace dos fines de semana?",
        "el fin de semana antepasado",
        "il y a deux week-ends",
        "l'avant-dernier week-end",
        "vor zwei Wochenenden",
        "am vorletzten Wochenende",
        "há dois fins de semana",
        "no fim de semana retrasado",
        "due fine settimana fa",
        "il penultimo fine settimana",
        "на позапрошлых выходных",
        "先々週末",  # holds 先々週 (the week before last)
        "지지난 주말에 뭐 했어?",  # holds 지난 주말 (last weekend) and 지지난 주
    ],
)
def test_the_weekend_before_last(query: str) -> None:
    assert days(query) == [(date(2022, 4, 2), date(2022, 4, 3))]


def test_weekends_counted_back() -> None:
    # a couple: one to three weekends back, Saturday 26 March to Sunday 10 April
    assert days("a couple of weekends ago") == [(date(2022, 3, 26), date(2022, 4, 10))]
    assert days("hace tres fines de semana") == [(date(2022, 3, 26), date(2022, 3, 27))]
    assert days("지난 주말") == [(date(2022, 4, 9), date(2022, 4, 10))]


def test_a_vague_count_of_people_is_no_time() -> None:
    for text in ("unos amigos vinieron a cenar", "несколько человек пришли", "quelques amis"):
        assert not time_windows(text, NOW), text


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        # NOW is Tuesday 12 April 2022: this weekend is 16-17 April.
        ("¿Qué haremos este fin de semana?", date(2022, 4, 16), date(2022, 4, 17)),
        ("ce week-end", date(2022, 4, 16), date(2022, 4, 17)),
        ("в эти выходные", date(2022, 4, 16), date(2022, 4, 17)),
        ("今週末は何する？", date(2022, 4, 16), date(2022, 4, 17)),  # not all of 今週
        ("이번 주말에 뭐 해?", date(2022, 4, 16), date(2022, 4, 17)),
        ("来週末", date(2022, 4, 23), date(2022, 4, 24)),
        ("esta mañana", date(2022, 4, 12), date(2022, 4, 12)),  # not tomorrow
        ("ce matin", date(2022, 4, 12), date(2022, 4, 12)),
        ("今朝", date(2022, 4, 12), date(2022, 4, 12)),
        ("this past week", date(2022, 4, 5), date(2022, 4, 12)),
        # The start or the end of "the year" is this year's.
        (
            "How much have I spent since the start of the year?",
            date(2022, 1, 1),
            LATEST.date() - timedelta(days=1),
        ),
        ("a principios del año", date(2022, 1, 1), date(2022, 2, 28)),
        ("в конце года", date(2022, 11, 1), date(2022, 12, 31)),
    ],
)
def test_weekends_mornings_and_parts_of_the_year(query: str, first: date, last: date) -> None:
    assert days(query) == [(first, last)]


@pytest.mark.parametrize(
    "query",
    [
        "at the end of last year",
        "去年年底",
        "a finales del año pasado",
        "Ende letzten Jahres",
        "в конце прошлого года",
        "작년 연말",
    ],
)
def test_the_end_of_last_year_is_its_last_two_months(query: str) -> None:
    assert days(query) == [(date(2021, 11, 1), date(2021, 11, 30)), (date(2021, 12, 1), date(2021, 12, 31))]


def test_the_end_of_a_thing_is_no_time() -> None:
    for text in ("at the end of the day", "late for work", "the beginning of the movie", "I paid the fine"):
        assert not time_windows(text, NOW), text


@pytest.mark.parametrize(
    "query",
    [
        "¿Qué hice a finales del mes pasado?",
        "à la fin du mois dernier",
        "Ende des letzten Monats",
        "alla fine del mese scorso",
        "в конце прошлого месяца",
    ],
)
def test_last_month_in_the_forms_a_part_of_it_takes(query: str) -> None:
    """The month is read (its part is not: the whole of March)."""
    assert days(query) == [(date(2022, 3, 1), date(2022, 3, 31))]
