"""Episode summaries: the offline extractive summarizer, the LLM summarizer and compaction text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import ScriptedChatModel
from jiyi.session.summarize import (
    COMPACTION_HEADERS,
    SUMMARY_SYSTEM_PROMPT,
    EpisodeSummary,
    LLMSummarizer,
    compaction_summary,
    read_summary,
    split_sentences,
    summarize_extractive,
    summary_messages,
)
from jiyi.text.tokens import count_tokens
from jiyi.write.extract import Turn

ZH = [
    Turn("user", "你好！"),
    Turn("assistant", "你好，有什么可以帮你？"),
    Turn("user", "我们的订单服务部署到 Kubernetes 以后一直报错，数据库连接池总是耗尽。"),
    Turn("assistant", "可以先看看连接池的配置。数据库连接池的最大连接数是多少？"),
    Turn("user", "最大连接数是 10。我们决定把连接池改成 50，并且给数据库加一个只读副本。"),
    Turn("assistant", "好的。改完以后重新部署订单服务，观察一下数据库连接数。"),
    Turn("user", "重新部署以后成功了，连接池不再耗尽，问题解决了。谢谢！"),
]

EN = [
    Turn("user", "Hi there"),
    Turn("assistant", "Hello! How can I help?"),
    Turn(
        "user", "Our nightly backup job to S3 keeps failing with a timeout since we moved to the new cluster."
    ),
    Turn(
        "assistant",
        "The backup job may hit the default 60 second timeout. "
        "Try raising the timeout and enabling multipart uploads for large backup files.",
    ),
    Turn(
        "user",
        "We decided to enable multipart uploads and raised the timeout to 10 minutes. "
        "I also installed the new AWS CLI on the cluster.",
    ),
    Turn("assistant", "Great. Run the backup job once manually to check."),
    Turn("user", "The backup finally worked, the S3 upload finished in 4 minutes."),
]


# -- extractive -----------------------------------------------------------------------------------------


def test_split_sentences_chinese_and_english() -> None:
    assert split_sentences("我们用 Next.js 14。它很快！真的吗？\n第二行") == [
        "我们用 Next.js 14。",
        "它很快！",
        "真的吗？",
        "第二行",
    ]
    assert split_sentences("We use Next.js 3.5 now. It works! Does it? “Yes.” Done") == [
        "We use Next.js 3.5 now.",
        "It works!",
        "Does it?",
        "“Yes.”",
        "Done",
    ]


def test_split_sentences_where_chat_ends_them() -> None:
    # An emoji before a capital, Korean laughter before a space; not an emoji mid-sentence.
    assert split_sentences("Ya tengo el B2 🎉 Quiero celebrarlo") == [
        "Ya tengo el B2 🎉",
        "Quiero celebrarlo",
    ]
    assert split_sentences("좋다ㅎㅎ 회사가 멀어") == ["좋다ㅎㅎ", "회사가 멀어"]
    assert split_sentences("I love 🍕 and pasta.") == ["I love 🍕 and pasta."]


def test_chinese_conversation() -> None:
    episode = summarize_extractive(ZH)
    assert episode.language == "zh"
    lines = episode.summary.splitlines()
    assert count_tokens(episode.summary) <= 200
    # one labelled line per statement, the problem the user described kept as their own line
    assert lines == [
        "- 用户：我们的订单服务部署到 Kubernetes 以后一直报错，数据库连接池总是耗尽。",
        "- 事实：最大连接数是 10",
        "- 决定：我们决定把连接池改成 50，并且给数据库加一个只读副本",
        "- 用户：重新部署以后成功了，连接池不再耗尽，问题解决了。",
    ]
    assert "可以先看看" not in episode.summary  # the assistant's suggestion is not pasted
    assert "你好" not in episode.summary and "谢谢" not in episode.summary  # small talk is never kept
    assert {"连接池", "数据库"} <= set(episode.key_topics)
    assert all(len(t) >= 2 for t in episode.key_topics)
    assert "我们决定把连接池改成 50，并且给数据库加一个只读副本。" in episode.actions_taken
    assert not any("看看" in a for a in episode.actions_taken)  # a suggestion, not something done
    assert episode.outcomes == ("重新部署以后成功了，连接池不再耗尽，问题解决了。",)
    assert 0.5 < episode.importance <= 1.0


def test_english_conversation() -> None:
    episode = summarize_extractive(EN)
    assert episode.language == "en"
    assert count_tokens(episode.summary) <= 200
    assert episode.summary.splitlines() == [
        "- Fact: Our nightly backup job to S3 keeps failing with a timeout since we moved to the new cluster",
        "- Decision: We decided to enable multipart uploads and raised the timeout to 10 minutes",
        "- User: I also installed the new AWS CLI on the cluster.",
        "- Fact: The backup finally worked, the S3 upload finished in 4 minutes",
    ]
    assert "Hello" not in episode.summary and "Hi there" not in episode.summary
    assert {"backup", "timeout"} <= set(episode.key_topics)
    assert "S3" in episode.key_topics  # surface form, not the lower-cased term
    assert episode.actions_taken == (
        "We decided to enable multipart uploads and raised the timeout to 10 minutes.",
        "I also installed the new AWS CLI on the cluster.",
    )
    assert episode.outcomes == ("The backup finally worked, the S3 upload finished in 4 minutes.",)
    assert 0.0 < episode.importance <= 1.0


def test_budgets_are_respected() -> None:
    for turns in (ZH, EN):
        for budget in (5, 12, 30, 60):
            text = summarize_extractive(turns, max_tokens=budget).summary
            assert text and count_tokens(text) <= budget
        assert len(summarize_extractive(turns, max_sentences=1).summary.splitlines()) == 1
        assert len(summarize_extractive(turns, max_topics=2).key_topics) == 2
    # Over the budget, the user's notes go before any statement, and statements are
    # shortened before one is dropped; the newest are kept longest.
    tight = summarize_extractive(ZH, max_tokens=40).summary
    assert (
        "用户：" not in tight and "- 决定：我们决定把连接池" in tight and "- 事实：最大连接数是 10" in tight
    )
    assert summarize_extractive(ZH, max_tokens=12).summary.startswith("- 决定：我们决定")


def test_nothing_to_summarise() -> None:
    empty = summarize_extractive([])
    assert empty == EpisodeSummary("", (), (), (), 0.0, "en")
    chat = summarize_extractive(
        [Turn("user", "谢谢！"), Turn("assistant", "不客气"), Turn("system", "规则很多很多")]
    )
    assert chat.summary == "" and chat.importance == 0.0 and chat.language == "zh"


def test_importance_grows_with_decisions_and_results() -> None:
    idle = summarize_extractive(
        [Turn("user", "Tell me about the history of Rome."), Turn("assistant", "Rome was...")]
    )
    assert idle.importance < summarize_extractive(EN).importance < summarize_extractive(ZH).importance + 0.5
    assert idle.importance <= 0.4


def test_dict_turns_and_bad_arguments() -> None:
    episode = summarize_extractive(
        [{"role": "human", "content": "I decided to use PostgreSQL for the billing service."}]
    )
    assert episode.summary == "- Decision: I decided to use PostgreSQL for the billing service"
    assert episode.to_structured() == {
        "summary": episode.summary,
        "key_topics": list(episode.key_topics),
        "actions_taken": ["I decided to use PostgreSQL for the billing service."],
        "outcomes": [],
        "importance": episode.importance,
        "language": "en",
    }
    with pytest.raises(InvalidInput, match="max_tokens"):
        summarize_extractive(EN, max_tokens=0)
    with pytest.raises(InvalidInput, match="turns"):
        summarize_extractive("not turns")  # type: ignore[arg-type]


SESSIONS = json.loads((Path(__file__).parent / "data" / "summary_sessions.json").read_text(encoding="utf-8"))


def _session(data: dict[str, Any]) -> list[Turn]:
    out: list[Turn] = []
    for text in data["user_turns"]:
        out += [Turn("user", text), Turn("assistant", data["assistant_reply"])]
    return out


@pytest.mark.parametrize("data", SESSIONS["sessions"], ids=lambda d: d["lang"])
def test_twenty_turns_keep_every_statement_once(data: dict[str, Any]) -> None:
    """No statement the user made is dropped, by the episode summary or by compaction;
    each is one line, said-twice is one line, and small talk, questions and the
    assistant's boilerplate are not there."""
    turns = _session(data)
    assert len(data["user_turns"]) == 20
    total = sum(count_tokens(t.content) for t in turns)
    episode = summarize_extractive(turns)
    compacted = compaction_summary(turns)
    for text in (episode.summary, compacted):
        for stated in data["stated"]:
            assert all(p in text for p in stated["keep"]), (stated, text)
        lines = [line for line in text.splitlines() if line.startswith("- ")]
        # a line per statement ("I'm Laura, a data engineer" is two); the repeated turn once
        assert len(data["stated"]) + 1 <= len(lines) <= len(data["stated"]) + 2
        first = data["stated"][0]["keep"][0]
        assert sum(first in line for line in lines) == 1
        assert count_tokens(text) <= min(400, total // 2)
        reply = data["assistant_reply"]
        assert reply[:12] not in text
        for small in ("你好", "谢谢", "Hi!", "Thanks"):
            assert small not in text
        # the one question is kept as what was asked, after the statements
        assert [line for line in text.splitlines() if line.startswith(("- 提问：", "- Asked: "))] == [
            "- 提问：你能推荐一个监控工具吗？"
            if data["lang"] == "zh"
            else "- Asked: Can you suggest a good data catalog?"
        ]
    assert episode.language == data["lang"]


def test_a_new_value_of_the_same_slot_replaces_the_line() -> None:
    summary = summarize_extractive(
        [
            Turn("user", "I live in Berlin."),
            Turn("user", "I live in Munich now."),
            Turn("user", "I live in Munich now."),
        ]
    ).summary
    assert summary == "- Fact: I live in Munich now"


# -- compaction ---------------------------------------------------------------------------------------


def test_compaction_summary_and_compacting_again() -> None:
    first = compaction_summary(ZH[:4])
    assert first.startswith(COMPACTION_HEADERS["zh"] + "\n")
    assert "数据库连接池总是耗尽" in first
    second = compaction_summary(ZH[4:], first)
    assert second.count(COMPACTION_HEADERS["zh"]) == 1
    assert "数据库连接池总是耗尽" in second  # kept from the previous summary
    assert "我们决定把连接池改成 50" in second
    new_part = second.split("\n", 1)[1].removeprefix(first.split("\n", 1)[1]).strip()
    assert 0 < count_tokens(new_part) <= sum(count_tokens(t.content) for t in ZH[4:]) / 2  # it shrinks
    assert count_tokens(second) <= 600
    english = compaction_summary(EN, max_tokens=80)
    assert english.startswith("Summary of earlier conversation:\n")
    assert count_tokens(english) <= 80


def test_compaction_finds_an_earlier_summary_among_the_turns_and_cuts_it_to_fit() -> None:
    old = "Summary of earlier conversation:\nuser: We chose Redis for the cache. " + "Old detail. " * 200
    text = compaction_summary([Turn("system", old), *EN[2:]], max_tokens=150)
    assert text.count("Summary of earlier conversation:") == 1
    assert "We chose Redis for the cache." in text
    assert "backup" in text
    assert count_tokens(text) <= 150


# -- with a model --------------------------------------------------------------------------------------

ZH_ANSWER = {
    "summary": "用户的订单服务数据库连接池耗尽，把连接池改成 50 并加只读副本后重新部署成功。",
    "key_topics": ["连接池", "数据库", "Kubernetes"],
    "actions_taken": ["连接池改成 50", "加只读副本"],
    "outcomes": ["重新部署成功"],
    "importance": 0.8,
}


def test_llm_summarizer_reads_the_fields_and_asks_in_the_conversation_language() -> None:
    model = ScriptedChatModel([json.dumps(ZH_ANSWER, ensure_ascii=False)])
    episode = LLMSummarizer(model).summarize(ZH)
    assert episode == EpisodeSummary(
        ZH_ANSWER["summary"],  # type: ignore[arg-type]
        ("连接池", "数据库", "Kubernetes"),
        ("连接池改成 50", "加只读副本"),
        ("重新部署成功",),
        0.8,
        "zh",
    )
    (call,) = model.calls
    assert call.json_mode
    assert call.system == SUMMARY_SYSTEM_PROMPT
    assert "[2] user: 我们的订单服务部署到 Kubernetes" in call.prompt
    assert "write every value in Chinese" in call.prompt


def test_lenient_fields() -> None:
    episode = read_summary(
        '```json\n{"Summary": "Fixed the S3 backup timeout.", "key_topics": "backup, S3、timeout", '
        '"actions_taken": null, "outcomes": ["backup works", 3, null], "importance": "80%"}\n```'
    )
    assert episode.key_topics == ("backup", "S3", "timeout")
    assert episode.actions_taken == ()
    assert episode.outcomes == ("backup works", "3")
    assert episode.importance == 0.8 and episode.language == "en"
    assert read_summary('{"summary": "x y", "importance": 7}').importance == 0.7
    assert read_summary('{"summary": "x y"}').importance == 0.5


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"key_topics": []}', 'no "summary"'),
        ('{"summary": "  "}', 'no "summary"'),
        ('"just text"', "expected a JSON object"),
        ('{"summary": "The user fixed the bac', "cut off"),
    ],
)
def test_unusable_answers(bad: str, message: str) -> None:
    with pytest.raises(LLMError, match=message):
        read_summary(bad)


def test_garbage_then_valid_is_retried_and_twice_garbage_raises() -> None:
    model = ScriptedChatModel(
        ["Sure, here is a summary: they fixed backups.", json.dumps({"summary": "Fixed backups."})]
    )
    assert LLMSummarizer(model).summarize(EN).summary == "Fixed backups."
    assert len(model.calls) == 2
    failing = ScriptedChatModel(["no", '{"summary": ""}'])
    with pytest.raises(LLMError, match="after 2 attempts"):
        LLMSummarizer(failing).summarize(EN)


async def test_async_and_no_call_without_dialogue() -> None:
    model = ScriptedChatModel([json.dumps({"summary": "Fixed backups.", "importance": 0.4})])
    summarizer = LLMSummarizer(model)
    episode = await summarizer.asummarize(EN)
    assert episode.importance == 0.4
    assert (await summarizer.asummarize([Turn("system", "x")])).summary == ""
    assert len(model.calls) == 1
    messages = summary_messages(EN)
    assert "write every value in English" in messages[1]["content"]
    korean = summary_messages(
        [
            Turn("user", "주말마다 해운대에서 러닝을 해요."),
            Turn("user", "허리가 아파서 필라테스를 시작했어요."),
        ]
    )
    assert "The conversation is in Korean: write every value in Korean" in korean[1]["content"]
    russian = summary_messages([Turn("user", "Каждое утро я пью чёрный кофе без сахара.")])
    assert "in the language the conversation is written in" in russian[1]["content"]
    assert "in English" not in russian[1]["content"]
    with pytest.raises(ConfigError):
        LLMSummarizer(None)  # type: ignore[arg-type]
