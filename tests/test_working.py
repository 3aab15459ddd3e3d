"""Working memory, tool calls kept with their results, LangChain messages, AsyncMemory
behaving like Memory awaited."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory, Memory
from jiyi.session.working import WorkingMemory
from jiyi.store.sqlite import SQLiteStore


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "w.db"), embedder="hash:256", background=False) as m:
        yield m


# LangChain's message classes, as their attributes are (langchain is not a dependency).
class HumanMessage:
    type = "human"

    def __init__(self, content: Any, name: str | None = None) -> None:
        self.content, self.name = content, name


class AIMessage:
    type = "ai"

    def __init__(self, content: Any, tool_calls: list[dict[str, Any]] | None = None) -> None:
        self.content, self.tool_calls, self.name = content, tool_calls or [], None


class ToolMessage:
    type = "tool"

    def __init__(self, content: str, tool_call_id: str, name: str) -> None:
        self.content, self.tool_call_id, self.name = content, tool_call_id, name


def test_remember_accepts_langchain_and_openai_shaped_messages(mem: Memory) -> None:
    call = {"name": "weather", "args": {"city": "Osaka"}, "id": "c1", "type": "tool_call"}
    result = mem.remember(
        [
            HumanMessage("Remember that I am allergic to peanuts", name="li"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("sunny, 24°C", "c1", "weather"),
            AIMessage([{"type": "text", "text": "Noted."}, {"type": "image_url", "image_url": {"url": "x"}}]),
            {"type": "human", "data": {"content": "and I live in Osaka"}},  # message_to_dict
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function"}]},
            {"role": "tool", "content": "ok", "tool_call_id": "c2"},
        ],
        session_id="s",
        user_id="li",
    )
    stored = result.messages
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert stored[0].name == "li"
    assert stored[1].tool_calls == (call,)
    assert stored[2].metadata["tool_call_id"] == "c1" and stored[2].name == "weather"
    assert stored[3].content == "Noted."
    assert stored[4].content == "and I live in Osaka"
    assert stored[5].content == "" and stored[6].metadata["tool_call_id"] == "c2"
    mem.process_jobs()
    assert any("peanuts" in i.content for i in mem.list(user_id="li").items)

    class Unknown:
        type = "robot"
        content = "beep"

    with pytest.raises(InvalidInput, match="LangChain message type 'robot'"):
        mem.remember([Unknown()], session_id="s", user_id="li")
    with pytest.raises(InvalidInput, match="LangChain message"):
        mem.remember([42], session_id="s", user_id="li")  # type: ignore[list-item]


def test_working_window_never_splits_a_tool_call_from_its_results(mem: Memory) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    mem.add_messages(
        "s",
        [
            ("system", "You are an agent."),
            ("user", "Find the release notes of version 2 and summarise them for me please"),
            {"role": "assistant", "content": "Searching.", "tool_calls": [call]},
            {"role": "tool", "content": "Release notes: faster search, a new web page.", "name": "search"},
            {"role": "tool", "content": "Second page of results: fixes to the importer.", "name": "search"},
            ("assistant", "Version 2 brings faster search and a new web page."),
        ],
    )
    msgs = mem.messages("s")
    tail = msgs[-1].token_count
    group = sum(m.token_count for m in msgs[2:5])
    # Room for the last answer and both tool results, but not for the call: all three go.
    window = mem.working_window("s", max_tokens=msgs[0].token_count + tail + group - 1)
    assert [m.role for m in window] == ["system", "assistant"]
    window = mem.working_window("s", max_tokens=msgs[0].token_count + tail + group)
    assert [m.role for m in window] == ["system", "assistant", "tool", "tool", "assistant"]
    assert all(m.role != "tool" or window[i - 1].role in ("assistant", "tool") for i, m in enumerate(window))


def test_working_memory_is_cleared_at_the_end_and_resumes_from_a_checkpoint(mem: Memory) -> None:
    mem.add_messages("s", [("user", "Fix the flaky test in the worker please")])
    with mem.working("s") as wm:
        first = wm.add_todo("reproduce the failure")
        wm.add_todo("find the race")
        wm.complete(first)
        call = wm.record_tool_call("run_tests", {"path": "tests/test_worker.py"})
        wm.state["hypothesis"] = "the wake event is cleared too late"
        wm.note("fails one run in ten")
        assert wm.pending() == ["find the race"]
        prompt = wm.as_prompt()
        assert (
            "- [x] reproduce the failure" in prompt
            and "run_tests(path='tests/test_worker.py') -> (pending)" in prompt
        )
        cp = wm.checkpoint()
        wm.set_result(call["id"], "1 failed")
    assert cp.agent_state["working"]["todo"][1] == {"task": "find the race", "done": False}
    assert cp.pending_tool_calls[0]["name"] == "run_tests"
    assert [m.content for m in cp.messages] == ["Fix the flaky test in the worker please"]
    # Cleared and closed when the invocation ended.
    assert (wm.todo, wm.tool_calls, wm.state, wm.notes, wm.closed) == ([], [], {}, [], True)
    with pytest.raises(InvalidInput, match="ended"):
        wm.add_todo("too late")
    # A new invocation starts empty, or from the last checkpoint when asked.
    with mem.working("s") as fresh:
        assert fresh.todo == []
    with mem.working("s", resume=True) as resumed:
        assert resumed.pending() == ["find the race"]
        assert resumed.state == {"hypothesis": "the wake event is cleared too late"}
        assert resumed.tool_calls[0]["result"] is None  # the checkpoint was taken before the result
    with pytest.raises(InvalidInput, match="session_id"):
        mem.working("").__enter__()
    with mem.working("s") as wm2, pytest.raises(InvalidInput):
        wm2.record_tool_call("bad", {"x": float("nan")})


def test_working_memory_is_cleared_when_the_invocation_fails(mem: Memory) -> None:
    seen: list[object] = []

    def invocation() -> None:
        with mem.working("s") as wm:
            seen.append(wm)
            wm.add_todo("step one")
            raise RuntimeError("tool crashed")

    with pytest.raises(RuntimeError):
        invocation()
    wm = seen[0]
    assert isinstance(wm, WorkingMemory) and wm.todo == [] and wm.closed


async def test_async_memory_runs_its_queue_without_start_worker(tmp_path: Path) -> None:
    async with AsyncMemory(SQLiteStore(tmp_path / "a.db"), embedder="hash:256") as amem:
        await amem.remember(
            [HumanMessage("Remember that the staging server is in Frankfurt")], session_id="s", user_id="ops"
        )
        assert await amem.wait_for_jobs(timeout=30)
        page = await amem.list(user_id="ops")
        assert any("Frankfurt" in i.content for i in page.items)
        async with amem.working("s") as wm:
            wm.add_todo("check the server")
            cp = await wm.checkpoint()
        assert cp.agent_state["working"]["todo"] == [{"task": "check the server", "done": False}]
        assert wm.closed
    async with AsyncMemory(SQLiteStore(tmp_path / "b.db"), embedder="hash:256", background=False) as quiet:
        await quiet.remember([("user", "Remember that I use vim")], session_id="s", user_id="u")
        assert await quiet.jobs(statuses=["queued"])  # nothing runs it in the background
        assert await quiet.wait_for_jobs(timeout=30)  # waiting runs it here
        assert not await quiet.jobs(statuses=["queued", "running"])


async def test_closing_stops_the_worker_even_when_a_wake_and_the_cancel_meet(tmp_path: Path) -> None:
    """On Python 3.11 asyncio.wait_for swallows a cancellation that arrives just as the
    wait it guards completes; aclose() must still stop the worker (a CI run hung here)."""
    import asyncio
    import time

    for _ in range(5):
        amem = AsyncMemory(SQLiteStore(tmp_path / "c.db"), embedder="hash:256")
        amem.start_worker(interval=5.0)
        await asyncio.sleep(0.05)  # the worker is now waiting for a wake
        amem._wake.set()  # the wait completes ...
        started = time.monotonic()
        await asyncio.wait_for(amem.aclose(), timeout=4)  # ... as the cancel arrives
        # Swallowed, the worker would wait out its 5 s interval (or forever) instead.
        assert amem._task.done() and time.monotonic() - started < 3
