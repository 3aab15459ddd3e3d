"""The long part of the attack suite (issue 15): races, tenant isolation, kill -9, fsync cost.

Four parts, each printing its counts (``--parts`` picks some):

* **race**: ``--writers`` identical ``add()`` calls released together by a barrier, in a
  fresh scope per round, ``--rounds`` times each over threads sharing one Memory,
  separate processes with their own stores, and concurrent REST requests (in process,
  over ASGI). Counts the items each round left (1 is right) and reinforcements lost
  (the item's ``mention_count`` must equal the number of writers).
* **matrix**: tenant A holds items; every key of tenant B (owner, admin, editor, viewer)
  tries every route on them (read, list, search, history, context, update, delete,
  export, import of A's ids, stats) and names tenant A in the body and the query. Counts
  attempts, answers that show any of A's text, and changes to A's items afterwards.
* **kill**: a child process adds memories and prints each id once ``add()`` returned;
  the parent kills it with SIGKILL at a random moment, reopens the store and counts
  acknowledged ids that are missing, over ``--kill-trials`` trials.
* **fsync**: the median time of one add with ``synchronous=normal`` and ``=full``.

``--store`` is ``sqlite`` (a temporary file) or a PostgreSQL DSN (a fresh schema per
run, dropped afterwards; the matrix and fsync parts always use SQLite). The exit status
is 1 when a count shows a defect.

    python bench/attack.py                               # everything on SQLite
    python bench/attack.py --parts race --store postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from common import REPO_ROOT, git_commit
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.store.open import open_store

EMBEDDER = "hash:256"
TEXT = "The deploy freeze starts on Friday at 18:00 and ends on Monday at 08:00"


# ---------------------------------------------------------------- race


def _outcome(mem: Memory, user: str, writers: int) -> tuple[int, int]:
    """(items in the scope, reinforcements lost)."""
    items = mem.list(user_id=user, limit=100).items
    return len(items), (writers - items[0].mention_count) if len(items) == 1 else 0


def _race_threads(url: str, writers: int, rounds: int) -> list[tuple[int, int]]:
    out = []
    with Memory(open_store(url), embedder=EMBEDDER) as mem:
        for r in range(rounds):
            user = f"threads-{r}-{uuid.uuid4().hex[:6]}"
            barrier = threading.Barrier(writers)

            def write(user: str = user, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                mem.add(TEXT, user_id=user)

            threads = [threading.Thread(target=write) for _ in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out.append(_outcome(mem, user, writers))
    return out


def _process_writer(url: str, user: str, go: Any) -> None:
    with Memory(open_store(url), embedder=EMBEDDER, background=False) as mem:
        mem.add("warm-up text for the process writer", user_id=f"{user}-warm")
        go.wait()
        mem.add(TEXT, user_id=user)


def _race_processes(url: str, writers: int, rounds: int) -> list[tuple[int, int]]:
    ctx = multiprocessing.get_context("spawn")
    out = []
    for r in range(rounds):
        user = f"procs-{r}-{uuid.uuid4().hex[:6]}"
        go = ctx.Barrier(writers)
        procs = [ctx.Process(target=_process_writer, args=(url, user, go)) for _ in range(writers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        with Memory(open_store(url), embedder=EMBEDDER) as mem:
            out.append(_outcome(mem, user, writers))
    return out


async def _race_rest(url: str, writers: int, rounds: int) -> list[tuple[int, int]]:
    memory = AsyncMemory(open_store(url), embedder=EMBEDDER)
    keys = ApiKeys()
    key = keys.add("default", "editor")[1]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    out = []
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-API-Key": key}
        ) as c:
            for r in range(rounds):
                user = f"rest-{r}-{uuid.uuid4().hex[:6]}"
                body = {"content": TEXT, "user_id": user}
                await asyncio.gather(*(c.post("/v1/memories", json=body) for _ in range(writers)))
                items = (await c.get("/v1/memories", params={"user_id": user})).json()["items"]
                lost = writers - items[0]["mention_count"] if len(items) == 1 else 0
                out.append((len(items), lost))
    finally:
        await memory.aclose()
    return out


def race(url: str, writers: int, rounds: int) -> bool:
    ok = True
    for name, results in (
        ("threads", _race_threads(url, writers, rounds)),
        ("processes", _race_processes(url, writers, rounds)),
        ("REST", asyncio.run(_race_rest(url, writers, rounds))),
    ):
        items = [n for n, _ in results]
        lost = sum(x for _, x in results)
        print(
            f"race {name:9s}: {writers} writers x {rounds} rounds: items per round {items}, reinforcements lost {lost}"
        )
        ok &= all(n == 1 for n in items) and lost == 0
    return ok


# ---------------------------------------------------------------- cross-tenant matrix


def _attempts(a_id: str, a_user: str) -> list[tuple[str, str, dict[str, Any]]]:
    item = f"/v1/memories/{a_id}"
    leak_body = {"content": "planted by tenant B", "user_id": a_user, "tenant_id": "acme"}
    record = json.dumps({"id": a_id, "content": "overwritten by tenant B", "user_id": a_user})
    return [
        ("GET", item, {}),
        ("GET", item, {"params": {"tenant_id": "acme"}}),
        ("GET", f"{item}/history", {}),
        ("PATCH", item, {"json": {"content": "changed by tenant B"}}),
        ("DELETE", item, {"params": {"hard": "true"}}),
        ("GET", "/v1/memories", {"params": {"user_id": a_user}}),
        ("GET", "/v1/memories", {"params": {"user_id": a_user, "tenant_id": "acme"}}),
        ("POST", "/v1/memories/search", {"json": {"query": "launch plan codename", "user_id": a_user}}),
        (
            "POST",
            "/v1/memories/search",
            {"json": {"query": "launch plan", "user_id": a_user, "tenant_id": "acme"}},
        ),
        ("POST", "/v1/context", {"json": {"query": "launch plan codename", "user_id": a_user}}),
        ("POST", "/v1/memories", {"json": leak_body}),
        ("GET", "/v1/export", {}),
        ("GET", "/v1/export", {"params": {"tenant_id": "acme"}}),
        ("GET", "/v1/stats", {"params": {"tenant_id": "acme"}}),
        ("POST", "/v1/import", {"content": record.encode()}),
        ("GET", "/v1/profile", {"params": {"user_id": a_user}}),
    ]


async def _matrix(items_per_role: int) -> tuple[int, int, int]:
    path = Path(tempfile.mkdtemp(prefix="jiyi-attack-")) / "matrix.db"
    memory = AsyncMemory(open_store(str(path)), embedder=EMBEDDER)
    keys = ApiKeys()
    a_key = keys.add("acme", "owner")[1]
    b_keys = [keys.add("globex", role)[1] for role in ("owner", "admin", "editor", "viewer")]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    attempts = leaks = changed = 0
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            secrets = [f"launch plan codename {uuid.uuid4().hex[:10]}" for _ in range(items_per_role)]
            made = []
            for s in secrets:
                r = await c.post(
                    "/v1/memories", json={"content": s, "user_id": "alice"}, headers={"X-API-Key": a_key}
                )
                made.append(r.json()["item"])
            for item in made:
                for key in b_keys:
                    for method, url, kw in _attempts(item["id"], "alice"):
                        r = await c.request(method, url, headers={"X-API-Key": key}, **kw)
                        attempts += 1
                        leaks += any(s in r.text for s in secrets)
            for item in made:
                now = (await c.get(f"/v1/memories/{item['id']}", headers={"X-API-Key": a_key})).json()
                changed += now != item
    finally:
        await memory.aclose()
    return attempts, leaks, changed


def matrix(items: int) -> bool:
    attempts, leaks, changed = asyncio.run(_matrix(items))
    print(
        f"matrix   : {attempts} cross-tenant attempts, {leaks} answers showing tenant A's text, {changed} A items changed"
    )
    return leaks == 0 and changed == 0


# ---------------------------------------------------------------- kill -9

_CHILD = """
import sys
from jiyi.memory import Memory
from jiyi.store.open import open_store
with Memory(open_store(sys.argv[1]), embedder="hash:256", background=False) as mem:
    n = 0
    while True:
        n += 1
        item = mem.add(f"durable note number {n} written by the child {sys.argv[2]}", user_id="kill", infer=False).item
        print(item.id, flush=True)
"""


def _one_kill(url: str, trial: int, rng: random.Random) -> tuple[int, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, url, str(trial)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acked: list[str] = []
    first = proc.stdout.readline().strip()  # the child is writing
    if first:
        acked.append(first)
    time.sleep(rng.uniform(0.05, 0.8))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    acked += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]
    proc.stdout.close()
    with Memory(open_store(url), embedder=EMBEDDER) as mem:
        found = {i.id for i in mem.runtime.store.execute(_get_items(acked))}
    return len(acked), len(set(acked) - found)


def _get_items(ids: list[str]) -> Any:
    from jiyi.store.base import GetItems

    return GetItems("default", tuple(ids))


def kill(url: str, trials: int, seed: int) -> bool:
    rng = random.Random(seed)
    acked = lost = 0
    for t in range(trials):
        a, gone = _one_kill(url, t, rng)
        acked += a
        lost += gone
    print(f"kill -9  : {trials} trials, {acked} acknowledged adds, {lost} lost")
    return lost == 0


# ---------------------------------------------------------------- fsync cost


def fsync(adds: int) -> None:
    for mode in ("normal", "full"):
        path = Path(tempfile.mkdtemp(prefix="jiyi-attack-")) / "sync.db"
        with Memory(open_store(f"sqlite:///{path}?synchronous={mode}"), embedder=EMBEDDER) as mem:
            mem.add("warm-up", user_id="w", infer=False)
            times = []
            for n in range(adds):
                start = time.perf_counter()
                mem.add(f"fsync cost probe {n} {uuid.uuid4().hex}", user_id="s", infer=False)
                times.append(time.perf_counter() - start)
        q = statistics.quantiles(times, n=20)
        print(
            f"fsync    : synchronous={mode:6s} {adds} adds: median {statistics.median(times) * 1000:.2f} ms, p95 {q[18] * 1000:.2f} ms"
        )


# ---------------------------------------------------------------- main


def _store_url(store: str) -> tuple[str, Any]:
    if store == "sqlite":
        return str(Path(tempfile.mkdtemp(prefix="jiyi-attack-")) / "attack.db"), None
    schema = f"jiyi_attack_{uuid.uuid4().hex[:8]}"

    def drop() -> None:
        import psycopg

        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return f"{store}{'&' if '?' in store else '?'}schema={schema}", drop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="race,matrix,kill,fsync")
    ap.add_argument("--store", default="sqlite", help="sqlite, or a PostgreSQL DSN")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--matrix-items", type=int, default=3)
    ap.add_argument("--kill-trials", type=int, default=20)
    ap.add_argument("--fsync-adds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=15)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    print(f"jiyi attack suite, commit {git_commit()}, store {args.store.split('@')[-1]}")
    url, drop = _store_url(args.store)
    ok = True
    try:
        if "race" in parts:
            ok &= race(url, args.writers, args.rounds)
        if "matrix" in parts:
            ok &= matrix(args.matrix_items)
        if "kill" in parts:
            ok &= kill(url, args.kill_trials, args.seed)
        if "fsync" in parts:
            fsync(args.fsync_adds)
    finally:
        if drop is not None:
            drop()
    print("all counts clean" if ok else "DEFECTS FOUND")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
