"""jiyi's own parts, ranked alone over the same index in the same run (PROTOCOL section 5).

Every retrieval benchmark prints, beside jiyi's ranking, what its parts give alone:

- ``cosine``: the store's vector search with jiyi's own embedder (``VectorHits``);
- ``bm25``: the store's keyword search (``KeywordHits``: jiyi's index terms, English
  stemming and stop words, jieba for Chinese) over the query text as is;
- ``rrf``: their reciprocal-rank fusion, ``sum 1 / (60 + rank)``.

They read the same store a ``Memory`` wrote, through the primitives ``Memory.search``
itself is built on, so a difference between jiyi and a part is the ranking's doing.
Also a caching embedder, so that a benchmark that builds many stores over overlapping
texts (LongMemEval's haystacks) embeds each text once.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from jiyi.embed.base import Embedder, embed_texts
from jiyi.memory import Memory
from jiyi.store.base import Filter, GetItems, KeywordHits, VectorHits
from jiyi.text.tokenize import query_terms
from jiyi.validate import scope_keys

PARTS = ("cosine", "bm25", "rrf")
RRF_K = 60
# A summary line's prefix: "user: " (pasted sentences) or "- Fact: " / "- 决定：" (the
# offline digest, jiyi.session.digest: a label, then the statement in the user's words).
_ROLE_PREFIX = re.compile(r"^(?:-\s+)?(?:user|assistant|[^:：\s][^:：]{0,11})\s*[:：]\s*", re.IGNORECASE)
_NON_WORD = re.compile(r"\W+")


def _key(text: str) -> str:
    return _NON_WORD.sub("", text.casefold())


MAPPED_ACTIONS = frozenset(
    {"add", "keep_both", "reinforce", "update", "merge", "supersede", "episode", "resource"}
)
"""Pipeline outcomes that leave a stored item standing for the turn (or, for an episode, the
turns) it came from; "rejected" and the like store nothing."""


class SetClock:
    """A pipeline benchmark's clock: what the store sees as now, set by the benchmark (moved
    to each session's date while it is ingested)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def record_sources(
    outcome: Any, turn_ids: Sequence[str], contents: Sequence[str], sources: dict[str, dict[str, None]]
) -> None:
    """Map the item a pipeline ``outcome`` stored or reinforced to the ids of the session's
    turns it came from (``turn_ids``, one per text of ``contents``): its turn, or an
    episode's quoted turns. A replacement also stands for what it replaced, since search
    routes the replaced item's wording to it."""
    if outcome.action not in MAPPED_ACTIONS or not outcome.item_id:
        return
    if outcome.action == "episode":
        turns = quoted_turns(outcome.candidate.content, contents)
    else:
        i = outcome.candidate.turn_index
        turns = [i] if i is not None and 0 <= i < len(turn_ids) else []
    mapped = sources.setdefault(outcome.item_id, {})
    if outcome.action == "supersede" and outcome.target_id:
        mapped.update(sources.get(outcome.target_id, {}))
    mapped.update(dict.fromkeys(turn_ids[i] for i in turns))


def quoted_turns(summary: str, contents: Sequence[str]) -> list[int]:
    """The indices of ``contents`` an extractive episode summary took its lines from (a
    line, without its label, inside the turn's text), in the summary's order."""
    keys = [_key(c) for c in contents]
    out: list[int] = []
    for line in summary.splitlines():
        k = _key(_ROLE_PREFIX.sub("", line.strip()))
        if not k:
            continue
        for i, turn_key in enumerate(keys):
            if k in turn_key:
                out.append(i)
                break
    return list(dict.fromkeys(out))


def rrf(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion of id lists (ties keep first-seen order)."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, item_id in enumerate(ranking, 1):
            score[item_id] = score.get(item_id, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda i: -score[i])


def part_rankings(mem: Memory, query: str, user_id: str, now: datetime, k: int) -> dict[str, list[str]]:
    """Item ids ranked by each part alone (``PARTS``), ``k`` each (RRF of the two lists)."""
    flt = Filter(tenant_id=mem.tenant_id, scope_keys=scope_keys(user_id, None, None, None), now=now)
    vector = embed_texts(mem.embedder, [query], query=True)[0]
    cos = [h.id for h in mem.store.execute(VectorHits(flt, mem.embedder.model_id, vector, k))]
    terms = query_terms(query)
    bm25 = [h.id for h in mem.store.execute(KeywordHits(flt, terms, k))] if terms else []
    return {"cosine": cos, "bm25": bm25, "rrf": rrf(cos, bm25)[:k]}


def source_ids(mem: Memory, rankings: dict[str, list[str]]) -> dict[str, list[str]]:
    """The rankings with each item id replaced by the item's ``source_id``."""
    wanted = tuple(dict.fromkeys(i for ids in rankings.values() for i in ids))
    items = mem.store.execute(GetItems(mem.tenant_id, wanted)) if wanted else []
    source = {item.id: item.source_id or "" for item in items}
    return {name: [source.get(i, "") for i in ids] for name, ids in rankings.items()}


class CachingEmbedder:
    """Wraps an embedder: each distinct text is embedded once per process (and, with
    ``path``, once across runs: vectors are kept in a ``.npz`` file keyed by text hash).
    ``model_id`` is the wrapped one's, so stores see the same model."""

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        self.inner = inner
        self.path = path
        self.cache: dict[str, np.ndarray] = {}
        self._dirty = False
        if path is not None and path.exists():
            with np.load(path) as data:
                self.cache = {k: data[k] for k in data.files}

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Queries through the inner embedder's ``embed_query`` when it has one (kept apart
        in the cache: ``q_`` keys); otherwise the same vectors as ``embed``."""
        if not hasattr(self.inner, "embed_query"):
            return self._embed(texts, query=False)
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        prefix = "q_" if query else ""
        keys = [prefix + hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if missing:
            first = dict(zip(keys, texts, strict=True))
            vectors = embed_texts(self.inner, [first[k] for k in missing], query=query)
            self.cache.update(zip(missing, vectors, strict=True))
            self._dirty = True
        return np.stack([self.cache[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        if self.path is not None and self._dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One temporary file per process: two runs may share a cache file.
            tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, **self.cache)
            tmp.replace(self.path)
            self._dirty = False
