"""Time phrases of Spanish, French, German, Portuguese, Italian, Russian, Japanese and Korean,
for :mod:`jiyi.text.timeparse` (English and Chinese are its own).

A query that names a time ("¿Qué película vi la semana pasada?", "Was habe ich vor zwei
Wochen gekauft?", "先週どこに行った？", "지난달에 뭐 했어?") gets the same windows as its
English counterpart: the days named relative to now ("yesterday", "last week", "next
month", "last Friday"), a distance back ("three weeks ago"), a month with or without its
year. Holidays are read by :mod:`jiyi.text.holidays`. Each pattern names the
:mod:`~jiyi.text.timeparse` kind it stands for; matched on the query case-folded. General vocabulary only, each the counterpart of an English phrase.
"""

from __future__ import annotations

import re

# (pattern, timeparse kind): longer phrases first, as timeparse's own list.
RELATIVE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), kind)
    for p, kind in (
        (
            r"\b(?:anteayer|antier|avant-hier|vorgestern|anteontem|l'altro\s+ieri|altroieri|позавчера)\b"
            r"|一昨日|おととい|그저께|그제",
            "day_before",
        ),
        (
            r"\b(?:anoche|hier\s+soir|gestern\s+abend|ontem\s+à\s+noite|ieri\s+sera|вчера\s+вечером)\b"
            r"|昨夜|昨晩|ゆうべ|어젯밤",
            "last_night",
        ),
        (r"\b(?:ayer|hier|gestern|ontem|ieri|вчера)\b|きのう|어제", "yesterday"),
        (
            r"\b(?:hoy|aujourd'hui|heute|hoje|oggi|сегодня|esta\s+mañana|ce\s+matin|esta\s+manhã|stamattina"
            r"|questa\s+mattina)\b|きょう|今朝|오늘",
            "today",
        ),
        (
            r"\b(?:el\s+fin\s+de\s+semana\s+pasado|le\s+week-end\s+dernier|letztes\s+wochenende"
            r"|(?:no\s+)?fim\s+de\s+semana\s+passado|lo\s+scorso\s+fine\s+settimana|(?:на|в)\s+прошлых\s+выходных)\b"
            r"|先週末|(?<!지)지난\s*주말",
            "last_weekend",
        ),
        (
            r"\b(?:la\s+semana\s+pasada|la\s+semaine\s+dernière|(?:letzte|vergangene)\s+woche"
            r"|(?:na\s+)?semana\s+passada|la\s+settimana\s+scorsa|la\s+scorsa\s+settimana|на\s+прошлой\s+неделе)\b"
            r"|先週|(?<!지)지난\s*주|저번\s*주",
            "last_week",
        ),
        (
            r"\b(?:este\s+fin\s+de\s+semana|ce\s+week-?end|dieses\s+wochenende|(?:n)?este\s+fim\s+de\s+semana"
            r"|questo\s+(?:fine\s+settimana|weekend)|(?:в|на)\s+эт(?:и|их)\s+выходны[ех])\b|今週末|이번\s*주말",
            "this_weekend",
        ),
        (
            r"\b(?:esta\s+semana|cette\s+semaine|diese\s+woche|questa\s+settimana|на\s+этой\s+неделе)\b"
            r"|今週|이번\s*주",
            "this_week",
        ),
        (
            r"\b(?:d?el\s+mes\s+pasado|(?:le|du)\s+mois\s+dernier|(?:des\s+)?(?:letzten|vergangenen)\s+monat(?:s|es)?"
            r"|(?:no\s+|do\s+)?mês\s+passado|(?:il|del)\s+mese\s+scorso|(?:lo\s+)?scorso\s+mese"
            r"|в\s+прошлом\s+месяце|прошлого\s+месяца)\b"
            r"|先月|(?<!지)지난\s*달|저번\s*달",
            "last_month",
        ),
        (
            r"\b(?:este\s+mes|ce\s+mois-ci|diese[ns]\s+monat(?:s|es)?|este\s+mês|questo\s+mese|в\s+этом\s+месяце"
            r"|этого\s+месяца)\b"
            r"|今月|이번\s*달",
            "this_month",
        ),
        (
            r"\b(?:d?el\s+año\s+pasado|l'année\s+dernière|l'an\s+dernier|(?:letztes|vergangenes)\s+jahr"
            r"|(?:letzten|vergangenen)\s+jahres"
            r"|(?:no\s+)?ano\s+passado|(?:dell|l)'anno\s+scorso|в\s+прошлом\s+году|прошлого\s+года)\b|(?<!一)昨年|(?<!재)작년|지난해",
            "last_year",
        ),
        (
            r"\b(?:este\s+año|cette\s+année|dieses\s+jahr(?:es)?|este\s+ano|quest'anno|в\s+этом\s+году|этого\s+года)\b|올해",
            "this_year",
        ),
        (
            r"\b(?:pasado\s+mañana|après-demain|übermorgen|depois\s+de\s+amanhã|dopodomani|послезавтра)\b"
            r"|明後日|あさって|모레",
            "day_after",
        ),
        # "mañana" and "Morgen" are also "morning" ("esta mañana", "heute Morgen").
        (
            r"(?<!la\s)(?<!esta\s)\bmañana\b|\bdemain\b|(?<!heute\s)\bmorgen\b|\b(?:amanhã|domani|завтра)\b"
            r"|あした|내일",
            "tomorrow",
        ),
        (
            r"\b(?:el\s+próximo\s+fin\s+de\s+semana|el\s+fin\s+de\s+semana\s+que\s+viene|le\s+week-?end\s+prochain"
            r"|nächstes\s+wochenende|(?:no\s+)?próximo\s+fim\s+de\s+semana|il\s+prossimo\s+(?:fine\s+settimana|weekend)"
            r"|(?:в|на)\s+следующи[ех]\s+выходны[ех])\b|来週末|다음\s*주말",
            "next_weekend",
        ),
        (
            r"\b(?:la\s+semana\s+que\s+viene|la\s+próxima\s+semana|la\s+semaine\s+prochaine|nächste\s+woche"
            r"|(?:na\s+)?próxima\s+semana|semana\s+que\s+vem|la\s+prossima\s+settimana|la\s+settimana\s+prossima"
            r"|на\s+следующей\s+неделе)\b|来週|다음\s*주",
            "next_week",
        ),
        (
            r"\b(?:el\s+mes\s+que\s+viene|el\s+próximo\s+mes|le\s+mois\s+prochain|nächsten\s+monat"
            r"|(?:no\s+)?próximo\s+mês|mês\s+que\s+vem|il\s+mese\s+prossimo|il\s+prossimo\s+mese"
            r"|в\s+следующем\s+месяце|следующего\s+месяца)\b|来月|다음\s*달",
            "next_month",
        ),
        (
            r"\b(?:el\s+año\s+que\s+viene|el\s+próximo\s+año|l'année\s+prochaine|nächstes\s+jahr"
            r"|(?:no\s+)?próximo\s+ano|ano\s+que\s+vem|l'anno\s+prossimo|il\s+prossimo\s+anno"
            r"|в\s+следующем\s+году)\b|(?<!再)来年|내년",
            "next_year",
        ),
        (
            r"\b(?:el\s+año\s+antepasado|vorletzte[sn]?\s+jahr\w*"
            r"|(?:в\s+)?позапрошлом\s+году|(?:no\s+)?ano\s+retrasado)\b|一昨年|おととし|재작년",
            "year_before_last",
        ),
        (r"再来年|내후년", "year_after_next"),
        (
            r"\b(?:el\s+mes\s+antepasado|vorletzten\s+monat|в\s+позапрошлом\s+месяце)\b|先々月|지지난\s*달",
            "month_before_last",
        ),
        # Before "the week before last": 先々週末 holds 先々週, 지지난 주말 holds 지지난 주.
        (
            r"\b(?:el\s+fin\s+de\s+semana\s+antepasado|el\s+penúltimo\s+fin\s+de\s+semana"
            r"|l'avant-dernier\s+week-?end|(?:am\s+)?vorletzte[ns]?\s+wochenende"
            r"|(?:no\s+)?fim\s+de\s+semana\s+retrasado|(?:no\s+)?penúltimo\s+fim\s+de\s+semana"
            r"|il\s+penultimo\s+(?:fine\s+settimana|weekend)|(?:на|в)\s+позапрошл(?:ых|ые)\s+выходн(?:ых|ые))\b"
            r"|先々週末|지지난\s*주\s*주말|지지난\s*주말",
            "weekend_before_last",
        ),
        (
            r"\b(?:vorletzte\s+woche|la\s+semaine\s+d'avant|на\s+позапрошлой\s+неделе)\b|先々週|지지난\s*주",
            "week_before_last",
        ),
    )
)
"""Days, weeks, months and years named relative to now, by :func:`jiyi.text.timeparse`'s kind."""

# Counts in words, as far as people write them for a distance back.
_NUMBERS = {
    **dict.fromkeys(("un", "una", "uno", "une", "ein", "eine", "einem", "einer", "um", "uma"), 1),
    **dict.fromkeys(("dos", "deux", "zwei", "dois", "duas", "due", "два", "две", "二", "두", "이"), 2),
    **dict.fromkeys(("tres", "trois", "drei", "três", "tre", "три", "三", "세", "삼"), 3),
    **dict.fromkeys(("cuatro", "quatre", "vier", "quatro", "quattro", "четыре", "四", "네", "사"), 4),
    **dict.fromkeys(("cinco", "cinq", "fünf", "cinque", "пять", "五", "다섯", "오"), 5),
    **dict.fromkeys(("seis", "six", "sechs", "sei", "шесть", "六", "여섯", "육"), 6),
    **dict.fromkeys(("siete", "sept", "sieben", "sete", "sette", "семь", "七", "일곱", "칠"), 7),
    **dict.fromkeys(("ocho", "huit", "acht", "oito", "otto", "восемь", "八", "여덟", "팔"), 8),
    **dict.fromkeys(("nueve", "neuf", "neun", "nove", "девять", "九", "아홉", "구"), 9),
    **dict.fromkeys(("diez", "dix", "zehn", "dez", "dieci", "десять", "十", "열", "십"), 10),
    **dict.fromkeys(("once", "onze", "elf", "undici", "одиннадцать", "十一"), 11),
    **dict.fromkeys(("doce", "douze", "zwölf", "doze", "dodici", "двенадцать", "十二"), 12),
    **dict.fromkeys(("quince", "quinze", "fünfzehn", "quindici", "пятнадцать", "十五"), 15),
    **dict.fromkeys(("veinte", "vingt", "zwanzig", "vinte", "venti", "двадцать", "二十"), 20),
    **dict.fromkeys(("한", "일", "一"), 1),
}
# Korean counts days with words of their own: "열흘 전" (ten days ago), "사흘 전".
_KO_DAYS = {
    "이틀": 2,
    "사흘": 3,
    "나흘": 4,
    "닷새": 5,
    "엿새": 6,
    "이레": 7,
    "여드레": 8,
    "아흐레": 9,
    "열흘": 10,
    "보름": 15,
}
# Counts no one number says: "hace unos días", "vor ein paar Wochen", "数年前", "몇 달 전".
_VAGUE = {
    **dict.fromkeys(
        (
            "unos", "unas", "algunos", "algunas", "varios", "varias", "quelques", "plusieurs",
            "ein paar", "einigen", "mehreren", "uns", "umas", "alguns", "algumas", "vários", "várias",
            "alcuni", "alcune", "qualche", "diversi", "diverse", "несколько", "数", "몇",
        ),
        "few",
    ),
    **dict.fromkeys(("un par de", "um par de", "un paio di", "пару", "пара"), "couple"),
}  # fmt: skip
_NUMBER = r"\d+|" + "|".join(sorted([*_NUMBERS, *_VAGUE], key=len, reverse=True)).replace(" ", r"\s+")
# Unit words by the unit timeparse counts in.
_UNITS = {
    "day": r"días?|jours?|tag(?:e|en)?|dias?|giorni|giorno|дн(?:я|ей)|день|日|일",
    "week": r"semanas?|semaines?|wochen?|settimane|settimana|недел(?:ю|и|ь)|週間|週|주일?",
    "month": r"mes(?:es)?|mois|monat(?:e|en)?|mês|meses|mesi|mese|месяц(?:а|ев)?|か月|ヶ月|カ月|ケ月|개월|달",
    "year": r"años?|ans?|années?|jahr(?:e|en)?|anos?|anni|anno|год(?:а)?|лет|年|년",
    # "hace dos fines de semana", "vor zwei Wochenenden" (after "week": "Wochen" is tried
    # first and fails at the word's end)
    "weekend": r"fin(?:es)?\s+de\s+semana|week-?ends?|wochenenden?|fi(?:m|ns)\s+de\s+semana|fine\s+settimana",
}
_UNIT = "|".join(f"(?P<{u}>{p})" for u, p in _UNITS.items())
AGO = re.compile(
    # hace tres semanas, il y a deux mois, vor zwei Wochen, há 10 dias
    rf"\b(?:hace|il\s+y\s+a|vor|há)\s+(?P<n1>{_NUMBER})\s+(?:{_UNIT})\b"
    # 10 dias atrás, tre settimane fa, три недели назад
    rf"|\b(?P<n2>{_NUMBER})\s+(?:{_UNIT.replace('(?P<', '(?P<b_')})\s+(?:atrás|fa|назад)\b"
    # 2週間前, 3か月前, 3주 전, 한 달 전, 일주일 전
    rf"|(?P<n3>{_NUMBER})\s*(?:{_UNIT.replace('(?P<', '(?P<c_')})\s*(?:前|전)"
    rf"|(?P<ko_days>{'|'.join(_KO_DAYS)}|며칠)\s*전"
)
"""A distance back: "hace tres semanas", "vor zwei Wochen", "2週間前", "3주 전"..."""


def ago_amount(m: re.Match[str]) -> tuple[int | str, str]:
    """The count and unit ("day", "week", "month", "year") of an :data:`AGO` match; a count
    no number says is "few" or "couple" ("hace unos días", "며칠 전")."""
    if m["ko_days"]:
        return _KO_DAYS.get(m["ko_days"], "few"), "day"
    word = " ".join((m["n1"] or m["n2"] or m["n3"]).lower().split())
    count = int(word) if word.isdigit() else _VAGUE.get(word) or _NUMBERS[word]
    for prefix in ("", "b_", "c_"):
        for unit in _UNITS:
            if m[prefix + unit]:
                return count, unit
    raise ValueError(f"no unit in {m[0]!r}")  # unreachable: the pattern holds one


# Each weekday's names (Monday first) as patterns, in the forms a phrase of time takes
# ("в прошлую пятницу", "na sexta passada", "先週の金曜日", "지난주 금요일").
_WEEKDAY_NAMES = (
    ("lunes", "lundi", "montag", "segunda(?:-feira)?", "luned[iì]", "понедельник", "月曜日?", "월요일"),
    ("martes", "mardi", "dienstag", "terça(?:-feira)?", "marted[iì]", "вторник", "火曜日?", "화요일"),
    (
        "miércoles",
        "mercredi",
        "mittwoch",
        "quarta(?:-feira)?",
        "mercoled[iì]",
        "сред[аувы]",
        "水曜日?",
        "수요일",
    ),
    ("jueves", "jeudi", "donnerstag", "quinta(?:-feira)?", "gioved[iì]", "четверг", "木曜日?", "목요일"),
    ("viernes", "vendredi", "freitag", "sexta(?:-feira)?", "venerd[iì]", "пятниц[аеуы]", "金曜日?", "금요일"),
    ("sábado", "samedi", "samstag", "sonnabend", "sabato", "суббот[аеуы]", "土曜日?", "토요일"),
    ("domingo", "dimanche", "sonntag", "domenica", "воскресень[ея]", "日曜日?", "일요일"),
)
_DAY = "|".join(sorted((n for names in _WEEKDAY_NAMES for n in names), key=len, reverse=True))


# (pattern, which): "last" the latest such day before today, "this" this week's, "next" the
# first after today (as timeparse's English); -1 / 0 / 1 that day of last / this / next
# week (as its Chinese "上周五").
def _with_days(pattern: str) -> re.Pattern[str]:
    """``pattern`` with each ``DAY`` a group of its own for the day's name (``d0``, ``d1``...)."""
    parts = pattern.split("DAY")
    return re.compile(parts[0] + "".join(f"(?P<d{i}>{_DAY}){part}" for i, part in enumerate(parts[1:])))


WEEKDAY: tuple[tuple[re.Pattern[str], str | int], ...] = tuple(
    (_with_days(p), which)
    for p, which in (
        (
            r"\b(?:el\s+)?DAY\s+pasado\b|\bel\s+pasado\s+DAY\b|\bDAY\s+derni(?:er|ère)\b"
            r"|\b(?:letzten|vergangenen)\s+DAY\b|\b(?:n[ao]\s+)?DAY\s+passad[ao]\b"
            r"|\bDAY\s+scors[ao]\b|\b(?:lo|la)\s+scors[ao]\s+DAY\b|\bв\s+прошл(?:ый|ую|ое|ой)\s+DAY\b"
            r"|지난\s+DAY|저번\s+DAY",
            "last",
        ),
        (
            r"\bn?es[st][ae]\s+DAY\b|\bce\s+DAY\b|\bdiesen\s+DAY\b|\bquest[oa]\s+DAY\b"
            r"|\bв\s+эт(?:от|у|о)\s+DAY\b",
            "this",
        ),
        (
            r"\b(?:el\s+)?próximo\s+DAY\b|\bDAY\s+que\s+viene\b|\bDAY\s+prochain\b|\bnächsten\s+DAY\b"
            r"|\b(?:n[ao]\s+)?próxim[ao]\s+DAY\b|\bDAY\s+que\s+vem\b|\bDAY\s+prossim[oa]\b"
            r"|\b(?:il|la)\s+prossim[oa]\s+DAY\b|\bв\s+следующ(?:ий|ую|ее)\s+DAY\b",
            "next",
        ),
        (r"先週の?DAY|(?:지난|저번)\s*주\s*DAY", -1),
        (r"今週の?DAY|이번\s*주\s*DAY", 0),
        (r"来週の?DAY|다음\s*주\s*DAY", 1),
    )
)
"""A day of a week named relative to now: "el viernes pasado", "lundi dernier", "letzten
Donnerstag", "в прошлую среду", "先週の土曜日", "지난주 금요일"; a bare day name is left
out, as in English ("on Friday" is a plan as often as a memory)."""


def weekday_number(m: re.Match[str]) -> int:
    """The day (Monday 0) a :data:`WEEKDAY` match names."""
    name = next(v for v in m.groupdict().values() if v)
    for number, names in enumerate(_WEEKDAY_NAMES):
        if any(re.fullmatch(n, name) for n in names):
            return number
    raise ValueError(f"not a day name: {name!r}")


# Each month's names as patterns; a Russian one with its case endings ("в марте", "января").
_MONTH_NAMES = (
    ("enero", "janvier", "januar", "jänner", "janeiro", "gennaio", "январ[ьяе]"),
    ("febrero", "février", "februar", "fevereiro", "febbraio", "феврал[ьяе]"),
    ("marzo", "mars", "märz", "março", "март[ае]?"),
    ("abril", "avril", "april", "aprile", "апрел[ьяе]"),
    ("mayo", "mai", "maio", "maggio", "ма[йяе]"),
    ("junio", "juin", "juni", "junho", "giugno", "июн[ьяе]"),
    ("julio", "juillet", "juli", "julho", "luglio", "июл[ьяе]"),
    ("agosto", "août", "august", "август[ае]?"),
    ("septiembre", "setiembre", "septembre", "september", "setembro", "settembre", "сентябр[ьяе]"),
    ("octubre", "octobre", "oktober", "outubro", "ottobre", "октябр[ьяе]"),
    ("noviembre", "novembre", "november", "novembro", "ноябр[ьяе]"),
    ("diciembre", "décembre", "dezember", "dezembro", "dicembre", "декабр[ьяе]"),
)
_MONTH = "|".join(sorted((n for names in _MONTH_NAMES for n in names), key=len, reverse=True))
# A month name after a word that makes it a time (as timeparse's English "in June"): the
# same words are verbs or names elsewhere ("mars", "mai", "marzo" less so, but alike).
_MONTH_LEAD = (
    r"en|de|desde|durante|a\s+finales\s+de|a\s+principios\s+de|a\s+mediados\s+de|en\s+el\s+mes\s+de"
    r"|au\s+mois\s+de|depuis|début|fin|mi|im|seit|anfang|ende|mitte|em|no\s+mês\s+de|a|in|nel\s+mese\s+di"
    r"|a\s+metà|all'inizio\s+di|alla\s+fine\s+di|в|во|с|до|начале|конце|середине"
)
MONTH = re.compile(
    rf"\b(?:{_MONTH_LEAD})\s+(?P<month>{_MONTH})\b(?:\s+(?:de\s+|del\s+|of\s+)?(?P<year>\d{{4}}))?"
)
"""A month named after a word that makes it a time, with its year when one follows:
"en marzo", "im Dezember 2024", "en novembre 2024", "в марте", "em maio de 2024"."""
MONTH_YEAR = re.compile(rf"\b(?P<month>{_MONTH})\s+(?:de\s+|del\s+)?(?P<year>\d{{4}})\b")
"""A month name right before a year, without a leading word: "noviembre de 2024"."""
KO_MONTH = re.compile(r"(?:(?P<year>\d{4})\s*년\s*)?(?P<month>\d{1,2})\s*월(?!\s*\d)")
"""A Korean month, with its year when one is written: "3월", "2024년 11월"."""

_A_YEAR = r"(?P<year>(?:19|20)\d\d)"
YEAR = (
    re.compile(rf"\b(?:en|durante)\s+(?:el\s+(?:año\s+)?)?{_A_YEAR}\b"),  # es; pt's "durante 2019"
    re.compile(rf"\b(?:en|pendant|durant)\s+(?:l'année\s+)?{_A_YEAR}\b"),
    re.compile(rf"\b(?:im\s+jahre?|während)\s+{_A_YEAR}\b"),
    re.compile(rf"\bem\s+(?:o\s+ano\s+(?:de\s+)?)?{_A_YEAR}\b"),
    re.compile(rf"\b(?:nel(?:l'anno)?|durante\s+il)\s+{_A_YEAR}\b"),
    re.compile(rf"\bв\s+{_A_YEAR}\s*(?:году\b|г\.)"),
    re.compile(rf"(?<!\d){_A_YEAR}\s*년(?!\s*\d|생)"),  # not "2019년생" (born in)
)
"""A year alone: "en 2019", "im Jahr 2019", "в 2019 году", "2019년에" (a month with its year
is read first: "en marzo de 2019", "2019년 3월")."""


_GERMAN_MONTHS = frozenset(
    "januar jänner februar märz april mai juni juli august september oktober november dezember".split()
)


def written_as_month(word: str) -> bool:
    """Whether a month name, as the query writes it, is one: Spanish, French, Portuguese,
    Italian and Russian write months in lower case, so a capital one is a name's part
    ("Rio de Janeiro", "Plaza de Mayo"); German capitalises every noun."""
    return word[:1].islower() or word.lower() in _GERMAN_MONTHS


def month_number(name: str) -> int:
    """The month (1-12) a name matched by :data:`MONTH` or :data:`MONTH_YEAR` stands for."""
    for number, names in enumerate(_MONTH_NAMES, start=1):
        if any(re.fullmatch(n, name) for n in names):
            return number
    raise ValueError(f"not a month name: {name!r}")


ASCII_CUES = frozenset(
    """anteayer antier vorgestern anteontem altroieri anoche hier gestern ieri ayer ontem hoy aujourd heute hoje oggi
    week weekend wochenende fin fim semana semaine woche settimana esta cette diese questa mes mois monat
    mese este ano anno jahr annee dernier derniere letzte letzten letztes vergangene vergangenen
    vergangenes pasado pasada passado passada scorso scorsa proxima proximo prochaine prochain prossima
    prossimo viene vem demain morgen domani dopodomani manana amanha hace vor il atras fa naechste
    en em nel durante pendant durant im matin mattina stamattina principios comienzos inicios finales
    anfang ende inizio fine fim final monats dieses
    naechsten naechstes lunes martes jueves viernes domingo lundi mardi mercredi jeudi vendredi samedi
    dimanche montag dienstag mittwoch donnerstag freitag samstag sonnabend sonntag segunda quarta quinta
    sexta lunedi martedi mercoledi giovedi venerdi sabato domenica""".split()
) | frozenset(n for names in _MONTH_NAMES for n in names if n.isascii() and n.isalpha())
"""Words, in ASCII, one of which every pattern here needs when the query is all ASCII: an
English query holds none and skips them all (most queries are English)."""


TOLD_CUES = (
    "ayer",
    "pasad",
    "passad",
    "hace ",
    "próxim",
    "que viene",
    "hier",
    "derni",
    "il y a",
    "prochain",
    "demain",
    "gestern",
    "letzt",
    "vergangen",
    "vor ",
    "nächst",
    "morgen",
    "ontem",
    "há ",
    "atrás",
    "amanhã",
    "ieri",
    "scors",
    " fa",
    "prossim",
    "domani",
    "вчера",
    "прошл",
    "назад",
    "следующ",
    "завтра",
    "先週",
    "先月",
    "一昨日",
    "おととい",
    "きのう",
    "前に",
    "日前",
    "週間前",
    "月前",
    "来週",
    "来月",
    "来年",
    "あした",
    "어제",
    "그저께",
    "그제",
    "지난",
    "저번",
    " 전",
    "작년",
    "다음",
    "내일",
    "내년",
    "모레",
    "월",
    *(n for names in _MONTH_NAMES for n in names if n.isalpha()),
    *(
        "январ",
        "феврал",
        "март",
        "апрел",
        "мая",
        "мае",
        "июн",
        "июл",
        "август",
        "сентябр",
        "октябр",
        "ноябр",
        "декабр",
    ),
)
"""What a memory's text in these languages must hold (lower-cased) to tell of a time away
from when it was said (:func:`jiyi.text.timeparse.told_windows`'s cheap test)."""
