"""Sentence-level evidence, replayed on a ``bench/fusion.py capture`` (docs/benchmarks.md,
session 29): does a memory's best sentence say more than the whole memory?

A long memory often says what is asked in one sentence among several, so its whole-text
cosine is diluted. The search has no per-sentence vectors; this replay computes, for every
candidate of every captured pool (its text is in the capture since session 29):

* ``scover``: the best sentence's IDF-weighted share of the query's terms (as the
  search's ``cover``, per sentence; no vectors needed);
* ``scos`` / ``sstmt``: the best sentence's cosine to the query, over every sentence /
  over the sentences that do not only ask (``jiyi.text.answers.only_asks``), never below
  the whole text's cosine;
* ``sgain_all`` / ``sgain_st``: how much those exceed the whole text's cosine.

Since session 32 the search reads ``sgain_st`` itself (``sgain`` in ``jiyi.read.fusion``,
:mod:`jiyi.read.statements`), so a capture made since holds it among the columns in code.

Each is added to the fusion as an adapted evidence (four sides, as ``fusion.EVIDENCE``)
and fitted on the development halves, either with every weight (``--refit``, compared with
the same refit without it) or with the weights in code held and only its own four fitted
(the default). The figures of both halves are printed as ``bench/fusion.py fit`` prints
them.

    python bench/fusion.py capture pools.pkl --cache lme.npz --locomo-cache loc.npz
    python bench/sentence_evidence.py pools.pkl --evidence sgain_st --columns cols.pkl
    python bench/sentence_evidence.py pools.pkl --evidence scover scos --refit --columns cols.pkl

``--columns`` keeps the computed columns (embedding the ~130k sentences of a capture takes
~10 minutes here), so later runs only fit.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import fusion as fusion_bench
from jiyi.embed.base import resolve_embedder
from jiyi.read import fusion
from jiyi.read.rank import pool_idf, term_presence
from jiyi.text.answers import only_asks
from jiyi.text.sentences import split_sentences
from jiyi.text.tokenize import query_terms
from parts import CachingEmbedder

EVIDENCE = ("scover", "scos", "sstmt", "sgain_all", "sgain_st")
SETS = ("lme", "locomo", "zhen")
HELD = ("answer", "reply", "continues", "speaker")
"""Weights chosen apart from the fit (fusion.WEIGHTS' comments): held at their value in code."""


def sentence_columns(pool: dict[str, Any], embedder: CachingEmbedder) -> dict[str, np.ndarray]:
    """The sentence evidence of one captured pool's candidates."""
    texts, query = pool["texts"], pool["query"]
    n = len(texts)
    cos = pool["cols"]["cos"].astype(np.float64)
    sentences = [split_sentences(t) or [t] for t in texts]
    scover = np.zeros(n)
    terms = query_terms(query)
    if terms and n:
        idf = pool_idf(term_presence(terms, texts))
        flat = [s for ss in sentences for s in ss]
        share = term_presence(terms, flat) @ idf / idf.sum()
        start = 0
        for i, ss in enumerate(sentences):
            scover[i] = share[start : start + len(ss)].max()
            start += len(ss)
    q = np.asarray(embedder.embed_query([query])[0], dtype=np.float64)  # embedders give unit rows
    scos, sstmt = cos.copy(), cos.copy()
    for i, ss in enumerate(sentences):
        if len(ss) > 1:
            sims = np.asarray(embedder.embed(ss), dtype=np.float64) @ q
            scos[i] = max(cos[i], float(sims.max()))
            stated = [float(c) for c, s in zip(sims, ss, strict=True) if not only_asks(s)]
            sstmt[i] = max(cos[i], *stated) if stated else cos[i]
    return {
        "scover": scover,
        "scos": scos,
        "sstmt": sstmt,
        "sgain_all": np.maximum(scos - cos, 0.0),
        "sgain_st": np.maximum(sstmt - cos, 0.0),
    }


def all_columns(data: dict[str, Any], embedder: CachingEmbedder) -> dict[str, list[dict[str, np.ndarray]]]:
    out: dict[str, list[dict[str, np.ndarray]]] = {}
    for name in SETS:
        if name not in data:
            continue
        pools = data[name]["pools"]
        if "texts" not in pools[0]:
            raise SystemExit("this capture has no candidate texts: capture again with bench/fusion.py")
        wanted = list(
            dict.fromkeys(
                s for p in pools for t in p["texts"] if len(ss := split_sentences(t)) > 1 for s in ss
            )
        )
        print(f"{name}: {len(pools)} pools, {len(wanted)} sentences to embed", file=sys.stderr, flush=True)
        for i in range(0, len(wanted), 2000):
            embedder.embed(wanted[i : i + 2000])
        out[name] = [sentence_columns(p, embedder) for p in pools]
    return out


def add_evidence(data: dict[str, Any], columns: dict[str, Any], names: Sequence[str]) -> None:
    """Add ``names`` as adapted evidence: their columns spread over the four sides exactly
    as ``fusion.features`` spreads the others (the pool's length and agreement)."""
    for name, per_pool in columns.items():
        for pool, cols in zip(data[name]["pools"], per_pool, strict=True):
            c = pool["cols"]
            shares = fusion.side_shares(
                pool["texts"], c["cos"].astype(np.float64), c["bm25"].astype(np.float64)
            )
            for e in names:
                for side, share in shares.items():
                    c[f"{e}*{side}"] = (cols[e] * share).astype(np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pools", type=Path, help="a bench/fusion.py capture (raw mode, with texts)")
    p.add_argument("--evidence", nargs="+", choices=EVIDENCE, default=["sgain_st"])
    p.add_argument("--refit", action="store_true", help="fit every weight (else: only the new ones)")
    p.add_argument("--columns", type=Path, default=None, help="keep / reuse the computed columns (.pkl)")
    p.add_argument("--epochs", type=int, default=1000)
    args = p.parse_args(argv)
    with open(args.pools, "rb") as fh:
        data = pickle.load(fh)
    if args.columns is not None and args.columns.exists():
        with open(args.columns, "rb") as fh:
            columns = pickle.load(fh)
    else:
        columns = all_columns(data, CachingEmbedder(resolve_embedder(data.get("embedder") or None)))
        if args.columns is not None:
            with open(args.columns, "wb") as fh:
                pickle.dump(columns, fh)
    present = [name for name in SETS if name in data]
    old = fusion.FEATURES
    current = fusion.weights_for(str(data.get("embedder", "")))
    if args.refit:  # the same refit without the new evidence, for comparison
        train = fusion_bench.training(data, True, present)
        held = {name: float(current[old.index(name)]) for name in HELD}
        base = fusion_bench.fit_weights(train, args.epochs, fixed=held)
    add_evidence(data, columns, args.evidence)
    fusion.EVIDENCE = (*fusion.EVIDENCE, *args.evidence)
    fusion.FEATURES = (*(f"{e}*{s}" for e in fusion.EVIDENCE for s in fusion.SIDES), *fusion.PLAIN)
    code = np.array([current[old.index(f)] if f in old else 0.0 for f in fusion.FEATURES])
    kept = HELD if args.refit else old
    fixed = {name: float(code[fusion.FEATURES.index(name)]) for name in kept}
    train = fusion_bench.training(data, True, present)
    w = fusion_bench.fit_weights(train, args.epochs, fixed=fixed, start=None if args.refit else code)
    for e in args.evidence:
        print(e, {s: round(float(w[fusion.FEATURES.index(f"{e}*{s}")]), 4) for s in fusion.SIDES})
    for name in present:
        print(f"{name} (LME: session recall_all@5 / turn recall_all@10; LoCoMo: recall@10; zh/en: recall@5)")
        print(f"  in code        {fusion_bench.figures(name, data, code)}")
        if args.refit:
            ext = np.array([base[old.index(f)] if f in old else 0.0 for f in fusion.FEATURES])
            print(f"  refit without  {fusion_bench.figures(name, data, ext)}")
        print(f"  with {'+'.join(args.evidence):9s} {fusion_bench.figures(name, data, w)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
