"""The cross-tenant matrix over every agent tool, as each role of another tenant.

An MCP server with keys answers each call through ``MemoryTools`` bound to the served
scope and to the calling key's ``Caller`` (tenant, viewer, actor; see
``jiyi.server.mcp._ToolServer.dispatcher_of``). So every tool the server offers is tried
here with that same dispatcher, as the owner, admin, editor and viewer of tenant B, with
arguments that name tenant A's texts and ids. Counted: answers that contain anything of
A's that the call did not itself send, and A's rows changed afterwards. Both must be zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jiyi.integrations.tools import MemoryTools
from jiyi.memory import Memory
from jiyi.server.auth import Principal, Role
from jiyi.who import Owner

A_FACT = "Alice's locker code at the Zurich office is 4711"
A_TASK = "rotate the production database credentials"
A_DOC = "Quarterly plan of acme: expand the Zurich team and retire the old billing system. " * 8


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "matrix.db", embedder="hash:256", background=False) as m:
        yield m


def _plant(mem: Memory) -> tuple[list[str], set[str]]:
    """Tenant A's memory, learning and document for user alice: (ids, secrets to look for)."""
    fact = mem.add(A_FACT, user_id="alice", session_id="s1", tenant_id="acme", infer=False).item
    assert fact is not None
    plan = mem.record_decomposition(
        A_TASK,
        ["revoke old keys", "issue new keys"],
        strategy="sequential",
        succeeded=True,
        user_id="alice",
        tenant_id="acme",
    )
    chunks = mem.add_document(A_DOC, title="acme plan", user_id="alice", tenant_id="acme")
    parent = chunks[0].thread_id
    assert parent is not None
    ids = [fact.id, plan.id, parent, chunks[0].id]
    return ids, {"4711", "Zurich", "revoke old keys", "billing system", *ids}


def _rows(mem: Memory) -> list[tuple[str, int, str]]:
    page = mem.list(tenant_id="acme", include_turns=True, limit=1000)
    return sorted((i.id, i.version, i.status.value) for i in page.items)


def _attempts(tool: str, a_ids: list[str]) -> list[dict[str, Any]]:
    """Arguments for ``tool`` that name tenant A's things."""
    by_tool: dict[str, list[dict[str, Any]]] = {
        "memory_save": [{"content": "globex keeps its own locker notes"}],
        "memory_search": [{"query": A_FACT}, {"query": "locker code"}],
        "memory_delete": [{"memory_id": i, "hard": True} for i in a_ids],
        "memory_stats": [{}],
        "memory_context": [{"query": "locker code Zurich"}],
        "memory_profile": [{}],
        "memory_suggest": [{"task": A_TASK}],
        "memory_learn": [
            {"kind": "decomposition", "task": A_TASK, "subtasks": ["a", "b"], "succeeded": False}
        ],
        "memory_add_document": [{"text": "tenant B's own notes about lockers. " * 10}],
        "memory_get_document": [{"parent_id": i} for i in a_ids],
        "memory_end_session": [{}],
        "memory_compress": [{"older_than_days": 0}, {"older_than_days": 0, "dry_run": True}],
        "memory_uncompress": [{"core_id": i} for i in a_ids],
    }
    return by_tool[tool]


def _shows(text: str, secret: str) -> bool:
    """``secret`` stands in ``text`` as a whole token: "4711" inside a new id or a
    timestamp's microseconds (...:12.471123) is chance, not tenant A's locker code."""
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", text) is not None


def test_no_tool_shows_or_changes_another_tenants_memory(mem: Memory) -> None:
    a_ids, secrets = _plant(mem)
    before = _rows(mem)
    attempts = leaks = 0
    offered: set[str] = set()
    for role in Role:
        who = Principal(key_id=f"globex-{role.value}", tenant="globex", role=role)
        tools = MemoryTools(
            mem, owner=Owner(user_id="alice", session_id="s1"), caller=who.caller, profile_tool=True
        )
        for schema in tools.schemas():
            name = schema["function"]["name"]
            offered.add(name)
            for args in _attempts(name, a_ids):
                attempts += 1
                answer = json.dumps(tools.call(name, args), ensure_ascii=False)
                asked = json.dumps(args, ensure_ascii=False)
                # What the caller sent may be echoed back ("no memory with id X"); anything
                # else of tenant A's in an answer is a leak.
                if any(_shows(answer, s) and not _shows(asked, s) for s in secrets):
                    leaks += 1
    print(f"tool matrix: {len(offered)} tools x {len(Role)} roles, {attempts} attempts, {leaks} leaks")
    assert offered >= {
        "memory_save",
        "memory_search",
        "memory_delete",
        "memory_stats",
        "memory_context",
        "memory_profile",
        "memory_suggest",
        "memory_learn",
        "memory_add_document",
        "memory_get_document",
        "memory_end_session",
        "memory_compress",
        "memory_uncompress",
    }
    assert attempts >= 4 * 15
    assert leaks == 0
    assert _rows(mem) == before  # nothing of tenant A changed
