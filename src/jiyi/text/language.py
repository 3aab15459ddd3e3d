"""Which language a text is written in, as far as its letters tell (pure functions).

Used where jiyi must name the user's language: the profile's ``language_preference``, and
the sentence that asks a language model to write memories and summaries in the user's
language rather than translate them (:mod:`jiyi.write.extract_llm`,
:mod:`jiyi.session.summarize`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["LANGUAGE_NAMES", "languages_of", "other_language", "written_in"]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")
# Scripts that name their language (a Cyrillic or Arabic text could be one of several).
_ONE_LANGUAGE_SCRIPTS = ((re.compile(r"[\u0e00-\u0e7f]"), "th"), (re.compile(r"[\u0370-\u03ff]"), "el"))
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f']+")
_ACCENTED = re.compile(r"[\u00c0-\u024f]")
# Function words of English, and of the other languages most written in Latin letters
# (Spanish, French, German, Italian, Portuguese, Dutch) that English does not use.
_ENGLISH_WORDS = frozenset(
    """the and is are was were i i'm i've i'll my you your of to with for it it's this that
    these those have has had be been would could should will what which who how when where
    we our they their he she his her don't doesn't didn't can't""".split()
)
_OTHER_LATIN_WORDS = frozenset(
    """el la los las y que es soy una del al en se su por con para pero muy también der das
    und ist ich nicht mit auf ein eine auch wir le les et est je une des pas avec mais très il
    di che non sono della ho em não uma com mas het een ik niet zijn ook dat""".split()
)


def written_in(text: str) -> str | None:
    """The language a text is written in, when its letters tell (a language tag), else None.

    Kana is Japanese and Hangul Korean, whatever Han characters they carry; two Han
    characters otherwise make Chinese, however many Latin letters the names in it bring
    ("我常用 VS Code、Docker"); Latin letters are English unless the words of another
    language outnumber English ones ("Tengo una moto Vespa azul" is not English; accented
    letters count as one such word)."""
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    if len(_HAN.findall(text)) >= 2:
        return "zh-CN"
    for script, tag in _ONE_LANGUAGE_SCRIPTS:
        if script.search(text):
            return tag
    words = [w.lower() for w in _LATIN_WORD.findall(text)]
    if not words:
        return None
    english = sum(w in _ENGLISH_WORDS for w in words)
    other = sum(w in _OTHER_LATIN_WORDS for w in words) + (1 if _ACCENTED.search(text) else 0)
    return "en" if english >= other else None


LANGUAGE_NAMES = {
    "zh-CN": "Chinese",
    "en": "English",
    "ja": "Japanese",
    "ko": "Korean",
    "th": "Thai",
    "el": "Greek",
}
"""The English name of each tag :func:`written_in` gives."""


def languages_of(texts: Iterable[str]) -> set[str | None]:
    """The languages of ``texts`` by :func:`written_in`, None standing for one its letters do
    not name (Russian, Spanish...). A text without letters counts for none; one whose
    letters are all Han characters (a one-character "好") is Chinese."""
    found: set[str | None] = set()
    for text in texts:
        letters = [c for c in text if c.isalpha()]
        if not letters:
            continue
        tag = written_in(text)
        if tag is None and all(_HAN.match(c) for c in letters):
            tag = "zh-CN"
        found.add(tag)
    return found


def other_language(texts: Iterable[str]) -> str | None:
    """None when every text is Chinese or English (callers keep their own rules for the
    two); else the English name of the one language all of them are written in (a model
    told "Chinese" for Japanese, or "English" for Korean, translates the user's words), or
    "" when their letters do not name one language (Russian, Spanish, a mix)."""
    named = languages_of(texts)
    if named <= {"zh-CN", "en"}:
        return None
    if len(named) == 1 and None not in named:
        return LANGUAGE_NAMES.get(str(next(iter(named))), "")
    return ""
