"""Memory lifecycle: decay, expiry and retention (seeds 001, 003, 004).

One maintenance pass (:func:`maintain_flow`) looks at every active memory of a tenant
and decides, with the pure function :func:`decide_item`, what happens to it:

* **protected** — importance >= ``policy.protect_importance`` (0.9) or tagged ``pinned``:
  always kept, never touched.
* **expired** — ``expires_at`` is past: archived (``expire``).
* **episodes** (tag ``episode``, seed 001) — importance decays exponentially from the
  moment the episode happened (``occurred_at``, else ``created_at``) with a half-life of
  ``episode_half_life_days`` (90)::

      importance(t) = base_importance * 0.5 ** (age_days / 90)

  ``base_importance`` is the importance before the first decay, kept in
  ``metadata["lifecycle"]["base_importance"]``, so repeated passes never compound.
  The stored importance is lowered (``decay``) when it moved by at least
  ``min_importance_change``; below ``episode_floor`` (0.1) the episode is archived or
  deleted (``policy.action_below_floor``).
* **patterns** (``memory_type == "pattern"``, seed 004) — unused for more than
  ``retention_days["pattern"]`` (90) days: archived.
* **every other item** (seed 003) — an access-based *decay score* in 0..1::

      idle_days = now - max(created_at, updated_at, last_used_at)
      half_life = item_half_life_days * (1 + ln(1 + access_count))
      decay_score = 0.5 ** (idle_days / half_life)

  It is 1.0 just after a use or a change and halves every ``half_life`` days; each use
  stretches the half-life (0 uses: 30 days, 10 uses: ~102 days), so memories that are
  recalled often survive and forgotten ones fade. Below ``item_decay_floor`` (0.2)
  the item is archived (or deleted) — only when the policy says ``archive_idle=True``;
  by default long-term knowledge is never dropped for being unused. Items tagged ``resource`` (documents) are exempt
  by default (``decay_exempt_tags``).

Archiving is reversible (``update(id, status="active")``); a restored item restarts its
clock (its ``updated_at`` moves), and a restored episode is kept from then on.
Deleting purges the item; its history stays (the audit log is kept forever, seed 004).
Every change is written with a :class:`~jiyi.store.base.HistoryEvent` whose reason says
why, actor ``"lifecycle"``.

Session messages older than ``retention_days["messages"]`` (30) days are deleted, and
retrieval log entries (:mod:`jiyi.read.retrievals`) older than
``retention_days["retrievals"]`` (90) days. Decay never reads the log itself: it reads
the usage summary kept on each item (``last_used_at``, ``access_count``), which the log's
writes keep and its retention leaves alone.

The pass is a flow (see :mod:`jiyi.effects`), so sync and async drivers both run it::

    report = run(maintain_flow(mem.runtime, now=mem.runtime.now()), mem.runtime)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput
from jiyi.model import EPISODE_TAG, MemoryItem, MemoryType, Status, as_utc
from jiyi.runtime import Runtime
from jiyi.session.model import Message
from jiyi.store.base import (
    Change,
    DeleteMessages,
    DumpRows,
    Filter,
    ForgetAccesses,
    HistoryAction,
    HistoryEvent,
    ListItems,
    Purge,
    Upsert,
    Write,
    history_event,
)
from jiyi.text.tokenize import index_text

Action = Literal["keep", "decay", "archive", "delete", "expire"]
ACTIONS: tuple[Action, ...] = ("keep", "decay", "archive", "delete", "expire")
ACTOR = "lifecycle"
PINNED_TAG = "pinned"
_DAY = 86400.0


def _default_retention() -> dict[str, int | None]:
    return {"messages": 30, "pattern": 90, "turns": None, "retrievals": 90}


@dataclass(frozen=True)
class LifecyclePolicy:
    """How memories age. See the module documentation for the formulas.

    ``retention_days``: ``"messages"`` — session messages older than this are deleted;
    ``"pattern"`` — pattern memories unused for longer are archived; ``"turns"`` — raw
    turns kept as resources (:mod:`jiyi.write.resources`) older than this are archived
    (default None: kept, like the memories they support); ``"retrievals"`` — entries of
    the retrieval log older than this are deleted (default 90). ``None`` (or a missing
    key) disables that rule.
    """

    episode_half_life_days: float = 90.0
    episode_floor: float = 0.1
    item_half_life_days: float = 30.0
    item_decay_floor: float = 0.2
    action_below_floor: Literal["archive", "delete"] = "archive"
    retention_days: Mapping[str, int | None] = field(default_factory=_default_retention)
    protect_importance: float = 0.9
    protect_tags: tuple[str, ...] = (PINNED_TAG,)
    decay_exempt_tags: tuple[str, ...] = ("resource",)
    archive_idle: bool = False
    """Archive (or delete) long-term memories whose decay score fell below
    ``item_decay_floor``. Off by default: nothing a user told us is dropped for being
    unused; idleness shows in the decay score (seed 002's ranking) instead."""
    min_importance_change: float = 0.01

    def __post_init__(self) -> None:
        for name in ("episode_half_life_days", "item_half_life_days"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
                raise InvalidInput(f"{name} must be a positive number, got {value!r}", field=name)
        for name in ("episode_floor", "item_decay_floor", "protect_importance", "min_importance_change"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
                raise InvalidInput(f"{name} must be within 0..1, got {value!r}", field=name)
        if self.action_below_floor not in ("archive", "delete"):
            raise InvalidInput(
                f"action_below_floor must be 'archive' or 'delete', got {self.action_below_floor!r}",
                field="action_below_floor",
            )
        for kind, days in self.retention_days.items():
            if days is not None and (not isinstance(days, int) or isinstance(days, bool) or days < 0):
                raise InvalidInput(
                    f"retention_days[{kind!r}] must be a non-negative integer or None, got {days!r}",
                    field="retention_days",
                )

    def retention(self, kind: str) -> int | None:
        return self.retention_days.get(kind)


@dataclass(frozen=True)
class Decision:
    """What to do with one item, and why. ``new_importance`` is set for ``decay``."""

    action: Action
    reason: str
    new_importance: float | None = None


@dataclass(frozen=True)
class ItemChange:
    item_id: str
    action: Action
    reason: str


@dataclass(frozen=True)
class MaintenanceReport:
    """The outcome of one pass. ``changes`` lists every item not kept; ``counts`` has one
    entry per action (``keep`` included). In a dry run nothing was written."""

    dry_run: bool
    now: datetime
    counts: dict[str, int]
    changes: list[ItemChange]
    messages_removed: int
    sessions_touched: int
    retrievals_before: datetime | None = None
    """The retrieval log's retention cut: entries older than this were (or, in a dry run,
    would be) deleted; None when the policy keeps them."""

    @property
    def scanned(self) -> int:
        return sum(self.counts.values())

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "now": self.now.isoformat(),
            "scanned": self.scanned,
            "counts": dict(self.counts),
            "changes": [{"id": c.item_id, "action": c.action, "reason": c.reason} for c in self.changes],
            "messages_removed": self.messages_removed,
            "sessions_touched": self.sessions_touched,
            "retrievals_before": None
            if self.retrievals_before is None
            else self.retrievals_before.isoformat(),
        }


# ---------------------------------------------------------------- pure decisions


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (as_utc(later) - as_utc(earlier)).total_seconds() / _DAY)


def _lifecycle_meta(item: MemoryItem) -> dict[str, Any]:
    meta = item.metadata.get("lifecycle")
    return dict(meta) if isinstance(meta, dict) else {}


def base_importance(item: MemoryItem) -> float:
    """An episode's importance before any decay."""
    value = _lifecycle_meta(item).get("base_importance")
    if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
        return float(value)
    return item.importance


def episode_importance(item: MemoryItem, now: datetime, policy: LifecyclePolicy) -> float:
    """``base_importance * 0.5 ** (age_days / episode_half_life_days)``."""
    age = _days(now, item.occurred_at or item.created_at)
    return base_importance(item) * math.pow(0.5, age / policy.episode_half_life_days)


def last_activity(item: MemoryItem) -> datetime:
    """The latest of creation, change and use."""
    times = [item.created_at, item.updated_at]
    if item.last_used_at is not None:
        times.append(item.last_used_at)
    return max(as_utc(t) for t in times)


def decay_score(item: MemoryItem, now: datetime, policy: LifecyclePolicy) -> float:
    """``0.5 ** (idle_days / (item_half_life_days * (1 + ln(1 + access_count))))``, in 0..1."""
    half_life = policy.item_half_life_days * (1.0 + math.log1p(item.access_count))
    return math.pow(0.5, _days(now, last_activity(item)) / half_life)


def _removal(policy: LifecyclePolicy) -> Action:
    return "delete" if policy.action_below_floor == "delete" else "archive"


def decide_item(item: MemoryItem, now: datetime, policy: LifecyclePolicy) -> Decision:
    """What one maintenance pass does with ``item`` at ``now`` (pure; no I/O)."""
    now = as_utc(now)
    if item.status != Status.ACTIVE:
        return Decision("keep", f"status is {item.status.value}")
    is_episode = EPISODE_TAG in item.tags
    importance = base_importance(item) if is_episode else item.importance
    if importance >= policy.protect_importance:
        return Decision("keep", f"protected: importance {importance:.2f} >= {policy.protect_importance:g}")
    pinned = [t for t in policy.protect_tags if t in item.tags]
    if pinned:
        return Decision("keep", f"protected: tagged {pinned[0]!r}")
    if item.expires_at is not None and as_utc(item.expires_at) <= now:
        return Decision("expire", f"expired at {as_utc(item.expires_at).isoformat()}")
    meta = _lifecycle_meta(item)
    if is_episode:
        if "archived_at" in meta:
            return Decision("keep", "episode restored after a lifecycle archive")
        value = episode_importance(item, now, policy)
        age = _days(now, item.occurred_at or item.created_at)
        if value < policy.episode_floor:
            return Decision(
                _removal(policy),
                f"episode importance {value:.2f} < {policy.episode_floor:g} after {age:.0f} days "
                f"(half-life {policy.episode_half_life_days:g})",
            )
        if item.importance - value >= policy.min_importance_change:
            return Decision(
                "decay",
                f"episode importance {item.importance:.2f} -> {value:.2f} after {age:.0f} days "
                f"(half-life {policy.episode_half_life_days:g})",
                new_importance=round(value, 6),
            )
        return Decision("keep", f"episode importance {value:.2f}")
    idle = _days(now, last_activity(item))
    keep_patterns = policy.retention("pattern")
    if item.memory_type == MemoryType.PATTERN and keep_patterns is not None and idle > keep_patterns:
        return Decision("archive", f"pattern unused for {idle:.0f} days > retention {keep_patterns} days")
    keep_turns = policy.retention("turns")
    if "turn" in item.tags and keep_turns is not None and _days(now, item.created_at) > keep_turns:
        return Decision("archive", f"raw turn older than retention {keep_turns} days")
    exempt = [t for t in policy.decay_exempt_tags if t in item.tags]
    if exempt:
        return Decision("keep", f"tagged {exempt[0]!r}: exempt from decay")
    score = decay_score(item, now, policy)
    if score < policy.item_decay_floor and not policy.archive_idle:
        return Decision(
            "keep",
            f"decay score {score:.2f} < {policy.item_decay_floor:g} after {idle:.0f} idle days: kept "
            "(long-term memory is archived for idleness only with archive_idle=True)",
        )
    if score < policy.item_decay_floor:
        return Decision(
            _removal(policy),
            f"decay score {score:.2f} < {policy.item_decay_floor:g}: unused for {idle:.0f} days, "
            f"{item.access_count} use(s) (half-life {policy.item_half_life_days:g} days)",
        )
    return Decision("keep", f"decay score {score:.2f}")


# ---------------------------------------------------------------- the flow


def _terms(item: MemoryItem) -> str:
    if EPISODE_TAG in item.tags and isinstance(item.structured, dict):
        topics = item.structured.get("key_topics") or []
        if isinstance(topics, list) and topics:
            return index_text(f"{item.content} {' '.join(str(t) for t in topics)}")
    return index_text(item.content)


def _event(
    action: HistoryAction, before: MemoryItem, after: MemoryItem | None, reason: str, now: datetime
) -> HistoryEvent:
    return history_event(action, before, after, reason=reason, at=now, actor=ACTOR)


def change_for(item: MemoryItem, decision: Decision, now: datetime) -> Change | None:
    """The store change carrying out ``decision`` (None for ``keep``)."""
    if decision.action == "keep":
        return None
    if decision.action == "delete":
        return Purge(item.tenant_id, item.id, _event(HistoryAction.PURGE, item, None, decision.reason, now))
    meta = _lifecycle_meta(item)
    if decision.action == "decay":
        assert decision.new_importance is not None
        meta.setdefault("base_importance", item.importance)
        new = item.evolve(
            importance=decision.new_importance,
            metadata={**item.metadata, "lifecycle": meta},
            version=item.version + 1,
            updated_at=now,
        )
        return Upsert(new, _terms(new), _event(HistoryAction.UPDATE, item, new, decision.reason, now))
    meta.update(archived_at=now.isoformat(), archived_because=decision.reason)
    new = item.evolve(
        status=Status.ARCHIVED,
        metadata={**item.metadata, "lifecycle": meta},
        version=item.version + 1,
        updated_at=now,
    )
    return Upsert(new, _terms(new), _event(HistoryAction.ARCHIVE, item, new, decision.reason, now))


def maintain(
    rt: Runtime,
    /,
    *,
    policy: LifecyclePolicy | None = None,
    dry_run: bool = False,
    tenant_id: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> Flow[MaintenanceReport]:
    """Decay, expiry, retention: archive (or delete) what has faded, each change audited.
    ``dry_run=True`` reports what would change and writes nothing. ``progress(done,
    None)`` is called after each batch with the memories checked so far."""
    return (
        yield from maintain_flow(
            rt, now=rt.now(), policy=policy, dry_run=dry_run, tenant_id=tenant_id, progress=progress
        )
    )


def maintain_flow(
    rt: Runtime,
    *,
    now: datetime,
    policy: LifecyclePolicy | None = None,
    dry_run: bool = False,
    tenant_id: str | None = None,
    batch_size: int = 200,
    progress: Callable[[int, int | None], None] | None = None,
) -> Flow[MaintenanceReport]:
    """One lifecycle pass over a tenant's active memories and session messages.

    Items are read ``batch_size`` at a time and each batch's changes are written in one
    transaction, every change with a history event naming its reason. With ``dry_run``
    the same decisions are reported and nothing is written.
    """
    policy = policy or LifecyclePolicy()
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= 1000:
        raise InvalidInput(
            f"batch_size must be an integer within 1..1000, got {batch_size!r}", field="batch_size"
        )
    now = as_utc(now)
    tenant = rt.tenant(tenant_id)
    counts: Counter[str] = Counter(dict.fromkeys(ACTIONS, 0))
    changes: list[ItemChange] = []

    flt = Filter(tenant_id=tenant, statuses=(Status.ACTIVE,), include_expired=True, now=now)
    cursor: str | None = None
    checked = 0
    while True:
        page = yield from call(ListItems(flt, limit=batch_size, cursor=cursor))
        checked += len(page.items)
        writes: list[Change] = []
        for item in page.items:
            decision = decide_item(item, now, policy)
            counts[decision.action] += 1
            if decision.action == "keep":
                continue
            changes.append(ItemChange(item.id, decision.action, decision.reason))
            change = change_for(item, decision, now)
            if change is not None:
                writes.append(change)
        if writes and not dry_run:
            yield from call(Write(tuple(writes)))
        if progress is not None:
            progress(checked, None)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    removed, sessions = yield from _expire_messages(tenant, now, policy, dry_run, batch_size)
    keep_log = policy.retention("retrievals")
    log_cut = None if keep_log is None else now - timedelta(days=keep_log)
    if log_cut is not None and not dry_run:
        yield from call(Write((ForgetAccesses(tenant, before=log_cut),)))
    return MaintenanceReport(
        dry_run=dry_run,
        now=now,
        counts=dict(counts),
        changes=changes,
        messages_removed=removed,
        sessions_touched=sessions,
        retrievals_before=log_cut,
    )


def _expire_messages(
    tenant: str, now: datetime, policy: LifecyclePolicy, dry_run: bool, batch_size: int
) -> Flow[tuple[int, int]]:
    """Delete session messages older than the ``messages`` retention; (count, sessions)."""
    days = policy.retention("messages")
    if days is None:
        return 0, 0
    cutoff = now - timedelta(days=days)
    old: dict[str, list[int]] = {}
    after: str | None = None
    while True:
        page = yield from call(DumpRows("messages", after=after, limit=max(batch_size, 500)))
        for row in page.rows:
            if row.get("tenant_id") != tenant:
                continue
            message = Message.model_validate_json(row["doc"])
            if message.created_at < cutoff:
                old.setdefault(str(row["session_id"]), []).append(int(row["seq"]))
        if page.next_after is None:
            break
        after = page.next_after
    total = sum(len(seqs) for seqs in old.values())
    if old and not dry_run:
        batch: list[Change] = []
        size = 0
        for session_id, seqs in old.items():
            for start in range(0, len(seqs), batch_size):
                chunk = tuple(seqs[start : start + batch_size])
                batch.append(DeleteMessages(tenant, session_id, chunk))
                size += len(chunk)
                if size >= batch_size:
                    yield from call(Write(tuple(batch)))
                    batch, size = [], 0
        if batch:
            yield from call(Write(tuple(batch)))
    return total, len(old)
