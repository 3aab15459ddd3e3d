"""Every entry point takes a store URL and an optional Redis URL (issue 14, item 1):
``Memory.open(url, redis=...)``, every CLI command (``--db``/``JIYI_DB``,
``--redis``/``JIYI_REDIS_URL``), ``serve``, ``mcp`` and ``worker``; a PostgreSQL without
pgvector and a Redis that does not answer are refused with one clear line.

Real servers only: the machine's PostgreSQL at 127.0.0.1:5432 (it has no pgvector), the
pgvector server of :mod:`tests.pg`, Redis at 127.0.0.1:6379, SQLite files in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from jiyi import __version__
from jiyi.errors import ConfigError, InvalidInput, StoreError
from jiyi.memory import AsyncMemory, Memory
from jiyi.store.open import check_redis, open_store
from jiyi.store.redis_cache import RedisCachedStore
from tests.pg import give_back, pg_dsn, take_schema, with_params  # noqa: F401
from tests.test_redis_cache import REDIS_DB, redis_url  # noqa: F401

ENV = {**os.environ, "PYTHONIOENCODING": "utf-8"}
DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1
PLAIN_PG = "postgresql://postgres@127.0.0.1:5432/postgres?connect_timeout=3"


def jiyi(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jiyi.cli", *args],
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=120,
    )


def _plain_postgres_without_pgvector() -> str:
    """The local PostgreSQL, when it runs and has no pgvector (else the test skips)."""
    try:
        with psycopg.connect(PLAIN_PG, autocommit=True) as conn:
            row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    except psycopg.Error:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    if row is not None:
        pytest.skip("the PostgreSQL on 127.0.0.1:5432 has pgvector")
    return PLAIN_PG


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    schema = take_schema()
    yield with_params(pg_dsn, schema=schema)
    give_back(pg_dsn, schema)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in err and err.splitlines() == [err], err
    return err


def test_version() -> None:
    proc = jiyi("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"jiyi {__version__}"


# ------------------------------------------------------------------ Redis that does not answer


def test_check_redis_names_the_server_and_never_the_password(redis_url: str) -> None:  # noqa: F811
    assert check_redis(redis_url) == f"127.0.0.1:6379/{REDIS_DB}"
    with pytest.raises(ConfigError, match=r"Redis at 127\.0\.0\.1:1/0 does not answer") as caught:
        check_redis("redis://:s3cret-pw@127.0.0.1:1/0", timeout=0.5)
    assert "s3cret-pw" not in str(caught.value)
    for bad in ("", "http://127.0.0.1:6379"):
        with pytest.raises(InvalidInput):
            check_redis(bad)


def test_library_open_takes_a_redis_url(tmp_path: Path, redis_url: str) -> None:  # noqa: F811
    with Memory.open(tmp_path / "m.db", redis=redis_url, embedder="hash:64") as mem:
        assert isinstance(mem.store, RedisCachedStore)
        added = mem.add("I keep my notes in Obsidian", user_id="a", infer=False)
        assert mem.get(added.item.id).content == "I keep my notes in Obsidian"
    with pytest.raises(ConfigError, match="does not answer"):
        Memory.open(tmp_path / "m.db", redis=DEAD_REDIS)
    with pytest.raises(ConfigError, match="does not answer"):
        AsyncMemory.open(tmp_path / "m.db", redis=DEAD_REDIS)
    # refused before the store is opened: no file appears
    with pytest.raises(ConfigError):
        open_store(str(tmp_path / "never.db"), redis=DEAD_REDIS)
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["add", "hello world memory", "--user", "a"],
        ["worker", "--once"],
        ["serve", "--port", "0"],
        ["mcp"],
    ],
)
def test_every_command_refuses_a_redis_that_does_not_answer(tmp_path: Path, args: list[str]) -> None:
    db = str(tmp_path / "x.db")
    by_flag = jiyi("--db", db, "--redis", DEAD_REDIS, "--embedder", "hash:64", *args)
    by_env = jiyi("--db", db, "--embedder", "hash:64", *args, env={**ENV, "JIYI_REDIS_URL": DEAD_REDIS})
    for proc in (by_flag, by_env):
        assert "Redis at 127.0.0.1:1/0 does not answer" in _one_line(proc)


def test_cli_with_postgresql_and_redis(pg_url: str, redis_url: str) -> None:  # noqa: F811
    env = {**ENV, "JIYI_DB": pg_url, "JIYI_REDIS_URL": redis_url, "JIYI_EMBEDDER": "hash:64"}
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    add = jiyi("add", "我住在成都，每天骑自行车上班", "--user", "a", "--tenant", tenant, "--json", env=env)
    assert add.returncode == 0, add.stderr
    item_id = json.loads(add.stdout)["item"]["id"]
    found = jiyi("search", "成都", "--user", "a", "--tenant", tenant, "--json", env=env)
    assert [h["id"] for h in json.loads(found.stdout)] == [item_id]
    remember = ("remember", "remember that I prefer tea over coffee", "--session", "s", "--user", "a")
    assert jiyi(*remember, "--tenant", tenant, env=env).returncode == 0
    worker = jiyi("worker", "--once", env={**env, "JIYI_TENANT": tenant})
    assert "processed 1 job(s)" in worker.stderr, worker.stderr


def test_a_libpq_connection_string_opens_postgresql(pg_dsn: str) -> None:  # noqa: F811
    # "host=... user=... dbname=..." as psql takes it, with jiyi's schema=NAME as one more word;
    # it used to be read as a SQLite path ("directory host= does not exist").
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from jiyi.store.open import sqlite_path, store_kind

    assert store_kind("host=/run/postgresql user=app dbname=mem") == "postgresql"
    assert sqlite_path("host=/run/postgresql dbname=mem") is None
    schema = take_schema()
    try:
        words = {k: v for k, v in conninfo_to_dict(pg_dsn).items() if v is not None}
        dsn = f"{make_conninfo(**words)} schema={schema}"
        assert dsn.startswith(("host=", "user=", "dbname=", "port=", "password="))
        with Memory.open(dsn, embedder="hash:64") as mem:
            item = mem.add("我住在成都，每天骑自行车上班", user_id="a").item
            assert item is not None
            assert [h.item.id for h in mem.search("成都", user_id="a")] == [item.id]
        with psycopg.connect(pg_dsn) as conn:  # the store went into the schema named
            row = conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'items'",
                (schema,),
            ).fetchone()
        assert row is not None
    finally:
        give_back(pg_dsn, schema)


# ------------------------------------------------------------------ PostgreSQL without pgvector


def test_postgresql_without_pgvector_is_a_clear_error(tmp_path: Path) -> None:
    url = _plain_postgres_without_pgvector()
    with pytest.raises(StoreError, match="does not have the pgvector extension"):
        Memory.open(url, embedder="hash:64")
    for args in (["stats"], ["worker", "--once"], ["serve", "--port", "0"]):
        err = _one_line(jiyi("--db", url, "--embedder", "hash:64", *args))
        assert "does not have the pgvector extension" in err, err
