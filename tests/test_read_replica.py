"""A read replica for searches: ``Memory.open(url, read_url=...)``, ``--read-db``, ``JIYI_READ_DB``.

The "replica" is a second database on the test server holding a copy of the primary
(made by ``jiyi copy``) plus one item the primary does not have, so each read shows which
database answered it. Writes must land in the primary only; reads after this process's own
write see it (read your writes); a replica that is down is refused at open and, once
running, its reads fall back to the primary. The last test does the same against a real
streaming hot standby of the test server.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from jiyi.errors import ConfigError, NotFound, StoreUnavailable
from jiyi.memory import Memory
from jiyi.store.base import GetItems
from jiyi.store.open import open_store
from jiyi.store.postgres import PostgresStore
from jiyi.store.replica import ReplicaStore
from jiyi.testing.conformance import StoreConformance
from tests.pg import drop_schema, give_back, new_schema, pg_dsn, take_schema, with_params  # noqa: F401
from tests.test_redis_cache import REDIS_URL

EMBEDDER = "hash:64"
ENV = {**os.environ, "PYTHONIOENCODING": "utf-8"}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jiyi.cli", *args],
        capture_output=True,
        text=True,
        env={**ENV, **(env or {})},
        timeout=300,
    )


def _in_database(dsn: str, dbname: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


@pytest.fixture
def urls(pg_dsn: str) -> Iterator[tuple[str, str, str]]:  # noqa: F811
    """(primary URL, replica URL, replica database): a fresh schema of the test database,
    and the same schema in a database of its own, both empty."""
    schema = new_schema()
    dbname = f"jiyi_replica_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    yield with_params(pg_dsn, schema=schema), with_params(_in_database(pg_dsn, dbname), schema=schema), dbname
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
    drop_schema(pg_dsn, schema)


@pytest.fixture
def store(pg_dsn: str) -> Iterator[ReplicaStore]:  # noqa: F811
    """A replica with no lag: a second store on the primary's own schema."""
    name = take_schema()
    s = ReplicaStore(PostgresStore(pg_dsn, schema=name), PostgresStore(pg_dsn, schema=name, migrate=False))
    yield s
    s.close()
    give_back(pg_dsn, name)


class TestReplicaConformance(StoreConformance):
    """Every conformance test through the routing: each operation reaches a store that
    answers it as the backend alone would."""


def _replica_of(primary: str, replica: str) -> str:
    """Fill the primary, copy it to the replica with ``jiyi copy``, then add one item to the
    replica alone; its id."""
    with Memory.open(primary, embedder=EMBEDDER, background=False) as mem:
        mem.add("Alice drinks green tea every morning", user_id="alice", infer=False)
        mem.add("Alice lives in Hangzhou", user_id="alice", infer=False)
    done = _cli("copy", "--from", primary, "--to", replica)
    assert done.returncode == 0, done.stderr
    with Memory.open(replica, embedder=EMBEDDER, background=False) as only:
        return only.add("Alice's tea is always oolong on the replica", user_id="alice", infer=False).item.id


def _ids(store_url: str, tenant: str, ids: list[str]) -> set[str]:
    with PostgresStore(
        _strip_schema(store_url)[0], schema=_strip_schema(store_url)[1], migrate=False
    ) as store:
        return {i.id for i in store.execute(GetItems(tenant, tuple(ids)))}


def _strip_schema(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    query = [q for q in parts.query.split("&") if not q.startswith("schema=")]
    schema = next(q for q in parts.query.split("&") if q.startswith("schema="))[len("schema=") :]
    return urlunsplit(parts._replace(query="&".join(query))), schema


def test_reads_come_from_the_replica_and_writes_land_in_the_primary_only(urls: tuple[str, str, str]) -> None:
    primary, replica, _ = urls
    marker = _replica_of(primary, replica)
    with Memory.open(primary, read_url=replica, embedder=EMBEDDER, background=False) as mem:
        store = mem.store
        assert isinstance(store, ReplicaStore)
        hits = mem.search("what tea does Alice drink?", user_id="alice")
        assert marker in {h.item.id for h in hits}  # only the replica holds it
        assert mem.get(marker) is not None
        assert marker in {i.id for i in mem.list(user_id="alice").items}
        assert store.replica_reads >= 3 and store.primary_reads == 0

        store.read_your_writes = 0.5
        added = mem.add("Alice switched to black coffee", user_id="alice", infer=False)
        # Read your writes: this process's reads of the tenant go to the primary for a while.
        assert mem.get(added.item.id) is not None
        assert added.item.id in {h.item.id for h in mem.search("coffee", user_id="alice")}
        with pytest.raises(NotFound):
            mem.get(marker)  # the primary answered: it never had the marker
        assert store.primary_reads >= 3
        time.sleep(0.6)
        with pytest.raises(NotFound):
            mem.get(added.item.id)  # the window closed: the replica has no copy
        assert mem.get(marker) is not None
    tenant = added.item.tenant_id
    assert _ids(primary, tenant, [added.item.id, marker]) == {added.item.id}
    assert _ids(replica, tenant, [added.item.id, marker]) == {marker}


def test_a_write_decision_reads_the_primary(urls: tuple[str, str, str]) -> None:
    """The duplicate check before a write reads the primary, not a replica that lacks the
    item: the same text twice is a reinforcement, never a second item."""
    primary, replica, _ = urls
    _replica_of(primary, replica)
    with Memory.open(primary, read_url=replica, embedder=EMBEDDER, background=False) as mem:
        mem.store.read_your_writes = 0.0  # no window: only the write decision's own routing
        first = mem.add("Bob prefers window seats on long flights", user_id="bob")
        again = mem.add("Bob prefers window seats on long flights", user_id="bob")
    assert first.decision.action == "add" and again.decision.action == "reinforce"
    assert again.item.id == first.item.id


def test_the_cli_and_env_pass_the_replica(urls: tuple[str, str, str]) -> None:
    primary, replica, _ = urls
    marker = _replica_of(primary, replica)
    env = {"JIYI_EMBEDDER": EMBEDDER}
    by_flag = _cli("--db", primary, "--read-db", replica, "show", marker, env=env)
    assert by_flag.returncode == 0, by_flag.stderr
    assert "oolong" in by_flag.stdout
    by_env = _cli("--db", primary, "show", marker, env={**env, "JIYI_READ_DB": replica})
    assert by_env.returncode == 0 and "oolong" in by_env.stdout
    without = _cli("--db", primary, "show", marker, env=env)
    assert without.returncode != 0  # the primary never had it


def test_a_replica_that_is_down_at_open_is_refused_and_sqlite_has_none(
    urls: tuple[str, str, str], tmp_path: Path
) -> None:
    primary, _, _ = urls
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1") as refused:
        open_store(primary, read_url="postgresql://jiyi:secret@127.0.0.1:1/replica")
    assert "secret" not in str(refused.value)
    with pytest.raises(ConfigError, match="postgresql:// store only"):
        open_store(f"{tmp_path}/x.db", read_url=primary)
    done = _cli("--db", f"{tmp_path}/y.db", "--read-db", primary, "stats")
    assert done.returncode != 0 and "SQLite store has no replicas" in done.stderr


def test_a_replica_behind_the_primarys_schema_is_refused(urls: tuple[str, str, str], pg_dsn: str) -> None:  # noqa: F811
    primary, replica, _ = urls
    _replica_of(primary, replica)
    url, schema = _strip_schema(replica)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = (SELECT max(version) '
            f'FROM "{schema}".jiyi_schema_migrations)'
        )
    with pytest.raises(ConfigError, match="schema version"):
        open_store(primary, read_url=replica)


def test_a_replica_that_goes_down_falls_back_to_the_primary(
    urls: tuple[str, str, str],
    pg_dsn: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    primary, replica, dbname = urls
    marker = _replica_of(primary, replica)
    with Memory.open(primary, read_url=replica, embedder=EMBEDDER, background=False) as mem:
        store = mem.store
        assert isinstance(store, ReplicaStore)
        store.retry_seconds = 0.3
        assert mem.get(marker) is not None
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,)
            )
        caplog.set_level(logging.WARNING, logger="jiyi.replica")
        started = time.monotonic()
        hits = mem.search("tea", user_id="alice")  # answered by the primary
        assert hits and marker not in {h.item.id for h in hits}
        assert time.monotonic() - started < 10
        with pytest.raises(NotFound):
            mem.get(marker)  # still the primary, without waiting for the replica
        assert "read replica failed" in caplog.text and "secret" not in caplog.text
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        time.sleep(0.4)
        assert mem.get(marker) is not None  # the replica answers again
        assert "answers again" in caplog.text


async def test_the_servers_async_memory_reads_the_replica(urls: tuple[str, str, str]) -> None:
    """``jiyi serve`` and ``jiyi mcp`` open their store with this (``--read-db`` passed on)."""
    from jiyi.server.storage import open_memory

    primary, replica, _ = urls
    marker = _replica_of(primary, replica)
    mem = open_memory(primary, read_url=replica, embedder=EMBEDDER)
    async with mem:
        assert isinstance(mem.store, ReplicaStore)
        hits = await mem.search("oolong tea", user_id="alice")
        assert marker in {h.item.id for h in hits}
        added = await mem.add("Alice bought a tea kettle", user_id="alice")
        assert (await mem.get(added.item.id)).id == added.item.id  # read your writes
        assert mem.store.replica_reads >= 1 and mem.store.primary_reads >= 1


def test_with_redis_the_cache_is_in_front_of_the_primary_only(urls: tuple[str, str, str]) -> None:
    from jiyi.store.redis_cache import RedisCachedStore

    primary, replica, _ = urls
    marker = _replica_of(primary, replica)
    store = open_store(primary, redis=REDIS_URL, read_url=replica)
    assert isinstance(store, ReplicaStore) and isinstance(store.primary, RedisCachedStore)
    cache = store.primary
    with Memory(store, embedder=EMBEDDER, background=False) as mem:
        item = mem.get(marker)  # the replica answered, through no Redis
        assert store.replica_reads == 1
        assert not cache.client.exists(cache.item_key(item.tenant_id, marker))
        added = mem.add("Alice keeps her tea in a tin", user_id="alice", infer=False)
        assert mem.get(added.item.id).id == added.item.id  # the primary, through Redis


def test_jiyi_serve_with_read_db_answers_gets_from_the_replica(urls: tuple[str, str, str]) -> None:
    import socket

    import httpx

    primary, replica, _ = urls
    marker = _replica_of(primary, replica)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--db", primary, "--read-db", replica, "--embedder", EMBEDDER, "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jiyi.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        got = httpx.get(f"{base}/v1/memories/{marker}", timeout=10)
        assert got.status_code == 200 and "oolong" in got.json()["content"]
        added = httpx.post(
            f"{base}/v1/memories", json={"content": "Alice bought a teapot", "user_id": "alice"}
        )
        assert added.status_code == 201, added.text
        new_id = added.json()["item"]["id"]
        assert httpx.get(f"{base}/v1/memories/{new_id}", timeout=10).status_code == 200  # read your writes
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
    assert _ids(primary, "default", [new_id, marker]) == {new_id}


# ---------------------------------------------------------------- a real streaming standby


def _as_server_owner(data: Path, *cmd: object) -> None:
    """Run a PostgreSQL tool as the owner of the test server's files (as root, the
    server runs as another OS user; PostgreSQL refuses to run as root)."""
    args = [str(c) for c in cmd]
    if os.geteuid() == 0:
        import pwd

        args = ["runuser", "-u", pwd.getpwuid(data.stat().st_uid).pw_name, "--", *args]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def standby(pg_dsn: str) -> Iterator[tuple[str, Callable[[], None]]]:  # noqa: F811
    """A hot standby of the test server, streaming from it (pg_basebackup -R): its URL
    without a schema, and a function that stops it."""
    import shutil
    import tempfile

    import psutil

    from tests.pg import ENV_DSN

    if os.environ.get(ENV_DSN):
        pytest.skip("a standby is made from the private test server only")
    primary_dir = Path(psycopg.conninfo.conninfo_to_dict(pg_dsn)["host"])  # type: ignore[arg-type]
    pid = int((primary_dir / "postmaster.pid").read_text().split()[0])
    bin_dir = Path(psutil.Process(pid).exe()).parent
    top = Path(tempfile.mkdtemp(prefix="jiyi-standby-"))
    shutil.chown(top, primary_dir.stat().st_uid, primary_dir.stat().st_gid)
    data = top / "data"
    try:
        _as_server_owner(
            primary_dir,
            bin_dir / "pg_basebackup",
            "-h",
            primary_dir,
            "-U",
            "postgres",
            "-D",
            data,
            "-R",
            "-c",
            "fast",
        )
        with open(data / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
            conf.write(f"\nport = 5433\nunix_socket_directories = '{top}'\nlisten_addresses = ''\n")
        _as_server_owner(primary_dir, bin_dir / "pg_ctl", "-D", data, "-l", top / "log", "-w", "start")

        def stop() -> None:
            if (data / "postmaster.pid").exists():
                _as_server_owner(primary_dir, bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")

        yield f"postgresql://postgres:@/postgres?host={top}&port=5433", stop
    finally:
        stop()
        shutil.rmtree(top, ignore_errors=True)


def _replayed(primary: str, standby: str) -> None:
    """Wait until the standby has replayed everything the primary committed (the insert
    position: the test server commits asynchronously, so a commit may not be written yet)."""
    with psycopg.connect(primary, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]  # type: ignore[index]
    deadline = time.monotonic() + 30
    with psycopg.connect(standby, autocommit=True) as conn:
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.05)


def test_a_streaming_hot_standby_answers_searches(
    standby: tuple[str, Callable[[], None]],
    pg_dsn: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    standby_dsn, stop_standby = standby
    with psycopg.connect(standby_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    schema = new_schema()
    primary, replica = with_params(pg_dsn, schema=schema), with_params(standby_dsn, schema=schema)
    try:
        with Memory.open(primary, embedder=EMBEDDER, background=False) as mem:
            first = mem.add("Alice drinks green tea", user_id="alice", infer=False)
        _replayed(pg_dsn, standby_dsn)
        with Memory.open(primary, read_url=replica, embedder=EMBEDDER, background=False) as mem:
            store = mem.store
            assert isinstance(store, ReplicaStore)
            assert [h.item.id for h in mem.search("tea", user_id="alice")] == [first.item.id]
            assert (store.replica_reads, store.primary_reads) == (1, 0)  # the standby answered
            store.read_your_writes = store.decision_seconds = 0.3
            second = mem.add("Alice drinks black tea too", user_id="alice")  # a write decision, then a write
            assert second.item.id in {h.item.id for h in mem.search("tea", user_id="alice")}
            assert store.primary_reads > 0  # read your writes: the primary answered
            _replayed(pg_dsn, standby_dsn)
            time.sleep(0.4)
            replica_reads = store.replica_reads
            assert mem.get(second.item.id).content == "Alice drinks black tea too"
            assert store.replica_reads == replica_reads + 1  # replicated, and read from the standby
            # The standby stops: reads fall back to the primary.
            caplog.set_level(logging.WARNING, logger="jiyi.replica")
            stop_standby()
            before = store.primary_reads
            assert {h.item.id for h in mem.search("tea", user_id="alice")} == {first.item.id, second.item.id}
            assert store.primary_reads > before
            assert "read replica failed" in caplog.text
    finally:
        drop_schema(pg_dsn, schema)


def test_one_tenants_write_leaves_other_tenants_on_the_replica(urls: tuple[str, str, str]) -> None:
    primary, replica, _ = urls
    marker = _replica_of(primary, replica)  # in tenant "default"
    store = open_store(primary, read_url=replica)
    assert isinstance(store, ReplicaStore)
    mine = Memory(store, embedder=EMBEDDER, background=False)
    theirs = Memory(store, embedder=EMBEDDER, background=False, tenant_id="globex")
    theirs.add("Globex ships on Tuesdays", user_id="carol")  # a write decision, a write, an embedding cached
    assert mine.get(marker).id == marker  # still the replica: only the primary lacks it
    with pytest.raises(NotFound):
        mine.get(marker, tenant_id="globex")  # (ids are per tenant)
    mine.add("Alice likes jasmine tea", user_id="alice")
    with pytest.raises(NotFound):
        mine.get(marker)  # now "default" reads the primary, which never had the marker
    store.close()
