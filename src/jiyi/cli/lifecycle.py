"""Keeping memory small and current: ``jiyi maintain`` (decay, expiry, retention), ``jiyi
compress`` and ``jiyi reembed`` (vectors of the embedder in use)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from jiyi.cli.common import EXIT_OK, emit, integer, json_arg, memory_command, scope, scope_args
from jiyi.cli.progress import Progress

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.lifecycle.compress import CompressionReport
    from jiyi.memory import Memory


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "maintain",
        help="decay, expiry and retention: archive what has faded (every change audited)",
        description="Episode importance halves every 90 days; rarely used items decay by access; "
        "expired items and old session messages are removed. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would change; write nothing")
    p.add_argument(
        "--archive-idle",
        action="store_true",
        help="also archive long-term memories unused long enough to fall under the decay floor "
        "(off by default: nothing is dropped for being unused)",
    )
    p.add_argument(
        "--delete", action="store_true", help="with --archive-idle: delete instead of archive below the floor"
    )
    p.add_argument(
        "--compress",
        action="store_true",
        help="first compress old, rarely used memories (see 'jiyi compress')",
    )
    p.add_argument(
        "--keep-retrievals",
        type=integer,
        default=90,
        metavar="DAYS",
        help="delete retrieval log entries older than this many days (default 90; -1 keeps them all)",
    )
    p.add_argument("--tenant", metavar="ID", help="only this tenant (default: every tenant)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_maintain))
    _register_compress(sub)
    _register_reembed(sub)


def _register_compress(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compress",
        help="merge old, rarely used memories into a few core memories (reversible)",
        description="Near-duplicates become one memory; clusters of 3+ related memories of one scope "
        "and type become 1-3 core memories (by the --llm model, else a deterministic offline merge). "
        "Originals are archived and linked. Use --dry-run first; --undo CORE_ID reverses one.",
    )
    scope_args(p)
    p.add_argument(
        "--older-than", type=float, default=30.0, metavar="DAYS", help="idle for this many days (default 30)"
    )
    p.add_argument(
        "--max-access", type=integer, default=4, metavar="N", help="retrieved at most N times (default 4)"
    )
    p.add_argument(
        "--type", "--memory-type", action="append", metavar="TYPE", help="only these types (repeatable)"
    )
    p.add_argument("--dry-run", action="store_true", help="list the groups and proposed texts; write nothing")
    p.add_argument("--undo", metavar="CORE_ID", help="undo the compression that made this core memory")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_compress))


def _register_reembed(sub: Subparsers) -> None:
    p = sub.add_parser(
        "reembed",
        help="give every memory a vector of the embedder in use (after switching --embedder)",
        description="A search compares the query with vectors of its own embedder, so memories "
        "embedded by another one are found by their words only. This embeds every memory that "
        "lacks a vector of the --embedder given (the default: USE-m3), and caches the sentence "
        "vectors the search reads for long memories. Memories and their history stay as they "
        "are. A page at a time, each in one transaction: stopped halfway, run it again to finish. "
        "Use --dry-run to count first; --force embeds everything again (a model that changed "
        "under the same name).",
    )
    scope_args(p)
    p.add_argument("--dry-run", action="store_true", help="count what would be embedded; write nothing")
    p.add_argument(
        "--force",
        action="store_true",
        help="embed every memory and sentence again and replace their vectors and cached ones "
        "(the model changed but kept its name, e.g. after upgrading the package or the server's model)",
    )
    p.add_argument(
        "--page-size", type=integer, default=256, metavar="N", help="memories per transaction (default 256)"
    )
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_reembed))


def cmd_reembed(ns: argparse.Namespace, mem: Memory) -> int:
    with Progress(ns) as show:
        report = mem.reembed(
            **scope(ns),
            dry_run=ns.dry_run,
            force=ns.force,
            page_size=ns.page_size,
            progress=lambda r: show("reembed", r.memories, None),
        )
    if ns.json:
        emit(report.to_json_dict())
        return EXIT_OK
    verb = "would embed" if ns.dry_run else "embedded"
    print(
        f"{report.memories} memories looked at; {verb} {report.embedded} memories and "
        f"{report.statements} sentence vectors with {report.model_id}"
        + (" (already up to date)" if report.up_to_date else "")
    )
    return EXIT_OK


def cmd_maintain(ns: argparse.Namespace, mem: Memory) -> int:
    from jiyi.lifecycle import LifecyclePolicy

    keep = LifecyclePolicy().retention_days
    policy = LifecyclePolicy(
        action_below_floor="delete" if ns.delete else "archive",
        archive_idle=ns.archive_idle,
        retention_days={**keep, "retrievals": None if ns.keep_retrievals < 0 else ns.keep_retrievals},
    )
    # Compression first: it keeps what decay would otherwise archive, as core memories.
    compressed = mem.compress(dry_run=ns.dry_run, tenant_id=ns.tenant) if ns.compress else None
    with Progress(ns) as show:
        report = mem.maintain(
            policy=policy,
            dry_run=ns.dry_run,
            tenant_id=ns.tenant,
            progress=lambda done, total: show("maintain", done, total),
        )
    data = report.to_json_dict()
    if ns.json:
        emit(data if compressed is None else {**data, "compression": compressed.to_json_dict()})
        return EXIT_OK
    if compressed is not None:
        _print_compression(compressed)
    verb = "would change" if ns.dry_run else "changed"
    print(f"scanned {data['scanned']} memories; {verb}: {data['counts'] or 'nothing'}")
    for change in data["changes"]:
        print(f"  {change['action']:<8} {change['id']}  {change['reason']}")
    print(f"session messages past retention: {data['messages_removed']}")
    if data["retrievals_before"]:
        done = "would be removed" if ns.dry_run else "removed"
        before = data["retrievals_before"][:10]
        print(f"retrieval log entries older than {ns.keep_retrievals} days (before {before}) {done}")
    return EXIT_OK


def _print_compression(report: CompressionReport) -> None:
    verb = "would compress" if report.dry_run else "compressed"
    print(
        f"scanned {report.scanned} memories, {report.candidates} old and rarely used; {verb} "
        f"{report.compressed} into {report.created} core memories "
        f"({report.tokens_before} -> {report.tokens_after} tokens)"
    )
    for group in report.groups:
        print(f"  {group.kind:<10} {group.memory_type.value:<10} {group.scope_key}  ({group.method})")
        for core in group.cores:
            print(f"    {core.item_id or '(new)'}  {core.content}")
            print(f"      from {', '.join(core.source_ids)}")


def _uncompress(ns: argparse.Namespace, mem: Memory, tenant_id: str | None) -> int:
    result = mem.uncompress(ns.undo, tenant_id=tenant_id)
    if ns.json:
        emit(result.to_json_dict())
        return EXIT_OK
    print(f"restored {len(result.restored)} memories; archived {len(result.archived)} core memories")
    for item_id, why in result.skipped.items():
        print(f"  skipped {item_id}: {why}")
    return EXIT_OK


def cmd_compress(ns: argparse.Namespace, mem: Memory) -> int:
    where = scope(ns)
    if ns.undo:
        return _uncompress(ns, mem, where.get("tenant_id"))
    report = mem.compress(
        **where,
        memory_types=ns.type,
        older_than_days=ns.older_than,
        max_access=ns.max_access,
        dry_run=ns.dry_run,
    )
    emit(report.to_json_dict()) if ns.json else _print_compression(report)
    return EXIT_OK
