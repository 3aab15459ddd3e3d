"""The Memory API: one implementation, a thin sync driver and a thin async driver.

:class:`MemoryCore` builds a *flow* (see :mod:`jiyi.effects`) for every operation.
:class:`Memory` runs flows in the calling thread; :class:`AsyncMemory` awaits them.
Neither holds logic of its own: each public method is generated from the core's flow
by :func:`_sync` / :func:`_async`, so signatures and docs exist once.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Concatenate, ParamSpec, TypeVar

import numpy as np
from pydantic import ValidationError

from jiyi.config import GateConfig, RankConfig, SessionConfig
from jiyi.driver import arun, run
from jiyi.effects import Flow, call, embed, rerank_scores
from jiyi.embed.base import Embedder, Vectors
from jiyi.errors import InvalidInput, NotFound, StoreReadOnly
from jiyi.files import FileFlows, repair_files, with_files
from jiyi.lifecycle import LifecyclePolicy, MaintenanceReport, maintain_flow
from jiyi.lifecycle.compress import CompressionFlows
from jiyi.llm.base import ChatModel
from jiyi.model import (
    DEFAULT_TENANT,
    MemoryItem,
    MemoryType,
    RelationType,
    Scope,
    Source,
    Status,
    invalid_from_pydantic,
    owner_scope,
    scope_key,
)
from jiyi.procedural import DECOMPOSITION, FAILURE, SKILL, ProceduralFlows
from jiyi.profile import ProfileFlows
from jiyi.read.rank import SearchHit, mmr_select, relevances, score_candidates
from jiyi.read.rerank import RerankerSpec, apply_rerank, rerank_texts
from jiyi.runtime import Runtime
from jiyi.session.flows import RememberResult, SessionFlows
from jiyi.store.base import (
    CacheGet,
    CachePut,
    Candidate,
    CountEvents,
    Filter,
    GetHistory,
    GetItems,
    GetStats,
    HistoryAction,
    HistoryEvent,
    ListItems,
    Page,
    Purge,
    RecordEvent,
    Retrieve,
    Store,
    StoreStats,
    Touch,
    Upsert,
    Viewer,
    Write,
    history_event,
    same_audience,
)
from jiyi.store.sqlcommon import text_hash
from jiyi.text.timeparse import time_windows, without_spans
from jiyi.text.tokenize import index_text, query_terms
from jiyi.write.gate import GateDecision, Screened, duplicate_decision, rate_key, rate_limit_decision, screen

P = ParamSpec("P")
R = TypeVar("R")

MAX_LIMIT = 1000
_SELF_DESCRIBED = frozenset({SKILL, FAILURE, DECOMPOSITION})
"""``structured["kind"]`` of procedural records: their structure is the record itself (the
workflow, counts), not something read off the text, so a wording change keeps it."""
IMPORT_BATCH = 256


@dataclass(frozen=True)
class AddResult:
    """What ``add`` did: the stored (or reinforced) item, or None when the gate refused."""

    item: MemoryItem | None
    decision: GateDecision

    def to_json_dict(self) -> dict[str, object]:
        return {
            "item": None if self.item is None else self.item.to_json_dict(),
            "decision": self.decision.to_json_dict(),
        }


@dataclass(frozen=True)
class ImportResult:
    imported: int
    embedded: int


def _scope_keys(
    user_id: str | None, project_id: str | None, session_id: str | None, agent_id: str | None
) -> tuple[str, ...]:
    pairs = (
        (Scope.SESSION, session_id),
        (Scope.PROJECT, project_id),
        (Scope.AGENT, agent_id),
        (Scope.USER, user_id),
    )
    keys: list[str] = []
    for scope, value in pairs:
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{scope.value}_id must be a non-empty string", field=f"{scope.value}_id")
        keys.append(scope_key(scope, value))
    return tuple(keys)


def _infer_scope(
    scope: Scope | str | None,
    user_id: str | None,
    project_id: str | None,
    session_id: str | None,
    agent_id: str | None,
) -> Scope:
    """An explicit scope wins; otherwise the broadest long-lived scope whose id is given."""
    if scope is not None:
        try:
            return Scope(scope)
        except ValueError:
            raise InvalidInput(
                f"unknown scope {scope!r}; use one of {', '.join(s.value for s in Scope)}", field="scope"
            ) from None
    if any(v is not None for v in (user_id, project_id, agent_id, session_id)):
        return owner_scope(user_id, project_id, agent_id, session_id)
    raise InvalidInput(
        "say whose memory this is: give user_id, project_id, session_id or agent_id", field="user_id"
    )


def _enum_tuple(kind: type[Any], values: Iterable[Any] | Any | None, name: str) -> tuple[Any, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        try:
            out.append(kind(v))
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            raise InvalidInput(f"unknown {name} {v!r}; use one of {allowed}", field=name) from None
    return tuple(out)


def _last_snapshot(events: Sequence[HistoryEvent]) -> MemoryItem | None:
    """The item as the newest readable snapshot of its history shows it (None if none is)."""
    for event in reversed(events):
        snapshot = event.after or event.before
        if snapshot is not None:
            try:
                return MemoryItem.model_validate(snapshot)
            except ValidationError:
                continue
    return None


def _check_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}", field=name)
    if not value.strip():
        raise InvalidInput(f"{name} must not be empty", field=name)
    return value


class MemoryCore(SessionFlows, ProfileFlows, ProceduralFlows, CompressionFlows, FileFlows):
    """Holds configuration and builds flows; see :class:`Memory` and :class:`AsyncMemory`.

    The conversation flows (``remember``, checkpoints, documents, ``context`` ...) come
    from :class:`~jiyi.session.flows.SessionFlows`.
    """

    def __init__(
        self,
        store: Store,
        *,
        embedder: Embedder | Callable[[list[str]], Any] | str | None = None,
        llm: ChatModel | Callable[[list[dict[str, str]]], str] | str | None = None,
        gate: GateConfig | None = None,
        rank: RankConfig | None = None,
        session: SessionConfig | None = None,
        reranker: RerankerSpec = None,
        rerank_weight: float = 0.5,
        rerank_top: int = 30,
        clock: Callable[[], datetime] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        files: str | Path | None = None,
    ) -> None:
        # files (jiyi/files/): memory.md / learnings.md per scope under this directory
        if not isinstance(store, Store):
            raise InvalidInput(f"store must be a jiyi Store, not {type(store).__name__}", field="store")
        self.rt = Runtime.build(
            with_files(store, files),
            embedder=embedder,
            llm=llm,
            reranker=reranker,
            gate=gate,
            rank=rank,
            session=session,
            rerank_weight=rerank_weight,
            rerank_top=rerank_top,
            clock=clock,
            tenant_id=tenant_id,
        )
        rt = self.rt
        self.store = rt.store
        self.embedder = rt.embedder
        self.llm = rt.llm
        self.gate = rt.gate
        self.rank = rt.rank
        self.session_config = rt.session
        self.reranker = rt.reranker
        self.rerank_weight = rerank_weight
        self.rerank_top = rerank_top
        self.tenant_id = tenant_id
        self._query_cache = rt.query_cache

    def now(self) -> datetime:
        return self.rt.now()

    # ------------------------------------------------------------ shared steps

    def _embed_documents(self, texts: Sequence[str]) -> Flow[tuple[Vectors, CachePut | None]]:
        """Embed through the persistent cache; returns vectors and the cache rows to add."""
        model = self.embedder.model_id
        hashes = [text_hash(t) for t in texts]
        cached = yield from call(CacheGet(model, tuple(dict.fromkeys(hashes))))
        missing = [i for i, h in enumerate(hashes) if h not in cached]
        fresh: dict[str, np.ndarray] = {}
        if missing:
            unique = list(dict.fromkeys(texts[i] for i in missing))
            vectors = yield from embed(unique)
            fresh = {text_hash(t): vectors[j] for j, t in enumerate(unique)}
        rows = [cached[h] if h in cached else fresh[h] for h in hashes]
        out = np.vstack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)
        put = CachePut(model, tuple(fresh.items())) if fresh else None
        return out, put

    def _query_vector(self, query: str) -> Flow[np.ndarray]:
        key = (self.embedder.model_id, query)
        hit = self._query_cache.get(key)
        if hit is None:
            vectors = yield from embed([query])
            hit = vectors[0]
            self._query_cache.put(key, hit)
        return hit

    def _all_items(self, flt: Filter) -> Flow[list[MemoryItem]]:
        """Every item the filter matches, following the cursor page by page."""
        items: list[MemoryItem] = []
        cursor: str | None = None
        while True:
            page = yield from call(ListItems(flt, limit=MAX_LIMIT, cursor=cursor))
            items.extend(page.items)
            if page.next_cursor is None:
                return items
            cursor = page.next_cursor

    def _require(self, item_id: str, tenant_id: str | None, viewer: Viewer | None = None) -> Flow[MemoryItem]:
        _check_text(item_id, "id")
        found = yield from call(GetItems(tenant_id or self.tenant_id, (item_id,)))
        # An item the viewer may not see answers exactly like one that does not exist.
        if not found or (viewer is not None and not viewer.sees(found[0])):
            raise NotFound(f"no memory with id {item_id!r}", item_id=item_id)
        return found[0]

    def _event(
        self,
        action: HistoryAction,
        before: MemoryItem | None,
        after: MemoryItem | None,
        reason: str,
        actor: str | None,
    ) -> HistoryEvent:
        return history_event(action, before, after, reason=reason, at=self.now(), actor=actor)

    # ------------------------------------------------------------ add

    def add(
        self,
        /,
        content: str,
        *,
        memory_type: MemoryType | str = MemoryType.FACT,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        scope: Scope | str | None = None,
        tenant_id: str | None = None,
        confidence: float = 0.9,
        importance: float = 0.5,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        source: Source | str = Source.USER,
        source_id: str | None = None,
        occurred_at: datetime | None = None,
        expires_at: datetime | None = None,
        raw: str | None = None,
        summary: str | None = None,
        structured: Mapping[str, Any] | None = None,
        visibility: str = "members",
        automatic: bool = False,
        actor: str | None = None,
        viewer: Viewer | None = None,
    ) -> Flow[AddResult]:
        """Store an explicit memory through the write gate.

        Returns the stored item, or the existing item it reinforced (mentions + 1,
        confidence + 0.05), or ``item=None`` with the gate's reasons for refusing.
        ``automatic=True`` marks an extraction (rate-limited per session).
        With a ``viewer``, only items it may see count as duplicates (an invisible item
        is never reinforced nor revealed), and ``viewer.actor`` becomes
        ``metadata["created_by"]`` unless the metadata names a creator.
        """
        _check_text(content, "content")
        if viewer is not None and viewer.actor is not None:
            metadata = {"created_by": viewer.actor, **(metadata or {})}
        now = self.now()
        item = MemoryItem.build(
            content=content,
            raw=raw if raw is not None else None,
            summary=summary,
            structured=dict(structured) if structured is not None else None,
            memory_type=memory_type,
            scope=_infer_scope(scope, user_id, project_id, session_id, agent_id),
            tenant_id=tenant_id or self.tenant_id,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            confidence=confidence,
            importance=importance,
            tags=tuple(tags),
            metadata=dict(metadata or {}),
            source=source,
            source_id=source_id,
            occurred_at=occurred_at,
            expires_at=expires_at,
            visibility=visibility,
            created_at=now,
            updated_at=now,
        )
        checked = screen(item.content, item.confidence, self.gate)
        if isinstance(checked, GateDecision):
            return AddResult(None, checked)
        if automatic:
            if item.session_id is None:
                raise InvalidInput(
                    "an automatic extraction needs the session_id it came from", field="session_id"
                )
            key = rate_key(item.tenant_id, item.session_id)
            used = yield from call(CountEvents(key, now - self.gate.extraction_window))
            limited = rate_limit_decision(used, self.gate, item.session_id)
            if limited:
                return AddResult(None, limited)
        return (yield from self._store_new(item, checked, automatic, actor, viewer))

    def _store_new(
        self,
        item: MemoryItem,
        checked: Screened,
        automatic: bool,
        actor: str | None,
        viewer: Viewer | None = None,
    ) -> Flow[AddResult]:
        if checked.text != item.content:
            # The original, unredacted text must not survive in ``raw`` either.
            item = item.evolve(content=checked.text, raw=None if item.raw == item.content else item.raw)
        vectors, cache_put = yield from self._embed_documents([item.content])
        vector = vectors[0]
        same_scope = same_audience(
            Filter(
                tenant_id=item.tenant_id, scope_keys=(item.scope_key,), now=item.created_at, viewer=viewer
            ),
            item,
        )
        nearest = yield from call(Retrieve(same_scope, self.embedder.model_id, vector, (), 1, 0))
        best = nearest[0] if nearest else None
        decision = duplicate_decision(
            checked, best.item.id if best else None, best.cosine if best else None, self.gate
        )
        changes: list[Any] = [cache_put] if cache_put else []
        if automatic:
            assert item.session_id is not None
            changes.append(RecordEvent(rate_key(item.tenant_id, item.session_id), item.created_at))
        if decision.action == "reinforce" and best is not None:
            old = best.item
            stored = old.evolve(
                mention_count=old.mention_count + 1,
                confidence=min(1.0, old.confidence + self.gate.reinforce_step),
                updated_at=item.created_at,
            )
            reason = f"re-confirmed by: {item.content[:200]}"
            changes.append(
                Upsert(
                    stored,
                    index_text(stored.content),
                    self._event(HistoryAction.REINFORCE, old, stored, reason, actor),
                )
            )
        else:
            stored = item
            reason = "; ".join(decision.reasons)
            changes.append(
                Upsert(
                    stored,
                    index_text(stored.content),
                    self._event(HistoryAction.ADD, None, stored, reason, actor),
                    vector=vector,
                    model_id=self.embedder.model_id,
                )
            )
        yield from call(Write(tuple(changes)))
        return AddResult(stored, decision)

    # ------------------------------------------------------------ search

    def search(
        self,
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
        Retrieval updates ``last_used_at`` and ``access_count`` unless ``touch=False``.
        ``viewer`` hides project memories it may not see (see :class:`Viewer`).
        """
        _check_text(query, "query")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(
                f"limit must be an integer within 1..{MAX_LIMIT}, got {limit!r}", field="limit"
            )
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise InvalidInput(f"threshold must be within 0..1, got {threshold!r}", field="threshold")
        if min_relevance is not None and (
            isinstance(min_relevance, bool)
            or not isinstance(min_relevance, int | float)
            or not 0.0 <= min_relevance <= 1.0
        ):
            raise InvalidInput(
                f"min_relevance must be a number within 0..1 (or None for no cut), got {min_relevance!r}",
                field="min_relevance",
            )
        keys = _scope_keys(user_id, project_id, session_id, agent_id)
        if not keys:
            raise InvalidInput(
                "give at least one scope to search: user_id, project_id, session_id or agent_id"
            )
        now = self.now()
        wanted = _enum_tuple(Status, statuses, "status") or (Status.ACTIVE,)
        flt = Filter(
            tenant_id=tenant_id or self.tenant_id,
            scope_keys=keys,
            memory_types=_enum_tuple(MemoryType, memory_types, "memory_type"),
            # Superseded items are looked at too, so their replacements can be found
            # through the old wording; they are shown only when asked for.
            statuses=tuple(dict.fromkeys((*wanted, Status.SUPERSEDED))),
            tags=tuple(tags),
            include_expired=include_expired,
            now=now,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            viewer=viewer,
        )
        cfg = self.rank
        qvec = yield from self._query_vector(query)
        windows = time_windows(query, now)
        pool = max(cfg.min_pool, cfg.pool_factor * limit)
        terms = query_terms(without_spans(query, windows.spans))
        candidates = yield from call(
            Retrieve(
                flt,
                self.embedder.model_id,
                qvec,
                terms,
                vector_k=pool,
                keyword_k=pool,
                neighbours=cfg.neighbours,
                time_ranges=windows.ranges,
                time_months=windows.months,
            )
        )
        candidates = yield from self._follow_replacements(candidates, flt, wanted)
        floor = cfg.threshold if threshold is None else threshold

        def in_window(item: MemoryItem) -> bool:
            return windows.contains(item.occurred_at)

        scored = score_candidates(candidates, cfg, now, in_window)
        rel_cols: dict[str, np.ndarray] = {}
        rel_row: dict[str, int] = {}
        if min_relevance is not None or explain:
            # Over the whole pool, before any cut: IDF and neighbours come from it.
            rel_cols = relevances([s.candidate for s in scored], terms, in_window if windows else None)
            rel_row = {s.candidate.item.id: i for i, s in enumerate(scored)}
        cut = min_relevance if min_relevance is not None else -1.0
        scored = [
            s
            for s in scored
            if (floor is None or s.similarity >= floor)
            and (not rel_cols or rel_cols["relevance"][rel_row[s.candidate.item.id]] >= cut)
        ]
        if self.reranker is not None and scored:
            top = max(self.rerank_top, limit)
            scores = yield from rerank_scores(query, rerank_texts(scored, top))
            scored = apply_rerank(scored, scores, self.rerank_weight, top)
        if cfg.mmr and len(scored) > limit:
            window = scored[: cfg.pool_factor * limit]
            picked = mmr_select(
                [s.score for s in window],
                [s.candidate.vector for s in window],
                limit,
                cfg.mmr_lambda,
                cfg.mmr_redundancy_floor,
            )
            scored = [window[i] for i in picked]
        hits = [SearchHit(s.candidate.item, s.score, s.similarity, s.breakdown) for s in scored[:limit]]
        if rel_cols:
            for i, hit in enumerate(hits):
                row = rel_row[hit.item.id]
                hit.breakdown.update({k: float(v[row]) for k, v in rel_cols.items()})
                hits[i] = replace(hit, relevance=float(rel_cols["relevance"][row]))
        if explain:
            for hit in hits:
                hit.breakdown["threshold"] = floor if floor is not None else 0.0
                hit.breakdown["min_relevance"] = min_relevance if min_relevance is not None else 0.0
                hit.breakdown["query.time_windows"] = float(len(windows.ranges) + len(windows.months))
        if touch and hits:
            # Searching a read-only store is fine; usage stats just are not kept.
            with contextlib.suppress(StoreReadOnly):
                yield from call(Write((Touch(flt.tenant_id, tuple(h.item.id for h in hits), now),)))
        return hits

    def _follow_replacements(
        self, candidates: list[Candidate], flt: Filter, shown: tuple[Status, ...]
    ) -> Flow[list[Candidate]]:
        """Give each superseded candidate's replacement its evidence; drop superseded
        candidates unless the caller asked for them."""
        by_id = {c.item.id: c for c in candidates}
        wanted: dict[str, Candidate] = {}
        for c in candidates:
            if c.item.status != Status.SUPERSEDED:
                continue
            for rel in c.item.relations:
                if rel.type == RelationType.SUPERSEDED_BY:
                    best = wanted.get(rel.target_id)
                    if best is None or (c.cosine or 0) > (best.cosine or 0):
                        wanted[rel.target_id] = c
        missing = tuple(i for i in wanted if i not in by_id)
        found = (yield from call(GetItems(flt.tenant_id, missing))) if missing else []
        for item in found:
            if (
                item.status in shown
                and (not flt.scope_keys or item.scope_key in flt.scope_keys)
                and (flt.viewer is None or flt.viewer.sees(item))
            ):
                src = wanted[item.id]
                by_id[item.id] = Candidate(item, src.cosine, src.keyword, None)
        for target_id, src in wanted.items():
            cur = by_id.get(target_id)
            if cur is not None and cur.item.status in shown:
                by_id[target_id] = replace(
                    cur,
                    cosine=max(cur.cosine or 0.0, src.cosine or 0.0),
                    keyword=max(cur.keyword or 0.0, src.keyword or 0.0) or None,
                )
        return [c for c in by_id.values() if c.item.status in shown]

    # ------------------------------------------------------------ read one / many

    def get(
        self, item_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
    ) -> Flow[MemoryItem]:
        """One memory by id; :class:`~jiyi.errors.NotFound` if this tenant has none (or
        none that ``viewer`` may see)."""
        return (yield from self._require(item_id, tenant_id, viewer))

    def list_page(
        self,
        /,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        memory_types: Iterable[MemoryType | str] | MemoryType | str | None = None,
        statuses: Iterable[Status | str] | Status | str | None = None,
        tags: Sequence[str] = (),
        include_expired: bool = True,
        limit: int = 50,
        cursor: str | None = None,
        newest_first: bool = False,
        viewer: Viewer | None = None,
    ) -> Flow[Page]:
        """Memories in creation order, ``limit`` at a time; pass ``page.next_cursor`` to go on.

        Without scope ids, every scope of the tenant is listed. All statuses unless given.
        ``viewer`` hides project memories it may not see.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(
                f"limit must be an integer within 1..{MAX_LIMIT}, got {limit!r}", field="limit"
            )
        flt = Filter(
            tenant_id=tenant_id or self.tenant_id,
            scope_keys=_scope_keys(user_id, project_id, session_id, agent_id),
            memory_types=_enum_tuple(MemoryType, memory_types, "memory_type"),
            statuses=_enum_tuple(Status, statuses, "status"),
            tags=tuple(tags),
            include_expired=include_expired,
            now=self.now(),
            viewer=viewer,
        )
        return (yield from call(ListItems(flt, limit=limit, cursor=cursor, descending=newest_first)))

    def history(
        self, /, item_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
    ) -> Flow[list[HistoryEvent]]:
        """Every recorded change of one memory, oldest first (kept after a hard delete).

        With a ``viewer``, the whole history is shown when the item as it is now (after a
        hard delete: as it last was) is visible to it, else :class:`NotFound`."""
        _check_text(item_id, "id")
        tenant = tenant_id or self.tenant_id
        events = yield from call(GetHistory(tenant, item_id))
        if events and viewer is not None and not viewer.sees_all:
            current = yield from call(GetItems(tenant, (item_id,)))
            latest = current[0] if current else _last_snapshot(events)
            if latest is None or not viewer.sees(latest):
                events = []
        if not events:
            raise NotFound(f"no memory with id {item_id!r}", item_id=item_id)
        return events

    def stats(
        self,
        /,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        viewer: Viewer | None = None,
    ) -> Flow[StoreStats]:
        """Counts by type, scope and status, with average confidence and importance
        (of the memories ``viewer`` may see, when given)."""
        flt = Filter(
            tenant_id=tenant_id or self.tenant_id,
            scope_keys=_scope_keys(user_id, project_id, session_id, agent_id),
            statuses=(),
            include_expired=True,
            viewer=viewer,
        )
        return (yield from call(GetStats(flt)))

    # ------------------------------------------------------------ change

    def update(
        self,
        /,
        item_id: str,
        *,
        tenant_id: str | None = None,
        reason: str = "",
        actor: str | None = None,
        viewer: Viewer | None = None,
        **changes: Any,
    ) -> Flow[MemoryItem]:
        """Change fields of a memory; the version goes up and the old one stays in history.

        Changing ``content`` re-embeds and re-indexes the item. ``id``, ``tenant_id``,
        ``created_at`` and ``version`` cannot be changed. An item ``viewer`` may not see
        is :class:`NotFound`.
        """
        frozen = {"id", "tenant_id", "created_at", "version"} & changes.keys()
        if frozen:
            raise InvalidInput(f"cannot change {', '.join(sorted(frozen))}", field=sorted(frozen)[0])
        unknown = set(changes) - set(MemoryItem.model_fields)
        if unknown:
            raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
        if not changes:
            raise InvalidInput("nothing to update: pass at least one field to change")
        old = yield from self._require(item_id, tenant_id, viewer)
        if "content" in changes:
            content = _check_text(changes["content"], "content")
            checked = screen(content, changes.get("confidence", old.confidence), self.gate)
            if isinstance(checked, GateDecision):
                raise InvalidInput(f"content refused: {'; '.join(checked.reasons)}", field="content")
            changes["content"] = checked.text
        reworded = "structured" not in changes and changes.get("content", old.content) != old.content
        if reworded and old.structured and old.structured.get("kind") in _SELF_DESCRIBED:
            # A learning's text is its record written out (learnings.md grammar): read the
            # new text back into the record suggest() uses, or refuse it with the reason.
            from jiyi.files.learnings import parse_learning

            parsed = parse_learning(old, changes["content"], redact_pii=self.gate.redact_pii)
            changes["content"], changes["structured"] = parsed.content, parsed.structured
            if parsed.importance is not None and "importance" not in changes:
                changes["importance"] = parsed.importance
        elif reworded and old.structured:
            # What was extracted from the old wording no longer describes the new one (a
            # profile would keep reading 前端 after a person wrote 后端).
            changes["structured"] = None
        new = old.evolve(**changes, version=old.version + 1, updated_at=self.now())
        vector, cache_put = None, None
        if new.content != old.content:
            vectors, cache_put = yield from self._embed_documents([new.content])
            vector = vectors[0]
        action = (
            HistoryAction.ARCHIVE
            if new.status == Status.ARCHIVED and old.status != Status.ARCHIVED
            else (
                HistoryAction.RESTORE
                if old.status != Status.ACTIVE and new.status == Status.ACTIVE
                else HistoryAction.UPDATE
            )
        )
        upsert = Upsert(
            new,
            index_text(new.content),
            self._event(action, old, new, reason or f"updated {', '.join(sorted(changes))}", actor),
            vector=vector,
            model_id=self.embedder.model_id if vector is not None else None,
        )
        yield from call(Write((cache_put, upsert) if cache_put else (upsert,)))
        return new

    def delete(
        self,
        item_id: str,
        *,
        hard: bool = False,
        reason: str = "",
        tenant_id: str | None = None,
        actor: str | None = None,
        viewer: Viewer | None = None,
    ) -> Flow[MemoryItem]:
        """Soft delete archives the memory (reversible with ``update(status="active")``);
        ``hard=True`` purges it. Both are recorded in the history. Returns the item as it was.
        An item ``viewer`` may not see is :class:`NotFound`."""
        old = yield from self._require(item_id, tenant_id, viewer)
        if hard:
            event = self._event(HistoryAction.PURGE, old, None, reason or "purged on request", actor)
            yield from call(Write((Purge(old.tenant_id, old.id, event),)))
            return old
        if old.status == Status.ARCHIVED:
            return old
        new = old.evolve(status=Status.ARCHIVED, version=old.version + 1, updated_at=self.now())
        event = self._event(HistoryAction.ARCHIVE, old, new, reason or "archived on request", actor)
        yield from call(Write((Upsert(new, index_text(new.content), event),)))
        return new

    def reset(
        self,
        /,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        actor: str | None = None,
    ) -> Flow[int]:
        """Purge every memory in the given scopes (at least one is required). Audited."""
        keys = _scope_keys(user_id, project_id, session_id, agent_id)
        if not keys:
            raise InvalidInput("reset needs at least one scope id; it never wipes a whole tenant by accident")
        flt = Filter(
            tenant_id=tenant_id or self.tenant_id, scope_keys=keys, statuses=(), include_expired=True
        )
        reason = f"scoped reset of {', '.join(keys)}"
        items = yield from self._all_items(flt)
        purges = [
            Purge(item.tenant_id, item.id, self._event(HistoryAction.RESET, item, None, reason, actor))
            for item in items
        ]
        if purges:
            yield from call(Write(tuple(purges)))
        return len(purges)

    # ------------------------------------------------------------ export / import

    def export(
        self,
        /,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        viewer: Viewer | None = None,
    ) -> Flow[list[dict[str, Any]]]:
        """Every memory (all statuses) as JSON-ready dicts with every field (only those
        ``viewer`` may see, when given)."""
        flt = Filter(
            tenant_id=tenant_id or self.tenant_id,
            scope_keys=_scope_keys(user_id, project_id, session_id, agent_id),
            statuses=(),
            include_expired=True,
            viewer=viewer,
        )
        items = yield from self._all_items(flt)
        return [item.to_json_dict() for item in items]

    def import_items(
        self,
        /,
        records: Iterable[Mapping[str, Any]],
        *,
        tenant_id: str | None = None,
        actor: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Flow[ImportResult]:
        """Load memories as they are (no gate: this restores, it does not extract).

        Every record is validated before anything is written, and everything is written
        in one transaction: a bad record or a failure leaves the store unchanged.
        Records need ``content``, ``memory_type`` and a scope id (``user_id`` ...);
        the other fields are optional and kept when present (an export round-trips).
        ``progress(done, total)`` is called as embedding proceeds.
        """
        items: list[MemoryItem] = []
        now = self.now()
        for number, record in enumerate(records, start=1):
            if not isinstance(record, Mapping):
                raise InvalidInput(f"record {number}: expected an object, got {type(record).__name__}")
            data = dict(record)
            # An explicit tenant wins over what the records say (imports cross tenants safely).
            if tenant_id is not None:
                data["tenant_id"] = tenant_id
            else:
                data.setdefault("tenant_id", self.tenant_id)
            data.setdefault("created_at", now)
            data.setdefault("updated_at", data["created_at"])
            if "scope" not in data:
                try:
                    data["scope"] = _infer_scope(
                        None,
                        data.get("user_id"),
                        data.get("project_id"),
                        data.get("session_id"),
                        data.get("agent_id"),
                    )
                except InvalidInput as exc:
                    raise InvalidInput(f"record {number}: {exc}", field=exc.field) from None
            try:
                items.append(MemoryItem.model_validate(data))
            except ValidationError as exc:
                err = invalid_from_pydantic(exc)
                raise InvalidInput(f"record {number}: {err}", field=err.field) from None
        ids = [i.id for i in items]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise InvalidInput(f"id {dup!r} appears more than once in the import", field="id")
        changes: list[Any] = []
        embedded = 0
        for start in range(0, len(items), IMPORT_BATCH):
            batch = items[start : start + IMPORT_BATCH]
            vectors, cache_put = yield from self._embed_documents([i.content for i in batch])
            embedded += len(batch)
            if cache_put:
                changes.append(cache_put)
            for item, vector in zip(batch, vectors, strict=True):
                event = self._event(HistoryAction.IMPORT, None, item, "imported", actor)
                changes.append(
                    Upsert(
                        item, index_text(item.content), event, vector=vector, model_id=self.embedder.model_id
                    )
                )
            if progress:
                progress(embedded, len(items))
        if changes:
            yield from call(Write(tuple(changes)))
        return ImportResult(imported=len(items), embedded=embedded)

    # ------------------------------------------------------------ lifecycle

    def maintain(
        self,
        /,
        *,
        policy: LifecyclePolicy | None = None,
        dry_run: bool = False,
        tenant_id: str | None = None,
    ) -> Flow[MaintenanceReport]:
        """Decay, expiry, retention: archive (or delete) what has faded, each change audited.
        ``dry_run=True`` reports what would change and writes nothing."""
        return (
            yield from maintain_flow(
                self, now=self.now(), policy=policy, dry_run=dry_run, tenant_id=tenant_id
            )
        )


# ---------------------------------------------------------------- drivers


class BackgroundWorker:
    """A daemon thread that runs ``step`` whenever woken, or every ``interval`` seconds,
    until stopped. ``step`` returns what it did; an empty result means "idle"."""

    def __init__(self, step: Callable[[], Sequence[Any]], interval: float) -> None:
        import threading

        self._step = step
        self._interval = interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jiyi-worker", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        import logging

        log = logging.getLogger("jiyi.worker")
        while not self._stop.is_set():
            try:
                did = self._step()
            except Exception:  # keep the worker alive; the job rows hold the errors
                log.exception("job batch failed")
                did = []
            if did:
                continue
            self._wake.wait(self._interval)
            self._wake.clear()


class _Driver:
    """What both drivers share: the core, and the store/embedder it uses."""

    def __init__(self, store: Store, **options: Any) -> None:
        self.core = MemoryCore(store, **options)
        repair_files(self.core)  # files (jiyi/files/): finish what a crash left half written

    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def embedder(self) -> Embedder:
        return self.core.embedder

    @property
    def gate(self) -> GateConfig:
        return self.core.gate

    @property
    def rank(self) -> RankConfig:
        return self.core.rank

    @property
    def llm(self) -> ChatModel | None:
        return self.core.llm


def _sync(flow_fn: Callable[Concatenate[Any, P], Flow[R]]) -> Callable[Concatenate[Memory, P], R]:
    @functools.wraps(flow_fn)
    def method(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        core = self.core
        return run(flow_fn(core, *args, **kwargs), core.rt)

    return method


def _async(
    flow_fn: Callable[Concatenate[Any, P], Flow[R]],
) -> Callable[Concatenate[AsyncMemory, P], Awaitable[R]]:
    @functools.wraps(flow_fn)
    async def method(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        core = self.core
        return await arun(flow_fn(core, *args, **kwargs), core.rt)

    return method


class Memory(_Driver):
    """The synchronous Memory API. Create it with :meth:`open` or pass a :class:`Store`.

    Keyword options: ``embedder`` (instance, callable or "provider:model"; default the
    offline USE-m3), ``gate`` (:class:`GateConfig`), ``rank`` (:class:`RankConfig`),
    ``clock`` (a function returning now), ``tenant_id`` (default tenant) and ``files``
    (a directory: every scope also kept as editable memory.md / learnings.md, see
    :mod:`jiyi.files` and :meth:`sync_files`).
    """

    add = _sync(MemoryCore.add)
    search = _sync(MemoryCore.search)
    get = _sync(MemoryCore.get)
    list = _sync(MemoryCore.list_page)
    history = _sync(MemoryCore.history)
    stats = _sync(MemoryCore.stats)
    update = _sync(MemoryCore.update)
    delete = _sync(MemoryCore.delete)
    reset = _sync(MemoryCore.reset)
    export = _sync(MemoryCore.export)
    import_items = _sync(MemoryCore.import_items)
    _remember = _sync(MemoryCore.remember)

    add_messages = _sync(MemoryCore.add_messages)
    messages = _sync(MemoryCore.messages)
    working_window = _sync(MemoryCore.working_window)
    compact = _sync(MemoryCore.compact)
    end_session = _sync(MemoryCore.end_session)
    process_jobs = _sync(MemoryCore.process_jobs)
    jobs = _sync(MemoryCore.jobs)
    store_extracted = _sync(MemoryCore.store_extracted)
    add_episode = _sync(MemoryCore.add_episode)
    save_checkpoint = _sync(MemoryCore.save_checkpoint)
    restore_checkpoint = _sync(MemoryCore.restore_checkpoint)
    list_checkpoints = _sync(MemoryCore.list_checkpoints)
    prune_checkpoints = _sync(MemoryCore.prune_checkpoints)
    add_document = _sync(MemoryCore.add_document)
    get_document = _sync(MemoryCore.get_document)
    context = _sync(MemoryCore.context)
    maintain = _sync(MemoryCore.maintain)

    # profiles (jiyi/profile.py)
    profile = _sync(MemoryCore.profile)
    set_profile = _sync(MemoryCore.set_profile)
    profile_prompt = _sync(MemoryCore.profile_prompt)
    # end profiles

    # procedural memory (jiyi/procedural.py)
    record_skill = _sync(MemoryCore.record_skill)
    record_failure = _sync(MemoryCore.record_failure)
    record_decomposition = _sync(MemoryCore.record_decomposition)
    suggest = _sync(MemoryCore.suggest)
    # end procedural memory

    # compression (jiyi/lifecycle/compress.py)
    compress = _sync(MemoryCore.compress)
    uncompress = _sync(MemoryCore.uncompress)
    # end compression

    # files (jiyi/files/)
    sync_files = _sync(MemoryCore.sync_files)
    recover_files = _sync(MemoryCore.recover_files)
    # end files

    @classmethod
    def open(cls, path: str | Path, **options: Any) -> Memory:
        """A Memory on the SQLite file at ``path`` (created if missing)."""
        from jiyi.store.sqlite import SQLiteStore

        return cls(SQLiteStore(path), **options)

    def __init__(self, store: Store, *, background: bool = True, **options: Any) -> None:
        super().__init__(store, **options)
        self._background = background
        self._worker: BackgroundWorker | None = None

    def remember(
        self,
        messages: Sequence[Any],
        *,
        session_id: str,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> RememberResult:
        """Keep messages in the session and queue extraction; returns at once.

        With ``background=True`` (the default) a worker thread in this process runs the
        queued jobs; otherwise call :meth:`process_jobs` or run ``jiyi worker``.
        """
        result = self._remember(
            messages,
            session_id=session_id,
            user_id=user_id,
            project_id=project_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
        )
        if self._background and (result.job_id or (result.compacted and result.compacted.episode_job_id)):
            self.start_worker().wake()
        return result

    def start_worker(self, *, interval: float = 5.0) -> BackgroundWorker:
        """Start (once) the in-process worker thread that drains the job queue."""
        if self._worker is None or not self._worker.alive:
            self._worker = BackgroundWorker(lambda: self.process_jobs(worker="in-process"), interval)
            self._worker.start()
        return self._worker

    def wait_for_jobs(self, timeout: float = 30.0) -> bool:
        """Block until the queue has no runnable job (for tests and scripts). True if idle."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.jobs(statuses=["queued", "running"], limit=1):
                return True
            if self._worker is None or not self._worker.alive:
                self.process_jobs(worker="waiter")
            else:
                self._worker.wake()
                time.sleep(0.02)
        return False

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def export_jsonl(self, out: IO[str], **scope: Any) -> int:
        """Write every memory as one JSON line; returns the count."""
        rows = self.export(**scope)
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return len(rows)


class AsyncMemory(_Driver):
    """The asynchronous Memory API: the same methods as :class:`Memory`, awaited."""

    def __init__(self, store: Store, **options: Any) -> None:
        super().__init__(store, **options)
        self._task: Any = None
        self._wake: Any = None

    add = _async(MemoryCore.add)
    search = _async(MemoryCore.search)
    get = _async(MemoryCore.get)
    list = _async(MemoryCore.list_page)
    history = _async(MemoryCore.history)
    stats = _async(MemoryCore.stats)
    update = _async(MemoryCore.update)
    delete = _async(MemoryCore.delete)
    reset = _async(MemoryCore.reset)
    export = _async(MemoryCore.export)
    import_items = _async(MemoryCore.import_items)
    _remember = _async(MemoryCore.remember)

    add_messages = _async(MemoryCore.add_messages)
    messages = _async(MemoryCore.messages)
    working_window = _async(MemoryCore.working_window)
    compact = _async(MemoryCore.compact)
    end_session = _async(MemoryCore.end_session)
    process_jobs = _async(MemoryCore.process_jobs)
    jobs = _async(MemoryCore.jobs)
    store_extracted = _async(MemoryCore.store_extracted)
    add_episode = _async(MemoryCore.add_episode)
    save_checkpoint = _async(MemoryCore.save_checkpoint)
    restore_checkpoint = _async(MemoryCore.restore_checkpoint)
    list_checkpoints = _async(MemoryCore.list_checkpoints)
    prune_checkpoints = _async(MemoryCore.prune_checkpoints)
    add_document = _async(MemoryCore.add_document)
    get_document = _async(MemoryCore.get_document)
    context = _async(MemoryCore.context)
    maintain = _async(MemoryCore.maintain)

    # profiles (jiyi/profile.py)
    profile = _async(MemoryCore.profile)
    set_profile = _async(MemoryCore.set_profile)
    profile_prompt = _async(MemoryCore.profile_prompt)
    # end profiles

    # procedural memory (jiyi/procedural.py)
    record_skill = _async(MemoryCore.record_skill)
    record_failure = _async(MemoryCore.record_failure)
    record_decomposition = _async(MemoryCore.record_decomposition)
    suggest = _async(MemoryCore.suggest)
    # end procedural memory

    # compression (jiyi/lifecycle/compress.py)
    compress = _async(MemoryCore.compress)
    uncompress = _async(MemoryCore.uncompress)
    # end compression

    # files (jiyi/files/)
    sync_files = _async(MemoryCore.sync_files)
    recover_files = _async(MemoryCore.recover_files)
    # end files

    @classmethod
    def open(cls, path: str | Path, **options: Any) -> AsyncMemory:
        """An AsyncMemory on the SQLite file at ``path`` (created if missing)."""
        from jiyi.store.sqlite import SQLiteStore

        return cls(SQLiteStore(path), **options)

    async def remember(
        self,
        messages: Sequence[Any],
        *,
        session_id: str,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> RememberResult:
        """Keep messages in the session and queue extraction; returns at once.

        Call :meth:`start_worker` once to drain the queue in a background task, or
        :meth:`process_jobs`, or run ``jiyi worker``.
        """
        result = await self._remember(
            messages,
            session_id=session_id,
            user_id=user_id,
            project_id=project_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
        )
        if self._task is not None:
            self._wake.set()
        return result

    def start_worker(self, *, interval: float = 5.0) -> None:
        """Run queued jobs in a background task of the running event loop."""
        import asyncio

        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._work(interval))

    async def _work(self, interval: float) -> None:
        import asyncio
        import logging

        while True:  # cancelled by aclose()
            try:
                reports = await self.process_jobs(worker="in-process")
            except Exception:  # keep the worker alive; the job rows hold the errors
                logging.getLogger("jiyi.worker").exception("job batch failed")
                reports = []
            if reports:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            import contextlib

            with contextlib.suppress(BaseException):
                await self._task
        self.store.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
