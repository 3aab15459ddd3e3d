"""Documents: add-document (a file kept as overlapping chunks) and get-document (read it
back whole); the library's ``add_document`` / ``get_document``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jiyi.cli.common import EXIT_OK, emit, json_arg, memory_command, scope_args
from jiyi.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "add-document",
        help="keep a document (a file) as chunks that search and context find",
        description="Store a text file as ~2,000-token chunks with ~200 tokens of overlap under one "
        "document id (parent_id); search and context find its chunks, get-document reads it whole.",
    )
    p.add_argument("file", metavar="FILE", help="a UTF-8 text file, or - to read standard input")
    p.add_argument("--title", help="the document's title (default: the file's name)")
    p.add_argument("--source-id", metavar="ID", help="where the document came from (a path, a URL)")
    scope_args(p)
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_add_document))

    p = sub.add_parser(
        "get-document",
        help="print a stored document, whole",
        description="Print a document re-assembled from its chunks, exactly as it was stored.",
    )
    p.add_argument("parent_id", metavar="PARENT_ID", help="the document's id, as add-document printed it")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_get_document))


def _read(name: str) -> tuple[str, str | None]:
    """The text of ``name`` (``-``: standard input) and the title it suggests."""
    if name == "-":
        return sys.stdin.read(), None
    path = Path(name)
    try:
        return path.read_text(encoding="utf-8"), path.name
    except FileNotFoundError:
        raise InvalidInput(f"no such file: {name}", field="file") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{name} is not UTF-8 text", field="file") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror}", field="file") from None


def cmd_add_document(ns: argparse.Namespace, mem: Memory) -> int:
    text, name = _read(ns.file)
    # the owner (--user ...) and the tenant reach add_document through the bound Memory
    chunks = mem.add_document(text, title=ns.title or name, source_id=ns.source_id)
    parent = str(chunks[0].metadata["parent_id"])
    if ns.json:
        emit({"status": "stored", "parent_id": parent, "chunks": len(chunks), "ids": [c.id for c in chunks]})
        return EXIT_OK
    print(f"stored document {parent}: {len(chunks)} chunk(s)")
    print(f"  read it back: jiyi get-document {parent}")
    return EXIT_OK


def cmd_get_document(ns: argparse.Namespace, mem: Memory) -> int:
    try:
        first = mem.get(f"{ns.parent_id}#0")
    except NotFound:
        first = None
    if first is None or first.metadata.get("parent_id") != ns.parent_id:
        raise NotFound(f"no document {ns.parent_id!r}; take the parent_id add-document printed")
    text = mem.get_document(ns.parent_id)
    if ns.json:
        title = first.metadata.get("title")
        emit(
            {
                "parent_id": ns.parent_id,
                "title": title if isinstance(title, str) else None,
                "chunks": int(first.metadata.get("chunk_count", 1)),
                "text": text,
            }
        )
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK
