"""An OpenAI-compatible ``/embeddings`` client (OpenAI, Azure-style gateways, vLLM, Ollama, ...).

Request building, answer parsing and the retry decision are shared by :meth:`embed` and
:meth:`aembed`; only the few lines that send a request and sleep differ between them.
The API key is sent as a Bearer header and never appears in a repr, a log or an error.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import httpx
import numpy as np

from jiyi._http import env as _env
from jiyi._http import retry_after_seconds as _retry_after_seconds
from jiyi._http import server_message as _server_message
from jiyi.embed.base import Vectors, normalise
from jiyi.errors import ConfigError, EmbedderError, InvalidInput

_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible HTTP API.

    ``base_url`` defaults to ``$JIYI_EMBED_BASE_URL``, then ``$OPENAI_BASE_URL``, then
    OpenAI; ``api_key`` to ``$JIYI_EMBED_API_KEY``, then ``$OPENAI_API_KEY`` (no key means
    no ``Authorization`` header, for local servers). Environment variables are read only
    when the argument is ``None``.

    Retries 408, 429, 5xx, timeouts and connection errors up to ``max_retries`` times,
    waiting ``backoff * 2**attempt`` seconds or the server's ``Retry-After``, at most
    ``max_wait`` seconds. Other statuses fail at once.

    A passed-in ``client``/``async_client`` is used as is and never closed. Without one, the
    sync client is created on first use and kept (close it with :meth:`close` or a ``with``
    block); the async path opens a client per :meth:`aembed` call, because an
    ``httpx.AsyncClient`` cannot be shared between event loops.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        batch_size: int = 128,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
        backoff: float = 0.2,
        max_wait: float = 10.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIEmbedder needs a model name, e.g. 'text-embedding-3-small'")
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ConfigError(f"dimensions must be a positive integer or None, not {dimensions!r}")
        if not timeout > 0:
            raise ConfigError(f"timeout must be positive, not {timeout!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be 0 or more, not {max_retries!r}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {batch_size!r}")
        if backoff < 0 or max_wait < 0:
            raise ConfigError("backoff and max_wait must not be negative")
        self._model = model.strip()
        url = base_url if base_url is not None else _env("JIYI_EMBED_BASE_URL", "OPENAI_BASE_URL")
        self._base_url = (url or _DEFAULT_BASE_URL).rstrip("/")
        if not self._base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"embedding base_url must start with http:// or https://, not {self._base_url!r}"
            )
        try:
            # For messages: no userinfo or query string, which may hold credentials.
            self._display_url = str(httpx.URL(self._url).copy_with(username=None, password=None, query=None))
        except httpx.InvalidURL as exc:
            raise ConfigError(f"embedding base_url is not a valid URL: {exc}") from exc
        self._api_key = api_key if api_key is not None else _env("JIYI_EMBED_API_KEY", "OPENAI_API_KEY")
        self._dimensions = dimensions
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._batch_size = batch_size
        self._backoff = float(backoff)
        self._max_wait = float(max_wait)
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._client_lock = threading.Lock()
        # Learned from the first answer, so an empty call can return (0, dim).
        self._dim: int | None = dimensions

    # -- identity -------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        # The vector width is part of the identity: the cache must not mix 256- and 1536-dim rows.
        if self._dimensions is not None:
            return f"openai:{self._model}:{self._dimensions}d"
        return f"openai:{self._model}"

    @property
    def base_url(self) -> str:
        return self._base_url

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r}, base_url={self._base_url!r}, dimensions={self._dimensions!r})"

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync client if this embedder created it."""
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

    # -- shared, I/O-free parts -----------------------------------------------------------

    @property
    def _url(self) -> str:
        return f"{self._base_url}/embeddings"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _payload(self, batch: list[str]) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self._model, "input": batch}
        if self._dimensions is not None:
            payload["dimensions"] = self._dimensions
        return payload

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of strings, not a single string", field="texts")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{i}] is {type(text).__name__}, not str", field="texts")
        return [items[i : i + self._batch_size] for i in range(0, len(items), self._batch_size)]

    def _empty(self) -> Vectors:
        return np.zeros((0, self._dim or 0), dtype=np.float32)

    def _redact(self, text: str) -> str:
        # Some gateways echo the Authorization header back in their error bodies.
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return text

    def _fail(self, what: str, attempts: int) -> EmbedderError:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return EmbedderError(self._redact(f"embedding request to {self._display_url} failed{tried}: {what}"))

    def _outcome(self, result: httpx.Response | Exception, expected: int, attempt: int) -> Vectors | float:
        """Decide what one attempt means: the vectors, or seconds to wait before retrying.

        Raises :class:`EmbedderError` when the attempt failed for good.
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
                return self._parse(result, expected)
            what = f"HTTP {status}: {_server_message(result)}"
            retryable = status in (408, 429) or status >= 500
            retry_after = _retry_after_seconds(result)
        if not retryable or attempt >= self._max_retries:
            raise self._fail(what, attempt + 1) from (result if isinstance(result, Exception) else None)
        wait = retry_after if retry_after is not None else self._backoff * 2**attempt
        return min(wait, self._max_wait)

    def _parse(self, response: httpx.Response, expected: int) -> Vectors:
        try:
            body = response.json()
        except ValueError as exc:
            snippet = " ".join(response.text.split())[:80]
            raise self._fail(f"the answer is not valid JSON ({exc}); it starts with {snippet!r}", 1) from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._fail("the answer has no 'data' list of embeddings", 1)
        rows: dict[int, Any] = {}
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise self._fail(f"data[{pos}] has no 'embedding'", 1)
            index = item.get("index", pos)
            if isinstance(index, bool) or not isinstance(index, int) or index in rows:
                raise self._fail(f"data[{pos}] has a missing, duplicate or invalid 'index' ({index!r})", 1)
            embedding = item["embedding"]
            if not isinstance(embedding, list):
                # e.g. base64 strings from a server that ignored the requested float format
                raise self._fail(
                    f"data[{pos}].embedding is {type(embedding).__name__}, not a list of numbers", 1
                )
            rows[index] = embedding
        if len(rows) != expected or sorted(rows) != list(range(expected)):
            raise self._fail(f"sent {expected} texts but got {len(rows)} embeddings back", 1)
        widths = {len(rows[i]) for i in range(expected)}
        if len(widths) != 1:
            raise self._fail(f"the embeddings have different lengths {sorted(widths)}", 1)
        return normalise([rows[i] for i in range(expected)], expected, self.model_id)

    def _combine(self, parts: list[Vectors]) -> Vectors:
        widths = {part.shape[1] for part in parts}
        if len(widths) != 1 or (self._dim is not None and self._dim not in widths):
            known = sorted(widths | ({self._dim} if self._dim is not None else set()))
            raise EmbedderError(f"embedder {self.model_id!r} returned vectors of different widths {known}")
        self._dim = parts[0].shape[1]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    # -- I/O ------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> Vectors:
        batches = self._batches(texts)
        if not batches:
            return self._empty()
        client = self._sync_client()
        parts: list[Vectors] = []
        for batch in batches:
            payload = self._payload(batch)
            attempt = 0
            while True:
                result: httpx.Response | Exception
                try:
                    result = client.post(
                        self._url, json=payload, headers=self._headers(), timeout=self._timeout
                    )
                except (httpx.HTTPError, httpx.InvalidURL) as exc:
                    result = exc
                outcome = self._outcome(result, len(batch), attempt)
                if isinstance(outcome, np.ndarray):
                    parts.append(outcome)
                    break
                time.sleep(outcome)
                attempt += 1
        return self._combine(parts)

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        batches = self._batches(texts)
        if not batches:
            return self._empty()
        if self._async_client is not None:
            return await self._aembed_with(self._async_client, batches)
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            return await self._aembed_with(client, batches)

    async def _aembed_with(self, client: httpx.AsyncClient, batches: list[list[str]]) -> Vectors:
        parts: list[Vectors] = []
        for batch in batches:
            payload = self._payload(batch)
            attempt = 0
            while True:
                result: httpx.Response | Exception
                try:
                    result = await client.post(
                        self._url, json=payload, headers=self._headers(), timeout=self._timeout
                    )
                except (httpx.HTTPError, httpx.InvalidURL) as exc:
                    result = exc
                outcome = self._outcome(result, len(batch), attempt)
                if isinstance(outcome, np.ndarray):
                    parts.append(outcome)
                    break
                await asyncio.sleep(outcome)
                attempt += 1
        return self._combine(parts)
