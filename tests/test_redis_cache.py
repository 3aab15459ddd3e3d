"""RedisCachedStore against a real Redis (127.0.0.1:6379, started here when not running)
wrapping real SQLite files: the conformance suite, what is cached and invalidated, sharing
between two "processes", and outages (Redis down from the start, and going away mid-run)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from jiyi.memory import AsyncMemory, Memory
from jiyi.model import utcnow
from jiyi.session.model import Message
from jiyi.store.base import (
    AppendMessages,
    CacheGet,
    CachePut,
    CountEvents,
    DeleteMessages,
    GetItems,
    GetMessages,
    ListItems,
    Op,
    RecordEvent,
    Store,
    Touch,
    Write,
)
from jiyi.store.redis_cache import RedisCachedStore
from jiyi.store.sqlite import SQLiteStore
from jiyi.testing.conformance import (
    TENANT,
    StoreConformance,
    flt,
    make_item,
    purge,
    put,
    unit,
    upsert,
)


def _worker_db() -> int:
    """Each pytest-xdist worker its own Redis database (gw0 -> 0, gw1 -> 1, ...): tests that
    run at once on two workers and use jiyi's default key prefix never see each other's keys."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw") or 0) % 16


REDIS_DB = _worker_db()
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"


# ---------------------------------------------------------------- fixtures


def _ping(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The test Redis; started (no persistence) when it is not running, stopped after."""
    started = False
    if not _ping(REDIS_URL):
        server = shutil.which("redis-server")
        assert server, "Redis is not running on 127.0.0.1:6379 and redis-server is not installed"
        args = "--daemonize yes --bind 127.0.0.1 --port 6379 --appendonly no".split()
        subprocess.run(
            [server, *args, "--save", ""],
            check=True,
            capture_output=True,
        )
        started = True
        deadline = time.monotonic() + 10
        while not _ping(REDIS_URL):
            assert time.monotonic() < deadline, "redis-server did not come up"
            time.sleep(0.05)
    yield REDIS_URL
    # Under pytest-xdist another worker may still be using the server this one started.
    if started and "PYTEST_XDIST_WORKER" not in os.environ:
        admin = redis.Redis.from_url(REDIS_URL)
        try:
            admin.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # it went away, as asked
        finally:
            admin.close()


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def prefix(admin: redis.Redis) -> Iterator[str]:
    """A key prefix of this test only; its keys are deleted afterwards."""
    p = f"jiyi-test-{uuid.uuid4().hex[:12]}"
    yield p
    keys = list(admin.scan_iter(match=f"{p}:*", count=1000))
    if keys:
        admin.delete(*keys)


def keys_of(admin: redis.Redis, prefix: str) -> set[str]:
    return {k.decode() for k in admin.scan_iter(match=f"{prefix}:*", count=1000)}


@pytest.fixture
def store(tmp_path: Path, redis_url: str, prefix: str) -> Iterator[Store]:
    s = RedisCachedStore(SQLiteStore(tmp_path / "conformance.db"), redis_url, prefix=prefix)
    yield s
    s.close()


class TestRedisConformance(StoreConformance):
    """The whole backend suite, through the Redis wrapper."""


def msg(content: str, session: str = "s", tenant: str = TENANT, **kw: Any) -> Message:
    return Message(role="user", content=content, session_id=session, tenant_id=tenant, **kw)


class Proxy:
    """A TCP proxy to Redis that can be cut and restored on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.start()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                down, _ = listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            with self._lock:
                self._socks += [down, up]
            threading.Thread(target=self._pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    p = Proxy(("127.0.0.1", 6379))
    yield p
    p.stop()


# ---------------------------------------------------------------- messages


def test_messages_are_served_from_redis_after_the_first_read(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    with RedisCachedStore(SQLiteStore(tmp_path / "m.db"), redis_url, prefix=prefix) as s:
        s.execute(Write((AppendMessages(tuple(msg(f"m{i}") for i in range(4))),)))
        key = s.session_key(TENANT, "s")
        assert admin.exists(key) == 0  # writes never fill
        first = s.execute(GetMessages(TENANT, "s"))
        assert [m.content for m in first] == ["m0", "m1", "m2", "m3"]
        assert (s.stats.hits, s.stats.misses) == (0, 1)
        assert admin.zcard(key) == 5  # four messages and the "cached" marker
        assert 0 < admin.ttl(key) <= 3600
        assert s.execute(GetMessages(TENANT, "s")) == first
        assert [m.content for m in s.execute(GetMessages(TENANT, "s", last=2))] == ["m2", "m3"]
        assert [m.content for m in s.execute(GetMessages(TENANT, "s", last=9))] == ["m0", "m1", "m2", "m3"]
        assert [m.seq for m in s.execute(GetMessages(TENANT, "s", after_seq=1))] == [2, 3]
        assert s.execute(GetMessages(TENANT, "s", after_seq=3)) == []
        assert [m.seq for m in s.execute(GetMessages(TENANT, "s", after_seq=-7))] == [0, 1, 2, 3]
        assert s.stats.hits == 6 and s.stats.misses == 1
        assert s.execute(GetMessages(TENANT, "s", last=0)) == []
        # An empty session is cached too, and a read of part of a session fills all of it.
        assert s.execute(GetMessages(TENANT, "empty")) == []
        assert s.execute(GetMessages(TENANT, "empty")) == []
        assert admin.zcard(s.session_key(TENANT, "empty")) == 1
        assert s.stats.hits == 7


def test_appends_and_compaction_invalidate_the_session(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    with RedisCachedStore(SQLiteStore(tmp_path / "m.db"), redis_url, prefix=prefix) as s:
        s.execute(Write((AppendMessages(tuple(msg(f"m{i}") for i in range(4))),)))
        key = s.session_key(TENANT, "s")
        s.execute(GetMessages(TENANT, "s"))
        assert admin.exists(key)
        s.execute(Write((AppendMessages((msg("m4"),)),)))
        assert admin.exists(key) == 0
        assert [m.content for m in s.execute(GetMessages(TENANT, "s", last=2))] == ["m3", "m4"]
        summary = msg("summary of m0 m1", seq=0)
        s.execute(Write((DeleteMessages(TENANT, "s", (0, 1)), AppendMessages((summary,)))))
        assert admin.exists(key) == 0
        want = [(0, "summary of m0 m1"), (2, "m2"), (3, "m3"), (4, "m4")]
        assert [(m.seq, m.content) for m in s.execute(GetMessages(TENANT, "s"))] == want
        assert [(m.seq, m.content) for m in s.execute(GetMessages(TENANT, "s"))] == want
        assert s.stats.hits >= 1


def test_a_fill_racing_a_write_does_not_bring_back_stale_messages(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    """Reader A reads the database, writer B commits and invalidates, then A fills: refused."""
    path = tmp_path / "race.db"
    writer = RedisCachedStore(SQLiteStore(path), redis_url, prefix=prefix)

    class WriteDuringRead(SQLiteStore):
        armed = True

        def execute(self, op: Op[Any]) -> Any:
            result = super().execute(op)
            if isinstance(op, GetMessages) and self.armed:
                self.armed = False
                writer.execute(Write((AppendMessages((msg("late"),)),)))
            return result

    with writer, RedisCachedStore(WriteDuringRead(path), redis_url, prefix=prefix) as reader:
        writer.execute(Write((AppendMessages((msg("early"),)),)))
        assert [m.content for m in reader.execute(GetMessages(TENANT, "s"))] == ["early"]
        assert [m.content for m in reader.execute(GetMessages(TENANT, "s"))] == ["early", "late"]
        assert [m.content for m in writer.execute(GetMessages(TENANT, "s"))] == ["early", "late"]


# ---------------------------------------------------------------- items


def test_get_items_is_cached_and_invalidated_by_upsert_purge_and_touch(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    with RedisCachedStore(SQLiteStore(tmp_path / "i.db"), redis_url, prefix=prefix) as s:
        a, b = make_item("alpha"), make_item("beta")
        put(s, a, b)
        key = s.item_key(TENANT, a.id)
        assert s.execute(GetItems(TENANT, (a.id, "nope", b.id))) == [a, b]
        assert (s.stats.hits, s.stats.misses) == (0, 3)
        assert admin.exists(key) and 0 < admin.ttl(key) <= 600
        assert s.execute(GetItems(TENANT, (b.id, a.id, a.id))) == [b, a, a]
        assert s.stats.hits == 2

        s.execute(Write((Touch(TENANT, (a.id,), utcnow()),)))
        assert admin.exists(key) == 0
        assert s.execute(GetItems(TENANT, (a.id,)))[0].access_count == 1
        assert s.execute(GetItems(TENANT, (a.id,)))[0].access_count == 1  # now from Redis

        changed = a.model_copy(update={"content": "alpha, changed", "version": 2})
        s.execute(Write((upsert(changed),)))
        assert admin.exists(key) == 0
        assert s.execute(GetItems(TENANT, (a.id,)))[0].content == "alpha, changed"

        s.execute(Write((purge(changed),)))
        assert admin.exists(key) == 0
        assert s.execute(GetItems(TENANT, (a.id,))) == []
        assert s.execute(GetItems(TENANT, (b.id,))) == [b]


def test_keys_carry_the_tenant_and_tenants_never_see_each_other(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    with RedisCachedStore(SQLiteStore(tmp_path / "t.db"), redis_url, prefix=prefix) as s:
        s.execute(Write((AppendMessages((msg("for t1", tenant="t1"), msg("for t2", tenant="t2"))),)))
        # Separators inside ids cannot make two tenants' keys collide.
        s.execute(Write((AppendMessages((msg("x", tenant="a:b", session="c"),)),)))
        s.execute(Write((AppendMessages((msg("y", tenant="a", session="b:c"),)),)))
        for tenant, session, want in (
            ("t1", "s", "for t1"),
            ("t2", "s", "for t2"),
            ("a:b", "c", "x"),
            ("a", "b:c", "y"),
        ):
            for _ in range(2):
                got = s.execute(GetMessages(tenant, session))
                assert [m.content for m in got] == [want]
        item = make_item("t1 only")
        put(s, item)
        assert s.execute(GetItems(TENANT, (item.id,))) == [item]
        assert s.execute(GetItems("t2", (item.id,))) == []
        assert s.execute(GetItems("t2", (item.id,))) == []
        keys = keys_of(admin, prefix)
        assert f"{prefix}:msg:t1:s" in keys and f"{prefix}:msg:t2:s" in keys
        assert f"{prefix}:msg:a%3Ab:c" in keys and f"{prefix}:msg:a:b%3Ac" in keys
        assert f"{prefix}:item:t1:{item.id}" in keys and f"{prefix}:item:t2:{item.id}" not in keys
        assert all(k.split(":")[1] in {"msg", "item", "gen"} for k in keys)


# ---------------------------------------------------------------- embedding cache


def test_embedding_cache_round_trips_and_is_shared_between_processes(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    rng = np.random.default_rng(3)
    v1, v2 = unit(rng), rng.standard_normal(384).astype(np.float32)
    # Two processes with their own databases, one Redis.
    with (
        RedisCachedStore(SQLiteStore(tmp_path / "a.db"), redis_url, prefix=prefix) as a,
        RedisCachedStore(SQLiteStore(tmp_path / "b.db"), redis_url, prefix=prefix) as b,
    ):
        a.execute(Write((CachePut("m1", (("h1", v1), ("h2", v2))),)))
        assert a.inner.execute(CacheGet("m1", ("h1", "h2"))).keys() == {"h1", "h2"}  # the database first
        raw = admin.hget(a.embedding_key("m1"), "h1")
        assert raw == v1.tobytes() and 0 < admin.ttl(a.embedding_key("m1")) <= 7 * 86400
        got = b.execute(CacheGet("m1", ("h1", "h2", "h3")))
        assert got.keys() == {"h1", "h2"}
        assert got["h1"].dtype == np.float32 and got["h1"].tobytes() == v1.tobytes()
        assert got["h2"].tobytes() == v2.tobytes()
        assert (b.stats.hits, b.stats.misses) == (2, 1)
        assert b.execute(CacheGet("m2", ("h1",))) == {}

        # A miss in Redis is read through the database and fills Redis.
        v3 = unit(rng)
        b.inner.execute(Write((CachePut("m1", (("h3", v3),)),)))
        assert b.execute(CacheGet("m1", ("h3",)))["h3"].tobytes() == v3.tobytes()
        assert admin.hget(b.embedding_key("m1"), "h3") == v3.tobytes()
        assert a.execute(CacheGet("m1", ("h3",)))["h3"].tobytes() == v3.tobytes()
        assert a.stats.hits == 1


# ---------------------------------------------------------------- rate limits


def test_rate_limit_counts_are_shared_between_processes(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    path = tmp_path / "shared.db"
    now = utcnow()
    with (
        RedisCachedStore(SQLiteStore(path), redis_url, prefix=prefix) as a,
        RedisCachedStore(SQLiteStore(path), redis_url, prefix=prefix) as b,
    ):
        since = now - timedelta(minutes=10)
        # A new key: counted by the database once, which tells Redis it knows the whole window.
        assert a.execute(CountEvents("t1:session:s", since)) == 0
        assert a.stats.misses == 1
        a.execute(Write((RecordEvent("t1:session:s", now), RecordEvent("t1:session:s", now))))
        b.execute(Write((RecordEvent("t1:session:s", now + timedelta(seconds=1)),)))
        b.execute(Write((RecordEvent("t1:session:other", now),)))
        assert a.execute(CountEvents("t1:session:s", since)) == 3
        assert b.execute(CountEvents("t1:session:s", since)) == 3
        assert b.execute(CountEvents("t1:session:s", now + timedelta(milliseconds=1))) == 1
        assert (a.stats.hits, b.stats.hits) == (1, 2)
        key = a.rate_key("t1:session:s")
        assert admin.zcard(key) == 4 and 0 < admin.ttl(key) <= 86400  # three events and the marker
        # Proof that Redis answers: the rows are gone from the database, the count is not.
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM rate_events WHERE key = 't1:session:s'")
        assert b.execute(CountEvents("t1:session:s", since)) == 3
        # A window older than Redis keeps events for is the database's.
        assert b.execute(CountEvents("t1:session:s", now - timedelta(days=2))) == 0


def test_a_key_first_seen_by_a_write_is_trusted_after_one_database_count(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    now = utcnow()
    with RedisCachedStore(SQLiteStore(tmp_path / "r.db"), redis_url, prefix=prefix) as s:
        s.execute(Write((RecordEvent("k", now - timedelta(minutes=5)),)))
        s.execute(Write((RecordEvent("k", now),)))
        since = now - timedelta(hours=1)
        assert s.execute(CountEvents("k", since)) == 2  # Redis started after `since`: database
        assert (s.stats.hits, s.stats.misses) == (0, 1)
        assert s.execute(CountEvents("k", since)) == 2
        assert s.stats.hits == 1


# ---------------------------------------------------------------- Redis down


def exercise(s: Store) -> None:
    """Every cached op (and a pass-through one), checked against the expected answers."""
    rng = np.random.default_rng(5)
    item = make_item("down but working")
    q = unit(rng)
    now = utcnow()
    s.execute(
        Write(
            (
                upsert(item, q),
                AppendMessages((msg("hello"), msg("world"))),
                CachePut("m", (("h", q),)),
                RecordEvent("k", now),
            )
        )
    )
    for _ in range(2):
        assert s.execute(GetItems(TENANT, (item.id,))) == [item]
        assert [m.content for m in s.execute(GetMessages(TENANT, "s"))] == ["hello", "world"]
        assert [m.content for m in s.execute(GetMessages(TENANT, "s", last=1))] == ["world"]
        assert s.execute(CacheGet("m", ("h",)))["h"].tobytes() == q.tobytes()
        assert s.execute(CountEvents("k", now - timedelta(minutes=1))) == 1
        assert [i.id for i in s.execute(ListItems(flt())).items] == [item.id]
    s.execute(Write((purge(item), DeleteMessages(TENANT, "s", (0,)))))
    assert s.execute(GetItems(TENANT, (item.id,))) == []
    assert [m.content for m in s.execute(GetMessages(TENANT, "s"))] == ["world"]


def test_redis_down_serves_everything_from_sqlite_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jiyi.redis")
    url = "redis://:secret@127.0.0.1:1/0"
    with RedisCachedStore(SQLiteStore(tmp_path / "d.db"), url, prefix="never") as s:
        exercise(s)
        assert s.stats.degraded
        assert s.stats.errors == 1  # later calls within the retry window do not even try
        assert s.stats.hits == 0
        assert s.stats.last_error and "secret" not in s.stats.last_error
        assert "secret" not in repr(s)
    warnings = [r for r in caplog.records if r.name == "jiyi.redis" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "127.0.0.1:1" in text and "secret" not in text
    assert all("secret" not in r.getMessage() for r in caplog.records)


async def test_redis_down_async(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with RedisCachedStore(
        SQLiteStore(tmp_path / "d.db"), "redis://127.0.0.1:1/0", health_retry_seconds=60
    ) as s:
        await s.aexecute(Write((AppendMessages((msg("a"),)),)))
        assert [m.content for m in await s.aexecute(GetMessages(TENANT, "s"))] == ["a"]
        assert await s.aexecute(CountEvents("k", utcnow())) == 0
        assert s.stats.degraded and s.stats.errors == 1
    assert "127.0.0.1:1" in caplog.text


def test_redis_going_away_mid_run_and_coming_back(
    tmp_path: Path, prefix: str, proxy: Proxy, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jiyi.redis")
    path = tmp_path / "shared.db"
    via_proxy = f"redis://127.0.0.1:{proxy.port}/{REDIS_DB}"
    a = RedisCachedStore(SQLiteStore(path), via_proxy, prefix=prefix, health_retry_seconds=0.2)
    b = RedisCachedStore(SQLiteStore(path), redis_url, prefix=prefix)
    with a, b:
        item = make_item("before the outage")
        put(a, item)
        a.execute(Write((AppendMessages((msg("one"),)),)))
        for s in (a, b):
            assert [m.content for m in s.execute(GetMessages(TENANT, "s"))] == ["one"]
            assert s.execute(GetItems(TENANT, (item.id,))) == [item]
        assert not a.stats.degraded

        proxy.stop()  # Redis goes away for A only
        a.execute(Write((AppendMessages((msg("two"),)),)))  # committed; the invalidation waits
        changed = item.model_copy(update={"content": "during the outage", "version": 2})
        a.execute(Write((upsert(changed),)))
        assert [m.content for m in a.execute(GetMessages(TENANT, "s"))] == ["one", "two"]
        assert a.execute(GetItems(TENANT, (item.id,))) == [changed]
        assert (a.stats.degraded, a.stats.errors) == (True, 1)  # tried once, then waits to retry
        assert f"127.0.0.1:{proxy.port}" in caplog.text

        proxy.start()
        time.sleep(0.3)
        # A's next call delivers the held-back invalidations first.
        assert [m.content for m in a.execute(GetMessages(TENANT, "s"))] == ["one", "two"]
        assert not a.stats.degraded
        assert "reachable again" in caplog.text
        assert [m.content for m in b.execute(GetMessages(TENANT, "s"))] == ["one", "two"]
        assert b.execute(GetItems(TENANT, (item.id,))) == [changed]


def test_a_killed_connection_is_replaced_on_the_next_call(
    tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis
) -> None:
    client = redis.Redis.from_url(redis_url, client_name=prefix)
    s = RedisCachedStore(SQLiteStore(tmp_path / "k.db"), client=client, prefix=prefix)
    with s:
        s.execute(Write((AppendMessages((msg("one"),)),)))
        assert [m.content for m in s.execute(GetMessages(TENANT, "s"))] == ["one"]
        killed = 0
        for info in admin.client_list():
            if info.get("name") == prefix:
                admin.client_kill_filter(_id=info["id"])
                killed += 1
        assert killed >= 1
        assert [m.content for m in s.execute(GetMessages(TENANT, "s"))] == ["one"]
        assert s.stats.hits == 1
    assert client.ping()  # a client given to the wrapper is the caller's to close
    client.close()


# ---------------------------------------------------------------- Memory end to end


def test_memory_end_to_end(tmp_path: Path, redis_url: str, prefix: str, admin: redis.Redis) -> None:
    store = RedisCachedStore(SQLiteStore(tmp_path / "mem.db"), redis_url, prefix=prefix)
    with Memory(store, background=False) as mem:
        added = mem.add("我喜欢用 Python 写代码", memory_type="preference", user_id="alice").item
        assert added is not None
        assert mem.get(added.id) == added
        assert mem.get(added.id) == added
        hits = mem.search("Python", user_id="alice")
        assert [h.item.id for h in hits] == [added.id]
        mem.remember(
            [("user", "I live in Berlin"), ("assistant", "Noted")], session_id="chat", user_id="alice"
        )
        mem.remember([("user", "I work as a nurse")], session_id="chat", user_id="alice")
        assert [m.content for m in mem.messages("chat")] == ["I live in Berlin", "Noted", "I work as a nurse"]
        assert [m.content for m in mem.messages("chat", last=1)] == ["I work as a nurse"]
        mem.process_jobs()
        keys = keys_of(admin, prefix)
        assert any(k.startswith(f"{prefix}:msg:") for k in keys)
        assert any(k.startswith(f"{prefix}:emb:") for k in keys)
        assert store.stats.hits > 0 and not store.stats.degraded
    assert store._closed


async def test_async_memory_end_to_end(tmp_path: Path, redis_url: str, prefix: str) -> None:
    store = RedisCachedStore(SQLiteStore(tmp_path / "amem.db"), redis_url, prefix=prefix)
    async with AsyncMemory(store) as mem:
        added = (await mem.add("I prefer tea over coffee", user_id="bob", memory_type="preference")).item
        assert added is not None
        assert await mem.get(added.id) == added
        assert await mem.get(added.id) == added
        await mem.add_messages("chat", [("user", "hello"), ("assistant", "hi")])
        assert [m.content for m in await mem.messages("chat")] == ["hello", "hi"]
        assert [m.content for m in await mem.messages("chat")] == ["hello", "hi"]
        assert store.stats.hits >= 2
