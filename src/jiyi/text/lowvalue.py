"""Low-value text that is not worth remembering: small talk, bare acknowledgements, errors.

Deliberately conservative: only whole messages that are *nothing but* small talk are
skipped ("thanks!", "哈哈好的"), never a message that merely contains a greeting.
"""

from __future__ import annotations

import re
import unicodedata

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


# Words that only acknowledge: no answer to a question (yes, no, 可以, 行 are answers and
# are not here), no content. Lower-cased; matched as whole runs after punctuation, symbols
# and emoji are removed.
_ACK_EN = (
    "ok|okay|okey|k|kk|sure|thanks|thank you|thank you so much|thanks a lot|many thanks|thx|ty|"
    "got it|noted|cool|great|nice|perfect|awesome|alright|all right|sounds good|will do|understood|"
    "roger|roger that|np|no problem|you're welcome|youre welcome|welcome|hmm|mm|uh huh|ah|oh|i see"
)
_ACK_ZH = (
    "好的|好滴|好嘞|好哒|好吧|好|嗯|嗯嗯|嗯呢|哦|噢|哦哦|噢噢|收到|收到了|明白|明白了|知道了|了解|了解了|"
    "谢谢|谢谢你|谢谢您|多谢|谢啦|感谢|不客气|没事|行吧|ok啦|好的呢|好的谢谢|好的收到"
)
# The same in other languages the default embedder reads: words between spaces (Russian,
# Spanish, French, German, Portuguese, Italian) and, like Chinese, unspaced (Japanese, Korean).
_ACK_SPACED = (
    "спасибо|спасибо большое|большое спасибо|ок|окей|хорошо|понятно|ясно|ладно|"
    "gracias|muchas gracias|vale|de acuerdo|entendido|perfecto|"
    "merci|merci beaucoup|d'accord|parfait|entendu|"
    "danke|danke schön|vielen dank|alles klar|verstanden|"
    "obrigado|obrigada|muito obrigado|muito obrigada|valeu|entendi|"
    "grazie|grazie mille|perfetto|capito"
)
_ACK_UNSPACED = (
    "ありがとう|ありがとうございます|ありがとうございました|了解です|わかりました|分かりました|承知しました|"
    "감사합니다|고마워요|고맙습니다|고마워|알겠습니다|알겠어요|알았어요"
)
_ACK = re.compile(
    rf"^(?:(?:{_ACK_EN}|{_ACK_SPACED})(?:\s+|$|(?=[^a-z0-9\u00c0-\u024f\u0400-\u04ff]))"
    rf"|(?:{_ACK_ZH}|{_ACK_UNSPACED})\s*)+$"
)


def _strip_symbols(text: str) -> str:
    """``text`` without punctuation, symbols, emoji and their joiners; spaces folded."""
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZ" or c in "\u200d\ufe0f" else c for c in text)
    return " ".join(kept.split()).lower()


def is_acknowledgement(text: str) -> bool:
    """True when ``text`` only acknowledges ("OK", "Sure!", "Thanks 👍", "好的", "嗯嗯", "收到"):
    after punctuation, symbols and emoji are removed, nothing but words of a small list
    (Chinese and English, and a few each in Russian, Spanish, French, German, Portuguese,
    Italian, Japanese and Korean) is left (or nothing at all). An answer ("No.", "Yes",
    "可以") or anything with content ("好的，我明天九点到", "OK, use port 8080") is not an
    acknowledgement."""
    core = _strip_symbols(normalise(text))
    return not core or _ACK.match(core) is not None
