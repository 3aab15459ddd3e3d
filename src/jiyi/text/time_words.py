"""Time phrases of Spanish, French, German, Portuguese, Italian, Russian, Japanese and Korean,
for :mod:`jiyi.text.timeparse` (English and Chinese are its own).

A query that names a time ("¿Qué película vi la semana pasada?", "Was habe ich vor zwei
Wochen gekauft?", "先週どこに行った？", "지난달에 뭐 했어?") gets the same windows as its
English counterpart: the days named relative to now ("yesterday", "last week", "next
month"), a distance back ("three weeks ago"), a month with or without its year. Each
pattern names the :mod:`~jiyi.text.timeparse` kind it stands for; matched on the query
case-folded. General vocabulary only, each the counterpart of an English phrase.
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
        (r"\b(?:hoy|aujourd'hui|heute|hoje|oggi|сегодня)\b|きょう|오늘", "today"),
        (
            r"\b(?:el\s+fin\s+de\s+semana\s+pasado|le\s+week-end\s+dernier|letztes\s+wochenende"
            r"|(?:no\s+)?fim\s+de\s+semana\s+passado|lo\s+scorso\s+fine\s+settimana|(?:на|в)\s+прошлых\s+выходных)\b"
            r"|先週末|지난\s*주말",
            "last_weekend",
        ),
        (
            r"\b(?:la\s+semana\s+pasada|la\s+semaine\s+dernière|(?:letzte|vergangene)\s+woche"
            r"|(?:na\s+)?semana\s+passada|la\s+settimana\s+scorsa|la\s+scorsa\s+settimana|на\s+прошлой\s+неделе)\b"
            r"|先週|지난\s*주|저번\s*주",
            "last_week",
        ),
        (
            r"\b(?:esta\s+semana|cette\s+semaine|diese\s+woche|questa\s+settimana|на\s+этой\s+неделе)\b"
            r"|今週|이번\s*주",
            "this_week",
        ),
        (
            r"\b(?:el\s+mes\s+pasado|le\s+mois\s+dernier|(?:letzten|vergangenen)\s+monat"
            r"|(?:no\s+)?mês\s+passado|il\s+mese\s+scorso|lo\s+scorso\s+mese|в\s+прошлом\s+месяце)\b"
            r"|先月|지난\s*달|지난달|저번\s*달",
            "last_month",
        ),
        (
            r"\b(?:este\s+mes|ce\s+mois-ci|diesen\s+monat|este\s+mês|questo\s+mese|в\s+этом\s+месяце)\b"
            r"|今月|이번\s*달",
            "this_month",
        ),
        (
            r"\b(?:el\s+año\s+pasado|l'année\s+dernière|l'an\s+dernier|(?:letztes|vergangenes)\s+jahr"
            r"|(?:no\s+)?ano\s+passado|l'anno\s+scorso|в\s+прошлом\s+году)\b|昨年|작년|지난해",
            "last_year",
        ),
        (
            r"\b(?:este\s+año|cette\s+année|dieses\s+jahr|este\s+ano|quest'anno|в\s+этом\s+году)\b|올해",
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
            r"\b(?:la\s+semana\s+que\s+viene|la\s+próxima\s+semana|la\s+semaine\s+prochaine|nächste\s+woche"
            r"|(?:na\s+)?próxima\s+semana|semana\s+que\s+vem|la\s+prossima\s+settimana|la\s+settimana\s+prossima"
            r"|на\s+следующей\s+неделе)\b|来週|다음\s*주",
            "next_week",
        ),
        (
            r"\b(?:el\s+mes\s+que\s+viene|el\s+próximo\s+mes|le\s+mois\s+prochain|nächsten\s+monat"
            r"|(?:no\s+)?próximo\s+mês|mês\s+que\s+vem|il\s+mese\s+prossimo|il\s+prossimo\s+mese"
            r"|в\s+следующем\s+месяце)\b|来月|다음\s*달",
            "next_month",
        ),
        (
            r"\b(?:el\s+año\s+que\s+viene|el\s+próximo\s+año|l'année\s+prochaine|nächstes\s+jahr"
            r"|(?:no\s+)?próximo\s+ano|ano\s+que\s+vem|l'anno\s+prossimo|il\s+prossimo\s+anno"
            r"|в\s+следующем\s+году)\b|来年|내년",
            "next_year",
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
    **dict.fromkeys(("한", "일", "一"), 1),
}
_NUMBER = r"\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
# Unit words by the unit timeparse counts in.
_UNITS = {
    "day": r"días?|jours?|tag(?:e|en)?|dias?|giorni|giorno|дн(?:я|ей)|день|日|일",
    "week": r"semanas?|semaines?|wochen?|settimane|settimana|недел(?:ю|и|ь)|週間|週|주일?",
    "month": r"mes(?:es)?|mois|monat(?:e|en)?|mês|meses|mesi|mese|месяц(?:а|ев)?|か月|ヶ月|カ月|ケ月|개월|달",
    "year": r"años?|ans?|années?|jahr(?:e|en)?|anos?|anni|anno|год(?:а)?|лет|年",
}
_UNIT = "|".join(f"(?P<{u}>{p})" for u, p in _UNITS.items())
AGO = re.compile(
    # hace tres semanas, il y a deux mois, vor zwei Wochen, há 10 dias
    rf"\b(?:hace|il\s+y\s+a|vor|há)\s+(?P<n1>{_NUMBER})\s+(?:{_UNIT})\b"
    # 10 dias atrás, tre settimane fa, три недели назад
    rf"|\b(?P<n2>{_NUMBER})\s+(?:{_UNIT.replace('(?P<', '(?P<b_')})\s+(?:atrás|fa|назад)\b"
    # 2週間前, 3か月前, 3주 전, 한 달 전, 일주일 전
    rf"|(?P<n3>{_NUMBER})\s*(?:{_UNIT.replace('(?P<', '(?P<c_')})\s*(?:前|전)"
)
"""A distance back: "hace tres semanas", "vor zwei Wochen", "2週間前", "3주 전"..."""


def ago_amount(m: re.Match[str]) -> tuple[int, str]:
    """The count and unit ("day", "week", "month", "year") of an :data:`AGO` match."""
    word = (m["n1"] or m["n2"] or m["n3"]).lower()
    count = int(word) if word.isdigit() else _NUMBERS[word]
    for prefix in ("", "b_", "c_"):
        for unit in _UNITS:
            if m[prefix + unit]:
                return count, unit
    raise ValueError(f"no unit in {m[0]!r}")  # unreachable: the pattern holds one


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
    naechsten naechstes""".split()
) | frozenset(n for names in _MONTH_NAMES for n in names if n.isascii() and n.isalpha())
"""Words, in ASCII, one of which every pattern here needs when the query is all ASCII: an
English query holds none and skips them all (most queries are English)."""
