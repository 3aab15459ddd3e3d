"""Every hit of a fixed set of searches, with all it explains, as JSON lines: to show that a
change to the search path kept rankings and explanations exactly (compare two files with
``cmp``).

Searches: the Chinese/English set (``tests/data/zh_en_retrieval.json``, every query, at the
set's fixed clock) under four ranking configurations (the default; seed 002 with importance
and recency boosts; the fixed fusion; thread diversity with a similarity floor), each plain,
with ``explain=True`` (limit 5) and with ``min_relevance=0.5`` over active and superseded
memories; then LoCoMo conversations 1 and 4 in raw mode, every question twice in a row as an
application asks it (``touch=True``; ``explain=True`` and limit 20 the first time). A line per
search: its configuration, the query and per hit the id (LoCoMo: the dia_id), score,
similarity, relevance, the breakdown in order, and the item's JSON (its random id left out).
Floats are written with ``repr``, so equal files mean equal bits.

    python bench/hits_snapshot.py /tmp/after.jsonl
    PYTHONPATH=/tmp/main_src python bench/hits_snapshot.py /tmp/before.jsonl
    cmp /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from common import REPO_ROOT
from jiyi.config import RankConfig
from jiyi.memory import Memory
from locomo import DEFAULT_DATA, load_conversation

ZH_EN = REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json"
CONFIGS = {
    "default": RankConfig(),
    "seed002": RankConfig(formula="seed002", importance_boost=0.1, recency_boost=0.05),
    "fixed": RankConfig(fusion="fixed"),
    "diverse": RankConfig(thread_diversity=0.05, threshold=0.2),
}


def dump(out: IO[str], tag: str, query: str, hits: Sequence[Any]) -> None:
    rows = [
        {
            "id": h.item.source_id or h.item.id,
            "score": repr(h.score),
            "similarity": repr(h.similarity),
            "relevance": repr(h.relevance),
            "breakdown": [[k, repr(v)] for k, v in h.breakdown.items()],
            "item": h.item.model_dump_json(exclude={"id"}),
        }
        for h in hits
    ]
    out.write(json.dumps({"tag": tag, "query": query, "hits": rows}, ensure_ascii=False) + "\n")


def zh_en(out: IO[str], tmp: Path) -> None:
    data = json.loads(ZH_EN.read_text(encoding="utf-8"))
    now = datetime.fromisoformat(data["now"].replace("Z", "+00:00"))
    for name, cfg in CONFIGS.items():
        with Memory.open(tmp / f"zh_en_{name}.db", clock=lambda: now, rank=cfg) as mem:
            for user in data["users"]:
                memories = [m for m in data["memories"] if m["user_id"] == user]
                mem.import_items([{k: v for k, v in m.items() if k != "lang"} for m in memories])
            for q in data["queries"]:
                text, user = q["query"], q["user_id"]
                dump(out, f"zh/{name}", text, mem.search(text, user_id=user, touch=False))
                hits = mem.search(text, user_id=user, explain=True, touch=False, limit=5)
                dump(out, f"zh/{name}/explain", text, hits)
                shown = ["active", "superseded"]
                hits = mem.search(text, user_id=user, min_relevance=0.5, statuses=shown, touch=False)
                dump(out, f"zh/{name}/min_relevance", text, hits)


def locomo(out: IO[str], tmp: Path, data: Path) -> None:
    samples = json.loads(data.read_text(encoding="utf-8"))
    now = datetime.fromisoformat("2024-01-01T00:00:00+00:00")  # a fixed clock: touches write it
    for number in (1, 4):
        conv = load_conversation(number, samples[number - 1])
        with Memory.open(tmp / f"locomo{number}.db", clock=lambda: now) as mem:
            mem.import_items(conv.records)
            for round_ in range(2):
                for q in conv.questions:
                    first = round_ == 0
                    hits = mem.search(
                        q.text, user_id=conv.sample_id, explain=first, limit=20 if first else 10
                    )
                    dump(out, f"locomo{number}/{round_}", q.text, hits)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="every hit of a fixed set of searches, as JSON lines")
    p.add_argument("out", type=Path)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    args = p.parse_args(argv)
    with args.out.open("w", encoding="utf-8") as out, tempfile.TemporaryDirectory() as tmp:
        zh_en(out, Path(tmp))
        locomo(out, Path(tmp), args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
