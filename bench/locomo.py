"""LoCoMo evidence recall, raw and pipeline mode (docs/benchmarks.md; PROTOCOL section 1).

Raw mode (default): every dialogue turn becomes one memory in its conversation's space
(``user_id = sample_id``); every question is one ``Memory.search`` there; a question
scores by how many of its evidence dia_ids come back in the top k. Nothing here is known
to the library.

Pipeline mode (``--mode pipeline``): each session's turns go through the conversation
pipeline instead: one ``Memory.remember`` per session (every turn a ``user`` message;
``--speaker-as name`` sends the text with ``name=speaker``, ``prefix`` sends
``"{speaker}: {text}"`` as raw mode), ``end_session``, then ``process_jobs`` until idle
(rule extraction offline -> write gate -> reconciliation -> store; compaction episodes).
The clock follows the session dates. The benchmark keeps, from the job reports, which
dia_ids each stored item came from (an extracted candidate: its turn; a reinforcement or
update: added to the target; a supersede: the new item gets its turn and the replaced
item's ids; an episode: the turns its summary sentences were taken from). A question's
ranked dia_ids are the union of its hits' ids in rank order, scored as in raw mode.

    python bench/locomo.py                       # all conversations, default embedder
    python bench/locomo.py --conversations 1-5 --json out.json
    python bench/locomo.py --half-report         # 1-5 vs 6-10 vs all, one ingest each
    python bench/locomo.py --mode pipeline                         # default gate (3 per session/day)
    python bench/locomo.py --mode pipeline --max-extractions 1000000   # rate limit lifted
    python bench/locomo.py --data bench/data/conversations_zh_en.json --half-report   # our zh/en set
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
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
from jiyi.config import GateConfig, RankConfig, SessionConfig
from jiyi.embed.base import Embedder, resolve_embedder
from jiyi.memory import Memory
from jiyi.model import MemoryItem
from jiyi.store.sqlite import SQLiteStore
from parts import PARTS, CachingEmbedder, SetClock, part_rankings, record_sources, source_ids

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
class DialogueTurn:
    dia_id: str
    """Canonical dia_id."""
    speaker: str
    text: str
    """The turn's text, with ``" [shares image: ...]"`` when it has a caption."""


@dataclass(frozen=True)
class Session:
    number: int
    occurred_at: datetime | None
    turns: tuple[DialogueTurn, ...]


@dataclass(frozen=True)
class Conversation:
    number: int
    """1-based position in the data file."""
    sample_id: str
    records: list[dict[str, Any]]
    questions: list[Question]
    undated_sessions: int
    sessions: tuple[Session, ...] = ()
    """The dialogue by session, in order (pipeline mode)."""


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


def turn_text(turn: dict[str, Any]) -> str:
    """A turn's text, with ``" [shares image: {blip_caption}]"`` when it has one."""
    text = str(turn["text"])
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares image: {caption}]"
    return text


def turn_content(turn: dict[str, Any]) -> str:
    return f"{turn['speaker']}: {turn_text(turn)}"


def load_conversation(number: int, sample: dict[str, Any]) -> Conversation:
    sample_id = str(sample["sample_id"])
    conv = sample["conversation"]
    sessions = sorted(
        (int(m[1]), key) for key in conv if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    records: list[dict[str, Any]] = []
    dialogue: list[Session] = []
    undated = 0
    for session, key in sessions:
        occurred_at = parse_session_time(str(conv.get(f"{key}_date_time", "")))
        if occurred_at is None:
            undated += 1
        dialogue.append(
            Session(
                session,
                occurred_at,
                tuple(
                    DialogueTurn(canonical_dia_id(str(t["dia_id"])), str(t["speaker"]), turn_text(t))
                    for t in conv[key]
                ),
            )
        )
        for turn in conv[key]:
            dia_id = str(turn["dia_id"])
            records.append(
                {
                    "content": turn_content(turn),
                    "memory_type": "event",
                    "user_id": sample_id,
                    "session_id": f"{sample_id}:session_{session}",
                    # Raw turns of one session form a thread: jiyi orders them and reads
                    # each turn together with its neighbours.
                    "thread_id": f"{sample_id}:session_{session}",
                    "source_id": dia_id,
                    "occurred_at": occurred_at,
                    # who said it, as remember() keeps it: a reply to the other's question
                    # is read with that question (jiyi.read.fusion, ``reply``)
                    "metadata": {"dia_id": dia_id, "session": session, "speaker": str(turn["speaker"])},
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
    return Conversation(number, sample_id, records, questions, undated, tuple(dialogue))


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
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The same, ranked by each of jiyi's parts alone (``bench/parts.py``), same store."""


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
    conv: Conversation,
    embedder: Embedder,
    db_dir: Path | None,
    limit_questions: int | None,
    *,
    with_parts: bool = False,
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
            parts: dict[str, tuple[str, ...]] = {}
            if with_parts:
                found = part_rankings(mem, q.text, conv.sample_id, datetime.now(UTC), SEARCH_LIMIT)
                parts = {k: tuple(map(canonical_dia_id, v)) for k, v in source_ids(mem, found).items()}
            run.results.append(QuestionResult(q, ranked, elapsed, parts))
    return run


# ---------------------------------------------------------------- pipeline mode

MODES = ("raw", "pipeline")
SPEAKER_AS = ("name", "prefix")
CONTEXT_BUDGET = 2000
"""``budget_tokens`` of the ``Memory.context`` call made for every question."""
DRAIN_BATCH = 50
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_QUOTED = re.compile(r"'[^']*'")


@dataclass
class PipelineRun(ConversationRun):
    """A pipeline-mode run; ``memories`` counts the items stored (active at the end)."""

    turns: int = 0
    speaker_as: str = "name"
    stored_by_kind: dict[str, int] = field(default_factory=dict)
    """Active items at the end: ``extracted`` (rule extraction) and ``episode``."""
    outcomes: Counter[str] = field(default_factory=Counter)
    rejections: Counter[str] = field(default_factory=Counter)
    failed_jobs: list[str] = field(default_factory=list)
    hit_items: list[tuple[tuple[tuple[str, ...], bool], ...]] = field(default_factory=list)
    """Per question (same order as ``results``): each hit's dia_ids and whether it is an episode."""
    context_tokens: list[int] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)
    unmapped_hits: int = 0
    """Hits on an item the benchmark knows no dia_id for (should stay 0)."""
    covered: dict[str, set[str]] = field(default_factory=dict)
    """The dia_ids some active item came from, by kind (``extracted``, ``episode``)."""


def session_times(sessions: Sequence[Session]) -> list[datetime]:
    """Each session's date; an undated session is one day after the one before it."""
    out: list[datetime] = []
    for s in sessions:
        if s.occurred_at is not None:
            out.append(s.occurred_at)
        elif out:
            out.append(out[-1] + timedelta(days=1))
        else:
            out.append(datetime(2023, 1, 1, tzinfo=UTC))
    return out


def session_messages(session: Session, at: datetime, speaker_as: str) -> list[dict[str, Any]]:
    """The session's turns as ``user`` messages, one second apart from ``at``."""
    out: list[dict[str, Any]] = []
    for i, turn in enumerate(session.turns):
        msg: dict[str, Any] = {"role": "user", "created_at": at + timedelta(seconds=i)}
        if speaker_as == "name":
            msg.update(content=turn.text, name=turn.speaker)
        else:
            msg["content"] = f"{turn.speaker}: {turn.text}"
        out.append(msg)
    return out


def rejection_kind(reason: str) -> str:
    """A gate reason without its numbers and quoted ids, so equal reasons count together."""
    return _NUMBER.sub("N", _QUOTED.sub("'…'", reason))


def _record_outcomes(
    run: PipelineRun,
    reports: Sequence[Any],
    session: Session,
    contents: Sequence[str],
    sources: dict[str, dict[str, None]],
) -> None:
    """Count the outcomes and map each stored or reinforced item to its source dia_ids."""
    for report in reports:
        if report.status != "done":
            run.failed_jobs.append(f"{report.kind}: {report.error}")
            continue
        for o in report.outcomes:
            run.outcomes[o.action] += 1
            if o.action == "rejected":
                run.rejections[rejection_kind(o.reason)] += 1
            record_sources(o, [t.dia_id for t in session.turns], contents, sources)


def active_items(mem: Memory, user_id: str) -> list[MemoryItem]:
    """Every active item in the user's space, the kept turns included."""
    out: list[MemoryItem] = []
    cursor: str | None = None
    while True:
        page = mem.list(user_id=user_id, statuses="active", limit=100, cursor=cursor, include_turns=True)
        out.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            return out


def run_pipeline_conversation(
    conv: Conversation,
    embedder: Embedder,
    db_dir: Path | None,
    limit_questions: int | None,
    *,
    gate: GateConfig | None = None,
    speaker_as: str = "name",
    end_sessions: bool = True,
    keep_turns: bool = True,
) -> PipelineRun:
    """Ingest ``conv`` through remember -> process_jobs and answer its questions (pipeline mode)."""
    times = session_times(conv.sessions)
    clock = SetClock(times[0] if times else datetime(2023, 1, 1, tzinfo=UTC))
    sources: dict[str, dict[str, None]] = {}
    user = conv.sample_id
    with (
        store_path(db_dir, conv.sample_id) as path,
        Memory(
            SQLiteStore(path),
            embedder=embedder,
            background=False,
            gate=gate or GateConfig(),
            session=SessionConfig(keep_turns=keep_turns),
            clock=clock,
        ) as mem,
    ):
        run = PipelineRun(conv, 0, 0.0, mem.rank, speaker_as=speaker_as)
        started = time.perf_counter()
        for session, at in zip(conv.sessions, times, strict=True):
            if not session.turns:
                continue
            messages = session_messages(session, at, speaker_as)
            # Jobs run "just after" the session, at the session's date.
            clock.at = at + timedelta(seconds=len(messages))
            sid = f"{conv.sample_id}:session_{session.number}"
            mem.remember(messages, session_id=sid, user_id=user)
            if end_sessions:
                mem.end_session(sid, user_id=user)
            contents = [m["content"] for m in messages]
            while reports := mem.process_jobs(worker="locomo", limit=DRAIN_BATCH):
                _record_outcomes(run, reports, session, contents, sources)
            run.turns += len(messages)
        run.ingest_s = time.perf_counter() - started
        active = active_items(mem, user)
        run.memories = len(active)
        run.stored_by_kind = {
            "extracted": sum(1 for i in active if "episode" not in i.tags),
            "episode": sum(1 for i in active if "episode" in i.tags),
        }
        for item in active:
            kind = "episode" if "episode" in item.tags else "extracted"
            run.covered.setdefault(kind, set()).update(sources.get(item.id, {}))
        # Queries happen after the last session.
        clock.at = (times[-1] if times else clock.at) + timedelta(hours=1)
        for turn in [t for s in conv.sessions for t in s.turns][:WARMUP_SEARCHES]:
            mem.search(turn.text, user_id=user, limit=SEARCH_LIMIT, touch=False)
        questions = conv.questions if limit_questions is None else conv.questions[:limit_questions]
        for q in questions:
            t0 = time.perf_counter()
            hits = mem.search(q.text, user_id=user, limit=SEARCH_LIMIT, touch=False)
            elapsed = (time.perf_counter() - t0) * 1000.0
            per_hit: list[tuple[tuple[str, ...], bool]] = []
            for h in hits:
                ids = tuple(sources.get(h.item.id, {}))
                if not ids and h.item.id not in sources:
                    run.unmapped_hits += 1
                per_hit.append((ids, "episode" in h.item.tags))
            ranked = tuple(dict.fromkeys(d for ids, _ in per_hit for d in ids))
            # The parts rank the same store, each item read through its source turns.
            found = part_rankings(mem, q.text, user, clock.at, SEARCH_LIMIT)
            parts = {
                name: tuple(dict.fromkeys(d for i in ids for d in sources.get(i, {})))
                for name, ids in found.items()
            }
            run.results.append(QuestionResult(q, ranked, elapsed, parts))
            run.hit_items.append(tuple(per_hit))
        # Context after all searches: it touches the items it returns (usage counts rank).
        for q in questions:
            t0 = time.perf_counter()
            ctx = mem.context(q.text, user_id=user, budget_tokens=CONTEXT_BUDGET)
            run.context_ms.append((time.perf_counter() - t0) * 1000.0)
            run.context_tokens.append(ctx.tokens)
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


def item_level(
    results: Sequence[QuestionResult], hit_items: Sequence[Sequence[tuple[tuple[str, ...], bool]]]
) -> dict[str, float | int]:
    """Cat 1-4 recall@k/hit@k where the top k are k *items* (each with all its dia_ids)."""
    rows = [
        (r.question, [ids for ids, _ in hits])
        for r, hits in zip(results, hit_items, strict=True)
        if r.question.evidence and r.question.category in HEADLINE_CATEGORIES
    ]
    out: dict[str, float | int] = {}
    for name in ("recall", "hit"):
        for k in KS:
            scores = []
            for q, items in rows:
                top = {d for ids in items[:k] for d in ids}
                share = sum(1 for e in q.evidence if e in top) / len(q.evidence)
                scores.append(share if name == "recall" else float(share > 0))
            out[f"{name}@{k}"] = round(sum(scores) / len(scores), 4) if scores else 0.0
    out["n"] = len(rows)
    return out


def coverage(runs: Sequence[PipelineRun], kinds: Iterable[str]) -> dict[str, float | int]:
    """Cat 1-4 evidence ids that some stored item (of ``kinds``) came from: the ceiling of
    recall@k for any k, as ``recall`` (share of ids, averaged) and ``hit`` (any id)."""
    wanted = tuple(kinds)
    shares: list[float] = []
    for run in runs:
        covered = set().union(*(run.covered.get(k, set()) for k in wanted))
        for r in run.results:
            q = r.question
            if q.evidence and q.category in HEADLINE_CATEGORIES:
                shares.append(sum(1 for e in q.evidence if e in covered) / len(q.evidence))
    n = len(shares)
    return {
        "recall": round(sum(shares) / n, 4) if n else 0.0,
        "hit": round(sum(1 for x in shares if x > 0) / n, 4) if n else 0.0,
        "n": n,
    }


def without_episodes(run: PipelineRun) -> list[QuestionResult]:
    """The run's results with episode hits dropped from the ranking (extracted items only)."""
    return [
        QuestionResult(r.question, tuple(dict.fromkeys(d for ids, ep in hits if not ep for d in ids)), 0.0)
        for r, hits in zip(run.results, run.hit_items, strict=True)
    ]


def summarise_pipeline(
    runs: Sequence[PipelineRun], embedder: Embedder, rank_config: RankConfig, gate: GateConfig
) -> dict[str, Any]:
    """``summarise``'s keys, plus what the write path did and the context it returns."""
    summary = summarise(runs, embedder, rank_config)
    turns = sum(run.turns for run in runs)
    ingest_s = sum(run.ingest_s for run in runs)
    tokens = [t for run in runs for t in run.context_tokens]
    rejections: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    for run in runs:
        rejections.update(run.rejections)
        actions.update(run.outcomes)
    summary["mode"] = "pipeline"
    summary["speaker_as"] = runs[0].speaker_as if runs else None
    summary["gate"] = jsonable(gate)
    summary["turns"] = turns
    summary["ingest_s"] = round(ingest_s, 2)
    summary["ingest_per_s"] = round(turns / ingest_s, 4) if ingest_s > 0 else 0.0
    summary["ingest_unit"] = "dialogue turns through the pipeline per second"
    summary["items_stored"] = {
        "total": sum(run.memories for run in runs),
        "extracted": sum(run.stored_by_kind.get("extracted", 0) for run in runs),
        "episode": sum(run.stored_by_kind.get("episode", 0) for run in runs),
        "per_conversation": {run.conversation.sample_id: run.memories for run in runs},
    }
    summary["context_tokens"] = {
        "mean": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
        **percentiles_ms(tokens),
        "budget": CONTEXT_BUDGET,
    }
    summary["context_ms"] = percentiles_ms([m for run in runs for m in run.context_ms])
    summary["outcomes"] = {
        "by_action": dict(actions.most_common()),
        "rejected_total": actions.get("rejected", 0),
        "rejections_top5": [[reason, n] for reason, n in rejections.most_common(5)],
        "failed_jobs": [f for run in runs for f in run.failed_jobs],
    }
    summary["item_level"] = item_level(
        [r for run in runs for r in run.results], [h for run in runs for h in run.hit_items]
    )
    summary["extracted_only"] = metrics(
        [r for run in runs for r in without_episodes(run) if r.question.category in HEADLINE_CATEGORIES]
    )
    summary["evidence_coverage"] = {
        "all": coverage(runs, ("extracted", "episode")),
        "extracted": coverage(runs, ("extracted",)),
        "episode": coverage(runs, ("episode",)),
        "turns_covered": sum(len(set().union(*run.covered.values())) for run in runs if run.covered),
    }
    summary["unmapped_hits"] = sum(run.unmapped_hits for run in runs)
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
        (
            f"ingest      {summary['ingest_per_s']:.1f} turns/s through the pipeline   "
            f"({summary['turns']} turns in {summary['ingest_s']:.1f}s -> {summary['memories']} items)"
            if summary.get("mode") == "pipeline"
            else f"ingest      {summary['ingest_per_s']:.1f} memories/s   ({summary['memories']} memories)"
        ),
        f"embedder    {summary['embedder']}",
        f"questions   {summary['questions']} searched; {excluded} without evidence excluded from averages; "
        f"{summary['unfindable_evidence_ids']} evidence ids match no turn (counted as missed)",
        "per conversation, cat1-4 recall@10: "
        + ", ".join(f"{sid} {v:.3f}" for sid, v in summary["per_conversation"].items()),
    ]
    return "\n".join(lines)


def format_pipeline(summary: dict[str, Any]) -> str:
    items = summary["items_stored"]
    ctx = summary["context_tokens"]
    out = summary["outcomes"]
    gate = summary["gate"]
    lines = [
        f"pipeline    speaker as {summary['speaker_as']}; gate max_extractions {gate['max_extractions']} "
        f"per session per {gate['extraction_window'] / 3600:g} h",
        f"items       {items['total']} stored ({items['extracted']} extracted, {items['episode']} episodes); "
        + ", ".join(f"{sid} {n}" for sid, n in items["per_conversation"].items()),
        "outcomes    " + ", ".join(f"{a} {n}" for a, n in out["by_action"].items()),
    ]
    lines += [f"  rejected  {n:>6}  {reason}" for reason, n in out["rejections_top5"]]
    if out["failed_jobs"]:
        lines.append(f"failed jobs {len(out['failed_jobs'])}: {out['failed_jobs'][0]}")
    lines += [
        f"context     tokens mean {ctx['mean']:.0f}  p50 {ctx['p50']:.0f}  p95 {ctx['p95']:.0f} "
        f"(budget {ctx['budget']}); ms p50 {summary['context_ms']['p50']:.2f} p95 {summary['context_ms']['p95']:.2f}",
    ]
    for name, label in (("item_level", "top k items"), ("extracted_only", "no episodes")):
        row = summary[name]
        lines.append(
            f"cat1-4 {label:<12} "
            + "  ".join(f"{m} {row[m]:.4f}" for m in ("recall@5", "recall@10", "recall@20", "hit@10"))
        )
    cov = summary["evidence_coverage"]
    lines.append(
        f"coverage    cat1-4 evidence ids some stored item came from (recall ceiling): "
        f"{cov['all']['recall']:.4f} (hit {cov['all']['hit']:.4f}); extracted items "
        f"{cov['extracted']['recall']:.4f}, episodes {cov['episode']['recall']:.4f}; "
        f"{cov['turns_covered']} of {summary['turns']} turns are the source of an item"
    )
    if summary["unmapped_hits"]:
        lines.append(f"warning     {summary['unmapped_hits']} hits on items with no known dia_id")
    return "\n".join(lines)


def parts_summary(runs: Sequence[ConversationRun]) -> dict[str, dict[str, float | int]]:
    """Cat 1-4 figures of jiyi and of each of its parts alone, same run, same store."""
    results = [r for run in runs for r in run.results if r.question.category in HEADLINE_CATEGORIES]
    out = {"jiyi": metrics(results)}
    for name in PARTS:
        out[name] = metrics([replace(r, ranked=r.parts.get(name, ())) for r in results])
    return out


def format_parts(blocks: dict[str, dict[str, dict[str, float | int]]]) -> str:
    cols = ("recall@5", "recall@10", "recall@20", "hit@10")
    lines = [f"{'cat1-4, same run':24}" + "".join(f"{c:>11}" for c in cols)]
    for title, rows in blocks.items():
        for name, row in rows.items():
            lines.append(f"{title + ' ' + name:24}" + "".join(f"{row[c]:>11.4f}" for c in cols))
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
                # Each part's ranking of the same store, to see where jiyi falls behind one.
                "parts": {name: list(ranked) for name, ranked in r.parts.items()},
            }


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="LoCoMo evidence recall for jiyi (raw or pipeline mode).")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="raw",
        help="raw: one memory per turn; pipeline: remember -> extraction -> gate -> reconciliation",
    )
    p.add_argument(
        "--speaker-as",
        choices=SPEAKER_AS,
        default="name",
        help="pipeline: send each turn as a user message with name=speaker (default) "
        "or with content '{speaker}: {text}' as raw mode",
    )
    p.add_argument(
        "--max-extractions",
        type=int,
        default=None,
        metavar="N",
        help="pipeline: gate rate limit per session per 24 h (default: jiyi's GateConfig, 3); "
        "1000000 lifts it",
    )
    p.add_argument(
        "--no-keep-turns",
        dest="keep_turns",
        action="store_false",
        help="pipeline: keep only what extraction finds (SessionConfig(keep_turns=False)); "
        "by default every turn is kept as a searchable resource, as in the library",
    )
    p.add_argument(
        "--no-end-session",
        action="store_true",
        help="pipeline: do not call end_session after each session (no episode for its last turns)",
    )
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
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="embedding cache file (.npz), kept across runs; search latency then leaves out the "
        "query embedding of cached questions",
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
    if args.mode != "pipeline" and (
        args.max_extractions is not None
        or args.no_end_session
        or args.speaker_as != "name"
        or not args.keep_turns
    ):
        p.error(
            "--speaker-as, --max-extractions, --no-keep-turns and --no-end-session are for --mode pipeline"
        )
    if args.max_extractions is not None and args.max_extractions < 0:
        p.error("--max-extractions must be >= 0")
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

    embedder: Embedder = resolve_embedder(args.embedder)
    if args.cache is not None:
        embedder = CachingEmbedder(embedder, args.cache)
    t0 = time.perf_counter()
    embedder.embed(["load the model before timing"])
    load_s = time.perf_counter() - t0
    print(f"embedder {embedder.model_id} loaded in {load_s:.1f}s", file=sys.stderr)

    pipeline = args.mode == "pipeline"
    gate = GateConfig()
    if args.max_extractions is not None:
        gate = replace(gate, max_extractions=args.max_extractions)
    runs: list[ConversationRun] = []
    for conv in conversations:
        if pipeline:
            run: ConversationRun = run_pipeline_conversation(
                conv,
                embedder,
                args.db_dir,
                args.limit_questions,
                gate=gate,
                speaker_as=args.speaker_as,
                end_sessions=not args.no_end_session,
                keep_turns=args.keep_turns,
            )
        else:
            run = run_conversation(conv, embedder, args.db_dir, args.limit_questions, with_parts=True)
        runs.append(run)
        print(
            f"  {conv.number:>2} {conv.sample_id}: {run.memories} {'items' if pipeline else 'memories'} "
            f"in {run.ingest_s:.1f}s, {len(run.results)} questions",
            file=sys.stderr,
        )
    rank_config = runs[0].rank_config
    if pipeline:
        pipeline_runs = [r for r in runs if isinstance(r, PipelineRun)]
        summary = summarise_pipeline(pipeline_runs, embedder, rank_config, gate)
        summary["end_sessions"] = not args.no_end_session
        summary["keep_turns"] = args.keep_turns
    else:
        summary = summarise(runs, embedder, rank_config)
        summary["mode"] = "raw"
    summary["conversation_numbers"] = selection
    summary["machine"] = machine_info()
    summary["date"] = now_iso()
    summary["commit"] = git_commit()
    summary["peak_rss_mb"] = peak_rss_mb()
    summary["embedder_load_s"] = round(load_s, 2)
    if isinstance(embedder, CachingEmbedder):
        embedder.save()

    print(format_table(summary))
    if pipeline:
        print()
        print(format_pipeline(summary))
    if args.half_report:
        by_number = {run.conversation.number: run for run in runs}
        halves = {
            name: summarise([by_number[n] for n in numbers], embedder, rank_config)
            for name, numbers in halves_spec.items()
        }
        print()
        print(format_halves(halves))
        summary["halves"] = {name: half[HEADLINE] for name, half in halves.items()}
    # Both modes: jiyi beside each of its parts alone, same run, same store.
    by_number = {run.conversation.number: run for run in runs}
    blocks = {"all": parts_summary(runs)}
    for name, numbers in halves_spec.items():
        if name != "all":
            blocks[name] = parts_summary([by_number[n] for n in numbers])
    print()
    print(format_parts(blocks))
    summary["parts"] = blocks
    if args.json:
        write_json(args.json, summary)
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for row in details_rows(runs):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
