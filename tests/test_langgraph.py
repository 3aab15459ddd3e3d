"""JiyiStore: LangGraph's BaseStore backed by jiyi, checked with LangGraph's own package."""

from __future__ import annotations

import operator
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from jiyi.errors import InvalidInput
from jiyi.integrations.langgraph import DEFAULT_SCOPES, JiyiStore, item_id, scope_id, scope_of
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import Status
from jiyi.store.sqlite import SQLiteStore


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
    # It is an ordinary jiyi memory in the mapped scope: ("users", ID, ...) is user ID.
    stored = mem.get(item_id(mem.runtime.tenant_id, ns, "k1"))
    assert (stored.scope.value, stored.user_id) == ("user", "alice")
    assert stored.structured == value
    assert stored.metadata == {"lg_namespace": list(ns), "lg_key": "k1"}
    assert "langgraph" in stored.tags and "lg-ns:users/alice" in stored.tags
    assert store.get(ns, "missing") is None
    assert store.get(("users", "bob", "memories"), "k1") is None


def test_same_value_with_another_index_keeps_the_value(store: JiyiStore) -> None:
    ns = ("users", "u1", "notes")
    value = {"title": "Weekly planning notes", "body": "Discuss the migration to PostgreSQL"}
    store.put(ns, "n", value)
    store.put(ns, "n", value, index=["body"])  # new search text, same value
    got = store.get(ns, "n")
    assert got is not None and got.value == value
    (hit,) = store.search(ns, query="PostgreSQL migration")
    assert hit.value == value


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


# ---------------------------------------------------------------- namespaces -> scopes


@pytest.mark.parametrize(
    ("namespace", "field", "ident", "scope"),
    [
        (("users", "u1", "memories"), "user_id", "u1", "user"),
        (("user", "u1"), "user_id", "u1", "user"),
        (("projects", "p1", "notes", "x"), "project_id", "p1", "project"),
        (("project", "p1"), "project_id", "p1", "project"),
        (("agents", "a1", "skills"), "agent_id", "a1", "agent"),
        (("agent", "a1"), "agent_id", "a1", "agent"),
        (("sessions", "s1"), "session_id", "s1", "session"),
        (("session", "s1", "scratch"), "session_id", "s1", "session"),
        (("threads", "t1"), "session_id", "t1", "session"),
        (("thread", "t1", "notes"), "session_id", "t1", "session"),
        # No known shape: the labels joined, under a user (the filing before the mapping).
        (("prefs",), "user_id", "prefs", "user"),
        (("users",), "user_id", "users", "user"),
        (("orgs", "o1", "memories"), "user_id", "orgs/o1/memories", "user"),
    ],
)
def test_namespace_shapes_map_to_scopes(
    store: JiyiStore, mem: Memory, namespace: tuple[str, ...], field: str, ident: str, scope: str
) -> None:
    store.put(namespace, "k", {"content": "Rust is the language this team writes its tools in"})
    stored = mem.get(item_id(mem.runtime.tenant_id, namespace, "k"))
    assert (stored.scope.value, getattr(stored, field)) == (scope, ident)
    others = {"user_id", "project_id", "agent_id", "session_id"} - {field}
    assert all(getattr(stored, other) is None for other in others)
    assert stored.metadata["lg_namespace"] == list(namespace)
    got = store.get(namespace, "k")
    assert got is not None and got.namespace == namespace
    # The namespace round-trips through search and list_namespaces, the text through jiyi.
    (hit,) = store.search(namespace, query="which language are the tools written in")
    assert (hit.namespace, hit.key) == (namespace, "k")
    assert store.list_namespaces(prefix=namespace) == [namespace]
    assert [h.item.id for h in mem.search("tools language", **{field: ident})] == [stored.id]


def test_namespaces_of_one_user_share_the_scope_and_stay_apart(store: JiyiStore, mem: Memory) -> None:
    store.put(("users", "u1", "memories"), "a", {"content": "Alice drinks green tea every morning"})
    store.put(("users", "u1", "prefs"), "b", {"content": "Alice prefers green themes in her editor"})
    store.put(("users", "u2", "memories"), "c", {"content": "Bob drinks green tea after lunch"})
    assert store.list_namespaces(prefix=("users",)) == [
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
        ("users", "u2", "memories"),
    ]
    assert store.list_namespaces(prefix=("users", "u1"), max_depth=2) == [("users", "u1")]
    hits = store.search(("users", "u1", "memories"), query="green tea")
    assert [(h.namespace, h.key) for h in hits] == [(("users", "u1", "memories"), "a")]
    both = store.search(("users", "u1"), query="green")
    assert sorted(h.key for h in both) == ["a", "b"]
    listed = store.search(("users", "u1", "prefs"))
    assert [h.key for h in listed] == ["b"]
    # jiyi sees one user u1 with two memories, and u2 apart.
    assert len(mem.list(user_id="u1").items) == 2 and len(mem.list(user_id="u2").items) == 1


def test_scope_mapping_is_configurable(mem: Memory) -> None:
    table = JiyiStore(mem, scopes={"tenants": "project_id"})
    table.put(("tenants", "acme", "facts"), "k", {"content": "Acme ships on Fridays only"})
    table.put(("users", "u1"), "k", {"content": "The user likes short answers"})
    tid = mem.runtime.tenant_id
    assert mem.get(item_id(tid, ("tenants", "acme", "facts"), "k")).project_id == "acme"
    # Not in this table: the default filing.
    assert mem.get(item_id(tid, ("users", "u1"), "k")).user_id == "users/u1"

    def by_org(ns: tuple[str, ...]) -> dict[str, str] | None:
        return {"project_id": ns[1], "user_id": ns[3]} if len(ns) >= 4 and ns[0] == "orgs" else None

    fn = JiyiStore(mem, scopes=by_org)
    fn.put(("orgs", "o1", "people", "u9"), "k", {"content": "U9 works on the billing service"})
    fn.put(("misc",), "k", {"content": "Miscellaneous note about the build"})
    item = mem.get(item_id(tid, ("orgs", "o1", "people", "u9"), "k"))
    assert (item.scope.value, item.user_id, item.project_id) == ("user", "u9", "o1")
    assert mem.get(item_id(tid, ("misc",), "k")).user_id == "misc"
    (hit,) = fn.search(("orgs", "o1"), query="billing service")
    assert hit.key == "k" and hit.namespace == ("orgs", "o1", "people", "u9")
    assert scope_of(("users", "x", "y")) == {"user_id": "x"} and DEFAULT_SCOPES["threads"] == "session_id"


def test_bad_scope_mappings_are_refused(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="scopes"):
        JiyiStore(mem, scopes={"users": "owner_id"})
    with pytest.raises(InvalidInput, match="scopes"):
        JiyiStore(mem, scopes=[("users", "user_id")])  # type: ignore[arg-type]
    for bad in ({}, {"team_id": "x"}, {"user_id": ""}, {"user_id": 3}, "u1"):
        store = JiyiStore(mem, scopes=lambda ns, bad=bad: bad)  # type: ignore[misc]
        with pytest.raises(InvalidInput, match="scopes"):
            store.put(("a",), "k", {"content": "some value to keep"})


def test_items_written_before_the_mapping_stay_readable_and_move(mem: Memory) -> None:
    # scopes={} is the old filing: every namespace under user "<labels joined>".
    old = JiyiStore(mem, scopes={})
    ns1, ns2 = ("users", "u1", "memories"), ("users", "u1", "prefs")
    old.put(ns1, "tea", {"content": "Alice drinks oolong tea every afternoon"})
    old.put(ns2, "theme", {"content": "Alice uses a dark theme in her terminal"})
    tid = mem.runtime.tenant_id
    assert mem.get(item_id(tid, ns1, "tea")).user_id == "users/u1/memories" == scope_id(ns1)

    store = JiyiStore(mem)
    got = store.get(ns1, "tea")
    assert got is not None and got.value["content"].startswith("Alice drinks")
    assert [h.key for h in store.search(ns1, query="oolong tea")] == ["tea"]
    assert sorted(h.key for h in store.search(("users", "u1"), query="Alice")) == ["tea", "theme"]
    assert sorted(h.key for h in store.search(("users",))) == ["tea", "theme"]
    assert store.list_namespaces(prefix=("users", "u1")) == [ns1, ns2]

    # A put moves the item to its mapped scope (same id, created_at, a new version).
    store.put(ns1, "tea", {"content": "Alice drinks oolong tea every afternoon", "v": 2})
    moved = mem.get(item_id(tid, ns1, "tea"))
    assert (moved.user_id, moved.version, moved.created_at) == ("u1", 2, got.created_at)
    # rescope() moves the rest, once.
    assert store.rescope() == 1
    assert mem.get(item_id(tid, ns2, "theme")).user_id == "u1"
    assert store.rescope() == 0
    assert sorted(h.key for h in store.search(("users", "u1"), query="Alice")) == ["tea", "theme"]
    assert len(mem.list(user_id="users/u1/memories").items) == 0


async def test_arescope_moves_old_items(mem: Memory) -> None:
    ns = ("projects", "p1", "notes")
    await JiyiStore(mem, scopes={}).aput(ns, "k", {"content": "The project targets Python 3.11"})
    store = JiyiStore(mem)
    assert await store.arescope() == 1
    assert mem.get(item_id(mem.runtime.tenant_id, ns, "k")).project_id == "p1"
    got = await store.aget(ns, "k")
    assert got is not None and got.value == {"content": "The project targets Python 3.11"}


# ---------------------------------------------------------------- TTL


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[tuple[Memory, Clock]]:
    clock = Clock()
    with Memory(SQLiteStore(tmp_path / "ttl.db"), clock=clock, background=False) as m:
        yield m, clock


def test_put_ttl_sets_expiry_and_hides_expired_items(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    store = JiyiStore(mem)
    assert store.supports_ttl is True
    ns = ("users", "u1", "memories")
    store.put(ns, "short", {"content": "The user is in Lisbon this week"}, ttl=30)
    store.put(ns, "kept", {"content": "The user is a vegetarian"})
    tid = mem.runtime.tenant_id
    short = mem.get(item_id(tid, ns, "short"))
    assert short.expires_at == clock.now + timedelta(minutes=30)
    assert short.metadata["lg_ttl"] == 30
    assert mem.get(item_id(tid, ns, "kept")).expires_at is None

    clock.now += timedelta(minutes=31)
    assert store.get(ns, "short") is None
    assert [h.key for h in store.search(ns)] == ["kept"]
    assert "short" not in [h.key for h in store.search(ns, query="Lisbon this week")]
    store.put(("users", "u2"), "gone", {"content": "A note that expires soon"}, ttl=1)
    clock.now += timedelta(minutes=2)
    assert store.list_namespaces() == [ns]
    # Maintenance archives what expired (the sweep); a put revives the key.
    changes = mem.maintain().changes
    assert {c.item_id for c in changes if c.action == "expire"} >= {short.id}
    assert mem.get(short.id).status == Status.ARCHIVED
    store.put(ns, "short", {"content": "The user is in Porto this week"}, ttl=None)
    again = store.get(ns, "short")
    assert again is not None and again.value["content"] == "The user is in Porto this week"
    assert mem.get(short.id).expires_at is None and "lg_ttl" not in mem.get(short.id).metadata


def test_reads_refresh_the_ttl(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    store = JiyiStore(mem)
    ns = ("users", "u1")
    store.put(ns, "k", {"content": "The user is preparing a talk on compilers"}, ttl=60)
    iid = item_id(mem.runtime.tenant_id, ns, "k")
    clock.now += timedelta(minutes=40)
    assert store.get(ns, "k", refresh_ttl=False) is not None
    assert mem.get(iid).expires_at == clock.now + timedelta(minutes=20)
    assert store.get(ns, "k") is not None  # LangGraph refreshes by default
    assert mem.get(iid).expires_at == clock.now + timedelta(minutes=60)
    version = mem.get(iid).version
    assert store.get(ns, "k") is not None  # nothing gained: no new version per read
    assert mem.get(iid).version == version
    clock.now += timedelta(minutes=50)
    assert [h.key for h in store.search(ns, query="compilers talk")] == ["k"]
    assert mem.get(iid).expires_at == clock.now + timedelta(minutes=60)
    clock.now += timedelta(minutes=50)
    assert [h.key for h in store.search(ns)] == ["k"]
    clock.now += timedelta(minutes=61)
    assert store.get(ns, "k") is None


def test_ttl_config_default_and_refresh_on_read(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    config: TTLConfig = {"default_ttl": 10, "refresh_on_read": False}
    store = JiyiStore(mem, ttl=config)
    assert store.ttl_config == config
    ns = ("agents", "a1")
    store.put(ns, "k", {"content": "The deploy script lives in tools/deploy.sh"})
    iid = item_id(mem.runtime.tenant_id, ns, "k")
    assert mem.get(iid).expires_at == clock.now + timedelta(minutes=10)
    clock.now += timedelta(minutes=8)
    assert store.get(ns, "k") is not None  # refresh_on_read=False: the ttl runs on
    assert store.get(ns, "k", refresh_ttl=True) is not None
    assert mem.get(iid).expires_at == clock.now + timedelta(minutes=10)
    store.put(ns, "forever", {"content": "The repository uses trunk-based development"}, ttl=None)
    assert mem.get(item_id(mem.runtime.tenant_id, ns, "forever")).expires_at is None


def test_bad_ttls_are_refused(mem: Memory) -> None:
    store = JiyiStore(mem)
    for bad in (0, -5, float("inf"), "10"):
        with pytest.raises(InvalidInput, match="ttl"):
            store.put(("users", "u1"), "k", {"content": "some value"}, ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="ttl"):
        JiyiStore(mem, ttl={"default_ttl": -1})
    with pytest.raises(InvalidInput, match="sweep"):
        JiyiStore(mem, ttl={"sweep_interval_minutes": 5})
