"""Rule-based memory extraction: offline, precompiled regexes, Chinese and English.

:class:`RuleExtractor` reads only the user's own turns (role ``"user"``), plus system turns
that carry a conversation summary (content starting with ``Summary:``, ``摘要：`` or
``[summary]``). It catches only what the user *explicitly* stated:

* explicit requests: 记住/帮我记住/请记住/记一下/别忘了 ...; "remember that ...", "please
  remember ...", "don't forget (that) ...", "note that ..." (confidence 0.95; the type is
  inferred from the remembered content, default ``fact``);
* self-descriptions (``fact``, 0.9, with a ``key``): name, profession, employer, location
  (where the user lives now) and hometown (where they come from); "I'm a vegetarian" or
  "我是个急性子" is a fact without a key;
* the name the user wants to be called (``fact``, key ``preferred_name``): "Call me Dave",
  "I go by Dave", "my English name / nickname is ...", 叫我小王就行, 我的英文名是 Dave; after
  "call me" / 叫我 only a name counts ("Call me when you're done", 叫我一声 are not names);
* what the user or their team is building and a project's goal (``context``, 0.85,
  ``structured`` ``{"project": ...}`` or ``{"goal": ...}``): "I'm building a Rust CLI ...",
  "Our goal this quarter is to ...", 我在做一个记账小程序, 这个项目的目标是 ...; "building"
  needs a thing that is a project (app, CLI, API, service, 小程序, 系统 ...), not "a house";
* preferences (0.85): likes and dislikes, "比起X我更喜欢Y", "I'd rather ...", favourites;
* habits (0.85): 我通常/我每天/我一般/我经常/我习惯, "I usually/always ...", "every morning I ...";
* decisions (0.9): choice, rejected alternatives and reason;
* constraints (0.9): 必须/一定要/不能/不允许/禁止/务必, "must", "has to", "cannot", "never use" ...,
  imperatives ("Always ...", "Never ...", 不要/别 ...), standing instructions (以后/今后/从现在开始 ...,
  "from now on ...") and allergies (我对X过敏, "I'm allergic to X", key ``"allergy:<x>"``);
* skills (0.85): 我熟悉/我精通/我会用/我擅长, "I'm experienced with X", "I know X well" ...

Hedged statements (我好像/可能/也许/大概/不太确定/说不定/应该是, "I guess", "probably",
"maybe", "might", "not sure" ...) are still extracted, but with confidence 0.5 and the
reason ``"hedged"``. Questions (ending in ?/？, ending in 吗, starting with an
interrogative, or containing 什么/哪里/谁/怎么/是不是 ...) yield nothing, and so do
low-value turns (small talk, error messages; see :func:`~jiyi.text.lowvalue.low_value_reason`).
Constraints and decisions tied to a day (今天/明天/现在, "today", "right now" ...) are
temporary states, not memories, and are skipped.

How a turn is read. It is split into sentences at 。！？.!?；; and line breaks (a ``.``
inside a token, as in "Next.js" or "3.11", does not end a sentence). A sentence is split
further into clauses at commas, but only where the next clause starts a new statement
(我/我们/I/my/we/let's ..., optionally after and/but/而且/但是 ...); "..., 因为 ..." stays
with its clause. Each clause gets at most one memory; an explicit "remember" request
covers its whole sentence. Results are de-duplicated within one call (same type and
content, case-insensitive), the first occurrence wins. Clauses over 300 characters are
not read: they are not explicit short statements, and the cap keeps the work linear.

**Content convention.** ``content`` keeps the user's own words and language: the clause
as the user wrote it (first person kept, e.g. "我喜欢 Python", "I live in Berlin"), trimmed
of surrounding whitespace, of request wrappers (帮我记住：, "remember that", "please note
that", "note to self:"), of leading connectives and lead-ins (而且, 对了, but, also, FYI,
btw ...), of trailing modal particles (吧/呢/啊/哦/呀/啦/嘛) and of final punctuation. Words
that qualify the statement stay ("我好像喜欢 Python" keeps 好像, "I think ..." stays). Nothing is translated or rephrased; the
parsed parts go into ``structured`` and ``key`` instead:

* facts: ``key`` in {"name", "preferred_name", "profession", "employer", "location", "hometown"} (or
  ``"my:<attribute>"`` for remembered "my X is Y" statements), ``structured``
  ``{"key": ..., "value": ...}``;
* preferences: ``structured`` ``{"polarity": "like" | "dislike", "object": ..., "over":
  [...]?}``, ``key`` ``"preference:<object>"`` (lower-cased), or ``"favorite:<category>"``
  for "my favourite X is Y" / "我最喜欢的X是Y". An ended preference ("I no longer prefer
  X", "我不再喜欢X", "... anymore") is a dislike with ``"change": "no_longer"`` and *no*
  key, so reconciliation supersedes the old "like" by polarity whatever its confidence;
  when the same turn states a new like ("I no longer prefer tabs; I prefer spaces") only
  the new like is returned, and the ended one reaches reconciliation via ``source_text``;
* decisions: ``{"choice": ... | None, "rejected": [...], "reason": ... | None}``;
* constraints: ``{"modality": "must" | "must_not"}`` (allergies add ``"allergy"``);
* skills: ``{"skill": ...}``, ``key`` ``"skill:<skill>"``; habits: ``{"habit": ...}``.

``source_text`` is the whole turn (stripped), as with the LLM extractor: reconciliation
reads its other clauses. ``language`` is "zh" when ``content`` has a Han character, else "en".

Summary turns are often written in the third person ("The user prefers dark mode",
"用户喜欢喝茶"); "the user"/"用户" is read as "I"/"我" for matching, the content stays as
written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from jiyi.model import MemoryType
from jiyi.profile_lexicon import term_of
from jiyi.text.language import written_in
from jiyi.text.lowvalue import low_value_reason
from jiyi.text.names import SURNAMES_ZH
from jiyi.text.sentences import break_chat, question_apart
from jiyi.write.extract import ChatTurn, Extracted, Language

__all__ = [
    "CONFIDENCE_HEDGED",
    "RuleExtractor",
    "asks_only",
    "stated_clauses",
    "states_nothing",
    "with_speaker",
]

CONFIDENCE_REMEMBER = 0.95
CONFIDENCE_FACT = 0.9
CONFIDENCE_DECISION = 0.9
CONFIDENCE_CONSTRAINT = 0.9
CONFIDENCE_PREFERENCE = 0.85
CONFIDENCE_HABIT = 0.85
CONFIDENCE_SKILL = 0.85
CONFIDENCE_CONTEXT = 0.85
CONFIDENCE_HEDGED = 0.5
"""Confidence of any hedged statement (below the 0.7 that counts as "stated")."""

_IMPORTANCE: dict[MemoryType, float] = {
    MemoryType.FACT: 0.6,
    MemoryType.PREFERENCE: 0.55,
    MemoryType.HABIT: 0.5,
    MemoryType.SKILL: 0.55,
    MemoryType.DECISION: 0.7,
    MemoryType.CONSTRAINT: 0.75,
    MemoryType.CONTEXT: 0.6,
}

_I = re.IGNORECASE
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")

# -- reading turns ---------------------------------------------------------------------------

_USER_ROLES = frozenset({"user", "human"})
_SUMMARY_PREFIX = re.compile(r"^\s*(?:summary\s*[:：]|摘要\s*[:：]|\[summary\]\s*[:：]?)\s*", _I)

# A sentence runs to 。！？!?；; or a line break; "." ends it only before whitespace or the end.
_SENTENCE = re.compile(
    r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|Jr|Sr|St|vs|etc|e\.g|i\.e|approx|No)\.|[^。！？!?；;.\n]|\.(?=[^\s.]))+[。！？!?；;.…]*"
)
_CLAUSE_SEP = re.compile(
    r"([，,]\s*|\s+(?=(?:and|but)\s+(?:i|we|my)\b)|(?<=[\u4e00-\u9fff\w])(?=(?:而且|但是|并且)我))", re.I
)
_CONJ = r"(?:and|but|also|so|plus|then|and\s+also|now|currently|nowadays|these\s+days|而且|但是|但|不过|并且|另外|同时|还有|所以|然后|而|对了)"
# A clause may open with a time before its subject ("…，现在我老板是李总"), which stays in
# what is stored (a word of change the reconciliation reads).
_CLAUSE_START = re.compile(
    rf"^(?:(?:{_CONJ}|现在|目前|如今)[\s，,]*)?"
    r"(?:我|咱们|用户|比起|相比|i\b|i'|my\b|we\b|we'|let's\b|let\s+us\b|the\s+team\b|our\s+team\b|"
    r"(?:the\s+)?user\b|every\s+(?:morning|day|night|evening|week|weekend)\b|每天|平时|每周|"
    r"(?:please\s+)?(?:remember|don't\s+forget|note\s+that)\b|(?:请|帮我)?记住|别忘了|"
    r"(?:you\s+can\s+|just\s+)?call\s+me\b|(?:你|您|大家)?(?:可以|就)?叫我)",
    _I,
)
_LEADING_CONJ = re.compile(rf"^{_CONJ}(?:[\s，,]+|(?=我|咱们|用户))", _I)
# Lead-ins dropped from content (words that qualify the statement, like "I think", stay).
_CONTENT_LEAD = re.compile(
    r"^(?:(?:fyi|btw|by\s+the\s+way|oh|well|anyway|ok|okay|yes|yeah|for\s+the\s+record|just\s+so\s+you\s+know|"
    r"guess\s+what|(?:good|great|big|some|bad)\s+news|quick\s+update|life\s+update|heads\s+up)"
    r"\b[,:!\s]*|(?:对了|顺便说一下|顺便说一句|顺便|嗯|哦|噢)[，,\s]*"
    r"|(?:(?:跟|和|给)你说|告诉你)(?:个|一个|件|一件)?(?:好|坏)?(?:消息|事|事情)?[：:，,!！\s]*"
    r"|(?:好消息|坏消息|有个消息|有件事)[：:，,!！\s]*)+",
    _I,
)
_KEEP_JOINED = re.compile(r"^(?:比起|相比|与其|compared\s+(?:to|with)|rather\s+than)", _I)
# Once a reason has started ("因为 ...", "because ..."), what follows belongs to it.
_REASON_STARTED = re.compile(r"因为|由于|\b(?:because|since)\b", _I)

_TRAIL_CHARS = " \t\r\n\u3000。！？!?.,，;；:：~～…、"
_LEAD_CHARS = " \t\r\n\u3000:：,，;；-—~～、"
_PARTICLES = ("吧", "呢", "啊", "哦", "呀", "啦", "嘛", "哈", "喔", "噢")
_QUOTES = re.compile(r"^[\"'“”‘’「」『』《》]+|[\"'“”‘’「」『』《》]+$")


def _trim(text: str) -> str:
    """Drop surrounding whitespace, final punctuation and trailing modal particles."""
    # Plain string operations, not a regex anchored at "$": that would be quadratic on long runs.
    out = text.strip().lstrip(_LEAD_CHARS).rstrip(_TRAIL_CHARS).strip()
    while len(out) >= 2 and out.endswith(_PARTICLES) and (out[-2].isspace() or _HAN.match(out[-2])):
        out = out[:-1].rstrip(_TRAIL_CHARS).strip()
    return out


# A value (name, object, choice ...) stops at a comma or a conjunction.
_VALUE_STOP = re.compile(
    r"[，,；;。]|\s(?:and|but|because|since|so|although|though|which|who|where|as\s+well)\b"
    r"|因为|由于|所以|但是|不过|而且|并且|，",
    _I,
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", _I)
# A leading English word only as a word ("the cat", not the "a" of "apples" or the "the"
# of "theme"); the Chinese verbs need no space after them.
_SLOT_LEAD = re.compile(r"^(?:(?:to\s+use|using|use|to|the|a|an)(?:\s+|$)|(?:用|使用|去)\s*)", _I)


_VALUE_STOP_KEEP_AND = re.compile(
    r"[，,；;。]|\s(?:but|because|since|so|although|though|which|who|where|as\s+well)\b"
    r"|因为|由于|所以|但是|不过|而且|并且",
    _I,
)


_VALUE_TAIL = re.compile(r"(?:\s+(?:anymore|any\s+more|these\s+days|nowadays|now)|(?<=\S)\s*了)$", _I)


def _value(text: str, *, keep_and: bool = False) -> str:
    m = (_VALUE_STOP_KEEP_AND if keep_and else _VALUE_STOP).search(text)
    if m and m.start() > 0:
        text = text[: m.start()]
    return _QUOTES.sub("", _VALUE_TAIL.sub("", _trim(text))).strip()


def attribute_key(attr: str) -> str:
    """The key of a "my X is Y" fact for the attribute X ("GP" -> ``my:gp``), as the
    extractor files it; the read path asks for it by the same name (:mod:`jiyi.read.asked`)."""
    return f"my:{_slot(_trim(attr))}"


def _slot(text: str) -> str:
    """A stable, lower-cased slot name for a value."""
    out = " ".join(text.lower().split())
    prev = None
    while prev != out:
        prev = out
        out = _SLOT_LEAD.sub("", out) if len(out) > 1 else out
    return out or " ".join(text.lower().split())


_PRONOUN_OBJECT = re.compile(
    r"^(?:it|this|that|these|those|you|them|him|her|what|how|one|some|your|so|not)\b|"
    r"^to\s+(?:say|admit|break|bother|ask|interrupt|tell|hear|see|think)\b|^(?:这|那|你|它|他|她|啥|什么)",
    _I,
)


def _language(text: str) -> Language:
    return "zh" if _HAN.search(text) else "en"


# -- hedges, questions, temporary states -----------------------------------------------------------

_HEDGE = re.compile(
    r"好像|似乎|(?<![尽不])可能|也许|大概|不太确定|不确定|说不定|应该是|或许|估计|貌似|记不清|不太记得|"
    r"\b(?:i\s+think\s+maybe|i\s+guess|probably|"
    r"not\s+(?:\d+\s*%\s*|entirely\s+|completely\s+|totally\s+|quite\s+|really\s+|too\s+|so\s+)?(?:sure|certain)|might|maybe|perhaps|"
    r"i\s+suppose|possibly|kind\s+of|sort\s+of|if\s+i\s+remember\s+correctly|iirc)\b",
    _I,
)
_HEDGE_STRIP = re.compile(
    r"好像|似乎|(?<![尽不])可能(?:会)?|也许|大概|说不定|或许|估计|貌似|应该(?=是)|"
    r"\b(?:i\s+think\s+maybe|i\s+guess|probably|maybe|perhaps|possibly|kind\s+of|sort\s+of|"
    r"i\s+suppose|might)\b,?\s*",
    _I,
)
_LEAD_FILLER = re.compile(
    r"^(?:(?:更正一下|更正|纠正一下|纠正|说错了|我说错了|不对|更新一下|计划有变)[：:，,\s]*"
    r"|(?:correction|update|sorry|scratch\s+that|i\s+misspoke|change\s+of\s+plans?)\b[:,\s]*"
    # an announcement before the news: "跟你说个消息：我搬到上海了", "Guess what, I got the job"
    r"|(?:(?:跟|和|给)你说|告诉你)(?:个|一个|件|一件)?(?:好|坏)?(?:消息|事|事情)?[：:，,!！\s]*"
    r"|(?:好消息|坏消息|有个消息|有件事)[：:，,!！\s]*"
    r"|(?:guess\s+what|(?:good|great|big|some|bad)\s+news|quick\s+update|life\s+update|heads\s+up)\b[:,!\s]*"
    r"|(?:其实|另外|还有|而且|但是|不过|对了|顺便说一下|顺便说一句|顺便|所以|然后|总之|"
    r"说实话|老实说|坦白说|我觉得|我认为)[，,\s]*"
    r"|(?:嗯|哦|噢|对|而|也|但|我想)(?:[，,\s]+|(?=我))"
    # a time before the subject: "现在我老板是李总" reads as "我(现在)老板是李总"
    r"|(?:现在|目前|如今)[，,\s]*(?=我(?!们))"
    r"|(?:also|and|but|so|actually|btw|by\s+the\s+way|oh|well|honestly|just\s+so\s+you\s+know|fyi|"
    r"for\s+the\s+record|anyway|plus|then|i\s+think|i\s+believe|i\s+feel\s+like|in\s+general|"
    r"to\s+be\s+honest|tbh|ok|okay|yes|yeah|no|right|please|pls|kindly)\b[,\s]*)+",
    _I,
)
_QUESTION_EN = re.compile(
    r"^(?:what|who|whom|whose|where|when|why|how|which|do(?!\s+not\b)|does|did|is|are|am|was|were|"
    r"can|could|would|should|will|shall|have|has|may|isn't|aren't|didn't|doesn't|won't|wouldn't)\b",
    _I,
)
_QUESTION_ZH = re.compile(
    r"[吗么]$|什么(?!都|也)|哪(?:里|儿|个|些|种|家|位|年|天|一)|谁(?!都|也)|怎么|为什么|为何|是不是|"
    r"有没有|要不要|能不能|可不可以|会不会|对不对|好不好|行不行|是否|多少|几点|几岁|难道"
)
_TEMPORARY = re.compile(
    r"今天|今晚|明天|昨天|现在|刚才|这会儿|马上|一会儿|待会|这周|本周|"
    r"\b(?:right\s+now|today|tonight|tomorrow|yesterday|at\s+the\s+moment|this\s+(?:morning|afternoon|evening|week))\b",
    _I,
)


def _is_question(sentence: str) -> bool:
    s = sentence.strip()
    if s.endswith(("?", "？")):
        return True
    core = _LEAD_FILLER.sub("", _trim(s))
    if _QUESTION_EN.match(core):
        return True
    return bool(_HAN.search(core) and _QUESTION_ZH.search(_trim(core)))


# What makes a clause a request to the assistant or a question the stricter pattern above
# leaves to the extractor: "can you ...", "any tips ...", 帮我/推荐 ..., 多久/啥/咋/如何.
_REQUEST_EN = re.compile(
    r"^(?:(?:can|could|would|will)\s+you|please|pls|plz|help\s+me|(?:give|tell|show|send|find|get)\s+me|"
    r"recommend|suggest|any\s+(?:tips?|ideas?|suggestions?|recommendations?|advice|thoughts)|what\s+about|"
    r"how\s+about|thoughts\s+on|ideas\s+for)\b",
    _I,
)
_REQUEST_ZH = re.compile(r"^(?:帮我|帮忙|麻烦|请你?|给我|推荐|能不能|能否|可以帮|你能|你可以|求)")
_ASKS_ZH = re.compile(r"多久|多长时间|咋|啥(?!都|也)|如何")
# An instruction to the assistant: a verb with 个 / 一下 / 点 and a closing 吧 ("加个表格吧",
# "改短点吧", "再写一下吧"); not a plan of ours ("我们去吃个火锅吧", "国庆就在上海待着吧").
_INSTRUCTS_ZH = re.compile(
    r"^(?:再|先|就|那)?[\u4e00-\u9fff]{1,2}(?:个|一下|一个|点|几个)[^我咱]{0,12}吧[！!。.～~]*$"
)
# Chat Chinese separates clauses with spaces too: "女朋友小雨生日快到了 送啥好啊".
_CLAUSE_SPLIT = re.compile(r"[，,;；、]|(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")
_FIRST_PERSON_ANY = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|ours|us)\b|我|咱"
    # The same in the other languages the default embedder reads: a clause of a question
    # that says "I" states something of its own ("je suis kiné en libéral, je peux ... ?").
    r"|\b(?:yo|mi|mis|nosotr[oa]s|nuestr[oa]s?|je|moi|mon|ma|mes|nous|notre|nos|ich|mich|mir|"
    r"mein(?:e[mnrs]?)?|wir|uns|unser(?:e[mnrs]?)?|eu|meu|minha|meus|minhas|comigo|nós|noss[oa]s?|"
    r"io|mio|mia|miei|noi|nostr[oaie]|я|мне|меня|мной|мо[йяеёи]|моего|моей|мы|нас|нам|наш[аеи]?)\b"
    r"|\bj'|私|僕|俺|わたし|あたし|(?<![가-힣])(?:나|저|내|제|우리|저희)(?:는|가|도|의)?(?![가-힣])",
    _I,
)


# Without a question mark, an English question opens with a wh-word or with an auxiliary
# and its subject: "Has a ginger cat" is a note that dropped its subject, "has it" asks.
_ASKS_EN = re.compile(
    r"^(?:(?:what|who|whom|whose|where|when|why|how|which)\b|(?:do|does|did|is|are|am|was|were|can|could|"
    r"would|should|will|shall|have|has|may|isn't|aren't|didn't|doesn't|won't|wouldn't)\s+"
    r"(?:i|you|he|she|it|we|they|there|this|that|these|those|my|your|his|her|its|our|their|the|[A-Z]\w*)\b)",
)


def _asks(clause: str) -> bool:
    text = clause.strip()
    core = _LEAD_FILLER.sub("", _trim(text))
    if text.endswith(("?", "？")) or _REQUEST_EN.match(core) or _REQUEST_ZH.match(core):
        return True
    if _HAN.search(core):
        return bool(
            _QUESTION_ZH.search(core)
            or _ASKS_ZH.search(core)
            or _INSTRUCTS_ZH.match(_LEAD_FILLER.sub("", text))
        )
    return bool(_ASKS_EN.match(core[:1].lower() + core[1:]))


def _says_nothing(clause: str) -> bool:
    """A clause too short to state anything ("oh cute", "fair", "好的"), or small talk; not
    one with a number or a name after its first word ("it's Slack")."""
    text = _trim(clause)
    if not text or low_value_reason(text) is not None:
        return True
    # Kana count half a Han character: Japanese spells with them what Chinese writes in Han.
    han = len(_HAN.findall(text)) + len(_KANA.findall(text)) / 2
    if han:
        return han <= 3 and not any(ch.isdigit() for ch in text)
    words = text.split()
    return (
        len(words) <= 2
        and not any(ch.isdigit() for ch in text)
        and not any(w[:1].isupper() for w in words[1:])
    )


def stated_clauses(text: str) -> list[str]:
    """The clauses of a turn that state something: neither asking (a question, a request to
    the assistant) nor too short to say anything (see :func:`asks_only`). In a question, or
    after a clause that asks, a clause about no one of us is part of what is asked ("and seat
    covers for dog hair, any recommendation?", "推荐几家火锅吧 要本地人去的那种"); "my Civic's
    light came on, is it safe?" states something first."""
    return _read_clauses(text)[1]


def states_nothing(text: str) -> bool:
    """Whether no clause of a turn states anything (see :func:`stated_clauses`): it only
    asks (:func:`asks_only`), or only answers or reacts ("yes pls", "perfect", "要！")."""
    return not _read_clauses(text)[1]


def asks_only(text: str) -> bool:
    """Whether a turn only asks: every clause a question or a request to the assistant
    ("how long does it take for them to settle in?", "牛腩要炖多久啊", "推荐几家火锅吧") or too
    short to state anything, and at least one asks. A turn that also states something
    ("我儿子8岁，二年级，数学老是粗心，有啥办法吗") does not: the person said that."""
    asks, stated = _read_clauses(text)
    return asks and not stated


def _read_clauses(text: str) -> tuple[bool, list[str]]:
    """Whether any clause of ``text`` asks, and the clauses that state something."""
    asks, stated = False, []
    for part in (p for s in _sentences(text) for p in question_apart(s)):
        asking = part.rstrip().endswith(("?", "？"))
        for clause in _CLAUSE_SPLIT.split(part):
            if _asks(clause):
                asks = asking = True  # what follows in the sentence may say more of what is asked
            elif not (_says_nothing(clause) or (asking and not _FIRST_PERSON_ANY.search(clause))):
                stated.append(clause)
    return asks, stated


# Summaries in the third person: "The user prefers X" is read as "I prefer X".
_SUMMARY_SUBJECT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:the\s+)?user\s+is\b", _I), "I am"),
    (re.compile(r"^(?:the\s+)?user's\b", _I), "my"),
    (re.compile(r"^(?:the\s+)?user\s+has\b", _I), "I have"),
    (re.compile(r"^(?:the\s+)?user\s+((?:\w+ly\s+)?)(\w+?)(?<!s)s\b", _I), r"I \1\2"),
    (re.compile(r"^用户的"), "我的"),
    (re.compile(r"^用户"), "我"),
)


def _first_person(text: str) -> str:
    for pattern, repl in _SUMMARY_SUBJECT:
        new = pattern.sub(repl, text, count=1)
        if new != text:
            return new
    return text


_MIGHT_BE = re.compile(r"^(i)\s+(?:might|may|could)\s+be\b", _I)


def _core(clause: str) -> str:
    """The clause as matched: lead fillers, hedge words and trailing particles removed."""
    out = _trim(clause)
    out = _LEAD_FILLER.sub("", out)
    out = _MIGHT_BE.sub(r"\1 am", out)
    out = _HEDGE_STRIP.sub("", out)
    out = _LEAD_FILLER.sub("", out)
    out = _first_person(out)
    out = re.sub(r"[ \t]{2,}", " ", out)
    return _trim(out)


# -- rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hit:
    memory_type: MemoryType
    rule: str
    confidence: float
    key: str | None = None
    structured: dict[str, Any] | None = None


def _fact(rule: str, key: str | None, value: str) -> _Hit | None:
    value = _value(value)
    if not value or _PRONOUN_OBJECT.match(value):
        return None
    structured = {"key": key, "value": value} if key else {"value": value}
    return _Hit(MemoryType.FACT, rule, CONFIDENCE_FACT, key, structured)


# --- decisions

_DECISION_ZH = re.compile(
    r"^(?:我们|咱们|我|大家)?(?:的)?(?:团队|小组|组|项目组|公司|部门)?(?P<adv>(?:已经|最后|最终|还是|一致|刚刚|都|也)*)"
    r"(?P<verb>决定不(?:再)?|决定|选择|选了|选定|敲定|确定(?=用|使用|采用|选)|定(?=了|下|用))"
    r"(?:了|下来|下)?[，,：:\s]*(?:要|还是|先|就)?"
    r"(?:用|使用|采用|选用|选|改用|换成|换用|迁移到|切换到|上)?\s*(?P<tail>.+)$"
)
_DECISION_ZH_SHORT = re.compile(
    r"^(?:(?:那|那么)?(?:我们|咱们)?就(?:用|选|定)|(?:我们|咱们|团队)(?:还是|就|以后)?(?:用|使用|采用)(?=.+(?:而不是|而非)))"
    r"(?P<tail>.+)$"
)
_DECISION_EN = re.compile(
    r"^(?:(?:we|i|the\s+team|our\s+team|my\s+team|everyone)(?:\s+have|'ve|\s+had|'d)?\s+"
    r"(?:finally\s+|eventually\s+|already\s+|just\s+|officially\s+|all\s+)?"
    r"(?:decided|agreed|chose|chosen|picked|selected|settled\s+on|opted|went\s+with|gone\s+with)"
    r"|(?:we|the\s+team)(?:\s+are|'re|\s+will|'ll)\s+(?:going\s+with|go\s+with|going\s+to\s+(?:use|go\s+with)|sticking\s+with)"
    r"|let's\s+(?:go\s+with|use|stick\s+with|pick|choose)"
    r"|(?:going|go)\s+with"
    r"|(?:we|the\s+team)(?:'ll|\s+will)\s+(?:use|adopt|stick\s+with)"
    r"|(?:we|the\s+team)\s+(?:use|are\s+using|'re\s+using)(?=.+\b(?:instead\s+of|rather\s+than)\b)"
    r"|let\s+us\s+(?:go\s+with|use)"
    r"|the\s+decision\s+(?:is|was)(?:\s+to)?"
    r")\b(?P<tail>.*)$",
    _I,
)
_DECISION_EN_TAIL = re.compile(
    r"^\s*(?:that\s+)?(?P<neg>not\s+to\s+|against\s+)?(?:on\s+|for\s+|to\s+)?"
    r"(?:(?:use|using|go\s+with|adopt|adopting|(?:switch|switching|migrate|migrating|move|moving)(?:\s+to)?|"
    r"stick\s+with|keep|pick|choose)\s+)?"
    r"(?P<tail>.+)$",
    _I,
)
_REASON = re.compile(
    r"[，,]?\s*(?:因为|由于|原因是|理由是|主要是因为)|[,，]?\s*\b(?:because(?:\s+of)?|since|due\s+to|as\s+it|as\s+they)\b",
    _I,
)
_REJECT = re.compile(
    r"\s*[，,]?\s*(?:而不是|而非|而没有(?:用|选)?|不用|不选|代替|取代|替代|替换掉?)\s*"
    r"|\s+(?:instead\s+of|rather\s+than|over|in\s+place\s+of)\s+|\s*[，,]\s*not\s+",
    _I,
)
_SWITCH = re.compile(
    r"^(?:from\s+(?P<en_old>.+?)\s+to\s+(?P<en_new>.+)|从(?P<zh_old>.+?)(?:迁移到|换成|改成|切换到|改用|换到)(?P<zh_new>.+))$",
    _I,
)
_LIST_SPLIT = re.compile(r"\s*(?:、|和|或者?|以及|及|/|,|，|\band\b|\bor\b)\s*", _I)


def _split_list(text: str) -> list[str]:
    return [v for v in (_value(p) for p in _LIST_SPLIT.split(_trim(text))) if v]


def _decision_parts(tail: str, negative: bool) -> dict[str, Any] | None:
    reason: str | None = None
    m = _REASON.search(tail)
    if m and m.start() > 0:
        reason = _trim(tail[m.end() :]) or None
        tail = tail[: m.start()]
    tail = _trim(tail)
    rejected: list[str] = []
    sw = _SWITCH.match(tail)
    if sw:
        old = sw.group("en_old") or sw.group("zh_old") or ""
        new = sw.group("en_new") or sw.group("zh_new") or ""
        rejected = _split_list(old)
        tail = new
    else:
        m = _REJECT.search(tail)
        if m and m.start() > 0:
            rejected = _split_list(tail[m.end() :])
            tail = tail[: m.start()]
    choice: str | None = _QUOTES.sub("", _trim(tail)).strip() or None
    if negative:
        if choice:
            rejected = [*_split_list(choice), *rejected]
        choice = None
    if choice is None and not rejected:
        return None
    if choice is not None and _PRONOUN_OBJECT.match(choice) and not rejected:
        return None
    return {"choice": choice, "rejected": rejected, "reason": reason}


def _decision(core: str) -> _Hit | None:
    if _TEMPORARY.search(core):
        return None  # "我决定明天去北京" is a plan for a day, not a lasting decision
    m = _DECISION_ZH.match(core)
    if m and (m.group("verb") != "定" or re.search("最后|最终", m.group("adv"))):
        parts = _decision_parts(m.group("tail"), m.group("verb").startswith("决定不"))
        if parts:
            return _Hit(MemoryType.DECISION, "rule:decision-zh", CONFIDENCE_DECISION, None, parts)
    m = _DECISION_ZH_SHORT.match(core)
    if m:
        parts = _decision_parts(m.group("tail"), False)
        if parts:
            return _Hit(MemoryType.DECISION, "rule:decision-zh", CONFIDENCE_DECISION, None, parts)
    m = _DECISION_EN.match(core)
    if m:
        t = _DECISION_EN_TAIL.match(m.group("tail"))
        if t:
            parts = _decision_parts(t.group("tail"), bool(t.group("neg")))
            if parts:
                return _Hit(MemoryType.DECISION, "rule:decision-en", CONFIDENCE_DECISION, None, parts)
    return None


# --- constraints

_CONSTRAINT_ZH = re.compile(
    r"必须|一定要|一定得|务必|(?<!不)不能(?!确定|肯定|理解|想象|相信|说)|不可以|不允许|不准|禁止|不得|严禁|只能|"
    r"千万(?:不要|别)|绝对不(?:能|要)|^(?:不要|别|永远不要|永远别)(?!忘)"
)
_MUST_NOT_ZH = re.compile(r"不能|不可以|不允许|不准|禁止|不得|严禁|千万|绝对不|^不要|^别|^永远")
_CONSTRAINT_EN = re.compile(
    r"\b(?:must(?:n't|\s+not)?|has\s+to|have\s+to|needs?\s+to\s+(?:support|be|run|work|handle|stay|use|have|"
    r"comply|pass|follow|include|remain|avoid|keep|stay)|cannot|can't|can\s+not|may\s+not|"
    r"never\s+(?:use|commit|push|deploy|store|log|call|expose|share|send|modify|delete|touch|add|rely|"
    r"hardcode|hard-code|put|write|run|mention|include)|"
    r"(?:is|are)\s+(?:not\s+)?(?:allowed|permitted|required|forbidden|prohibited|mandatory)|"
    r"should\s+never|shall(?:\s+not)?|only\s+use|do\s+not\s+use|don't\s+use|avoid\s+using)\b"
    r"|^(?:always|never|don't|do\s+not|avoid)\s",
    _I,
)
_MUST_NOT_EN = re.compile(
    r"\b(?:mustn't|must\s+not|cannot|can't|can\s+not|may\s+not|never|not\s+allowed|not\s+permitted|"
    r"forbidden|prohibited|should\s+never|shall\s+not|do\s+not|don't|avoid)\b",
    _I,
)
_CONSTRAINT_EN_EXCLUDE = re.compile(
    r"^must\s+be\b|\byou\s+must\s+be\b|\b(?:must\s+(?:say|admit|be\s+joking|be\s+kidding)|can't\s+(?:believe|wait|remember|find|see|tell|decide|stand|"
    r"make\s+it|help)|cannot\s+(?:believe|wait|remember|find|see|tell|decide|stand)|"
    r"i\s+(?:really\s+|just\s+)?(?:have|had)\s+to\s+(?:go|leave|run|admit|say)|don't\s+know|"
    r"do\s+not\s+know|don't\s+(?:forget|worry|mind)|never\s+mind|anymore|any\s+more|no\s+longer)\b"
    # guesses, not rules: "this must be a bug", "it must have been the cache"
    r"|\bmust\s+have\s+been\b|\bmust've\b|^(?:this|that|there|which)\s+must\s+be\b"
    # inability, not a rule: "I can't figure out why" (but "I can't eat peanuts" is one)
    r"|^i\s+(?:really\s+|just\s+|still\s+)?(?:can't|cannot|can\s+not)\s+"
    r"(?!eat|drink|have|use|tolerate|consume|take|work\s+(?:on|after|before|weekends))"
    # about the code at hand, not a lasting rule
    r"|\bhere\b",
    _I,
)
_CONSTRAINT_ZH_EXCLUDE = re.compile(
    r"必须(?:说|承认)|不得不说|一定要(?:试|去|看|尝|来)|不能(?:正常|用了|运行|打开|启动|连接|访问|登录|加载|编译|工作)|这里|这儿"
)


# Standing instructions: "以后都用中文回答", "from now on, reply in English".
_FROM_NOW_ON = re.compile(
    r"^(?:以后|今后|从现在开始|从现在起|从今以后|从今往后|之后)[，,\s]*(?:请你?|你|都|也|一律|永远)*(?P<rest>.+)$"
    r"|^(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|from\s+here\s+on(?:\s+out)?)[,\s]+"
    r"(?:please\s+)?(?P<rest_en>.+)$",
    _I,
)
# "我对海鲜过敏，吃了会起疹子": what follows the allergy is its detail.
_ALLERGY_ZH = re.compile(
    r"^我(?:对|吃)(?P<x>[^，,]+?)(?:会|就|也)?(?:严重|非常|很|有点|都)?过敏(?:[，,].*)?$"
)
_ALLERGY_EN = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?:severely\s+|very\s+|highly\s+)?allergic\s+to\s+(?P<x>.+)$", _I
)


def _constraint(core: str) -> _Hit | None:
    m = _FROM_NOW_ON.match(core)
    rest = _trim((m.group("rest") or m.group("rest_en") or "") if m else "")
    if m and len(rest) >= 2:
        rule = "rule:constraint-zh" if _HAN.search(core) else "rule:constraint-en"
        modality = "must_not" if _MUST_NOT_ZH.search(rest) or _MUST_NOT_EN.search(rest) else "must"
        return _Hit(MemoryType.CONSTRAINT, rule, CONFIDENCE_CONSTRAINT, None, {"modality": modality})
    if _TEMPORARY.search(core):
        return None
    m = _ALLERGY_ZH.match(core) or _ALLERGY_EN.match(core)
    if m:
        allergen = _value(m.group("x"))
        if allergen:
            rule = "rule:constraint-zh" if _HAN.search(core) else "rule:constraint-en"
            return _Hit(
                MemoryType.CONSTRAINT,
                rule,
                CONFIDENCE_CONSTRAINT,
                f"allergy:{_slot(allergen)}",
                {"modality": "must_not", "allergy": allergen},
            )
    if _HAN.search(core) and _CONSTRAINT_ZH.search(core) and not _CONSTRAINT_ZH_EXCLUDE.search(core):
        modality = "must_not" if _MUST_NOT_ZH.search(core) else "must"
        return _Hit(
            MemoryType.CONSTRAINT, "rule:constraint-zh", CONFIDENCE_CONSTRAINT, None, {"modality": modality}
        )
    if _CONSTRAINT_EN.search(core) and not _CONSTRAINT_EN_EXCLUDE.search(core):
        modality = "must_not" if _MUST_NOT_EN.search(core) else "must"
        return _Hit(
            MemoryType.CONSTRAINT, "rule:constraint-en", CONFIDENCE_CONSTRAINT, None, {"modality": modality}
        )
    return None


# --- skills

_SKILL_ZH = re.compile(
    r"^我(?:比较|非常|很|挺|特别|相当|还算|也|还)*(?:熟悉|精通|擅长|熟练(?:掌握|使用)?|会用|懂|掌握了?|会写|会说)"
    r"(?P<obj>.+)$"
)
_SKILL_ZH_EXPERIENCE = re.compile(
    r"^我有(?:[\d一二三四五六七八九十两几多半]+年(?:多)?)?(?:的)?(?P<obj>.+?)(?:开发|编程|工作|使用|相关)?经验$"
)
_SKILL_EN = (
    re.compile(
        r"^(?:i'm|i\s+am)\s+(?:very\s+|really\s+|quite\s+|pretty\s+|highly\s+|fairly\s+|also\s+)?"
        r"(?:experienced\s+(?:with|in|at)|familiar\s+with|proficient\s+(?:in|with|at)|good\s+at|great\s+at|"
        r"skilled\s+(?:in|at|with)|an?\s+expert\s+(?:in|on|at|with)|fluent\s+in|comfortable\s+with|"
        r"well[-\s]versed\s+in)\s+(?P<obj>.+)$",
        _I,
    ),
    re.compile(r"^i\s+know\s+(?P<obj>.+?)\s+(?:very\s+|really\s+|pretty\s+|quite\s+)?well$", _I),
    re.compile(
        r"^i(?:\s+have|'ve|\s+got|'ve\s+got)\s+(?:\S+\s+)?(?:years?|decades?)\s+of\s+(?:professional\s+)?"
        r"experience\s+(?:with|in|using)\s+(?P<obj>.+)$",
        _I,
    ),
    re.compile(r"^i\s+(?:can\s+)?speak\s+(?P<obj>.+?)(?:\s+fluently)?$", _I),
    re.compile(
        r"^i(?:'ve|\s+have)\s+been\s+(?:using|writing|programming\s+in|working\s+with|coding\s+in|doing)\s+"
        r"(?P<obj>.+?)\s+(?:for|since)\s+(?:over\s+|more\s+than\s+|about\s+|almost\s+)?\S+\s*(?:years?|decades?)?$",
        _I,
    ),
)


def _skill_hit(rule: str, obj: str) -> _Hit | None:
    value = _value(obj, keep_and=True)
    if not value or _PRONOUN_OBJECT.match(value) or value in {"了", "的"}:
        return None
    return _Hit(MemoryType.SKILL, rule, CONFIDENCE_SKILL, f"skill:{_slot(value)}", {"skill": value})


def _skill(core: str) -> _Hit | None:
    for pattern in (_SKILL_ZH, _SKILL_ZH_EXPERIENCE):
        m = pattern.match(core)
        if m:
            return _skill_hit("rule:skill-zh", m.group("obj"))
    for pattern in _SKILL_EN:
        m = pattern.match(core)
        if m:
            return _skill_hit("rule:skill-en", m.group("obj"))
    return None


# --- habits

_HABIT_ZH = re.compile(
    r"^(?:我(?:平时|平常)?(?P<a1>通常|每天|一般|经常|平时|平常|习惯(?:于)?|总是|常常|每周|每个?星期|每晚|每个?月|一向|向来|天天)"
    r"|(?P<a2>每天早上|每天晚上|每天|每周|每晚|平时|周末|早上|晚上)[，,\s]*我(?:一般|通常|都|会|总是|经常)*)(?P<rest>.+)$"
)
_HABIT_EN = (
    re.compile(
        r"^i\s+(?P<a1>usually|always|normally|often|typically|regularly|tend\s+to|every\s+(?:day|morning|night|"
        r"evening|week))\s+(?P<rest>.+)$",
        _I,
    ),
    re.compile(
        r"^(?P<a1>every\s+(?:morning|day|night|evening|week|weekend|monday|friday)|on\s+weekends|"
        r"most\s+(?:days|mornings|evenings)|usually),?\s+i\s+(?P<rest>.+)$",
        _I,
    ),
)


def _habit(core: str) -> _Hit | None:
    m = _HABIT_ZH.match(core)
    rule = "rule:habit-zh"
    if not m:
        rule = "rule:habit-en"
        for pattern in _HABIT_EN:
            m = pattern.match(core)
            if m:
                break
    if not m:
        return None
    rest = _trim(re.sub(r"^(?:都|会|要|也|还)+", "", m.group("rest")))
    if len(rest) < 2:
        return None
    adv = m.groupdict().get("a1") or m.groupdict().get("a2") or ""
    return _Hit(MemoryType.HABIT, rule, CONFIDENCE_HABIT, None, {"habit": rest, "frequency": adv})


# --- preferences

_FAVOURITE_ZH = re.compile(r"^我(?:最|最最)(?:喜欢|爱|常用)的(?P<cat>.+?)(?:是|就是)(?P<obj>.+)$")
_FAVOURITE_EN = re.compile(
    r"^my\s+(?:all-time\s+)?(?:favou?rite|preferred)\s+(?P<cat>.+?)\s+is\s+(?P<obj>.+)$", _I
)
_COMPARE_ZH = re.compile(
    r"^(?:比起|相比(?:于)?|与其(?:用)?)(?P<over>.+?)[，,\s]*(?:来说|而言)?[，,\s]*(?:我)?(?:还是|更|其实)*"
    r"(?:更|宁愿|宁可)(?:喜欢|偏好|倾向于|愿意)?(?:用|使用)?(?P<obj>.+)$"
)
_PREFERENCE_ZH = re.compile(
    r"^我(?:是)?(?:也|还|一直|真的|确实|特别|非常|很|最|比较|挺|蛮|超|超级|更|都|从来|向来|其实)*"
    r"(?P<verb>(?:不再|再也不|已经不)(?:想)?用|(?:不再|再也不|已经不|不)(?:太|怎么|是很|大)?(?:喜欢|爱|想用)|讨厌|反感|厌恶|受不了|喜欢|偏好|偏爱|喜爱|钟爱|爱|倾向于|宁愿|宁可)"
    r"(?P<obj>.+)$"
)
_DISLIKE_ZH = re.compile(r"^(?:不|再也不|已经不|讨厌|反感|厌恶|受不了)")
_PREFERENCE_EN = re.compile(
    r"^i(?:\s+|(?='))(?:(?:really|also|just|much|definitely|generally|strongly|absolutely|totally|still|do|"
    r"actually|personally|very\s+much|always)\s+)*"
    r"(?P<verb>prefer|like|love|enjoy|adore|dislike|hate|detest|despise|loathe|can't\s+stand|cannot\s+stand|"
    r"don't\s+(?:really\s+)?(?:like|enjoy|love|care\s+for)|do\s+not\s+(?:like|enjoy|love)|'d\s+rather|would\s+rather|"
    r"'d\s+prefer|would\s+prefer|no\s+longer\s+(?:like|prefer|love|enjoy|use|want)|"
    r"(?:don't|do\s+not)\s+(?:prefer|use|want)(?=\s+.+\b(?:anymore|any\s+more)\b))\s+(?P<obj>.+)$",
    _I,
)
_FAN_EN = re.compile(
    r"^(?:i'm|i\s+am)\s+(?P<neg>not\s+)?(?:a\s+)?(?:big\s+|huge\s+|great\s+)?fan\s+of\s+(?P<obj>.+)$", _I
)
_DISLIKE_EN = re.compile(
    r"^(?:dislike|hate|detest|despise|loathe|can't|cannot|don't|do\s+not|no\s+longer)", _I
)
_OVER_ZH = re.compile(r"\s*[，,]?\s*(?:而不是|而非|胜过|多于|超过|不喜欢)\s*")
_OVER_EN = re.compile(r"\s+(?:over|rather\s+than|instead\s+of|more\s+than|than)\s+", _I)
_OVER_EN_TO = re.compile(r"\s+to\s+", _I)


_OBJECT_VERB = re.compile(r"^(?:to\s+use|using|use|用|使用|死)\s*(?=\S)", _I)


# "no longer", "不再", "anymore": the user says an earlier preference has ended.
_CHANGE = re.compile(r"不再|再也不|已经不|\bno\s+longer\b|\bany\s*more\b", _I)


def _preference_hit(
    rule: str, polarity: str, obj: str, over: list[str] | None = None, *, change: bool = False
) -> _Hit | None:
    value = _value(_OBJECT_VERB.sub("", obj.strip()), keep_and=True)
    if not value or _PRONOUN_OBJECT.match(value):
        return None
    structured: dict[str, Any] = {"polarity": polarity, "object": value}
    if over:
        structured["over"] = over
    if change:
        # No key: reconciliation then treats it as a reversed polarity (which always supersedes)
        # rather than a new value for a slot (which loses to a more confident old value).
        structured["change"] = "no_longer"
        return _Hit(MemoryType.PREFERENCE, rule, CONFIDENCE_PREFERENCE, None, structured)
    return _Hit(MemoryType.PREFERENCE, rule, CONFIDENCE_PREFERENCE, f"preference:{_slot(value)}", structured)


def _preference(core: str) -> _Hit | None:
    m = _FAVOURITE_ZH.match(core) or _FAVOURITE_EN.match(core)
    if m:
        rule = "rule:preference-zh" if _HAN.search(core) else "rule:preference-en"
        value = _value(m.group("obj"))
        cat = _value(m.group("cat"))
        if value and cat:
            return _Hit(
                MemoryType.PREFERENCE,
                rule,
                CONFIDENCE_PREFERENCE,
                f"favorite:{_slot(cat)}",
                {"polarity": "like", "object": value, "category": cat},
            )
    m = _COMPARE_ZH.match(core)
    if m:
        return _preference_hit("rule:preference-zh", "like", m.group("obj"), _split_list(m.group("over")))
    m = _PREFERENCE_ZH.match(core)
    if m:
        polarity = "dislike" if _DISLIKE_ZH.match(m.group("verb")) else "like"
        obj = m.group("obj")
        over: list[str] = []
        o = _OVER_ZH.search(obj)
        if o and o.start() > 0 and polarity == "like":
            over = _split_list(obj[o.end() :])
            obj = obj[: o.start()]
        change = polarity == "dislike" and bool(_CHANGE.search(m.group("verb")))
        return _preference_hit("rule:preference-zh", polarity, obj, over, change=change)
    m = _FAN_EN.match(core)
    if m:
        return _preference_hit("rule:preference-en", "dislike" if m.group("neg") else "like", m.group("obj"))
    m = _PREFERENCE_EN.match(core)
    if m:
        verb = m.group("verb")
        polarity = "dislike" if _DISLIKE_EN.match(verb) else "like"
        obj = m.group("obj")
        over = []
        if polarity == "like":
            o = _OVER_EN.search(obj)
            if o is None and "prefer" in verb.lower() and not obj.lower().startswith("to "):
                o = _OVER_EN_TO.search(obj)
            if o and o.start() > 0:
                over = _split_list(obj[o.end() :])
                obj = obj[: o.start()]
        change = polarity == "dislike" and bool(_CHANGE.search(core))
        return _preference_hit("rule:preference-en", polarity, obj, over, change=change)
    return None


# --- self-descriptions

_NAME_ZH = re.compile(r"^(?:我叫|我的名字(?:是|叫)|我名字(?:是|叫))(?P<v>.+?)(?:就行|就好|就可以)?$")
# "还/还是/依然/仍然" restate ("我还在阿里巴巴工作", "我还是住在北京"): the same fact, read so
# that reconciliation can reinforce it.
_EMPLOYER_ZH = re.compile(
    r"^我(?:现在|目前|一直|还是|还|依然|仍然)*(?:是)?(?:在|于)(?P<v>.+?)(?:工作|上班|任职|就职|实习)(?:了|过)?(?P<rest>.*)$"
)
_EMPLOYER_ZH2 = re.compile(r"^我(?:现在|目前)?(?:就职于|任职于|供职于)(?P<v>.+)$")
_LOCATION_ZH = re.compile(
    r"^我(?:现在|目前|一直|常年|还是|还|依然|仍然)*(?:住在|住(?=[^院了得下进过手店宿着])|定居在|定居于|生活在|居住在)(?P<v>.+)$"
    # the place before the verb: "我在北京租房住", "我现在在杭州住"
    r"|^我(?:现在|目前|一直|还是|还|依然|仍然)*在(?P<v2>[^，,在的]{2,10}?)(?:租房子?|租房)?住(?:着|呢)?$"
)
_MOVED_ZH = re.compile(
    r"^我(?:已经|刚|刚刚|最近|去年|前年|今年|上个?月|上周|上星期|前几天|前段时间|年初|这个月|其实)*"
    # A reason may follow the place: "搬到了 Tampines 的组屋，为了离幼儿园近一点".
    r"搬家?(?:到|去|来)了?(?P<v>[^，,]+?)(?:了|住)?(?P<rest>[，,].*)?$"
)
# "上个月我跳槽去了字节", "我在美团做后端开发", "我家就在青岛".
_JOB_CHANGE_ZH = re.compile(
    r"^(?:上个?月|去年|今年|最近|前不久|刚刚?)?我(?:已经|刚|刚刚|最近|上个?月|去年)*跳槽(?:去|到)了?(?P<v>[^，,]{2,12}?)了?$"
)
_WORK_AT_ZH = re.compile(r"^我(?:现在|目前|一直)?在(?P<v>[^，,在]{2,10}?)(?:做|当|负责|搞)[^，,]{2,10}$")
_HOME_ZH = re.compile(r"^我家(?:就|现在|目前)?(?:在|住在)(?P<v>[^，,]{2,12})$")
_PLAN_ZH = re.compile(r"打算|准备|计划|想|要|下个?月|明年|下周|将|会")
# "在家", "在这边": where, not a place or an organisation worth keeping.
_HERE_ZH = frozenset({"家", "家里", "这里", "那里", "这", "那", "这边", "那边"})
# Where one stays, not the city one lives in ("我在公司住", "我在宿舍住").
_NOT_HOME_ZH = frozenset({"公司", "学校", "宿舍", "酒店", "宾馆", "医院", "单位"})
_HOMETOWN_ZH = re.compile(
    r"^我(?:来自|老家(?:在|是)|出生在|出生于|是从)(?P<v>.+?)(?:来的)?$"
    # "我在大连长大", "我是在青岛长大的" (where one grew up, as "I grew up in" in English)
    r"|^我(?:是)?(?:从小)?在(?P<grew>[^，,在]{2,12}?)长大(?:的)?(?:[，,]不是.*)?$"
)
_DO_FOR_A_LIVING_ZH = re.compile(r"^我(?:现在|目前)?是(?:做|搞|干|当)(?P<v>[^，,的]{1,20})的$")
_IAM_ZH = re.compile(r"^我(?:现在|目前)?是(?P<mw>一名|一个|一位|一枚|个|名|位)?(?P<v>.+)$")
_IAM_ZH_EXCLUDE = re.compile(
    r"^(?:说|不是|不|否|想|觉得|在|要|会|因为|为了|真的|挺|很|有点|太|故意|开玩笑|认真|从|对|错|第一次|来|去|刚|"
    r"已经|还|这么|那么|这样|那样|怎么|问|指|讲|看|听|用|把|被|让)"
)
_PROFESSION_ZH = re.compile(
    r"(?:师|员|生|家|者|工|手|经理|总监|主管|顾问|开发|老板|医生|护士|律师|作家|博士|硕士|创始人|合伙人|"
    r"CEO|CTO|CFO|PM|负责人|老师|教授|司机|厨师|记者|编辑|主播|运营|产品|前端|后端|全栈|实习生|打工人)$",
    _I,
)
# Believers and fans are not occupations: 完美主义者, 素食主义者, 摄影爱好者, 咖啡控.
_TRAIT_ZH = re.compile(r"(?:主义者|爱好者|控|迷|党)$")
_NAME_EN = re.compile(
    r"^(?:my\s+name\s+is|my\s+name's|i'm\s+called|i\s+am\s+called)\s+(?P<v>.+)$",
    _I,
)
_IAM_NAME_EN = re.compile(
    r"^(?:I'm|I\s+am|Im)\s+(?P<v>(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})$"
)
_NOT_NAMES = frozenset(
    "sorry fine good okay ok back here done ready busy tired not going so very just also still in on at from the "
    "a an happy glad sure new home there english chinese american british".split()
)
_EMPLOYER_EN = re.compile(
    r"^(?:i|i'm|i\s+am)\s+(?:currently\s+|now\s+|still\s+)?(?:work|working|employed)\s+(?:at|for|with)\s+(?P<v>.+)$",
    _I,
)
_WORK_AS_EN = re.compile(r"^i\s+(?:currently\s+|now\s+)?work\s+as\s+(?:an?\s+)?(?P<v>.+)$", _I)
# "I just got promoted to senior engineer at Stripe": the new title is the profession.
_PROMOTED_EN = re.compile(
    r"^i(?:'ve|\s+have|'m|\s+am|\s+was)?\s+(?:just\s+|recently\s+|finally\s+|officially\s+)*"
    r"(?:got\s+|been\s+|was\s+|get\s+)?promoted\s+to\s+(?:an?\s+|the\s+)?(?P<v>.+)$",
    _I,
)
# "我升职成了高级工程师", "我被提拔为部门经理", "我刚晋升为主管"
_PROMOTED_ZH = re.compile(
    r"^我(?:已经|刚|刚刚|最近|上个?月|去年|今年|终于)*(?:升职|晋升|被提拔|被提升|升)(?:成了|成为了?|为|做了?|当上了?)"
    r"(?P<v>[^，,。]{2,15}?)了?$"
)
# "I joined Stripe last month": a named employer (capitalised), not "I joined a gym".
_JOINED_EN = re.compile(
    r"^I(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+|officially\s+)*"
    r"(?:joined|started\s+(?:working\s+)?at|(?:started|got|landed|took)\s+(?:a|the|my)\s+(?:new\s+)?"
    r"(?:job|position|role|gig)\s+(?:at|with)|accepted\s+(?:an|the)\s+offer\s+(?:from|at))\s+"
    r"(?P<v>[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})(?:\s+(?:as|in|on|last|this|a|two|three|\d)\b.*)?$"
)
_HOME_EN = re.compile(r"^(?:home\s+for\s+me\s+is|my\s+home\s+is\s+(?:in|now\s+in))\s+(?P<v>.+)$", _I)
_LOCATION_EN = re.compile(
    r"^(?:i|i'm|i\s+am)\s+(?:currently\s+|now\s+|still\s+)?(?:live|living|reside|residing|based|located)\s+"
    r"(?:in|at)\s+(?P<v>.+)$"
    r"|^i(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?(?:moved|relocated)\s+to\s+(?P<moved>.+)$",
    _I,
)
# Why or since when, after a place: "moved to Tampines to be closer to the kindergarten".
_PLACE_TAIL_EN = re.compile(
    r"\s+(?:to\s+(?:be|get|live|work|study|join|start|help|take|look)|for|after|last|this|with|in\s+order|"
    r"in\s+(?:(?:19|20)\d\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|spring|summer|autumn|fall|winter)|"
    r"(?:a|an|one|two|three|four|five|\d+)\s+(?:years?|months?|weeks?|days?)\s+ago)\b",
    _I,
)
_HOMETOWN_EN = re.compile(
    r"^(?:i'm|i\s+am|i|i\s+originally)\s+(?:originally\s+)?(?:from|come\s+from|came\s+from|grew\s+up\s+in|"
    r"was\s+born\s+in)\s+(?P<v>.+)$",
    _I,
)
_NOT_PLACE_EN = re.compile(r"\b(?:team|department|dept|company|office|group|squad|side|future|past)\b", _I)
_IAM_EN = re.compile(r"^(?:i'm|i\s+am|im)\s+(?:a|an)\s+(?P<v>.+)$", _I)
_IAM_EN_EXCLUDE = re.compile(
    r"^(?:bit|little|lot|tad|few|couple|big\s+fan|huge\s+fan|fan|way|long\s+way|good\s+way|lot)\b", _I
)
_NOT_PROFESSIONS = frozenset(
    "vegetarian vegan person fan beginner newbie novice parent mother father mom dad mum husband wife introvert "
    "extrovert christian muslim buddhist citizen native speaker guy girl man woman boy kid human riser sleeper owl "
    "bird drinker eater smoker user lover learner gamer member customer".split()
)
_PROFESSION_STOP = re.compile(r"\s+(?:at|for|in|with|from|who|that|based|working|by|on)\b", _I)
_MY_ATTR_ZH = re.compile(r"^我的(?P<attr>[^，,是]{1,10})是(?P<v>.+)$")
# Without 的 for the people one has one of at a time ("我老板是张总", "我导师是赵姐"), as spoken.
_MY_ROLE_ZH = re.compile(
    r"^我(?:现在的|现在|目前的|目前)?(?P<attr>老板|领导|上司|直属领导|经理|导师|房东|教练|班主任|主治医生|家庭医生)"
    # a value, not a description ("我领导是个好人", "我老板是很严格")
    r"是(?!(?:一)?[个位]|很|挺|非常|特别|不|有点|真)(?P<v>.+)$"
)

_MY_ATTR_EN = re.compile(r"^my\s+(?P<attr>[\w' -]{1,30}?)\s+(?:is|are)\s+(?P<v>.+)$", _I)


def _my_attr_match(core: str) -> re.Match[str] | None:
    return _MY_ATTR_ZH.match(core) or _MY_ROLE_ZH.match(core) or _MY_ATTR_EN.match(core)


_NOT_ATTRS = frozenset(
    "问题 意思 想法 目的 建议 需求 观点 question point problem guess idea issue concern bad pleasure "
    "understanding suggestion request goal".split()
)


def _self_description(core: str) -> _Hit | None:
    if _HAN.search(core):
        return _self_description_zh(core)
    return _self_description_en(core)


def _self_description_zh(core: str) -> _Hit | None:
    rule = "rule:self-zh"
    m = _NAME_ZH.match(core)
    if m:
        return _fact(rule, "name", m.group("v"))
    m = _EMPLOYER_ZH.match(core)
    if m and _value(m.group("v")) not in _HERE_ZH | {"公司"}:
        return _fact(rule, "employer", m.group("v"))
    m = _EMPLOYER_ZH2.match(core)
    if m:
        return _fact(rule, "employer", m.group("v"))
    m = _LOCATION_ZH.match(core)
    if m and _value(m.group("v") or m.group("v2")) not in _HERE_ZH | _NOT_HOME_ZH:
        return _fact(rule, "location", m.group("v") or m.group("v2"))
    m = _MOVED_ZH.match(core)
    # "我下个月要搬去深圳" is a plan, not where the user lives (a reason after it may say 要).
    if m and not _PLAN_ZH.search(core[: m.end("v")]):
        return _fact(rule, "location", m.group("v"))
    m = _HOMETOWN_ZH.match(core)
    if m:
        return _fact(rule, "hometown", m.group("v") or m.group("grew"))
    m = _JOB_CHANGE_ZH.match(core)
    if m and not _PLAN_ZH.search(m.group("v")):
        return _fact(rule, "employer", m.group("v"))
    # Where someone does their work, or where home is: a place or an organisation, which
    # the words do not tell apart, so no key (a key would let it retire an employer or a city).
    m = _WORK_AT_ZH.match(core) or _HOME_ZH.match(core)
    if m and _value(m.group("v")) not in _HERE_ZH:
        return _fact(rule, None, core)
    m = _DO_FOR_A_LIVING_ZH.match(core) or _PROMOTED_ZH.match(core)
    if m:
        return _fact(rule, "profession", m.group("v"))
    m = _IAM_ZH.match(core)
    if m and (m.group("mw") or not _IAM_ZH_EXCLUDE.match(m.group("v"))):
        return _iam_zh(rule, m)
    return None


def _iam_zh(rule: str, m: re.Match[str]) -> _Hit | None:
    """What "我是 X" says: a profession, where the user is from, a name, or another fact."""
    value = _value(m.group("v"))
    if not value or len(value) > 30:
        return None
    if value.endswith(("的人", "的")):
        return _fact(rule, None, value)
    if _PROFESSION_ZH.search(value) and not _TRAIT_ZH.search(value):
        return _fact(rule, "profession", value)
    if m.group("mw") in {"一名", "名"}:  # the measure word of occupations
        return _fact(rule, "profession", value)
    if m.group("mw"):
        return _fact(rule, None, value)
    if value.endswith("人") and 2 <= len(value) <= 6:
        return _fact(rule, "hometown", value[:-1])
    if 2 <= len(value) <= 4 and value[0] in SURNAMES_ZH and all(_HAN.match(c) for c in value):
        return _fact(rule, "name", value)
    return None


def _self_description_en(core: str) -> _Hit | None:
    rule = "rule:self-en"
    m = _NAME_EN.match(core)
    if m:
        return _fact(rule, "name", m.group("v"))
    m = _IAM_NAME_EN.match(core)
    if m and m.group("v").split()[0].lower() not in _NOT_NAMES:
        return _fact(rule, "name", m.group("v"))
    m = _EMPLOYER_EN.match(core)
    if m:
        return _fact(rule, "employer", m.group("v"))
    m = _WORK_AS_EN.match(core)
    if m:
        return _fact(rule, "profession", _PROFESSION_STOP.split(m.group("v"), maxsplit=1)[0])
    m = _PROMOTED_EN.match(core)
    if m:  # the title, without when or after what ("to team lead last week")
        title = _PROFESSION_STOP.split(m.group("v"), maxsplit=1)[0]
        return _fact(rule, "profession", _PLACE_TAIL_EN.split(title, maxsplit=1)[0])
    m = _JOINED_EN.match(core)
    if m and m.group("v").split()[0] not in ("The", "A", "An", "My", "Our"):
        return _fact(rule, "employer", m.group("v"))
    m = _HOME_EN.match(core)
    if m:
        return _fact(rule, "location", m.group("v"))
    m = _LOCATION_EN.match(core)
    if m:
        return _fact(
            rule, "location", _PLACE_TAIL_EN.split(m.group("v") or m.group("moved") or "", maxsplit=1)[0]
        )
    m = _HOMETOWN_EN.match(core)
    if m and not _NOT_PLACE_EN.search(m.group("v")):
        return _fact(rule, "hometown", m.group("v"))
    m = _IAM_EN.match(core)
    if m and not _IAM_EN_EXCLUDE.match(m.group("v")):
        value = _value(_PROFESSION_STOP.split(m.group("v"), maxsplit=1)[0])
        if not value or len(value.split()) > 5:
            return None
        last = value.split()[-1].lower()
        key = None if last in _NOT_PROFESSIONS else "profession"
        return _fact(rule, key, value)
    return None


# --- what the user likes to be called: "Call me Dave", "叫我小王就行", "My English name is Dave"

_PREFERRED_NAME_EN = re.compile(
    r"^(?:(?:you\s+(?:can|may)|just|feel\s+free\s+to|(?:most\s+)?people|everyone|everybody|friends|"
    r"my\s+friends)\s+)*(?:call|calls)\s+me\s+(?P<v>.+?)(?:\s+(?:please|instead|for\s+short))?$"
    r"|^i\s+(?:usually\s+|mostly\s+|prefer\s+to\s+)?go\s+by\s+(?P<by>.+)$"
    r"|^my\s+(?:english|chinese|preferred|nick|first|given)\s*name\s+(?:to\s+use\s+)?is\s+(?P<attr>.+)$"
    r"|^my\s+nickname\s+is\s+(?P<nick>.+)$",
    _I,
)
_PREFERRED_NAME_ZH = re.compile(
    r"^(?:你|您|大家|朋友们|同事们|别人)?(?:都|可以|就|直接)*叫我(?P<v>[^，,。]{1,12}?)(?:就行|就好|就可以|就行了|就好了)?$"
    r"|^我的?(?:(?:英文|中文)(?:名|名字)|昵称|小名|外号|网名)(?:是|叫)(?P<attr>[^，,。]{1,20})$"
)
# A name: capitalised words (Latin), or two to four Han characters with a surname or 小/老/阿 first.
_NAME_LIKE_EN = re.compile(r"^[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}$")
_NAME_LIKE_ZH = re.compile(
    rf"^(?:[小老阿{SURNAMES_ZH}][\u4e00-\u9fff]{{1,3}}|[A-Za-z][\w'-]*(?:\s+[A-Za-z][\w'-]*){{0,2}})$"
)
_NOT_NAME_ZH = re.compile(r"^(?:一|起|过|去|来|吃|回|上|下|出|进)|一声|一下")


def _preferred_name(core: str) -> _Hit | None:
    """The name the user wants to be called (key ``preferred_name``). After "call me" and
    "叫我" only a name counts: "Call me when you're done" and "叫我一声" are not names."""
    zh = bool(_HAN.search(core))
    m = (_PREFERRED_NAME_ZH if zh else _PREFERRED_NAME_EN).match(core)
    if m is None:
        return None
    value = _value(m.group("v") or m.groupdict().get("by") or "")
    explicit = _value(m.group("attr") or m.groupdict().get("nick") or "")
    if explicit:  # "my English name is ...", "我的昵称是 ...": the attribute says it is a name
        value = explicit
    elif zh:
        if not _NAME_LIKE_ZH.match(value) or _NOT_NAME_ZH.search(value):
            return None
    elif not _NAME_LIKE_EN.match(value) or value.split()[0].lower() in _NOT_NAMES:
        return None
    if not value or _PRONOUN_OBJECT.match(value):
        return None
    rule = "rule:self-zh" if zh else "rule:self-en"
    structured = {"key": "preferred_name", "value": value}
    return _Hit(MemoryType.FACT, rule, CONFIDENCE_FACT, "preferred_name", structured)


# --- what the user or their team is building, and its goal ("context")

# Things that are projects (not "a house" or "dinner"), in English and Chinese.
_PROJECT_NOUN_EN = (
    r"(?:app|apps|application|tool|cli|library|lib|package|sdk|api|service|microservice|backend|frontend|"
    r"website|site|web\s*app|platform|bot|chatbot|game|saas|startup|product|system|plugin|extension|"
    r"framework|engine|dashboard|pipeline|compiler|database|prototype|mvp|program|project|crawler|scraper|"
    r"agent|model|server|client|editor|emulator|interpreter|integration|marketplace|portal)"
)
_PROJECT_NOUN_ZH = (
    r"(?:应用|小程序|程序|软件|工具|网站|系统|平台|服务|后台|后端|前端|插件|游戏|项目|产品|框架|引擎|"
    r"机器人|客户端|编辑器|数据库|爬虫|模型|APP|App|app|API|SDK|CLI)"
)
_BUILDING_EN = re.compile(
    r"^(?:i'm|i\s+am|im|we're|we\s+are|i've\s+been|we've\s+been|the\s+team\s+is|my\s+team\s+is|our\s+team\s+is)\s+"
    r"(?:currently\s+|now\s+|still\s+)?(?:building|developing|writing|making|creating|coding|working\s+on)\s+"
    rf"(?P<v>(?:a|an|my|our|the|this)\s+(?:[\w.+#/-]+\s+){{0,4}}?{_PROJECT_NOUN_EN}\b.*)$",
    _I,
)
_GOAL_EN = re.compile(
    r"^(?:our|my|the\s+(?:project|team|product)'s|this\s+project's|the\s+team's)\s+"
    r"(?:main\s+|primary\s+|big\s+|overall\s+|current\s+)?(?:goal|aim|objective|mission|target)s?"
    r"(?:\s+(?:this|next|for\s+(?:this|the|next))\s+(?:quarter|year|month|sprint|release|milestone|project))?"
    r"\s+(?:is|are)\s+(?:to\s+)?(?P<v>.+)$"
    r"|^the\s+(?:goal|aim|objective)\s+of\s+(?:this|the|our)\s+project\s+is\s+(?:to\s+)?(?P<v2>.+)$",
    _I,
)
_BUILDING_ZH = re.compile(
    r"^(?:我|我们|咱们|团队|我们团队)(?:最近|目前|现在|正|正在|在|一直在|还在)+(?:做|开发|搭建|构建|打造|写|搞)"
    rf"(?P<v>(?:一个|一款|一套|个|款|套)?[^，,。]{{0,20}}?{_PROJECT_NOUN_ZH}.*)$"
)
_GOAL_ZH = re.compile(
    r"^(?:这个|本|该|我们的?|咱们的?|我的|团队的?)(?:项目|产品|团队|公司|系统)?的?(?:本季度|这个季度|今年|近期)?的?"
    r"(?:主要|核心|最终)?(?:目标|目的|愿景|使命)(?:是|就是|为|[:：])\s*(?P<v>.+)$"
)


def _project(core: str) -> _Hit | None:
    """What the user or their team is building ("I'm building a Rust CLI ...", "我在做一个
    记账小程序") and a project's goal ("Our goal this quarter is ...", "这个项目的目标是 ...")."""
    if _TODAY.search(core):
        return None  # "I'm writing a script right now" is the task at hand
    zh = bool(_HAN.search(core))
    m = (_BUILDING_ZH if zh else _BUILDING_EN).match(core)
    part = "project"
    if m is None:
        m = (_GOAL_ZH if zh else _GOAL_EN).match(core)
        part = "goal"
    if m is None:
        return None
    value = _trim(m.group("v") or m.groupdict().get("v2") or "")
    if len(value) < 2 or _PRONOUN_OBJECT.match(value) or (not zh and len(value.split()) < 2):
        return None  # "Our goal is simple" names no goal
    rule = "rule:context-zh" if zh else "rule:context-en"
    return _Hit(MemoryType.CONTEXT, rule, CONFIDENCE_CONTEXT, None, {part: value})


def _my_attribute(core: str) -> _Hit | None:
    """Facts like "my X is Y" or "我的X是Y" (key ``my:<X>``)."""
    m = _my_attr_match(core)
    if not m:
        return None
    attr = _trim(m.group("attr"))
    if not attr or attr.lower() in _NOT_ATTRS:
        return None
    rule = "rule:self-zh" if _HAN.search(core) else "rule:self-en"
    return _fact(rule, attribute_key(attr), m.group("v"))


# --- states, ages, family, "my X is Y", changed habits

_AGE_EN = re.compile(
    r"^(?:i'm|i\s+am|im|i\s+just\s+turned|i\s+turned)\s+(?:now\s+)?(?P<v>\d{1,3})(?:\s+years?\s+old)?$", _I
)
_AGE_ZH = re.compile(
    r"^我(?:今年|现在|已经|刚满|满)*(?P<v>\d{1,3}|[一二两三四五六七八九十]{1,3})(?:周)?岁了?$"
)
_STATE_EN = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?P<v>(?:(?:now|currently|still|no\s+longer|not)\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})$",
    _I,
)
# Passing moods, manners of speaking and half statements are not facts about the user.
_NOT_STATES = frozenset(
    "sorry fine good okay ok back here there done ready busy tired not going so very just also sure afraid glad happy "
    "sad hungry thirsty sick late early excited worried bored confused thinking trying looking about really "
    "still curious wondering kidding joking home in on at out off free available away listening wait "
    "the a an that this it gonna interested".split()
)
_KIN_EN = (
    r"(?:sister|brother|mother|mom|mum|father|dad|parents|son|daughter|kids|children|wife|husband|partner|"
    r"girlfriend|boyfriend|fiance|fiancee|cousin|grandma|grandpa|grandmother|grandfather|uncle|aunt|"
    r"dog|cat|best\s+friend)"
)
_KIN_FACT_EN = re.compile(
    rf"^my\s+{_KIN_EN}(?:'s\s+[\w-]+)?\s+(?:is|are|was|lives|live|moved|works|work|just|turned|has|have|goes|go|"
    r"got|started|studies|study)\b.+$",
    _I,
)
_KIN_ZH = (
    r"(?:姐姐|妹妹|哥哥|弟弟|妈妈|母亲|爸爸|父亲|父母|儿子|女儿|孩子|老婆|妻子|老公|丈夫|对象|男朋友|女朋友|"
    r"爷爷|奶奶|外公|外婆|家的狗|家的猫|家狗|家猫)"
)
_KIN_FACT_ZH = re.compile(
    rf"^我(?:的)?{_KIN_ZH}(?:的[^，,。]{{1,6}}?)?(?:今年|现在|已经|去年|刚|住|在|搬|是|叫|上|读|有|考|转|调|换)[^，,。]{{1,30}}$"
)
_STOPPED_EN = re.compile(
    r"^i\s+(?:no\s+longer|don't|do\s+not|stopped|quit|gave\s+up)\s+(?P<verb>drink|eat|drinking|eating|smoke|"
    r"smoking|use|using)\s+(?P<obj>.+?)(?:\s+(?:anymore|any\s+more))?$",
    _I,
)
_STOPPED_ZH = re.compile(
    r"^我(?:现在|已经|早就|最近)*(?:不再|不|戒了|没再)(?P<verb>喝|吃|抽|用)(?P<obj>[^，,]{1,12}?)了?$"
)
_SWITCHED_EN = re.compile(r"^i(?:'ve|\s+have)?\s+(?:now\s+)?switched\s+to\s+(?P<obj>.+)$", _I)
_SWITCHED_ZH = re.compile(
    r"^我(?:现在|已经|最近)*(?:改|换成|改成)(?P<verb>喝|吃|用|听|抽)(?P<obj>[^，,]{1,12}?)了?$"
)


# A health condition of the user's: "我有二型糖尿病", "我乳糖不耐受", "I have asthma".
_CONDITION = (
    r"(?:[^，,。]{1,8}?(?:病|症|炎)|[^，,。]{0,8}?(?:过敏|不耐受|哮喘|高血压|低血压|癫痫|痛风|贫血|色盲)|"
    r"(?:\w+\s+){0,2}(?:disease|disorder|syndrome|asthma|diabetes|epilepsy|hypertension|migraines?|gout|"
    r"anaemia|anemia|arthritis|allergy|allergies|intolerance|adhd|dyslexia|colou?r\s+blindness))"
)
_HEALTH_ZH = re.compile(
    rf"^我(?:从小|一直|本身)?(?:有|患有|得了|得过|确诊了?)(?P<v>{_CONDITION})$|^我(?P<v2>[^，,。]{{1,6}}不耐受)$"
)
_HEALTH_EN = re.compile(
    rf"^i(?:\s+have|'ve\s+got|\s+suffer\s+from|\s+was\s+diagnosed\s+with|\s+live\s+with)\s+"
    rf"(?:a\s+|an\s+|mild\s+|severe\s+|chronic\s+|type\s+[12]\s+)*(?P<v>{_CONDITION})\b"
    r"|^(?:i'm|i\s+am)\s+(?P<v2>(?:lactose|gluten)\s+intolerant|diabetic|asthmatic|epileptic|colou?r[-\s]blind)\b",
    _I,
)


def _condition(core: str, zh: bool) -> _Hit | None:
    m = (_HEALTH_ZH if zh else _HEALTH_EN).match(core)
    if not m:
        return None
    value = _value(m.group("v") or m.group("v2") or "")
    if not value:
        return None
    rule = "rule:self-zh" if zh else "rule:self-en"
    # One key per condition: a second condition is another fact, not a new value of the first.
    return _Hit(
        MemoryType.FACT,
        rule,
        CONFIDENCE_FACT,
        f"health:{' '.join(value.lower().split())}",
        {"key": "health", "value": value},
    )


def _personal(core: str) -> _Hit | None:
    """What the self-description rules leave out: an age, a health condition, a state ("I am
    vegetarian"), a family member's fact, "my X is Y", a habit given up or switched."""
    zh = bool(_HAN.search(core))
    rule = "rule:self-zh" if zh else "rule:self-en"
    m = _AGE_ZH.match(core) if zh else _AGE_EN.match(core)
    if m:
        return _fact(rule, "age", m.group("v"))
    health = _condition(core, zh)
    if health is not None:
        return health
    hit = _changed_habit(core, zh)
    if hit is not None:
        return hit
    m = _my_attr_match(core)
    # "my daughter is six" / "my daughter is a doctor": a person is no attribute with one value.
    person = m is not None and re.fullmatch(_KIN_ZH if zh else _KIN_EN, _trim(m.group("attr")), _I)
    mine = None if _TEMPORARY.search(core) or person else _my_attribute(core)
    if mine is not None:
        return mine
    if (_KIN_FACT_ZH if zh else _KIN_FACT_EN).match(core):
        return _fact(rule, None, core)
    m = None if zh else _STATE_EN.match(core)
    if m:
        words = m.group("v").lower().split()
        state = [w for w in words if w not in ("now", "currently", "still", "no", "longer", "not")]
        if state and state[0] not in _NOT_STATES and not state[0].endswith("ing") and not state[0].isdigit():
            return _fact(rule, None, core)
    return None


_VALUE_EN = re.compile(
    r"\d|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|july|"
    r"august|september|october|november|december|noon|midnight)\b",
    _I,
)
_VALUE_ZH = re.compile(
    r"\d|[一二两三四五六七八九十]+[个只岁年月日号点层楼周次分公斤块元万千倍本位名天码]|周[一二三四五六日]|星期"
)
# A name as the value of "is" ("My car is a Tesla"), not any capitalised word ("I use Vim").
_NAMED_EN = re.compile(
    r"\b(?:is|are|was|'s|runs|uses)\s+(?:(?:a|an|the|now|still|called|named|in|at|on|with|from|to)\s+)*(?!I\b)[A-Z][\w-]+"
)
# "Dinner with the Parkers is at 7pm": a dated or timed thing, whoever it is about.
_TIMED_EN = re.compile(r"\b(?:is|are|was|were)\s+(?:\w+\s+){0,2}(?:at|on|in|to|until|by)\s+", _I)
_OWN_ZH = re.compile(r"^(?:我|我们|我家|家里|咱们)[^，,]{0,10}的[^，,]{1,8}?(?:是|在|叫)[^，,]{1,20}$")
_MODAL = re.compile(
    r"\b(?:should|could|would|might|maybe|need\s+to|must|let's|if|will\s+be\s+able)\b|应该|可能|也许|如果|要不",
    _I,
)
_SUBJECT_EN = re.compile(r"^(?:my|our|the|we|i)\b", _I)
_SUBJECT_ZH = re.compile(r"^(?:我|咱们)|^[^，,]{1,12}?(?:是|在|定在|定于|改到|改成|推迟到|挪到|延到)")
# Today's plans are not memories; "now" may well start a lasting change, so it is not here.
_TODAY = re.compile(
    r"今天|今晚|昨天|刚才|这会儿|\b(?:today|tonight|yesterday|right\s+now|at\s+the\s+moment)\b", _I
)


def _valued_statement(core: str) -> _Hit | None:
    """A plain statement with a concrete value (a number, date, time or name) about the
    user's own world: "Our budget is 2 million", "The standup is at 9:30", "我们组有8个人"."""
    zh = bool(_HAN.search(core))
    if len(core) > 120 or _TODAY.search(core):
        return None
    if zh:
        # Short Chinese statements with a number or time ("季度报告6月30日交") or about
        # the user's own things ("我们的机房在法兰克福").
        valued = bool(_VALUE_ZH.search(core)) and (bool(_SUBJECT_ZH.search(core)) or len(core) <= 30)
        if not (valued or _OWN_ZH.match(core)):
            return None
    else:
        own = _SUBJECT_EN.match(core) and (_VALUE_EN.search(core) or _NAMED_EN.search(core))
        if not (own or (_VALUE_EN.search(core) and _TIMED_EN.search(core))):
            return None
    if _MODAL.search(core):
        return None
    if len(core.split()) < 3 and not zh:
        return None
    rule = "rule:self-zh" if zh else "rule:self-en"
    return _Hit(MemoryType.FACT, rule, CONFIDENCE_FACT, None, {"value": core})


# --- the tools someone uses: "I write code in VS Code", "We use Jira for issue tracking",
# "我写代码用VS Code", "我们前端用的是React". A named tool (a capitalised or Latin name) for a
# purpose, in the present tense: what an assistant should know when that purpose comes up.

_TOOL_EN = re.compile(
    r"^(?:I|[Ww]e)\s+(?:usually\s+|mostly\s+|always\s+|now\s+|currently\s+|still\s+|mainly\s+)?"
    r"(?:use|(?:write|edit|track|log|manage|keep|do|build|design|take|store)\s+[a-z][\w' -]{1,30}?"
    r"\s+(?:in|on|with))\s+(?P<v>(?:(?:the|a|an)\s+)?[A-Z0-9][\w.+#-]*(?:\s+[A-Z0-9][\w.+#-]*){0,3})"
    r"(?:\s+(?:for|to)\s+[^,;]{2,40})?$"
)
# A space around a Latin name is common in Chinese text ("用 VS Code 写代码").
_TOOL_ZH = re.compile(
    r"^(?:我|我们|咱们)(?:平时|一般|通常|现在|目前|都|一直|主要)*"
    r"(?:用|使用)\s*(?P<v>[A-Za-z0-9][\w .+#-]{0,30}?|[\u4e00-\u9fff]{2,6}?)"
    r"\s*(?:来)?(?:写|做|记|管理|跟踪|追踪|画|剪|看|听|存|开发|设计|编辑|沟通|协作)[\u4e00-\u9fff]{0,8}$"
    r"|^(?:我|我们|咱们)[\u4e00-\u9fff]{1,6}?(?:平时|一般|通常|现在|目前|都|一直|主要)*"
    r"(?:用的是|用|使用的是|使用)(?![了过着掉完])\s*(?P<v2>[A-Za-z0-9][\w .+#-]{0,30}|[\u4e00-\u9fff]{2,6})$"
    # "我用MacBook Pro", as "I use a MacBook Pro": a product's name right after the verb
    r"|^(?:我|我们|咱们)(?:平时|一般|通常|现在|目前|都|一直|主要)*(?:用的是|用|使用的是|使用)\s*"
    r"(?P<v3>[A-Za-z][\w .+#-]{0,30})$"
)


def _tool(core: str) -> _Hit | None:
    if _MODAL.search(core) or _TODAY.search(core):
        return None
    if _HAN.search(core):
        m = _TOOL_ZH.match(core)
        if m is None:
            return None
        return _fact("rule:self-zh", None, m.group("v") or m.group("v2") or m.group("v3") or "")
    m = _TOOL_EN.match(core)
    tool = _ARTICLE.sub("", m.group("v")) if m is not None else ""
    if not tool or tool.split()[0].lower() in _NOT_TOOLS:
        return None
    return _fact("rule:self-en", None, tool)


_NOT_TOOLS = frozenset("i it this that them".split())


def _changed_habit(core: str, zh: bool) -> _Hit | None:
    m = (_STOPPED_ZH if zh else _STOPPED_EN).match(core)
    if m:
        rule = "rule:preference-zh" if zh else "rule:preference-en"
        return _preference_hit(rule, "dislike", m.group("obj"), change=True)
    m = (_SWITCHED_ZH if zh else _SWITCHED_EN).match(core)
    if m:
        rule = "rule:preference-zh" if zh else "rule:preference-en"
        return _preference_hit(rule, "like", m.group("obj"))
    return None


_RULES: tuple[Callable[[str], _Hit | None], ...] = (
    _decision,
    _constraint,
    _skill,
    _habit,
    _preference,
    _preferred_name,
    _self_description,
    _project,
    _personal,
    _tool,
    _valued_statement,
)


def _classify(core: str, rules: tuple[Callable[[str], _Hit | None], ...] = _RULES) -> _Hit | None:
    if not core:
        return None
    for rule in rules:
        hit = rule(core)
        if hit is not None:
            return hit
    return None


# --- explicit requests

_REMEMBER_ZH = re.compile(
    r"^(?:你)?(?:能不能|能否|可以|可不可以|能)?(?:请你?|麻烦你?|你)?(?:帮我|给我|替我)?(?:好好)?"
    r"(?:记住|记一下|记下来|记下|记好|别忘了|别忘记|不要忘了|不要忘记|千万别忘了)(?:一下)?(?:这件事|这个|这点)?"
    r"[：:，,\s]*(?P<c>.+)$"
)
_REMEMBER_EN = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+|pls\s+|kindly\s+)?(?:also\s+)?"
    r"(?:remember|note\s+to\s+self|note|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget|never\s+forget|make\s+a\s+note|"
    r"take\s+note|note\s+down|note\s+to\s+self|save\s+this)"
    r"(?:\s+(?:that|this|of\s+this))?(?:\s*[:,\-]\s*|\s+)(?P<c>.+)$",
    _I,
)
_REMEMBER_EN_EXCLUDE = re.compile(r"^(?:when|how|what|where|who|why|me\b|the\s+time|if\b|whether\b)", _I)
_POLITE_QUESTION_TAIL = re.compile(r"(?:[,，]?\s*(?:吗|好吗|好不好|可以吗|ok|okay|please))?\s*[?？]*$", _I)


def _remember(sentence: str) -> tuple[str, str] | None:
    """The remembered content of an explicit request, and its rule name."""
    s = _LEAD_FILLER.sub("", _trim(sentence))
    m = _REMEMBER_ZH.match(s)
    rule = "rule:remember-zh"
    if not m:
        m = _REMEMBER_EN.match(s)
        rule = "rule:remember-en"
        if m and _REMEMBER_EN_EXCLUDE.match(m.group("c")):
            return None
    if not m:
        return None
    content = _trim(_POLITE_QUESTION_TAIL.sub("", m.group("c")))
    if len(content) < 2:
        return None
    return content, rule


# -- the extractor -----------------------------------------------------------------------------


_SPACE_RUN = re.compile(r"[ \t\u3000]{2,}")
_MAX_SENTENCE = 1000
"""Longer sentences are not read as one explicit request (their clauses still are)."""
_MAX_CLAUSE = 300
"""Longer clauses are not explicit statements; skipping them also bounds the regex work."""


def _sentences(text: str) -> Iterator[str]:
    # Runs of spaces collapse to one, which also keeps every regex below linear.
    for m in _SENTENCE.finditer(_SPACE_RUN.sub(" ", break_chat(text))):
        s = m.group().strip()
        if s:
            yield s


# Chinese drops a repeated subject: "我叫张伟，在字节跳动工作，平时写 Go" has three statements.
_ZH_CONTINUATION = re.compile(
    r"^(?:也|还|都)*(?:平时|平常|通常|一般|经常|每天|喜欢|不喜欢|不太喜欢|讨厌|住在|来自|熟悉|擅长|精通|会用|"
    r"改(?:喝|吃|用|听|学|抽)|换成|跳槽|现在(?:在|住|是|每)|"
    r"在(?=[^，,]{1,20}?(?:工作|上班|任职)))"
)
_FIRST_PERSON_ZH = re.compile(r"^我(?!们)")
# A user's sentence that opens with a predicate about a person has dropped its subject, the
# speaker: Chinese drops it as grammar ("住在浦东，骑车到公司十分钟", "对花生过敏"), English
# notes do ("Allergic to peanuts."). Only predicates no command or clause of another kind
# opens with: "喜欢的话…" asks, "Live in the moment" commands, "熟悉的味道" describes.
_ZH_SELF_PREDICATE = re.compile(
    # Not "住在附近的朋友…", "在家工作的时候…": a 的 after the place makes it a description.
    r"^(?:(?:住在|现在住)(?![^，,]*的)|(?:现在|目前)?在[^，,的]{1,20}?(?:工作|上班|任职)(?![^，,]*的)|对[^，,]{1,12}?过敏|"
    r"(?:最近|刚|已经)?搬(?:家)?(?:到|去)[^，,]{1,12}?了?$|擅长|精通)"
)
_EN_SELF_PREDICATE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?=(?:allergic|intolerant|based|married|divorced|vegan|vegetarian)\b)", _I), "I am "),
    (re.compile(r"^(?=(?i:live|lives|living|work|works|working)\s+(?:in|at|for)\s+[A-Z0-9])"), "I "),
    (re.compile(r"^(?=moved\s+to\b)", _I), "I "),
)


# A household that moves or lives somewhere takes the speaker along: "全家搬到了 Tampines",
# "我们一家住在杭州", "My wife and I moved to Leeds", "We live in Porto". Not a bare "we"
# that moved ("We moved to Kubernetes", "我们搬到新办公室": a team's move is no home).
_HOUSEHOLD_ZH = re.compile(
    r"^(?:我们?全家人?|我们?家|我们一家(?:人|[二三四五六]口人?)?|一家(?:人|[二三四五六]口人?)|全家人?|我和(?:老婆|老公|妻子|丈夫|爱人|家人)|我们)"
    r"(?=(?:已经|刚|刚刚|最近|现在|目前|一直|去年|今年|上个?月)*(?:住在|定居在|生活在|搬家?(?:到|去)))"
)
_BARE_WE_MOVED_ZH = re.compile(r"^我们(?:已经|刚|刚刚|最近|去年|今年|上个?月)*搬")
# A bare "we" that moved to a place is a household too ("我们上个月搬到成都了", "We just moved
# to Denver"): the place decides. Not a workplace or a system ("我们搬到新办公室", "We moved to
# Kubernetes", "We moved to Monday standups"), and not a new home with no place (新家).
_WE_MOVED_PLACE_ZH = re.compile(
    r"^我们(?:已经|刚|刚刚|最近|去年|今年|前年|上个?月|上周|上星期|前几天|前段时间|年初|这个月)*搬家?(?:到|去)了?"
    r"(?P<v>[^，,]{2,10}?)(?:了|住)?(?:[，,].*)?$"
)
_NOT_HOME_PLACE_ZH = re.compile(
    r"^新|办公|公司|写字楼|大楼|楼|层|工位|园区|机房|会议室|服务器|系统|平台|云|线上|线下|仓库|宿舍|酒店|学校|医院"
)
_WE_MOVED_PLACE_EN = re.compile(
    r"^[Ww]e(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+|actually\s+)*(?:moved|relocated)\s+to\s+"
    r"(?P<v>(?:the\s+)?[A-Z][a-z]+(?:[\s-][A-Z][a-z]+){0,2})(?P<rest>(?:[\s,;.!].*)?)$"
)
_NOT_PLACE_NAMES_EN = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december the".split()
)
_NOT_HOME_AFTER_EN = re.compile(
    r"^\s*(?:office|offices|building|campus|floor|hq|headquarters|team|plan|tier)\b", _I
)


def _we_moved_home(bare: str) -> bool:
    """Whether a clause that opens with a bare "we" says the speaker's household moved to a
    place (:data:`_WE_MOVED_PLACE_ZH`, :data:`_WE_MOVED_PLACE_EN`)."""
    m = _WE_MOVED_PLACE_ZH.match(bare)
    if m:
        place = m.group("v")
        return not _NOT_HOME_PLACE_ZH.search(place) and term_of(place) is None and not _PLAN_ZH.search(bare)
    m = _WE_MOVED_PLACE_EN.match(bare)
    if m is None:
        return False
    place = m.group("v")
    name = place[4:] if place.startswith("the ") else place
    return (
        name.split()[0].lower() not in _NOT_PLACE_NAMES_EN
        and term_of(name) is None
        and not _NOT_HOME_AFTER_EN.match(m.group("rest"))
    )


_HOUSEHOLD_EN = re.compile(
    r"^(?:(?:my\s+(?:wife|husband|partner|girlfriend|boyfriend|family|kids|fiancée?)\s+and\s+i|our\s+family|"
    r"the\s+family)(?:'ve|\s+have|\s+has)?\s+(?=(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\b|"
    r"(?:now\s+|still\s+)?lives?\s+in\b)|we\s+(?=(?:now\s+|still\s+)?live\s+in\b))",
    _I,
)


def with_speaker(clause: str) -> str | None:
    """The clause with the subject it dropped, the speaker (:data:`_ZH_SELF_PREDICATE`,
    :data:`_EN_SELF_PREDICATE`), or with the speaker for a household that moved or lives
    somewhere (:data:`_HOUSEHOLD_ZH`, :data:`_HOUSEHOLD_EN`); None when it opens otherwise."""
    bare = _LEAD_FILLER.sub("", clause.strip())
    if _ZH_SELF_PREDICATE.match(bare):
        return "我" + bare
    for pattern, subject in _EN_SELF_PREDICATE:
        if pattern.match(bare):
            return subject + bare[0].lower() + bare[1:]
    return with_household(bare)


def with_household(bare: str) -> str | None:
    """A clause about the speaker's household that moved or lives somewhere, read with the
    speaker as its subject ("我们一家住在杭州" -> "我住在杭州"); None otherwise."""
    m = _HOUSEHOLD_ZH.match(bare)
    if m and (not _BARE_WE_MOVED_ZH.match(bare) or _we_moved_home(bare)):
        return "我" + bare[m.end() :]
    m = _HOUSEHOLD_EN.match(bare)
    if m:
        rest = bare[m.end() :]
        return "I " + ("live" + rest[5:] if rest.lower().startswith("lives") else rest)
    if _we_moved_home(bare):
        verb = _MOVED_VERB.search(bare)
        return None if verb is None else "I " + bare[verb.start() :]
    return None


_MOVED_VERB = re.compile(r"\b(?:moved|relocated)\b", _I)


def _clauses(sentence: str) -> list[tuple[str, str]]:
    """The clauses of a sentence: (the clause as written, the text to match)."""
    parts = _CLAUSE_SEP.split(sentence)
    implied = with_speaker(parts[0])
    clauses: list[list[str]] = [[parts[0], implied or parts[0]]]
    first_person = implied is not None or bool(_FIRST_PERSON_ZH.match(_LEAD_FILLER.sub("", parts[0].strip())))
    for i in range(1, len(parts) - 1, 2):
        sep, clause = parts[i], parts[i + 1]
        joinable = not _KEEP_JOINED.match(clauses[-1][0].strip()) and not _REASON_STARTED.search(
            clauses[-1][0]
        )
        bare = _LEADING_CONJ.sub("", clause.strip())
        continues = first_person and bool(_ZH_CONTINUATION.match(bare))
        if clause.strip() and joinable and (continues or _CLAUSE_START.match(clause)):
            # "Big news, we moved to Denver": a household's move in a later clause too.
            clauses.append([clause, "我" + bare if continues else with_household(bare) or bare])
            if not continues:
                first_person = bool(_FIRST_PERSON_ZH.match(_LEAD_FILLER.sub("", bare)))
        else:
            clauses[-1][0] += sep + clause
            clauses[-1][1] += sep + clause
    out: list[tuple[str, str]] = []
    for written, matched in clauses:
        written = _trim(_CONTENT_LEAD.sub("", _LEADING_CONJ.sub("", _trim(written))))
        if written:
            out.append((written, matched))
    return out


class RuleExtractor:
    """Offline, rule-based :class:`~jiyi.write.extract.Extractor` for Chinese and English.

    Deterministic and fast; it catches only explicit statements (see the module docs)
    and leaves anything subtler to :class:`~jiyi.write.extract_llm.LLMExtractor`.
    """

    def extract(self, turns: Sequence[ChatTurn]) -> list[Extracted]:
        out: list[Extracted] = []
        seen: set[tuple[MemoryType, str]] = set()
        for index, turn in enumerate(turns):
            text = _readable(turn)
            if text is None or low_value_reason(text) is not None or written_in(text) == "ja":
                # Japanese (it has kana): its Han characters the Chinese rules misread
                # ("17時ね、がんばる" is no statement about the user).
                continue
            source = turn.content.strip()
            found = [
                item for sentence in _sentences(text) for item in _extract_sentence(sentence, index, source)
            ]
            for item in _drop_replaced_changes(found):
                dedup = (item.memory_type, " ".join(item.content.lower().split()))
                if dedup in seen:
                    continue
                seen.add(dedup)
                out.append(item)
        return out


def _is_change(item: Extracted) -> bool:
    return item.memory_type is MemoryType.PREFERENCE and (item.structured or {}).get("change") is not None


def _drop_replaced_changes(items: list[Extracted]) -> list[Extracted]:
    """A turn like "I no longer prefer tabs; I prefer spaces" yields only "I prefer spaces".

    The ended preference is still in the candidate's ``source_text``, where reconciliation
    reads it to supersede the stored "I prefer tabs"; stored on its own it would only compete
    with the new preference in search.
    """
    replaced = any(
        i.memory_type is MemoryType.PREFERENCE
        and not _is_change(i)
        and (i.structured or {}).get("polarity") == "like"
        for i in items
    )
    return [i for i in items if not (replaced and _is_change(i))]


def _readable(turn: ChatTurn) -> str | None:
    """The text of a turn worth reading, or None."""
    role = str(getattr(turn, "role", "")).strip().lower()
    content = getattr(turn, "content", None)
    if not isinstance(content, str) or not content.strip():
        return None
    if role in _USER_ROLES:
        return content
    if role == "system":
        m = _SUMMARY_PREFIX.match(content)
        if m:
            return content[m.end() :]
    return None


def _make(
    hit: _Hit, content: str, source: str, index: int, hedged: bool, extra_reason: str | None = None
) -> Extracted:
    reasons: tuple[str, ...] = (extra_reason, hit.rule) if extra_reason else (hit.rule,)
    confidence = hit.confidence
    if hedged:
        confidence = CONFIDENCE_HEDGED
        reasons = (*reasons, "hedged")
    return Extracted(
        content=content,
        memory_type=hit.memory_type,
        confidence=confidence,
        importance=_IMPORTANCE.get(hit.memory_type, 0.5),
        structured=hit.structured,
        key=hit.key,
        source_text=source,
        turn_index=index,
        language=_language(content),
        reasons=reasons,
    )


def _extract_sentence(sentence: str, index: int, source: str) -> list[Extracted]:
    if low_value_reason(sentence) is not None:
        return []
    hedged = bool(_HEDGE.search(sentence))
    remembered = _remember(sentence) if len(sentence) <= _MAX_SENTENCE else None
    if remembered is not None:
        content, rule = remembered
        core = _core(content)
        # What is remembered is kept whole; only its kind is read (not a bare valued statement).
        hit = _classify(core, _RULES[:-1]) or _my_attribute(core)
        if hit is None:
            hit = _Hit(MemoryType.FACT, rule, CONFIDENCE_REMEMBER)
            return [_make(hit, content, source, index, hedged)]
        hit = _Hit(hit.memory_type, hit.rule, CONFIDENCE_REMEMBER, hit.key, hit.structured)
        return [_make(hit, content, source, index, hedged, rule)]
    if _is_question(sentence):
        return []
    out: list[Extracted] = []
    for clause, matched in _clauses(sentence):
        if len(clause) > _MAX_CLAUSE:
            continue
        hit = _classify(_core(matched))
        if hit is not None:
            out.append(_make(hit, clause, source, index, hedged))
    return out
