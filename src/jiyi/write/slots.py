"""Same subject, different value: does a later statement change an earlier one?

Offline and rule-based, Chinese and English. A statement is read as a :class:`Claim`:

* **holder**: whose fact it is: the speaker (no holder words), or the people named in
  the subject ("my sister", "我女儿", "my wife's office" -> {wife});
* **subject**: the other terms before the predicate ("flight to Tokyo", "项目预算");
* **predicate**: the terms after it, split into **values** (numbers, dates, times,
  proper names, and whatever differs) and the relation around them;
* **cue**: a correction or change cue ("actually", "no longer", "switched to",
  "postponed to", "其实", "更正", "改成", "推迟到", "不再", "现在" ...) in the claim's
  sentence, or opening the whole text.

:func:`compare` says whether two claims fill the same slot (same holder, same subject,
same relation) and, if so, whether the value changed. It never looks at which data it
is used on: the lexicons below are general English and Chinese function words,
kinship terms and change verbs. Reconciliation (:mod:`jiyi.write.reconcile`) combines
it with the embedding similarity of the two statements.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache

from jiyi.text.names import is_zh_name
from jiyi.text.tokenize import terms

__all__ = [
    "Claim",
    "SlotMatch",
    "apart",
    "change_sentences",
    "claims",
    "compare",
    "digits",
    "ending_sentences",
    "has_cue",
    "is_person",
    "is_time_or_amount",
]

# -- cues ---------------------------------------------------------------------------------------

# A correction or change said in so many words. Matched on NFKC, case-folded text.
_CUE_EN = re.compile(
    r"\b(?:actually|correction|update|sorry|i\s+misspoke|scratch\s+that|change\s+of\s+plans?|not\s+\w+\s+anymore|"
    r"no\s+longer|any\s*more|instead|now|these\s+days|from\s+now\s+on|switched|changed|moved|relocated|"
    # the present tense of a change announced ("standup moves to 10:15 starting Monday")
    r"(?:moves|moving|changes|changing|switches|switching|shifts|shifting)\s+to|"
    r"postponed|pushed(?:\s+back)?|rescheduled|delayed|extended|raised|lowered|upgraded|downgraded|renamed|"
    r"went\s+up|went\s+down|got\s+(?:pushed|moved|changed)|quit|stopped|started|just\s+turned|refinanced|"
    r"cancelled|canceled|graduated|transferred)\b"
)
_CUE_ZH = re.compile(
    r"其实|更正|纠正|说错了|搞错了|不对|改成|改为|改到|改在|改用|改喝|改吃|改听|改学|换成|换到|换了|转到|转学|"
    r"推迟|延期|延到|延长|提前到|挪到|搬到|搬去|调到|跳槽|不再|已经不|现在|如今|最近|从下周起|从今天起|"
    r"以后|戒了|升级|涨到|涨了|降到|提到|提高到|改名|已经"
)
# "also", "too": an additional value, not a replacement.
_ADDITIVE = re.compile(r"\b(?:also|too|as\s+well|another|other)\b|也|还有|另外|又")
# A clause opening with "还有" / "also, ..." turns to another topic ("还有房租最后谈成5200了"):
# no additional value unless one is counted next ("还有一只狗", "also a dog").
_DISCOURSE = re.compile(
    r"^(?:对了|还有|另外|顺便说一下|顺便|also|and\s+also|plus|oh\s+and|btw|by\s+the\s+way)"
    r"(?![一两俩几个只\d])(?!\s*(?:a|an|another|one|two|\d+)\b)[\s,，]*"
)
# Restating the same value ("still", "还是") is the opposite of a change.
_STILL = re.compile(r"\b(?:still|as\s+always|confirm(?:ing|ed)?)\b|还是|依然|仍然|确认")
_NEGATION = re.compile(r"\b(?:no\s+longer|not|never|don't|doesn't|isn't|aren't|quit|stopped)\b|不|没|戒")

# -- holders ------------------------------------------------------------------------------------

_PEOPLE_EN = (
    "sister brother mother mom mum father dad parent parents son daughter kid kids child children wife husband "
    "partner girlfriend boyfriend fiance fiancee friend friends cousin uncle aunt grandma grandpa grandmother "
    "grandfather nephew niece colleague coworker boss neighbor neighbour roommate in-laws inlaws"
).split()
_PEOPLE_ZH = (
    "姐姐 妹妹 哥哥 弟弟 妈妈 母亲 爸爸 父亲 父母 儿子 女儿 孩子 老婆 妻子 老公 丈夫 对象 男朋友 女朋友 朋友 "
    "表哥 表姐 表弟 表妹 舅舅 叔叔 阿姨 姑姑 奶奶 爷爷 外婆 外公 侄子 侄女 同事 老板 邻居 室友 公婆 岳父 岳母"
).split()
_PEOPLE = frozenset(_PEOPLE_EN) | frozenset(_PEOPLE_ZH)


def is_person(word: str) -> bool:
    """Whether a claim's holder or subject word names a person: a relative or a Chinese
    name (capitalised Latin names are lost to case folding before claims are read)."""
    return word in _PEOPLE or is_zh_name(word)


_OTHERS_EN = frozenset({"he", "she", "they", "his", "her", "their", "him", "them"})
_OTHERS_ZH = re.compile(r"他|她|邻居家|别人")

# -- subject / predicate split ------------------------------------------------------------------

# The predicate starts at the first of these (after the leading noun phrase).
_VERBS_EN = (
    "is are am was were be been 's 'm 're will would can could has have had do does did "
    "live lives lived work works worked go goes went take takes took run runs ran use uses used drink drinks "
    "drank eat eats ate like likes liked love loves prefer prefers keep keeps kept park parks weigh weighs "
    "cost costs start starts starts leave leaves open opens end ends expire expires hold holds ship pay pays "
    "sleep sleeps wake wakes listen listens bank banks grew got moved switched changed quit stopped started "
    "just still now actually usually always also never often currently no smoke smokes drive drives watch "
    "watches need needs own owns store stores play plays swim swims teach teaches study studies"
).split()
_PRONOUNS_EN = frozenset({"i", "we", "you", "he", "she", "they", "it", "i'm", "we're"})
# Where a Chinese predicate starts: a verb, a time adverbial or a number.
_ZH_PRED = (
    r"是|在|叫|住|搬|改|换|推迟|提前|挪|延|定在|定于|涨|升|降|提高|提到|有|要|养|穿|开|用|喝|吃|学|跳槽|调|抽|留|"
    r"起床|喜欢|爱|讨厌|听|看|读|写|很|最|比较|更|去|(?<![早晚])上(?![午个])|坐|每|今年|去年|上个月|现在|已经|还|也|一般|通常|平时|最近|从|把|不|没|刚|"
    r"转|放|停|装|发|到期|早上|上午|下午|晚上|中午|周[一二三四五六日末]|星期|\d|"
    r"[一二三四五六七八九十两](?=[个只岁年月日号点层楼周])"
)
_ZH_PREDICATE = re.compile(_ZH_PRED)
# "我去东京的航班是...": a subject that ends in 的 + noun runs up to the predicate after it.
_ZH_SUBJECT_DE = re.compile(rf"^(?P<s>[^，,。；;是]{{0,12}}?的[^，,。；;的是]{{1,6}}?)(?={_ZH_PRED})")
_LEAD_CUE = re.compile(
    r"^\s*(?:(?:actually|correction|update|sorry|oh|wait|no|just\s+confirming|change\s+of\s+plans?|i\s+misspoke|"
    r"scratch\s+that)\b[\s,:;.!-]*)+|^\s*(?:(?:其实|更正一下|更正|纠正一下|纠正|说错了|不对|更新一下|确认一下|计划有变)[\s，,：:。！!]*)+"
)
# Adverbs of time an English clause may open with, before its subject ("these days I ...").
_EN_LEAD = re.compile(
    r"^(?:(?:these\s+days|nowadays|lately|recently|currently|now|today|from\s+now\s+on|as\s+of\s+\w+|"
    r"starting\s+(?:today|tomorrow|next\s+\w+))\b[\s,]*)+"
)

# -- change constructions -----------------------------------------------------------------------
# "We changed our sprint length to 2 weeks", "我们把迭代周期改成了2周": the thing that changed is
# the verb's object, its new value follows "to" / 成. Read as "<object> is <value>", so the
# clause lines up with how the value was first stated ("Our sprint length is 3 weeks").
_EN_CHANGE = re.compile(
    r"^(?P<who>(?:i|we|they|you)\s+)?(?:have\s+|had\s+|just\s+|finally\s+)*"
    r"(?:changed|switched|moved|upgraded|downgraded|renamed|raised|lowered|increased|decreased|reduced|"
    r"cut|bumped|pushed|postponed|rescheduled|extended|shortened|updated|reset|set)\s+"
    r"(?P<x>(?!(?:to|from|back|over|up|down|it|them|him|her)\b)[^,;]+?)\s+(?:from\s+[^,;]+?\s+)?to\s+(?P<y>.+)$"
)
# "I keep my spare key under the mat": where a thing is, said through the one who put it there.
_EN_PLACE = re.compile(
    r"^(?:i|we|they|you)\s+(?:usually\s+|always\s+|now\s+|just\s+)*"
    r"(?:keep|kept|put|store|stored|leave|left|park|parked|hide|hid)\s+"
    r"(?P<x>[^,;]+?)\s+(?P<y>(?:in|under|at|on|behind|inside|beside|next\s+to|by)\s+.+)$"
)
_ZH_CHANGE = re.compile(
    r"^(?P<who>[^把，,]{0,8}?)把(?P<x>[^，,]{1,12}?)"
    r"(?:改成|改为|改到|改在|换成|换为|调成|调到|调整到|调整为|挪到|推迟到|提前到|延到|延长到|延长至|缩短到|缩短为|"
    r"升级到|升级成|降到|降低到|提到|提高到|涨到|定在|定为|放在|放到|停在|存在|挂在)了?(?P<y>.+)$"
)
# 改用 / 改听 / 改喝 ...: "switched to using / listening to / drinking": the plain verb.
_ZH_SWITCH_VERB = re.compile(r"(?:改|换)(?=[用听喝吃学看玩坐开穿去骑住])")


def _as_state(clause: str, zh: bool) -> str:
    """A change construction read as the state it leads to (see :data:`_EN_CHANGE`)."""
    if zh:
        m = _ZH_CHANGE.match(clause)
        if m is not None:
            who = m.group("who").strip()
            return f"{who}{'的' if who else ''}{m.group('x')}是{m.group('y')}"
        return _ZH_SWITCH_VERB.sub("", clause)
    m = _EN_CHANGE.match(clause) or _EN_PLACE.match(clause)
    if m is None:
        return clause
    return f"{m.group('x')} is {m.group('y')}"


# -- values -------------------------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
# A Chinese numeral counts as a number before a measure word or unit (not 一起, 一直).
_ZH_NUMBER = re.compile(
    r"[零一二两三四五六七八九十百千]+(?=[个只岁年月日号点层楼周次分公斤块元万千百倍本位名天小时码兆])(?!分之)"
    r"|(?<=点)[零一二三四五六七八九十]+"
)
_EN_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
    )
    if i >= 2  # "one" is as often a pronoun as a number
}
_EN_NUMBER = re.compile(r"\b(?:" + "|".join(_EN_NUMBERS) + r")\b")
_TIME_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december noon midnight am pm morning afternoon evening tonight "
    "tomorrow 周一 周二 周三 周四 周五 周六 周日 星期一 星期二 星期三 星期四 星期五 星期六 星期日 "
    "上午 下午 晚上 早上 中午 凌晨 明天 后天 半 一刻 点 点半 点钟 分 刻".split()
)
_NUMERIC = re.compile(r"^\d+(?:[.:/]\d+)*(?:am|pm|st|nd|rd|th|k|gb|mb|km|kg|%|万|亿|号|日|月|点|岁|年)?$")
# Words that carry the relation, not a value; a change of these alone is no change of value.
_RELATION_EN = frozenset(
    "be is are am was were been will has have had do does did to in at on of for from with by into onto "
    "a an the my our your his her their its this that now still just actually currently again every each "
    "usually always often anymore longer no not instead so and but then also too really very from since "
    "switched changed moved moving relocated postponed pushed back rescheduled delayed extended raised "
    "lowered upgraded renamed went got turned new always usually often sometimes generally normally "
    "switch chang move relocat postpon push reschedul delay extend rais lower upgrad renam alway usual "
    "often current actual".split()
)
# Said around a change but not part of the value: when it happened, how sure, who.
_FILLER_ZH = frozenset(
    "了 的 我 我们 把 上个 上个月 去年 前年 最近 刚 刚刚 现在 目前 已经 如今 其实 还是 还 也 比较 更 都 就 又 "
    "这个 那个 一下 一般 通常 总是 平时 一直 改成 改为 改到 改在 换成 换到 转到 转学 挪到 调到 推迟 推迟到 延到 "
    "提前 提前到 改 换 调 跳槽 总 都 个 名 位 枚 只 条 件 张 种 一名 一个 一位".split()
)
_MULTI_EN = frozenset("have has had own owns like likes love loves enjoy enjoys prefer prefers".split())
_MULTI_ZH = re.compile(r"有|养|喜欢|爱")
# Relations only a person has, which add up whoever is named: pets, allergies, skills learned
# ("Priya is allergic to gluten" and to peanuts; "王芳养了一只猫" and a parrot).
_MULTI_ANY_EN = frozenset("allergic learned learnt".split())
_MULTI_ANY_ZH = re.compile(r"养|过敏|学会")
# A recurring day ("every Friday", "每个周六", "每周三"): another day is another slot.
_EVERY = re.compile(
    r"\bevery\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b"
    r"|每(?:个|一个)?(?:周|星期)([一二三四五六日天末])"
)
_SINGLE = re.compile(r"\b(?:favou?rite|best|main|go-to)\b|最")
_CANON = {
    # change verbs name the state they lead to
    "move": "live",
    "moved": "live",
    "relocat": "live",
    "搬": "住",
    "搬到": "住",
    "搬去": "住",
}


@dataclass(frozen=True)
class Claim:
    """One statement read as holder + subject + predicate."""

    text: str
    holder: frozenset[str]
    subject: frozenset[str]
    predicate: tuple[str, ...]
    numeric: frozenset[str]
    cue: bool
    additive: bool
    still: bool
    negated: bool
    multi: bool
    """The relation may hold several values at once (the speaker's have, like, 有, 喜欢; anyone's
    pets, allergies, skills learned): only a cue changes it."""
    every: frozenset[str] = frozenset()
    """The recurring days it holds on ("every friday" -> {"friday"}; 每个周六 -> {"六"})."""
    context: frozenset[str] = frozenset()
    """For a clause that continues one that introduced a thing ("王芳养了一只猫，今年4岁"): that
    clause's values, since what it says may be about the thing, not the person."""


@dataclass(frozen=True)
class SlotMatch:
    """Two claims fill the same slot; ``changed`` says whether the value differs."""

    changed: bool
    old: tuple[str, ...]
    new: tuple[str, ...]
    reason: str


def has_cue(text: str) -> bool:
    norm = _norm(text)
    return bool(_CUE_EN.search(norm) or _CUE_ZH.search(norm))


# "now" after a duration tells how long, not that something changed ("I've been writing
# for three months now"); nor does "right now" / "just now".
_DURATION_NOW = re.compile(r"\b(?:for|been)\b[^.;!?]*\bnow\b|\b(?:right|just)\s+now\b")
# A sentence with its end mark (a question is told by it); a point inside a number ("3.5")
# ends nothing, as in _SENTENCES.
_SENTENCE = re.compile(r".+?(?:[;；。.!！?？\n]+(?!\d)|$)", re.S)
_QUESTION = re.compile(r"[?？]\s*$|[吗呢]\W*$")


# "My new shift starts at 7am", "我的新工位在12楼": what replaced the one before. Read only
# here, not as a cue of the claims (has_cue), where it would loosen which subjects a
# statement may retire ("my new painting" is one more painting).
_NEW_ONE = re.compile(r"\b(?:my|our)\s+new\b|我的新|我们的新|我家的新")


def change_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that say something changed: a cue (not a duration's
    "now"), "my new ...", not "still", not a question ("现在住哪儿？", "any update on the
    running?" ask, they do not tell). A text opening with "Actually, ..." is not read as
    changing all of it here: in chat that opening is as often a filler."""
    found = (m.group() for m in _SENTENCE.finditer(_norm(text)))
    return [
        s
        for s in found
        if (has_cue(_DURATION_NOW.sub(" ", s)) or _NEW_ONE.search(s))
        and not _STILL.search(s)
        and not _QUESTION.search(s.strip())
    ]


# What ends a thing or takes it back rather than changing it: "I sold the Civic",
# "我和小雨分手了", "Turns out I'm not allergic to penicillin after all". Alone it says nothing
# changed ("I left early"): a reader ties it to the thing it names.
_ENDED = re.compile(
    r"\b(?:sold|gave\s+away|broke\s+up|split\s+up|divorced|moved\s+out|left|retired|rewrote|replaced|"
    r"turns?\s+out|turned\s+out|after\s+all)\b"
    r"|卖了|卖掉|分手|离婚|搬走|搬出|调走|调去|调到|离职|辞职|退休|不干了|重写|原来"
)


def ending_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (as :func:`change_sentences` reads them) that say something
    ended or was taken back; not a question."""
    found = (m.group() for m in _SENTENCE.finditer(_norm(text)))
    return [s for s in found if _ENDED.search(s) and not _QUESTION.search(s.strip())]


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("’", "'").casefold()


_ABBREV = re.compile(r"\b(?:dr|mr|mrs|ms|st|prof|jr|sr|no)\.")
# A space between Han characters ends a clause: people typing Chinese in a chat often leave
# out the comma ("日本去不成了 签证没赶上 国庆就在上海待着吧").
_CLAUSES = re.compile(
    r"[;；,，。.!！?？\n]+(?!\d)|\s+(?:but|so|and)\s+|但是|不过|所以|(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])"
)


def claims(text: str) -> list[Claim]:
    """The claims of ``text``: one per clause that has both a subject side and a predicate.

    A clause without a subject continues the topic of the clause before it, as both
    languages allow ("我跳槽了，现在在字节跳动工作"; "I quit Netflix and now use Disney+");
    after "换了X" / "changed my X" the topic is that X ("我换了家庭医生，现在是赵医生")."""
    return list(_claims_of(text))


@lru_cache(maxsize=4096)
def _claims_of(text: str) -> tuple[Claim, ...]:
    # Kept per text: a search's versions test compares each of its best hits with several
    # others, and the same memories rank for related queries (jieba and the claim reader
    # were 1.7 ms of a PostgreSQL search's client CPU, read per pair; docs/benchmarks.md).
    return tuple(_read_claims(text))


def _read_claims(text: str) -> list[Claim]:
    norm = _norm(text)
    # "Actually, ..." opening the text corrects all of it; a word of change inside it belongs
    # to its sentence ("Dmitri moved to Bergen; also, Oskar runs every Tuesday": Oskar's
    # running is no change).
    opened = bool(_LEAD_CUE.match(_ASIDE.sub(" ", norm))) and has_cue(norm)
    out: list[Claim] = []
    body = _ABBREV.sub(lambda m: m.group()[:-1], _LEAD_CUE.sub("", _ASIDE.sub(" ", norm)))
    topic, before = "", None
    for sentence in _SENTENCES.split(body):
        cue = opened or has_cue(sentence)
        for raw in _CLAUSES.split(sentence):
            clause = _DISCOURSE.sub("", _LEAD_CUE.sub("", raw).strip())
            if not clause:
                continue
            zh = bool(re.search(r"[\u4e00-\u9fff]", clause))
            lead = _ZH_LEAD.match(clause) if zh else None
            # a time of day leading the clause says when, which stays part of what it says
            when = "".join(_TIME_OF_DAY.findall(lead.group())) if lead else ""
            clause = _as_state(_ZH_LEAD.sub("", clause) if zh else _EN_LEAD.sub("", clause), zh)
            claim = _claim(clause, cue, zh)
            if topic and (claim is None or _no_subject(claim, clause)):
                continued = _claim(f"{topic}{'' if zh else ' '}{when}{clause}", cue, zh)
                if continued is not None and before is not None and before.multi:
                    continued = replace(continued, context=frozenset(before.predicate) - {_GAP})
                claim = continued or claim
            if claim is not None:
                out.append(claim)
                before = claim
            topic = _topic(clause, zh) or topic
    return out


_SENTENCES = re.compile(r"[;；。.!！?？\n]+(?!\d)")
_TIME_OF_DAY = re.compile(r"上午|下午|晚上|早上|中午|凌晨")


# A remark in brackets is an aside to its sentence ("(record 17)", "（记录编号 t0c1n13）",
# "(since 2019)"), not a claim of its own, nor one that continues the sentence's topic.
_ASIDE = re.compile(r"[(（][^()（）]*[)）]")

_FIRST_PERSON = re.compile(r"^(?:我|咱|俺)|^(?:i|we|my|our|me|us)\b")


# Words that may stand where a subject stands but say when or how often, not who or what:
# "今年4岁" after "刘洋养了一只猫", "never drinks cola after noon" after "Hiroshi prefers mate".
_NOT_SUBJECT = frozenset(
    "never always usually often sometimes rarely also still just "
    "今年 去年 明年 今天 昨天 明天 平时 每天 每周 每月 每年 上午 下午 晚上 早上 中午 凌晨".split()
)


@lru_cache(maxsize=1)
def _not_subject_terms() -> frozenset[str]:
    """:data:`_NOT_SUBJECT` as the tokenizer gives them ("usually" -> "usual")."""
    return _NOT_SUBJECT | frozenset(terms(" ".join(sorted(_NOT_SUBJECT))))


def _no_subject(claim: Claim, clause: str) -> bool:
    """A clause that names nobody ("下午从不喝奶茶" after "李娜每天早上喝豆浆"): read as the
    speaker's only when it says so (我 / I), else as the clause before's topic."""
    return not claim.subject and not claim.holder and not _FIRST_PERSON.match(clause)


_ZH_REPLACED = re.compile(
    r"^(?P<who>[^，,]{0,6}?)(?:换了|换掉了|改了|换过)(?:个|一个|新的)?(?P<x>[^，,]{1,10})$"
)
_EN_REPLACED = re.compile(
    r"^(?P<who>i|we)\s+(?:have\s+|just\s+)*(?:changed|switched|replaced)\s+(?P<x>(?:my|our)\s+[^,;]+)$"
)


def _topic(clause: str, zh: bool) -> str:
    """What a following clause without a subject is about: the object of "换了X" / "changed
    my X", else this clause's subject."""
    m = (_ZH_REPLACED if zh else _EN_REPLACED).match(clause)
    if m is not None:
        who = m.group("who").strip()
        return f"{who}的{m.group('x')}" if zh else m.group("x")
    subject, predicate = _split_zh(clause) if zh else _split_en(clause)
    return subject.strip() if predicate.strip() else ""


def _claim(clause: str, cue: bool, zh: bool) -> Claim | None:
    subject, predicate = _split_zh(clause) if zh else _split_en(clause)
    if not subject.strip() or not predicate.strip():
        return None  # no subject / predicate structure found: nothing to compare
    holder = _holder(subject, zh)
    # The holder is compared on its own; what is left is the thing the fact is about.
    subject_terms = (
        frozenset(terms(subject)) - frozenset(_PEOPLE_ZH) - frozenset(_PEOPLE_EN) - {"我", "我们", "咱们"}
    )
    subject_terms -= {t for t in subject_terms if t in {"user", "用户", "家"}}
    # "Never drink coffee after 3pm": a frequency word before the verb says how often, not who.
    subject_terms -= _not_subject_terms()
    person = not subject_terms  # the speaker or a person is the subject, not a thing
    pred_terms = tuple(_value_terms(predicate, person))
    numeric = frozenset(t for t in pred_terms if _is_numeric(t))
    while pred_terms and pred_terms[0] == _GAP:
        pred_terms = pred_terms[1:]
    if not set(pred_terms) - {_GAP}:
        return None  # "我跳槽了", "I moved": a change with no value said is nothing to compare
    # Possession and liking may hold several values at once ("I have 2 cats" and a dog).
    first_words = set(predicate.split()[:2])
    multi = (person and (bool(_MULTI_ZH.search(predicate)) if zh else bool(first_words & _MULTI_EN))) or (
        bool(_MULTI_ANY_ZH.search(predicate)) if zh else bool(first_words & _MULTI_ANY_EN)
    )
    multi = multi and not _SINGLE.search(clause)
    return Claim(
        clause,
        holder,
        frozenset(t for t in subject_terms if t not in _RELATION_EN),
        pred_terms,
        numeric,
        cue,
        bool(_ADDITIVE.search(clause)),
        bool(_STILL.search(clause)),
        bool(_NEGATION.search(predicate)) or bool(_NEGATION.search(subject)),
        multi,
        frozenset(a or b for a, b in _EVERY.findall(clause)),
    )


def _split_en(clause: str) -> tuple[str, str]:
    words = clause.split()
    if not words:
        return "", ""
    if words[0] in _PRONOUNS_EN or words[0].rstrip("'s") in _PRONOUNS_EN:
        return words[0], " ".join(words[1:])
    for i, word in enumerate(words[1:], 1):
        bare = word.strip(".,:;!?\"'")
        if bare in _VERBS_EN or (bare.endswith("ed") and len(bare) > 4):
            return " ".join(words[:i]), " ".join(words[i:])
    return "", clause


# Adverbs a Chinese clause may open with, before its subject.
_ZH_LEAD = re.compile(
    r"^(?:现在|目前|如今|已经|最近|后来|这阵子|这些天|其实|还是|从下周起|从今天起|从明天起|以后|"
    # a time of day leading a clause says when, it is no subject ("下午从不喝奶茶"); with 的
    # it is part of one ("下午的会改到三点")
    r"(?:每天)?(?:上午|下午|晚上|早上|中午|凌晨)(?!的))+"
)


# A time clause between the subject and its predicate says when, not what: "儿子过完生日9岁了"
# is about the son's age (as "儿子9岁了"), "我们公司过完年搬到浦东了" about the company.
# (An event before 过后/之后/以后 is read as two characters, 毕业 or 春节: a longer reach
# would take the holder's last character with it, "女儿毕业以后".)
_ZH_TIME_CLAUSE = re.compile(r"(?:过完|过了)[^，,。的]{1,3}$|[^，,。的]{2}(?:过后|之后|以后)$")


def _split_zh(clause: str) -> tuple[str, str]:
    clause = _ZH_LEAD.sub("", clause)
    m = _ZH_SUBJECT_DE.match(clause)
    if m:
        return m.group("s"), clause[m.end() :]
    m = _ZH_PREDICATE.search(clause, 1)
    if m is None:
        return "", clause
    subject = clause[: m.start()]
    if (t := _ZH_TIME_CLAUSE.search(subject)) is not None and t.start() > 0:
        subject = subject[: t.start()]
    return subject, clause[m.start() :]


def _holder(subject: str, zh: bool) -> frozenset[str]:
    if zh:
        found = {w for w in _PEOPLE_ZH if w in subject}
        if _OTHERS_ZH.search(subject):
            found.add("other")
        # "表哥" also contains "哥": keep the longest names only
        return frozenset(w for w in found if not any(w != o and w in o for o in found))
    words = {w.strip(".,:;!?\"'").removesuffix("'s") for w in subject.split()}
    found = {
        w.rstrip("s") if w.endswith("s") and w[:-1] in _PEOPLE_EN else w for w in words if w in _PEOPLE_EN
    }
    found |= {"other"} if words & _OTHERS_EN else set()
    possessive = {w.removesuffix("'s") for w in subject.split() if w.endswith("'s")}
    found |= {p for p in possessive if p not in _PEOPLE_EN and p not in ("it", "that", "what")}
    return frozenset(found)


_GAP = "|"
GAP = _GAP
"""The mark a :class:`Claim`'s predicate holds where words of no slot were left out."""
_ZH_ARTICLE = re.compile(r"(?<=是)一(?=[名个位])")
_PIECES = re.compile(
    r"\s+|(?<=[\u4e00-\u9fff])(?=[的和跟与把被给对从到])|(?<=[的和跟与把被给对从到])(?=[\u4e00-\u9fff])"
)


def _value_terms(predicate: str, person: bool) -> list[str]:
    """Terms of the predicate, numbers normalised (五 -> 5, "five" -> 5), stop words out.
    For a person, "moved to" says where they live now; for a thing it only says it changed."""
    # 是一名 / 是一个: an article, not the number 1.
    text = re.sub(r"(\d)\s+(am|pm)\b", r"\1\2", digits(_ZH_ARTICLE.sub("", predicate)))
    # 在 opening a place and 了 closing a clause are words of their own (the segmenter reads
    # 在后端组 as 在后 + 端组 and 平台组了 as 平台 + 组了).
    text = re.sub(r"了$", "", re.sub(r"^在(?=[\u4e00-\u9fff])", "在 ", text))
    out: list[str] = []
    for piece in _PIECES.split(text):
        kept = []
        for t in terms(piece):
            if t in _CANON:
                if person:
                    kept.append(_CANON[t])
            elif t not in _RELATION_EN and t not in _FILLER_ZH:
                kept.append(t)
        # A word that carries no value ("with", 的) still parts the words around it.
        out.extend(kept or [_GAP])
    return out


def digits(text: str) -> str:
    """``text`` with number words as digits: 五岁 -> 5岁, "two cats" -> "2 cats"; a Chinese
    clock time as hours:minutes, so its two spellings agree: 8点15 / 八点一刻 -> 8:15,
    两点半 -> 2:30, 10点45分 -> 10:45."""
    text = _ZH_NUMBER.sub(lambda m: _zh_number(m.group()), text)
    text = _ZH_CLOCK.sub(_clock, text)
    return _EN_NUMBER.sub(lambda m: _EN_NUMBERS[m.group().casefold()], text)


# Hours, then minutes as a number (分 optional), a quarter (刻) or a half (半).
_ZH_CLOCK = re.compile(r"(?<!\d)(\d{1,2})[点點]\s*(?:([13])刻|(半)|0?(\d{1,2})分?)")


def _clock(m: re.Match[str]) -> str:
    hours, quarters, half, minutes = m.groups()
    if minutes is not None:
        value = int(minutes)
    elif quarters is not None:
        value = 15 * int(quarters)
    else:
        value = 30 if half else 0
    return f"{hours}:{value:02d}" if value < 60 else m.group()


_ZH_PLACES = {"十": 10, "百": 100, "千": 1000}


def _zh_number(word: str) -> str:
    """四 -> 4, 十二 -> 12, 二十 -> 20, 两千 -> 2000, 千(兆) -> 1000, 一百零五 -> 105; anything
    else unchanged (五六个: "five or six" is no one number)."""
    total, digit, last_place = 0, None, 10_000
    for ch in word:
        if ch == "零":
            digit = None
        elif ch in _ZH_DIGITS:
            if digit is not None:
                return word
            digit = _ZH_DIGITS[ch]
        else:
            place = _ZH_PLACES[ch]
            if place >= last_place:
                return word  # 十百, 百千: not a numeral
            total += (1 if digit is None else digit) * place
            digit, last_place = None, place
    if digit is not None:
        total += digit
    elif total == 0:
        return "0" if word == "零" else word
    return str(total)


@lru_cache(maxsize=1)
def _time_terms() -> frozenset[str]:
    """The time words as the tokenizer gives them ("morning" -> "morn")."""
    return _TIME_WORDS | frozenset(terms(" ".join(sorted(_TIME_WORDS))))


_SAID_WHEN = frozenset(
    "yesterday today recently recent ago last "
    "上周 上星期 上个 上个月 上月 今年 去年 昨天 今天 前天 最近 刚 刚刚 这周 本周 这个月 今早".split()
)
# "week" / "month" / "year" place a statement in time only after "last" or before "ago"
# ("turned 6 last week"); alone they are part of a value ("5000 a month").
_SAID_WHEN_UNITS = frozenset({"week", "month", "year"})


def _said_when(words: set[str]) -> set[str]:
    """``words`` less those that place a statement in time relative to when it was said
    ("last week", "上周", "今年"): no part of the value a number gives."""
    kept = words - _SAID_WHEN
    if words & {"last", "ago"}:
        kept -= _SAID_WHEN_UNITS
    return kept


def is_time_or_amount(term: str) -> bool:
    """Whether an index term is a time word or a number with its unit ("周四", "morn",
    "4000", "3点"): values that different things share by chance."""
    return term in _time_terms() or _is_numeric(term)


def _is_numeric(term: str) -> bool:
    # 万/亿 after a number are split off by the segmenter ("4000", "万行").
    return bool(_NUMERIC.match(term)) or term in _time_terms() or term[:1] in ("万", "亿")


# When a recurring fact holds: another scope is another slot ("on weekdays" / "on weekends").
_SCOPES = frozenset("weekday weekdays weekend weekends 工作日 周末 节假日 假期 寒假 暑假".split())


def compare(
    old: Claim,
    new: Claim,
    *,
    cosine: float = 1.0,
    min_cosine: float = 0.5,
    stacking: bool = False,
    cue_discount: float = 0.2,
) -> SlotMatch | None:
    """Whether ``new`` fills the slot of ``old``, and whether it changes its value.

    ``min_cosine`` is the cosine a change needs, ``cue_discount`` lower when a word of
    change and a shared subject or relation already say it (both on the embedder's scale:
    :func:`jiyi.write.reconcile.config_on_scale`).

    ``stacking``: the kind of memory holds several values at once (habits, preferences:
    "I open Jira every morning" and "I open Figma every morning"); only a cue changes one.

    ``None``: different holders, subjects or relations (a near miss: nothing to retire).
    """
    a, b = set(old.predicate) - {_GAP}, set(new.predicate) - {_GAP}
    if _other_slot(old, new) or (a & _SCOPES) != (b & _SCOPES):
        return None
    gone, came = a - b, b - a
    shared = a & b
    if old.negated != new.negated:
        if shared and len(gone) + len(came) <= 1 and cosine >= min_cosine:
            said = "no longer" if new.negated else "now"
            return SlotMatch(True, (), (), f"same holder and subject ({_show(old)}), {said}: {_list(shared)}")
        if not shared - _time_terms() and not (new.cue and new.negated):
            # "never drinks cola" / "drinks coffee every morning": two facts; but "我抽烟" /
            # "我去年把烟戒了" stops what was said
            return None
    if not gone and not came:
        return SlotMatch(False, (), (), "same holder, subject and value")
    if old.negated and new.negated and not new.cue:
        return None  # what someone never does adds up ("never cola", "never black tea")
    if _earlier(old.predicate, new.predicate):
        return None  # "moved to Lhasa in 2015" after "... in 2022": history, not a newer value
    if new.additive and not new.cue:
        return None  # "I also like ramen": one more value, not another one
    if (old.multi or new.multi or stacking) and not new.cue:
        return None  # "has 2 cats" / "has 3 cats" without a word of change may be two facts
    if not _one_change(old, new, gone, came):
        return None
    if not shared and not old.subject and not new.cue:
        return None  # nothing but the speaker in common, and no word of change
    if cosine < _cosine_needed(old, new, shared, min_cosine, cue_discount):
        return None
    return SlotMatch(
        True,
        tuple(sorted(gone)),
        tuple(sorted(came)),
        f"same holder and subject ({_show(old)}), value {_list(gone)} -> {_list(came)}",
    )


def _other_slot(old: Claim, new: Claim) -> bool:
    """Whether the two claims' structure already says they fill different slots."""
    if old.holder != new.holder or not _same_subject(old.subject, new.subject, loose=new.cue):
        return True
    if new.still and not new.cue:
        return True  # "still", "还是": a restatement, whatever the word order
    if old.context != new.context:
        return True  # "今年4岁" said after another pet: about that pet, not the same slot
    # "runs every Friday" / "runs every Tuesday": both may hold
    return old.every != new.every and bool(old.every and new.every) and not new.cue


def _earlier(old: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """Whether the later statement names only years before every year the earlier names."""
    years_old = [int(t[:4]) for t in old if _YEAR.match(t)]
    years_new = [int(t[:4]) for t in new if _YEAR.match(t)]
    return bool(years_old and years_new) and max(years_new) < min(years_old)


def _one_change(old: Claim, new: Claim, gone: set[str], came: set[str]) -> bool:
    """Whether what differs reads as one value replaced, not as another statement."""
    words_gone, words_came = gone - old.numeric, came - new.numeric
    numbers_gone, numbers_came = gone & old.numeric, came & new.numeric
    if words_came and not numbers_came and any(_kind(t).startswith("of ") for t in numbers_gone):
        # An amount or age gave way to words alone ("王芳养了两只猫" / "王芳去年搬到了杭州",
        # "上三年级" / "在学小提琴"): another fact of the same person. A date may ("expires in
        # 2025" / "was renewed").
        return False
    if numbers_gone and numbers_came:
        if not _same_kind(numbers_gone, numbers_came):
            return False  # "今年5岁" / "2005年搬到厦门", "is 30" / "in 2019": an age is not a year
        # When it was said is no part of the value: "is 5" / "turned 6 last week", "今年5岁"
        # / "上周过了6岁生日".
        words_gone, words_came = _said_when(words_gone), _said_when(words_came)
        # A number, date or time changed: everything else must stay (the counted thing, the
        # unit), except a qualifier one side leaves out.
        if words_gone and words_came and not new.cue:
            return False
        return _phrases(words_gone) <= 2 and _phrases(words_came) <= 2
    limit = 3 if new.cue else 2  # without a word of change, only a small difference is a new value
    if _phrases(gone) > limit or _phrases(came) > limit + 1:
        return False
    # Two things differ ("window seats on flights" / "aisle seats on trains").
    return not (_runs(old.predicate, gone) > 1 and _runs(new.predicate, came) > 1 and not new.cue)


_YEAR = re.compile(r"^(?:1[89]|20)\d\d年?$")
_UNIT = re.compile(r"^[\d.,:/]+(?P<unit>\D*)$")


def _kind(term: str) -> str:
    """What kind of quantity a number is: a time (9am, 周五, 8:15), a calendar year (2019,
    2005年) or an amount, with its unit when written on it (16gb, 10th; "" when apart)."""
    if term in _time_terms() or ":" in term or term.endswith(("am", "pm")):
        return "time"
    if _YEAR.match(term):
        return "year"
    m = _UNIT.match(term)
    unit = m.group("unit") if m is not None else ""
    return "of " + ("th" if unit in ("st", "nd", "rd") else unit)  # 3rd and 10th: one kind


def _same_kind(old: set[str], new: set[str]) -> bool:
    """Whether some changed number on each side is the same kind of quantity. A bare amount
    agrees with any amount or time, never with a calendar year ("is 30" / "in 2019",
    "今年5岁" / "2005年")."""

    def agree(a: str, b: str) -> bool:
        if a == b or {a, b} == {"time", "year"}:
            return True
        return (a == "of " and b != "year") or (b == "of " and a != "year")

    return any(agree(_kind(a), _kind(b)) for a in old for b in new)


def _cosine_needed(old: Claim, new: Claim, shared: set[str], base: float, discount: float) -> float:
    """The embedding similarity a change needs: less (by ``discount``) the more the structure
    already says. A word of change and a shared subject or relation ("live", 住, "the
    flight") is strong evidence, as sentence embeddings of "I live in Berlin" and "I moved
    to Munich" are far apart."""
    if new.cue and (shared or old.subject):
        return base - discount
    return base


def _same_subject(a: frozenset[str], b: frozenset[str], *, loose: bool = False) -> bool:
    """Equal subjects; a term that is only part of a term on the other side does not count
    (the segmenter's sub-words: 负责人 / 负责). ``loose`` (a change is announced) lets one
    side name one more word ("the tax filing" / "the tax filing deadline")."""
    extra = {t for t in a - b if not any(t in o or o in t for o in b)}
    extra |= {t for t in b - a if not any(t in o or o in t for o in a)}
    if not extra:
        return True
    return loose and len(extra) == 1 and bool(a & b) and (extra <= a or extra <= b)


# Titles go with a name ("Mr. Brown" -> "Mrs. Garcia", 老刘 -> 孙阿姨): not a second change.
_TITLES = frozenset("mr mrs ms miss dr prof sir madam 先生 女士 小姐 阿姨 医生 老师 师傅 老 小".split())


def _runs(sequence: tuple[str, ...], words: set[str]) -> int:
    """How many separate stretches of ``sequence`` the changed ``words`` make ("honda civic"
    is one; "window ... flights" is two). Titles go with the name beside them."""
    runs, inside = 0, False
    for term in sequence:
        if term in words and term not in _TITLES:
            runs += not inside
            inside = True
        elif term not in _TITLES and not (term == _GAP and not inside):
            inside = False
    return runs


def _phrases(words: set[str]) -> int:
    """How many distinct words, counting a segmenter's sub-words with their word."""
    return sum(1 for t in words if t not in _TITLES and not any(t != o and t in o for o in words))


def _show(claim: Claim) -> str:
    who = "+".join(sorted(claim.holder)) or "speaker"
    what = " ".join(sorted(claim.subject))
    return f"{who}: {what}" if what else who


def _list(words: set[str]) -> str:
    return "{" + ", ".join(sorted(words)) + "}" if words else "{}"


def apart(old: str, new: str, strict: bool = False) -> str | None:
    """Why two statements are about different things, by their structure alone: another
    holder ("my wife works at ..." / "I work at ..."), another subject ("Q1 revenue" /
    "Q2 revenue"), another scope (weekdays / weekends), or one more value ("I also ...").
    None when nothing in their structure keeps them apart (they may be one fact's versions).
    ``strict``: a subject that only contains the other is another subject too ("the workshop
    after the conference" / "the conference"), for a reader with less evidence than a slot."""
    a, b = _claims_of(old), _claims_of(new)
    if any(c.additive and not c.cue for c in b):
        return "one more value"
    if _scope_terms(old) != _scope_terms(new):
        return "another scope"
    if a and b:
        if not any(x.holder == y.holder for x in a for y in b):
            return "another holder"
        if all(
            x.subject and y.subject and not _same_subject(x.subject, y.subject, loose=not strict)
            for x in a
            for y in b
        ):
            return "another subject"
    return None


@lru_cache(maxsize=4096)
def _scope_terms(text: str) -> frozenset[str]:
    return frozenset(terms(_norm(text))) & _SCOPES | frozenset(w for w in _SCOPES if w in text)
