"""Fit the learned fusion of ``src/jiyi/read/fusion.py`` on the development halves of
LoCoMo, LongMemEval_S and the Chinese/English set together, and report the other halves.

Two steps, because the first runs the three raw-mode benchmarks (~20-30 minutes here) and
the second takes seconds:

    python bench/fusion.py capture pools.pkl [--lme DATA] [--locomo DATA] [--cache VEC.npz]
    python bench/fusion.py fit pools.pkl [--drop phrase rrf] [--loss allk --temp 0.5] [--save W.npy]

``capture`` runs ``bench/locomo.py``, ``bench/longmemeval.py`` and ``bench/zh_en.py`` in
raw mode and keeps, for every question's search, the feature columns of its candidate pool
(:func:`jiyi.read.fusion.features`, the code the search runs), the candidates' source ids,
their vectors (for MMR) and the question's gold ids; also each benchmark's part figures
(cosine, BM25, RRF) from the same run.

``fit`` fits the weights by a listwise softmax loss (each question's gold items against
its pool; the three sets weigh the same whatever their size), or with ``--loss allk|mix``
by a loss that asks every gold item above the k-th best non-gold item (what recall_all@k
counts), on the development halves
(LongMemEval even lines, LoCoMo conversations 1-5, zh/en personas lin and emma), every
weight kept >= 0, and prints them as Python to paste into ``jiyi/read/fusion.py`` with
the figures of both halves, re-ranked as the search does (seed-000 score, MMR), beside the
parts' figures from the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO_ROOT
from jiyi.config import RankConfig
from jiyi.embed.base import resolve_embedder
from jiyi.embed.scale import on_scale
from jiyi.model import MemoryItem
from jiyi.read import fusion
from jiyi.read import search as search_module
from jiyi.read.rank import Scored, kept_shares, mmr_select, term_coverage
from jiyi.store.base import Candidate
from jiyi.text.timeparse import time_windows, without_spans
from jiyi.text.tokenize import query_terms

LIMITS = {"lme": 50, "locomo": 20, "zhen": 10, "lme_p": 50, "locomo_p": 20}
"""Each benchmark's search limit (the pool and MMR window follow from it). ``_p``: the
same benchmark in pipeline mode (``remember()`` each session; see ``capture --pipeline``)."""
DEFAULT_LME = REPO_ROOT.parent / "shared" / "data" / "lme_s_dev.jsonl.gz"
DEFAULT_LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo10.json"
ZH_EN = REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json"


# ---------------------------------------------------------------- capture


class Recorder:
    """Wraps the search's scoring step and keeps every pool's feature columns."""

    def __init__(self) -> None:
        self.pools: list[dict[str, Any]] = []
        self.inner = search_module.score_candidates

    def __call__(
        self,
        cands: Sequence[Candidate],
        cfg: RankConfig,
        now: datetime,
        in_time: Callable[[MemoryItem], bool] | None,
        query: str = "",
        model_id: str = "",
        skip: frozenset[str] = frozenset(),
        replaced: Mapping[str, tuple[str, ...]] | None = None,
        asking: bool = False,
        gains: np.ndarray | None = None,
        columns: dict[str, np.ndarray] | None = None,
    ) -> list[Scored]:
        coverage = term_coverage(cands, query_terms(query), neighbours=False)
        cols = fusion.features(cands, query, coverage, in_time, skip, gains)
        dim = next((c.vector.shape[0] for c in cands if c.vector is not None), 1)
        vectors = np.zeros((len(cands), dim), dtype=np.float16)
        for i, c in enumerate(cands):
            if c.vector is not None:
                vectors[i] = c.vector
        out = self.inner(cands, cfg, now, in_time, query, model_id, skip, replaced, asking, gains, columns)
        parts = {s.candidate.item.id: _rest(s) for s in out}
        prev, nxt = fusion.neighbour_index(cands)
        self.pools.append(
            {
                "query": query,
                "rest": np.array([parts[c.item.id][0] for c in cands], dtype=np.float32),
                "mult": np.array([parts[c.item.id][1] for c in cands], dtype=np.float32),
                "cols": {k: v.astype(np.float32) for k, v in cols.items()},
                # the share of its fused value each candidate keeps (a memory that only asks:
                # rank.ASKS_ONLY_FACTOR), so that replays and fits rank as the search does
                "keep": kept_shares(cands, asking).astype(np.float32),
                "ids": [c.item.id for c in cands],
                # the texts, so that evidence read from them can be replayed offline
                # (bench/sentence_evidence.py)
                "texts": [c.item.content for c in cands],
                "lens": np.array([len(c.item.content) for c in cands], dtype=np.int32),
                "src": [c.item.source_id or "" for c in cands],
                "thread": [c.item.thread_id or "" for c in cands],
                "vectors": vectors,
                # when each candidate happened and the search's "now" (POSIX seconds, NaN:
                # unknown), so that a change to the time windows can be replayed offline
                "when": np.array(
                    [c.item.occurred_at.timestamp() if c.item.occurred_at else math.nan for c in cands]
                ),
                "now": now.timestamp(),
                # each candidate's thread neighbours: whether it has them, their evidence
                # (None as NaN) and their place in the pool (-1: not in it), so that a change
                # to the neighbour features can be replayed offline
                "nb": {
                    "has_prev": np.array([c.prev_id is not None for c in cands]),
                    "has_next": np.array([c.next_id is not None for c in cands]),
                    "prev_cos": _column([c.prev_cosine for c in cands]),
                    "next_cos": _column([c.next_cosine for c in cands]),
                    "prev_kw": _column([c.prev_keyword for c in cands]),
                    "next_kw": _column([c.next_keyword for c in cands]),
                    "prev_pos": prev.astype(np.int32),
                    "next_pos": nxt.astype(np.int32),
                },
            }
        )
        return out


def _column(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], dtype=np.float32)


def _rest(s: Scored) -> tuple[float, float]:
    """The seed score's parts besides the match (confidence, scope; before the re-orderings
    of versions) and the factor on the match (a superseded item's discount): in raw mode
    the same for every memory, in pipeline mode not."""
    b = s.breakdown
    skip = ("similarity", "superseded", "replaced", "newer_version")
    rest = sum(v for k, v in b.items() if k.startswith("contribution.") and k[13:] not in skip)
    match = b.get("contribution.similarity", 0.0)
    mult = 1.0 + b.get("contribution.superseded", 0.0) / match if match > 0 else 1.0
    return rest, mult


def _run(recorder: Recorder, main: Callable[[list[str]], int], argv: list[str]) -> list[dict[str, Any]]:
    start = len(recorder.pools)
    if main(argv) != 0:
        raise SystemExit(f"benchmark failed: {argv}")
    return recorder.pools[start:]


def capture(args: argparse.Namespace) -> None:
    import locomo
    import longmemeval
    import zh_en

    recorder = Recorder()
    search_module.score_candidates = recorder  # type: ignore[assignment]
    locomo.WARMUP_SEARCHES = 0  # every search is then a question, in order
    spec = ["--embedder", args.embedder] if args.embedder else []
    out: dict[str, Any] = {"embedder": resolve_embedder(args.embedder).model_id}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if "zhen" in args.sets:
            pools = _run(recorder, zh_en.main, ["--json", str(t / "zhen.json"), *spec])
            queries = [q for q in json.loads(ZH_EN.read_text(encoding="utf-8"))["queries"] if q["gold"]]
            gold = [
                {"gold": q["gold"], "tune": q["user_id"] in zh_en.TUNING_USERS, "kind": q["kind"]}
                for q in queries
            ]
            parts = json.loads((t / "zhen.json").read_text())
            out["zhen"] = {"pools": pools, "gold": gold, "parts": parts}
        if "locomo" in args.sets:
            argv = ["--data", str(args.locomo), "--half-report", "--details", str(t / "loc.jsonl"), *spec]
            if args.locomo_cache:
                argv += ["--cache", str(args.locomo_cache)]
            pools = _run(recorder, locomo.main, [*argv, "--json", str(t / "loc.json")])
            rows = [json.loads(line) for line in (t / "loc.jsonl").read_text().splitlines()]
            convs = list(dict.fromkeys(r["sample_id"] for r in rows))
            gold = [
                {"gold": r["evidence"], "tune": convs.index(r["sample_id"]) < 5, "scored": r["category"] != 5}
                for r in rows
            ]
            parts = json.loads((t / "loc.json").read_text())
            out["locomo"] = {"pools": pools, "gold": gold, "parts": parts}
        if "lme" in args.sets:
            argv = [str(args.lme), "--json", str(t / "lme.json"), "--every", str(args.lme_every), *spec]
            argv += ["--half", args.lme_half]
            argv += ["--cache", str(args.cache)] if args.cache else []
            pools = _run(recorder, longmemeval.main, argv)
            questions = longmemeval.select(longmemeval.load(args.lme), args.lme_half, args.lme_every, None)
            gold = [
                {
                    "gold": q.row["gold_turn_ids_user"],
                    "sessions": q.row["gold_session_ids"],
                    "tune": q.index % 2 == 0,
                    "scored": q.scored,
                }
                for q in questions
            ]
            out["lme"] = {"pools": pools, "gold": gold, "parts": json.loads((t / "lme.json").read_text())}
    for name in ("zhen", "locomo", "lme"):
        if name in out and len(out[name]["pools"]) != len(out[name]["gold"]):
            raise SystemExit(
                f"{name}: {len(out[name]['pools'])} searches for {len(out[name]['gold'])} questions"
            )
    with open(args.out, "wb") as fh:
        pickle.dump(out, fh)
    print(f"wrote {args.out}", file=sys.stderr)


def capture_pipeline(args: argparse.Namespace) -> None:
    """LoCoMo (every conversation) and LongMemEval_S (every ``--every``-th question) in
    pipeline mode: each pool's candidates keep the source turns they were extracted from."""
    import locomo
    import longmemeval

    recorder = Recorder()
    search_module.score_candidates = recorder  # type: ignore[assignment]
    locomo.WARMUP_SEARCHES = 0
    books: list[dict[str, dict[str, None]]] = []
    inner = locomo._record_outcomes

    def record(
        run: Any, reports: Any, session: Any, contents: Any, sources: dict[str, dict[str, None]]
    ) -> None:
        if not books or books[-1] is not sources:
            books.append(sources)  # one mapping per run: item id -> source turn ids
        inner(run, reports, session, contents, sources)

    locomo._record_outcomes = record  # type: ignore[assignment]
    longmemeval._record_outcomes = record  # type: ignore[assignment]
    embedder = longmemeval.CachingEmbedder(resolve_embedder(None), args.cache)
    out: dict[str, Any] = {}

    if "locomo" in args.sets:
        out["locomo_p"] = _capture_locomo_pipeline(args, recorder, books, embedder)
    if "lme" in args.sets:
        out["lme_p"] = _capture_lme_pipeline(args, recorder, books, embedder)
    with open(args.out, "wb") as fh:
        pickle.dump(out, fh)
    print(f"wrote {args.out}", file=sys.stderr)


def _capture_locomo_pipeline(
    args: argparse.Namespace, recorder: Recorder, books: list[dict[str, dict[str, None]]], embedder: Any
) -> dict[str, Any]:
    import locomo

    samples = json.loads(Path(args.locomo).read_text(encoding="utf-8"))
    pools: list[dict[str, Any]] = []
    gold: list[dict[str, Any]] = []
    runs = []
    for n, sample in enumerate(samples, 1):
        conv = locomo.load_conversation(n, sample)
        start = len(recorder.pools)
        run = locomo.run_pipeline_conversation(conv, embedder, None, None)
        runs.append(run)
        found = _question_pools(recorder.pools[start:], [r.question.text for r in run.results])
        for pool, r in zip(found, run.results, strict=True):
            pools.append(_through(pool, books[-1]))
            gold.append(
                {"gold": list(r.question.evidence), "tune": n <= 5, "scored": r.question.category != 5}
            )
        print(f"  locomo {n}: {len(run.results)} questions", file=sys.stderr)
    halves = {"all": runs, "1-5": runs[:5], "6-10": runs[5:]}
    return {
        "pools": pools,
        "gold": gold,
        "parts": {"parts": {k: locomo.parts_summary(v) for k, v in halves.items()}},
    }


def _capture_lme_pipeline(
    args: argparse.Namespace, recorder: Recorder, books: list[dict[str, dict[str, None]]], embedder: Any
) -> dict[str, Any]:
    """LongMemEval_S in pipeline mode; with ``--stores`` the stores kept by ``bench/longmemeval.py
    --stores`` are searched (or built and kept there), as that benchmark does."""
    import longmemeval

    questions = longmemeval.select(longmemeval.load(args.lme), "all", args.every, None)
    pools: list[dict[str, Any]] = []
    gold: list[dict[str, Any]] = []
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, q in enumerate(questions, 1):
            start = len(recorder.pools)
            results.append(longmemeval.run_pipeline(q, embedder, Path(tmp), True, args.stores))
            (Path(tmp) / f"{q.qid}.db").unlink(missing_ok=True)
            (pool,) = _question_pools(recorder.pools[start:], [q.row["question"]])
            kept = None if args.stores is None else args.stores / f"{q.qid}.sources.json"
            sources = longmemeval._load_sources(kept) if kept is not None and kept.exists() else books[-1]
            pools.append(_through(pool, sources))
            gold.append(
                {
                    "gold": q.row["gold_turn_ids_user"],
                    "sessions": q.row["gold_session_ids"],
                    "tune": q.index % 2 == 0,
                    "scored": q.scored,
                }
            )
            if i % 10 == 0:
                embedder.save()
                print(f"  lme {i}/{len(questions)}", file=sys.stderr)
    embedder.save()
    return {"pools": pools, "gold": gold, "parts": longmemeval.summarise(results)}


def _question_pools(pools: list[dict[str, Any]], questions: list[str]) -> list[dict[str, Any]]:
    """The first pool of each question, in order (a run also searches inside context())."""
    found: list[dict[str, Any]] = []
    it = iter(pools)
    for text in questions:
        words = _words(text)
        found.append(next(p for p in it if p["query"] in (text, words)))
    return found


def _words(text: str) -> str:
    """The text the search scores a question by: its counted-back time phrases blanked
    (``jiyi.read.search._Query.words``; which spans those are does not depend on now)."""
    counted = time_windows(text, datetime.now(UTC)).counted
    return without_spans(text, counted) if counted else text


def _through(pool: dict[str, Any], sources: dict[str, dict[str, None]]) -> dict[str, Any]:
    """The pool with each candidate's source turns (an item may come from several)."""
    return {**pool, "src": [list(sources.get(i, {})) for i in pool["ids"]]}


# ---------------------------------------------------------------- fit


def matrix(pool: dict[str, Any]) -> np.ndarray:
    """The pool's feature rows, each scaled by the share of its fused value the search keeps
    (``keep``; pools captured before it had none): the fused value is linear in them."""
    x = np.stack([pool["cols"][name].astype(np.float64) for name in fusion.FEATURES], axis=1)
    keep = pool.get("keep")
    return x if keep is None else x * keep.astype(np.float64)[:, None]


def labels(name: str, pool: dict[str, Any], gold: dict[str, Any]) -> np.ndarray:
    wanted = set(gold["gold"])
    if name.endswith("_p"):
        return np.array([bool(wanted.intersection(src)) for src in pool["src"]], dtype=np.float64)
    keys = pool["ids"] if name == "zhen" else pool["src"]
    return np.array([k in wanted for k in keys], dtype=np.float64)


def scored(gold: dict[str, Any]) -> bool:
    return bool(gold.get("scored", True)) and bool(gold["gold"])


def training(
    data: dict[str, Any], tune: bool, sets: Sequence[str]
) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for name in sets:
        rows = []
        for pool, gold in zip(data[name]["pools"], data[name]["gold"], strict=True):
            if gold["tune"] != tune or not scored(gold):
                continue
            y = labels(name, pool, gold)
            if y.sum() > 0:
                rows.append((matrix(pool), y))
        out[name] = rows
    return out


CUTS = {"lme": 10, "locomo": 10, "zhen": 5, "lme_p": 10, "locomo_p": 10}
"""Each benchmark's cut for the ``allk`` loss: the rank every gold item should reach (the
benchmarks' recall@10 and turn recall_all@10; zh/en's recall@5)."""

LOSSES = ("softmax", "allk", "mix")


def _padded(rows: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One set's pools as arrays padded to its largest pool: features ``[P, n, F]``, gold
    ``[P, n]`` (0/1) and which places hold a candidate ``[P, n]``."""
    n = max(len(y) for _, y in rows)
    x = np.zeros((len(rows), n, len(fusion.FEATURES)))
    gold = np.zeros((len(rows), n))
    valid = np.zeros((len(rows), n), dtype=bool)
    for i, (xi, yi) in enumerate(rows):
        x[i, : len(yi)] = xi
        gold[i, : len(yi)] = yi
        valid[i, : len(yi)] = True
    return x, gold, valid


def _softmax_grad(s: np.ndarray, gold: np.ndarray, valid: np.ndarray) -> tuple[float, np.ndarray]:
    """Listwise softmax: cross-entropy of each pool's softmax against its gold items
    (uniform over them). Loss and its gradient by score, both averaged over the pools."""
    z = np.where(valid, s, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    target = gold / gold.sum(axis=1, keepdims=True)
    loss = -float((target * np.log(np.maximum(p, 1e-300))).sum(axis=1).mean())
    return loss, (p - target) / len(s)


def _allk_grad(
    s: np.ndarray,
    gold: np.ndarray,
    valid: np.ndarray,
    k: int,
    temp: float,
    worst: bool,
    bounded: bool = False,
) -> tuple[float, np.ndarray]:
    """Every gold item above the ``k``-th best non-gold item of its pool: the margin
    ``m = (s_kth - s_gold) / temp`` through a softplus (``bounded``: a sigmoid, a smooth
    count of the gold items below the cut, so that a hopeless item does not outweigh a near
    miss), averaged over the gold items (or, ``worst``, of their log-mean-exp, so the worst
    gold item counts most: a smooth miss of recall_all). A pool with fewer than ``k``
    non-gold items asks nothing. Loss and gradient by score, averaged over the pools."""
    rows = np.arange(len(s))
    other = np.where(valid & (gold == 0), s, -np.inf)
    live = (valid & (gold == 0)).sum(axis=1) >= k
    kth = np.argpartition(-other, k - 1, axis=1)[:, k - 1]
    s_k = np.where(live, other[rows, kth], 0.0)
    m = np.where(gold > 0, (s_k[:, None] - s) / temp, -np.inf)
    n_gold = gold.sum(axis=1)

    def phi(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sig = 1.0 / (1.0 + np.exp(-x))
        return (sig, sig * (1.0 - sig)) if bounded else (np.logaddexp(0.0, x), sig)

    if worst:
        top = m.max(axis=1, keepdims=True)
        e = np.exp(m - top)
        lme = top[:, 0] + np.log(e.sum(axis=1) / n_gold)
        per, d_lme = phi(lme)
        d_m = d_lme[:, None] * e / e.sum(axis=1, keepdims=True)
    else:
        value, slope = phi(np.where(gold > 0, m, 0.0))
        per = np.where(gold > 0, value, 0.0).sum(axis=1) / n_gold
        d_m = np.where(gold > 0, slope, 0.0) / n_gold[:, None]
    per = np.where(live, per, 0.0)
    d_m = np.where(live[:, None], d_m, 0.0) / temp
    grad = -d_m
    grad[rows, kth] += d_m.sum(axis=1)
    return float(per.mean()), grad / len(s)


def fit_weights(
    train: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    epochs: int = 1000,
    drop: Sequence[str] = (),
    loss: str = "softmax",
    temp: float = 1.0,
    mix: float = 0.5,
    worst: bool = False,
    bounded: bool = False,
    fixed: Mapping[str, float] | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Adam, a little L2, weights projected onto >= 0 after each step; the weights of the
    evidence in ``drop`` (names in ``fusion.EVIDENCE`` or ``fusion.PLAIN``) held at 0, the
    columns of ``fixed`` (names in ``fusion.FEATURES``) at their given value. The loss
    (every set weighing the same whatever its size):

    * ``softmax``: listwise softmax (each pool's gold items against its pool);
    * ``allk``: every gold item above the ``CUTS[set]``-th best non-gold item of its pool
      (:func:`_allk_grad`, margin temperature ``temp``, ``worst``: the worst gold item
      counts most, ``bounded``: a sigmoid, not a softplus): what recall_all@k asks;
    * ``mix``: ``mix * softmax + (1 - mix) * allk``.
    """
    fixed = dict(fixed or {})
    keep = np.array(
        [name.split("*")[0] not in drop and name not in fixed for name in fusion.FEATURES], dtype=np.float64
    )
    held = np.array([fixed.get(name, 0.0) for name in fusion.FEATURES])
    padded = {name: (_padded(rows), CUTS[name]) for name, rows in train.items() if rows}
    w = np.zeros(len(fusion.FEATURES)) if start is None else np.maximum(start, 0.0) * keep
    w = w + held
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    lr, l2, b1, b2 = 0.05, 1e-3, 0.9, 0.999
    share = {"softmax": 1.0, "allk": 0.0, "mix": mix}[loss]
    for epoch in range(1, epochs + 1):
        grad = l2 * w
        for (x, gold, valid), k in padded.values():
            s = x @ w
            g_s = np.zeros_like(s)
            if share > 0:
                g_s += share * _softmax_grad(s, gold, valid)[1]
            if share < 1:
                g_s += (1 - share) * _allk_grad(s, gold, valid, k, temp, worst, bounded)[1]
            grad = grad + np.einsum("pn,pnf->f", g_s, x)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        w -= lr * (m / (1 - b1**epoch)) / (np.sqrt(v / (1 - b2**epoch)) + 1e-8)
        w = np.maximum(w, 0.0) * keep + held  # every weight >= 0: more evidence never lowers the score
    return w


def ranked(pool: dict[str, Any], w: np.ndarray, limit: int, model_id: str = "") -> list[int]:
    """The search's order: seed-000 score (the match, with the candidate's confidence and
    scope as the search recorded them), then MMR over the best 3 x limit (its floor on the
    scale of the embedder ``model_id``, as the search has it)."""
    cfg = RankConfig()
    n = len(pool["ids"])
    mult, rest = pool.get("mult", np.ones(n)), pool.get("rest", np.zeros(n))
    score = cfg.w_similarity * fusion.similarity(matrix(pool) @ w) * mult + rest
    order = np.argsort(-score, kind="stable")
    if len(order) > limit:
        window = order[: cfg.pool_factor * limit]
        vectors = [pool["vectors"][i].astype(np.float32) for i in window]
        picked = mmr_select(
            [float(score[i]) for i in window],
            vectors,
            limit,
            cfg.mmr_lambda,
            on_scale(cfg.mmr_redundancy_floor, model_id),
        )
        order = np.array([window[i] for i in picked])
    return [int(i) for i in order[:limit]]


def figures(name: str, data: dict[str, Any], w: np.ndarray) -> dict[str, str]:
    model_id = str(data.get("embedder", ""))
    halves: dict[str, list[float | tuple[float, float]]] = {"tuning": [], "report": [], "all": []}
    for pool, gold in zip(data[name]["pools"], data[name]["gold"], strict=True):
        if not scored(gold):
            continue
        order = ranked(pool, w, LIMITS[name], model_id)
        value = _question_figure(name, pool, gold, order)
        if value is None:
            continue
        halves["tuning" if gold["tune"] else "report"].append(value)
        halves["all"].append(value)
    return {half: _mean(name, values) for half, values in halves.items()}


def _question_figure(
    name: str, pool: dict[str, Any], gold: dict[str, Any], order: list[int]
) -> float | tuple[float, float] | None:
    if name == "zhen":
        top = {pool["ids"][i] for i in order[:5]}
        return len(top & set(gold["gold"])) / len(gold["gold"])
    if name.endswith("_p"):  # each hit read through its source turns, as the benchmarks do
        turns = list(dict.fromkeys(t for i in order for t in pool["src"][i]))
    else:
        turns = [pool["src"][i] for i in order]
    if name.startswith("locomo"):
        top = set(turns[:10])
        return sum(1 for e in gold["gold"] if e in top) / len(gold["gold"])
    sessions = list(dict.fromkeys(t.rsplit("_", 1)[0] for t in turns))
    s_all = float(set(gold["sessions"]) <= set(sessions[:5]))
    t_all = float(set(gold["gold"]) <= set(turns[:10])) if gold["gold"] else math.nan
    return (s_all, t_all)


def _mean(name: str, values: list[Any]) -> str:
    if not values:
        return "-"
    if name.startswith("lme"):
        s_all = statistics.fmean(v[0] for v in values)
        t_all = statistics.fmean(v[1] for v in values if not math.isnan(v[1]))
        return f"{s_all:.4f} / {t_all:.4f}"
    return f"{statistics.fmean(values):.4f}"


def fit(args: argparse.Namespace) -> None:
    data: dict[str, Any] = {}
    for path in args.pools:
        with open(path, "rb") as fh:
            data.update(pickle.load(fh))
    present = [name for name in LIMITS if name in data]
    train = training(data, True, args.train or present)
    current = fusion.weights_for(str(data.get("embedder", "")))
    fixed = dict(_fixed(x, current) for x in args.fix)
    w = fit_weights(
        train,
        args.epochs,
        args.drop,
        args.loss,
        args.temp,
        args.mix,
        args.worst,
        args.bounded,
        fixed,
        current if args.start == "code" else None,
    )
    if args.save is not None:
        np.save(args.save, w)
    print(
        "WEIGHTS = np.array(\n    [\n"
        + "".join(f"        {x:.4f},  # {n}\n" for n, x in zip(fusion.FEATURES, w, strict=True))
    )
    print("    ]\n)")
    model = str(data.get("embedder", ""))  # captures before this key: the default embedder
    print(f"embedder {model or '(not recorded)'}; 'in code': the weights jiyi uses for it")
    for name in present:
        print(f"{name} (LME: session recall_all@5 / turn recall_all@10; LoCoMo: recall@10; zh/en: recall@5)")
        print(f"  fitted   {figures(name, data, w)}")
        if current.any():
            print(f"  in code  {figures(name, data, current)}")
        print(f"  parts    {json.dumps(_parts(name, data[name]['parts']))}")


def _fixed(spec: str, current: np.ndarray) -> tuple[str, float]:
    """``NAME=VALUE`` or ``NAME`` (its weight in code) for ``fit --fix``."""
    name, _, value = spec.partition("=")
    if name not in fusion.FEATURES:
        raise SystemExit(f"--fix: no feature {name!r}")
    return name, float(value) if value else float(current[fusion.FEATURES.index(name)])


def _parts(name: str, summary: dict[str, Any]) -> dict[str, Any]:
    if name.startswith("lme"):
        return {
            half: {k: (v["s_all@5"], v["t_all@10"]) for k, v in summary[key].items()}
            for half, key in (("all", "overall"), ("tuning", "half:even"), ("report", "half:odd"))
            if key in summary
        }
    if name.startswith("locomo"):
        return {
            half: {k: v["recall@10"] for k, v in block.items()} for half, block in summary["parts"].items()
        }
    return {
        half: {k: v["recall@5"] for k, v in summary["table"][key].items()}
        for half, key in (("all", "overall"), ("tuning", "half tuning"), ("report", "half held-out"))
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture", help="run the three benchmarks and keep every search's pool")
    c.add_argument("out", type=Path)
    c.add_argument("--lme", type=Path, default=DEFAULT_LME)
    c.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    c.add_argument("--cache", type=Path, default=None, help="LongMemEval embedding cache (.npz)")
    c.add_argument("--embedder", default=None, help="embedder spec for every set (default: jiyi's default)")
    c.add_argument("--locomo-cache", type=Path, default=None, help="LoCoMo embedding cache (.npz)")
    c.add_argument(
        "--sets",
        nargs="+",
        choices=("zhen", "locomo", "lme"),
        default=None,
        help="which sets to run (default: all three in raw mode; locomo and lme with --pipeline, "
        "which has no zhen)",
    )
    c.add_argument(
        "--lme-every",
        type=int,
        default=1,
        help="raw mode: every N-th LongMemEval question (an odd N keeps both halves)",
    )
    c.add_argument(
        "--lme-half",
        choices=("even", "odd", "all"),
        default="all",
        help="raw mode: LongMemEval questions of even (development) or odd lines only",
    )
    c.add_argument(
        "--pipeline",
        action="store_true",
        help="LoCoMo and LongMemEval_S in pipeline mode (remember() each session) instead of raw mode",
    )
    c.add_argument("--every", type=int, default=3, help="pipeline: every N-th LongMemEval question")
    c.add_argument(
        "--stores",
        type=Path,
        default=None,
        metavar="DIR",
        help="pipeline: LongMemEval stores kept by `bench/longmemeval.py --stores DIR` (searched "
        "without ingesting again; built and kept there when missing)",
    )
    f = sub.add_parser("fit", help="fit the weights on the development halves")
    f.add_argument("pools", type=Path, nargs="+", help="one or more capture files (their sets are merged)")
    f.add_argument("--epochs", type=int, default=1000)
    f.add_argument(
        "--train", nargs="*", choices=tuple(LIMITS), help="sets to fit on (default: every set given)"
    )
    f.add_argument(
        "--drop",
        nargs="*",
        default=[],
        choices=(*fusion.EVIDENCE, *fusion.PLAIN),
        metavar="EVIDENCE",
        help="fit without this evidence (its weights held at 0), to compare feature sets on one capture",
    )
    f.add_argument(
        "--loss",
        choices=LOSSES,
        default="softmax",
        help="softmax: listwise softmax; allk: every gold item above the k-th best non-gold one "
        "(k: the benchmark's cut, CUTS); mix: --mix * softmax + (1 - --mix) * allk",
    )
    f.add_argument(
        "--temp", type=float, default=1.0, help="allk: the margin's temperature (fused-value units)"
    )
    f.add_argument("--mix", type=float, default=0.5, help="mix: the softmax loss's share")
    f.add_argument("--worst", action="store_true", help="allk: the worst gold item of a pool counts most")
    f.add_argument(
        "--bounded",
        action="store_true",
        help="allk: a sigmoid of the margin (a smooth count of misses) instead of a softplus; "
        "best with --start code",
    )
    f.add_argument(
        "--fix",
        nargs="*",
        default=[],
        metavar="NAME[=VALUE]",
        help="hold a column's weight (a name in FEATURES) at VALUE, or at its weight in code",
    )
    f.add_argument(
        "--start",
        choices=("zero", "code"),
        default="zero",
        help="start from zero or from the weights in code",
    )
    f.add_argument("--save", type=Path, default=None, metavar="W.npy", help="also write the weights (numpy)")
    args = p.parse_args(argv)
    if args.command == "capture" and args.sets is None:
        args.sets = ["locomo", "lme"] if args.pipeline else ["zhen", "locomo", "lme"]
    if args.command == "capture" and args.pipeline and "zhen" in args.sets:
        p.error("--pipeline has no zhen set")
    if args.command == "capture" and args.pipeline:
        capture_pipeline(args)
    elif args.command == "capture":
        capture(args)
    else:
        fit(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
