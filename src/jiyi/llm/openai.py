"""An OpenAI-compatible ``/chat/completions`` client (OpenAI, gateways, vLLM, Ollama, DeepSeek, ...).

Request building, answer parsing and the retry decision are shared by :meth:`complete`
and :meth:`acomplete`; only the few lines that send a request and sleep differ between
them. The API key is sent as a Bearer header and never appears in a repr, a log or an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from jiyi._http import OpenAICompatibleClient
from jiyi.errors import LLMError
from jiyi.llm.base import check_chat_options, check_messages, ensure_network_allowed


class OpenAIChatModel(OpenAICompatibleClient):
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

    _PATH = "/chat/completions"
    _LABEL = "llm"
    _REQUEST = "chat request"
    _ENV_BASE = ("JIYI_LLM_BASE_URL", "OPENAI_BASE_URL")
    _ENV_KEY = ("JIYI_LLM_API_KEY", "OPENAI_API_KEY")
    _ERROR = LLMError

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
        super().__init__(
            model,
            model_hint="gpt-4o-mini",
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_wait=max_wait,
            client=client,
            async_client=async_client,
        )

    # -- identity -------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self._model!r}, base_url={self._display_base!r})"

    @property
    def _display_base(self) -> str:
        return self._display_url.removesuffix("/chat/completions")

    # -- shared, I/O-free parts -----------------------------------------------------------

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
        return self._parse(self._post(payload))

    async def acomplete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        payload = self._payload(messages, temperature, max_tokens, json_mode)
        async with self._async_session() as client:
            return self._parse(await self._apost(client, payload))


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
