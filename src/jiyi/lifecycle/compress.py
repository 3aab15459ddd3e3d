"""Compression of old, rarely used memories (seed 002 §2.2: "10 facts -> 3 core facts").

:meth:`CompressionFlows.compress` (``Memory.compress``) looks at the active memories of
the given scopes and picks the *candidates*: not used or changed for ``older_than_days``
(30) days, used at most ``max_access`` (4) times, and never

* protected: tagged ``pinned`` or importance >= 0.9,
* a piece of a thread (raw turns, document chunks: ``thread_id`` set),
* tagged ``resource``, ``episode``, ``profile`` or ``procedural`` (learnings keep their
  counts), or due to expire (``expires_at``).

Candidates are grouped by scope and memory type (and visibility; ``owner_only`` items
also by owner), then, inside a group (best-supported first: confidence, mentions,
recency):

1. **near-duplicates** — cosine >= ``duplicate_threshold`` (0.85) to a better-supported
   item — become one statement, whatever the group size;
2. the statements are clustered (average-linkage, cosine >= ``cluster_threshold``
   (0.4)); a cluster of >= ``min_group`` (3) statements becomes 1..``max_core`` (3)
   *core* memories. Smaller clusters are left alone, except for their near-duplicates.

Offline (no LLM configured) the core text is a deterministic merge
(:func:`~jiyi.lifecycle.condense.condense`): the best-supported wording of each statement,
joined, split into up to ``max_core`` parts of about ``core_tokens`` (80) tokens by
similarity. With an LLM the model writes the core memories and says which statements each
covers; an answer that loses a statement or is unusable twice raises
:class:`~jiyi.errors.LLMError` and nothing is written.

A core memory keeps the group's scope, type, tenant and visibility; its source is
``system``, its confidence and importance the highest of its originals, its mention
count their sum, its tags their union, and it has a ``derived_from`` relation to each
original. Originals are archived (not deleted) with ``metadata["compressed_into"]``
naming the core memories. One call writes everything in one transaction, with a history
event per change (actor ``"lifecycle"``). :meth:`CompressionFlows.uncompress` undoes one
compression: the originals come back, the core memories are archived.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from jiyi.effects import Flow, call
from jiyi.embed.cached import embed_documents
from jiyi.embed.scale import on_scale
from jiyi.errors import InvalidInput
from jiyi.items import all_items, require
from jiyi.lifecycle.clustering import agglomerate, cosine_matrix, near_duplicate_sets
from jiyi.lifecycle.condense import CoreStatement, compression_flow, condense
from jiyi.lifecycle.maintain import last_activity
from jiyi.model import (
    MAX_ID_LENGTH,
    MemoryItem,
    MemoryType,
    Relation,
    RelationType,
    Source,
    Status,
    Visibility,
    new_id,
)
from jiyi.problems import too_large, too_small, wrong_type
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.store.base import (
    CachePut,
    Change,
    Filter,
    GetItems,
    HistoryAction,
    HistoryEvent,
    Upsert,
    Vector,
    VectorsFor,
    Write,
    creator_of,
    history_event,
)
from jiyi.text.tokenize import index_text
from jiyi.text.tokens import count_tokens
from jiyi.validate import enum_tuple, scope_keys
from jiyi.write.gate import scrub

if TYPE_CHECKING:
    pass

__all__ = [
    "CompressionGroup",
    "CompressionPolicy",
    "CompressionReport",
    "CoreProposal",
    "UncompressResult",
]

ACTOR = "lifecycle"
INTO_KEY = "compressed_into"
"""Metadata key on an archived original: the compression that absorbed it."""
FROM_KEY = "compressed_from"
"""Metadata key on a core memory: the compression that made it."""
_ID_BATCH = 500

Kind = Literal["cluster", "duplicates"]


def _number(
    value: object, name: str, low: float, high: float | None = None, *, integer: bool = False
) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok or isinstance(value, bool):
        raise InvalidInput(wrong_type(name, "an integer" if integer else "a number", value), field=name)
    assert isinstance(value, int | float)
    if not math.isfinite(value):
        raise InvalidInput(f"{name} must be a finite number, got {value!r}", field=name)
    if value < low:
        raise InvalidInput(too_small(name, f"{low:g}", value), field=name)
    if high is not None and value > high:
        raise InvalidInput(too_large(name, f"{high:g}", value), field=name)


MAX_IDLE_DAYS = 36500
"""``older_than_days`` above a century is a mistake (and past what a date can subtract)."""


@dataclass(frozen=True)
class CompressionPolicy:
    """What :meth:`CompressionFlows.compress` treats as old and rarely used, and how it merges.

    The cosine thresholds are given on the default USE-m3 embedder's scale (paraphrases
    score 0.85-0.95, facts on one topic 0.4-0.7, unrelated facts 0.1-0.35); an embedder
    whose cosines sit elsewhere (e5) gets them moved onto its own (:func:`on_scale_policy`).
    """

    older_than_days: float = 30.0
    """Idle time: no use and no change for at least this many days."""
    max_access: int = 4
    """Rarely used: retrieved at most this many times (seed 002: fewer than 5)."""
    min_group: int = 3
    """Fewest distinct statements a cluster needs to become core memories."""
    max_core: int = 3
    """Most core memories one cluster becomes."""
    duplicate_threshold: float = 0.85
    """Cosine at which two statements count as saying the same thing."""
    cluster_threshold: float = 0.4
    """Average cosine a cluster's statements must keep to stay one cluster."""
    core_tokens: int = 80
    """Rough length of one core memory; a cluster holds at most ``max_core`` of these."""
    protect_importance: float = 0.9
    protect_tags: tuple[str, ...] = ("pinned",)
    skip_tags: tuple[str, ...] = ("resource", "episode", "profile", "procedural")
    max_group_items: int = 500
    """Candidates of one group handled per call (the most idle first); the rest wait."""

    def __post_init__(self) -> None:
        _number(self.older_than_days, "older_than_days", 0, MAX_IDLE_DAYS)
        _number(self.max_access, "max_access", 0, integer=True)
        _number(self.min_group, "min_group", 2, integer=True)
        _number(self.max_core, "max_core", 1, integer=True)
        _number(self.duplicate_threshold, "duplicate_threshold", 0, 1)
        _number(self.cluster_threshold, "cluster_threshold", -1, 1)
        _number(self.core_tokens, "core_tokens", 1, integer=True)
        _number(self.protect_importance, "protect_importance", 0, 1)
        _number(self.max_group_items, "max_group_items", 2, integer=True)
        if self.duplicate_threshold <= 0:
            raise InvalidInput("duplicate_threshold must be above 0", field="duplicate_threshold")


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class CoreProposal:
    """One core memory: its text, the originals it covers and (unless a dry run) its id."""

    content: str
    source_ids: tuple[str, ...]
    item_id: str | None = None


@dataclass(frozen=True)
class CompressionGroup:
    """One compression: originals of one scope and type that became ``cores``.

    ``kind`` is ``"cluster"`` (>= min_group related statements) or ``"duplicates"``
    (near-duplicates of one statement). ``method`` is ``"offline"`` or ``"llm:<model>"``.
    """

    scope_key: str
    memory_type: MemoryType
    kind: Kind
    source_ids: tuple[str, ...]
    cores: tuple[CoreProposal, ...]
    method: str
    tokens_before: int
    tokens_after: int
    group_id: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "scope": self.scope_key,
            "memory_type": self.memory_type.value,
            "kind": self.kind,
            "method": self.method,
            "source_ids": list(self.source_ids),
            "cores": [
                {"id": c.item_id, "content": c.content, "source_ids": list(c.source_ids)} for c in self.cores
            ],
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(frozen=True)
class CompressionReport:
    """What one :meth:`~CompressionFlows.compress` call did (or, in a dry run, would do)."""

    dry_run: bool
    now: datetime
    scanned: int
    """Active memories looked at."""
    candidates: int
    """Of those, old and rarely used enough to compress."""
    groups: list[CompressionGroup]
    skipped: dict[str, int] = field(default_factory=dict)
    """Memories that were not candidates, by reason."""
    deferred: int = 0
    """Candidates left for a later call (over ``max_group_items`` in one group)."""

    @property
    def compressed(self) -> int:
        """Originals archived into core memories."""
        return sum(len(g.source_ids) for g in self.groups)

    @property
    def created(self) -> int:
        """Core memories written."""
        return sum(len(g.cores) for g in self.groups)

    @property
    def tokens_before(self) -> int:
        return sum(g.tokens_before for g in self.groups)

    @property
    def tokens_after(self) -> int:
        return sum(g.tokens_after for g in self.groups)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "now": self.now.isoformat(),
            "scanned": self.scanned,
            "candidates": self.candidates,
            "deferred": self.deferred,
            "skipped": dict(self.skipped),
            "compressed": self.compressed,
            "created": self.created,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "groups": [g.to_json_dict() for g in self.groups],
        }


@dataclass(frozen=True)
class UncompressResult:
    """What :meth:`~CompressionFlows.uncompress` changed; ``skipped`` maps ids to why not."""

    group_id: str
    restored: list[MemoryItem]
    archived: list[MemoryItem]
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "restored": [i.id for i in self.restored],
            "archived": [i.id for i in self.archived],
            "skipped": dict(self.skipped),
        }


# ---------------------------------------------------------------- choosing candidates (pure)


def skip_reason(item: MemoryItem, now: datetime, policy: CompressionPolicy) -> str | None:
    """Why ``item`` is not a compression candidate at ``now``, or None when it is."""
    if item.status != Status.ACTIVE:
        return f"status {item.status.value}"
    if any(t in item.tags for t in policy.protect_tags):
        return "pinned"
    if item.importance >= policy.protect_importance:
        return "important"
    if item.thread_id is not None:
        return "part of a thread"
    skip = next((t for t in policy.skip_tags if t in item.tags), None)
    if skip is not None:
        return f"tagged {skip}"
    if item.expires_at is not None:
        return "has an expiry date"
    if now - last_activity(item) < timedelta(days=policy.older_than_days):
        return "recently used or changed"
    if item.access_count > policy.max_access:
        return "often used"
    return None


def _support(item: MemoryItem) -> tuple[float, int, float, int, str, str]:
    """Sort key, best first: confidence, mentions, most recent activity; then the
    shorter wording (near-duplicates say the same, so the concise one is kept)."""
    return (
        -item.confidence,
        -item.mention_count,
        -last_activity(item).timestamp(),
        count_tokens(item.content),
        item.content,
        item.id,
    )


GroupKey = tuple[str, str, str, str]


def _group_key(item: MemoryItem) -> GroupKey:
    # owner_only memories of different people must never share a core memory; their
    # owner is who created them (Viewer.sees), not a user id.
    owner = (creator_of(item) or "") if item.visibility == Visibility.OWNER_ONLY else ""
    return (item.scope_key, item.memory_type.value, item.visibility.value, owner)


# ---------------------------------------------------------------- planning (pure)


@dataclass(frozen=True)
class _Unit:
    """One distinct statement: near-duplicates, best-supported (the wording kept) first."""

    items: tuple[MemoryItem, ...]

    @property
    def text(self) -> str:
        return self.items[0].content


@dataclass(frozen=True)
class _Plan:
    kind: Kind
    units: tuple[_Unit, ...]
    sim: np.ndarray  # cosine between the units' kept wordings

    @property
    def items(self) -> list[MemoryItem]:
        return [i for u in self.units for i in u.items]


def on_scale_policy(policy: CompressionPolicy, model_id: str) -> CompressionPolicy:
    """``policy`` with its cosine bars moved onto the embedder ``model_id``'s scale
    (:func:`jiyi.embed.scale.on_scale`; they are given on the default embedder's, and e5
    scores two unrelated statements above the near-duplicate bar of 0.85)."""
    dup, cluster = (
        on_scale(policy.duplicate_threshold, model_id),
        on_scale(policy.cluster_threshold, model_id),
    )
    if (dup, cluster) == (policy.duplicate_threshold, policy.cluster_threshold):
        return policy
    return replace(policy, duplicate_threshold=dup, cluster_threshold=cluster)


def _plan_group(
    items: Sequence[MemoryItem], vectors: Sequence[Vector], policy: CompressionPolicy
) -> list[_Plan]:
    """Near-duplicate sets and clusters of one group; ``items`` sorted best-supported first."""
    if len(items) < 2:
        return []
    sim = cosine_matrix(np.vstack(vectors))
    sets = near_duplicate_sets(sim, policy.duplicate_threshold)
    units = [_Unit(tuple(items[i] for i in s)) for s in sets]
    leaders = [s[0] for s in sets]
    unit_sim = sim[np.ix_(leaders, leaders)]
    if len(units) >= policy.min_group:
        clusters = agglomerate(
            unit_sim,
            threshold=policy.cluster_threshold,
            weights=[count_tokens(u.text) for u in units],
            budget=float(policy.max_core * policy.core_tokens),
        )
    else:
        clusters = [[i] for i in range(len(units))]
    plans: list[_Plan] = []
    for members in clusters:
        if len(members) >= policy.min_group:
            plans.append(
                _Plan("cluster", tuple(units[i] for i in members), unit_sim[np.ix_(members, members)])
            )
            continue
        for i in members:
            if len(units[i].items) > 1:
                plans.append(_Plan("duplicates", (units[i],), unit_sim[np.ix_([i], [i])]))
    return plans


@dataclass(frozen=True)
class _Draft:
    content: str
    items: tuple[MemoryItem, ...]


def _offline_drafts(plan: _Plan, policy: CompressionPolicy) -> list[_Draft]:
    """The deterministic merge: one text per part, parts split by similarity when long."""
    if plan.kind == "duplicates":
        unit = plan.units[0]
        return [_Draft(unit.text, unit.items)]
    total = sum(count_tokens(u.text) for u in plan.units)
    parts = min(policy.max_core, max(1, math.ceil(total / policy.core_tokens)), len(plan.units))
    split = agglomerate(plan.sim, n_clusters=parts) if parts > 1 else [list(range(len(plan.units)))]
    drafts: list[_Draft] = []
    for members in split:
        units = [plan.units[i] for i in members]
        drafts.append(_Draft(condense([u.text for u in units]), tuple(i for u in units for i in u.items)))
    return drafts


def _llm_drafts(plan: _Plan, cores: Sequence[CoreStatement]) -> list[_Draft]:
    items = plan.items
    return [_Draft(c.content, tuple(items[s] for s in sorted(c.sources))) for c in cores]


# ---------------------------------------------------------------- building the changes (pure)


def _common(values: Iterable[str | None]) -> str | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _latest(values: Iterable[datetime | None]) -> datetime | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _slot_key(item: MemoryItem) -> str | None:
    raw = (item.structured or {}).get("key") or item.metadata.get("key")
    return raw if isinstance(raw, str) and raw.strip() else None


def _core_item(
    draft: _Draft,
    *,
    core_id: str,
    group_id: str,
    core_ids: Sequence[str],
    kind: Kind,
    method: str,
    now: datetime,
) -> MemoryItem:
    """The core memory for ``draft`` (its originals best-supported first)."""
    items = draft.items
    best = items[0]
    tags: list[str] = []
    for item in items:
        tags.extend(t for t in item.tags if t not in tags)
    metadata: dict[str, Any] = {}
    creator = _common(creator_of(i) for i in items)
    if creator is not None:
        # Who may see (owner_only) and edit (an editor key) the core is who made every original.
        metadata["created_by"] = creator
    structured = None
    keys = {_slot_key(i) for i in items}
    if len(keys) == 1 and None not in keys:
        # One changeable slot (e.g. favourite_drink): keep it, so a later value still replaces it.
        structured = best.structured
        metadata.update({k: best.metadata[k] for k in ("key", "value") if k in best.metadata})
    metadata[FROM_KEY] = {
        "id": group_id,
        "kind": kind,
        "method": method,
        "at": now.isoformat(),
        "from": [i.id for i in items],
        "cores": list(core_ids),
    }
    return MemoryItem.build(
        id=core_id,
        tenant_id=best.tenant_id,
        content=draft.content,
        structured=structured,
        memory_type=best.memory_type,
        scope=best.scope,
        user_id=_common(i.user_id for i in items),
        project_id=_common(i.project_id for i in items),
        session_id=_common(i.session_id for i in items),
        agent_id=_common(i.agent_id for i in items),
        source=Source.SYSTEM,
        confidence=max(i.confidence for i in items),
        importance=max(i.importance for i in items),
        visibility=best.visibility,
        tags=tuple(tags),
        created_at=now,
        updated_at=now,
        occurred_at=_latest(i.occurred_at for i in items),
        last_used_at=_latest(i.last_used_at for i in items),
        access_count=max(i.access_count for i in items),
        mention_count=sum(i.mention_count for i in items),
        relations=tuple(Relation(type=RelationType.DERIVED_FROM, target_id=i.id) for i in items),
        metadata=metadata,
    )


def _event(
    action: HistoryAction,
    before: MemoryItem | None,
    after: MemoryItem,
    reason: str,
    now: datetime,
    actor: str,
) -> HistoryEvent:
    return history_event(action, before, after, reason=reason, at=now, actor=actor)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s" if not word.endswith("y") else f"{n} {word[:-1]}ies"


def _select(
    items: Sequence[MemoryItem], now: datetime, policy: CompressionPolicy
) -> tuple[dict[GroupKey, list[MemoryItem]], dict[str, int], int]:
    """Candidates by group (best-supported first), skip counts by reason, and how many
    candidates wait for a later call."""
    skipped: Counter[str] = Counter()
    groups: dict[GroupKey, list[MemoryItem]] = {}
    for item in items:
        why = skip_reason(item, now, policy)
        if why is not None:
            skipped[why] += 1
        else:
            groups.setdefault(_group_key(item), []).append(item)
    deferred = 0
    for members in groups.values():
        if len(members) > policy.max_group_items:
            members.sort(key=lambda i: (last_activity(i), i.id))  # the most idle go first
            deferred += len(members) - policy.max_group_items
            del members[policy.max_group_items :]
        members.sort(key=_support)
    return {k: groups[k] for k in sorted(groups)}, dict(sorted(skipped.items())), deferred


def _archived(
    original: MemoryItem, group_id: str, into: Sequence[str], reason: str, now: datetime, actor: str
) -> Upsert:
    mark = {"id": group_id, "cores": list(into), "at": now.isoformat()}
    archived = original.evolve(
        status=Status.ARCHIVED,
        metadata={**original.metadata, INTO_KEY: mark},
        version=original.version + 1,
        updated_at=now,
    )
    event = _event(HistoryAction.ARCHIVE, original, archived, reason, now, actor)
    return Upsert(archived, index_text(archived.content), event)


def _build(
    planned: Sequence[tuple[_Plan, list[_Draft]]], method: str, now: datetime, actor: str, dry_run: bool
) -> tuple[list[CompressionGroup], list[MemoryItem], list[Change]]:
    """The report's groups, the core memories to add and the archiving of the originals
    (no ids and no changes in a dry run)."""
    report: list[CompressionGroup] = []
    cores: list[MemoryItem] = []
    changes: list[Change] = []
    for plan, drafts in planned:
        originals = plan.items
        group_id = None if dry_run else new_id()
        ids = [] if dry_run else [new_id() for _ in drafts]
        report.append(
            CompressionGroup(
                scope_key=originals[0].scope_key,
                memory_type=originals[0].memory_type,
                kind=plan.kind,
                source_ids=tuple(i.id for i in originals),
                cores=tuple(
                    CoreProposal(d.content, tuple(i.id for i in d.items), ids[k] if ids else None)
                    for k, d in enumerate(drafts)
                ),
                method=method,
                tokens_before=sum(count_tokens(i.content) for i in originals),
                tokens_after=sum(count_tokens(d.content) for d in drafts),
                group_id=group_id,
            )
        )
        if group_id is None:
            continue
        for draft, cid in zip(drafts, ids, strict=True):
            cores.append(
                _core_item(
                    draft,
                    core_id=cid,
                    group_id=group_id,
                    core_ids=ids,
                    kind=plan.kind,
                    method=method,
                    now=now,
                )
            )
        kind = originals[0].memory_type.value
        what = (
            f"{_plural(len(originals), 'near-duplicate')} of one {kind} memory"
            if plan.kind == "duplicates"
            else _plural(len(originals), f"old, rarely used {kind} memory")
        )
        for original in originals:
            into = [
                cid for d, cid in zip(drafts, ids, strict=True) if any(i.id == original.id for i in d.items)
            ]
            reason = f"compressed into core memory {', '.join(into)}: {what} merged ({method})"
            changes.append(_archived(original, group_id, into, reason, now, actor))
    return report, cores, changes


# ---------------------------------------------------------------- the flows


def _tenant_and_actor(rt: Runtime, tenant_id: object, actor: object) -> str:
    if tenant_id is not None and (
        not isinstance(tenant_id, str) or not tenant_id.strip() or len(tenant_id) > MAX_ID_LENGTH
    ):
        raise InvalidInput(
            f"tenant_id must be a non-empty string of at most {MAX_ID_LENGTH} characters", field="tenant_id"
        )
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidInput("actor must be a non-empty string (kept in the history)", field="actor")
    return rt.tenant(tenant_id)


def _vectors(
    rt: Runtime, tenant: str, items: Sequence[MemoryItem]
) -> Flow[tuple[dict[str, Vector], CachePut | None]]:
    """Stored vectors of ``items``; those without one (another embedder) are embedded."""
    model = rt.embedder.model_id
    found: dict[str, Vector] = {}
    ids = [i.id for i in items]
    for start in range(0, len(ids), _ID_BATCH):
        found.update((yield from call(VectorsFor(tenant, model, tuple(ids[start : start + _ID_BATCH])))))
    missing = [i for i in items if i.id not in found]
    put: CachePut | None = None
    if missing:
        vectors, put = yield from embed_documents(rt, [i.content for i in missing])
        found.update({item.id: vectors[k] for k, item in enumerate(missing)})
    return found, put


def _llm_cores(rt: Runtime, plan: _Plan, policy: CompressionPolicy) -> Flow[list[CoreStatement]]:
    items = plan.items
    max_core = 1 if plan.kind == "duplicates" else policy.max_core
    cores = yield from compression_flow(
        [i.content for i in items],
        memory_type=items[0].memory_type,
        max_core=max_core,
        max_length=rt.gate.max_length,
    )
    # A model's wording is new text: redacted as the tenant's policy says.
    return [CoreStatement(scrub(rt.gate, items[0].tenant_id, c.content), c.sources) for c in cores]


def _drafts(
    rt: Runtime,
    groups: Mapping[GroupKey, list[MemoryItem]],
    vectors: Mapping[str, Vector],
    policy: CompressionPolicy,
) -> Flow[list[tuple[_Plan, list[_Draft]]]]:
    """Each group's plans, with the core statements drafted for them (by the LLM, or
    offline without one)."""
    planned: list[tuple[_Plan, list[_Draft]]] = []
    scaled = on_scale_policy(policy, rt.embedder.model_id)
    for members in groups.values():
        for plan in _plan_group(members, [vectors[i.id] for i in members], scaled):
            if rt.llm is None:
                drafts = _offline_drafts(plan, policy)
            else:
                drafts = _llm_drafts(plan, (yield from _llm_cores(rt, plan, policy)))
            planned.append((plan, drafts))
    return planned


def _write_cores(
    rt: Runtime,
    core_items: Sequence[MemoryItem],
    cache_put: CachePut | None,
    changes: list[Change],
    method: str,
    policy: CompressionPolicy,
    now: datetime,
    actor: str,
) -> Flow[None]:
    """The core memories (embedded, audited) and ``changes``, in one transaction."""
    embedded, core_put = yield from embed_memories(rt, [c.content for c in core_items])
    writes: list[Change] = [p for p in (cache_put, core_put) if p is not None]
    for item, vector in zip(core_items, embedded, strict=True):
        info = item.metadata[FROM_KEY]
        reason = (
            f"core memory of {_plural(len(info['from']), 'memory')} not used for "
            f"{policy.older_than_days:g}+ days ({info['kind']}, {method})"
        )
        writes.append(
            Upsert(
                item,
                index_text(item.content),
                _event(HistoryAction.ADD, None, item, reason, now, actor),
                vector=vector,
                model_id=rt.embedder.model_id,
            )
        )
    yield from call(Write(tuple(writes + changes)))


def compress(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    memory_types: Iterable[MemoryType | str] | MemoryType | str | None = None,
    older_than_days: float = 30.0,
    max_access: int = 4,
    min_group: int = 3,
    max_core: int = 3,
    duplicate_threshold: float = 0.85,
    cluster_threshold: float = 0.4,
    core_tokens: int = 80,
    dry_run: bool = False,
    actor: str = ACTOR,
) -> Flow[CompressionReport]:
    """Merge old, rarely used memories into a few core memories (seed 002).

    Scope ids limit the pass to those scopes (none: every scope of the tenant).
    Near-duplicates are merged into one memory; clusters of ``min_group`` or more
    related memories of one scope and type become 1..``max_core`` core memories,
    written by the configured LLM or, offline, by a deterministic merge. Originals
    are archived and linked (``derived_from``); everything lands in one transaction,
    audited. ``dry_run=True`` reports the groups and proposed texts and writes
    nothing. Undo one compression with :meth:`uncompress`.
    """

    policy = CompressionPolicy(
        older_than_days=older_than_days,
        max_access=max_access,
        min_group=min_group,
        max_core=max_core,
        duplicate_threshold=duplicate_threshold,
        cluster_threshold=cluster_threshold,
        core_tokens=core_tokens,
    )
    if not isinstance(dry_run, bool):
        raise InvalidInput(f"dry_run must be true or false, not {dry_run!r}", field="dry_run")
    tenant = _tenant_and_actor(rt, tenant_id, actor)
    now = rt.now()
    flt = Filter(
        tenant_id=tenant,
        scope_keys=scope_keys(user_id, project_id, session_id, agent_id),
        memory_types=enum_tuple(MemoryType, memory_types, "memory_types"),
        statuses=(Status.ACTIVE,),
        now=now,
    )
    items = yield from all_items(rt, flt)
    groups, skipped, deferred = _select(items, now, policy)
    candidates = [i for members in groups.values() for i in members]
    vectors: dict[str, Vector] = {}
    cache_put: CachePut | None = None
    if candidates:
        vectors, cache_put = yield from _vectors(rt, tenant, candidates)

    method = "offline" if rt.llm is None else f"llm:{rt.llm.model_id}"
    planned = yield from _drafts(rt, groups, vectors, policy)
    report_groups, core_items, changes = _build(planned, method, now, actor, dry_run)
    if not dry_run and core_items:
        yield from _write_cores(rt, core_items, cache_put, changes, method, policy, now, actor)
    return CompressionReport(
        dry_run=dry_run,
        now=now,
        scanned=len(items),
        candidates=len(candidates),
        groups=report_groups,
        skipped=skipped,
        deferred=deferred,
    )


def uncompress(
    rt: Runtime,
    /,
    core_id: str,
    *,
    tenant_id: str | None = None,
    actor: str = ACTOR,
) -> Flow[UncompressResult]:
    """Undo the compression that made the core memory ``core_id``: its originals are
    restored (active again) and every core memory of that compression is archived,
    in one transaction, audited. Refused when a core memory was itself compressed
    again (undo that one first) or the compression was already undone."""
    tenant = _tenant_and_actor(rt, tenant_id, actor)
    core = yield from require(rt, core_id, tenant)
    info = core.metadata.get(FROM_KEY)
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        raise InvalidInput(f"memory {core_id!r} is not a core memory made by compress", field="core_id")
    group_id: str = info["id"]
    if info.get("undone_at"):
        raise InvalidInput(f"the compression that made {core_id!r} was already undone", field="core_id")
    core_ids = [c for c in info.get("cores", [core_id]) if isinstance(c, str)] or [core_id]
    cores = yield from call(GetItems(tenant, tuple(core_ids)))
    for c in cores:
        again = c.metadata.get(INTO_KEY)
        if c.status == Status.ARCHIVED and isinstance(again, dict):
            later = ", ".join(again.get("cores", [])) or "another core memory"
            raise InvalidInput(
                f"core memory {c.id!r} was compressed again into {later}; undo that compression first",
                field="core_id",
            )
    source_ids: list[str] = []
    for c in cores:
        made = c.metadata.get(FROM_KEY)
        sources = made.get("from", []) if isinstance(made, dict) else []
        source_ids.extend(s for s in sources if isinstance(s, str) and s not in source_ids)
    originals = yield from call(GetItems(tenant, tuple(source_ids)))
    found = {i.id: i for i in originals}
    now = rt.now()
    skipped: dict[str, str] = {
        c: "core memory no longer exists" for c in core_ids if c not in {x.id for x in cores}
    }
    restored: list[MemoryItem] = []
    changes: list[Change] = []
    for sid in source_ids:
        original = found.get(sid)
        if original is None:
            skipped[sid] = "original no longer exists"
            continue
        mark = original.metadata.get(INTO_KEY)
        if original.status != Status.ARCHIVED or not isinstance(mark, dict) or mark.get("id") != group_id:
            skipped[sid] = f"original is {original.status.value} and no longer held by this compression"
            continue
        back = original.evolve(
            status=Status.ACTIVE,
            metadata={k: v for k, v in original.metadata.items() if k != INTO_KEY},
            version=original.version + 1,
            updated_at=now,
        )
        reason = f"compression undone: restored from core memory {', '.join(mark.get('cores', []))}"
        changes.append(
            Upsert(
                back,
                index_text(back.content),
                _event(HistoryAction.RESTORE, original, back, reason, now, actor),
            )
        )
        restored.append(back)
    archived: list[MemoryItem] = []
    for c in cores:
        made = c.metadata.get(FROM_KEY)
        mark = {**(made if isinstance(made, dict) else {"id": group_id}), "undone_at": now.isoformat()}
        meta = {**c.metadata, FROM_KEY: mark}
        gone = c.evolve(status=Status.ARCHIVED, metadata=meta, version=c.version + 1, updated_at=now)
        reason = f"compression undone: {_plural(len(restored), 'original')} restored"
        changes.append(
            Upsert(gone, index_text(gone.content), _event(HistoryAction.ARCHIVE, c, gone, reason, now, actor))
        )
        archived.append(gone)
    yield from call(Write(tuple(changes)))
    return UncompressResult(group_id, restored, archived, skipped)
