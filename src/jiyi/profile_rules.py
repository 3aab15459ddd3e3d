"""How profile fields are aggregated from memory items (pure functions, no I/O).

Each item is first *read*: the ``structured`` parts an extractor stored are used as they
are (keys as written by :mod:`jiyi.write.extract_rules` and the LLM extractor); an item
without them is read by the offline :class:`~jiyi.write.extract_rules.RuleExtractor`,
in Chinese or English, first or third person ("I am ...", "User prefers ...",
「用户是…」). Readings then give *clues*: (field, value, item, confidence, time).

Combining clues:

* single-valued fields: confident clues (confidence >= 0.7) beat unsure ones; among
  those the newest (``occurred_at``, else ``created_at``) wins, then the more confident.
  Every clue with the winning value is evidence;
* lists: one entry per distinct value (case and spacing ignored), ordered by support
  (the items' mention counts summed), then by recency; a value needs one confident
  clue or two clues;
* key decisions: newest first, one per distinct decision.

Whose statement it is decides where it goes in a user's profile: custom instructions
are the user's own rules (about them, or addressed to the assistant); a rule about a
project, a system or a team, and a team's decision, are not the user's (they belong in
the project's profile); allergies and health conditions are background; someone else's
("我女儿…", "my sister ...") is nowhere.

Nothing here is tuned to particular sentences: the rules are the extractor's, a lexicon
of technical names (:mod:`jiyi.profile_lexicon`) and a few cue-word patterns per field.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from jiyi.model import MemoryItem, MemoryType, Scope, Source
from jiyi.profile_lexicon import NATURAL_LANGUAGES, find_terms, natural_language, term_of
from jiyi.profile_names import self_named
from jiyi.text.language import written_in
from jiyi.write.extract import Turn
from jiyi.write.extract_rules import CONFIDENCE_HEDGED, RuleExtractor, with_speaker

ProfileScope = Literal["user", "project"]

USER_FIELDS: tuple[str, ...] = (
    "username",
    "background",
    "profession",
    "communication_style",
    "response_format",
    "language_preference",
    "characteristics",
    "content",
    "expertise_areas",
    "programming_languages",
    "frequently_used_tools",
)
PROJECT_FIELDS: tuple[str, ...] = (
    "project_goal",
    "tech_stack",
    "constraints",
    "key_decisions",
    "team_conventions",
    "current_phase",
)
LIST_FIELDS: frozenset[str] = frozenset(
    {
        "characteristics",
        "expertise_areas",
        "programming_languages",
        "frequently_used_tools",
        "tech_stack",
        "constraints",
        "team_conventions",
    }
)
CHOICES: dict[str, tuple[str, ...]] = {
    "communication_style": ("concise", "detailed", "technical"),
    "response_format": ("markdown", "plain", "code"),
}
INPUT_TYPES: tuple[MemoryType, ...] = (
    MemoryType.PREFERENCE,
    MemoryType.FACT,
    MemoryType.SKILL,
    MemoryType.HABIT,
    MemoryType.CONSTRAINT,
    MemoryType.DECISION,
    MemoryType.CONTEXT,
)
"""The memory types profiles are aggregated from."""

CONFIDENT = 0.7
"""Clues at or above this confidence beat any below it (the gate's "stated" threshold)."""
LIST_CAP = 12
SENTENCE_LIST_CAP = 10
DECISIONS_CAP = 10
INSTRUCTIONS_CAP = 8
_MAX_READ = 1000
"""Longer items (documents, long notes) are not parsed, only scanned for names."""


def fields_of(scope: ProfileScope) -> tuple[str, ...]:
    return USER_FIELDS if scope == "user" else PROJECT_FIELDS


@dataclass(frozen=True)
class KeyDecision:
    """One project decision: what was decided, why, and when."""

    decision: str
    reason: str | None = None
    at: datetime | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "reason": self.reason,
            "at": None if self.at is None else self.at.isoformat(),
        }


Value = str | tuple[str, ...] | tuple[KeyDecision, ...]


@dataclass(frozen=True)
class Clue:
    """One piece of evidence for one field."""

    field: str
    value: str | KeyDecision
    item_id: str
    confidence: float
    at: datetime
    weight: int = 1
    slot: str = ""
    """Sub-field of a composed value (background: employer, location, hometown ...)."""


@dataclass(frozen=True)
class Aggregate:
    value: Value
    evidence: tuple[str, ...]


# ---------------------------------------------------------------- reading items


@dataclass(frozen=True)
class _Reading:
    kind: MemoryType
    parts: Mapping[str, Any]
    key: str | None
    text: str
    hedged: bool = False


_EXTRACTOR = RuleExtractor()


def _readings(item: MemoryItem) -> list[_Reading]:
    if isinstance(item.structured, dict) and item.structured:
        key = item.metadata.get("key") or item.structured.get("key")
        return [
            _Reading(item.memory_type, item.structured, key if isinstance(key, str) else None, item.content)
        ]
    own = _Reading(item.memory_type, {}, None, item.content)
    out = [] if len(item.content) > _MAX_READ else list(_parse(item.content))
    if not any(r.kind == item.memory_type for r in out):
        out.append(own)  # the stored type still counts, read by this module's own cues
    named = self_named(item.content)
    if named and not any(r.key in ("name", "preferred_name") for r in out):
        # "Меня зовут Иван", "Me llamo Lucía", "私は佐藤由紀です": the extractor reads names in
        # Chinese and English only.
        out.append(_Reading(MemoryType.FACT, {"key": "name", "value": named}, "name", item.content))
    return out


@lru_cache(maxsize=16384)
def _parse(content: str) -> tuple[_Reading, ...]:
    """The extractor's reading of a text; cached, since profiles are read on every context call
    and the same items come back each time (readings are never mutated)."""
    # As a summary turn, third-person text ("User prefers ...", 「用户是…」) reads as first person.
    found = _EXTRACTOR.extract([Turn("system", "Summary: " + content)])
    return tuple(
        _Reading(e.memory_type, e.structured or {}, e.key, e.content, "hedged" in e.reasons) for e in found
    )


def _at(item: MemoryItem) -> datetime:
    return item.occurred_at or item.created_at


def _norm(value: str) -> str:
    return " ".join(value.casefold().split()).strip(" .,;:!?。，；：！？、")


def _clean(value: str) -> str:
    return value.strip().strip(" \t\r\n\u3000。，,;；:：.!！?？、").strip()


_LIST_SEP = re.compile(r"\s*(?:、|，|,|/|；|;|\band\b|\bor\b|和|与|及|以及|或者?)\s*", re.I)


def _split(value: str) -> list[str]:
    return [p for p in (_clean(x) for x in _LIST_SEP.split(value)) if p]


# ---------------------------------------------------------------- cue patterns

_I = re.IGNORECASE
_FACT_KEYS: dict[str, str] = {
    **dict.fromkeys(("name", "username", "user_name", "full_name", "名字", "姓名", "称呼"), "name"),
    # What the user wants to be called ("Call me Dave", "我的英文名是 Dave") is the name to use.
    **dict.fromkeys(
        (
            "preferred_name",
            "nickname",
            "english name",
            "english_name",
            "preferred name",
            "英文名",
            "英文名字",
            "昵称",
            "小名",
        ),
        "name",
    ),
    **dict.fromkeys(
        ("profession", "job", "occupation", "job_title", "title", "role", "position", "职业", "工作", "职位"),
        "profession",
    ),
    **dict.fromkeys(
        ("employer", "company", "workplace", "organisation", "organization", "公司", "单位"), "employer"
    ),
    **dict.fromkeys(
        ("location", "home_city", "city", "residence", "lives_in", "居住地", "城市", "住址"), "location"
    ),
    **dict.fromkeys(("hometown", "home_town", "origin", "birthplace", "老家", "家乡"), "hometown"),
    **dict.fromkeys(
        ("education", "school", "university", "degree", "major", "学校", "学历", "专业"), "education"
    ),
}
_BACKGROUND_SLOTS = ("employer", "location", "hometown", "education", "health")
_MANY_SLOTS = frozenset({"health"})
"""Slots that hold every distinct value (two allergies are both kept), not the newest one."""
_SELF_DESCRIBED = re.compile(
    r"^(?:我(?:是|算是|属于|天生|性格|比较|很|挺|有点|特别)|用户(?:是|性格|比较)|"
    r"(?:i'm|i\s+am|im|i\s+consider\s+myself|(?:the\s+)?user\s+is)\b)",
    _I,
)

# What the extractor leaves to us: professions said without "I am a ...".
_PROFESSION_EXTRA = (
    re.compile(r"^(?:我|用户)的(?:职业|工作|职位)是(?P<v>[^，,。；;]{1,30})"),
    re.compile(r"^(?:我|用户)(?:目前|现在)?(?:从事|做)(?P<v>[^，,。；;]{1,20}?)(?:工作|行业|方面的工作)"),
    re.compile(
        r"^(?:my|the\s+user's)\s+(?:job|profession|occupation|role)\s+is\s+(?:an?\s+)?(?P<v>[^,.;]{1,60})", _I
    ),
    re.compile(r"^(?:i|the\s+user)\s+(?:is|am|'m)?\s*working\s+as\s+(?:an?\s+)?(?P<v>[^,.;]{1,60})", _I),
)
_PROFESSION_STOP = re.compile(r"\s+(?:at|for|in|with|from|who|that|since)\b", _I)

_SKILL_LOOSE = (
    re.compile(
        r"^(?:我|用户)?(?:非常|很|比较|特别|也)*(?:熟悉|精通|擅长|熟练掌握|熟练使用|掌握|会用|懂)(?P<v>.+)$"
    ),
    re.compile(
        r"^(?:(?:the\s+)?user\s+|i\s+)?(?:is\s+|am\s+|'m\s+)?(?:very\s+|really\s+|quite\s+)?"
        r"(?:experienced\s+(?:with|in)|proficient\s+(?:in|with)|skilled\s+(?:in|at)|good\s+at|"
        r"an?\s+expert\s+(?:in|at|on)|expert\s+(?:in|at)|familiar\s+with|knows?)\s+(?P<v>.+)$",
        _I,
    ),
)

_RESPONSE_CUE = re.compile(
    r"回答|回复|答复|解释|说明|讲解|输出|风格|语气|交流|沟通|对话|格式|你|"
    r"\b(?:answers?|repl(?:y|ies)|responses?|respond|explanations?|explain|style|tone|you|your|output|"
    r"format(?:ting)?|communicat\w*|messages?|summar(?:y|ies))\b",
    _I,
)
_STYLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "concise",
        re.compile(
            r"简洁|简短|简明|精简|简练|言简意赅|短一点|短一些|简单点|少废话|啰嗦|直奔主题|说重点|"
            r"\b(?:concise|brief|succinct|terse|to\s+the\s+point|no\s+fluff|keep\s+it\s+short|tl;?dr)\b|"
            r"\bshort(?:er)?\s+(?:answers?|replies|responses|explanations?)\b",
            _I,
        ),
    ),
    (
        "detailed",
        re.compile(
            r"详细|详尽|具体一点|具体些|深入|展开讲|展开说|一步一步|逐步|"
            r"\b(?:detailed|in\s+detail|thorough(?:ly)?|in[-\s]depth|step[-\s]by[-\s]step|elaborate|"
            r"comprehensive|verbose|long(?:er)?\s+(?:answers?|explanations?))\b",
            _I,
        ),
    ),
    (
        "technical",
        re.compile(
            r"技术细节|技术性|技术角度|专业术语|底层原理|源码级|"
            r"\b(?:technical|jargon|low[-\s]level\s+details?|under\s+the\s+hood|implementation\s+details?)\b",
            _I,
        ),
    ),
)
# A style word said against ("不要太详细", "don't be verbose", "I hate long answers").
_NEGATION_BEFORE = re.compile(
    r"(?:不要|别|不用|不必|无需|不需要|不想|不喜欢|讨厌|受不了|太|过于|避免)\S{0,3}$|"
    r"\b(?:not|don't|do\s+not|no|never|avoid|without|less|stop\s+being|hate|dislike|too)\s+(?:\w+\s+){0,2}$",
    _I,
)
_STYLE_INVERSE = {"concise": "detailed", "detailed": "concise"}
_FORMAT: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "plain",
        re.compile(
            r"纯文本|无格式|不要格式|(?:不要|别|不用)(?:用)?\s*markdown|"
            r"\b(?:plain[-\s]?text|no\s+markdown|without\s+markdown|(?:don't|do\s+not|never)\s+use\s+markdown)\b",
            _I,
        ),
    ),
    (
        "code",
        re.compile(
            r"只(?:给|要|需要|看)代码|直接给(?:出)?代码|代码为主|多给代码|给出代码|代码示例|"
            r"\b(?:code\s+only|only\s+(?:the\s+)?code|just\s+(?:the\s+)?code|code\s+(?:examples?|snippets?|samples?)|"
            r"show\s+(?:me\s+)?(?:the\s+)?code)\b",
            _I,
        ),
    ),
    (
        "markdown",
        re.compile(
            r"markdown|分点|要点形式|列表形式|表格形式|用表格|"
            r"\b(?:bullet[-\s]?points?|bulleted\s+lists?|in\s+(?:a\s+)?tables?|with\s+headings)\b",
            _I,
        ),
    ),
)
_LANG_NAMES = "|".join(sorted((re.escape(k) for k in NATURAL_LANGUAGES), key=len, reverse=True))
_LANG_CUES = (
    re.compile(
        rf"(?:用|说|讲|以|使用)(?P<lang>{_LANG_NAMES})(?:来|进行)?"
        r"(?:回答|回复|答复|交流|沟通|对话|聊天|聊|写|输出|解释|和我|跟我|与我)",
        _I,
    ),
    re.compile(
        rf"(?:回答|回复|答复|输出|交流)(?:都|请|要|一律|统一)*(?:用|使用|以)(?P<lang>{_LANG_NAMES})", _I
    ),
    re.compile(rf"(?:偏好|更喜欢|喜欢|习惯)(?:用)?(?P<lang>{_LANG_NAMES})(?:回答|回复|交流|沟通)?$", _I),
    re.compile(
        r"\b(?:repl(?:y|ies)|respond\w*|answer\w*|write|writing|talk|speak|communicate|chat|explain\w*)"
        rf"\s+(?:to\s+me\s+|with\s+me\s+)?(?:only\s+|always\s+)?in\s+(?P<lang>{_LANG_NAMES})\b",
        _I,
    ),
    re.compile(
        rf"\b(?:prefers?|wants?)\s+(?:answers\s+in\s+|responses\s+in\s+)?(?P<lang>{_LANG_NAMES})\b", _I
    ),
)
_WRITING = re.compile(r"写|输出|\bwrit(?:e|ing)\b", _I)
_NEGATIVE = re.compile(
    r"不能|不要|不许|不准|不允许|禁止|不得|严禁|千万别|别用|\b(?:never|must\s*n[o']t|cannot|can't|don't|do\s+not|"
    r"may\s+not|no\s+longer|avoid|forbidden|prohibited)\b",
    _I,
)

# Who a statement is about. A user's profile holds what is about the user; a rule for
# a project, a system or a team ("项目必须支持 PG 16", "our API must ...") belongs in the
# project's profile, and a team's choice of framework is not the user's tool.
_GROUP_SUBJECT = re.compile(
    r"^(?:我们|咱们|大家|团队|我们团队|公司|我们公司|项目|这个项目|本项目|小组|部门)|"
    r"^(?:we\b|we'|our\b|us\b|let's\b|let\s+us\b|everyone\b|the\s+(?:team|company|project)\b)",
    _I,
)
# "My daughter is allergic" / "我女儿…" is about someone else: "my"/"我的" and a person
# named after 我 are not the user.
_OTHERS_ZH = (
    "女儿|儿子|孩子|小孩|宝宝|老婆|老公|妻子|丈夫|爱人|对象|男朋友|女朋友|妈妈|母亲|爸爸|父亲|父母|爷爷|奶奶|"
    "外公|外婆|姐姐|妹妹|哥哥|弟弟|家人|家里人|朋友|同事|室友|老板|领导|客户|同学|邻居|猫|狗"
)
_SELF_SUBJECT = re.compile(
    rf"^(?:我(?![们的]|家|{_OTHERS_ZH})|用户(?![们的])|i\b|i'|im\b|(?:the\s+)?user(?!'s)\b)", _I
)
# A standing instruction to the assistant: addressed to it, or an imperative.
_ADDRESSED = re.compile(
    r"你|您|请|给我|帮我|替我|对我|跟我|和我|告诉我|回答|回复|以后|今后|从现在|之后都|"
    r"^(?:不要|别|永远不要|千万别|千万不要|务必|一定要|记得|每次)|"
    r"\b(?:you|your|please|me|from\s+now\s+on|going\s+forward)\b|"
    r"^(?:always|never|don't|do\s+not|avoid|stop|make\s+sure|remember\s+to)\b",
    _I,
)
# Health: allergies, intolerances and conditions belong in the user's background.
_HEALTH = re.compile(
    r"过敏|不耐受|糖尿病|高血压|低血压|哮喘|心脏病|癫痫|痛风|乳糜泻|偏头痛|抑郁症|焦虑症|贫血|关节炎|色盲|"
    r"\b(?:allerg\w*|intoleran\w*|diabet\w*|asthma\w*|celiac|coeliac|epilep\w*|hypertension|migraines?|"
    r"gout|anaemi\w*|anemi\w*|arthritis|colou?r[-\s]?blind\w*|adhd|dyslexi\w*)\b",
    _I,
)
_LEAD_WORDS = re.compile(
    r"^(?:(?:其实|另外|还有|而且|但是|不过|对了|顺便|所以|嗯|哦|哎)[，,\s]*|"
    r"(?:also|and|but|so|actually|btw|oh|well|honestly|fyi|note\s+that|remember\s+that)\b[,\s]*)+",
    _I,
)


def _subject_text(text: str) -> str:
    return _LEAD_WORDS.sub("", text.strip())


def _about_user(text: str) -> bool:
    """The statement is the user's own: about them ("I ...", "我…") or addressed by them to
    the assistant ("以后请…", "Always ..."); not about a group, a project or a system."""
    core = _subject_text(text)
    if _GROUP_SUBJECT.match(core):
        return False
    return bool(_SELF_SUBJECT.match(core) or _ADDRESSED.search(core)) or with_speaker(core) is not None


def _personal(text: str) -> bool:
    """Said of the user alone ("I switched to Neovim", or with the subject dropped: "对花生过敏"),
    not of a team ("we chose Kafka")."""
    core = _subject_text(text)
    return bool(_SELF_SUBJECT.match(core)) or with_speaker(core) is not None


def _health(reading: _Reading) -> bool:
    return bool(reading.parts.get("allergy")) or bool(_HEALTH.search(reading.text))


_REASON_CUE = re.compile(
    r"[，,；;]?\s*(?:因为|由于|原因是|理由是|主要是因为|考虑到)|"
    r"[,，;]?\s*\b(?:because(?:\s+of)?|due\s+to|given\s+that|as\s+it|as\s+they)\b|[,，]\s*since\b",
    _I,
)
_REJECT_CUE = re.compile(
    r"\s*[，,]?\s*(?:而不是|而非|不用|代替|取代|替代)\s*|\s+(?:instead\s+of|rather\s+than|over|in\s+place\s+of)\s+",
    _I,
)

_CONVENTION = re.compile(
    r"规范|约定|惯例|代码风格|命名|提交信息|commit|分支|评审|审查|code\s*review|\breview|\bPR\b|pull\s+request|"
    r"合并|测试覆盖|覆盖率|单元测试|lint|格式化|缩进|注释|文档|changelog|语义化版本|semver|"
    r"\b(?:conventions?|style\s+guide|naming|branch(?:es|ing)?|merge[sd]?|squash|rebase|unit\s+tests?|"
    r"test\s+coverage|tests?\s+first|tdd|indent\w*|tabs|spaces|comments?|docstrings?|documentation|"
    r"formatt?(?:ing|er)|camel\s*case|snake_case|kebab|pair\s+programming|stand-?ups?|sprints?)\b",
    _I,
)
_GOAL = (
    re.compile(
        r"(?:项目|产品|系统|我们|团队)(?:的)?(?:主要|核心|最终)?(?:目标|目的|愿景|使命)(?:是|为|就是|[:：])\s*(?P<v>.+)$"
    ),
    re.compile(r"(?:这个|本|该)?(?:项目|产品|系统)?旨在(?P<v>.+)$"),
    re.compile(r"^(?:我们|团队)?(?:正在|在)?(?:做|开发|构建|打造|搭建)(?P<v>一个.+)$"),
    re.compile(r"^(?:这个|本|该)?项目是(?P<v>一个.+)$"),
    re.compile(
        r"\b(?:the\s+|our\s+|this\s+)?(?:project'?s?\s+|main\s+|primary\s+|overall\s+)*"
        r"(?:goal|aim|objective|mission|purpose)\s+(?:of\s+(?:the|this)\s+project\s+)?(?:is|are)\s+(?:to\s+)?(?P<v>.+)$",
        _I,
    ),
    re.compile(
        r"\b(?:this|the|our)\s+project\s+(?:aims|is\s+meant|is\s+designed|exists)\s+to\s+(?P<v>.+)$", _I
    ),
    re.compile(r"\bwe(?:'re|\s+are)\s+(?:building|creating|making|developing)\s+(?P<v>an?\s+.+)$", _I),
    re.compile(r"\b(?:this|the|our)\s+project\s+is\s+(?P<v>an?\s+.+)$", _I),
)
_PHASE = (
    re.compile(r"(?:当前|目前|现在|眼下)(?:的)?(?:项目)?(?:阶段|进度)(?:是|为|[:：])\s*(?P<v>.+)$"),
    re.compile(r"(?:处于|进入了?|到了)(?P<v>[^，,。；;]{1,20}?阶段)"),
    re.compile(r"(?:当前|目前|现在|眼下)(?:项目|我们|团队)?(?:正|正在|在|还在)+(?P<v>[^，,。；;]{2,40})"),
    re.compile(
        r"\b(?:we(?:'re|\s+are)|the\s+project\s+is|(?:the\s+)?project's)\s+(?:currently\s+|now\s+|still\s+)?"
        r"(?:in|at)\s+(?:the\s+)?(?P<v>[\w\s-]{1,40}?\s+(?:phase|stage))\b",
        _I,
    ),
    re.compile(r"\b(?:current\s+)?(?:phase|stage|milestone)\s*(?:is|:)\s*(?P<v>[^,.;]{1,60})", _I),
    re.compile(
        r"\b(?:(?:we(?:'re|\s+are)|the\s+team\s+is)\s+(?:currently|now|right\s+now)|currently(?:\s+we(?:'re|\s+are))?)"
        r"\s+(?P<v>(?:working\s+on|developing|building|testing|implementing|preparing|migrating)\s+[^,.;]{2,60})",
        _I,
    ),
)


def _style(reading: _Reading, negative: bool) -> str | None:
    text = reading.text
    if not _RESPONSE_CUE.search(text) and not reading.parts.get("object"):
        return None
    for style, pattern in _STYLE:
        m = pattern.search(text)
        if m is None:
            continue
        against = negative or bool(_NEGATION_BEFORE.search(text[: m.start()]))
        if style == "concise" and "啰嗦" in m.group():
            return "concise"  # the word itself is the complaint ("别啰嗦")
        if not against:
            return style
        return _STYLE_INVERSE.get(style)
    return None


def _format(reading: _Reading, negative: bool) -> str | None:
    text = reading.text
    for fmt, pattern in _FORMAT:
        m = pattern.search(text)
        if m is None:
            continue
        if fmt == "plain":
            return "plain"
        against = negative or bool(_NEGATION_BEFORE.search(text[: m.start()]))
        if not against:
            return fmt
        return "plain" if fmt == "markdown" else None
    return None


def _language(reading: _Reading, negative: bool) -> str | None:
    if negative:
        return None
    for pattern in _LANG_CUES:
        m = pattern.search(reading.text)
        if m is None or _NEGATION_BEFORE.search(reading.text[: m.start()]):
            continue
        if _WRITING.search(m.group()) and not _ADDRESSED.search(reading.text):
            continue  # "我习惯用英文写代码注释": the language of the user's own writing, not of answers
        return natural_language(m.group("lang"))
    return None


def _negative(reading: _Reading) -> bool:
    parts = reading.parts
    if parts.get("polarity") == "dislike" or parts.get("modality") == "must_not":
        return True
    if parts.get("polarity") == "like" or parts.get("modality") == "must":
        return False
    return bool(_NEGATIVE.search(reading.text))


def _decision(reading: _Reading, item: MemoryItem) -> tuple[KeyDecision, str]:
    """The decision (without its reason clause), and the text naming what was chosen."""
    text = reading.text
    reason = reading.parts.get("reason")
    m = _REASON_CUE.search(text)
    if m and m.start() > 0:
        if not isinstance(reason, str) or not reason.strip():
            reason = _clean(text[m.end() :])
        text = text[: m.start()]
    decision = _clean(text) or _clean(reading.text)
    choice = reading.parts.get("choice")
    if not isinstance(choice, str):
        r = _REJECT_CUE.search(decision)
        choice = decision[: r.start()] if r and r.start() > 0 else decision
    reason_text = _clean(reason) if isinstance(reason, str) else ""
    return KeyDecision(decision, reason_text or None, _at(item)), choice


def _first(patterns: Iterable[re.Pattern[str]], text: str) -> str | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m:
            value = _clean(m.group("v"))
            if value:
                return value
    return None


# ---------------------------------------------------------------- clues per scope


def _str(value: object) -> str | None:
    return _clean(value) or None if isinstance(value, str) else None


def _user_clues(item: MemoryItem, reading: _Reading) -> Iterator[tuple[str, str, str]]:
    """(field, value, slot) found in one reading of a user-scope item."""
    kind, text = reading.kind, reading.text
    negative = _negative(reading)
    if kind == MemoryType.FACT:
        yield from _fact_clues(reading)
    elif kind == MemoryType.SKILL:
        yield from _skill_clues(reading)
    elif kind in (MemoryType.PREFERENCE, MemoryType.CONSTRAINT, MemoryType.HABIT):
        yield from _preference_clues(reading, negative)
    elif kind == MemoryType.DECISION and not negative and _personal(text):
        # A decision is the user's tool only when the user decided it for themself:
        # a team's or a project's choice of framework belongs in the project profile.
        _, choice = _decision(reading, item)
        yield from _used_names(choice)
    elif kind == MemoryType.CONTEXT and _about_user(text):
        yield from _used_names(text)


def _fact_clues(reading: _Reading) -> Iterator[tuple[str, str, str]]:
    """A fact: its slot names the field (name, profession, background), else its words."""
    parts, text = reading.parts, reading.text
    raw_key = reading.key or parts.get("key")
    key = None
    if isinstance(raw_key, str):
        key = _FACT_KEYS.get(raw_key.removeprefix("my:").strip().lower())
    value = _str(parts.get("value"))
    if _health(reading) and _personal(text) and not reading.hedged:
        yield "background", _clean(text), "health"
        return
    if key is None and _about_user(text) and _RESPONSE_CUE.search(text):
        # "我希望你解释得详细一点" read as a plain fact: still how the user wants answers.
        answers = list(_answer_clues(reading, _negative(reading)))
        if answers:
            yield from answers
            return
    if key == "name" and value:
        yield "username", value, ""
    elif key == "profession" and value:
        yield "profession", value, ""
    elif key in _BACKGROUND_SLOTS:
        yield "background", _clean(text), key
    else:
        extra = _first(_PROFESSION_EXTRA, text)
        if extra:
            yield "profession", _clean(_PROFESSION_STOP.split(extra, maxsplit=1)[0]), ""
        elif raw_key is None and value and not reading.hedged and _SELF_DESCRIBED.match(_subject_text(text)):
            # Only "I am ..." is a trait: "my sister is a doctor" or "the standup is at 9" is not.
            yield "characteristics", value, ""
        if raw_key is None and _about_user(text):
            yield from _used_names(text)


def _skill_clues(reading: _Reading) -> Iterator[tuple[str, str, str]]:
    """A skill: programming languages and areas of expertise."""
    text = reading.text
    skill = _str(reading.parts.get("skill")) or _first(_SKILL_LOOSE, text)
    if skill is None:
        yield from _used_names(text, languages_only=True)
        return
    for piece in _split(skill):
        term = term_of(piece)
        if term is not None and term.category == "language":
            yield "programming_languages", term.name, ""
        elif natural_language(piece) is None:
            yield "expertise_areas", term.name if term else piece, ""
    yield from _used_names(skill, languages_only=True)


def _answer_clues(reading: _Reading, negative: bool) -> Iterator[tuple[str, str, str]]:
    """How the user wants answers: style, format, language."""
    for field, found in (
        ("communication_style", _style(reading, negative)),
        ("response_format", _format(reading, negative)),
        ("language_preference", _language(reading, negative)),
    ):
        if found:
            yield field, found, ""


def _preference_clues(reading: _Reading, negative: bool) -> Iterator[tuple[str, str, str]]:
    """A preference, constraint or habit: how the user wants answers, else its content.

    A constraint is a custom instruction only when it is the user's own (about them or
    addressed to the assistant); an allergy or a condition is background (health); a
    rule for a project or a system ("服务器不能用 root 登录") is not in the user's profile.
    """
    kind, text = reading.kind, reading.text
    if _health(reading) and _personal(text):
        if not reading.hedged:
            yield "background", _clean(text), "health"
        return
    answers = list(_answer_clues(reading, negative))
    yield from answers
    if kind == MemoryType.CONSTRAINT and not answers and _about_user(text):
        yield "content", _clean(text), ""
    # Preferences and habits are read in the first person ("平时用 Go" continues "我…"):
    # only one said of a group ("we always deploy on Vercel") names no tool of the user's.
    if not negative and kind != MemoryType.CONSTRAINT and not _GROUP_SUBJECT.match(_subject_text(text)):
        obj = _str(reading.parts.get("object")) or _str(reading.parts.get("habit")) or text
        yield from _used_names(obj)


def _used_names(text: str, *, languages_only: bool = False) -> Iterator[tuple[str, str, str]]:
    for term in find_terms(text):
        if term.category == "language":
            yield "programming_languages", term.name, ""
        elif not languages_only:
            yield "frequently_used_tools", term.name, ""


def _stack(text: str) -> Iterator[tuple[str, str, str]]:
    for term in find_terms(text):
        if term.category != "tool":
            yield "tech_stack", term.name, ""


def _project_clues(item: MemoryItem, reading: _Reading) -> Iterator[tuple[str, str | KeyDecision, str]]:
    kind, text = reading.kind, reading.text
    negative = _negative(reading)
    if kind == MemoryType.DECISION:
        decision, choice = _decision(reading, item)
        yield "key_decisions", decision, ""
        yield from _stack(choice)
        return
    if kind == MemoryType.CONSTRAINT:
        if _health(reading) and _personal(text):
            return  # the user's allergy, said in a project's chat: not a rule of the project
        yield ("team_conventions" if _CONVENTION.search(text) else "constraints"), _clean(text), ""
        if not negative:
            yield from _stack(text)
        return
    if kind == MemoryType.HABIT:
        yield "team_conventions", _clean(text), ""
        if not negative:
            yield from _stack(text)
        return
    if kind == MemoryType.PREFERENCE:
        if _CONVENTION.search(text):
            yield "team_conventions", _clean(text), ""
        if not negative:
            yield from _stack(_str(reading.parts.get("object")) or text)
        return
    if kind in (MemoryType.CONTEXT, MemoryType.FACT):
        # The extractor's parts first ("I'm building a Rust CLI ..." -> project), then cue words.
        goal = _str(reading.parts.get("goal")) or _str(reading.parts.get("project")) or _first(_GOAL, text)
        phase = None if goal else _first(_PHASE, text)
        if goal:
            yield "project_goal", goal, ""
        if phase:
            yield "current_phase", phase, ""
    if not negative:
        yield from _stack(text)


def clues(items: Sequence[MemoryItem], scope: ProfileScope) -> list[Clue]:
    """Every clue the items give for a profile of ``scope``."""
    out: list[Clue] = []
    for item in items:
        out.extend(_item_clues(item, scope))
    return out


# A profile is read on every context() call and its items rarely change, so each item
# version's clues are worked out once (items are immutable; a change bumps the version).
_CLUE_CACHE: OrderedDict[tuple[str, str, int, str, str], tuple[Clue, ...]] = OrderedDict()
_CLUE_CACHE_SIZE = 20_000


def _item_clues(item: MemoryItem, scope: ProfileScope) -> tuple[Clue, ...]:
    key = (item.tenant_id, item.id, item.version, item.updated_at.isoformat(), scope)
    hit = _CLUE_CACHE.get(key)
    if hit is not None:
        _CLUE_CACHE.move_to_end(key)
        return hit
    rule = _user_clues if scope == "user" else _project_clues
    found: list[Clue] = []
    for reading in _readings(item):
        confidence = min(item.confidence, CONFIDENCE_HEDGED) if reading.hedged else item.confidence
        for field, value, slot in rule(item, reading):
            if isinstance(value, str) and not value:
                continue
            found.append(Clue(field, value, item.id, confidence, _at(item), item.mention_count, slot))
    _CLUE_CACHE[key] = result = tuple(found)
    while len(_CLUE_CACHE) > _CLUE_CACHE_SIZE:
        _CLUE_CACHE.popitem(last=False)
    return result


# ---------------------------------------------------------------- combining


def _rank(clue: Clue) -> tuple[bool, datetime, float]:
    return (clue.confidence >= CONFIDENT, clue.at, clue.confidence)


def _key(value: str | KeyDecision) -> str:
    return _norm(value.decision if isinstance(value, KeyDecision) else value)


def _ids(clues: Iterable[Clue]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.item_id for c in sorted(clues, key=lambda c: c.at, reverse=True)))


def _single(found: Sequence[Clue]) -> Aggregate | None:
    if not found:
        return None
    best = max(found, key=_rank)
    same = [c for c in found if _key(c.value) == _key(best.value)]
    assert isinstance(best.value, str)
    return Aggregate(best.value, _ids(same))


def _composed(found: Sequence[Clue], slots: Sequence[str]) -> Aggregate | None:
    parts: list[str] = []
    evidence: list[str] = []
    for slot in slots:
        these = [c for c in found if c.slot == slot]
        if slot in _MANY_SLOTS:
            listed = _listed(these, SENTENCE_LIST_CAP)
            if listed is not None:
                parts.extend(str(v) for v in listed.value)
                evidence.extend(listed.evidence)
            continue
        won = _single(these)
        if won is not None:
            assert isinstance(won.value, str)
            parts.append(won.value)
            evidence.extend(won.evidence)
    if not parts:
        return None
    return Aggregate("; ".join(parts), tuple(dict.fromkeys(evidence)))


def _listed(found: Sequence[Clue], cap: int) -> Aggregate | None:
    groups: dict[str, list[Clue]] = {}
    for c in found:
        groups.setdefault(_key(c.value), []).append(c)
    kept = [
        g
        for g in groups.values()
        if max(c.confidence for c in g) >= CONFIDENT or len({c.item_id for c in g}) >= 2
    ]
    if not kept:
        return None
    kept.sort(
        key=lambda g: (sum(c.weight for c in {c.item_id: c for c in g}.values()), max(c.at for c in g)),
        reverse=True,
    )
    kept = kept[:cap]
    values = tuple(str(max(g, key=_rank).value) for g in kept)
    return Aggregate(values, tuple(dict.fromkeys(i for g in kept for i in _ids(g))))


def _decisions(found: Sequence[Clue]) -> Aggregate | None:
    groups: dict[str, list[Clue]] = {}
    for c in found:
        groups.setdefault(_key(c.value), []).append(c)
    newest = sorted((max(g, key=_rank) for g in groups.values()), key=lambda c: c.at, reverse=True)
    newest = [c for c in newest if c.confidence >= CONFIDENT or len(groups[_key(c.value)]) >= 2][
        :DECISIONS_CAP
    ]
    if not newest:
        return None
    values = tuple(c.value for c in newest if isinstance(c.value, KeyDecision))
    return Aggregate(values, tuple(dict.fromkeys(i for c in newest for i in _ids(groups[_key(c.value)]))))


def _instructions(found: Sequence[Clue]) -> Aggregate | None:
    groups: dict[str, list[Clue]] = {}
    for c in found:
        groups.setdefault(_key(c.value), []).append(c)
    newest = sorted((max(g, key=_rank) for g in groups.values()), key=_rank, reverse=True)
    newest = [c for c in newest if c.confidence >= CONFIDENT][:INSTRUCTIONS_CAP]
    if not newest:
        return None
    return Aggregate("\n".join(str(c.value) for c in newest), tuple(c.item_id for c in newest))


def _written_language(items: Sequence[MemoryItem]) -> Aggregate | None:
    """The language the user's own items are written in, when most of those whose language
    shows (:func:`written_in`) agree."""
    by_lang: dict[str, list[MemoryItem]] = {}
    for item in items:
        tag = written_in(item.content)
        if tag is not None:
            by_lang.setdefault(tag, []).append(item)
    total = sum(len(v) for v in by_lang.values())
    for tag, written in by_lang.items():
        if len(written) >= 3 and len(written) * 3 >= total * 2:
            newest = sorted(written, key=_at, reverse=True)[:5]
            return Aggregate(tag, tuple(i.id for i in newest))
    return None


def aggregate(items: Sequence[MemoryItem], scope: ProfileScope) -> dict[str, Aggregate]:
    """The aggregated value of every field the items say something about."""
    found = clues(items, scope)
    by_field: dict[str, list[Clue]] = {}
    for c in found:
        by_field.setdefault(c.field, []).append(c)
    out: dict[str, Aggregate] = {}
    for field in fields_of(scope):
        these = by_field.get(field, [])
        result: Aggregate | None
        if field == "background":
            result = _composed(these, _BACKGROUND_SLOTS)
        elif field == "key_decisions":
            result = _decisions(these)
        elif field == "content":
            result = _instructions(these)
        elif field in LIST_FIELDS:
            result = _listed(
                these, SENTENCE_LIST_CAP if field in ("constraints", "team_conventions") else LIST_CAP
            )
        else:
            result = _single(these)
        if result is None and field == "language_preference":
            result = _written_language(
                [i for i in items if i.scope == Scope.USER and i.source == Source.USER]
            )
        if result is not None:
            out[field] = result
    return out
