"""Working memory (seed 000): one agent invocation's scratch, in process.

The todo list, the tool calls made so far and the reasoning state of a single run of an
agent. It lives in the process (no store round trip per change), is saved with the
session when asked (:meth:`WorkingMemory.checkpoint`: the session's checkpoint carries it
as ``agent_state["working"]``, next to the messages), can be resumed from that checkpoint
after an interruption, and is cleared when the invocation ends::

    with mem.working(session_id="s1") as wm:
        wm.add_todo("find the failing test")
        wm.record_tool_call("run_tests", {"path": "tests/"}, result="2 failed")
        wm.state["hypothesis"] = "a race in the worker"
        prompt_part = wm.as_prompt()
    # here wm is empty and closed

``Memory.working`` / ``AsyncMemory.working`` open one (see :mod:`jiyi.memory`).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jiyi.errors import InvalidInput
from jiyi.model import FIELD_LIMITS, check_json
from jiyi.session.model import Checkpoint

__all__ = ["AsyncWorkingMemory", "WorkingMemory", "working_state"]

STATE_KEY = "working"
"""Where a checkpoint's ``agent_state`` holds the working memory."""


class _Scratch:
    """The data of a working memory and the operations on it (no I/O)."""

    def __init__(self, session_id: str) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise InvalidInput("session_id must be a non-empty string", field="session_id")
        self.session_id = session_id
        self.todo: list[dict[str, Any]] = []
        """``{"task": str, "done": bool}`` in the order they were added."""
        self.tool_calls: list[dict[str, Any]] = []
        """``{"id", "name", "arguments", "result"}``; ``result`` is None while pending."""
        self.state: dict[str, Any] = {}
        """Free-form reasoning state (JSON values): plan, hypothesis, step, ..."""
        self.notes: list[str] = []
        self.closed = False

    def _open(self) -> None:
        if self.closed:
            raise InvalidInput("this working memory has ended with its invocation; open a new one")

    def add_todo(self, task: str) -> int:
        """Add a task; returns its index."""
        self._open()
        if not isinstance(task, str) or not task.strip():
            raise InvalidInput("a todo task must be a non-empty string", field="task")
        self.todo.append({"task": task, "done": False})
        return len(self.todo) - 1

    def complete(self, task: str | int) -> None:
        """Mark a task done, by index or by its text."""
        self._open()
        for i, entry in enumerate(self.todo):
            if task == i or task == entry["task"]:
                entry["done"] = True
                return
        raise InvalidInput(f"no todo task {task!r}", field="task")

    def pending(self) -> list[str]:
        """The tasks not done yet, in order."""
        return [entry["task"] for entry in self.todo if not entry["done"]]

    def record_tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        result: Any = None,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Record a tool call (its result now, or later with :meth:`set_result`)."""
        self._open()
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("a tool call needs a name", field="name")
        entry = {
            "id": call_id or f"call_{len(self.tool_calls) + 1}",
            "name": name,
            "arguments": dict(arguments or {}),
            "result": result,
        }
        _check_json(entry, "arguments")  # it must survive a checkpoint
        self.tool_calls.append(entry)
        return entry

    def set_result(self, call_id: str, result: Any) -> None:
        """Fill in the result of a pending tool call."""
        self._open()
        _check_json(result, "result")
        for entry in self.tool_calls:
            if entry["id"] == call_id:
                entry["result"] = result
                return
        raise InvalidInput(f"no tool call {call_id!r}", field="call_id")

    def note(self, text: str) -> None:
        """Keep a line of reasoning."""
        self._open()
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("a note must be a non-empty string", field="text")
        self.notes.append(text)

    def snapshot(self) -> dict[str, Any]:
        """Everything, as JSON (a copy: later changes do not alter it)."""
        _check_json(self.state, "state")
        return copy.deepcopy(
            {"todo": self.todo, "tool_calls": self.tool_calls, "state": self.state, "notes": self.notes}
        )

    def load(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the contents with a :meth:`snapshot`."""
        self._open()
        data = copy.deepcopy(dict(snapshot))
        self.todo = list(data.get("todo", []))
        self.tool_calls = list(data.get("tool_calls", []))
        self.state = dict(data.get("state", {}))
        self.notes = list(data.get("notes", []))

    def as_prompt(self, *, max_tool_calls: int = 10) -> str:
        """A short text for the model: the todo list, the last tool calls, the notes."""
        lines: list[str] = []
        if self.todo:
            lines.append("## Todo")
            lines += [f"- [{'x' if e['done'] else ' '}] {e['task']}" for e in self.todo]
        if self.tool_calls:
            lines.append("## Tool calls")
            for e in self.tool_calls[-max_tool_calls:]:
                shown = "(pending)" if e["result"] is None else str(e["result"])[:200]
                lines.append(f"- {e['name']}({_args(e['arguments'])}) -> {shown}")
        if self.notes:
            lines.append("## Notes")
            lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines)

    def clear(self) -> None:
        """Empty it (what the end of the invocation does)."""
        self.todo, self.tool_calls, self.state, self.notes = [], [], {}, []

    def _end(self) -> None:
        self.clear()
        self.closed = True

    def _pending_calls(self) -> list[dict[str, Any]]:
        return [e for e in self.tool_calls if e["result"] is None]


def _check_json(value: object, name: str) -> None:
    try:
        check_json(value, FIELD_LIMITS)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc}", field=name) from None


def _args(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


def working_state(checkpoint: Checkpoint) -> dict[str, Any] | None:
    """The working memory a checkpoint carries, if any."""
    state = checkpoint.agent_state.get(STATE_KEY)
    return state if isinstance(state, dict) else None


class WorkingMemory(_Scratch):
    """The working memory of one invocation, for :class:`~jiyi.memory.Memory`."""

    def __init__(self, session_id: str, save: Callable[..., Checkpoint]) -> None:
        super().__init__(session_id)
        self._save = save

    def checkpoint(self, *, label: str | None = None) -> Checkpoint:
        """Save it with the session (messages included) so a later run can resume."""
        self._open()
        return self._save(
            self.session_id,
            agent_state={STATE_KEY: self.snapshot()},
            pending_tool_calls=self._pending_calls(),
            label=label or "working memory",
        )


class AsyncWorkingMemory(_Scratch):
    """The working memory of one invocation, for :class:`~jiyi.memory.AsyncMemory`."""

    def __init__(self, session_id: str, save: Callable[..., Awaitable[Checkpoint]]) -> None:
        super().__init__(session_id)
        self._save = save

    async def checkpoint(self, *, label: str | None = None) -> Checkpoint:
        """Save it with the session (messages included) so a later run can resume."""
        self._open()
        return await self._save(
            self.session_id,
            agent_state={STATE_KEY: self.snapshot()},
            pending_tool_calls=self._pending_calls(),
            label=label or "working memory",
        )
