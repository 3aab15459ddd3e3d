"""The current value first, also when nothing was reconciled at write time.

Reconciliation retires an old fact when a new one changes it, and the ranking then keeps
the replacement above it (:func:`jiyi.read.rank.replacements_first`). But a turn kept as
a resource is never reconciled (it is a record of what was said), and when extraction
misses a statement ("We upgraded the server to 64 GB of RAM" after "The server has 32 GB
of RAM") both turns stay active and the older can rank first.

So among the best candidates, a pair where at least one is a resource is put through the
write path's own rules (:func:`jiyi.write.reconcile.decide`, the newer as the candidate
against the older with their cosine): when they would say ``supersede`` or ``update``,
the newer ranks just above the older, and the older's drop is shown as
``contribution.newer_version``. Nothing is retired or changed in the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jiyi.model import MemoryType
from jiyi.write.extract import Extracted
from jiyi.write.reconcile import Existing, ReconcileConfig, decide

if TYPE_CHECKING:
    from jiyi.read.rank import Scored

RESOURCE_TAG = "resource"
"""As :data:`jiyi.write.resources.RESOURCE_TAG` (that module needs the runtime, which
needs this one)."""

TOP = 10
"""Pairs among this many best candidates are compared (at most 45 pairs)."""

CHANGES = ("supersede", "update")


def _cosine(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    if a is None or b is None or a.shape != b.shape:
        return None
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return None
    return float(a @ b) / (na * nb)


def _changes(newer: Scored, older: Scored, cfg: ReconcileConfig) -> bool:
    """Whether the write path would let ``newer`` retire ``older``."""
    # No similarity floor: the write path has none either (its neighbours are the nearest
    # items, as these are the best candidates for one query); its slot rules decide.
    cos = _cosine(newer.candidate.vector, older.candidate.vector) or 0.0
    # A kept turn is typed as an event; compared as what it states (a fact), as the
    # statement extraction would have made of it.
    item = newer.candidate.item
    candidate = Extracted(content=item.content, memory_type=MemoryType.FACT, confidence=item.confidence)
    old = older.candidate.item
    if RESOURCE_TAG in old.tags:
        old = old.model_copy(update={"memory_type": MemoryType.FACT})
    decision = decide(candidate, [Existing(old, cos)], cfg)
    return decision.action in CHANGES and decision.target_id == older.candidate.item.id


def newer_versions_first(scored: Sequence[Scored], cfg: ReconcileConfig | None = None) -> None:
    """Among the best :data:`TOP` (``scored`` best first), an unreconciled newer version of
    a statement ranks just above the older one."""
    cfg = cfg or ReconcileConfig()
    top = list(scored[:TOP])
    for i, older in enumerate(top):
        for newer in top[i + 1 :]:
            a, b = older.candidate.item, newer.candidate.item
            if not (RESOURCE_TAG in a.tags or RESOURCE_TAG in b.tags) or a.user_id != b.user_id:
                continue
            if (b.occurred_at or b.created_at) <= (a.occurred_at or a.created_at):
                continue
            if older.score < newer.score or not _changes(newer, older, cfg):
                continue
            penalty = older.score - newer.score + 1e-6
            older.score -= penalty
            older.breakdown["contribution.newer_version"] = (
                older.breakdown.get("contribution.newer_version", 0.0) - penalty
            )
