"""Offline token counting for Chinese and English, close to OpenAI's cl100k_base.

Used to fit memories into a prompt budget. It downloads nothing and needs no tokenizer
package. ``tiktoken`` is never used, even if it is installed and cached, so the count
is the same on every machine.

How the estimate works. One precompiled regex splits text into runs, roughly like
cl100k's own pre-tokenizer. Each run gets a cost in twelfths of a token, so sums stay
exact integers. The total is rounded half up, and any text with content counts at
least 1.

* **Han characters: 1.25 tokens each.** cl100k has only about 870 CJK entries in its
  100k vocabulary. Roughly 650 are single Han characters, and they are the most
  frequent ones (的, 是, 我, 用户, 数据...). Every other Han character is 3 UTF-8 bytes
  and costs 2 byte-level tokens, sometimes 3. The frequent characters cover about
  three quarters of ordinary Chinese text, so the average is about
  0.75 * 1 + 0.25 * 2 = 1.25. That also sits inside the 1.0-1.5 range usually
  reported for GPT-4 on Chinese. Rarer CJK blocks (extension A, compatibility
  ideographs) count 2 each.
* **English words: 1 token, plus 1/6 token for each letter beyond 7.** Almost every
  common word is one cl100k token (with its leading space). Long and rare words
  split, so the length surcharge stands in for rarity. camelCase and PascalCase
  words are costed per hump ("TypeScript" = Type + Script). Contractions count one
  more token ("don't" = don + 't), as in cl100k. On ordinary prose this comes to
  about 1.1-1.3 tokens per word once punctuation is added. That matches the usual
  "100 tokens ≈ 75 words" and "4 characters per token" rules of thumb.
* **Digits:** cl100k cuts digit runs into groups of up to three, so a run costs
  ceil(n / 3).
* **ASCII punctuation:** runs cost ceil(n / 2). Common pairs such as ``).``, ``",``
  and ``->`` are single tokens.
* **Whitespace:** a single space or tab is free, because it merges into the next
  token. A run of two or more spaces or tabs costs 1. Each run that contains a line
  break costs 1.
* **Anything else is costed by its UTF-8 length:** 2-byte letters (Cyrillic, Greek,
  accented Latin outside words) 0.5; 3-byte characters (CJK punctuation, kana,
  Hangul, symbols) 1; 4-byte characters (emoji) 2.

The estimate does not decrease as text grows (appending never lowers the count),
which :func:`truncate_to_tokens` relies on.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "count_message_tokens",
    "count_tokens",
    "truncate_to_tokens",
]

MESSAGE_OVERHEAD = 3
"""Tokens the chat format adds around every message (cl100k chat markup), before the role."""
REPLY_PRIMING = 3
"""Tokens added once per request to prime the assistant's reply."""

_UNIT = 12  # costs are kept in twelfths of a token, so sums stay exact integers

_PIECE = re.compile(
    r"(?P<han>[\u4e00-\u9fff]+)"
    r"|(?P<hanx>[\u3400-\u4dbf\uf900-\ufaff]+)"
    r"|(?P<word>[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+)"
    r"|(?P<contraction>'(?:s|t|re|ve|m|ll|d)\b)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<newline>[^\S\r\n]*[\r\n]\s*)"
    r"|(?P<space>[^\S\r\n]+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
# Humps of a mixed-case word: "parseJSONFile" -> parse, JSON, File.
_HUMP = re.compile(r"[A-Z\u00c0-\u00de]+(?![a-z\u00df-\u024f])|[A-Z\u00c0-\u00de]?[^A-Z\u00c0-\u00de]+")
_HAS_INNER_UPPER = re.compile(r".[A-Z\u00c0-\u00de]")


def _hump_units(hump: str) -> int:
    n = len(hump)
    units = _UNIT + 2 * max(0, n - 7)  # 1 token, + 1/6 per letter beyond 7
    # Accented letters are 2 UTF-8 bytes and split words more often in cl100k.
    units += 6 * sum(1 for ch in hump if ord(ch) > 0x7F)
    return units


def _word_units(word: str) -> int:
    if not _HAS_INNER_UPPER.search(word):  # fast path: plain words
        return _hump_units(word)
    return sum(_hump_units(h) for h in _HUMP.findall(word))


def _other_units(ch: str) -> int:
    size = len(ch.encode("utf-8", "surrogatepass"))
    if size <= 1:
        return _UNIT
    if size == 2:
        return _UNIT // 2
    if size == 3:
        return _UNIT
    return 2 * _UNIT


def _units(text: str) -> int:
    total = 0
    for m in _PIECE.finditer(text):
        kind = m.lastgroup
        piece = m.group()
        if kind == "han":
            total += 15 * len(piece)  # 1.25 tokens per common Han character
        elif kind == "hanx":
            total += 2 * _UNIT * len(piece)
        elif kind == "word":
            total += _word_units(piece)
        elif kind == "contraction":
            total += _UNIT
        elif kind == "digits":
            total += _UNIT * -(-len(piece) // 3)
        elif kind == "newline":
            total += _UNIT
        elif kind == "space":
            total += _UNIT if len(piece) > 1 else 0
        elif kind == "punct":
            total += _UNIT * -(-len(piece) // 2)
        else:
            total += _other_units(piece)
    return total


def count_tokens(text: str) -> int:
    """Estimated cl100k token count of ``text`` (0 for empty or whitespace-only text)."""
    if not text or text.isspace():
        return 0
    units = _units(text)
    if units == 0:
        return 0
    return max(1, (units + _UNIT // 2) // _UNIT)


def count_message_tokens(role: str, content: str) -> int:
    """Tokens one chat message takes: the content plus the per-message overhead (~4).

    The overhead is the chat markup (:data:`MESSAGE_OVERHEAD`) plus the role name,
    which is one token for "user", "assistant" and "system". That follows OpenAI's
    published recipe for counting chat tokens.
    """
    return MESSAGE_OVERHEAD + max(1, count_tokens(role)) + count_tokens(content)


def _is_word_char(ch: str) -> bool:
    # Letters and digits of alphabetic scripts. Han and kana have no spaces between
    # words, so cutting between two of them is fine.
    if not (ch.isalnum() or ch in "_'"):
        return False
    return not ("\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or "\uac00" <= ch <= "\ud7af")


def _is_continuation(ch: str) -> bool:
    """Characters that belong to the character before them (marks, joiners, selectors)."""
    return (
        unicodedata.combining(ch) != 0
        or ch in "\u200d\ufe0e\ufe0f"
        or "\udc00" <= ch <= "\udfff"  # low surrogate: never separate it from its high half
        or "\U0001f3fb" <= ch <= "\U0001f3ff"  # emoji skin-tone modifiers
    )


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that fits in ``max_tokens`` (by :func:`count_tokens`).

    The cut is always at a character boundary. It never separates a surrogate pair, a
    combining mark or an emoji joiner from its base character. It backs off to the
    start of an English word rather than cutting inside one, unless that word alone
    is over the budget. Trailing whitespace is dropped.
    """
    if max_tokens <= 0 or not text:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    # count_tokens never decreases as a prefix grows, so binary search for the longest
    # prefix that fits.
    lo, hi = 0, len(text)  # invariant: text[:lo] fits, text[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    cut = lo
    while 0 < cut < len(text) and _is_continuation(text[cut]):
        cut -= 1
    if 0 < cut < len(text) and _is_word_char(text[cut - 1]) and _is_word_char(text[cut]):
        start = cut
        while start > 0 and _is_word_char(text[start - 1]):
            start -= 1
        if start > 0 and text[:start].strip():
            cut = start
    return text[:cut].rstrip()
