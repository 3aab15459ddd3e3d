"""Whole scopes at once: export (JSON lines out), import (JSON lines in), reset."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jiyi.cli.common import EXIT_OK, emit, json_arg, memory_command, scope, scope_args
from jiyi.cli.progress import Progress
from jiyi.errors import InvalidInput
from jiyi.jsonl import decode_jsonl

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory


def register(sub: Subparsers) -> None:
    p = sub.add_parser("export", help="write memories as JSON lines")
    scope_args(p)
    p.add_argument("--output", "-o", metavar="FILE", help="file to write (default: stdout)")
    p.add_argument(
        "--retrievals",
        action="store_true",
        help='also write the retrieval log, one {"retrieval": ...} line per access, after the '
        "memories ('jiyi import' puts them back)",
    )
    p.set_defaults(handler=memory_command(cmd_export))

    p = sub.add_parser(
        "import", help="load memories from JSON lines, a mem0 export or a Letta agent file (all or nothing)"
    )
    p.add_argument("file", help="the file, or - for stdin")
    p.add_argument(
        "--from",
        dest="source",
        choices=("jiyi", "mem0", "letta"),
        default="jiyi",
        help="what the file is: jiyi's JSON lines (default), a mem0 export (JSON: get_all's "
        "results or a list of memories) or a Letta Agent File (.af: its memory blocks)",
    )
    p.add_argument(
        "--user",
        metavar="ID",
        help="with --from mem0|letta: the user who owns memories that name no owner (mem0) "
        "or the human block (letta)",
    )
    p.add_argument("--tenant", metavar="ID", help="tenant to import into (default: $JIYI_TENANT or default)")
    p.add_argument(
        "--trusted",
        action="store_true",
        help="a restore of jiyi's own export: keep every field verbatim (default: sensitive data is redacted)",
    )
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_import))

    p = sub.add_parser("reset", help="purge every memory in the given scope(s)")
    scope_args(p)
    p.add_argument("--yes", action="store_true", help="do it (required)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_reset))


def cmd_export(ns: argparse.Namespace, mem: Memory) -> int:
    if ns.output:
        out = Path(ns.output)
        if out.is_dir():
            raise InvalidInput(f"--output {out} is a directory; give the file to write", field="output")
        if not out.parent.is_dir():
            raise InvalidInput(f"cannot write {out}: no directory {out.parent}", field="output")
        # Written beside it, then renamed: a failed export leaves no half-written file.
        part = out.with_name(f".{out.name}.part")
        try:
            with open(part, "w", encoding="utf-8") as fh:
                count = mem.export_jsonl(fh, retrievals=ns.retrievals, **scope(ns))
            os.replace(part, out)
        except OSError as exc:
            raise InvalidInput(f"cannot write {out}: {exc.strerror or exc}", field="output") from None
        finally:
            part.unlink(missing_ok=True)
        print(f"exported {count} records to {ns.output}", file=sys.stderr)
    else:
        mem.export_jsonl(sys.stdout, retrievals=ns.retrievals, **scope(ns))
    return EXIT_OK


def read_jsonl(name: str) -> list[dict[str, Any]]:
    """The records of the JSONL file ``name`` (``-``: stdin), through :mod:`jiyi.jsonl`."""
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror}") from None
    return decode_jsonl(data, source=name)


_FOREIGN = {
    "results": "mem0",
    "memories": "mem0",
    "agents": "letta",
    "blocks": "letta",
    "core_memory": "letta",
}
"""A top-level key that marks another system's export, and its ``--from`` name."""


def _not_foreign(records: list[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    """jiyi's records, or a clear error when the file is one of another system's exports
    (read as one jiyi record, it would only fail for lack of an owner)."""
    if len(records) == 1 and "content" not in records[0]:
        for key, source in _FOREIGN.items():
            if key in records[0]:
                raise InvalidInput(
                    f"{file} looks like a {source} export (it has '{key}'); import it with "
                    f"--from {source} (and --user ID when its records name no user)",
                    field="file",
                )
    return records


def read_records(ns: argparse.Namespace) -> list[dict[str, Any]]:
    """The records ``jiyi import`` loads: jiyi's JSON lines, or converted from another system."""
    return _read(ns)[0]


def _read(ns: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, str]] | None]:
    """The records and, for a Letta file, the lines left out and why (None otherwise)."""
    if ns.source == "jiyi":
        if ns.user:
            raise InvalidInput("--user only applies with --from mem0 or --from letta", field="user")
        return _not_foreign(read_jsonl(ns.file), ns.file), None
    from jiyi.compat.importers import letta_import, mem0_records

    try:
        raw = sys.stdin.buffer.read() if ns.file == "-" else Path(ns.file).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {ns.file}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        if ns.source != "mem0":
            raise InvalidInput(f"{ns.file} is not JSON: {exc}") from None
        data = decode_jsonl(raw, source=ns.file)  # a mem0 export written one memory a line
    if ns.source == "mem0":
        return mem0_records(data, user_id=ns.user), None
    read = letta_import(data, user_id=ns.user)
    return read.records, [s.to_json_dict() for s in read.skipped]


def cmd_import(ns: argparse.Namespace, mem: Memory) -> int:
    records, skipped = _read(ns)
    with Progress(ns) as show:
        result = mem.import_items(
            records,
            tenant_id=ns.tenant,
            progress=lambda done, total: show("embedding", done, total),
            trusted=ns.trusted,
        )
    if ns.json:
        emit(
            {"imported": result.imported}
            | ({"replaced": result.replaced} if result.replaced else {})
            | ({"retrievals": result.retrievals} if result.retrievals else {})
            | ({"skipped": skipped} if skipped is not None else {})
        )
    else:
        log = f" and {result.retrievals} retrieval log entries" if result.retrievals else ""
        again = (
            f" ({result.replaced} of them already here, now as the file has them)" if result.replaced else ""
        )
        print(f"imported {result.imported} memories{log}{again}")
        if skipped:
            print(f"skipped {len(skipped)} line{'' if len(skipped) == 1 else 's'}:")
            for s in skipped:
                print(f"  [{s['agent']}/{s['block']}] {s['line']!r}: {s['reason']}")
    return EXIT_OK


def cmd_reset(ns: argparse.Namespace, mem: Memory) -> int:
    if not ns.yes:
        raise InvalidInput("reset purges memories for good; add --yes to confirm")
    count = mem.reset(**scope(ns))
    emit({"purged": count}) if ns.json else print(f"purged {count} memories")
    return EXIT_OK
