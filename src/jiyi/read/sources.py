"""One result per statement: a fact and the turn it was extracted from say the same thing.

``remember()`` keeps every turn as a resource and links what extraction finds in it back to
it (``derived_from``; see :mod:`jiyi.write.resources`). When a search finds both, showing
both spends two of the caller's ``limit`` places (and two entries of a prompt's budget) on
one statement. The fact is what jiyi knows (reconciled, versioned, valid now); the turn is
its evidence, reachable through the link. So the fact stays, at the better of the two
places, and the turn goes. A turn whose facts were not found stays: it is then the only
trace of what was said.

Only a fact with exactly one source folds into it: an item built from many (a compressed
core item) does not stand for any single turn.
"""

from __future__ import annotations

from jiyi.model import TURN_TAG, MemoryItem, RelationType
from jiyi.read.rank import Scored


def _single_source(item: MemoryItem) -> str | None:
    if not item.relations:  # most items: asked of every candidate of every search
        return None
    sources = [r.target_id for r in item.relations if r.type == RelationType.DERIVED_FROM]
    return sources[0] if len(sources) == 1 and TURN_TAG not in item.tags else None


def doubled(items: list[MemoryItem]) -> int:
    """How many of ``items`` are turns whose fact is among them too: places a candidate
    pool spends twice on one statement (the search asks for that many more)."""
    present = {i.id for i in items}
    return len({s for i in items if (s := _single_source(i)) is not None and s in present})


_PLACE_REASONS = frozenset(
    {
        "contribution.replaced",
        "contribution.newer_version",
        "contribution.later_statement",
        "contribution.said_change",
        "contribution.replaced_in_summary",
    }
)
"""Breakdown entries that explain a turn's place among versions of one fact."""


def one_per_statement(scored: list[Scored]) -> list[Scored]:
    """``scored`` (best first) with every turn whose extracted fact is also present
    replaced by that fact, at the turn's place when it ranked higher."""
    position = {s.candidate.item.id: i for i, s in enumerate(scored)}
    # The best-ranked fact of each turn present in the results.
    fact_of: dict[str, int] = {}
    for i, s in enumerate(scored):
        source = _single_source(s.candidate.item)
        if source is not None and source in position and source not in fact_of:
            fact_of[source] = i
    if not fact_of:
        return scored
    moved = {fact_of[turn]: position[turn] for turn in fact_of if position[turn] < fact_of[turn]}
    out: list[Scored] = []
    for i, s in enumerate(scored):
        item_id = s.candidate.item.id
        if item_id in fact_of:  # a turn: its fact takes its place, or already stood above it
            fact = fact_of[item_id]
            if fact in moved:
                promoted = scored[fact]
                # The turn's place came with the turn's reasons: a newer version shown
                # above it says why it stands lower (explain every decision).
                carried = {k: v for k, v in s.breakdown.items() if k in _PLACE_REASONS}
                breakdown = {**promoted.breakdown, **carried, "source_score": s.score}
                out.append(promoted.but(score=max(promoted.score, s.score), breakdown=breakdown))
            continue
        if i in moved:
            continue  # already placed where its turn was
        out.append(s)
    return out
