"""One result per statement: a fact and the turn it was extracted from say the same thing.

``remember()`` keeps every turn as a resource and links what extraction finds in it back to
it (``derived_from``; see :mod:`jiyi.write.resources`). When a search finds both, showing
both spends two of the caller's ``limit`` places (and two entries of a prompt's budget) on
one statement. The fact is what jiyi knows (reconciled, versioned, valid now); the turn is
its evidence, reachable through the link. So the fact stays, at the better of the two
places, and the turn goes. A turn whose facts were not found stays: it is then the only
trace of what was said. So does a turn that says more than its fact while the fact is
current and the only one of that turn among the results (extraction kept one clause of
"Toronto winter is here, my hands are too cold to type on my phone"): it takes the better
place and the fact goes, its score shown as the turn's ``fact_score``.

Only a fact with exactly one source folds into it: an item built from many (a compressed
core item) does not stand for any single turn.
"""

from __future__ import annotations

from collections import Counter

from jiyi.model import TURN_TAG, MemoryItem, RelationType, Status
from jiyi.read.rank import Scored
from jiyi.read.versions import said_text
from jiyi.text.tokenize import terms
from jiyi.write.extract_rules import stated_clauses


def _single_source(item: MemoryItem) -> str | None:
    if not item.relations:  # most items: asked of every candidate of every search
        return None
    sources = [r.target_id for r in item.relations if r.type == RelationType.DERIVED_FROM]
    return sources[0] if len(sources) == 1 and TURN_TAG not in item.tags else None


def doubled(items: list[MemoryItem]) -> int:
    """How many of ``items`` are turns whose fact is among them too: places a candidate
    pool spends twice on one statement (the search asks for that many more)."""
    # Most items have no relations, so no source: those are passed over without a call,
    # and with no source at all the pool's ids are not gathered.
    sources = [s for i in items if i.relations and (s := _single_source(i)) is not None]
    if not sources:
        return 0
    present = {i.id for i in items}
    return len({s for s in sources if s in present})


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
    replaced by that fact, at the turn's place when it ranked higher; or the fact by the
    turn, when the turn says more (:func:`_says_more`)."""
    # Most items have no relations, so no source: passed over without a call; with no
    # source at all there is nothing to replace.
    sources = [_single_source(item) if (item := s.candidate.item).relations else None for s in scored]
    if sources.count(None) == len(sources):
        return scored
    position = {s.candidate.item.id: i for i, s in enumerate(scored)}
    # The best-ranked fact of each turn present in the results.
    fact_of: dict[str, int] = {}
    for i, source in enumerate(sources):
        if source is not None and source in position and source not in fact_of:
            fact_of[source] = i
    if not fact_of:
        return scored
    # Only a turn that gave one fact here: several facts of one turn are its structure.
    facts = Counter(sources)
    richer = {t for t in fact_of if facts[t] == 1 and _says_more(scored[position[t]], scored[fact_of[t]])}
    if richer:
        return one_per_statement(_turns_for_facts(scored, {position[t]: fact_of[t] for t in richer}))
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


def _turns_for_facts(scored: list[Scored], fact_at: dict[int, int]) -> list[Scored]:
    """``scored`` with each turn of ``fact_at`` (its place -> its fact's) standing for its
    fact, at the better of their two places, the fact's score in its breakdown."""
    turn_at = {f: t for t, f in fact_at.items()}
    out: list[Scored] = []
    for i, x in enumerate(scored):
        if turn_at.get(i, -1) > i:  # a fact above its turn: the turn takes this place
            turn = scored[turn_at[i]]
            breakdown = {**turn.breakdown, "fact_score": x.score}
            out.append(turn.but(score=max(x.score, turn.score), breakdown=breakdown))
        elif fact_at.get(i, -1) > i:  # a turn above its fact: it stays
            out.append(x.but(breakdown={**x.breakdown, "fact_score": scored[fact_at[i]].score}))
        elif i not in turn_at and i not in fact_at:
            out.append(x)
    return out


def _says_more(turn: Scored, fact: Scored) -> bool:
    """Whether a turn states more than the one fact extracted from it (a clause the fact does
    not hold: "Toronto winter is here, my hands are too cold to type on my phone"), while
    the fact is still current: then the turn is the better answer to show."""
    item = fact.candidate.item
    if item.status is not Status.ACTIVE or item.valid_to is not None or item.version != 1:
        return False  # retired, or changed since: the turn holds what is no longer true
    if item.mention_count != 1 or any(r.type != RelationType.DERIVED_FROM for r in item.relations):
        # said again since, or it replaced an older value: the fact stands for more than
        # this turn, and shows what it replaced
        return False
    held = set(terms(item.content))
    # (A named speaker's name in front of the turn is no more said.)
    return any(not set(terms(c)) <= held for c in stated_clauses(said_text(turn.candidate.item)))
