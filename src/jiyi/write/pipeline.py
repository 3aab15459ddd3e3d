"""The write pipeline: screen, embed, neighbours, decide, apply — for every entry point.

``add`` (an explicit memory) and :func:`store_extracted` (what extraction found in a
conversation) run the same named steps:

1. **screen** (:func:`jiyi.write.gate.screen`): length, confidence, low value, PII;
   automatic extractions are also rate-limited per session;
2. **embed** through the persistent cache (:func:`jiyi.read.statements.embed_memories`: the text and its statements);
3. **neighbours**: the nearest stored items of the same scope and audience
   (:func:`neighbours`), so nothing is ever folded into another audience's memory;
4. **decide**: reconciliation (:func:`jiyi.write.reconcile.decide`'s rules; for extracted
   candidates the LLM when one is configured); ``add(infer=False)`` stores as given;
5. **apply** (:func:`apply`): one place turns a decision into store changes, each with
   its history event; one reinforce rule (:func:`jiyi.write.gate.reinforced_confidence`).

Everything one call decides is written in one transaction. The neighbours → apply span is
atomic per scope: the scope's clock (:class:`jiyi.store.base.ScopeClock`) is read before
the neighbours, and the transaction carries a :class:`jiyi.store.base.Guard` on it; when
another writer of the scope committed in between, the store refuses the write
(:class:`jiyi.errors.WriteConflict`) and the steps from neighbours on run again on what
is stored now. So concurrent identical adds — threads, processes or replicas — make one
item, and the others reinforce it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

import numpy as np

from jiyi.config import GateConfig
from jiyi.effects import Flow, call
from jiyi.embed.scale import on_scale
from jiyi.errors import InvalidInput, WriteConflict
from jiyi.items import change_event
from jiyi.model import (
    MemoryItem,
    MemoryType,
    Relation,
    RelationType,
    Scope,
    Source,
    Status,
    new_id,
    owner_scope,
)
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.store.base import (
    Candidate,
    Change,
    CountEvents,
    Filter,
    GetItems,
    Guard,
    HistoryAction,
    RecordEvent,
    Retrieve,
    ScopeClock,
    Upsert,
    Viewer,
    Write,
    same_audience,
)
from jiyi.text.expiry import expiry_of
from jiyi.text.tokenize import index_text, query_terms
from jiyi.validate import check_mapping, check_tags, check_text, infer_scope
from jiyi.write.extract import Extracted
from jiyi.write.gate import Action as GateAction
from jiyi.write.gate import (
    GateDecision,
    Screened,
    duplicate_decision,
    never_rate_limited,
    rate_key,
    rate_limit_decision,
    reinforced_confidence,
    screen,
    scrub,
    scrub_item,
)
from jiyi.write.reconcile import (
    Decision,
    Existing,
    ReconcileConfig,
    config_on_scale,
    decide,
    keep_the_rest,
    reconcile_flow,
)
from jiyi.write.resources import Resources, is_resource

log = logging.getLogger("jiyi.pipeline")

GUARD_ATTEMPTS = 100
"""How often a write decides again after losing a race in its scope. Every lost attempt
means another writer of the scope committed, so only a scope with this many writers at
once can exhaust it; then the caller gets :class:`~jiyi.errors.WriteConflict`."""

__all__ = ["AddResult", "Applied", "Outcome", "add", "apply", "neighbours", "store_extracted"]


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
class Outcome:
    """What the pipeline did with one extracted candidate."""

    candidate: Extracted
    action: str
    reason: str
    item_id: str | None = None
    target_id: str | None = None


@dataclass
class Applied:
    """The apply step's result: store changes, the item the caller should see, and the
    new versions of items the decision changed (so later decisions in one batch see them)."""

    action: str
    changes: list[Change] = field(default_factory=list)
    shown: MemoryItem | None = None
    item_id: str | None = None
    target_id: str | None = None
    changed: dict[str, MemoryItem] = field(default_factory=dict)


# ---------------------------------------------------------------- add


def add(
    rt: Runtime,
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
    infer: bool = True,
) -> Flow[AddResult]:
    """Store an explicit memory through the write gate and reconciliation.

    Returns the stored item, or the existing item it reinforced (mentions + 1,
    confidence + 0.05), or ``item=None`` with the gate's reasons for refusing.
    ``decision.action`` says what reconciliation did (see :mod:`jiyi.write.reconcile`):
    ``add`` (new; also when a related but different fact exists, linked ``related_to``:
    a changed number, date or name is never a reinforce), ``reinforce`` (the same fact),
    ``supersede`` (a contradiction or a new value of the same key: the old item stays,
    ``superseded``), or ``none`` (a more confident value is kept; ``item`` is that one).
    ``infer=False`` (mem0's name) skips reconciliation and stores the text as given.
    ``automatic=True`` marks an extraction (rate-limited per session).
    With a ``viewer``, only items it may see count as duplicates (an invisible item
    is never reinforced nor revealed), and ``viewer.actor`` becomes
    ``metadata["created_by"]`` unless the metadata names a creator.
    """
    check_text(content, "content")
    metadata = check_mapping(metadata, "metadata")
    if viewer is not None and viewer.actor is not None:
        metadata = {"created_by": viewer.actor, **(metadata or {})}
    now = rt.now()
    item = MemoryItem.build(  # built first: the model validates every field
        content=content,
        raw=raw,
        summary=summary,
        structured=check_mapping(structured, "structured"),
        memory_type=memory_type,
        scope=infer_scope(scope, user_id, project_id, session_id, agent_id),
        tenant_id=rt.tenant(tenant_id),
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        confidence=confidence,
        importance=importance,
        tags=check_tags(tags),
        metadata=metadata or {},
        source=source,
        source_id=source_id,
        occurred_at=occurred_at,
        expires_at=expires_at,
        visibility=visibility,
        created_at=now,
        updated_at=now,
    )
    checked = screen(item.content, item.confidence, rt.gate, item.tenant_id)
    if isinstance(checked, GateDecision):
        return AddResult(None, checked)
    limited = (yield from _rate_limited(rt, item)) if automatic else None
    if limited:
        return AddResult(None, limited)
    return (yield from _store_one(rt, item, checked, automatic, actor, viewer, infer))


def _rate_limited(rt: Runtime, item: MemoryItem) -> Flow[GateDecision | None]:
    """An automatic add is one extraction run of its session (see ``GateConfig.max_extractions``)."""
    if item.session_id is None:
        raise InvalidInput("an automatic extraction needs the session_id it came from", field="session_id")
    since = item.created_at - rt.gate.extraction_window
    used = yield from call(CountEvents(rate_key(item.tenant_id, item.session_id), since))
    return rate_limit_decision(used, rt.gate, item.session_id)


def _store_one(
    rt: Runtime,
    item: MemoryItem,
    checked: Screened,
    automatic: bool,
    actor: str | None,
    viewer: Viewer | None,
    infer: bool,
) -> Flow[AddResult]:
    if checked.text != item.content:
        # A ``raw`` that only repeats the content goes; the rest is redacted below.
        item = item.evolve(content=checked.text, raw=None if item.raw == item.content else item.raw)
    # Sensitive data leaves every text field, not only the content (raw, summary,
    # structured, metadata, tags), under the tenant's policy.
    item = scrub_item(rt.gate, item)
    vectors, cache_put = yield from embed_memories(rt, [item.content])
    vector = vectors[0]
    changes: list[Change] = [cache_put] if cache_put else []
    if automatic:
        assert item.session_id is not None
        changes.append(RecordEvent(rate_key(item.tenant_id, item.session_id), item.created_at))
    for attempt in range(1, GUARD_ATTEMPTS + 1):
        if infer:
            seen = yield from call(ScopeClock(item.tenant_id, item.scope_key))
            guard: tuple[Change, ...] = (Guard(item.tenant_id, item.scope_key, seen),)
            decision, targets, best = yield from _reconcile_added(rt, item, vector, viewer)
        else:
            guard, targets, best = (), {}, None
            decision = Decision("add", None, None, "stored as given (infer=False)")
        why = f"re-confirmed by: {item.content[:200]}" if decision.action == "reinforce" else decision.reason
        done = yield from apply(rt, item, vector, decision, targets, why, actor)
        try:
            yield from call(Write((*guard, *changes, *done.changes)))
            break
        except WriteConflict:
            if attempt == GUARD_ATTEMPTS:
                raise
            log.debug("scope %s changed during an add; deciding again", item.scope_key)
    # The duplicate rule's wording first ("no duplicate in scope", "duplicate of ..."), then
    # reconciliation's own reason.
    nearest = next(iter(targets), None)
    dup = duplicate_decision(checked, nearest, best, gate_on_scale(rt))
    # The duplicate rule's verdict is only worth repeating when reconciliation agreed with
    # it: a close item that gets superseded or updated was not "reinforced instead".
    said = dup.reasons if dup.action == done.action or dup.action == "add" else checked.reasons
    gate = GateDecision(
        # keep_both stores a new item like add does; its reason names the related one.
        cast(GateAction, "add" if done.action == "keep_both" else done.action),
        (*said, decision.reason),
        checked.redacted,
        duplicate_of=done.target_id if done.action in ("reinforce", "none") else None,
        similarity=best,
    )
    shown = done.shown if done.shown is not None else targets.get(done.target_id or "")
    return AddResult(shown, gate)


def _reconcile_added(
    rt: Runtime, item: MemoryItem, vector: np.ndarray, viewer: Viewer | None
) -> Flow[tuple[Decision, dict[str, MemoryItem], float | None]]:
    """An explicit memory is reconciled like an extracted one (the rules of
    :func:`jiyi.write.reconcile.decide`): the same fact reinforces, a changed value never
    does, a contradiction supersedes, a related but different fact is kept beside."""
    found = yield from neighbours(rt, item, vector, query_terms(item.content), rt.session.similar_k, viewer)
    existing = sorted((Existing(c.item, c.cosine or 0.0) for c in found), key=lambda e: -e.cosine)
    structured = item.structured or {}
    key = structured.get("key") if isinstance(structured.get("key"), str) else None
    candidate = Extracted(
        content=item.content,
        memory_type=item.memory_type,
        confidence=item.confidence,
        importance=item.importance,
        structured=item.structured,
        key=key,
        source_text=item.content,
        reasons=("add",),
    )
    targets = {e.item.id: e.item for e in existing}
    decision = keep_the_rest(decide(candidate, existing, reconcile_config(rt)), candidate, targets)
    best = existing[0].cosine if existing else None
    return decision, targets, best


# ---------------------------------------------------------------- shared steps


def gate_on_scale(rt: Runtime) -> GateConfig:
    """The write gate's settings, its duplicate bar moved onto the embedder's cosine scale
    (:func:`jiyi.embed.scale.on_scale`): the bar is given on the default embedder's."""
    bar = on_scale(rt.gate.duplicate_threshold, rt.embedder.model_id)
    return rt.gate if bar == rt.gate.duplicate_threshold else replace(rt.gate, duplicate_threshold=bar)


def reconcile_config(rt: Runtime) -> ReconcileConfig:
    """The thresholds of rule-based reconciliation: the gate's duplicate bar and reinforce
    step, and every cosine setting moved onto the embedder's scale
    (:func:`jiyi.write.reconcile.config_on_scale`)."""
    base = ReconcileConfig(
        duplicate_threshold=rt.gate.duplicate_threshold, reinforce_step=rt.gate.reinforce_step
    )
    return config_on_scale(base, rt.embedder.model_id)


def neighbours(
    rt: Runtime,
    item: MemoryItem,
    vector: np.ndarray,
    terms: tuple[str, ...],
    k: int,
    viewer: Viewer | None = None,
) -> Flow[list[Candidate]]:
    """The ``k`` stored items nearest to ``item`` in its scope, seen by exactly its audience
    (never fold a members conversation into a public item, nor into someone's owner_only one)."""
    flt = Filter(tenant_id=item.tenant_id, scope_keys=(item.scope_key,), now=item.created_at, viewer=viewer)
    # Resources (turns, document chunks) are evidence, not claims: they are never
    # reconciled against, so a few more are fetched to leave ``k`` others.
    wide = 3 * k
    retrieve = Retrieve(
        same_audience(flt, item), rt.embedder.model_id, vector, terms, wide, wide if terms else 0
    )
    found = yield from call(retrieve)
    # A user memory told to an agent reconciles within that agent's space (and one told
    # without an agent within the shared one): agents never fold into each other's items.
    same_agent = item.scope is not Scope.USER or None
    return [c for c in found if not is_resource(c.item) and (same_agent or c.item.agent_id == item.agent_id)][
        :k
    ]


def apply(
    rt: Runtime,
    item: MemoryItem,
    vector: np.ndarray,
    decision: Decision,
    targets: Mapping[str, MemoryItem],
    why: str,
    actor: str | None,
) -> Flow[Applied]:
    """The store changes that carry out ``decision`` for the new ``item``; every change
    carries a history event whose reason is ``why``."""
    target = targets.get(decision.target_id) if decision.target_id else None
    action = decision.action
    if target is None and action not in ("none", "keep_both"):
        action = "add"  # a decision about nothing known adds the item
    if action in ("add", "keep_both"):
        if action == "keep_both" and target is not None:
            item = item.evolve(
                relations=(*item.relations, Relation(type=RelationType.RELATED_TO, target_id=target.id))
            )
        change = _new(rt, item, vector, why, actor)
        return Applied(action, [change], item, item.id, decision.target_id)
    if action == "none" or target is None:
        return _unchanged(rt, target, decision, why, actor)
    if action == "reinforce":
        return _reinforce(rt, item, target, decision, why, actor)
    if action in ("update", "merge"):
        return (yield from _rewrite(rt, item, vector, target, decision, why, actor))
    return (yield from _supersede(rt, item, vector, target, why, actor, decision.kept))


def _new(rt: Runtime, item: MemoryItem, vector: np.ndarray, why: str, actor: str | None) -> Upsert:
    event = change_event(rt, HistoryAction.ADD, None, item, why, actor)
    return Upsert(item, index_text(item.content), event, vector=vector, model_id=rt.embedder.model_id)


def _unchanged(
    rt: Runtime, target: MemoryItem | None, decision: Decision, why: str, actor: str | None
) -> Applied:
    """Nothing changes, but the decision is still recorded in the target's history."""
    done = Applied("none", target_id=decision.target_id)
    if target is not None:
        event = change_event(rt, HistoryAction.RECONCILE, target, target, why, actor)
        done.changes.append(Upsert(target, index_text(target.content), event))
    return done


def _reinforce(
    rt: Runtime, item: MemoryItem, target: MemoryItem, decision: Decision, why: str, actor: str | None
) -> Applied:
    confidence = decision.confidence
    if confidence is None:
        confidence = reinforced_confidence(target.confidence, rt.gate.reinforce_step)
    updated = target.evolve(
        mention_count=target.mention_count + 1, confidence=confidence, updated_at=item.created_at
    )
    event = change_event(rt, HistoryAction.REINFORCE, target, updated, why, actor)
    change = Upsert(updated, index_text(updated.content), event)
    return Applied("reinforce", [change], updated, target.id, target.id, {target.id: updated})


def _rewrite(
    rt: Runtime,
    item: MemoryItem,
    vector: np.ndarray,
    target: MemoryItem,
    decision: Decision,
    why: str,
    actor: str | None,
) -> Flow[Applied]:
    """``update`` / ``merge``: the target takes the decided content (a new version)."""
    # A model's rewording is screened like any text it is given back.
    content = scrub(rt.gate, target.tenant_id, decision.content) if decision.content else item.content
    confidence = decision.confidence
    if confidence is None:
        confidence = max(target.confidence, item.confidence)
    updated = target.evolve(
        content=content, version=target.version + 1, confidence=confidence, updated_at=item.created_at
    )
    put = None
    if content == item.content:
        new_vec = vector
    else:
        vectors, put = yield from embed_memories(rt, [content])
        new_vec = vectors[0]
    event = change_event(rt, HistoryAction.UPDATE, target, updated, why, actor)
    change = Upsert(updated, index_text(content), event, vector=new_vec, model_id=rt.embedder.model_id)
    changes: list[Change] = [change] if put is None else [put, change]
    return Applied(decision.action, changes, updated, target.id, target.id, {target.id: updated})


def _supersede(
    rt: Runtime,
    item: MemoryItem,
    vector: np.ndarray,
    target: MemoryItem,
    why: str,
    actor: str | None,
    kept: str | None = None,
) -> Flow[Applied]:
    """The new item replaces the target, which stays as ``superseded``, linked both ways.
    The turns the target was taken from stop answering for it too: they are superseded by
    the new item (kept in the history; old wording still leads to the new fact). What the
    target said besides the change (``kept``, :func:`jiyi.write.reconcile.keep_the_rest`)
    becomes a memory of its own, taken from it, in the same write."""
    since = item.valid_from or item.occurred_at or item.created_at
    item = item.evolve(
        relations=(*item.relations, Relation(type=RelationType.SUPERSEDES, target_id=target.id)),
        valid_from=since,
    )
    old = _retired(target, item).evolve(valid_to=since)
    event = change_event(rt, HistoryAction.SUPERSEDE, target, old, why, actor)
    changes: list[Change] = [_new(rt, item, vector, why, actor), Upsert(old, index_text(old.content), event)]
    sources = tuple(r.target_id for r in target.relations if r.type == RelationType.DERIVED_FROM)
    for said in (yield from call(GetItems(target.tenant_id, sources))) if sources else []:
        if is_resource(said) and said.status == Status.ACTIVE:
            stale = _retired(said, item)
            reason = f"the fact taken from this turn was superseded: {why}"
            changes.append(
                Upsert(
                    stale,
                    index_text(stale.content),
                    change_event(rt, HistoryAction.SUPERSEDE, said, stale, reason, actor),
                )
            )
    if kept:
        changes += yield from _kept_from(rt, target, kept, actor)
    return Applied("supersede", changes, item, item.id, target.id, {target.id: old})


def _kept_from(rt: Runtime, target: MemoryItem, kept: str, actor: str | None) -> Flow[list[Change]]:
    """A memory of what ``target`` said besides what changed, as it was said (same owner,
    type, time and confidence), taken from it."""
    now = rt.now()
    rest = MemoryItem.build(
        **{
            **target.model_dump(),
            "id": new_id(),
            "content": kept,
            "raw": None,
            "summary": None,
            "structured": None,
            # what keyed the old statement (its slot) is the changed part's, not this one's
            "metadata": {k: v for k, v in target.metadata.items() if k != "key"},
            "mention_count": 1,
            "status": Status.ACTIVE,
            # taken from the turns the old statement was, and from it
            "relations": (
                *(r for r in target.relations if r.type == RelationType.DERIVED_FROM),
                Relation(type=RelationType.DERIVED_FROM, target_id=target.id),
            ),
            "created_at": now,
            "updated_at": now,
            "valid_from": None,
            "valid_to": None,
            "version": 1,
            "access_count": 0,
            "last_used_at": None,
        }
    )
    vectors, put = yield from embed_memories(rt, [kept])
    why = f"add: kept from {target.id}, which a newer statement superseded for another part of what it said"
    return [*([put] if put is not None else []), _new(rt, rest, vectors[0], why, actor)]


def _retired(old: MemoryItem, by: MemoryItem) -> MemoryItem:
    return old.evolve(
        status=Status.SUPERSEDED,
        version=old.version + 1,
        relations=(*old.relations, Relation(type=RelationType.SUPERSEDED_BY, target_id=by.id)),
        updated_at=by.created_at,
    )


# ---------------------------------------------------------------- extracted candidates


def store_extracted(
    rt: Runtime,
    /,
    candidates: Sequence[Extracted],
    *,
    session_id: str | None,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    turn_times: Sequence[datetime | None] = (),
    turn_names: Sequence[str | None] = (),
    resources: Resources | None = None,
) -> Flow[list[Outcome]]:
    """Gate, reconcile and store extracted candidates (automatic: rate-limited per session).

    ``turn_times``/``turn_names`` (indexed like the turns the candidates came from)
    give each item the time its turn was said (``occurred_at``) and the speaker.

    All candidates are embedded in one call. Every decision lands in the history.
    ``resources`` (the turns kept as said, :mod:`jiyi.write.resources`) are written in the
    same transaction, and what is extracted from a turn links to its resource.
    """
    tenant = rt.tenant(tenant_id)
    now = rt.now()
    kept = resources or Resources({}, [])
    outcomes = [_resource_outcome(i, item) for i, item in kept.by_turn.items()]
    refused, passed = _screen_all(rt, candidates, tenant)
    outcomes += refused
    if session_id is not None and passed:
        used = yield from call(CountEvents(rate_key(tenant, session_id), now - rt.gate.extraction_window))
        if used >= rt.gate.max_extractions:
            refused, passed = _over_the_limit(rt, passed, used)
            outcomes += refused
    if not passed:
        if kept.changes:
            yield from call(Write(tuple(kept.changes)))
        _log_refusals(outcomes)
        return outcomes
    vectors, cache_put = yield from embed_memories(rt, [text for _, text in passed])
    owner = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
    items: list[tuple[Extracted, MemoryItem, np.ndarray]] = []
    for (cand, text), vector in zip(passed, vectors, strict=True):
        # The turn (raw), the structure read off it and the metadata are redacted too.
        item = scrub_item(rt.gate, _extracted_item(cand, text, tenant, now, owner, turn_times, turn_names))
        source = kept.by_turn.get(cand.turn_index) if cand.turn_index is not None else None
        if source is not None:  # the fact links to what was said
            item = item.evolve(relations=(Relation(type=RelationType.DERIVED_FROM, target_id=source.id),))
        items.append((cand, item, vector))
    fixed: list[Change] = [*kept.changes, *([cache_put] if cache_put else [])]
    for attempt in range(1, GUARD_ATTEMPTS + 1):
        guards, decided, changes = yield from _decide_extracted(rt, items)
        if session_id is not None and any(o.action != "none" for o in decided):
            changes.append(RecordEvent(rate_key(tenant, session_id), now))  # one run, however many items
        try:
            yield from call(Write((*guards, *fixed, *changes)))
            break
        except WriteConflict:
            if attempt == GUARD_ATTEMPTS:
                raise
            log.debug("a scope changed while extracted memories were decided; deciding again")
    outcomes += decided
    _log_refusals(outcomes)
    return outcomes


def _decide_extracted(
    rt: Runtime, items: Sequence[tuple[Extracted, MemoryItem, np.ndarray]]
) -> Flow[tuple[list[Guard], list[Outcome], list[Change]]]:
    """Reconcile and apply each candidate in turn, later ones seeing what earlier ones
    changed; with a guard on each scope's clock, read before its neighbours were (see
    :class:`jiyi.store.base.Guard`)."""
    guards: dict[tuple[str, str], Guard] = {}
    for _, item, _ in items:
        key = (item.tenant_id, item.scope_key)
        if key not in guards:
            guards[key] = Guard(*key, (yield from call(ScopeClock(*key))))
    changes: list[Change] = []
    outcomes: list[Outcome] = []
    pending: dict[str, MemoryItem] = {}
    for cand, item, vector in items:
        done, why = yield from _reconcile_one(rt, cand, item, vector, pending)
        changes += done.changes
        pending.update(done.changed)
        outcomes.append(Outcome(cand, done.action, why, done.item_id, done.target_id))
    return list(guards.values()), outcomes, changes


def _over_the_limit(
    rt: Runtime, passed: list[tuple[Extracted, str]], used: int
) -> tuple[list[Outcome], list[tuple[Extracted, str]]]:
    """Past the session's rate limit a run keeps only what is never limited; the rest is
    refused with the reason (it shows in the job's result and the log)."""
    limit = (
        f"rate limit: this session already had {used} automatic extraction runs in "
        f"{rt.gate.extraction_window.total_seconds() / 3600:g} h (maximum {rt.gate.max_extractions}); "
        "only explicit requests, safety facts and corrections are kept"
    )
    refused: list[Outcome] = []
    kept: list[tuple[Extracted, str]] = []
    for cand, text in passed:
        why = never_rate_limited(cand.content, cand.source_text, cand.reasons)
        if why is None:
            refused.append(Outcome(cand, "rejected", limit))
        else:
            kept.append((replace(cand, reasons=(*cand.reasons, f"kept past the rate limit: {why}")), text))
    return refused, kept


def _log_refusals(outcomes: Sequence[Outcome]) -> None:
    for o in outcomes:
        if o.action == "rejected":
            log.info("not stored %r: %s", o.candidate.content[:80], o.reason)


def _resource_outcome(turn: int, item: MemoryItem) -> Outcome:
    said = Extracted(item.content, item.memory_type, item.confidence, turn_index=turn, reasons=("resource",))
    return Outcome(said, "resource", "what was said, kept as a resource", item.id)


def _screen_all(
    rt: Runtime, candidates: Sequence[Extracted], tenant: str
) -> tuple[list[Outcome], list[tuple[Extracted, str]]]:
    """Refused candidates as outcomes, and the rest with their screened (redacted) text."""
    outcomes: list[Outcome] = []
    passed: list[tuple[Extracted, str]] = []
    for cand in candidates:
        checked = screen(cand.content, cand.confidence, rt.gate, tenant)
        if isinstance(checked, GateDecision):
            outcomes.append(Outcome(cand, "rejected", "; ".join(checked.reasons)))
        else:
            passed.append((cand, checked.text))
    return outcomes, passed


PROJECT_KINDS = frozenset({MemoryType.DECISION, MemoryType.CONSTRAINT, MemoryType.CONTEXT})
"""What a conversation says about the work rather than the person: with a project named,
it belongs to the project (every member sees it; the project's profile holds it)."""


def extracted_scope(memory_type: MemoryType, owner: Mapping[str, str | None]) -> Scope:
    """A decision, constraint or project context goes to the project when one is named;
    everything else (who the person is, what they like) to the broadest owner, as add() does."""
    if owner.get("project_id") and memory_type in PROJECT_KINDS:
        return Scope.PROJECT
    return owner_scope(owner.get("user_id"), owner.get("project_id"), owner.get("agent_id"))


def _extracted_item(
    cand: Extracted,
    text: str,
    tenant: str,
    now: datetime,
    owner: dict[str, str | None],
    turn_times: Sequence[datetime | None],
    turn_names: Sequence[str | None],
) -> MemoryItem:
    turn = cand.turn_index
    said_at = turn_times[turn] if turn is not None and 0 <= turn < len(turn_times) else None
    speaker = turn_names[turn] if turn is not None and 0 <= turn < len(turn_names) else None
    meta: dict[str, Any] = {"extracted_by": list(cand.reasons)}
    if cand.key:
        meta["key"] = cand.key
    if speaker:
        meta["speaker"] = speaker
    return MemoryItem.build(
        content=text,
        memory_type=cand.memory_type,
        scope=extracted_scope(cand.memory_type, owner),
        tenant_id=tenant,
        **owner,
        confidence=cand.confidence,
        importance=cand.importance,
        structured=cand.structured,
        metadata=meta,
        source=Source.USER,
        raw=cand.source_text or None,
        occurred_at=said_at,
        # A time-bound statement ("until Friday", "下周前") retires on its own date.
        expires_at=expiry_of(cand.content, said_at or now),
        created_at=now,
        updated_at=now,
    )


def _reconcile_one(
    rt: Runtime, cand: Extracted, item: MemoryItem, vector: np.ndarray, pending: Mapping[str, MemoryItem]
) -> Flow[tuple[Applied, str]]:
    """Neighbours, then reconciliation (the LLM when configured, rules otherwise), then apply."""
    k = rt.session.similar_k
    found = yield from neighbours(rt, item, vector, query_terms(item.content), k)
    existing = [Existing(pending.get(c.item.id, c.item), c.cosine or 0.0) for c in found]
    existing.sort(key=lambda e: -e.cosine)
    if rt.llm is not None and existing:
        decision = yield from reconcile_flow(cand, existing)
    else:
        decision = decide(cand, existing, reconcile_config(rt))
    targets = {e.item.id: e.item for e in existing}
    # Nothing the user said is retired with a value that changed beside it.
    decision = keep_the_rest(decision, cand, targets)
    why = f"{decision.action}: {decision.reason} [{', '.join(cand.reasons) or 'extracted'}]"
    done = yield from apply(rt, item, vector, decision, targets, why, "pipeline")
    return done, why
