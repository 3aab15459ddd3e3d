"""Turning several memory statements into a few core statements, offline or with a model.

* :func:`condense` — the deterministic, offline merge: trailing punctuation is trimmed, a
  statement whose words are all contained in another one is dropped, and the rest are
  joined into one statement. Statements that open with the same words (usually the
  subject: "User", "The user", "用户的") write them once, so ``用户喜欢喝绿茶`` +
  ``用户住在上海`` becomes ``用户喜欢喝绿茶；住在上海``. At most two words are shared and
  never a negation ("I don't like X" + "I don't like Y" stays whole), so each remainder
  keeps its meaning. Same input, same output.
* :func:`compression_flow` — a chat flow (see :mod:`jiyi.llm.base`) asking a model for
  1..N core statements with the numbers of the statements each one covers. The answer
  is checked: valid JSON, 1..N non-blank statements, every input statement covered, not
  longer than the input. An unusable answer is shown back to the model once; a second
  unusable answer raises :class:`~jiyi.errors.LLMError`.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from jiyi.errors import LLMError
from jiyi.llm.base import ChatFlow, Message, json_flow
from jiyi.llm.jsonfix import repair_json, unwrap_list
from jiyi.model import MemoryType
from jiyi.text.tokenize import jieba_tokenizer
from jiyi.text.tokens import count_tokens
from jiyi.write.extract_llm import language_instruction, language_of

__all__ = [
    "COMPRESSION_SYSTEM_PROMPT",
    "CoreStatement",
    "compression_flow",
    "compression_messages",
    "condense",
    "read_compression",
]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TRAILING = re.compile(r"[\s。．.!！?？;；,，、:：]+$")
_NOT_WORD = re.compile(r"[\W_]+")
_WORD_CHAR = re.compile(r"[^\W_]")
_LATIN_WORD = re.compile(r"\S+\s*")


# ---------------------------------------------------------------- the offline merge


def _clean(text: str) -> str:
    return _TRAILING.sub("", " ".join(text.split()))


def _words(text: str) -> list[str]:
    """Word tokens that join back to ``text``: jieba for text with Han, else spaces."""
    if _HAN.search(text):
        return [w for w in jieba_tokenizer().cut(text, HMM=True) if w]
    return _LATIN_WORD.findall(text)


def _key(word: str) -> str:
    """A token for comparison: NFKC, case-folded, without spaces or punctuation."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", word).casefold())


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    """Whether ``inner`` occurs as a contiguous run of words in ``outer``."""
    n = len(inner)
    return 0 < n <= len(outer) and any(
        list(outer[i : i + n]) == list(inner) for i in range(len(outer) - n + 1)
    )


def _distinct(statements: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Clean statements (and their tokens), dropping blanks and any statement whose words
    appear, in order and unbroken, in another one (it says nothing the other does not)."""
    cleaned = [c for c in (_clean(s) for s in statements) if c]
    tokens = [_words(c) for c in cleaned]
    keys = [[k for k in (_key(t) for t in ts) if k] for ts in tokens]
    kept: list[int] = []
    for i in range(len(cleaned)):
        held = any(
            j != i
            and _contains(keys[j], keys[i])
            and (len(keys[j]) > len(keys[i]) or (keys[j] == keys[i] and j < i))
            for j in range(len(cleaned))
        )
        if not held:
            kept.append(i)
    return [cleaned[i] for i in kept], [tokens[i] for i in kept]


# At most two shared words ("The user", "用户的", "User prefers"), and never a negation or
# prohibition: "I don't like X" + "I don't like Y" must not become "...; like Y".
MAX_SHARED_WORDS = 2
_NEGATION = re.compile(
    r"^(?:no|not|never|none|nor|neither|without|cannot|\w*n't|\w*nt)$|[不没別别勿未无無非莫禁]"
)


def _first_word(tokens: Sequence[str]) -> str:
    return next((k for k in (_key(t) for t in tokens) if k), "")


def _shared_opening(tokenised: Sequence[list[str]]) -> int:
    """How many leading tokens every statement shares: at most MAX_SHARED_WORDS words, no
    negation, ending on a word, and leaving each statement a remainder with a word in it."""
    shortest = min(len(t) for t in tokenised)
    k = words = best = 0
    while k < shortest and len({_key(t[k]) if t[k].strip() else " " for t in tokenised}) == 1:
        word = _key(tokenised[0][k])
        k += 1
        if not tokenised[0][k - 1].strip():
            continue
        if not word or _NEGATION.search(word) or words == MAX_SHARED_WORDS:
            break
        words += 1
        if all(_WORD_CHAR.search("".join(t[k:])) for t in tokenised):
            best = k
    return best


def _joiner(left: str, right: str) -> str:
    return "；" if language_of(left) == "zh" and language_of(right) == "zh" else "; "


def condense(statements: Sequence[str]) -> str:
    """One statement holding every distinct statement of ``statements``, in their order.

    Statements are grouped by their first word (groups in order of first appearance); a
    group's shared opening (up to two words, no negation) is written once. Deterministic.
    """
    distinct, tokenised = _distinct(statements)
    if not distinct:
        raise ValueError("nothing to condense: every statement is blank")
    groups: dict[str, list[int]] = {}
    for i, tokens in enumerate(tokenised):
        groups.setdefault(_first_word(tokens) or f"#{i}", []).append(i)
    pieces: list[str] = []
    for members in groups.values():
        shared = _shared_opening([tokenised[i] for i in members]) if len(members) > 1 else 0
        pieces.append(distinct[members[0]])
        for i in members[1:]:
            pieces.append("".join(tokenised[i][shared:]).strip() if shared else distinct[i])
    out = pieces[0]
    for left, right in itertools.pairwise(pieces):
        out += _joiner(left, right) + right
    return out


# ---------------------------------------------------------------- with a language model

COMPRESSION_SYSTEM_PROMPT = """\
You compress old memories in the long-term memory of an AI assistant. You get numbered statements \
of one kind, all about the same person, project or agent. Rewrite them as a few core memories that \
keep every fact and drop only repetition.

Rules:
1. Keep every distinct fact: names, numbers, dates, places, reasons and negations ("not", "不") \
must survive. Never add anything the statements do not say.
2. Statements that say the same thing in other words become one.
3. Group related facts into one core memory; give unrelated facts their own.
4. Write each core memory as one short, self-contained statement, in the language of its \
statements: Chinese stays Chinese, English stays English. Never translate.
5. The core memories together must be shorter than the statements.

Answer with only a JSON object, no prose and no code fence:
{"memories": [{"content": "...", "sources": [1, 2]}]}
- content: the core memory.
- sources: the numbers of the statements it covers. Every statement number must appear in some sources."""


@dataclass(frozen=True)
class CoreStatement:
    """One core statement and the (0-based) indexes of the statements it covers."""

    content: str
    sources: tuple[int, ...]


def compression_messages(statements: Sequence[str], memory_type: MemoryType, max_core: int) -> list[Message]:
    """The system and user messages asking a model to compress ``statements``."""
    lines = [f"[{i}] {' '.join(s.split())}" for i, s in enumerate(statements, start=1)]
    limit = "exactly 1 core memory" if max_core == 1 else f"1 to {max_core} core memories"
    parts = [
        f"{len(statements)} statements of type {memory_type.value!r}:",
        "",
        *lines,
        "",
        language_instruction(statements),
        f'Write {limit}. Answer with the JSON object {{"memories": [...]}} only.',
    ]
    return [
        {"role": "system", "content": COMPRESSION_SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


def _source_numbers(value: object, n: int, label: str) -> tuple[int, ...]:
    raw = value if isinstance(value, list) else [value] if value is not None else []
    if not raw:
        raise LLMError(f'{label} names no "sources"; list the numbers of the statements it covers')
    out: list[int] = []
    for v in raw:
        number: int | None = None
        if isinstance(v, int) and not isinstance(v, bool):
            number = v
        elif isinstance(v, float) and v.is_integer():
            number = int(v)
        elif isinstance(v, str) and v.strip().strip("[]#").strip().isdigit():
            number = int(v.strip().strip("[]#").strip())
        if number is None or not 1 <= number <= n:
            raise LLMError(f"{label}: source {v!r} is not a statement number within 1..{n}")
        if number - 1 not in out:
            out.append(number - 1)
    return tuple(out)


def read_compression(
    answer: str, statements: Sequence[str], *, max_core: int, max_length: int = 2000
) -> list[CoreStatement]:
    """Read and check a model's answer to :func:`compression_messages`. Raises :class:`LLMError`.

    Unusable: no JSON or a cut-off answer, no core memory or more than ``max_core``, an
    entry without text or longer than ``max_length`` characters, sources that are not
    statement numbers, a statement no core memory covers, or core memories longer (in
    tokens) than the statements together. A repeated core text is merged into the first.
    """
    repaired = repair_json(answer)
    if repaired.truncated:
        raise LLMError("the answer was cut off before the JSON object ended")
    entries = unwrap_list(repaired.value, "memories")
    if not entries:
        raise LLMError(f"the answer holds no core memory; write 1 to {max_core}")
    n = len(statements)
    cores: list[CoreStatement] = []
    for k, entry in enumerate(entries, start=1):
        label = f"core memory {k}"
        if not isinstance(entry, dict):
            raise LLMError(f"{label} is {type(entry).__name__}, not an object with content and sources")
        content = next((entry[f] for f in ("content", "memory", "text") if isinstance(entry.get(f), str)), "")
        content = " ".join(content.split())
        if not content:
            raise LLMError(f'{label} has no "content" text')
        if len(content) > max_length:
            raise LLMError(f"{label} is {len(content)} characters long; the maximum is {max_length}")
        sources = _source_numbers(entry.get("sources", entry.get("source")), n, label)
        same = next((i for i, c in enumerate(cores) if c.content == content), None)
        if same is not None:
            merged = cores[same].sources + tuple(s for s in sources if s not in cores[same].sources)
            cores[same] = CoreStatement(content, merged)
            continue
        cores.append(CoreStatement(content, sources))
    if len(cores) > max_core:
        raise LLMError(f"the answer has {len(cores)} core memories; write at most {max_core}")
    covered = {s for c in cores for s in c.sources}
    missing = [i + 1 for i in range(n) if i not in covered]
    if missing:
        raise LLMError(
            f"statement(s) {', '.join(map(str, missing))} are in no core memory's sources; "
            "every statement must be covered"
        )
    before = sum(count_tokens(s) for s in statements)
    after = sum(count_tokens(c.content) for c in cores)
    if n > 1 and after > before:
        raise LLMError(
            f"the core memories ({after} tokens) are longer than the statements they replace ({before} tokens)"
        )
    return cores


def compression_flow(
    statements: Sequence[str],
    *,
    memory_type: MemoryType,
    max_core: int,
    max_length: int = 2000,
    max_attempts: int = 2,
) -> ChatFlow[list[CoreStatement]]:
    """Ask the model for 1..``max_core`` core statements covering ``statements``; one repair retry."""
    if not statements:
        raise ValueError("nothing to compress")
    messages = compression_messages(statements, memory_type, max_core)

    def parse(answer: str) -> list[CoreStatement]:
        return read_compression(answer, statements, max_core=max_core, max_length=max_length)

    done = yield from json_flow(messages, parse, max_attempts=max_attempts)
    return done.value
