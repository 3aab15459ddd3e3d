"""Low-value text that is not worth remembering: small talk, bare acknowledgements, errors.

Deliberately conservative: only whole messages that are *nothing but* small talk are
skipped ("thanks!", "哈哈好的"), never a message that merely contains a greeting.
"""

from __future__ import annotations

import re

from jiyi.text.tokenize import normalise

_SMALL_TALK_EN = (
    "hi|hello|hey|yo|hiya|thanks|thank you|thx|ty|ok|okay|k|kk|cool|nice|great|awesome|sure|yes|yeah|yep|"
    "no|nope|lol|haha|hahaha|bye|goodbye|see you|good morning|good night|good evening|got it|sounds good|"
    "you're welcome|np|no problem|alright|hmm|wow|oh|ah"
)
_SMALL_TALK_ZH = "你好|您好|嗨|哈喽|谢谢|多谢|谢啦|好的|好|嗯|嗯嗯|哈哈|哈哈哈|呵呵|拜拜|再见|晚安|早上好|早安|收到|明白|知道了|可以|行|没问题|不客气|哦|噢|啊|好吧"
_SEPARATORS = r"[\s,.!?~，。！？～、…:;：；'\"()（）\-]*"
_SMALL_TALK = re.compile(
    rf"^{_SEPARATORS}(?:(?:{_SMALL_TALK_EN}|{_SMALL_TALK_ZH}){_SEPARATORS})+$", re.IGNORECASE
)
_ERROR = re.compile(
    r"^\s*(?:traceback \(most recent call last\)|(?:[a-z]+\.)*[a-z]*(?:error|exception)\b\s*:|"
    r"error\s*[:：]|错误\s*[:：]|报错\s*[:：]|exception in thread|fatal\s*:|panic\s*:|"
    r"http(?:/\d(?:\.\d)?)? [45]\d\d\b|\d{3} (?:internal server error|not found|bad request))",
    re.IGNORECASE,
)


def low_value_reason(text: str) -> str | None:
    """Why ``text`` is not worth storing, or None when it is."""
    norm = normalise(text).strip()
    if _SMALL_TALK.match(norm):
        return "small talk carries nothing to remember"
    if _ERROR.match(norm):
        return "looks like an error message, which would pollute memory"
    if not re.search(r"[\w\u4e00-\u9fff]", norm):
        return "has no words, only symbols"
    return None
