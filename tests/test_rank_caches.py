"""What the ranking keeps between searches, and the cheap tests it asks first (session 23):
the same answers as the work they save, pool after pool."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from jiyi.model import RESOURCE_TAG, MemoryItem, MemoryType
from jiyi.read.fusion import _median, phrase_evidence, pool_text
from jiyi.read.rank import asked_terms, term_presence
from jiyi.read.versions import (
    is_later_on_topic,
    is_later_restatement,
    is_newer_version,
    is_replaced_in_summary,
    is_said_change,
    may_follow,
)
from jiyi.store.base import Candidate
from jiyi.text.tokenize import normalise, query_terms
from jiyi.write.reconcile import ReconcileConfig


def test_the_pool_text_is_each_pools_own() -> None:
    first = ("I drive a Honda Civic", "我住在上海")
    second = ("I drive a Tesla now", "我住在上海")
    norm, joined, starts = pool_text(first)
    assert list(norm) == joined.split("\x00") == [normalise(t) for t in first]
    assert starts == (0, len(normalise(first[0])) + 1)
    # Another pool after it, then the first again: each gets its own texts' answer.
    assert term_presence(["civic", "上海"], first).tolist() == [[True, False], [False, True]]
    assert term_presence(["civic", "上海"], second).tolist() == [[False, False], [False, True]]
    assert term_presence(["civic", "上海"], first).tolist() == [[True, False], [False, True]]
    assert term_presence(["civic"], []).shape == (0, 1)


def test_phrase_evidence_finds_pairs_as_a_scan_of_every_text_would() -> None:
    texts = [
        "My high school friend visited",
        "school high jump",
        "Nothing here",
        "high school reunion next week",
        "my friend from high school",
    ]
    query = "Who was my high school friend?"
    got = phrase_evidence(query, texts)
    assert got[0] > 0 and got[3] > 0 and got[4] > 0
    assert got[1] == 0 and got[2] == 0
    # The same texts in another order: the same evidence per text.
    order = [4, 2, 0, 3, 1]
    again = phrase_evidence(query, [texts[i] for i in order])
    assert again.tolist() == [got[i] for i in order]


@pytest.mark.parametrize("n", [1, 2, 3, 10, 11, 131])
def test_median_is_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    values = np.maximum(rng.normal(0.3, 0.2, n), 0.0)
    assert _median(values) == np.median(values)
    values[0] = np.nan
    assert np.isnan(_median(values)) and np.isnan(np.median(values))


def test_asked_terms_are_the_query_terms() -> None:
    for query in ("Where does Melanie live now?", "我现在住在哪里？", ""):
        assert asked_terms(query) == query_terms(query)


def _turn(text: str, day: int, user: str = "u", **metadata: object) -> Candidate:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
    item = MemoryItem(
        content=text,
        user_id=user,
        memory_type=MemoryType.EVENT,
        tags=[RESOURCE_TAG],
        occurred_at=at,
        metadata=metadata,
    )
    return Candidate(item, 0.5, None, np.ones(4) / 2.0)


def _fact(text: str, day: int, user: str = "u") -> Candidate:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
    item = MemoryItem(content=text, user_id=user, memory_type=MemoryType.FACT, occurred_at=at)
    return Candidate(item, 0.5, None, np.ones(4) / 2.0)


def test_a_pair_that_may_not_follow_passes_no_test_of_a_version() -> None:
    """The ranking skips a pair :func:`may_follow` rules out: every test would say no."""
    pool = [
        _turn("The server has 32 GB of RAM", 1, role="user"),
        _turn("We upgraded the server to 64 GB of RAM", 2, role="user"),
        _fact("The server has 32 GB of RAM", 3),
        _fact("I drive a Honda Civic", 1),
        _fact("I sold the Civic and bought a Tesla Model 3", 2),
        _fact("I sold the Civic and bought a Tesla Model 3", 2, user="v"),
        _turn("I have news. My defence moved. It's now June 23rd.", 4, role="user"),
        _turn("My defence is on May 12th", 3, role="user"),
    ]
    asked = frozenset(query_terms("When is the defence? How much RAM? What car?"))
    cfg = ReconcileConfig()
    ruled_out = 0
    for older, newer in itertools.permutations(pool, 2):
        if may_follow(newer, older):
            continue
        ruled_out += 1
        assert not is_newer_version(newer, older, cfg)
        assert not is_later_restatement(newer, older, 0.0)
        assert not is_replaced_in_summary(newer, older)
        assert not is_said_change(newer, older, asked)
        assert not is_later_on_topic(newer, older, asked, 0.0)
    assert ruled_out > len(pool)
    assert may_follow(pool[1], pool[0]) and not may_follow(pool[0], pool[1])
    assert not may_follow(pool[5], pool[3])  # another user's
