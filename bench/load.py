"""Load test of the REST service: a real server on 127.0.0.1, concurrent clients, several tenants.

The script makes a temporary directory with a key file holding one ``owner`` key per
tenant, starts ``jiyi.server.run.serve`` in a subprocess on a free loopback port (waits
for ``/healthz``), then runs ``--clients`` concurrent clients (asyncio + httpx), each
bound to one tenant (round robin), until ``--seconds`` have passed or ``--requests``
requests have been sent in all, whichever comes first. Each request is a search
(probability ``--search-ratio``) or an add of a new, clearly distinct memory (Chinese or
English; every text carries a unique marker ``t<tenant>c<client>n<counter>`` and the
same marker in ``metadata.bench_key``, so every write is identifiable).

Afterwards it checks, per tenant:

* **errors**: every request answered 2xx (201 for adds, 200 for searches); a refused
  add (422), a rate-limit answer (429) or a transport error counts as an error;
* **lost writes**: every add answered with ``add``, ``keep_both`` or ``supersede`` (each
  stores the text as a new item; a supersede keeps the old one, superseded) must be in the
  tenant's listing (``GET /v1/memories`` paged by cursor), by id and by marker, and the
  listing must hold exactly those items (nothing extra); ``/v1/stats`` total must agree.
  Adds answered ``reinforce`` (the gate judged the text a duplicate) are reported apart;
* **isolation**: during the run every search hit must belong to the caller's tenant;
  afterwards, for each ordered pair of tenants (A, B), searching B with the text of some
  of A's memories (same ``user_id`` in every tenant) returns none of A's items, and
  ``GET /v1/memories/{id of A}`` with B's key answers 404.

It prints throughput (requests/s, adds/s, searches/s), p50/p95/p99 latency per operation
(client side, connection reuse), the error count, lost writes and the isolation check;
``--json OUT`` writes the figures. The server is always stopped at the end. The exit
status is 1 when a check fails.

The server's per-key rate limit (600/min by default) is turned off unless
``--rate-limit N`` is given: the test measures the service, not the limiter.

    python bench/load.py                                   # 8 clients, 4 tenants, 30 s / 2000 requests
    python bench/load.py --clients 16 --seconds 20 --json load16.json
    python bench/load.py --embedder hash:512               # without the default model
    python bench/load.py --db 'postgresql://u@host/db?schema=load1' --redis redis://127.0.0.1:6379/0 --replicas 2

``--db`` runs the servers on any store URL (it must be empty: the write check expects the
listing to hold exactly what the run added; a fresh ``?schema=`` does it); ``--replicas N``
starts N servers on it, the clients spread over them round robin, and the checks read
through the first replica what all of them wrote; ``--redis`` makes them share Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from common import git_commit, machine_info, now_iso, percentiles_ms, write_json
from jiyi.server.auth import create_key

USER_ID = "load-user"  # the same user id in every tenant: isolation rests on the tenant alone
PCTS = (50, 95, 99)

# ---------------------------------------------------------------- texts

EN_NAMES = [
    "Alice",
    "Bruno",
    "Chen Wei",
    "Dmitri",
    "Esther",
    "Farid",
    "Gabriela",
    "Hiroshi",
    "Ingrid",
    "Jamal",
    "Keiko",
    "Lars",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tomas",
]
EN_FACTS = [
    "{n} is allergic to {food} and always asks about ingredients",
    "{n} moved to {city} in {year} to work on {topic}",
    "{n} prefers {drink} in the morning and never drinks {drink2} after noon",
    "the {topic} project owned by {n} ships its release on {day}",
    "{n}'s favourite book is about {topic}, read during a trip to {city}",
    "{n} runs {km} kilometres every {day} along the river in {city}",
    "{n} uses a {device} with {num} GB of memory for {topic}",
    "the budget for {topic} was raised to {num} thousand euros by {n}",
    "{n} learned to play the {instrument} in {year} from a teacher in {city}",
    "{n} keeps a {pet} named {petname} who is {num} years old",
]
EN_WORDS = {
    "food": ["peanuts", "shellfish", "gluten", "sesame", "soy", "eggs", "kiwi", "mustard"],
    "city": ["Lisbon", "Osaka", "Nairobi", "Montreal", "Tallinn", "Cusco", "Hanoi", "Bergen", "Tbilisi"],
    "topic": [
        "compilers",
        "bird migration",
        "solar inverters",
        "tax law",
        "glaciology",
        "chess engines",
        "sourdough",
        "typography",
        "robot arms",
        "tide tables",
    ],
    "drink": ["green tea", "espresso", "mate", "oat latte", "black coffee"],
    "drink2": ["cola", "energy drinks", "coffee", "black tea"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "device": ["laptop", "tablet", "desktop", "phone", "mini PC"],
    "instrument": ["cello", "banjo", "oboe", "piano", "guzheng", "accordion"],
    "pet": ["cat", "parrot", "tortoise", "beagle", "rabbit"],
    "petname": ["Mochi", "Pixel", "Biscuit", "Nimbus", "Pepper", "Toffee"],
}
ZH_NAMES = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏", "黄强", "周杰", "吴霞", "徐涛", "孙丽"]
ZH_FACTS = [
    "{n}对{food}过敏，点菜时总会先问配料",
    "{n}在{year}年搬到{city}，负责{topic}的工作",
    "{n}每天早上喝{drink}，下午从不喝{drink2}",
    "{n}负责的{topic}项目计划在{day}发布",
    "{n}每个{day}沿着{city}的河边跑{km}公里",
    "{n}用一台{num}GB内存的{device}做{topic}",
    "{n}在{year}年跟{city}的老师学会了{instrument}",
    "{n}养了一只叫{petname}的{pet}，今年{num}岁",
]
ZH_WORDS = {
    "food": ["花生", "海鲜", "麸质", "芝麻", "牛奶", "芒果"],
    "city": ["成都", "杭州", "大连", "昆明", "西安", "厦门", "哈尔滨", "拉萨"],
    "topic": ["编译器", "候鸟迁徙", "光伏逆变器", "税法", "冰川研究", "围棋程序", "书法字体", "机械臂"],
    "drink": ["绿茶", "咖啡", "普洱", "豆浆"],
    "drink2": ["可乐", "奶茶", "浓茶"],
    "day": ["周一", "周二", "周三", "周四", "周五", "周六", "周日"],
    "device": ["笔记本电脑", "平板", "台式机", "手机"],
    "instrument": ["古筝", "二胡", "钢琴", "琵琶", "小提琴"],
    "pet": ["猫", "鹦鹉", "乌龟", "小狗", "兔子"],
    "petname": ["团子", "豆豆", "可乐", "花卷", "年糕"],
}
EN_QUERIES = [
    "what is {n} allergic to",
    "where did {n} move",
    "what does {n} drink in the morning",
    "which project does {n} own",
    "what pet does {n} have",
    "how far does {n} run",
    "what instrument can {n} play",
    "what computer does {n} use",
]
ZH_QUERIES = [
    "{n}对什么过敏",
    "{n}搬到了哪里",
    "{n}早上喝什么",
    "{n}养了什么宠物",
    "{n}会什么乐器",
    "{n}负责什么项目",
]


def _fill(template: str, words: dict[str, list[str]], name: str, rng: random.Random) -> str:
    values: dict[str, Any] = {k: rng.choice(v) for k, v in words.items()}
    values.update(n=name, year=rng.randint(1990, 2024), km=rng.randint(3, 42), num=rng.randint(2, 64))
    return template.format(**values)


def make_text(marker: str, counter: int, rng: random.Random) -> str:
    """A distinct fact in Chinese or English, tagged with its marker."""
    # Two facts from different templates about different people: one templated fact
    # alone is often >= 0.85 similar to another for the default embedder (the gate's
    # duplicate threshold), two together rarely are (5 in 300 vs 57 in 300).
    if counter % 2:
        a, b = rng.sample(ZH_FACTS, 2)
        first, second = rng.sample(ZH_NAMES, 2)
        body = _fill(a, ZH_WORDS, first, rng) + "；另外，" + _fill(b, ZH_WORDS, second, rng)
        return f"{body}（记录编号 {marker}）"
    a, b = rng.sample(EN_FACTS, 2)
    first, second = rng.sample(EN_NAMES, 2)
    body = _fill(a, EN_WORDS, first, rng) + "; also, " + _fill(b, EN_WORDS, second, rng)
    return f"{body} (record {marker})"


def make_query(rng: random.Random, own_texts: list[str]) -> str:
    roll = rng.random()
    if own_texts and roll < 0.3:
        return rng.choice(own_texts)[:60]  # something this tenant wrote
    if roll < 0.65:
        return rng.choice(EN_QUERIES).format(n=rng.choice(EN_NAMES))
    return rng.choice(ZH_QUERIES).format(n=rng.choice(ZH_NAMES))


# ---------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    db: str,
    keys_file: Path,
    port: int,
    embedder: str | None,
    rate_limit: int | None,
    log: Path,
    redis: str | None = None,
) -> subprocess.Popen[bytes]:
    code = (
        "from jiyi.server.run import serve; "
        f"serve({db!r}, host='127.0.0.1', port={port}, keys_file={str(keys_file)!r}, "
        f"embedder={embedder!r}, rate_limit_per_minute={rate_limit!r}, log_level='warning', redis={redis!r})"
    )
    with open(log, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-c", code], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_healthy(base: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                return time.perf_counter() - start
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not answer /healthz within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # uvicorn shuts down cleanly on SIGINT
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


# ---------------------------------------------------------------- load


@dataclass
class Added:
    marker: str
    item_id: str | None
    action: str
    text: str
    duplicate_of: str | None = None


@dataclass
class Shared:
    deadline: float
    budget: int
    sent: int = 0
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    status: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)  # search hits of another tenant
    added: dict[str, list[Added]] = field(default_factory=lambda: defaultdict(list))
    searches_with_hits: int = 0

    def take(self) -> bool:
        if self.sent >= self.budget or time.perf_counter() >= self.deadline:
            return False
        self.sent += 1
        return True


async def client_loop(
    shared: Shared,
    base: str,
    tenant: str,
    key: str,
    client_no: int,
    tenant_no: int,
    search_ratio: float,
    seed: int,
) -> None:
    rng = random.Random(seed * 1000 + client_no)
    own: list[str] = []
    counter = 0
    headers = {"X-API-Key": key}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60.0) as http:
        while shared.take():
            if rng.random() < search_ratio:
                op = "search"
                body: dict[str, Any] = {"query": make_query(rng, own), "user_id": USER_ID, "limit": 10}
                path = "/v1/memories/search"
            else:
                op = "add"
                marker = f"t{tenant_no}c{client_no}n{counter}"
                counter += 1
                text = make_text(marker, counter, rng)
                body = {
                    "content": text,
                    "user_id": USER_ID,
                    "tags": ["load"],
                    "metadata": {"bench_key": marker},
                }
                path = "/v1/memories"
            t0 = time.perf_counter()
            try:
                resp = await http.post(path, json=body)
            except httpx.HTTPError as exc:
                shared.latency[op].append((time.perf_counter() - t0) * 1000)
                shared.status[f"{op}:{type(exc).__name__}"] += 1
                shared.errors.append(f"{tenant} {op}: {type(exc).__name__}: {exc}")
                continue
            shared.latency[op].append((time.perf_counter() - t0) * 1000)
            shared.status[f"{op}:{resp.status_code}"] += 1
            expected = 201 if op == "add" else 200
            if resp.status_code != expected:
                shared.errors.append(f"{tenant} {op}: HTTP {resp.status_code}: {resp.text[:300]}")
                continue
            data = resp.json()
            if op == "add":
                action = data["decision"]["action"]
                item = data.get("item") or {}
                dup = data["decision"].get("duplicate_of")
                shared.added[tenant].append(Added(marker, item.get("id"), action, text, dup))
                if action == "add":
                    own.append(text)
            else:
                hits = data["hits"]
                shared.searches_with_hits += bool(hits)
                for hit in hits:
                    if hit["item"]["tenant_id"] != tenant:
                        shared.leaks.append(f"{tenant} saw {hit['item']['id']} of {hit['item']['tenant_id']}")


async def run_load(
    bases: list[str],
    keys: dict[str, str],
    clients: int,
    seconds: float,
    requests: int,
    search_ratio: float,
    seed: int,
) -> tuple[Shared, float]:
    tenants = list(keys)
    shared = Shared(deadline=time.perf_counter() + seconds, budget=requests)
    start = time.perf_counter()
    shared.deadline = start + seconds
    await asyncio.gather(
        *(
            client_loop(
                shared,
                bases[c % len(bases)],  # clients spread over the replicas, as a load balancer would
                tenants[c % len(tenants)],
                keys[tenants[c % len(tenants)]],
                c,
                c % len(tenants),
                search_ratio,
                seed,
            )
            for c in range(clients)
        )
    )
    return shared, time.perf_counter() - start


# ---------------------------------------------------------------- checks


def list_all(base: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60.0) as http:
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if cursor:
                params["cursor"] = cursor
            resp = http.get("/v1/memories", params=params)
            resp.raise_for_status()
            page = resp.json()
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if not cursor:
                return items


# Answers that store the new text as an item of its own: a supersede keeps the old item
# (superseded) beside it. The texts put random facts on a few names, so one person's
# habit or home may legitimately change from one add to the next.
STORES_NEW = ("add", "keep_both", "supersede")


def check_writes(base: str, keys: dict[str, str], shared: Shared) -> dict[str, Any]:
    per_tenant: dict[str, Any] = {}
    for tenant, key in keys.items():
        added = shared.added.get(tenant, [])
        new = [a for a in added if a.action in STORES_NEW]
        stored = list_all(base, key)
        stored_ids = {it["id"] for it in stored}
        stored_markers = {(it.get("metadata") or {}).get("bench_key") for it in stored}
        missing = [a.marker for a in new if a.item_id not in stored_ids or a.marker not in stored_markers]
        expected_ids = {a.item_id for a in new}
        extra = [it["id"] for it in stored if it["id"] not in expected_ids]
        wrong_tenant = [it["id"] for it in stored if it["tenant_id"] != tenant]
        # A reinforce must point at an item of this tenant (and store nothing new).
        bad_reinforce = [
            a.marker
            for a in added
            if a.action not in STORES_NEW and (a.duplicate_of or a.item_id) not in stored_ids
        ]
        with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60.0) as http:
            stats = http.get("/v1/stats").json()
        per_tenant[tenant] = {
            "adds_ok": len(added),
            "action_add": sum(a.action == "add" for a in added),
            "action_other": dict(Counter(a.action for a in added if a.action != "add")),
            "stored_new": len(new),
            "listed": len(stored),
            "stats_total": stats["total"],
            "missing": missing[:20],
            "missing_count": len(missing),
            "extra_count": len(extra),
            "wrong_tenant_count": len(wrong_tenant),
            "bad_reinforce_count": len(bad_reinforce),
        }
    lost = sum(t["missing_count"] for t in per_tenant.values())
    mismatched = [
        t
        for t, v in per_tenant.items()
        if v["listed"] != v["stored_new"]
        or v["stats_total"] != v["stored_new"]
        or v["extra_count"]
        or v["wrong_tenant_count"]
        or v["bad_reinforce_count"]
    ]
    return {"lost_writes": lost, "count_mismatch_tenants": mismatched, "per_tenant": per_tenant}


def check_isolation(
    base: str, keys: dict[str, str], shared: Shared, probes: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    violations: list[str] = []
    checked_searches = checked_gets = 0
    own_hits = 0
    for a, key_a in keys.items():
        samples = [x for x in shared.added.get(a, []) if x.action == "add"]
        samples = rng.sample(samples, min(probes, len(samples)))
        a_ids = {x.item_id for x in shared.added.get(a, [])}
        with httpx.Client(base_url=base, headers={"X-API-Key": key_a}, timeout=60.0) as http_a:
            for s in samples:  # control: the owner finds its own item by its text
                hits = http_a.post("/v1/memories/search", json={"query": s.text, "user_id": USER_ID}).json()[
                    "hits"
                ]
                own_hits += any(h["item"]["id"] == s.item_id for h in hits)
        for b, key_b in keys.items():
            if a == b:
                continue
            with httpx.Client(base_url=base, headers={"X-API-Key": key_b}, timeout=60.0) as http:
                for s in samples:
                    for query in (s.text, s.marker):
                        resp = http.post(
                            "/v1/memories/search", json={"query": query, "user_id": USER_ID, "limit": 50}
                        )
                        checked_searches += 1
                        for hit in resp.json()["hits"]:
                            item = hit["item"]
                            if item["id"] in a_ids or item["tenant_id"] != b or s.marker in item["content"]:
                                violations.append(
                                    f"{b} searching {s.marker} saw {item['id']} ({item['tenant_id']})"
                                )
                    resp = http.get(f"/v1/memories/{s.item_id}")
                    checked_gets += 1
                    if resp.status_code != 404:
                        violations.append(f"{b} GET {s.item_id} of {a}: HTTP {resp.status_code}")
    total_probes = sum(min(probes, sum(x.action == "add" for x in shared.added.get(t, []))) for t in keys)
    return {
        "ok": not violations and not shared.leaks,
        "cross_tenant_searches": checked_searches,
        "cross_tenant_gets": checked_gets,
        "violations": violations[:20],
        "violation_count": len(violations),
        "in_run_leaks": len(shared.leaks),
        "own_item_found": f"{own_hits}/{total_probes}",
    }


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tenants", type=int, default=4)
    p.add_argument("--clients", type=int, default=8, help="concurrent clients, round robin over tenants")
    p.add_argument("--seconds", type=float, default=30.0, help="run at most this long")
    p.add_argument("--requests", type=int, default=2000, help="send at most this many requests in all")
    p.add_argument("--search-ratio", type=float, default=0.7)
    p.add_argument("--embedder", default=None, help="server embedder spec (default: jiyi's default)")
    p.add_argument(
        "--rate-limit",
        type=int,
        default=None,
        metavar="N",
        help="per-key requests/min on the server (default: off)",
    )
    p.add_argument("--probes", type=int, default=5, help="items per tenant probed by the isolation check")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="store of the servers: a SQLite path or postgresql://... naming an EMPTY store "
        "(e.g. ?schema=load1); default a new SQLite file in the temp dir",
    )
    p.add_argument("--redis", default=None, metavar="URL", help="Redis the servers share (default none)")
    p.add_argument("--replicas", type=int, default=1, help="jiyi serve processes on the store (default 1)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (db, keys, server log)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    args = p.parse_args(argv)
    if args.tenants < 1 or args.clients < 1 or args.seconds <= 0 or args.requests < 1 or args.replicas < 1:
        p.error("--tenants, --clients, --seconds, --requests and --replicas must be positive")
    if args.replicas > 1 and args.db is None:
        p.error("--replicas > 1 needs a shared --db (postgresql://...)")
    if not 0.0 <= args.search_ratio <= 1.0:
        p.error("--search-ratio must be within 0..1")

    tmp = Path(tempfile.mkdtemp(prefix="jiyi-load-"))
    keys_file, db, log = tmp / "keys.json", tmp / "load.db", tmp / "server.log"
    keys = {
        f"tenant-{i}": create_key(keys_file, f"tenant-{i}", "owner", label="load")
        for i in range(args.tenants)
    }
    store = args.db or str(db)
    ports = [free_port() for _ in range(args.replicas)]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    logs = [log.with_name(f"server{i}.log") for i in range(args.replicas)]
    procs = [
        start_server(store, keys_file, port, args.embedder, args.rate_limit, lg, args.redis)
        for port, lg in zip(ports, logs, strict=True)
    ]
    base = bases[0]  # the checks read through one replica what all of them wrote
    failed = True
    try:
        startup = max(wait_healthy(b, pr, lg) for b, pr, lg in zip(bases, procs, logs, strict=True))
        # Warm up (not measured): the first search loads the embedding model.
        t0 = time.perf_counter()
        for b in bases:
            for key in keys.values():
                httpx.post(
                    f"{b}/v1/memories/search",
                    headers={"X-API-Key": key},
                    json={"query": "warm up", "user_id": USER_ID},
                    timeout=120.0,
                ).raise_for_status()
        warmup = time.perf_counter() - t0

        shared, elapsed = asyncio.run(
            run_load(bases, keys, args.clients, args.seconds, args.requests, args.search_ratio, args.seed)
        )
        writes = check_writes(base, keys, shared)
        isolation = check_isolation(base, keys, shared, args.probes, args.seed)
    finally:
        codes = [stop_server(pr) for pr in procs]
        rc = next((c for c in codes if c not in (0, None)), codes[0])
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    n_add, n_search = len(shared.latency["add"]), len(shared.latency["search"])
    total = n_add + n_search
    reinforced = sum(sum(v["action_other"].values()) for v in writes["per_tenant"].values())
    failed = (
        bool(shared.errors)
        or writes["lost_writes"] > 0
        or bool(writes["count_mismatch_tenants"])
        or not isolation["ok"]
    )
    result = {
        "benchmark": "load",
        "when": now_iso(),
        "commit": git_commit(),
        "machine": machine_info(),
        "config": {
            "tenants": args.tenants,
            "clients": args.clients,
            "seconds": args.seconds,
            "requests": args.requests,
            "search_ratio": args.search_ratio,
            "embedder": args.embedder or "default",
            "rate_limit_per_minute": args.rate_limit,
            "seed": args.seed,
            "store": "sqlite" if args.db is None or not args.db.startswith("postgres") else "postgresql",
            "redis": args.redis is not None,
            "replicas": args.replicas,
        },
        "server_startup_s": round(startup, 2),
        "warmup_s": round(warmup, 2),
        "elapsed_s": round(elapsed, 2),
        "requests": total,
        "stopped_by": "requests" if total >= args.requests else "time",
        "throughput_rps": round(total / elapsed, 1),
        "adds_per_s": round(n_add / elapsed, 1),
        "searches_per_s": round(n_search / elapsed, 1),
        "latency_ms": {
            "add": {"n": n_add, **percentiles_ms(shared.latency["add"], PCTS)},
            "search": {"n": n_search, **percentiles_ms(shared.latency["search"], PCTS)},
            "all": {"n": total, **percentiles_ms(shared.latency["add"] + shared.latency["search"], PCTS)},
        },
        "status": dict(sorted(shared.status.items())),
        "errors": len(shared.errors),
        "error_samples": shared.errors[:10],
        "searches_with_hits": shared.searches_with_hits,
        "adds_not_stored_as_new": reinforced,
        "writes": writes,
        "isolation": isolation,
        "server_exit": rc,
        "ok": not failed,
    }

    lat = result["latency_ms"]
    print(
        f"machine: {result['machine']['cpu']} x{result['machine']['cpu_count']}, "
        f"{result['machine']['ram_gb']} GB, Python {result['machine']['python']}"
    )
    print(
        f"config: {args.tenants} tenants, {args.clients} clients, <= {args.seconds:g} s / <= {args.requests} "
        f"requests, search ratio {args.search_ratio}, embedder {args.embedder or 'default'}; "
        f"{args.replicas} replica(s) on {result['config']['store']}" + (" + Redis" if args.redis else "")
    )
    print(f"server up in {startup:.2f} s, warm-up {warmup:.2f} s")
    print(
        f"ran {elapsed:.2f} s (stopped by {result['stopped_by']}): {total} requests, "
        f"{result['throughput_rps']} req/s ({result['adds_per_s']} adds/s, {result['searches_per_s']} searches/s)"
    )
    for op in ("add", "search", "all"):
        v = lat[op]
        print(
            f"  {op:<6} n={v['n']:<5} p50 {v['p50']:8.2f} ms  p95 {v['p95']:8.2f} ms  p99 {v['p99']:8.2f} ms"
        )
    print(f"status: {result['status']}")
    print(f"errors: {len(shared.errors)}" + (f"  e.g. {shared.errors[0]}" if shared.errors else ""))
    for tenant, v in writes["per_tenant"].items():
        print(
            f"  {tenant}: adds 2xx {v['adds_ok']}, action=add {v['action_add']}, other {v['action_other']}, "
            f"stored as new {v['stored_new']}, "
            f"listed {v['listed']}, stats total {v['stats_total']}, missing {v['missing_count']}, "
            f"extra {v['extra_count']}, bad reinforce {v['bad_reinforce_count']}"
        )
    print(
        f"lost writes: {writes['lost_writes']}; count mismatches: {writes['count_mismatch_tenants'] or 'none'}"
    )
    print(
        f"isolation: {'ok' if isolation['ok'] else 'FAILED'} ({isolation['cross_tenant_searches']} cross-tenant "
        f"searches, {isolation['cross_tenant_gets']} cross-tenant GETs -> 404, in-run foreign hits "
        f"{isolation['in_run_leaks']}; owner finds own probe item {isolation['own_item_found']})"
    )
    print(f"server exit code: {rc}")
    print("RESULT: " + ("ok" if not failed else "FAILED"))
    if args.json:
        write_json(args.json, result)
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
