"""What kind of answer a question asks for, and whether a text holds one (English and
Chinese; the common forms of Spanish, Portuguese, French, German, Russian, Japanese and
Korean).

"When did Mel go camping?" is answered by a turn that says when ("We went last weekend"),
"How many kids does she have?" by one that gives a number, "Where did she move from?" by
one that names a place. On LoCoMo, 74% of the turns
that answer a "when" question hold a time expression against 9% of all turns, and 31% of
the turns that answer a "how many / how much / how old" question hold a number against 8%
(docs/benchmarks.md, "the kind of answer a question asks for"). So the search's fusion has
an ``answer`` feature for a candidate that holds the kind of answer the query asks for
(:mod:`jiyi.read.fusion`).

:func:`asked_kind` reads the question ("time", "number" or None); :func:`holds` whether a
text holds such an answer. Both are word patterns: cheap, and wrong in a way that costs
little (a feature among others, never a filter).
"""

from __future__ import annotations

import functools
import re
from typing import Literal

Kind = Literal["time", "number", "place"]

_I = re.IGNORECASE

# ---------------------------------------------------------------- the question

_ASKS_TIME_EN = re.compile(
    r"^\s*when\b"
    r"|\bwhen\s+(?:did|does|do|is|was|were|will|would|are|has|have|had|can|could|should)\b"
    r"|\b(?:what|which)\s+(?:year|month|day|date|time|week|weekend|season|night)\b"
    r"|\bhow\s+long\s+ago\b|\bsince\s+when\b|\bwhat\s+time\b",
    _I,
)
_ASKS_TIME_ZH = re.compile(
    r"什么时候|啥时候|何时|哪天|哪一天|哪年|哪一年|哪个月|哪月|几月|几号|几点|星期几|周几|礼拜几|多久以前|多久前|什么时间|哪个时候"
)
_ASKS_NUMBER_EN = re.compile(
    r"\bhow\s+(?:many|much|old|long|far|often|tall|big|heavy)\b"
    r"|\b(?:what|which)\s+(?:number|percentage|age|price|amount|size|score|grade)\b",
    _I,
)
_ASKS_NUMBER_ZH = re.compile(r"多少|几[个岁次年天本只件位口块元岁周遍趟场]|多大|多久|多长|多高|多重|多远")
# Other languages, the common forms only (Spanish, Portuguese, French, German, Japanese, Korean).
_ASKS_TIME_OTHER = re.compile(
    r"\b(?:cu[aá]ndo|quando|quand|wann)\b|\b(?:qu[eé]|quel(?:le)?|welche[rsm]?)\s+(?:d[ií]a|a[ñn]o|fecha|hora|"
    r"jour|date|ann[ée]e|heure|tag|datum|jahr|uhrzeit)\b|\bum\s+wie\s+viel\s+uhr\b|いつ|何時|何日|何月|何年|何曜日|언제|며칠|몇\s*[시월년]",
    _I,
)
_ASKS_NUMBER_OTHER = re.compile(
    r"\b(?:cu[aá]nt[oa]s?|quant[oa]s?|combien|wie\s+(?:viele?|alt|lange|oft|weit))\b"
    r"|いくつ|いくら|何[人歳回個匹台本つ]|몇|얼마",
    _I,
)


_ASKS_PLACE = re.compile(
    r"^\s*where\b|\bwhere\s+(?:did|does|do|is|was|were|will|would|are|has|have|had|can|could|should)\b"
    r"|\b(?:which|what)\s+(?:city|country|state|province|town|village|place|neighbou?rhood|area|restaurant|"
    r"store|shop|cafe|bar|hotel|school|university|college|hospital|park|beach|island)\b"
    r"|哪里|哪儿|在哪|去哪|什么地方|啥地方|哪个(?:城市|国家|地方|省|区|学校|医院|公园)|哪座城市|哪家"
    r"|¿?\s*(?:d[oó]nde|ad[oó]nde|onde)\b|\boù\b|\b(?:wo|wohin|woher)\b|どこ|어디",
    _I,
)
# Russian ("когда", "сколько", "где"; "в каком году").
_ASKS_TIME_RU = re.compile(
    r"(?<!\w)(?:когда|в\s+каком\s+(?:году|месяце)|какого\s+числа|во\s+сколько)(?!\w)", _I
)
_ASKS_NUMBER_RU = re.compile(r"(?<!\w)(?:сколько|скольк\w+)(?!\w)", _I)
_ASKS_PLACE_RU = re.compile(r"(?<!\w)(?:где|куда|откуда|в\s+каком\s+городе)(?!\w)", _I)
_ASKS: tuple[tuple[Kind, tuple[re.Pattern[str], ...]], ...] = (
    # In this order: "how long ago" asks for a time, not a number ("во сколько": at what time).
    ("time", (_ASKS_TIME_EN, _ASKS_TIME_ZH, _ASKS_TIME_OTHER, _ASKS_TIME_RU)),
    ("number", (_ASKS_NUMBER_EN, _ASKS_NUMBER_ZH, _ASKS_NUMBER_OTHER, _ASKS_NUMBER_RU)),
    ("place", (_ASKS_PLACE, _ASKS_PLACE_RU)),
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
_TIME_OTHER = re.compile(
    # "mayo" and "mars" alone are also English words (mayonnaise, the planet).
    r"\b(?:(?:de|en)\s+mayo|(?:en|de|\d{1,2})\s+mars|enero|febrero|marzo|abril|junio|julio|agosto|septiembre|"
    r"octubre|noviembre|diciembre|janvier|f[ée]vrier|avril|juin|juillet|ao[ûu]t|septembre|octobre|novembre|d[ée]cembre|"
    r"januar|februar|m[äa]rz|juni|juli|oktober|dezember|"
    r"lunes|martes|mi[ée]rcoles|jueves|viernes|s[áa]bado|domingo|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|"
    r"montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|"
    r"ayer|hoy|ontem|hoje|amanh[ãa]|aujourd'hui|demain|gestern|heute|vorgestern|"
    r"hace|il\s+y\s+a|vor\s+\w+\s+(?:tagen|wochen|monaten|jahren)|"
    r"(?:semana|mes|a[ñn]o)\s+pasad[oa]|(?:la\s+semaine|le\s+mois|l'ann[ée]e)\s+derni[èe]re?|"
    r"letzte[nrs]?\s+(?:woche|monat|jahr|wochenende))\b"
    r"|昨日|今日|明日|先週|来週|今週|先月|来月|今月|来年|曜日|[0-9０-９]+\s*(?:時|日)"
    r"|어제|오늘|내일|지난\s*주|다음\s*주|이번\s*주|지난달|다음\s*달|작년|내년|올해|요일|[0-9]+\s*(?:월|일|시)",
    _I,
)
_NUMBER_EN = re.compile(
    r"\d"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"thousand|million|dozen|twice|couple)\b",
    _I,
)
_NUMBER_OTHER = re.compile(
    r"\b(?:dos|tres|cuatro|cinco|seis|siete|ocho|nueve|diez|doce|veinte|treinta|cien|mil|"
    r"deux|trois|quatre|cinq|sept|huit|neuf|dix|douze|vingt|trente|cent|"
    r"zwei|drei|vier|f[üu]nf|sechs|sieben|acht|neun|zehn|zw[öo]lf|zwanzig|drei[ßs]ig|hundert|tausend)\b"
    r"|[一二三四五六七八九十百千万]+\s*(?:人|歳|回|個|匹|台|つ|本|年|ヶ月|か月|円)"
    r"|(?:한|두|세|네|다섯|여섯|일곱|여덟|아홉|열|스무)\s*(?:명|개|살|마리|번|대|권|시간)",
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
    rf"\b(?:in|at|to|from|near|around|outside|visit(?:ed|ing)?|toward|towards)\s+(?:the\s+)?{_NOT_PLACE}[A-Z][a-z]+"
    # and the same in Spanish, Portuguese, French, German ("en Monterrey", "à Lille", "nach Wien").
    rf"|\b(?:en|desde|hasta|em|para|à|au|aux|près\s+de|nach|aus|bei)\s+{_NOT_PLACE}[A-ZÀ-Ý][a-zà-ÿ]+",
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
    # Japanese: a prefecture or station, or a katakana name before a particle of place
    r"|[\u4e00-\u9fff]{1,4}(?:県|駅)|[\u30a0-\u30ff]{2,}(?:に|で|へ|から)"
    r"|서울|부산|인천|대구|대전|광주|제주|도쿄|오사카|뉴욕|런던|파리"
)
_TIME_RU = re.compile(
    r"(?<!\w)(?:январ\w*|феврал\w*|март\w*|апрел\w*|ма[йяе]|июн\w*|июл\w*|август\w*|сентябр\w*|октябр\w*|"
    r"ноябр\w*|декабр\w*|понедельник\w*|вторник\w*|сред[уаы]|четверг\w*|пятниц\w*|суббот\w*|воскресень\w*|"
    r"вчера|сегодня|завтра|позавчера|назад|на\s+прошлой\s+неделе|в\s+прошлом\s+(?:месяце|году)|"
    r"в\s+(?:этом|прошлом|следующем)\s+(?:месяце|году)|\d{4}\s*г(?:од[уа]?)?)(?!\w)",
    _I,
)
_NUMBER_RU = re.compile(
    r"(?<!\w)(?:два|две|три|четыре|пять|шесть|семь|восемь|девять|десять|двадцать|тридцать|сто|тысяч\w*)(?!\w)",
    _I,
)
_PLACE_RU = re.compile(r"(?<!\w)(?:в|во|из|на|до|около)\s+[А-ЯЁ][а-яё]+")
_HOLDS: dict[Kind, tuple[re.Pattern[str], ...]] = {
    "time": (_TIME_EN, _TIME_ZH, _TIME_OTHER, _TIME_RU),
    "number": (_NUMBER_EN, _NUMBER_ZH, _NUMBER_OTHER, _NUMBER_RU),
    "place": (_PLACE_EN, _PLACE_ZH, _PLACE_RU),
}


@functools.lru_cache(maxsize=8192)
def holds(text: str, kind: Kind) -> bool:
    """Whether ``text`` holds an answer of ``kind``: a time expression ("last weekend",
    "in May", "2023", "上周五", "3月8号"), a number ("two kids", "¥3,000", "三个人") or a
    place ("moved to Seattle", "在上海", "搬到了朝阳区")."""
    return any(p.search(text) for p in _HOLDS[kind])
