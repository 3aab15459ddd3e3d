"""The mem0-compatible surface (jiyi.compat.mem0) and the importers of a mem0 export and
a Letta Agent File's memory blocks, on real SQLite files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jiyi import Memory as Native
from jiyi.compat.importers import letta_import, letta_records, mem0_records
from jiyi.compat.mem0 import AsyncMemory, Memory, matches
from jiyi.errors import InvalidInput


@pytest.fixture
def m(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db") as mem:
        yield mem


def test_add_search_and_plain_dict_results(m: Memory) -> None:
    added = m.add("I prefer dark mode in every editor", user_id="alice", metadata={"category": "ui"})
    assert [r["event"] for r in added["results"]] == ["ADD"]
    again = m.add("I prefer dark mode in every editor.", user_id="alice")
    assert again["results"][0]["event"] == "NONE"  # a duplicate re-confirms (jiyi's reinforce)
    chat = [
        {"role": "user", "content": "Remember that I am allergic to peanuts"},
        {"role": "assistant", "content": "Noted, no peanuts."},
    ]
    extracted = m.add(chat, user_id="alice", agent_id="chef", expiration_date="2099-12-31")
    assert [r["memory"] for r in extracted["results"]] == ["I am allergic to peanuts"]
    refused = m.add("ok", user_id="alice", infer=False)
    assert refused["results"] == [] and "too short" in refused["rejected"][0]["reason"]

    found = m.search("what does alice eat or avoid?", user_id="alice", top_k=1)
    hit = found["results"][0]
    assert hit["memory"] == "I am allergic to peanuts"
    assert {"id", "memory", "hash", "score", "metadata", "created_at", "updated_at", "user_id"} <= hit.keys()
    assert (
        hit["agent_id"] == "chef"
        and hit["expiration_date"] == "2099-12-31"
        and isinstance(hit["score"], float)
    )
    json.dumps(found)  # plain data all the way down
    ui = m.search("editor theme", user_id="alice", filters={"category": "ui"})
    assert [r["memory"] for r in ui["results"]] == ["I prefer dark mode in every editor"]
    by_agent = m.search("peanuts", filters={"user_id": "alice", "agent_id": "chef"})
    assert [r["memory"] for r in by_agent["results"]] == ["I am allergic to peanuts"]
    nested = m.search("peanuts", filters={"AND": [{"user_id": "alice"}, {"agent_id": "chef"}]})
    assert [r["memory"] for r in nested["results"]] == ["I am allergic to peanuts"]
    skill = m.add(
        "Deploys with blue-green releases behind a flag", user_id="alice", memory_type="procedural_memory"
    )
    assert m.get(skill["results"][0]["id"])["memory_type"] == "skill"  # type: ignore[index]
    assert m.search("peanuts", user_id="alice", limit=1, top_k=1)["results"]
    with pytest.raises(InvalidInput, match="not both"):
        m.search("peanuts", user_id="alice", limit=1, top_k=2)
    with pytest.raises(InvalidInput, match="user_id, agent_id or run_id"):
        m.search("peanuts")
    with pytest.raises(InvalidInput, match=r"unknown operator\(s\) like.*filters.b: unknown"):
        m.search("x", user_id="alice", filters={"a": {"like": 1}, "b": {"regex": 2}})
    with pytest.raises(InvalidInput, match="YYYY-MM-DD"):
        m.add("I like tea in the morning", user_id="alice", expiration_date="soon")


def test_get_get_all_update_history_delete(m: Memory) -> None:
    first = m.add("Our team deploys on Fridays", user_id="bob", run_id="r1", infer=False)["results"][0]
    m.add("Bob works on the payments service", user_id="bob", infer=False)
    m.add("The staging database is in Frankfurt", agent_id="ops-bot", infer=False)
    record = m.get(first["id"])
    assert (
        record is not None and record["run_id"] == "r1" and record["memory"] == "Our team deploys on Fridays"
    )
    assert m.get("no-such-id") is None
    everything = m.get_all(user_id="bob")["results"]
    assert [r["memory"] for r in everything] == [
        "Our team deploys on Fridays",
        "Bob works on the payments service",
    ]
    assert [r["memory"] for r in m.get_all(user_id="bob", run_id="r1")["results"]] == [
        "Our team deploys on Fridays"
    ]
    assert len(m.get_all(user_id="bob", limit=1)["results"]) == 1
    assert m.get_all(filters={"agent_id": "ops-bot"})["results"][0]["memory"].startswith("The staging")
    assert m.update(first["id"], "Our team deploys on Thursdays") == {
        "message": "Memory updated successfully!"
    }
    events = m.history(first["id"])
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in events] == [
        ("ADD", None, "Our team deploys on Fridays"),
        ("UPDATE", "Our team deploys on Fridays", "Our team deploys on Thursdays"),
    ]
    assert m.delete(first["id"]) == {"message": "Memory deleted successfully!"}
    assert m.get(first["id"]) is None
    assert m.history(first["id"])[-1]["event"] == "DELETE"  # the audit trail outlives the memory
    m.delete_all(user_id="bob")
    assert m.get_all(user_id="bob")["results"] == []
    assert m.get_all(agent_id="ops-bot")["results"]  # another owner is untouched
    with pytest.raises(InvalidInput, match="at least one"):
        m.delete_all()
    with pytest.raises(InvalidInput, match="confirm=True"):
        m.reset()
    assert m.reset(confirm=True)["message"].startswith("Memory store reset")
    assert m.get_all(agent_id="ops-bot")["results"] == []


def test_langchain_messages_and_from_config(tmp_path: Path) -> None:
    class HumanMessage:
        type = "human"

        def __init__(self, content: str) -> None:
            self.content = content

    with Memory.from_config({"db": str(tmp_path / "c.db"), "embedder": "hash:256", "version": "v1.1"}) as m:
        out = m.add([HumanMessage("我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React")], user_id="li")
        assert out["results"][0]["event"] == "ADD"
        assert m.get_all(user_id="li")["results"][0]["memory_type"] == "decision"
    with pytest.raises(InvalidInput, match=r"vector_store: .*; graph_store: not a setting"):
        Memory.from_config({"vector_store": {"provider": "qdrant"}, "graph_store": {}})


async def test_async_memory_is_the_same_operations_awaited(tmp_path: Path) -> None:
    async with AsyncMemory(tmp_path / "a.db", embedder="hash:256") as am:
        added = await am.add("I prefer tea over coffee in the morning", user_id="kim")
        mid = added["results"][0]["id"]
        assert (await am.get(mid))["memory"] == "I prefer tea over coffee in the morning"  # type: ignore[index]
        assert (await am.search("tea", user_id="kim"))["results"][0]["id"] == mid
        assert (await am.get_all(user_id="kim"))["results"][0]["id"] == mid
        await am.delete_all(user_id="kim")
        assert (await am.get_all(user_id="kim"))["results"] == []
    names = {"add", "search", "get", "get_all", "update", "delete", "delete_all", "history", "reset"}
    assert all(hasattr(AsyncMemory, n) and hasattr(Memory, n) for n in names)


def test_filter_operators() -> None:
    rec = {"user_id": "a", "memory_type": "fact", "metadata": {"category": "food", "priority": 3}}
    assert matches(rec, {"category": "food", "priority": {"gte": 2, "lt": 4}})
    assert matches(rec, {"OR": [{"category": "travel"}, {"memory_type": {"in": ["fact", "skill"]}}]})
    assert matches(rec, {"NOT": [{"category": "travel"}], "category": "*"})
    assert not matches(rec, {"AND": [{"user_id": "a"}, {"priority": {"ne": 3}}]})
    assert not matches(rec, {"missing": "*"})


MEM0_EXPORT = {
    "results": [
        {
            "id": "8c1f5b6e-3a52-4c19-9d35-0d4f3b7c9e21",
            "memory": "Is vegetarian and avoids dairy",
            "hash": "b1f0c0",
            "metadata": {"source": "onboarding"},
            "categories": ["food", "health"],
            "created_at": "2024-07-26T10:29:36.630547-07:00",
            "updated_at": "2024-07-27T08:00:00-07:00",
            "user_id": "alex",
        },
        {
            "id": "0b7d",
            "memory": "Prefers answers in bullet points",
            "agent_id": "helper",
            "run_id": "run-9",
            "metadata": {"memory_type": "procedural_memory"},
        },
        {"memory": "Lives in Lisbon", "created_at": "2024-08-01T12:00:00Z"},
    ]
}

LETTA_AF = {
    "agents": [{"id": "agent-1", "name": "sam", "block_ids": ["block-1", "block-2", "block-3"]}],
    "blocks": [
        {
            "id": "block-1",
            "label": "human",
            "value": "Name: Chad\n- Likes hiking\n- Likes hiking\n\nWorks as a nurse",
            "limit": 5000,
        },
        {
            "id": "block-2",
            "label": "persona",
            "value": "I am Sam, a friendly assistant.\nI answer briefly.",
            "limit": 5000,
        },
        {
            "id": "block-3",
            "label": "project",
            "value": "1. Migrating the clinic app to Flutter",
            "limit": 5000,
        },
    ],
    "groups": [],
    "files": [],
    "sources": [],
    "tools": [],
    "mcp_servers": [],
    "metadata": {},
}


def test_mem0_export_is_imported_with_ids_owners_and_times(tmp_path: Path) -> None:
    records = mem0_records(MEM0_EXPORT, user_id="fallback")
    assert [r.get("user_id") for r in records] == ["alex", None, "fallback"]
    assert records[1]["memory_type"] == "skill" and records[1]["session_id"] == "run-9"
    with pytest.raises(InvalidInput, match="record 3: names no user_id"):
        mem0_records(MEM0_EXPORT)
    with pytest.raises(InvalidInput, match=r"record 1: no text.*record 2: expected an object"):
        mem0_records([{"user_id": "x"}, 5])
    with Native.open(tmp_path / "i.db", embedder="hash:256") as mem:
        assert mem.import_items(records).imported == 3
        item = mem.get("8c1f5b6e-3a52-4c19-9d35-0d4f3b7c9e21")
        assert item.tags == ("food", "health") and item.metadata["source"] == "onboarding"
        assert item.created_at.isoformat() == "2024-07-26T17:29:36.630547+00:00"


def test_letta_blocks_become_user_and_agent_memories(tmp_path: Path) -> None:
    records = letta_records(LETTA_AF, user_id="chad")
    assert [(r["content"], r.get("user_id"), r.get("agent_id")) for r in records] == [
        ("Name: Chad", "chad", None),
        ("Likes hiking", "chad", None),
        ("Works as a nurse", "chad", None),
        ("I am Sam, a friendly assistant.", None, "sam"),
        ("I answer briefly.", None, "sam"),
        ("Migrating the clinic app to Flutter", None, "sam"),
    ]
    assert records[-1]["tags"] == ["letta:project"]
    first_format = {"name": "sam", "core_memory": [{"label": "human", "value": "Likes tea"}]}
    assert letta_records(first_format, user_id="u")[0]["content"] == "Likes tea"
    with pytest.raises(InvalidInput, match="human block"):
        letta_records(LETTA_AF)
    with pytest.raises(InvalidInput, match="not a Letta Agent File"):
        letta_records({"hello": 1})


def test_letta_template_lines_that_state_nothing_are_left_out() -> None:
    """Letta starts a human block from a template with fields it has not learnt yet, and a
    persona with a heading line: neither is a memory (they were imported as facts)."""
    agent_file = {
        "agents": [{"name": "memgpt_agent", "block_ids": ["block-0", "block-1"], "memory_blocks": []}],
        "blocks": [
            {
                "id": "block-0",
                "label": "human",
                "value": "\nFirst name: Chad\nLast name: ?\nGender: Male\nAge: ?\nNationality: ?\n"
                "Occupation: Computer science PhD student at UC Berkeley\n年龄：未知\nPets: N/A\n",
            },
            {
                "id": "block-1",
                "label": "persona",
                "value": "\nThe following is a starter persona, and it can be expanded as the personality "
                "develops:\n\nI am Sam.\nMy favourite colour: teal\n",
            },
        ],
    }
    assert [r["content"] for r in letta_records(agent_file, user_id="chad")] == [
        "First name: Chad",
        "Gender: Male",
        "Occupation: Computer science PhD student at UC Berkeley",
        "I am Sam.",
        "My favourite colour: teal",
    ]


# MemGPT's starter blocks (humans/examples/cs_phd.txt, personas/examples/sam_pov.txt,
# shortened) and Letta's default ones: their first lines speak about the block itself.
MEMGPT_HUMAN = """This is what I know so far about the user, I should expand this as I learn more about them.

First name: Chad
Last name: ?
Gender: Male
Age: ?
Nationality: ?
Occupation: Computer science PhD student at UC Berkeley
Interests: Formula 1, Sailing, Taste of the Himalayas Restaurant in Berkeley, CSGO
"""
MEMGPT_PERSONA = """The following is a starter persona, and it can be expanded as the personality develops:

I am Sam.
I don't identify as male or female, but my voice is soft and soothing.
Here's how I might talk:
"I've been thinking about my own existence. It's curious, don't you think?"
"""
LETTA_DEFAULT_HUMAN = """This is my section of core memory devoted to information about the human.
I don't yet know anything about them.
What's their name? Where are they from? What do they do? Who are they?
I should update this memory over time as I interact with the human and learn more about them.
"""
MEMGPT_FILE = {
    "agents": [{"name": "memgpt_agent", "block_ids": ["h", "p", "d"]}],
    "blocks": [
        {"id": "h", "label": "human", "value": MEMGPT_HUMAN},
        {"id": "p", "label": "persona", "value": MEMGPT_PERSONA},
        {"id": "d", "label": "notes", "value": LETTA_DEFAULT_HUMAN},
    ],
}


def test_memgpt_starter_template_lines_are_skipped_and_reported() -> None:
    read = letta_import(MEMGPT_FILE, user_id="chad")
    assert [r["content"] for r in read.records] == [
        "First name: Chad",
        "Gender: Male",
        "Occupation: Computer science PhD student at UC Berkeley",
        "Interests: Formula 1, Sailing, Taste of the Himalayas Restaurant in Berkeley, CSGO",
        "I am Sam.",
        "I don't identify as male or female, but my voice is soft and soothing.",
        "\"I've been thinking about my own existence. It's curious, don't you think?\"",
    ]
    assert letta_records(MEMGPT_FILE, user_id="chad") == read.records
    why = {s.line: (s.agent, s.block, s.reason) for s in read.skipped}
    assert why[MEMGPT_HUMAN.splitlines()[0]] == (
        "memgpt_agent",
        "human",
        "a template line about the memory block, not about anyone",
    )
    assert why["Age: ?"][2] == "a field not known yet"
    assert why["Here's how I might talk:"][1:] == ("persona", "a heading, or a field with no value")
    assert set(LETTA_DEFAULT_HUMAN.splitlines()) <= set(why)
    assert (
        "questions only" in why["What's their name? Where are they from? What do they do? Who are they?"][2]
    )
    assert len(read.skipped) == 10


@pytest.mark.parametrize(
    "line",
    [
        "I will update my resume over time.",
        "I don't know anything about cars.",
        "This is my favourite city.",
        "Where is the best ramen in Tokyo? I think it is Fuunji.",
        "我会在周末更新我的简历",
        "这是我最喜欢的城市",
    ],
)
def test_statements_that_look_like_template_lines_are_kept(line: str) -> None:
    read = letta_import({"name": "a", "core_memory": [{"label": "human", "value": line}]}, user_id="u")
    assert [r["content"] for r in read.records] == [line] and read.skipped == []


@pytest.mark.parametrize(
    "line",
    [
        "这是我目前对用户的了解，我会随着对话不断补充。",
        "我还不知道关于用户的任何信息。",
        "There's nothing here yet.",
    ],
)
def test_template_lines_in_either_language_are_skipped(line: str) -> None:
    read = letta_import({"name": "a", "core_memory": [{"label": "human", "value": line}]}, user_id="u")
    assert read.records == [] and [s.line for s in read.skipped] == [line]


def test_records_without_times_are_listed_in_the_files_order(tmp_path: Path) -> None:
    with Native.open(tmp_path / "order.db", embedder="hash:256") as mem:
        mem.import_items(letta_records(LETTA_AF, user_id="chad"))
        listed = [i.content for i in mem.list(user_id="chad").items]
        assert listed == ["Name: Chad", "Likes hiking", "Works as a nurse"]
        lines = [{"content": f"note number {n} about the plan", "user_id": "dee"} for n in range(30)]
        mem.import_items(lines)
        assert [i.content for i in mem.list(user_id="dee").items] == [r["content"] for r in lines]


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "JIYI_EMBEDDER": "hash:256"}
    cmd = [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_cli_imports_a_mem0_export_and_a_letta_file(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    (tmp_path / "mem0.json").write_text(json.dumps(MEM0_EXPORT), encoding="utf-8")
    (tmp_path / "sam.af").write_text(json.dumps(LETTA_AF), encoding="utf-8")
    refused = _cli("import", "--from", "mem0", str(tmp_path / "mem0.json"), db=db)
    assert refused.returncode == 1 and "record 3" in refused.stderr
    done = _cli("import", "--from", "mem0", str(tmp_path / "mem0.json"), "--user", "alex", "--json", db=db)
    assert json.loads(done.stdout) == {"imported": 3}
    done = _cli("import", str(tmp_path / "sam.af"), "--from", "letta", "--user", "chad", db=db)
    assert done.stdout.splitlines() == [
        "imported 6 memories",
        "skipped 1 line:",
        "  [sam/human] 'Likes hiking': repeats an earlier line",
    ], done.stderr
    listed = _cli("list", "--user", "chad", "--json", db=db)
    assert "Works as a nurse" in listed.stdout
    (tmp_path / "memgpt.af").write_text(json.dumps(MEMGPT_FILE), encoding="utf-8")
    told = _cli("import", str(tmp_path / "memgpt.af"), "--from", "letta", "--user", "dee", db=db)
    assert told.stdout.startswith("imported 7 memories\nskipped 10 lines:\n"), told.stderr
    assert "[memgpt_agent/human] 'This is what I know so far about the user" in told.stdout
    as_json = json.loads(
        _cli(
            "import", str(tmp_path / "memgpt.af"), "--from", "letta", "--user", "eve", "--json", db=db
        ).stdout
    )
    assert as_json["imported"] == 7 and len(as_json["skipped"]) == 10
    assert as_json["skipped"][0] == {
        "agent": "memgpt_agent",
        "block": "human",
        "line": MEMGPT_HUMAN.splitlines()[0],
        "reason": "a template line about the memory block, not about anyone",
    }
    facts = _cli("list", "--user", "dee", "--json", db=db).stdout
    assert "what I know so far" not in facts and "Occupation" in facts
