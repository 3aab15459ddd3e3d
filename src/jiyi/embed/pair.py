"""Two embedders as one: cosine = a * cos(first) + (1 - a) * cos(second).

Each model's unit vector is scaled by sqrt(a) and sqrt(1 - a) and the two are placed side
by side, so the result is again a unit vector and its dot product with another one is the
weighted sum of the two models' cosines. Nothing in the store changes: it is one vector
of the summed width under one ``model_id``. The spec ``"pair"`` is e5 (strong within a
language) with USE-m3 (strong across Chinese and English); see docs/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jiyi.embed.base import Embedder, Vectors, embed_texts, normalise
from jiyi.errors import ConfigError, InvalidInput

# Chosen on the development halves (LoCoMo conversations 1-5, zh/en personas lin and emma).
DEFAULT_PAIR_WEIGHT = 0.5


class PairEmbedder:
    """``first`` weighted ``weight``, ``second`` weighted ``1 - weight``."""

    def __init__(self, first: Embedder, second: Embedder, weight: float = DEFAULT_PAIR_WEIGHT) -> None:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < weight < 1.0:
            raise ConfigError(f"pair weight must be a number strictly between 0 and 1, not {weight!r}")
        self._first = first
        self._second = second
        self._weight = float(weight)
        self._scales = (math.sqrt(self._weight), math.sqrt(1.0 - self._weight))

    @property
    def model_id(self) -> str:
        return f"pair:{self._weight:g}:{self._first.model_id}+{self._second.model_id}"

    @property
    def weight(self) -> float:
        return self._weight

    def __repr__(self) -> str:
        return f"PairEmbedder({self._first!r}, {self._second!r}, weight={self._weight:g})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """Search queries: each model's own query vectors (``embed_query``) when it has them."""
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], *, query: bool) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        if not batch:
            return np.zeros((0, 0), dtype=np.float32)
        a = normalise(embed_texts(self._first, batch, query=query), len(batch), self._first.model_id)
        b = normalise(embed_texts(self._second, batch, query=query), len(batch), self._second.model_id)
        out = np.concatenate([a * self._scales[0], b * self._scales[1]], axis=1)
        return np.ascontiguousarray(out, dtype=np.float32)
