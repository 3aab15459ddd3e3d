"""Sentences of a text, in Chinese and English alike, and where chat ends them in any
language (an emoji before the next word, Korean "ㅋㅋ"); the part of a Spanish sentence
before its "¿" (episode summaries, the search's test of a memory that only asks, the
offline extractor's reading of a turn)."""

from __future__ import annotations

import re

_SENTENCE = re.compile(r".*?(?:[。！？!?；;…]+[”’」』）)\]\"']*|\.+[”’)\]\"']*(?=\s|$))|.+")

_EMOJI = "\U0001f300-\U0001faff\u2600-\u27bf"
_JAMO = "\u3131-\u318e"
# Chat ends sentences with signs too: an emoji before a capital or a word of a script
# without capitals ("Ya tengo el B2 🎉 Quiero celebrarlo...", "10월 18일이에요 💍 모바일
# 청첩장..."), Korean laughter or tears before a space ("좋다ㅎㅎ 회사가...").
_CHAT_END = re.compile(
    rf"[{_EMOJI}]+(?=\s+[A-ZÀ-ÞА-ЯЁ¿¡\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7a3])|[{_JAMO}]{{2,}}(?=\s)"
)


def break_chat(text: str) -> str:
    """``text`` with a line break after each sign that ends a sentence in chat."""
    return _CHAT_END.sub(lambda m: m.group() + "\n", text)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: Chinese ``。！？；`` and English ``. ! ?`` (a period before a
    space or the end, so "Next.js" and "3.5" stay whole); every line break ends one."""
    out: list[str] = []
    for line in break_chat(text).splitlines():
        for match in _SENTENCE.finditer(line):
            sentence = match.group().strip()
            if sentence:
                out.append(sentence)
    return out


def question_apart(sentence: str) -> list[str]:
    """``sentence`` as one part, or as two where a question opens inside it with "¿":
    Spanish marks where its question starts, so what comes before is said, not asked
    ("Ya tengo el B2 de euskera, ¿alguna idea para celebrarlo?")."""
    said, mark, question = sentence.partition("¿")
    return [said.strip(), mark + question] if mark and said.strip() else [sentence]
