"""Pipelines as generators, driven by a thin sync or async driver.

A *flow* is a generator that yields effects — a store :class:`~jiyi.store.base.Op`, an
:class:`Embed` request or a chat-model :class:`~jiyi.llm.base.Complete` request — and
receives each effect's result back (httpx's ``auth_flow``
pattern). The flow holds all the logic and does no I/O itself, so one implementation
serves :class:`~jiyi.memory.Memory` and :class:`~jiyi.memory.AsyncMemory`.

Inside a flow, ``x = yield from call(op)`` keeps the result's static type.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from jiyi.embed.base import Embedder, Vectors, aembed
from jiyi.errors import ConfigError
from jiyi.llm.base import ChatModel, Complete, acomplete, check_answer
from jiyi.read.rerank import Rerank, Reranker, ascore_texts, score_texts
from jiyi.store.base import Op, Store

R = TypeVar("R")


@dataclass(frozen=True)
class Embed:
    """Ask the driver to embed texts with the configured embedder."""

    texts: tuple[str, ...]


Effect = Op[Any] | Embed | Complete | Rerank
Flow = Generator[Effect, Any, R]


def call(op: Op[R]) -> Generator[Effect, Any, R]:
    result: R = yield op
    return result


def embed(texts: Sequence[str]) -> Generator[Effect, Any, Vectors]:
    result: Vectors = yield Embed(tuple(texts))
    return result


def rerank_scores(query: str, texts: Sequence[str]) -> Generator[Effect, Any, Any]:
    result = yield Rerank(query, tuple(texts))
    return result


def _need_reranker(reranker: Reranker | None) -> Reranker:
    if reranker is None:
        raise ConfigError("this step needs a reranker, but none is configured (pass reranker=...)")
    return reranker


def _need(chat: ChatModel | None) -> ChatModel:
    if chat is None:
        raise ConfigError("this step needs a language model, but none is configured (pass llm=...)")
    return chat


def run_sync(
    flow: Flow[R],
    store: Store,
    embedder: Embedder,
    chat: ChatModel | None = None,
    reranker: Reranker | None = None,
) -> R:
    try:
        effect = next(flow)
        while True:
            try:
                result: Any
                if isinstance(effect, Embed):
                    result = embedder.embed(effect.texts)
                elif isinstance(effect, Rerank):
                    result = score_texts(_need_reranker(reranker), effect.query, effect.texts)
                elif isinstance(effect, Complete):
                    model = _need(chat)
                    result = check_answer(
                        model.complete(
                            list(effect.messages),
                            temperature=effect.temperature,
                            max_tokens=effect.max_tokens,
                            json_mode=effect.json_mode,
                        ),
                        model.model_id,
                    )
                else:
                    result = store.execute(effect)
            except Exception as exc:  # let the flow see the failure where it asked
                effect = flow.throw(exc)
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        flow.close()


async def run_async(
    flow: Flow[R],
    store: Store,
    embedder: Embedder,
    chat: ChatModel | None = None,
    reranker: Reranker | None = None,
) -> R:
    try:
        effect = next(flow)
        while True:
            try:
                result: Any
                if isinstance(effect, Embed):
                    result = await aembed(embedder, effect.texts)
                elif isinstance(effect, Rerank):
                    result = await ascore_texts(_need_reranker(reranker), effect.query, effect.texts)
                elif isinstance(effect, Complete):
                    model = _need(chat)
                    answer = await acomplete(
                        model,
                        list(effect.messages),
                        temperature=effect.temperature,
                        max_tokens=effect.max_tokens,
                        json_mode=effect.json_mode,
                    )
                    result = check_answer(answer, model.model_id)
                else:
                    result = await store.aexecute(effect)
            except Exception as exc:
                effect = flow.throw(exc)
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        flow.close()
