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

    python bench/user_path.py bench/data/user_path.jsonl [--show] [--json OUT.json]
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


def load(path: Path) -> list[Pair]:
    with open(path, encoding="utf-8") as fh:
        return [Pair(**json.loads(line)) for line in fh if line.strip()]


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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=Path(__file__).parent / "data" / "user_path.jsonl")
    ap.add_argument("--show", action="store_true", help="print every pair's first hit")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    pairs = load(args.data)
    clock = Clock()
    started = time.perf_counter()
    results: list[tuple[Pair, bool, str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "u.db", clock=clock, background=False) as mem,
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
    print(f"{len(pairs)} pairs, {time.perf_counter() - started:.1f} s")
    for pair, ok, top in results:
        if args.show or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {pair.id} {pair.query} -> {top[:80]!r}")
    if args.json:
        meta = {"when": now_iso(), "commit": git_commit(), "machine": machine_info()}
        write_json(args.json, {**meta, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
