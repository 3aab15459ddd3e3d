"""HTTP helpers shared by the OpenAI-compatible clients (embeddings and chat)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import os
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, ClassVar, Self

import httpx

from jiyi.errors import ConfigError, JiyiError

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Servers sometimes echo large bodies (HTML error pages); keep error messages readable.
_MAX_ERROR_CHARS = 300


def env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Parse ``Retry-After`` (seconds or an HTTP date); ``None`` when absent or unreadable."""
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def server_message(response: httpx.Response) -> str:
    """The server's own explanation: OpenAI's ``{"error": {"message"}}`` or the raw text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        if message is None:
            message = body.get("message") or body.get("detail")
    if message is None:
        message = response.text
    text = " ".join(str(message).split())
    if len(text) > _MAX_ERROR_CHARS:
        text = text[:_MAX_ERROR_CHARS] + "..."
    return text or "(empty body)"


class OpenAICompatibleClient:
    """What the OpenAI-compatible embeddings and chat clients share: configuration checks,
    the HTTP client's lifecycle, headers, key redaction, and the send-and-retry loop.

    Retries 408, 429, 5xx, timeouts and connection errors up to ``max_retries`` times,
    waiting ``backoff * 2**attempt`` seconds or the server's ``Retry-After``, at most
    ``max_wait`` seconds; other statuses fail at once. Subclasses build payloads and parse
    successful answers; only the few lines that send and sleep differ between sync and async.
    """

    _PATH: ClassVar[str]
    """Endpoint below the base URL, e.g. ``/embeddings``."""
    _LABEL: ClassVar[str]
    """Names the setting in configuration errors: ``embedding base_url must ...``."""
    _REQUEST: ClassVar[str]
    """Names the call in failures: ``embedding request to ... failed``."""
    _ENV_BASE: ClassVar[tuple[str, ...]]
    _ENV_KEY: ClassVar[tuple[str, ...]]
    _ERROR: ClassVar[type[JiyiError]]

    def __init__(
        self,
        model: str,
        *,
        model_hint: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_wait: float,
        client: httpx.Client | None,
        async_client: httpx.AsyncClient | None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{type(self).__name__} needs a model name, e.g. {model_hint!r}")
        if not timeout > 0:
            raise ConfigError(f"timeout must be positive, not {timeout!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be 0 or more, not {max_retries!r}")
        if backoff < 0 or max_wait < 0:
            raise ConfigError("backoff and max_wait must not be negative")
        self._model = model.strip()
        url = base_url if base_url is not None else env(*self._ENV_BASE)
        self._base_url = (url or DEFAULT_BASE_URL).rstrip("/")
        if not self._base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{self._LABEL} base_url must start with http:// or https://, not {self._base_url!r}"
            )
        try:
            # For messages: no userinfo or query string, which may hold credentials.
            self._display_url = str(httpx.URL(self._url).copy_with(username=None, password=None, query=None))
        except httpx.InvalidURL as exc:
            raise ConfigError(f"{self._LABEL} base_url is not a valid URL: {exc}") from exc
        self._api_key = api_key if api_key is not None else env(*self._ENV_KEY)
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._backoff = float(backoff)
        self._max_wait = float(max_wait)
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._client_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def _url(self) -> str:
        return f"{self._base_url}{self._PATH}"

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync client if this object created it."""
        with self._client_lock:
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _sync_client(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout)
            return self._client

    @contextlib.asynccontextmanager
    async def _async_session(self) -> AsyncIterator[httpx.AsyncClient]:
        """The caller's async client, or a fresh one: one cannot be shared between event loops."""
        if self._async_client is not None:
            yield self._async_client
            return
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            yield client

    # -- shared, I/O-free parts -----------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        # Some gateways echo the Authorization header back in their error bodies.
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return text

    def _fail(self, what: str, attempts: int = 1) -> JiyiError:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return self._ERROR(self._redact(f"{self._REQUEST} to {self._display_url} failed{tried}: {what}"))

    def _decide(self, result: httpx.Response | Exception, attempt: int) -> httpx.Response | float:
        """What one attempt means: the successful response, or seconds to wait before retrying.

        Raises the subclass's error when the attempt failed for good.
        """
        if isinstance(result, Exception):
            what = f"{type(result).__name__}: {result}" if str(result) else type(result).__name__
            retryable = isinstance(
                result, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError
            )
            retry_after = None
        else:
            status = result.status_code
            if 200 <= status < 300:
                return result
            what = f"HTTP {status}: {server_message(result)}"
            retryable = status in (408, 429) or status >= 500
            retry_after = retry_after_seconds(result)
        if not retryable or attempt >= self._max_retries:
            raise self._fail(what, attempt + 1) from (result if isinstance(result, Exception) else None)
        wait = retry_after if retry_after is not None else self._backoff * 2**attempt
        return min(wait, self._max_wait)

    # -- I/O ------------------------------------------------------------------------------

    def _post(self, payload: dict[str, Any]) -> httpx.Response:
        client = self._sync_client()
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = client.post(self._url, json=payload, headers=self._headers(), timeout=self._timeout)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                result = exc
            outcome = self._decide(result, attempt)
            if isinstance(outcome, httpx.Response):
                return outcome
            time.sleep(outcome)
            attempt += 1

    async def _apost(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> httpx.Response:
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = await client.post(
                    self._url, json=payload, headers=self._headers(), timeout=self._timeout
                )
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                result = exc
            outcome = self._decide(result, attempt)
            if isinstance(outcome, httpx.Response):
                return outcome
            await asyncio.sleep(outcome)
            attempt += 1
