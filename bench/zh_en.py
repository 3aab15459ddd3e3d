"""jiyi and its parts on the project's Chinese/English set (``tests/data/zh_en_retrieval.json``).

The store is built as ``tests/test_retrieval_zh_en.py`` builds it (every user's memories
through ``import_items``, a fixed clock at the set's ``now``); each positive query is one
``Memory.search`` (limit 10), and the same store is ranked by jiyi's parts alone
(``bench/parts.py``: cosine, BM25, RRF). Recall@5/@10 per kind, per cross-lingual
direction, and on the two halves by persona (lin and emma for tuning, chen and sofia held
out, as the relevance fit in ``jiyi.read.rank`` was made).

    python bench/zh_en.py                       # default data path
    python bench/zh_en.py tests/data/zh_en_retrieval.json --json out.json
    python bench/zh_en.py --embedder pair       # another embedder spec (default: jiyi's)
    python bench/zh_en.py bench/data/multilingual_retrieval.json [--one-scope]   # four other languages
    python bench/zh_en.py --mode pipeline       # the memories said to remember() instead of imported
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from common import REPO_ROOT, git_commit, machine_info, now_iso, write_json
from jiyi.memory import Memory
from parts import PARTS, SetClock, part_rankings, record_sources

DEFAULT_DATA = REPO_ROOT / "tests" / "data" / "zh_en_retrieval.json"
LIMIT = 10
SYSTEMS = ("jiyi", *PARTS)
TUNING_USERS = ("lin", "emma")


@contextmanager
def filled_store(data: dict[str, Any], path: Path, embedder: str | None = None) -> Iterator[Memory]:
    """A store at ``path`` holding the set's memories (``import_items`` per user), its clock
    fixed at the set's ``now``."""
    now = set_clock(data)
    with Memory.open(path, clock=lambda: now, embedder=embedder) as mem:
        for user in data["users"]:
            mem.import_items(
                [
                    {k: v for k, v in m.items() if k not in ("lang", "persona")}
                    for m in data["memories"]
                    if m["user_id"] == user
                ]
            )
        yield mem


def set_clock(data: dict[str, Any]) -> datetime:
    """The set's fixed 'now' (its stores' clock)."""
    return datetime.fromisoformat(data["now"].replace("Z", "+00:00"))


def rankings(
    data: dict[str, Any], path: Path, embedder: str | None = None
) -> list[tuple[dict[str, Any], dict[str, list[str]]]]:
    """Each positive query with its ranked memory ids by system."""
    now = set_clock(data)
    out = []
    with filled_store(data, path, embedder) as mem:
        for q in data["queries"]:
            if not q["gold"]:
                continue
            hits = mem.search(q["query"], user_id=q["user_id"], limit=LIMIT, touch=False)
            ranked = {"jiyi": [h.item.id for h in hits]}
            ranked.update(part_rankings(mem, q["query"], q["user_id"], now, LIMIT))
            out.append((q, ranked))
    return out


def sessions(data: dict[str, Any], user: str) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """The user's memories as conversations: one session per day a memory is dated, in date
    order, after one session of the undated ones (said a day before the first dated one;
    at the set's ``now`` when none is dated). In one scope (:func:`one_scope`) each persona
    keeps its own sessions: one person's unrelated statements are not one conversation."""
    mine = [m for m in data["memories"] if m["user_id"] == user]
    dated = sorted((m for m in mine if m.get("occurred_at")), key=lambda m: m["occurred_at"])
    first = _when(dated[0]) - timedelta(days=1) if dated else set_clock(data)
    grouped: dict[tuple[datetime, str], list[dict[str, Any]]] = {}
    for m in mine:
        at = _when(m) if m.get("occurred_at") else first
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        grouped.setdefault((day, m.get("persona", user)), []).append(m)
    out = []
    for said in grouped.values():
        said.sort(key=lambda m: m.get("occurred_at") or "")
        out.append((_when(said[0]) if said[0].get("occurred_at") else first, said))
    return sorted(out, key=lambda s: s[0])


def _when(memory: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(memory["occurred_at"].replace("Z", "+00:00"))


def told(data: dict[str, Any], mem: Memory, clock: SetClock) -> dict[str, dict[str, None]]:
    """Each user's memories said to ``mem.remember`` as that user's messages (:func:`sessions`,
    each ended, the clock at its date, the jobs run just after). Returns, per stored item,
    the set's memory ids it came from (its turn; an episode's, the turns it quotes; a
    replacement also stands for what it replaced)."""
    sources: dict[str, dict[str, None]] = {}
    for user in data["users"]:
        for n, (at, said) in enumerate(sessions(data, user)):
            contents = [m["content"] for m in said]
            messages = [
                {"role": "user", "content": c, "created_at": at + timedelta(seconds=i)}
                for i, c in enumerate(contents)
            ]
            clock.at = at + timedelta(seconds=len(messages))
            sid = f"set:{user}:{n}"
            mem.remember(messages, session_id=sid, user_id=user)
            mem.end_session(sid, user_id=user)
            while reports := mem.process_jobs(worker="zh_en", limit=100):
                for report in reports:
                    if report.status != "done":
                        raise SystemExit(f"a {report.kind} job failed: {report.error}")
                    for o in report.outcomes:
                        record_sources(o, [m["id"] for m in said], contents, sources)
    return sources


def pipeline_rankings(
    data: dict[str, Any], path: Path, embedder: str | None = None
) -> list[tuple[dict[str, Any], dict[str, list[str]]]]:
    """As :func:`rankings`, the memories told through the pipeline (:func:`told`) instead
    of imported: each ranking lists the set's memory ids its items came from, in order."""
    now = set_clock(data)
    out = []
    clock = SetClock(now)
    with Memory.open(path, clock=clock, embedder=embedder, background=False) as mem:
        sources = told(data, mem, clock)
        clock.at = now

        def ids(items: Sequence[str]) -> list[str]:
            return list(dict.fromkeys(m for i in items for m in sources.get(i, {})))

        for q in data["queries"]:
            if not q["gold"]:
                continue
            hits = mem.search(q["query"], user_id=q["user_id"], limit=LIMIT, touch=False)
            ranked = {"jiyi": ids([h.item.id for h in hits])}
            parts = part_rankings(mem, q["query"], q["user_id"], now, LIMIT)
            ranked.update({name: ids(found) for name, found in parts.items()})
            out.append((q, ranked))
    return out


def one_scope(data: dict[str, Any], user: str = "everyone") -> dict[str, Any]:
    """The set with every memory and query moved to one user (``--one-scope``)."""
    return {
        **data,
        "users": {user: "every persona of the set"},
        "memories": [{**m, "user_id": user, "persona": m["user_id"]} for m in data["memories"]],
        "queries": [{**q, "user_id": user} for q in data["queries"]],
    }


def recall(q: dict[str, Any], ids: Sequence[str], k: int) -> float:
    return len(set(ids[:k]) & set(q["gold"])) / len(q["gold"])


def groups(rows: list[tuple[dict[str, Any], dict[str, list[str]]]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"overall": rows}
    for kind in sorted({q["kind"] for q, _ in rows}):
        out[kind] = [r for r in rows if r[0]["kind"] == kind]
    xl = out.get("cross_lingual", [])
    out["xl zh→en"] = [r for r in xl if r[0]["lang"] == "zh"]
    out["xl en→zh"] = [r for r in xl if r[0]["lang"] == "en"]
    out["half tuning"] = [r for r in rows if r[0]["user_id"] in TUNING_USERS]
    out["half held-out"] = [r for r in rows if r[0]["user_id"] not in TUNING_USERS]
    out["xl held-out"] = [r for r in out["half held-out"] if r[0]["kind"] == "cross_lingual"]
    return out


def table(rows: list[tuple[dict[str, Any], dict[str, list[str]]]]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, selected in groups(rows).items():
        out[name] = {
            system: {
                "n": len(selected),
                "recall@1": round(statistics.fmean(recall(q, r[system], 1) for q, r in selected), 4),
                "recall@5": round(statistics.fmean(recall(q, r[system], 5) for q, r in selected), 4),
                "recall@10": round(statistics.fmean(recall(q, r[system], 10) for q, r in selected), 4),
            }
            for system in SYSTEMS
            if selected
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="jiyi vs its parts on the Chinese/English retrieval set")
    p.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA)
    p.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    p.add_argument("--embedder", default=None, help="embedder spec (default: jiyi's default)")
    p.add_argument(
        "--one-scope",
        action="store_true",
        help="every persona's memories in one user's scope: a larger haystack, several languages",
    )
    p.add_argument(
        "--mode",
        choices=("raw", "pipeline"),
        default="raw",
        help="raw: the memories imported as they are; pipeline: said to remember() as each "
        "user's messages (extraction, gate, reconciliation, the session's episode)",
    )
    args = p.parse_args(argv)
    if not args.data.exists():
        p.error(f"no data file at {args.data}")
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.one_scope:
        data = one_scope(data)
    with tempfile.TemporaryDirectory(prefix="jiyi-zhen-") as tmp:
        rank = pipeline_rankings if args.mode == "pipeline" else rankings
        rows = rank(data, Path(tmp) / "memory.db", args.embedder)
    result = table(rows)
    head = f"{'':18}{'n':>4}" + "".join(f"{s + ' R@1':>12}{'R@5':>7}{'R@10':>7}" for s in SYSTEMS)
    print(head)
    for name, cells in result.items():
        if not cells:
            continue
        n = int(next(iter(cells.values()))["n"])
        line = f"{name:18}{n:>4}"
        line += "".join(
            f"{c['recall@1']:>12.3f}{c['recall@5']:>7.3f}{c['recall@10']:>7.3f}" for c in cells.values()
        )
        print(line)
    if args.json:
        write_json(
            args.json,
            {
                "table": result,
                "embedder": args.embedder,
                "mode": args.mode,
                "machine": machine_info(),
                "date": now_iso(),
                "commit": git_commit(),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
