"""The chat-model layer: OpenAI-compatible client, resolution, test double, chat flows, JSON repair."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from jiyi.errors import ConfigError, InvalidInput, JiyiError
from jiyi.llm.base import (
    CallableChatModel,
    ChatFlow,
    ChatModel,
    Complete,
    LLMError,
    ScriptedChatModel,
    acomplete,
    arun_chat,
    forbid_network_models,
    json_flow,
    network_models_forbidden,
    repair_messages,
    resolve_chat_model,
    run_chat,
)
from jiyi.llm.jsonfix import parse_json_answer, repair_json, unwrap_list
from jiyi.llm.openai import OpenAIChatModel
from tests.openai_server import ScriptedOpenAIServer, chat_body

_ENV_VARS = ("JIYI_LLM_BASE_URL", "OPENAI_BASE_URL", "JIYI_LLM_API_KEY", "OPENAI_API_KEY")
SECRET = "sk-test-secret-llm"
HI = [{"role": "user", "content": "你好"}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own OpenAI settings must not leak into these tests.
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


@pytest.fixture
def make_model(server: ScriptedOpenAIServer) -> Iterator[Any]:
    """Builds chat models aimed at the scripted server with fast retries; closes them after."""
    made: list[OpenAIChatModel] = []

    def make(**kwargs: Any) -> OpenAIChatModel:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "api_key": SECRET,
            "backoff": 0.01,
            "max_wait": 0.05,
            "timeout": 5.0,
        }
        options.update(kwargs)
        model = OpenAIChatModel(options.pop("model", "gpt-test"), **options)
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()


# -- OpenAIChatModel over HTTP ----------------------------------------------------------------


def test_chat_success_sends_model_messages_and_key(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script_chat("你好！有什么可以帮你？")
    model = make_model()
    assert model.complete(HI) == "你好！有什么可以帮你？"
    (request,) = server.requests_to("chat/completions")
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.json == {"model": "gpt-test", "messages": HI, "temperature": 0.0}
    assert model.model_id == "openai:gpt-test"
    assert isinstance(model, ChatModel)


def test_json_mode_sends_response_format_and_max_tokens(
    server: ScriptedOpenAIServer, make_model: Any
) -> None:
    server.script_chat('{"ok": true}')
    answer = make_model().complete(HI, json_mode=True, max_tokens=50, temperature=0.3)
    assert answer == '{"ok": true}'
    sent = server.requests_to("chat/completions")[0].json
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["max_tokens"] == 50
    assert sent["temperature"] == 0.3


def test_retry_on_429_caps_retry_after(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=429, headers={"Retry-After": "30"})
    server.script_chat("ok")
    start = time.monotonic()
    assert make_model().complete(HI) == "ok"
    assert time.monotonic() - start < 2.0  # 30 s asked, max_wait 0.05 s given
    assert len(server.requests_to("chat/completions")) == 2


def test_retry_after_is_honoured(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=429, headers={"Retry-After": "0.2"})
    server.script_chat("ok")
    start = time.monotonic()
    assert make_model(backoff=0.0, max_wait=5.0).complete(HI) == "ok"
    assert time.monotonic() - start >= 0.2


def test_retry_on_server_errors_then_success(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=500)
    server.script("chat/completions", status=503)
    server.script("chat/completions", status=408)
    server.script_chat("finally")
    assert make_model().complete(HI) == "finally"
    assert len(server.requests_to("chat/completions")) == 4


def test_gives_up_after_max_retries(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=502, body={"error": {"message": "upstream overloaded"}}, times=9)
    with pytest.raises(LLMError, match="after 3 attempts") as info:
        make_model(max_retries=2).complete(HI)
    assert "HTTP 502" in str(info.value)
    assert "upstream overloaded" in str(info.value)
    assert len(server.requests_to("chat/completions")) == 3


def test_401_fails_at_once_without_leaking_the_key(server: ScriptedOpenAIServer, make_model: Any) -> None:
    # Some gateways echo the key back; the error must still not contain it.
    server.script("chat/completions", status=401, body={"error": {"message": f"Incorrect API key: {SECRET}"}})
    model = make_model()
    with pytest.raises(LLMError) as info:
        model.complete(HI)
    message = str(info.value)
    assert "HTTP 401" in message
    assert "Incorrect API key" in message
    assert SECRET not in message
    assert SECRET not in repr(model)
    assert isinstance(info.value, JiyiError)
    assert len(server.requests_to("chat/completions")) == 1


def test_other_4xx_is_not_retried(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=400, body="context length exceeded")
    with pytest.raises(LLMError, match="HTTP 400: context length exceeded"):
        make_model().complete(HI)
    assert len(server.requests_to("chat/completions")) == 1


def test_timeout_is_retried_then_fails(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", delay=2.0, times=2)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"after 2 attempts: \w*Timeout"):
        make_model(timeout=0.2, max_retries=1).complete(HI)
    assert time.monotonic() - start < 1.5
    assert len(server.requests_to("chat/completions")) == 2


def test_timeout_then_success(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", delay=2.0)
    server.script_chat("late but fine")
    assert make_model(timeout=0.2).complete(HI) == "late but fine"


def test_connection_drop_is_retried(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", disconnect=True)
    server.script_chat("ok")
    assert make_model().complete(HI) == "ok"
    assert len(server.requests_to("chat/completions")) == 2


def test_unreachable_server(server: ScriptedOpenAIServer) -> None:
    port = server.port
    server.stop()
    with (
        OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.0) as model,
        pytest.raises(LLMError, match="ConnectError"),
    ):
        model.complete(HI)


def test_malformed_body(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", body='{"choices": [')
    with pytest.raises(LLMError, match="not valid JSON"):
        make_model().complete(HI)
    assert len(server.requests_to("chat/completions")) == 1


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"object": "chat.completion"}, "no 'choices'"),
        ({"choices": []}, "no 'choices'"),
        ({"choices": [{"index": 0}]}, "no 'message'"),
        ([1, 2], "no 'choices'"),
    ],
)
def test_bad_answer_shapes(server: ScriptedOpenAIServer, make_model: Any, body: Any, match: str) -> None:
    server.script("chat/completions", body=body)
    with pytest.raises(LLMError, match=match):
        make_model().complete(HI)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (chat_body(""), "finish_reason 'stop'"),
        (chat_body(None, finish_reason="length"), "finish_reason 'length'"),
        (chat_body("  \n "), ""),
        (chat_body(None, finish_reason="tool_calls", tool_calls=[{"id": "c1"}]), "tool calls"),
        (
            {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help"}}]},
            "refusal: I can't help",
        ),
    ],
)
def test_empty_content_is_an_error(
    server: ScriptedOpenAIServer, make_model: Any, body: Any, detail: str
) -> None:
    server.script("chat/completions", body=body)
    with pytest.raises(LLMError, match="model returned an empty answer") as info:
        make_model().complete(HI)
    assert detail in str(info.value)
    assert len(server.requests_to("chat/completions")) == 1  # not retried


def test_content_parts_are_joined(server: ScriptedOpenAIServer, make_model: Any) -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "第一"}, {"type": "text", "text": "二"}],
    }
    server.script("chat/completions", body={"choices": [{"index": 0, "message": message}]})
    assert make_model().complete(HI) == "第一二"


def test_settings_from_environment(server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("JIYI_LLM_BASE_URL", server.base_url + "/")  # jiyi's own name wins
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("JIYI_LLM_API_KEY", "sk-jiyi")
    server.script_chat("a")
    server.script_chat("b")
    with OpenAIChatModel("m") as model:
        assert model.base_url == server.base_url
        model.complete(HI)
    assert server.requests[-1].headers["authorization"] == "Bearer sk-jiyi"
    # Explicit arguments beat the environment; an empty key sends no header.
    with OpenAIChatModel("m", base_url=server.base_url, api_key="") as model:
        model.complete(HI)
    assert "authorization" not in server.requests[-1].headers


def test_openai_key_fallback_and_default_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    model = OpenAIChatModel("gpt-4o-mini")
    assert model.base_url == "https://api.openai.com/v1"
    assert model._headers()["Authorization"] == "Bearer sk-fallback"
    assert "sk-fallback" not in repr(model)
    model.close()
    model.close()  # never opened, closing twice is fine


def test_credentials_in_the_url_stay_out_of_messages(server: ScriptedOpenAIServer) -> None:
    server.script("chat/completions", status=403)
    url = f"http://user:pw-secret@127.0.0.1:{server.port}/v1?token=q-secret"
    with OpenAIChatModel("m", base_url=url, max_retries=0) as model:
        assert "pw-secret" not in repr(model)
        with pytest.raises(LLMError) as info:
            model.complete(HI)
    assert "pw-secret" not in str(info.value)
    assert "q-secret" not in str(info.value)


def test_validates_settings_and_input() -> None:
    with pytest.raises(ConfigError):
        OpenAIChatModel(" ")
    with pytest.raises(ConfigError):
        OpenAIChatModel("m", base_url="ftp://example.invalid")
    with pytest.raises(ConfigError):
        OpenAIChatModel("m", timeout=0)
    with pytest.raises(ConfigError):
        OpenAIChatModel("m", max_retries=-1)
    with OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1") as model:
        for bad in ("hi", [], [{"role": "user"}], [{"role": "", "content": "x"}], ["hi"]):
            with pytest.raises(InvalidInput):
                model.complete(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="temperature"):
            model.complete(HI, temperature=5)
        with pytest.raises(InvalidInput, match="max_tokens"):
            model.complete(HI, max_tokens=0)


def test_uses_a_supplied_client_without_closing_it(server: ScriptedOpenAIServer) -> None:
    server.script_chat("ok")
    with httpx.Client() as client:
        model = OpenAIChatModel("m", base_url=server.base_url, client=client)
        assert model.complete(HI) == "ok"
        model.close()
        assert not client.is_closed


async def test_async_path_retries_and_parses(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", status=429, headers={"Retry-After": "0"})
    server.script_chat("异步回答")
    model = make_model()
    assert await model.acomplete(HI, json_mode=True) == "异步回答"
    requests = server.requests_to("chat/completions")
    assert len(requests) == 2
    assert requests[-1].json["response_format"] == {"type": "json_object"}
    # The protocol-level helper picks the native async path.
    server.script_chat("again")
    assert await acomplete(model, HI) == "again"


async def test_async_errors_and_supplied_client(server: ScriptedOpenAIServer) -> None:
    server.script("chat/completions", status=401)
    server.script_chat("")
    server.script_chat("ok")
    async with httpx.AsyncClient() as client:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="sk-async", async_client=client)
        with pytest.raises(LLMError, match="HTTP 401"):
            await model.acomplete(HI)
        with pytest.raises(LLMError, match="empty answer"):
            await model.acomplete(HI)
        assert await model.acomplete(HI) == "ok"
        assert not client.is_closed


async def test_async_timeout_gives_up(server: ScriptedOpenAIServer, make_model: Any) -> None:
    server.script("chat/completions", delay=2.0, times=2)
    with pytest.raises(LLMError, match="after 2 attempts"):
        await make_model(timeout=0.2, max_retries=1).acomplete(HI)


# -- keeping tests off the network ------------------------------------------------------------


async def test_forbid_network_models(server: ScriptedOpenAIServer, make_model: Any) -> None:
    model = make_model()
    assert not network_models_forbidden()
    with forbid_network_models():
        assert network_models_forbidden()
        with forbid_network_models():
            pass
        assert network_models_forbidden()  # nesting keeps it on
        with pytest.raises(ConfigError, match="forbid_network_models"):
            model.complete(HI)
        with pytest.raises(ConfigError, match="ScriptedChatModel"):
            await model.acomplete(HI)
        assert ScriptedChatModel(["fine"]).complete(HI) == "fine"
    assert not network_models_forbidden()
    assert server.requests == []
    server.script_chat("allowed again")
    assert model.complete(HI) == "allowed again"


# -- resolving specs and plain callables ------------------------------------------------------


def test_resolve_chat_model() -> None:
    assert resolve_chat_model(None) is None
    scripted = ScriptedChatModel()
    assert resolve_chat_model(scripted) is scripted
    wrapped = resolve_chat_model(lambda messages: "from a function")
    assert isinstance(wrapped, CallableChatModel)
    assert wrapped.complete(HI) == "from a function"
    assert wrapped.model_id.startswith("callable:")
    model = resolve_chat_model(" OpenAI : gpt-4o-mini ")
    assert isinstance(model, OpenAIChatModel)
    assert model.model_id == "openai:gpt-4o-mini"
    model.close()
    for bad in ("openai:", "gpt-4o", "anthropic:claude", ""):
        with pytest.raises(ConfigError):
            resolve_chat_model(bad)
    with pytest.raises(ConfigError):
        resolve_chat_model(42)  # type: ignore[arg-type]


async def test_callable_model_checks_answers() -> None:
    seen: list[list[dict[str, str]]] = []

    def fn(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return "答案"

    model = CallableChatModel(fn, model_id="mine")
    assert model.complete(HI) == "答案"
    assert await acomplete(model, HI) == "答案"  # no native acomplete: a worker thread
    assert seen == [HI, HI]
    assert repr(model) == "CallableChatModel('mine')"
    with pytest.raises(LLMError, match="returned int"):
        CallableChatModel(lambda m: 1).complete(HI)  # type: ignore[arg-type, return-value]
    with pytest.raises(LLMError, match="empty answer"):
        CallableChatModel(lambda m: " ").complete(HI)


# -- the scripted test double -----------------------------------------------------------------


async def test_scripted_model_queue_function_and_calls() -> None:
    model = ScriptedChatModel(
        ["one", LLMError("scripted failure")], function=lambda m: m[-1]["content"][::-1]
    )
    assert model.pending == 2
    assert model.complete(HI, json_mode=True, max_tokens=10) == "one"
    with pytest.raises(LLMError, match="scripted failure"):
        model.complete(HI)
    assert model.complete([{"role": "system", "content": "s"}, {"role": "user", "content": "abc"}]) == "cba"
    model.queue("queued later")
    assert await model.acomplete(HI) == "queued later"
    assert len(model.calls) == 4
    first = model.calls[0]
    assert first.json_mode and first.max_tokens == 10 and first.temperature == 0.0
    assert first.prompt == "你好"
    assert model.calls[2].system == "s"
    assert "pending=0" in repr(model)


def test_scripted_model_fails_like_a_real_one() -> None:
    model = ScriptedChatModel("only")  # a single string is one answer, not characters
    assert model.complete(HI) == "only"
    with pytest.raises(LLMError, match="no scripted answer left for call 2"):
        model.complete(HI)
    with pytest.raises(LLMError, match="empty answer"):
        ScriptedChatModel([""]).complete(HI)
    with pytest.raises(InvalidInput):
        ScriptedChatModel(["x"]).complete([{"role": "user", "content": 3}])  # type: ignore[dict-item]
    assert isinstance(ScriptedChatModel(), ChatModel)


# -- chat flows ---------------------------------------------------------------------------------


def _parse_number(answer: str) -> int:
    value = parse_json_answer(answer)
    if not isinstance(value, dict) or not isinstance(value.get("n"), int):
        raise LLMError('expected {"n": <integer>}')
    return int(value["n"])


def test_json_flow_repairs_once() -> None:
    model = ScriptedChatModel(["no idea", '{"n": 7}'])
    done = run_chat(json_flow(HI, _parse_number), model)
    assert (done.value, done.attempts, done.answer) == (7, 2, '{"n": 7}')
    assert len(done.errors) == 1 and "no JSON" in done.errors[0]
    assert all(call.json_mode for call in model.calls)
    retry = model.calls[1].messages
    assert retry[:-2] == HI
    assert retry[-2] == {"role": "assistant", "content": "no idea"}
    assert "could not be used" in retry[-1]["content"] and "no JSON" in retry[-1]["content"]


async def test_json_flow_gives_up_and_async_driver() -> None:
    with pytest.raises(LLMError, match=r"expected \{\"n\".*after 2 attempts"):
        run_chat(json_flow(HI, _parse_number), ScriptedChatModel(['{"n": "x"}', '{"m": 1}']))
    with pytest.raises(LLMError, match="no JSON"):
        run_chat(json_flow(HI, _parse_number, max_attempts=1), ScriptedChatModel(["nope", '{"n": 1}']))
    done = await arun_chat(json_flow(HI, _parse_number), ScriptedChatModel(["```\n{'n': 3,}\n```"]))
    assert (done.value, done.attempts) == (3, 1)
    with pytest.raises(ConfigError):
        run_chat(json_flow(HI, _parse_number, max_attempts=0), ScriptedChatModel())


def test_model_errors_reach_the_flow_and_are_not_repaired() -> None:
    def flow() -> ChatFlow[str]:
        try:
            answer = yield Complete(tuple(HI))
        except LLMError as exc:
            return f"caught: {exc}"
        return answer

    assert run_chat(flow(), ScriptedChatModel(["fine"])) == "fine"
    assert run_chat(flow(), ScriptedChatModel([LLMError("down")])) == "caught: down"
    model = ScriptedChatModel([LLMError("HTTP 500")])
    with pytest.raises(LLMError, match="HTTP 500"):
        run_chat(json_flow(HI, _parse_number), model)
    assert len(model.calls) == 1


def test_repair_messages_cuts_long_answers() -> None:
    messages = repair_messages(HI, "x" * 10_000, "bad")
    assert len(messages[-2]["content"]) < 4100
    assert messages[-1]["content"].startswith("Your answer could not be used: bad")


# -- JSON repair ----------------------------------------------------------------------------------

MEM = {"content": "用户喜欢茶", "memory_type": "preference"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```JSON\n[1, 2]\n```", [1, 2]),
        ('```\n{"a": 1}\n```\nHope that helps!', {"a": 1}),
        ('Here is the JSON:\n{"a": 1}', {"a": 1}),
        ('{"a": 1}\n\nLet me know if you need more.', {"a": 1}),
        ('Sure! [see below]\n{"a": [1, 2]} done.', {"a": [1, 2]}),
        ("{'a': 'b', 'c': [1, 2]}", {"a": "b", "c": [1, 2]}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
        ("{a: 1, memory_type: preference}", {"a": 1, "memory_type": "preference"}),
        (
            '{"memories": [{"content": "用户喜欢茶", "memory_type": "preference"}, {"content": "用户住在',
            {"memories": [MEM]},
        ),
        ('{"memories": [{"content": "用户喜欢茶", "memory_type": "preference"}', {"memories": [MEM]}),
        ('{"summary": "the user likes te', {"summary": "the user likes te"}),
        ("[1, 2, 3", [1, 2]),
        ("[1, 2, 3,", [1, 2, 3]),
        ('{"a": {"b": [1, {"c": "d"', {"a": {"b": [1]}}),
        ('{"a": 1, "b', {"a": 1}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": tru', {}),
        ('{"content"："他喜欢茶"，"turn"：0}', {"content": "他喜欢茶", "turn": 0}),
        ('{"content": "他说"好"了", "turn": 1}', {"content": '他说"好"了', "turn": 1}),
        ("{'content': 'user's cat is called Mimi'}", {"content": "user's cat is called Mimi"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
        ('// answer\n{"a": 1, /* note */ "b": 2} # end', {"a": 1, "b": 2}),
        ('<think>The user said {something}.</think>\n{"a": 1}', {"a": 1}),
        ('"{\\"memories\\": []}"', {"memories": []}),
        ('{"a": [1, 2}', {"a": [1, 2]}),
        ('[{"a": 1]', [{"a": 1}]),
        ('{"s": "line\\nbreak \\u4f60\\u597d \\ud83d\\ude00 \\q"}', {"s": "line\nbreak 你好 😀 \\q"}),
        ("{“content”: “用户喜欢茶”}", {"content": "用户喜欢茶"}),
        ('{"c": 0.8, "i": -1e2, "n": 3,}', {"c": 0.8, "i": -100.0, "n": 3}),
        ('{"a": 1,, "b": 2}', {"a": 1, "b": 2}),
        ('\ufeff  {"a": [] }  ', {"a": []}),
    ],
)
def test_parse_json_answer_repairs(text: str, expected: Any) -> None:
    assert parse_json_answer(text) == expected


def test_repair_report() -> None:
    clean = repair_json('{"a": 1}')
    assert clean.repairs == () and not clean.truncated
    fixed = repair_json("Here:\n```json\n{'a': True,}\n```")
    assert {"code fence", "single quotes", "python literal", "trailing comma"} <= set(fixed.repairs)
    assert not fixed.truncated
    cut = repair_json('{"memories": [{"content": "a"}, {"content": "b')
    assert cut.truncated
    assert cut.value == {"memories": [{"content": "a"}]}
    assert "dropped a cut-off item" in cut.repairs
    nan = parse_json_answer('{"c": NaN, "d": Infinity}')
    assert math.isnan(nan["c"]) and nan["d"] == math.inf


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I could not find anything worth remembering.", "no JSON object or list"),
        ("{this is not json}", "cannot|can't|not JSON"),
        ('{"a": }', "no value for key 'a'"),
        ("[" * 500, "nested too deeply"),
        ("<think>still thinking about {it", "no JSON|not JSON"),
        ('{"a" 1}', "expected ':'"),
    ],
)
def test_parse_json_answer_unrepairable(text: str, match: str) -> None:
    with pytest.raises(LLMError, match=match):
        parse_json_answer(text)


def test_unrepairable_error_has_a_short_excerpt() -> None:
    with pytest.raises(LLMError) as info:
        parse_json_answer("{broken " + "x" * 500)
    message = str(info.value)
    assert "'{broken xxx" in message
    assert len(message) < 250
    with pytest.raises(LLMError, match="as text, not NoneType"):
        parse_json_answer(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([MEM], [MEM]),
        ({"memories": [MEM]}, [MEM]),
        ({"Memories": [MEM]}, [MEM]),
        ({"memories": []}, []),
        ({"memories": None}, []),
        ({"items": [MEM]}, [MEM]),
        ({"result": {"memories": [MEM]}}, [MEM]),
        ({"memories": MEM}, [MEM]),
        (MEM, [MEM]),
    ],
)
def test_unwrap_list(value: Any, expected: list[Any]) -> None:
    assert unwrap_list(value) == expected


@pytest.mark.parametrize(
    "value", [{"answer": "none", "note": "x"}, "memories", 3, None, {"memories": "none"}, {"memories": 1}]
)
def test_unwrap_list_refuses_other_shapes(value: Any) -> None:
    with pytest.raises(LLMError):
        unwrap_list(value)
