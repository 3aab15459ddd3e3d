"""The in-memory BM25 of :mod:`jiyi.store.keywords` against SQLite FTS5's own ``bm25()``:
the same scores to the bit, the same order, through replacements and removals."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

from jiyi.store.keywords import KeywordIndex, best_first
from jiyi.text.tokenize import fold_term, index_text, query_terms

WORDS = "python rust garden coffee tea café cafe 咖啡 代码 写 borrow checker data day weekend".split()


def _fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(scope, terms, tokenize = 'unicode61 remove_diacritics 2')"
    )
    return conn


def _fts_ranked(conn: sqlite3.Connection, terms: tuple[str, ...]) -> list[tuple[int, float]]:
    # FTS5 counts a term twice when asked twice: ask each folded term once, as the index does.
    words = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(map(fold_term, terms)))
    return [
        (int(pk), float(score))
        for pk, score in conn.execute(
            "SELECT rowid, -bm25(t, 0.0, 1.0) AS score FROM t WHERE t MATCH ? ORDER BY score DESC, rowid",
            (f'scope : ("s1") AND terms : ({words})',),
        )
    ]


def _mine(index: KeywordIndex, terms: tuple[str, ...], pk_of: dict[int, int]) -> list[tuple[int, float]]:
    slots, scores = index.scores(terms)
    keys = np.array([pk_of[int(s)] for s in slots], dtype=np.int64)
    return [(int(keys[j]), float(scores[j])) for j in best_first(slots, scores, keys, len(slots))]


def _text(r: random.Random) -> str:
    return " ".join(r.choices(WORDS, k=r.randint(0, 12)))


def test_scores_equal_fts5_bm25_to_the_bit_through_changes() -> None:
    r = random.Random(7)
    conn, index = _fts(), KeywordIndex()
    pk_of: dict[int, int] = {}  # slot -> pk
    slot_of: dict[int, int] = {}
    free: list[int] = []
    first = {slot: index_text(_text(r)) for slot in range(60)}  # loaded in bulk, then changed one by one
    for slot, terms in first.items():
        pk_of[slot], slot_of[1000 + slot] = 1000 + slot, slot
        conn.execute("INSERT INTO t (rowid, scope, terms) VALUES (?, 's1 t1', ?)", (1000 + slot, terms))
    index.load(first.items())
    for step in range(400):
        action = r.random()
        if action < 0.55 or not slot_of:  # a new document
            pk = step + 1
            slot = free.pop() if free else len(pk_of)
            pk_of[slot], slot_of[pk] = pk, slot
        else:
            pk = r.choice(sorted(slot_of))
            slot = slot_of[pk]
            conn.execute("DELETE FROM t WHERE rowid = ?", (pk,))
            if action < 0.8:  # removed
                index.remove(slot)
                del slot_of[pk]
                free.append(slot)
                continue
        terms = index_text(_text(r))
        conn.execute("INSERT INTO t (rowid, scope, terms) VALUES (?, 's1 t1', ?)", (pk, terms))
        index.put(slot, terms)
        if step % 20 == 0:
            for _ in range(5):
                q = query_terms(_text(r)) or ("python",)
                assert _mine(index, q, pk_of) == _fts_ranked(conn, q), q
    assert len(index) == len(slot_of) == conn.execute("SELECT count(*) FROM t").fetchone()[0]


def test_a_query_term_counts_once_and_folds_like_the_index() -> None:
    index = KeywordIndex()
    index.put(0, index_text("café au lait"))
    index.put(1, index_text("tea"))
    one = index.scores(("cafe",))
    assert one[0].tolist() == [0]
    twice = index.scores(("cafe", "café", "CAFÉ"))
    assert twice[1].tolist() == one[1].tolist()


def test_removed_documents_leave_no_trace_after_heavy_churn() -> None:
    r = random.Random(3)
    churned, fresh = KeywordIndex(), KeywordIndex()
    docs = {slot: index_text(_text(r)) for slot in range(50)}
    churned.load(docs.items())
    for _ in range(3000):  # enough removals to compact the postings more than once
        slot = r.randrange(50)
        churned.remove(slot)
        docs[slot] = index_text(_text(r))
        churned.put(slot, docs[slot])
    for slot, terms in docs.items():
        fresh.put(slot, terms)
    assert (churned.docs, churned.tokens) == (fresh.docs, fresh.tokens)
    for word in WORDS:
        a, b = churned.scores(query_terms(word)), fresh.scores(query_terms(word))
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist(), word
    assert churned.scores(("nothing-like-this",))[0].size == 0
    assert KeywordIndex().scores(("python",))[0].size == 0


def test_a_bulk_load_equals_one_put_per_document_and_fills_only_an_empty_index() -> None:
    r = random.Random(5)
    docs = [(slot, index_text(_text(r))) for slot in range(0, 80, 2)] + [(81, None)]
    bulk, one_by_one = KeywordIndex(), KeywordIndex()
    bulk.load(docs)
    for slot, terms in docs:
        one_by_one.put(slot, terms)
    assert (bulk.docs, bulk.tokens) == (one_by_one.docs, one_by_one.tokens) == (40, bulk.tokens)
    for word in WORDS:
        a, b = bulk.scores(query_terms(word)), one_by_one.scores(query_terms(word))
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist(), word
    with pytest.raises(ValueError, match="empty index"):
        bulk.load(docs)


def test_best_first_keeps_every_tie_of_the_last_place_in_key_order() -> None:
    scores = np.array([1.0, 3.0, 2.0, 2.0, 2.0])
    keys = np.array([50, 40, 30, 20, 10])
    slots = np.arange(5)
    assert best_first(slots, scores, keys, 2) == [1, 4, 3, 2]
    assert best_first(slots, scores, keys, 10) == [1, 4, 3, 2, 0]
