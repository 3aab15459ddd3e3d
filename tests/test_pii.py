"""Tests for jiyi.text.pii: every kind in Chinese and English, negatives, overlaps, offsets."""

from __future__ import annotations

import time

import pytest

from jiyi.errors import InvalidInput
from jiyi.text.pii import PiiKind, PiiMatch, Redaction, redact, redact_value

# --- helpers: build valid numbers instead of trusting hand-typed ones ---------------------------

_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def cn_check(body17: str) -> str:
    return "10X98765432"[sum(int(c) * w for c, w in zip(body17, _CN_WEIGHTS, strict=True)) % 11]


def cn_id(body17: str) -> str:
    return body17 + cn_check(body17)


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def luhn_complete(prefix: str) -> str:
    return next(prefix + d for d in "0123456789" if luhn_ok(prefix + d))


def cn_id_bad_checksum(body17: str) -> str:
    """A wrong check character that also fails Luhn, so no other detector claims it."""
    good = cn_check(body17)
    return next(body17 + c for c in "0123456789" if c != good and not luhn_ok(body17 + c))


def ph(kind: PiiKind) -> str:
    return f"[REDACTED_{kind.name}]"


EMAIL, PHONE, CN_ID, CARD, SSN, IP, KEY = (ph(k) for k in PiiKind)


# Secrets are assembled at runtime so secret scanners do not flag this file.
OPENAI = "sk-" + "proj-" + "T3st" * 8
OPENAI_LEGACY = "sk-" + "aB3d" * 12
ANTHROPIC = "sk-" + "ant-api03-" + "T3st_" * 8
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "T3st" * 9
GITHUB_APP = "ghs_" + "Ab12" * 9
GITHUB_PAT = "github_pat_" + "11AB" * 10
SLACK = "xoxb-" + "1234-5678-" + "T3st" * 4
GOOGLE = "AIza" + "Sy" + "T3st_-" * 5 + "abc"
STRIPE = "sk_" + "live_" + "T3st" * 6
STRIPE_PK = "pk_" + "live_" + "T3st" * 6
JWT = ".".join(
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    )
)
PEM = (
    "-----BEGIN "
    + "RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX\n-----END RSA PRIVATE KEY-----"
)
PEM_ENCRYPTED = (
    "-----BEGIN " + "RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,ABCDEF0123\n\n"
    "MIIBOgIBAAJB\nAKj34Gkx==\n-----END RSA PRIVATE KEY-----"
)

SAMPLE_ID = "11010519491231002X"
GEN_ID = cn_id("44030819990101123")
UNIONPAY = luhn_complete("622202100112345678")  # 19 digits


def test_generated_numbers_are_valid() -> None:
    assert cn_check(SAMPLE_ID[:17]) == "X"
    assert len(GEN_ID) == 18
    assert luhn_ok("4111111111111111")
    assert luhn_ok("378282246310005")
    assert luhn_ok(UNIONPAY)
    assert len(UNIONPAY) == 19
    assert not luhn_ok("4111111111111112")


# --- positive cases -------------------------------------------------------------------------

POSITIVE: list[tuple[str, str]] = [
    # e-mail
    ("我的邮箱是zhang.san@example.com，欢迎联系。", f"我的邮箱是{EMAIL}，欢迎联系。"),
    ("Contact me at john.doe+work@mail.example.co.uk.", f"Contact me at {EMAIL}."),
    ("邮箱：Li_Wei99@qq.com", f"邮箱：{EMAIL}"),
    # phones: Chinese mobiles
    ("我的手机号是13800138000，邮箱是a@b.com", f"我的手机号是{PHONE}，邮箱是{EMAIL}"),
    ("电话：138 0013 8000", f"电话：{PHONE}"),
    ("电话138-0013-8000。", f"电话{PHONE}。"),
    ("请拨打+86 138 0013 8000联系我", f"请拨打{PHONE}联系我"),
    ("手机+8613912345678", f"手机{PHONE}"),
    ("联系人(+86)15912345678", f"联系人{PHONE}"),
    ("全角号码１３８００１３８０００", f"全角号码{PHONE}"),
    ("手机：13800138000、13900139000", f"手机：{PHONE}、{PHONE}"),
    # phones: landline, US, international
    ("办公室电话010-12345678", f"办公室电话{PHONE}"),
    ("深圳：(0755) 87654321", f"深圳：{PHONE}"),
    ("Call +1 (555) 123-4567 today", f"Call {PHONE} today"),
    ("Call 555-123-4567.", f"Call {PHONE}."),
    ("Office (555) 123-4567, mobile 555.987.6543", f"Office {PHONE}, mobile {PHONE}"),
    ("Toll free 1-800-555-0199", f"Toll free {PHONE}"),
    ("London office: +44 20 7946 0958", f"London office: {PHONE}"),
    # national numbers with a trunk 0, next to kana and Hangul as to Han characters
    ("電話番号は090-1234-5678です", f"電話番号は{PHONE}です"),
    ("제 번호는 010-1234-5678이에요", f"제 번호는 {PHONE}이에요"),
    ("mon numéro est 06 12 34 56 78", f"mon numéro est {PHONE}"),
    ("Tokyo office 03-5320-4111", f"Tokyo office {PHONE}"),
    # any national format right after a word for phone
    ("Mi móvil es 612 34 56 78", f"Mi móvil es {PHONE}"),
    ("Meine Handynummer: 0151 23456789", f"Meine Handynummer: {PHONE}"),
    ("Мой телефон 8 912 345 6789", f"Мой телефон {PHONE}"),
    ("call me on 07700 900123", f"call me on {PHONE}"),
    ("His number is 13800138000.", f"His number is {PHONE}."),
    # Chinese resident ID
    (f"身份证号{SAMPLE_ID}，请核对", f"身份证号{CN_ID}，请核对"),
    (f"身份证号：{SAMPLE_ID.lower()}", f"身份证号：{CN_ID}"),
    (f"ID number {GEN_ID}.", f"ID number {CN_ID}."),
    # credit cards
    ("卡号4111 1111 1111 1111。", f"卡号{CARD}。"),
    ("card 4111-1111-1111-1111 exp 12/27", f"card {CARD} exp 12/27"),
    ("Visa 4111111111111111", f"Visa {CARD}"),
    ("Amex 3782 822463 10005 on file", f"Amex {CARD} on file"),
    (f"银联卡{UNIONPAY}已绑定", f"银联卡{CARD}已绑定"),
    # SSN
    ("SSN: 078-05-1120.", f"SSN: {SSN}."),
    ("我的社保号是123-45-6789", f"我的社保号是{SSN}"),
    # IPv4 / IPv6
    ("服务器地址192.168.1.100，端口8080", f"服务器地址{IP}，端口8080"),
    ("ping 8.8.8.8.", f"ping {IP}."),
    ("url http://10.0.0.1:8080/x", f"url http://{IP}:8080/x"),
    ("IPv6 2001:db8::1 is documentation", f"IPv6 {IP} is documentation"),
    ("本机地址::1", f"本机地址{IP}"),
    ("link local fe80::1%eth0", f"link local {IP}%eth0"),
    ("2001:0db8:85a3:0000:0000:8a2e:0370:7334", IP),
    ("mapped ::ffff:192.0.2.128", f"mapped {IP}"),
    ("open [2001:db8::1]:8080", f"open [{IP}]:8080"),
    ("addr 2001:db8::1: next", f"addr {IP}: next"),
    # API keys: known shapes
    (f"my key is {OPENAI}", f"my key is {KEY}"),
    (f"旧密钥{OPENAI_LEGACY}已作废", f"旧密钥{KEY}已作废"),
    (f"Claude key {ANTHROPIC}.", f"Claude key {KEY}."),
    (f"AWS id {AWS} leaked", f"AWS id {KEY} leaked"),
    (f"git remote with {GITHUB}", f"git remote with {KEY}"),
    (f"app token {GITHUB_APP}", f"app token {KEY}"),
    (f"PAT：{GITHUB_PAT}", f"PAT：{KEY}"),
    (f"slack {SLACK}", f"slack {KEY}"),
    (f"maps {GOOGLE} ok", f"maps {KEY} ok"),
    (f"stripe {STRIPE} and {STRIPE_PK}", f"stripe {KEY} and {KEY}"),
    (f"令牌{JWT}过期了", f"令牌{KEY}过期了"),
    (f"key:\n{PEM}\nend", f"key:\n{KEY}\nend"),
    (f"私钥如下 {PEM_ENCRYPTED} 请勿外传", f"私钥如下 {KEY} 请勿外传"),
    # API keys: headers and assignments (value only)
    (f"Authorization: Bearer {JWT}", f"Authorization: Bearer {KEY}"),
    ("Authorization: Bearer abcdef0123456789abcdef", f"Authorization: Bearer {KEY}"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", f"Authorization: Basic {KEY}"),
    ("api_key=abc123def456ghi789", f"api_key={KEY}"),
    (f'OPENAI_API_KEY="{OPENAI}"', f'OPENAI_API_KEY="{KEY}"'),
    ('{"token": "z9y8x7w6v5u4t3s2"}', f'{{"token": "{KEY}"}}'),
    ("secret: Zm9vYmFyMTIz; next", f"secret: {KEY}; next"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"AWS_SECRET_ACCESS_KEY={KEY}"),
    (
        "https://api.example.com/cb?token=a1b2c3d4e5f6&next=1",
        f"https://api.example.com/cb?token={KEY}&next=1",
    ),
    ("password: hunter2.", f"password: {KEY}."),
    ("db password='p@ss w0rd'", f"db password='{KEY}'"),
    ("我的密码是abc123456，请保管好", f"我的密码是{KEY}，请保管好"),
    ("WiFi密码：88888888", f"WiFi密码：{KEY}"),
    ("口令=“芝麻开门”", f"口令=“{KEY}”"),
    ("口令是“芝麻开门”", f"口令是“{KEY}”"),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_redacts(text: str, expected: str) -> None:
    result = redact(text)
    assert result.text == expected
    assert result.found


# --- negative cases -------------------------------------------------------------------------

NEGATIVE = [
    # dates, times, timestamps
    "会议在2024-05-01举行",
    "2024-05-01T12:30:45Z",
    "2024-05-01 12:30:45.123+08:00",
    "at 12:30 or 12:30:45",
    "on 05/01/2024 and 2024/05/01",
    "1700000000000 ms since epoch",
    "20240501 是日期",
    # versions and non-addresses
    "version 1.2.3",
    "Python 3.11.7 and v1.2.3.4",
    "999.1.1.1",
    "256.1.1.1 and 01.2.3.4",
    "1.2.3.4.5",
    "a[::2] a[1::2] std::vector abc::def",
    "MAC 00:1a:2b:3c:4d:5e",
    "比分3:2:1",
    # numbers that are not PII
    "价格¥12800",
    "12800元",
    "$1,299.99",
    "订单号 123456，数量 4096",
    "编号 12345678901",
    "订单号913800138000123",
    "call 555-1234",
    "my iPhone 12 mini",
    "电话会议在 2024-05-06 举行",
    "Telefonkonferenz am 12.05.2024 um 10 Uhr",
    "phone bill 1234.56",
    "номер заказа 12345678",
    "room 0101 and 0102",
    "scores 01.02.2024",
    "pi is 3.14159265358979",
    "4111 1111 1111 1112",
    "4111111111111112",
    "0000 0000 0000 0000",
    "1234 5678 9012 3456 is not a card",
    # ID numbers failing checksum or date
    cn_id_bad_checksum("11010519491231002"),
    cn_id_bad_checksum("44030819990101123"),
    cn_id("11010519490231002"),  # 31 February
    # SSN never-issued ranges
    "SSN 000-12-3456",
    "SSN 666-12-3456",
    "SSN 900-12-3456",
    "SSN 123-00-4567",
    "SSN 123-45-0000",
    # words that look like key prefixes
    "sk-learn-is-a-great-library",
    "max_tokens: 1024",
    "max_token=1024",
    "token: none",
    "Bearer tokens are great",
    "这个token是什么",
    "密码是多少？",
    "password: [REDACTED_API_KEY]",
    "password=****",
    "if token == expected:",
    "",
    "纯中文没有任何敏感信息。",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_leaves_alone(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.matches == ()
    assert not result.found


# --- overlaps -------------------------------------------------------------------------------

PHONE_SHAPED_ID = cn_id("13800119900101123")  # starts with a mobile-like prefix
PHONE_INSIDE_CARD = luhn_complete("621380013800013800")


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("13800138000@163.com", [PiiKind.EMAIL]),
        (f"身份证{SAMPLE_ID}", [PiiKind.CN_ID]),
        (f"身份证{PHONE_SHAPED_ID}", [PiiKind.CN_ID]),
        (f"卡号{PHONE_INSIDE_CARD}", [PiiKind.CREDIT_CARD]),
        ("mapped ::ffff:192.0.2.128", [PiiKind.IP]),
        (f"Authorization: Bearer {JWT}", [PiiKind.API_KEY]),
        (f"api_key={AWS}", [PiiKind.API_KEY]),
        ("password=13800138000", [PiiKind.API_KEY]),
        ("+86 138 0013 8000", [PiiKind.PHONE]),
        ("电话13800138000身份证11010519491231002X邮箱a@b.cn", [PiiKind.PHONE, PiiKind.CN_ID, PiiKind.EMAIL]),
    ],
)
def test_overlaps_resolve_to_one_kind(text: str, kinds: list[PiiKind]) -> None:
    result = redact(text)
    assert [m.kind for m in result.matches] == kinds


def test_phone_shaped_prefix_does_not_split_id() -> None:
    assert PHONE_SHAPED_ID.startswith("138001")
    assert redact(PHONE_SHAPED_ID).text == CN_ID


# --- offsets, result object, kinds= ---------------------------------------------------------


def rebuild(original: str, matches: tuple[PiiMatch, ...]) -> str:
    out, pos = [], 0
    for m in matches:
        out += [original[pos : m.start], ph(m.kind)]
        pos = m.end
    return "".join([*out, original[pos:]])


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_offsets_index_the_original(text: str, expected: str) -> None:
    result = redact(text)
    starts = [m.start for m in result.matches]
    assert starts == sorted(starts)
    for a, b in zip(result.matches, result.matches[1:], strict=False):
        assert a.end <= b.start
    assert rebuild(text, result.matches) == result.text == expected


def test_offsets_exact() -> None:
    text = "我的手机号是13800138000，邮箱是a@b.com"
    result = redact(text)
    assert result.matches == (
        PiiMatch(PiiKind.PHONE, 6, 17),
        PiiMatch(PiiKind.EMAIL, 21, 28),
    )
    assert text[6:17] == "13800138000"
    assert text[21:28] == "a@b.com"


def test_offsets_with_full_width_digits() -> None:
    text = "号码１３８００１３８０００。"
    (m,) = redact(text).matches
    assert text[m.start : m.end] == "１３８００１３８０００"


def test_result_properties() -> None:
    result = redact("a@b.com, 13800138000, c@d.org, 8.8.8.8")
    assert isinstance(result, Redaction)
    assert result.found
    assert result.kinds == (PiiKind.EMAIL, PiiKind.PHONE, PiiKind.IP)
    assert len(result.matches) == 4
    with pytest.raises(AttributeError):
        result.text = "x"  # type: ignore[misc]
    empty = redact("nothing here")
    assert not empty.found
    assert empty.kinds == ()


MIXED = f"邮箱a@b.com 手机13800138000 卡4111111111111111 IP 10.1.2.3 key {AWS}"


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ({PiiKind.EMAIL}, f"邮箱{EMAIL} 手机13800138000 卡4111111111111111 IP 10.1.2.3 key {AWS}"),
        ([PiiKind.PHONE, PiiKind.IP], f"邮箱a@b.com 手机{PHONE} 卡4111111111111111 IP {IP} key {AWS}"),
        (
            (PiiKind.CREDIT_CARD, PiiKind.API_KEY),
            f"邮箱a@b.com 手机13800138000 卡{CARD} IP 10.1.2.3 key {KEY}",
        ),
        ([], MIXED),
        (None, f"邮箱{EMAIL} 手机{PHONE} 卡{CARD} IP {IP} key {KEY}"),
    ],
)
def test_kinds_restriction(kinds: set[PiiKind] | list[PiiKind] | None, expected: str) -> None:
    result = redact(MIXED, kinds=kinds)
    assert result.text == expected
    if kinds is not None:
        assert set(result.kinds) <= set(kinds)


def test_kinds_restriction_does_not_relabel_spans() -> None:
    # The number is part of an e-mail address; asking only for phones must not split it.
    assert redact("13800138000@163.com", kinds={PiiKind.PHONE}).text == "13800138000@163.com"


def test_kinds_accepts_values_and_rejects_unknown() -> None:
    assert redact("a@b.com", kinds=["email"]).text == EMAIL  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        redact("a@b.com", kinds=["passport"])  # type: ignore[list-item]


# --- idempotence and robustness -------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_idempotent(text: str, expected: str) -> None:
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text == expected
    assert not twice.found


@pytest.mark.parametrize(
    "text",
    [
        "1" * 20_000,
        "a" * 20_000 + "@",
        ":" * 20_000,
        "1:" * 10_000,
        "+1 " * 7_000,
        "1." * 10_000,
        "1-" * 10_000,
        "eyJ" + "a" * 20_000,
        "password=" * 2_000,
        "x" * 10_000 + "@" + "a." * 5_000,
        "-----BEGIN PRIVATE KEY-----" * 2_000,
        ("-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 20 + "\n") * 500,
        'token="' * 5_000,
    ],
)
def test_pathological_input_is_fast(text: str) -> None:
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 2.0


def test_long_mixed_text() -> None:
    chunk = "用户张三，手机13800138000，邮箱zs@example.com，住在北京。The meeting is on 2024-05-01 at 10:30. "
    text = chunk * 500
    result = redact(text)
    assert len(result.matches) == 1000
    assert (
        result.text
        == (f"用户张三，手机{PHONE}，邮箱{EMAIL}，住在北京。The meeting is on 2024-05-01 at 10:30. ") * 500
    )


# --- prose passwords, AWS secret keys, versions written like addresses ------------------------

AWS_SECRET = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example
AWS_SECRET_PLAIN = "je7MtGbClwBF2Zp9Utkh3yCo8nvb" + "EXAMPLEKEY12"  # no "/" or "+"

PROSE_AND_AWS = [
    ("my password is hunter2-xyz", f"my password is {KEY}"),
    ("My password is hunter2-xyz.", f"My password is {KEY}."),
    ("my wifi password is sunshine", f"my wifi password is {KEY}"),
    ("our passphrase was correct-horse-battery", f"our passphrase was {KEY}"),
    ("the password is: hunter2", f"the password is: {KEY}"),
    ("我的密码是：abc123456", f"我的密码是：{KEY}"),
    ("phone (415) 555-0132 and my password is hunter2-xyz", f"phone {PHONE} and my password is {KEY}"),
    (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {KEY}"),
    (f"aws_secret_access_key {AWS_SECRET}", f"aws_secret_access_key {KEY}"),
    (f"my AWS secret key is {AWS_SECRET}.", f"my AWS secret key is {KEY}."),
    (f"AWS 密钥：{AWS_SECRET_PLAIN}", f"AWS 密钥：{KEY}"),
    (f"{AWS} {AWS_SECRET_PLAIN}", f"{KEY} {KEY}"),
    (f"export creds {AWS_SECRET}", f"export creds {KEY}"),
    (f"凭证 {AWS_SECRET} 已泄露", f"凭证 {KEY} 已泄露"),
    ("server 10.1.2.3 runs version 1.2.3.4", f"server {IP} runs version 1.2.3.4"),
]

PROSE_AND_VERSION_NEGATIVE = [
    "the password is wrong",
    "Your password was reset",
    "my password is too short",
    "the secret is out",
    "the token is ok",
    "password is required",
    "version 1.2.3.4",
    "Version: 1.2.3.4 is out",
    "upgrade to release 2.0.1.3 today",
    "the version is 1.2.3.4",
    "版本号1.2.3.4",
    "升级到 1.2.3.4 版本",
    "v1.2.3.4 and V1.2.3.4",
    "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "Users/JohnSmith/Documents/Projects/App2X",
    "ThisIsAVeryLongCamelCaseIdentifierName12",
]


@pytest.mark.parametrize(("text", "expected"), PROSE_AND_AWS)
def test_prose_passwords_and_aws_secrets(text: str, expected: str) -> None:
    result = redact(text)
    assert result.text == expected
    assert rebuild(text, result.matches) == expected
    assert redact(result.text).text == expected  # idempotent


@pytest.mark.parametrize("text", PROSE_AND_VERSION_NEGATIVE)
def test_prose_about_passwords_and_versions_is_left_alone(text: str) -> None:
    assert redact(text).text == text


def test_redact_value_walks_json_like_values() -> None:
    value = {
        "note": "call 13800138000",
        "nested": {"list": ["a@b.com", 3, None, ("x", "password=hunter2")]},
        "keep": 1.5,
        "a@b.com": "the key of a mapping is a field name",
    }
    out = redact_value(value)
    assert out == {
        "note": f"call {PHONE}",
        "nested": {"list": [EMAIL, 3, None, ("x", f"password={KEY}")]},
        "keep": 1.5,
        "a@b.com": "the key of a mapping is a field name",
    }
    assert value["note"] == "call 13800138000"  # the input is not changed
    clean = {"a": ["b", {"c": "d"}]}
    assert redact_value(clean) is clean  # nothing to redact: the same object
    assert redact_value("a@b.com", kinds=[PiiKind.PHONE]) == "a@b.com"
    assert redact_value(["a@b.com"], kinds=()) == ["a@b.com"]
    assert redact_value("x 13800138000", kinds={PiiKind.PHONE}) == f"x {PHONE}"


@pytest.mark.parametrize(
    "text",
    [
        "my password is " * 5_000,
        ("A1b/" * 10 + " ") * 2_000,
        "aws " + "Ab1/" * 20_000,
        "version 1.2.3.4 " * 5_000,
    ],
)
def test_new_detectors_are_fast_on_pathological_input(text: str) -> None:
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stored password hunter2-xyz", f"stored password {KEY}"),
        ("token abc123def456 expired", f"token {KEY} expired"),
        ("password field2 is required", "password field2 is required"),
        ("password 12345678", "password 12345678"),
        ("the token in the header", "the token in the header"),
    ],
)
def test_a_key_right_before_a_generated_value(text: str, expected: str) -> None:
    assert redact(text).text == expected


def test_redact_value_reads_a_mapping_key_as_what_its_value_is() -> None:
    value = {
        "crm": {"password": "hunter2", "Password": "p@ss w0rd", "token": "none"},
        "api_key": "abc123def456",
        "version": "1.2.3.4",
        "server_ip": "1.2.3.4",
        "note": "hi",
    }
    assert redact_value(value) == {
        "crm": {"password": KEY, "Password": KEY, "token": "none"},
        "api_key": KEY,
        "version": "1.2.3.4",
        "server_ip": IP,
        "note": "hi",
    }
    clean = {"token": "none", "version": "1.2.3.4"}
    assert redact_value(clean) is clean
