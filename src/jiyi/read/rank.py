"""Ranking: fuse vector and keyword evidence, apply the seed formula, diversify with MMR.

Pure functions over :class:`~jiyi.store.base.Candidate` values; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from jiyi.config import RankConfig
from jiyi.model import MemoryItem


@dataclass(frozen=True)
class SearchHit:
    """One search result: the item, its final score and how the score was made."""

    item: MemoryItem
    score: float
    similarity: float
    breakdown: dict[str, float] = field(default_factory=dict)
    """Each signal's contribution to ``score`` (they sum to it) plus the raw evidence."""

    def to_json_dict(self) -> dict[str, object]:
        data = self.item.to_json_dict()
        data["score"] = round(self.score, 6)
        data["similarity"] = round(self.similarity, 6)
        data["breakdown"] = {k: round(v, 6) for k, v in self.breakdown.items()}
        return data


def keyword_evidence(score: float | None, saturation: float) -> float:
    """Map an unbounded BM25 score into 0..1 (half way at ``saturation``)."""
    if not score or score <= 0:
        return 0.0
    return score / (score + saturation)


def fused_similarity(
    cosine: float | None, keyword: float | None, cfg: RankConfig
) -> tuple[float, float, float]:
    """(similarity, cosine part, keyword part)."""
    cos = max(0.0, cosine or 0.0)
    kw = keyword_evidence(keyword, cfg.keyword_saturation)
    cos_part = (1.0 - cfg.keyword_weight) * cos
    kw_part = cfg.keyword_weight * kw
    return cos_part + kw_part, cos_part, kw_part


def _decay(item: MemoryItem, now: datetime, days: float) -> float:
    last = item.last_used_at or item.updated_at
    age_days = max(0.0, (now - last).total_seconds() / 86400.0)
    return math.exp(-age_days / days) if days > 0 else 1.0


def score_item(
    item: MemoryItem, cosine: float | None, keyword: float | None, cfg: RankConfig, now: datetime
) -> tuple[float, float, dict[str, float]]:
    """(final score, similarity, breakdown) for one candidate."""
    sim, cos_part, kw_part = fused_similarity(cosine, keyword, cfg)
    breakdown: dict[str, float] = {
        "cosine": cosine if cosine is not None else 0.0,
        "keyword_bm25": keyword if keyword is not None else 0.0,
        "similarity.vector": cos_part,
        "similarity.keyword": kw_part,
    }
    if cfg.formula == "seed002":
        decay = _decay(item, now, cfg.decay_days)
        parts = {
            "similarity": sim * cfg.w2_similarity,
            "decay": decay * cfg.w2_decay,
            "importance": item.importance * cfg.w2_importance,
        }
    else:
        priority = cfg.scope_priority.get(item.scope, 0.0)
        parts = {
            "similarity": sim * cfg.w_similarity,
            "confidence": item.confidence * cfg.w_confidence,
            "scope": priority * cfg.w_scope,
        }
    breakdown.update({f"contribution.{k}": v for k, v in parts.items()})
    return sum(parts.values()), sim, breakdown


def mmr_select(scores: list[float], vectors: list[np.ndarray | None], k: int, lam: float) -> list[int]:
    """Maximal marginal relevance: indices of up to ``k`` items, relevant and not alike.

    Items without a vector count as unlike everything.
    """
    remaining = list(range(len(scores)))
    chosen: list[int] = []
    while remaining and len(chosen) < k:
        best, best_value = remaining[0], -math.inf
        for idx in remaining:
            vec = vectors[idx]
            redundancy = 0.0
            if vec is not None:
                for c in chosen:
                    other = vectors[c]
                    if other is not None:
                        redundancy = max(redundancy, float(np.dot(vec, other)))
            value = lam * scores[idx] - (1.0 - lam) * redundancy
            if value > best_value:
                best, best_value = idx, value
        chosen.append(best)
        remaining.remove(best)
    return chosen
