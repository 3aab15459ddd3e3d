"""Low-value text that is not worth remembering: small talk, bare acknowledgements, errors.

Deliberately conservative: only whole messages that are *nothing but* small talk are
skipped ("thanks!", "哈哈好的"), never a message that merely contains a greeting.
"""

from __future__ import annotations

import re
import unicodedata

from jiyi.text.sentences import question_apart, split_sentences
from jiyi.text.tokenize import normalise

_SMALL_TALK_EN = (
    "hi|hello|hey|yo|hiya|thanks|thank you|thx|ty|ok|okay|k|kk|cool|nice|great|awesome|sure|yes|yeah|yep|"
    "no|nope|lol|haha|hahaha|bye|goodbye|see you|good morning|good night|good evening|got it|sounds good|"
    "you're welcome|np|no problem|alright|hmm|wow|oh|ah"
)
_SMALL_TALK_ZH = "你好|您好|嗨|哈喽|谢谢|多谢|谢啦|好的|好|嗯|嗯嗯|哈哈|哈哈哈|呵呵|拜拜|再见|晚安|早上好|早安|收到|明白|知道了|可以|行|没问题|不客气|哦|噢|啊|好吧"
_SEPARATORS = r"[\s,.!?~，。！？～、…:;：；'\"()（）\-]*"


class _Phrases:
    """Whether a text is nothing but phrases of some lists, one after another, each list's
    phrases followed by what it says (a boundary, spaces). Read position by position, each
    once, so that no text makes it slow: one regex like ``^(?:(?:k|kk)\\s*)+$`` tries every
    way to split "kkkk…x" before it fails (exponential: an ``add`` of 30 such characters
    took seconds, of 50 it never returned)."""

    def __init__(self, *groups: tuple[str, str], flags: int = 0) -> None:
        self._each = [
            re.compile(f"(?:{alt}){after}", flags) for alts, after in groups for alt in _alternatives(alts)
        ]
        self._any = re.compile("|".join(f"(?:{alts})" for alts, _ in groups), flags)

    def whole(self, text: str, start: int = 0) -> bool:
        """Whether ``text[start:]`` is one or more of the phrases and nothing else."""
        n = len(text)
        if n <= start or n - start > _MAX_PHRASES_CHARS:
            return False
        reach = bytearray(n + 1)
        reach[start] = 1
        for i in range(start, n):
            if not reach[i] or self._any.match(text, i) is None:
                continue
            for phrase in self._each:
                m = phrase.match(text, i)
                if m is not None and m.end() > i:
                    reach[m.end()] = 1
        return bool(reach[n])


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern ("a|b(?:c|d)" -> "a", "b(?:c|d)")."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


_MAX_PHRASES_CHARS = 300
"""Longer than this, a text is no acknowledgement, small talk or courtesy."""

_LEADING_SEPARATORS = re.compile(_SEPARATORS)
_SMALL_TALK = _Phrases((_SMALL_TALK_EN, _SEPARATORS), (_SMALL_TALK_ZH, _SEPARATORS), flags=re.IGNORECASE)
_ERROR = re.compile(
    r"^\s*(?:traceback \(most recent call last\)|(?:[a-z]+\.)*[a-z]*(?:error|exception)\b\s*:|"
    r"error\s*[:：]|错误\s*[:：]|报错\s*[:：]|exception in thread|fatal\s*:|panic\s*:|"
    r"http(?:/\d(?:\.\d)?)? [45]\d\d\b|\d{3} (?:internal server error|not found|bad request))",
    re.IGNORECASE,
)


def low_value_reason(text: str) -> str | None:
    """Why ``text`` is not worth storing, or None when it is."""
    norm = normalise(text).strip()
    lead = _LEADING_SEPARATORS.match(norm)
    if _SMALL_TALK.whole(norm, lead.end() if lead else 0):
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
# A word of a spaced script ends at a space, the end or a sign ("ok!" but not "okay" read
# as "ok" + "ay").
_WORD_END = r"(?:\s+|$|(?=[^a-z0-9\u00c0-\u024f\u0400-\u04ff]))"
_ACK = _Phrases((f"{_ACK_EN}|{_ACK_SPACED}", _WORD_END), (f"{_ACK_ZH}|{_ACK_UNSPACED}", r"\s*"))


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
    return not core or _ACK.whole(core)


# What an assistant says to be pleasant, not to inform: congratulations, sympathy, "I'll
# keep that in mind", "Have fun!", "That's huge". Whole sentences, after symbols are removed.
_COURTESY_EN = "|".join(
    (
        r"congrats|congratulations|well done|nice work|good job|great job|way to go|bravo|good luck|best of luck",
        r"fingers crossed|have fun|enjoy|take care|no worries|of course|absolutely|my pleasure|anytime",
        r"happy to help|glad to help|glad i could help|you got this|how exciting|how fun|how lovely",
        r"thanks?(?:\s+you)?\s+for\s+(?:sharing|telling\s+me|letting\s+me\s+know)(?:\s+(?:that|this))?",
        r"(?:im|i\s+am)\s+(?:so\s+|really\s+|very\s+)?(?:happy|glad|thrilled|sorry)"
        r"(?:\s+for\s+you|\s+to\s+hear(?:\s+(?:that|it))?)?",
        r"(?:so\s+|really\s+)?(?:happy|glad|sorry)\s+(?:for\s+you|to\s+hear(?:\s+(?:that|it))?)",
        r"(?:ill|i\s+will)\s+(?:keep\s+(?:that|this|it)\s+in\s+mind|remember\s+(?:that|this|it))",
        r"(?:thats|that\s+is|this\s+is|what|(?:that\s+)?sounds(?:\s+like)?)\s+(?:an?\s+)?"
        r"(?:so\s+|really\s+|very\s+|such\s+)?"
        r"(?:great|huge|amazing|awesome|wonderful|fantastic|exciting|lovely|fun|incredible|brilliant|perfect"
        r"|good|nice|cool|big|tough|rough|hard|plan|great\s+plan|good\s+plan|milestone|achievement)(?:\s+news)?",
    )
)
_COURTESY_ZH = (
    "恭喜|恭喜你|恭喜您|祝贺|祝贺你|祝贺您|太棒了|真棒|太好了|真好|好消息|祝你好运|加油|玩得开心|很高兴听到|很高兴听到这个|"
    "为你高兴|替你高兴|很遗憾听到|很遗憾听到这个|抱歉听到|抱歉听到这个|我记住了|记住了|我会记住|我会记住的|没问题|不客气|随时|当然"
)
_COURTESY_SPACED = (
    "felicidades|enhorabuena|qué bien|que bien|suerte|félicitations|felicitations|bravo|bonne chance|"
    "glückwunsch|herzlichen glückwunsch|viel glück|parabéns|parabens|boa sorte|congratulazioni|complimenti|"
    "auguri|buona fortuna|поздравляю|удачи"
)
_COURTESY_UNSPACED = (
    "おめでとう|おめでとうございます|よかったね|頑張って|축하해|축하해요|축하합니다|화이팅|파이팅"
)
_COURTESY = _Phrases(
    (f"{_COURTESY_EN}|{_COURTESY_SPACED}|{_ACK_EN}|{_ACK_SPACED}", _WORD_END),
    (f"{_COURTESY_ZH}|{_COURTESY_UNSPACED}|{_ACK_ZH}|{_ACK_UNSPACED}", r"\s*"),
)

# A question that offers something names it: a quote, a number or a name ("How about
# "Digital Marketing Specialist"?", "Shall we say 7pm?", "Want to try Hevy?").
_NAMES_SOMETHING = re.compile(r"[\"“”«»「」『』\d]|\s(?!I\b)[A-ZÀ-ÞА-ЯЁ]")


def is_courtesy(text: str) -> bool:
    """True when ``text`` is nothing but courtesy and questions: every sentence is an
    acknowledgement, a congratulation, sympathy or the like ("Congrats!", "That's huge.",
    "I'll keep that in mind.", "恭喜你！", "¡Felicidades!") or a question ("How are you
    celebrating?") that names nothing (no quote, number or name: "Sure! How about
    "Digital Marketing Specialist"?" offers something), and at least one is courtesy. An
    assistant's reply of this kind tells nothing to remember; a reply with any content
    ("Congrats! Stripe's offices are in South San Francisco.") is not courtesy."""
    courteous = False
    text = unicodedata.normalize("NFKC", text)
    for sentence in (p for s in split_sentences(text) for p in question_apart(s)):
        stripped = sentence.strip()
        if stripped.endswith(("?", "？")) or stripped.startswith("¿"):
            if _NAMES_SOMETHING.search(stripped):
                return False
            continue
        core = _strip_symbols(stripped.lower().replace("'", "").replace("’", ""))  # "that's" -> "thats"
        if core and not _COURTESY.whole(core):
            return False
        courteous = courteous or bool(core)
    return courteous
