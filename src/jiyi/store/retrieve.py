"""Search candidates from raw evidence: :class:`~jiyi.store.base.Retrieve`, answered once
for every backend.

A backend answers four primitive reads (:mod:`jiyi.store.base`): :class:`VectorHits`
(the top k by cosine, optionally inside time windows), :class:`KeywordHits` (the top k by
BM25), :class:`ThreadLinks` (who comes before and after an item in its thread) and
:class:`LoadHits` (items, vectors and cosines by id). :func:`retrieve_flow` asks them and
does the rest, the same for all backends:

1. vector hits, nearest first; then time-window hits (the nearest inside the windows);
   then keyword hits, best first — each item once, where it first came;
2. ``neighbours`` rounds of thread expansion: every candidate so far, in order, adds the
   live items just before and just after it (an expired item stops the walk);
3. each candidate gets its item, vector and cosine, its keyword score (when it is among
   the keyword hits), its thread neighbours' ids, their cosines and keyword scores.

:func:`retrieve` / :func:`aretrieve` run the flow with :func:`jiyi.driver.drive` /
:func:`jiyi.driver.adrive` over a store's ``execute``/``aexecute``: that is how a backend
answers ``Retrieve``. A backend that can keep one snapshot across the primitives (SQLite
a read transaction, PostgreSQL a repeatable-read one) drives the flow inside it with its
own handler table instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from jiyi.driver import adrive, drive
from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput
from jiyi.store.base import (
    Candidate,
    Hit,
    KeywordHits,
    Link,
    Loaded,
    LoadHits,
    Op,
    Retrieve,
    ThreadLinks,
    VectorHits,
)


def retrieve_flow(op: Retrieve) -> Flow[list[Candidate]]:
    """The candidates of ``op``, asked of the search primitives (see the module doc)."""
    asks = hit_asks(op)
    found: list[list[Hit]] = []
    for ask in asks:
        found.append((yield from call(ask)))
    return (yield from from_hits(op, asks, found))


def hit_asks(op: Retrieve) -> tuple[VectorHits | KeywordHits, ...]:
    """The searches of step 1, in the order their hits are taken. They do not depend on
    each other, so a backend may run them together (PostgreSQL pipelines them) and give
    their answers, in this order, to :func:`from_hits`."""
    f = op.filter
    if not f.include_expired and f.now is None:
        raise InvalidInput("a filter that hides expired items needs 'now'", field="now")
    asks: list[VectorHits | KeywordHits] = []
    if op.vector is not None and op.vector_k > 0:
        asks.append(VectorHits(f, op.model_id, op.vector, op.vector_k))
        if op.time_ranges or op.time_months:
            asks.append(VectorHits(f, op.model_id, op.vector, op.vector_k, op.time_ranges, op.time_months))
    if op.terms and op.keyword_k > 0:
        asks.append(KeywordHits(f, op.terms, op.keyword_k))
    return tuple(asks)


def from_hits(
    op: Retrieve, asks: tuple[VectorHits | KeywordHits, ...], found: list[list[Hit]], *, threads: bool = True
) -> Flow[list[Candidate]]:
    """Steps 2 and 3, from the answers ``found`` to :func:`hit_asks`. ``threads=False``: the
    backend knows that no hit is in a thread, so :class:`ThreadLinks` would answer nothing
    and is not asked."""
    f = op.filter
    chosen: dict[str, None] = {}
    keyword: dict[str, float] = {}
    for ask, hits in zip(asks, found, strict=True):
        if isinstance(ask, KeywordHits):
            keyword = {h.id: h.score for h in hits}
        _add(chosen, hits)
    if not chosen:
        return []
    rounds = max(0, op.neighbours)
    links = (yield from call(ThreadLinks(f, tuple(chosen), rounds))) if threads else {}
    expand(chosen, links, rounds)
    load = LoadHits(f, op.model_id, op.vector, tuple(chosen), _beside(chosen, links), op.shared_items)
    loaded = yield from call(load)
    return candidates(chosen, links, loaded, keyword)


def _add(chosen: dict[str, None], hits: list[Hit]) -> None:
    for hit in hits:
        chosen[hit.id] = None


def _beside(chosen: dict[str, None], links: dict[str, Link]) -> tuple[str, ...]:
    """The thread neighbours of the candidates that are not candidates themselves (their
    cosines are evidence too)."""
    out: dict[str, None] = {}
    for item_id in chosen:
        link = links.get(item_id)
        if link is not None:
            for other in (link.prev_id, link.next_id):
                if other is not None and other not in chosen:
                    out[other] = None
    return tuple(out)


def expand(chosen: dict[str, None], links: dict[str, Link], rounds: int) -> None:
    """Add, ``rounds`` times, the live thread neighbours of every candidate so far (in
    order, the one before, then the one after), keeping each candidate's first place."""
    for _ in range(rounds):
        for item_id in list(chosen):
            link = links.get(item_id)
            if link is None:
                continue
            for other in (link.prev_id, link.next_id):
                if other is not None and other in links and links[other].live:
                    chosen[other] = None


_NO_LINK = Link(None, None, False)
_NOTHING = Loaded(None, None, None, None)


def candidates(
    chosen: Iterable[str], links: dict[str, Link], loaded: dict[str, Loaded], keyword: dict[str, float]
) -> list[Candidate]:
    """The chosen items that were loaded, in order, with their neighbours' evidence."""
    out: list[Candidate] = []
    score, near, found_at = keyword.get, links.get, loaded.get
    for item_id in chosen:
        found = found_at(item_id)
        if found is None or found.item is None:
            continue
        prev_id, next_id, _ = near(item_id, _NO_LINK)
        before = _NOTHING if prev_id is None else found_at(prev_id, _NOTHING)
        after = _NOTHING if next_id is None else found_at(next_id, _NOTHING)
        out.append(
            Candidate(  # positional, in field order: this runs for every candidate of every search
                found.item,
                found.cosine,
                score(item_id),
                found.vector,
                prev_id,
                next_id,
                before.cosine,
                after.cosine,
                None if prev_id is None else score(prev_id),
                None if next_id is None else score(next_id),
                found.terms,
            )
        )
    return out


def retrieve(op: Retrieve, execute: Callable[[Op[Any]], Any]) -> list[Candidate]:
    """Answer ``op`` with a store's ``execute`` running the primitives."""
    return drive(retrieve_flow(op), {Op: execute})


async def aretrieve(op: Retrieve, aexecute: Callable[[Op[Any]], Awaitable[Any]]) -> list[Candidate]:
    """:func:`retrieve`, awaiting a store's ``aexecute``."""
    return await adrive(retrieve_flow(op), {Op: aexecute})
