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

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jiyi.model import MemoryItem, MemoryType
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


_SENTENCE_END = re.compile(r"(?:[.!?;]+\s+|[。！？；]+\s*)(?=\S)")


def _one_sentence(text: str) -> bool:
    """Whether a text is one sentence (a speaker's name in front does not count)."""
    return _SENTENCE_END.search(text.strip()) is None


def _changes(newer: Scored, older: Scored, cfg: ReconcileConfig) -> bool:
    """Whether the write path would let ``newer`` retire ``older``."""
    # No similarity floor: the write path has none either (its neighbours are the nearest
    # items, as these are the best candidates for one query); its slot rules decide.
    cos = _cosine(newer.candidate.vector, older.candidate.vector) or 0.0
    if not (_one_sentence(newer.candidate.item.content) and _one_sentence(older.candidate.item.content)):
        # The rules read statements; a turn of several sentences ("Thanks, Mel! I'm
        # still looking into counseling jobs. It's important to me.") is conversation,
        # where values differ for many reasons besides a change.
        return False
    # A kept turn is typed as an event; compared as what it states (a fact), as the
    # statement extraction would have made of it.
    item = newer.candidate.item
    candidate = Extracted(content=item.content, memory_type=MemoryType.FACT, confidence=item.confidence)
    old = older.candidate.item
    if RESOURCE_TAG in old.tags:
        old = old.model_copy(update={"memory_type": MemoryType.FACT})
    decision = decide(candidate, [Existing(old, cos)], cfg)
    return decision.action in CHANGES and decision.target_id == older.candidate.item.id


def _speaker(item: MemoryItem) -> tuple[object, object] | None:
    """Who said a kept turn (its role and name); None for anything else."""
    if RESOURCE_TAG not in item.tags:
        return None
    return item.metadata.get("role"), item.metadata.get("speaker")


def _same_speaker(a: MemoryItem, b: MemoryItem) -> bool:
    """Whether a pair can be two versions of one person's statement: at least one is a
    user's turn, and when both are turns, the same person said them. A named speaker's
    turn is not compared with an extracted fact (in a conversation between several
    people whose statement the fact was is not known here): "I moved" by one friend is no
    correction of "I live in Berlin" by another."""
    sa, sb = _speaker(a), _speaker(b)
    if a.user_id != b.user_id or (sa is None and sb is None):
        return False
    if sa is not None and sb is not None:
        return sa == sb and sa[0] == "user"
    turn = sa if sa is not None else sb
    return turn is not None and turn[0] == "user" and turn[1] is None


def newer_versions_first(scored: Sequence[Scored], cfg: ReconcileConfig | None = None) -> None:
    """Among the best :data:`TOP` (``scored`` best first), an unreconciled newer version of
    a statement ranks just above the older one."""
    cfg = cfg or ReconcileConfig()
    top = list(scored[:TOP])
    for i, older in enumerate(top):
        for newer in top[i + 1 :]:
            a, b = older.candidate.item, newer.candidate.item
            if not _same_speaker(a, b):
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
