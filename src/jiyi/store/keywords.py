"""BM25 over one collection of documents, in memory: SQLite FTS5's ``bm25()``, to the bit.

The SQLite backend scores keyword hits here instead of with an FTS5 ``MATCH`` (see
:mod:`jiyi.store.sqlite`), for two reasons:

* **the collection**: FTS5 counts its whole table (every tenant and scope of the file) in
  a term's document frequency and the average length, so one user's scores moved when
  another user wrote. :class:`~jiyi.store.base.KeywordHits` promises BM25 over the
  searched scopes, which is what PostgreSQL computes; a :class:`KeywordIndex` holds just
  those scopes' documents;
* **time**: at LoCoMo scale the FTS5 query was the slowest part of a search's store work
  (about 0.6 ms of ~5, mostly its per-row ``bm25()`` calls); scoring the query's posting
  lists with numpy takes about a tenth of that.

The formula is FTS5's, with its constants and in its order of floating-point operations,
so a collection that is a whole FTS5 table gets FTS5's scores exactly: for each distinct
query term t of document frequency ``df`` among ``n`` documents,
``idf = ln((n - df + 0.5) / (df + 0.5))`` (1e-6 when not positive) and
``score += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl))``, where ``D`` is the
document's length in tokens: its terms plus the :data:`SCOPE_TOKENS` of the FTS5 table's
scope column, which FTS5 counts too.

Documents sit in the caller's *slots* (a slot is reused after a removal). A removal only
marks the slot's postings stale (each posting carries the slot's generation); they are
dropped when a term's list is next read with as many stale entries as live ones, and all
lists are compacted once stale entries outnumber live ones overall.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable

import numpy as np

from jiyi.text.tokenize import fold_term

K1 = 1.2
B = 0.75
SCOPE_TOKENS = 2
"""Tokens of the scope column of SQLite's FTS5 table (a scope and a tenant token), which
FTS5 counts in every document's length."""


class _Postings:
    """One term's documents: slot, term frequency and the slot's generation when added."""

    __slots__ = ("gens", "slots", "tfs")

    def __init__(self) -> None:
        self.slots = array("q")
        self.tfs = array("q")
        self.gens = array("q")

    def add(self, slot: int, tf: int, gen: int) -> None:
        self.slots.append(slot)
        self.tfs.append(tf)
        self.gens.append(gen)

    def current(self, gen: np.ndarray) -> np.ndarray:
        """Which entries belong to their slot's current document."""
        ok: np.ndarray = (
            np.frombuffer(self.gens, dtype=np.int64) == gen[np.frombuffer(self.slots, dtype=np.int64)]
        )
        return ok

    def keep(self, ok: np.ndarray) -> None:
        self.slots = array("q", np.frombuffer(self.slots, dtype=np.int64)[ok].tobytes())
        self.tfs = array("q", np.frombuffer(self.tfs, dtype=np.int64)[ok].tobytes())
        self.gens = array("q", np.frombuffer(self.gens, dtype=np.int64)[ok].tobytes())


class KeywordIndex:
    """The documents of one collection by slot, scored by BM25 (see the module doc)."""

    def __init__(self, capacity: int = 0) -> None:
        self._postings: dict[str, _Postings] = {}
        self._length = np.zeros(capacity, dtype=np.float64)
        """Each slot's document length in tokens (with the scope tokens); 0: no document."""
        self._distinct = np.zeros(capacity, dtype=np.int64)
        """Each slot's number of distinct terms (its postings)."""
        self._gen = np.zeros(capacity, dtype=np.int64)
        self._entries = 0  # postings held, live or stale
        self._stale = 0
        self.docs = 0
        self.tokens = 0

    def __len__(self) -> int:
        return self.docs

    def put(self, slot: int, terms: str | None) -> None:
        """Make ``terms`` (a space-joined term string; None: no document) the slot's document."""
        self.remove(slot)
        if terms is None:
            return
        if slot >= len(self._gen):
            self._grow(max(slot + 1, len(self._gen) * 3 // 2 + 16))
        counts: dict[str, int] = {}
        words = terms.split()
        for word in words:
            term = fold_term(word)
            counts[term] = counts.get(term, 0) + 1
        gen = int(self._gen[slot])
        postings = self._postings
        for term, tf in counts.items():
            found = postings.get(term)
            if found is None:
                found = postings[term] = _Postings()
            found.add(slot, tf, gen)
        length = len(words) + SCOPE_TOKENS
        self._length[slot] = length
        self._distinct[slot] = len(counts)
        self._entries += len(counts)
        self.docs += 1
        self.tokens += length

    def remove(self, slot: int) -> None:
        """The slot holds no document any more (nothing when it held none)."""
        if slot >= len(self._gen) or not self._length[slot]:
            return
        self._gen[slot] += 1
        self.docs -= 1
        self.tokens -= int(self._length[slot])
        self._stale += int(self._distinct[slot])
        self._length[slot] = 0.0
        self._distinct[slot] = 0
        if self._stale > max(1024, self._entries - self._stale):
            self._compact()

    def scores(self, terms: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """The slots of the documents that hold any of ``terms`` (each folded as the index
        folds, and counted once) and their BM25 scores, in slot order."""
        n = self.docs
        if not n:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        avgdl = self.tokens / n
        total = np.zeros(len(self._gen), dtype=np.float64)
        matched = np.zeros(len(self._gen), dtype=bool)
        for term in dict.fromkeys(fold_term(t) for t in terms):
            found = self._postings.get(term)
            if found is None:
                continue
            slots = np.frombuffer(found.slots, dtype=np.int64)
            tfs = np.frombuffer(found.tfs, dtype=np.int64)
            ok = found.current(self._gen)
            if not ok.all():
                slots, tfs = slots[ok], tfs[ok]
                if 2 * len(slots) <= len(ok):  # as many stale entries as live: drop them
                    found.keep(ok)
                    self._entries -= len(ok) - len(slots)
                    self._stale -= len(ok) - len(slots)
            df = len(slots)
            if not df:
                continue
            idf = math.log((n - df + 0.5) / (df + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            tf = tfs.astype(np.float64)
            total[slots] += idf * (
                (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * self._length[slots] / avgdl))
            )
            matched[slots] = True
        slots = np.flatnonzero(matched)
        return slots, total[slots]

    def _grow(self, capacity: int) -> None:
        for name in ("_length", "_distinct", "_gen"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        for term in list(self._postings):
            found = self._postings[term]
            ok = found.current(self._gen)
            if not ok.any():
                del self._postings[term]
            elif not ok.all():
                found.keep(ok)
        self._entries -= self._stale
        self._stale = 0


def best_first(slots: np.ndarray, scores: np.ndarray, keys: np.ndarray, m: int) -> list[int]:
    """Positions into ``slots`` of the ``m`` best scores (with any ties of the m-th), best
    first, equal scores by ``keys`` ascending (FTS5's ``ORDER BY score DESC, rowid``)."""
    if m < len(slots):
        kth = np.partition(scores, len(scores) - m)[len(scores) - m]
        idx = np.flatnonzero(scores >= kth)
    else:
        idx = np.arange(len(slots))
    order = np.lexsort((keys[idx], -scores[idx]))
    return [int(i) for i in idx[order]]
