"""One set of names and one wording for a bad argument on every interface (issue 16,
item 3): the library, the agent tools (which MCP serves), REST and the CLI say the same
sentence for the same mistake, and the type filter is ``memory_types`` everywhere (with
the singular ``memory_type`` kept as another spelling)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.errors import InvalidInput
from jiyi.integrations.tools import MemoryTools
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.app import create_app
from jiyi.store.sqlite import SQLiteStore

EMBEDDER = "hash:256"
TYPES = "preference, fact, skill, habit, event, context, constraint, decision, pattern"


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(SQLiteStore(tmp_path / "w.db"), embedder=EMBEDDER, background=False)
    m.add("I like green tea", user_id="u", memory_type="preference")
    m.add("I work as a nurse", user_id="u", memory_type="fact")
    return m


@pytest.fixture
async def rest(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "r.db"), embedder=EMBEDDER)
    await memory.add("I like green tea", user_id="u", memory_type="preference")
    await memory.add("I work as a nurse", user_id="u", memory_type="fact")
    transport = httpx.ASGITransport(app=create_app(memory), client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client
    await memory.aclose()


def _library(mem: Memory, **kwargs: Any) -> str:
    with pytest.raises(InvalidInput) as err:
        mem.search("tea", user_id="u", **kwargs)
    return str(err.value)


def _tool(mem: Memory, **kwargs: Any) -> str:
    answer = MemoryTools(mem, user_id="u").call("memory_search", {"query": "tea", **kwargs})
    return str(answer["error"]["message"])


async def _rest(client: httpx.AsyncClient, **kwargs: Any) -> str:
    r = await client.post("/v1/memories/search", json={"query": "tea", "user_id": "u", **kwargs})
    assert r.status_code == 422
    return str(r.json()["error"]["message"])


async def test_a_bad_limit_reads_the_same_everywhere(mem: Memory, rest: httpx.AsyncClient) -> None:
    said = {
        "library": _library(mem, limit=0),
        "tools": _tool(mem, limit=0),
        "rest": await _rest(rest, limit=0),
    }
    assert set(said.values()) == {"limit must be at least 1, got 0"}, said
    said = {
        "library": _library(mem, limit="x"),
        "tools": _tool(mem, limit="x"),
        "rest": await _rest(rest, limit="x"),
    }
    assert set(said.values()) == {"limit must be an integer, not string"}, said
    # Above the top: the tools keep an agent's result short (50), the library allows 1000.
    assert _library(mem, limit=5000) == "limit must be at most 1000, got 5000"
    assert await _rest(rest, limit=5000) == "limit must be at most 1000, got 5000"
    assert _tool(mem, limit=5000) == "limit must be at most 50, got 5000"


async def test_an_empty_query_reads_the_same_everywhere(mem: Memory, rest: httpx.AsyncClient) -> None:
    with pytest.raises(InvalidInput) as err:
        mem.search("", user_id="u")
    said = {
        "library": str(err.value),
        "tools": str(MemoryTools(mem, user_id="u").call("memory_search", {"query": ""})["error"]["message"]),
        "rest": await _rest(rest, query=""),
    }
    assert set(said.values()) == {"query must not be empty"}, said
    r = await rest.post("/v1/memories/search", json={"query": "tea", "user_id": "u" * 300})
    assert r.json()["error"]["message"] == "user_id must be at most 200 characters"


async def test_an_unknown_type_reads_the_same_everywhere(mem: Memory, rest: httpx.AsyncClient) -> None:
    assert _library(mem, memory_types=["gossip"]) == f"memory_types must be one of: {TYPES}; got 'gossip'"
    assert _tool(mem, memory_types=["gossip"]) == f"memory_types[0] must be one of: {TYPES}; got 'gossip'"
    assert (
        await _rest(rest, memory_types=["gossip"]) == f"memory_types[0] must be one of: {TYPES}; got 'gossip'"
    )
    # Every problem of one call is listed, in the same words.
    both = await _rest(rest, memory_types=["gossip"], limit=0)
    assert both == f"memory_types[0] must be one of: {TYPES}; got 'gossip'; limit must be at least 1, got 0"


def test_the_tools_take_memory_types_and_memory_type(mem: Memory) -> None:
    tools = MemoryTools(mem, user_id="u")
    for args in ({"memory_types": ["fact"]}, {"memory_type": "fact"}):
        found = tools.call("memory_search", {"query": "what do I do", "min_relevance": 0, **args})
        assert [r["memory_type"] for r in found["results"]] == ["fact"], args
    found = tools.call(
        "memory_search", {"query": "tea", "min_relevance": 0, "memory_types": ["fact", "preference"]}
    )
    assert {r["memory_type"] for r in found["results"]} == {"fact", "preference"}
    clash = tools.call("memory_search", {"query": "tea", "memory_types": ["fact"], "memory_type": "event"})
    assert clash["error"]["message"] == "give memory_types or memory_type (one kind), not both"


async def test_rest_lists_by_memory_types_or_memory_type(rest: httpx.AsyncClient) -> None:
    for params in ({"memory_types": "fact"}, {"memory_type": "fact"}):
        r = await rest.get("/v1/memories", params={"user_id": "u", **params})
        assert [i["memory_type"] for i in r.json()["items"]] == ["fact"], params
    r = await rest.get(
        "/v1/memories", params=[("user_id", "u"), ("memory_types", "fact"), ("memory_type", "preference")]
    )
    assert sorted(i["memory_type"] for i in r.json()["items"]) == ["fact", "preference"]
    r = await rest.get("/v1/memories", params={"user_id": "u", "limit": "0"})
    assert r.json()["error"]["message"] == "limit must be at least 1, got 0"


def test_the_cli_says_it_too(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "jiyi.cli", "--db", str(tmp_path / "c.db"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    assert cli("add", "I work as a nurse", "--user", "u", "--memory-type", "fact").returncode == 0
    bad = cli("search", "nurse", "--user", "u", "--limit", "0")
    assert bad.returncode != 0 and "limit must be at least 1, got 0" in bad.stderr
    bad = cli("search", "nurse", "--user", "u", "--limit", "x")
    assert bad.returncode != 0 and "must be an integer, not 'x'" in bad.stderr
    listed = cli("list", "--user", "u", "--memory-type", "fact", "--json")
    assert listed.returncode == 0 and '"fact"' in listed.stdout


def test_a_path_for_a_store_says_what_to_use(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"use Memory\.open\("):
        Memory(str(tmp_path / "m.db"))  # type: ignore[arg-type]


def test_the_library_lists_every_problem_as_rest_and_the_tools_do(mem: Memory) -> None:
    with pytest.raises(InvalidInput) as searched:
        mem.search("", user_id="u", limit=0, memory_types="opinion", threshold=4)
    assert searched.value.field == "query"
    assert searched.value.problems == (
        "query must not be empty",
        "limit must be at least 1, got 0",
        "threshold must be at most 1.0, got 4",
        f"memory_types must be one of: {TYPES}; got 'opinion'",
    )
    assert str(searched.value) == "; ".join(searched.value.problems)
    with pytest.raises(InvalidInput) as listed:
        mem.list(user_id="", limit=0, statuses="gone")
    assert len(listed.value.problems) == 3 and listed.value.field == "limit", listed.value.problems
    tools = MemoryTools(mem, user_id="u")
    error = tools.call("memory_search", {"query": "", "limit": 0, "memory_types": ["opinion"]})["error"]
    unknown = f"memory_types[0] must be one of: {TYPES}; got 'opinion'"
    assert error["problems"] == [*searched.value.problems[:2], unknown]


def test_cli_errors_name_the_options_a_user_types(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "jiyi.cli", "--db", str(tmp_path / "f.db")]
    whose = subprocess.run([*cmd, "add", "hello there"], capture_output=True, text=True, timeout=120)
    assert "give --user, --project, --session or --agent" in whose.stderr
    kind = subprocess.run(
        [*cmd, "search", "x", "--user", "u", "--type", "nope"], capture_output=True, text=True, timeout=120
    )
    assert "--type must be one of:" in kind.stderr
    # Under --json the library's names stay (a program reads them).
    as_json = subprocess.run(
        [*cmd, "add", "hello there", "--json"], capture_output=True, text=True, timeout=120
    )
    assert "user_id" in as_json.stdout
