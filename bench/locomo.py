"""LoCoMo evidence recall, raw mode (docs/benchmarks.md; PROTOCOL section 1).

Every dialogue turn becomes one memory in its conversation's space (``user_id =
sample_id``); every question is one ``Memory.search`` there; a question scores by how many
of its evidence dia_ids come back in the top k. Nothing here is known to the library.

    python bench/locomo.py                       # all conversations, default embedder
    python bench/locomo.py --conversations 1-5 --json out.json
    python bench/locomo.py --half-report         # 1-5 vs 6-10 vs all, one ingest each
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import (
    REPO_ROOT,
    git_commit,
    jsonable,
    machine_info,
    now_iso,
    peak_rss_mb,
    percentiles_ms,
    write_json,
)
from jiyi.config import RankConfig
from jiyi.embed.base import Embedder, resolve_embedder
from jiyi.memory import Memory
from jiyi.store.sqlite import SQLiteStore

KS = (5, 10, 20)
SEARCH_LIMIT = 20
WARMUP_SEARCHES = 20
CATEGORIES = (1, 2, 3, 4, 5)
HEADLINE = "cat1-4"
HEADLINE_CATEGORIES = frozenset({1, 2, 3, 4})
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo10.json"
HALVES = (("1-5", "1-5"), ("6-10", "6-10"), ("all", "1-10"))

_SESSION_KEY = re.compile(r"session_(\d+)")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
# "1:56 pm on 8 May, 2023" (also tolerates "1.56pm", "on" missing, no comma, "Sept.")
_DATE_TIME = re.compile(
    r"(?P<h>\d{1,2})[:.](?P<mi>\d{2})\s*(?P<ampm>[ap]\.?m\.?)?\s*(?:on\s+)?"
    r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{4})",
    re.IGNORECASE,
)
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)", re.IGNORECASE)


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]
    """Canonical dia_ids (duplicates removed); ids that match no turn stay here."""
    unfindable: int
    """How many of ``evidence`` match no turn of the conversation."""


@dataclass(frozen=True)
class Conversation:
    number: int
    """1-based position in the data file."""
    sample_id: str
    records: list[dict[str, Any]]
    questions: list[Question]
    undated_sessions: int


def parse_session_time(text: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime; None when unreadable."""
    m = _DATE_TIME.search(text.strip())
    if not m:
        return None
    month = _MONTHS.get(m["mon"][:3].lower())
    if month is None:
        return None
    hour, minute = int(m["h"]), int(m["mi"])
    if m["ampm"]:
        pm = m["ampm"][0].lower() == "p"
        hour = hour % 12 + (12 if pm else 0)
    try:
        return datetime(int(m["y"]), month, int(m["d"]), hour, minute, tzinfo=UTC)
    except ValueError:
        return None


def canonical_dia_id(raw: str) -> str:
    """``"D:11:26"``, ``"d30:05"`` -> ``"D11:26"``, ``"D30:5"``; anything else unchanged."""
    m = _DIA_ID.fullmatch(raw.strip())
    return f"D{int(m[1])}:{int(m[2])}" if m else raw.strip()


def normalise_evidence(raw: Iterable[object]) -> tuple[str, ...]:
    """Split entries such as ``"D8:6; D9:17"`` or ``"D9:1 D4:4"`` and canonicalise each id."""
    out: list[str] = []
    for entry in raw:
        for part in _EVIDENCE_SPLIT.split(str(entry)):
            if part:
                out.append(canonical_dia_id(part))
    return tuple(dict.fromkeys(out))


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [shares image: {caption}]"
    return content


def load_conversation(number: int, sample: dict[str, Any]) -> Conversation:
    sample_id = str(sample["sample_id"])
    conv = sample["conversation"]
    sessions = sorted(
        (int(m[1]), key) for key in conv if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    records: list[dict[str, Any]] = []
    undated = 0
    for session, key in sessions:
        occurred_at = parse_session_time(str(conv.get(f"{key}_date_time", "")))
        if occurred_at is None:
            undated += 1
        for turn in conv[key]:
            dia_id = str(turn["dia_id"])
            records.append(
                {
                    "content": turn_content(turn),
                    "memory_type": "event",
                    "user_id": sample_id,
                    # The conversation's session: jiyi orders a session's turns and uses
                    # each turn's neighbours as its context.
                    "session_id": f"{sample_id}:session_{session}",
                    "source_id": dia_id,
                    "occurred_at": occurred_at,
                    "metadata": {"dia_id": dia_id, "session": session},
                }
            )
    known = {canonical_dia_id(r["source_id"]) for r in records}
    questions = []
    for qa in sample.get("qa", []):
        evidence = normalise_evidence(qa.get("evidence") or [])
        questions.append(
            Question(
                text=str(qa["question"]),
                category=int(qa["category"]),
                evidence=evidence,
                unfindable=sum(1 for e in evidence if e not in known),
            )
        )
    return Conversation(number, sample_id, records, questions, undated)


def parse_selection(spec: str, total: int) -> list[int]:
    """``"1-5"``, ``"3"``, ``"1,4,7"``, ``"1-3,8"`` -> sorted 1-based numbers within 1..total."""
    chosen: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
        except ValueError:
            raise ValueError(f"bad conversation selection {spec!r}: use e.g. 1-5, 3 or 1,4,7") from None
        if not 1 <= first <= last <= total:
            raise ValueError(f"conversation selection {part!r} is outside 1..{total}")
        chosen.update(range(first, last + 1))
    if not chosen:
        raise ValueError(f"empty conversation selection {spec!r}")
    return sorted(chosen)


# ---------------------------------------------------------------- run


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    ranked: tuple[str, ...]
    """Canonical dia_ids of the hits, best first."""
    latency_ms: float


@dataclass
class ConversationRun:
    conversation: Conversation
    memories: int
    ingest_s: float
    rank_config: RankConfig
    results: list[QuestionResult] = field(default_factory=list)


@contextmanager
def store_path(db_dir: Path | None, sample_id: str) -> Iterator[Path]:
    """A fresh SQLite file: in ``db_dir`` (kept afterwards) or in a temporary directory."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", sample_id)
    if db_dir is None:
        with tempfile.TemporaryDirectory(prefix="jiyi-locomo-") as tmp:
            yield Path(tmp) / f"{safe}.db"
        return
    db_dir.mkdir(parents=True, exist_ok=True)
    path = db_dir / f"locomo-{safe}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    yield path


def run_conversation(
    conv: Conversation, embedder: Embedder, db_dir: Path | None, limit_questions: int | None
) -> ConversationRun:
    with store_path(db_dir, conv.sample_id) as path, Memory(SQLiteStore(path), embedder=embedder) as mem:
        started = time.perf_counter()
        imported = mem.import_items(conv.records)
        run = ConversationRun(conv, imported.imported, time.perf_counter() - started, mem.rank)
        # Warm-up with texts that are not questions, so the query cache does not help later.
        for record in conv.records[:WARMUP_SEARCHES]:
            mem.search(record["content"], user_id=conv.sample_id, limit=SEARCH_LIMIT, touch=False)
        questions = conv.questions if limit_questions is None else conv.questions[:limit_questions]
        for q in questions:
            t0 = time.perf_counter()
            hits = mem.search(q.text, user_id=conv.sample_id, limit=SEARCH_LIMIT, touch=False)
            elapsed = (time.perf_counter() - t0) * 1000.0
            ranked = tuple(canonical_dia_id(h.item.source_id or "") for h in hits)
            run.results.append(QuestionResult(q, ranked, elapsed))
    return run


# ---------------------------------------------------------------- metrics


def evidence_recall(result: QuestionResult, k: int) -> float:
    top = set(result.ranked[:k])
    ev = result.question.evidence
    return sum(1 for e in ev if e in top) / len(ev)


def metrics(results: Sequence[QuestionResult]) -> dict[str, float | int]:
    """Recall@k and hit@k over the questions that have evidence; ``n`` counts them."""
    scored = [r for r in results if r.question.evidence]
    out: dict[str, float | int] = {}
    for k in KS:
        recalls = [evidence_recall(r, k) for r in scored]
        out[f"recall@{k}"] = round(sum(recalls) / len(recalls), 4) if recalls else 0.0
    for k in KS:
        hits = [1.0 if evidence_recall(r, k) > 0 else 0.0 for r in scored]
        out[f"hit@{k}"] = round(sum(hits) / len(hits), 4) if hits else 0.0
    out["n"] = len(scored)
    return out


def by_category(results: Sequence[QuestionResult]) -> dict[str, dict[str, float | int]]:
    table = {HEADLINE: metrics([r for r in results if r.question.category in HEADLINE_CATEGORIES])}
    for cat in CATEGORIES:
        table[f"cat{cat}"] = metrics([r for r in results if r.question.category == cat])
    return table


def summarise(runs: Sequence[ConversationRun], embedder: Embedder, rank_config: RankConfig) -> dict[str, Any]:
    results = [r for run in runs for r in run.results]
    memories = sum(run.memories for run in runs)
    ingest_s = sum(run.ingest_s for run in runs)
    summary: dict[str, Any] = by_category(results)
    summary["search_ms"] = percentiles_ms([r.latency_ms for r in results])
    summary["ingest_per_s"] = round(memories / ingest_s, 4) if ingest_s > 0 else 0.0
    summary["embedder"] = embedder.model_id
    summary["config"] = jsonable(rank_config)
    summary["conversations"] = [run.conversation.sample_id for run in runs]
    summary["memories"] = memories
    summary["questions"] = len(results)
    summary["excluded_no_evidence"] = {
        f"cat{c}": sum(1 for r in results if r.question.category == c and not r.question.evidence)
        for c in CATEGORIES
    }
    summary["unfindable_evidence_ids"] = sum(r.question.unfindable for r in results)
    summary["undated_sessions"] = sum(run.conversation.undated_sessions for run in runs)
    summary["per_conversation"] = {
        run.conversation.sample_id: metrics(
            [r for r in run.results if r.question.category in HEADLINE_CATEGORIES]
        )["recall@10"]
        for run in runs
    }
    return summary


# ---------------------------------------------------------------- output


def format_table(summary: dict[str, Any]) -> str:
    cols = [f"recall@{k}" for k in KS] + [f"hit@{k}" for k in KS]
    header = f"{'':8}{'n':>6}" + "".join(f"{c:>11}" for c in cols)
    lines = [header, "-" * len(header)]
    for key in (HEADLINE, *(f"cat{c}" for c in CATEGORIES)):
        row = summary[key]
        lines.append(f"{key:8}{row['n']:>6}" + "".join(f"{row[c]:>11.4f}" for c in cols))
    ms = summary["search_ms"]
    excluded = sum(summary["excluded_no_evidence"].values())
    lines += [
        "",
        f"search ms   p50 {ms['p50']:.2f}   p95 {ms['p95']:.2f}   (whole Memory.search, incl. query embedding)",
        f"ingest      {summary['ingest_per_s']:.1f} memories/s   ({summary['memories']} memories)",
        f"embedder    {summary['embedder']}",
        f"questions   {summary['questions']} searched; {excluded} without evidence excluded from averages; "
        f"{summary['unfindable_evidence_ids']} evidence ids match no turn (counted as missed)",
        "per conversation, cat1-4 recall@10: "
        + ", ".join(f"{sid} {v:.3f}" for sid, v in summary["per_conversation"].items()),
    ]
    return "\n".join(lines)


def format_halves(halves: dict[str, dict[str, Any]]) -> str:
    names = list(halves)
    lines = [f"{'cat1-4':12}" + "".join(f"{n:>10}" for n in names)]
    for metric in ("recall@5", "recall@10", "recall@20", "hit@10", "n"):
        cells = [halves[n][HEADLINE][metric] for n in names]
        fmt = "{:>10}" if metric == "n" else "{:>10.4f}"
        lines.append(f"{metric:12}" + "".join(fmt.format(c) for c in cells))
    return "\n".join(lines)


def details_rows(runs: Sequence[ConversationRun]) -> Iterator[dict[str, Any]]:
    for run in runs:
        for r in run.results:
            q = r.question
            yield {
                "sample_id": run.conversation.sample_id,
                "category": q.category,
                "question": q.text,
                "evidence": list(q.evidence),
                "ranked": list(r.ranked),
                "recall@10": round(evidence_recall(r, 10), 4) if q.evidence else None,
                "ms": round(r.latency_ms, 2),
            }


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="LoCoMo evidence recall for jiyi (raw mode).")
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA if DEFAULT_DATA.exists() else None,
        help=f"locomo10.json (default: {DEFAULT_DATA} when it exists)",
    )
    p.add_argument(
        "--conversations", default=None, help="1-based selection: 1-5, 6-10, 3, 1,4,7 (default: all)"
    )
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json", help="write the figures as JSON")
    p.add_argument(
        "--embedder", default=None, help="embedder spec passed to Memory (default: jiyi's default)"
    )
    p.add_argument("--limit-questions", type=int, default=None, metavar="N", help="first N questions each")
    p.add_argument("--db-dir", type=Path, default=None, help="keep the SQLite files here (default: temp dir)")
    p.add_argument("--half-report", action="store_true", help="report conversations 1-5, 6-10 and all")
    p.add_argument("--details", type=Path, default=None, metavar="OUT.jsonl", help="per-question ranks")
    args = p.parse_args(argv)
    if args.data is None:
        p.error(f"--data is required ({DEFAULT_DATA} does not exist)")
    if args.half_report and args.conversations:
        p.error("--half-report runs 1-5, 6-10 and all; do not combine it with --conversations")
    if args.limit_questions is not None and args.limit_questions < 1:
        p.error("--limit-questions must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with open(args.data, encoding="utf-8") as fh:
        samples = json.load(fh)
    total = len(samples)
    try:
        selection = parse_selection(args.conversations or f"1-{total}", total)
        halves_spec = (
            {name: parse_selection(spec, total) for name, spec in HALVES} if args.half_report else {}
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    conversations = [load_conversation(n, samples[n - 1]) for n in selection]
    del samples

    embedder = resolve_embedder(args.embedder)
    t0 = time.perf_counter()
    embedder.embed(["load the model before timing"])
    load_s = time.perf_counter() - t0
    print(f"embedder {embedder.model_id} loaded in {load_s:.1f}s", file=sys.stderr)

    runs: list[ConversationRun] = []
    for conv in conversations:
        run = run_conversation(conv, embedder, args.db_dir, args.limit_questions)
        runs.append(run)
        print(
            f"  {conv.number:>2} {conv.sample_id}: {run.memories} memories in {run.ingest_s:.1f}s, "
            f"{len(run.results)} questions",
            file=sys.stderr,
        )
    rank_config = runs[0].rank_config
    summary = summarise(runs, embedder, rank_config)
    summary["conversation_numbers"] = selection
    summary["machine"] = machine_info()
    summary["date"] = now_iso()
    summary["commit"] = git_commit()
    summary["peak_rss_mb"] = peak_rss_mb()
    summary["embedder_load_s"] = round(load_s, 2)

    print(format_table(summary))
    if args.half_report:
        by_number = {run.conversation.number: run for run in runs}
        halves = {
            name: summarise([by_number[n] for n in numbers], embedder, rank_config)
            for name, numbers in halves_spec.items()
        }
        print()
        print(format_halves(halves))
        summary["halves"] = {name: half[HEADLINE] for name, half in halves.items()}
    if args.json:
        write_json(args.json, summary)
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for row in details_rows(runs):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
