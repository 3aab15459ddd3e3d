"""Redact personal data and secrets from text before it is stored.

Covered kinds:

* ``EMAIL``        ASCII e-mail addresses (``zhang.san@example.com``).
* ``PHONE``        Chinese mobiles (``13800138000``, ``+86 138 0013 8000``, ``138-0013-8000``),
                   Chinese landlines with an area code (``010-12345678``), NANP numbers
                   (``555-123-4567``, ``(555) 123-4567``), ``+``-prefixed international numbers,
                   grouped national numbers with a trunk 0 (``090-1234-5678``, ``06 12 34 56
                   78``) and 8-15 digits right after a word for phone in one of 16 languages
                   (``Mi móvil es 612 34 56 78``, ``телефон 8 912 345 6789``).
* ``CN_ID``        18-character resident ID numbers; the ISO 7064 MOD 11-2 check character and
                   the birth date must be valid, so arbitrary 18-digit numbers are left alone.
* ``CREDIT_CARD``  13-19 digits (bare, or grouped by spaces/dashes as cards are printed) that
                   pass the Luhn check.
* ``SSN``          US social security numbers ``ddd-dd-dddd`` outside the never-issued ranges.
* ``IP``           IPv4 dotted quads and IPv6 addresses, validated by :mod:`ipaddress`; a
                   quad the text calls a version ("version 1.2.3.4", "版本号 1.2.3.4",
                   "v1.2.3.4") is not an address.
* ``API_KEY``      well-known token shapes (OpenAI, Anthropic, AWS key ids and secret access
                   keys, GitHub, Slack, Google, Stripe, JWT, PEM private keys),
                   ``Bearer``/``Basic`` credentials and the value of ``api_key=`` /
                   ``token:`` / ``secret=`` / ``password=`` / ``密码：`` style assignments,
                   also in prose: "my password is hunter2-xyz", "我的密码是abc123".

Each match becomes ``[REDACTED_<KIND>]``. Naming the kind keeps the stored memory useful
("the user gave a phone number") without keeping the number, and the placeholder contains
no digits or key shapes, so redacting twice changes nothing.

Chinese text puts digits right next to ideographs, and Python's ``\\b`` sees no boundary
between ``是`` and ``1`` (both are ``\\w``). So numbers are delimited with lookarounds on
ASCII letters and digits instead of ``\\b``: ``手机号是13800138000，`` matches, while a number
inside a longer digit run does not. Full-width digits and letters (``１３８…``) are folded to
ASCII for matching only; the fold is one code point to one, so offsets stay those of the
original text.

When candidate spans overlap, the longest wins, then the more specific kind (a valid ID
number is not also a phone; a phone inside an e-mail address is part of the address).
``kinds=`` filters the resolved matches, so restricting the kinds never re-labels a span.

:func:`redact_value` applies :func:`redact` to every string inside a JSON-like value
(mappings, lists, tuples), for the fields stored next to a memory's text.

Pure and offline: precompiled regexes, no I/O.
"""

from __future__ import annotations

import bisect
import ipaddress
import itertools
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any, TypeVar

from jiyi.errors import InvalidInput

__all__ = ["PiiKind", "PiiMatch", "Redaction", "redact", "redact_value"]

T = TypeVar("T")


class PiiKind(StrEnum):
    """What kind of sensitive data a match is."""

    EMAIL = "email"
    PHONE = "phone"
    CN_ID = "cn_id"
    CREDIT_CARD = "credit_card"
    SSN = "ssn"
    IP = "ip"
    API_KEY = "api_key"


@dataclass(frozen=True)
class PiiMatch:
    """One redacted span; ``start``/``end`` index the original text."""

    kind: PiiKind
    start: int
    end: int


@dataclass(frozen=True)
class Redaction:
    """The redacted text and the spans that were replaced, in text order."""

    text: str
    matches: tuple[PiiMatch, ...]

    @property
    def found(self) -> bool:
        """Whether anything was redacted."""
        return bool(self.matches)

    @property
    def kinds(self) -> tuple[PiiKind, ...]:
        """Distinct kinds in order of first appearance."""
        return tuple(dict.fromkeys(m.kind for m in self.matches))


# --- shared pieces ---------------------------------------------------------------------------

# Not \b: see the module docstring. ASCII letters count as "inside a token" so hashes and
# identifiers such as ``a13800138000f`` are not mined for numbers; CJK characters do not.
_L = r"(?<![0-9A-Za-z])(?<![0-9]\.)"
_R = r"(?![0-9A-Za-z])(?!\.[0-9])"
# Dashed shapes (SSN, NANP phones, cards) must also not be a slice of a longer dashed run.
_LD = r"(?<![0-9A-Za-z])(?<![0-9][.-])"
_RD = r"(?![0-9A-Za-z])(?![.-][0-9])"

# Full-width digits and Latin letters -> ASCII (one code point each, so offsets survive).
# Punctuation is deliberately not folded: "：" and "，" must keep ending numbers and addresses.
_FOLD = {
    cp: cp - 0xFEE0
    for r in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
    for cp in range(r[0], r[1] + 1)
}

_Spans = Iterator[tuple[int, int]]


def _placeholder(kind: PiiKind) -> str:
    return f"[REDACTED_{kind.name}]"


# --- e-mail ----------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9_%+-][A-Za-z0-9._%+-]{0,63}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)


def _emails(text: str) -> _Spans:
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        yield m.span()


# --- phones ----------------------------------------------------------------------------------

_CN_MOBILE = re.compile(
    r"(?<![0-9A-Za-z+])(?<![0-9]\.)"
    r"(?:(?:\+|00)86[ -]?|\(\+?86\)[ -]?|86[ -]?)?"
    # Same separator in both places: "138 0013 8000" yes, "138 0013-8000 ..." is likely not a phone.
    r"1[3-9][0-9](?P<sep>[ -]?)[0-9]{4}(?P=sep)[0-9]{4}" + _R
)
_CN_LANDLINE = re.compile(_LD + r"(?:\(0[1-9][0-9]{1,2}\)[ -]?|0[1-9][0-9]{1,2}-)[1-9][0-9]{6,7}" + _RD)
# NANP without a country code needs separators: ten bare digits are too often something else.
# The exchange is not required to start with 2-9 because "555-123-4567" style examples are common.
_NANP = re.compile(
    _LD
    + r"(?:1[ .-])?(?:\([2-9][0-9]{2}\) ?[0-9]{3}[ .-]|[2-9][0-9]{2}(?P<sep>[.-])[0-9]{3}(?P=sep))[0-9]{4}"
    + _RD
)
# "+<country> ..." is explicit enough to accept any grouping; the digit count is checked after.
# Possessive so a run that ends in letters fails outright instead of yielding a truncated prefix.
_INTL = re.compile(
    r"(?<![0-9A-Za-z+])\+[1-9](?:[0-9]|[ .-]?\([0-9]{1,4}\)[ .-]?|[ .-](?=[0-9(]))*+(?<=[0-9])" + _R
)


# National numbers as most countries outside North America write them: a trunk 0, then
# groups set apart by one kind of separator (Japan 090-1234-5678, Korea 010-1234-5678,
# UK 020 7946 0958, France 06 12 34 56 78); 9-11 digits, checked after. A date has at
# most eight ("01.02.2024").
_TRUNK = re.compile(_LD + r"0[1-9][0-9]{0,3}(?P<sep>[ .-])[0-9]{2,4}(?:(?P=sep)[0-9]{2,4}){1,3}" + _RD)
# A word for "phone" in the languages the default embedder reads: after it, a run of 8-15
# digits is a number in whatever national format ("Mi móvil es 612 34 56 78", "Handy 0151
# 23456789"). Words for "number" alone (номер, Nummer, 번호) also name orders and rooms.
_PHONE_WORD = re.compile(
    r"\b(?:phone|tel|mobile|cell(?:phone)?|whatsapp|t[ée]l[ée]phone|tel[ée]fono|m[óo]vil|celular|"
    r"portable|telefon\w*|handy\w*|cellulare|telem[óo]vel|call|телефон\w*|тел|мобильн\w*)\b|"
    r"手机|电话|電話|携帯|전화|휴대폰|핸드폰",
    re.IGNORECASE,
)
_CUED = re.compile(r"[^0-9\n]{0,12}?(?<![0-9A-Za-z])(?P<n>[0-9](?:[0-9]|[ .-](?=[0-9])){6,20})" + _RD)
_DATE = re.compile(r"[0-9]{4}[./-][0-9]{1,2}[./-][0-9]{1,2}|[0-9]{1,2}[./-][0-9]{1,2}[./-][0-9]{2,4}")


def _phones(text: str) -> _Spans:
    for rx in (_CN_MOBILE, _CN_LANDLINE, _NANP):
        for m in rx.finditer(text):
            yield m.span()
    for m in _TRUNK.finditer(text):
        if 9 <= sum(c.isdigit() for c in m.group()) <= 11:
            yield m.span()
    for word in _PHONE_WORD.finditer(text):
        cued = _CUED.match(text, word.end())
        if cued is None:
            continue
        number = cued["n"]
        if 8 <= sum(c.isdigit() for c in number) <= 15 and not _DATE.fullmatch(number):
            yield cued.span("n")
    if "+" in text:
        for m in _INTL.finditer(text):
            digits = sum(c.isdigit() for c in m.group())
            if 8 <= digits <= 15:  # E.164 allows at most 15 digits
                yield m.span()


# --- Chinese resident ID -------------------------------------------------------------------

_CN_ID = re.compile(
    _L
    + r"[1-8][0-9]{5}(?P<y>(?:19|20)[0-9]{2})(?P<m>0[1-9]|1[0-2])(?P<d>0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9Xx]"
    + _R
)
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


def _cn_id_checksum_ok(value: str) -> bool:
    total = sum(int(c) * w for c, w in zip(value[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11] == value[17].upper()


def _cn_ids(text: str) -> _Spans:
    for m in _CN_ID.finditer(text):
        try:
            date(int(m["y"]), int(m["m"]), int(m["d"]))  # rejects 19990230 and friends
        except ValueError:
            continue
        if _cn_id_checksum_ok(m.group()):
            yield m.span()


# --- credit cards ----------------------------------------------------------------------------

# Issuers start with 2-6 (Mastercard 2/5, Amex/JCB/Diners 3, Visa 4, Discover/UnionPay 6);
# that alone rules out 13-digit millisecond timestamps. Grouped forms follow the printed
# layouts (4-4-4-4[-3], Amex 4-6-5) so lists of short numbers are not glued into a "card".
_CARD = re.compile(
    _LD + r"(?:[2-6][0-9]{12,18}"
    r"|[2-6][0-9]{3}(?P<s1>[ -])[0-9]{4}(?P=s1)[0-9]{4}(?P=s1)[0-9]{1,4}(?:(?P=s1)[0-9]{1,3})?"
    r"|3[0-9]{3}(?P<s2>[ -])[0-9]{6}(?P=s2)[0-9]{4,5})" + _RD
)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str) -> _Spans:
    for m in _CARD.finditer(text):
        digits = m.group().replace(" ", "").replace("-", "")
        # A run of one repeated digit passes Luhn but is filler, not a card.
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn_ok(digits):
            yield m.span()


# --- US SSN ----------------------------------------------------------------------------------

# Areas 000, 666 and 900-999, group 00 and serial 0000 are never issued.
_SSN = re.compile(_LD + r"(?!000|666|9)[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}" + _RD)


def _ssns(text: str) -> _Spans:
    for m in _SSN.finditer(text):
        yield m.span()


# --- IP addresses ----------------------------------------------------------------------------

# Exactly four parts, so "1.2.3" (a version) is not a candidate and "1.2.3.4.5" is rejected whole.
_IPV4 = re.compile(_L + r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}" + _R)
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f]{1,4})?(?![0-9A-Za-z_])"
)


def _ipv6_ok(cand: str) -> bool:
    try:
        ipaddress.IPv6Address(cand)
    except ValueError:
        return False
    if "::" not in cand or "." in cand or cand == "::1":
        return True
    # Compressed forms with only short groups are usually code, not addresses:
    # Python slices "a[1::2]", Rust/C++ paths "abc::def", the bare "::".
    groups = [g for g in cand.split(":") if g]
    return len(groups) >= 3 or any(len(g) == 4 for g in groups)


# A dotted quad the text calls a version is one: "version 1.2.3.4", "release 2.0.1.3",
# "版本号 1.2.3.4", "升级到 1.2.3.4 版本". ("v1.2.3.4" is not a candidate at all.)
_VERSION_BEFORE = re.compile(
    r"(?:(?i:\b(?:versions?|ver\.?|release|build|v))[ \t]*[:：#]?[ \t]*(?i:(?:is|was)[ \t]+)?"
    r"|版本号?[ \t]*[:：是为]?[ \t]*)$"
)
_VERSION_AFTER = re.compile(r"[ \t]*版本?")


def _ips(text: str) -> _Spans:
    for m in _IPV4.finditer(text):
        try:
            ipaddress.IPv4Address(m.group())  # octets 0-255, no leading zeros
        except ValueError:
            continue
        if _VERSION_BEFORE.search(text, max(0, m.start() - 20), m.start()) or _VERSION_AFTER.match(
            text, m.end()
        ):
            continue
        yield m.span()
    if ":" not in text:
        return
    for m in _IPV6.finditer(text):
        start, end = m.span()
        cand = m.group()
        # "addr 2001:db8::1: ..." - a sentence colon is swallowed; give it back once.
        if not _ipv6_ok(cand) and cand.endswith(":") and not cand.endswith("::"):
            cand, end = cand[:-1], end - 1
        if _ipv6_ok(cand):
            yield start, end


# --- API keys and secrets --------------------------------------------------------------------

_KEY_SHAPES = re.compile(
    "|".join(
        (
            # OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-); digit check below.
            r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])",
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})(?![A-Za-z0-9_])",
            r"(?<![A-Za-z0-9-])xox[baprs]-[A-Za-z0-9-]{10,}(?![A-Za-z0-9-])",
            r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
            r"(?<![A-Za-z0-9_])(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}(?![A-Za-z0-9_])",
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+(?![A-Za-z0-9_-])",
            # Body limited to base64 and "Proc-Type:"-style header lines: an unclosed BEGIN then
            # stops at the next "-" instead of rescanning the rest of the text (quadratic).
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[ \t]*\r?\n[A-Za-z-]+: [^\n]*)*"
            r"[A-Za-z0-9+/=\s]*-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        )
    )
)
# RFC 6750 b64token; "Basic" carries base64 user:password just as openly.
_AUTH_HEADER = re.compile(r"(?<![A-Za-z0-9])(?i:bearer|basic)[ \t]+(?P<tok>[A-Za-z0-9._~+/-]+=*)")
# Only the value is redacted: "api_key=[REDACTED_API_KEY]" still says what was there.
_ASSIGN = re.compile(
    # Case-insensitive for the key only: under (?i) the value class below would also drop
    # "i", "k" and "s", which case-fold to the non-ASCII "ı", "K" (Kelvin) and "ſ".
    r"(?P<key>(?<![A-Za-z0-9])(?i:api[_-]?key|apikey|api[_-]?secret|access[_-]?key[_-]?id|access[_-]?key"
    r"|secret[_-]?access[_-]?key|secret[_-]?key|client[_-]?secret|private[_-]?key|secret"
    r"|(?:access|auth|refresh|session|id)[_-]?token|token|password|passwd|passphrase|pwd)"
    # CJK keys often follow ASCII directly ("WiFi密码"), so no lookbehind for them.
    r"|密码|口令|密钥|秘钥|令牌)"
    # "is" / "was" and 是 / 为 are how people say it in prose ("my password is ...").
    # No separator at all ("password hunter2-xyz") only for values that look generated.
    r"(?![A-Za-z0-9])[\"']?[ \t]*"
    r"(?P<sep>:=|=>|[:=：]|(?:是|为)[:：]?|(?i:is|was)(?![A-Za-z])[ \t]*[:：]?|(?<=[ \t]))[ \t]*(?!=)"
    r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})'|“(?P<cq>[^”\n]{1,512})”"
    # Unquoted values are ASCII: CJK text right after "密码是abc" ends the value.
    r"|(?P<bare>[^\s\"'&,;\x80-\U0010ffff]{1,512}))"
)
# For these keys any value is a secret; for token/secret/api key we want it to look generated,
# so "max_token=1024" or "token: none" are left alone.
_PASSWORD_KEYS = frozenset({"password", "passwd", "passphrase", "pwd", "密码", "口令"})
_TRAILING_PUNCT = ".:!?)]}>"
# After "password is" in prose a plain word is usually about the password, not the password
# ("the password is wrong"). A plain word counts only after "my/our/your/his/her/their ..."
# and when it is not one of these.
_PROSE_OWNER = re.compile(r"(?i:\b(?:my|our|your|his|her|their))[ \t]+(?:[A-Za-z]+[ \t]+)?$")
_PROSE_WORDS = frozenset(
    """a an the not no none null too very so also still now already just being been
    wrong incorrect invalid correct right required missing empty blank expired weak strong
    secure insecure safe unsafe same different changed reset set saved stored hidden encrypted
    long short easy hard simple ok okay fine good bad new old here there that this it what
    which in on at for to of known unknown secret private public mine yours ours theirs case
    sensitive""".split()
)


def _looks_generated(value: str) -> bool:
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return (len(value) >= 8 and has_digit and has_alpha) or len(value) >= 24


def _api_keys(text: str) -> _Spans:
    for m in _KEY_SHAPES.finditer(text):
        tok = m.group()
        # "sk-learn-is-a-great-library" has the OpenAI shape; real keys always contain digits.
        if tok.startswith("sk-") and not any(c.isdigit() for c in tok):
            continue
        yield m.span()
    for m in _AUTH_HEADER.finditer(text):
        tok = m["tok"].rstrip(".")
        if _looks_generated(tok):
            yield m.start("tok"), m.start("tok") + len(tok)
    for m in _ASSIGN.finditer(text):
        group = next(g for g in ("dq", "sq", "cq", "bare") if m[g] is not None)
        value = m[group]
        if group == "bare":
            value = value.rstrip(_TRAILING_PUNCT) or value  # sentence punctuation, not the secret
        if value.startswith("[REDACTED_") or not value.strip("*"):
            continue  # already redacted or masked
        if not m["sep"]:
            secret = any(c.isdigit() for c in value) and _looks_generated(value)
        else:
            secret = _looks_generated(value) or (
                m["key"].lower() in _PASSWORD_KEYS and _password_value(text, m, value)
            )
        if secret:
            start = m.start(group)
            yield start, start + len(value)
    yield from _aws_secrets(text)


def _password_value(text: str, m: re.Match[str], value: str) -> bool:
    """Whether ``value`` after a password key is the password. After ``=``, ``:`` or 是 it
    always is; after a prose "is" a plain word only when someone's password is meant."""
    if m["sep"][:1].lower() not in ("i", "w") or m["sep"].rstrip()[-1:] in (":", "："):
        return True
    if not value.isalpha():
        return True  # digits or symbols: "my password is hunter2-xyz"
    owned = _PROSE_OWNER.search(text, max(0, m.start() - 40), m.start())
    return owned is not None and value.lower() not in _PROSE_WORDS


# AWS secret access keys: 40 characters of base64 with upper- and lower-case letters and a
# digit. Bare, that shape is too common to take alone, so one counts when it names itself
# nearby (aws, secret, an AKIA.../ASIA... key id, 密钥 in the 100 characters before) or
# looks random: a "/" or "+" inside and letters switching case often, as base64 does.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=_.-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_-])(?!\.[A-Za-z0-9])")
_AWS_CONTEXT = re.compile(r"(?i:aws|secret)|AKIA|ASIA|密钥|秘钥")


def _aws_secrets(text: str) -> _Spans:
    if len(text) < 40:
        return
    for m in _AWS_SECRET.finditer(text):
        tok = m.group()
        upper = sum(c.isupper() for c in tok)
        lower = sum(c.islower() for c in tok)
        digits = sum(c.isdigit() for c in tok)
        if not (upper and lower and digits):
            continue  # hex digests, words
        if _AWS_CONTEXT.search(text, max(0, m.start() - 100), m.start()) or (
            ("/" in tok or "+" in tok) and upper >= 5 and lower >= 5 and _case_switches(tok) >= 8
        ):
            yield m.span()


def _case_switches(tok: str) -> int:
    """Adjacent letters of different case: about 13 in a random 40-character key, a few
    in CamelCase words and paths ("Users/JohnSmith/Documents")."""
    return sum(
        1 for a, b in itertools.pairwise(tok) if a.isalpha() and b.isalpha() and a.isupper() != b.isupper()
    )


# --- resolution ------------------------------------------------------------------------------

_DETECTORS: tuple[tuple[PiiKind, Callable[[str], _Spans]], ...] = (
    (PiiKind.EMAIL, _emails),
    (PiiKind.PHONE, _phones),
    (PiiKind.CN_ID, _cn_ids),
    (PiiKind.CREDIT_CARD, _cards),
    (PiiKind.SSN, _ssns),
    (PiiKind.IP, _ips),
    (PiiKind.API_KEY, _api_keys),
)
# Tie-break for equal-length spans: the kind with the stricter validation is more specific.
_RANK = {
    kind: i
    for i, kind in enumerate(
        (
            PiiKind.CN_ID,
            PiiKind.CREDIT_CARD,
            PiiKind.SSN,
            PiiKind.API_KEY,
            PiiKind.EMAIL,
            PiiKind.IP,
            PiiKind.PHONE,
        )
    )
}
# Text with none of these (plain CJK prose) cannot match any detector; skip the scans.
_HAS_SIGNAL = re.compile(r"[0-9A-Za-z@:=：]|密码|口令|密钥|秘钥|令牌")


def _resolve(cands: list[PiiMatch]) -> list[PiiMatch]:
    """Keep a non-overlapping subset: longest first, then most specific, then leftmost."""
    cands.sort(key=lambda c: (c.start - c.end, _RANK[c.kind], c.start))
    starts: list[int] = []
    kept: list[PiiMatch] = []  # sorted by start, disjoint
    for c in cands:
        i = bisect.bisect_right(starts, c.start)
        if i > 0 and kept[i - 1].end > c.start:
            continue
        if i < len(kept) and kept[i].start < c.end:
            continue
        starts.insert(i, c.start)
        kept.insert(i, c)
    return kept


def redact(text: str, kinds: Collection[PiiKind] | None = None) -> Redaction:
    """Replace sensitive spans in ``text`` with ``[REDACTED_<KIND>]`` placeholders.

    ``kinds`` limits which kinds are replaced (default: all). Detection always runs for every
    kind so that overlaps resolve the same way; the restriction is applied afterwards.
    Raises :class:`~jiyi.errors.InvalidInput` for an unknown kind.
    """
    wanted: frozenset[PiiKind] | None = None
    if kinds is not None:
        try:
            wanted = frozenset(PiiKind(k) for k in kinds)
        except ValueError as exc:
            raise InvalidInput(
                f"unknown PII kind in {sorted(map(str, kinds))}; choose from {[k.value for k in PiiKind]}",
                field="kinds",
            ) from exc
        if not wanted:
            return Redaction(text, ())
    folded = text.translate(_FOLD)
    if not _HAS_SIGNAL.search(folded):
        return Redaction(text, ())

    cands = [PiiMatch(kind, s, e) for kind, detect in _DETECTORS for s, e in detect(folded)]
    kept = [m for m in _resolve(cands) if wanted is None or m.kind in wanted]
    if not kept:
        return Redaction(text, ())

    parts: list[str] = []
    pos = 0
    for m in kept:
        parts.append(text[pos : m.start])
        parts.append(_placeholder(m.kind))
        pos = m.end
    parts.append(text[pos:])
    return Redaction("".join(parts), tuple(kept))


def redact_value(value: T, kinds: Collection[PiiKind] | None = None) -> T:
    """``value`` with every string in it redacted (:func:`redact`): a string, and recursively
    the values of mappings and the items of lists and tuples. Mapping keys are kept (they
    name fields); numbers, booleans, None and other objects are returned as they are, and so
    is anything with nothing to redact (the same object), so callers can compare cheaply.
    """
    wanted = None if kinds is None else frozenset(kinds)
    if wanted is not None and not wanted:
        return value
    return _redact_any(value, wanted)  # type: ignore[no-any-return]


# A mapping key naming a secret ({"password": "..."}) says what its string value is.
_SECRET_NAME = re.compile(r"(?i:key|secret|token|pass|pwd)|密码|口令|密钥|秘钥|令牌")


# ... and one naming a version ({"version": "1.2.3.4"}) says its value is no address.
_VERSION_NAME = re.compile(r"(?i:version|release|build)|(?i:^ver$)|版本")
_NOT_IP = frozenset(PiiKind) - {PiiKind.IP}


def _redact_field(key: object, value: str, kinds: frozenset[PiiKind] | None) -> str:
    """A mapping's string value, read as the assignment ``key="value"`` when the key names
    a secret, so the value of {"password": "hunter2"} is found as in ``password="hunter2"``."""
    if not isinstance(key, str) or len(key) > 64:
        return redact(value, kinds).text
    if _VERSION_NAME.search(key):
        kinds = _NOT_IP if kinds is None else kinds & _NOT_IP
    if '"' in value or "\n" in value or len(value) > 512 or not _SECRET_NAME.search(key):
        return redact(value, kinds).text
    head = f'{key}="'
    out = redact(f'{head}{value}"', kinds).text
    if not (out.startswith(head) and out.endswith('"')):
        return redact(value, kinds).text  # the key itself held something: redact the value alone
    out = out[len(head) : -1]
    return value if out == value else out


_MAX_DEPTH = 64
"""Deeper values are left as they are: no stored JSON field may nest deeper than 32 levels
(:data:`jiyi.model.FIELD_LIMITS`), so validation refuses them with a clear error; walking
them here would only hit Python's recursion limit first."""


def _redact_any(value: Any, kinds: frozenset[PiiKind] | None, depth: int = 0) -> Any:
    if isinstance(value, str):
        return redact(value, kinds).text
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        out = {
            k: _redact_field(k, v, kinds) if isinstance(v, str) else _redact_any(v, kinds, depth + 1)
            for k, v in value.items()
        }
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, list | tuple):
        items = [_redact_any(v, kinds, depth + 1) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value
