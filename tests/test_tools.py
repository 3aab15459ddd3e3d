"""The function-calling tools: schemas, the dispatcher, errors a model can read, isolation."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import jiyi.read.search as read_search
from jiyi.errors import InvalidInput
from jiyi.integrations.tools import (
    DOCUMENT_TOOLS,
    LIFECYCLE_TOOLS,
    PROCEDURAL_TOOLS,
    PROFILE_TOOL,
    SESSION_TOOL,
    TOOL_NAMES,
    TOOLS,
    AsyncMemoryTools,
    MemoryTools,
    ToolCallError,
    validate_arguments,
)
from jiyi.memory import AsyncMemory, Memory
from jiyi.store.base import Viewer
from jiyi.who import Caller, Owner

SEED_TOOLS = {"memory_save", "memory_search", "memory_delete", "memory_stats"}
ALL_TOOLS = [*TOOLS, PROFILE_TOOL, *PROCEDURAL_TOOLS, *DOCUMENT_TOOLS, *LIFECYCLE_TOOLS, SESSION_TOOL]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "m.db") as m:
        yield m


@pytest.fixture
def tools(mem: Memory) -> MemoryTools:
    return MemoryTools(mem, user_id="alice", session_id="s1")


def ok(result: dict[str, Any]) -> dict[str, Any]:
    json.dumps(result)  # every result is JSON-serialisable
    assert "error" not in result, result
    return result


def error(result: dict[str, Any], code: str) -> dict[str, Any]:
    json.dumps(result)
    assert set(result) == {"error"}, result
    assert result["error"]["code"] == code, result
    assert result["error"]["message"]
    return result["error"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ schemas


def parameters(name: str) -> dict[str, Any]:
    return next(t["function"]["parameters"] for t in ALL_TOOLS if t["function"]["name"] == name)


def test_tools_have_the_openai_function_shape() -> None:
    assert {t["function"]["name"] for t in TOOLS} == SEED_TOOLS | {"memory_context"}
    assert tuple(t["function"]["name"] for t in TOOLS) == TOOL_NAMES
    for tool in TOOLS:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert len(tool["function"]["description"]) > 40
        json.dumps(tool)


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t["function"]["name"])
def test_parameters_are_valid_json_schema(tool: dict[str, Any]) -> None:
    schema = tool["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    for name in schema["required"]:
        assert name in schema["properties"]
    for prop in schema["properties"].values():
        assert prop["description"]
        if "default" in prop:  # defaults must themselves be valid values
            jsonschema.validate(prop["default"], prop)


def test_descriptions_name_the_chinese_triggers() -> None:
    save = next(t for t in TOOLS if t["function"]["name"] == "memory_save")["function"]["description"]
    for trigger in ("记住", "帮我记住", "我是"):
        assert trigger in save


GOOD = [
    ("memory_save", {"content": "我是一名前端工程师"}),
    ("memory_save", {"content": "I prefer dark mode", "memory_type": "preference", "scope": "session"}),
    ("memory_search", {"query": "职业"}),
    ("memory_search", {"query": "job", "k": 3, "memory_type": "fact", "scope": "user"}),
    ("memory_search", {"query": "job", "k": 3.0}),
    ("memory_delete", {"memory_id": "abc"}),
    ("memory_delete", {"memory_id": "abc", "hard": True}),
    ("memory_stats", {}),
    ("memory_context", {"query": "写前端", "budget_tokens": 500, "max_items": 5}),
    ("memory_suggest", {"task": "部署前端应用", "min_similarity": 0.6, "min_success_rate": 0.5}),
    ("memory_learn", {"kind": "skill", "name": "deploy", "workflow": ["pytest", {"tool": "docker", "x": 1}]}),
    (
        "memory_learn",
        {"kind": "failure", "pattern": "p", "indicators": ["迁移"], "mitigation": "m", "severity": 5},
    ),
    ("memory_learn", {"kind": "decomposition", "task": "t", "subtasks": ["a"], "strategy": "parallel"}),
    ("memory_add_document", {"text": "a document", "title": "Notes"}),
    ("memory_get_document", {"parent_id": "abc"}),
    ("memory_end_session", {}),
    ("memory_compress", {}),
    ("memory_compress", {"older_than_days": 0, "max_access": 0, "memory_type": "fact", "dry_run": True}),
    ("memory_uncompress", {"core_id": "abc"}),
]
BAD = [
    ("memory_save", {}),
    ("memory_save", {"content": ""}),
    ("memory_save", {"content": 42}),
    ("memory_save", {"content": "hello there", "memory_type": "opinion"}),
    ("memory_save", {"content": "hello there", "scope": "galaxy"}),
    ("memory_save", {"content": "hello there", "user_id": "mallory"}),
    ("memory_search", {"query": "x", "k": "3"}),
    ("memory_search", {"query": "x", "k": True}),
    ("memory_search", {"query": "x", "k": 0}),
    ("memory_search", {"query": "x", "k": 51}),
    ("memory_search", {"query": "x", "k": 2.5}),
    ("memory_search", {"query": None}),
    ("memory_delete", {"memory_id": ["a"]}),
    ("memory_delete", {"memory_id": "a", "hard": "yes"}),
    ("memory_stats", {"user_id": "bob"}),
    ("memory_context", {"query": "x", "budget_tokens": 10}),
    ("memory_suggest", {"task": "x", "min_success_rate": 1.5}),
    ("memory_suggest", {"task": "x", "limit": 3}),
    ("memory_learn", {"name": "deploy"}),
    ("memory_learn", {"kind": "habit"}),
    ("memory_learn", {"kind": "skill", "workflow": []}),
    ("memory_learn", {"kind": "skill", "workflow": "pytest"}),
    ("memory_learn", {"kind": "skill", "workflow": [3]}),
    ("memory_learn", {"kind": "skill", "workflow": [{"args": "x"}]}),
    ("memory_learn", {"kind": "skill", "workflow": [{"tool": ""}]}),
    ("memory_learn", {"kind": "failure", "indicators": [""], "severity": 6}),
    ("memory_learn", {"kind": "decomposition", "subtasks": ["a", 2], "strategy": "random"}),
    ("memory_learn", {"kind": "skill", "scope": "session"}),
    ("memory_add_document", {"text": ""}),
    ("memory_add_document", {"text": "x", "user_id": "mallory"}),
    ("memory_get_document", {}),
    ("memory_end_session", {"session_id": "other"}),
    ("memory_compress", {"older_than_days": -1}),
    ("memory_compress", {"max_access": 1.5}),
    ("memory_compress", {"memory_type": "feelings"}),
    ("memory_compress", {"dry_run": "yes"}),
    ("memory_compress", {"user_id": "mallory"}),
    ("memory_uncompress", {}),
    ("memory_uncompress", {"core_id": ""}),
]


@pytest.mark.parametrize(("name", "args"), GOOD)
def test_good_examples_pass_jsonschema_and_the_dispatcher_check(name: str, args: dict[str, Any]) -> None:
    jsonschema.validate(args, parameters(name))
    checked = validate_arguments(parameters(name), args)
    jsonschema.validate(checked, parameters(name))  # defaults filled in stay valid
    assert set(args) <= set(checked)


@pytest.mark.parametrize(("name", "args"), BAD)
def test_bad_examples_fail_jsonschema_and_the_dispatcher_check(name: str, args: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, parameters(name))
    with pytest.raises(ToolCallError) as info:
        validate_arguments(parameters(name), args)
    assert info.value.code == "invalid_input" and info.value.field


def _random_value(schema: dict[str, Any], rng: random.Random) -> Any:
    """A value of any JSON type, or one at or just past the schema's bounds or enum."""
    values: list[Any] = [None, True, 0, -1, 2.5, 3.0, "", "x", [], ["a"], [""], [3], {}, {"tool": ""}]
    values += [[{"tool": "t", "args": "x"}], [{"args": 1}, 3], ["a", 2], "a" * rng.choice([1, 300, 5000])]
    for bound in ("minimum", "maximum"):
        if bound in schema:
            values += [schema[bound], schema[bound] + 1, schema[bound] - 1, schema[bound] - 0.5]
    return rng.choice(values + list(schema.get("enum", [])))


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t["function"]["name"])
def test_the_dispatcher_check_agrees_with_jsonschema_on_random_arguments(tool: dict[str, Any]) -> None:
    # The hand-written check is kept for its messages and speed (docs/design.md); this
    # keeps it exactly as strict as JSON Schema itself on the schemas the tools use.
    parameters = tool["function"]["parameters"]
    validator = jsonschema.Draft202012Validator(parameters)
    rng = random.Random(16)
    accepted = 0
    for _ in range(300):
        properties = parameters["properties"]
        names = rng.sample(sorted(properties), rng.randint(0, min(3, len(properties))))
        names += [n for n in parameters["required"] if n not in names and rng.random() < 0.9]
        args = {n: _random_value(properties[n], rng) for n in names}
        if rng.random() < 0.1:
            args["extra"] = 1
        refused: ToolCallError | None = None
        try:
            checked = validate_arguments(parameters, args)
        except ToolCallError as exc:
            refused = exc
        assert validator.is_valid(args) == (refused is None), (args, str(refused))
        if refused is None:
            validator.validate(checked)  # defaults filled in stay valid
            accepted += 1
        else:  # every argument jsonschema finds fault with is named (one problem per value)
            named = {str(e.path[0]) for e in validator.iter_errors(args) if e.path}
            assert refused.field
            assert all(name in str(refused) for name in named), (args, str(refused))
    assert accepted > 0


def test_bound_schemas_offer_only_the_bound_scopes(tools: MemoryTools) -> None:
    for tool in tools.schemas():
        scope = tool["function"]["parameters"]["properties"].get("scope")
        if scope is not None:
            # Learnings belong to a user, project or agent, never to a session.
            expected = ["user"] if tool["function"]["name"] == "memory_learn" else ["user", "session"]
            assert scope["enum"] == expected
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
    tools.schemas()[0]["function"]["name"] = "changed"
    assert tools.schemas()[0]["function"]["name"] == "memory_save"  # a copy each time


# ------------------------------------------------------------------ happy paths


def test_save_in_chinese_then_find_it_in_english(tools: MemoryTools) -> None:
    saved = ok(tools.call("memory_save", '{"content": "我是一名前端工程师"}'))
    assert saved["status"] == "stored" and saved["reasons"]
    assert saved["memory"]["id"] == saved["id"]
    assert saved["memory"]["memory_type"] == "fact" and saved["memory"]["scope"] == "user"

    found = ok(tools.call("memory_search", '{"query": "what does the user do for a living?", "k": 3}'))
    assert found["count"] >= 1
    best = found["results"][0]
    assert best["id"] == saved["id"] and best["content"] == "我是一名前端工程师"
    assert best["memory_type"] == "fact" and 0 < best["score"] <= 1


def test_save_in_english_then_find_it_in_chinese(tools: MemoryTools) -> None:
    saved = ok(
        tools.call(
            "memory_save", {"content": "I prefer dark mode in every editor", "memory_type": "preference"}
        )
    )
    found = ok(tools.call("memory_search", {"query": "用户喜欢什么编辑器主题?"}))
    assert found["results"][0]["id"] == saved["id"]
    assert found["results"][0]["memory_type"] == "preference"


def test_duplicate_reinforces_and_small_talk_is_refused(tools: MemoryTools) -> None:
    first = ok(tools.call("memory_save", {"content": "我是一名前端工程师"}))
    again = ok(tools.call("memory_save", {"content": "我是一名前端工程师。"}))
    assert again["status"] == "reinforced" and again["duplicate_of"] == first["id"]
    assert again["mention_count"] == 2 and again["similarity"] >= 0.85
    refused = ok(tools.call("memory_save", {"content": "hi"}))
    assert refused["status"] == "refused" and "id" not in refused
    assert any("too short" in r for r in refused["reasons"])
    assert ok(tools.call("memory_stats"))["total"] == 1


def test_sensitive_data_is_redacted(tools: MemoryTools) -> None:
    saved = ok(tools.call("memory_save", {"content": "我的手机号是 13812345678, 有事打给我"}))
    assert saved["status"] == "stored" and saved["redacted"]
    assert "13812345678" not in saved["memory"]["content"]


def test_search_filters_by_type_and_scope(tools: MemoryTools) -> None:
    fact = ok(tools.call("memory_save", {"content": "用户在上海工作"}))
    pref = ok(
        tools.call(
            "memory_save",
            {"content": "用户喜欢在上海的咖啡馆写代码", "memory_type": "habit", "scope": "session"},
        )
    )
    assert pref["memory"]["scope"] == "session"
    habits = ok(tools.call("memory_search", {"query": "上海", "memory_type": "habit"}))
    assert [r["id"] for r in habits["results"]] == [pref["id"]]
    users = ok(tools.call("memory_search", {"query": "上海", "scope": "user"}))
    assert [r["id"] for r in users["results"]] == [fact["id"]]
    both = ok(tools.call("memory_search", {"query": "上海", "k": 10}))
    assert {r["id"] for r in both["results"]} == {fact["id"], pref["id"]}


def test_stats_and_context(tools: MemoryTools) -> None:
    ok(tools.call("memory_save", {"content": "我是一名前端工程师"}))
    ok(
        tools.call(
            "memory_save", {"content": "I prefer TypeScript over JavaScript", "memory_type": "preference"}
        )
    )
    stats = ok(tools.call("memory_stats", "{}"))
    assert stats["total"] == 2
    assert stats["by_type"] == {"fact": 1, "preference": 1}
    assert stats["by_status"] == {"active": 2}
    ctx = ok(tools.call("memory_context", {"query": "help me with a frontend task"}))
    assert "前端工程师" in ctx["text"] and "TypeScript" in ctx["text"]
    assert ctx["entries"] == 2 and ctx["tokens"] > 0 and ctx["by_source"] == {"semantic": 2}


def test_delete_is_soft_by_default_and_hard_on_request(tools: MemoryTools, mem: Memory) -> None:
    saved = ok(tools.call("memory_save", {"content": "用户正在开发支付模块", "memory_type": "context"}))
    deleted = ok(tools.call("memory_delete", {"memory_id": saved["id"]}))
    assert deleted == {"status": "archived", "id": saved["id"], "content": "用户正在开发支付模块"}
    assert mem.get(saved["id"]).status.value == "archived"  # kept, recoverable
    assert ok(tools.call("memory_search", {"query": "支付模块"}))["count"] == 0
    assert ok(tools.call("memory_stats"))["by_status"] == {"archived": 1}
    assert ok(tools.call("memory_delete", {"memory_id": saved["id"]}))["status"] == "already_archived"

    purged = ok(tools.call("memory_delete", {"memory_id": saved["id"], "hard": True}))
    assert purged["status"] == "purged"
    error(tools.call("memory_delete", {"memory_id": saved["id"]}), "not_found")
    assert ok(tools.call("memory_stats"))["total"] == 0


# ------------------------------------------------------------------ errors the model can read


def test_unknown_tool(tools: MemoryTools) -> None:
    err = error(tools.call("memory_forget", {}), "unknown_tool")
    assert "memory_save" in err["message"]


@pytest.mark.parametrize("raw", ['{"content": "我是', "not json", "{'content': 'x'}"])
def test_bad_json(tools: MemoryTools, raw: str) -> None:
    assert "JSON" in error(tools.call("memory_save", raw), "invalid_json")["message"]


@pytest.mark.parametrize("raw", ["[]", '"text"', "3", "null"])
def test_arguments_must_be_an_object(tools: MemoryTools, raw: str) -> None:
    error(tools.call("memory_save", raw), "invalid_input")


def test_missing_extra_and_wrongly_typed_arguments(tools: MemoryTools) -> None:
    missing = error(tools.call("memory_save", {}), "invalid_input")
    assert missing["field"] == "content" and "missing" in missing["message"]
    extra = error(tools.call("memory_search", {"query": "x", "user_id": "bob"}), "invalid_input")
    assert extra["field"] == "user_id"
    wrong = error(tools.call("memory_search", '{"query": "x", "k": "5"}'), "invalid_input")
    assert wrong["field"] == "k" and "integer" in wrong["message"]
    kind = error(
        tools.call("memory_save", {"content": "hello world", "memory_type": "opinion"}), "invalid_input"
    )
    assert kind["field"] == "memory_type" and "preference" in kind["message"]
    blank = error(tools.call("memory_save", {"content": "   "}), "invalid_input")
    assert blank["field"] == "content"


def test_every_problem_is_listed_and_limit_is_the_name_k_an_alias(tools: MemoryTools) -> None:
    many = error(
        tools.call("memory_search", {"limit": 0, "memory_type": "opinion", "colour": "red"}),
        "invalid_input",
    )
    for part in (
        "unexpected argument 'colour'",
        "missing required argument 'query'",
        "limit must be at least 1",
        "memory_type must be one of",
    ):
        assert part in many["message"], many
    assert many["field"] == "colour"
    assert len(many["problems"]) == 4 and "; ".join(many["problems"]) == many["message"]
    tools.call("memory_save", {"content": "The user works as a nurse in Lisbon"})
    assert ok(tools.call("memory_search", {"query": "job", "limit": 1}))["count"] == 1
    assert ok(tools.call("memory_search", {"query": "job", "k": 1}))["count"] == 1
    assert ok(tools.call("memory_search", {"query": "job", "limit": 1, "k": 1}))["count"] == 1
    both = error(tools.call("memory_search", {"query": "job", "limit": 1, "k": 2}), "invalid_input")
    assert "not both" in both["message"]


def test_a_scope_that_is_not_bound_is_refused(mem: Memory) -> None:
    tools = MemoryTools(mem, user_id="alice")
    err = error(
        tools.call("memory_save", {"content": "项目必须支持 PostgreSQL 16", "scope": "project"}),
        "invalid_input",
    )
    assert err["field"] == "scope" and "user" in err["message"]


def test_unexpected_failures_come_back_as_results(
    tools: MemoryTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(read_search, "search", boom)
    err = error(tools.call("memory_search", {"query": "x"}), "internal_error")
    assert "disk on fire" not in err["message"]  # internals stay in the log


def test_binding_needs_a_scope(mem: Memory) -> None:
    with pytest.raises(InvalidInput):
        MemoryTools(mem)
    with pytest.raises(InvalidInput):
        MemoryTools(mem, user_id=" ")


# ------------------------------------------------------------------ isolation


def test_another_tenant_cannot_find_or_delete(mem: Memory) -> None:
    a = MemoryTools(mem, user_id="alice", tenant_id="tenant-a")
    b = MemoryTools(mem, user_id="alice", tenant_id="tenant-b")
    saved = ok(a.call("memory_save", {"content": "我是一名前端工程师"}))
    assert ok(b.call("memory_search", {"query": "前端工程师"}))["count"] == 0
    assert ok(b.call("memory_stats"))["total"] == 0
    error(b.call("memory_delete", {"memory_id": saved["id"]}), "not_found")
    error(b.call("memory_delete", {"memory_id": saved["id"], "hard": True}), "not_found")
    assert ok(a.call("memory_search", {"query": "前端工程师"}))["results"][0]["id"] == saved["id"]


def test_another_user_in_the_same_tenant_cannot_delete(mem: Memory) -> None:
    alice = MemoryTools(mem, user_id="alice")
    bob = MemoryTools(mem, user_id="bob")
    saved = ok(alice.call("memory_save", {"content": "I am allergic to peanuts"}))
    assert ok(bob.call("memory_search", {"query": "allergy"}))["count"] == 0
    error(bob.call("memory_delete", {"memory_id": saved["id"]}), "not_found")
    assert mem.get(saved["id"]).status.value == "active"


def test_tools_take_the_owner_and_caller_values_built_at_the_edge(mem: Memory) -> None:
    """The same two values the library's bound view takes: whose memory, and who calls
    (tenant, actor, and the viewer that project visibility is checked against)."""
    owner = Owner(project_id="apollo")
    mem.add("apollo deploys on Fridays", project_id="apollo", tenant_id="t", visibility="members")
    member = MemoryTools(
        mem,
        owner=owner,
        caller=Caller(tenant_id="t", actor="k1", viewer=Viewer(actor="k1", projects=("apollo",))),
    )
    outsider = MemoryTools(
        mem, owner=owner, caller=Caller(tenant_id="t", viewer=Viewer(actor="k2", projects=()))
    )
    assert ok(member.call("memory_search", {"query": "when does apollo deploy?"}))["count"] == 1
    assert ok(outsider.call("memory_search", {"query": "when does apollo deploy?"}))["count"] == 0
    assert "apollo deploys" not in ok(outsider.call("memory_context", {"query": "apollo deploy"}))["text"]
    saved = ok(member.call("memory_save", {"content": "apollo freezes code on Thursdays"}))
    assert mem.history(saved["id"], tenant_id="t")[0].actor == "k1"


# ------------------------------------------------------------------ the async twin


@pytest.fixture
async def amem(tmp_path: Path) -> AsyncIterator[AsyncMemory]:
    async with AsyncMemory.open(tmp_path / "a.db") as m:
        yield m


async def test_async_tools_behave_the_same(amem: AsyncMemory) -> None:
    tools = AsyncMemoryTools(amem, user_id="alice", project_id="web")
    assert tools.schemas()[0]["function"]["parameters"]["properties"]["scope"]["enum"] == ["user", "project"]
    saved = ok(
        await tools.call(
            "memory_save",
            '{"content": "我们决定用 Next.js 而不是 Remix", "memory_type": "decision", "scope": "project"}',
        )
    )
    assert saved["status"] == "stored" and saved["memory"]["scope"] == "project"
    found = ok(await tools.call("memory_search", {"query": "which framework did we choose?"}))
    assert found["results"][0]["id"] == saved["id"]
    assert ok(await tools.call("memory_stats"))["by_scope"] == {"project": 1}
    error(await tools.call("memory_search", "{"), "invalid_json")
    error(await tools.call("memory_nope"), "unknown_tool")
    assert ok(await tools.call("memory_delete", {"memory_id": saved["id"]}))["status"] == "archived"
    other = AsyncMemoryTools(amem, user_id="alice", tenant_id="elsewhere")
    error(await other.call("memory_delete", {"memory_id": saved["id"]}), "not_found")


def test_saving_a_changed_value_answers_superseded(tools: MemoryTools, mem: Memory) -> None:
    """Every decision of the write pipeline has an answer (a supersede used to fail the call)."""
    first = ok(tools.call("memory_save", {"content": "My flight to Tokyo is on Friday at 9am"}))
    second = ok(tools.call("memory_save", {"content": "Actually, my flight to Tokyo is on Friday at 5pm"}))
    assert first["status"] == "stored"
    assert second["status"] == "superseded"
    assert mem.get(first["id"]).status.value == "superseded"
    assert not any("reinforced it instead" in r for r in second["reasons"])


# ------------------------------------------------------------------ procedural, documents, sessions


def test_the_tools_offered_follow_the_binding(mem: Memory) -> None:
    both = MemoryTools(mem, user_id="alice", session_id="s1")
    assert set(both.names) == {t["function"]["name"] for t in ALL_TOOLS} - {"memory_profile"}
    assert [t["function"]["name"] for t in both.schemas()] == list(both.names)
    learn = next(t for t in both.schemas() if t["function"]["name"] == "memory_learn")
    assert learn["function"]["parameters"]["properties"]["scope"]["enum"] == ["user"]  # no session learnings
    session_only = MemoryTools(mem, session_id="s1")
    assert {"memory_suggest", "memory_learn"}.isdisjoint(session_only.names)
    assert "memory_end_session" in session_only.names
    user_only = MemoryTools(mem, user_id="alice", profile_tool=True)
    assert "memory_end_session" not in user_only.names
    assert {"memory_profile", "memory_suggest", "memory_learn", "memory_add_document"} <= set(user_only.names)
    error(user_only.call("memory_end_session"), "unknown_tool")


def test_learn_then_suggest_a_plan_and_its_risks(tools: MemoryTools, mem: Memory) -> None:
    plan = {
        "kind": "decomposition",
        "task": "部署前端应用到生产环境",
        "subtasks": ["运行测试", "构建镜像", "灰度发布"],
        "strategy": "sequential",
        "succeeded": True,
    }
    first = ok(tools.call("memory_learn", plan))
    assert first["status"] == "recorded" and first["memory"]["scope"] == "user"
    again = ok(tools.call("memory_learn", json.dumps(plan, ensure_ascii=False)))
    assert again["status"] == "updated" and again["id"] == first["id"]
    assert again["learning"]["usage_count"] == 2 and again["learning"]["success_rate"] == 1.0
    risk = ok(
        tools.call(
            "memory_learn",
            {
                "kind": "failure",
                "pattern": "migration without backup",
                "indicators": ["数据库迁移", "migration"],
                "mitigation": "back up the database first",
                "severity": 4,
            },
        )
    )
    skill = ok(
        tools.call(
            "memory_learn",
            {
                "kind": "skill",
                "name": "release",
                "workflow": ["pytest", {"tool": "docker", "args": "build ."}],
            },
        )
    )
    assert skill["learning"]["workflow"][1] == {"step": 2, "tool": "docker", "args": "build ."}

    advice = ok(tools.call("memory_suggest", {"task": "部署前端应用到生产环境"}))
    assert advice["found"] and advice["kind"] == "decomposition" and advice["item_id"] == first["id"]
    assert advice["subtasks"] == plan["subtasks"] and advice["confidence"] == 1.0
    assert advice["risks"] == []
    advice = ok(tools.call("memory_suggest", {"task": "run the database migration for the orders table"}))
    assert [r["item_id"] for r in advice["risks"]] == [risk["id"]]
    assert advice["risks"][0]["mitigation"] == "back up the database first"
    nothing = ok(tools.call("memory_suggest", {"task": "write a haiku about autumn"}))
    assert not nothing["found"] and nothing["reason"]
    # The learnings are the library's: the same call there finds the same plan.
    assert mem.suggest("部署前端应用到生产环境", user_id="alice").item_id == first["id"]
    # Another user's tools see none of alice's learnings.
    bob = MemoryTools(mem, user_id="bob")
    nothing = ok(bob.call("memory_suggest", {"task": "run the database migration for the orders table"}))
    assert not nothing["found"] and nothing["risks"] == []


def test_learn_lists_every_problem_of_a_kind_at_once(tools: MemoryTools) -> None:
    err = error(tools.call("memory_learn", {"kind": "failure", "workflow": ["x"]}), "invalid_input")
    for name in ("pattern", "indicators", "mitigation", "severity", "workflow"):
        assert repr(name) in err["message"], name
    assert err["field"] == "pattern"
    err = error(tools.call("memory_learn", {"kind": "decomposition"}), "invalid_input")
    assert "'succeeded'" in err["message"]  # required for a plan, defaulted for a skill
    err = error(tools.call("memory_learn", {"kind": "skill", "workflow": [{"args": 1}]}), "invalid_input")
    assert "'tool'" in err["message"] and err["field"] == "workflow"
    assert "needs 'name'" in err["message"]  # the kind's rules are listed with the schema's problems
    err = error(tools.call("memory_learn", {"kind": "failure", "severity": 9, "owner": "x"}), "invalid_input")
    for part in ("severity must be at most 5", "unexpected argument 'owner'", "needs 'pattern'"):
        assert part in err["message"], part
    # What the library refuses comes back as a result too.
    err = error(
        tools.call(
            "memory_learn",
            {
                "kind": "decomposition",
                "task": "t",
                "subtasks": ["  "],
                "strategy": "parallel",
                "succeeded": True,
            },
        ),
        "invalid_input",
    )
    assert err["field"].startswith("subtasks")


def test_an_editor_updates_only_its_own_learnings(mem: Memory) -> None:
    owner = Owner(project_id="apollo")

    def key(actor: str, sees_all: bool) -> MemoryTools:
        return MemoryTools(
            mem,
            owner=owner,
            caller=Caller(tenant_id="t", actor=actor, viewer=Viewer(actor=actor, sees_all=sees_all)),
        )

    skill = {"kind": "skill", "name": "release", "workflow": ["pytest"], "scope": "project"}
    mine = ok(key("k1", sees_all=False).call("memory_learn", skill))
    theirs = ok(key("k2", sees_all=False).call("memory_learn", skill))
    assert theirs["status"] == "recorded" and theirs["id"] != mine["id"]
    admin = ok(key("k3", sees_all=True).call("memory_learn", skill))
    assert admin["status"] == "updated"
    assert mem.history(mine["id"], tenant_id="t")[0].actor == "k1"


def test_add_a_document_find_it_and_read_it_whole(tools: MemoryTools, mem: Memory) -> None:
    text = "\n\n".join(
        f"第{i}节：Apollo 项目的部署流程包括测试、构建和灰度发布，第{i}步需要人工审批。" for i in range(400)
    )
    added = ok(tools.call("memory_add_document", {"text": text, "title": "Apollo 部署手册"}))
    assert added["status"] == "stored" and added["chunks"] > 1 and len(added["ids"]) == added["chunks"]
    hit = ok(tools.call("memory_search", {"query": "Apollo 灰度发布", "limit": 1}))["results"][0]
    assert hit["parent_id"] == added["parent_id"]
    whole = ok(tools.call("memory_get_document", {"parent_id": hit["parent_id"]}))
    assert (
        whole["text"] == text and whole["title"] == "Apollo 部署手册" and whole["chunks"] == added["chunks"]
    )
    assert mem.get_document(added["parent_id"]) == text

    err = error(
        MemoryTools(mem, user_id="bob").call("memory_get_document", {"parent_id": added["parent_id"]}),
        "not_found",
    )
    assert err["field"] == "parent_id"
    error(
        MemoryTools(mem, user_id="alice", tenant_id="other").call(
            "memory_get_document", {"parent_id": added["parent_id"]}
        ),
        "not_found",
    )
    error(
        tools.call("memory_get_document", {"parent_id": added["ids"][0]}), "not_found"
    )  # a chunk id is not a document
    refused = error(tools.call("memory_add_document", {"text": "ok"}), "invalid_input")
    assert refused["field"] == "text" and "not stored" in refused["message"]


def test_end_session_archives_its_memories_and_queues_an_episode(tools: MemoryTools, mem: Memory) -> None:
    kept = ok(
        tools.call(
            "memory_save", {"content": "I prefer dark mode in every editor", "memory_type": "preference"}
        )
    )
    passing = ok(
        tools.call(
            "memory_save",
            {"content": "这次对话里我们在调试登录页的样式问题", "memory_type": "context", "scope": "session"},
        )
    )
    mem.remember(
        [("user", "我们今天在调试登录页的样式"), ("assistant", "好的，先看一下 CSS 的加载顺序")],
        session_id="s1",
        user_id="alice",
    )
    ended = ok(tools.call("memory_end_session"))
    assert ended["status"] == "ended" and ended["session_id"] == "s1" and ended["episode_job_id"]
    again = ok(tools.call("memory_end_session"))
    assert again["already_ended"] and again["episode_job_id"] is None and not ended["already_ended"]
    assert mem.get(passing["id"]).status.value == "archived"
    assert mem.get(kept["id"]).status.value == "active"


async def test_async_tools_learn_suggest_and_keep_documents(amem: AsyncMemory) -> None:
    tools = AsyncMemoryTools(amem, project_id="web", session_id="s9")
    plan = {
        "kind": "decomposition",
        "task": "migrate the blog to Next.js",
        "subtasks": ["routes", "data", "deploy"],
        "strategy": "sequential",
        "succeeded": True,
    }
    learned = ok(await tools.call("memory_learn", plan))
    assert learned["memory"]["scope"] == "project"
    advice = ok(await tools.call("memory_suggest", {"task": "migrate the blog to Next.js"}))
    assert advice["found"] and advice["item_id"] == learned["id"]
    added = ok(
        await tools.call("memory_add_document", {"text": "The blog keeps its posts in MDX files. " * 40})
    )
    whole = ok(await tools.call("memory_get_document", {"parent_id": added["parent_id"]}))
    assert whole["text"].startswith("The blog keeps its posts in MDX files.")
    assert ok(await tools.call("memory_end_session"))["status"] == "ended"  # no message: nothing to end
    await amem.add_messages("s9", [("user", "Let us move the blog to Next.js this week")], project_id="web")
    ended = ok(await tools.call("memory_end_session"))
    assert ended["episode_job_id"] and not ended["already_ended"]
    again = ok(await tools.call("memory_end_session"))
    assert again["already_ended"] and again["episode_job_id"] is None
    error(await tools.call("memory_learn", {"kind": "skill"}), "invalid_input")


def test_compress_then_undo_it_over_the_bound_scopes_only(tools: MemoryTools, mem: Memory) -> None:
    facts = [
        "Alice's team deploys the billing service with Helm charts",
        "The billing service of Alice's team is deployed using Helm charts",
        "Alice's team uses Helm charts to deploy the billing service",
    ]
    mine = [mem.add(f, user_id="alice", memory_type="fact", infer=False).item for f in facts]
    theirs = [mem.add(f, user_id="bob", memory_type="fact", infer=False).item for f in facts]
    dry = ok(tools.call("memory_compress", {"older_than_days": 0, "dry_run": True}))
    assert dry["dry_run"] and dry["groups"] and dry["compressed"] == 3
    assert all(mem.get(i.id).status.value == "active" for i in mine if i)  # a dry run changes nothing
    done = ok(tools.call("memory_compress", {"older_than_days": 0, "memory_type": "fact"}))
    core_id = done["groups"][0]["cores"][0]["id"]
    assert {mem.get(i.id).status.value for i in mine if i} == {"archived"}
    assert {mem.get(i.id).status.value for i in theirs if i} == {"active"}  # bob's are not bound here
    assert (
        ok(tools.call("memory_search", {"query": "how is billing deployed?"}))["results"][0]["id"] == core_id
    )
    undone = ok(tools.call("memory_uncompress", {"core_id": core_id}))
    assert sorted(undone["restored"]) == sorted(i.id for i in mine if i)
    assert {mem.get(i.id).status.value for i in mine if i} == {"active"}
    # The error shape of every other tool: what is wrong, and in which argument.
    again = error(tools.call("memory_uncompress", {"core_id": core_id}), "invalid_input")
    assert again["field"] == "core_id" and "already undone" in again["message"]
    missing = error(tools.call("memory_uncompress", {"core_id": "nope"}), "not_found")
    assert missing["field"] == "core_id"
    bad = error(tools.call("memory_compress", {"older_than_days": -1, "max_access": "x"}), "invalid_input")
    assert bad["field"] == "older_than_days" and "max_access" in bad["message"]


def test_another_users_core_memory_cannot_be_uncompressed(mem: Memory) -> None:
    facts = [
        "Bob waters the office plants every Monday morning",
        "Every Monday morning Bob waters the plants in the office",
        "The office plants are watered by Bob on Monday mornings",
    ]
    for f in facts:
        mem.add(f, user_id="bob", memory_type="habit", infer=False)
    bobs = MemoryTools(mem, user_id="bob")
    core_id = ok(bobs.call("memory_compress", {"older_than_days": 0}))["groups"][0]["cores"][0]["id"]
    alices = MemoryTools(mem, user_id="alice")
    assert error(alices.call("memory_uncompress", {"core_id": core_id}), "not_found")["field"] == "core_id"
    assert mem.get(core_id).status.value == "active"
