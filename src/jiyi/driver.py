"""The one driver: runs a flow (see :mod:`jiyi.effects`) against a table of handlers.

:func:`drive` and :func:`adrive` are the only effect loops in jiyi. A handler table maps
an effect type to the function that performs it; an effect is handled by the entry of
the first class in its MRO that the table names (so one entry for the store's ``Op``
covers every store operation). A handler's exception is thrown into the flow where it
asked, so a flow may catch and recover; otherwise it propagates unchanged.

:func:`run` / :func:`arun` drive a flow with a :class:`~jiyi.runtime.Runtime`'s tables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from jiyi.effects import Flow

if TYPE_CHECKING:
    from jiyi.runtime import Runtime

R = TypeVar("R")

Handler = Callable[[Any], Any]
AsyncHandler = Callable[[Any], Awaitable[Any]]


class UnhandledEffect(TypeError):
    """A flow yielded something its driver has no handler for (a programming error)."""


def _lookup(table: Mapping[type, Any], effect: object) -> Any:
    for kind in type(effect).__mro__:
        handler = table.get(kind)
        if handler is not None:
            return handler
    known = ", ".join(sorted(k.__name__ for k in table))
    raise UnhandledEffect(f"no handler for {type(effect).__name__} here (this driver handles {known})")


def drive(flow: Flow[R], handlers: Mapping[type, Handler]) -> R:
    """Run ``flow`` to its end in the calling thread."""
    try:
        effect = next(flow)
        while True:
            try:
                result = _lookup(handlers, effect)(effect)
            except Exception as exc:  # let the flow see the failure where it asked
                effect = flow.throw(exc)
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        value: R = stop.value
        return value
    finally:
        flow.close()


async def adrive(flow: Flow[R], handlers: Mapping[type, AsyncHandler]) -> R:
    """Run ``flow`` to its end, awaiting each handler."""
    try:
        effect = next(flow)
        while True:
            try:
                result = await _lookup(handlers, effect)(effect)
            except Exception as exc:
                effect = flow.throw(exc)
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        value: R = stop.value
        return value
    finally:
        flow.close()


def run(flow: Flow[R], runtime: Runtime) -> R:
    """Run ``flow`` with everything ``runtime`` holds (store, embedder, model, reranker, files)."""
    return drive(flow, runtime.handlers)


async def arun(flow: Flow[R], runtime: Runtime) -> R:
    """:func:`run`, awaited."""
    return await adrive(flow, runtime.async_handlers)
