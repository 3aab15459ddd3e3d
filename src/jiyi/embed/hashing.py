"""A deterministic, dependency-free embedder: feature hashing of character n-grams.

Not semantic: texts that share characters and words land close together, nothing more.
It exists for tests (instant, same vectors on every machine and run) and as a last-resort
fallback when no model can be loaded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from jiyi.embed.base import Vectors
from jiyi.errors import ConfigError, InvalidInput

# CJK ideographs (with extension A and compatibility forms), kana and Hangul: scripts written
# without spaces, where single characters and short runs carry the meaning.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>(?:(?![{_CJK}])[^\W_])+)")


def _features(text: str) -> Iterator[str]:
    """Yield the hashed features of one text; prefixes keep the feature kinds apart."""
    for match in _TOKEN.finditer(text.lower()):
        run = match.group()
        if match.lastgroup == "cjk":
            for n in (1, 2, 3):
                for i in range(len(run) - n + 1):
                    yield "c:" + run[i : i + n]
        else:
            yield "w:" + run
            padded = f"<{run}>"  # boundary markers make prefixes and suffixes distinct features
            for n in (3, 4, 5):
                for i in range(len(padded) - n + 1):
                    yield "g:" + padded[i : i + n]


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python salts str hashes per process, which would change vectors.
    value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    # The top bit picks the sign, so colliding features tend to cancel instead of piling up.
    return value % dim, (1.0 if value >> 63 else -1.0)


class HashEmbedder:
    """Signed feature hashing into ``dim`` buckets, L2-normalised. ``model_id`` is ``hash:{dim}``."""

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"HashEmbedder dim must be a positive integer, not {dim!r}")
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"hash:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                index, sign = _bucket(feature, self._dim)
                out[row, index] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # A text with no letters or digits has no features and stays the zero vector.
        norms[norms == 0] = 1.0
        out /= norms
        return out
