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

Documents sit in the caller's *slots* (a slot is reused after a removal). A scope's documents
are loaded in bulk (:meth:`KeywordIndex.load`: one sort builds every term's posting list at
once, as offsets into shared arrays; a first search of a 1,000-memory scope pays for it);
later documents go to small per-term lists. A removal only marks the slot's postings stale
(each posting carries the slot's generation); once stale postings outnumber live ones, all
lists are rebuilt from the live ones.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable

import numpy as np

from jiyi.text.tokenize import fold_term, fold_terms

K1 = 1.2
B = 0.75
SCOPE_TOKENS = 2
"""Tokens of the scope column of SQLite's FTS5 table (a scope and a tenant token), which
FTS5 counts in every document's length."""

_FOLDED = re.compile("[\u00c0-\u024f\u1e00-\u1eff]")
"""The letters :func:`~jiyi.text.tokenize.fold_term` changes beyond lower-casing."""


def _counts(terms: str) -> tuple[dict[str, int], int]:
    """A term string's distinct folded terms with their frequencies, and its length."""
    text = terms.lower()
    if not text.isascii() and _FOLDED.search(text):
        text = fold_terms(text)
    words = text.split()
    once = dict.fromkeys(words, 1)
    return (once if len(once) == len(words) else Counter(words)), len(words)


class _Postings:
    """One term's documents added after the bulk load: slot, frequency, slot generation."""

    __slots__ = ("gens", "slots", "tfs")

    def __init__(self) -> None:
        self.slots = array("q")
        self.tfs = array("q")
        self.gens = array("q")


class KeywordIndex:
    """The documents of one collection by slot, scored by BM25 (see the module doc)."""

    def __init__(self, capacity: int = 0) -> None:
        self._vocab: dict[str, int] = {}
        # The bulk-loaded postings, by term id: entries ptr[t]:ptr[t + 1] of the arrays.
        self._ptr = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int64)
        self._tfs = np.zeros(0, dtype=np.int64)
        self._gens = np.zeros(0, dtype=np.int64)
        self._tail: dict[int, _Postings] = {}
        """Postings of documents put after the bulk load, by term id."""
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

    def load(self, docs: Iterable[tuple[int, str | None]]) -> None:
        """Put every ``(slot, terms)`` of ``docs`` into this empty index at once."""
        if self.docs or self._entries:
            raise ValueError("load() fills an empty index; put() adds to one")
        vocab = self._vocab
        slot_col: list[int] = []
        keys: list[str] = []
        tfs: list[int] = []
        lengths: dict[int, tuple[int, int]] = {}
        for slot, terms in docs:
            if terms is None:
                continue
            counts, n_words = _counts(terms)
            keys.extend(counts)
            tfs.extend(counts.values())
            slot_col.extend([slot] * len(counts))
            lengths[slot] = (n_words + SCOPE_TOKENS, len(counts))
        if not lengths:
            return
        top = max(lengths)
        if top >= len(self._gen):
            self._grow(top + 1)
        for slot, (length, distinct) in lengths.items():
            self._length[slot] = length
            self._distinct[slot] = distinct
            self.tokens += length
        self.docs = len(lengths)
        ids = np.array([vocab.setdefault(k, len(vocab)) for k in keys], dtype=np.int64)
        self._set_base(ids, np.array(slot_col, dtype=np.int64), np.array(tfs, dtype=np.int64), None)

    def _set_base(self, ids: np.ndarray, slots: np.ndarray, tfs: np.ndarray, gens: np.ndarray | None) -> None:
        order = np.argsort(ids, kind="stable")
        self._ptr = np.concatenate(([0], np.cumsum(np.bincount(ids, minlength=len(self._vocab))))).astype(
            np.int64
        )
        self._slots, self._tfs = slots[order], tfs[order]
        self._gens = self._gen[self._slots] if gens is None else gens[order]
        self._entries = len(ids)

    def put(self, slot: int, terms: str | None) -> None:
        """Make ``terms`` (a space-joined term string; None: no document) the slot's document."""
        self.remove(slot)
        if terms is None:
            return
        if slot >= len(self._gen):
            self._grow(max(slot + 1, len(self._gen) * 3 // 2 + 16))
        counts, n_words = _counts(terms)
        gen = int(self._gen[slot])
        vocab, tail = self._vocab, self._tail
        for term, tf in counts.items():
            tid = vocab.setdefault(term, len(vocab))
            found = tail.get(tid)
            if found is None:
                found = tail[tid] = _Postings()
            found.slots.append(slot)
            found.tfs.append(tf)
            found.gens.append(gen)
        length = n_words + SCOPE_TOKENS
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
            tid = self._vocab.get(term)
            if tid is None:
                continue
            slots, tfs = self._live(tid)
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

    def _live(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The slots whose current document holds term ``tid``, and its frequency in each."""
        if tid + 1 < len(self._ptr):
            a, b = self._ptr[tid], self._ptr[tid + 1]
            slots, tfs, gens = self._slots[a:b], self._tfs[a:b], self._gens[a:b]
        else:
            slots = tfs = gens = np.zeros(0, dtype=np.int64)
        more = self._tail.get(tid)
        if more is not None:
            slots = np.concatenate((slots, np.frombuffer(more.slots, dtype=np.int64)))
            tfs = np.concatenate((tfs, np.frombuffer(more.tfs, dtype=np.int64)))
            gens = np.concatenate((gens, np.frombuffer(more.gens, dtype=np.int64)))
        ok = gens == self._gen[slots]
        return (slots, tfs) if ok.all() else (slots[ok], tfs[ok])

    def _compact(self) -> None:
        """Rebuild the posting lists from the live postings (base and later ones alike)."""
        ids = [np.repeat(np.arange(len(self._ptr) - 1, dtype=np.int64), np.diff(self._ptr))]
        slots, tfs, gens = [self._slots], [self._tfs], [self._gens]
        for tid, more in self._tail.items():
            found = np.frombuffer(more.slots, dtype=np.int64)
            ids.append(np.full(len(found), tid, dtype=np.int64))
            slots.append(found.copy())
            tfs.append(np.frombuffer(more.tfs, dtype=np.int64).copy())
            gens.append(np.frombuffer(more.gens, dtype=np.int64).copy())
        self._tail = {}
        all_slots, all_gens = np.concatenate(slots), np.concatenate(gens)
        ok = all_gens == self._gen[all_slots]
        self._set_base(np.concatenate(ids)[ok], all_slots[ok], np.concatenate(tfs)[ok], all_gens[ok])
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
