"""Grouping memories by embedding similarity, for compression (pure numpy, deterministic).

Two steps, both independent of the order items arrive in (ties are broken by the
caller's ordering, which is itself deterministic):

* :func:`near_duplicate_sets` — *leader* clustering at a high cosine: items are visited
  best-supported first and each joins the most similar leader at or above the threshold,
  or becomes a leader. Every member is close to its leader, so there is no chaining
  (A≈B, B≈C but A≠C never lands in one set through B).
* :func:`agglomerate` — average-linkage agglomerative clustering: the two most similar
  clusters (mean pairwise cosine) are merged while that similarity is at least
  ``threshold``, or until ``n_clusters`` remain; a ``budget`` caps each cluster's total
  weight (tokens), so no cluster grows past what its core items can hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["agglomerate", "cosine_matrix", "near_duplicate_sets", "unit_rows"]

Matrix = npt.NDArray[np.float64]


def unit_rows(vectors: npt.ArrayLike) -> Matrix:
    """Rows scaled to length 1 (zero rows stay zero), as float64 for stable sums."""
    m = np.asarray(vectors, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: Matrix = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    return out


def cosine_matrix(vectors: npt.ArrayLike) -> Matrix:
    """Pairwise cosine similarities of the rows of ``vectors``."""
    m = unit_rows(vectors)
    sim: Matrix = np.clip(m @ m.T, -1.0, 1.0)
    return sim


def near_duplicate_sets(sim: Matrix, threshold: float) -> list[list[int]]:
    """Leader clustering over indexes ``0..n-1``, visited in index order (best first).

    Returns sets of indexes, each starting with its leader, in order of their leaders.
    Index ``i`` joins the leader it is most similar to when that cosine is >= ``threshold``.
    """
    sets: list[list[int]] = []
    leaders: list[int] = []
    for i in range(sim.shape[0]):
        if leaders:
            scores = sim[i, leaders]
            best = int(np.argmax(scores))  # first maximum: the earlier (better) leader wins ties
            if scores[best] >= threshold:
                sets[best].append(i)
                continue
        leaders.append(i)
        sets.append([i])
    return sets


def agglomerate(
    sim: Matrix,
    *,
    threshold: float | None = None,
    n_clusters: int = 1,
    weights: Sequence[float] | None = None,
    budget: float | None = None,
) -> list[list[int]]:
    """Average-linkage clustering of indexes ``0..n-1`` given their cosine matrix.

    Merging stops when the best remaining pair of clusters is less similar than
    ``threshold`` (None: no floor), when ``n_clusters`` clusters remain, or when every
    remaining merge would push a cluster's summed ``weights`` past ``budget``.
    Clusters come back sorted by their smallest index, each sorted ascending.
    """
    n = sim.shape[0]
    if n == 0:
        return []
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    members: list[list[int]] = [[i] for i in range(n)]
    alive = np.ones(n, dtype=bool)
    size = np.ones(n)
    weight = w.copy()
    link = sim.astype(np.float64, copy=True)
    np.fill_diagonal(link, -np.inf)
    allowed = np.ones((n, n), dtype=bool)
    if budget is not None:
        allowed = (weight[:, None] + weight[None, :]) <= budget
    clusters = n
    while clusters > max(1, n_clusters):
        masked = np.where(allowed & alive[:, None] & alive[None, :], link, -np.inf)
        flat = int(np.argmax(masked))  # first maximum in row-major order: deterministic ties
        a, b = divmod(flat, n)
        best = masked[a, b]
        if not np.isfinite(best) or (threshold is not None and best < threshold):
            break
        a, b = min(a, b), max(a, b)
        # Lance-Williams update for average linkage: the new row is the size-weighted mean.
        merged = (size[a] * link[a] + size[b] * link[b]) / (size[a] + size[b])
        link[a, :] = merged
        link[:, a] = merged
        link[a, a] = -np.inf
        alive[b] = False
        link[b, :] = -np.inf
        link[:, b] = -np.inf
        size[a] += size[b]
        weight[a] += weight[b]
        members[a].extend(members[b])
        members[b] = []
        if budget is not None:
            row = (weight[a] + weight) <= budget
            allowed[a, :] = row
            allowed[:, a] = row
        clusters -= 1
    out = [sorted(m) for i, m in enumerate(members) if alive[i]]
    return sorted(out, key=lambda m: m[0])
