"""Where a warm PostgreSQL search goes, on a kept bench/scale.py store (docs/benchmarks.md,
"Scale", session 18): the client's CPU by part, the round trips, and the server's CPU by
statement kind.

1. ``--queries`` searches (``touch=False``, users in turn, after a warm-up) with this
   thread's CPU time counted in psycopg's ``Cursor.execute`` (parameters, sending),
   ``Cursor.fetchall`` (reading, row decoding), ``Connection.execute`` (BEGIN and COMMIT),
   the parse of the items' documents (``_read_item``) and the whole ``Retrieve``; and the
   round trips and statements of each search.
2. The statements of ``--replay`` of those searches, captured as the store sent them, sent
   again the same way (pipelined, one snapshot) on a connection of their own: the server's
   CPU per search (that backend's ``/proc/PID/schedstat``: the server must run on this
   machine), then with each kind of statement left out, so the difference is that kind's
   share (least of 7 passes, the variants in turn; other processes make single passes noisy).

    python bench/pg_parts.py --dsn "$DSN" --schema pg50u --users 50 --embedder hash:512
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

from jiyi.embed.base import resolve_embedder
from jiyi.memory import Memory
from jiyi.store import postgres
from scale import NOW, TENANT, TextGen

KINDS = {
    "scope size": "SELECT n, set_config",
    "keyword statistics": "WITH st AS",
    "exact scan": "WITH scoped",
    "HNSW walk": "WITH near",
    "keyword round": "WITH kw_terms",
    "load hits": "SELECT i.id, i.id",
}


def kind_of(sql: str) -> str:
    return next((k for k, start in KINDS.items() if sql.startswith(start)), "settings, other")


def client_parts(mem: Memory, queries: list[str], users: list[str]) -> list[list[list[Any]]]:
    """Print the client's CPU by part per search; return each search's batches as sent."""
    cpu: defaultdict[str, float] = defaultdict(float)
    depth = [0]

    def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:  # a part inside another is the outer one's
                return fn(*args, **kwargs)
            depth[0] += 1
            c0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[label] += time.thread_time() - c0
                depth[0] -= 1

        return run

    sent: list[list[list[Any]]] = []
    batch, last = postgres._run_batch_sync, postgres._run_last_sync
    execute_now = postgres.PostgresStore._execute_now

    def whole(store: Any, op: Any) -> Any:
        c0 = time.thread_time()
        try:
            return execute_now(store, op)
        finally:
            cpu[f"the whole {type(op).__name__}"] += time.thread_time() - c0

    patches: list[tuple[Any, str, Any]] = [
        (postgres, "_run_batch_sync", lambda conn, qs: (sent[-1].append(list(qs)), batch(conn, qs))[1]),
        (postgres, "_run_last_sync", lambda conn, q, c: (sent[-1].append([q]), last(conn, q, c))[1]),
        (psycopg.Cursor, "execute", timed("psycopg: execute (parameters, send)", psycopg.Cursor.execute)),
        (psycopg.Cursor, "fetchall", timed("psycopg: fetchall (read, decode rows)", psycopg.Cursor.fetchall)),
        (psycopg.Connection, "execute", timed("psycopg: BEGIN, COMMIT", psycopg.Connection.execute)),
        (postgres, "_read_item", timed("item documents parsed", postgres._read_item)),
        (postgres.PostgresStore, "_execute_now", whole),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    t0, c0 = time.perf_counter(), time.thread_time()
    try:
        for i, q in enumerate(queries):
            sent.append([])
            mem.search(q, user_id=users[i % len(users)], touch=False)
    finally:
        wall, thread = time.perf_counter() - t0, time.thread_time() - c0
        for obj, name, value in saved:
            setattr(obj, name, value)
    n = len(queries)
    trips = sum(len(s) for s in sent) / n
    statements = sum(len(b) for s in sent for b in s) / n
    print(f"per search ({n}): wall {wall / n * 1e3:.2f} ms, this thread's CPU {thread / n * 1e3:.2f} ms")
    print(f"  round trips {trips:.2f} (and BEGIN, COMMIT with them), statements {statements:.2f}")
    for label, seconds in sorted(cpu.items()):
        print(f"  CPU {label:40s} {seconds / n * 1e3:6.2f} ms")
    return sent


def replay(dsn: str, store: postgres.PostgresStore, searches: list[list[list[Any]]]) -> None:
    """Print the server's CPU per search for the captured statements, and each kind's share."""
    conn = psycopg.connect(dsn, autocommit=True)
    store._adapt(conn)
    stat = Path(f"/proc/{conn.info.backend_pid}/schedstat")

    def run(search: list[list[Any]], skip: str | None) -> None:
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            for batch in search:
                cursors = []
                for q in batch:
                    if skip is None or kind_of(q.sql) != skip:
                        cur = conn.cursor(binary=True)
                        cur.execute(q.sql, q.params)
                        cursors.append((q, cur))
                for q, cur in cursors:
                    if not q.deferred:
                        cur.fetchall()
            conn.execute("COMMIT")

    for search in searches * 2:  # prepared and planned as in the store's connections
        run(search, None)
    kinds: list[str | None] = [None, *sorted({kind_of(q.sql) for s in searches for b in s for q in b})]
    least = dict.fromkeys(kinds, float("inf"))
    for _ in range(7):  # the variants in turn, so a busy moment does not fall on one alone
        for kind in kinds:
            c0 = int(stat.read_text().split()[0])
            for search in searches:
                run(search, kind)
            least[kind] = min(least[kind], (int(stat.read_text().split()[0]) - c0) / len(searches) / 1e6)
    every = least[None]
    print(f"server CPU per search, {len(searches)} searches replayed (least of 7): {every:.2f} ms")
    for kind in kinds[1:]:
        print(f"  without {kind:20s} {least[kind]:.2f} ms  (its share {every - least[kind]:+.2f})")
    conn.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--users", type=int, default=50, help="users user-00000.. searched in turn")
    p.add_argument("--embedder", required=True, help="the store's embedder spec (e.g. hash:512)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--replay", type=int, default=40, help="searches whose statements are replayed")
    p.add_argument("--seed", type=int, default=21)
    args = p.parse_args()
    store = postgres.PostgresStore(args.dsn, schema=args.schema)
    clock = NOW + timedelta(days=1)
    mem = Memory(store, embedder=resolve_embedder(args.embedder), tenant_id=TENANT, clock=lambda: clock)
    users = [f"user-{i:05d}" for i in range(args.users)]
    gen = TextGen(args.seed)
    queries = [gen.query() for _ in range(args.queries + 20)]
    for i, q in enumerate(queries[:20]):  # the dictionary, prepared statements, plans
        mem.search(q, user_id=users[i % len(users)], touch=False)
    sent = client_parts(mem, queries[20:], users)
    replay(args.dsn, store, sent[: args.replay])
    mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
