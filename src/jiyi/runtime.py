"""The runtime: everything a flow's effects run against, in one value.

A :class:`Runtime` holds the store, the embedder, the chat model and reranker (optional),
the clock, the typed configuration sections and the default tenant. Feature modules are
plain flows ``f(rt, ...)`` over it; :func:`jiyi.driver.run` / :func:`jiyi.driver.arun`
run them with the handler tables it builds. Building one does no I/O.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from jiyi.config import GateConfig, RankConfig, SessionConfig
from jiyi.driver import AsyncHandler, Handler
from jiyi.effects import Complete, Embed, Rerank
from jiyi.embed.base import Embedder, aembed, embed_texts, resolve_embedder
from jiyi.errors import ConfigError, InvalidInput
from jiyi.llm.base import ChatModel, acomplete_with, complete_with, resolve_chat_model
from jiyi.model import DEFAULT_TENANT, as_utc, utcnow
from jiyi.read.rerank import Reranker, RerankerSpec, ascore_texts, resolve_reranker, score_texts
from jiyi.store.base import Op, Store


class QueryCache:
    """Vectors kept in process, least recently used out: query embeddings (queries repeat;
    writes do not need them) and memories' statements (:mod:`jiyi.read.statements`).
    Searches on several threads share one (a server's): a lock keeps one thread's
    eviction from removing the key another is moving to the end."""

    def __init__(self, size: int = 2048) -> None:
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, /, key: tuple[str, str]) -> np.ndarray | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: tuple[str, str], value: np.ndarray) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


def _need_reranker(reranker: Reranker | None) -> Reranker:
    if reranker is None:
        raise ConfigError("this step needs a reranker, but none is configured (pass reranker=...)")
    return reranker


def _need_chat(chat: ChatModel | None) -> ChatModel:
    if chat is None:
        raise ConfigError("this step needs a language model, but none is configured (pass llm=...)")
    return chat


@dataclass(frozen=True, eq=False)
class Runtime:
    """What flows run against. Build it with :meth:`build` (specs resolved, no I/O)."""

    store: Store
    embedder: Embedder
    llm: ChatModel | None = None
    reranker: Reranker | None = None
    gate: GateConfig = field(default_factory=GateConfig)
    rank: RankConfig = field(default_factory=RankConfig)
    session: SessionConfig = field(default_factory=SessionConfig)
    rerank_weight: float = 0.5
    rerank_top: int = 30
    clock: Callable[[], datetime] = utcnow
    tenant_id: str = DEFAULT_TENANT
    query_cache: QueryCache = field(default_factory=QueryCache)
    part_cache: QueryCache = field(default_factory=lambda: QueryCache(4096))
    """Per memory text, its statements' vectors (:mod:`jiyi.read.statements`), by (model,
    text): the same memories come back search after search."""
    extra_handlers: Mapping[type, tuple[Handler, AsyncHandler]] = field(default_factory=dict)
    """More effect types and their (sync, async) handlers, e.g. a files layer's operations."""

    @classmethod
    def build(
        cls,
        store: Store,
        *,
        embedder: Embedder | Callable[[list[str]], Any] | str | None = None,
        llm: ChatModel | Callable[[list[dict[str, str]]], str] | str | None = None,
        reranker: RerankerSpec = None,
        gate: GateConfig | None = None,
        rank: RankConfig | None = None,
        session: SessionConfig | None = None,
        rerank_weight: float = 0.5,
        rerank_top: int = 30,
        clock: Callable[[], datetime] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        extra_handlers: Mapping[type, tuple[Handler, AsyncHandler]] | None = None,
    ) -> Runtime:
        """Resolve every spec (instance, callable or ``"provider:model"``) into a runtime."""
        if not isinstance(store, Store):
            raise InvalidInput(f"store must be a jiyi Store, not {type(store).__name__}", field="store")
        return cls(
            store=store,
            embedder=resolve_embedder(embedder),
            llm=resolve_chat_model(llm),
            reranker=resolve_reranker(reranker),
            gate=gate or GateConfig(),
            rank=rank or RankConfig(),
            session=session or SessionConfig(),
            rerank_weight=rerank_weight,
            rerank_top=rerank_top,
            clock=clock or utcnow,
            tenant_id=tenant_id,
            extra_handlers=dict(extra_handlers or {}),
        )

    def now(self) -> datetime:
        return as_utc(self.clock())

    def tenant(self, tenant_id: str | None) -> str:
        """The tenant a call names, or the runtime's default."""
        return tenant_id or self.tenant_id

    # ------------------------------------------------------------ handler tables

    @property
    def handlers(self) -> dict[type, Handler]:
        table = self.__dict__.get("_handlers")
        if table is None:
            table = self._sync_table()
            object.__setattr__(self, "_handlers", table)
        return table

    @property
    def async_handlers(self) -> dict[type, AsyncHandler]:
        table = self.__dict__.get("_async_handlers")
        if table is None:
            table = self._async_table()
            object.__setattr__(self, "_async_handlers", table)
        return table

    def _sync_table(self) -> dict[type, Handler]:
        embedder, reranker, llm, store = self.embedder, self.reranker, self.llm, self.store
        table: dict[type, Handler] = {
            Op: store.execute,
            Embed: lambda e: embed_texts(embedder, e.texts, query=e.query),
            Rerank: lambda e: score_texts(_need_reranker(reranker), e.query, e.texts),
            Complete: complete_with(llm) if llm is not None else lambda e: _need_chat(None),
        }
        table.update({kind: pair[0] for kind, pair in self.extra_handlers.items()})
        return table

    def _async_table(self) -> dict[type, AsyncHandler]:
        embedder, reranker, llm, store = self.embedder, self.reranker, self.llm, self.store

        async def rerank(e: Rerank) -> Any:
            return await ascore_texts(_need_reranker(reranker), e.query, e.texts)

        async def no_chat(e: Complete) -> Any:
            _need_chat(None)

        table: dict[type, AsyncHandler] = {
            Op: store.aexecute,
            Embed: lambda e: aembed(embedder, e.texts, query=e.query),
            Rerank: rerank,
            Complete: acomplete_with(llm) if llm is not None else no_chat,
        }
        table.update({kind: pair[1] for kind, pair in self.extra_handlers.items()})
        return table


def to_thread(handler: Handler) -> AsyncHandler:
    """An async handler that runs a blocking ``handler`` in a worker thread."""

    def run(effect: Any) -> Awaitable[Any]:
        return asyncio.to_thread(handler, effect)

    return run
