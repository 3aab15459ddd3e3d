"""LLMExtractor end to end against the scripted OpenAI-protocol server, plus its checks in isolation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import ScriptedChatModel, forbid_network_models, run_chat
from jiyi.llm.openai import OpenAIChatModel
from jiyi.model import MemoryType
from jiyi.write.extract import Extracted, Extractor, Turn
from jiyi.write.extract_llm import (
    EXTRACTION_SYSTEM_PROMPT,
    LLMExtractor,
    build_extraction_messages,
    format_turns,
    language_instruction,
    language_of,
    number_turns,
    read_extraction,
)
from tests.openai_server import ScriptedOpenAIServer

CHAT = "chat/completions"

ZH_TURNS = [
    Turn("user", "你好，我叫李雷，在杭州做后端开发。"),
    Turn("assistant", "你好李雷！你平时用什么语言？也许你喜欢 Java？"),
    Turn("user", "我主要写 Go，不喜欢 Java。\n我对花生过敏。"),
    Turn("assistant", "明白了。"),
    Turn("user", "我们决定用 PostgreSQL 而不是 MySQL，因为需要 JSON 查询。可能下个月去上海出差。"),
]

ZH_ANSWER = {
    "memories": [
        {
            "content": "用户叫李雷",
            "memory_type": "fact",
            "confidence": 0.95,
            "importance": 0.7,
            "key": "name",
            "turn": 0,
        },
        {"content": "用户在杭州做后端开发", "memory_type": "fact", "confidence": 0.9, "turn": 0},
        {"content": "用户主要使用 Go 语言", "memory_type": "preference", "confidence": 0.9, "turn": 2},
        {
            "content": "用户对花生过敏",
            "memory_type": "constraint",
            "confidence": 1.0,
            "importance": 0.9,
            "turn": 2,
        },
        {
            "content": "用户决定用 PostgreSQL 而不是 MySQL，因为需要 JSON 查询",
            "memory_type": "decision",
            "confidence": 0.9,
            "structured": {"choice": "PostgreSQL", "rejected": ["MySQL"], "reason": "需要 JSON 查询"},
            "turn": 4,
        },
        {"content": "用户可能下个月去上海出差", "memory_type": "event", "confidence": 0.5, "turn": 4},
    ]
}

VALID = json.dumps(
    {"memories": [{"content": "User likes tea", "memory_type": "preference", "confidence": 0.9, "turn": 0}]}
)
EN_TURNS = [Turn("user", "I like tea."), Turn("assistant", "Noted!")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JIYI_LLM_BASE_URL", "OPENAI_BASE_URL", "JIYI_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


@pytest.fixture
def model(server: ScriptedOpenAIServer) -> Iterator[OpenAIChatModel]:
    with OpenAIChatModel(
        "gpt-test", base_url=server.base_url, api_key="sk-x", backoff=0.01, max_wait=0.05, timeout=5.0
    ) as chat:
        yield chat


def _sent_messages(server: ScriptedOpenAIServer, index: int = 0) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = server.requests_to(CHAT)[index].json["messages"]
    return messages


# -- end to end over HTTP --------------------------------------------------------------------------


def test_chinese_conversation_gives_chinese_memories(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script_chat(json.dumps(ZH_ANSWER, ensure_ascii=False))
    extractor = LLMExtractor(model)
    items = extractor.extract(ZH_TURNS)
    assert [i.content for i in items] == [m["content"] for m in ZH_ANSWER["memories"]]
    assert all(isinstance(i, Extracted) and i.language == "zh" for i in items)
    assert [i.memory_type for i in items] == [
        MemoryType.FACT,
        MemoryType.FACT,
        MemoryType.PREFERENCE,
        MemoryType.CONSTRAINT,
        MemoryType.DECISION,
        MemoryType.EVENT,
    ]
    assert [i.confidence for i in items] == [0.95, 0.9, 0.9, 1.0, 0.9, 0.5]
    name, _, _, allergy, decision, trip = items
    assert name.key == "name" and name.importance == 0.7 and name.turn_index == 0
    assert name.source_text == ZH_TURNS[0].content
    assert allergy.turn_index == 2 and allergy.importance == 0.9
    assert decision.structured == {"choice": "PostgreSQL", "rejected": ["MySQL"], "reason": "需要 JSON 查询"}
    assert trip.confidence < 0.7  # hedged: "可能"
    assert name.reasons[0] == "extracted by openai:gpt-test"
    (request,) = server.requests_to(CHAT)
    assert request.json["response_format"] == {"type": "json_object"}
    assert request.json["temperature"] == 0.0


def test_prompt_numbers_turns_and_states_the_rules(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script_chat('{"memories": []}')
    LLMExtractor(model).extract([*ZH_TURNS, Turn("system", "internal note"), Turn("tool", "{}")])
    system, user = _sent_messages(server)
    assert system == {"role": "system", "content": EXTRACTION_SYSTEM_PROMPT}
    assert "Only record what the USER explicitly stated" in system["content"]
    assert (
        "not the assistant" in system["content"]
        or "Never record what the assistant said" in system["content"]
    )
    assert "confidence below 0.7" in system["content"]
    assert "Chinese stays Chinese" in system["content"]
    assert "decision keeps its reason" in system["content"]
    for name in MemoryType:
        assert f"- {name.value}:" in system["content"]
    prompt = user["content"]
    assert "[0] user: 你好，我叫李雷，在杭州做后端开发。" in prompt
    assert "[1] assistant: 你好李雷！" in prompt
    assert "[2] user: 我主要写 Go，不喜欢 Java。\n    我对花生过敏。" in prompt  # continuation indented
    assert "[4] user: 我们决定用 PostgreSQL" in prompt
    assert "internal note" not in prompt and "[5]" not in prompt and "[6]" not in prompt
    assert "write every memory in Chinese" in prompt


def test_fenced_json_with_trailing_commas(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script_chat(
        'Here are the memories:\n```json\n{"memories": [\n'
        '  {"content": "User likes tea", "memory_type": "preference", "confidence": 0.9, "turn": 0,},\n'
        "]}\n```"
    )
    result = LLMExtractor(model).run(EN_TURNS)
    assert [(i.content, i.memory_type, i.language) for i in result.items] == [
        ("User likes tea", MemoryType.PREFERENCE, "en")
    ]
    assert result.attempts == 1
    assert any("code fence" in r and "trailing comma" in r for r in result.reasons)
    assert len(server.requests_to(CHAT)) == 1


def test_garbage_then_valid_retries_once(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script_chat("Sure! The user seems to like tea.")
    server.script_chat(VALID)
    result = LLMExtractor(model).run(EN_TURNS)
    assert [i.content for i in result.items] == ["User likes tea"]
    assert result.attempts == 2
    assert result.reasons[0].startswith("attempt 1 unusable: no JSON")
    requests = server.requests_to(CHAT)
    assert len(requests) == 2
    retry = requests[1].json["messages"]
    assert retry[:2] == _sent_messages(server, 0)
    assert retry[2] == {"role": "assistant", "content": "Sure! The user seems to like tea."}
    assert retry[3]["role"] == "user"
    assert "could not be used: no JSON object or list" in retry[3]["content"]


def test_garbage_twice_raises(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script_chat("I cannot do that.")
    server.script_chat("{still: not, json")
    with pytest.raises(LLMError, match="after 2 attempts"):
        LLMExtractor(model).extract(EN_TURNS)
    assert len(server.requests_to(CHAT)) == 2


def test_explicit_empty_list_is_a_valid_result(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script_chat('{"memories": []}')
    result = LLMExtractor(model).run([Turn("user", "谢谢，再见！")])
    assert result.items == ()
    assert result.attempts == 1
    assert result.reasons == ()
    assert len(server.requests_to(CHAT)) == 1


def test_invalid_memory_type_is_dropped_with_a_reason(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    answer = {
        "memories": [
            {"content": "User likes tea", "memory_type": "opinion", "turn": 0},
            {"content": "User prefers green tea", "memory_type": "Preferences", "confidence": 0.8, "turn": 0},
        ]
    }
    server.script_chat(json.dumps(answer))
    result = LLMExtractor(model).run(EN_TURNS)
    assert [(i.content, i.memory_type) for i in result.items] == [
        ("User prefers green tea", MemoryType.PREFERENCE)
    ]
    assert any("unknown memory_type 'opinion'" in r and "User likes tea" in r for r in result.reasons)
    assert "memory_type 'Preferences' read as 'preference'" in result.items[0].reasons
    assert len(server.requests_to(CHAT)) == 1  # a dropped item is not a reason to retry


def test_http_errors_are_not_repaired(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(CHAT, status=401)
    with pytest.raises(LLMError, match="HTTP 401"):
        LLMExtractor(model).extract(EN_TURNS)
    assert len(server.requests_to(CHAT)) == 1


async def test_async_extract(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script_chat(
        "```\n{'memories': [{'content': '用户喜欢喝茶', 'memory_type': 'preference', 'turn': 0}]}\n```"
    )
    items = await LLMExtractor(model).aextract([Turn("user", "我喜欢喝茶")])
    assert [(i.content, i.language, i.confidence) for i in items] == [("用户喜欢喝茶", "zh", 0.7)]
    server.script_chat("nope")
    server.script_chat("still nope")
    with pytest.raises(LLMError):
        await LLMExtractor(model).aextract([Turn("user", "我喜欢喝茶")])
    assert len(server.requests_to(CHAT)) == 3


def test_forbidden_network_model(server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIYI_LLM_BASE_URL", server.base_url)  # were it not forbidden, still local
    extractor = LLMExtractor("openai:gpt-test")
    with forbid_network_models(), pytest.raises(ConfigError):
        extractor.extract(EN_TURNS)
    assert server.requests == []
    extractor.model.close()  # type: ignore[attr-defined]


# -- the checks, with the in-library test double ----------------------------------------------------


def _run(answer: str | list[str], turns: list[Turn] | None = None, **options: Any) -> Any:
    model = ScriptedChatModel([answer] if isinstance(answer, str) else answer)
    return LLMExtractor(model, **options).run(turns or EN_TURNS), model


def test_items_from_assistant_turns_are_dropped() -> None:
    answer = json.dumps(
        {
            "memories": [
                {"content": "用户喜欢 Java", "memory_type": "preference", "turn": 1},
                {"content": "用户不喜欢 Java", "memory_type": "preference", "turn": 2},
            ]
        },
        ensure_ascii=False,
    )
    result, _ = _run(answer, ZH_TURNS)
    assert [i.content for i in result.items] == ["用户不喜欢 Java"]
    assert any("assistant turn [1]" in r for r in result.reasons)


@pytest.mark.parametrize(
    ("raw", "expected", "note"),
    [
        (1.7, 1.0, "read as 1.0"),
        (-0.2, 0.0, "read as 0.0"),
        ("0.85", 0.85, "read as 0.85"),
        ("80%", 0.8, "read as 0.8"),
        (None, 0.7, "no confidence given"),
        ("high", 0.7, "is not a number"),
        (True, 0.7, "is not a number"),
        (0.6, 0.6, None),
    ],
)
def test_confidence_is_read_and_clamped(raw: Any, expected: float, note: str | None) -> None:
    item = {"content": "User likes tea", "memory_type": "preference", "turn": 0}
    if raw is not None:
        item["confidence"] = raw
    result, _ = _run(json.dumps({"memories": [item]}))
    (extracted,) = result.items
    assert extracted.confidence == expected
    notes = " ".join(extracted.reasons)
    if note is None:
        assert "confidence" not in notes
    else:
        assert note in notes


def test_item_fields_are_normalised() -> None:
    answer = {
        "memories": [
            {
                "content": "  User's favourite drink is tea ",
                "type": "fact",
                "importance": 3,
                "key": "Favourite Drink",
                "structured": "tea",
                "turn": "[0]",
            },
            {"content": "user's favourite drink is TEA", "memory_type": "fact", "turn": 0},
            {"content": "User likes tea", "memory_type": "偏好", "key": 5, "turn": 9},
        ]
    }
    result, _ = _run(json.dumps(answer, ensure_ascii=False))
    first, second = result.items
    assert first.content == "User's favourite drink is tea"
    assert (first.importance, first.key, first.structured, first.turn_index) == (
        1.0,
        "favourite_drink",
        None,
        0,
    )
    assert any("structured" in r for r in first.reasons)
    assert any("repeats item 0" in r for r in result.reasons)
    assert second.memory_type is MemoryType.PREFERENCE
    assert second.key is None
    assert second.turn_index == 0  # one user turn: the source is known anyway


def test_unknown_source_turn_with_several_user_turns() -> None:
    answer = {"memories": [{"content": "用户对花生过敏", "memory_type": "constraint", "turn": 42}]}
    result, _ = _run(json.dumps(answer, ensure_ascii=False), ZH_TURNS)
    (item,) = result.items
    assert item.turn_index is None and item.source_text == ""
    assert any("not a user turn" in r for r in item.reasons)


@pytest.mark.parametrize(
    "answer",
    [
        '{"memories": ["User likes tea", "User lives in Berlin"]}',
        '{"memories": [{"memory_type": "fact"}, {"content": " ", "memory_type": "fact"}]}',
        '{"memories": [{"content": "User likes tea"}]}',
        '{"answer": "nothing", "confidence": 1}',
        '{"memories": [{"content": "User likes tea", "memory_type": "pref',
        "null",
    ],
)
def test_unusable_answers_are_retried_then_raise(answer: str) -> None:
    model = ScriptedChatModel([answer, answer])
    with pytest.raises(LLMError, match="after 2 attempts"):
        LLMExtractor(model).extract(EN_TURNS)
    assert len(model.calls) == 2


def test_cut_off_answer_keeps_complete_items() -> None:
    answer = (
        '{"memories": [{"content": "User likes tea", "memory_type": "preference", "turn": 0}, '
        '{"content": "User lives in Ber'
    )
    result, model = _run(answer)
    assert [i.content for i in result.items] == ["User likes tea"]
    assert any("cut off" in r for r in result.reasons)
    assert len(model.calls) == 1


def test_top_level_list_and_max_attempts() -> None:
    result, _ = _run('[{"content": "User likes tea", "memory_type": "preference"}]')
    assert [i.content for i in result.items] == ["User likes tea"]
    model = ScriptedChatModel(["garbage", VALID])
    with pytest.raises(LLMError):
        LLMExtractor(model, max_attempts=1).extract(EN_TURNS)
    assert len(model.calls) == 1
    result, model = _run(["a", "b", VALID], max_attempts=3)
    assert result.attempts == 3 and len(result.items) == 1


def test_no_user_turns_means_no_model_call() -> None:
    model = ScriptedChatModel()
    result = LLMExtractor(model).run([Turn("assistant", "Hello!"), Turn("user", "   ")])
    assert result.items == () and result.attempts == 0
    assert model.calls == []
    assert LLMExtractor(model).extract([]) == []


def test_turns_may_be_dicts_and_are_checked() -> None:
    model = ScriptedChatModel([VALID])
    items = LLMExtractor(model).extract([{"role": "Human", "content": "I like tea."}])  # type: ignore[list-item]
    assert items[0].turn_index == 0
    assert "[0] user: I like tea." in model.calls[0].prompt
    with pytest.raises(InvalidInput):
        LLMExtractor(model).extract("I like tea")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        LLMExtractor(model).extract([Turn("user", None)])  # type: ignore[arg-type]


def test_language_hint_and_helpers() -> None:
    assert language_of("我用Python写代码") == "zh"
    assert language_of("I like 北京") == "en"
    assert "Chinese and English" in language_instruction(["我喜欢茶", "I like tea"])
    assert "in English" in language_instruction(["I like tea"])
    plain = build_extraction_messages(EN_TURNS, language_hint=False)
    assert "writes in" not in plain[1]["content"]
    numbered = number_turns(ZH_TURNS)
    assert number_turns(numbered[2:]) == numbered[2:]  # numbering twice keeps the numbers
    assert format_turns(numbered[2:]).startswith("[2] user:")
    model = ScriptedChatModel(['{"memories": []}'])
    LLMExtractor(model, language_hint=False).extract(EN_TURNS)
    assert "writes in" not in model.calls[0].prompt


def test_the_language_hint_never_asks_a_model_to_translate_other_languages() -> None:
    # Japanese carries kanji and Korean is not English: neither is told "Chinese" or "English".
    assert language_of("毎朝ヨガを二十分しています") == "en"  # the digest's neutral labels, not 用户
    japanese = language_instruction(["毎朝ヨガを二十分しています", "結婚記念日は十月十日です", "2"])
    assert japanese.startswith("The user writes in Japanese: write every memory in Japanese")
    assert "in Korean" in language_instruction(["출퇴근할 때 지하철을 타요."])
    # Letters that do not name one language: the turn's own language, never a named one.
    for texts in (
        ["Каждое утро я пью чёрный кофе."],
        ["Me llamo Lucía y soy arquitecta"],
        ["私は東京", "Я дома"],
    ):
        sentence = language_instruction(texts)
        assert "language of the turn" in sentence and "never translate" in sentence
        assert "Chinese" not in sentence and "English" not in sentence
    assert language_instruction(["我喜欢茶", "好"]).startswith("The user writes in Chinese")


def test_flow_is_reusable_and_the_extractor_is_an_extractor() -> None:
    model = ScriptedChatModel([VALID])
    extractor: Extractor = LLMExtractor(model)
    flow_result = run_chat(LLMExtractor(model).flow(EN_TURNS), model)
    assert [i.content for i in flow_result.items] == ["User likes tea"]
    assert "gpt" not in repr(extractor) and "scripted" in repr(extractor)
    direct = read_extraction(VALID, number_turns(EN_TURNS), model_id="m")
    assert direct.items[0].reasons[0] == "extracted by m"
    with pytest.raises(ConfigError):
        LLMExtractor(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LLMExtractor(model, max_attempts=0)
    callable_based = LLMExtractor(lambda messages: VALID)
    assert callable_based.extract(EN_TURNS)[0].content == "User likes tea"
