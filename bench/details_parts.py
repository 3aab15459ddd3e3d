"""jiyi beside each of its parts, broken down, from a ``bench/locomo.py --details`` file.

``locomo.py`` prints jiyi against its parts (cosine, BM25, RRF) for categories 1-4 as a
whole; this reads the per-question rankings it wrote with ``--details`` and prints the same
comparison by category, by conversation, and for the questions marked ``"now": true`` in
the data file (bench/data/conversations_zh_en.json), where it also counts how often the
latest statement ranks above the one it replaced (``"superseded"``). A ``<`` marks a row
where jiyi is below one of its parts (PROTOCOL section 5).

    python bench/details_parts.py DETAILS.jsonl [--data bench/data/conversations_zh_en.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SYSTEMS = ("jiyi", "cosine", "bm25", "rrf")
KS = (5, 10, 20)
MISSING = 10**6
Row = dict[str, Any]


def ranking(row: Row, system: str) -> list[str]:
    return list(row["ranked"]) if system == "jiyi" else list(row.get("parts", {}).get(system, []))


def recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def rank_of(ranked: Sequence[str], ids: Sequence[str]) -> int:
    """The best 1-based rank of any of ``ids``; MISSING when none is ranked."""
    return min((ranked.index(i) + 1 for i in ids if i in ranked), default=MISSING)


def line(name: str, rows: Sequence[Row]) -> str:
    cells: list[str] = []
    below: list[str] = []
    for k in KS:
        by = {s: sum(recall(ranking(r, s), r["evidence"], k) for r in rows) / len(rows) for s in SYSTEMS}
        cells += [f"{by[s]:.3f}" for s in SYSTEMS]
        if by["jiyi"] < max(by[s] for s in SYSTEMS[1:]) - 1e-9:
            below.append(f"@{k}")
    flag = f"  < {' '.join(below)}" if below else ""
    return f"{name:18}{len(rows):>4}  " + "  ".join(" ".join(cells[i : i + 4]) for i in (0, 4, 8)) + flag


def report(rows: Sequence[Row], questions: dict[tuple[str, str], Row]) -> str:
    scored = [r for r in rows if r["evidence"] and r["category"] in (1, 2, 3, 4)]
    # Each block: recall@k of jiyi, cosine, bm25, rrf.
    out = [f"{'cat1-4':18}{'n':>4}  " + "  ".join(f"{f'@{k} jiyi/cos/bm25/rrf':23}" for k in KS)]
    groups: list[tuple[str, Callable[[Row], bool]]] = [("all", lambda r: True)]
    groups += [(f"cat{c}", lambda r, c=c: r["category"] == c) for c in (1, 2, 3, 4)]
    groups += [
        (str(s), lambda r, s=s: r["sample_id"] == s) for s in dict.fromkeys(r["sample_id"] for r in scored)
    ]
    groups.append(
        ('"now" questions', lambda r: bool(questions.get((r["sample_id"], r["question"]), {}).get("now")))
    )
    for name, keep in groups:
        selected = [r for r in scored if keep(r)]
        if selected:
            out.append(line(name, selected))
    pairs = [
        (r, questions[(r["sample_id"], r["question"])]["superseded"])
        for r in scored
        if questions.get((r["sample_id"], r["question"]), {}).get("superseded")
    ]
    if pairs:
        out.append(f"\nlatest statement vs the one it replaced ({len(pairs)} questions), best rank of each:")
        for s in SYSTEMS:
            newer = older = neither = 0
            for r, old in pairs:
                new_rank, old_rank = rank_of(ranking(r, s), r["evidence"]), rank_of(ranking(r, s), old)
                if new_rank == old_rank:
                    neither += 1  # both unranked, or one item read through both turns
                elif new_rank < old_rank:
                    newer += 1
                else:
                    older += 1
            out.append(
                f"  {s:7} latest above {newer:>3}   replaced above {older:>3}   tied/unranked {neither:>3}"
            )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="jiyi vs its parts by category, conversation and 'now' questions."
    )
    p.add_argument("details", type=Path, help="a bench/locomo.py --details OUT.jsonl file")
    p.add_argument(
        "--data", type=Path, default=None, help="the data file, for its 'now' and 'superseded' marks"
    )
    args = p.parse_args(argv)
    with open(args.details, encoding="utf-8") as fh:
        rows = [json.loads(text) for text in fh if text.strip()]
    if not rows or "parts" not in rows[0]:
        print(
            "error: no per-part rankings in the details file (rerun bench/locomo.py --details)",
            file=sys.stderr,
        )
        return 2
    questions: dict[tuple[str, str], Row] = {}
    if args.data is not None:
        with open(args.data, encoding="utf-8") as fh:
            for sample in json.load(fh):
                for qa in sample.get("qa", []):
                    questions[(str(sample["sample_id"]), str(qa["question"]))] = qa
    print(report(rows, questions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
