"""The chat-model protocol, the one place where chat-model specs are resolved, and a test double.

A chat model turns a list of ``{"role", "content"}`` messages into one answer string.
:func:`resolve_chat_model` accepts an instance, a plain callable (``list[dict] -> str``) or
an ``"openai:MODEL"`` string; ``None`` stays ``None`` (no LLM configured: jiyi then uses
its rule-based paths).

Work that talks to a model is written as a *chat flow*: a generator that yields
:class:`Complete` requests and receives the answers (the pattern of :mod:`jiyi.effects`).
The flow holds every decision (prompt, parsing, the repair retry) and does no I/O, so
:func:`run_chat` and :func:`arun_chat` drive the same code synchronously or with
``await``. :func:`json_flow` is the shared "ask for JSON, repair once" loop.

:class:`ScriptedChatModel` is a deterministic stand-in for tests (queued answers or a
function; every call recorded), and :func:`forbid_network_models` makes any network
model refuse to run inside a ``with`` block, so a test suite cannot reach a paid API.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

from jiyi.driver import adrive, drive
from jiyi.effects import Complete
from jiyi.errors import ConfigError, InvalidInput, LLMError

T = TypeVar("T")
R = TypeVar("R")

Message = dict[str, str]


# -- the protocol ---------------------------------------------------------------------------


@runtime_checkable
class ChatModel(Protocol):
    """What jiyi needs from a chat model. An ``async acomplete`` with the same signature is optional."""

    @property
    def model_id(self) -> str:
        """Stable name of the model, recorded in the audit history of what it produced."""
        ...

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        """Answer the conversation ``messages``. Raises :class:`LLMError` on failure."""
        ...


async def acomplete(
    model: ChatModel,
    messages: Sequence[dict[str, str]],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    json_mode: bool = False,
) -> str:
    """Use the model's own ``acomplete`` when it has one, else run ``complete`` in a worker thread."""
    native = getattr(model, "acomplete", None)
    if native is not None:
        answer = await native(messages, temperature=temperature, max_tokens=max_tokens, json_mode=json_mode)
    else:
        call = functools.partial(
            model.complete, messages, temperature=temperature, max_tokens=max_tokens, json_mode=json_mode
        )
        answer = await asyncio.to_thread(call)
    return check_answer(answer, model.model_id)


def check_messages(messages: object) -> list[Message]:
    """Validate chat messages and return plain-dict copies. Raises :class:`InvalidInput`."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidInput(
            f"messages must be a list of {{'role', 'content'}} dicts, not {type(messages).__name__}",
            field="messages",
        )
    if not messages:
        raise InvalidInput("messages must not be empty", field="messages")
    out: list[Message] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"messages[{i}] is {type(message).__name__}, not a dict", field="messages")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role.strip():
            raise InvalidInput(f"messages[{i}] needs a 'role' string", field="messages")
        if not isinstance(content, str):
            raise InvalidInput(f"messages[{i}] needs a 'content' string", field="messages")
        for key, value in message.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidInput(f"messages[{i}][{key!r}] is not a string", field="messages")
        out.append(dict(message))
    return out


def check_chat_options(temperature: float, max_tokens: int | None) -> None:
    """Validate the sampling options shared by every model. Raises :class:`InvalidInput`."""
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
        raise InvalidInput(
            f"temperature must be a number within 0..2, not {temperature!r}", field="temperature"
        )
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise InvalidInput(
            f"max_tokens must be a positive integer or None, not {max_tokens!r}", field="max_tokens"
        )


def check_answer(answer: object, model_id: str) -> str:
    """A model's answer must be a non-blank string; anything else is an :class:`LLMError`."""
    if not isinstance(answer, str):
        raise LLMError(f"{model_id}: model returned {type(answer).__name__}, not a string")
    if not answer.strip():
        raise LLMError(f"{model_id}: model returned an empty answer")
    return answer


# -- plain callables --------------------------------------------------------------------------


class CallableChatModel:
    """Wraps a plain function ``messages -> answer`` as a :class:`ChatModel`."""

    def __init__(self, fn: Callable[[list[Message]], str], model_id: str | None = None) -> None:
        self._fn = fn
        self._model_id = model_id or f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"CallableChatModel({self._model_id!r})"

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        checked = check_messages(messages)
        check_chat_options(temperature, max_tokens)
        return check_answer(self._fn(checked), self._model_id)


# -- resolving specs ----------------------------------------------------------------------------

_PROVIDERS = ("openai",)


def resolve_chat_model(spec: ChatModel | Callable[[list[Message]], str] | str | None) -> ChatModel | None:
    """Normalise a chat-model spec. ``None`` means no LLM is configured and stays ``None``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return _from_string(spec)
    if isinstance(spec, ChatModel):
        return spec
    if callable(spec):
        return CallableChatModel(spec)
    raise ConfigError(
        f"llm must be a ChatModel, a callable or a 'provider:model' string, not {type(spec).__name__}"
    )


def _from_string(spec: str) -> ChatModel:
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep:
        raise ConfigError(f"llm {spec!r} needs a provider, e.g. 'openai:{spec.strip() or 'gpt-4o-mini'}'")
    if provider == "openai":
        from jiyi.llm.openai import OpenAIChatModel

        if not model:
            raise ConfigError("'openai:' needs a model name, e.g. 'openai:gpt-4o-mini'")
        return OpenAIChatModel(model)
    raise ConfigError(f"unknown llm provider {provider!r} in {spec!r}; known: {', '.join(_PROVIDERS)}")


# -- keeping tests off the network --------------------------------------------------------------


class _NetworkSwitch:
    """A process-wide counter: while above zero, network chat models refuse to run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0

    def enter(self) -> None:
        with self._lock:
            self._depth += 1

    def leave(self) -> None:
        with self._lock:
            self._depth -= 1

    @property
    def forbidden(self) -> bool:
        with self._lock:
            return self._depth > 0


_network = _NetworkSwitch()


@contextlib.contextmanager
def forbid_network_models() -> Iterator[None]:
    """Inside this block (in every thread) network chat models raise instead of sending requests.

    For your own tests: ``with forbid_network_models(): ...`` proves that code under test
    used a :class:`ScriptedChatModel` (or no LLM) and never a paid API. Blocks may nest.
    """
    _network.enter()
    try:
        yield
    finally:
        _network.leave()


def network_models_forbidden() -> bool:
    """Whether a :func:`forbid_network_models` block is active."""
    return _network.forbidden


def ensure_network_allowed(model_id: str) -> None:
    """Called by network models before any request. Raises :class:`~jiyi.errors.ConfigError`.

    A ``ConfigError`` rather than an :class:`LLMError`, so code that falls back to rules
    when the model fails cannot hide the forbidden use.
    """
    if _network.forbidden:
        raise ConfigError(
            f"chat model {model_id!r} would use the network, which forbid_network_models() forbids; "
            "use jiyi.llm.base.ScriptedChatModel in tests"
        )


# -- a deterministic test double ---------------------------------------------------------------


@dataclass(frozen=True)
class ChatCall:
    """One call a :class:`ScriptedChatModel` received."""

    messages: list[Message]
    temperature: float
    max_tokens: int | None
    json_mode: bool

    @property
    def system(self) -> str:
        """The system messages' text, joined."""
        return "\n".join(m["content"] for m in self.messages if m["role"] == "system")

    @property
    def prompt(self) -> str:
        """The last user message's text."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""


class ScriptedChatModel:
    """A chat model for tests: answers from a queue, then from ``function``; records every call.

    ``answers`` may hold strings or exceptions (raised when their turn comes). With the
    queue empty and no ``function``, a call raises :class:`LLMError`, like a real model
    that failed. Blank answers raise :class:`LLMError` too, as :class:`OpenAIChatModel`
    does, so tests see what production would.

    ::

        model = ScriptedChatModel(['{"memories": []}'])
        LLMExtractor(model).extract(turns)
        assert model.calls[0].json_mode
    """

    def __init__(
        self,
        answers: Iterable[str | BaseException] = (),
        *,
        function: Callable[[list[Message]], str] | None = None,
        model_id: str = "scripted",
    ) -> None:
        if isinstance(answers, str):
            answers = [answers]
        self._queue: deque[str | BaseException] = deque(answers)
        self._function = function
        self._model_id = model_id
        self._lock = threading.Lock()
        self.calls: list[ChatCall] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"ScriptedChatModel(model_id={self._model_id!r}, pending={self.pending})"

    @property
    def pending(self) -> int:
        """How many queued answers have not been used yet."""
        with self._lock:
            return len(self._queue)

    def queue(self, *answers: str | BaseException) -> None:
        """Add answers to the end of the queue."""
        with self._lock:
            self._queue.extend(answers)

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        checked = check_messages(messages)
        check_chat_options(temperature, max_tokens)
        with self._lock:
            self.calls.append(ChatCall([dict(m) for m in checked], temperature, max_tokens, json_mode))
            number = len(self.calls)
            answer: str | BaseException | None = self._queue.popleft() if self._queue else None
        if answer is None:
            if self._function is None:
                raise LLMError(f"{self._model_id}: no scripted answer left for call {number}")
            answer = self._function(checked)
        if isinstance(answer, BaseException):
            raise answer
        return check_answer(answer, self._model_id)

    async def acomplete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> str:
        return self.complete(messages, temperature=temperature, max_tokens=max_tokens, json_mode=json_mode)


# -- chat flows: logic as generators, driven sync or async ----------------------------------


ChatFlow = Generator[Complete, str, R]


def complete_with(model: ChatModel) -> Callable[[Complete], str]:
    """The sync handler of :class:`Complete` for ``model``."""

    def handle(request: Complete) -> str:
        answer = model.complete(
            list(request.messages),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            json_mode=request.json_mode,
        )
        return check_answer(answer, model.model_id)

    return handle


def acomplete_with(model: ChatModel) -> Callable[[Complete], Awaitable[str]]:
    """The async handler of :class:`Complete` for ``model``."""

    async def handle(request: Complete) -> str:
        return await acomplete(
            model,
            list(request.messages),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            json_mode=request.json_mode,
        )

    return handle


def run_chat(flow: ChatFlow[R], model: ChatModel) -> R:
    """Drive ``flow`` with blocking calls to ``model.complete``."""
    return drive(flow, {Complete: complete_with(model)})


async def arun_chat(flow: ChatFlow[R], model: ChatModel) -> R:
    """Drive ``flow`` with ``await``: the model's own ``acomplete`` or a worker thread."""
    return await adrive(flow, {Complete: acomplete_with(model)})


# The bad answer is echoed back so the model can see what to fix; a long one is cut.
_MAX_ECHO_CHARS = 4000


def repair_messages(messages: Sequence[Message], answer: str, error: str) -> list[Message]:
    """``messages`` plus the unusable ``answer`` and a request to fix ``error``."""
    echoed = answer if len(answer) <= _MAX_ECHO_CHARS else answer[:_MAX_ECHO_CHARS] + "..."
    return [
        *messages,
        {"role": "assistant", "content": echoed},
        {
            "role": "user",
            "content": (
                f"Your answer could not be used: {error}\n"
                "Answer again with only the JSON object described above: no prose, no code fence, "
                "double-quoted keys and strings, no trailing commas."
            ),
        },
    ]


@dataclass(frozen=True)
class JSONAnswer(Generic[T]):
    """What :func:`json_flow` returns: the parsed value, the raw answer and the attempts used."""

    value: T
    answer: str
    attempts: int
    errors: tuple[str, ...] = field(default_factory=tuple)
    """Why earlier attempts were unusable."""


def json_flow(
    messages: Sequence[Message],
    parse: Callable[[str], T],
    *,
    max_attempts: int = 2,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> ChatFlow[JSONAnswer[T]]:
    """Ask for a JSON answer and ``parse`` it; on :class:`LLMError` from ``parse``, ask again.

    Each retry shows the model its unusable answer and the error. After ``max_attempts``
    unusable answers the last :class:`LLMError` is raised (naming the attempts). Errors of
    the model call itself (HTTP, timeouts) are not retried here: the client already did.
    """
    if max_attempts < 1:
        raise ConfigError(f"max_attempts must be at least 1, not {max_attempts!r}")
    current = check_messages(messages)
    errors: list[str] = []
    for attempt in range(1, max_attempts + 1):
        answer = yield Complete(tuple(current), temperature, max_tokens, json_mode=True)
        try:
            value = parse(answer)
        except LLMError as exc:
            errors.append(str(exc))
            if attempt == max_attempts:
                tried = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise LLMError(f"{exc}{tried}") from exc
            current = repair_messages(current, answer, str(exc))
            continue
        return JSONAnswer(value, answer, attempt, tuple(errors))
    raise AssertionError("unreachable")  # pragma: no cover
