"""Search latency at LoCoMo scale on the embedded default, and where it goes
(docs/benchmarks.md, "Search speed"; PROTOCOL section 2).

One LoCoMo conversation (``--conversation``, default 4: 629 turns, 260 questions) is imported into a
SQLite file with the default embedder, as ``bench/locomo.py`` raw mode does; then every
question of it is one ``Memory.search`` as an application makes it: default limit (10),
``touch=True`` (usage write and retrieval log), and the query embedding included (the
in-process query cache is emptied before each round, so every query is embedded).
Each sample is split into query embedding, the store's Retrieve, the write (touch and
retrieval log) and the rest (ranking in Python) by wrapping the embedder and the store.

The machine is shared, so absolute milliseconds drift; two measures that do not:

* ``--profile``: cProfile over every search, reported as each stage's share of the total
  cumulative time and its call counts per search (deterministic apart from the profiler's
  own overhead, which inflates Python-heavy stages);
* ``--compare SRC``: two worker processes, one importing jiyi from ``SRC`` (e.g. a copy
  of main's ``src``) and one from this checkout, answer the same blocks of questions in
  turn (ABBA order), so both see the same machine state; p50/p95 of each side;
* ``--floor N``: every question searched N times in a row (query vector cached) and
  embedded N times alone; per question the fastest run of each part, median over the
  questions: what a search costs when the machine lets it run (load only adds to it).

    python bench/search_speed.py                          # this checkout
    python bench/search_speed.py --profile                # + where the time goes
    python bench/search_speed.py --compare /tmp/main_src --rounds 5
    python bench/search_speed.py --floor 10               # each part's fastest of 10
    python bench/search_speed.py --gap 5                  # 5 ms of other work between searches

``--gap``: back to back, a search also pays for whatever its predecessor left running
(the usage write a store sends in the background); an application does its own work
between two searches (an agent waits for its model), which ``--gap`` stands for.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from common import REPO_ROOT, git_commit, machine_info, now_iso, percentiles_ms
from jiyi.embed.base import resolve_embedder
from jiyi.memory import Memory
from jiyi.store.base import KeywordHits, Op, Retrieve
from jiyi.store.sqlite import SQLiteStore
from locomo import DEFAULT_DATA, load_conversation
from scale import Recorder, TimedEmbedder, TimedStore

PARTS = ("total", "embed", "retrieve", "write", "other")
FLOOR_PARTS = (*PARTS, "keyword")
"""``--floor`` adds the keyword query (BM25 over the scope, in memory; FTS5 before 2026-11-29), a part of ``retrieve``."""
R = TypeVar("R")
STAGES = (
    # (label, function as ``file:name`` suffix in the profile, ``|`` between a function's
    # names in different versions, so an older src can be profiled too); nested, read as shares.
    ("query embedding", "usem3.py:embed"),
    ("store Retrieve (SQLite)", "sqlite.py:_search"),
    ("  vector hits", "sqlite.py:vector_hits"),
    ("  keyword hits (BM25)", "sqlite.py:keyword_hits"),
    ("  thread links", "sqlite.py:thread_links"),
    ("  load hits (items)", "sqlite.py:load_hits"),
    ("    item JSON -> MemoryItem", "sqlcommon.py:load_item"),
    # the features are made before the ranking since 2026-11-30 (the best statements are read
    # for the best candidates by them), inside it before
    ("fusion features", "fusion.py:features"),
    ("  language of each text", "fusion.py:other_language"),
    ("  term coverage", "rank.py:term_coverage"),
    ("ranking (score_candidates)", "rank.py:score_candidates"),
    ("  learned fusion + breakdowns", "rank.py:_learned"),
    ("  seed formula", "rank.py:seed_contributions|final_score"),  # final_score before 2026-11-28
    ("  newer versions first", "rank.py:newer_versions_first"),
    ("best statements (read + gains)", "search.py:_statement_gains"),  # since 2026-11-30
    ("relevance", "rank.py:relevances"),
    ("MMR", "rank.py:mmr_select"),
    ("touch + retrieval log write", "sqlite.py:_write"),
)


class Bench:
    """One conversation in a SQLite file, ready to be searched."""

    def __init__(self, conversation: int, data: Path, db_dir: Path, gap: float = 0.0) -> None:
        self.gap = gap / 1000.0
        sample = json.loads(data.read_text(encoding="utf-8"))[conversation - 1]
        self.conv = load_conversation(conversation, sample)
        self.recorder = Recorder()
        inner = self.embedder = resolve_embedder(None)
        self.store = _Store(SQLiteStore(db_dir / f"{self.conv.sample_id}.db"), self.recorder)
        self.mem = Memory(self.store, embedder=TimedEmbedder(inner, self.recorder))
        self.mem.import_items(self.conv.records)
        for record in self.conv.records[:20]:  # jieba, the model and the scope cache warm
            self.mem.search(record["content"], user_id=self.conv.sample_id)
        self.questions = [q.text for q in self.conv.questions]

    def new_round(self) -> None:
        """Every query of the next round is embedded again (as a new query would be)."""
        self.mem.runtime.query_cache._data.clear()

    def run(self, texts: Sequence[str]) -> list[dict[str, float]]:
        out = []
        for text in texts:
            self.recorder.reset()
            t0 = time.perf_counter()
            self.mem.search(text, user_id=self.conv.sample_id)
            total = time.perf_counter() - t0
            s = self.recorder.seconds
            sample = {"total": total, "embed": s.get("embed", 0.0), "retrieve": s.get("retrieve", 0.0)}
            sample["write"] = sum(v for k, v in s.items() if k in ("write", "touch"))
            sample["other"] = total - sum(v for k, v in s.items() if k != "embed") - sample["embed"]
            out.append({k: v * 1000.0 for k, v in sample.items()})
            if self.gap:
                time.sleep(self.gap)  # the application's own work between two searches
        return out

    def floor(self, repeat: int) -> dict[str, float]:
        """Each part's fastest of ``repeat`` runs per question, median over the questions
        (the searches find the query vector cached; ``embed`` and the keyword query of the
        search's Retrieve, part of ``retrieve``, are timed alone)."""
        best: dict[str, list[float]] = {p: [] for p in FLOOR_PARTS}
        for text in self.questions:
            runs = self.run([text] * (repeat + 1))[1:]  # the first embeds and caches the vector
            op = self.store.last
            assert op is not None
            keyword = KeywordHits(op.filter, op.terms, op.keyword_k)
            parts = {
                "embed": _fastest(repeat, self.embedder.embed, [text]),
                **{p: min(r[p] for r in runs) for p in ("retrieve", "write", "other")},
                "keyword": _fastest(repeat, self.store.inner.execute, keyword),
            }
            parts["total"] = sum(v for p, v in parts.items() if p != "keyword")
            for p in FLOOR_PARTS:
                best[p].append(parts[p])
        return {p: statistics.median(v) for p, v in best.items()}


class _Store(TimedStore):
    """:class:`TimedStore` that keeps the last Retrieve (its keyword query is timed alone)."""

    last: Retrieve | None = None

    def execute(self, op: Op[R]) -> R:
        if isinstance(op, Retrieve):
            self.last = op
        return super().execute(op)


def _fastest(repeat: int, fn: Callable[[Any], object], arg: Any) -> float:
    """The fastest of ``repeat`` calls of ``fn(arg)``, in ms."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t0)
    return min(times) * 1000.0


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    return {"n": len(samples), **{p: percentiles_ms([s[p] for s in samples], (10, 50, 95)) for p in PARTS}}


def profile_shares(bench: Bench) -> list[dict[str, Any]]:
    """cProfile over one round of every question: each stage's share of the total."""
    bench.new_round()
    prof = cProfile.Profile()
    prof.enable()
    bench.run(bench.questions)
    prof.disable()
    stats: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in stats.values())
    n = len(bench.questions)
    rows = []
    for label, where in STAGES:
        file, names = where.split(":")
        found = [
            (cc, ct)
            for (f, _, fn), (cc, _, _, ct, _) in stats.items()
            if f.endswith(file) and fn in names.split("|")
        ]
        calls = sum(c for c, _ in found)
        cum = sum(t for _, t in found)
        rows.append({"stage": label, "share": cum / total, "calls_per_search": calls / n})
    calls = sum(cc for (cc, _, _, _, _) in stats.values())
    rows.append({"stage": "(function calls per search)", "share": None, "calls_per_search": calls / n})
    rows.append({"stage": "(profiled ms per search)", "share": None, "calls_per_search": total / n * 1000})
    return rows


def worker(args: argparse.Namespace) -> int:
    """``--worker``: answer ``run START END`` / ``round`` lines with JSON samples."""
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args.conversation, args.data, Path(tmp), args.gap)
        print(json.dumps({"ready": len(bench.questions)}), flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "round":
                bench.new_round()
                print("{}", flush=True)
            elif cmd[0] == "run":
                print(json.dumps(bench.run(bench.questions[int(cmd[1]) : int(cmd[2])])), flush=True)
        bench.mem.close()
    return 0


class Worker:
    def __init__(self, src: Path, args: argparse.Namespace) -> None:
        env = {**os.environ, "PYTHONPATH": str(src)}
        cmd = [sys.executable, __file__, "--worker", "--conversation", str(args.conversation)]
        cmd += ["--data", str(args.data), "--gap", str(args.gap)]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.n = int(self.ask(None)["ready"])

    def ask(self, line: str | None) -> Any:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Main's (``--compare``) and this checkout's search, interleaved block by block."""
    sides = {"before": Worker(args.compare, args), "after": Worker(REPO_ROOT / "src", args)}
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    n = min(w.n for w in sides.values())
    flip = False
    for _ in range(args.rounds):
        for w in sides.values():
            w.ask("round")
        for start in range(0, n, args.block):
            order = list(sides.items())
            for name, w in reversed(order) if flip else order:
                samples[name] += w.ask(f"run {start} {min(start + args.block, n)}")
            flip = not flip
    for w in sides.values():
        w.close()
    return {name: summary(s) for name, s in samples.items()}


def print_summary(name: str, s: dict[str, Any]) -> None:
    cells = "  ".join(f"{p} {s[p]['p10']:.2f}/{s[p]['p50']:.2f}/{s[p]['p95']:.2f}" for p in PARTS)
    print(f"{name:<8} n={s['n']}  ms p10/p50/p95: {cells}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="jiyi search latency at LoCoMo scale (SQLite, default embedder).")
    p.add_argument(
        "--conversation", type=int, default=4, help="LoCoMo conversation, 1-based (default 4: 629 turns)"
    )
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--rounds", type=int, default=3, help="times every question is searched")
    p.add_argument("--profile", action="store_true", help="cProfile one round: shares by stage")
    p.add_argument(
        "--floor", type=int, default=0, metavar="N", help="each part's fastest of N runs per question"
    )
    p.add_argument("--compare", type=Path, default=None, metavar="SRC", help="interleave with jiyi from SRC")
    p.add_argument("--block", type=int, default=10, help="--compare: questions per turn")
    p.add_argument(
        "--gap",
        type=float,
        default=0.0,
        metavar="MS",
        help="pause between two searches, as an application's own work (not timed; default 0: back to back)",
    )
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    out: dict[str, Any] = {
        "bench": "search_speed",
        "date": now_iso(),
        "commit": git_commit(),
        "machine": machine_info(),
        "conversation": args.conversation,
        "rounds": args.rounds,
        "gap_ms": args.gap,
        "loadavg_at_start": list(os.getloadavg()),
    }
    if args.compare is not None:
        out["compare"] = {"before_src": str(args.compare), **compare(args)}
        for name in ("before", "after"):
            print_summary(name, out["compare"][name])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            bench = Bench(args.conversation, args.data, Path(tmp), args.gap)
            print(
                f"conversation {args.conversation}: {len(bench.conv.records)} memories, {len(bench.questions)} questions"
            )
            samples: list[dict[str, float]] = []
            for _ in range(args.rounds):
                bench.new_round()
                samples += bench.run(bench.questions)
            out["search"] = summary(samples)
            print_summary("search", out["search"])
            if args.floor:
                out["floor"] = bench.floor(args.floor)
                cells = "  ".join(f"{p} {out['floor'][p]:.2f}" for p in FLOOR_PARTS)
                print(f"floor    fastest of {args.floor} per question, median over questions, ms: {cells}")
            if args.profile:
                out["profile"] = profile_shares(bench)
                for row in out["profile"]:
                    share = "" if row["share"] is None else f"{100 * row['share']:6.1f}%"
                    print(f"  {row['stage']:<30} {share:>8}  {row['calls_per_search']:10.1f} calls/search")
            bench.mem.close()
    out["loadavg_at_end"] = list(os.getloadavg())
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
