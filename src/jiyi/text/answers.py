"""What kind of answer a question asks for, and whether a text holds one, in English and
Chinese (patterns for Spanish, French, German, Russian, Japanese and Korean were measured
and left out: docs/benchmarks.md).

"When did Mel go camping?" is answered by a turn that says when ("We went last weekend"),
"How many kids does she have?" by one that gives a number, "Where did she move from?" by
one that names a place. On LoCoMo, 78% of the turns that answer a "when" question hold a
time expression against 12% of all turns; 27% of those answering "how many / how much /
how old" a number, against 7%; 46% of those answering "where" a place, against 2%
(docs/benchmarks.md, "the kind of answer a question asks for"). So the search's fusion has
an ``answer`` feature for a candidate that holds the kind of answer the query asks for
(:mod:`jiyi.read.fusion`).

:func:`asked_kind` reads the question ("time", "number", "place" or None); :func:`holds`
whether a text holds such an answer. Both are word patterns: cheap, and wrong in a way that costs
little (a feature among others, never a filter).

:func:`without_framing` takes out of a question the words that say how it asks rather than
what about ("How many *different* X", "*Can you recommend* X", "*our previous chat about* X"),
so that the search's keywords are its subject (docs/benchmarks.md, session 26).

:func:`only_asks` tells a text that only asks a question ("Hey Mel! How was the trip?"),
whose evidence the search's fusion counts less, unless :func:`about_asking` finds the query
itself a request or about what was asked (docs/benchmarks.md, session 27).
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from jiyi.text.sentences import question_apart, split_sentences

Kind = Literal["time", "number", "place"]

_I = re.IGNORECASE

# ---------------------------------------------------------------- the question

# "when did ...", "where is ...": the question word before an auxiliary, mid-sentence too.
_AUX = r"(?:did|does|do|is|was|were|will|would|are|has|have|had|can|could|should)"
_ASKS_TIME_EN = re.compile(
    r"^\s*when\b"
    rf"|\bwhen\s+{_AUX}\b"
    r"|\b(?:what|which)\s+(?:year|month|day|date|time|week|weekend|season|night)\b"
    r"|\bhow\s+long\s+ago\b|\bsince\s+when\b|\bwhat\s+time\b",
    _I,
)
_ASKS_TIME_ZH = re.compile(
    r"什么时候|啥时候|何时|哪天|哪一天|哪年|哪一年|哪个月|哪月|几月|几号|几点|星期几|周几|礼拜几|多久以前|多久前|什么时间|哪个时候"
)
_QUANTITY = (
    r"(?:number|percentage|age|price|amount|size|score|grade|weight|cost|distance|height|length|duration|"
    r"sum|temperature|budget|salary|rent|speed|capacity|population|count|fee|mileage|quantity|volume|total)"
)
_ASKS_NUMBER_EN = re.compile(
    r"\bhow\s+(?:many|much|old|long|far|often|tall|big|heavy)\b"
    # "What is the total weight of ...", "What was my score", "What's the price"
    r"|\b(?:what|which)(?:'s|\s+(?:is|was|are|were))?\s+(?:(?:the|my|our|your|his|her|their)\s+)?"
    rf"(?:(?:total|combined|overall|average|exact|approximate)\s+)?{_QUANTITY}\b"
    rf"|\btotal\s+(?:{_QUANTITY}|time)\b|\bin\s+total\b",
    _I,
)
_ASKS_NUMBER_ZH = re.compile(r"多少|几[个岁次年天本只件位口块元周遍趟场]|多大|多久|多长|多高|多重|多远")
_ASKS_PLACE = re.compile(
    rf"^\s*where\b|\bwhere\s+{_AUX}\b"
    r"|\b(?:which|what)\s+(?:city|country|state|province|town|village|place|neighbou?rhood|area|restaurant|"
    r"store|shop|cafe|bar|hotel|school|university|college|hospital|park|beach|island)\b"
    r"|哪里|哪儿|在哪|去哪|什么地方|啥地方|哪个(?:城市|国家|地方|省|区|学校|医院|公园)|哪座城市|哪家",
    _I,
)
_ASKS: tuple[tuple[Kind, tuple[re.Pattern[str], ...]], ...] = (
    # In this order: "how long ago" asks for a time, not a number.
    ("time", (_ASKS_TIME_EN, _ASKS_TIME_ZH)),
    ("number", (_ASKS_NUMBER_EN, _ASKS_NUMBER_ZH)),
    ("place", (_ASKS_PLACE,)),
)


@functools.lru_cache(maxsize=1024)
def asked_kind(query: str) -> Kind | None:
    """The kind of answer ``query`` asks for: "time" ("When did ...?", "什么时候"),
    "number" ("How many ...?", "多少"), "place" ("Where ...?", "在哪"), or None. A question
    asking both a time and a number ("how long ago") asks for a time."""
    for kind, patterns in _ASKS:
        if any(p.search(query) for p in patterns):
            return kind
    return None


# A counting or totalling question's own framing: "How many *different* doctors", "the
# *total number of* siblings", "How many *times* did I bake", "How many *pieces of*
# jewelry", "我*一共*去过几次". These words say how to count, not what, yet as keywords
# they match turns that use them for anything else ("Half a number plus 5 is 11. What is
# the number?").
_QUALIFIER = r"(?:different|distinct|separate|various|unique|individual)"
_COUNTING_FRAME = (
    rf"(?<=\bhow many )(?:{_QUALIFIER}\s+)?(?:(?:types|kinds|sorts|pieces|items|pairs)\s+of\b|times\b)"
    rf"|(?<=\bhow many ){_QUALIFIER}\b"
    r"|\btotal(?:\s+(?:number|amount|count)\s+of)?\b"
    r"|(?<=\bwhat is the )number\s+of\b|(?<=\bwhat's the )number\s+of\b"
    r"|\bin total\b|\baltogether\b|\bin all\b"
    r"|总共|一共|总计|合计|加起来|不同的"
)
# A request's own framing: "Can you *recommend* ...", "*Any advice?*", "*I'm looking for
# some ideas*", "*你觉得*", "*有什么推荐*". They ask the assistant to act, and say nothing of
# what about; as keywords they match every earlier request ("I'm looking for some new TV
# show recommendations") instead of what the user said about the subject. "What did I
# recommend to Sarah?" is a question about a memory, not a request: its verb stays.
_HELP = (
    r"(?:(?:good|helpful|useful|great|new|fresh|other|more)\s+)?"
    r"(?:advice|suggestions?|tips|ideas|recommendations?|inspiration)"
)
_REQUEST_FRAME = (
    r"\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:recommend|suggest|give\s+me|offer|provide|share"
    r"|help\s+me(?:\s+(?:find|choose|pick|come\s+up\s+with|with))?)\b"
    rf"|\bwhat\s+(?:do|would)\s+you\s+(?:recommend|suggest)\b|\bdo\s+you\s+have\s+any(?:\s+{_HELP})?\b"
    rf"|\b(?:any|some|me)\s+{_HELP}\b"
    rf"|\b(?:i\s+need|i\s+want|i\s+would\s+like|i'd\s+like|i'm\s+looking\s+for|looking\s+for)\s+(?:some\s+|any\s+)?{_HELP}\b"
    r"|\bdo\s+you\s+think\b|\b(?:would\s+it|it\s+would)\s+be\s+a\s+good\s+idea\b|^\s*(?:please\s+)?(?:recommend|suggest)\b"
    r"|有(?:什么|没有|啥)(?:好的?)?(?:推荐|建议)|(?:推荐|建议)(?:一下|吗|呢)|给(?:我)?(?:点|些|一些)?(?:建议|推荐)|你(?:觉得|建议|推荐)|帮我(?:推荐|想想)"
)
# A question's pointer back to the conversation: "I was going through *our previous
# conversation* about X, *can you remind me* ...", "*I mentioned* cooking something", "*你
# 之前说过*". Every memory is from an earlier conversation, so these say where to look,
# not what for; as keywords they match every turn that says "as I mentioned".
_RECALL_FRAME = (
    r"\b(?:in\s+|from\s+|during\s+)?(?:our|the|that)\s+(?:previous|last|earlier|past|recent)\s+"
    r"(?:conversations?|chats?|discussions?|talks?|sessions?)\b"
    r"|\b(?:can|could)\s+you\s+(?:please\s+)?remind\s+me\b|\bremind\s+me\b"
    r"|\bi\s+was\s+wondering(?:\s+if\s+you\s+could)?\b"
    r"|\b(?:i\s+was|i\s+am|i'm)\s+(?:going|looking|thinking)\s+(?:back\s+)?(?:through|at|over|to|about)\b"
    r"|\b(?:i|you|we)\s+(?:mentioned|told\s+(?:me|you)|talked\s+about|discussed|chatted\s+about)\b"
    r"|\b(?:do\s+you|i)\s+remember\b|\bfollow\s+up\s+on\b"
    r"|我们?(?:之前|上次|以前)(?:聊|说|谈|讨论)(?:过|到)的?|我(?:之前|上次|以前)?(?:提到|说过|讲过)的?"
    r"|你(?:之前|上次|以前)?(?:说过|提到过?|推荐过|建议过)的?|(?:你)?还记得|提醒(?:一下)?我"
)
_FRAME = re.compile(f"{_COUNTING_FRAME}|{_REQUEST_FRAME}|{_RECALL_FRAME}", _I)
_WORD = re.compile(r"\w")
_FRAME_WORDS = (
    # One of these is in every text the patterns above match (lower case): most queries
    # hold none, and a substring test costs a fraction of the patterns (~50 us a query).
    *("how many", "total", "number of", "altogether", "in all"),
    *("you", "advice", "suggest", "tips", "idea", "recommend", "inspiration"),
    *("conversation", "chat", "discussion", "talk", "session", "remind", "wondering"),
    *("going", "looking", "thinking", "mentioned", "told", "discussed", "remember", "follow up"),
    *("总共", "一共", "总计", "合计", "加起来", "不同的", "推荐", "建议", "觉得", "帮我"),
    *("之前", "上次", "以前", "提到", "说过", "讲过", "记得", "提醒"),
)


_ASKING = re.compile(f"{_REQUEST_FRAME}|{_RECALL_FRAME}", _I)
_ASKED = re.compile(r"\b(?:ask|asks|asked|asking)\b|问过|问了|提问", _I)


def _may_frame(query: str) -> bool:
    """Whether ``query`` holds one of :data:`_FRAME_WORDS`, without which no framing
    pattern matches."""
    low = query.lower()
    return any(word in low for word in _FRAME_WORDS)


def about_asking(query: str) -> bool:
    """Whether ``query`` is itself a request, points back to the conversation or is about
    asking ("Any tips?", "Can you recommend ...", "our previous chat about X", "What did
    Jolene ask Deb?", "你之前推荐过"): then what someone asked before (a request that told
    what the user likes) may be what it looks for, and a text that only asks is no weaker
    evidence than another."""
    if _ASKED.search(query):
        return True
    return _may_frame(query) and _ASKING.search(query) is not None


# A question about what the assistant said or gave ("What did you recommend?", "your
# suggestion", "你之前推荐的", "me recomendaste", "tu m'as conseillé", "ты советовал").
_ASSISTANT_SAID = re.compile(
    r"\b(?:you\s+(?:said|told|mentioned|recommended|suggested|gave|shared|provided|listed|wrote|explained|proposed)"
    r"|did\s+you\s+(?:say|recommend|suggest|mention|tell|give|share|list|propose)"
    r"|your\s+(?:answer|suggestions?|recommendations?|advice|reply|response|list|tips?))\b"
    r"|你(?:之前|上次|刚才|以前)?(?:说|推荐|建议|提到|给)"
    r"|\b(?:me\s+(?:recomendaste|sugeriste|dijiste|aconsejaste)|tu\s+m'as\s+(?:conseillé|recommandé|dit|suggéré)"
    r"|du\s+hast\s+mir\s+\w+|(?:ты|вы)\s+(?:советовал|посоветовал|рекомендовал|сказал)\w*"
    r"|(?:você|tu)\s+me\s+(?:recomendou|sugeriu|disse)|mi\s+hai\s+(?:consigliato|suggerito|detto))\b"
    r"|(?:あなた|君)が(?:勧め|すすめ|言っ|教え)|(?:네가|당신이|니가)\s*(?:추천|말|알려)",
    _I,
)


_RECALL = re.compile(_RECALL_FRAME, _I)


def about_the_assistant(query: str) -> bool:
    """Whether ``query`` asks for what the assistant said ("What did you recommend?") or
    points back to the conversation ("can you remind me", "our previous chat"): then the
    assistant's turns are as good an answer as the user's. A request ("Can you recommend a
    show?") is not: what it looks for is what the user said they like."""
    return _ASSISTANT_SAID.search(query) is not None or _RECALL.search(query) is not None


def without_framing(query: str) -> str:
    """``query`` less the words that frame a count or a total ("How many different X",
    "the total number of X", "how many times", "一共", "不同的"), a request to the
    assistant ("Can you recommend X", "Any advice?", "有什么推荐") or a pointer back to
    the conversation ("our previous chat about X", "can you remind me", "I mentioned",
    "你之前说过"): they say how to count, that the user wants something, or where to look,
    not what about; the question's keywords are its subject. A query that is nothing but
    framing ("total", "一共", "Any advice?") is kept whole: then the framing is all it asks."""
    if not _may_frame(query):
        return query
    rest = _FRAME.sub(" ", query)
    return rest if _WORD.search(rest) else query


# ---------------------------------------------------------------- the text

_MONTH_NAMES = (
    "january|february|march|april|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAY_NAMES = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_ZH_DIGIT = "[0-9０-９一二两三四五六七八九十]"
_TIME_EN = re.compile(
    # "May" alone is mostly the verb: only with a day or in/since/last ... ("in May").
    rf"\b(?:{_MONTH_NAMES}|{_DAY_NAMES})\b"
    r"|\b(?:in|since|during|last|this|next|early|late|mid|until|by)\s+may\b|\bmay\s+\d{1,2}\b"
    r"|\b(?:yesterday|today|tonight|tomorrow|recently|lately)\b"
    r"|\b(?:last|this|next|past|coming)\s+(?:week|weekend|month|year|night|summer|winter|spring|fall|autumn|semester|term)\b"
    r"|\bago\b|\b(?:19|20)\d\d\b|\b\d{1,2}(?::\d\d)?\s*(?:am|pm)\b|\bo'clock\b"
    r"|\b(?:this|that|every|each|on)\s+(?:morning|afternoon|evening)\b|\bthe\s+other\s+day\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,4}[/-]\d{1,2}(?:[/-]\d{1,4})?\b",
    _I,
)
_TIME_ZH = re.compile(
    r"昨天|今天|明天|前天|后天|昨晚|今晚|明晚|前几天|那天|当天|上周(?!年)|下周(?!年)|这周(?!年)|本周(?!年)|上个?星期|下个?星期|这个?星期"
    r"|上个?礼拜|下个?礼拜|周末|上个?月|下个?月|这个月|本月|去年|今年|明年|前年|年初|年底|月初|月底|春节|国庆|元旦|中秋|暑假|寒假"
    rf"|(?:周|星期|礼拜)[一二三四五六日天]|{_ZH_DIGIT}+\s*(?:年|月|[日号]|点|点半|分钟?前|天前|周前|个月前|年前)"
    r"|早上|上午|中午|下午|傍晚|晚上|凌晨",
)
_NUMBER_EN = re.compile(
    r"\d"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"thousand|million|dozen|twice|couple)\b",
    _I,
)
# A Chinese numeral counts with a measure word or unit after it: 一 alone is mostly
# "一下", "一起", "一直".
_NUMBER_ZH = re.compile(
    r"[0-9０-９]|俩|仨|[一二两三四五六七八九十百千万亿半]+\s*"
    r"(?:个|岁|次|年|天|本|只|件|位|口|块|元|米|斤|周|遍|趟|场|名|条|张|套|台|辆|家|所|门|分|倍|层|号|月|公里|小时|万|千|百)"
)
_NOT_PLACE = rf"(?!(?i:{_MONTH_NAMES}|may|{_DAY_NAMES}|i|the|a|an|my|our|his|her|their|this|that)\b)"
_PLACE_EN = re.compile(
    # A capitalised name after a word of place ("moved to Seattle", "in Portland", "from Sweden").
    rf"\b(?:in|at|to|from|near|around|outside|visit(?:ed|ing)?|toward|towards)\s+(?:the\s+)?{_NOT_PLACE}[A-Z][a-z]+",
)
_ZH_CITIES = (
    "北京|上海|广州|深圳|杭州|成都|重庆|武汉|西安|南京|天津|苏州|长沙|青岛|厦门|大连|昆明|郑州|沈阳|哈尔滨|济南|"
    "合肥|福州|南宁|贵阳|兰州|太原|石家庄|南昌|宁波|无锡|珠海|佛山|东莞|三亚|拉萨|乌鲁木齐|呼和浩特|香港|澳门|台北|"
    "东京|大阪|京都|首尔|釜山|纽约|伦敦|巴黎|新加坡|悉尼|墨尔本|温哥华|多伦多|洛杉矶|旧金山|西雅图|波士顿|芝加哥|"
    "柏林|慕尼黑|罗马|米兰|马德里|巴塞罗那|阿姆斯特丹|曼谷|清迈|吉隆坡|迪拜|莫斯科"
)
_PLACE_ZH = re.compile(
    rf"{_ZH_CITIES}"
    r"|(?:在|去|到|从|住|回|来自)了?[\u4e00-\u9fff]{1,5}(?:市|省|区|县|镇|村|路|街|国|州|岛|湾|城|机场|车站|公园|大学|医院)"
    # where someone moved or lives, named or not ("搬家到了闵行七宝", "定居在大理")
    r"|(?:搬家?到|搬去|搬回|住在|住到|定居在?|落户在?)了?\s*[\u4e00-\u9fff]{2}"
)
_HOLDS: dict[Kind, tuple[re.Pattern[str], ...]] = {
    "time": (_TIME_EN, _TIME_ZH),
    "number": (_NUMBER_EN, _NUMBER_ZH),
    "place": (_PLACE_EN, _PLACE_ZH),
}


@functools.lru_cache(maxsize=8192)
def holds(text: str, kind: Kind) -> bool:
    """Whether ``text`` holds an answer of ``kind``: a time expression ("last weekend",
    "in May", "2023", "上周五", "3月8号"), a number ("two kids", "¥3,000", "三个人") or a
    place ("moved to Seattle", "在上海", "搬到了朝阳区")."""
    return any(p.search(text) for p in _HOLDS[kind])


# -- a text that only asks -------------------------------------------------------------

# What a sentence says, counted: a word of a spaced script (Latin, Cyrillic, Greek, Arabic...)
# is one unit; a Han, kana or Hangul character, a syllable or so, half of one (a Korean word
# carries its particles and endings: "이사했어요" is "I moved").
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_UNIT = re.compile(rf"[{_UNSPACED}]|[^\W_{_UNSPACED}](?:[^\W_{_UNSPACED}]|')*")
_HALF = re.compile(f"[{_UNSPACED}]")
# A statement with a question tag asks only for a nod ("You were stoked to get back on the
# road, right?", "你去过北京吧？"): it tells.
_TAG = re.compile(
    r"(?:,\s*(?:right|eh|no|yeah|huh|ok|okay|correct|true"
    r"|(?:is|are|was|were|do|does|did|have|has|had|can|could|will|would|should|won|wo)(?:n't|\s+not)?"
    r"\s+(?:i|you|he|she|it|we|they|there|that))"
    r"|对吧|是吧|对不对|是不是|没错吧|吧)\s*[?？]+[\s!?！？.)\"']*$",
    re.IGNORECASE,
)
_ASIDE_UNITS = 3.0
"""A sentence this short beside a question is an aside ("Hey Mel!", "Thanks!", "太好了！")."""


@functools.lru_cache(maxsize=8192)
def only_asks(text: str) -> bool:
    """Whether ``text`` only asks: it holds a question ("How was the trip?", "周末去哪了？")
    and every other sentence is a short aside ("Hey Mel! How was the trip?"). A question
    presupposes, it does not tell: such a turn rarely holds what a later query looks for."""
    if "?" not in text and "？" not in text:
        return False
    asked = False
    for sentence in (p for s in split_sentences(text) for p in question_apart(s)):
        if ("?" in sentence or "？" in sentence) and not _TAG.search(sentence):
            asked = True
            continue
        units = sum(0.5 if _HALF.match(u) else 1.0 for u in _UNIT.findall(sentence))
        if units > _ASIDE_UNITS:
            return False
    return asked
