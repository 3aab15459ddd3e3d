"""Open a store from a URL: ``sqlite:///path.db``, a plain file path, ``:memory:`` or a
PostgreSQL DSN (``postgresql://...``/``postgres://...``).

* ``sqlite:///relative/path.db`` (three slashes: relative to the working directory),
  ``sqlite:////abs/path.db`` (four: absolute), ``sqlite://`` or ``sqlite:///:memory:``
  (a private in-memory store). A string without a scheme is a file path.
  ``?synchronous=full`` makes every commit survive a power loss (one fsync per write;
  see :class:`~jiyi.store.sqlite.SQLiteStore`).
* ``postgresql://user:pw@host:5432/db`` is handed to :class:`~jiyi.store.postgres.PostgresStore`
  as is, except for a jiyi-only ``schema=NAME`` query parameter, which picks the schema
  (default ``jiyi``). The backend is imported only then; without psycopg the error says
  to ``pip install 'jiyi[postgres]'``.

Keyword ``options`` go to the backend's constructor (``read_only=``, ``migrate=``, ``timeout=`` ...).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from jiyi.errors import ConfigError, InvalidInput
from jiyi.store.base import Store

POSTGRES_HINT = "the PostgreSQL backend needs psycopg 3 and psycopg-pool: pip install 'jiyi[postgres]'"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_POSTGRES_SCHEMES = ("postgresql", "postgres")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def store_kind(url: str) -> str:
    """``"sqlite"`` or ``"postgresql"`` for a URL :func:`open_store` accepts; InvalidInput otherwise."""
    return _parse(url)[0]


def sqlite_path(url: str) -> str | None:
    """The file path (or ``":memory:"``) a SQLite URL names; None for a PostgreSQL DSN."""
    kind, target, _ = _parse(url)
    return target if kind == "sqlite" else None


def _parse(url: str) -> tuple[str, str, dict[str, str]]:
    """(kind, path or DSN, jiyi options taken from the URL)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(
            "the store URL is empty; give e.g. sqlite:///memory.db or postgresql://host/db", field="url"
        )
    url = url.strip()
    if url == ":memory:":
        return "sqlite", ":memory:", {}
    match = _SCHEME.match(url)
    # A one-letter "scheme" is a Windows drive (C:\...), so a path.
    if match is None or len(match.group(1)) == 1:
        return "sqlite", url, {}
    scheme = match.group(1).lower()
    rest = url[match.end() :]
    if scheme == "sqlite":
        rest, _, params = rest.partition("?")
        options = dict(parse_qsl(params, keep_blank_values=True))
        unknown = sorted(set(options) - {"synchronous"})
        if unknown:
            raise InvalidInput(
                f"unknown SQLite URL parameter {unknown[0]!r}; the only one is synchronous=normal|full",
                field="url",
            )
        if rest in ("", "//", "///:memory:", "//:memory:"):
            return "sqlite", ":memory:", options
        if not rest.startswith("///") or len(rest) == 3:
            raise InvalidInput(
                f"{url!r} is not a SQLite URL: use sqlite:///relative/path.db or sqlite:////absolute/path.db",
                field="url",
            )
        return "sqlite", rest[3:], options
    if scheme in _POSTGRES_SCHEMES:
        if not rest.startswith("//"):
            raise InvalidInput(
                f"{redact_url(url)!r} is not a PostgreSQL URL: use postgresql://user@host:5432/dbname",
                field="url",
            )
        try:
            parts = urlsplit(url)
        except ValueError:
            raise InvalidInput("the PostgreSQL URL cannot be parsed", field="url") from None
        query = parse_qsl(parts.query, keep_blank_values=True)
        options = {k: v for k, v in query if k == "schema"}
        kept = [(k, v) for k, v in query if k != "schema"]
        dsn = urlunsplit(parts._replace(query=urlencode(kept, safe="/:@"))) if options else url
        return "postgresql", dsn, options
    raise InvalidInput(
        f"unknown store URL scheme {scheme!r}: use sqlite:///path.db, a file path, ':memory:' "
        "or postgresql://user@host/dbname",
        field="url",
    )


def open_store(url: str, **options: Any) -> Store:
    """Open (and, unless ``migrate=False``, migrate) the store ``url`` names."""
    kind, target, url_options = _parse(url)
    if kind == "sqlite":
        from jiyi.store.sqlite import SQLiteStore

        return SQLiteStore(
            target if target == ":memory:" else Path(target).expanduser(), **{**url_options, **options}
        )
    try:
        from jiyi.store.postgres import PostgresStore
    except (ImportError, ConfigError) as exc:
        raise ConfigError(POSTGRES_HINT) from exc
    return PostgresStore(target, **{**url_options, **options})
