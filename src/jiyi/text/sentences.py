"""Sentences of a text, in Chinese and English alike (episode summaries, the search's test
of a memory that only asks)."""

from __future__ import annotations

import re

_SENTENCE = re.compile(r".*?(?:[。！？!?；;…]+[”’」』）)\]\"']*|\.+[”’)\]\"']*(?=\s|$))|.+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: Chinese ``。！？；`` and English ``. ! ?`` (a period before a
    space or the end, so "Next.js" and "3.5" stay whole); every line break ends one."""
    out: list[str] = []
    for line in text.splitlines():
        for match in _SENTENCE.finditer(line):
            sentence = match.group().strip()
            if sentence:
                out.append(sentence)
    return out
