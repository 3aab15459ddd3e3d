"""LongMemEval_S retrieval over long chat histories (PROTOCOL section 4).

Raw mode (default, the paper's user-side index): one memory space per question; every
non-blank user turn of every haystack session is one memory, with the session's date as
the time it happened, the session as its thread and the turn id as its source id. The
question is searched as is with "now" at ``question_date``. The same run ranks the same
store with jiyi's parts alone (``bench/parts.py``: cosine, BM25, their RRF).

Pipeline mode (``--mode pipeline``): each session's turns (user and assistant) go through
``Memory.remember`` in date order, with the clock at the session's date, then
``end_session`` and the job queue drained; each stored item keeps the turn ids it came
from (as ``bench/locomo.py --mode pipeline`` does) and rankings are scored through them.

Metrics over the questions with ``in_paper_retrieval_eval``: ranked turns map to sessions
in first-occurrence order; session recall_any@5/@10, recall_all@5/@10 against
``gold_session_ids``, session NDCG@10, turn-level recall_all@10 against
``gold_turn_ids_user``, and the number of distinct sessions among the top 10 turns.
Overall, per question type and on the two halves of the file (even and odd line numbers,
0-based): tune on one, report the other.

    python bench/longmemeval.py ../shared/data/lme_s_dev.jsonl.gz --limit 20
    python bench/longmemeval.py DATA --half odd --json out.json
    python bench/longmemeval.py DATA --mode pipeline --limit 10
    python bench/longmemeval.py DATA --mode pipeline --every 3 --stores /tmp/lme-stores  # keeps them
    python bench/longmemeval.py DATA --mode pipeline --every 3 --stores /tmp/lme-stores  # search only
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import REPO_ROOT, git_commit, machine_info, now_iso, peak_rss_mb, percentiles_ms, write_json
from jiyi.config import GateConfig, SessionConfig
from jiyi.embed.base import resolve_embedder
from jiyi.memory import Memory
from jiyi.store.sqlite import SQLiteStore
from locomo import DialogueTurn, Session, _record_outcomes, active_items
from locomo import PipelineRun as LocomoPipelineRun
from parts import PARTS, CachingEmbedder, SetClock, part_rankings, source_ids

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "lme_s_dev.jsonl.gz"
SEARCH_LIMIT = 50
"""Turns ranked per question: enough for 10 distinct sessions in nearly every case."""
SYSTEMS = ("jiyi", *PARTS)
HALVES = ("even", "odd")
DRAIN_BATCH = 50


# ---------------------------------------------------------------- data


def parse_date(text: str) -> datetime:
    """``"2023/05/30 (Tue) 23:40"`` as an aware UTC datetime."""
    day, _, rest = text.strip().partition(" ")
    clock = rest.split(")")[-1].strip() or "00:00"
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


@dataclass(frozen=True)
class Question:
    index: int
    """0-based line number in the file (the halves are even and odd ones)."""
    row: dict[str, Any]

    @property
    def qid(self) -> str:
        return str(self.row["question_id"])

    @property
    def kind(self) -> str:
        return str(self.row["question_type"])

    @property
    def now(self) -> datetime:
        return parse_date(self.row["question_date"])

    @property
    def scored(self) -> bool:
        return bool(self.row.get("in_paper_retrieval_eval"))

    def sessions(self) -> list[dict[str, Any]]:
        """Haystack sessions in date order (the file's order among equal dates)."""
        return sorted(self.row["sessions"], key=lambda s: parse_date(s["date"]))

    def user_records(self) -> list[dict[str, Any]]:
        out = []
        for s in self.sessions():
            at = parse_date(s["date"])
            for i, t in enumerate(s["turns"]):
                if t["role"] != "user" or not str(t["content"]).strip():
                    continue
                out.append(
                    {
                        "content": t["content"],
                        "memory_type": "event",
                        "user_id": self.qid,
                        "session_id": s["session_id"],
                        "thread_id": s["session_id"],
                        "source_id": t["turn_id"],
                        # Turns keep their order inside the session's thread.
                        "occurred_at": at + timedelta(seconds=i),
                    }
                )
        return out


def load(path: Path) -> list[Question]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [Question(i, json.loads(line)) for i, line in enumerate(fh) if line.strip()]


def session_of(turn_id: str) -> str:
    """``"<session_id>_<k>"`` -> ``"<session_id>"``."""
    return turn_id.rsplit("_", 1)[0]


# ---------------------------------------------------------------- metrics


def question_metrics(q: Question, turns: Sequence[str]) -> dict[str, float]:
    """The section-4 metrics of one question's ranked turn ids."""
    sessions = list(dict.fromkeys(session_of(t) for t in turns))
    gold = set(q.row["gold_session_ids"])
    gold_turns = set(q.row["gold_turn_ids_user"])
    out: dict[str, float] = {}
    for k in (5, 10):
        top = set(sessions[:k])
        out[f"s_any@{k}"] = float(bool(gold & top))
        out[f"s_all@{k}"] = float(gold <= top)
    dcg = sum(1.0 / math.log2(i + 2) for i, s in enumerate(sessions[:10]) if s in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    out["t_all@10"] = float(gold_turns <= set(turns[:10])) if gold_turns else float("nan")
    out["sessions@10t"] = float(len({session_of(t) for t in turns[:10]}))
    return out


METRICS = ("s_any@5", "s_all@5", "s_any@10", "s_all@10", "ndcg@10", "t_all@10", "sessions@10t")


def average(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {"n": float(len(rows))}
    for m in METRICS:
        vals = [r[m] for r in rows if not math.isnan(r[m])]
        out[m] = round(statistics.fmean(vals), 4) if vals else 0.0
    return out


# ---------------------------------------------------------------- runs


@dataclass
class Result:
    question: Question
    ranked: dict[str, list[str]] = field(default_factory=dict)
    """Turn ids by system, best first."""
    latency_ms: float = 0.0
    memories: int = 0


def run_raw(q: Question, embedder: CachingEmbedder, tmp: Path) -> Result:
    now = q.now
    with Memory(SQLiteStore(tmp / f"{q.qid}.db"), embedder=embedder, clock=lambda: now) as mem:
        records = q.user_records()
        mem.import_items(records)
        res = Result(q, memories=len(records))
        t0 = time.perf_counter()
        hits = mem.search(q.row["question"], user_id=q.qid, limit=SEARCH_LIMIT, touch=False)
        res.latency_ms = (time.perf_counter() - t0) * 1000.0
        res.ranked["jiyi"] = [h.item.source_id or "" for h in hits]
        parts = part_rankings(mem, q.row["question"], q.qid, now, SEARCH_LIMIT)
        res.ranked.update(source_ids(mem, parts))
    return res


def _pipeline_session(s: dict[str, Any]) -> tuple[Session, list[dict[str, Any]]]:
    at = parse_date(s["date"])
    turns = [t for t in s["turns"] if str(t["content"]).strip()]
    session = Session(0, at, tuple(DialogueTurn(t["turn_id"], t["role"], t["content"]) for t in turns))
    messages = [
        {"role": t["role"], "content": t["content"], "created_at": at + timedelta(seconds=i)}
        for i, t in enumerate(turns)
    ]
    return session, messages


def run_pipeline(
    q: Question, embedder: CachingEmbedder, tmp: Path, keep_turns: bool, stores: Path | None = None
) -> Result:
    """remember() each session in date order, then score through each item's source turns.

    With ``stores`` (``--stores DIR``) the question's SQLite file and its item -> turn map
    are kept there, and a later run with the same DIR searches them without ingesting
    again: a change to the read side is measured in seconds instead of a full ingest."""
    kept = None if stores is None else (stores / f"{q.qid}.db", stores / f"{q.qid}.sources.json")
    if kept is not None and kept[0].exists() and kept[1].exists():
        db, sources = kept[0], _load_sources(kept[1])
    else:
        db = kept[0] if kept is not None else tmp / f"{q.qid}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        sources = _ingest(q, embedder, db, keep_turns)
        if kept is not None:
            kept[1].write_text(json.dumps({k: list(v) for k, v in sources.items()}), encoding="utf-8")
    now = q.now
    with Memory(SQLiteStore(db), embedder=embedder, background=False, clock=lambda: now) as mem:
        res = Result(q, memories=len(active_items(mem, q.qid)))
        t0 = time.perf_counter()
        hits = mem.search(q.row["question"], user_id=q.qid, limit=SEARCH_LIMIT, touch=False)
        res.latency_ms = (time.perf_counter() - t0) * 1000.0
        res.ranked["jiyi"] = _through_sources([h.item.id for h in hits], sources)
        for name, ids in part_rankings(mem, q.row["question"], q.qid, now, SEARCH_LIMIT).items():
            res.ranked[name] = _through_sources(ids, sources)
    return res


def _ingest(q: Question, embedder: CachingEmbedder, db: Path, keep_turns: bool) -> dict[str, dict[str, None]]:
    """Every session of ``q`` through remember() into ``db``; each stored item's source turns."""
    sessions = q.sessions()
    clock = SetClock(parse_date(sessions[0]["date"]) if sessions else q.now)
    sources: dict[str, dict[str, None]] = {}
    mem = Memory(
        SQLiteStore(db),
        embedder=embedder,
        background=False,
        gate=GateConfig(),
        session=SessionConfig(keep_turns=keep_turns),
        clock=clock,
    )
    with mem:
        # locomo's bookkeeping maps job outcomes to source turn ids.
        book = LocomoPipelineRun(None, 0, 0.0, mem.rank)  # type: ignore[arg-type]
        for s in sessions:
            session, messages = _pipeline_session(s)
            if not messages:
                continue
            clock.at = session.occurred_at + timedelta(seconds=len(messages))  # type: ignore[operator]
            mem.remember(messages, session_id=s["session_id"], user_id=q.qid)
            mem.end_session(s["session_id"], user_id=q.qid)
            contents = [m["content"] for m in messages]
            while reports := mem.process_jobs(worker="lme", limit=DRAIN_BATCH):
                _record_outcomes(book, reports, session, contents, sources)
    return sources


def _load_sources(path: Path) -> dict[str, dict[str, None]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {item_id: dict.fromkeys(turns) for item_id, turns in data.items()}


def _through_sources(item_ids: Sequence[str], sources: dict[str, dict[str, None]]) -> list[str]:
    return list(dict.fromkeys(t for i in item_ids for t in sources.get(i, {})))


# ---------------------------------------------------------------- report


def by_system(results: Sequence[Result]) -> dict[str, dict[str, float]]:
    scored = [r for r in results if r.question.scored]
    return {
        name: average([question_metrics(r.question, r.ranked.get(name, [])) for r in scored])
        for name in SYSTEMS
    }


def format_block(title: str, rows: dict[str, dict[str, float]]) -> str:
    n = int(next(iter(rows.values()))["n"]) if rows else 0
    head = f"{title} (n {n})"
    lines = [f"{head:34}" + "".join(f"{m:>13}" for m in METRICS)]
    for name, row in rows.items():
        lines.append(f"  {name:32}" + "".join(f"{row[m]:>13.4f}" for m in METRICS))
    return "\n".join(lines)


def summarise(results: Sequence[Result]) -> dict[str, Any]:
    out: dict[str, Any] = {"overall": by_system(results)}
    for half in HALVES:
        parity = 0 if half == "even" else 1
        chosen = [r for r in results if r.question.index % 2 == parity]
        if chosen:
            out[f"half:{half}"] = by_system(chosen)
    for kind in sorted({r.question.kind for r in results}):
        out[f"type:{kind}"] = by_system([r for r in results if r.question.kind == kind])
    out["search_ms"] = percentiles_ms([r.latency_ms for r in results])
    out["memories_mean"] = round(statistics.fmean(r.memories for r in results), 1) if results else 0.0
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="LongMemEval_S retrieval for jiyi and its parts.")
    p.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="lme_s_dev.jsonl.gz")
    p.add_argument("--mode", choices=("raw", "pipeline"), default="raw")
    p.add_argument(
        "--no-keep-turns",
        dest="keep_turns",
        action="store_false",
        help="pipeline: keep only what extraction finds (SessionConfig(keep_turns=False)); by default "
        "every turn is kept as a resource, as in the library",
    )
    p.add_argument("--half", choices=(*HALVES, "all"), default="all", help="even or odd line numbers")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="first N selected questions")
    p.add_argument("--every", type=int, default=1, metavar="M", help="every M-th selected question (sample)")
    p.add_argument(
        "--offset",
        type=int,
        default=0,
        metavar="K",
        help="with --every M: start at the K-th selected question (0..M-1), so that "
        "--offset 0, 1 and 2 with --every 3 cover the set in three disjoint samples",
    )
    p.add_argument("--cache", type=Path, default=None, help="embedding cache file (.npz), kept across runs")
    p.add_argument("--embedder", default=None, help="embedder spec (default: jiyi's default)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    p.add_argument("--details", type=Path, default=None, metavar="OUT.jsonl", help="per-question rankings")
    p.add_argument(
        "--stores",
        type=Path,
        default=None,
        metavar="DIR",
        help="pipeline: keep each question's store in DIR, or search the one kept there by an earlier "
        "run (same data, options and write path) without ingesting again",
    )
    args = p.parse_args(argv)
    if not args.data.exists():
        p.error(f"no data file at {args.data}")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if args.every < 1:
        p.error("--every must be >= 1")
    if not 0 <= args.offset < args.every:
        p.error("--offset must be within 0..M-1 for --every M")
    if not args.keep_turns and args.mode != "pipeline":
        p.error("--no-keep-turns is for --mode pipeline")
    if args.stores is not None and args.mode != "pipeline":
        p.error("--stores is for --mode pipeline")
    return args


def select(
    questions: list[Question], half: str, every: int, limit: int | None, offset: int = 0
) -> list[Question]:
    if half != "all":
        questions = [q for q in questions if q.index % 2 == (0 if half == "even" else 1)]
    questions = questions[offset::every]
    return questions[:limit] if limit is not None else questions


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    questions = select(load(args.data), args.half, args.every, args.limit, args.offset)
    embedder = CachingEmbedder(resolve_embedder(args.embedder), args.cache)
    embedder.embed(["load the model before timing"])
    if args.stores is not None:
        args.stores.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jiyi-lme-") as tmp:
        for i, q in enumerate(questions, 1):
            if args.mode == "pipeline":
                res = run_pipeline(q, embedder, Path(tmp), args.keep_turns, args.stores)
            else:
                res = run_raw(q, embedder, Path(tmp))
            (Path(tmp) / f"{q.qid}.db").unlink(missing_ok=True)
            results.append(res)
            if i % 10 == 0 or i == len(questions):
                embedder.save()
                print(
                    f"  {i}/{len(questions)} questions, {time.perf_counter() - started:.0f}s", file=sys.stderr
                )
    summary = summarise(results)
    for key, rows in summary.items():
        if isinstance(rows, dict) and "jiyi" in rows:
            print(format_block(key, rows))
    ms = summary["search_ms"]
    print(
        f"\nmode {args.mode}{'' if args.keep_turns else ' no keep_turns'}; half {args.half}; "
        f"{len(results)} questions; jiyi search ms p50 {ms['p50']:.1f} p95 {ms['p95']:.1f}; "
        f"{summary['memories_mean']} memories per question; embedder {embedder.model_id}"
    )
    summary.update(
        mode=args.mode,
        keep_turns=args.keep_turns,
        half=args.half,
        questions=len(results),
        machine=machine_info(),
        date=now_iso(),
        commit=git_commit(),
        peak_rss_mb=peak_rss_mb(),
    )
    if args.json:
        write_json(args.json, summary)
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for r in results:
                fh.write(json.dumps({"qid": r.question.qid, "index": r.question.index, **r.ranked}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
