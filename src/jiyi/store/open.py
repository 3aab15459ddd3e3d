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
  to install the ``postgres`` extra. A libpq connection string (``host=/run/postgresql
  user=app dbname=mem``, as ``psql`` takes it) is a PostgreSQL DSN too; ``schema=NAME``
  may be one of its words.

Keyword ``options`` go to the backend's constructor (``read_only=``, ``migrate=``, ``timeout=`` ...).

``read_url="postgresql://..."`` (PostgreSQL only) sends searches, lists and gets to that
read replica and everything else to the primary (:class:`~jiyi.store.replica.ReplicaStore`,
which says how reads see this process's own writes).

``redis="redis://host:6379/0"`` puts :class:`~jiyi.store.redis_cache.RedisCachedStore` in
front of the store (hot sessions, items, the embedding cache and rate counters shared by
every process). The Redis server must answer when the store is opened: a wrong URL or a
Redis that is down is a :class:`~jiyi.errors.ConfigError` naming host and port (never a
password), not a silent fallback. Once running, a Redis outage falls back to the store.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from jiyi.errors import ConfigError, InvalidInput, install_hint
from jiyi.store.base import Store

POSTGRES_HINT = f"the PostgreSQL backend needs psycopg 3 and psycopg-pool: {install_hint('postgres')}"
REDIS_HINT = f"a Redis URL needs the redis client: {install_hint('redis')}"

REPLICA_TIMEOUT = 2.0
"""Seconds a read waits for a connection to the read replica before the primary answers it."""
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
    if _LIBPQ.match(url):
        return _libpq(url)
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


# A libpq "keyword=value" connection string opens with one of its keywords.
_LIBPQ = re.compile(
    r"^(?:host|hostaddr|port|dbname|user|password|passfile|sslmode|service|application_name|"
    r"connect_timeout|options|target_session_attrs)\s*="
)
_LIBPQ_SCHEMA = re.compile(r"(?:^|\s)schema\s*=\s*(?P<name>[^\s']+)")


def _libpq(dsn: str) -> tuple[str, str, dict[str, str]]:
    """A libpq connection string as a PostgreSQL DSN, less jiyi's own ``schema=NAME`` word
    (libpq would refuse a keyword it does not know)."""
    m = _LIBPQ_SCHEMA.search(dsn)
    if m is None:
        return "postgresql", dsn, {}
    rest = (dsn[: m.start()] + dsn[m.end() :]).strip()
    return "postgresql", rest, {"schema": m.group("name")}


def check_redis(url: str, *, timeout: float = 2.0) -> str:
    """Ping the Redis ``url`` names; its ``host:port/db`` (for messages) when it answers.

    InvalidInput for something that is not a Redis URL, ConfigError when the client is
    missing or the server does not answer within ``timeout`` seconds (or refuses us)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("the Redis URL is empty; give e.g. redis://127.0.0.1:6379/0", field="redis")
    try:
        import redis
    except ImportError as exc:
        raise ConfigError(REDIS_HINT) from exc
    try:
        client = redis.Redis.from_url(url.strip(), socket_timeout=timeout, socket_connect_timeout=timeout)
    except ValueError as exc:
        raise InvalidInput(
            f"{redact_url(url)!r} is not a Redis URL ({exc}); use redis://host:6379/0", field="redis"
        ) from None
    kwargs = client.connection_pool.connection_kwargs
    where = str(kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}")
    where += f"/{kwargs.get('db', 0)}"
    try:
        client.ping()
    except redis.RedisError as exc:
        # The message may quote the URL; keep only the exception's class and our redacted words.
        raise ConfigError(
            f"Redis at {where} does not answer ({type(exc).__name__}): start it, or fix --redis / "
            "JIYI_REDIS_URL, or leave them unset to run without Redis"
        ) from None
    finally:
        client.close()
    return where


def open_store(url: str, *, redis: str | None = None, read_url: str | None = None, **options: Any) -> Store:
    """Open (and, unless ``migrate=False``, migrate) the store ``url`` names; with ``redis``
    (a Redis URL) wrapped in the Redis cache, after checking that Redis answers; with
    ``read_url`` (PostgreSQL only) reading from that replica (:mod:`jiyi.store.replica`).

    With both, Redis sits in front of the primary only: a read the replica answers is never
    cached in Redis, so a lagging replica cannot leave a stale copy there for every process."""
    if redis is not None:
        check_redis(redis)
    kind, target, url_options = _parse(url)
    if read_url is not None and kind != "postgresql":
        raise ConfigError(
            "a read replica (--read-db, JIYI_READ_DB, read_url=) is for a postgresql:// store only; "
            "a SQLite store has no replicas"
        )
    store: Store
    replica: Store | None = None
    if kind == "sqlite":
        from jiyi.store.sqlite import SQLiteStore

        store = SQLiteStore(
            target if target == ":memory:" else Path(target).expanduser(), **{**url_options, **options}
        )
    else:
        try:
            from jiyi.store.postgres import PostgresStore
        except (ImportError, ConfigError) as exc:
            raise ConfigError(POSTGRES_HINT) from exc
        store = PostgresStore(target, **{**url_options, **options})
        if read_url is not None:
            replica = _open_replica(store, read_url, options)
    try:
        if redis is not None:
            from jiyi.store.redis_cache import RedisCachedStore

            store = RedisCachedStore(store, redis.strip())
    except BaseException:
        store.close()
        if replica is not None:
            replica.close()
        raise
    if replica is None:
        return store
    from jiyi.store.replica import ReplicaStore

    return ReplicaStore(store, replica)


def _open_replica(primary: Any, read_url: str, options: dict[str, Any]) -> Store:
    """The replica ``read_url`` names, which must answer and hold the schema version of
    ``primary`` (a PostgresStore, closed on failure)."""
    from jiyi.store.postgres import PostgresStore

    try:
        kind, target, url_options = _parse(read_url)
        if kind != "postgresql":
            raise ConfigError(f"the read replica must be a postgresql:// URL, not {redact_url(read_url)!r}")
        # A replica is read as it is: a hot standby cannot be migrated (the primary's
        # migrations reach it by replication). It waits at most REPLICA_TIMEOUT for a
        # connection: past that the primary answers.
        kept = {k: v for k, v in options.items() if k in ("dimensions", "schema", "max_size")}
        timeout = min(float(options.get("timeout", REPLICA_TIMEOUT)), REPLICA_TIMEOUT)
        replica = PostgresStore(target, **{**kept, **url_options, "timeout": timeout, "migrate": False})
        try:
            mine, theirs = primary.applied_migrations(), replica.applied_migrations()
            if max(theirs, default=0) != max(mine, default=0):
                raise ConfigError(
                    f"the read replica {redact_url(read_url)!r} is at schema version {max(theirs, default=0)}, "
                    f"the primary at {max(mine, default=0)}: wait for replication, or check --read-db"
                )
            return replica
        except BaseException:
            replica.close()
            raise
    except BaseException:
        primary.close()
        raise
