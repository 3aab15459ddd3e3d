"""Ranking: fuse vector and keyword evidence with their context, apply the seed formula,
keep replacements above what they replaced, diversify with MMR.

Pure functions over :class:`~jiyi.store.base.Candidate` values; no I/O. Every number
that goes into a score is kept in a breakdown, so ``search(..., explain=True)`` can show
each signal's contribution.

Similarity (0..1) comes from one of two fusions (``RankConfig.fusion``):

* ``"learned"`` (default, :mod:`jiyi.read.fusion`): features of each candidate and of its
  pool (cosine, BM25, term coverage, thread neighbours, time, language; the pool's text
  length and how far cosine and BM25 agree) combined by weights fitted on the development
  halves of LoCoMo, LongMemEval_S and the Chinese/English set (``bench/fusion.py``), so
  the weight of each signal adapts to the query and the store;
* ``"fixed"`` (the earlier hand-tuned formula, kept for comparison): each candidate's own
  evidence widened by its thread neighbours,
  ``vec = (cos + c*max(cos of neighbours)) / (1 + c)``,
  ``kw = saturate(bm25 + a*max(bm25 of neighbours))``, ``base = (1 - w)*vec + w*kw``,
  ``fused = (base + g*max(base of neighbours) + t*in_time_window) / (1 + g + t)`` and
  ``similarity = 1 - exp(-fused / similarity_scale)``.

Similarity ranks; it does not tell whether anything relevant was found at all (a query
that shares only a name with a memory gets a high keyword score, and the learned fused
value is on a scale that depends on the store). :func:`relevances` gives each hit a
separate ``relevance`` in 0..1 on absolute evidence, used by
``search(..., min_relevance=...)``::

    semantic = max(cos, RELEVANCE_NEIGHBOUR * max(cos of neighbours))
    coverage = IDF-weighted share of the query's terms that the hit or its neighbours contain
    relevance = 1 / (1 + exp(-RELEVANCE_SLOPE * (semantic + RELEVANCE_COVERAGE * coverage
                                                 + RELEVANCE_TIME * in_time_window
                                                 - RELEVANCE_CENTRE)))

IDF is taken over the candidate pool of the search. The weights are a logistic fit on half
of the Chinese/English retrieval set (docs/benchmarks.md); :data:`RECOMMENDED_MIN_RELEVANCE`
(0.5) is the strict cut the web page applies; :data:`DEFAULT_MIN_RELEVANCE` is the
mild one (0.05) ``context()``, the agent tools, MCP and REST apply by default. Both are
calibrated for the default embedder's cosine scale.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from jiyi.config import RankConfig
from jiyi.embed.scale import on_scale, to_default_scale
from jiyi.model import MemoryItem, RelationType, Source, Status
from jiyi.read import fusion
from jiyi.read.asked import about_another, answers, asked_key
from jiyi.read.fusion import at_neighbours, neighbour_index
from jiyi.read.fusion import han_share as han_share  # re-exported: tests and callers use it here
from jiyi.read.fusion import other_language as other_language_of
from jiyi.read.versions import (
    LATER_ON_TOPIC_MARGIN,
    TOPIC_COSINE,
    is_later_on_topic,
    is_later_restatement,
    is_newer_version,
    is_replaced_in_summary,
    is_said_change,
    may_follow,
    quotes_older,
    quotes_retired,
    restatement_bar,
)
from jiyi.read.versions import TOP as VERSIONS_TOP
from jiyi.store.base import Candidate
from jiyi.text.answers import asked_kind, only_asks
from jiyi.text.tokenize import query_terms
from jiyi.write.reconcile import ReconcileConfig, config_on_scale


@dataclass(frozen=True)
class SearchHit:
    """One search result: the item, its final score and how the score was made."""

    item: MemoryItem
    score: float
    similarity: float
    breakdown: dict[str, float] = field(default_factory=dict)
    """Raw evidence (``cosine``, ``keyword_bm25``, ...), each signal's share of the fused
    evidence behind the similarity (``similarity.*``, summing to ``fused``) and of the
    score (``contribution.*``, summing to it); with a relevance, also its parts
    (``relevance.semantic``, ``relevance.coverage``, ``relevance.time``)."""
    relevance: float | None = None
    """Whether the hit answers the query at all, 0..1, 0.5 being the recommended cut (see
    :func:`relevances`); set when the search was given ``min_relevance`` or
    ``explain=True``, else None. Unlike ``similarity`` it is not used for ranking."""

    def to_json_dict(self) -> dict[str, object]:
        data = self.item.to_json_dict()
        data["score"] = round(self.score, 6)
        data["similarity"] = round(self.similarity, 6)
        if self.relevance is not None:
            data["relevance"] = round(self.relevance, 6)
        data["breakdown"] = {k: round(v, 6) for k, v in self.breakdown.items()}
        return data


def keyword_evidence(score: float, saturation: float) -> float:
    """Map an unbounded BM25 score into 0..1 (half way at ``saturation``)."""
    if score <= 0:
        return 0.0
    return score / (score + saturation)


class Scored:
    """A candidate with its score and similarity, and the breakdown of the score (see
    :class:`SearchHit`). The breakdown is made on first use from the pool's
    :class:`Breakdowns`: a search shows it for its few hits, not for the ~100 candidates
    it ranks."""

    __slots__ = ("_breakdown", "_row", "_table", "candidate", "score", "similarity")

    def __init__(
        self,
        candidate: Candidate,
        score: float,
        similarity: float,
        breakdown: dict[str, float] | None = None,
        table: Breakdowns | None = None,
        row: int = 0,
    ) -> None:
        self.candidate = candidate
        self.score = score
        self.similarity = similarity
        self._breakdown = breakdown
        self._table = table
        self._row = row

    @property
    def breakdown(self) -> dict[str, float]:
        if self._breakdown is None:
            self._breakdown = {} if self._table is None else self._table.row(self._row)
        return self._breakdown

    def but(
        self, *, score: float | None = None, similarity: float | None = None, breakdown: dict[str, float]
    ) -> Scored:
        """A new value with these changed (``breakdown`` becomes the new one's own)."""
        return Scored(
            self.candidate,
            self.score if score is None else score,
            self.similarity if similarity is None else similarity,
            breakdown,
        )


@dataclass(frozen=True)
class Breakdowns:
    """The breakdown of every candidate of a pool, as columns (name -> one value per
    candidate, in breakdown order). A column in ``only`` belongs to the rows its mask
    marks (a superseded item's discount); the others to every row."""

    columns: dict[str, np.ndarray]
    only: dict[str, np.ndarray] = field(default_factory=dict)

    def row(self, i: int) -> dict[str, float]:
        only = self.only
        return {
            name: float(values[i])
            for name, values in self.columns.items()
            if name not in only or only[name][i]
        }


def other_language(query: str, cands: Sequence[Candidate]) -> np.ndarray:
    """0..1 per candidate: how far its language is from the query's (Chinese vs English).

    Keywords cannot meet across languages, so for such a candidate a missing keyword
    match is no evidence against it; the fixed fusion fills that slot with part of its
    vector evidence above the pool's median (``RankConfig.cross_language_fill``).
    """
    return other_language_of(query, [c.item.content for c in cands])


def similarities(
    cands: Sequence[Candidate],
    cfg: RankConfig,
    in_time: Callable[[MemoryItem], bool] | None,
    query: str = "",
    model_id: str = "",
    skip: frozenset[str] = frozenset(),
    asking: bool = False,
    gains: np.ndarray | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Similarity of every candidate (0..1) and the columns it is made of (the first part
    of each candidate's breakdown). ``in_time`` None: the query names no time.
    ``model_id``: the embedder whose cosines the candidates carry (the learned fusion
    weighs them with that embedder's weights, :func:`jiyi.read.fusion.weights_for`).
    ``skip``: query terms left out of the term coverage and phrase evidence (the scope
    owner's name, :mod:`jiyi.read.owner`; the candidates' BM25 was asked without them).
    ``asking``: the query is a request, points back to the conversation or is about asking
    (:func:`jiyi.text.answers.about_asking`), so a memory that only asks keeps all its
    evidence (:data:`ASKS_ONLY_FACTOR`; learned fusion)."""
    if cfg.fusion == "learned":
        return _learned(cands, in_time, query, fusion.weights_for(model_id), skip, asking, gains, columns)
    cos, bm25, cos_n, bm25_n = fusion.evidence(cands)
    c, a, w = cfg.context_vector, cfg.context_keyword, cfg.keyword_weight
    vec = (cos + c * cos_n) / (1.0 + c)
    raw_kw = bm25 + a * bm25_n
    kw = raw_kw / (raw_kw + cfg.keyword_saturation)
    if query and cfg.cross_language_fill > 0:
        across = other_language(query, cands)
        # Only what stands out of this search's pool counts, so that a query nothing
        # answers does not gain similarity from the fill.
        lift = np.maximum(vec - np.median(vec), 0.0)
        kw = (1.0 - across) * kw + across * cfg.cross_language_fill * lift
    base = (1.0 - w) * vec + w * kw
    prev, nxt = neighbour_index(cands)
    base_n = at_neighbours(base, prev, nxt)
    g, t = cfg.context_score, cfg.time_weight
    norm = 1.0 + g + t
    timely = np.array([1.0 if t > 0 and in_time is not None and in_time(x.item) else 0.0 for x in cands])
    parts = {
        "similarity.vector": (1.0 - w) * vec / norm,
        "similarity.keyword": w * kw / norm,
        "similarity.neighbours": g * base_n / norm,
        "similarity.time": t * timely / norm,
    }
    evidence = {
        "cosine": cos,
        "cosine.neighbours": cos_n,
        "keyword_bm25": bm25,
        "keyword_bm25.neighbours": bm25_n,
    }
    fused: np.ndarray = functools.reduce(np.add, parts.values())
    similarity = 1.0 - np.exp(-fused / cfg.similarity_scale)
    return similarity, {**evidence, **parts, "fused": fused}


ASKS_ONLY_FACTOR = 0.8
"""The share of its fused evidence that a memory which only asks keeps
(:func:`jiyi.text.answers.only_asks`: "Hey Mel! How was the trip?"). A question tells
nothing; at most it presupposes. Of the turns the ranking put in the first ten that answer
nothing, 6.8% on LoCoMo and 11.4% on LongMemEval_S only ask, against 0.3-0.5% of the turns
that answer. Not when the query is itself a request, points back to the conversation or is
about asking (:func:`jiyi.text.answers.about_asking`: "Any tips?", "our previous chat about
X", "What did Jolene ask Deb?"): there an earlier request may be what it looks for.
Chosen on the tuning halves (docs/benchmarks.md, session 27)."""


def kept_shares(cands: Sequence[Candidate], asking: bool = False) -> np.ndarray:
    """The share of its fused value each candidate keeps: :data:`ASKS_ONLY_FACTOR` for a
    memory that only asks (unless ``asking``, see :func:`similarities`), else 1."""
    if asking:
        return np.ones(len(cands))
    asks = np.fromiter((only_asks(c.item.content) for c in cands), dtype=bool, count=len(cands))
    return np.where(asks, ASKS_ONLY_FACTOR, 1.0)


def _learned(
    cands: Sequence[Candidate],
    in_time: Callable[[MemoryItem], bool] | None,
    query: str,
    weights: np.ndarray,
    skip: frozenset[str] = frozenset(),
    asking: bool = False,
    gains: np.ndarray | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The learned fusion (:mod:`jiyi.read.fusion`): features (``columns`` when they were
    made already, :func:`learned_columns`), fused value, similarity."""
    if columns is None:
        cols = learned_columns(cands, in_time, query, skip, gains)
    else:
        cols = columns
        if gains is not None:
            fusion.add_gains(cols, gains, [c.item.content for c in cands])
    coverage = cols["cover"]
    s = fusion.fused(cols, weights)
    keep = kept_shares(cands, asking)
    asks_part = s * (keep - 1.0)
    s = s + asks_part
    columns = {
        "cosine": cols["cos"],
        "cosine.neighbours": cols["cos_n"],
        "keyword_bm25": cols["bm25"],
        "keyword_bm25.neighbours": cols["bm25_n"],
        "keyword_coverage": coverage,
        **{f"similarity.{k}": v for k, v in fusion.signal_parts(cols, weights).items()},
        **({"similarity.only_asks": asks_part} if (keep < 1.0).any() else {}),
        "fused": s,
    }
    return fusion.similarity(s), columns


# ---------------------------------------------------------------- relevance

RELEVANCE_SLOPE = 23.0
"""Steepness of the relevance curve around its centre (per unit of cosine)."""
RELEVANCE_CENTRE = 0.215
"""Semantic evidence (cosine, default embedder) at which relevance is 0.5 without other help."""
RELEVANCE_COVERAGE = 0.12
"""What a query fully covered by the hit's words adds, in units of cosine."""
RELEVANCE_TIME = 0.22
"""What lying inside a time the query names adds, in units of cosine."""
RELEVANCE_NEIGHBOUR = 0.7
"""Share of a thread neighbour's cosine that counts as the hit's own."""
RECOMMENDED_MIN_RELEVANCE = 0.5
"""The strict cut chosen on the tuning half of the Chinese/English set: below it a hit
probably does not answer the query (docs/benchmarks.md); the web page lists hits above it."""
DEFAULT_MIN_RELEVANCE = 0.05
"""The cut ``context()``, the agent tools, MCP and REST apply unless told otherwise: it drops
only what is almost surely unrelated ("weather tomorrow" against a user's facts sits at
0.01-0.02) and on the zh/en set keeps every gold hit of the top 5 (9% of the others go),
as on LoCoMo and LongMemEval_S. Stricter cuts cost real matches: a one-word or
cross-lingual query that does match often sits at 0.1-0.5 ("job" against "works as a
nurse": 0.10), so 0.5 is for callers who prefer silence to a weak match."""

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


_WORD_CHARS = frozenset(
    [chr(c) for c in range(ord("0"), ord("9") + 1)]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [chr(c) for c in range(0xC0, 0x24F + 1)]
)
"""The characters that continue a Latin word or number (the tokenizer's non-Han runs):
0-9, a-z, U+00C0-U+024F. A set, so that ``term_presence`` tests a character without a
function call (~155 tests a search at LoCoMo)."""


def learned_columns(
    cands: Sequence[Candidate],
    in_time: Callable[[MemoryItem], bool] | None,
    query: str,
    skip: frozenset[str] = frozenset(),
    gains: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The learned fusion's feature columns (:func:`jiyi.read.fusion.features`)."""
    asked = [t for t in asked_terms(query) if t not in skip]
    coverage = term_coverage(cands, asked, neighbours=False)
    return fusion.features(cands, query, coverage, in_time, skip, gains)


STATEMENT_POOL = 30
"""How many of a search's best candidates (by the fusion without it) have their best
statement read (:mod:`jiyi.read.statements`): a candidate further down does not reach the
results through it (replayed on the three sets: the same figures as every candidate,
docs/benchmarks.md, session 29), and each one read costs its statements' vectors."""


def statement_pool(cols: dict[str, np.ndarray], model_id: str, n: int) -> np.ndarray:
    """Positions of the ``n`` best candidates by the fused value of ``cols``."""
    s = fusion.fused(cols, fusion.weights_for(model_id))
    return np.argsort(-s, kind="stable")[:n]


@functools.lru_cache(maxsize=256)
def asked_terms(query: str) -> tuple[str, ...]:
    """:func:`jiyi.text.tokenize.query_terms` kept per query: a search asks for them three
    times (its keyword terms, the fusion's coverage and phrases, the versions step)."""
    return query_terms(query)


def term_presence(terms: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Which ``texts`` contain which query ``terms``: a bool matrix, texts x terms.

    ``terms`` are index terms (:func:`jiyi.text.tokenize.query_terms`). They are found by
    substring search rather than by tokenizing every text, which keeps a pool of a few
    hundred candidates well under a millisecond; on the LoCoMo and zh/en pools this agrees
    with the tokenizer on ~99% of term/text pairs. A Chinese term matches anywhere; an
    English stem matches at the start of a word, minus a final e/i/y so that "drive" meets
    "driving" and "warranti" meets "warranty"; a stem under four letters matches only as a
    whole word (plural allowed), so "go" does not match "good".
    """
    _, joined, starts = fusion.pool_text(tuple(texts))  # the phrase evidence reads it too
    end = len(joined)
    found = np.zeros((len(starts), len(terms)), dtype=bool)
    for j, term in enumerate(terms):
        han = _HAN.match(term) is not None
        whole = not han and len(term) < 4
        needle = term[:-1] if not han and not whole and term[-1] in "eiy" else term
        rows: list[int] = []
        i = joined.find(needle)
        while i >= 0:
            k = bisect.bisect_right(starts, i) - 1
            ok = han or i == 0 or joined[i - 1] not in _WORD_CHARS
            if ok and whole:
                after = i + len(needle)
                after += 2 if joined.startswith("es", after) else 1 if joined.startswith("s", after) else 0
                ok = after >= end or joined[after] not in _WORD_CHARS
            if ok:
                rows.append(k)
                # One match per text is enough: go on at the next text.
                i = joined.find(needle, starts[k + 1]) if k + 1 < len(starts) else -1
            else:
                i = joined.find(needle, i + 1)
        found[rows, j] = True
    return found


def term_coverage(cands: Sequence[Candidate], terms: Sequence[str], neighbours: bool = True) -> np.ndarray:
    """IDF-weighted share of ``terms`` found in each candidate (and, with ``neighbours``,
    in its thread neighbours).

    IDF is taken over the candidates themselves (the search's pool), so a term that most
    of them contain counts little and a term none contains counts most.
    """
    n = len(cands)
    if n == 0 or not terms:
        return np.zeros(n)
    present = term_presence(terms, [c.item.content for c in cands])
    idf = pool_idf(present)
    seen = present.copy()
    if neighbours:
        for idx in neighbour_index(cands):
            seen |= np.where(idx[:, None] >= 0, present[np.maximum(idx, 0)], False)
    return np.asarray(seen @ idf / idf.sum(), dtype=np.float64)


def pool_idf(present: np.ndarray) -> np.ndarray:
    """Each term's IDF over a pool, from its texts x terms presence matrix
    (:func:`term_presence`): a term most texts hold counts little."""
    n = present.shape[0]
    df = present.sum(axis=0)
    return np.asarray(np.log1p((n - df + 0.5) / (df + 0.5)), dtype=np.float64)


def relevances(
    cands: Sequence[Candidate],
    terms: Sequence[str],
    in_time: Callable[[MemoryItem], bool] | None,
    model_id: str = "",
) -> dict[str, np.ndarray]:
    """Each candidate's relevance to the query (0..1) and its parts, as columns in
    candidate order (arrays, since a search reads them for a few hits out of hundreds).

    Keys: ``relevance``, ``relevance.semantic`` (cosine, or a neighbour's share of its
    cosine), ``relevance.coverage`` (:func:`term_coverage`) and ``relevance.time`` (1 when
    the item lies inside a time the query names; ``in_time`` None: the query names none).
    ``terms`` are the query's index terms. The curve is fitted on the default embedder's
    cosines; ``model_id``'s are read on that scale first (:func:`jiyi.embed.scale.to_default_scale`).
    """
    cos, _, cos_n, _ = fusion.evidence(cands)
    cos, cos_n = to_default_scale(cos, model_id), to_default_scale(cos_n, model_id)
    semantic = np.maximum(cos, RELEVANCE_NEIGHBOUR * cos_n)
    coverage = term_coverage(cands, terms)
    timely = np.array([1.0 if in_time is not None and in_time(c.item) else 0.0 for c in cands])
    logit = RELEVANCE_SLOPE * (
        semantic + RELEVANCE_COVERAGE * coverage + RELEVANCE_TIME * timely - RELEVANCE_CENTRE
    )
    return {
        "relevance": 1.0 / (1.0 + np.exp(-logit)),
        "relevance.semantic": semantic,
        "relevance.coverage": coverage,
        "relevance.time": timely,
    }


def _recency(items: Sequence[MemoryItem], now: datetime, days: float) -> np.ndarray:
    """``exp(-days since last use / days)`` of each item (1 with ``days`` 0)."""
    out = []
    for item in items:
        last = item.last_used_at or item.updated_at
        age = max(0.0, (now - last).total_seconds() / 86400.0)
        out.append(math.exp(-age / days) if days > 0 else 1.0)
    return np.array(out, dtype=np.float64)


def seed_contributions(
    items: Sequence[MemoryItem], similarity: np.ndarray, cfg: RankConfig, now: datetime
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The seed formula's contributions of every item, as columns (each item's sum to its
    score), and which items have the ``superseded`` one (None: no item has)."""
    if cfg.formula == "seed002":
        parts = {
            "similarity": similarity * cfg.w2_similarity,
            "decay": _recency(items, now, cfg.decay_days) * cfg.w2_decay,
            "importance": np.array([i.importance for i in items], dtype=np.float64) * cfg.w2_importance,
        }
    else:
        parts = {
            "similarity": similarity * cfg.w_similarity,
            "confidence": np.array([i.confidence for i in items], dtype=np.float64) * cfg.w_confidence,
            "scope": np.array([cfg.scope_priority.get(i.scope, 0.0) for i in items], dtype=np.float64)
            * cfg.w_scope,
        }
    if cfg.importance_boost:
        parts["importance_boost"] = cfg.importance_boost * np.array(
            [i.importance for i in items], dtype=np.float64
        )
    if cfg.recency_boost:
        parts["recency_boost"] = cfg.recency_boost * _recency(items, now, cfg.recency_days)
    retired = np.array(
        [i.status == Status.SUPERSEDED and (i.valid_to is None or i.valid_to <= now) for i in items],
        dtype=bool,
    )
    if not retired.any():
        return parts, None
    # Only the match is discounted: an old value stays findable when asked for. (At a
    # time it was still true, ``as_of``, it is not discounted.)
    parts["superseded"] = -parts["similarity"] * (1.0 - cfg.superseded_factor)
    return parts, retired


def score_candidates(
    cands: Sequence[Candidate],
    cfg: RankConfig,
    now: datetime,
    in_time: Callable[[MemoryItem], bool] | None,
    query: str = "",
    model_id: str = "",
    skip: frozenset[str] = frozenset(),
    replaced: Mapping[str, tuple[str, ...]] | None = None,
    asking: bool = False,
    gains: np.ndarray | None = None,
    columns: dict[str, np.ndarray] | None = None,
    about_assistant: bool = False,
) -> list[Scored]:
    """Score every candidate, best first, replacements above what they replaced.
    ``in_time`` None: the query names no time; ``model_id``: the embedder's; ``skip``:
    query terms that are no keyword (see :func:`similarities`); ``replaced``: per
    candidate's id, the texts of what it superseded (see :func:`newer_versions_first`);
    ``asking``: see :func:`similarities`; ``gains``: each candidate's best statement above
    its own cosine (:mod:`jiyi.read.statements`; None: not read); ``columns``: the learned
    fusion's features when made already (:func:`learned_columns`, without ``gains``);
    ``about_assistant``: the query asks what the assistant said (its turns keep their whole
    match, :attr:`RankConfig.assistant_factor`)."""
    if not cands:
        return []
    similarity, columns = similarities(cands, cfg, in_time, query, model_id, skip, asking, gains, columns)
    parts, retired = seed_contributions([c.item for c in cands], similarity, cfg, now)
    shown_where = {} if retired is None else {"contribution.superseded": retired}
    assistant = _assistant_turns(cands, cfg, about_assistant)
    if assistant is not None:
        parts["assistant"] = np.where(assistant, -parts["similarity"] * (1.0 - cfg.assistant_factor), 0.0)
        shown_where["contribution.assistant"] = assistant
    # Summed in the contributions' order (the discount last), as the breakdown lists them.
    score = functools.reduce(np.add, [v for name, v in parts.items() if name != "superseded"])
    if retired is not None:
        score = score + np.where(retired, parts["superseded"], 0.0)
    table = Breakdowns({**columns, **{f"contribution.{name}": v for name, v in parts.items()}}, shown_where)
    scored = [
        Scored(cand, total, sim, None, table, i)
        for i, (cand, total, sim) in enumerate(zip(cands, score.tolist(), similarity.tolist(), strict=True))
    ]
    replacements_first(scored)
    scored.sort(key=lambda s: -s.score)
    newer_versions_first(scored, query=query, model_id=model_id, replaced=replaced, in_time=in_time)
    scored.sort(key=lambda s: -s.score)
    if asked_fact_first(scored, query):
        scored.sort(key=lambda s: -s.score)
    return scored


def _assistant_turns(cands: Sequence[Candidate], cfg: RankConfig, about_assistant: bool) -> np.ndarray | None:
    """Which candidates the assistant said, when their match is discounted
    (:attr:`RankConfig.assistant_factor`): not when the query asks what the assistant said
    (``about_assistant``, :func:`jiyi.text.answers.about_the_assistant`). None when none is."""
    if cfg.assistant_factor >= 1.0 or about_assistant:
        return None
    said = np.array([c.item.source == Source.AI for c in cands], dtype=bool)
    return said if said.any() else None


def replacements_first(scored: list[Scored]) -> None:
    """An item that supersedes (or, newer, contradicts) another ranks above it: the older
    one's score drops just below, the drop shown as ``contribution.replaced``."""
    by_id = {s.candidate.item.id: s for s in scored}
    for s in scored:
        item = s.candidate.item
        for rel in item.relations:
            other = by_id.get(rel.target_id)
            if other is None:
                continue
            if rel.type == RelationType.SUPERSEDES:
                newer, older = s, other
            elif rel.type == RelationType.SUPERSEDED_BY:
                newer, older = other, s
            elif rel.type == RelationType.CONTRADICTS:
                newer_first = item.updated_at >= other.candidate.item.updated_at
                newer, older = (s, other) if newer_first else (other, s)
            else:
                continue
            _place_below(older, newer, "contribution.replaced")


def newer_versions_first(
    scored: list[Scored],
    cfg: ReconcileConfig | None = None,
    query: str = "",
    model_id: str = "",
    replaced: Mapping[str, tuple[str, ...]] | None = None,
    in_time: Callable[[MemoryItem], bool] | None = None,
) -> None:
    """Among the best few (``scored`` best first), a newer version of a statement that
    was never reconciled with the older one (:mod:`jiyi.read.versions`) ranks just above
    it: the older drops below it (``contribution.newer_version``, ``.later_statement``),
    or, when a later turn says in one of its sentences that what the query asks about
    changed, the newer rises above the older (``contribution.said_change``). The cosine
    bars of both tests are moved onto the scale of ``model_id``, whose vectors the
    candidates carry (``cfg``: the default :class:`ReconcileConfig`'s, moved). An earlier
    episode that quotes what a statement retired (``replaced``: per id, the texts of what
    it superseded at write time) goes below that statement. ``in_time``: the query names a
    time, and a version said in it stays above a later one said outside it ("where did I go
    kayaking last summer?" asks for what was true then)."""
    cfg = cfg or _reconcile_on_scale(model_id)
    bar = restatement_bar(model_id)
    topic_bar = on_scale(TOPIC_COSINE, model_id)
    top = scored[:VERSIONS_TOP]
    asked = frozenset(asked_terms(query))
    number = asked_kind(query) == "number"
    changed: list[tuple[Scored, Scored, bool]] = []  # (older, newer, the milder move)
    for i, older in enumerate(top):
        for newer in top[i + 1 :]:
            # Cheapest first: most pairs are another user's or in the wrong order.
            if older.score < newer.score or not may_follow(newer.candidate, older.candidate):
                continue
            if in_time is not None and in_time(older.candidate.item) and not in_time(newer.candidate.item):
                continue
            if is_newer_version(newer.candidate, older.candidate, cfg):
                _place_below(older, newer, "contribution.newer_version")
                changed.append((older, newer, False))
            elif is_later_restatement(newer.candidate, older.candidate, bar):
                _place_below(older, newer, "contribution.later_statement")
                changed.append((older, newer, False))
            elif is_replaced_in_summary(newer.candidate, older.candidate):
                _place_below(older, newer, "contribution.replaced_in_summary")
            elif asked and is_said_change(newer.candidate, older.candidate, asked):
                # A looser test, so the milder move: the newer rises just above the older,
                # which keeps its place (a question about the past still finds it).
                _place_above(newer, older, "contribution.said_change")
                changed.append((older, newer, True))
            elif (
                asked
                and newer.score >= older.score - LATER_ON_TOPIC_MARGIN
                and is_later_on_topic(newer.candidate, older.candidate, asked, topic_bar, number)
            ):
                _place_above(newer, older, "contribution.later_on_topic")
                changed.append((older, newer, True))
    if replaced:
        _episodes_below_replacements(top, replaced)
    # An earlier episode that quotes a statement found older than another goes with it.
    for older, newer, mild in changed:
        for episode in top:
            if episode.score >= newer.score and quotes_older(
                episode.candidate, older.candidate, newer.candidate
            ):
                if mild:
                    _place_above(newer, episode, "contribution.said_change")
                else:
                    _place_below(episode, newer, "contribution.replaced_in_summary")


@functools.lru_cache(maxsize=16)
def _reconcile_on_scale(model_id: str) -> ReconcileConfig:
    """The default :class:`ReconcileConfig` on the scale of ``model_id`` (frozen; made once
    per embedder rather than once per search)."""
    return config_on_scale(ReconcileConfig(), model_id)


def asked_fact_first(scored: list[Scored], query: str) -> bool:
    """When ``query`` asks for one of the user's own keyed facts (:func:`asked_key`: "Where
    do I live?" -> ``location``), that fact ranks above the statements about another person
    among the best few ("My sister lives in Berlin"), their drop shown as
    ``contribution.about_another``. Whether anything moved."""
    key = asked_key(query)
    if key is None:
        return False
    top = scored[:VERSIONS_TOP]
    moved = False
    for fact in top:
        if not answers(fact.candidate, key) or _VERSIONED & fact.breakdown.keys():
            continue  # a fact a later statement changed stays below it
        for other in top:
            if (
                other is not fact
                and other.score >= fact.score
                # "张总调去深圳了": a change about another person that the versions step read
                and not _VERSIONED & other.breakdown.keys()
                and about_another(fact.candidate, other.candidate)
            ):
                _place_below(other, fact, "contribution.about_another")
                moved = True
    return moved


_VERSIONED = frozenset(
    {
        "contribution.newer_version",
        "contribution.later_statement",
        "contribution.said_change",
        "contribution.later_on_topic",
        "contribution.replaced",
        "contribution.replaced_in_summary",
    }
)
"""The breakdown entries of :func:`newer_versions_first` and :func:`replacements_first`."""


def _episodes_below_replacements(top: list[Scored], replaced: Mapping[str, tuple[str, ...]]) -> None:
    """An earlier episode quoting a statement that one of ``top`` superseded at write time
    ranks below it: the episode keeps what was said then, the statement what is true now."""
    for newer in top:
        for said in replaced.get(newer.candidate.item.id, ()):
            for episode in top:
                if episode.score >= newer.score and quotes_retired(episode.candidate, said, newer.candidate):
                    _place_below(episode, newer, "contribution.replaced_in_summary")


def _place_above(newer: Scored, older: Scored, why: str) -> None:
    """Raise ``newer``'s score just above ``older``'s (if it is not already), shown as ``why``."""
    if newer.score <= older.score:
        lift = older.score - newer.score + 1e-6
        newer.score += lift
        newer.breakdown[why] = newer.breakdown.get(why, 0.0) + lift


def _place_below(older: Scored, newer: Scored, why: str) -> None:
    """Drop ``older``'s score just below ``newer``'s (if it is not already), shown as ``why``."""
    if older.score >= newer.score:
        penalty = older.score - newer.score + 1e-6
        older.score -= penalty
        older.breakdown[why] = older.breakdown.get(why, 0.0) - penalty


def mmr_select(
    scores: list[float],
    vectors: list[np.ndarray | None],
    k: int,
    lam: float,
    floor: float,
    groups: Sequence[str | None] | None = None,
    group_penalty: float = 0.0,
) -> list[int]:
    """Maximal marginal relevance: indices of up to ``k`` items, relevant and not alike.

    Redundancy is the cosine to the closest chosen item above ``floor``, rescaled to
    0..1, so only near-duplicates are pushed down (``floor=0`` gives classic MMR).
    Items without a vector count as unlike everything. With ``groups`` (a thread per
    item, None for none), each item already chosen from an item's thread lowers its
    value by ``group_penalty``, so one conversation cannot fill the top k with its
    consecutive turns when other threads hold evidence too.
    """
    n = len(scores)
    if n == 0:
        return []
    dims = {v.shape[0] for v in vectors if v is not None}
    dim = dims.pop() if len(dims) == 1 else 0
    matrix = np.zeros((n, max(dim, 1)), dtype=np.float32)
    if dim:
        present = [i for i, v in enumerate(vectors) if v is not None]
        matrix[present] = np.stack([v for v in vectors if v is not None])
    relevance = lam * np.asarray(scores, dtype=np.float64)
    redundancy = np.zeros(n)
    available = np.ones(n, dtype=bool)
    group_of = _group_index(groups, n)
    taken = np.zeros(int(group_of.max()) + 2 if n else 1)
    chosen: list[int] = []
    for _ in range(min(k, n)):
        crowd = group_penalty * taken[group_of] if group_penalty else 0.0
        value = np.where(available, relevance - (1.0 - lam) * redundancy - crowd, -np.inf)
        best = int(np.argmax(value))
        chosen.append(best)
        available[best] = False
        # One row of cosines per pick (k matrix-vector products), not the whole n x n
        # matrix: that product ran on every BLAS thread and stalled on a busy machine.
        sims = np.clip((matrix @ matrix[best] - floor) / max(1e-9, 1.0 - floor), 0.0, None)
        redundancy = np.maximum(redundancy, sims)
        if group_of[best] >= 0:
            taken[group_of[best]] += 1
    return chosen


def _group_index(groups: Sequence[str | None] | None, n: int) -> np.ndarray:
    """Each item's group as a small integer; -1 (whose slot stays 0) for no group."""
    if groups is None:
        return np.full(n, -1, dtype=np.int64)
    codes: dict[str, int] = {}
    return np.array([-1 if g is None else codes.setdefault(g, len(codes)) for g in groups], dtype=np.int64)
