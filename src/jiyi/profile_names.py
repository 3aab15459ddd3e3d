"""The name a user gives themselves, read from a memory in many languages.

"Меня зовут Иван Петров, я работаю ...", "Me llamo Lucía Fernández y soy ...",
"私は佐藤由紀です。", "저는 김민지이고 ...", "我叫林晓，..." and "My name is Dave": a
first-person self-introduction at the start of a memory. :func:`self_named` returns the
name such a text gives (or None); :func:`stated_name` also reads the name an extractor
stored in an item's ``structured`` parts (``{"key": "name", "value": ...}``) or an
explicit profile's ``username``.

The cues are the ordinary ways of saying "my name is" in the languages the embedder
reads; nothing is tuned to particular names. Where the same words also introduce an
occupation ("私は編集者です", "저는 간호사예요") the name must look like one: Han or katakana
not ending in a word for a role or a people (者, 員, 人 ...), and Hangul starting with a
common surname.
"""

from __future__ import annotations

import functools
import re

from jiyi.model import PROFILE_TAG, MemoryItem

_GREETING = (
    r"(?:(?:hi|hello|hey|hola|buenos\s+d[ií]as|привет|здравствуйте|добрый\s+день|bonjour|salut|hallo|"
    r"guten\s+tag|ciao|ol[aá]|你好|大家好|こんにちは|はじめまして|初めまして|안녕하세요)[\s,!.、。！，]*)?"
)
# Until the end of the name: punctuation, a conjunction, or what follows a name.
_LATIN_NAME = r"(?P<n>[^\W\d_][\w'’-]*(?:\s+[^\W\d_][\w'’-]*){0,3}?)"
_END_LATIN = (
    r"(?=\s*(?:[,.;:!?()\-–—]|$|\s(?:and|but|i|i'm|and\s+i|y|e|et|und|и|а|но|я|yo|soy|je|ich|io|sono|eu|"
    r"from|de|из|aus|di|da|du|del)\b))"
)
_LATIN_CUES = (
    r"(?:my\s+name\s+is|my\s+name's|i'm\s+called|i\s+am\s+called|call\s+me|i\s+go\s+by|"
    r"меня\s+зовут|мо[её]\s+имя|мене\s+звати|"
    r"me\s+llamo|mi\s+nombre\s+es|"
    r"me\s+chamo|chamo-me|o\s+meu\s+nome\s+é|meu\s+nome\s+é|"
    r"je\s+m'appelle|je\s+m’appelle|mon\s+nom\s+est|"
    r"ich\s+hei(?:ß|ss)e|mein\s+name\s+ist|"
    r"mi\s+chiamo|il\s+mio\s+nome\s+è)"
)
_SELF_LATIN = re.compile(rf"^{_GREETING}{_LATIN_CUES}\s+{_LATIN_NAME}{_END_LATIN}", re.IGNORECASE)
# A Chinese name is two to four Han characters (or Latin words) standing alone: in
# "我叫张伟在字节跳动工作" where the name ends is not clear, and no name is better than a wrong one.
_SELF_ZH = re.compile(
    rf"^{_GREETING}(?:我叫|我的名字(?:是|叫)|我名字(?:是|叫))\s*"
    r"(?P<n>[\u4e00-\u9fff]{2,4}|[A-Za-z][\w'-]*(?:\s+[A-Za-z][\w'-]*){0,2})(?=[，,。.；;！!？?、\s]|$)"
)
# Japanese: "私の名前は由紀です", "佐藤由紀と申します" say it is a name; "私は佐藤由紀です" may
# be a name or an occupation ("私は編集者です"), so the name must look like one.
_SELF_JA_NAMED = re.compile(
    rf"^{_GREETING}(?:(?:私|わたし|僕|ぼく|俺)の名前は(?P<n>[^。、，,.！!？?\s]{{1,12}}?)(?:です|だ|と申します|といいます)"
    rf"|(?P<m>[^。、，,.！!？?\s]{{1,12}}?)(?:と申します|といいます|と言います))"
)
_SELF_JA = re.compile(
    rf"^{_GREETING}(?:私|わたし|僕|ぼく|俺)は(?P<n>[\u4e00-\u9fff\u30a0-\u30ff]{{2,8}})(?:です|と申します)(?:[。、，,.！!]|$)"
)
# Korean: "제 이름은 민지예요" says it is a name; "저는 김민지이고 ..." may be an occupation
# ("저는 간호사예요"), so the name must start with a surname.
_SELF_KO_NAMED = re.compile(
    rf"^{_GREETING}(?:제|내)\s*이름은\s*(?P<n>[\uac00-\ud7a3]{{1,6}}?)(?:이에요|예요|입니다|이고|이야|야|이다)"
)
_SELF_KO = re.compile(
    rf"^{_GREETING}(?:저는|나는)\s+(?P<n>[\uac00-\ud7a3]{{2,4}}?)(?:이에요|예요|입니다|이고|이며|이야|라고\s+합니다|이라고\s+합니다)"
    r"(?:[\s.,!]|$)"
)
# The most common Korean surnames (together most of the population).
_KO_SURNAMES = frozenset(
    "김이박최정강조윤장임한오서신권황안송류전홍고문양손배백허남심노하곽성차주우구민유진나지엄채원천방공현함변염여추도소석선설마길연위표명기반왕금옥육인맹제모탁국어은편용예봉경사부황보"
)
# Han or katakana words for a role or a people: "私は編集者です" is no name.
_NOT_JA_NAME_END = re.compile(r"(?:者|員|師|士|家|手|生|長|官|医|人|職|係|屋|中|ー|ター|ナー|スト)$")
_NOT_LATIN_NAMES = frozenset(
    "a an the not from here back sorry fine good okay ok ready busy tired happy glad sure new home".split()
)
_NAME_KEYS = frozenset(
    {"name", "username", "user_name", "full_name", "preferred_name", "nickname", "姓名", "名字"}
)


@functools.lru_cache(maxsize=8192)
def self_named(text: str) -> str | None:
    """The name a first-person self-introduction at the start of ``text`` gives, else None."""
    head = text.strip()[:200]
    m = _SELF_LATIN.match(head)
    if m:
        name = m.group("n").strip()
        # A name is written capitalised: "call me when you're done" gives none.
        return None if not name[0].isupper() or name.split()[0].lower() in _NOT_LATIN_NAMES else name
    m = _SELF_ZH.match(head) or _SELF_JA_NAMED.match(head) or _SELF_KO_NAMED.match(head)
    if m:
        return (m.group("n") or m.groupdict().get("m") or "").strip() or None
    m = _SELF_JA.match(head)
    if m and not _NOT_JA_NAME_END.search(m.group("n")):
        return m.group("n")
    m = _SELF_KO.match(head)
    if m and m.group("n")[0] in _KO_SURNAMES:
        return m.group("n")
    return None


def stated_name(item: MemoryItem) -> str | None:
    """The name an item says its author has: an explicit profile's ``username``, a name an
    extractor stored (``structured`` key ``name``, ``preferred_name`` ...), or a
    self-introduction in the text (:func:`self_named`)."""
    parts = item.structured
    if not parts:
        return self_named(item.content)
    if PROFILE_TAG in item.tags:
        value = parts.get("username")
        return value.strip() or None if isinstance(value, str) else None
    key = parts.get("key")
    value = parts.get("value")
    if (
        isinstance(key, str)
        and isinstance(value, str)
        and value.strip()
        and key.removeprefix("my:").strip().lower() in _NAME_KEYS
    ):
        return value.strip()
    return self_named(item.content)
