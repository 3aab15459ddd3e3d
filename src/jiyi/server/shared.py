"""What replicas of ``jiyi serve`` share through Redis: the per-key rate limit and the
maintenance lease.

One server alone keeps both in process (:class:`~jiyi.server.limits.RateLimiter`, a
scheduler that always runs). N servers on one store and one Redis (``--redis``) must
agree, or a key gets N times its limit and every tenant's lifecycle pass runs N times:

* :class:`RedisRateLimiter` is the same token bucket, kept in one Redis hash per key
  (``jiyi:apikey-rate:KEY``, apart from the cache's ``jiyi:rate:`` event sets) and
  updated by a Lua script on Redis's own clock, so every replica takes from one bucket.
  When Redis fails the replica falls back to its own in-process bucket (logged once per
  outage on ``jiyi.redis``): a key then gets at most N times its limit, never unlimited.
* :class:`RedisLease` is ``SET key owner NX PX ttl``: the replica that sets it runs the
  pass, the others skip it until the lease runs out. When Redis fails nobody takes the
  lease, so the pass is skipped (and logged) rather than run twice.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from jiyi.server.limits import RateLimiter, rate_limited

log = logging.getLogger("jiyi.redis")

# KEYS[1] the bucket; ARGV capacity, tokens per second. Returns "" when allowed, else the
# seconds to wait, as a string (Lua numbers come back truncated to integers otherwise).
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or capacity
local ts = tonumber(b[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = ''
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = tostring((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return wait
"""


def redis_client(url: str, *, timeout: float = 1.0) -> Redis:
    """An asyncio Redis client for ``url`` that gives up after ``timeout`` seconds."""
    client: Redis = Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    return client


class _Outage:
    """Logs a Redis failure once until Redis answers again."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.down = False

    def failed(self, what: str, exc: BaseException) -> None:
        if not self.down:
            self.down = True
            log.warning("Redis at %s failed (%s) during %s", self.where, type(exc).__name__, what)

    def answered(self) -> None:
        if self.down:
            self.down = False
            log.warning("Redis at %s answers again", self.where)


def _where(client: Redis) -> str:
    kw: dict[str, Any] = client.connection_pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}")


class RedisRateLimiter:
    """A token bucket per key shared by every replica: ``per_minute`` requests a minute."""

    def __init__(self, client: Redis, per_minute: int, *, prefix: str = "jiyi") -> None:
        self.local = RateLimiter(per_minute)  # raises for per_minute < 1; the fallback
        self.capacity = self.local.capacity
        self.rate = self.local.rate
        self.client = client
        self.prefix = prefix
        self._take = client.register_script(_TAKE)
        self._outage = _Outage(_where(client))

    async def check(self, key: str) -> float | None:
        """Take one token for ``key``; None if allowed, else the seconds to wait."""
        try:
            wait = await self._take(
                keys=[f"{self.prefix}:apikey-rate:{key}"], args=[self.capacity, self.rate]
            )
        except RedisError as exc:
            self._outage.failed("a rate-limit check", exc)
            return self.local.check(key)
        self._outage.answered()
        text = wait.decode() if isinstance(wait, bytes) else str(wait)
        return float(text) if text else None

    async def aenforce(self, key: str) -> None:
        wait = await self.check(key)
        if wait is not None:
            raise rate_limited(self.capacity, wait)


class RedisLease:
    """Named leases with a time to live: at most one holder per name at a time."""

    def __init__(self, client: Redis, *, owner: str | None = None, prefix: str = "jiyi") -> None:
        self.client = client
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.prefix = prefix
        self._outage = _Outage(_where(client))

    async def take(self, name: str, seconds: float) -> bool:
        """True if this replica now holds ``name`` for ``seconds``; False if another does
        (or Redis did not answer: then nobody does)."""
        ms = max(1, math.ceil(seconds * 1000))
        try:
            taken = await self.client.set(f"{self.prefix}:lease:{name}", self.owner, nx=True, px=ms)
        except RedisError as exc:
            self._outage.failed(f"taking the lease {name!r}", exc)
            return False
        self._outage.answered()
        return bool(taken)

    async def holder(self, name: str) -> str | None:
        """Who holds ``name`` now (None when nobody or Redis is down)."""
        try:
            value = await self.client.get(f"{self.prefix}:lease:{name}")
        except RedisError:
            return None
        return value.decode() if isinstance(value, bytes) else value


__all__ = ["RedisLease", "RedisRateLimiter", "redis_client"]
