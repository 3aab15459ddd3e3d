"""Search: candidates from every index, scored, cut, reranked and diversified."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import NamedTuple

import numpy as np

from jiyi.effects import Flow, call, rerank_scores
from jiyi.embed.cached import query_vector
from jiyi.embed.scale import on_scale
from jiyi.errors import InvalidInput, StoreReadOnly
from jiyi.model import (
    MemoryItem,
    MemoryType,
    RelationType,
    Status,
    as_utc,
    in_agent_space,
)
from jiyi.problems import too_large, too_small
from jiyi.read import statements
from jiyi.read.owner import owner_terms
from jiyi.read.rank import (
    STATEMENT_POOL,
    Scored,
    SearchHit,
    asked_terms,
    learned_columns,
    mmr_select,
    relevances,
    score_candidates,
    statement_pool,
)
from jiyi.read.rerank import apply_rerank, rerank_texts
from jiyi.read.retrievals import check_kind, record_access
from jiyi.read.sources import doubled, one_per_statement
from jiyi.runtime import Runtime
from jiyi.store.base import (
    AccessKind,
    Candidate,
    Filter,
    GetItems,
    Retrieve,
    Retrieved,
    VectorsFor,
    Viewer,
    Write,
    detached,
)
from jiyi.text.answers import about_asking, about_the_assistant, without_framing
from jiyi.text.timeparse import TimeWindows, time_windows, told_windows, without_spans
from jiyi.validate import Problems, check_limit, check_text, enum_tuple, scope_keys

log = logging.getLogger("jiyi.search")


def search(
    rt: Runtime,
    /,
    query: str,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    memory_types: Iterable[MemoryType | str] | MemoryType | str | None = None,
    statuses: Iterable[Status | str] | Status | str | None = None,
    tags: Sequence[str] = (),
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    limit: int = 10,
    threshold: float | None = None,
    min_relevance: float | None = None,
    include_expired: bool = False,
    explain: bool = False,
    touch: bool = True,
    viewer: Viewer | None = None,
    as_of: datetime | None = None,
    actor: str | None = None,
    log_as: AccessKind = "search",
) -> Flow[list[SearchHit]]:
    """Search one or several scopes (give any of the ids) by meaning and by words.

    Results are ranked by the configured formula (seed 000 by default) and
    diversified with MMR. ``threshold`` drops results whose similarity is below it.
    ``min_relevance`` (0..1; 0.5 recommended, see docs/benchmarks.md) drops results
    whose ``relevance`` is below it, so a question nothing answers can return an
    empty list; None (default) keeps them all. ``relevance`` (see
    :func:`jiyi.read.rank.relevances`) is set on each hit when ``min_relevance`` is
    given or ``explain=True``; it never changes the order.
    ``explain=True`` adds a ``why`` line per signal to each hit's breakdown.
    Unless ``touch=False``, the hits' ``last_used_at`` and ``access_count`` are updated and
    the call is written to the retrieval log (:mod:`jiyi.read.retrievals`) as a ``log_as``
    access (``search``, ``context`` or ``tool``) by ``actor``, with every hit's scores.
    ``viewer`` hides project memories it may not see (see :class:`Viewer`).
    ``as_of`` answers for a past moment: what jiyi knew then and was true then (a value
    superseded later counts; one learned later does not); it never touches usage.
    """
    owner = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
    kind = _check_options(query, limit, threshold, min_relevance, owner, memory_types, statuses, log_as)
    keys = _searched_scopes(*owner.values())
    flt, wanted = _filter(
        rt,
        keys,
        tenant_id,
        memory_types,
        statuses,
        tags,
        include_expired,
        occurred_after,
        occurred_before,
        viewer,
        as_of,
    )
    now = flt.now or rt.now()
    query_ = _Query(query, time_windows(query, now))
    (candidates, retired), query_ = yield from _candidates(rt, query_, flt, wanted, limit, user_id)
    if agent_id is not None:  # agents do not see each other's user memories; no agent: all
        candidates = [c for c in candidates if in_agent_space(c.item, agent_id)]
    if as_of is not None:
        candidates = [c for c in candidates if c.item.valid_at(now)]
        touch = False
    scored = yield from _scored(rt, candidates, query_, now, retired, touch, limit)
    floor = rt.rank.threshold if threshold is None else threshold
    rel = _Relevance.of(scored, query_, rt) if min_relevance is not None or explain else None
    scored = _cut(scored, floor, rel, min_relevance)
    if rt.reranker is not None and scored:
        scored = yield from _reranked(rt, query, scored, limit)
    scored = one_per_statement(scored)
    hits = _hits(_diverse(scored, rt, limit), rel)
    if explain:
        _explain(hits, floor, min_relevance, query_)
    if touch:
        yield from record_access(rt, flt.tenant_id, kind, query, served(hits), now, owner=owner, actor=actor)
    return hits


def _statement_gains(rt: Runtime, candidates: list[Candidate], query: str, keep: bool) -> Flow[np.ndarray]:
    """Each candidate's best statement above its own cosine (:mod:`jiyi.read.statements`),
    when this embedder's fusion weighs it. Statements no cache held (a memory written
    before they were kept) are embedded here and, if ``keep``, written to the store's
    cache; a failure to write them is logged, never the search's."""
    qvec = yield from query_vector(rt, query)
    vectors, put = yield from statements.statement_vectors(rt, [c.item.content for c in candidates])
    if keep and put is not None:
        try:
            yield from call(Write((put,)))
        except StoreReadOnly:
            pass  # a read-only store is searched as it is
        except Exception:
            log.warning("statement vectors could not be kept in the cache; the search goes on", exc_info=True)
    return statements.gains(candidates, qvec, vectors)


def _scored(
    rt: Runtime,
    candidates: list[Candidate],
    query: _Query,
    now: datetime,
    retired: Mapping[str, tuple[str, ...]],
    keep: bool,
    limit: int,
) -> Flow[list[Scored]]:
    """Every candidate scored; ``keep``: statements embedded on the way go into the store's
    embedding cache (a search that writes its usage may write them too)."""
    columns = gains = None
    if candidates and statements.used(rt):
        # The best statement of the best candidates only (rank.STATEMENT_POOL).
        columns = learned_columns(candidates, query.time_test, query.words, query.skip)
        best = statement_pool(columns, rt.embedder.model_id, max(STATEMENT_POOL, rt.rank.pool_factor * limit))
        gains = np.zeros(len(candidates))
        gains[best] = yield from _statement_gains(rt, [candidates[i] for i in best], query.text, keep)
    return score_candidates(
        candidates,
        rt.rank,
        now,
        query.time_test,
        query.words,
        rt.embedder.model_id,
        query.skip,
        retired,
        about_asking(query.text),
        gains,
        columns,
        about_the_assistant(query.text),
    )


_WARNED: set[str] = set()


def _warn_unembedded(model_id: str, count: int) -> None:
    """Say once per process and embedder that memories lack its vectors (written with another
    embedder): they are found by their words only, and a relevance cut may drop them."""
    if model_id in _WARNED:
        return
    _WARNED.add(model_id)
    log.warning(
        "%d of this search's candidates have no vector of %s (embedded by another embedder?): "
        "they are found by their words only. Run `jiyi reembed` (Memory.reembed()) to embed them.",
        count,
        model_id,
    )


def _hits(scored: list[Scored], rel: _Relevance | None) -> list[SearchHit]:
    """The results, each item the caller's own (candidates' items are shared, see
    :attr:`Retrieve.shared_items`)."""
    hits = [SearchHit(detached(s.candidate.item), s.score, s.similarity, s.breakdown) for s in scored]
    return hits if rel is None else rel.annotate(hits)


def served(hits: Sequence[SearchHit]) -> list[Retrieved]:
    """What the retrieval log keeps of search hits: rank (1 = first) and scores."""
    return [
        Retrieved(h.item.id, rank, h.score, h.similarity, h.relevance) for rank, h in enumerate(hits, start=1)
    ]


def _cut(
    scored: list[Scored], floor: float | None, rel: _Relevance | None, min_relevance: float | None
) -> list[Scored]:
    """The similarity floor and the relevance cut."""
    return [
        s
        for s in scored
        if (floor is None or s.similarity >= floor)
        and (rel is None or min_relevance is None or rel.of_id(s.candidate.item.id) >= min_relevance)
    ]


def _reranked(rt: Runtime, query: str, scored: list[Scored], limit: int) -> Flow[list[Scored]]:
    """The optional second stage: the reranker's scores blended into the best ``rerank_top``."""
    top = max(rt.rerank_top, limit)
    scores = yield from rerank_scores(query, rerank_texts(scored, top))
    return apply_rerank(scored, scores, rt.rerank_weight, top)


def _explain(hits: list[SearchHit], floor: float | None, min_relevance: float | None, query: _Query) -> None:
    for hit in hits:
        hit.breakdown["threshold"] = floor if floor is not None else 0.0
        hit.breakdown["min_relevance"] = min_relevance if min_relevance is not None else 0.0
        hit.breakdown["query.time_windows"] = float(len(query.windows.ranges) + len(query.windows.months))
        if query.windows and not query.windows.contains(hit.item.occurred_at):
            # Inside the query's time by what it tells of, not by when it was said.
            hit.breakdown["time.told"] = float(query.tells_of_window(hit.item))


def _filter(
    rt: Runtime,
    keys: tuple[str, ...],
    tenant_id: str | None,
    memory_types: Iterable[MemoryType | str] | MemoryType | str | None,
    statuses: Iterable[Status | str] | Status | str | None,
    tags: Sequence[str],
    include_expired: bool,
    occurred_after: datetime | None,
    occurred_before: datetime | None,
    viewer: Viewer | None,
    as_of: datetime | None,
) -> tuple[Filter, tuple[Status, ...]]:
    """What may be a candidate, and the statuses the caller wants shown."""
    now = rt.now() if as_of is None else as_utc(as_of)
    wanted = enum_tuple(Status, statuses, "statuses") or (Status.ACTIVE,)
    if as_of is not None:
        wanted = tuple(dict.fromkeys((*wanted, Status.SUPERSEDED)))
    flt = Filter(
        tenant_id=rt.tenant(tenant_id),
        scope_keys=keys,
        memory_types=enum_tuple(MemoryType, memory_types, "memory_types"),
        # Superseded items are looked at too, so their replacements can be found
        # through the old wording; they are shown only when asked for.
        statuses=tuple(dict.fromkeys((*wanted, Status.SUPERSEDED))),
        tags=tuple(tags),
        include_expired=include_expired,
        now=now,
        occurred_after=occurred_after,
        occurred_before=occurred_before,
        viewer=viewer,
        created_before=None if as_of is None else now + timedelta(microseconds=1),
    )
    return flt, wanted


def _searched_scopes(*ids: str | None) -> tuple[str, ...]:
    keys = scope_keys(*ids)
    if not keys:
        raise InvalidInput("give at least one scope to search: user_id, project_id, session_id or agent_id")
    return keys


def _check_options(
    query: str,
    limit: int,
    threshold: float | None,
    min_relevance: float | None,
    owner: Mapping[str, str | None],
    memory_types: object,
    statuses: object,
    log_as: str,
) -> AccessKind:
    """Every problem with a search's arguments at once (one InvalidInput lists them all)."""
    problems = Problems()
    problems.check(check_text, query, "query")
    problems.check(check_limit, limit)
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        # REST's words for the same bound (jiyi.problems)
        word = (
            too_small("threshold", 0.0, threshold)
            if threshold < 0
            else too_large("threshold", 1.0, threshold)
        )
        problems.add(word, "threshold")
    if min_relevance is not None and (
        isinstance(min_relevance, bool)
        or not isinstance(min_relevance, int | float)
        or not 0.0 <= min_relevance <= 1.0
    ):
        problems.add(
            f"min_relevance must be a number within 0..1 (or None for no cut), got {min_relevance!r}",
            "min_relevance",
        )
    problems.check(_searched_scopes, *owner.values())
    problems.check(enum_tuple, MemoryType, memory_types, "memory_types")
    problems.check(enum_tuple, Status, statuses, "statuses")
    problems.raise_any()
    return check_kind(log_as)


@dataclass(frozen=True)
class _Query:
    """The query text, the time windows it names, and its keyword terms."""

    text: str
    windows: TimeWindows
    skip: frozenset[str] = frozenset()
    """Terms that are no keyword here: the scope owner's name (:mod:`jiyi.read.owner`)."""

    @cached_property
    def words(self) -> str:
        """The text whose words are matched: the query less its counted-back time phrases
        (``TimeWindows.counted``) and the words that frame the question: a count ("How
        many *different* doctors"), a request ("*Can you recommend* a show") or a pointer
        back to the conversation ("*can you remind me*"; :func:`~jiyi.text.answers.without_framing`).
        A named time keeps its words ("December", "May 2023" or "last month" may be
        written in the memory itself, and then it is the strongest clue there is); "a week
        ago" is a distance from the day of asking, and a memory that says "about a week
        ago" counted from another day, so the words would match the wrong memories. The
        window still counts."""
        text = without_spans(self.text, self.windows.counted) if self.windows.counted else self.text
        return without_framing(text)

    @cached_property
    def terms(self) -> tuple[str, ...]:
        found = asked_terms(self.words)
        return tuple(t for t in found if t not in self.skip) if self.skip else found

    def in_window(self, item: MemoryItem) -> bool:
        """Said inside a time the query names, or telling of one ("we went camping last
        week", said on 2 July, for "in June"): people tell of their days afterwards."""
        return self.windows.contains(item.occurred_at) or self.tells_of_window(item)

    def tells_of_window(self, item: MemoryItem) -> bool:
        """:meth:`in_window` through what the item says, not when it was said (counted from
        when it was stored when it has no time of its own: "can't travel in July 2025")."""
        return self.windows.hold(told_windows(item.content, item.occurred_at or item.created_at))

    @property
    def time_test(self) -> Callable[[MemoryItem], bool] | None:
        """:meth:`in_window`, or None when the query names no time (nothing to test)."""
        return self.in_window if self.windows else None


def _candidates(
    rt: Runtime, query: _Query, flt: Filter, wanted: tuple[Status, ...], limit: int, user_id: str | None
) -> Flow[tuple[Replaced, _Query]]:
    """Vector, keyword and time-window evidence with thread neighbours; superseded items
    lend their evidence to what replaced them. The query comes back with the terms that
    are no keyword in this scope (:mod:`jiyi.read.owner`) left out."""
    cfg = rt.rank
    qvec = yield from query_vector(rt, query.text)
    pool = max(cfg.min_pool, cfg.pool_factor * limit)
    retrieve = Retrieve(
        flt,
        rt.embedder.model_id,
        qvec,
        query.terms,
        vector_k=pool,
        keyword_k=pool,
        neighbours=cfg.neighbours,
        time_ranges=query.windows.ranges,
        time_months=query.windows.months,
        shared_items=True,  # read here; only the hits are copied (_hits)
    )
    candidates = yield from call(retrieve)
    skip = owner_terms(candidates, user_id, query.terms, query.text)
    if skip:
        # Asked again without the owner's name: its keyword brought in what only names them.
        query = replace(query, skip=skip)
        retrieve = replace(retrieve, terms=query.terms)
        candidates = yield from call(retrieve)
    # A fact and the turn it came from will take one place (read/sources.py); when the
    # pool holds both, ask for as many more so the pool still holds `pool` statements.
    extra = doubled([c.item for c in candidates])
    if extra:
        candidates = yield from call(replace(retrieve, vector_k=pool + extra, keyword_k=pool + extra))
    unembedded = sum(c.vector is None for c in candidates)
    if unembedded:
        _warn_unembedded(rt.embedder.model_id, unembedded)
    return (yield from follow_replacements(rt, candidates, flt, wanted)), query


@dataclass(frozen=True)
class _Relevance:
    """Per-candidate relevance columns (see :func:`jiyi.read.rank.relevances`), worked out
    over the whole pool before any cut: IDF and neighbours come from it."""

    columns: dict[str, np.ndarray]
    rows: dict[str, int]

    @classmethod
    def of(cls, scored: list[Scored], query: _Query, rt: Runtime) -> _Relevance:
        columns = relevances(
            [s.candidate for s in scored], query.terms, query.time_test, rt.embedder.model_id
        )
        return cls(columns, {s.candidate.item.id: i for i, s in enumerate(scored)})

    def of_id(self, item_id: str) -> float:
        return float(self.columns["relevance"][self.rows[item_id]])

    def annotate(self, hits: list[SearchHit]) -> list[SearchHit]:
        out = []
        for hit in hits:
            row = self.rows[hit.item.id]
            hit.breakdown.update({k: float(v[row]) for k, v in self.columns.items()})
            out.append(replace(hit, relevance=self.of_id(hit.item.id)))
        return out


def _diverse(scored: list[Scored], rt: Runtime, limit: int) -> list[Scored]:
    """MMR over the best ``pool_factor * limit`` so the results are not copies of one thing."""
    cfg = rt.rank
    if cfg.mmr and len(scored) > limit:
        window = scored[: cfg.pool_factor * limit]
        picked = mmr_select(
            [s.score for s in window],
            [s.candidate.vector for s in window],
            limit,
            cfg.mmr_lambda,
            # Set on the default embedder's cosine scale; moved onto this one's.
            on_scale(cfg.mmr_redundancy_floor, rt.embedder.model_id),
            [s.candidate.item.thread_id for s in window],
            cfg.thread_diversity,
        )
        scored = [window[i] for i in picked]
    return scored[:limit]


class Replaced(NamedTuple):
    """Candidates with what they replaced: per replacement's id, the texts of the
    superseded items the search found (an episode quoting one goes below it,
    :func:`jiyi.read.versions.quotes_retired`)."""

    candidates: list[Candidate]
    retired: dict[str, tuple[str, ...]]


def follow_replacements(
    rt: Runtime, candidates: list[Candidate], flt: Filter, shown: tuple[Status, ...]
) -> Flow[Replaced]:
    """Give each superseded candidate's replacement its evidence; drop superseded
    candidates unless the caller asked for them."""
    by_id = {c.item.id: c for c in candidates}
    wanted: dict[str, Candidate] = {}
    retired: dict[str, tuple[str, ...]] = {}
    for c in candidates:
        if c.item.status != Status.SUPERSEDED:
            continue
        for rel in c.item.relations:
            if rel.type == RelationType.SUPERSEDED_BY:
                retired[rel.target_id] = (*retired.get(rel.target_id, ()), c.item.content)
                best = wanted.get(rel.target_id)
                if best is None or (c.cosine or 0) > (best.cosine or 0):
                    wanted[rel.target_id] = c
    missing = tuple(i for i in wanted if i not in by_id)
    found = (yield from call(GetItems(flt.tenant_id, missing))) if missing else []
    # Their vectors too: MMR and the version tests compare candidates by them.
    vectors = (yield from call(VectorsFor(flt.tenant_id, rt.embedder.model_id, missing))) if found else {}
    for item in found:
        if (
            item.status in shown
            and (not flt.scope_keys or item.scope_key in flt.scope_keys)
            and (flt.viewer is None or flt.viewer.sees(item))
        ):
            src = wanted[item.id]
            by_id[item.id] = Candidate(item, src.cosine, src.keyword, vectors.get(item.id))
    for target_id, src in wanted.items():
        cur = by_id.get(target_id)
        if cur is not None and cur.item.status in shown:
            by_id[target_id] = cur._replace(
                cosine=max(cur.cosine or 0.0, src.cosine or 0.0),
                keyword=max(cur.keyword or 0.0, src.keyword or 0.0) or None,
            )
    return Replaced([c for c in by_id.values() if c.item.status in shown], retired)
