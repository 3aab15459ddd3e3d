"""Index terms for the keyword index, for Chinese and English alike.

Text is NFKC-normalised (full-width letters and digits become ASCII) and lower-cased,
then split into runs of Han characters and runs of letters/digits:

* English words lose stop words and are Snowball-stemmed ("preferences" -> "prefer").
* Han runs are segmented with jieba. Why not SQLite's trigram tokenizer: it cannot
  match two-character words such as 代码, the most common word length in Chinese.
  Documents and queries both use jieba's search mode, which adds sub-words
  (共和国 -> 共和, 共和国), so a query word and an indexed word meet halfway.
* Code-switched text ("我们决定用 Next.js 而不是 Remix") yields both kinds of terms.
* Other scripts get terms too, so a memory in any language the embedder reads can be
  found by its words. Scripts written without spaces between words, or whose words carry
  particles (Japanese kana, Korean Hangul, Thai, Lao, Khmer, Myanmar), give overlapping
  character bigrams, as Lucene's CJK analyzer does ("서울에서" -> 서울, 울에, 에서), so a
  query meets a stored word whatever particle follows it; a lone hiragana between kanji
  (a particle) gives none. Words of other scripts (Cyrillic, Greek, Arabic, Hebrew,
  Indic...) are kept whole, stemmed where Snowball has the script's main language
  (Russian, Greek, Arabic, Hindi, Armenian, Tamil); one-letter words are dropped, as in
  English.

The result is a list of plain tokens that contain no spaces or punctuation, so any
backend can index them with a whitespace tokenizer (SQLite FTS5 unicode61,
PostgreSQL ``to_tsvector('simple', ...)``).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

from jiyi.text.stopwords import (
    CYRILLIC_STOP,
    EN_STOP,
    KANA_HANGUL_STOP,
    LATIN_STOP_BY_LANGUAGE,
    OTHER_LATIN_STOP,
    ZH_STOP,
)

__all__ = ["EN_STOP", "ZH_STOP", "index_text", "query_terms", "terms"]

_HAN_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_LATIN_CHARS = "0-9a-z\u00c0-\u024f\u1e00-\u1eff"
# Kana, Hangul (syllables and jamo), Thai, Lao, Myanmar, Khmer: bigram scripts.
_BIGRAM_CHARS = "\u3040-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
# Combining marks that belong inside words of their scripts (Python's \w leaves them out):
# Cyrillic, Hebrew points, Arabic harakat, and the Indic blocks' vowel signs.
_MARKS = "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0900-\u0dff"
_RUN = re.compile(
    # The classes are disjoint, so the order only saves time: Latin and Han are most text.
    f"[{_LATIN_CHARS}]+(?:'[a-z]+)?|[{_HAN_CHARS}]+|[{_BIGRAM_CHARS}]+"
    f"|(?:[^\\W_{_LATIN_CHARS}{_HAN_CHARS}{_BIGRAM_CHARS}]|[{_MARKS}])+"
)
_HAN = re.compile(f"[{_HAN_CHARS}]")
_BIGRAM = re.compile(f"[{_BIGRAM_CHARS}]")
# Snowball stemmers by script (the first letter's block): the script's main language.
_SCRIPT_STEMMERS = (
    ("\u0400", "\u052f", "russian"),
    ("\u0370", "\u03ff", "greek"),
    ("\u0600", "\u06ff", "arabic"),
    ("\u0900", "\u097f", "hindi"),
    ("\u0530", "\u058f", "armenian"),
    ("\u0b80", "\u0bff", "tamil"),
)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


_jieba_lock = threading.Lock()
_jieba_tokenizer: Any = None


def jieba_tokenizer() -> Any:
    """One lazily initialised jieba tokenizer (its dictionary load takes ~0.5 s)."""
    global _jieba_tokenizer
    if _jieba_tokenizer is None:
        with _jieba_lock:
            if _jieba_tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                tok = jieba.Tokenizer()
                tok.initialize()
                _jieba_tokenizer = tok
    return _jieba_tokenizer


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


# French and Italian elide an article or pronoun into the next word ("l'utilisatrice",
# "j'habite", "qu'il", "dell'anno"): the word is what follows. English has no one-letter
# elided prefix but "o'clock", "y'all" and the like, which are not these letters.
_ELIDED = re.compile(r"^(?:[ldjnsmct]|qu|dell|nell|sull|all|dall|un)'(?=[a-z\u00c0-\u024f])")


def _english(word: str) -> str | None:
    """A Latin-script word's term (Snowball's English stemmer for every Latin-script
    language: one index for all of them), or None for a stop word of any of them."""
    if "'" in word:
        word = _ELIDED.sub("", word, count=1)
    if word in EN_STOP or word in OTHER_LATIN_STOP:
        return None
    word = word.replace("'", "")
    if len(word) == 1 and not word.isdigit():
        return None
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def _chinese(run: str) -> list[str]:
    words: list[str] = list(jieba_tokenizer().cut_for_search(run, HMM=True))
    return [w for w in words if w.strip() and w not in ZH_STOP]


# Hiragana and katakana runs apart: a katakana word is a loanword or a name, and the
# hiragana after it a particle ("ハナが", "コーヒーを"); a bigram across them means nothing.
_KANA_SPLIT = re.compile("[\u3040-\u309f]+|[\u30a0-\u30ff\u31f0-\u31ff]+|[^\u3040-\u30ff\u31f0-\u31ff]+")


def _bigrams(run: str) -> list[str]:
    out: list[str] = []
    for part in _KANA_SPLIT.findall(run) if "\u3040" <= run[0] <= "\u31ff" else (run,):
        if len(part) > 1:
            out.extend(b for i in range(len(part) - 1) if (b := part[i : i + 2]) not in KANA_HANGUL_STOP)
        elif not "\u3040" <= part <= "\u309f":
            # A lone hiragana between kanji is a particle or an ending (の, が, で), no topic.
            out.append(part)
    return out


@lru_cache(maxsize=8)  # one per script of _SCRIPT_STEMMERS
def _script_stemmer(language: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(language)


def _other_word(word: str) -> str | None:
    """A word of a script that is neither Latin, Han nor a bigram script."""
    if len(word) == 1 or word in CYRILLIC_STOP:
        return None
    first = word[0]
    for low, high, language in _SCRIPT_STEMMERS:
        if low <= first <= high:
            stemmed: str = _script_stemmer(language).stemWord(word)
            return stemmed or word
    return word


def _latin_language(words: list[str]) -> str | None:
    """The Snowball name of the language other than English that a text's Latin words are
    in, when two or more of its function words say so and English's fewer; else None."""
    english = sum(w in EN_STOP for w in words)
    best, count = None, 1
    for language, stop in LATIN_STOP_BY_LANGUAGE:
        found = sum(w in stop for w in words)
        if found > count:
            best, count = language, found
    return best if best is not None and count > english else None


def terms(text: str) -> list[str]:
    """Index terms of ``text`` in order (duplicates kept: they carry term frequency).

    A text in Spanish, French, German, Portuguese or Italian (:func:`_latin_language`) also
    gets its words' stems in that language, after all the others ("vivo" and "vive" meet at
    *viv*; the English stemmer, used for every Latin word, leaves them apart). Added rather
    than put in place, so a short query whose language its words do not tell still meets
    the English stems every text has, and the others' order (phrase pairs) stays."""
    out: list[str] = []
    latin: list[str] = []  # every Latin-script run (its language is told by them all)
    kept: list[tuple[str, str]] = []  # (run, English term) of those that give a term
    for match in _RUN.finditer(normalise(text)):
        run = match.group()
        if _HAN.match(run):
            out.extend(_chinese(run))
            continue
        first = run[0]
        if first <= "z" or "\u00c0" <= first <= "\u024f" or "\u1e00" <= first <= "\u1eff":  # Latin
            term = _english(run)
            latin.append(run)
            if term:
                kept.append((run, term))
        elif _BIGRAM.match(run):
            out.extend(_bigrams(run))
            continue
        else:
            term = _other_word(run)
        if term:
            out.append(term)
    language = _latin_language(latin) if len(latin) > 1 else None
    if language is not None:
        stemmer = _script_stemmer(language)
        for run, term in kept:
            word = _ELIDED.sub("", run, count=1).replace("'", "") if "'" in run else run
            own = stemmer.stemWord(word)
            if own and own != term:
                out.append(own)
    return out


def _is_latin(ch: str) -> bool:
    return "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff"


def fold_term(term: str) -> str:
    """Lower-case and drop Latin diacritics ("café" -> "cafe"), like FTS5's ``remove_diacritics``."""
    term = term.lower()
    if term.isascii():
        return term
    out: list[str] = []
    for ch in term:
        if _is_latin(ch):
            out.extend(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c))
        else:
            out.append(ch)
    return "".join(out)


def fold_terms(terms: str) -> str:
    """A space-joined term string with every term folded (:func:`fold_term`)."""
    return " ".join(fold_term(t) for t in terms.split())


def query_terms(text: str) -> tuple[str, ...]:
    """Distinct terms of a query, in first-seen order."""
    return tuple(dict.fromkeys(terms(text)))


def index_text(text: str) -> str:
    """The space-joined term string a backend stores in its keyword index."""
    return " ".join(terms(text))
