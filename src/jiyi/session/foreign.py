"""Messages in other libraries' shapes, read as jiyi's ``{"role", "content", ...}`` mappings.

LangChain's ``HumanMessage`` / ``AIMessage`` / ``SystemMessage`` / ``ToolMessage`` (and
their dict form from ``message_to_dict``) are recognised by duck typing: an object with a
string ``type`` and a ``content`` attribute. langchain is never imported, so it stays an
optional dependency of the caller, not of jiyi.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jiyi.errors import InvalidInput

# LangChain's message ``type`` -> jiyi's role.
_LANGCHAIN_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


def is_langchain_message(raw: object) -> bool:
    """An object shaped like a LangChain message (a ``BaseMessage`` or a chunk of one)."""
    return isinstance(getattr(raw, "type", None), str) and hasattr(raw, "content")


def content_text(content: object) -> str:
    """A message's content as text: LangChain and OpenAI allow a list of parts, of which
    the text parts are kept (an image or audio part has no text to remember)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    raise InvalidInput(f"message content must be text, not {type(content).__name__}", field="content")


def from_langchain(raw: Any) -> dict[str, Any]:
    """A LangChain message as a jiyi message mapping (role, content, name, tool calls)."""
    kind = raw.type
    role = _LANGCHAIN_ROLES.get(kind)
    if kind == "chat":  # ChatMessage carries its own role
        role = _LANGCHAIN_ROLES.get(str(getattr(raw, "role", "")))
    if role is None:
        raise InvalidInput(
            f"unknown LangChain message type {kind!r}; use human, ai, system or tool messages",
            field="messages",
        )
    data: dict[str, Any] = {"role": role, "content": content_text(raw.content)}
    name = getattr(raw, "name", None)
    if isinstance(name, str) and name:
        data["name"] = name
    calls = getattr(raw, "tool_calls", None)
    if role == "assistant" and calls:
        data["tool_calls"] = [_tool_call(call) for call in calls]
    call_id = getattr(raw, "tool_call_id", None)
    if role == "tool" and isinstance(call_id, str):
        data["metadata"] = {"tool_call_id": call_id}
    return data


def _tool_call(call: Any) -> dict[str, Any]:
    # LangChain: {"name", "args", "id", "type": "tool_call"}; kept as the JSON it is.
    if isinstance(call, Mapping):
        return {str(k): v for k, v in call.items()}
    raise InvalidInput(f"a tool call must be a mapping, not {type(call).__name__}", field="tool_calls")


def as_mapping(raw: object) -> object:
    """``raw`` as jiyi reads messages: a LangChain message or its ``message_to_dict`` form
    becomes a mapping; an OpenAI-style mapping gets its text parts joined and
    ``tool_call_id`` kept in metadata; anything else is returned unchanged."""
    if is_langchain_message(raw) and not isinstance(raw, Mapping):
        return from_langchain(raw)
    if isinstance(raw, Mapping):
        data = raw.get("data")
        if isinstance(raw.get("type"), str) and "role" not in raw and isinstance(data, Mapping):
            # LangChain's message_to_dict: {"type": "human", "data": {"content": ..., ...}}
            return from_langchain(_Attrs(raw["type"], data))
        if "role" in raw and (
            raw.get("content") is None or isinstance(raw.get("content"), list) or "tool_call_id" in raw
        ):
            fixed = {k: v for k, v in raw.items() if k != "tool_call_id"}
            fixed["content"] = content_text(raw.get("content") or "")
            if raw.get("tool_call_id") is not None:
                fixed["metadata"] = {**(raw.get("metadata") or {}), "tool_call_id": raw["tool_call_id"]}
            return fixed
    return raw


class _Attrs:
    """A ``message_to_dict`` payload seen through attributes, like the message it was."""

    def __init__(self, kind: str, data: Mapping[str, Any]) -> None:
        self.type = kind
        self.content = data.get("content", "")
        self.name = data.get("name")
        self.tool_calls = data.get("tool_calls")
        self.tool_call_id = data.get("tool_call_id")
        self.role = data.get("role")
