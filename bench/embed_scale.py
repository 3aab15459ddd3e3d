"""Do jiyi's cosine settings mean the same with another embedder? (jiyi.embed.scale)

Three counts per embedder, no timings:

* ``gate``: ``Memory.add`` of the first N turns (longer than 30 characters) of a LoCoMo
  conversation, all distinct: how many were added, reinforced as duplicates, superseded.
  On the wrong scale a duplicate bar takes distinct memories for duplicates.
* ``answers``: the cosine of a question and the memory answering it (10th percentile,
  median) and of the other memories (median, 90th percentile), per half of the zh/en set
  (``jiyi.embed.scale.ANSWER_LEVELS`` is read off the tuning half).
* ``bars``: how many pairs of those distinct turns reach the search's later-statement bar
  (:mod:`jiyi.read.versions`) as given on the default embedder's scale and as moved onto
  this one's (every such pair is a false "later statement" when the two are one person's
  and share a word); and precision / recall of procedural memory's same-task bar
  (``jiyi.procedural.MIN_SIMILARITY``) on the 80 zh/en task pairs of
  tests/test_procedural.py, as given and as moved.
* ``relevance``: the top-5 hits of every zh/en query, the share kept at the default cut
  (0.05) and at the strict one (0.5), for gold hits, other hits and hits of queries with
  no answer, per half.

    python bench/embed_scale.py --locomo ../shared/data/locomo10.json --embedder e5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO_ROOT
from jiyi.embed.base import resolve_embedder
from jiyi.embed.scale import on_scale
from jiyi.memory import Memory
from jiyi.procedural import MIN_SIMILARITY
from jiyi.read.versions import RESTATEMENT_COSINE, restatement_bar
from zh_en import filled_store

ZH_EN = REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json"
TUNING_USERS = ("lin", "emma")


def half_of(user: str) -> str:
    return "tuning" if user in TUNING_USERS else "held out"


def distinct_turns(locomo: Path, turns: int) -> list[str]:
    """The first ``turns`` turns longer than 30 characters of LoCoMo's first conversation."""
    conv = json.loads(locomo.read_text(encoding="utf-8"))[0]["conversation"]
    texts: list[str] = []
    for key in sorted(k for k in conv if k.startswith("session_") and isinstance(conv[k], list)):
        texts += [t["text"] for t in conv[key] if len(t["text"]) > 30]
    return texts[:turns]


def gate_counts(locomo: Path, embedder: str | None, turns: int) -> dict[str, Any]:
    texts = distinct_turns(locomo, turns)
    with tempfile.TemporaryDirectory() as tmp, Memory.open(Path(tmp) / "m.db", embedder=embedder) as mem:
        actions = Counter(mem.add(text, user_id="u").decision.action for text in texts)
    return {"turns": len(texts), **actions}


def answer_levels(data: dict[str, Any], embedder: str | None) -> dict[str, dict[str, float]]:
    emb = resolve_embedder(embedder)
    embed_query = getattr(emb, "embed_query", emb.embed)
    out = {}
    for half in ("tuning", "held out"):
        gold: list[float] = []
        other: list[float] = []
        queries = [q for q in data["queries"] if q["gold"] and half_of(q["user_id"]) == half]
        for q, qv in zip(queries, embed_query([q["query"] for q in queries]), strict=True):
            mems = [m for m in data["memories"] if m["user_id"] == q["user_id"]]
            for m, cos in zip(mems, emb.embed([m["content"] for m in mems]) @ qv, strict=True):
                (gold if m["id"] in q["gold"] else other).append(float(cos))
        out[half] = {
            "gold_p10": round(float(np.percentile(gold, 10)), 3),
            "gold_median": round(statistics.median(gold), 3),
            "other_median": round(statistics.median(other), 3),
            "other_p90": round(float(np.percentile(other, 90)), 3),
        }
    return out


def bar_counts(locomo: Path | None, embedder: str | None, turns: int) -> dict[str, Any]:
    """The later-statement bar on distinct turns, the same-task bar on the task pairs: each
    as given (the default embedder's scale) and as moved onto ``embedder``'s."""
    emb = resolve_embedder(embedder)
    out: dict[str, Any] = {}
    if locomo is not None:
        vectors = emb.embed(distinct_turns(locomo, turns))
        pairs = (vectors @ vectors.T)[np.triu_indices(len(vectors), k=1)]
        out["turn_pairs"] = len(pairs)
        for name, bar in (("given", RESTATEMENT_COSINE), ("moved", restatement_bar(emb.model_id))):
            out[f"later_statement_{name} ({bar:.3f})"] = int((pairs >= bar).sum())
    # The pairs live in the test that calibrated the bar on them (docs/procedural.md).
    sys.path.insert(0, str(REPO_ROOT))
    from tests.test_procedural import EN_PAIRS, ZH_PAIRS

    rows = EN_PAIRS + ZH_PAIRS
    vectors = emb.embed([t for a, b, _ in rows for t in (a, b)])
    cos = np.einsum("ij,ij->i", vectors[0::2], vectors[1::2])
    same = np.array([s for _, _, s in rows])
    for name, bar in (("given", MIN_SIMILARITY), ("moved", on_scale(MIN_SIMILARITY, emb.model_id))):
        hit = cos >= bar
        tp = int((hit & same).sum())
        out[f"same_task_{name} ({bar:.3f}) precision/recall"] = (
            round(tp / max(int(hit.sum()), 1), 2),
            round(tp / int(same.sum()), 2),
        )
    return out


def relevance_kept(data: dict[str, Any], embedder: str | None) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with tempfile.TemporaryDirectory() as tmp, filled_store(data, Path(tmp) / "m.db", embedder) as mem:
        for q in data["queries"]:
            gold = set(q["gold"] or ())
            hits = mem.search(q["query"], user_id=q["user_id"], limit=5, touch=False, min_relevance=0.0)
            for hit in hits:
                kind = "unanswerable" if not gold else "gold" if hit.item.id in gold else "other"
                found[half_of(q["user_id"])][kind].append(float(hit.relevance or 0.0))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--locomo", type=Path, help="locomo10.json (the gate counts need it)")
    parser.add_argument("--zh-en", type=Path, default=ZH_EN)
    parser.add_argument("--embedder", default=None, help="embedder spec (default: jiyi's)")
    parser.add_argument("--turns", type=int, default=150)
    args = parser.parse_args(argv)
    name = args.embedder or "default"
    if args.locomo is not None:
        print(
            f"{name} gate, {args.turns} distinct LoCoMo turns:",
            gate_counts(args.locomo, args.embedder, args.turns),
        )
    print(f"{name} bars, given / moved:", bar_counts(args.locomo, args.embedder, args.turns))
    data = json.loads(args.zh_en.read_text(encoding="utf-8"))
    for half, levels in answer_levels(data, args.embedder).items():
        print(f"{name} question-to-memory cosines, {half}:", levels)
    for half, kinds in sorted(relevance_kept(data, args.embedder).items(), reverse=True):
        shares = ", ".join(
            f"{kind} n={len(v)} kept {sum(x >= 0.05 for x in v) / len(v):.3f} / {sum(x >= 0.5 for x in v) / len(v):.3f}"
            for kind, v in sorted(kinds.items())
        )
        print(f"{name} relevance, {half} (at 0.05 / 0.5): {shares}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
