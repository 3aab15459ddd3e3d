"""Offline token counting (jiyi.text.tokens): bands against cl100k, monotonicity, truncation."""

from __future__ import annotations

import random

import pytest

from jiyi.text.tokens import (
    MESSAGE_OVERHEAD,
    count_message_tokens,
    count_tokens,
    truncate_to_tokens,
)

SAMPLES = [
    "我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React。",
    "The quick brown fox jumps over the lazy dog, again and again.",
    "我喜欢用 Python 写代码, and I love TypeScript too. 版本 3.11.4!",
    "def parseJSONFile(path: str) -> dict[str, Any]:\n    return json.loads(open(path).read())\n",
    "emoji 👍🏽 and 👨‍👩‍👧 family, café naïve résumé, Привет мир, こんにちは、안녕하세요",
    "   leading spaces\n\n\ttabs\r\nand windows line endings   ",
    "𠀀𠀁 rare Han (extension B) and 㐀㐁 (extension A), 兀 compatibility",
]


@pytest.mark.parametrize("text", ["", " ", "   ", "\n", "\t\n  \r\n", "\u3000"])
def test_empty_and_whitespace_count_zero(text: str) -> None:
    # Documented: 0 for empty or whitespace-only text (a run of spaces alone used to count 1).
    assert count_tokens(text) == 0


@pytest.mark.parametrize("text", ["a", "我", "1", "!", "👍", "é"])
def test_any_content_counts_at_least_one(text: str) -> None:
    assert count_tokens(text) >= 1


def test_chinese_sentence_of_twenty_characters() -> None:
    text = "我们决定使用这个方案因为团队成员都很熟悉"
    assert len(text) == 20
    assert 18 <= count_tokens(text) <= 28


def test_chinese_sentence_with_punctuation() -> None:
    text = "今天天气很好，我们去公园散步吧。"
    assert 14 <= count_tokens(text) <= 26


def test_english_sentence_of_ten_words() -> None:
    text = "The quick brown fox jumps over the lazy dog today."
    assert len(text.split()) == 10
    assert 10 <= count_tokens(text) <= 16


def test_longer_english_scales_with_words() -> None:
    text = " ".join(["memory"] * 100)
    assert 90 <= count_tokens(text) <= 130


def test_mixed_text_between_its_parts() -> None:
    zh = "我喜欢用"
    en = " Python and TypeScript"
    mixed = zh + en
    assert count_tokens(mixed) >= max(count_tokens(zh), count_tokens(en))
    assert count_tokens(mixed) <= count_tokens(zh) + count_tokens(en) + 1
    assert 6 <= count_tokens("我喜欢用 Python 写代码") <= 14


def test_digits_grouped_by_three() -> None:
    assert count_tokens("123") == 1
    assert count_tokens("123456") == 2
    assert count_tokens("1234567") == 3


def test_camel_case_costs_more_than_plain_word() -> None:
    assert count_tokens("TypeScript") >= count_tokens("typescript")
    assert count_tokens("parseJSONFile") >= 3


def test_count_is_deterministic() -> None:
    for text in SAMPLES:
        assert count_tokens(text) == count_tokens(text)


@pytest.mark.parametrize("text", SAMPLES)
def test_monotone_as_text_grows(text: str) -> None:
    counts = [count_tokens(text[:i]) for i in range(len(text) + 1)]
    assert counts == sorted(counts)


def test_monotone_on_random_text() -> None:
    rng = random.Random(1234)
    alphabet = "ab Zq我的是用 数据,.!?\n\t 123-_'é👍🏽\u200d"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        counts = [count_tokens(text[:i]) for i in range(len(text) + 1)]
        assert counts == sorted(counts), text


def test_appending_never_lowers_the_count() -> None:
    base = "我们决定用 PostgreSQL"
    for suffix in ["", " ", "。", "而不是 MySQL", "\n", "!!", "👍"]:
        assert count_tokens(base + suffix) >= count_tokens(base)


# -- chat messages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_message_adds_overhead(role: str) -> None:
    content = "I prefer dark mode in every editor."
    assert count_message_tokens(role, content) == count_tokens(content) + MESSAGE_OVERHEAD + 1
    assert count_message_tokens(role, content) > count_tokens(content)


def test_empty_message_still_costs_overhead() -> None:
    assert count_message_tokens("user", "") == MESSAGE_OVERHEAD + 1
    assert count_message_tokens("", "") >= MESSAGE_OVERHEAD + 1


def test_message_tokens_grow_with_content() -> None:
    assert count_message_tokens("user", "我喜欢 Python，也喜欢 Go") > count_message_tokens(
        "user", "我喜欢 Python"
    )


# -- truncation ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("budget", [0, 1, 2, 3, 5, 8, 13, 50])
def test_truncate_fits_and_is_prefix(text: str, budget: int) -> None:
    out = truncate_to_tokens(text, budget)
    assert count_tokens(out) <= budget
    assert text.startswith(out)


def test_truncate_keeps_text_that_fits() -> None:
    text = "我喜欢 Python"
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, count_tokens(text)) == text


def test_truncate_zero_or_negative_budget() -> None:
    assert truncate_to_tokens("hello world", 0) == ""
    assert truncate_to_tokens("hello world", -5) == ""
    assert truncate_to_tokens("", 10) == ""


def test_truncate_does_not_cut_inside_english_word() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    for budget in range(1, count_tokens(text)):
        out = truncate_to_tokens(text, budget)
        assert text.startswith(out)
        assert out == "" or out.split()[-1] in text.split()


def test_truncate_uses_most_of_the_budget() -> None:
    text = "我们决定用这个方案，因为团队成员都很熟悉这个框架。" * 5
    out = truncate_to_tokens(text, 30)
    assert 26 <= count_tokens(out) <= 30


def test_truncate_never_splits_emoji_modifier_or_surrogates() -> None:
    text = "ok 👍🏽👍🏽👍🏽 done"
    for budget in range(1, count_tokens(text) + 1):
        out = truncate_to_tokens(text, budget)
        assert not out.endswith("👍")  # the skin-tone modifier stays with its emoji
        out.encode("utf-8")  # no lone surrogate


def test_truncate_strips_trailing_whitespace() -> None:
    out = truncate_to_tokens("hello world and more words here", 2)
    assert out == out.rstrip()


def test_truncate_random_texts() -> None:
    rng = random.Random(99)
    alphabet = "ab Zq我的是用数据,.!?\n 123-é👍"
    for _ in range(100):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        budget = rng.randint(0, 20)
        out = truncate_to_tokens(text, budget)
        assert count_tokens(out) <= budget
        assert text.startswith(out)
