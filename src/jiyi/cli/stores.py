"""Stores by URL: ``jiyi migrate`` (schema migrations) and ``jiyi copy`` (store to store)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jiyi.cli.common import EXIT_OK, emit, integer, json_arg, store_url
from jiyi.cli.progress import Progress
from jiyi.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "migrate",
        help="apply pending schema migrations (or list them with --status)",
        description="Apply the store's pending schema migrations and print what was applied; with "
        "--status list applied and pending migrations without changing anything.",
    )
    p.add_argument(
        "--db",
        dest="db_url",
        metavar="URL",
        help="store: a SQLite file, sqlite:///path.db or postgresql://user@host/db "
        "(default: the global --db, $JIYI_DB or a per-user data dir)",
    )
    p.add_argument(
        "--status", action="store_true", help="list applied and pending migrations; change nothing"
    )
    json_arg(p)
    p.set_defaults(handler=cmd_migrate)
    _register_copy(sub)


def _register_copy(sub: Subparsers) -> None:
    p = sub.add_parser(
        "copy",
        help="copy a whole store to another (e.g. SQLite to PostgreSQL), losslessly",
        description="Copy every memory, history entry, session message, checkpoint, job, cached "
        "embedding and rate event from one store to another, keeping ids, order and times. "
        "The destination must be empty unless --overwrite is given.",
        epilog="Example: jiyi copy --from sqlite:///memory.db --to postgresql://me@db.example.com/jiyi",
    )
    p.add_argument("--from", dest="source", required=True, metavar="URL", help="store to copy from")
    p.add_argument("--to", dest="dest", required=True, metavar="URL", help="store to copy into")
    p.add_argument("--overwrite", action="store_true", help="empty a non-empty destination first")
    p.add_argument("--batch", type=integer, default=500, help="rows per transaction (default 500)")
    json_arg(p)
    p.set_defaults(handler=cmd_copy)


# ------------------------------------------------------------------ migrate


@runtime_checkable
class _Migratable(Protocol):
    """What both backends offer for their schema migrations."""

    def applied_migrations(self) -> list[int]: ...
    def pending_migrations(self) -> list[tuple[int, str]]: ...
    def migrate(self) -> list[tuple[int, str]]: ...
    def close(self) -> None: ...


def _migration_names(store: _Migratable) -> dict[int, str]:
    module = sys.modules[type(store).__module__]
    migrations: list[tuple[str, Any]] = module.MIGRATIONS
    return {v: name for v, (name, _) in enumerate(migrations, start=1)}


def _no_database_yet(ns: argparse.Namespace, where: str, path: str) -> int:
    """``migrate --status`` on a SQLite file that does not exist: every migration pending."""
    from jiyi.store.sqlite import MIGRATIONS

    pending = [(v, name) for v, (name, _) in enumerate(MIGRATIONS, start=1)]
    if ns.json:
        emit({"store": where, "exists": False, "applied": [], "pending": pending})
    else:
        print(f"no database at {path} yet; {len(pending)} migrations pending:")
        for v, name in pending:
            print(f"  pending  {v:>3}  {name}")
    return EXIT_OK


def _status(ns: argparse.Namespace, store: _Migratable, where: str) -> int:
    names = _migration_names(store)
    applied = [(v, names.get(v, "?")) for v in store.applied_migrations()]
    pending = store.pending_migrations()
    if ns.json:
        emit({"store": where, "exists": True, "applied": applied, "pending": pending})
    else:
        print(f"store {where}")
        for v, name in applied:
            print(f"  applied  {v:>3}  {name}")
        for v, name in pending:
            print(f"  pending  {v:>3}  {name}")
        print(f"{len(applied)} applied, {len(pending)} pending")
    return EXIT_OK


def _apply(ns: argparse.Namespace, store: _Migratable, where: str) -> int:
    names = _migration_names(store)
    done = store.migrate()
    if ns.json:
        emit({"store": where, "applied": done, "pending": store.pending_migrations()})
    elif done:
        print(f"applied {len(done)} migration{'s' if len(done) != 1 else ''} to {where}:")
        for v, name in done:
            print(f"  {v:>3}  {name}")
    else:
        print(f"{where} is up to date ({len(names)} migrations applied); nothing to do")
    return EXIT_OK


def cmd_migrate(ns: argparse.Namespace) -> int:
    from jiyi.store.open import open_store, redact_url, sqlite_path

    url = ns.db_url or store_url(ns)
    where = redact_url(url)
    path = sqlite_path(url)
    on_file = path is not None and path != ":memory:"
    if path is not None and on_file and not Path(path).expanduser().exists():
        if ns.status:
            return _no_database_yet(ns, where, path)
        if not ns.db_url and ns.db is None:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"migrate": False}
    if ns.status and on_file:
        options["read_only"] = True
    store = open_store(url, **options)
    if not isinstance(store, _Migratable):  # pragma: no cover - both backends have migrations
        store.close()
        raise ConfigError(f"{where} does not keep schema migrations")
    try:
        return _status(ns, store, where) if ns.status else _apply(ns, store, where)
    finally:
        store.close()


# ------------------------------------------------------------------ copy


def _check_copy(ns: argparse.Namespace) -> None:
    """Refuse, before anything is opened, a copy that cannot work."""
    from jiyi.store.open import sqlite_path, store_kind

    store_kind(ns.source)  # a bad URL fails before anything is opened
    store_kind(ns.dest)
    src_path = sqlite_path(ns.source)
    if src_path == ":memory:":
        raise InvalidInput("the source cannot be ':memory:': a new in-memory store is always empty")
    if src_path is not None and not Path(src_path).expanduser().is_file():
        raise InvalidInput(f"the source {src_path} does not exist")
    if ns.source.strip() == ns.dest.strip() or (
        src_path is not None
        and sqlite_path(ns.dest) not in (None, ":memory:")
        and Path(src_path).expanduser().resolve() == Path(str(sqlite_path(ns.dest))).expanduser().resolve()
    ):
        raise InvalidInput("--from and --to name the same store")
    if ns.batch < 1:
        raise InvalidInput("--batch must be at least 1")


def cmd_copy(ns: argparse.Namespace) -> int:
    from jiyi.store.copy import copy_store
    from jiyi.store.open import open_store, redact_url

    _check_copy(ns)
    source = open_store(ns.source)
    try:
        dest = open_store(ns.dest)
        try:
            with Progress(ns) as show:
                report = copy_store(source, dest, batch=ns.batch, progress=show, overwrite=ns.overwrite)
        finally:
            dest.close()
    finally:
        source.close()
    if ns.json:
        emit({"from": redact_url(ns.source), "to": redact_url(ns.dest), "copied": report.counts})
    else:
        parts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items())
        print(f"copied {report.total} rows from {redact_url(ns.source)} to {redact_url(ns.dest)}: {parts}")
    return EXIT_OK
