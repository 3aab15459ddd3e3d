"""Memory extraction with a language model.

:class:`LLMExtractor` numbers the conversation's turns, asks the model for a JSON object
``{"memories": [...]}``, reads the answer with :func:`~jiyi.llm.jsonfix.repair_json` and
checks every item. Items it cannot use are dropped and the reason is recorded in
:attr:`ExtractionResult.reasons`; an answer it cannot read at all is retried once with a
repair message, then raises :class:`~jiyi.errors.LLMError`. It never turns a garbage
answer into an empty list: only an explicit ``{"memories": []}`` means "nothing to remember".

All logic lives in :func:`extraction_flow`, a chat flow (see :mod:`jiyi.llm.base`);
:meth:`LLMExtractor.extract` and :meth:`LLMExtractor.aextract` only drive it. The prompt
pieces (:func:`format_turns`, :func:`language_instruction`, :func:`build_extraction_messages`)
are public so reconciliation and summaries can build their prompts the same way.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import (
    ChatFlow,
    ChatModel,
    Message,
    arun_chat,
    json_flow,
    resolve_chat_model,
    run_chat,
)
from jiyi.llm.jsonfix import repair_json, unwrap_list
from jiyi.model import MemoryType
from jiyi.text.language import other_language, written_in
from jiyi.write.extract import ChatTurn, Extracted, Language

__all__ = [
    "EXTRACTION_SYSTEM_PROMPT",
    "ExtractionResult",
    "LLMExtractor",
    "NumberedTurn",
    "build_extraction_messages",
    "extraction_flow",
    "format_turns",
    "language_instruction",
    "language_of",
    "number_turns",
    "read_extraction",
]

# -- the prompt -------------------------------------------------------------------------------

_TYPES = "\n".join(
    f"- {name}: {meaning}"
    for name, meaning in (
        ("preference", "likes, dislikes, preferred tools, styles or ways of working"),
        ("fact", "a fact about the user: name, job, employer, location, family, possessions"),
        ("skill", "something the user knows or can do, and how well"),
        ("habit", "something the user does regularly"),
        ("event", "something that happened or is planned at a particular time"),
        ("context", "the user's current situation, project or task"),
        ("constraint", "a rule or limit to respect: allergies, budgets, deadlines, 'never use X'"),
        ("decision", "a choice the user made, together with the reason they gave"),
        ("pattern", "a recurring tendency in how the user works or behaves"),
    )
)

EXTRACTION_SYSTEM_PROMPT = f"""\
You extract long-term memories about the user from a conversation, for the memory of an AI assistant.

Rules:
1. Only record what the USER explicitly stated in their own turns. Never record what the assistant said, \
suggested or assumed, and never guess or infer anything the user did not say.
2. Hedged statements ("maybe", "I think", "probably", "可能", "也许", "好像", "大概") get confidence below 0.7. \
Clear, direct statements get 0.8 to 1.0.
3. One fact per memory: "I like tea and live in Berlin" is two memories.
4. Write each memory in the language of the input: Chinese stays Chinese, English stays English. Never translate. \
Write it as a short statement about the user, e.g. "User prefers green tea" or "用户喜欢喝绿茶".
5. A decision keeps its reason: "Chose PostgreSQL over MySQL because it supports JSON queries".
6. If the user corrects themselves, record only the corrected statement.
7. Skip greetings, thanks, questions, small talk and passwords or other secrets.

memory_type is exactly one of:
{_TYPES}

Answer with only a JSON object, no prose and no code fence:
{{"memories": [{{"content": "...", "memory_type": "preference", "confidence": 0.9, "importance": 0.6, \
"key": "favourite_drink", "structured": {{"key": "favourite_drink", "value": "green tea"}}, "turn": 0}}]}}
- confidence: 0 to 1, how sure you are that the user stated it.
- importance: 0 to 1, how useful it is to remember in future conversations.
- key: optional snake_case slot name for a value that can change (favourite_drink, home_city, employer), \
so a later value can replace it; leave it out otherwise.
- structured: optional object with the memory's parts, e.g. {{"key": ..., "value": ...}}, or for a decision \
{{"choice": ..., "rejected": [...], "reason": ...}}.
- turn: the number of the user turn the memory comes from.
If there is nothing worth remembering, answer {{"memories": []}}."""


@dataclass(frozen=True)
class NumberedTurn:
    """A turn with its index in the input sequence and a normalised role."""

    index: int
    role: str
    """"user", "assistant" or the original role (system and tool turns are not shown to the model)."""
    content: str


_USER_ROLES = frozenset({"user", "human"})
_ASSISTANT_ROLES = frozenset({"assistant", "ai", "bot", "model"})


def number_turns(turns: Sequence[ChatTurn | Mapping[str, Any]]) -> list[NumberedTurn]:
    """Number and check turns (objects with ``role``/``content``, or dicts). Raises :class:`InvalidInput`.

    A :class:`NumberedTurn` keeps its number, so numbering twice changes nothing.
    """
    given: object = turns  # callers without type checking may pass anything
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise InvalidInput(
            f"turns must be a sequence of chat turns, not {type(given).__name__}", field="turns"
        )
    out: list[NumberedTurn] = []
    for i, turn in enumerate(turns):
        if isinstance(turn, NumberedTurn):
            out.append(turn)
            continue
        if isinstance(turn, Mapping):
            role, content = turn.get("role"), turn.get("content")
        else:
            role, content = getattr(turn, "role", None), getattr(turn, "content", None)
        if not isinstance(role, str) or not isinstance(content, str):
            raise InvalidInput(f"turns[{i}] needs a 'role' and a 'content' string", field="turns")
        role = role.strip().lower()
        if role in _USER_ROLES:
            role = "user"
        elif role in _ASSISTANT_ROLES:
            role = "assistant"
        out.append(NumberedTurn(i, role, content))
    return out


def format_turns(turns: Sequence[NumberedTurn]) -> str:
    """``[0] user: ...`` lines for the user and assistant turns; continuation lines are indented."""
    lines: list[str] = []
    for turn in turns:
        text = turn.content.strip()
        if turn.role not in ("user", "assistant") or not text:
            continue
        body = "\n    ".join(line.rstrip() for line in text.splitlines())
        lines.append(f"[{turn.index}] {turn.role}: {body}")
    return "\n".join(lines)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def language_of(text: str) -> Language:
    """``"zh"`` when Han characters outnumber Latin words, else ``"en"``. Japanese and
    Korean text, however many Han characters it holds, is not Chinese: it gets ``"en"``,
    the labels' neutral language."""
    if written_in(text) in ("ja", "ko"):
        return "en"
    return "zh" if len(_HAN.findall(text)) > len(_LATIN_WORD.findall(text)) else "en"


def language_instruction(texts: Sequence[str]) -> str:
    """One sentence telling the model which language to write in, from the user's own texts
    (a language other than Chinese and English: :func:`jiyi.text.language.other_language`)."""
    other = other_language(texts)
    if other:
        return f"The user writes in {other}: write every memory in {other}, never in English or Chinese."
    if other == "":
        return "Write each memory in the language of the turn it comes from, as the user wrote it; never translate."
    languages = {language_of(t) for t in texts if t.strip()}
    if languages == {"zh"}:
        return "The user writes in Chinese: write every memory in Chinese (用中文写每条记忆), not in English."
    if languages == {"en"}:
        return "The user writes in English: write every memory in English."
    return (
        "The user writes in Chinese and English: write each memory in the language of the turn it comes from."
    )


def build_extraction_messages(
    turns: Sequence[ChatTurn | Mapping[str, Any]], *, language_hint: bool = True
) -> list[Message]:
    """The system and user messages asking the model to extract memories from ``turns``."""
    numbered = number_turns(turns)
    parts = [
        "Conversation (numbered turns; only user turns may yield memories):",
        "",
        format_turns(numbered),
        "",
    ]
    if language_hint:
        parts.append(language_instruction([t.content for t in numbered if t.role == "user"]))
    parts.append('Answer with the JSON object {"memories": [...]} only.')
    return [
        {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


# -- reading the answer ----------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractionResult:
    """What one extraction produced, and why anything was left out."""

    items: tuple[Extracted, ...]
    reasons: tuple[str, ...] = ()
    """Dropped items and why, repairs made to the answer, unusable earlier attempts."""
    attempts: int = 1
    """Model calls made (0 when there was nothing to extract from)."""
    model_id: str = ""


_M = MemoryType
_TYPE_SYNONYMS: dict[str, MemoryType] = {
    **{f"{t.value}s": t for t in MemoryType},
    "pref": _M.PREFERENCE,
    "like": _M.PREFERENCE,
    "likes": _M.PREFERENCE,
    "dislike": _M.PREFERENCE,
    "dislikes": _M.PREFERENCE,
    "favorite": _M.PREFERENCE,
    "favourite": _M.PREFERENCE,
    "偏好": _M.PREFERENCE,
    "喜好": _M.PREFERENCE,
    "personal_fact": _M.FACT,
    "personal_info": _M.FACT,
    "profile": _M.FACT,
    "biography": _M.FACT,
    "identity": _M.FACT,
    "attribute": _M.FACT,
    "事实": _M.FACT,
    "ability": _M.SKILL,
    "abilities": _M.SKILL,
    "expertise": _M.SKILL,
    "knowledge": _M.SKILL,
    "技能": _M.SKILL,
    "能力": _M.SKILL,
    "routine": _M.HABIT,
    "routines": _M.HABIT,
    "习惯": _M.HABIT,
    "plan": _M.EVENT,
    "plans": _M.EVENT,
    "事件": _M.EVENT,
    "经历": _M.EVENT,
    "situation": _M.CONTEXT,
    "background": _M.CONTEXT,
    "背景": _M.CONTEXT,
    "上下文": _M.CONTEXT,
    "rule": _M.CONSTRAINT,
    "rules": _M.CONSTRAINT,
    "restriction": _M.CONSTRAINT,
    "requirement": _M.CONSTRAINT,
    "limitation": _M.CONSTRAINT,
    "约束": _M.CONSTRAINT,
    "限制": _M.CONSTRAINT,
    "choice": _M.DECISION,
    "决定": _M.DECISION,
    "决策": _M.DECISION,
    "tendency": _M.PATTERN,
    "behavior": _M.PATTERN,
    "behaviour": _M.PATTERN,
    "模式": _M.PATTERN,
    "规律": _M.PATTERN,
}

_DEFAULT_CONFIDENCE = 0.7
_DEFAULT_IMPORTANCE = 0.5
_MAX_KEY_LENGTH = 100


def _short(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _memory_type(raw: str) -> tuple[MemoryType | None, str | None]:
    name = raw.strip().lower().rsplit(".", 1)[-1].replace("-", "_").replace(" ", "_")
    try:
        return MemoryType(name), None
    except ValueError:
        pass
    mapped = _TYPE_SYNONYMS.get(name)
    if mapped is None:
        return None, None
    return mapped, f"memory_type {raw!r} read as {mapped.value!r}"


def _unit(value: Any, default: float, name: str, *, optional: bool = False) -> tuple[float, str | None]:
    """A 0..1 score: numbers and numeric strings ("0.8", "80%") are read and clamped."""
    if value is None:
        return default, None if optional else f"no {name} given; used {default}"
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            number = float(text.rstrip("%").strip()) / scale
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        return default, f"{name} {value!r} is not a number; used {default}"
    clamped = min(1.0, max(0.0, number))
    if clamped != number or isinstance(value, str):
        return clamped, f"{name} {value!r} read as {clamped}"
    return clamped, None


def _turn_index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        digits = value.strip().strip("[]#").strip()
        if digits.isdigit():
            return int(digits)
    return None


def _key(value: Any) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, str):
        return None, f"key {value!r} is not a string; ignored"
    key = re.sub(r"[\s\-]+", "_", value.strip().lower()).strip("_")
    if not key:
        return None, None
    if len(key) > _MAX_KEY_LENGTH:
        return None, f"key {_short(key)!r} is too long; ignored"
    return key, None


def read_extraction(answer: str, turns: Sequence[NumberedTurn], *, model_id: str = "llm") -> ExtractionResult:
    """Read and check one answer. Raises :class:`LLMError` when the answer is unusable.

    Unusable means: no JSON, no list of memories, a list whose items are all unreadable
    (not objects, no content, no memory_type), or an answer cut off before any complete
    memory. Single bad items are dropped, with the reason in ``reasons``.
    """
    repaired = repair_json(answer)
    items = unwrap_list(repaired.value, "memories")
    sources = _Sources(
        {t.index: t for t in turns}, [t for t in turns if t.role == "user" and t.content.strip()]
    )
    reasons: list[str] = []
    if repaired.repairs:
        reasons.append(f"answer repaired: {', '.join(repaired.repairs)}")
    if repaired.truncated:
        reasons.append("the answer was cut off; an incomplete last memory was dropped")
    kept: list[Extracted] = []
    seen: dict[str, int] = {}
    unreadable = 0
    for k, raw in enumerate(items):
        read = _read_item(k, raw, sources, model_id)
        if isinstance(read, _Dropped):
            if read.unreadable:
                unreadable += 1
            reasons.append(read.reason)
            continue
        identity = " ".join(read.content.casefold().split())
        if identity in seen:
            reasons.append(f"{_label(k, read.content)}: dropped, repeats item {seen[identity]}")
            continue
        seen[identity] = k
        kept.append(read)
    if items and not kept and unreadable == len(items):
        raise LLMError(
            f"none of the {len(items)} memories in the answer could be read ({reasons[-1]}); "
            'each must be an object with "content" and "memory_type"'
        )
    if repaired.truncated and not kept:
        raise LLMError("the answer was cut off before the first complete memory")
    return ExtractionResult(tuple(kept), tuple(reasons), 1, model_id)


@dataclass(frozen=True)
class _Dropped:
    """An item of the answer that is not used, and why (``unreadable``: not a memory at
    all, which counts towards an unusable answer)."""

    reason: str
    unreadable: bool = False


@dataclass(frozen=True)
class _Sources:
    """The turns an item may name as its source."""

    by_index: Mapping[int, NumberedTurn]
    user_turns: Sequence[NumberedTurn]

    def of(self, raw: Mapping[str, Any], label: str) -> tuple[NumberedTurn | None, str | None] | _Dropped:
        """The user turn an item came from and a note when it is unknown; an item from an
        assistant turn is dropped. With one user turn, that one is the source."""
        index = _turn_index(raw.get("turn", raw.get("turn_index")))
        source = self.by_index.get(index) if index is not None else None
        if source is not None and source.role == "assistant":
            return _Dropped(f"{label}: dropped, it comes from assistant turn [{index}], not from the user")
        if source is not None and source.role == "user":
            return source, None
        if len(self.user_turns) == 1:
            return self.user_turns[0], None
        return None, f"turn {raw.get('turn')!r} is not a user turn; source unknown"


def _label(k: int, content: str) -> str:
    return f"item {k} ({_short(content)!r})"


def _read_item(k: int, raw: object, sources: _Sources, model_id: str) -> Extracted | _Dropped:
    """One item of the answer as a memory candidate, or why it was dropped."""
    if not isinstance(raw, dict):
        return _Dropped(f"item {k}: not an object but {type(raw).__name__}", unreadable=True)
    content = next((raw[f] for f in ("content", "memory", "text") if isinstance(raw.get(f), str)), None)
    if content is None or not content.strip():
        return _Dropped(f"item {k}: no content", unreadable=True)
    content = content.strip()
    label = _label(k, content)
    raw_type = raw.get("memory_type", raw.get("type"))
    if not isinstance(raw_type, str) or not raw_type.strip():
        return _Dropped(f"{label}: no memory_type", unreadable=True)
    memory_type, type_note = _memory_type(raw_type)
    if memory_type is None:
        known = ", ".join(t.value for t in MemoryType)
        return _Dropped(f"{label}: dropped, unknown memory_type {raw_type!r} (known: {known})")
    found = sources.of(raw, label)
    if isinstance(found, _Dropped):
        return found
    source, source_note = found
    confidence, confidence_note = _unit(raw.get("confidence"), _DEFAULT_CONFIDENCE, "confidence")
    importance, importance_note = _unit(
        raw.get("importance"), _DEFAULT_IMPORTANCE, "importance", optional=True
    )
    key, key_note = _key(raw.get("key"))
    structured = raw.get("structured")
    structured_note = None
    if structured is not None and not isinstance(structured, dict):
        structured_note = f"structured {_short(repr(structured))} is not an object; ignored"
        structured = None
    notes = (type_note, source_note, confidence_note, importance_note, key_note, structured_note)
    return Extracted(
        content=content,
        memory_type=memory_type,
        confidence=confidence,
        importance=importance,
        structured=structured or None,
        key=key,
        source_text=source.content.strip() if source is not None else "",
        turn_index=source.index if source is not None else None,
        language=language_of(content),
        reasons=(f"extracted by {model_id}", *(n for n in notes if n)),
    )


def extraction_flow(
    turns: Sequence[ChatTurn | Mapping[str, Any]],
    *,
    model_id: str,
    max_attempts: int = 2,
    language_hint: bool = True,
) -> ChatFlow[ExtractionResult]:
    """The whole extraction as a chat flow: prompt, answer, checks, one repair retry."""
    numbered = number_turns(turns)
    if not any(t.role == "user" and t.content.strip() for t in numbered):
        return ExtractionResult((), ("no user turn to extract from",), 0, model_id)
    messages = build_extraction_messages(numbered, language_hint=language_hint)

    def parse(answer: str) -> ExtractionResult:
        return read_extraction(answer, numbered, model_id=model_id)

    done = yield from json_flow(messages, parse, max_attempts=max_attempts)
    earlier = tuple(f"attempt {i} unusable: {error}" for i, error in enumerate(done.errors, 1))
    return dataclasses.replace(done.value, reasons=earlier + done.value.reasons, attempts=done.attempts)


class LLMExtractor:
    """An :class:`~jiyi.write.extract.Extractor` backed by a chat model.

    ``model`` is a :class:`~jiyi.llm.base.ChatModel`, a callable ``messages -> str`` or an
    ``"openai:MODEL"`` string. ``max_attempts`` counts model calls per extraction (the
    second one is the repair retry). ``language_hint`` adds a sentence naming the user's
    language, which keeps smaller models from translating Chinese into English.
    """

    def __init__(
        self,
        model: ChatModel | Callable[[list[Message]], str] | str,
        *,
        max_attempts: int = 2,
        language_hint: bool = True,
    ) -> None:
        resolved = resolve_chat_model(model)
        if resolved is None:
            raise ConfigError("LLMExtractor needs a chat model, e.g. 'openai:gpt-4o-mini'")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be a positive integer, not {max_attempts!r}")
        self._model = resolved
        self._max_attempts = max_attempts
        self._language_hint = language_hint

    @property
    def model(self) -> ChatModel:
        return self._model

    def __repr__(self) -> str:
        return f"LLMExtractor(model={self._model.model_id!r}, max_attempts={self._max_attempts})"

    def flow(self, turns: Sequence[ChatTurn | Mapping[str, Any]]) -> ChatFlow[ExtractionResult]:
        """The extraction as a chat flow, for callers that drive flows themselves."""
        return extraction_flow(
            turns,
            model_id=self._model.model_id,
            max_attempts=self._max_attempts,
            language_hint=self._language_hint,
        )

    def run(self, turns: Sequence[ChatTurn | Mapping[str, Any]]) -> ExtractionResult:
        """Extract, with the reasons for everything dropped."""
        return run_chat(self.flow(turns), self._model)

    async def arun(self, turns: Sequence[ChatTurn | Mapping[str, Any]]) -> ExtractionResult:
        return await arun_chat(self.flow(turns), self._model)

    def extract(self, turns: Sequence[ChatTurn]) -> list[Extracted]:
        return list(self.run(turns).items)

    async def aextract(self, turns: Sequence[ChatTurn]) -> list[Extracted]:
        return list((await self.arun(turns)).items)
