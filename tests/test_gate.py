"""The write gate's pure checks and configuration."""

from datetime import timedelta

import pytest

from jiyi.config import GateConfig
from jiyi.errors import ConfigError
from jiyi.write.gate import GateDecision, Screened, duplicate_decision, rate_limit_decision, screen

CFG = GateConfig()


def rejected(result: Screened | GateDecision) -> str:
    assert isinstance(result, GateDecision)
    assert result.action == "reject"
    return " ".join(result.reasons)


def test_length_bounds() -> None:
    assert "too short" in rejected(screen("abcd", 0.9, CFG))
    assert "too long" in rejected(screen("x" * 2001, 0.9, CFG))
    assert isinstance(screen("abcde", 0.9, CFG), Screened)
    # A wide character counts twice: a four-character Chinese fact is long enough.
    assert isinstance(screen("我叫王芳", 0.9, CFG), Screened)
    assert "too short: 2 characters (width 4), minimum is 5" in rejected(screen("王芳", 0.9, CFG))
    assert isinstance(screen("x" * 2000, 0.9, CFG), Screened)


def test_confidence_floor() -> None:
    assert "confidence 0.69 is below the minimum 0.70" in rejected(screen("我好像喜欢 Python", 0.69, CFG))
    assert isinstance(screen("我好像喜欢 Python", 0.7, CFG), Screened)


@pytest.mark.parametrize(
    "text",
    [
        "thanks!!",
        "Thank you, bye",
        "哈哈哈，好的",
        "谢谢！再见",
        "Traceback (most recent call last):",
        "ValueError: x must be positive",
    ],
)
def test_low_value_is_skipped(text: str) -> None:
    assert "low value" in rejected(screen(text, 0.9, GateConfig(min_length=1)))


def test_low_value_check_can_be_turned_off() -> None:
    assert isinstance(screen("thanks!!", 0.9, GateConfig(skip_low_value=False)), Screened)


def test_pii_is_redacted_not_refused() -> None:
    result = screen("我的手机号是13800138000，邮箱 li.lei@example.cn", 0.9, CFG)
    assert isinstance(result, Screened)
    assert "13800138000" not in result.text and "li.lei@example.cn" not in result.text
    assert set(result.redacted) == {"phone", "email"}


def test_nothing_left_after_redaction_is_refused() -> None:
    assert "nothing but sensitive data" in rejected(screen("a@b.com", 0.9, CFG))


def test_rate_limit() -> None:
    assert rate_limit_decision(2, CFG, "s1") is None
    limited = rate_limit_decision(3, CFG, "s1")
    assert limited is not None and "rate limit" in limited.reasons[0] and "'s1'" in limited.reasons[0]


def test_duplicate_decision_threshold() -> None:
    s = Screened("I like tea", ("ok",), ())
    assert duplicate_decision(s, "a", 0.85, CFG).action == "reinforce"
    assert duplicate_decision(s, "a", 0.849, CFG).action == "add"
    assert duplicate_decision(s, None, None, CFG).action == "add"


def test_env_overrides() -> None:
    cfg = GateConfig.from_env(
        {
            "MEMORY_MIN_CONFIDENCE": "0.5",
            "MEMORY_DUPLICATE_THRESHOLD": "0.9",
            "MEMORY_MAX_EXTRACTIONS": "5",
            "MEMORY_MIN_LENGTH": "2",
            "MEMORY_MAX_LENGTH": "100",
        }
    )
    assert (
        cfg.min_confidence,
        cfg.duplicate_threshold,
        cfg.max_extractions,
        cfg.min_length,
        cfg.max_length,
    ) == (
        0.5,
        0.9,
        5,
        2,
        100,
    )
    assert cfg.extraction_window == timedelta(hours=24)
    with pytest.raises(ConfigError, match="MEMORY_MIN_LENGTH"):
        GateConfig.from_env({"MEMORY_MIN_LENGTH": "five"})
    with pytest.raises(ConfigError, match="min_confidence"):
        GateConfig.from_env({"MEMORY_MIN_CONFIDENCE": "2"})
