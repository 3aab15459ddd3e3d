"""CPU time of PostgreSQL searches, two versions of the store side by side (docs/benchmarks.md,
"Scale", session 15): what a change to ``jiyi/store/postgres.py`` saves, on a machine too
busy for latencies to show it.

One process holds two stores on a kept bench/scale.py schema: this tree's ``PostgresStore``
and the one of ``--base`` (another tree's ``postgres.py``, loaded as a second module; the
rest of jiyi is shared). Every query is searched ``--rep`` times by each, alternating, and
each search keeps its smallest: server CPU (the server's client backends, from
``/proc/PID/schedstat``: the server must run on this machine and be readable), this thread's
CPU less the query embedding's, and wall time (which the load stretches). The searches leave
usage alone (``touch=False``) and read the clock of bench/scale.py's data, so both stores see
the same rows, and the hits of both (ids and scores) are compared query by query.
``--touch``: they write it, each write waited for (untimed) after its search; hits may then
differ, as usage moves scores.

    git show main:src/jiyi/store/postgres.py > /tmp/base_postgres.py
    python bench/pg_cpu.py --dsn "$DSN" --schema pg100k --users user-00000 --base /tmp/base_postgres.py
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jiyi.embed.base import Embedder, Vectors, resolve_embedder
from jiyi.memory import Memory
from jiyi.store import postgres
from jiyi.text.timeparse import time_windows
from scale import NOW, TENANT, TextGen, stats_ms


class _Embedder:
    """The default embedder, its CPU time counted (taken out of the client's)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.cpu = inner, 0.0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def embed(self, texts: Sequence[str]) -> Vectors:
        c0 = time.thread_time()
        try:
            return self.inner.embed(texts)
        finally:
            self.cpu += time.thread_time() - c0


def _backends(dsn: str) -> list[int]:
    """The pids of the server's client backends (asked before a timed search, not during it)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            # Not this connection's own backend: it exits as the connection closes, and its
            # CPU, counted before a search but gone after, made the server's time negative.
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [int(r[0]) for r in rows]


def _cpu_ns(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        except OSError:
            continue
    return total


def _load_base(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("jiyi.store._postgres_base", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _by_time(kept: dict[str, dict[str, list[float]]], timed: Sequence[bool]) -> None:
    """Server CPU of the queries that name a time (a second, windowed vector search) apart
    from the rest's: the windowed walk sets a large scope's p95 (session 17)."""
    for name, parts in kept.items():
        for label, want in (("names a time", True), ("the rest", False)):
            values = sorted(v for v, t in zip(parts["server"], timed, strict=True) if t == want)
            if values:
                s = stats_ms(values)
                print(
                    f"{name}, {label} ({len(values)}): server ms p50 {s['p50']:.2f}, p95 {s['p95']:.2f}, "
                    f"min {values[0]:.2f}, max {values[-1]:.2f}, mean {s['mean']:.2f}"
                )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--users", default="user-00000", help="comma-separated users, searched in turn")
    p.add_argument("--base", type=Path, required=True, help="the other tree's jiyi/store/postgres.py")
    p.add_argument("--queries", type=int, default=120)
    p.add_argument(
        "--rep", type=int, default=3, help="searches of each query by each store (the least counts)"
    )
    p.add_argument("--seed", type=int, default=404)
    p.add_argument(
        "--embedder",
        default=None,
        help="the store's embedder spec (default: jiyi's default; hash:512 for a --embedder hash:512 store)",
    )
    p.add_argument(
        "--touch",
        action="store_true",
        help="searches write their usage (in the background, as by default; waited for, untimed, after each)",
    )
    args = p.parse_args()
    embedder = _Embedder(resolve_embedder(args.embedder))
    clock = NOW + timedelta(days=1)
    stores = {"base": _load_base(args.base).PostgresStore, "this": postgres.PostgresStore}
    opened = {name: cls(args.dsn, schema=args.schema) for name, cls in stores.items()}
    mems = {
        name: Memory(store, embedder=embedder, tenant_id=TENANT, clock=lambda: clock)
        for name, store in opened.items()
    }
    users = args.users.split(",")
    gen, queries = TextGen(args.seed), []
    while len(queries) < args.queries:
        if (q := gen.query()) not in queries:
            queries.append(q)
    for mem in mems.values():  # warm: the dictionary, the statements psycopg prepares
        for i, q in enumerate(queries[:6]):
            mem.search(q, user_id=users[i % len(users)], touch=False)
    kept: dict[str, dict[str, list[float]]] = {n: {"server": [], "client": [], "wall": []} for n in mems}
    same = 0
    for i, q in enumerate(queries):
        user = users[i % len(users)]
        least = {n: [float("inf")] * 3 for n in mems}
        hits: dict[str, list[tuple[str, float]]] = {}
        for r in range(args.rep):
            for name in list(mems) if (i + r) % 2 == 0 else list(mems)[::-1]:
                pids = _backends(args.dsn)
                embedder.cpu = 0.0
                s0, c0, t0 = _cpu_ns(pids), time.thread_time(), time.perf_counter()
                found = mems[name].search(q, user_id=user, touch=args.touch)
                wall, client = time.perf_counter() - t0, time.thread_time() - c0 - embedder.cpu
                server = (_cpu_ns(pids) - s0) / 1e9
                opened[name].flush()  # the usage write (--touch) done before the next search
                least[name] = [
                    min(a, b * 1000) for a, b in zip(least[name], (server, client, wall), strict=True)
                ]
                hits[name] = [(h.item.id, h.score) for h in found]
        same += hits["base"] == hits["this"]
        for name in mems:
            for part, value in zip(("server", "client", "wall"), least[name], strict=True):
                kept[name][part].append(value)
    for name in mems:
        summary = {part: stats_ms(values) for part, values in kept[name].items()}
        cells = ", ".join(
            f"{k} {s['p50']:.2f} / {s['p95']:.2f} (mean {s['mean']:.2f})" for k, s in summary.items()
        )
        print(f"{name}: ms p50 / p95 per search, least of {args.rep}: {cells}")
    saved = [a - b for a, b in zip(kept["base"]["server"], kept["this"]["server"], strict=True)]
    print(
        f"server CPU saved per search: mean {statistics.fmean(saved):.3f} ms, median {statistics.median(saved):.3f} ms"
    )
    print(f"identical hits (ids and scores): {same} of {len(queries)} queries")
    _by_time(kept, [bool(time_windows(q, clock)) for q in queries])
    for mem in mems.values():
        mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
