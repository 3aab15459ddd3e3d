"""Chunking of long resources: budgets, overlaps, boundaries, exact reassembly, skip reasons."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from jiyi.errors import InvalidInput
from jiyi.session.chunking import Chunk, chunk_text, reassemble, resource_skip_reason
from jiyi.text.tokens import count_tokens

EN = "\n\n".join(
    " ".join(
        f"Paragraph {p} sentence {i} explains how the agent stores memories, searches vectors "
        f"and keeps an overlap between chunks."
        for i in range(10)
    )
    for p in range(30)
)
ZH = "\n".join(
    "".join(
        f"第{p}段第{i}句：智能体的记忆系统把长文档切成多个块，块之间保留一些重叠，检索时再按父编号拼回原文。"
        for i in range(12)
    )
    for p in range(25)
)


def check(text: str, chunks: list[Chunk], max_tokens: int) -> None:
    assert reassemble(chunks) == text
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for i, chunk in enumerate(chunks):
        assert chunk.index == i and chunk.count == len(chunks)
        assert chunk.text == text[chunk.start : chunk.end]
        assert count_tokens(chunk.text) <= max_tokens
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start <= a.end < b.end


@pytest.mark.parametrize("text", [EN, ZH], ids=["en", "zh"])
def test_long_text_default_budget(text: str) -> None:
    assert count_tokens(text) > 5000
    chunks = chunk_text(text)
    assert len(chunks) >= 3
    check(text, chunks, 2000)
    for a, b in itertools.pairwise(chunks):
        overlap = count_tokens(text[b.start : a.end])
        assert 80 <= overlap <= 200, overlap
    for chunk in chunks[:-1]:
        assert count_tokens(chunk.text) >= 1000  # not cut early
        assert chunk.text.rstrip(" ").endswith((".", "。", "\n")), chunk.text[-20:]  # a sentence end


def test_english_chunks_start_at_sentences() -> None:
    chunks = chunk_text(EN, max_tokens=300, overlap_tokens=60)
    check(EN, chunks, 300)
    assert all(c.text.startswith("Paragraph") for c in chunks)


def test_chinese_chunks_start_at_sentences() -> None:
    chunks = chunk_text(ZH, max_tokens=300, overlap_tokens=60)
    check(ZH, chunks, 300)
    assert all(c.text.startswith("第") for c in chunks)


def test_short_and_empty_text() -> None:
    assert chunk_text("A short note about the deployment.") == [
        Chunk("A short note about the deployment.", 0, 1, 0, 34)
    ]
    assert chunk_text("") == []
    assert reassemble([]) == ""


def test_no_overlap_means_contiguous_chunks() -> None:
    chunks = chunk_text(EN, max_tokens=500, overlap_tokens=0)
    check(EN, chunks, 500)
    assert all(a.end == b.start for a, b in itertools.pairwise(chunks))
    assert "".join(c.text for c in chunks) == EN


@pytest.mark.parametrize(
    "text",
    ["记忆" * 3000, "x" * 9000, "word " * 2500, "😀" * 2000, "句子，" * 2000],
    ids=["han-run", "one-long-word", "words", "emoji", "clauses"],
)
def test_texts_without_sentence_boundaries(text: str) -> None:
    chunks = chunk_text(text, max_tokens=400, overlap_tokens=40)
    assert len(chunks) > 1
    check(text, chunks, 400)


def test_words_are_not_split_when_spaces_exist() -> None:
    chunks = chunk_text("alpha beta gamma delta " * 400, max_tokens=100, overlap_tokens=10)
    for chunk in chunks:
        assert chunk.text[0] in "abgd" and chunk.text.endswith(" ")


def test_random_mixed_text() -> None:
    rng = random.Random(7)
    pieces = [
        "记忆",
        "word",
        " ",
        "。",
        ".",
        "\n",
        "\n\n",
        "，",
        "😀",
        "e\u0301",
        "123",
        "Hello world. ",
        "？",
    ]
    text = "".join(rng.choice(pieces) for _ in range(6000))
    for max_tokens, overlap in ((200, 20), (50, 49), (2, 1)):
        check(text, chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap), max_tokens)


def test_reassemble_any_order_and_refuses_broken_sets() -> None:
    chunks = chunk_text(EN, max_tokens=400, overlap_tokens=50)
    shuffled = chunks[::-1]
    assert reassemble(shuffled) == EN
    with pytest.raises(InvalidInput, match="exactly once"):
        reassemble(chunks[:1] + chunks[2:])
    with pytest.raises(InvalidInput, match="exactly once"):
        reassemble([*chunks, chunks[1]])
    tampered = dataclasses.replace(chunks[1], text="X" + chunks[1].text[1:])
    with pytest.raises(InvalidInput, match="does not agree"):
        reassemble([chunks[0], tampered, *chunks[2:]])
    shift = chunks[0].end + 5 - chunks[1].start
    gap = dataclasses.replace(chunks[1], start=chunks[1].start + shift, end=chunks[1].end + shift)
    with pytest.raises(InvalidInput, match="missing"):
        reassemble([chunks[0], gap, *chunks[2:]])
    bad_length = dataclasses.replace(chunks[0], end=chunks[0].end + 1)
    with pytest.raises(InvalidInput, match="spans"):
        reassemble([bad_length, *chunks[1:]])


def test_bad_arguments() -> None:
    with pytest.raises(InvalidInput, match="max_tokens"):
        chunk_text(EN, max_tokens=1)
    with pytest.raises(InvalidInput, match="overlap_tokens"):
        chunk_text(EN, max_tokens=100, overlap_tokens=100)
    with pytest.raises(InvalidInput, match="overlap_tokens"):
        chunk_text(EN, overlap_tokens=-1)
    with pytest.raises(InvalidInput, match="text"):
        chunk_text(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("Thanks, got it!", "small talk"),
        ("哈哈好的，谢谢", "small talk"),
        (
            'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n    main()\n'
            "ValueError: bad value for the deployment configuration",
            "error message",
        ),
        ("Error: connection refused while connecting to the database server at port 5432", "error message"),
        ("Deploy only on Tuesdays.", "too short: 24 characters"),
        ("部署只能在周二进行，周五禁止上线。", "too short"),
    ],
)
def test_resource_skip_reasons(text: str, reason: str) -> None:
    found = resource_skip_reason(text)
    assert found is not None and reason in found


def test_resources_worth_storing() -> None:
    assert resource_skip_reason(EN) is None
    assert resource_skip_reason(ZH) is None
    assert (
        resource_skip_reason("The release checklist: run migrations, warm the cache, then switch traffic.")
        is None
    )
