"""What a search pays for besides its own work (docs/benchmarks.md, "Search speed", session 13):
garbage collection and the wait for the previous search's usage write, at LoCoMo scale.

The workload is ``bench/search_speed.py``'s (one LoCoMo conversation in a SQLite file, the
default embedder, every question one ``Memory.search`` with ``touch=True``, back to back or
with ``--gap``). Reported, over ``--rounds`` rounds after one round of warm-up:

* cyclic garbage a search leaves (objects only the cyclic collector frees; counted on 100
  searches with the collector off, ``gc.DEBUG_SAVEALL``);
* collections per search by generation, with their time (``gc.callbacks``);
* the store's usage sends (counters and retrieval log, committed by its background
  thread): p50 / p90 / p97 / p99 ms;
* the searches whose reads waited for their previous usage write, and the mean wait;
* the parse cache's entries and the time of a full collection at the end (fastest of 7).

Counts are the load-independent part; milliseconds move with the machine's load, so
compare two source trees in the same minutes (``PYTHONPATH=/other/src`` for the other).

    python bench/search_tail.py --rounds 2
    PYTHONPATH=/tmp/main_src python bench/search_tail.py --rounds 2
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jiyi.store.usage as usage
from jiyi.store.sqlcommon import thread_items
from jiyi.store.sqlite import SQLiteStore
from locomo import DEFAULT_DATA
from search_speed import Bench


def _ms(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000.0 if ordered else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--conversation", type=int, default=4)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--gap", type=float, default=0.0, metavar="MS")
    args = p.parse_args(argv)

    sends: list[float] = []
    waits: list[tuple[bool, float]] = []
    send, wait = SQLiteStore._send_usage, usage.UsageWriter.wait

    def timed_send(self: SQLiteStore, ops: list[Any]) -> None:
        t0 = time.perf_counter()
        send(self, ops)
        sends.append(time.perf_counter() - t0)

    def timed_wait(self: usage.UsageWriter, target: int) -> None:
        pending = self._done < target
        t0 = time.perf_counter()
        wait(self, target)
        waits.append((pending, time.perf_counter() - t0))

    SQLiteStore._send_usage = timed_send  # type: ignore[method-assign]
    usage.UsageWriter.wait = timed_wait  # type: ignore[method-assign]
    collections = {g: [0, 0.0] for g in range(3)}
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            row = collections[info["generation"]]
            row[0] += 1
            row[1] += time.perf_counter() - started[0]

    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args.conversation, args.data, Path(tmp), args.gap)
        bench.new_round()
        bench.run(bench.questions)
        bench.store.inner.flush()
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.disable()
        n_garbage = min(100, len(bench.questions))
        bench.run(bench.questions[:n_garbage])
        bench.store.inner.flush()
        gc.collect()
        garbage = len(gc.garbage) / n_garbage
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
        sends.clear()
        waits.clear()
        gc.callbacks.append(on_gc)
        n = 0
        for _ in range(args.rounds):
            bench.new_round()
            n += len(bench.run(bench.questions))
        gc.callbacks.remove(on_gc)
        bench.store.inner.flush()
        cached = len(thread_items(bench.store.inner._local)._data)
        full = []
        for _ in range(7):
            t0 = time.perf_counter()
            gc.collect()
            full.append(time.perf_counter() - t0)
        bench.mem.close()

    print(f"searches {n}; cyclic garbage per search {garbage:.1f} objects")
    for g, (count, seconds) in collections.items():
        each = seconds / count * 1000.0 if count else 0.0
        print(f"gen{g} collections: {count / n:.3f} per search, {each:.2f} ms each")
    print(
        f"usage sends {len(sends)}: ms p50 {_ms(sends, 0.5):.2f} p90 {_ms(sends, 0.9):.2f} "
        f"p97 {_ms(sends, 0.97):.2f} p99 {_ms(sends, 0.99):.2f}"
    )
    pending = [t for was, t in waits if was]
    mean = statistics.mean(t for _, t in waits) * 1000.0 if waits else 0.0
    print(
        f"searches that waited for their previous usage write: {len(pending) / max(1, len(waits)):.1%}, "
        f"mean wait over all {mean:.3f} ms, max {max(pending, default=0.0) * 1000.0:.2f} ms"
    )
    print(f"parse cache entries {cached}; full collection {min(full) * 1000.0:.1f} ms (fastest of 7)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
