"""Redis in front of any store: hot sessions, the embedding cache, shared rate-limit
counters and hot memories, each with a TTL. The wrapped store stays the source of truth.

:class:`RedisCachedStore` is a wrapper (like an embedder cache), not a backend: it takes
any :class:`~jiyi.store.base.Store` and answers some reads from Redis::

    store = RedisCachedStore(SQLiteStore("memory.db"), "redis://127.0.0.1:6379/0")
    memory = Memory(store)

What is cached, and how it stays right:

* ``GetMessages`` — a session's messages in a sorted set (score = ``seq``) per
  (tenant, session), filled from the wrapped store on a miss (``session_ttl``).
* ``GetItems`` — item JSON per (tenant, id) (``item_ttl``).
* ``CacheGet`` — embeddings as raw float32 in a hash per model (``cache_ttl``); the
  cache is keyed by text hash, so it is shared by every tenant, as in the database.
* ``CountEvents`` — a sorted set per rate key (score = event time in microseconds) that
  every process shares (``event_ttl``).

Every write goes to the wrapped store first; Redis is touched only after it committed,
so Redis never holds something the database does not. Messages and items are then
*invalidated*: the cached key is deleted and a per-key generation token is replaced.
A reader that missed records the generation before it reads the database and fills
Redis only if the token is unchanged (one Lua script), so a fill racing a write cannot
put stale data back.

A rate-key set remembers (as a member with score ``+inf``) the time from which it holds
every event; it answers only counts since that time and within ``event_ttl``, the wrapped
store answers the rest. After such a fallback the wrapper compares the store's count for
the whole ``event_ttl`` window with the set's: every event in the set was committed first,
so equal counts mean the set is complete and is trusted from then on (a new key: both
zero). Rate events written by a process that does not use this wrapper are not seen.

When Redis is unreachable or fails, every operation is served by the wrapped store,
a warning is logged once per outage (logger ``jiyi.redis``, naming host and port, never a
password), :attr:`RedisCachedStore.stats` says so, and Redis is tried again after
``health_retry_seconds``. Invalidations that could not be delivered are kept and sent
first when Redis is back. Another process that reached Redis while this one could not
may serve a stale entry until then, or at most for the key's TTL.

The logic lives once, in generators that yield effects (as in :mod:`jiyi.effects`), run
by :func:`jiyi.driver.drive` / :func:`jiyi.driver.adrive` with a handler table: the sync
one runs Redis and the wrapped store in the calling thread, the async one awaits the
wrapped store's ``aexecute`` and runs the (fast) Redis calls on a small thread pool.
Redis Cluster is not supported (scripts touch several keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Final, TypeVar, cast
from urllib.parse import quote

import numpy as np
import redis
from pydantic import ValidationError
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.exceptions import RedisError
from redis.retry import Retry

from jiyi.driver import AsyncHandler, Handler, adrive, drive
from jiyi.errors import InvalidInput, StoreError
from jiyi.model import MemoryItem, as_utc, load_stored, utcnow
from jiyi.session.model import Message
from jiyi.store.base import (
    AppendMessages,
    CacheGet,
    CachePut,
    CountEvents,
    DeleteMessages,
    GetItems,
    GetMessages,
    Op,
    Purge,
    RecordEvent,
    Store,
    Touch,
    Upsert,
    Vector,
    Write,
)

__all__ = ["RedisCacheStats", "RedisCachedStore"]

R = TypeVar("R")

logger = logging.getLogger("jiyi.redis")

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_SCORE: Final = 2**53  # event times are integer microseconds; doubles are exact below this
_CLOCK_SKEW_US: Final = 2_000_000  # a rate set is trusted from 2 s after it started
_GEN_TTL: Final = 86_400
_MAX_PENDING: Final = 10_000  # undelivered invalidations kept; beyond, the whole prefix is dropped
_MAX_SESSION_FILL: Final = 10_000  # longer sessions are served by the wrapped store

# ---------------------------------------------------------------- Lua scripts

# KEYS: messages set, generation. ARGV: "last" | "after", N.
# -> {generation} on a miss, {generation, members} on a hit ("" is the "cached" marker).
_MSG_GET = """
local gen = redis.call('GET', KEYS[2]) or ''
if redis.call('EXISTS', KEYS[1]) == 0 then return {gen} end
if ARGV[1] == 'last' then
  return {gen, redis.call('ZRANGE', KEYS[1], -tonumber(ARGV[2]), -1)}
end
return {gen, redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf')}
"""

# KEYS: messages set, generation. ARGV: generation seen, ttl, then (seq, json) pairs.
_MSG_FILL = """
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[1], -1, '')
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: n item keys, then their n generations. -> n values ('' = absent), n generations.
_ITEMS_GET = """
local n = #KEYS / 2
local out = {}
for i = 1, 2 * n do out[i] = redis.call('GET', KEYS[i]) or '' end
return out
"""

# KEYS: n item keys, n generations. ARGV: ttl, n generations seen, n values.
_ITEMS_FILL = """
local n = #KEYS / 2
local filled = 0
for i = 1, n do
  if (redis.call('GET', KEYS[n + i]) or '') == ARGV[1 + i] then
    redis.call('SET', KEYS[i], ARGV[1 + n + i], 'EX', ARGV[1])
    filled = filled + 1
  end
end
return filled
"""

# KEYS: n data keys, their n generations, then keys to delete. ARGV: token, ttl, n.
_INVALIDATE = """
local n = tonumber(ARGV[3])
for i = 1, n do
  redis.call('DEL', KEYS[i])
  redis.call('SET', KEYS[n + i], ARGV[1], 'EX', ARGV[2])
end
for i = 2 * n + 1, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
"""

# KEYS: hash. ARGV: ttl, then (field, value) pairs.
_EMB_PUT = """
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# KEYS: rate set. ARGV: start marker (us), ttl (s), prune below (us), then (score, member).
_RATE_RECORD = """
if redis.call('ZCOUNT', KEYS[1], '+inf', '+inf') == 0 then
  redis.call('ZADD', KEYS[1], '+inf', 'from:' .. ARGV[1])
end
for i = 4, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: rate set. ARGV: since (us), oldest trusted (us), max score.
# -> the count; -1 when since is older than the trusted window; -2 when the set is
# unknown or started after since (the wrapped store must answer, see _RATE_REPAIR).
_RATE_COUNT = """
local since = tonumber(ARGV[1])
if since < tonumber(ARGV[2]) then return -1 end
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf', 'LIMIT', 0, 1)
if #m == 0 or since < tonumber(string.sub(m[1], 6)) then return -2 end
return redis.call('ZCOUNT', KEYS[1], ARGV[1], ARGV[3])
"""

# KEYS: rate set. ARGV: window start (us), the store's count since then, max score, ttl.
# Every event in the set was committed to the store first, so when the set holds as many
# events of the window as the store, it holds all of them: trust it from the window start.
_RATE_REPAIR = """
if redis.call('ZCOUNT', KEYS[1], ARGV[1], ARGV[3]) ~= tonumber(ARGV[2]) then return 0 end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf')) do
  redis.call('ZREM', KEYS[1], m)
end
redis.call('ZADD', KEYS[1], '+inf', 'from:' .. ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


# ---------------------------------------------------------------- effects


@dataclass(frozen=True)
class _Inner:
    """Run an op on the wrapped store."""

    op: Op[Any]


@dataclass(frozen=True)
class _Redis:
    """One Redis round trip: a script, or ``HMGET keys[0] *args`` when ``script`` is None.

    ``pending``: (key, generation key or "") pairs to invalidate later if this call
    does not happen, so that nothing stale outlives an outage."""

    script: Script | None
    keys: tuple[str, ...]
    args: tuple[str | bytes | int | float, ...]
    pending: tuple[tuple[str, str], ...] = ()


class _Down:
    """What a plan receives for a Redis call that did not happen."""

    def __repr__(self) -> str:
        return "<redis down>"


_DOWN: Final = _Down()

_Effect = _Inner | _Redis
_Plan = Generator[_Effect, Any, Any]


@dataclass
class RedisCacheStats:
    """Counters of one :class:`RedisCachedStore` (this process only).

    ``hits``/``misses`` count looked-up entries (items, embeddings) or whole answers
    (a session's messages, an event count); ``errors`` counts failed Redis calls."""

    hits: int = 0
    misses: int = 0
    errors: int = 0
    degraded: bool = False
    last_error: str | None = None


def _micros(value: datetime) -> int:
    return (as_utc(value) - _EPOCH) // timedelta(microseconds=1)


def _at(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _q(part: str) -> str:
    return quote(part, safe="")


def _slice(messages: list[Message], op: GetMessages) -> list[Message]:
    if op.last is not None:
        return messages[-op.last :] if op.last > 0 else []
    after = -1 if op.after_seq is None else op.after_seq
    return [m for m in messages if m.seq is not None and m.seq > after]


class RedisCachedStore(Store):
    """A :class:`Store` that keeps hot data of ``inner`` in Redis (see the module doc).

    Give ``redis_url`` (``redis://[:password@]host:port/db``, ``rediss://`` or
    ``unix://``) or a ready ``client`` (a sync :class:`redis.Redis` with
    ``decode_responses=False``; it is not closed by :meth:`close`). TTLs are seconds.
    """

    def __init__(
        self,
        inner: Store,
        redis_url: str | None = None,
        *,
        client: redis.Redis | None = None,
        prefix: str = "jiyi",
        session_ttl: int = 3600,
        cache_ttl: int = 7 * 86400,
        item_ttl: int = 600,
        event_ttl: int = 86400,
        health_retry_seconds: float = 5.0,
        socket_timeout: float = 1.0,
    ) -> None:
        if not isinstance(inner, Store):
            raise InvalidInput(f"inner must be a jiyi Store, not {type(inner).__name__}", field="inner")
        if (client is None) == (redis_url is None):
            raise InvalidInput("give exactly one of redis_url and client", field="redis_url")
        for name, ttl in (
            ("session_ttl", session_ttl),
            ("cache_ttl", cache_ttl),
            ("item_ttl", item_ttl),
            ("event_ttl", event_ttl),
        ):
            if ttl < 1:
                raise InvalidInput(f"{name} must be at least 1 second", field=name)
        if not prefix:
            raise InvalidInput("prefix must not be empty", field="prefix")
        if client is None:
            assert redis_url is not None
            try:
                client = redis.Redis.from_url(
                    redis_url,
                    socket_timeout=socket_timeout,
                    socket_connect_timeout=socket_timeout,
                    retry=Retry(NoBackoff(), 1),  # once, for a connection the server dropped
                    health_check_interval=30,
                )
            except ValueError as exc:
                raise InvalidInput(f"not a Redis URL: {exc}", field="redis_url") from None
            self._owns_client = True
        else:
            self._owns_client = False
        kwargs = client.connection_pool.connection_kwargs
        if kwargs.get("decode_responses"):
            raise InvalidInput("the Redis client must use decode_responses=False", field="client")
        self.inner = inner
        self.client: redis.Redis = client
        self.prefix = prefix
        self.session_ttl = int(session_ttl)
        self.cache_ttl = int(cache_ttl)
        self.item_ttl = int(item_ttl)
        self.event_ttl = int(event_ttl)
        self.health_retry_seconds = float(health_retry_seconds)
        self.stats = RedisCacheStats()
        self.where = (
            str(kwargs["path"])
            if "path" in kwargs
            else f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
        )
        self._secret = str(kwargs.get("password") or "")
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._pending: set[tuple[str, str]] = set()
        self._overflow = False
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="jiyi-redis")
        self._msg_get = client.register_script(_MSG_GET)
        self._msg_fill = client.register_script(_MSG_FILL)
        self._items_get = client.register_script(_ITEMS_GET)
        self._items_fill = client.register_script(_ITEMS_FILL)
        self._invalidate = client.register_script(_INVALIDATE)
        self._emb_put = client.register_script(_EMB_PUT)
        self._rate_record = client.register_script(_RATE_RECORD)
        self._rate_count = client.register_script(_RATE_COUNT)
        self._rate_repair = client.register_script(_RATE_REPAIR)

    def __enter__(self) -> RedisCachedStore:
        return self

    def __repr__(self) -> str:
        return f"RedisCachedStore({self.inner!r}, redis={self.where!r}, prefix={self.prefix!r})"

    # ------------------------------------------------------------ keys

    def session_key(self, tenant_id: str, session_id: str) -> str:
        return f"{self.prefix}:msg:{_q(tenant_id)}:{_q(session_id)}"

    def item_key(self, tenant_id: str, item_id: str) -> str:
        return f"{self.prefix}:item:{_q(tenant_id)}:{_q(item_id)}"

    def embedding_key(self, model_id: str) -> str:
        return f"{self.prefix}:emb:{_q(model_id)}"

    def rate_key(self, key: str) -> str:
        return f"{self.prefix}:rate:{_q(key)}"

    def _gen(self, key: str) -> str:
        return f"{self.prefix}:gen:{key[len(self.prefix) + 1 :]}"

    # ------------------------------------------------------------ drivers

    def execute(self, op: Op[R]) -> R:
        self._check_open()
        plan = self._plan(op)
        if plan is None:
            return self.inner.execute(op)
        return cast(R, drive(plan, self._handlers))

    async def aexecute(self, op: Op[R]) -> R:
        self._check_open()
        plan = self._plan(op)
        if plan is None:
            return await self.inner.aexecute(op)
        return cast(R, await adrive(plan, self._async_handlers))

    @cached_property
    def _handlers(self) -> dict[type, Handler]:
        return {_Inner: lambda e: self.inner.execute(e.op), _Redis: self._call}

    @cached_property
    def _async_handlers(self) -> dict[type, AsyncHandler]:
        return {_Inner: lambda e: self.inner.aexecute(e.op), _Redis: self._acall}

    async def _acall(self, effect: _Redis) -> Any:
        """:meth:`_call` on the thread pool (at once, without I/O, while Redis is down)."""
        if not self._available():
            return self._call(effect)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, effect)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.inner.close()
        finally:
            self._pool.shutdown(wait=True)
            if self._owns_client:
                self.client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self!r} is closed")

    # ------------------------------------------------------------ Redis calls and health

    def _available(self) -> bool:
        return not self.stats.degraded or time.monotonic() >= self._retry_at

    def _call(self, effect: _Redis) -> Any:
        """Run one Redis call; ``_DOWN`` instead of raising when Redis cannot answer."""
        if not self._available():
            self._defer(effect.pending)
            return _DOWN
        try:
            self._flush_pending()
            if effect.script is None:
                result = self.client.hmget(effect.keys[0], list(effect.args))
            else:
                result = effect.script(keys=list(effect.keys), args=list(effect.args))
        except (RedisError, OSError) as exc:
            self._failed(exc)
            self._defer(effect.pending)
            return _DOWN
        if self.stats.degraded:
            with self._lock:
                was, self.stats.degraded = self.stats.degraded, False
            if was:
                logger.info("Redis at %s is reachable again", self.where)
        return result

    def _failed(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        if self._secret:
            text = text.replace(self._secret, "***")
        with self._lock:
            self.stats.errors += 1
            self.stats.last_error = text
            first = not self.stats.degraded
            self.stats.degraded = True
            self._retry_at = time.monotonic() + self.health_retry_seconds
        if first:
            logger.warning(
                "Redis at %s is unavailable (%s); serving from the wrapped store, retrying in %gs",
                self.where,
                text,
                self.health_retry_seconds,
            )

    def _defer(self, pending: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            if self._overflow:
                return
            self._pending.update(pending)
            if len(self._pending) > _MAX_PENDING:
                self._pending.clear()
                self._overflow = True

    def _flush_pending(self) -> None:
        """Deliver the invalidations an outage held back (raises if Redis fails)."""
        if not self._pending and not self._overflow:
            return
        with self._lock:
            pending, self._pending = self._pending, set()
            overflow, self._overflow = self._overflow, False
        try:
            if overflow:
                batch: list[bytes] = []
                pattern = self.prefix.replace("[", "\\[").replace("*", "\\*").replace("?", "\\?") + ":*"
                for key in self.client.scan_iter(match=pattern, count=1000):
                    batch.append(key)
                    if len(batch) >= 1000:
                        self.client.unlink(*batch)
                        batch.clear()
                if batch:
                    self.client.unlink(*batch)
            pairs = sorted(p for p in pending if p[1])
            plain = sorted(k for k, g in pending if not g)
            if pairs or plain:
                keys = [k for k, _ in pairs] + [g for _, g in pairs] + plain
                self._invalidate(keys=keys, args=[uuid.uuid4().hex, _GEN_TTL, len(pairs)])
        except BaseException:
            with self._lock:
                if overflow:
                    self._overflow = True
            self._defer(pending)
            raise

    def _count(self, hits: int = 0, misses: int = 0) -> None:
        with self._lock:
            self.stats.hits += hits
            self.stats.misses += misses

    # ------------------------------------------------------------ plans

    def _plan(self, op: Op[Any]) -> _Plan | None:
        match op:
            case GetMessages():
                return self._plan_messages(op)
            case GetItems():
                return self._plan_items(op)
            case CacheGet():
                return self._plan_cache_get(op)
            case CountEvents():
                return self._plan_count(op)
            case Write():
                return self._plan_write(op)
        return None

    def _plan_messages(self, op: GetMessages) -> _Plan:
        if op.last is not None and op.last <= 0:
            return (yield _Inner(op))
        key = self.session_key(op.tenant_id, op.session_id)
        gen = self._gen(key)
        if op.last is not None:
            mode, n = "last", op.last
        else:
            mode, n = "after", max(-1, -1 if op.after_seq is None else op.after_seq)
        res = yield _Redis(self._msg_get, (key, gen), (mode, n))
        if res is _DOWN:
            return (yield _Inner(op))
        if len(res) > 1:
            try:
                found = [load_stored(Message, raw) for raw in res[1] if raw != b""]
            except ValidationError:
                pass  # not ours: refill below
            else:
                self._count(hits=1)
                return found
        self._count(misses=1)
        messages: list[Message] = yield _Inner(GetMessages(op.tenant_id, op.session_id))
        if len(messages) <= _MAX_SESSION_FILL and all(m.seq is not None for m in messages):
            args: list[str | bytes | int | float] = [res[0], self.session_ttl]
            for m in messages:
                args += [cast(int, m.seq), m.model_dump_json()]
            yield _Redis(self._msg_fill, (key, gen), tuple(args))
        return _slice(messages, op)

    def _plan_items(self, op: GetItems) -> _Plan:
        if not op.ids:
            return (yield _Inner(op))
        ids = list(dict.fromkeys(op.ids))
        keys = [self.item_key(op.tenant_id, i) for i in ids]
        gens = [self._gen(k) for k in keys]
        res = yield _Redis(self._items_get, (*keys, *gens), ())
        if res is _DOWN:
            return (yield _Inner(op))
        n = len(ids)
        found: dict[str, MemoryItem] = {}
        for i, item_id in enumerate(ids):
            if res[i]:
                with contextlib.suppress(ValidationError):
                    found[item_id] = load_stored(MemoryItem, res[i])
        missing = [i for i in range(n) if ids[i] not in found]
        self._count(hits=n - len(missing), misses=len(missing))
        if missing:
            got: list[MemoryItem] = yield _Inner(GetItems(op.tenant_id, tuple(ids[i] for i in missing)))
            by_id = {item.id: item for item in got}
            fill = [i for i in missing if ids[i] in by_id]
            if fill:
                args: list[str | bytes | int | float] = [self.item_ttl]
                args += [res[n + i] for i in fill]
                args += [by_id[ids[i]].model_dump_json() for i in fill]
                yield _Redis(
                    self._items_fill, (*(keys[i] for i in fill), *(gens[i] for i in fill)), tuple(args)
                )
            found.update(by_id)
        return [found[i] for i in op.ids if i in found]

    def _plan_cache_get(self, op: CacheGet) -> _Plan:
        if not op.hashes:
            return (yield _Inner(op))
        hashes = list(dict.fromkeys(op.hashes))
        key = self.embedding_key(op.model_id)
        res = yield _Redis(None, (key,), tuple(hashes))
        if res is _DOWN:
            return (yield _Inner(op))
        found: dict[str, Vector] = {
            h: np.frombuffer(raw, dtype=np.float32) for h, raw in zip(hashes, res, strict=True) if raw
        }
        missing = [h for h in hashes if h not in found]
        self._count(hits=len(found), misses=len(missing))
        if missing:
            got: dict[str, Vector] = yield _Inner(CacheGet(op.model_id, tuple(missing)))
            if got:
                yield self._emb_effect(op.model_id, got.items())
            found.update(got)
        return {h: found[h] for h in hashes if h in found}

    def _plan_count(self, op: CountEvents) -> _Plan:
        since = _micros(op.since)
        if abs(since) >= _MAX_SCORE:
            return (yield _Inner(op))
        key = self.rate_key(op.key)
        trusted = _micros(utcnow()) - self.event_ttl * 1_000_000
        res = yield _Redis(self._rate_count, (key,), (since, trusted, _MAX_SCORE))
        if res is _DOWN:
            return (yield _Inner(op))
        if int(res) >= 0:
            self._count(hits=1)
            return int(res)
        self._count(misses=1)
        count: int = yield _Inner(op)
        if int(res) == -2:
            # Learn whether the set holds every event of the window (a new key: none yet).
            window = count if since == trusted else (yield _Inner(CountEvents(op.key, _at(trusted))))
            yield _Redis(self._rate_repair, (key,), (trusted, window, _MAX_SCORE, self.event_ttl))
        return count

    def _plan_write(self, op: Write) -> _Plan:
        stale: set[str] = set()
        embeddings: dict[str, list[tuple[str, Vector]]] = {}
        events: dict[str, list[int]] = {}
        for change in op.changes:
            match change:
                case Upsert():
                    stale.add(self.item_key(change.item.tenant_id, change.item.id))
                case Purge():
                    stale.add(self.item_key(change.tenant_id, change.item_id))
                case Touch():
                    stale.update(self.item_key(change.tenant_id, i) for i in change.ids)
                case AppendMessages():
                    stale.update(self.session_key(m.tenant_id, m.session_id) for m in change.messages)
                case DeleteMessages():
                    stale.add(self.session_key(change.tenant_id, change.session_id))
                case CachePut():
                    embeddings.setdefault(change.model_id, []).extend(change.entries)
                case RecordEvent():
                    score = max(-_MAX_SCORE, min(_MAX_SCORE, _micros(change.at)))
                    events.setdefault(change.key, []).append(score)
        pairs = tuple((k, self._gen(k)) for k in sorted(stale))
        invalidate = _Redis(
            self._invalidate,
            (*(k for k, _ in pairs), *(g for _, g in pairs)),
            (uuid.uuid4().hex, _GEN_TTL, len(pairs)),
            pending=pairs,
        )
        try:
            yield _Inner(op)
        except Exception:
            if pairs:  # the outcome may be unknown (a lost commit reply): drop them anyway
                yield invalidate
            raise
        if pairs:
            yield invalidate
        for model_id, entries in embeddings.items():
            yield self._emb_effect(model_id, entries)
        now = _micros(utcnow())
        for event_key, scores in events.items():
            key = self.rate_key(event_key)
            args: list[str | bytes | int | float] = [
                now + _CLOCK_SKEW_US,
                self.event_ttl,
                now - self.event_ttl * 1_000_000,
            ]
            for score in scores:
                args += [score, f"{score}:{uuid.uuid4().hex}"]
            # Undelivered, the set would miss an event: drop it so counts fall back to the store.
            yield _Redis(self._rate_record, (key,), tuple(args), pending=((key, ""),))
        return None

    def _emb_effect(self, model_id: str, entries: Iterable[tuple[str, Vector]]) -> _Redis:
        args: list[str | bytes | int | float] = [self.cache_ttl]
        for h, vector in entries:
            args += [h, np.ascontiguousarray(vector, dtype=np.float32).tobytes()]
        return _Redis(self._emb_put, (self.embedding_key(model_id),), tuple(args))
