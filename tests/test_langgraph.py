"""JiyiStore: LangGraph's BaseStore backed by jiyi, checked with LangGraph's own package."""

from __future__ import annotations

import operator
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp

from jiyi.integrations.langgraph import JiyiStore, item_id, scope_id
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import Status


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "lg.db") as m:
        yield m


@pytest.fixture
def store(mem: Memory) -> JiyiStore:
    return JiyiStore(mem)


def test_put_get_round_trips_the_value_verbatim(store: JiyiStore, mem: Memory) -> None:
    ns = ("users", "alice", "memories")
    value = {"content": "ok", "n": 3, "nested": {"a": [1, 2]}}  # "ok" is too short for the gate
    store.put(ns, "k1", value)
    item = store.get(ns, "k1")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (ns, "k1", value)
    assert item.created_at == item.updated_at
    # It is an ordinary jiyi memory in the mapped scope.
    stored = mem.get(item_id(mem.runtime.tenant_id, ns, "k1"))
    assert stored.user_id == "users/alice/memories" == scope_id(ns)
    assert stored.structured == value
    assert stored.metadata == {"lg_namespace": list(ns), "lg_key": "k1"}
    assert "langgraph" in stored.tags and "lg-ns:users/alice" in stored.tags
    assert store.get(ns, "missing") is None
    assert store.get(("users", "bob", "memories"), "k1") is None


def test_put_overwrites_and_keeps_history(store: JiyiStore, mem: Memory) -> None:
    ns = ("prefs",)
    store.put(ns, "theme", {"content": "The user prefers dark mode in every editor"})
    first = store.get(ns, "theme")
    assert first is not None
    store.put(ns, "theme", {"content": "The user prefers light mode in the morning", "v": 2})
    second = store.get(ns, "theme")
    assert second is not None
    assert second.value == {"content": "The user prefers light mode in the morning", "v": 2}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    jid = item_id(mem.runtime.tenant_id, ns, "theme")
    assert mem.get(jid).version == 2
    assert [e.action for e in mem.history(jid)] == ["import", "update"]
    # A value the gate would refuse as text is still stored verbatim on overwrite.
    store.put(ns, "theme", {"content": "ok"})
    third = store.get(ns, "theme")
    assert third is not None and third.value == {"content": "ok"}
    assert third.created_at == first.created_at
    assert mem.get(jid).version == 3 and mem.get(jid).content == "ok"
    assert [e.action for e in mem.history(jid)] == ["import", "update", "import"]


def test_delete_and_put_none_purge(store: JiyiStore, mem: Memory) -> None:
    ns = ("docs", "a")
    store.put(ns, "1", {"content": "first document about sqlite"})
    store.put(ns, "2", {"content": "second document about postgres"})
    store.delete(ns, "1")
    store.batch([PutOp(ns, "2", None)])
    assert store.get(ns, "1") is None and store.get(ns, "2") is None
    assert store.search(ns) == []
    assert mem.list(tenant_id=mem.runtime.tenant_id).items == []
    store.delete(ns, "never-there")  # deleting a missing key is a no-op


def test_soft_deleted_memory_is_absent_and_put_revives_it(store: JiyiStore, mem: Memory) -> None:
    ns = ("n",)
    store.put(ns, "k", {"content": "a memory someone archives in jiyi"})
    mem.delete(item_id(mem.runtime.tenant_id, ns, "k"))
    assert store.get(ns, "k") is None
    store.put(ns, "k", {"content": "a memory someone archives in jiyi"})
    assert store.get(ns, "k") is not None
    assert mem.get(item_id(mem.runtime.tenant_id, ns, "k")).status == Status.ACTIVE


def test_search_without_query_lists_prefix_with_filter_and_paging(store: JiyiStore) -> None:
    for i in range(5):
        store.put(("users", "alice", "notes"), f"n{i}", {"content": f"note number {i} for alice", "i": i})
    store.put(("users", "bob", "notes"), "b", {"content": "bob's only note", "i": 0})
    store.put(("users2",), "x", {"content": "not under users/", "i": 0})

    everyone = store.search(("users",), limit=100)
    assert {(r.namespace, r.key) for r in everyone} == {
        *((("users", "alice", "notes"), f"n{i}") for i in range(5)),
        (("users", "bob", "notes"), "b"),
    }
    assert all(isinstance(r, SearchItem) and r.score is None for r in everyone)
    assert [r.key for r in store.search(("users", "alice"), limit=10)] == [
        f"n{i}" for i in reversed(range(5))
    ]
    assert [r.key for r in store.search(("users", "alice"), limit=2, offset=1)] == ["n3", "n2"]
    assert {r.key for r in store.search(("users",), filter={"i": 0})} == {"n0", "b"}
    assert {r.key for r in store.search(("users",), filter={"i": {"$gte": 3}})} == {"n3", "n4"}
    assert {r.key for r in store.search(("users",), filter={"i": {"$ne": 0, "$lt": 2}})} == {"n1"}
    assert len(store.search((), limit=100)) == 7


def test_query_search_is_hybrid_and_crosses_languages(store: JiyiStore) -> None:
    ns = ("users", "alice", "memories")
    store.put(ns, "food", {"content": "用户喜欢吃辣的川菜，尤其是麻婆豆腐", "kind": "preference"})
    store.put(ns, "editor", {"content": "The user writes code in Neovim with a dark theme", "kind": "habit"})
    store.put(ns, "pet", {"content": "The user has a cat called Mochi", "kind": "fact"})
    store.put(("users", "bob", "memories"), "food", {"content": "Bob hates spicy food", "kind": "preference"})

    hits = store.search(ns, query="what spicy Sichuan dishes does the user like to eat?", limit=3)
    assert hits and hits[0].key == "food" and hits[0].namespace == ns
    assert hits[0].value["content"].startswith("用户喜欢吃辣")
    assert all(h.score is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0.0 for h in hits), reverse=True)

    # Namespaces are isolated: Bob's memory is not in Alice's results, and vice versa.
    assert all(h.namespace == ns for h in store.search(ns, query="spicy food", limit=10))
    assert {h.namespace for h in store.search(("users", "bob"), query="spicy food")} == {
        ("users", "bob", "memories")
    }
    # A prefix search merges every namespace below it; filters apply to the value.
    both = store.search(("users",), query="spicy food", filter={"kind": "preference"}, limit=10)
    assert {(h.namespace[1], h.key) for h in both} == {("alice", "food"), ("bob", "food")}
    assert store.search(("nobody",), query="spicy food") == []


def test_list_namespaces(store: JiyiStore) -> None:
    for ns in [
        ("users", "alice", "memories"),
        ("users", "alice", "prefs"),
        ("users", "bob", "memories"),
        ("docs", "v1"),
        ("docs", "v2", "v1"),
    ]:
        store.put(ns, "k", {"content": "some stored content " + "/".join(ns)})
    assert store.list_namespaces() == sorted(
        [
            ("docs", "v1"),
            ("docs", "v2", "v1"),
            ("users", "alice", "memories"),
            ("users", "alice", "prefs"),
            ("users", "bob", "memories"),
        ]
    )
    assert store.list_namespaces(prefix=("users", "alice")) == [
        ("users", "alice", "memories"),
        ("users", "alice", "prefs"),
    ]
    assert store.list_namespaces(prefix=("users", "*", "memories")) == [
        ("users", "alice", "memories"),
        ("users", "bob", "memories"),
    ]
    assert store.list_namespaces(suffix=("v1",)) == [("docs", "v1"), ("docs", "v2", "v1")]
    assert store.list_namespaces(prefix=("users",), suffix=("memories",)) == [
        ("users", "alice", "memories"),
        ("users", "bob", "memories"),
    ]
    assert store.list_namespaces(max_depth=2) == [
        ("docs", "v1"),
        ("docs", "v2"),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert store.list_namespaces(limit=2, offset=1) == [("docs", "v2", "v1"), ("users", "alice", "memories")]


def test_batch_mixes_operations_in_order(store: JiyiStore) -> None:
    ns = ("b",)
    results = store.batch(
        [
            PutOp(ns, "a", {"content": "alpha memory content"}),
            GetOp(ns, "a"),
            SearchOp(ns, limit=10),
            ListNamespacesOp(limit=100),
            PutOp(ns, "a", None),
            GetOp(ns, "a"),
        ]
    )
    assert results[0] is None
    assert isinstance(results[1], Item) and results[1].value == {"content": "alpha memory content"}
    assert isinstance(results[2], list) and [i.key for i in results[2] if isinstance(i, SearchItem)] == ["a"]
    assert results[3] == [ns]
    assert results[4] is None and results[5] is None


def test_tenants_are_isolated(mem: Memory) -> None:
    a, b = JiyiStore(mem, tenant_id="acme"), JiyiStore(mem, tenant_id="globex")
    a.put(("users", "x"), "k", {"content": "acme's private memory"})
    b.put(("users", "x"), "k", {"content": "globex's private memory"})
    got_a, got_b = a.get(("users", "x"), "k"), b.get(("users", "x"), "k")
    assert got_a is not None and got_a.value["content"] == "acme's private memory"
    assert got_b is not None and got_b.value["content"] == "globex's private memory"
    assert [h.key for h in a.search(("users",), query="private memory")] == ["k"]
    assert len(a.search((), query="private memory")) == 1
    assert JiyiStore(mem).list_namespaces() == []


def test_store_ignores_other_jiyi_memories(store: JiyiStore, mem: Memory) -> None:
    mem.add("The user likes spicy food very much", user_id="users/alice/memories")
    store.put(("users", "alice", "memories"), "k", {"content": "The user likes spicy noodles"})
    assert [r.key for r in store.search(("users",))] == ["k"]
    assert [r.key for r in store.search(("users", "alice", "memories"), query="spicy")] == ["k"]


async def test_async_api_over_sync_and_async_memory(tmp_path: Path, store: JiyiStore) -> None:
    ns = ("async",)
    await store.aput(ns, "k", {"content": "stored through abatch on a sync Memory"})
    got = await store.aget(ns, "k")
    assert got is not None and got.value["content"].startswith("stored through abatch")
    assert [h.key for h in await store.asearch(ns, query="abatch")] == ["k"]
    assert await store.alist_namespaces() == [ns]
    await store.adelete(ns, "k")
    assert await store.aget(ns, "k") is None


@pytest.fixture
async def amem(tmp_path: Path) -> AsyncIterator[AsyncMemory]:
    async with AsyncMemory.open(tmp_path / "alg.db") as m:
        yield m


async def test_async_memory_backend(amem: AsyncMemory) -> None:
    store = JiyiStore(amem)
    await store.aput(("u",), "k", {"content": "用户住在上海"})
    got = await store.aget(("u",), "k")
    assert got is not None and got.value == {"content": "用户住在上海"}
    hits = await store.asearch(("u",), query="where does the user live? Shanghai")
    assert [h.key for h in hits] == ["k"]
    assert store.get(("u",), "k") is not None  # the sync driver works on the same store too


class State(TypedDict):
    user: str
    message: str
    replies: Annotated[list[str], operator.add]


def remember(state: State, *, store: BaseStore) -> dict[str, list[str]]:
    ns = ("users", state["user"], "memories")
    if state["message"].startswith("remember:"):
        fact = state["message"].removeprefix("remember:").strip()
        store.put(ns, f"m{len(store.search(ns, limit=100))}", {"content": fact})
        return {"replies": [f"saved: {fact}"]}
    hits = store.search(ns, query=state["message"], limit=1)
    return {"replies": [hits[0].value["content"] if hits else "I don't know"]}


def test_compiled_state_graph_uses_the_injected_store(tmp_path: Path) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with Memory.open(tmp_path / "graph.db") as mem:
        graph = builder.compile(store=JiyiStore(mem))
        out = graph.invoke({"user": "alice", "message": "remember: 我最喜欢的编程语言是 Rust", "replies": []})
        assert out["replies"] == ["saved: 我最喜欢的编程语言是 Rust"]
        graph.invoke({"user": "alice", "message": "remember: My cat is called Mochi", "replies": []})
        out = graph.invoke(
            {"user": "alice", "message": "which programming language do I like most?", "replies": []}
        )
        assert out["replies"] == ["我最喜欢的编程语言是 Rust"]
        out = graph.invoke({"user": "bob", "message": "what is my cat called?", "replies": []})
        assert out["replies"] == ["I don't know"]
    # The memories survive in the SQLite file, as ordinary jiyi memories.
    with Memory.open(tmp_path / "graph.db") as mem:
        again = JiyiStore(mem)
        assert again.list_namespaces() == [("users", "alice", "memories")]
        assert {i.value["content"] for i in again.search(("users", "alice"))} == {
            "我最喜欢的编程语言是 Rust",
            "My cat is called Mochi",
        }


async def test_compiled_graph_async(tmp_path: Path) -> None:
    async def node(state: State, *, store: BaseStore) -> dict[str, list[str]]:
        ns = ("users", state["user"], "memories")
        await store.aput(ns, "fact", {"content": state["message"]})
        hits = await store.asearch(ns, query="where does the user work?")
        return {"replies": [h.value["content"] for h in hits]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    with Memory.open(tmp_path / "agraph.db") as mem:
        graph = builder.compile(store=JiyiStore(mem))
        out = await graph.ainvoke({"user": "carol", "message": "用户在北京的一家银行工作", "replies": []})
    assert out["replies"] == ["用户在北京的一家银行工作"]
