"""The runtime and the one driver: every effect is run with what the Memory was given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jiyi.driver import UnhandledEffect, adrive, drive
from jiyi.effects import Complete, Embed, Rerank
from jiyi.errors import ConfigError, InvalidInput, LLMError, NotFound
from jiyi.integrations.tools import MemoryTools
from jiyi.memory import AsyncMemory, Memory


class CountingReranker:
    """Scores texts by whether they mention "tea"; counts its calls."""

    model_id = "test:tea-reranker"

    def __init__(self) -> None:
        self.calls = 0

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.calls += 1
        return [1.0 if "tea" in t else 0.0 for t in texts]


@pytest.fixture
def reranker() -> CountingReranker:
    return CountingReranker()


@pytest.fixture
def mem(tmp_path: Path, reranker: CountingReranker) -> Iterator[Memory]:
    with Memory.open(tmp_path / "rt.db", reranker=reranker, background=False) as m:
        m.add("Alice drinks green tea every morning", user_id="alice", memory_type="habit")
        m.add("Alice rides her bike to the office", user_id="alice", memory_type="habit")
        yield m


def test_agent_tools_search_with_the_configured_reranker(mem: Memory, reranker: CountingReranker) -> None:
    tools = MemoryTools(mem, user_id="alice")
    result = tools.call("memory_search", {"query": "what does Alice drink?"})
    assert "error" not in result, result
    assert reranker.calls == 1
    assert "tea" in result["results"][0]["content"]


def test_langgraph_store_searches_with_the_configured_reranker(
    mem: Memory, reranker: CountingReranker
) -> None:
    pytest.importorskip("langgraph.store.base")
    from jiyi.integrations.langgraph import JiyiStore

    store = JiyiStore(mem)
    ns = ("users", "alice", "memories")
    store.put(ns, "drink", {"content": "Alice likes oolong tea in the afternoon"})
    store.put(ns, "sport", {"content": "Alice plays tennis on Sundays"})
    before = reranker.calls
    hits = store.search(ns, query="what does Alice drink?", limit=2)
    assert reranker.calls == before + 1
    assert hits[0].key == "drink"


async def test_async_memory_runs_the_same_flows_awaited(tmp_path: Path, reranker: CountingReranker) -> None:
    async with AsyncMemory.open(tmp_path / "a.db", reranker=reranker) as amem:
        await amem.add("Bob drinks black tea with milk", user_id="bob")
        hits = await amem.search("what does Bob drink?", user_id="bob")
        assert hits[0].item.content.startswith("Bob drinks") and reranker.calls == 1


def _asks(effect: Any) -> Any:
    answer = yield effect
    return answer


def test_driver_dispatches_by_type_and_mro() -> None:
    class Special(Embed):
        pass

    handlers: dict[type, Any] = {Embed: lambda e: ("embed", e.texts), Complete: lambda e: "hi"}
    assert drive(_asks(Special(("x",))), handlers) == ("embed", ("x",))
    with pytest.raises(UnhandledEffect, match="no handler for Rerank"):
        drive(_asks(Rerank("q", ("a",))), handlers)


def test_driver_throws_failures_into_the_flow_where_it_asked() -> None:
    def flow() -> Any:
        try:
            yield Complete(({"role": "user", "content": "hi"},))
        except LLMError as exc:
            return f"recovered: {exc}"
        return "no failure"

    def down(effect: Complete) -> str:
        raise LLMError("endpoint down")

    assert drive(flow(), {Complete: down}) == "recovered: endpoint down"


async def test_async_driver_awaits_handlers() -> None:
    async def handle(effect: Embed) -> int:
        return len(effect.texts)

    assert await adrive(_asks(Embed(("a", "b"))), {Embed: handle}) == 2


def test_missing_model_or_reranker_is_a_config_error(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "none.db", background=False) as m:
        rt = m.runtime
        with pytest.raises(ConfigError, match="needs a reranker"):
            drive(_asks(Rerank("q", ("a",))), rt.handlers)
        with pytest.raises(ConfigError, match="needs a language model"):
            drive(_asks(Complete(({"role": "user", "content": "hi"},))), rt.handlers)


def test_building_a_memory_does_no_io(tmp_path: Path) -> None:
    from jiyi.store.sqlite import SQLiteStore

    files = tmp_path / "context"
    store = SQLiteStore(tmp_path / "io.db")
    mem = Memory(store, files=files, background=False)
    try:
        assert not files.exists()  # the workspace is created by the first write, not by __init__
    finally:
        mem.close()


def test_a_bound_view_carries_owner_and_caller_into_every_operation(tmp_path: Path) -> None:
    from jiyi.store.base import Viewer
    from jiyi.who import Caller, Owner

    with Memory.open(tmp_path / "bound.db", background=False) as mem:
        alice = mem.bound(owner=Owner(user_id="alice"), caller=Caller(tenant_id="acme", actor="key-1"))
        item = alice.add("Alice prefers green tea in the afternoon").item
        assert item is not None and item.user_id == "alice" and item.tenant_id == "acme"
        assert item.metadata.get("created_by") is None and alice.history(item.id)[0].actor == "key-1"
        assert alice.search("what does she drink?")[0].item.id == item.id
        assert alice.get(item.id).id == item.id
        # An argument given in the call wins; the original memory is unchanged.
        assert alice.search("tea", user_id="bob") == []
        assert mem.list().items == []  # the default tenant has nothing
        with pytest.raises(NotFound):
            mem.get(item.id)
        viewer = Viewer(actor="key-2", projects=("p1",))
        scoped = mem.bound(owner=Owner(project_id="p1"), caller=Caller(tenant_id="acme", viewer=viewer))
        note = scoped.add("The team ships on Thursdays", visibility="owner_only").item
        assert note is not None and note.metadata["created_by"] == "key-2"
        with pytest.raises(InvalidInput):
            Owner(user_id=" ")


async def test_async_bound_view(tmp_path: Path) -> None:
    from jiyi.who import Caller, Owner

    async with AsyncMemory.open(tmp_path / "abound.db") as amem:
        bob = amem.bound(owner=Owner(user_id="bob"), caller=Caller(tenant_id="t2"))
        added = await bob.add("Bob rides a red bicycle to work")
        assert added.item is not None and added.item.tenant_id == "t2"
        assert (await bob.search("how does Bob commute?"))[0].item.id == added.item.id


def test_the_vector_cache_is_shared_by_threads_without_losing_its_bound() -> None:
    import threading

    import numpy as np

    from jiyi.runtime import QueryCache

    cache = QueryCache(8)
    errors: list[BaseException] = []
    vec = np.zeros(4, dtype=np.float32)

    def hammer(seed: int) -> None:
        try:
            for i in range(20_000):
                key = ("m", str((seed * 7 + i) % 12))
                if cache.get(key) is None:
                    cache.put(key, vec)
        except BaseException as exc:  # any failure on a thread is the finding
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache._data) <= 8
