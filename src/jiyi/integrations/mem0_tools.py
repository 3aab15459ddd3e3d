"""The tool names of mem0's OpenMemory MCP server, as aliases of jiyi's tools.

A client (or a prompt) written for OpenMemory calls ``add_memories``, ``search_memory``,
``list_memories`` and ``delete_all_memories``; with ``mem0_names=True`` the agent tools
(and ``jiyi mcp --mem0-names``) offer them beside jiyi's own, over the same bound
owner and caller:

* ``add_memories {text}`` is ``memory_save`` (the write gate, reconciliation, redaction);
* ``search_memory {query}`` is ``memory_search``;
* ``list_memories {}`` lists the served scope's active memories, oldest first;
* ``delete_all_memories {}`` archives every active memory of the served scope (as
  OpenMemory marks them deleted; each is restorable and the change is in its history).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from jiyi import items
from jiyi.effects import Flow
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.validate import MAX_LIMIT

if TYPE_CHECKING:
    from jiyi.integrations.tools import _ToolsBase

WRITE: Final = frozenset({"add_memories", "delete_all_memories"})
"""The aliases that change memory."""
DESTRUCTIVE: Final = frozenset({"delete_all_memories"})
"""The aliases that change memories a key may not have created (owner or admin only)."""


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


MEM0_TOOLS: Final[list[dict[str, Any]]] = [
    _function(
        "add_memories",
        "Remember something about the user (mem0 OpenMemory's name for memory_save): call it when the "
        "user shares a durable fact or preference or asks you to remember something. Write one "
        "self-contained statement. Returns status stored, reinforced or refused, with the reasons.",
        {"text": {"type": "string", "minLength": 1, "description": "What to remember, as one statement."}},
        ["text"],
    ),
    _function(
        "search_memory",
        "Search the user's memories by meaning and keywords, in Chinese and English (mem0 OpenMemory's "
        "name for memory_search). Call it before answering anything that depends on what the user said "
        "earlier. Returns the best matches with id, content and score.",
        {"query": {"type": "string", "minLength": 1, "description": "What to look for."}},
        ["query"],
    ),
    _function(
        "list_memories",
        "List the memories kept for this user (active ones, oldest first, at most 1000).",
        {},
        [],
    ),
    _function(
        "delete_all_memories",
        "Archive every memory kept for this user (mem0 OpenMemory's delete_all_memories). Only when "
        "the user explicitly asks to forget everything.",
        {},
        [],
    ),
]


def _brief(item: MemoryItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "memory": item.content,
        "memory_type": item.memory_type.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def _active(tools: _ToolsBase) -> Flow[list[MemoryItem]]:
    """The served scopes' active memories, oldest first, at most ``MAX_LIMIT``."""
    page = yield from items.list_page(
        tools.rt,
        user_id=tools.ids.get("user_id"),
        project_id=tools.ids.get("project_id"),
        session_id=tools.ids.get("session_id"),
        agent_id=tools.ids.get("agent_id"),
        tenant_id=tools.tenant_id,
        viewer=tools.viewer,
        statuses=[Status.ACTIVE],
        include_expired=False,
        limit=MAX_LIMIT,
    )
    return list(page.items)


def add_memories(tools: _ToolsBase, args: dict[str, Any]) -> Flow[dict[str, Any]]:
    return (yield from tools._save({"content": args["text"], "memory_type": MemoryType.FACT.value}))


def search_memory(tools: _ToolsBase, args: dict[str, Any]) -> Flow[dict[str, Any]]:
    return (yield from tools._search({"query": args["query"]}))


def list_memories(tools: _ToolsBase, args: dict[str, Any]) -> Flow[dict[str, Any]]:
    found = yield from _active(tools)
    return {"count": len(found), "results": [_brief(i) for i in found]}


def delete_all_memories(tools: _ToolsBase, args: dict[str, Any]) -> Flow[dict[str, Any]]:
    count = 0
    while True:  # a page at a time: what is archived leaves the next page
        found = yield from _active(tools)
        for item in found:
            yield from items.delete(
                tools.rt,
                item.id,
                tenant_id=tools.tenant_id,
                viewer=tools.viewer,
                actor=tools.actor,
                reason="delete_all_memories (mem0 OpenMemory name)",
            )
        count += len(found)
        if len(found) < MAX_LIMIT:
            return {"status": "archived", "count": count}


FLOWS: Final[dict[str, Callable[[_ToolsBase, dict[str, Any]], Flow[dict[str, Any]]]]] = {
    "add_memories": add_memories,
    "search_memory": search_memory,
    "list_memories": list_memories,
    "delete_all_memories": delete_all_memories,
}
