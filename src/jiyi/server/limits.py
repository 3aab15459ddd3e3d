"""In-process protections: a request body size limit and a per-key rate limit (shared
by replicas through Redis in :mod:`jiyi.server.shared`)."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jiyi.server.errors import ApiError


class BodyTooLarge(ApiError):
    """Raised from ``receive`` once the body passes the limit (FastAPI re-raises HTTP errors)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than {limit} bytes", code="too_large")


class BodySizeLimit:
    """Refuse bodies above ``max_bytes``: at once when Content-Length says so, otherwise
    as soon as the streamed body passes the limit (chunked uploads cannot slip by)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": "too_large",
                    "message": f"request body is larger than {self.max_bytes} bytes",
                    "field": None,
                    "problems": [f"request body is larger than {self.max_bytes} bytes"],
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(send)


class Limiter(Protocol):
    """A per-key rate limit: raises the 429 :class:`ApiError` once ``key`` is past it."""

    async def aenforce(self, key: str) -> None: ...


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests a minute, bursts up to the same."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def check(self, key: str) -> float | None:
        """Take one token for ``key``; None if allowed, else the seconds to wait."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return None
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def enforce(self, key: str) -> None:
        wait = self.check(key)
        if wait is not None:
            raise rate_limited(self.capacity, wait)

    async def aenforce(self, key: str) -> None:
        """:meth:`enforce`, with the signature of the shared limiter (jiyi.server.shared)."""
        self.enforce(key)


def rate_limited(capacity: float, wait: float) -> ApiError:
    """The 429 for a key past its ``capacity`` requests a minute, to retry in ``wait`` s."""
    return ApiError(
        429,
        f"rate limit of {int(capacity)} requests a minute exceeded; retry in {math.ceil(wait)} s",
        code="rate_limited",
        headers={"Retry-After": str(max(1, math.ceil(wait)))},
    )
