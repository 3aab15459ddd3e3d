"""Update detection: does a later statement retire the one it changes, and only that one?

The data (``bench/data/updates.jsonl``, our own zh/en writing) holds pairs of statements
said one day apart by one user:

* ``update``: the later statement changes the value of the earlier one (a number, date,
  time, name, place, preference or state; with or without a correction cue);
* ``negative``: a near miss, similar wording about a different subject or attribute;
  neither may retire the other;
* ``restate``: the same value said again; it should reinforce.

Each pair gets its own user. Mode ``add`` writes both statements through
``Memory.add()`` (which reconciles by default); mode ``remember`` sends each as a user
turn through ``Memory.remember()`` (offline rule extraction, then the same write
pipeline), one session per turn; mode ``remember-ended`` also ends each session, so its
episode (the offline digest) is written and competes in search, as in an application that
ends its sessions (an episode line quoting a statement counts as a hit saying it). Then
one ``search`` per pair with the pair's query.

Figures, by language and by dev/heldout split:

* supersede precision / recall: a supersede is a pair whose earlier item ended
  ``superseded`` by the later one; precision over all pairs where that happened, recall
  over the update pairs;
* stale-above-current: update pairs where, in the search for the query, a hit saying the
  old value ranks above every hit saying the new one (or the new one is missing);
* over-invalidation: negative pairs where one statement retired the other;
* folded: negative pairs where the later statement was taken as the same fact
  (reinforce / none), so it was not stored as its own item;
* reinforce rate of the restatements.

    python bench/updates.py bench/data/updates.jsonl
    python bench/updates.py bench/data/updates.jsonl --mode remember --json out.json
    python bench/updates.py bench/data/updates.jsonl --split dev --show-errors
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import git_commit, machine_info, now_iso, write_json
from jiyi.memory import Memory
from jiyi.model import MemoryItem, Status
from jiyi.write.resources import is_resource

KINDS = ("update", "negative", "restate")


@dataclass(frozen=True)
class Pair:
    id: str
    lang: str
    kind: str
    category: str
    cue: str
    old: str
    new: str
    query: str
    split: str


@dataclass
class Result:
    pair: Pair
    decision: str
    """What happened to the later statement: add, keep_both, supersede, reinforce, none, rejected, missed."""
    retired: bool
    """One statement of the pair retired the other (superseded)."""
    stale: bool
    """The old value ranked above the current one for the query (update pairs)."""
    found_new: bool
    reason: str = ""
    displaced: bool = False
    """The later statement ranked above the earlier one for a query about the earlier
    (near misses: the query asks about the old statement's fact)."""
    extracted: bool = True
    """Both statements became memories (``remember`` mode: the extractor caught them)."""


def load_pairs(path: Path) -> list[Pair]:
    pairs: list[Pair] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                pair = Pair(**{k: str(row[k]) for k in Pair.__dataclass_fields__})
            except KeyError as exc:
                raise SystemExit(f"{path}:{n}: missing field {exc}") from None
            if pair.kind not in KINDS:
                raise SystemExit(f"{path}:{n}: kind must be one of {KINDS}, not {pair.kind!r}")
            pairs.append(pair)
    return pairs


class Clock:
    """The benchmark's clock: each statement is said a day after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self) -> None:
        self.now += timedelta(days=1)


def _rank(hits: Sequence[MemoryItem], says: Iterable[str]) -> int | None:
    wanted = set(says)
    for i, item in enumerate(hits):
        if item.id in wanted or (item.raw is not None and item.raw in wanted) or item.content in wanted:
            return i
        if "episode" in item.tags and any(
            _quotes(line, text) for line in _lines(item.content) for text in wanted
        ):
            return i
    return None


# An offline digest's line, "- Fact: ..." / "- 事实：...": read here rather than through
# jiyi.session.digest so that the benchmark also runs against older trees (a comparison).
_LINE = re.compile(r"^-\s*[^:：]{1,20}[:：]\s*(.+)$")


def _lines(summary: str) -> list[str]:
    return [m.group(1) for line in summary.splitlines() if (m := _LINE.match(line.strip()))]


def _quotes(line: str, text: str) -> bool:
    """Whether an episode's line says ``text`` (a statement or the fact extracted from it)."""
    a, b = _letters(line), _letters(text)
    return bool(a) and bool(b) and (a in b or b in a)


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def _stale(hits: Sequence[MemoryItem], old: Iterable[str], new: Iterable[str]) -> tuple[bool, bool]:
    r_old, r_new = _rank(hits, old), _rank(hits, new)
    stale = r_old is not None and (r_new is None or r_old < r_new)
    return stale, r_new is not None


def _displaced(hits: Sequence[MemoryItem], old: Iterable[str], new: Iterable[str]) -> bool:
    r_old, r_new = _rank(hits, old), _rank(hits, new)
    return r_old is None or (r_new is not None and r_new < r_old)


def run_add(mem: Memory, clock: Clock, pair: Pair) -> Result:
    user = pair.id
    first = mem.add(pair.old, user_id=user)
    clock.tick()
    second = mem.add(pair.new, user_id=user)
    clock.tick()
    old_item = mem.get(first.item.id) if first.item is not None else None
    new_id = second.item.id if second.item is not None else None
    retired = old_item is not None and old_item.status == Status.SUPERSEDED
    if new_id is not None and new_id != (old_item.id if old_item else None):
        new_item = mem.get(new_id)
        retired = retired or new_item.status == Status.SUPERSEDED
    hits = [h.item for h in mem.search(pair.query, user_id=user, limit=5)]
    old_ids = [old_item.id] if old_item is not None else []
    new_ids = [new_id] if new_id is not None and second.decision.action != "reinforce" else []
    stale, found = _stale(hits, old_ids, new_ids)
    displaced = _displaced(hits, old_ids, [new_id] if new_id is not None else [])
    reasons = " | ".join(second.decision.reasons)
    return Result(pair, second.decision.action, retired, stale, found, reasons, displaced)


def run_remember(mem: Memory, clock: Clock, pair: Pair, end_sessions: bool = False) -> Result:
    user = pair.id
    for n, text in enumerate((pair.old, pair.new)):
        mem.remember([("user", text)], session_id=f"{user}-{n}", user_id=user)
        if end_sessions:  # the session's episode is written, as an application that ends it has
            mem.end_session(f"{user}-{n}", user_id=user)
        while mem.process_jobs(worker="bench"):
            pass
        clock.tick()
    items = mem.list(user_id=user, limit=100).items
    facts = [i for i in items if not is_resource(i)]
    old_facts = [i for i in facts if i.raw == pair.old]
    new_facts = [i for i in facts if i.raw == pair.new]
    retired = any(i.status == Status.SUPERSEDED for i in old_facts + new_facts)
    if not new_facts:
        decision = "missed" if not any(i.raw == pair.new for i in items) else "resource"
        reinforced = [i for i in old_facts if i.mention_count > 1]
        decision = "reinforce" if reinforced else decision
    elif retired:
        decision = "supersede"
    else:
        decision = "add"
    hits = [h.item for h in mem.search(pair.query, user_id=user, limit=5)]
    stale, found = _stale(hits, [pair.old], [pair.new])
    extracted = bool(old_facts) and (bool(new_facts) or decision == "reinforce")
    displaced = _displaced(hits, [pair.old], [pair.new])
    return Result(pair, decision, retired, stale, found, displaced=displaced, extracted=extracted)


def _ratio(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def figures(results: Sequence[Result]) -> dict[str, Any]:
    updates = [r for r in results if r.pair.kind == "update"]
    negatives = [r for r in results if r.pair.kind == "negative"]
    restates = [r for r in results if r.pair.kind == "restate"]
    retiring = [r for r in results if r.retired]
    true_sup = sum(1 for r in retiring if r.pair.kind == "update")
    return {
        "pairs": {"update": len(updates), "negative": len(negatives), "restate": len(restates)},
        "supersede_precision": _ratio(true_sup, len(retiring)),
        "supersede_recall": _ratio(true_sup, len(updates)),
        "stale_above_current": _ratio(sum(r.stale for r in updates), len(updates)),
        "current_in_top5": _ratio(sum(r.found_new for r in updates), len(updates)),
        "changed_value_reinforced": _ratio(sum(r.decision == "reinforce" for r in updates), len(updates)),
        "over_invalidation": _ratio(sum(r.retired for r in negatives), len(negatives)),
        "near_miss_displaced": _ratio(sum(r.displaced for r in negatives), len(negatives)),
        "negative_folded": _ratio(
            sum(r.decision in ("reinforce", "none") for r in negatives), len(negatives)
        ),
        "restate_reinforced": _ratio(sum(r.decision == "reinforce" for r in restates), len(restates)),
        "update_both_extracted": _ratio(sum(r.extracted for r in updates), len(updates)),
    }


def report(results: Sequence[Result]) -> dict[str, Any]:
    out: dict[str, Any] = {"all": figures(results)}
    for split in dict.fromkeys(r.pair.split for r in results):  # dev, heldout; fresh (updates_fresh.jsonl)
        for lang in ("zh", "en", None):
            part = [r for r in results if r.pair.split == split and (lang is None or r.pair.lang == lang)]
            if part:
                out[f"{split}/{lang or 'all'}"] = figures(part)
    return out


def _print_table(rep: dict[str, Any]) -> None:
    cols = (
        "supersede_precision",
        "supersede_recall",
        "stale_above_current",
        "over_invalidation",
        "near_miss_displaced",
        "negative_folded",
        "restate_reinforced",
        "changed_value_reinforced",
        "update_both_extracted",
    )
    short = (
        "sup_P",
        "sup_R",
        "stale",
        "over_inv",
        "displaced",
        "neg_fold",
        "restate_R",
        "chg_reinf",
        "extracted",
    )
    print(f"{'part':<19}" + "".join(f"{c:>10}" for c in short))
    for name, fig in rep.items():
        cells = "".join(f"{'-' if fig[c] is None else f'{fig[c]:.3f}':>10}" for c in cols)
        print(f"{name:<19}{cells}")


def _errors(results: Sequence[Result]) -> Iterable[str]:
    for r in results:
        p = r.pair
        wrong = (
            (p.kind == "update" and (not r.retired or r.stale))
            or (p.kind == "negative" and (r.retired or r.displaced or r.decision in ("reinforce", "none")))
            or (p.kind == "restate" and r.decision != "reinforce")
        )
        if wrong and r.extracted:
            yield f"{p.id} [{p.kind}] {r.decision} retired={r.retired} stale={r.stale}: {p.old} => {p.new}"
            if r.reason:
                yield f"    {r.reason}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="pairs as JSON lines (bench/data/updates.jsonl)")
    ap.add_argument(
        "--mode",
        choices=("add", "remember", "remember-ended"),
        default="add",
        help="remember-ended: as remember, each session ended (its episode written; an episode "
        "that quotes a statement counts as saying it)",
    )
    ap.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--show-errors", action="store_true", help="print every pair the detection got wrong")
    ap.add_argument("--embedder", default=None, help="embedder spec passed to Memory (default: jiyi's)")
    args = ap.parse_args(argv)
    pairs = [p for p in load_pairs(args.data) if args.split == "all" or p.split == args.split]
    if not pairs:
        raise SystemExit(f"no pairs in {args.data} for split {args.split!r}")
    clock = Clock()
    run = {
        "add": run_add,
        "remember": run_remember,
        "remember-ended": functools.partial(run_remember, end_sessions=True),
    }[args.mode]
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "u.db", clock=clock, background=False, embedder=args.embedder) as mem,
    ):
        results = [run(mem, clock, p) for p in pairs]
    rep = report(results)
    _print_table(rep)
    print(
        f"{len(pairs)} pairs, mode {args.mode}, {mem.embedder.model_id}, {time.perf_counter() - started:.1f} s"
    )
    if args.show_errors:
        for line in _errors(results):
            print(line)
    if args.json:
        meta = {"when": now_iso(), "commit": git_commit(), "machine": machine_info(), "mode": args.mode}
        write_json(args.json, {**meta, "figures": rep})
    return 0


if __name__ == "__main__":
    sys.exit(main())
