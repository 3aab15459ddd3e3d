"""Profile filing: does each statement land in the profile field it belongs in?

The data (``bench/data/profile_filing.jsonl``, our own zh/en writing) holds single
statements a user might make, each with the scope it is said in (``user`` or
``project``), the profile field it belongs in (``"none"`` when it belongs in no field of
that scope: a project rule said in a user's chat, someone else's allergy, a team's
framework choice, small talk, a question, a hedge) and, for a few, ``also``: other
fields that are right too (a decision also names the tech stack).

Each statement goes through jiyi's offline write path as ``remember()`` runs it: the
rule extractor reads it as a user turn, the gate's minimum confidence drops hedged
readings, and each extraction becomes a memory item as the pipeline builds it. The
profile of that one statement is then aggregated (``jiyi.profile_rules.aggregate``);
the fields it fills are the prediction. Figures: per-field precision and recall over
fields, and accuracy (the filled fields are exactly the expected ones), on a tuning half
and a held-out half split by a hash of the id (deterministic).

Language detection is measured apart: every three statements a user wrote in one
language (language requests left out) make one profile, whose ``language_preference``
must be that language (zh-CN for Chinese, en for English); ``zh-names`` does the same
with the Chinese statements that hold more Latin letters than Chinese characters.

    python bench/profiles.py
    python bench/profiles.py --show-errors --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import BENCH_DIR, git_commit, machine_info, now_iso, write_json
from jiyi.config import GateConfig
from jiyi.model import MemoryItem, Scope, Source
from jiyi.profile_rules import ProfileScope, aggregate
from jiyi.write.extract import Turn
from jiyi.write.extract_rules import RuleExtractor

DATA = BENCH_DIR / "data" / "profile_filing.jsonl"
NONE = "none"


@dataclass(frozen=True)
class Statement:
    id: str
    lang: str
    scope: ProfileScope
    field: str
    also: tuple[str, ...]
    text: str

    @property
    def expected(self) -> frozenset[str]:
        return frozenset(f for f in (self.field, *self.also) if f != NONE)

    @property
    def split(self) -> str:
        """``tune`` or ``heldout``: half the ids each, by a hash (no tuning can move it)."""
        return "tune" if hashlib.sha256(self.id.encode()).digest()[0] % 2 == 0 else "heldout"


def load(path: Path) -> list[Statement]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            out.append(
                Statement(r["id"], r["lang"], r["scope"], r["field"], tuple(r.get("also", ())), r["text"])
            )
    return out


_EXTRACTOR = RuleExtractor()
_MIN_CONFIDENCE = GateConfig().min_confidence
_T0 = datetime(2026, 11, 24, tzinfo=UTC)


def items_of(s: Statement, index: int = 0) -> list[MemoryItem]:
    """The memory items ``remember()`` would store for the statement (extraction + gate)."""
    owner = {"user_id": "u"} if s.scope == "user" else {"project_id": "p"}
    now = _T0 + timedelta(minutes=index)
    out = []
    for e in _EXTRACTOR.extract([Turn("user", s.text)]):
        if e.confidence < _MIN_CONFIDENCE:
            continue  # the gate rejects it
        out.append(
            MemoryItem.build(
                content=e.content,
                memory_type=e.memory_type,
                scope=Scope(s.scope),
                tenant_id="bench",
                **owner,
                confidence=e.confidence,
                importance=e.importance,
                structured=e.structured,
                metadata={"key": e.key} if e.key else {},
                source=Source.USER,
                created_at=now,
                updated_at=now,
            )
        )
    return out


def filed(s: Statement) -> frozenset[str]:
    found = aggregate(items_of(s), s.scope)
    return frozenset(name for name, agg in found.items() if agg.value not in ("", ()))


def scores(rows: Sequence[Statement], predicted: dict[str, frozenset[str]]) -> dict[str, Any]:
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    exact = 0
    for s in rows:
        got, want = predicted[s.id], s.expected
        exact += got == want
        for f in got & want:
            tp[f] += 1
        for f in got - want:
            fp[f] += 1
        for f in want - got:
            fn[f] += 1
    fields = sorted(set(tp) | set(fp) | set(fn))
    per = {
        f: {
            "precision": round(tp[f] / (tp[f] + fp[f]), 3) if tp[f] + fp[f] else None,
            "recall": round(tp[f] / (tp[f] + fn[f]), 3) if tp[f] + fn[f] else None,
            "tp": tp[f],
            "fp": fp[f],
            "fn": fn[f],
        }
        for f in fields
    }
    all_tp, all_fp, all_fn = sum(tp.values()), sum(fp.values()), sum(fn.values())
    return {
        "n": len(rows),
        "accuracy": round(exact / len(rows), 3) if rows else None,
        "micro_precision": round(all_tp / (all_tp + all_fp), 3) if all_tp + all_fp else None,
        "micro_recall": round(all_tp / (all_tp + all_fn), 3) if all_tp + all_fn else None,
        "none_correct": sum(1 for s in rows if not s.expected and not predicted[s.id]),
        "none_n": sum(1 for s in rows if not s.expected),
        "fields": per,
    }


_LANG_TAG = {"zh": "zh-CN", "en": "en"}


_HAN = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")


def _name_heavy(s: Statement) -> bool:
    """A Chinese sentence with more Latin letters (names of tools) than Chinese characters."""
    return len(_LATIN.findall(s.text)) > len(_HAN.findall(s.text))


def language_groups(rows: Sequence[Statement], size: int = 3) -> dict[str, Any]:
    """Profiles of ``size`` statements a user wrote in one language: is that the language found?

    ``zh-names`` is the hard case: the Chinese statements that name many tools.
    """
    out: dict[str, Any] = {}
    for lang in ("zh", "en", "zh-names"):
        mine = [
            s
            for s in rows
            if s.lang == lang.split("-")[0]
            and s.scope == "user"
            and s.field != "language_preference"
            and (lang != "zh-names" or _name_heavy(s))
        ]
        items = [i for n, s in enumerate(mine) for i in items_of(s, n)]
        groups = [items[k : k + size] for k in range(0, len(items) - size + 1, size)]
        right = 0
        for g in groups:
            found = aggregate(g, "user").get("language_preference")
            right += found is not None and found.value == _LANG_TAG[lang.split("-")[0]]
        out[lang] = {"groups": len(groups), "correct": right}
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def report(name: str, r: dict[str, Any]) -> None:
    print(
        f"\n{name}: n={r['n']}  accuracy {_pct(r['accuracy'])}  micro P {_pct(r['micro_precision'])}"
        f"  R {_pct(r['micro_recall'])}  none kept empty {r['none_correct']}/{r['none_n']}"
    )
    print(f"  {'field':24} {'P':>6} {'R':>6} {'tp':>4} {'fp':>4} {'fn':>4}")
    for f, v in r["fields"].items():
        print(
            f"  {f:24} {_pct(v['precision']):>6} {_pct(v['recall']):>6} {v['tp']:>4} {v['fp']:>4} {v['fn']:>4}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=DATA)
    ap.add_argument("--show-errors", action="store_true", help="print every statement filed wrongly")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)
    rows = load(args.data)
    predicted = {s.id: filed(s) for s in rows}
    print(f"profile filing: {len(rows)} statements ({Counter(s.lang for s in rows)}), commit {git_commit()}")
    out: dict[str, Any] = {"date": now_iso(), "commit": git_commit(), "machine": machine_info()}
    for split in ("tune", "heldout", "all"):
        part = [s for s in rows if split == "all" or s.split == split]
        out[split] = scores(part, predicted)
        report(split, out[split])
    for lang in ("zh", "en"):
        out[lang] = scores([s for s in rows if s.lang == lang], predicted)
        print(f"\n{lang}: accuracy {_pct(out[lang]['accuracy'])} (n={out[lang]['n']})")
    out["language"] = language_groups(rows)
    print("\nwritten language (3 statements per profile):", out["language"])
    if args.show_errors:
        print()
        for s in rows:
            if predicted[s.id] != s.expected:
                got = ", ".join(sorted(predicted[s.id])) or NONE
                want = ", ".join(sorted(s.expected)) or NONE
                print(f"  {s.id} [{s.split}] {s.scope}: want {want}; got {got}  | {s.text}")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
