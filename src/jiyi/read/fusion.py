"""Learned fusion: how much each signal counts, adapted to the query and the store.

Fixed weights tuned on one benchmark fail elsewhere: on LoCoMo (short conversational
turns, a weak embedder match) keyword and neighbour evidence carry the result, on
LongMemEval_S (long self-contained messages) the embedder does, and across Chinese and
English keywords cannot meet at all (docs/benchmarks.md). So each candidate's evidence is
a small set of features and the fused evidence is a linear function of them whose weights
were fitted on the development halves of all three sets together (``bench/fusion.py``;
reported on the other halves). Two features of the query and its pool let the weights
adapt instead of being one compromise:

* ``agree``: how many of the ten best candidates by cosine are also among the ten best
  by BM25 (0..1). When the two agree the embedder is on the right track and counts more.
* ``length``: the log of the pool's mean text length (a Han character counting as three
  letters). Short turns are understood through their neighbours; long messages stand
  alone.

The features of one candidate (all from the search's own pool):

* ``cos``, ``cos_n``: cosine of the item and the best of its thread neighbours;
* ``kw``, ``kw_n``: BM25 saturated into 0..1 (``bm25 / (bm25 + 8)``), item and neighbours;
* ``cover``, ``cover_n``: IDF-weighted share of the query's terms found in the item (IDF
  over the pool) and the best of its neighbours';
* ``near``: the best neighbour's own mixed evidence (a turn read with the one before it);
* ``time``: 1 when the item happened inside a time the query names;
* ``across``: for an item in the other language (Chinese vs English), its cosine above
  the pool's median, since keywords cannot match across languages;
* ``cos_cover``, ``cos_sq``: the curvature the fit found (a high cosine with full term
  coverage is worth less than the sum of the two);
* the products of six of them with ``length`` and ``agree``.

The fused value ``s`` ranks. It is mapped to ``similarity = 1 / (1 + exp(-(s - SIM_CENTRE)))``
for the seed formulas (spread over 0..1 so that a better match outweighs small
differences in confidence and scope). Whether anything relevant was found at all is a
separate question, answered on absolute evidence by :func:`jiyi.read.rank.relevances`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

import numpy as np

from jiyi.model import MemoryItem
from jiyi.store.base import Candidate

FEATURES = (
    "cos",
    "cos_n",
    "kw",
    "kw_n",
    "time",
    "cover",
    "cover_n",
    "near",
    "cos_cover",
    "cos_sq",
    "across",
    "cos*length",
    "cos_n*length",
    "kw*length",
    "kw_n*length",
    "near*length",
    "cover*length",
    "cos*agree",
    "cos_n*agree",
    "kw*agree",
    "kw_n*agree",
    "near*agree",
    "cover*agree",
)
"""Feature names, in the order of :data:`WEIGHTS`."""

ADAPTED = ("cos", "cos_n", "kw", "kw_n", "near", "cover")
"""The features whose weight moves with the pool's text length and the parts' agreement."""

SIGNALS = {
    "vector": ("cos", "cos_sq", "cos*length", "cos*agree"),
    "keyword": ("kw", "cover", "cos_cover", "kw*length", "cover*length", "kw*agree", "cover*agree"),
    "neighbours": (
        "cos_n",
        "kw_n",
        "cover_n",
        "near",
        "cos_n*length",
        "kw_n*length",
        "near*length",
        "cos_n*agree",
        "kw_n*agree",
        "near*agree",
    ),
    "time": ("time",),
    "language": ("across",),
}
"""Which features make up each signal shown in a search's breakdown (``similarity.*``)."""

WEIGHTS = np.array(
    [
        4.8883,  # cos
        2.2405,  # cos_n
        1.1278,  # kw
        1.7978,  # kw_n
        4.5887,  # time
        1.6266,  # cover
        -0.0454,  # cover_n
        2.4408,  # near
        -7.5256,  # cos_cover
        -8.3276,  # cos_sq
        6.9716,  # across
        2.3430,  # cos*length
        0.1601,  # cos_n*length
        -0.1711,  # kw*length
        -0.9357,  # kw_n*length
        1.5551,  # near*length
        1.2026,  # cover*length
        -1.8361,  # cos*agree
        -2.9189,  # cos_n*agree
        -1.5995,  # kw*agree
        -2.0998,  # kw_n*agree
        -2.2127,  # near*agree
        -1.3102,  # cover*agree
    ]
)
"""Fitted by ``python bench/fusion.py fit`` on the development halves (LongMemEval_S even
lines, LoCoMo conversations 1-5, zh/en personas lin and emma); figures of the other
halves in docs/benchmarks.md. The negative curvature terms (``cos_cover``, ``cos_sq``)
and the ``agree`` products are what the fit found; read together with their positive
partners they make each signal's weight fall as it saturates."""

SIM_CENTRE = 8.4545
"""Fused value at which similarity is 0.5: the mean 10th-best value over the development
pools, so a typical top-10 result has similarity above 0.5."""

KW_SATURATION = 8.0
"""BM25 score at which the keyword evidence reaches half of its maximum."""

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[a-z\u00c0-\u024f]+")
_SAME_LANGUAGE_GAP = 0.2
_LANGUAGE_SPAN = 0.6
_AGREE_TOP = 10


@functools.lru_cache(maxsize=8192)
def _letters(text: str) -> tuple[int, int]:
    """The Han characters and the Latin letters of a text. Kept per text: a search asks
    this of every candidate, and the same memories come back search after search."""
    low = text.lower()
    return len(_HAN.findall(low)), len("".join(_LATIN.findall(low)))


def han_share(text: str) -> float:
    """How Chinese a text is, 0..1: Han characters against Latin letters (three letters
    counting as one character, about one syllable each); 0.5 when it has neither."""
    han, letters = _letters(text)
    latin = letters / 3.0
    return han / (han + latin) if han + latin else 0.5


def other_language(query: str, texts: Sequence[str]) -> np.ndarray:
    """0..1 per text: how far its language is from the query's (Chinese vs English);
    code-switched text sits in between."""
    q = han_share(query)
    gap = np.abs(np.array([han_share(t) for t in texts], dtype=np.float64) - q)
    return np.asarray(np.clip((gap - _SAME_LANGUAGE_GAP) / _LANGUAGE_SPAN, 0.0, 1.0), dtype=np.float64)


def _arr(values: Sequence[float | None]) -> np.ndarray:
    return np.maximum(np.array([v or 0.0 for v in values], dtype=np.float64), 0.0)


def neighbour_index(cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """Positions of each candidate's previous and next item among the candidates (-1: absent)."""
    pos = {c.item.id: i for i, c in enumerate(cands)}
    prev = np.array([pos.get(c.prev_id, -1) if c.prev_id else -1 for c in cands], dtype=np.int64)
    nxt = np.array([pos.get(c.next_id, -1) if c.next_id else -1 for c in cands], dtype=np.int64)
    return prev, nxt


def at_neighbours(values: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """The larger of each candidate's two neighbours' values (0 where there is none)."""
    p = np.where(prev >= 0, values[np.maximum(prev, 0)], 0.0)
    n = np.where(nxt >= 0, values[np.maximum(nxt, 0)], 0.0)
    return np.asarray(np.maximum(p, n), dtype=np.float64)


def _agreement(cos: np.ndarray, bm25: np.ndarray) -> float:
    """Share of the best candidates by cosine that are also among the best by BM25 (only
    candidates the keyword search matched count as keyword-best)."""
    k = min(_AGREE_TOP, len(cos))
    if k == 0:
        return 0.0
    by_cos = set(np.argsort(-cos, kind="stable")[:k].tolist())
    matched = np.flatnonzero(bm25 > 0)
    by_kw = set(matched[np.argsort(-bm25[matched], kind="stable")][:k].tolist())
    return len(by_cos & by_kw) / k


def _length(texts: Sequence[str]) -> float:
    """Log of the mean text length, a Han character counting as three letters."""
    if not texts:
        return 0.0
    mean = sum(len(t) + 2 * _letters(t)[0] for t in texts) / len(texts)
    return float(np.log(max(mean, 1.0)))


def features(
    cands: Sequence[Candidate],
    query: str,
    coverage: np.ndarray,
    in_time: Callable[[MemoryItem], bool] | None,
) -> dict[str, np.ndarray]:
    """Every feature of every candidate, as columns (see the module docstring).
    ``coverage`` is each candidate's own term coverage (``jiyi.read.rank.term_coverage``
    with ``neighbours=False``)."""
    n = len(cands)
    cos = _arr([c.cosine for c in cands])
    bm25 = _arr([c.keyword for c in cands])
    cos_n = np.maximum(_arr([c.prev_cosine for c in cands]), _arr([c.next_cosine for c in cands]))
    bm25_n = np.maximum(_arr([c.prev_keyword for c in cands]), _arr([c.next_keyword for c in cands]))
    kw = bm25 / (bm25 + KW_SATURATION)
    kw_n = bm25_n / (bm25_n + KW_SATURATION)
    prev, nxt = neighbour_index(cands)
    mixed_kw = (bm25 + 0.5 * bm25_n) / (bm25 + 0.5 * bm25_n + KW_SATURATION)
    mixed = 0.3 * (cos + 0.7 * cos_n) / 1.7 + 0.7 * mixed_kw
    across = other_language(query, [c.item.content for c in cands]) if n else np.zeros(0)
    cols: dict[str, np.ndarray] = {
        "cos": cos,
        "cos_n": cos_n,
        "kw": kw,
        "kw_n": kw_n,
        "time": np.array([1.0 if in_time is not None and in_time(c.item) else 0.0 for c in cands]),
        "cover": coverage,
        "cover_n": at_neighbours(coverage, prev, nxt),
        "near": at_neighbours(mixed, prev, nxt),
        "cos_cover": cos * coverage,
        "cos_sq": cos**2,
        "across": across * np.maximum(cos - (np.median(cos) if n else 0.0), 0.0),
    }
    length = _length([c.item.content for c in cands])
    agree = _agreement(cos, bm25)
    for name in ADAPTED:
        cols[f"{name}*length"] = cols[name] * length
        cols[f"{name}*agree"] = cols[name] * agree
    return cols


def fused(cols: dict[str, np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
    """The fused evidence ``s`` of every candidate."""
    w = WEIGHTS if weights is None else weights
    matrix = np.stack([cols[name] for name in FEATURES], axis=1)
    return np.asarray(matrix @ w, dtype=np.float64)


def signal_parts(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each signal's share of ``s`` (they sum to it), for the breakdown."""
    index = {name: i for i, name in enumerate(FEATURES)}
    return {
        signal: sum((WEIGHTS[index[name]] * cols[name] for name in names), np.zeros(len(cols["cos"])))
        for signal, names in SIGNALS.items()
    }


def similarity(s: np.ndarray) -> np.ndarray:
    """``s`` spread over 0..1 (monotone), for the seed formulas."""
    return np.asarray(1.0 / (1.0 + np.exp(-(s - SIM_CENTRE))), dtype=np.float64)
