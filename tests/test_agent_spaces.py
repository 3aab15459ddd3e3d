"""Agents do not see each other's memory (seeds 000/004): what a conversation with agent A
yields about user u is A's, for u. A search naming another agent B does not return it; a
search naming A, or no agent (the whole user), does; memories of the user given without an
agent are every agent's. Real SQLite; nothing is mocked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jiyi.memory import Memory
from jiyi.store.sqlite import SQLiteStore

FACT = "I prefer green tea in the morning"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "a.db"), embedder="hash:256", background=False) as m:
        m.remember([("user", FACT)], session_id="s1", user_id="u", agent_id="A")
        m.process_jobs()
        yield m


def _found(mem: Memory, **scopes: str) -> set[str]:
    return {h.item.content for h in mem.search("green tea", limit=20, **scopes)}


def test_an_agents_extracted_memory_is_not_anothers(mem: Memory) -> None:
    extracted = [i for i in mem.list(user_id="u").items if "resource" not in i.tags]
    assert [i.content for i in extracted] == [FACT] and extracted[0].agent_id == "A"
    assert FACT not in _found(mem, user_id="u", agent_id="B")
    assert FACT in _found(mem, user_id="u", agent_id="A")
    assert FACT in _found(mem, user_id="u")  # the whole user: every agent's memories
    assert not [c for c in _found(mem, user_id="u", agent_id="B") if "green tea" in c]  # not the turn either


def test_shared_user_memories_and_explicit_multi_scope_calls(mem: Memory) -> None:
    shared = mem.add("I drink green tea without sugar", user_id="u", memory_type="preference").item
    assert shared is not None
    project = mem.add("The green tea supplier for the office is Acme", project_id="p").item
    assert project is not None
    for agent in ("A", "B"):
        assert shared.content in _found(mem, user_id="u", agent_id=agent)
    both = _found(mem, user_id="u", agent_id="A", project_id="p")
    assert {FACT, shared.content, project.content} <= both
    assert _found(mem, user_id="u", agent_id="B", project_id="p") >= {shared.content, project.content}
    assert FACT not in _found(mem, user_id="u", agent_id="B", project_id="p")


def test_agent_b_telling_the_same_thing_gets_its_own_memory(mem: Memory) -> None:
    mem.remember([("user", FACT)], session_id="s2", user_id="u", agent_id="B")
    mem.process_jobs()
    mine = [
        h.item for h in mem.search("green tea", user_id="u", agent_id="B") if "resource" not in h.item.tags
    ]
    assert [i.agent_id for i in mine] == ["B"]
    theirs = [
        h.item for h in mem.search("green tea", user_id="u", agent_id="A") if "resource" not in h.item.tags
    ]
    assert [i.agent_id for i in theirs] == ["A"]
