"""Interleaved A/B of PostgreSQL search variants on a kept bench/scale.py store.

Each round searches one user: a cold search (a query never seen), then one warm search per
variant, in random order, each with a fresh query; wall time, this thread's CPU time and
the process's CPU time of every warm search are kept per variant. A variant is a set of
private switches on the store (:data:`VARIANTS`), so both run in one process, under the
same load, on the same data. (That the variants give the same hits is tests/test_pg_pipeline.py's job.)
After each timed search the store is flushed, untimed, so no variant waits for another's
background usage write; ``with_usage_written`` adds that wait (the time until the usage
write committed: what a search right after it would wait for).

    python bench/pg_ab.py --dsn "$DSN" --schema pg1m --users 1000 --rounds 200 \\
        --variants main,new
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jiyi import Memory
from jiyi.embed.hashing import HashEmbedder
from jiyi.store.postgres import PostgresStore
from scale import SENTINEL_USER, TENANT, TextGen

VARIANTS: dict[str, dict[str, Any]] = {  # _cache_items: the per-thread item cache
    "main": {"_background_usage": False, "_cache_items": False},
    "background": {"_background_usage": True, "_cache_items": False},
    "cache": {"_background_usage": False, "_cache_items": True},
    "new": {"_background_usage": True, "_cache_items": True},
}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dsn", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--variants", default="main,new")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--each", type=Path, default=None, help="write every timed search (variant, query, ms) here"
    )
    args = p.parse_args()
    names = args.variants.split(",")
    store = PostgresStore(args.dsn, schema=args.schema)
    mem = Memory(store, embedder=HashEmbedder(512), tenant_id=TENANT)
    gen = TextGen(args.seed)
    rng = random.Random(args.seed)
    users = [f"user-{i:05d}" for i in range(args.users)]
    for q in ("上个月的会议决定了什么？", "what did we decide last month", "哨兵 sentinel"):
        mem.search(q, user_id=SENTINEL_USER)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    until_written: dict[str, list[float]] = {n: [] for n in names}
    each: list[dict[str, Any]] = []
    pcpu: dict[str, list[float]] = {n: [] for n in names}
    load0 = Path("/proc/loadavg").read_text().split()[0]
    for _ in range(args.rounds):
        user = rng.choice(users)
        for k, v in VARIANTS[names[0]].items():
            setattr(store, k, v)
        mem.search(gen.query() + f" {rng.randint(0, 10**6)}", user_id=user)  # cold
        order = names[:]
        rng.shuffle(order)
        for name in order:
            for k, v in VARIANTS[name].items():
                setattr(store, k, v)
            q = gen.query() + f" {rng.randint(0, 10**6)}"
            c0, p0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
            mem.search(q, user_id=user)
            t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
            store.flush()  # a background usage write's remainder: what a next search would wait for
            t2 = time.perf_counter()
            wall[name].append((t1 - t0) * 1000)
            each.append({"variant": name, "query": q, "ms": round((t1 - t0) * 1000, 2)})
            until_written[name].append((t2 - t0) * 1000)
            cpu[name].append((c1 - c0) * 1000)
            pcpu[name].append((p1 - p0) * 1000)
    store.flush()
    load1 = Path("/proc/loadavg").read_text().split()[0]
    out: dict[str, Any] = {"schema": args.schema, "rounds": args.rounds, "load": f"{load0}->{load1}"}
    for n in names:
        out[n] = {
            "p50": round(statistics.median(wall[n]), 2),
            "p95": round(pct(wall[n], 0.95), 2),
            "with_usage_written_p50": round(statistics.median(until_written[n]), 2),
            "with_usage_written_p95": round(pct(until_written[n], 0.95), 2),
            "cpu_p50": round(statistics.median(cpu[n]), 2),
            "proc_cpu_p50": round(statistics.median(pcpu[n]), 2),
        }
    print(json.dumps(out))
    if args.each:
        args.each.write_text(json.dumps(each, ensure_ascii=False, indent=0))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
