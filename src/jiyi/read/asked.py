"""Which of the user's own keyed facts a question asks for ("Where do I live?" -> ``location``).

The offline extractor files a user's self-descriptions under keys (:mod:`jiyi.write.extract_rules`:
``location``, ``employer``, ``profession``, ``hometown``, ``name``, ``age``, ``my:<attribute>``).
A question in the first person (or about "the user" / 用户, as an agent asks it) that asks
for one of them is answered by that fact, not by a near miss about another person that the
embedder finds as close: "Where do I live?" is closer to "My sister lives in Berlin" (cosine
0.29) than to "I moved to Munich last month" (0.19). :func:`asked_key` reads the key; the
ranking (:func:`jiyi.read.rank.asked_fact_first`) puts the user's fact of that key above
statements of another holder.
"""

from __future__ import annotations

import functools
import re

from jiyi.model import MemoryItem, Status
from jiyi.read.versions import cached_apart
from jiyi.store.base import Candidate
from jiyi.write.extract_rules import attribute_key

_I = re.IGNORECASE

# Who the question is about: the user, in the first person or as an agent names them.
_ME_EN = r"(?:i|the\s+user)"
_MY_EN = r"(?:my|the\s+user's)"
_ME_ZH = r"(?:我|用户)"

# Per key, the ways a question asks for it (any one matches).
_ASKS_EN: dict[str, tuple[str, ...]] = {
    "location": (
        rf"\bwhere\s+(?:do|does|did)\s+{_ME_EN}\s+(?:now\s+|currently\s+)?live\b",
        r"\bwhere\s+(?:am\s+i|is\s+the\s+user)\s+(?:living|based)\b",
        rf"\bwhich\s+city\s+(?:do|does)\s+{_ME_EN}\s+live\b",
    ),
    "employer": (
        rf"\bwhere\s+(?:do|does)\s+{_ME_EN}\s+(?:now\s+|currently\s+)?work\b",
        rf"\bwhich\s+company\s+(?:do|does)\s+{_ME_EN}\s+work\b",
        rf"\bwho\s+(?:do|does)\s+{_ME_EN}\s+work\s+for\b",
        rf"\bwho\s+is\s+{_MY_EN}\s+employer\b",
    ),
    "profession": (
        rf"\bwhat\s+(?:do|does)\s+{_ME_EN}\s+do\s+for\s+(?:a\s+)?(?:living|work)\b",
        rf"\bwhat\s+is\s+{_MY_EN}\s+(?:job|profession|occupation)\b",
    ),
    "hometown": (
        r"\bwhere\s+(?:am\s+i|is\s+the\s+user)\s+from\b",
        rf"\bwhere\s+did\s+{_ME_EN}\s+grow\s+up\b",
        rf"\bwhat\s+is\s+{_MY_EN}\s+hometown\b",
    ),
    "name": (rf"\bwhat\s+is\s+{_MY_EN}\s+name\b", r"\bwhat\s+am\s+i\s+called\b"),
    "age": (r"\bhow\s+old\s+(?:am\s+i|is\s+the\s+user)\b", rf"\bwhat\s+is\s+{_MY_EN}\s+age\b"),
}
_ASKS_ZH: dict[str, tuple[str, ...]] = {
    "location": (
        rf"{_ME_ZH}(?:现在|目前)?住(?:在)?(?:哪|什么地方)",
        rf"{_ME_ZH}(?:现在|目前)?(?:在|住在)哪个城市",
    ),
    "employer": (
        rf"{_ME_ZH}(?:现在|目前)?在哪(?:家|个)?(?:公司)?(?:上班|工作)",
        rf"{_ME_ZH}(?:现在|目前)?在哪家公司",
    ),
    "profession": (
        rf"{_ME_ZH}(?:现在|目前)?(?:是)?(?:做什么|干什么)(?:工作|的)",
        rf"{_ME_ZH}的(?:职业|工作)是什么",
    ),
    "hometown": (rf"{_ME_ZH}(?:的)?老家(?:在|是)", rf"{_ME_ZH}是哪里人"),
    "name": (rf"{_ME_ZH}叫什么(?:名字)?",),
    "age": (rf"{_ME_ZH}(?:今年)?(?:几岁|多大)",),
}
_KEYS_EN = tuple((key, re.compile("|".join(ways), _I)) for key, ways in _ASKS_EN.items())
_KEYS_ZH = tuple((key, re.compile("|".join(ways))) for key, ways in _ASKS_ZH.items())
# "What is my address?", "Who is my GP?", "我的导师是谁？": the attribute is the key.
_MY_ATTR_EN = re.compile(
    rf"^(?:what|who|when|where|which)(?:'s|\s+is|\s+are)\s+{_MY_EN}\s+(?P<attr>[\w' -]{{1,30}}?)\s*\??$", _I
)
_MY_ATTR_ZH = re.compile(
    rf"^{_ME_ZH}的(?P<attr>[^，,是的？?]{{1,10}})是(?:什么|谁|多少|哪(?:个|里|儿|天)?)[？?]?$"
)
# Someone else's attribute: "What is my wife's name?" ("Where does my sister live?" and
# "我姐姐住在哪？" match no pattern: their subject is not the user).
_OTHER_EN = re.compile(r"\b(?:my|the\s+user's)\s+\w+'s\b", _I)


@functools.lru_cache(maxsize=1024)
def asked_key(query: str) -> str | None:
    """The key of the user's own fact that ``query`` asks for, or None."""
    text = " ".join(query.split())
    if not text or _OTHER_EN.search(text):
        return None
    zh = re.search(r"[\u4e00-\u9fff]", text) is not None
    for key, pattern in _KEYS_ZH if zh else _KEYS_EN:
        if pattern.search(text):
            return key
    m = (_MY_ATTR_ZH if zh else _MY_ATTR_EN).match(text)
    return attribute_key(m.group("attr")) if m else None


def answers(candidate: Candidate, key: str) -> bool:
    """Whether ``candidate`` is the user's own active fact filed under ``key`` (not a named
    speaker's: in a conversation between people the question's "I" is not theirs)."""
    item: MemoryItem = candidate.item
    return (
        item.metadata.get("key") == key
        and item.metadata.get("speaker") is None
        and item.status == Status.ACTIVE
        and "episode" not in item.tags
    )


def about_another(fact: Candidate, other: Candidate) -> bool:
    """Whether ``other`` says its thing of another person than ``fact`` does ("My sister
    lives in Berlin" against "I moved to Munich"; :func:`jiyi.write.slots.apart`)."""
    return cached_apart(fact.item.content, other.item.content) == "another holder"
