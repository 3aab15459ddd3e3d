"""Embedding inside flows: documents through the persistent cache, queries through the
runtime's in-process cache."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jiyi.effects import Flow, call, embed
from jiyi.embed.base import Vectors
from jiyi.runtime import Runtime
from jiyi.store.base import (
    CacheGet,
    CachePut,
)
from jiyi.store.sqlcommon import text_hash


def embed_documents(rt: Runtime, texts: Sequence[str]) -> Flow[tuple[Vectors, CachePut | None]]:
    """Embed through the persistent cache; returns vectors and the cache rows to add."""
    model = rt.embedder.model_id
    hashes = [text_hash(t) for t in texts]
    cached = yield from call(CacheGet(model, tuple(dict.fromkeys(hashes))))
    missing = [i for i, h in enumerate(hashes) if h not in cached]
    fresh: dict[str, np.ndarray] = {}
    if missing:
        unique = list(dict.fromkeys(texts[i] for i in missing))
        vectors = yield from embed(unique)
        fresh = {text_hash(t): vectors[j] for j, t in enumerate(unique)}
    rows = [cached[h] if h in cached else fresh[h] for h in hashes]
    out = np.vstack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)
    put = CachePut(model, tuple(fresh.items())) if fresh else None
    return out, put


def query_vector(rt: Runtime, query: str) -> Flow[np.ndarray]:
    key = (rt.embedder.model_id, query)
    hit = rt.query_cache.get(key)
    if hit is None:
        vectors = yield from embed([query], query=True)
        hit = vectors[0]
        rt.query_cache.put(key, hit)
    return hit
