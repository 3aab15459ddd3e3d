"""An OpenAI-compatible ``/chat/completions`` client (OpenAI, gateways, vLLM, Ollama, DeepSeek, ...).

Request building, answer parsing and the retry decision are shared by :meth:`complete`
and :meth:`acomplete`; only the few lines that send a request and sleep differ between
them. The API key is sent as a Bearer header and never appears in a repr, a log or an error.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import httpx

# The embeddings client's HTTP helpers are the same for chat; shared rather than copied.
from jiyi._http import env as _env
from jiyi._http import retry_after_seconds as _retry_after_seconds
from jiyi._http import server_message as _server_message
from jiyi.errors import ConfigError, LLMError
from jiyi.llm.base import check_chat_options, check_messages, ensure_network_allowed

_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatModel:
    """Chat completions from an OpenAI-compatible HTTP API.

    ``base_url`` defaults to ``$JIYI_LLM_BASE_URL``, then ``$OPENAI_BASE_URL``, then OpenAI;
    ``api_key`` to ``$JIYI_LLM_API_KEY``, then ``$OPENAI_API_KEY`` (no key means no
    ``Authorization`` header, for local servers). Environment variables are read only
    when the argument is ``None``.

    Retries 408, 429, 5xx, timeouts and connection errors up to ``max_retries`` times,
    waiting ``backoff * 2**attempt`` seconds or the server's ``Retry-After``, at most
    ``max_wait`` seconds. Other statuses fail at once. An answer without text (empty
    content, a refusal, only tool calls) is an :class:`~jiyi.llm.base.LLMError`, never ``""``.

    A passed-in ``client``/``async_client`` is used as is and never closed. Without one, the
    sync client is created on first use and kept (close it with :meth:`close` or a ``with``
    block); the async path opens a client per :meth:`acomplete` call, because an
    ``httpx.AsyncClient`` cannot be shared between event loops.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_wait: float = 20.0,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIChatModel needs a model name, e.g. 'gpt-4o-mini'")
        if not timeout > 0:
            raise ConfigError(f"timeout must be positive, not {timeout!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be 0 or more, not {max_retries!r}")
        if backoff < 0 or max_wait < 0:
            raise ConfigError("backoff and max_wait must not be negative")
        self._model = model.strip()
        url = base_url if base_url is not None else _env("JIYI_LLM_BASE_URL", "OPENAI_BASE_URL")
        self._base_url = (url or _DEFAULT_BASE_URL).rstrip("/")
        if not self._base_url.startswith(("http://", "https://")):
            raise ConfigError(f"llm base_url must start with http:// or https://, not {self._base_url!r}")
        try:
            # For messages: no userinfo or query string, which may hold credentials.
            self._display_url = str(httpx.URL(self._url).copy_with(username=None, password=None, query=None))
        except httpx.InvalidURL as exc:
            raise ConfigError(f"llm base_url is not a valid URL: {exc}") from exc
        self._api_key = api_key if api_key is not None else _env("JIYI_LLM_API_KEY", "OPENAI_API_KEY")
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._backoff = float(backoff)
        self._max_wait = float(max_wait)
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._client_lock = threading.Lock()

    # -- identity -------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    @property
    def base_url(self) -> str:
        return self._base_url

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self._model!r}, base_url={self._display_base!r})"

    @property
    def _display_base(self) -> str:
        return self._display_url.removesuffix("/chat/completions")

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync client if this model created it."""
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
        return f"{self._base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _payload(
        self,
        messages: Sequence[dict[str, str]],
        temperature: float,
        max_tokens: int | None,
        json_mode: bool,
    ) -> dict[str, Any]:
        ensure_network_allowed(self.model_id)
        checked = check_messages(messages)
        check_chat_options(temperature, max_tokens)
        payload: dict[str, Any] = {"model": self._model, "messages": checked, "temperature": temperature}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _redact(self, text: str) -> str:
        # Some gateways echo the Authorization header back in their error bodies.
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return text

    def _fail(self, what: str, attempts: int = 1) -> LLMError:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return LLMError(self._redact(f"chat request to {self._display_url} failed{tried}: {what}"))

    def _outcome(self, result: httpx.Response | Exception, attempt: int) -> str | float:
        """Decide what one attempt means: the answer, or seconds to wait before retrying.

        Raises :class:`LLMError` when the attempt failed for good.
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
                return self._parse(result)
            what = f"HTTP {status}: {_server_message(result)}"
            retryable = status in (408, 429) or status >= 500
            retry_after = _retry_after_seconds(result)
        if not retryable or attempt >= self._max_retries:
            raise self._fail(what, attempt + 1) from (result if isinstance(result, Exception) else None)
        wait = retry_after if retry_after is not None else self._backoff * 2**attempt
        return min(wait, self._max_wait)

    def _parse(self, response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError as exc:
            snippet = " ".join(response.text.split())[:80]
            raise self._fail(f"the answer is not valid JSON ({exc}); it starts with {snippet!r}") from exc
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices:
            raise self._fail("the answer has no 'choices'")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise self._fail("choices[0] has no 'message'")
        content = _text_of(message.get("content"))
        if content is not None and content.strip():
            return content
        details = []
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            details.append(f"refusal: {' '.join(refusal.split())[:200]}")
        if message.get("tool_calls"):
            details.append("it asked for tool calls instead")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        if finish:
            details.append(f"finish_reason {finish!r}")
        suffix = f" ({'; '.join(details)})" if details else ""
        raise LLMError(self._redact(f"{self.model_id}: model returned an empty answer{suffix}"))

    # -- I/O ------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        payload = self._payload(messages, temperature, max_tokens, json_mode)
        client = self._sync_client()
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = client.post(self._url, json=payload, headers=self._headers(), timeout=self._timeout)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                result = exc
            outcome = self._outcome(result, attempt)
            if isinstance(outcome, str):
                return outcome
            time.sleep(outcome)
            attempt += 1

    async def acomplete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        payload = self._payload(messages, temperature, max_tokens, json_mode)
        if self._async_client is not None:
            return await self._acomplete_with(self._async_client, payload)
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            return await self._acomplete_with(client, payload)

    async def _acomplete_with(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> str:
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = await client.post(
                    self._url, json=payload, headers=self._headers(), timeout=self._timeout
                )
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                result = exc
            outcome = self._outcome(result, attempt)
            if isinstance(outcome, str):
                return outcome
            await asyncio.sleep(outcome)
            attempt += 1


def _text_of(content: Any) -> str | None:
    """``message.content`` as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type", "text") == "text"
            and isinstance(part.get("text"), str)
        ]
        return "".join(parts)
    return None
