"""The user's path, pair by pair: two sessions a week apart, then what is true now.

Each pair of ``bench/data/user_path.jsonl`` (our own zh/en writing) gets its own user: the
earlier statement is said to ``Memory.remember()`` in one session, the later one a week
later in another, each session ended (its episode written) and the jobs run, as an
application does. Then one search with the pair's query: the pair passes when the first
hit says ``expect`` (a word of the current value); a pair with no ``expect`` is an addition
("我们又养了一只猫"), which passes when nothing was superseded.

The pairs were written in three batches to probe the path (``batch``); the fixes of
session 17 were developed against the first two and, after it had been run once on both
trees, the third: none is a held-out measure (docs/benchmarks.md).

A file of *conversations* (``bench/data/now_dev.jsonl``, ``now_held.jsonl``,
``now_test.jsonl``; ``now_multi.jsonl`` in five other languages) is the same path at
length: each is one user over 2-4 sessions days apart, every exchange (a user turn and the
assistant's reply) one ``remember()`` call, facts said in passing among other requests,
some changed later; then the application's questions. A question passes when the first
hit holds one of its ``expect`` words; ``top3`` when one of the first three does; ``stale``
counts the "changed" questions whose outdated wording (``old``) ranks above the current
one among the first three.

    python bench/user_path.py bench/data/user_path.jsonl [--show] [--json OUT.json]
    python bench/user_path.py bench/data/now_held.jsonl [--show] [--embedder pair]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from common import git_commit, machine_info, now_iso, write_json
from jiyi import Memory
from jiyi.model import Status


@dataclass(frozen=True)
class Pair:
    id: str
    batch: str
    lang: str
    old: str
    new: str
    query: str
    expect: str | None


class Clock:
    """The benchmark's clock: a week passes between the two sessions of a pair."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Question:
    query: str
    kind: str
    expect: tuple[str, ...]
    old: str | None


@dataclass(frozen=True)
class Conversation:
    id: str
    lang: str
    sessions: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    """(days after the previous session, its turns as (role, text))."""
    questions: tuple[Question, ...]

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Conversation:
        sessions = tuple(
            (int(s["days_after_previous"]), tuple((role, text) for role, text in s["turns"]))
            for s in raw["sessions"]
        )
        questions = tuple(
            Question(q["query"], q["kind"], tuple(q["expect"]), q.get("old")) for q in raw["questions"]
        )
        return cls(raw["id"], raw["lang"], sessions, questions)


def load(path: Path) -> list[Pair] | list[Conversation]:
    with open(path, encoding="utf-8") as fh:
        raws = [json.loads(line) for line in fh if line.strip()]
    if raws and "sessions" in raws[0]:
        return [Conversation.of(r) for r in raws]
    return [Pair(**r) for r in raws]


def run(mem: Memory, clock: Clock, pair: Pair) -> tuple[bool, str]:
    """Whether the pair passes, and the first hit's text."""
    for n, text in enumerate((pair.old, pair.new)):
        session = f"{pair.id}-{n}"
        mem.remember([("user", text)], session_id=session, user_id=pair.id)
        mem.end_session(session, user_id=pair.id)
        while mem.process_jobs(worker="bench"):
            pass
        clock.now += timedelta(days=7)
    hits = mem.search(pair.query, user_id=pair.id, limit=3)
    top = hits[0].item.content if hits else ""
    if pair.expect is None:
        retired = mem.list(user_id=pair.id, statuses=Status.SUPERSEDED).items
        return not retired, top
    return pair.expect in top, top


def exchanges(turns: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The turns as an application sends them: each user turn with the replies after it."""
    out: list[list[tuple[str, str]]] = []
    for role, text in turns:
        if role == "user" or not out:
            out.append([])
        out[-1].append((role, text))
    return out


def run_conversation(mem: Memory, clock: Clock, conv: Conversation) -> list[tuple[Question, int, int, str]]:
    """Each question of ``conv`` with the rank (1-based, 0: not in the first three) of the
    first hit holding the current value and of the first holding the outdated one, and
    the first hit's text."""
    for n, (days, turns) in enumerate(conv.sessions):
        clock.now += timedelta(days=days)
        session = f"{conv.id}-{n}"
        for exchange in exchanges(turns):
            mem.remember(exchange, session_id=session, user_id=conv.id)
            clock.now += timedelta(minutes=2)
        mem.end_session(session, user_id=conv.id)
        while mem.process_jobs(worker="bench"):
            pass
    clock.now += timedelta(days=3)
    out = []
    for q in conv.questions:
        texts = [h.item.content for h in mem.search(q.query, user_id=conv.id, limit=3)]
        current = next((i + 1 for i, t in enumerate(texts) if any(e in t for e in q.expect)), 0)
        old = next((i + 1 for i, t in enumerate(texts) if q.old and q.old in t), 0)
        out.append((q, current, old, texts[0] if texts else ""))
    return out


def conversation_figures(
    results: list[tuple[Conversation, Question, int, int, str]],
) -> dict[str, dict[str, int]]:
    figures: dict[str, dict[str, int]] = {}
    for conv, q, current, old, _ in results:
        for part in ("all", conv.lang, q.kind):
            cell = figures.setdefault(part, {"top1": 0, "top3": 0, "stale": 0, "questions": 0})
            cell["top1"] += current == 1
            cell["top3"] += current > 0
            cell["stale"] += q.kind == "changed" and old > 0 and (current == 0 or old < current)
            cell["questions"] += 1
    return figures


def main_conversations(
    convs: list[Conversation], show: bool, embedder: str | None = None
) -> dict[str, dict[str, int]]:
    clock = Clock()
    results: list[tuple[Conversation, Question, int, int, str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "u.db", clock=clock, background=False, embedder=embedder) as mem,
    ):
        for conv in convs:
            results += [(conv, *r) for r in run_conversation(mem, clock, conv)]
    figures = conversation_figures(results)
    print(f"{'':10} {'top1':>5} {'top3':>5} {'stale':>5}  questions")
    for part, c in sorted(figures.items(), key=lambda kv: (kv[0] != "all", len(kv[0]) == 2, kv[0])):
        print(f"{part:10} {c['top1']:>5} {c['top3']:>5} {c['stale']:>5}  {c['questions']}")
    for conv, q, current, old, top in results:
        if show or current != 1:
            ranks = f"new@{current or '-'}" + (f" old@{old or '-'}" if q.old else "")
            print(
                f"{'ok  ' if current == 1 else 'MISS'} {conv.id} {q.kind:9} {ranks:14} {q.query} -> {top[:80]!r}"
            )
    return figures


def main_pairs(pairs: list[Pair], show: bool, embedder: str | None = None) -> dict[str, dict[str, int]]:
    clock = Clock()
    results: list[tuple[Pair, bool, str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "u.db", clock=clock, background=False, embedder=embedder) as mem,
    ):
        for pair in pairs:
            ok, top = run(mem, clock, pair)
            results.append((pair, ok, top))
    figures: dict[str, dict[str, int]] = {}
    for pair, ok, _ in results:
        for part in ("all", pair.batch, pair.lang):
            cell = figures.setdefault(part, {"passed": 0, "pairs": 0})
            cell["passed"] += ok
            cell["pairs"] += 1
    for part, cell in sorted(figures.items(), key=lambda kv: (kv[0] != "all", len(kv[0]) == 2, kv[0])):
        print(f"{part:10} {cell['passed']:>3} / {cell['pairs']}")
    for pair, ok, top in results:
        if show or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {pair.id} {pair.query} -> {top[:80]!r}")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=Path(__file__).parent / "data" / "user_path.jsonl")
    ap.add_argument("--show", action="store_true", help="print every pair's (question's) first hit")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--embedder", help="embedder spec (default: jiyi's), e.g. e5 or pair with the e5 extra")
    args = ap.parse_args(argv)
    loaded = load(args.data)
    started = time.perf_counter()
    if loaded and isinstance(loaded[0], Conversation):
        figures = main_conversations(loaded, args.show, args.embedder)
    else:
        figures = main_pairs(cast(list[Pair], loaded), args.show, args.embedder)
    print(f"{len(loaded)} {args.data.name} records, {time.perf_counter() - started:.1f} s")
    if args.json:
        meta = {"when": now_iso(), "commit": git_commit(), "machine": machine_info()}
        write_json(args.json, {**meta, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
