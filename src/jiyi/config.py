"""Typed configuration sections. Environment variables are read only by ``from_env``,
which the edges (CLI, server) call; the library itself takes keyword arguments.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal

from jiyi.errors import ConfigError, InvalidInput
from jiyi.model import Scope
from jiyi.text.pii import PiiKind


@dataclass(frozen=True)
class GateConfig:
    """The write gate (seed 000 defaults)."""

    min_confidence: float = 0.7
    """Items below this confidence are refused (``MEMORY_MIN_CONFIDENCE``)."""
    duplicate_threshold: float = 0.85
    """Cosine at or above which a new item reinforces an existing one in the same scope
    (``MEMORY_DUPLICATE_THRESHOLD``), on the default embedder's scale: an embedder whose
    cosines sit elsewhere gets it moved onto its own (:func:`jiyi.embed.scale.on_scale`;
    e5: 0.85 -> 0.966)."""
    max_extractions: int = 3
    """Automatic extraction runs allowed per session per window (``MEMORY_MAX_EXTRACTIONS``):
    one run is one extraction job (or one ``add(automatic=True)``), however many memories it
    finds. Past the limit a run keeps only what is never rate-limited: explicit requests
    (记住 / remember), safety facts (allergies, health) and corrections. Explicit saves
    are not limited."""
    extraction_window: timedelta = timedelta(hours=24)
    min_length: int = 5
    """Shortest content in characters, after trimming (``MEMORY_MIN_LENGTH``)."""
    max_length: int = 2000
    """Longest content in characters (``MEMORY_MAX_LENGTH``)."""
    reinforce_step: float = 0.05
    """Confidence added when a duplicate re-confirms an item (capped at 1.0)."""
    redact_pii: bool = True
    """Redact sensitive data (:mod:`jiyi.text.pii`) on every path that stores text: memories
    (content, raw, summary, structured, metadata, tags), history reasons, session messages,
    job payloads and results, checkpoints, episodes, documents, procedural records, profiles
    and imports (``MEMORY_REDACT_PII``: ``0``/``off`` turns it off, a comma list of kinds
    keeps only those). A person asking to keep a value ("记住我的手机号 ...") does not
    change it: the value is still redacted and the decision names the kind."""
    pii_kinds: frozenset[PiiKind] | None = None
    """Which kinds are redacted (None: every kind of :class:`~jiyi.text.pii.PiiKind`)."""
    tenant_pii: Mapping[str, bool | frozenset[PiiKind]] = field(default_factory=dict)
    """Per-tenant policy, overriding the two settings above for that tenant: ``False``
    stores its text as given, ``True`` redacts ``pii_kinds``, a set of kinds redacts
    exactly those (``MEMORY_REDACT_PII_TENANTS``, a JSON object:
    ``{"lab": false, "acme": ["email", "phone"]}``)."""
    skip_low_value: bool = True

    def __post_init__(self) -> None:
        if self.pii_kinds is not None:
            object.__setattr__(self, "pii_kinds", _kinds(self.pii_kinds, "pii_kinds"))
        tenants: dict[str, bool | frozenset[PiiKind]] = {}
        for tenant, policy in dict(self.tenant_pii).items():
            if not isinstance(tenant, str) or not tenant:
                raise ConfigError(f"tenant_pii: a tenant must be a non-empty string, got {tenant!r}")
            tenants[tenant] = (
                policy if isinstance(policy, bool) else _kinds(policy, f"tenant_pii[{tenant!r}]")
            )
        object.__setattr__(self, "tenant_pii", tenants)
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ConfigError(f"min_confidence must be within 0..1, got {self.min_confidence}")
        if not 0.0 < self.duplicate_threshold <= 1.0:
            raise ConfigError(f"duplicate_threshold must be within (0, 1], got {self.duplicate_threshold}")
        if self.max_extractions < 0:
            raise ConfigError(f"max_extractions must be >= 0, got {self.max_extractions}")
        if not 1 <= self.min_length <= self.max_length:
            raise ConfigError(
                f"need 1 <= min_length <= max_length, got min_length={self.min_length}, max_length={self.max_length}"
            )

    def redaction(self, tenant_id: str | None = None) -> frozenset[PiiKind]:
        """The kinds of sensitive data redacted for ``tenant_id`` (empty: none)."""
        policy: bool | frozenset[PiiKind] = self.redact_pii
        if tenant_id is not None and tenant_id in self.tenant_pii:
            policy = self.tenant_pii[tenant_id]
        if policy is False:
            return frozenset()
        if policy is True:
            return self.pii_kinds if self.pii_kinds is not None else ALL_PII_KINDS
        return policy

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GateConfig:
        """Defaults overridden by the seed's MEMORY_* environment variables."""
        env = os.environ if environ is None else environ
        names = {
            "MEMORY_MIN_CONFIDENCE": ("min_confidence", float),
            "MEMORY_DUPLICATE_THRESHOLD": ("duplicate_threshold", float),
            "MEMORY_MAX_EXTRACTIONS": ("max_extractions", int),
            "MEMORY_MIN_LENGTH": ("min_length", int),
            "MEMORY_MAX_LENGTH": ("max_length", int),
        }
        changes: dict[str, Any] = {}
        for var, (attr, kind) in names.items():
            raw = env.get(var)
            if raw is None or raw.strip() == "":
                continue
            try:
                changes[attr] = kind(raw)
            except ValueError:
                raise ConfigError(f"{var}={raw!r} is not a valid {kind.__name__}") from None
        raw = (env.get("MEMORY_REDACT_PII") or "").strip()
        if raw:
            switch = _SWITCH.get(raw.lower())
            if switch is None:
                changes["redact_pii"], changes["pii_kinds"] = (
                    True,
                    _kinds(raw.split(","), "MEMORY_REDACT_PII"),
                )
            else:
                changes["redact_pii"] = switch
        raw = (env.get("MEMORY_REDACT_PII_TENANTS") or "").strip()
        if raw:
            try:
                tenants = json.loads(raw)
            except ValueError:
                tenants = None
            if not isinstance(tenants, dict) or not all(
                isinstance(v, bool) or (isinstance(v, list) and all(isinstance(k, str) for k in v))
                for v in tenants.values()
            ):
                raise ConfigError(
                    "MEMORY_REDACT_PII_TENANTS must be a JSON object of tenant: true, false or a list "
                    'of kinds, e.g. {"lab": false, "acme": ["email", "phone"]}'
                )
            changes["tenant_pii"] = tenants
        return replace(cls(), **changes)


ALL_PII_KINDS: frozenset[PiiKind] = frozenset(PiiKind)
_SWITCH = {
    "1": True,
    "true": True,
    "on": True,
    "yes": True,
    "0": False,
    "false": False,
    "off": False,
    "no": False,
}


def _kinds(value: object, name: str) -> frozenset[PiiKind]:
    """A set of PII kinds from kinds or their names (``"email"``); unknown names are refused."""
    if isinstance(value, str) or not isinstance(value, Collection):
        raise ConfigError(f"{name} must be a collection of PII kinds, got {value!r}")
    try:
        return frozenset(PiiKind(str(k).strip().lower()) for k in value if str(k).strip())
    except ValueError:
        raise ConfigError(
            f"{name}: unknown PII kind in {sorted(map(str, value))}; choose from {[k.value for k in PiiKind]}"
        ) from None


DEFAULT_SCOPE_PRIORITY: dict[Scope, float] = {
    Scope.SESSION: 1.0,
    Scope.PROJECT: 0.8,
    Scope.AGENT: 0.7,  # not in the seeds: between project and user
    Scope.USER: 0.6,
}


@dataclass(frozen=True)
class RankConfig:
    """How search candidates are scored (see :mod:`jiyi.read.rank` for the formulas).

    ``formula="seed000"``: ``similarity*w_similarity + confidence*w_confidence + scope*w_scope``.
    ``formula="seed002"``: ``similarity*0.6 + decay*0.2 + importance*0.2`` where decay is
    ``exp(-days_since_last_use / decay_days)``.
    The similarity weights below were chosen on LoCoMo conversations 1-5 and checked on
    6-10 (docs/benchmarks.md).
    """

    formula: Literal["seed000", "seed002"] = "seed000"
    w_similarity: float = 0.5
    w_confidence: float = 0.3
    w_scope: float = 0.2
    w2_similarity: float = 0.6
    w2_decay: float = 0.2
    w2_importance: float = 0.2
    decay_days: float = 30.0
    scope_priority: Mapping[Scope, float] = field(default_factory=lambda: dict(DEFAULT_SCOPE_PRIORITY))
    fusion: Literal["learned", "fixed"] = "learned"
    """How the signals are fused into similarity (jiyi.read.rank): ``"learned"`` weights
    fitted on three benchmarks' development halves that adapt to the query and the store
    (jiyi.read.fusion), or ``"fixed"``, the earlier hand-tuned formula below
    (``keyword_weight`` ... ``similarity_scale`` and ``cross_language_fill`` apply to it only)."""
    statements: bool | None = None
    """Read each memory's best statement (jiyi.read.statements; learned fusion only): a
    memory of two or more sentences also has its statements embedded when it is written,
    into the embedding cache. On chat turns that costs about 40% of the ingest throughput
    (LoCoMo's turns: 580 -> 340 memories/s) for a third to a half point of recall
    (docs/benchmarks.md, session 32). ``None`` (default): with the default embedder only
    (the weights were fitted on its cosines; a hosted embedder would be sent about twice
    the text); ``True``: with any embedder whose weights count them; ``False``: never."""
    keyword_weight: float = 0.7
    """Share of the keyword (BM25) evidence in similarity; the rest is cosine. Tuned on
    LoCoMo; 0.5 does better on LongMemEval_S and across languages but moves the
    similarity scale that ``threshold`` and the relevance tests rely on (docs/benchmarks.md)."""
    keyword_saturation: float = 8.0
    """BM25 score at which the keyword evidence reaches half of its maximum."""
    context_vector: float = 0.7
    """Weight of the best neighbouring turn's cosine in an item's vector evidence."""
    context_keyword: float = 0.5
    """Weight of the best neighbouring turn's BM25 in an item's keyword evidence."""
    context_score: float = 0.35
    """Weight of the best neighbour's fused evidence in the similarity."""
    neighbours: int = 1
    """How many turns on each side of a candidate become candidates too."""
    time_weight: float = 0.2
    """Bonus for items that happened inside a time the query names ("in May 2023", "上周")."""
    similarity_scale: float = 0.25
    """Relevance at which similarity reaches 63% (``1 - exp(-relevance/scale)``)."""
    importance_boost: float = 0.0
    """Added to the score: ``importance_boost * importance``."""
    recency_boost: float = 0.0
    """Added to the score: ``recency_boost * exp(-days since last use / recency_days)``."""
    recency_days: float = 30.0
    superseded_factor: float = 0.5
    """A superseded item (shown only when asked for) keeps this share of its score."""
    assistant_factor: float = 0.6
    """The share of its match an assistant's turn keeps (``source`` ``ai``), unless the query
    asks what the assistant said or points back to the conversation
    (:func:`jiyi.text.answers.about_the_assistant`): a question about the user is answered by
    what the user said, not by the reply that echoed it (LongMemEval_S dev through the
    pipeline: s_all@5 0.9489 -> 0.9532, t_all@10 0.8381 -> 0.8571, both halves; 1.0: no
    discount; docs/benchmarks.md, session 36)."""
    threshold: float | None = None
    """Similarity floor: candidates below it are dropped (None: keep all). With the learned
    fusion similarity is relative to each search (0.5 at its 10th best candidate), so this
    trims weak matches within a search; ``min_relevance`` is the cut that can answer
    "nothing relevant"."""
    mmr: bool = True
    mmr_lambda: float = 0.7
    mmr_redundancy_floor: float = 0.9
    """Cosine between two results below which MMR sees no redundancy (0 = classic MMR), on the
    default embedder's scale: for an embedder with a scale of its own it is moved onto
    that one's (:func:`jiyi.embed.scale.on_scale`; e5: 0.9 -> 0.98)."""
    thread_diversity: float = 0.0
    """What each result already taken from a thread costs the next one from it (in score
    units), so neighbour evidence cannot fill the top k with one session's turns. Off by
    default: 0.005-0.03 lowered turn recall on LongMemEval_S and LoCoMo (docs/benchmarks.md)."""
    cross_language_fill: float = 0.0
    """Keywords cannot match across Chinese and English: for a candidate in the other
    language the keyword slot is filled with this share of its vector evidence above the
    pool's median (see jiyi.read.rank). Off by default: on the Chinese/English set 0.25
    lifts cross-lingual recall@5 from 0.82 to 0.89 but lets more negatives through the
    similarity floor, and higher values cost same-language paraphrases (docs/benchmarks.md)."""
    pool_factor: int = 3
    """Candidates taken from each index: ``pool_factor * limit`` (at least ``min_pool``)."""
    min_pool: int = 30

    def __post_init__(self) -> None:
        unit = (
            "w_similarity",
            "w_confidence",
            "w_scope",
            "w2_similarity",
            "w2_decay",
            "w2_importance",
            "keyword_weight",
            "mmr_lambda",
            "mmr_redundancy_floor",
            "superseded_factor",
            "assistant_factor",
        )
        for name in unit:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be within 0..1, got {value}")
        for name in (
            "context_vector",
            "context_keyword",
            "context_score",
            "time_weight",
            "thread_diversity",
            "cross_language_fill",
            "importance_boost",
            "recency_boost",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"threshold must be within 0..1, got {self.threshold}")
        if self.formula not in ("seed000", "seed002"):
            raise ConfigError(f"formula must be 'seed000' or 'seed002', got {self.formula!r}")
        if self.fusion not in ("learned", "fixed"):
            raise ConfigError(f"fusion must be 'learned' or 'fixed', got {self.fusion!r}")
        if self.statements is not None and not isinstance(self.statements, bool):
            raise ConfigError(f"statements must be true, false or unset, got {self.statements!r}")
        if self.pool_factor < 1 or self.min_pool < 1 or self.neighbours < 0:
            raise ConfigError("pool_factor and min_pool must be >= 1 and neighbours >= 0")
        if min(self.keyword_saturation, self.decay_days, self.recency_days, self.similarity_scale) <= 0:
            raise ConfigError("keyword_saturation, decay_days, recency_days and similarity_scale must be > 0")


@dataclass(frozen=True)
class SessionConfig:
    """Short-term memory and the conversation pipeline."""

    max_turns: int = 10
    """Compact when a session holds more user/assistant turns than this."""
    max_tokens: int = 8000
    """... or more tokens than this."""
    keep_recent: int = 4
    """Turns kept verbatim when compacting."""
    extract: bool = True
    """Queue extraction of new user turns (rules offline, the LLM when configured)."""
    keep_turns: bool = True
    """Keep every user and assistant turn as a searchable resource (see
    :mod:`jiyi.write.resources`), so what was said is findable even when no rule extracted
    it (seed 000's resource layer). ``list()`` and ``stats()`` leave the turns out unless
    asked (``include_turns=True``); how long they are kept is the lifecycle policy's
    ``retention_days["turns"]``. Off: only what extraction finds is kept."""
    episodes: bool = True
    """Write an episode (summary, topics, actions, outcomes) on compaction and session end."""
    similar_k: int = 5
    """Stored items compared with each extracted candidate during reconciliation."""
    chunk_tokens: int = 2000
    chunk_overlap: int = 200
    job_attempts: int = 5
    job_backoff_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.keep_recent < 0 or self.keep_recent >= self.max_turns:
            raise InvalidInput("need max_turns >= 1 and 0 <= keep_recent < max_turns")
        if self.chunk_overlap >= self.chunk_tokens:
            raise InvalidInput("chunk_overlap must be smaller than chunk_tokens")
