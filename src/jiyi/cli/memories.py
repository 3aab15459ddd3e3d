"""One memory at a time: add, search, list, show, update, delete, history, stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from jiyi.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    emit,
    integer,
    iso_datetime,
    json_arg,
    json_object,
    memory_command,
    scope,
    scope_args,
    short,
)
from jiyi.errors import NotFound
from jiyi.model import MemoryItem, MemoryType, RelationType, Status

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory


def register(sub: Subparsers) -> None:
    _register_add(sub)
    _register_search(sub)
    _register_list(sub)
    _register_one(sub)
    _register_update(sub)
    _register_delete(sub)
    _register_history(sub)
    _register_stats(sub)


# ------------------------------------------------------------------ add


def _register_add(sub: Subparsers) -> None:
    types = ", ".join(t.value for t in MemoryType)
    p = sub.add_parser(
        "add",
        help="store a memory through the write gate",
        description="Store a memory. The gate may redact, reinforce a duplicate, or refuse (exit 1, with the reason).",
    )
    p.add_argument("text", help="what to remember")
    scope_args(p)
    p.add_argument(
        "--type",
        "--memory-type",
        default="fact",
        metavar="TYPE",
        help=f"memory type: {types} (default: fact)",
    )
    p.add_argument(
        "--scope",
        choices=["user", "project", "session", "agent"],
        help="scope (default: inferred from the ids given)",
    )
    p.add_argument("--occurred", type=iso_datetime, metavar="ISO-DATE", help="when it happened")
    p.add_argument("--expires", type=iso_datetime, metavar="ISO-DATE", help="forget after this time")
    p.add_argument("--confidence", type=float, default=0.9, help="0..1 (default 0.9)")
    p.add_argument("--importance", type=float, default=0.5, help="0..1 (default 0.5)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag (repeatable)")
    p.add_argument("--metadata", type=json_object, metavar="JSON", help="JSON object of extra fields")
    p.add_argument("--source-id", metavar="ID", help="id of what this came from (message, document)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_add))


def cmd_add(ns: argparse.Namespace, mem: Memory) -> int:
    from jiyi.write.gate import DONE

    result = mem.add(
        ns.text,
        memory_type=ns.type,
        scope=ns.scope,
        occurred_at=ns.occurred,
        expires_at=ns.expires,
        confidence=ns.confidence,
        importance=ns.importance,
        tags=ns.tag,
        metadata=ns.metadata,
        source_id=ns.source_id,
        **scope(ns),
    )
    if ns.json:
        emit(result.to_json_dict())
    elif result.item is not None:
        label = DONE[result.decision.action]
        if result.decision.action == "supersede":
            # The new memory is stored; the one it replaces is what is kept as superseded.
            old = [r.target_id for r in result.item.relations if r.type == RelationType.SUPERSEDES]
            label = f"stored (supersedes {', '.join(old)})" if old else "stored"
        print(f"{label}: {short(result.item)}")
        for reason in result.decision.reasons:
            print(f"  - {reason}")
    if result.item is None:
        print(f"jiyi: refused: {'; '.join(result.decision.reasons)}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


# ------------------------------------------------------------------ search, list


def _register_search(sub: Subparsers) -> None:
    p = sub.add_parser("search", help="find memories by meaning and by words")
    p.add_argument("query", help="what to look for, in words (any language)")
    scope_args(p)
    p.add_argument("--limit", "-k", type=integer, default=10, help="how many results (default 10)")
    p.add_argument(
        "--type", "--memory-type", action="append", metavar="TYPE", help="only these types (repeatable)"
    )
    p.add_argument(
        "--tag", action="append", default=[], metavar="TAG", help="only items with this tag (repeatable)"
    )
    p.add_argument("--threshold", type=float, help="similarity floor 0..1")
    p.add_argument(
        "--min-relevance",
        type=float,
        metavar="X",
        help="drop hits less relevant than X (0..1; 0.5 is the calibrated cut): no hits = nothing relevant",
    )
    p.add_argument("--explain", action="store_true", help="show every signal's contribution to the score")
    p.add_argument(
        "--as-of",
        type=iso_datetime,
        metavar="WHEN",
        help="answer for a past moment (ISO date or date-time): what was true and known then",
    )
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_search))


def cmd_search(ns: argparse.Namespace, mem: Memory) -> int:
    hits = mem.search(
        ns.query,
        limit=ns.limit,
        memory_types=ns.type,
        tags=ns.tag,
        threshold=ns.threshold,
        min_relevance=ns.min_relevance,
        explain=ns.explain,
        as_of=ns.as_of,
        **scope(ns),
    )
    if ns.json:
        emit([h.to_json_dict() for h in hits])
        return EXIT_OK
    if not hits:
        cut = ns.min_relevance is not None or ns.threshold is not None
        print("nothing relevant found" if cut else "no memory found in this scope")
    for rank, hit in enumerate(hits, start=1):
        print(f"{rank:>2}. {hit.score:.3f}  {short(hit.item)}")
        if ns.explain:
            for line in explain_lines(hit.breakdown):
                print("     " + line)
    return EXIT_OK


_EVIDENCE = (
    ("cosine", "meaning"),
    ("keyword_bm25", "words"),
    # the hit holds the kind of answer the query asks for (a time, a number, a place)
    ("similarity.answer", "answer"),
    # the hit answers a question the turn before it asked, which matches the query
    ("similarity.reply", "reply"),
    # the hit goes on with what its speaker said two turns before, which matches the query
    ("similarity.continues", "continues"),
    # the hit was said by the person the query names
    ("similarity.speaker", "speaker"),
    # one of the hit's sentences matches the query better than the whole text
    ("similarity.sentence", "best sentence"),
    # the hit only asks a question, so its evidence counts less (negative)
    ("similarity.only_asks", "only asks"),
    ("relevance", "relevance"),
)


def explain_lines(breakdown: dict[str, float]) -> list[str]:
    """A hit's breakdown for a person: how the score adds up, then the evidence that
    was found (``--json`` keeps every raw signal)."""
    parts = [
        f"{key.split('.', 1)[1]} {value:.3f}"
        for key, value in breakdown.items()
        if key.startswith("contribution.")
    ]
    lines = ["score = " + " + ".join(parts)] if parts else []
    evidence = [f"{label} {breakdown[key]:.3f}" for key, label in _EVIDENCE if breakdown.get(key)]
    if evidence:
        lines.append("evidence: " + ", ".join(evidence))
    return lines


def _register_list(sub: Subparsers) -> None:
    p = sub.add_parser("list", help="list memories, a page at a time")
    scope_args(p)
    p.add_argument(
        "--type", "--memory-type", action="append", metavar="TYPE", help="only these types (repeatable)"
    )
    p.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="only these statuses: active, archived, superseded",
    )
    p.add_argument("--limit", type=integer, default=50, help="page size (default 50)")
    p.add_argument("--cursor", help="continue after this cursor (printed at the end of a page)")
    p.add_argument("--turns", action="store_true", help="include the raw conversation turns remember() keeps")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_list))


def cmd_list(ns: argparse.Namespace, mem: Memory) -> int:
    page = mem.list(
        memory_types=ns.type,
        statuses=ns.status,
        limit=ns.limit,
        cursor=ns.cursor,
        include_turns=ns.turns,
        **scope(ns),
    )
    if ns.json:
        emit({"items": [i.to_json_dict() for i in page.items], "next_cursor": page.next_cursor})
        return EXIT_OK
    for item in page.items:
        print(f"{short(item)}  ({item.status.value})")
    if page.next_cursor:
        print(f"-- more: --cursor {page.next_cursor}")
    return EXIT_OK


# ------------------------------------------------------------------ one memory by id


def _register_one(sub: Subparsers) -> None:
    p = sub.add_parser("show", help="show one memory")
    p.add_argument("id", help="the memory's id")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_show))


def _print_item(item: MemoryItem) -> None:
    data = item.to_json_dict()
    width = max(len(k) for k in data)
    for key, value in data.items():
        if value in (None, [], {}, ""):
            continue
        print(
            f"{key.ljust(width)}  {json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value}"
        )


def cmd_show(ns: argparse.Namespace, mem: Memory) -> int:
    item = mem.get(ns.id, tenant_id=ns.tenant)
    emit(item.to_json_dict()) if ns.json else _print_item(item)
    return EXIT_OK


def _register_update(sub: Subparsers) -> None:
    p = sub.add_parser("update", help="change a memory (new version, history kept)")
    p.add_argument("id", help="the memory's id")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    p.add_argument("--text", help="new content")
    p.add_argument("--type", "--memory-type", metavar="TYPE", help="new memory type")
    p.add_argument("--status", choices=[s.value for s in Status], help="new status")
    p.add_argument("--confidence", type=float, help="new confidence, 0..1")
    p.add_argument("--importance", type=float, help="new importance, 0..1")
    p.add_argument("--tag", action="append", metavar="TAG", help="replace tags (repeatable)")
    p.add_argument("--expires", type=iso_datetime, metavar="ISO-DATE", help="forget after this time")
    p.add_argument("--reason", default="", help="why (kept in the history)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_update))


_UPDATABLE = (
    ("text", "content"),
    ("type", "memory_type"),
    ("status", "status"),
    ("confidence", "confidence"),
    ("importance", "importance"),
    ("expires", "expires_at"),
)
"""(option, field) pairs ``update`` passes on when given."""


def cmd_update(ns: argparse.Namespace, mem: Memory) -> int:
    changes: dict[str, Any] = {}
    for attr, field in _UPDATABLE:
        value = getattr(ns, attr)
        if value is not None:
            changes[field] = value
    if ns.tag is not None:
        changes["tags"] = tuple(ns.tag)
    item = mem.update(ns.id, tenant_id=ns.tenant, reason=ns.reason, **changes)
    emit(item.to_json_dict()) if ns.json else print(f"updated to version {item.version}: {short(item)}")
    return EXIT_OK


def _register_delete(sub: Subparsers) -> None:
    p = sub.add_parser("delete", help="archive a memory (or purge it with --hard)")
    p.add_argument("id", help="the memory's id")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    p.add_argument("--hard", action="store_true", help="purge for good (history is kept)")
    p.add_argument(
        "--with-sources",
        action="store_true",
        help="also the conversation turn it was taken from and the session summaries quoting it, "
        "so its words answer no search again",
    )
    p.add_argument("--reason", default="", help="why (kept in the history)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_delete))


def cmd_delete(ns: argparse.Namespace, mem: Memory) -> int:
    holders = mem.holders(ns.id, tenant_id=ns.tenant)
    item = mem.delete(
        ns.id, hard=ns.hard, reason=ns.reason, with_sources=ns.with_sources, tenant_id=ns.tenant
    )
    done = "purged" if ns.hard else "archived"
    if ns.json:
        emit(
            {
                "id": item.id,
                "purged": ns.hard,
                "status": done if ns.hard else item.status.value,
                "sources": [h.id for h in holders] if ns.with_sources else [],
                "still_held_by": [] if ns.with_sources else [h.id for h in holders],
            }
        )
        return EXIT_OK
    print(f"{done}: {short(item)}")
    for h in holders:
        if not ns.with_sources:
            print(f"  still holds its words: {short(h)}")
            continue
        try:
            kept: MemoryItem | None = mem.get(h.id, tenant_id=ns.tenant)
        except NotFound:
            kept = None
        if kept is not None and kept.content != h.content:  # a summary that said more keeps the rest
            print(f"  its lines left out of: {short(kept)}")
        else:
            print(f"  {done}: {short(h)}")
    if holders and not ns.with_sources:
        print("  (add --with-sources to delete those too)")
    return EXIT_OK


def _register_history(sub: Subparsers) -> None:
    p = sub.add_parser("history", help="every change of a memory")
    p.add_argument("id", help="the memory's id")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_history))


def cmd_history(ns: argparse.Namespace, mem: Memory) -> int:
    events = mem.history(ns.id, tenant_id=ns.tenant)
    if ns.json:
        emit([e.model_dump(mode="json") for e in events])
        return EXIT_OK
    for e in events:
        content = (e.after or e.before or {}).get("content", "")
        print(f"{e.at.isoformat()}  v{e.version}  {e.action.value:<9}  {e.reason}")
        print(f"    {content}")
    return EXIT_OK


# ------------------------------------------------------------------ stats


def _register_stats(sub: Subparsers) -> None:
    p = sub.add_parser("stats", help="counts by type, scope and status")
    scope_args(p)
    p.add_argument("--turns", action="store_true", help="include the raw conversation turns remember() keeps")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_stats))


def cmd_stats(ns: argparse.Namespace, mem: Memory) -> int:
    s = mem.stats(include_turns=ns.turns, **scope(ns))
    data = {
        "total": s.total,
        "by_type": s.by_type,
        "by_scope": s.by_scope,
        "by_status": s.by_status,
        # Averages in three decimals: 0.9, not 0.8999999999999995.
        "avg_confidence": None if s.avg_confidence is None else round(s.avg_confidence, 3),
        "avg_importance": None if s.avg_importance is None else round(s.avg_importance, 3),
    }
    if ns.json:
        emit(data)
    else:
        for key, value in data.items():
            # counts as "fact 2, preference 1", not a Python dict
            shown = ", ".join(f"{k} {n}" for k, n in value.items()) if isinstance(value, dict) else value
            print(f"{key:<15} {'—' if shown in ('', None) else shown}")
    return EXIT_OK
