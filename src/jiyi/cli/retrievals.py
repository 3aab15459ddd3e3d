"""The retrieval log: ``jiyi retrievals`` (which memories served which query, and why a
memory was retrieved)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from jiyi.cli.common import (
    EXIT_OK,
    clip,
    emit,
    integer,
    iso_datetime,
    json_arg,
    memory_command,
    scope,
    scope_args,
)

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory
    from jiyi.store.base import MemoryAccess


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "retrievals",
        help="the retrieval log: which memories served which query, for whom, when, with what scores",
        description="Every search, context assembly and agent tool call is logged with its query "
        "(redacted), whose memory was searched, who asked, and each memory it served with rank, "
        "score, similarity and relevance. Newest first. With --item: why that memory was "
        "retrieved (the queries that served it). Entries older than the retention "
        "(LifecyclePolicy.retention_days['retrievals'], 90 days) are removed by 'jiyi maintain'.",
    )
    p.add_argument(
        "--item", metavar="ID", help="only the queries that served this memory (why it was retrieved)"
    )
    scope_args(p)
    p.add_argument("--since", type=iso_datetime, metavar="ISO-DATE", help="from this time on (inclusive)")
    p.add_argument("--until", type=iso_datetime, metavar="ISO-DATE", help="before this time (exclusive)")
    p.add_argument("--limit", type=integer, default=20, help="accesses per page (default 20)")
    p.add_argument("--cursor", help="continue after this cursor (printed at the end of a page)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_retrievals))


def cmd_retrievals(ns: argparse.Namespace, mem: Memory) -> int:
    if ns.item:
        owner = scope(ns)
        why = mem.why_retrieved(
            ns.item,
            since=ns.since,
            until=ns.until,
            limit=ns.limit,
            cursor=ns.cursor,
            tenant_id=owner.get("tenant_id"),
        )
        if ns.json:
            emit(
                {
                    "item_id": why.item_id,
                    "access_count": why.access_count,
                    "last_used_at": why.last_used_at,
                    "served": [asdict(s) for s in why.served],
                    "next_cursor": why.next_cursor,
                }
            )
            return EXIT_OK
        last = why.last_used_at.isoformat() if why.last_used_at else "never"
        print(f"{why.item_id}: served {why.access_count} time(s), last {last}")
        for s in why.served:
            print(
                f"  {s.at.isoformat()}  {s.kind:<7} #{s.rank} score {s.score:.3f}"
                f"{_opt(' sim', s.similarity)}{_opt(' rel', s.relevance)}  {_whom(s.user_id, s.project_id, s.actor)}"
                f"  {clip(s.query)!r}"
            )
        _more(why.next_cursor)
        return EXIT_OK
    page = mem.retrievals(since=ns.since, until=ns.until, limit=ns.limit, cursor=ns.cursor, **scope(ns))
    if ns.json:
        emit({"accesses": [a.to_json_dict() for a in page.accesses], "next_cursor": page.next_cursor})
        return EXIT_OK
    for access in page.accesses:
        _print_access(access)
    _more(page.next_cursor)
    return EXIT_OK


def _print_access(a: MemoryAccess) -> None:
    print(f"{a.at.isoformat()}  {a.kind:<7} {_whom(a.user_id, a.project_id, a.actor)}  {clip(a.query)!r}")
    if not a.retrieved:
        print("    (nothing served)")
    for r in a.retrieved:
        print(
            f"    #{r.rank} {r.item_id}  score {r.score:.3f}{_opt(' sim', r.similarity)}{_opt(' rel', r.relevance)}"
        )


def _whom(user_id: str | None, project_id: str | None, actor: str | None) -> str:
    parts = [f"user={user_id}" if user_id else "", f"project={project_id}" if project_id else ""]
    parts.append(f"by={actor}" if actor else "")
    return " ".join(p for p in parts if p) or "-"


def _opt(label: str, value: float | None) -> str:
    return "" if value is None else f"{label} {value:.3f}"


def _more(cursor: str | None) -> None:
    if cursor:
        print(f"-- more: --cursor {cursor}")
