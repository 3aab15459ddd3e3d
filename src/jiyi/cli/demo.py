"""``jiyi demo``: remember a short Chinese/English conversation and search it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from jiyi.cli.common import sqlite_file

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("demo", help="remember a short Chinese/English conversation and search it")
    p.add_argument("--keep", action="store_true", help="keep the demo database (printed at the end)")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(ns: argparse.Namespace) -> int:
    """The demo runs on ``--db`` when given, else on a temporary file ($JIYI_DB is not used)."""
    from jiyi.demo import run_demo

    return run_demo(db=None if ns.db is None else sqlite_file(ns), keep=ns.keep, embedder=ns.embedder)
