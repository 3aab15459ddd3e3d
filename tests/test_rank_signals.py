"""Ranking signals added for issue 13: thread diversity, the cross-language fill, and time
phrases that keep their words in the keyword query."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.cli.memories import explain_lines
from jiyi.config import RankConfig
from jiyi.errors import ConfigError
from jiyi.model import MemoryItem
from jiyi.read.fusion import SIDES, asks_at_end, features, phrase_evidence, query_pairs, rank_fusion
from jiyi.read.rank import han_share, mmr_select, other_language, similarities
from jiyi.store.base import Candidate
from jiyi.text.tokenize import fold_terms, index_text


def test_group_penalty_spreads_results_over_threads() -> None:
    scores = [1.0, 0.99, 0.98, 0.9]
    vectors: list[np.ndarray | None] = [None] * 4
    groups = ["s1", "s1", "s1", "s2"]
    assert mmr_select(scores, vectors, 2, 1.0, 0.8) == [0, 1]
    assert mmr_select(scores, vectors, 2, 1.0, 0.8, groups, 0.2) == [0, 3]
    # Items without a thread are never crowded.
    assert mmr_select(scores, vectors, 3, 1.0, 0.8, [None, None, None, "s2"], 0.2) == [0, 1, 2]


def test_han_share_and_other_language() -> None:
    assert han_share("我们决定用这个框架") == 1.0
    assert han_share("we picked the framework") == 0.0
    assert 0.2 < han_share("我们决定用 Next.js 而不是 Remix") < 0.8
    assert han_share("1234") == 0.5
    cands = [_cand("we picked Next.js", 0.6), _cand("我是一名前端工程师", 0.3)]
    across = other_language("用的哪个前端框架？", cands)
    assert across[0] == 1.0 and across[1] == 0.0


def _cand(text: str, cosine: float, keyword: float | None = None) -> Candidate:
    return Candidate(MemoryItem(content=text, user_id="u"), cosine, keyword, None)


def test_cross_language_fill_lets_a_strong_vector_match_win() -> None:
    cands = [
        _cand("We picked Next.js over Remix for the web app.", 0.8),
        _cand("我是一名前端工程师", 0.30, keyword=4.0),
        _cand("我喜欢简洁的回答", 0.25),
    ]
    for i in range(len(cands)):  # a pool large enough for a meaningful median
        cands.append(_cand(f"无关的记录 {i}", 0.2))
    never = lambda _item: False  # noqa: E731
    off, _ = similarities(cands, RankConfig(fusion="fixed"), never, "用的哪个前端框架？")
    on, _ = similarities(
        cands, RankConfig(fusion="fixed", cross_language_fill=1.0), never, "用的哪个前端框架？"
    )
    assert off[0] < off[1]  # keyword evidence swamps the cross-lingual match
    assert on[0] > on[1]
    assert on[1] == pytest.approx(off[1])  # same-language candidates are untouched
    # The learned fusion (the default) has a feature for it and needs no option.
    learned, _ = similarities(cands, RankConfig(), never, "用的哪个前端框架？")
    assert learned[0] > learned[1] > learned[2]


def test_rank_config_checks_new_options() -> None:
    with pytest.raises(ConfigError):
        RankConfig(thread_diversity=-0.1)
    with pytest.raises(ConfigError):
        RankConfig(cross_language_fill=-1.0)


def test_time_phrase_keeps_its_words(tmp_path: Path) -> None:
    now = datetime(2024, 3, 1, tzinfo=UTC)
    with Memory.open(tmp_path / "m.db", clock=lambda: now) as mem:
        mem.import_items(
            [
                # Told in February about a December trip: the window (December) misses it,
                # the word does not.
                _said("We went skiing in December with my cousins.", datetime(2024, 2, 10, tzinfo=UTC)),
                _said("I started a new pottery class.", datetime(2023, 12, 5, tzinfo=UTC)),
            ]
        )
        hits = mem.search("what did I do in December?", user_id="u", limit=2, touch=False, explain=True)
        by_text = {h.item.content[:6]: h for h in hits}
        # The window still counts (the pottery class happened in December) ...
        assert by_text["I star"].breakdown["similarity.time"] > 0
        # ... and "December" is still a keyword, so the trip told in February matches it.
        assert by_text["We wen"].breakdown["keyword_bm25"] > 0


def test_a_counted_back_time_phrase_gives_its_window_but_not_its_words(tmp_path: Path) -> None:
    """A query's "a week ago" means a week before the question; a memory that says "about a week ago"
    counted from another day, so the words are no keyword. A named time ("in December",
    above, or "last month") keeps its words."""
    from jiyi.text.timeparse import time_windows, without_spans

    now = datetime(2023, 2, 7, 9, tzinfo=UTC)
    query = "Which book did I finish a week ago?"
    windows = time_windows(query, now)
    assert windows.ranges and windows.counted == windows.spans
    assert without_spans(query, windows.counted).split() == ["Which", "book", "did", "I", "finish", "?"]
    for named in ("what did I do in December?", "Which shoes did I clean last month?", "我上周去了哪里？"):
        assert time_windows(named, now).counted == ()
    assert time_windows("我三天前去了哪里？", now).counted  # Chinese too

    with Memory.open(tmp_path / "m.db", clock=lambda: now) as mem:
        mem.import_items(
            [
                _said(
                    "I finished reading The Nightingale today, what a book.",
                    datetime(2023, 1, 31, tzinfo=UTC),
                ),
                _said(
                    "I added neon tetras to the aquarium about a week ago.", datetime(2023, 1, 10, tzinfo=UTC)
                ),
            ]
        )
        hits = mem.search(query, user_id="u", limit=2, touch=False, explain=True)
        by_text = {h.item.content[:6]: h for h in hits}
        assert hits[0].item.content.startswith("I finished")
        assert by_text["I fini"].breakdown["similarity.time"] > 0  # the window still counts
        assert by_text["I fini"].breakdown["keyword_bm25"] > 0  # "book"
        assert by_text["I adde"].breakdown.get("keyword_bm25", 0.0) == 0.0  # "week" is no keyword


def test_a_memory_telling_of_the_asked_time_counts_as_inside_it(tmp_path: Path) -> None:
    """People tell of their days afterwards: "we went camping last week", said on 3 July, is
    in June, though it was said in July. The search says so in the explanation."""
    now = datetime(2023, 10, 1, tzinfo=UTC)
    with Memory.open(tmp_path / "m.db", clock=lambda: now) as mem:
        mem.import_items(
            [
                _said(
                    "We camped at Pine Lake last week, the kids loved it.", datetime(2023, 7, 3, tzinfo=UTC)
                ),
                _said("We went camping near the river with friends.", datetime(2023, 8, 14, tzinfo=UTC)),
                *_one_a_day(
                    8,
                    "My sister started a new job at the bank.",
                    "I repainted the kitchen a pale green.",
                    "The dog learned to fetch the newspaper.",
                    "I finished reading a novel about sailors.",
                ),
            ]
        )
        hits = mem.search("When did we go camping in June?", user_id="u", limit=2, touch=False, explain=True)
        assert hits[0].item.content.startswith("We camped at Pine Lake")  # main: the river first (the word)
        told, other = hits
        assert told.score > other.score
        assert told.breakdown["time.told"] == 1.0 and told.breakdown["similarity.time"] > 0
        assert other.breakdown["time.told"] == 0.0 and other.breakdown["similarity.time"] == 0.0
        # A memory telling of a time before the calendar is simply not inside.
        mem.add("The pyramids were built 4500 years ago.", user_id="u")
        assert mem.search("What did I read about in June?", user_id="u", limit=3, touch=False)
        # Nor does a query's: before this, "5000 years ago" raised OverflowError.
        assert mem.search("What happened 5000 years ago?", user_id="u", limit=3, touch=False)
        # Without a time in the query there is nothing to tell of.
        plain = mem.search("When did we go camping?", user_id="u", limit=2, touch=False, explain=True)
        assert all("time.told" not in h.breakdown for h in plain)


def test_a_time_window_counts_less_when_it_admits_most_of_the_pool() -> None:
    """A window that holds nearly every candidate says little about which one answers (as
    a word found in every document does); one that singles out a few says a lot. Either
    way being inside it never lowers a candidate."""
    from jiyi.read import fusion

    cands = [_cand(f"note number {i} about the garden", 0.3 + 0.01 * i, keyword=1.0) for i in range(12)]
    coverage = np.full(len(cands), 0.2)

    def time_part(inside: set[int]) -> np.ndarray:
        cols = fusion.features(cands, "what did I do last week?", coverage, lambda it: it.id in ids(inside))
        return fusion.signal_parts(cols)["time"]

    def ids(inside: set[int]) -> set[str]:
        return {cands[i].item.id for i in inside}

    narrow = time_part({0, 1})
    wide = time_part(set(range(11)))
    assert narrow[0] > wide[0] > 0
    assert narrow[5] == 0.0  # outside the window: no time evidence
    assert (fusion.WEIGHTS >= 0).all()  # more evidence of any kind never lowers the score


def test_phrase_evidence_counts_adjacent_query_pairs_in_english() -> None:
    # Stop words are skipped on both sides, so "high school" and "good idea" are pairs.
    assert query_pairs("Who was my friend from high school? A good idea!") == (
        ("friend", "high"),
        ("high", "school"),
        ("school", "good"),
        ("good", "idea"),
    )
    texts = [
        "I met my best friend in high school",  # the pair, adjacent
        "School starts early; the fee is high",  # both words, apart
        "The school shop charges high prices",  # both words, apart again
        "Nothing about that here",
    ]
    got = phrase_evidence("Where did I go to high school?", texts)
    assert got[0] == pytest.approx(1.0)  # a pair only one text holds: one unit
    assert got[1:].tolist() == [0.0, 0.0, 0.0]
    # A pair two texts hold counts less than one unit in each; stems match inflections.
    two = phrase_evidence("high school", [*texts, "Our high schools were small"])
    assert 0.0 < two[0] < 1.0 and two[4] == pytest.approx(two[0])
    # Every pair found adds its share, capped at 1.
    many = phrase_evidence("high school good idea", ["a good idea at high school", "x", "y", "z"])
    assert many[0] == 1.0
    assert phrase_evidence("school", texts).tolist() == [0.0] * 4  # no pair in one word
    assert phrase_evidence("high school", []).shape == (0,)


def test_phrase_evidence_pairs_chinese_through_jieba() -> None:
    # jieba's search mode gives 高中 同学 高中同学: the part with its compound is no pair.
    pairs = query_pairs("我的高中同学叫什么名字？")
    assert ("高中", "同学") in pairs
    assert all(a not in b and b not in a for a, b in pairs)
    texts = ["他是我高中的同学", "高中的时候我喜欢打球，大学同学都知道", "我的同学很多", "无关的记录"]
    got = phrase_evidence("我的高中同学叫什么名字？", texts)
    assert got[0] > 0.0  # 的 is a stop word: 高中 同学 stand together
    assert got[1:].tolist() == [0.0, 0.0, 0.0]


def test_phrase_evidence_reads_the_terms_a_store_keeps() -> None:
    """With the index terms the store keeps (as written, or folded like PostgreSQL's), the
    values are those of tokenizing the texts; a text without stored terms is tokenized."""
    texts = [
        "I met my best friend in High School",
        "School starts early; the fee is high",
        "他是我高中的同学",
        "Nothing about that here",
        "Our café lycée, a high school again",
    ]
    queries = ("Where did I go to high school?", "我的高中同学叫什么名字？", "café lycée")
    for query in queries:
        tokenized = phrase_evidence(query, texts)
        as_written = phrase_evidence(query, texts, [index_text(t) for t in texts])
        folded = phrase_evidence(query, texts, [fold_terms(index_text(t)) for t in texts])
        mixed = phrase_evidence(query, texts, [None, index_text(texts[1]), None, None, index_text(texts[4])])
        assert tokenized.any()
        assert as_written.tolist() == tokenized.tolist() == folded.tolist() == mixed.tolist()
    # The stored terms decide: terms that no longer stand together hold no phrase.
    apart = phrase_evidence("high school", texts, ["school friend high", None, None, None, None])
    assert apart[0] == 0.0
    assert apart[4] > 0.0


def test_rank_fusion_of_pool_ranks() -> None:
    cos = np.array([0.5, 0.3, 0.9])
    bm25 = np.array([0.0, 2.0, 1.0])
    got = rank_fusion(cos, bm25)
    assert got[0] == pytest.approx((60 / 62) / 2)  # BM25 did not match it: no keyword part
    assert got[1] == pytest.approx((60 / 63 + 60 / 61) / 2)
    assert got[2] == pytest.approx((60 / 61 + 60 / 62) / 2)
    assert rank_fusion(np.zeros(0), np.zeros(0)).shape == (0,)


def test_phrase_and_rank_are_features_of_every_candidate() -> None:
    cands = [_cand("I met him in high school", 0.4, 3.0), _cand("school is high on my list", 0.5, 3.5)]
    cands += [_cand(f"unrelated note {i}", 0.1) for i in range(4)]
    cols = features(cands, "who did I meet in high school?", np.zeros(len(cands)), None)
    assert cols["phrase"][0] == pytest.approx(1.0) and cols["phrase"][1] == 0.0
    assert cols["rrf"][1] > cols["rrf"][0] > cols["rrf"][2]
    assert all(f"{e}*{side}" in cols for e in ("phrase", "rrf") for side in SIDES)


def _turn(
    text: str, cosine: float, keyword: float | None, meta: dict[str, str], prev: str | None
) -> Candidate:
    item = MemoryItem(content=text, user_id="u", thread_id="s1", metadata=meta)
    return Candidate(item, cosine, keyword, None, prev_id=prev)


def test_a_reply_carries_the_evidence_of_the_question_before_it() -> None:
    maria, john = {"speaker": "Maria"}, {"speaker": "John"}
    asked = _turn("Maria: How did your kids like the military memorial?", 0.6, 6.0, maria, None)
    answer = _turn("John: They were awestruck and humbled.", 0.1, None, john, asked.item.id)
    same = _turn("Maria: I loved it too, by the way?", 0.1, None, maria, answer.item.id)
    after_same = _turn("Maria: And the museum next door", 0.1, None, maria, same.item.id)
    cands = [asked, answer, same, after_same, *(_cand(f"unrelated note {i}", 0.1) for i in range(4))]
    cols = features(cands, "How did John's kids react at the memorial?", np.zeros(len(cands)), None)
    reply = cols["reply"]
    # The question's own evidence: 0.3 * cosine + 0.7 * saturated BM25 (6 / (6 + 8)).
    assert reply[1] == pytest.approx(0.3 * 0.6 + 0.7 * 6.0 / 14.0)
    # A statement before it, the same speaker asking, or no previous turn: nothing.
    assert reply[2] == 0.0 and reply[3] == 0.0 and reply[0] == 0.0
    assert not reply[4:].any()


def test_a_reply_needs_both_speakers_known() -> None:
    # Turns that name no speaker (a user talking to the assistant, a memory written
    # directly) may be one person's.
    asked = _turn("Can you recommend a hotel in Kyoto?", 0.6, 6.0, {}, None)
    after = _turn("I'm going there in May", 0.1, None, {}, asked.item.id)
    # Nor with the assistant on either side: its questions are mostly offers.
    offer = _turn("Want a list of hotels in Kyoto?", 0.6, 6.0, {"role": "assistant"}, None)
    yes = _turn("Yes, near the station", 0.1, None, {"role": "user"}, offer.item.id)
    user_q = _turn("Where should I stay in Kyoto?", 0.6, 6.0, {"role": "user"}, None)
    advice = _turn("Near Kyoto station", 0.1, None, {"role": "assistant"}, user_q.item.id)
    # Two people who share the user role, each named: two speakers.
    ana_q = _turn("Ana: Which hotel in Kyoto was it?", 0.6, 6.0, {"role": "user", "speaker": "Ana"}, None)
    ben_a = _turn("Ben: The one by the river", 0.1, None, {"role": "user", "speaker": "Ben"}, ana_q.item.id)
    cands = [asked, after, offer, yes, user_q, advice, ana_q, ben_a]
    cols = features(cands, "Kyoto hotel", np.zeros(len(cands)), None)
    assert cols["reply"].tolist()[:7] == [0.0] * 7 and cols["reply"][7] > 0.0


def test_asks_at_end_reads_the_marks_after_the_last_word() -> None:
    assert asks_at_end("What did the kids think?") and asks_at_end("真的吗？😄") and asks_at_end("really?!")
    assert not asks_at_end("Is it? Yes, it is.") and not asks_at_end("ok :)") and not asks_at_end("")


def test_what_the_named_person_said_counts_by_the_share_they_did_not_say() -> None:
    def said(text: str, name: str) -> Candidate:
        return Candidate(
            MemoryItem(content=f"{name}: {text}", user_id="u", metadata={"speaker": name}), 0.2, None, None
        )

    cands = [said("I went to a pottery class", "Melanie"), said("I researched adoption agencies", "Caroline")]
    cands += [said(f"note {i}", "Melanie") for i in range(2)] + [_cand("a fact with no speaker", 0.2)]
    cols = features(cands, "What did Caroline's research cover?", np.zeros(len(cands)), None)
    assert cols["speaker"].tolist() == [0.0, 0.8, 0.0, 0.0, 0.0]  # 1 x (1 - 1/5)
    # a name in Chinese, inside the query's words; a Latin name only as a word
    zh = [said("我去了深圳", "张伟"), said("我在上海", "李娜")]
    assert features(zh, "张伟去了哪里？", np.zeros(2), None)["speaker"].tolist() == [0.5, 0.0]
    jo = [said("hi", "Jo"), said("hey", "Ann")]
    assert not features(jo, "What did Joe say?", np.zeros(2), None)["speaker"].any()


def test_a_turn_carries_the_evidence_of_what_its_speaker_said_two_turns_before() -> None:
    jo, deb = {"speaker": "Jolene"}, {"speaker": "Deborah"}
    first = _turn("Jolene: I have a few game recommendations: Zelda and Animal Crossing", 0.6, 6.0, jo, None)
    between = _turn("Deborah: Oh nice, thanks", 0.1, None, deb, first.item.id)
    more = _turn("Jolene: I forgot to mention Overcooked 2", 0.1, None, jo, between.item.id)
    other = _turn("Deborah: I'll try it", 0.1, None, deb, more.item.id)
    cands = [first, between, more, other, *(_cand(f"unrelated note {i}", 0.1) for i in range(4))]
    cols = features(cands, "What games does Jolene recommend?", np.zeros(len(cands)), None)
    went_on = cols["continues"]
    # The earlier turn's own evidence: 0.3 * cosine + 0.7 * saturated BM25 (6 / (6 + 8)).
    assert went_on[2] == pytest.approx(0.3 * 0.6 + 0.7 * 6.0 / 14.0)
    # Deborah's turn two after her own carries her own (weak) evidence; the first two have
    # no turn two before them.
    assert went_on[3] == pytest.approx(0.3 * 0.1) and went_on[0] == 0.0 and went_on[1] == 0.0
    assert not went_on[4:].any()


def test_a_turn_goes_on_only_between_two_named_speakers() -> None:
    # One person's three turns in a row, turns that name no speaker, and the assistant in
    # between: no conversation of two people to go back to.
    a = _turn("Jo: games I like: Zelda", 0.6, 6.0, {"speaker": "Jo"}, None)
    b = _turn("Jo: and more", 0.1, None, {"speaker": "Jo"}, a.item.id)
    c = _turn("Jo: Overcooked too", 0.1, None, {"speaker": "Jo"}, b.item.id)
    d = _turn("games I like: Zelda", 0.6, 6.0, {}, None)
    e = _turn("ok", 0.1, None, {}, d.item.id)
    f = _turn("Overcooked too", 0.1, None, {}, e.item.id)
    g = _turn("Ann: games I like: Zelda", 0.6, 6.0, {"speaker": "Ann"}, None)
    h = _turn("Sure, noted", 0.1, None, {"role": "assistant", "speaker": "bot"}, g.item.id)
    i = _turn("Ann: Overcooked too", 0.1, None, {"speaker": "Ann"}, h.item.id)
    cols = features([a, b, c, d, e, f, g, h, i], "games", np.zeros(9), None)
    assert not cols["continues"].any()


def test_the_framing_of_a_count_matches_no_memory(tmp_path: Path) -> None:
    """The words "the total number of" and "how many times" say how to count, not what: a
    memory that shares only those words ("Add the total number of rows") is no match."""
    with _september(
        tmp_path,
        "Add the total number of rows to the table for each country.",
        "We tried three different routes up the hill, all of them steep.",
        "Count how many times the word appears in the text.",
        "My sister is two years older than me and my brother lives in Lisbon.",
        "I repainted the kitchen a pale green.",
    ) as mem:
        # main: the rows of the table first, then the word count first
        for query in (
            "What is the total number of siblings I have?",
            "How many times did I visit my siblings?",
        ):
            hits = mem.search(query, user_id="u", limit=3, touch=False, explain=True)
            assert hits[0].item.content.startswith("My sister"), query
        total = mem.search(
            "What is the total number of siblings I have?", user_id="u", limit=5, touch=False, explain=True
        )
        assert all(h.breakdown["keyword_bm25"] == 0.0 for h in total)


def _said(content: str, when: datetime) -> dict[str, object]:
    """A memory of user u, said at ``when``."""
    return {"content": content, "user_id": "u", "occurred_at": when}


def _one_a_day(month: int, *texts: str) -> list[dict[str, object]]:
    """User u's memories, one a day from the 1st of ``month`` 2023."""
    return [_said(text, datetime(2023, month, day, tzinfo=UTC)) for day, text in enumerate(texts, start=1)]


def _september(tmp_path: Path, *texts: str) -> Memory:
    """A store whose clock reads 1 October 2023, holding user u's ``texts`` one a day
    from 1 September."""
    now = datetime(2023, 10, 1, tzinfo=UTC)
    mem = Memory.open(tmp_path / "m.db", clock=lambda: now)
    mem.import_items(_one_a_day(9, *texts))
    return mem


def test_a_memory_that_only_asks_counts_less(tmp_path: Path) -> None:
    """A question tells nothing: "Did you enjoy the pottery class?" shares the query's
    words, yet the memory that says what happened there answers it. When the query is
    itself a request ("Any tips ...?"), the earlier request keeps all its evidence."""
    with _september(
        tmp_path,
        "Hey! Did you enjoy the pottery class at the community center last weekend?",
        "I took a pottery class at the community center and made a bowl.",
        "I repainted the kitchen a pale green.",
        "Can you recommend a good pottery class near the community center?",
        "My sister plays the cello.",
    ) as mem:
        # main: the request, then the statement, then the question (equal scores)
        for query in (
            "What did I make at the pottery class at the community center?",
            "Where did I take a pottery class?",
        ):
            hits = mem.search(query, user_id="u", limit=3, touch=False, explain=True)
            assert hits[0].item.content.startswith("I took"), query
            assert hits[0].breakdown["similarity.only_asks"] == 0.0
            assert all(h.breakdown["similarity.only_asks"] < 0 for h in hits[1:]), query
            assert any("only asks" in line for line in explain_lines(hits[1].breakdown))
        tips = mem.search("Any tips for a pottery class?", user_id="u", limit=3, touch=False, explain=True)
        assert tips[0].item.content.startswith("Can you recommend")
        assert all(h.breakdown.get("similarity.only_asks", 0.0) == 0.0 for h in tips)


def test_a_bounded_time_ranks_what_lies_on_its_side(tmp_path: Path) -> None:
    """ "before March" is a window up to 1 March, not on March; "after March" from 1 April."""
    with Memory.open(tmp_path / "m.db") as mem:
        mem.import_items(
            [
                _said("I had ramen for dinner", datetime(2023, 2, 10, tzinfo=UTC)),
                _said("I had sushi for dinner", datetime(2023, 3, 10, tzinfo=UTC)),
                _said("I had tacos for dinner", datetime(2023, 4, 10, tzinfo=UTC)),
            ]
        )

        def first(query: str) -> str:
            return mem.search(query, user_id="u", touch=False)[0].item.content.split()[2]

        assert first("What did I have for dinner before March 2023?") == "ramen"
        assert first("What did I have for dinner in March 2023?") == "sushi"
        assert first("What did I have for dinner after March 2023?") == "tacos"
        assert first("2023年3月之前我晚饭吃了什么？") == "ramen"
        # Two times joined: one window over both months, the month after it last.
        hits = mem.search(
            "What did I have for dinner between February and March 2023?", user_id="u", touch=False
        )
        assert [h.item.content.split()[2] for h in hits][2] == "tacos"


def test_a_later_version_does_not_hide_the_one_said_in_the_named_time(tmp_path: Path) -> None:
    """Three near-copies: the later ones read as newer versions of the first, yet asked about
    July, what was said in July comes first (what held then, not what holds now)."""
    with Memory.open(tmp_path / "m.db", clock=lambda: datetime(2025, 11, 20, tzinfo=UTC)) as mem:
        mem.import_items(
            [
                _said("Went kayaking on the lake with my brother", datetime(2025, 7, 12, tzinfo=UTC)),
                _said("Went kayaking on the river with my brother", datetime(2025, 10, 4, tzinfo=UTC)),
                _said("Went kayaking on the bay with my brother", datetime(2025, 11, 15, tzinfo=UTC)),
            ]
        )

        def first(query: str) -> str:
            return mem.search(query, user_id="u", touch=False)[0].item.content.split()[4]

        assert first("Where did I go kayaking with my brother in July?") == "lake"
        assert first("Where did I go kayaking with my brother last week?") == "bay"
        assert first("Where do I go kayaking with my brother?") == "bay"  # no time: the latest


def test_a_memory_without_its_own_time_tells_of_one_from_when_it_was_stored(tmp_path: Path) -> None:
    """No occurred_at: what its text says ("in July 2025") is read from its created_at."""
    with Memory.open(tmp_path / "m.db", clock=lambda: datetime(2025, 6, 18, tzinfo=UTC)) as mem:
        mem.import_items(
            [
                {
                    "content": "Cannot travel abroad in July 2025: the passport is being renewed",
                    "user_id": "u",
                },
                _said("Took the train abroad to see the lakes", datetime(2025, 6, 2, tzinfo=UTC)),
            ]
        )
        hits = mem.search("Can he travel abroad in July?", user_id="u", touch=False, explain=True)
        assert hits[0].item.content.startswith("Cannot"), [h.item.content for h in hits]
        assert hits[0].breakdown["time.told"] == 1.0


def test_what_the_user_said_comes_before_the_assistant_s_reply(tmp_path: Path) -> None:
    """A question about the user is answered by what the user said; the assistant's reply
    keeps RankConfig.assistant_factor of its match, unless the query asks what the
    assistant said."""
    with Memory.open(tmp_path / "m.db", clock=lambda: datetime(2025, 11, 20, tzinfo=UTC)) as mem:
        mem.import_items(
            [
                _said("I took up pottery on weekends", datetime(2025, 11, 1, tzinfo=UTC)),
                {
                    "content": "Pottery on weekends sounds relaxing; a wheel class could be a good next step.",
                    "user_id": "u",
                    "source": "ai",
                    "occurred_at": datetime(2025, 11, 1, 0, 1, tzinfo=UTC),
                },
            ]
        )
        hits = mem.search("What hobby does the user have?", user_id="u", touch=False, explain=True)
        assert hits[0].item.content.startswith("I took up pottery"), [h.item.content for h in hits]
        assistant = next(h for h in hits if h.item.source.value == "ai")
        assert assistant.breakdown["contribution.assistant"] < 0
        # Asked what was recommended: no discount.
        hits = mem.search("What did you recommend for my hobby?", user_id="u", touch=False, explain=True)
        assistant = next(h for h in hits if h.item.source.value == "ai")
        assert "contribution.assistant" not in assistant.breakdown
