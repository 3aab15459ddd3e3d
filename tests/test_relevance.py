"""``relevance`` and ``search(..., min_relevance=...)``: saying "nothing relevant".

Unit tests for the pure parts in :mod:`jiyi.read.rank` (term presence, IDF coverage, the
relevance curve), then the search API on a real SQLite file with the default embedder.
The set-level measurement is in ``tests/test_retrieval_zh_en.py``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, MemoryType, Scope
from jiyi.read.rank import (
    RECOMMENDED_MIN_RELEVANCE,
    RELEVANCE_CENTRE,
    RELEVANCE_COVERAGE,
    RELEVANCE_NEIGHBOUR,
    RELEVANCE_TIME,
    relevances,
    term_coverage,
    term_presence,
)
from jiyi.store.base import Candidate
from jiyi.store.sqlite import SQLiteStore
from jiyi.text.tokenize import query_terms

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _item(content: str, n: int, occurred_at: datetime | None = None) -> MemoryItem:
    return MemoryItem(
        id=f"m{n}",
        tenant_id="t",
        content=content,
        memory_type=MemoryType.FACT,
        scope=Scope.USER,
        user_id="u",
        created_at=NOW,
        updated_at=NOW,
        occurred_at=occurred_at,
    )


def _cands(texts: list[str], cosines: list[float] | None = None) -> list[Candidate]:
    cos = cosines or [0.0] * len(texts)
    return [Candidate(_item(t, i), c, None, None) for i, (t, c) in enumerate(zip(texts, cos, strict=True))]


# ------------------------------------------------------------------ term presence


def test_presence_follows_the_tokenizer_for_chinese_and_english() -> None:
    texts = [
        "Switched to driving an old Volvo.",  # "drive" -> stem "drive", found in "driving"
        "我们用 Go 写后端",  # a short stem only as a whole word
        "Good morning, everyone",  # "go" is not "good"
        "三张 Ｃａｒｄ 和两辆 cars",  # full-width letters are normalised; plural of a short stem
        "The warranty lasts two years",  # "warranti" meets "warranty"
    ]
    terms = ["drive", "go", "car", "warranti", "后端", "card"]
    found = term_presence(terms, texts)
    assert found.shape == (len(texts), len(terms))
    expected = {
        (0, "drive"),
        (1, "go"),
        (1, "后端"),
        (3, "car"),
        (3, "card"),
        (4, "warranti"),
    }
    got = {(i, terms[j]) for i, j in zip(*np.nonzero(found), strict=True)}
    assert got == expected


def test_presence_agrees_with_query_terms_of_the_same_text() -> None:
    # Whatever the tokenizer makes of a text, those terms are found in that text again.
    for text in (
        "他养的狗叫什么名字？",
        "What car does Emma drive these days?",
        "用 Redis 做幂等 key 的 TTL",
    ):
        terms = list(query_terms(text))
        assert terms
        assert term_presence(terms, [text]).all(), text


# ------------------------------------------------------------------ coverage


def test_coverage_weighs_rare_terms_above_common_ones() -> None:
    # "emma" is in every candidate, "car" in none but the first: covering "car" is
    # worth more than covering the name.
    texts = ["Emma bought a new car", "Emma likes tea", "Emma runs on Sundays", "Emma reads"]
    cov = term_coverage(_cands(texts), ["emma", "car"])
    assert cov[0] == pytest.approx(1.0)
    assert 0.0 < cov[1] < 0.5
    assert cov[1] == pytest.approx(cov[2]) == pytest.approx(cov[3])


def test_coverage_counts_thread_neighbours() -> None:
    items = [_item("What did you cook?", 0), _item("A mushroom risotto", 1), _item("Unrelated turn", 2)]
    cands = [
        Candidate(items[0], 0.1, None, None, next_id="m1"),
        Candidate(items[1], 0.1, None, None, prev_id="m0", next_id="m2"),
        Candidate(items[2], 0.1, None, None, prev_id="m1"),
    ]
    cov = term_coverage(cands, ["cook", "risotto"])
    assert cov[1] == pytest.approx(1.0)  # its own word and its neighbour's
    assert cov[0] == pytest.approx(1.0)  # the answer is in the next turn
    assert 0.0 < cov[2] < 1.0  # only the neighbour's "risotto"


def test_coverage_without_terms_or_candidates_is_zero() -> None:
    assert term_coverage(_cands(["anything"]), []).tolist() == [0.0]
    assert term_coverage([], ["x"]).shape == (0,)


# ------------------------------------------------------------------ the relevance curve


def test_relevance_parts_and_the_curve() -> None:
    march = datetime(2024, 3, 10, tzinfo=UTC)
    items = [
        _item("Allergic to penicillin", 0),
        _item("Has a ginger cat", 1),
        _item("Went to Berlin", 2, occurred_at=march),
        _item("Likes tea", 3),
    ]
    cands = [
        Candidate(items[0], 0.45, None, None),
        Candidate(items[1], RELEVANCE_CENTRE, None, None),
        Candidate(items[2], 0.05, None, None),
        Candidate(items[3], -0.2, None, None, next_id="m1", next_cosine=0.3),
    ]
    cols = relevances(cands, ["penicillin"], lambda item: item.occurred_at == march)
    rel = cols["relevance"]
    assert set(cols) == {"relevance", "relevance.semantic", "relevance.coverage", "relevance.time"}
    assert all(0.0 <= r <= 1.0 for r in rel)
    assert rel[0] > 0.99  # high cosine and the query's only word
    assert rel[1] == pytest.approx(0.5)  # exactly at the centre, nothing else
    # Inside the named time: the time weight is added to its semantic evidence.
    assert cols["relevance.time"].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert rel[2] > 0.5
    # A negative cosine counts as none; a neighbour's cosine counts at a discount.
    assert cols["relevance.semantic"][3] == pytest.approx(RELEVANCE_NEIGHBOUR * 0.3)
    without_time = relevances(cands, ["penicillin"], None)["relevance"]
    assert without_time[2] < 0.5 and np.allclose(np.delete(without_time, 2), np.delete(rel, 2))


def test_relevance_is_monotone_in_each_part() -> None:
    texts = ["alpha beta", "alpha", "gamma", "delta"]
    for cos in (0.0, 0.1, 0.2, 0.3):
        cols = relevances(_cands(texts, [cos] * 4), ["alpha", "beta"], None)
        rel, cov = cols["relevance"], cols["relevance.coverage"]
        assert rel[0] > rel[1] > rel[2] and cov[0] > cov[1] > cov[2] == 0.0
        # The documented formula, exactly.
        z = 23.0 * (cos + RELEVANCE_COVERAGE * cov[0] + RELEVANCE_TIME * 0 - RELEVANCE_CENTRE)
        assert rel[0] == pytest.approx(1 / (1 + math.exp(-z)))


# ------------------------------------------------------------------ search


# Memories written the way extraction stores them (no name in each), Chinese and English.
MEMORIES = [
    "Allergic to penicillin; came out in a bad rash as a child.",
    "Has a ginger cat called Biscuit who is twelve years old.",
    "Works as a senior product designer at Pebble, a London fintech.",
    "最喜欢的中国菜是麻婆豆腐，不过要做素的。",
    "每周三晚上去上陶艺课。",
    "Switched to a Pixel 8 to dogfood the Android app every day.",
    "Her partner Tom teaches chemistry at a secondary school.",
    "Journals for ten minutes every morning before opening Slack.",
]
ANSWERED = {
    "What is she allergic to?": 0,
    "她对什么药过敏？": 0,  # Chinese question, English memory
    "Biscuit": 1,  # one rare word
    "What is her favourite Chinese dish?": 3,  # English question, Chinese memory
    "她养了什么宠物？": 1,
}
UNANSWERED = ["What car does she drive?", "她会弹什么乐器？", "How much rent does she pay?", "她有几个孩子？"]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[tuple[Memory, list[str]]]:
    with Memory(SQLiteStore(tmp_path / "m.db"), clock=lambda: NOW) as m:
        ids = []
        for text in MEMORIES:
            item = m.add(text, memory_type="fact", user_id="u").item
            assert item is not None
            ids.append(item.id)
        yield m, ids


def test_min_relevance_answers_nothing_relevant(mem: tuple[Memory, list[str]]) -> None:
    m, ids = mem
    for query in UNANSWERED:
        assert m.search(query, user_id="u", touch=False), query  # without a cut: always something
        assert m.search(query, user_id="u", min_relevance=RECOMMENDED_MIN_RELEVANCE, touch=False) == [], query
    for query, gold in ANSWERED.items():
        hits = m.search(query, user_id="u", min_relevance=RECOMMENDED_MIN_RELEVANCE, touch=False)
        assert hits and hits[0].item.id == ids[gold], query
        assert all(h.relevance is not None and h.relevance >= RECOMMENDED_MIN_RELEVANCE for h in hits)


def test_relevance_never_changes_the_default_search(mem: tuple[Memory, list[str]]) -> None:
    m, _ = mem
    for query in [*ANSWERED, *UNANSWERED]:
        plain = m.search(query, user_id="u", touch=False)
        explained = m.search(query, user_id="u", explain=True, touch=False)
        zero = m.search(query, user_id="u", min_relevance=0.0, touch=False)
        assert [(h.item.id, h.score) for h in plain] == [(h.item.id, h.score) for h in explained]
        assert [(h.item.id, h.score) for h in plain] == [(h.item.id, h.score) for h in zero]
        assert all(h.relevance is None for h in plain)
        assert not any(k.startswith("relevance") for h in plain for k in h.breakdown)


def test_explain_shows_relevance_and_its_parts(mem: tuple[Memory, list[str]]) -> None:
    m, ids = mem
    hits = m.search("Biscuit", user_id="u", explain=True, touch=False)
    top = hits[0]
    assert top.item.id == ids[1]
    b = top.breakdown
    assert top.relevance == b["relevance"]
    assert b["relevance.coverage"] == pytest.approx(1.0)
    assert b["relevance.semantic"] == pytest.approx(b["cosine"])
    assert b["relevance.time"] == 0.0 and b["min_relevance"] == 0.0
    # The similarity's own parts keep their names and still sum to the fused evidence.
    parts = sum(v for k, v in b.items() if k.startswith("similarity."))
    assert parts == pytest.approx(b["fused"])
    data = top.to_json_dict()
    assert data["relevance"] == pytest.approx(top.relevance, abs=1e-6)
    assert "relevance" not in m.search("Biscuit", user_id="u", touch=False)[0].to_json_dict()


def test_min_relevance_one_keeps_only_certain_hits(mem: tuple[Memory, list[str]]) -> None:
    m, _ = mem
    hits = m.search("她会弹什么乐器？", user_id="u", min_relevance=1.0, touch=False)
    assert hits == []


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), True, "0.5"])
def test_min_relevance_is_checked(mem: tuple[Memory, list[str]], bad: object) -> None:
    m, _ = mem
    with pytest.raises(InvalidInput, match="min_relevance"):
        m.search("cat", user_id="u", min_relevance=bad)  # type: ignore[arg-type]


def test_async_driver_takes_min_relevance(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), clock=lambda: NOW) as m:
            for text in MEMORIES:
                await m.add(text, memory_type="fact", user_id="u")
            none = await m.search("What car does she drive?", user_id="u", min_relevance=0.5)
            some = await m.search("她对什么药过敏？", user_id="u", min_relevance=0.5)
            assert none == [] and some and "penicillin" in some[0].item.content

    asyncio.run(scenario())
