"""Every effect a flow may yield, in one place.

A *flow* is a generator that yields effects and receives each one's result back
(httpx's ``auth_flow`` pattern). The flow holds all the logic and does no I/O; a driver
(:mod:`jiyi.driver`) runs each effect with the handler its type names, so one flow serves
the sync and the async API alike.

==================  =====================================  ===============================
effect              asks for                               handled by
==================  =====================================  ===============================
store ``Op``        a read or an atomic write              the store (:mod:`jiyi.store.base`)
:class:`Embed`      vectors for texts                      the embedder
:class:`Complete`   a chat model's answer                  the chat model
:class:`Rerank`     relevance scores for texts             the reranker
``FileOp``          reading/writing memory.md and friends  the files layer (:mod:`jiyi.files.ops`)
==================  =====================================  ===============================

Inside a flow, ``x = yield from call(op)`` keeps the result's static type.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class Ask(Generic[R]):
    """Base of effects whose answer has a known type ``R`` (store and files operations)."""

    __slots__ = ()


Message = dict[str, str]


@dataclass(frozen=True)
class Embed:
    """Embed ``texts`` with the configured embedder (answer: an ``(n, dim)`` float32 array).
    ``query``: the texts are search queries (embedders with an ``embed_query`` use it)."""

    texts: tuple[str, ...]
    query: bool = False


@dataclass(frozen=True)
class Complete:
    """Ask the chat model to answer ``messages`` (answer: a non-blank string)."""

    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int | None = None
    json_mode: bool = False


@dataclass(frozen=True)
class Rerank:
    """Score ``texts`` against ``query`` with the reranker (answer: one float per text)."""

    query: str
    texts: tuple[str, ...]


Effect = Any
"""Anything a handler table knows; flows are typed by what they return, not what they yield."""
Flow = Generator[Effect, Any, R]


def call(op: Ask[R]) -> Generator[Effect, Any, R]:
    """Run one store operation (or a files-layer operation) and return its typed result."""
    result: R = yield op
    return result


def embed(texts: Sequence[str], *, query: bool = False) -> Generator[Effect, Any, Any]:
    """Vectors for ``texts`` (``query``: they are search queries, not stored texts)."""
    result = yield Embed(tuple(texts), query)
    return result


def rerank_scores(query: str, texts: Sequence[str]) -> Generator[Effect, Any, Any]:
    """The reranker's scores of ``texts`` for ``query``."""
    result = yield Rerank(query, tuple(texts))
    return result
