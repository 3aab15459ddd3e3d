"""``jiyi sync``: merge edited memory.md / learnings.md files with the database."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from jiyi.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    clip,
    emit,
    files_arg,
    files_dir,
    json_arg,
    scope,
    scope_args,
    with_memory,
)
from jiyi.cli.progress import Progress
from jiyi.errors import InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.files.report import SyncReport
    from jiyi.memory import Memory


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "sync",
        help="merge edited memory.md / learnings.md files with the database (both ways)",
        description="Three-way merge of each scope's memory.md / learnings.md with the database: "
        "a person's edits go to the database, database changes go to the files. Memories changed "
        "differently on both sides are conflicts: reported, neither side overwritten, until the line "
        "is edited to match or --prefer picks a side. Exit code 1 while conflicts or errors remain.",
        epilog="Example: jiyi sync --files ~/memories --user alice --dry-run",
    )
    files_arg(p)
    scope_args(p)
    p.add_argument("--prefer", choices=["file", "db"], help="resolve conflicts with this side")
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    json_arg(p)
    p.set_defaults(handler=sync_command)


def sync_command(ns: argparse.Namespace) -> int:
    """``jiyi sync``: needs a files' directory before the Memory is opened."""
    if files_dir(ns) is None:
        raise InvalidInput("jiyi sync needs the files' directory: --files DIR (or set JIYI_FILES)")
    return with_memory(ns, cmd_sync)


_ARROWS = {"to_db": "file -> db", "to_file": "db -> file"}


def _print_file(report: SyncReport, name: str) -> None:
    """One file's changes, conflicts and errors."""
    print(f"{name}{'  (written)' if name in report.written else ''}")
    for c in (c for c in report.changes if c.file == name):
        where = f"line {c.line}" if c.line else ""
        detail = f"  ({clip(c.detail, 80)})" if c.detail else ""
        print(
            f"  {c.action:<10} {_ARROWS[c.direction]}  {where:<9} {c.item_id or '':<32}  {clip(c.text)}{detail}"
        )
    for k in (k for k in report.conflicts if k.file == name):
        print(f"  CONFLICT   line {k.line or '-':<4} memory {k.item_id}: {clip(k.message, 120)}")
    for e in (e for e in report.errors if e.file == name):
        shown = f"  [{clip(e.text, 40)}]" if e.text else ""
        print(f"  ERROR      line {e.line or '-':<4} {e.message}{shown}")


def _print_report(report: SyncReport, dry_run: bool) -> None:
    for name in report.files():
        _print_file(report, name)
    verb = "would make" if dry_run else "made"
    print(
        f"{verb} {report.count('to_db')} change(s) to the database and {report.count('to_file')} to the "
        f"files; {len(report.conflicts)} conflict(s), {len(report.errors)} error(s)"
        + (" (dry run: nothing written)" if dry_run else "")
    )
    if report.conflicts:
        print("resolve a conflict by editing the line to match, or run again with --prefer file|db")


def cmd_sync(ns: argparse.Namespace, mem: Memory) -> int:
    with Progress(ns) as show:
        report = mem.sync_files(
            prefer=ns.prefer,
            dry_run=ns.dry_run,
            progress=lambda done, total: show("sync (scopes)", done, total),
            **scope(ns),
        )
    if ns.json:
        emit(report.to_json_dict())
    else:
        _print_report(report, ns.dry_run)
    if not report.ok:
        print(
            f"jiyi: {len(report.conflicts)} conflict(s) and {len(report.errors)} error(s) remain",
            file=sys.stderr,
        )
        return EXIT_FAIL
    return EXIT_OK
