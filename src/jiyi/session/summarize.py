"""Summaries of conversations: episodes (seed 001) and the compaction message.

An :class:`EpisodeSummary` holds what seed 001 stores for an episode: a short summary,
key topics, actions taken, outcomes and an importance score. Two summarizers make one:

* :func:`summarize_extractive` works offline. Its summary is a digest of what the user
  stated (:mod:`jiyi.session.digest`): one short labelled line per fact, preference,
  decision, rule, skill or habit the rule extractor finds, de-duplicated; then, while
  room is left, the user's other statements (most central first, by the scoring
  below) and what the assistant reports done; within a token budget. Topics, actions,
  outcomes and importance come from the sentence scoring.
* :class:`LLMSummarizer` asks a chat model for the same fields as JSON, in the
  conversation's language; its logic is the chat flow :func:`summary_flow`.

:func:`compaction_summary` writes the text of the one system message that replaces old
turns when a session is compacted; compacting again keeps what the previous summary said.

Scoring (extractive). Every sentence is a document. A term's weight is
``tf * log(1 + N / df)``: ``tf`` its count in the whole conversation, ``df`` the number
of sentences that contain it, ``N`` the number of sentences; terms come from
:func:`jiyi.text.tokenize.terms` (jieba for Chinese, stemmed English). A sentence's
centrality is the sum of the weights of its distinct terms divided by the square root
of their number (so long sentences do not win by length alone), scaled to 0..1 over the
conversation. Bonuses: +0.15 for a user sentence, +0.25 for a decision, constraint or
preference cue, +0.2 for an action cue, +0.2 for an outcome cue; questions get -0.1.

Importance (extractive), a documented heuristic in 0..1::

    0.15 + 0.45 * (share of user turns stating a decision, constraint or preference)
         + 0.2  * min(1, user tokens / 400)
         + 0.1  * (any action taken) + 0.1 * (any outcome)

so chat without decisions stays near 0.15-0.35 and a working session with decisions and
results approaches 1. A conversation with nothing worth summarising (empty, or only
small talk) gives an empty summary and scores 0.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import ChatFlow, ChatModel, Message, arun_chat, json_flow, resolve_chat_model, run_chat
from jiyi.llm.jsonfix import repair_json
from jiyi.session.digest import covered, fit_lines, note_line, stated_lines
from jiyi.text.language import other_language
from jiyi.text.lowvalue import low_value_reason
from jiyi.text.sentences import split_sentences
from jiyi.text.tokenize import terms
from jiyi.text.tokens import count_tokens, truncate_to_tokens
from jiyi.write.extract import ChatTurn, Language
from jiyi.write.extract_llm import NumberedTurn, format_turns, language_of, number_turns

__all__ = [
    "COMPACTION_HEADERS",
    "SUMMARY_SYSTEM_PROMPT",
    "EpisodeSummary",
    "LLMSummarizer",
    "compaction_summary",
    "read_summary",
    "split_sentences",
    "summarize_extractive",
    "summary_flow",
    "summary_messages",
]

Turns = Sequence[ChatTurn | Mapping[str, Any]]


@dataclass(frozen=True)
class EpisodeSummary:
    """One episode of a conversation (seed 001's episodic memory fields)."""

    summary: str
    key_topics: tuple[str, ...]
    actions_taken: tuple[str, ...]
    outcomes: tuple[str, ...]
    importance: float
    """0..1: how useful the episode is for later conversations."""
    language: Language

    def to_structured(self) -> dict[str, Any]:
        """The JSON-ready form stored in a memory item's ``structured`` field."""
        return {
            "summary": self.summary,
            "key_topics": list(self.key_topics),
            "actions_taken": list(self.actions_taken),
            "outcomes": list(self.outcomes),
            "importance": self.importance,
            "language": self.language,
        }


_EMPTY_EN = EpisodeSummary("", (), (), (), 0.0, "en")

# -- cues ----------------------------------------------------------------------


def _cue(zh: str, en: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{zh})|\b(?:{en})\b", re.IGNORECASE)


_ACTION = _cue(
    # Chinese has no tense: only perfective forms count as done ("部署了", not "部署").
    "决定|完成了|已完成|创建了|新建了|修复了|修好了|部署了|已部署|部署好|安装了|装好了|选择了|选了|选定|采用了|"
    "改用|改成|换成|配置了|配置好|提交了|发布了|预订了|订了|发送了|发了|删除了|迁移了|升级了|设置了|实现了|"
    "合并了|写了|买了|报名了|加了",
    "decided|decide to|created|fixed|deployed|installed|chose|chosen|booked|sent|set up|configured|"
    "migrated|upgraded|switched|added|removed|deleted|wrote|implemented|merged|released|ordered|scheduled|"
    "picked|bought|went with|signed up|submitted|renamed|refactored|raised|enabled|disabled",
)
_OUTCOME = _cue(
    "成功|失败|解决|上线|结果|终于|搞定|通过了|生效|修好了|好了|可以了|跑通|报错消失",
    "worked|works now|working now|failed|fails|solved|resolved|launched|results?|finally|succeeded|"
    "passed|is live|went live|done|fixed now|no longer fails|turned out",
)
_SIGNAL = _cue(
    "决定|选择|必须|一定要|不要|不能|不可以|只能|禁止|别|喜欢|讨厌|偏好|更喜欢|希望|过敏|预算|截止|最晚|"
    "记住|总是|从不|习惯",
    "decided|decide|choose|chose|must|never|always|don't|do not|can't|cannot|should not|prefer|like|love|"
    "hate|dislike|allergic|budget|deadline|remember|need to|have to|only use|avoid",
)
_QUESTION = re.compile(r"[?？]\s*[”’」』）)\]\"']*$")

# Words that name no topic, given as surface words; their terms are computed once.
_TOPIC_STOP = (
    "user assistant help please thank thanks want need think know get got make let sure yes okay ok hi hello "
    "like use using also one thing things way something anything good great today now time well really "
    "用户 助手 请 帮 帮我 一下 可以 需要 问题 现在 然后 觉得 知道 谢谢 好的 怎么样 应该 这样 那样 已经 不错 "
    "一起 事情 时候 今天 东西 还有 一点 这里 那里 出来 起来 进行 使用 喜欢 决定 完成 成功 失败 结果 终于 "
    "以后 之后 以前 一直 总是 重新 看看 观察 我们 你们 他们"
)


@lru_cache(maxsize=1)
def _topic_stop_terms() -> frozenset[str]:
    return frozenset(terms(_TOPIC_STOP))


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_RUN = re.compile(r"[0-9A-Za-z\u00c0-\u024f]+(?:'[A-Za-z]+)?")


@dataclass(frozen=True)
class _Sentence:
    position: int
    role: str
    text: str
    terms: tuple[str, ...]
    turn: int = 0


def _dialogue(turns: Turns) -> list[NumberedTurn]:
    return [t for t in number_turns(turns) if t.role in ("user", "assistant") and t.content.strip()]


def _sentences(dialogue: Sequence[NumberedTurn]) -> list[_Sentence]:
    """The sentences worth summarising: not small talk, not bare symbols."""
    out: list[_Sentence] = []
    for turn in dialogue:
        for text in split_sentences(turn.content):
            found = tuple(terms(text))
            if found and low_value_reason(text) is None:
                out.append(_Sentence(len(out), turn.role, text, found, turn.index))
    return out


def _weights(sentences: Sequence[_Sentence]) -> dict[str, float]:
    tf: Counter[str] = Counter()
    df: Counter[str] = Counter()
    for s in sentences:
        tf.update(s.terms)
        df.update(set(s.terms))
    n = len(sentences)
    return {t: tf[t] * math.log(1.0 + n / df[t]) for t in tf}


def _language(dialogue: Sequence[NumberedTurn]) -> Language:
    """The language of most turns; a tie goes to the language of all the text together."""
    votes = Counter(language_of(t.content) for t in dialogue)
    if votes["zh"] != votes["en"]:
        return "zh" if votes["zh"] > votes["en"] else "en"
    return language_of(" ".join(t.content for t in dialogue))


# -- the extractive summarizer --------------------------------------------------------------


def _scores(sentences: Sequence[_Sentence], weights: Mapping[str, float]) -> list[float]:
    base: list[float] = []
    for s in sentences:
        distinct = set(s.terms)
        base.append(sum(weights[t] for t in distinct) / math.sqrt(len(distinct)) if distinct else 0.0)
    top = max(base, default=0.0) or 1.0
    scores: list[float] = []
    for s, b in zip(sentences, base, strict=True):
        score = b / top
        if s.role == "user":
            score += 0.15
        if _SIGNAL.search(s.text):
            score += 0.25
        if _ACTION.search(s.text):
            score += 0.2
        if _OUTCOME.search(s.text):
            score += 0.2
        if _QUESTION.search(s.text):
            score -= 0.1
        scores.append(score)
    return scores


def _says_something(s: _Sentence) -> bool:
    """Enough words that name something ("Hi there", "好的，明白了" do not)."""
    stop = _topic_stop_terms()
    return len({t for t in s.terms if t not in stop and len(t) > 1}) >= 2


def _digest(
    dialogue: Sequence[NumberedTurn],
    sentences: Sequence[_Sentence],
    scores: Sequence[float],
    language: Language,
    max_lines: int,
    max_tokens: int,
) -> str:
    """One line per statement the user made, then the user's other statements and what the
    assistant reports done (see :mod:`jiyi.session.digest`), within the limits."""
    stated, statements = stated_lines([(t.index, t.content) for t in dialogue if t.role == "user"])
    lines = list(stated)
    seen: set[str] = set()
    for s in sentences:
        key = re.sub(r"\W+", "", s.text.casefold())
        if key in seen:
            continue
        seen.add(key)
        question = bool(_QUESTION.search(s.text))
        if s.role == "user" and _says_something(s) and not covered(s.text, statements):
            # What the user asked says what the session was about, after what they stated.
            kind, score = ("asked", scores[s.position] - 1.0) if question else ("note", scores[s.position])
            lines.append(note_line(kind, s.text, (s.turn, s.position), score))
        elif s.role == "assistant" and not question and (_ACTION.search(s.text) or _OUTCOME.search(s.text)):
            lines.append(note_line("assistant", s.text, (s.turn, s.position), scores[s.position]))
    return fit_lines(lines, language, max_lines, max_tokens)


def _topics(
    sentences: Sequence[_Sentence], weights: Mapping[str, float], dialogue: Sequence[NumberedTurn], limit: int
) -> tuple[str, ...]:
    surface = _surface_forms(dialogue)
    stop = _topic_stop_terms()
    first_seen: dict[str, int] = {}
    for s in sentences:
        for t in s.terms:
            first_seen.setdefault(t, s.position)

    def usable(term: str) -> bool:
        if term in stop or term.isdigit():
            return False
        if _HAN.match(term):
            return len(term) >= 2
        return len(term) >= 2 and term in surface

    ranked = sorted(
        (t for t in weights if usable(t)),
        # Longer Chinese words first among equals: 数据库 over 数据.
        key=lambda t: (-weights[t] * (1.0 + 0.1 * (len(t) - 2) if _HAN.match(t) else 1.0), first_seen[t]),
    )
    chosen: list[str] = []
    for term in ranked:
        if len(chosen) >= limit:
            break
        if any(term in c for c in chosen):
            continue  # a part of a chosen word (数据 of 数据库)
        chosen = [c for c in chosen if c not in term]  # a longer word replaces its part
        chosen.append(term)
    return tuple(surface.get(t, t) for t in chosen)


def _surface_forms(dialogue: Sequence[NumberedTurn]) -> dict[str, str]:
    """English stem -> the spelling seen most often in the text ("deploy" -> "deployment")."""
    seen: dict[str, Counter[str]] = {}
    for turn in dialogue:
        for match in _LATIN_RUN.finditer(unicodedata.normalize("NFKC", turn.content)):
            word = match.group()
            found = terms(word)
            if len(found) == 1:
                seen.setdefault(found[0], Counter())[word] += 1
    return {stem: forms.most_common(1)[0][0] for stem, forms in seen.items()}


def _cued(sentences: Sequence[_Sentence], cue: re.Pattern[str], limit: int) -> tuple[str, ...]:
    out: list[str] = []
    for s in sentences:
        if len(out) >= limit:
            break
        if cue.search(s.text) and not _QUESTION.search(s.text) and s.text not in out:
            out.append(truncate_to_tokens(s.text, 80))
    return tuple(out)


def _importance(dialogue: Sequence[NumberedTurn], actions: bool, outcomes: bool) -> float:
    users = [t.content for t in dialogue if t.role == "user" and low_value_reason(t.content) is None]
    if not dialogue:
        return 0.0
    share = sum(1 for u in users if _SIGNAL.search(u)) / len(users) if users else 0.0
    length = min(1.0, sum(count_tokens(u) for u in users) / 400)
    value = 0.15 + 0.45 * share + 0.2 * length + 0.1 * actions + 0.1 * outcomes
    return round(min(1.0, max(0.0, value)), 2)


def summarize_extractive(
    turns: Turns, *, max_sentences: int = 40, max_tokens: int = 400, max_topics: int = 5
) -> EpisodeSummary:
    """Summarise ``turns`` offline (see the module docstring).

    Only user and assistant turns are read. The summary is at most ``max_sentences``
    lines and ``max_tokens`` tokens: one line per statement the user made, then their
    other statements and what the assistant reports done, while room is left. A
    conversation with nothing to summarise gives an empty summary with importance 0.
    """
    for name, value in (
        ("max_sentences", max_sentences),
        ("max_tokens", max_tokens),
        ("max_topics", max_topics),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{name} must be a positive integer, not {value!r}", field=name)
    dialogue = _dialogue(turns)
    sentences = _sentences(dialogue)
    if not sentences:
        return EpisodeSummary("", (), (), (), 0.0, _language(dialogue) if dialogue else "en")
    weights = _weights(sentences)
    scores = _scores(sentences, weights)
    actions = _cued(sentences, _ACTION, 5)
    outcomes = _cued(sentences, _OUTCOME, 5)
    language = _language(dialogue)
    return EpisodeSummary(
        summary=_digest(dialogue, sentences, scores, language, max_sentences, max_tokens),
        key_topics=_topics(sentences, weights, dialogue, max_topics),
        actions_taken=actions,
        outcomes=outcomes,
        importance=_importance(dialogue, bool(actions), bool(outcomes)),
        language=language,
    )


# -- compaction ---------------------------------------------------------------------------------

COMPACTION_HEADERS: dict[Language, str] = {
    "en": "Summary of earlier conversation:",
    "zh": "此前对话摘要：",
}


def _without_header(text: str) -> str:
    body = text.strip()
    changed = True
    while changed:
        changed = False
        for header in COMPACTION_HEADERS.values():
            if body.startswith(header):
                body = body[len(header) :].strip()
                changed = True
    return body


def compaction_summary(
    turns: Turns,
    previous_summary: str | None = None,
    *,
    max_sentences: int = 40,
    max_tokens: int = 600,
) -> str:
    """The text of the one system message that replaces ``turns`` when a session is compacted.

    It is a header ("Summary of earlier conversation:" or "此前对话摘要：") followed by the
    previous summary's lines (kept when compacting again; a system turn in ``turns`` that
    is itself a compaction summary counts as the previous summary) and an extractive
    summary of the new turns. The new part is at most half as long as the turns it
    replaces (so compaction shrinks the session) and gets at least half of ``max_tokens``
    otherwise; when the whole is over ``max_tokens``, the previous part is cut from its end.
    """
    given = number_turns(turns)
    earlier: list[str] = []
    if previous_summary and previous_summary.strip():
        earlier.append(_without_header(previous_summary))
    for turn in given:
        if turn.role == "system" and any(
            turn.content.strip().startswith(h) for h in COMPACTION_HEADERS.values()
        ):
            earlier.append(_without_header(turn.content))
    previous = "\n".join(p for p in earlier if p)
    dialogue = [t for t in given if t.role in ("user", "assistant") and t.content.strip()]
    language = _language(dialogue) if dialogue else language_of(previous)
    header = COMPACTION_HEADERS[language]
    room = max(max_tokens // 2, max_tokens - count_tokens(previous) - count_tokens(header) - 2)
    # Compaction must shrink the session: the new part is at most half as long as the turns.
    room = min(room, max(16, sum(count_tokens(t.content) for t in dialogue) // 2))
    new = (
        summarize_extractive(dialogue, max_sentences=max_sentences, max_tokens=room).summary
        if dialogue
        else ""
    )
    if previous and new:
        budget = max_tokens - count_tokens(header) - count_tokens(new) - 2
        previous = truncate_to_tokens(previous, max(0, budget))
    body = "\n".join(p for p in (previous, new) if p) or (
        "(nothing to keep)" if language == "en" else "（没有需要保留的内容）"
    )
    return f"{header}\n{body}"


# -- with a language model ----------------------------------------------------------------------

SUMMARY_SYSTEM_PROMPT = """\
You summarise a conversation between a user and an AI assistant as one episode for the assistant's \
long-term memory.

Answer with only a JSON object, no prose and no code fence:
{"summary": "...", "key_topics": ["..."], "actions_taken": ["..."], "outcomes": ["..."], "importance": 0.6}
- summary: one to three sentences (at most about 60 English words or 100 Chinese characters) saying what the \
conversation was about and what came of it. Be specific: name the tools, files, places and decisions. Never \
write a vague line such as "the user asked a question".
- key_topics: up to 5 short topic phrases.
- actions_taken: what the user or the assistant did or decided; an empty list if nothing.
- outcomes: the results: what worked, failed, was solved or is still open; an empty list if none.
- importance: 0 to 1, how useful this episode is for future conversations. Decisions, constraints, \
preferences and finished work score high; small talk scores low.
Only state what the conversation says; never invent details. Write every value in the language of the \
conversation: a Chinese conversation gets Chinese values, an English one English values. Never translate."""


def _language_sentence(dialogue: Sequence[NumberedTurn]) -> str:
    other = other_language(t.content for t in dialogue)
    if other:
        return f"The conversation is in {other}: write every value in {other}, never in English or Chinese."
    if other == "":
        return "Write every value in the language the conversation is written in; never translate."
    if (_language(dialogue) if dialogue else "en") == "zh":
        return "The conversation is in Chinese: write every value in Chinese (用中文写摘要), not in English."
    return "The conversation is in English: write every value in English."


def summary_messages(turns: Turns) -> list[Message]:
    """The messages asking a model to summarise ``turns`` as an episode."""
    dialogue = _dialogue(turns)
    parts = [
        "Conversation:",
        "",
        format_turns(dialogue),
        "",
        _language_sentence(dialogue),
        'Answer with the JSON object {"summary": ..., "key_topics": [...], "actions_taken": [...], '
        '"outcomes": [...], "importance": ...} only.',
    ]
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


_LIST_SPLIT = re.compile(r"\s*[,，、;；\n]\s*")


def _strings(value: Any) -> tuple[str, ...]:
    """A list of strings from a list, or from one string separated by commas."""
    if value is None:
        return ()
    items = (
        _LIST_SPLIT.split(value) if isinstance(value, str) else value if isinstance(value, list) else [value]
    )
    out: list[str] = []
    for item in items:
        if isinstance(item, str | int | float) and not isinstance(item, bool):
            text = " ".join(str(item).split())
            if text and text not in out:
                out.append(text)
    return tuple(out)


def _importance_value(value: Any) -> float:
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
        return 0.5
    if 1.0 < number <= 10.0:  # a 0..10 scale
        number /= 10.0
    return round(min(1.0, max(0.0, number)), 2)


def read_summary(answer: str) -> EpisodeSummary:
    """Read the model's answer to :func:`summary_messages`. Raises :class:`LLMError`.

    A missing or blank ``summary`` and an answer cut off by the token limit are unusable.
    Lists may also come as one comma-separated string; a missing importance reads as 0.5.
    """
    repaired = repair_json(answer)
    if repaired.truncated:
        raise LLMError("the answer was cut off before the JSON object ended")
    value = repaired.value
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        raise LLMError(f'expected a JSON object with a "summary", got {type(value).__name__}')
    data = {str(k).strip().casefold(): v for k, v in value.items()}
    if "summary" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
        data = {str(k).strip().casefold(): v for k, v in next(iter(data.values())).items()}
    summary = data.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise LLMError('the answer has no "summary" text')
    summary = summary.strip()
    return EpisodeSummary(
        summary=summary,
        key_topics=_strings(data.get("key_topics", data.get("topics"))),
        actions_taken=_strings(data.get("actions_taken", data.get("actions"))),
        outcomes=_strings(data.get("outcomes", data.get("outcome"))),
        importance=_importance_value(data.get("importance")),
        language=language_of(summary),
    )


def summary_flow(turns: Turns, *, max_attempts: int = 2) -> ChatFlow[EpisodeSummary]:
    """The abstractive summary as a chat flow; no model call when there is no dialogue."""
    if not _dialogue(turns):
        return _EMPTY_EN
    messages = summary_messages(turns)
    done = yield from json_flow(messages, read_summary, max_attempts=max_attempts)
    return done.value


class LLMSummarizer:
    """Abstractive episode summaries from a chat model (instance, callable or ``"openai:MODEL"``)."""

    def __init__(
        self, model: ChatModel | Callable[[list[Message]], str] | str, *, max_attempts: int = 2
    ) -> None:
        resolved = resolve_chat_model(model)
        if resolved is None:
            raise ConfigError("LLMSummarizer needs a chat model, e.g. 'openai:gpt-4o-mini'")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be a positive integer, not {max_attempts!r}")
        self._model = resolved
        self._max_attempts = max_attempts

    @property
    def model(self) -> ChatModel:
        return self._model

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self._model.model_id!r}, max_attempts={self._max_attempts})"

    def flow(self, turns: Turns) -> ChatFlow[EpisodeSummary]:
        return summary_flow(turns, max_attempts=self._max_attempts)

    def summarize(self, turns: Turns) -> EpisodeSummary:
        """Raises :class:`LLMError` when the model gives no usable answer in ``max_attempts`` tries."""
        return run_chat(self.flow(turns), self._model)

    async def asummarize(self, turns: Turns) -> EpisodeSummary:
        return await arun_chat(self.flow(turns), self._model)
