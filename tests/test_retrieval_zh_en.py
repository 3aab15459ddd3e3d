"""Retrieval quality on a hand-written Chinese/English set (``tests/data/zh_en_retrieval.json``).

Four personas with 48-50 memories each (Chinese, English and code-switched), and 162
queries labelled by kind: paraphrase, keyword, cross_lingual, code_switched,
latest_value, temporal and negative (nothing relevant exists). Each user's memories
go into one fresh SQLite store through ``import_items``, with the default embedder and
a fixed clock so "上个月" and "last week" always mean the same days.

The thresholds below are regression guards set a few points under the measured values
(default embedder, default ``RankConfig``). ``pytest -s`` prints the measured table.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from jiyi import Memory
from jiyi.read.rank import RECOMMENDED_MIN_RELEVANCE

DATA = Path(__file__).parent / "data" / "zh_en_retrieval.json"
LIMIT = 10
KINDS = ("paraphrase", "keyword", "cross_lingual", "code_switched", "latest_value", "temporal", "negative")

# (recall@5, recall@10) that must hold; measured values are in the comments.
RECALL_FLOORS: dict[str, tuple[float, float]] = {
    "paraphrase": (0.78, 0.95),  # measured 0.828 / 1.000 (n 32)
    "keyword": (0.95, 0.95),  # 1.000 / 1.000 (n 20)
    "cross_lingual": (0.77, 0.95),  # 0.824 / 1.000 (n 37)
    "code_switched": (0.94, 0.95),  # 1.000 / 1.000 (n 18)
    "latest_value": (0.78, 0.85),  # 0.857 / 0.929 (n 14)
    "temporal": (0.86, 0.95),  # 0.917 / 1.000 (n 24)
    "overall": (0.85, 0.95),  # 0.890 / 0.993 (n 145)
}
CROSS_LINGUAL_FLOORS: dict[str, tuple[float, float]] = {
    "zh→en": (0.62, 0.95),  # 0.700 / 1.000 (n 20)
    "en→zh": (0.90, 0.95),  # 0.971 / 1.000 (n 17)
}

# The similarity floor that answers "nothing relevant" (see test_similarity_floor).
NEGATIVE_FLOOR = 0.01
NEGATIVES_REJECTED_AT_MOST = 0.10  # measured 0.00: similarity is relative to each search
POSITIVES_KEEP_GOLD_AT_LEAST = 0.95  # measured 0.99 (a gold memory survives the floor)

# The relevance cut (see test_min_relevance). Its weights were fitted on the queries of
# lin and emma only; chen and sofia are the held-out half.
TUNING_USERS = ("lin", "emma")
RELEVANCE_NEGATIVES_REJECTED_AT_LEAST = 0.64  # measured 0.71 (12 of 17); held-out 0.75 (6 of 8)
RELEVANCE_POSITIVES_KEEP_GOLD_AT_LEAST = 0.76  # measured 0.81; held-out 0.77


@dataclass(frozen=True)
class Run:
    """One query and what the default search returned for it."""

    query: dict[str, Any]
    ids: list[str]
    similarities: list[float]

    @property
    def gold(self) -> list[str]:
        return list(self.query["gold"])

    def recall(self, k: int) -> float:
        return len(set(self.ids[:k]) & set(self.gold)) / len(self.gold)

    def first_gold_rank(self) -> int | None:
        ranks = [self.ids.index(g) + 1 for g in self.gold if g in self.ids]
        return min(ranks) if ranks else None


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def now(data: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(data["now"].replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any], now: datetime) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("zh_en") / "memory.db"
    with Memory.open(path, clock=lambda: now) as m:
        for user in data["users"]:
            records = [
                {k: v for k, v in rec.items() if k != "lang"}
                for rec in data["memories"]
                if rec["user_id"] == user
            ]
            m.import_items(records)
        yield m


@pytest.fixture(scope="module")
def runs(mem: Memory, data: dict[str, Any]) -> list[Run]:
    out = []
    for q in data["queries"]:
        hits = mem.search(q["query"], user_id=q["user_id"], limit=LIMIT, touch=False)
        out.append(Run(q, [h.item.id for h in hits], [h.similarity for h in hits]))
    return out


def _direction(run: Run) -> str:
    return "zh→en" if run.query["lang"] == "zh" else "en→zh"


def _recalls(selected: list[Run]) -> tuple[float, float]:
    return (
        statistics.fmean(r.recall(5) for r in selected),
        statistics.fmean(r.recall(10) for r in selected),
    )


def _groups(runs: list[Run]) -> dict[str, list[Run]]:
    positives = [r for r in runs if r.gold]
    groups = {kind: [r for r in positives if r.query["kind"] == kind] for kind in KINDS if kind != "negative"}
    groups["overall"] = positives
    return groups


def _spread(values: list[float]) -> str:
    return f"min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}"


# ------------------------------------------------------------------ the data set itself


def test_data_set_is_well_formed(data: dict[str, Any]) -> None:
    memories = {m["id"]: m for m in data["memories"]}
    assert len(memories) == len(data["memories"]), "memory ids must be unique"
    for user in data["users"]:
        assert 30 <= sum(m["user_id"] == user for m in data["memories"]) <= 50
    queries = data["queries"]
    assert len(queries) >= 120
    assert len({q["id"] for q in queries}) == len(queries)
    assert {q["kind"] for q in queries} == set(KINDS)
    zh_share = sum(q["lang"] == "zh" for q in queries) / len(queries)
    assert 0.4 <= zh_share <= 0.6, zh_share
    for q in queries:
        assert q["lang"] in ("zh", "en")
        assert (q["kind"] == "negative") == (not q["gold"]), q["id"]
        for gold in q["gold"]:
            assert memories[gold]["user_id"] == q["user_id"], q["id"]
            assert memories[gold].get("status", "active") == "active", q["id"]
        if q["kind"] == "cross_lingual":
            other = "en" if q["lang"] == "zh" else "zh"
            assert all(memories[g]["lang"] == other for g in q["gold"]), q["id"]
        if q["kind"] == "latest_value":
            new, old = memories[q["gold"][0]], memories[q["old"]]
            assert len(q["gold"]) == 1 and old["status"] == "superseded"
            assert old["relations"] == [{"type": "superseded_by", "target_id": new["id"]}]
            assert new["relations"] == [{"type": "supersedes", "target_id": old["id"]}]
            assert old["occurred_at"] < new["occurred_at"]


# ------------------------------------------------------------------ recall


def test_print_report(runs: list[Run]) -> None:
    """The measured figures (run with ``-s`` to see them)."""
    lines = [
        "",
        f"{'kind':<16}{'n':>4}{'zh':>4}{'en':>4}{'R@5':>8}{'R@10':>8}{'hit@1':>8}{'MRR':>7}",
    ]
    rows = dict(_groups(runs))
    for direction in CROSS_LINGUAL_FLOORS:
        rows[f"  xl {direction}"] = [
            r for r in runs if r.query["kind"] == "cross_lingual" and _direction(r) == direction
        ]
    for lang in ("zh", "en"):
        rows[f"  {lang} queries"] = [r for r in runs if r.gold and r.query["lang"] == lang]
    for name, selected in rows.items():
        r5, r10 = _recalls(selected)
        ranks = [r.first_gold_rank() for r in selected]
        hit1 = statistics.fmean(rank == 1 for rank in ranks)
        mrr = statistics.fmean(1 / rank if rank else 0.0 for rank in ranks)
        zh = sum(r.query["lang"] == "zh" for r in selected)
        lines.append(
            f"{name:<16}{len(selected):>4}{zh:>4}{len(selected) - zh:>4}{r5:>8.3f}{r10:>8.3f}{hit1:>8.3f}{mrr:>7.3f}"
        )
    negatives = [r for r in runs if not r.gold]
    lines.append(f"{'negative':<16}{len(negatives):>4}")
    positives = [r for r in runs if r.gold]
    lines.append("top-1 similarity, positives: " + _spread([r.similarities[0] for r in positives]))
    lines.append("top-1 similarity, negatives: " + _spread([r.similarities[0] for r in negatives]))
    misses = [r for r in positives if any(g not in r.ids[:5] for g in r.gold)]
    lines.append(f"gold outside the top 5 ({len(misses)}):")
    lines.extend(
        f"  {r.query['id']:<12} {r.query['kind']:<14} ranks {[r.ids.index(g) + 1 if g in r.ids else None for g in r.gold]}"
        f"  {r.query['query']}"
        for r in misses
    )
    print("\n".join(lines))


@pytest.mark.parametrize("kind", list(RECALL_FLOORS))
def test_recall_per_kind(runs: list[Run], kind: str) -> None:
    selected = _groups(runs)[kind]
    r5, r10 = _recalls(selected)
    floor5, floor10 = RECALL_FLOORS[kind]
    missed = [r.query["id"] for r in selected if r.recall(5) < 1]
    assert r5 >= floor5, f"{kind}: recall@5 {r5:.3f} < {floor5} (not fully in top 5: {missed})"
    assert r10 >= floor10, f"{kind}: recall@10 {r10:.3f} < {floor10}"


@pytest.mark.parametrize("direction", list(CROSS_LINGUAL_FLOORS))
def test_cross_lingual_both_directions(runs: list[Run], direction: str) -> None:
    selected = [r for r in runs if r.query["kind"] == "cross_lingual" and _direction(r) == direction]
    assert len(selected) >= 15
    r5, r10 = _recalls(selected)
    floor5, floor10 = CROSS_LINGUAL_FLOORS[direction]
    assert r5 >= floor5, f"{direction}: recall@5 {r5:.3f} < {floor5}"
    assert r10 >= floor10, f"{direction}: recall@10 {r10:.3f} < {floor10}"


# ------------------------------------------------------------------ replaced values


def test_latest_value_outranks_what_it_replaced(mem: Memory, data: dict[str, Any]) -> None:
    cases = [q for q in data["queries"] if q["kind"] == "latest_value"]
    assert len(cases) >= 10
    pool = max(sum(m["user_id"] == u for m in data["memories"]) for u in data["users"])
    for q in cases:
        new, old = q["gold"][0], q["old"]
        both = mem.search(
            q["query"], user_id=q["user_id"], limit=pool, statuses=["active", "superseded"], touch=False
        )
        ids = [h.item.id for h in both]
        assert new in ids and old in ids, (q["id"], ids)
        assert ids.index(new) < ids.index(old), (q["id"], ids.index(new) + 1, ids.index(old) + 1)
        default = [h.item.id for h in mem.search(q["query"], user_id=q["user_id"], limit=pool, touch=False)]
        assert old not in default, q["id"]
        assert new in default, q["id"]


# ------------------------------------------------------------------ "nothing relevant"


def test_similarity_floor(mem: Memory, data: dict[str, Any], runs: list[Run]) -> None:
    """Similarity ranks within one search and says nothing about whether anything answers:
    it is centred on the pool's 10th best match (jiyi.read.fusion.similarity), so with
    ``threshold=NEGATIVE_FLOOR`` nearly every search, answerable or not, keeps results;
    the relevance cut (test_min_relevance) is the one that answers "nothing relevant"."""
    positives = [r for r in runs if r.gold]
    negatives = [r for r in runs if not r.gold]
    rejected = 0
    for r in negatives:
        hits = mem.search(
            r.query["query"], user_id=r.query["user_id"], limit=LIMIT, threshold=NEGATIVE_FLOOR, touch=False
        )
        assert all(h.similarity >= NEGATIVE_FLOOR for h in hits)
        rejected += not hits
    kept_gold = 0
    for r in positives:
        hits = mem.search(
            r.query["query"], user_id=r.query["user_id"], limit=LIMIT, threshold=NEGATIVE_FLOOR, touch=False
        )
        kept_gold += any(h.item.id in r.gold for h in hits)
        # The best match of a search is always at or above the pool's 10th best.
        assert hits and hits[0].similarity >= 0.5
    shares = (rejected / len(negatives), kept_gold / len(positives))
    print(
        f"\nfloor {NEGATIVE_FLOOR}: negatives with no result {shares[0]:.2f}, positives keeping a gold {shares[1]:.2f}"
    )
    assert shares[0] <= NEGATIVES_REJECTED_AT_MOST
    assert shares[1] >= POSITIVES_KEEP_GOLD_AT_LEAST


def _cut_shares(
    mem: Memory,
    selected: list[dict[str, Any]],
    threshold: float | None = None,
    min_relevance: float | None = None,
) -> tuple[float, float]:
    """Share of negatives that return nothing and of positives that keep a gold in the top 10."""
    rejected, kept = [], []
    for q in selected:
        ids = [
            h.item.id
            for h in mem.search(
                q["query"],
                user_id=q["user_id"],
                limit=LIMIT,
                touch=False,
                threshold=threshold,
                min_relevance=min_relevance,
            )
        ]
        if q["gold"]:
            kept.append(any(g in ids for g in q["gold"]))
        else:
            rejected.append(not ids)
    return statistics.fmean(rejected), statistics.fmean(kept)


def test_min_relevance(mem: Memory, data: dict[str, Any]) -> None:
    """``min_relevance`` rejects more negatives than the similarity floor, keeping as many golds.

    On all 162 queries at the recommended cut: 71% of negatives return nothing (the
    similarity floor: 47%) and 81% of positives keep a gold (floor: 82%). On the held-out
    half alone the gain is one negative of 8 (0.75 vs 0.62), for 3 more positives lost of
    73 (0.77 vs 0.81): docs/benchmarks.md has the full table. Still answered: negatives
    asking for an attribute of something the memories do talk about (Luma 2's warranty,
    Sofia's driving licence); still lost: paraphrases answered only by meaning.
    """
    queries = data["queries"]
    halves = {
        "all": queries,
        "tuning (lin, emma)": [q for q in queries if q["user_id"] in TUNING_USERS],
        "held-out (chen, sofia)": [q for q in queries if q["user_id"] not in TUNING_USERS],
    }
    head = (f"relevance >= {RECOMMENDED_MIN_RELEVANCE:.2f}", f"similarity >= {NEGATIVE_FLOOR:.2f}")
    lines = [f"\n{'':<24}{head[0]:>22}{head[1]:>24}"]
    measured = {}
    for name, selected in halves.items():
        rel = _cut_shares(mem, selected, min_relevance=RECOMMENDED_MIN_RELEVANCE)
        sim = _cut_shares(mem, selected, threshold=NEGATIVE_FLOOR)
        measured[name] = (rel, sim)
        lines.append(
            f"{name:<24}{rel[0]:>10.2f} /{rel[1]:>5.2f} neg/pos{sim[0]:>12.2f} /{sim[1]:>5.2f} neg/pos"
        )
    print("\n".join(lines))
    (rejected, kept), (sim_rejected, _) = measured["all"]
    assert rejected >= RELEVANCE_NEGATIVES_REJECTED_AT_LEAST
    assert kept >= RELEVANCE_POSITIVES_KEEP_GOLD_AT_LEAST
    # Relevance answers "nothing relevant" where no similarity floor can.
    assert rejected > sim_rejected
    for q in queries:
        hits = mem.search(q["query"], user_id=q["user_id"], limit=LIMIT, touch=False, min_relevance=0.3)
        assert all(h.relevance is not None and h.relevance >= 0.3 for h in hits), q["id"]
