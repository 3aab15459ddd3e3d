"""RuleExtractor: explicit statements in Chinese and English, hedges, questions, negatives."""

from __future__ import annotations

from typing import Any

import pytest

from jiyi.model import MemoryType
from jiyi.write.extract import Extracted, Extractor, Turn
from jiyi.write.extract_rules import CONFIDENCE_HEDGED, RuleExtractor

F = MemoryType.FACT
P = MemoryType.PREFERENCE
H = MemoryType.HABIT
D = MemoryType.DECISION
C = MemoryType.CONSTRAINT
S = MemoryType.SKILL

# Confidence bands: (low, high) inclusive.
REMEMBER = (0.95, 0.95)
HIGH = (0.9, 0.9)
MID = (0.85, 0.85)


def extract(*texts: str, role: str = "user") -> list[Extracted]:
    return RuleExtractor().extract([Turn(role, t) for t in texts])


def only(text: str) -> Extracted:
    items = extract(text)
    assert len(items) == 1, [(i.memory_type, i.content) for i in items]
    return items[0]


def check(
    item: Extracted, mtype: MemoryType, band: tuple[float, float], key: str | None, sub: dict[str, Any]
) -> None:
    assert item.memory_type is mtype, item
    assert band[0] <= item.confidence <= band[1], item
    if key is not None:
        assert item.key == key, item
    for k, v in sub.items():
        assert item.structured is not None, item
        assert item.structured.get(k) == v, (k, item.structured)


# -- Chinese positives -----------------------------------------------------------------------------

ZH_CASES: list[tuple[str, MemoryType, tuple[float, float], str | None, dict[str, Any], str]] = [
    # explicit requests: type inferred from the remembered content
    ("记住我喜欢 Python", P, REMEMBER, "preference:python", {"polarity": "like"}, "我喜欢 Python"),
    ("帮我记住：我对花生过敏。", C, REMEMBER, "allergy:花生", {"allergy": "花生"}, "我对花生过敏"),
    ("记住我们下个月搬家", F, REMEMBER, None, {}, "我们下个月搬家"),
    ("请记住我的生日是5月3日", F, REMEMBER, "my:生日", {"value": "5月3日"}, "我的生日是5月3日"),
    ("记一下，我们周五发布新版本", F, REMEMBER, None, {}, "我们周五发布新版本"),
    ("别忘了我住在上海", F, REMEMBER, "location", {"value": "上海"}, "我住在上海"),
    ("帮我记住：代码必须有单元测试", C, REMEMBER, None, {"modality": "must"}, "代码必须有单元测试"),
    # self-descriptions
    ("我是一名软件工程师", F, HIGH, "profession", {"value": "软件工程师"}, "我是一名软件工程师"),
    ("我是产品经理。", F, HIGH, "profession", {"value": "产品经理"}, "我是产品经理"),
    ("我叫李雷", F, HIGH, "name", {"value": "李雷"}, "我叫李雷"),
    ("我的名字是王小明", F, HIGH, "name", {"value": "王小明"}, "我的名字是王小明"),
    ("我在腾讯工作", F, HIGH, "employer", {"value": "腾讯"}, "我在腾讯工作"),
    ("我住在杭州", F, HIGH, "location", {"value": "杭州"}, "我住在杭州"),
    ("对了，我住北京", F, HIGH, "location", {"value": "北京"}, "我住北京"),
    ("我来自成都", F, HIGH, "hometown", {"value": "成都"}, "我来自成都"),
    ("我是北京人", F, HIGH, "hometown", {"value": "北京"}, "我是北京人"),
    ("我是做前端的", F, HIGH, "profession", {"value": "前端"}, "我是做前端的"),
    (
        "我上个月升职成了高级工程师",
        F,
        HIGH,
        "profession",
        {"value": "高级工程师"},
        "我上个月升职成了高级工程师",
    ),
    ("我被提拔为部门经理了", F, HIGH, "profession", {"value": "部门经理"}, "我被提拔为部门经理了"),
    # preferences
    ("我喜欢Python", P, MID, "preference:python", {"polarity": "like", "object": "Python"}, "我喜欢Python"),
    ("我更喜欢用 Vim 吧", P, MID, "preference:vim", {"polarity": "like", "object": "Vim"}, "我更喜欢用 Vim"),
    ("我比较喜欢安静的环境", P, MID, "preference:安静的环境", {"polarity": "like"}, "我比较喜欢安静的环境"),
    ("我爱吃辣", P, MID, "preference:吃辣", {"polarity": "like"}, "我爱吃辣"),
    ("我不喜欢Java", P, MID, "preference:java", {"polarity": "dislike", "object": "Java"}, "我不喜欢Java"),
    ("我讨厌加班！", P, MID, "preference:加班", {"polarity": "dislike"}, "我讨厌加班"),
    ("我偏好深色主题", P, MID, "preference:深色主题", {"polarity": "like"}, "我偏好深色主题"),
    (
        "比起Java，我更喜欢Go",
        P,
        MID,
        "preference:go",
        {"polarity": "like", "object": "Go", "over": ["Java"]},
        "比起Java，我更喜欢Go",
    ),
    ("我最喜欢的语言是Rust", P, MID, "favorite:语言", {"object": "Rust"}, "我最喜欢的语言是Rust"),
    # habits
    ("我通常早上六点起床", H, MID, None, {"habit": "早上六点起床"}, "我通常早上六点起床"),
    ("我每天都跑步", H, MID, None, {"habit": "跑步"}, "我每天都跑步"),
    ("我一般用Mac写代码", H, MID, None, {}, "我一般用Mac写代码"),
    ("我经常喝咖啡呢", H, MID, None, {}, "我经常喝咖啡"),
    ("我习惯用双引号", H, MID, None, {}, "我习惯用双引号"),
    ("我平时用 VS Code", H, MID, None, {"habit": "用 VS Code"}, "我平时用 VS Code"),
    ("周末我一般去爬山", H, MID, None, {"habit": "去爬山"}, "周末我一般去爬山"),
    # decisions
    ("我们选择了PostgreSQL", D, HIGH, None, {"choice": "PostgreSQL", "rejected": []}, "我们选择了PostgreSQL"),
    ("决定采用微服务架构", D, HIGH, None, {"choice": "微服务架构"}, "决定采用微服务架构"),
    ("最后定了Redis", D, HIGH, None, {"choice": "Redis"}, "最后定了Redis"),
    (
        "我们决定用 Kafka 而不是 RabbitMQ，因为吞吐量更高",
        D,
        HIGH,
        None,
        {"choice": "Kafka", "rejected": ["RabbitMQ"], "reason": "吞吐量更高"},
        "我们决定用 Kafka 而不是 RabbitMQ，因为吞吐量更高",
    ),
    (
        "我们决定不用MongoDB，因为事务支持不好",
        D,
        HIGH,
        None,
        {"choice": None, "rejected": ["MongoDB"], "reason": "事务支持不好"},
        "我们决定不用MongoDB，因为事务支持不好",
    ),
    # constraints
    ("代码必须有单元测试", C, HIGH, None, {"modality": "must"}, "代码必须有单元测试"),
    ("一定要支持中文", C, HIGH, None, {"modality": "must"}, "一定要支持中文"),
    ("我不能吃海鲜", C, HIGH, None, {"modality": "must_not"}, "我不能吃海鲜"),
    ("不允许使用全局变量", C, HIGH, None, {"modality": "must_not"}, "不允许使用全局变量"),
    ("禁止在生产环境直接改数据库", C, HIGH, None, {"modality": "must_not"}, "禁止在生产环境直接改数据库"),
    ("务必在提交前运行测试", C, HIGH, None, {"modality": "must"}, "务必在提交前运行测试"),
    ("这个接口不能返回空值", C, HIGH, None, {"modality": "must_not"}, "这个接口不能返回空值"),
    ("以后请用中文回答", C, HIGH, None, {"modality": "must"}, "以后请用中文回答"),
    (
        "我们用 Go 而不是 Java，因为性能好",
        D,
        HIGH,
        None,
        {"choice": "Go", "rejected": ["Java"], "reason": "性能好"},
        "我们用 Go 而不是 Java，因为性能好",
    ),
    ("我对青霉素过敏", C, HIGH, "allergy:青霉素", {"modality": "must_not"}, "我对青霉素过敏"),
    # skills
    ("我熟悉Kubernetes", S, MID, "skill:kubernetes", {"skill": "Kubernetes"}, "我熟悉Kubernetes"),
    ("我精通C++", S, MID, "skill:c++", {"skill": "C++"}, "我精通C++"),
    ("我会用Docker", S, MID, "skill:docker", {"skill": "Docker"}, "我会用Docker"),
    ("我擅长数据分析", S, MID, "skill:数据分析", {"skill": "数据分析"}, "我擅长数据分析"),
    ("我有五年Java开发经验", S, MID, "skill:java", {"skill": "Java"}, "我有五年Java开发经验"),
]


@pytest.mark.parametrize(("text", "mtype", "band", "key", "sub", "content"), ZH_CASES)
def test_chinese_positive(
    text: str,
    mtype: MemoryType,
    band: tuple[float, float],
    key: str | None,
    sub: dict[str, Any],
    content: str,
) -> None:
    item = only(text)
    check(item, mtype, band, key, sub)
    assert item.content == content
    assert item.language == "zh"
    assert item.turn_index == 0
    assert item.source_text
    assert item.reasons
    assert all(r.startswith("rule:") or r == "hedged" for r in item.reasons)


# -- English positives -----------------------------------------------------------------------------

EN_CASES: list[tuple[str, MemoryType, tuple[float, float], str | None, dict[str, Any], str]] = [
    # explicit requests
    (
        "Remember that my wife's birthday is May 3.",
        F,
        REMEMBER,
        None,
        {"value": "May 3"},
        "my wife's birthday is May 3",
    ),
    ("Please remember I prefer dark mode.", P, REMEMBER, "preference:dark mode", {}, "I prefer dark mode"),
    ("Don't forget that we deploy on Fridays.", F, REMEMBER, None, {}, "we deploy on Fridays"),
    (
        "Note that the staging server is at 10.0.0.5.",
        F,
        REMEMBER,
        None,
        {},
        "the staging server is at 10.0.0.5",
    ),
    ("Can you remember that I'm vegetarian?", F, REMEMBER, None, {}, "I'm vegetarian"),
    (
        "Remember: the API must be versioned.",
        C,
        REMEMBER,
        None,
        {"modality": "must"},
        "the API must be versioned",
    ),
    # self-descriptions
    ("I am a data scientist.", F, HIGH, "profession", {"value": "data scientist"}, "I am a data scientist"),
    (
        "I'm a software engineer at Google.",
        F,
        HIGH,
        "profession",
        {"value": "software engineer"},
        "I'm a software engineer at Google",
    ),
    ("My name is Alice Chen.", F, HIGH, "name", {"value": "Alice Chen"}, "My name is Alice Chen"),
    ("I'm Dr. Smith.", F, HIGH, "name", {"value": "Dr. Smith"}, "I'm Dr. Smith"),
    ("I work at Stripe.", F, HIGH, "employer", {"value": "Stripe"}, "I work at Stripe"),
    ("I work as a nurse.", F, HIGH, "profession", {"value": "nurse"}, "I work as a nurse"),
    (
        "I just got promoted to senior engineer at Stripe!",
        F,
        HIGH,
        "profession",
        {"value": "senior engineer"},
        "I just got promoted to senior engineer at Stripe",
    ),
    (
        "I was promoted to team lead last week.",
        F,
        HIGH,
        "profession",
        {"value": "team lead"},
        "I was promoted to team lead last week",
    ),
    ("I live in Berlin.", F, HIGH, "location", {"value": "Berlin"}, "I live in Berlin"),
    ("I'm from Toronto, Canada.", F, HIGH, "hometown", {"value": "Toronto"}, "I'm from Toronto, Canada"),
    # preferences
    (
        "I prefer tabs over spaces.",
        P,
        MID,
        "preference:tabs",
        {"polarity": "like", "object": "tabs", "over": ["spaces"]},
        "I prefer tabs over spaces",
    ),
    (
        "I like Python.",
        P,
        MID,
        "preference:python",
        {"polarity": "like", "object": "Python"},
        "I like Python",
    ),
    ("I love hiking!", P, MID, "preference:hiking", {"polarity": "like"}, "I love hiking"),
    (
        "I don't like Java.",
        P,
        MID,
        "preference:java",
        {"polarity": "dislike", "object": "Java"},
        "I don't like Java",
    ),
    ("I hate meetings before 10am.", P, MID, None, {"polarity": "dislike"}, "I hate meetings before 10am"),
    (
        "I'd rather use Go than Rust.",
        P,
        MID,
        "preference:go",
        {"object": "Go", "over": ["Rust"]},
        "I'd rather use Go than Rust",
    ),
    (
        "My favorite editor is Neovim.",
        P,
        MID,
        "favorite:editor",
        {"object": "Neovim"},
        "My favorite editor is Neovim",
    ),
    (
        "I like Python and Go.",
        P,
        MID,
        "preference:python and go",
        {"object": "Python and Go"},
        "I like Python and Go",
    ),
    ("I'm a big fan of Rust.", P, MID, "preference:rust", {"polarity": "like"}, "I'm a big fan of Rust"),
    ("I'm not a fan of meetings.", P, MID, None, {"polarity": "dislike"}, "I'm not a fan of meetings"),
    ("I can't stand PHP.", P, MID, "preference:php", {"polarity": "dislike"}, "I can't stand PHP"),
    # habits
    ("I usually code at night.", H, MID, None, {"habit": "code at night"}, "I usually code at night"),
    ("I always write tests first.", H, MID, None, {}, "I always write tests first"),
    (
        "Every morning I go for a run.",
        H,
        MID,
        None,
        {"habit": "go for a run"},
        "Every morning I go for a run",
    ),
    # decisions
    (
        "We decided to use PostgreSQL instead of MySQL because we need JSON queries.",
        D,
        HIGH,
        None,
        {"choice": "PostgreSQL", "rejected": ["MySQL"], "reason": "we need JSON queries"},
        "We decided to use PostgreSQL instead of MySQL because we need JSON queries",
    ),
    (
        "We chose React over Vue.",
        D,
        HIGH,
        None,
        {"choice": "React", "rejected": ["Vue"]},
        "We chose React over Vue",
    ),
    ("We're going with Kubernetes.", D, HIGH, None, {"choice": "Kubernetes"}, "We're going with Kubernetes"),
    ("Let's go with SQLite.", D, HIGH, None, {"choice": "SQLite"}, "Let's go with SQLite"),
    (
        "We decided not to use MongoDB.",
        D,
        HIGH,
        None,
        {"choice": None, "rejected": ["MongoDB"]},
        "We decided not to use MongoDB",
    ),
    # constraints
    (
        "The API must be backward compatible.",
        C,
        HIGH,
        None,
        {"modality": "must"},
        "The API must be backward compatible",
    ),
    ("The app has to run offline.", C, HIGH, None, {"modality": "must"}, "The app has to run offline"),
    (
        "It needs to support Chinese and English.",
        C,
        HIGH,
        None,
        {},
        "It needs to support Chinese and English",
    ),
    ("I cannot eat peanuts.", C, HIGH, None, {"modality": "must_not"}, "I cannot eat peanuts"),
    ("I can't work on weekends.", C, HIGH, None, {"modality": "must_not"}, "I can't work on weekends"),
    ("Never use global variables.", C, HIGH, None, {"modality": "must_not"}, "Never use global variables"),
    ("FYI I'm allergic to shellfish.", C, HIGH, "allergy:shellfish", {}, "I'm allergic to shellfish"),
    # skills
    (
        "I'm experienced with Kubernetes.",
        S,
        MID,
        "skill:kubernetes",
        {"skill": "Kubernetes"},
        "I'm experienced with Kubernetes",
    ),
    ("I know SQL really well.", S, MID, "skill:sql", {"skill": "SQL"}, "I know SQL really well"),
    ("I'm proficient in Rust.", S, MID, "skill:rust", {"skill": "Rust"}, "I'm proficient in Rust"),
    ("I'm good at public speaking.", S, MID, "skill:public speaking", {}, "I'm good at public speaking"),
    (
        "I've been using Python for 10 years.",
        S,
        MID,
        "skill:python",
        {},
        "I've been using Python for 10 years",
    ),
    ("I have 5 years of experience with Go.", S, MID, "skill:go", {}, "I have 5 years of experience with Go"),
    (
        "Going with Tailwind instead of Bootstrap.",
        D,
        HIGH,
        None,
        {"choice": "Tailwind", "rejected": ["Bootstrap"]},
        "Going with Tailwind instead of Bootstrap",
    ),
    (
        "From now on, don't use emojis.",
        C,
        HIGH,
        None,
        {"modality": "must_not"},
        "From now on, don't use emojis",
    ),
    (
        "Please always reply in Chinese.",
        C,
        HIGH,
        None,
        {"modality": "must"},
        "Please always reply in Chinese",
    ),
    ("Note to self: buy milk", F, REMEMBER, None, {}, "buy milk"),
    ("The team must use Python 3.11.", C, HIGH, None, {"modality": "must"}, "The team must use Python 3.11"),
]


@pytest.mark.parametrize(("text", "mtype", "band", "key", "sub", "content"), EN_CASES)
def test_english_positive(
    text: str,
    mtype: MemoryType,
    band: tuple[float, float],
    key: str | None,
    sub: dict[str, Any],
    content: str,
) -> None:
    item = only(text)
    check(item, mtype, band, key, sub)
    assert item.content == content
    assert item.language == "en"
    assert item.turn_index == 0


def test_case_counts() -> None:
    assert len(ZH_CASES) >= 25
    assert len(EN_CASES) >= 25
    for cases in (ZH_CASES, EN_CASES):
        assert {c[1] for c in cases} >= {F, P, H, D, C, S}


# -- code-switching ----------------------------------------------------------------------------------


def test_code_switched_decision() -> None:
    item = only("我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React")
    assert item.memory_type is D
    assert item.confidence == pytest.approx(0.9)
    assert item.structured is not None
    assert item.structured["choice"] == "Next.js"
    assert item.structured["rejected"] == ["Remix"]
    assert "React" in item.structured["reason"]
    assert item.language == "zh"
    assert item.reasons == ("rule:decision-zh",)


def test_code_switched_preference_keeps_words() -> None:
    item = only("我更喜欢 TypeScript，而不是 JavaScript。")
    assert item.memory_type is P
    assert item.structured is not None
    assert item.structured["object"] == "TypeScript"
    assert item.structured["over"] == ["JavaScript"]
    assert item.language == "zh"


# -- hedges ------------------------------------------------------------------------------------------

HEDGED = [
    ("我好像喜欢 Python", P),
    ("我可能是一名设计师", F),
    ("我大概每天喝三杯咖啡", H),
    ("我不太确定，我应该是在阿里工作", F),
    ("也许我更喜欢 Vim", P),
    ("说不定我们决定用 Go", D),
    ("I think maybe I like Rust.", P),
    ("I guess I prefer coffee.", P),
    ("I probably live in Paris.", F),
    ("I'm not sure, but I think I work at Acme.", F),
    ("Maybe I prefer light mode.", P),
    ("I might be a morning person.", F),
]


@pytest.mark.parametrize(("text", "mtype"), HEDGED)
def test_hedged_statements_score_low(text: str, mtype: MemoryType) -> None:
    items = extract(text)
    assert items, text
    assert items[-1].memory_type is mtype
    for item in items:
        assert item.confidence < 0.7
        assert 0.45 <= item.confidence <= 0.55
        assert item.confidence == CONFIDENCE_HEDGED
        assert "hedged" in item.reasons


def test_hedged_preference_is_still_a_preference() -> None:
    item = only("我好像喜欢 Python")
    assert item.memory_type is P
    assert item.confidence < 0.7
    assert item.structured == {"polarity": "like", "object": "Python"}
    assert item.content == "我好像喜欢 Python"  # the user's own words, hedge included


def test_hedged_remember_request() -> None:
    item = only("记住，我可能下个月搬去深圳")
    assert item.confidence < 0.7


# -- negatives ---------------------------------------------------------------------------------------

NEGATIVES = [
    # questions
    "我喜欢什么？",
    "我喜欢什么",
    "我住在哪里",
    "我们决定用什么数据库？",
    "你喜欢 Python 吗",
    "Do I like Python?",
    "what did we decide?",
    "What did we decide",
    "Where do I live?",
    "I like Python, right?",
    "Is it required that the API must be versioned?",
    # temporary states and fillers
    "我是说你理解错了",
    "我是不是忘了什么",
    "我今天好累",
    "我今天不能来开会",
    "I am going to the store.",
    "I'm going to refactor this later.",
    "I'm tired.",
    "I'm busy right now.",
    "I'm sorry.",
    "I'm not sure.",
    "I'm a bit tired.",
    "I have to go now.",
    "I can't believe it.",
    "I can't make it today.",
    "I like it.",
    "我喜欢这个",
    "我爱死这个功能了",
    "我爱你",
    "I love you.",
    "I'd like a coffee.",
    "I'd like to know more.",
    "You must be kidding.",
    "Must be nice.",
    "我住院了",
    "我懂了",
    "我决定明天去北京",
    "他喜欢Python",
    "记住了",
    "你记住了吗？",
    "Remember me?",
    "I'm from the marketing team.",
    "I can't figure out why this fails.",
    "I cannot reproduce it.",
    "This must be a bug.",
    "It must have been the cache.",
    "You need to use async here.",
    "这个函数不能正常工作",
    "我必须说这个设计很棒",
    "我一定要试试",
    "I hate to say it but it's broken.",
    "I'd rather not.",
    "I remember when we met.",
    # small talk and errors
    "thanks!",
    "你好，谢谢",
    "哈哈好的",
    "ok cool",
    "Traceback (most recent call last):",
    "Error: connection refused",
    "",
    "   ",
    # statements with nothing to keep
    "Maybe we should use Go.",
    "The weather is nice.",
    "今天天气不错",
    "我在家工作",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_negatives_extract_nothing(text: str) -> None:
    assert extract(text) == []


def test_negative_count() -> None:
    assert len(NEGATIVES) >= 20


@pytest.mark.parametrize(
    "text",
    ["我喜欢 Python", "I live in Berlin.", "我们决定用 Go", "Remember that I'm allergic to nuts."],
)
def test_assistant_and_tool_turns_ignored(text: str) -> None:
    for role in ("assistant", "tool", "system"):
        assert extract(text, role=role) == []


def test_only_user_turns_are_read_in_a_conversation() -> None:
    turns = [
        Turn("user", "我叫李雷。"),
        Turn("assistant", "你好李雷！你喜欢 Java 吗？我喜欢 Rust。"),
        Turn("user", "我不喜欢 Java。"),
        Turn("assistant", "We decided to use MySQL."),
    ]
    items = RuleExtractor().extract(turns)
    assert [(i.turn_index, i.memory_type, i.content) for i in items] == [
        (0, F, "我叫李雷"),
        (2, P, "我不喜欢 Java"),
    ]


# -- summaries ---------------------------------------------------------------------------------------


def test_summary_system_turns_are_read() -> None:
    turns = [
        Turn("system", "Summary: The user prefers dark mode. The user lives in Oslo."),
        Turn("system", "摘要：用户喜欢喝绿茶。"),
        Turn("system", "[summary] We decided to use Redis because it is fast."),
        Turn("system", "You are a helpful assistant. I like Python."),
    ]
    items = RuleExtractor().extract(turns)
    got = [(i.turn_index, i.memory_type, i.key) for i in items]
    assert got == [
        (0, P, "preference:dark mode"),
        (0, F, "location"),
        (1, P, "preference:喝绿茶"),
        (2, D, None),
    ]
    assert items[0].content == "The user prefers dark mode"


# -- multi-sentence turns, clauses, de-duplication ---------------------------------------------------


def test_multi_sentence_chinese_turn() -> None:
    items = extract("我叫李雷，我是一名医生，我喜欢打篮球。我们决定用Go！我对花生过敏；我不能吃花生")
    got = [(i.memory_type, i.key, i.content) for i in items]
    assert got == [
        (F, "name", "我叫李雷"),
        (F, "profession", "我是一名医生"),
        (P, "preference:打篮球", "我喜欢打篮球"),
        (D, None, "我们决定用Go"),
        (C, "allergy:花生", "我对花生过敏"),
        (C, None, "我不能吃花生"),
    ]
    assert all(i.language == "zh" for i in items)


def test_a_dropped_subject_is_the_speaker() -> None:
    # Chinese drops the subject as grammar; notes in English do too. The content stays as said.
    got = [
        (i.memory_type, i.key, i.content)
        for t in (
            "对花生过敏。",
            "住在浦东张江，骑车到公司十分钟。",
            "现在在腾讯上班。",
            "最近搬到杭州了。",
            "Allergic to peanuts.",
            "Live in Berlin.",
            "Moved to Lisbon last year.",
        )
        for i in extract(t)
    ]
    assert got == [
        (C, "allergy:花生", "对花生过敏"),
        (F, "location", "住在浦东张江，骑车到公司十分钟"),
        (F, "employer", "现在在腾讯上班"),
        (F, "location", "最近搬到杭州了"),
        (C, "allergy:peanuts", "Allergic to peanuts"),
        (F, "location", "Live in Berlin"),
        (F, "location", "Moved to Lisbon last year"),
    ]
    # A description, a command or a clause of another kind opens the same way: nothing.
    for text in ("住在附近的朋友来了。", "在家工作的时候效率很低。", "Live in the moment.", "work for free"):
        assert extract(text) == [], text


def test_a_household_that_moves_or_lives_somewhere_gives_the_users_location() -> None:
    # A family's home is the speaker's; the words as said stay the content.
    got = [
        (i.key, i.structured["value"] if i.structured else None, i.content)
        for t in (
            "全家搬到了 Tampines 的组屋，为了离豆豆的幼儿园近一点。",
            "我们一家三口住在杭州。",
            "我和老婆搬到了七宝。",
            "We live in Porto.",
            "Our family moved to Austin in 2020.",
            "The family has moved to Oslo.",
        )
        for i in extract(t)
    ]
    assert got == [
        ("location", "Tampines 的组屋", "全家搬到了 Tampines 的组屋，为了离豆豆的幼儿园近一点"),
        ("location", "杭州", "我们一家三口住在杭州"),
        ("location", "七宝", "我和老婆搬到了七宝"),
        ("location", "Porto", "We live in Porto"),
        ("location", "Austin", "Our family moved to Austin in 2020"),
        ("location", "Oslo", "The family has moved to Oslo"),
    ]
    # A bare "we" that moved may be a team or a stack: no home in it.
    for text in (
        "我们搬到了新办公室。",
        "我们搬到新家了。",
        "我们搬到阿里云了。",
        "我们下个月要搬到深圳。",
        "We moved to Kubernetes.",
        "We moved to Postgres last year.",
        "We moved to Monday standups.",
        "We finally moved to AWS.",
        "Good news, we moved to the Berlin office.",
    ):
        assert all(i.key != "location" for i in extract(text)), text
    # A bare "we" that moved to a named place is a household too, in any clause.
    got = [
        (i.key, i.structured["value"] if i.structured else None)
        for t in (
            "Big news, we moved to Denver last week.",
            "We just moved to Chengdu.",
            "We've relocated to Lisbon, so the time zone is different.",
            "我们上个月搬到成都了。",
            "我们已经搬到杭州了，房子离西湖很近。",
        )
        for i in extract(t)
        if i.key
    ]
    assert got == [
        ("location", "Denver"),
        ("location", "Chengdu"),
        ("location", "Lisbon"),
        ("location", "成都"),
        ("location", "杭州"),
    ]


@pytest.mark.parametrize(
    ("text", "employer"),
    [
        ("I started a new job at Stripe last month.", "Stripe"),
        ("I got a job at Shopify as a designer.", "Shopify"),
        ("I landed a new gig at Netflix!", "Netflix"),
        ("我已经不在腾讯了，跳槽去了字节。", "字节"),
    ],
)
def test_a_new_job_names_the_employer(text: str, employer: str) -> None:
    assert [(i.key, i.structured["value"]) for i in extract(text) if i.key and i.structured] == [
        ("employer", employer)
    ]


def test_a_new_job_somewhere_unnamed_or_someone_elses_gives_no_employer() -> None:
    for text in ("I started a new job at a startup.", "他跳槽去了阿里。"):
        assert all(i.key != "employer" for i in extract(text)), text


@pytest.mark.parametrize(
    ("text", "only"),
    [
        ("how long does it usually take for them to chill", True),
        ("牛腩要炖多久啊", True),
        ("推荐几家火锅吧 要本地人去的那种", True),
        ("and seat covers for dog hair, any recommendation?", True),
        ("Can you give me a 12 week half marathon plan?", True),
        ("好 加个表格吧", True),  # an instruction to the assistant
        ("换个说法吧！", True),
        ("我们去吃个火锅吧", False),  # a plan of ours
        ("国庆就在上海待着吧", False),
        # a statement beside the question: the person said that
        ("我儿子8岁，二年级，数学老是粗心，有啥办法吗", False),
        ("女朋友小雨生日快到了 送啥好啊 预算两千以内", False),
        ("my Civic's check engine light came on, is it safe to drive to the shop?", False),
        ("hey can you help me plan a warm-up? I teach science in Portland", False),
        ("Race is in October", False),
        ("got it, thanks", False),
        # Other languages: what comes before a Spanish "¿", a clause that says "I", a sentence
        # an emoji ends.
        ("Ya tengo el B2 de euskera, ¿alguna idea para celebrarlo?", False),
        ("¿Alguna idea para celebrarlo?", True),
        ("Autre question : je suis kiné en libéral, je peux poser combien de jours ?", False),
        ("Autre question : combien de jours pour le voyage, tu crois ?", True),
        (
            "남자친구랑 결혼식 날짜 잡았어요, 10월 18일이에요 💍 모바일 청첩장 문구 좀 같이 고민해 줄래요?",
            False,
        ),
    ],
)
def test_a_turn_that_only_asks(text: str, only: bool) -> None:
    from jiyi.write.extract_rules import asks_only

    assert asks_only(text) is only


@pytest.mark.parametrize(
    ("text", "nothing"),
    [
        ("yes pls", True),
        ("got it, thanks", True),
        ("牛腩要炖多久啊", True),  # it only asks
        ("it's Slack. ugh", False),  # a name
        ("ok 3 more", False),  # a number
        ("I've done Blackbird. something newer?", False),
        ("我那台最近掉得有点多", False),
        # Kana count too: a Japanese sentence with few Han characters still states something.
        ("ドラムって全身使うから、終わったあと肩バキバキやねん", False),
        ("やってみる〜", True),
    ],
)
def test_a_turn_that_states_nothing(text: str, nothing: bool) -> None:
    from jiyi.write.extract_rules import states_nothing

    assert states_nothing(text) is nothing


def test_where_one_grew_up_and_a_restated_home_or_employer_in_chinese() -> None:
    cases = {
        "我在大连长大。": ("hometown", "大连"),
        "我从小在成都长大。": ("hometown", "成都"),
        "更正，我是在青岛长大的，不是大连。": ("hometown", "青岛"),
        "我还在阿里巴巴工作。": ("employer", "阿里巴巴"),
        "我还是住在北京。": ("location", "北京"),
    }
    for text, (key, value) in cases.items():
        (item,) = extract(text)
        assert (item.key, item.structured) == (key, {"key": key, "value": value}), text
    # where one was born is not a place to grow up in; a clause that goes on is left alone
    for text in ("我在医院出生。", "我在家长大的时候很快乐。"):
        assert all(i.key != "hometown" for i in extract(text)), text


def test_a_moves_reason_or_time_is_not_part_of_the_place() -> None:
    cases = {
        "我搬到了 Tampines 的组屋，为了离幼儿园近一点。": "Tampines 的组屋",
        "我搬到了浦东，上班要近一些。": "浦东",  # 要 in the reason is no plan
        "I moved to Tampines to be closer to the kindergarten.": "Tampines",
        "I moved to Austin in March for the job.": "Austin",
        "I moved to Hong Kong two years ago.": "Hong Kong",
        "I live in New York with my wife.": "New York",
        "I live in Stoke-on-Trent.": "Stoke-on-Trent",
    }
    for text, place in cases.items():
        (item,) = extract(text)
        assert (item.key, item.structured) == ("location", {"key": "location", "value": place}), text
    assert extract("我下个月要搬去深圳。") == []  # a plan


def test_multi_sentence_english_turn() -> None:
    items = extract(
        "I'm Alice. I live in Paris and I work at Airbus. I like cheese, but I hate olives.\nThanks!"
    )
    got = [(i.memory_type, i.key) for i in items]
    assert got == [
        (F, "name"),
        (F, "location"),
        (F, "employer"),
        (P, "preference:cheese"),
        (P, "preference:olives"),
    ]
    assert items[-1].structured == {"polarity": "dislike", "object": "olives"}
    # source_text is the whole turn, as with the LLM extractor: reconciliation reads its other clauses.
    assert all(i.source_text.startswith("I'm Alice. I live in Paris") for i in items)


def test_question_sentence_does_not_block_statements() -> None:
    items = extract("我喜欢 Go。你喜欢什么？")
    assert [i.content for i in items] == ["我喜欢 Go"]
    items = extract("What editor do you use? I use Vim every day. I prefer Vim.")
    assert [i.memory_type for i in items] == [P]


def test_dots_inside_tokens_do_not_split() -> None:
    item = only("We chose Next.js 14.2 over Remix.")
    assert item.structured is not None
    assert item.structured["choice"] == "Next.js 14.2"


def test_reason_with_and_stays_in_decision() -> None:
    item = only("We chose Go because it's fast and we know it well.")
    assert item.structured is not None
    assert item.structured["reason"] == "it's fast and we know it well"


def test_deduplicated_within_a_call() -> None:
    items = RuleExtractor().extract(
        [Turn("user", "我喜欢 Python。我喜欢 Python！"), Turn("user", "我喜欢 Python")]
    )
    assert len(items) == 1
    assert items[0].turn_index == 0


def test_not_deduplicated_across_calls() -> None:
    ex = RuleExtractor()
    assert len(ex.extract([Turn("user", "I like tea.")])) == 1
    assert len(ex.extract([Turn("user", "I like tea.")])) == 1


def test_trailing_particles_and_wrappers_trimmed() -> None:
    assert only("帮我记住：我喜欢喝茶哦！").content == "我喜欢喝茶"
    assert only("remember that I live in Rome!!").content == "I live in Rome"
    assert only("我们最后定了 Vue 吧。").structured == {"choice": "Vue", "rejected": [], "reason": None}


def test_switch_from_to_decision() -> None:
    item = only("We decided to switch from Jenkins to GitHub Actions.")
    assert item.structured == {"choice": "GitHub Actions", "rejected": ["Jenkins"], "reason": None}


def test_importance_and_reasons() -> None:
    item = only("记住我们周五发版")
    assert item.reasons == ("rule:remember-zh",)
    assert item.memory_type is F
    assert only("记住我对青霉素过敏").reasons == ("rule:remember-zh", "rule:constraint-zh")
    assert 0.0 <= item.importance <= 1.0
    dec = only("We chose Postgres.")
    assert dec.reasons == ("rule:decision-en",)


def test_implements_extractor_protocol() -> None:
    ex: Extractor = RuleExtractor()
    assert ex.extract([]) == []


def test_dict_like_turn_objects() -> None:
    class T:
        def __init__(self, role: str, content: str) -> None:
            self.role = role
            self.content = content

    items = RuleExtractor().extract([T("User", "I prefer Emacs.")])
    assert [i.key for i in items] == ["preference:emacs"]


def test_nouns_that_are_not_professions_get_no_key() -> None:
    for text in ["I am an early riser.", "I'm a vegetarian.", "我是一个很内向的人"]:
        item = only(text)
        assert item.memory_type is F
        assert item.key is None, text


def test_pathological_input_is_fast() -> None:
    import time

    texts = [
        "I " + " " * 20000 + "like",
        "我们决定用" + "，" * 5000 + "X",
        "比起" + "， " * 5000 + "X",
        "我喜欢" + "吧 " * 5000,
        "I know " + "x " * 5000 + "wel",
        "a." * 20000,
    ]
    start = time.perf_counter()
    for text in texts:
        RuleExtractor().extract([Turn("user", text)])
    # A guard against backtracking that grows with the input (minutes), not a speed test:
    # ~1 s alone here, 3.1 s once with the whole suite on both cores.
    assert time.perf_counter() - start < 15.0


def test_chinese_clauses_without_repeated_subject() -> None:
    items = extract("我叫张伟，在字节跳动工作，平时主要写 Go。")
    assert [(i.memory_type, i.key, i.content) for i in items] == [
        (F, "name", "我叫张伟"),
        (F, "employer", "在字节跳动工作"),  # the user's words: the dropped subject is not added back
        (H, None, "平时主要写 Go"),
    ]
    items = extract("我是李雷，喜欢足球，不喜欢篮球，熟悉 Go")
    assert [(i.memory_type, i.key) for i in items] == [
        (F, "name"),
        (P, "preference:足球"),
        (P, "preference:篮球"),
        (S, "skill:go"),
    ]
    # Without a first-person subject, a bare verb phrase is not about the user.
    assert extract("他叫李雷，喜欢足球") == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I used to live in London, now I live in Berlin.", "Berlin"),
        ("I just moved to Lisbon.", "Lisbon"),
        ("我不住在北京了，我搬到上海了", "上海"),
    ],
)
def test_current_location(text: str, value: str) -> None:
    items = [i for i in extract(text) if i.key == "location"]
    assert [i.structured["value"] for i in items if i.structured] == [value]


def test_planned_move_is_not_a_location() -> None:
    assert extract("我下个月要搬去深圳") == []


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("对了，我们组决定用 gRPC 而不是 REST，因为性能更好。", "gRPC"),
        ("我们团队最终选了 ClickHouse，原因是查询快。", "ClickHouse"),
        ("My team decided to use Terraform.", "Terraform"),
    ],
)
def test_team_decisions(text: str, choice: str) -> None:
    item = only(text)
    assert item.memory_type is D
    assert item.structured is not None
    assert item.structured["choice"] == choice


def test_not_fully_sure_is_a_hedge() -> None:
    item = only("I think I prefer Go these days, though I'm not 100% sure.")
    assert item.memory_type is P
    assert item.confidence < 0.7


@pytest.mark.parametrize(
    ("text", "obj"),
    [
        ("I no longer prefer tabs.", "tabs"),
        ("I don't like Java anymore.", "Java"),
        ("I don't use Vim anymore.", "Vim"),
        ("我不再喜欢喝美式咖啡了，现在只喝茶", "喝美式咖啡"),
        ("我再也不用 Windows 了", "Windows"),
    ],
)
def test_ended_preferences_are_keyless_dislikes(text: str, obj: str) -> None:
    item = only(text)
    assert item.memory_type is P
    assert item.structured == {"polarity": "dislike", "object": obj, "change": "no_longer"}
    assert item.key is None  # reconciliation supersedes the old "like" by polarity, whatever its confidence


def test_ended_preference_replaced_in_the_same_turn() -> None:
    text = "I no longer prefer tabs; I prefer spaces for indentation now."
    item = only(text)
    assert item.content == "I prefer spaces for indentation now"
    assert item.structured == {"polarity": "like", "object": "spaces for indentation"}
    assert item.source_text == text  # the ended preference stays visible to reconciliation


def test_plain_dislike_keeps_its_key() -> None:
    assert only("我不喜欢香菜").key == "preference:香菜"


def test_language_follows_the_content_in_mixed_turns() -> None:
    items = extract("I like tea. 我也喜欢咖啡。")
    assert [(i.language, i.content) for i in items] == [("en", "I like tea"), ("zh", "我也喜欢咖啡")]


# ------------------------------------------------------------------ preferred names and projects


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Call me Dave", "Dave"),
        ("You can call me Dave.", "Dave"),
        ("Just call me Dave please", "Dave"),
        ("I go by Dave", "Dave"),
        ("My English name is Dave", "Dave"),
        ("My nickname is Bear", "Bear"),
        ("叫我小王就行", "小王"),
        ("你可以叫我Dave", "Dave"),
        ("大家都叫我老王", "老王"),
        ("我的英文名是Dave", "Dave"),
        ("我的昵称是小熊", "小熊"),
    ],
)
def test_a_preferred_name_is_extracted(text: str, name: str) -> None:
    (item,) = extract(text)
    assert item.memory_type is MemoryType.FACT and item.key == "preferred_name"
    assert item.structured == {"key": "preferred_name", "value": name}


def test_a_name_and_a_preferred_name_in_one_turn_are_two_facts() -> None:
    items = extract("Hi, I'm Zhang Wei, call me Dave")
    assert [(i.key, (i.structured or {}).get("value")) for i in items] == [
        ("name", "Zhang Wei"),
        ("preferred_name", "Dave"),
    ]
    zh = extract("我叫张伟，叫我小张就行")
    assert [(i.key, (i.structured or {}).get("value")) for i in zh] == [
        ("name", "张伟"),
        ("preferred_name", "小张"),
    ]
    assert only("My name is Alice").key == "name"  # the name itself is not a preferred name


@pytest.mark.parametrize(
    ("text", "part", "value"),
    [
        ("I'm building a Rust CLI for log search", "project", "a Rust CLI for log search"),
        ("We're building a SaaS for dentists", "project", "a SaaS for dentists"),
        ("Our goal this quarter is to ship the billing API", "goal", "ship the billing API"),
        (
            "The goal of this project is to replace the old billing system",
            "goal",
            "replace the old billing system",
        ),
        ("我在做一个记账小程序", "project", "一个记账小程序"),
        ("我们团队在开发一个内部审批系统", "project", "一个内部审批系统"),
        ("这个项目的目标是下个月上线", "goal", "下个月上线"),
    ],
)
def test_what_is_being_built_and_its_goal_are_project_context(text: str, part: str, value: str) -> None:
    item = only(text)
    assert item.memory_type is MemoryType.CONTEXT and item.content == text.rstrip(".")
    assert item.structured == {part: value} and item.confidence >= 0.7


@pytest.mark.parametrize(
    "text",
    [
        "Call me when you're done",
        "Call me maybe",
        "You can call me anytime",
        "Call me at 5pm",
        "Please call me back tomorrow",
        "叫我一声",
        "叫我起床",
        "叫我吃饭",
        "what are you building?",
        "What's your goal?",
        "Our goal is simple",
        "I'm building a house",
        "I'm writing a letter",
        "I'm working on the API right now",
        "我在做饭",
        "你在做什么项目？",
    ],
)
def test_near_misses_are_no_name_and_no_project(text: str) -> None:
    assert extract(text) == []


def test_dont_call_me_is_a_rule_not_a_name() -> None:
    item = only("Don't call me before 9")
    assert item.memory_type is MemoryType.CONSTRAINT and item.key is None


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("I use VS Code.", "VS Code"),
        ("We use Jira for issue tracking.", "Jira"),
        ("I write code in VS Code.", "VS Code"),
        ("I track my expenses in a Google Sheet.", "Google Sheet"),
        ("我用Excel记账。", "Excel"),
        ("我写代码用VS Code。", "VS Code"),
        ("我们前端用的是React。", "React"),
        ("我用MacBook Pro。", "MacBook Pro"),
        ("我现在用Cursor。", "Cursor"),
        ("我现在用 Cursor 写代码。", "Cursor"),  # a space around a Latin name
        ("我们用 Slack 沟通。", "Slack"),
    ],
)
def test_the_tools_someone_uses_are_facts(text: str, tool: str) -> None:
    item = only(text)
    assert item.memory_type is F and item.structured == {"value": tool}


@pytest.mark.parametrize(
    "text",
    [
        "I use it every day.",
        "We use the park for picnics.",
        "I used Excel yesterday.",
        "我今天用Excel做了报表。",
        "我用过。",
    ],
)
def test_no_tool_without_a_named_tool_in_the_present(text: str) -> None:
    assert extract(text) == []


@pytest.mark.parametrize(
    ("text", "structured"),
    [
        ("I joined Stripe last month, still doing backend work.", {"key": "employer", "value": "Stripe"}),
        ("I started working at Google in 2020.", {"key": "employer", "value": "Google"}),
        ("Home for me is Lyon.", {"key": "location", "value": "Lyon"}),
        ("上个月我跳槽去了字节。", {"key": "employer", "value": "字节"}),
        # a place or an organisation, which the words do not tell apart: no key
        ("我在美团做后端开发。", {"value": "我在美团做后端开发"}),
        ("我家就在青岛。", {"value": "我家就在青岛"}),
    ],
)
def test_more_ways_to_say_where_one_works_or_lives(text: str, structured: dict[str, str]) -> None:
    item = only(text)
    assert item.memory_type is F and item.structured == structured


@pytest.mark.parametrize("text", ["I joined a gym.", "我在家做饭。", "我下个月跳槽去腾讯。"])
def test_no_employer_from_a_club_a_home_or_a_plan(text: str) -> None:
    assert extract(text) == []


@pytest.mark.parametrize(
    ("text", "content", "key", "value"),
    [
        # an announcement before the news is not part of it
        ("跟你说个消息：我上个月搬到上海了。", "我上个月搬到上海了", "location", "上海"),
        ("好消息！我在字节工作了。", "我在字节工作了", "employer", "字节"),
        ("Good news: I moved to Berlin last month.", "I moved to Berlin last month", "location", "Berlin"),
        ("Guess what, I moved to Berlin.", "I moved to Berlin", "location", "Berlin"),
        # Chinese as spoken: the place before the verb
        ("我在北京租房住。", "我在北京租房住", "location", "北京"),
        ("我现在在杭州住。", "我现在在杭州住", "location", "杭州"),
        # a role one has one of at a time, without 的
        ("我老板是张总。", "我老板是张总", "my:老板", "张总"),
        ("我导师是赵姐。", "我导师是赵姐", "my:导师", "赵姐"),
        # a time before the subject, also after a clause about someone else
        ("现在我住在上海。", "现在我住在上海", "location", "上海"),
        ("张总调去深圳了，现在我老板是李总。", "现在我老板是李总", "my:老板", "李总"),
    ],
)
def test_keyed_facts_as_people_say_them(text: str, content: str, key: str, value: str) -> None:
    item = only(text)
    assert (item.content, item.key, item.structured) == (content, key, {"key": key, "value": value})


@pytest.mark.parametrize(
    "text", ["我在家住。", "我在公司住。", "我在宿舍住。", "我领导是个好人。", "我老板是很严格的人。"]
)
def test_where_one_stays_or_what_someone_is_like_is_no_keyed_fact(text: str) -> None:
    assert all(e.key not in ("location", "my:领导", "my:老板") for e in extract(text))


@pytest.mark.parametrize(
    "text",
    [
        "17時ね、がんばる",
        "あと、夜8時には寝たいんだけど、夕飯って何時がいいかな",
        "週3で通ってて、今体重68キロ",
    ],
)
def test_japanese_is_not_read_by_the_chinese_rules(text: str) -> None:
    # Kana says Japanese: its Han characters are not Chinese statements ("17時ね" was a fact).
    assert RuleExtractor().extract([Turn("user", text)]) == []
    assert RuleExtractor().extract([Turn("user", "我住在大阪")])  # Chinese still is
