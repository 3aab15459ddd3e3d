"""An OpenAI-compatible ``/embeddings`` client (OpenAI, Azure-style gateways, vLLM, Ollama, ...).

Request building, answer parsing and the retry decision are shared by :meth:`embed` and
:meth:`aembed`; only the few lines that send a request and sleep differ between them.
The API key is sent as a Bearer header and never appears in a repr, a log or an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from jiyi._http import OpenAICompatibleClient
from jiyi.embed.base import Vectors, normalise
from jiyi.errors import ConfigError, EmbedderError, InvalidInput


class OpenAIEmbedder(OpenAICompatibleClient):
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

    _PATH = "/embeddings"
    _LABEL = "embedding"
    _REQUEST = "embedding request"
    _ENV_BASE = ("JIYI_EMBED_BASE_URL", "OPENAI_BASE_URL")
    _ENV_KEY = ("JIYI_EMBED_API_KEY", "OPENAI_API_KEY")
    _ERROR = EmbedderError

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
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ConfigError(f"dimensions must be a positive integer or None, not {dimensions!r}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {batch_size!r}")
        super().__init__(
            model,
            model_hint="text-embedding-3-small",
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_wait=max_wait,
            client=client,
            async_client=async_client,
        )
        self._dimensions = dimensions
        self._batch_size = batch_size
        # Learned from the first answer, so an empty call can return (0, dim).
        self._dim: int | None = dimensions

    # -- identity -------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        # The vector width is part of the identity: the cache must not mix 256- and 1536-dim rows.
        if self._dimensions is not None:
            return f"openai:{self._model}:{self._dimensions}d"
        return f"openai:{self._model}"

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r}, base_url={self._base_url!r}, dimensions={self._dimensions!r})"

    # -- shared, I/O-free parts -----------------------------------------------------------

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
        return self._combine([self._parse(self._post(self._payload(b)), len(b)) for b in batches])

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        batches = self._batches(texts)
        if not batches:
            return self._empty()
        async with self._async_session() as client:
            parts = [self._parse(await self._apost(client, self._payload(b)), len(b)) for b in batches]
        return self._combine(parts)
