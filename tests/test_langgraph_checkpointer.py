"""JiyiCheckpointSaver: LangGraph's checkpointer on jiyi's store, checked with LangGraph's
own package (compiled graphs, interrupts, Command resume, subgraphs, async), on SQLite
files and on a real PostgreSQL (tests/pg.py)."""

from __future__ import annotations

import itertools
import operator
import re
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import INTERRUPT
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from jiyi.errors import InvalidInput
from jiyi.integrations.langgraph import JiyiCheckpointSaver, checkpoint_session_id
from jiyi.integrations.langgraph_checkpoint import THREADS_SESSION, checkpoint_time
from jiyi.memory import Memory
from jiyi.session.model import Checkpoint
from jiyi.store.base import ListCheckpoints, PutCheckpoint, Store, Write
from jiyi.store.sqlite import SQLiteStore
from tests.pg import give_back, pg_dsn, take_schema  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- graphs


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    n: int


def _step(name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        return {"log": [name], "n": state["n"] + 1}

    return node


def pipeline(saver: BaseCheckpointSaver[Any], **compile_args: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START -> a -> b -> c -> END, each step appending its name and counting."""
    builder = StateGraph(State)
    for name in ("a", "b", "c"):
        builder.add_node(name, _step(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver, **compile_args)


def _ask(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "你叫什么名字? / what is your name?", "n": state["n"]})
    return {"log": [f"answer:{answer}"], "n": state["n"] + 1}


def approval(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START -> draft -> ask (interrupt() for a person's answer) -> done -> END."""
    builder = StateGraph(State)
    builder.add_node("draft", _step("draft"))
    builder.add_node("ask", _ask)
    builder.add_node("done", _step("done"))
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "ask")
    builder.add_edge("ask", "done")
    builder.add_edge("done", END)
    return builder.compile(checkpointer=saver)


def with_subgraph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The interrupting node lives in a subgraph, so its checkpoints get a namespace of their own."""
    inner = StateGraph(State)
    inner.add_node("inner_ask", _ask)
    inner.add_edge(START, "inner_ask")
    inner.add_edge("inner_ask", END)
    outer = StateGraph(State)
    outer.add_node("before", _step("before"))
    outer.add_node("sub", inner.compile())
    outer.add_node("after", _step("after"))
    outer.add_edge(START, "before")
    outer.add_edge("before", "sub")
    outer.add_edge("sub", "after")
    outer.add_edge("after", END)
    return outer.compile(checkpointer=saver)


def fan_out(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """a -> (b1, b2, b3 in parallel: concurrent writes on one checkpoint) -> c."""
    builder = StateGraph(State)
    builder.add_node("a", _step("a"))
    builder.add_node("c", _step("c"))
    builder.add_edge(START, "a")
    for name in ("b1", "b2", "b3"):
        builder.add_node(name, lambda state, name=name: {"log": [name]})
        builder.add_edge("a", name)
        builder.add_edge(name, "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def cfg(thread: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, **extra}}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The same tests on a SQLite file and on PostgreSQL (skipped without a server)."""
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "graph.db") as s:
            yield s
        return
    from jiyi.store.postgres import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")
    schema = take_schema()
    s = PostgresStore(dsn, schema=schema)
    yield s
    s.close()
    give_back(dsn, schema)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "graph.db")
    yield s
    s.close()


def _rows(store: Store, session_id: str, tenant: str = "default") -> list[Any]:
    return store.execute(ListCheckpoints(tenant, session_id, limit=10_000))


# ---------------------------------------------------------------- graphs on every backend


def test_graph_state_history_and_resume_with_a_new_saver(any_store: Store) -> None:
    graph = pipeline(JiyiCheckpointSaver(any_store))
    out = graph.invoke({"log": ["start"], "n": 0}, cfg("A"))
    assert out == {"log": ["start", "a", "b", "c"], "n": 3}

    # A brand-new saver on the same store carries on where the thread stopped.
    again = pipeline(JiyiCheckpointSaver(any_store))
    out = again.invoke({"log": ["more"], "n": out["n"]}, cfg("A"))
    assert out["log"] == ["start", "a", "b", "c", "more", "a", "b", "c"] and out["n"] == 6

    state = again.get_state(cfg("A"))
    assert state.values == out and state.next == ()
    history = list(again.get_state_history(cfg("A")))
    # Two runs of 5 checkpoints each (input, loop start, after a, b, c), newest first;
    # the second run's steps continue the first's.
    assert len(history) == 10
    ids = [h.config["configurable"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True)
    assert [h.metadata["step"] for h in history if h.metadata] == list(range(8, -2, -1))
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == older.config["configurable"]["checkpoint_id"]
        )
    assert history[-1].parent_config is None
    # Time travel: the state after step "a" of the first run.
    first_a = next(h for h in history if h.metadata and h.metadata["step"] == 1)
    assert first_a.values == {"log": ["start", "a"], "n": 1} and first_a.next == ("b",)
    # Replaying from there forks the thread: b and c run again on that state.
    replay = again.invoke(None, first_a.config)
    assert replay == {"log": ["start", "a", "b", "c"], "n": 3}
    forked = list(again.get_state_history(cfg("A")))
    assert [(h.metadata or {}).get("source") for h in forked[:3]] == ["loop", "loop", "fork"]
    assert len(forked) == 13 and forked[0].values == replay


def test_interrupt_then_resume_with_command_and_interrupt_before(any_store: Store) -> None:
    graph = approval(JiyiCheckpointSaver(any_store))
    first = graph.invoke({"log": [], "n": 0}, cfg("ask"))
    [pending] = first["__interrupt__"]
    assert pending.value["question"].startswith("你叫什么名字")
    state = graph.get_state(cfg("ask"))
    assert state.next == ("ask",) and state.values == {"log": ["draft"], "n": 1}
    assert state.tasks[0].interrupts[0].value["n"] == 1
    # A different saver instance resumes the paused thread.
    resumed = approval(JiyiCheckpointSaver(any_store)).invoke(Command(resume="小明"), cfg("ask"))
    assert resumed == {"log": ["draft", "answer:小明", "done"], "n": 3}

    stop_before = pipeline(JiyiCheckpointSaver(any_store), interrupt_before=["c"])
    part = stop_before.invoke({"log": [], "n": 0}, cfg("paused"))
    assert part == {"log": ["a", "b"], "n": 2}
    assert stop_before.get_state(cfg("paused")).next == ("c",)
    # Edit the paused state, then continue.
    stop_before.update_state(cfg("paused"), {"log": ["edited"]})
    assert stop_before.invoke(None, cfg("paused")) == {"log": ["a", "b", "edited", "c"], "n": 3}


def test_threads_and_tenants_are_kept_apart(any_store: Store) -> None:
    acme = JiyiCheckpointSaver(any_store, tenant_id="acme")
    globex = JiyiCheckpointSaver(any_store, tenant_id="globex")
    pipeline(acme).invoke({"log": ["x"], "n": 0}, cfg("T1"))
    pipeline(acme).invoke({"log": ["y"], "n": 10}, cfg("T2"))
    assert pipeline(acme).get_state(cfg("T1")).values == {"log": ["x", "a", "b", "c"], "n": 3}
    assert pipeline(acme).get_state(cfg("T2")).values == {"log": ["y", "a", "b", "c"], "n": 13}
    # Another tenant sees nothing of acme's threads, even under the same thread id ...
    assert globex.get_tuple(cfg("T1")) is None
    assert list(globex.list(cfg("T1"))) == [] and list(globex.list(None)) == []
    assert pipeline(globex).get_state(cfg("T1")).values == {}
    # ... and its own thread T1 does not touch acme's.
    pipeline(globex).invoke({"log": ["g"], "n": 100}, cfg("T1"))
    assert pipeline(globex).get_state(cfg("T1")).values["n"] == 103
    assert pipeline(acme).get_state(cfg("T1")).values["n"] == 3
    assert {t.config["configurable"]["thread_id"] for t in acme.list(None)} == {"T1", "T2"}
    assert {t.config["configurable"]["thread_id"] for t in globex.list(None)} == {"T1"}
    globex.delete_thread("T1")
    assert globex.get_tuple(cfg("T1")) is None
    assert pipeline(acme).get_state(cfg("T1")).values["n"] == 3


def test_delete_thread_removes_checkpoints_writes_and_subgraphs(any_store: Store) -> None:
    saver = JiyiCheckpointSaver(any_store)
    graph = with_subgraph(saver)
    graph.invoke({"log": [], "n": 0}, cfg("gone"))
    pipeline(saver).invoke({"log": [], "n": 0}, cfg("kept"))
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(cfg("gone"))}
    assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)
    assert any(t.pending_writes for t in saver.list(cfg("gone")))

    saver.delete_thread("gone")
    assert saver.get_tuple(cfg("gone")) is None
    assert list(saver.list(cfg("gone"))) == []
    for ns in namespaces:
        assert _rows(any_store, checkpoint_session_id("gone", ns)) == []
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"kept"}
    assert [r.agent_state["langgraph"]["thread_id"] for r in _rows(any_store, THREADS_SESSION)] == ["kept"]
    assert pipeline(saver).get_state(cfg("kept")).values["n"] == 3
    # The deleted thread starts afresh.
    assert graph.get_state(cfg("gone")).values == {}


async def test_async_graph_uses_the_async_methods(any_store: Store) -> None:
    counted = _Counting(any_store)
    saver = JiyiCheckpointSaver(counted)
    graph = approval(saver)
    first = await graph.ainvoke({"log": [], "n": 0}, cfg("async"))
    assert first["__interrupt__"]
    done = await graph.ainvoke(Command(resume="Ada"), cfg("async"))
    assert done == {"log": ["draft", "answer:Ada", "done"], "n": 3}
    assert counted.sync_calls == 0 and counted.async_calls > 0
    state = await graph.aget_state(cfg("async"))
    assert state.values == done
    history = [s async for s in graph.aget_state_history(cfg("async"), limit=3)]
    assert [h.metadata["step"] for h in history if h.metadata] == [3, 2, 1]
    listed = [t async for t in saver.alist(cfg("async"), filter={"source": "input"})]
    assert [t.metadata["step"] for t in listed] == [-1]
    await saver.adelete_thread("async")
    assert await saver.aget_tuple(cfg("async")) is None
    assert counted.sync_calls == 0


class _Counting(Store):
    """A real store that counts which entry point ran each operation."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.sync_calls = 0
        self.async_calls = 0

    def execute(self, op: Any) -> Any:
        self.sync_calls += 1
        return self.inner.execute(op)

    async def aexecute(self, op: Any) -> Any:
        self.async_calls += 1
        return await self.inner.aexecute(op)

    def close(self) -> None:
        self.inner.close()


def _scenario(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """Runs, a fork, an interrupt and a subgraph interrupt; what LangGraph then shows."""
    steps, asks, nested = pipeline(saver), approval(saver), with_subgraph(saver)
    steps.invoke({"log": ["start"], "n": 0}, cfg("A"))
    steps.invoke({"log": ["more"], "n": 3}, cfg("A"))
    first_a = next(h for h in steps.get_state_history(cfg("A")) if (h.metadata or {}).get("step") == 1)
    steps.invoke(None, first_a.config)
    asks.invoke({"log": [], "n": 0}, cfg("B"))
    asks.invoke(Command(resume="是的"), cfg("B"))
    nested.invoke({"log": [], "n": 0}, cfg("C"))
    inner = nested.get_state(cfg("C"), subgraphs=True).tasks[0].state
    assert inner is not None and not isinstance(inner, dict)
    seen: list[Any] = [inner.values, inner.next]
    nested.invoke(Command(resume="later"), cfg("C"))
    parallel = fan_out(saver)
    seen.append(parallel.invoke({"log": [], "n": 0}, cfg("D")))
    steps.invoke({"log": [], "n": 0}, cfg("E"), durability="exit")  # one checkpoint, at the end
    for thread, graph in (("A", steps), ("B", asks), ("C", nested), ("D", parallel), ("E", steps)):
        for snap in graph.get_state_history(cfg(thread)):
            meta = snap.metadata or {}
            tasks = [(t.name, [i.value for i in t.interrupts]) for t in snap.tasks]
            seen.append((thread, snap.values, snap.next, meta.get("step"), meta.get("source"), tasks))
        by_ns: dict[str, list[Any]] = {}
        for t in saver.list(cfg(thread)):
            ns = t.config["configurable"]["checkpoint_ns"].split(":")[0]  # task ids differ per run
            writes = sorted((w[1], re.sub(r"id='\w+'", "", repr(w[2]))) for w in t.pending_writes or [])
            by_ns.setdefault(ns, []).append((t.metadata.get("step"), t.metadata.get("source"), writes))
        seen.append(sorted(by_ns.items()))
    return seen


def test_graphs_show_the_same_as_with_langgraphs_in_memory_saver(any_store: Store) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    ours = _scenario(JiyiCheckpointSaver(any_store))
    assert ours == _scenario(InMemorySaver())
    assert ours[2]["log"] == ["a", "b1", "b2", "b3", "c"]


# ---------------------------------------------------------------- across processes


def test_a_thread_paused_in_one_process_is_resumed_in_another(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    code = textwrap.dedent(
        f"""
        from jiyi.integrations.langgraph import JiyiCheckpointSaver
        from jiyi.store.sqlite import SQLiteStore
        from tests.test_langgraph_checkpointer import approval, cfg

        with SQLiteStore({str(db)!r}) as store:
            out = approval(JiyiCheckpointSaver(store, tenant_id="t")).invoke({{"log": [], "n": 0}}, cfg("p"))
            print(out["__interrupt__"][0].value["n"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    with SQLiteStore(db) as store:
        graph = approval(JiyiCheckpointSaver(store, tenant_id="t"))
        assert graph.get_state(cfg("p")).next == ("ask",)
        assert graph.invoke(Command(resume="Grace"), cfg("p")) == {
            "log": ["draft", "answer:Grace", "done"],
            "n": 3,
        }


def test_a_paused_thread_moves_from_sqlite_to_postgres_with_jiyi_copy(tmp_path: Path, pg_dsn: str) -> None:  # noqa: F811
    from jiyi.store.copy import copy_store
    from jiyi.store.postgres import PostgresStore

    schema = take_schema()
    with SQLiteStore(tmp_path / "laptop.db") as laptop:
        approval(JiyiCheckpointSaver(laptop)).invoke({"log": [], "n": 0}, cfg("moving"))
        server = PostgresStore(pg_dsn, schema=schema)
        try:
            copy_store(laptop, server)
            graph = approval(JiyiCheckpointSaver(server))
            assert graph.get_state(cfg("moving")).next == ("ask",)
            assert graph.invoke(Command(resume="Linus"), cfg("moving"))["log"] == [
                "draft",
                "answer:Linus",
                "done",
            ]
        finally:
            server.close()
            give_back(pg_dsn, schema)


# ---------------------------------------------------------------- the saver API directly


def _checkpoint(**values: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict.fromkeys(values, "00000000000000000000000000000001.0")
    return cp


def test_put_get_list_filter_before_limit(store: SQLiteStore) -> None:
    saver = JiyiCheckpointSaver(store)
    parent: str | None = None
    ids: list[str] = []
    for step in range(5):
        cp = _checkpoint(n=step, data=b"\x00\xffbytes", text="中文 text")
        conf = cfg("direct", checkpoint_ns="", **({"checkpoint_id": parent} if parent else {}))
        meta: Any = {"source": "loop", "step": step, "parents": {}, "even": step % 2 == 0}
        saved = saver.put(conf, cp, meta, {})
        assert saved == cfg("direct", checkpoint_ns="", checkpoint_id=cp["id"])
        parent = cp["id"]
        ids.append(cp["id"])

    latest = saver.get_tuple(cfg("direct"))
    assert latest is not None
    assert latest.checkpoint["id"] == ids[-1]
    assert latest.checkpoint["channel_values"] == {"n": 4, "data": b"\x00\xffbytes", "text": "中文 text"}
    assert latest.metadata == {"source": "loop", "step": 4, "parents": {}, "even": True}
    assert latest.parent_config == cfg("direct", checkpoint_ns="", checkpoint_id=ids[-2])
    assert latest.pending_writes == []
    second = saver.get_tuple(cfg("direct", checkpoint_id=ids[1]))
    assert second is not None and second.checkpoint["channel_values"]["n"] == 1
    assert saver.get_tuple(cfg("direct", checkpoint_id=str(uuid6()))) is None
    assert saver.get_tuple(cfg("nobody")) is None

    def listed(**kw: Any) -> list[str]:
        return [t.checkpoint["id"] for t in saver.list(cfg("direct"), **kw)]

    assert listed() == ids[::-1]
    assert listed(limit=2) == [ids[4], ids[3]]
    assert listed(before=cfg("direct", checkpoint_id=ids[3])) == [ids[2], ids[1], ids[0]]
    assert listed(before=cfg("direct", checkpoint_id=ids[3]), limit=1) == [ids[2]]
    assert listed(filter={"even": True}) == [ids[4], ids[2], ids[0]]
    assert listed(filter={"even": True, "step": 2}) == [ids[2]]
    assert listed(filter={"even": True}, before=cfg("direct", checkpoint_id=ids[4]), limit=1) == [ids[2]]
    assert listed(limit=0) == []
    before_only = {"configurable": {"checkpoint_id": ids[1]}}  # no thread id needed
    assert listed(before=before_only) == [ids[0]]
    assert checkpoint_time("not-a-uuid", "2024-05-01T12:00:00+08:00") == datetime(2024, 5, 1, 4, tzinfo=UTC)
    assert [t.checkpoint["id"] for t in saver.list(cfg("direct", checkpoint_id=ids[2]))] == [ids[2]]
    # The records are ordinary jiyi session checkpoints, newest first.
    records = _rows(store, checkpoint_session_id("direct"))
    assert [r.id for r in records] == ids[::-1]
    assert records[0].label == "langgraph" and records[0].metadata["metadata"]["step"] == 4
    assert records[0].created_at == checkpoint_time(ids[-1])


def test_long_threads_are_read_in_growing_pages_and_foreign_records_are_skipped(store: SQLiteStore) -> None:
    saver = JiyiCheckpointSaver(store)
    conf = cfg("long", checkpoint_ns="")
    ids = []
    for step in range(80):  # more than the first page of the scan
        cp = _checkpoint(n=step)
        conf = saver.put(conf, cp, {"source": "loop", "step": step}, {})
        ids.append(cp["id"])
    assert [t.checkpoint["id"] for t in saver.list(cfg("long"), filter={"step": 0}, limit=1)] == [ids[0]]
    assert len(list(saver.list(cfg("long"), before=cfg("long", checkpoint_id=ids[5]), limit=10))) == 5
    # A record someone saved through jiyi's own API into the thread's session is not LangGraph's.
    foreign = Checkpoint(session_id=checkpoint_session_id("long"), agent_state={"todo": ["x"]})
    store.execute(Write((PutCheckpoint(foreign),)))
    assert _rows(store, checkpoint_session_id("long"))[0].id == foreign.id  # the newest record
    latest = saver.get_tuple(cfg("long"))
    assert latest is not None and latest.checkpoint["id"] == ids[-1]
    assert saver.get_tuple(cfg("long", checkpoint_id=foreign.id)) is None
    assert len(list(saver.list(cfg("long")))) == 80
    saver.delete_thread("long")
    assert _rows(store, checkpoint_session_id("long")) == []


def test_pending_writes_keep_first_regular_write_and_replace_special_ones(store: SQLiteStore) -> None:
    saver = JiyiCheckpointSaver(store)
    cp = _checkpoint(n=0)
    conf = saver.put(cfg("w", checkpoint_ns=""), cp, {"source": "input", "step": -1}, {})
    saver.put_writes(conf, [("log", ["b1"]), ("n", 1)], task_id="task-b", task_path="~b")
    saver.put_writes(conf, [("log", ["a1"])], task_id="task-a", task_path="~a")
    saver.put_writes(conf, [("log", ["a-again"])], task_id="task-a", task_path="~a")  # regular: kept once
    saver.put_writes(conf, [(INTERRUPT, "first")], task_id="task-c", task_path="~c")
    saver.put_writes(conf, [(INTERRUPT, "second")], task_id="task-c", task_path="~c")  # special: replaced
    got = saver.get_tuple(conf)
    assert got is not None
    # In writes_sort_key order: task path, task id, index.
    assert got.pending_writes == [
        ("task-a", "log", ["a1"]),
        ("task-b", "log", ["b1"]),
        ("task-b", "n", 1),
        ("task-c", INTERRUPT, "second"),
    ]
    with pytest.raises(InvalidInput, match="checkpoint_id"):
        saver.put_writes(cfg("w"), [("n", 1)], task_id="t")
    with pytest.raises(InvalidInput, match="channel, value"):
        saver.put_writes(conf, [("n",)], task_id="t")  # type: ignore[list-item]


def test_bad_configs_are_refused_with_a_clear_message(store: SQLiteStore) -> None:
    saver = JiyiCheckpointSaver(store)
    with pytest.raises(InvalidInput, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidInput, match="thread_id"):
        saver.get_tuple({})
    with pytest.raises(InvalidInput, match="checkpoint_ns"):
        saver.get_tuple({"configurable": {"thread_id": "x", "checkpoint_ns": 3}})
    with pytest.raises(InvalidInput, match="longer than"):
        saver.get_tuple(cfg("x", checkpoint_id="c" * 500))
    with pytest.raises(InvalidInput, match="limit"):
        list(saver.list(cfg("x"), limit="3"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="tenant_id"):
        JiyiCheckpointSaver(store, tenant_id="")
    with pytest.raises(InvalidInput, match="Memory, AsyncMemory or Store"):
        JiyiCheckpointSaver("memory.db")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="thread_id"):
        pipeline(saver).invoke({"log": [], "n": 0}, {"configurable": {"checkpoint_ns": ""}})


def test_long_and_numeric_thread_ids_and_versions(store: SQLiteStore) -> None:
    saver = JiyiCheckpointSaver(store)
    long_id = "线程-" * 120  # longer than a jiyi id may be: the session id is hashed
    assert checkpoint_session_id(long_id).startswith("lg#c#")
    graph = pipeline(saver)
    assert graph.invoke({"log": [], "n": 0}, cfg(long_id))["n"] == 3
    assert graph.invoke({"log": [], "n": 0}, {"configurable": {"thread_id": 42}})["n"] == 3
    assert graph.get_state(cfg("42")).values["n"] == 3
    saver.delete_thread(long_id)
    assert graph.get_state(cfg(long_id)).values == {}
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    assert v1 < v2 and v2.startswith("0" * 31 + "2.")
    assert saver.get_next_version(7, None).startswith("0" * 31 + "8.")


def test_a_memory_target_uses_its_tenant_and_shows_in_jiyi(tmp_path: Path) -> None:
    from jiyi.embed.hashing import HashEmbedder

    with Memory(SQLiteStore(tmp_path / "m.db"), embedder=HashEmbedder(), tenant_id="team") as mem:
        saver = JiyiCheckpointSaver(mem)
        assert saver.tenant_id == "team"
        pipeline(saver).invoke({"log": [], "n": 0}, cfg("chat-1"))
        shown = mem.list_checkpoints(checkpoint_session_id("chat-1"))
        assert len(shown) == 5 and all(c.label == "langgraph" for c in shown)
        assert [c.metadata["metadata"]["step"] for c in shown] == [3, 2, 1, 0, -1]
        assert mem.list_checkpoints("chat-1") == []  # the thread id itself stays free for a jiyi session


# ---------------------------------------------------------------- docs


def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "langgraph.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    for n, block in enumerate(blocks):
        # A module of its own per block, as when run as a script: LangGraph resolves the
        # state's type hints through the module.
        module = types.ModuleType(f"langgraph_doc_{n}")
        monkeypatch.setitem(sys.modules, module.__name__, module)
        exec(compile(block, "docs/langgraph.md", "exec"), module.__dict__)
