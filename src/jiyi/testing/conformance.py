"""Backend-neutral conformance suite for :class:`jiyi.store.base.Store`.

After LangGraph's checkpointer conformance package: the behaviour every storage backend
must show is written once, here, against the public interface only
(``execute``/``aexecute``/``close`` and the op values of :mod:`jiyi.store.base`).
Nothing is mocked and nothing reaches into a backend's internals. jiyi runs it against
SQLite (a file and ``":memory:"``, ``tests/test_store_sqlite.py``), PostgreSQL with
pgvector (``tests/test_store_postgres.py``) and the Redis cache wrapper; any other backend
runs the very same tests. The module needs pytest (``pip install pytest``); importing
:mod:`jiyi` never imports it.

Registering a backend
---------------------
A backend registers with a pytest fixture named ``store`` that yields a *fresh, empty*,
open store and closes it afterwards (closing twice must be harmless: some tests close
the store themselves). Put the fixture in the test module, in a ``conftest.py``, or in
the subclass itself, and subclass :class:`StoreConformance` in a ``test_*.py`` module::

    # tests/test_my_store.py
    from collections.abc import Iterator

    import pytest

    from jiyi.testing.conformance import StoreConformance
    from my_package import MyStore


    class TestMyStoreConformance(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path) -> Iterator[MyStore]:
            s = MyStore(tmp_path / "data")  # a factory: any fresh, empty store
            yield s
            s.close()

Then ``pytest tests/test_my_store.py`` runs the whole suite (``-k Conformance`` selects
it). For pytest's detailed assertion messages inside the suite, register it for
assertion rewriting before it is imported, in your ``conftest.py``::

    import pytest

    pytest.register_assert_rewrite("jiyi.testing.conformance")

The fixture may be parametrised (``tests/test_store_sqlite.py`` runs every test on a
file and on ``":memory:"``). A known backend bug is marked in the backend's own module
by overriding the one test with a strict xfail that calls ``super()``, so the suite
itself stays the same for everyone and no test is ever skipped::

    class TestMyStoreConformance(StoreConformance):
        @pytest.mark.xfail(reason="...", strict=True)
        def test_something(self, store):
            super().test_something(store)

What a backend implements
-------------------------
Every op of :mod:`jiyi.store.base` except :class:`~jiyi.store.base.Retrieve`: for that
one, ``execute``/``aexecute`` hand the op to :func:`jiyi.store.retrieve.retrieve` /
:func:`~jiyi.store.retrieve.aretrieve`, which build the candidates from the search
primitives (:class:`~jiyi.store.base.VectorHits`, :class:`~jiyi.store.base.KeywordHits`,
:class:`~jiyi.store.base.ThreadLinks`, :class:`~jiyi.store.base.LoadHits`) the backend
answers. The suite checks both the primitives and ``Retrieve``.

The store must be usable from several threads and from asyncio at once.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import threading
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from jiyi.errors import InvalidInput, StoreError, WriteConflict
from jiyi.model import MemoryItem, MemoryType, Relation, RelationType, Scope, Source, Status, Visibility
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AccessPage,
    AppendMessages,
    CacheGet,
    CachePut,
    Candidate,
    ClaimJobs,
    CountEvents,
    DeleteCheckpoints,
    DeleteMessages,
    DumpRows,
    Filter,
    ForgetAccesses,
    GetCheckpoint,
    GetHistory,
    GetItems,
    GetMessages,
    GetStats,
    Guard,
    HistoryAction,
    HistoryEvent,
    KeywordHits,
    Link,
    ListAccesses,
    ListCheckpoints,
    ListItems,
    ListJobs,
    Loaded,
    LoadHits,
    MemoryAccess,
    Op,
    Purge,
    PutCheckpoint,
    PutJob,
    RecordAccess,
    RecordEvent,
    Retrieve,
    Retrieved,
    ScopeClock,
    SetVectors,
    Store,
    ThreadLinks,
    Touch,
    Upsert,
    Vector,
    VectorHits,
    VectorsFor,
    Viewer,
    Write,
)
from jiyi.store.retrieve import retrieve
from jiyi.text.timeparse import EARLIEST, LATEST
from jiyi.text.tokenize import fold_terms, index_text, query_terms

__all__ = [
    "DIM",
    "MODEL",
    "NOW",
    "OTHER_TENANT",
    "T0",
    "TENANT",
    "StoreConformance",
    "access",
    "accesses",
    "all_ids",
    "answer",
    "event_for",
    "flt",
    "full_item",
    "get",
    "keyword_ids",
    "make_item",
    "purge",
    "put",
    "unit",
    "upsert",
    "vector_cands",
]

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
NOW = T0 + timedelta(days=30)  # "now" for expiry in every filter of this suite
MODEL = "test"
DIM = 32
TENANT = "t1"
OTHER_TENANT = "t2"

_ids = itertools.count()


# ---------------------------------------------------------------- helpers


def make_item(content: str = "default memory content", **overrides: Any) -> MemoryItem:
    """A valid item in tenant ``t1``, scope ``user:alice``, created at :data:`T0`."""
    fields: dict[str, Any] = {
        "id": f"item-{next(_ids):06d}",
        "tenant_id": TENANT,
        "content": content,
        "user_id": "alice",
        "created_at": T0,
        "updated_at": T0,
    }
    fields.update(overrides)
    return MemoryItem.build(**fields)


def event_for(
    item: MemoryItem,
    action: HistoryAction = HistoryAction.ADD,
    *,
    before: MemoryItem | None = None,
    after: MemoryItem | bool | None = True,
    at: datetime | None = None,
    reason: str = "",
    actor: str | None = None,
) -> HistoryEvent:
    """A history event about ``item``; ``after=True`` means "snapshot of ``item``"."""
    after_item = item if after is True else (after or None)
    return HistoryEvent(
        item_id=item.id,
        tenant_id=item.tenant_id,
        action=action,
        at=at or item.updated_at,
        version=item.version,
        reason=reason,
        actor=actor,
        before=None if before is None else before.to_json_dict(),
        after=None if after_item is None else after_item.to_json_dict(),
    )


def upsert(
    item: MemoryItem,
    vector: Vector | None = None,
    *,
    model_id: str | None = MODEL,
    action: HistoryAction = HistoryAction.ADD,
    before: MemoryItem | None = None,
) -> Upsert:
    """An :class:`Upsert` indexing ``item.content`` (model id only sent with a vector)."""
    return Upsert(
        item=item,
        terms=index_text(item.content),
        event=event_for(item, action, before=before),
        vector=vector,
        model_id=model_id if vector is not None else None,
    )


def purge(item: MemoryItem, at: datetime | None = None) -> Purge:
    return Purge(
        tenant_id=item.tenant_id,
        item_id=item.id,
        event=event_for(item, HistoryAction.PURGE, before=item, after=None, at=at),
    )


def put(store: Store, *items: MemoryItem, vectors: Iterable[Vector | None] | None = None) -> None:
    """Upsert ``items`` (with optional vectors of :data:`MODEL`) in one Write."""
    vecs = list(vectors) if vectors is not None else [None] * len(items)
    store.execute(Write(tuple(upsert(i, v) for i, v in zip(items, vecs, strict=True))))


def unit(rng: np.random.Generator, dim: int = DIM) -> Vector:
    v = rng.standard_normal(dim).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def flt(tenant_id: str = TENANT, **kw: Any) -> Filter:
    kw.setdefault("now", NOW)
    return Filter(tenant_id=tenant_id, **kw)


def all_ids(store: Store, page_size: int = 100, **filter_kw: Any) -> list[str]:
    """Every id ListItems yields for the filter, following cursors."""
    out: list[str] = []
    cursor: str | None = None
    for _ in range(10_000):
        page = store.execute(ListItems(flt(**filter_kw), limit=page_size, cursor=cursor))
        out.extend(i.id for i in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError("ListItems never stopped issuing cursors")


def get(store: Store, item: MemoryItem) -> MemoryItem | None:
    found = store.execute(GetItems(item.tenant_id, (item.id,)))
    assert len(found) <= 1
    return found[0] if found else None


def keyword_ids(store: Store, query: str, **filter_kw: Any) -> set[str]:
    terms = query_terms(query)
    assert terms, f"query {query!r} has no terms"
    cands = store.execute(Retrieve(flt(**filter_kw), MODEL, None, terms, vector_k=0, keyword_k=50))
    assert all(c.keyword is not None for c in cands)
    return {c.item.id for c in cands}


def vector_cands(
    store: Store, q: Vector, k: int = 50, model: str = MODEL, **filter_kw: Any
) -> list[Candidate]:
    return store.execute(Retrieve(flt(**filter_kw), model, q, (), vector_k=k, keyword_k=0))


def answer(cands: list[Candidate]) -> list[tuple[Any, ...]]:
    """Candidates as comparable values (vectors as bytes), every field kept."""
    return [
        (
            c.item,
            c.cosine,
            c.keyword,
            None if c.vector is None else np.asarray(c.vector, dtype=np.float32).tobytes(),
            c.prev_id,
            c.next_id,
            c.prev_cosine,
            c.next_cosine,
            c.prev_keyword,
            c.next_keyword,
        )
        for c in cands
    ]


def full_item(**overrides: Any) -> MemoryItem:
    """An item with every optional field set to something non-default."""
    cst = timezone(timedelta(hours=8))
    fields: dict[str, Any] = {
        "id": "全-item-1 with spaces:and/colons",
        "tenant_id": TENANT,
        "content": "我们决定用 Next.js 而不是 Remix — “quoted” émoji 🎉",
        "raw": "用户: 我们决定用 Next.js 而不是 Remix\n助手: 好的",
        "summary": "选择 Next.js",
        "structured": {
            "框架": "Next.js",
            "rejected": ["Remix", "Nuxt"],
            "score": 0.125,
            "nested": {"ok": True, "none": None, "n": -3, "emoji": "🎉", "esc": 'a"b\\c\u0000'},
        },
        "memory_type": MemoryType.DECISION,
        "scope": Scope.PROJECT,
        "user_id": "alice",
        "project_id": "网站",
        "session_id": "sess-1",
        "agent_id": "agent-7",
        "source": Source.AI,
        "source_id": "conv-42",
        "confidence": 0.123456789,
        "importance": 0.987654321,
        "visibility": Visibility.OWNER_ONLY,
        "status": Status.SUPERSEDED,
        "tags": ("前端", "framework", "tag with space"),
        "created_at": datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        "updated_at": datetime(2024, 2, 3, 12, 5, 6, 7, tzinfo=cst),
        "occurred_at": datetime(2023, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "last_used_at": datetime(2024, 3, 4, 5, 6, 7, 1, tzinfo=UTC),
        "expires_at": datetime(2099, 1, 1, tzinfo=UTC),
        "access_count": 7,
        "mention_count": 3,
        "version": 4,
        "relations": (
            Relation(type=RelationType.SUPERSEDES, target_id="old-1", strength=0.25),
            Relation(type=RelationType.RELATED_TO, target_id="其他", strength=1.0),
        ),
        "metadata": {"来源": "chat", "list": [1, 2.5, "三"], "flag": False},
    }
    fields.update(overrides)
    return MemoryItem.build(**fields)


def sample_ops(item: MemoryItem) -> dict[str, Op[Any]]:
    """One op of every kind, touching ``item``."""
    v = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    return {
        "GetItems": GetItems(item.tenant_id, (item.id,)),
        "ListItems": ListItems(flt()),
        "Retrieve": Retrieve(flt(), MODEL, v, ("default",), vector_k=5, keyword_k=5),
        "GetHistory": GetHistory(item.tenant_id, item.id),
        "GetStats": GetStats(flt()),
        "CountEvents": CountEvents("k", T0),
        "CacheGet": CacheGet(MODEL, ("h",)),
        "VectorsFor": VectorsFor(item.tenant_id, MODEL, (item.id,)),
        "ListAccesses": ListAccesses(item.tenant_id),
        "Write": Write((upsert(make_item()),)),
    }


OP_NAMES = (
    "GetItems",
    "ListItems",
    "Retrieve",
    "GetHistory",
    "GetStats",
    "CountEvents",
    "CacheGet",
    "VectorsFor",
    "ListAccesses",
    "Write",
)


def access(
    *served: tuple[str, float],
    at: datetime = T0,
    tenant_id: str = TENANT,
    user_id: str | None = "alice",
    **fields: Any,
) -> MemoryAccess:
    """A retrieval log entry serving ``(item_id, score)`` pairs in that order."""
    return MemoryAccess(
        id=fields.pop("id", f"access-{next(_ids):06d}"),
        tenant_id=tenant_id,
        at=at,
        kind=fields.pop("kind", "search"),
        query=fields.pop("query", "what does alice like?"),
        retrieved=tuple(
            Retrieved(item_id, rank, score, similarity=score / 2, relevance=None if rank > 1 else 0.75)
            for rank, (item_id, score) in enumerate(served, start=1)
        ),
        user_id=user_id,
        **fields,
    )


def accesses(store: Store, tenant_id: str = TENANT, **kw: Any) -> list[MemoryAccess]:
    """Every access ListAccesses yields, following cursors."""
    out: list[MemoryAccess] = []
    cursor: str | None = None
    for _ in range(10_000):
        page: AccessPage = store.execute(ListAccesses(tenant_id, cursor=cursor, **kw))
        out.extend(page.accesses)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError("ListAccesses never stopped issuing cursors")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# ---------------------------------------------------------------- the suite


class StoreConformance:
    """Subclass as ``Test<Backend>Conformance`` next to a ``store`` fixture (see module doc)."""

    # ------------------------------------------------------------ GetItems / round trip

    def test_upsert_then_get_round_trips_every_field(self, store: Store) -> None:
        item = full_item()
        store.execute(Write((upsert(item, unit(np.random.default_rng(1))),)))
        got = store.execute(GetItems(TENANT, (item.id,)))
        assert got == [item]
        back = got[0]
        assert back.model_dump_json() == item.model_dump_json()
        for name in ("created_at", "updated_at", "occurred_at", "last_used_at", "expires_at"):
            value = getattr(back, name)
            assert value == getattr(item, name), name
            assert value.utcoffset() == timedelta(0), name
        assert back.updated_at == datetime(2024, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
        assert back.structured == item.structured
        assert back.metadata == item.metadata
        assert back.relations == item.relations
        assert back.tags == ("前端", "framework", "tag with space")

    def test_round_trip_of_minimal_item(self, store: Store) -> None:
        item = MemoryItem.build(content="x", user_id="u")  # every default, default tenant
        put(store, item)
        assert store.execute(GetItems(item.tenant_id, (item.id,))) == [item]

    def test_get_items_omits_unknown_ids_and_other_tenants(self, store: Store) -> None:
        a, b = make_item("a"), make_item("b")
        other = make_item("other", tenant_id=OTHER_TENANT)
        put(store, a, b)
        put(store, other)
        got = store.execute(GetItems(TENANT, ("nope", b.id, other.id, a.id)))
        assert sorted(i.id for i in got) == sorted([a.id, b.id])
        assert store.execute(GetItems(TENANT, ("nope",))) == []
        assert store.execute(GetItems(TENANT, ())) == []
        assert store.execute(GetItems(OTHER_TENANT, (a.id, b.id))) == []
        assert store.execute(GetItems(OTHER_TENANT, (other.id,))) == [other]

    def test_empty_store_reads_are_empty(self, store: Store) -> None:
        q = unit(np.random.default_rng(0))
        assert store.execute(ListItems(flt())).items == []
        assert store.execute(ListItems(flt())).next_cursor is None
        assert store.execute(Retrieve(flt(), MODEL, q, ("x",), vector_k=5, keyword_k=5)) == []
        assert store.execute(GetHistory(TENANT, "x")) == []
        assert store.execute(CountEvents("k", T0)) == 0
        assert store.execute(CacheGet(MODEL, ("h",))) == {}
        assert store.execute(VectorsFor(TENANT, MODEL, ("x",))) == {}
        stats = store.execute(GetStats(flt(statuses=())))
        assert stats.total == 0
        assert (stats.by_type, stats.by_scope, stats.by_status) == ({}, {}, {})
        assert stats.avg_confidence is None
        assert stats.avg_importance is None

    # ------------------------------------------------------------ tenant isolation

    def test_tenant_isolation_with_identical_scope_keys(self, store: Store) -> None:
        rng = np.random.default_rng(2)
        q = unit(rng)
        a = make_item("我喜欢喝咖啡 coffee every morning", tenant_id="A", tags=("drink",))
        a2 = make_item("coffee beans from Yunnan", tenant_id="A", memory_type=MemoryType.PREFERENCE)
        b = make_item("coffee is fine, tea is better", tenant_id="B", tags=("drink",), confidence=0.1)
        store.execute(Write((upsert(a, q), upsert(a2, q), upsert(b, unit(rng)))))
        alice = ("user:alice",)

        assert store.execute(GetItems("B", (a.id, a2.id))) == []
        assert all_ids(store, tenant_id="B", scope_keys=alice) == [b.id]
        assert all_ids(store, tenant_id="B") == [b.id]
        assert all_ids(store, tenant_id="B", tags=("drink",), statuses=(), include_expired=True) == [b.id]
        assert sorted(all_ids(store, tenant_id="A", scope_keys=alice)) == sorted([a.id, a2.id])

        for scope_keys in (alice, ()):
            cands = store.execute(
                Retrieve(
                    flt("B", scope_keys=scope_keys),
                    MODEL,
                    q,
                    query_terms("咖啡 coffee"),
                    vector_k=10,
                    keyword_k=10,
                )
            )
            assert [c.item.id for c in cands] == [b.id]
        assert keyword_ids(store, "coffee", tenant_id="A") == {a.id, a2.id}

        stats = store.execute(GetStats(flt("B", statuses=())))
        assert stats.total == 1
        assert stats.by_type == {"fact": 1}
        assert stats.avg_confidence == pytest.approx(0.1)
        assert store.execute(GetStats(flt("C", statuses=()))).total == 0

        assert store.execute(VectorsFor("B", MODEL, (a.id,))) == {}
        assert store.execute(GetHistory("B", a.id)) == []
        assert len(store.execute(GetHistory("A", a.id))) == 1

        # Writes addressed to tenant B cannot reach tenant A's item.
        store.execute(Write((Touch("B", (a.id,), NOW),)))
        store.execute(
            Write(
                (Purge("B", a.id, event_for(a.model_copy(update={"tenant_id": "B"}), HistoryAction.PURGE)),)
            )
        )
        assert get(store, a) == a

    def test_the_same_id_in_two_tenants_is_two_items(self, store: Store) -> None:
        """Ids are unique per tenant: another tenant can neither take nor probe an id."""
        rng = np.random.default_rng(3)
        a = make_item("tenant A owns this id apple", tenant_id="A")
        b = make_item("tenant B has its own pear", id=a.id, tenant_id="B")
        put(store, a, vectors=[unit(rng)])
        put(store, b, vectors=[unit(rng)])
        assert get(store, a) == a
        assert get(store, b) == b
        assert keyword_ids(store, "pear", tenant_id="A") == set()
        assert keyword_ids(store, "pear", tenant_id="B") == {a.id}
        b2 = b.evolve(content="tenant B changed its pear", version=2)
        store.execute(Write((upsert(b2, action=HistoryAction.UPDATE, before=b), Touch("B", (a.id,), NOW))))
        assert get(store, a) == a
        assert [e.action for e in store.execute(GetHistory("A", a.id))] == [HistoryAction.ADD]
        assert [e.action for e in store.execute(GetHistory("B", a.id))] == [
            HistoryAction.ADD,
            HistoryAction.UPDATE,
        ]
        assert len(store.execute(VectorsFor("A", MODEL, (a.id,)))) == 1
        store.execute(Write((purge(b2, at=NOW),)))
        assert get(store, a) == a
        assert store.execute(GetItems("B", (a.id,))) == []
        assert keyword_ids(store, "apple", tenant_id="A") == {a.id}

    # ------------------------------------------------------------ replace

    def test_replace_updates_keyword_index(self, store: Store) -> None:
        v1 = make_item("I love green tea")
        put(store, v1)
        assert keyword_ids(store, "tea") == {v1.id}
        v2 = v1.evolve(content="I love black coffee", version=2, updated_at=T0 + timedelta(hours=1))
        store.execute(Write((upsert(v2, action=HistoryAction.UPDATE, before=v1),)))
        assert keyword_ids(store, "tea") == set()
        assert keyword_ids(store, "coffee") == {v2.id}
        assert get(store, v1) == v2
        assert all_ids(store) == [v1.id]
        assert store.execute(GetStats(flt())).total == 1

    def test_replace_without_vector_keeps_the_stored_vector(self, store: Store) -> None:
        v = unit(np.random.default_rng(3))
        item = make_item("vector keeper")
        store.execute(Write((upsert(item, v),)))
        store.execute(Write((upsert(item.evolve(content="vector keeper, renamed", version=2), None),)))
        stored = store.execute(VectorsFor(TENANT, MODEL, (item.id,)))
        assert stored[item.id].tobytes() == v.tobytes()
        (cand,) = vector_cands(store, v)
        assert cand.cosine == pytest.approx(1.0, abs=1e-5)
        assert cand.item.content == "vector keeper, renamed"

    def test_replace_with_vector_replaces_the_vector(self, store: Store) -> None:
        rng = np.random.default_rng(4)
        v1, v2 = unit(rng), unit(rng)
        item = make_item("vector changer")
        store.execute(Write((upsert(item, v1),)))
        store.execute(Write((upsert(item.evolve(version=2), v2),)))
        assert store.execute(VectorsFor(TENANT, MODEL, (item.id,)))[item.id].tobytes() == v2.tobytes()
        (cand,) = vector_cands(store, v2)
        assert cand.cosine == pytest.approx(1.0, abs=1e-5)

    def test_replace_replaces_tags(self, store: Store) -> None:
        item = make_item("tagged", tags=("a", "b"))
        put(store, item)
        assert all_ids(store, tags=("a",)) == [item.id]
        put(store, item.evolve(tags=("b", "c"), version=2))
        assert all_ids(store, tags=("a",)) == []
        assert all_ids(store, tags=("b",)) == [item.id]
        assert all_ids(store, tags=("b", "c")) == [item.id]
        assert get(store, item).tags == ("b", "c")  # type: ignore[union-attr]
        put(store, item.evolve(tags=(), version=3))
        assert all_ids(store, tags=("b",)) == []

    def test_without_tags_leaves_out_items_with_any_of_them(self, store: Store) -> None:
        turn = make_item("what was said", tags=("resource", "turn"))
        fact = make_item("what is known", tags=("fact",))
        plain = make_item("untagged")
        for item in (turn, fact, plain):
            put(store, item)
        assert sorted(all_ids(store, without_tags=("turn",))) == sorted([fact.id, plain.id])
        assert sorted(all_ids(store, without_tags=("turn", "fact"))) == [plain.id]
        assert all_ids(store, tags=("resource",), without_tags=("fact",)) == [turn.id]

    def test_replace_moves_scope_and_status(self, store: Store) -> None:
        v = unit(np.random.default_rng(5))
        item = make_item("moving scopes: kiwi")
        store.execute(Write((upsert(item, v),)))
        moved = item.evolve(scope=Scope.PROJECT, project_id="p1", version=2)
        put(store, moved)
        assert keyword_ids(store, "kiwi", scope_keys=("user:alice",)) == set()
        assert keyword_ids(store, "kiwi", scope_keys=("project:p1",)) == {item.id}
        assert [c.item.id for c in vector_cands(store, v, scope_keys=("project:p1",))] == [item.id]
        assert vector_cands(store, v, scope_keys=("user:alice",)) == []
        put(store, moved.evolve(status=Status.ARCHIVED, version=3))
        assert keyword_ids(store, "kiwi") == set()
        assert vector_cands(store, v) == []
        assert keyword_ids(store, "kiwi", statuses=(Status.ARCHIVED,)) == {item.id}

    # ------------------------------------------------------------ purge

    def test_purge_removes_item_vector_and_keywords_but_keeps_history(self, store: Store) -> None:
        v = unit(np.random.default_rng(6))
        item = make_item("purge me: pineapple", tags=("gone",))
        keep = make_item("keep me: pineapple")
        store.execute(Write((upsert(item, v), upsert(keep, -v))))
        store.execute(Write((purge(item, at=T0 + timedelta(hours=1)),)))

        assert get(store, item) is None
        assert store.execute(VectorsFor(TENANT, MODEL, (item.id, keep.id))).keys() == {keep.id}
        assert keyword_ids(store, "pineapple") == {keep.id}
        assert [c.item.id for c in vector_cands(store, v)] == [keep.id]
        assert all_ids(store, statuses=(), include_expired=True) == [keep.id]
        assert all_ids(store, tags=("gone",), statuses=()) == []
        assert store.execute(GetStats(flt(statuses=()))).total == 1

        history = store.execute(GetHistory(TENANT, item.id))
        assert [e.action for e in history] == [HistoryAction.ADD, HistoryAction.PURGE]
        assert history[-1].before == item.to_json_dict()
        assert history[-1].after is None

        # The id is free again; history goes on.
        again = make_item("back again: mango", id=item.id)
        put(store, again)
        assert get(store, item) == again
        assert keyword_ids(store, "pineapple") == {keep.id}
        assert [e.action for e in store.execute(GetHistory(TENANT, item.id))] == [
            HistoryAction.ADD,
            HistoryAction.PURGE,
            HistoryAction.ADD,
        ]

    # ------------------------------------------------------------ atomicity

    def _assert_untouched(
        self, store: Store, existing: MemoryItem, doomed: MemoryItem, new: MemoryItem
    ) -> None:
        assert get(store, new) is None
        assert store.execute(GetHistory(TENANT, new.id)) == []
        assert store.execute(VectorsFor(TENANT, MODEL, (new.id,))) == {}
        assert keyword_ids(store, "newcomer") == set()
        assert get(store, existing) == existing  # not touched, not replaced
        assert keyword_ids(store, "original") == {existing.id}
        assert keyword_ids(store, "rewritten") == set()
        assert get(store, doomed) == doomed  # not purged
        assert len(store.execute(GetHistory(TENANT, doomed.id))) == 1
        assert store.execute(CountEvents("rate", T0 - timedelta(days=1))) == 0
        assert store.execute(CacheGet(MODEL, ("h1",))) == {}
        assert accesses(store) == []
        assert sorted(all_ids(store)) == sorted([existing.id, doomed.id])

    def _atomicity_setup(self, store: Store) -> tuple[MemoryItem, MemoryItem, MemoryItem, list[Any]]:
        rng = np.random.default_rng(7)
        existing = make_item("original words")
        doomed = make_item("doomed item")
        store.execute(Write((upsert(existing, unit(rng)), upsert(doomed))))
        new = make_item("a newcomer")
        changes: list[Any] = [
            upsert(new, unit(rng)),
            Touch(TENANT, (existing.id,), NOW),
            RecordEvent("rate", T0),
            CachePut(MODEL, (("h1", unit(rng)),)),
            RecordAccess(access((existing.id, 0.5))),
            upsert(existing.evolve(content="rewritten words", version=2), unit(rng)),
            purge(doomed),
        ]
        return existing, doomed, new, changes

    def test_write_is_atomic_when_last_change_loads_a_taken_id(self, store: Store) -> None:
        from jiyi.store.base import DumpRows, LoadRows

        existing, doomed, new, changes = self._atomicity_setup(store)
        (row,) = [r for r in store.execute(DumpRows("items")).rows if r["id"] == existing.id]
        with pytest.raises(InvalidInput):
            store.execute(Write((*changes, LoadRows("items", (row,)))))
        self._assert_untouched(store, existing, doomed, new)
        # The store still works afterwards.
        store.execute(Write(tuple(changes)))
        assert get(store, new) == new

    def test_write_is_atomic_when_last_change_has_vector_without_model(self, store: Store) -> None:
        existing, doomed, new, changes = self._atomicity_setup(store)
        bad = upsert(make_item("vector without model"), unit(np.random.default_rng(8)), model_id=None)
        assert bad.model_id is None
        assert bad.vector is not None
        with pytest.raises(InvalidInput):
            store.execute(Write((*changes, bad)))
        self._assert_untouched(store, existing, doomed, new)
        assert keyword_ids(store, "without") == set()

    def test_empty_write_is_fine(self, store: Store) -> None:
        store.execute(Write(()))
        assert all_ids(store) == []

    # ------------------------------------------------------------ ListItems

    def _timeline(self, store: Store, n: int) -> list[MemoryItem]:
        """``n`` items, three per timestamp (ties broken by id), written in shuffled order."""
        rng = np.random.default_rng(n)
        items = [
            make_item(
                f"timeline {k}",
                id=f"{rng.integers(1 << 40):012x}-{k}",
                created_at=T0 + timedelta(minutes=k // 3),
            )
            for k in range(n)
        ]
        shuffled = [items[i] for i in rng.permutation(n)]
        put(store, *shuffled)
        return sorted(items, key=lambda i: (i.created_at, i.id))

    def test_list_orders_by_created_at_then_id(self, store: Store) -> None:
        expected = [i.id for i in self._timeline(store, 12)]
        asc = store.execute(ListItems(flt(), limit=100))
        desc = store.execute(ListItems(flt(), limit=100, descending=True))
        assert [i.id for i in asc.items] == expected
        assert [i.id for i in desc.items] == expected[::-1]
        assert asc.next_cursor is None
        assert desc.next_cursor is None

    @pytest.mark.parametrize("descending", [False, True])
    @pytest.mark.parametrize("n", [25, 20])
    def test_list_cursor_pagination_yields_each_item_once(
        self, store: Store, n: int, descending: bool
    ) -> None:
        expected = [i.id for i in self._timeline(store, n)]
        if descending:
            expected.reverse()
        seen: list[str] = []
        sizes: list[int] = []
        cursor: str | None = None
        while True:
            page = store.execute(ListItems(flt(), limit=10, cursor=cursor, descending=descending))
            sizes.append(len(page.items))
            seen.extend(i.id for i in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
            assert len(sizes) < 10
        assert seen == expected
        assert sizes == ([10, 10, 5] if n == 25 else [10, 10])

    def test_list_pagination_respects_filters(self, store: Store) -> None:
        items = [
            make_item(
                f"f{k}",
                created_at=T0 + timedelta(seconds=k),
                status=Status.ACTIVE if k % 3 else Status.ARCHIVED,
            )
            for k in range(15)
        ]
        put(store, *items)
        active = [i.id for i in items if i.status is Status.ACTIVE]
        assert all_ids(store, page_size=3) == active
        assert all_ids(store, page_size=4, statuses=(Status.ARCHIVED,)) == [
            i.id for i in items if i.status is Status.ARCHIVED
        ]

    def test_list_filters(self, store: Store) -> None:
        h = timedelta(hours=1)
        d = timedelta(days=1)
        a = make_item("a", tags=("x", "y"), created_at=T0 + 1 * h, occurred_at=T0 - 10 * d)
        b = make_item(
            "b",
            user_id="bob",
            memory_type=MemoryType.PREFERENCE,
            tags=("x",),
            created_at=T0 + 2 * h,
            occurred_at=T0 - 5 * d,
        )
        c = make_item(
            "c",
            scope=Scope.PROJECT,
            project_id="p1",
            memory_type=MemoryType.DECISION,
            status=Status.ARCHIVED,
            created_at=T0 + 3 * h,
        )
        dd = make_item("d", status=Status.SUPERSEDED, created_at=T0 + 4 * h)
        e = make_item("e", expires_at=NOW - d, created_at=T0 + 5 * h)
        f = make_item("f", memory_type=MemoryType.HABIT, expires_at=NOW + d, created_at=T0 + 6 * h)
        put(store, f, e, dd, c, b, a)

        def ids(**kw: Any) -> list[str]:
            return [i.id for i in store.execute(ListItems(flt(**kw), limit=100)).items]

        assert ids() == [a.id, b.id, f.id]  # active and unexpired by default
        assert ids(scope_keys=("user:alice",)) == [a.id, f.id]
        assert ids(scope_keys=("user:alice", "project:p1"), statuses=()) == [a.id, c.id, dd.id, f.id]
        assert ids(scope_keys=("user:nobody",)) == []
        assert ids(memory_types=(MemoryType.FACT,)) == [a.id]
        assert ids(memory_types=(MemoryType.FACT, MemoryType.PREFERENCE)) == [a.id, b.id]
        assert ids(statuses=(Status.ARCHIVED,)) == [c.id]
        assert ids(statuses=(Status.ARCHIVED, Status.SUPERSEDED)) == [c.id, dd.id]
        assert ids(statuses=()) == [a.id, b.id, c.id, dd.id, f.id]
        assert ids(tags=("x",)) == [a.id, b.id]
        assert ids(tags=("x", "y")) == [a.id]
        assert ids(tags=("y", "z")) == []
        assert ids(include_expired=True) == [a.id, b.id, e.id, f.id]
        assert ids(include_expired=True, now=None) == [a.id, b.id, e.id, f.id]
        assert ids(now=NOW - 2 * d) == [a.id, b.id, e.id, f.id]  # e not yet expired then
        assert ids(now=NOW + 2 * d) == [a.id, b.id]
        window = {"statuses": (), "include_expired": True}
        assert ids(created_after=T0 + 90 * timedelta(minutes=1), **window) == [b.id, c.id, dd.id, e.id, f.id]
        assert ids(created_before=T0 + 150 * timedelta(minutes=1), **window) == [a.id, b.id]
        assert ids(
            created_after=T0 + 90 * timedelta(minutes=1),
            created_before=T0 + 330 * timedelta(minutes=1),
            **window,
        ) == [b.id, c.id, dd.id, e.id]
        assert ids(occurred_after=T0 - 7 * d, **window) == [b.id]
        assert ids(occurred_before=T0 - 7 * d, **window) == [a.id]
        assert ids(occurred_after=T0 - 20 * d, occurred_before=T0, **window) == [a.id, b.id]

    def test_dates_before_year_1000_order_and_filter_correctly(self, store: Store) -> None:
        """Historic memories: 西罗马帝国灭亡 in 476, an import with created_at in year 999."""
        rome = make_item("西罗马帝国灭亡", occurred_at=datetime(476, 9, 4, tzinfo=UTC))
        hastings = make_item("Battle of Hastings", occurred_at=datetime(1066, 10, 14, tzinfo=UTC))
        recent = make_item("recent", occurred_at=T0)
        old = make_item("imported long ago", created_at=datetime(999, 12, 31, tzinfo=UTC))
        put(store, recent, hastings, rome, old)
        assert all_ids(store, occurred_before=datetime(1000, 1, 1, tzinfo=UTC)) == [rome.id]
        assert sorted(all_ids(store, occurred_after=datetime(1000, 1, 1, tzinfo=UTC))) == sorted(
            [hastings.id, recent.id]
        )
        assert all_ids(store, created_before=datetime(2000, 1, 1, tzinfo=UTC)) == [old.id]
        assert store.execute(ListItems(flt(), limit=1)).items[0].id == old.id
        assert store.execute(ListItems(flt(), limit=1, descending=True)).items[0].id != old.id

    def test_filter_hiding_expired_items_needs_now(self, store: Store) -> None:
        put(store, make_item("x"))
        with pytest.raises(InvalidInput):
            store.execute(ListItems(Filter(tenant_id=TENANT)))

    @pytest.mark.parametrize(
        "cursor",
        [
            "garbage",
            "!!!!",
            "not a cursor at all",
            "😀",
            _b64("{}"),
            _b64("[1, 2]"),
            _b64("null"),
            _b64("[]"),
        ],
    )
    def test_list_garbage_cursor_raises_invalid_input(self, store: Store, cursor: str) -> None:
        put(store, make_item("x"))
        with pytest.raises(InvalidInput):
            store.execute(ListItems(flt(), cursor=cursor))

    def test_list_cursor_of_the_wrong_shape_raises_invalid_input(self, store: Store) -> None:
        """Well-formed base64/JSON that this store could never have issued."""
        put(store, make_item("x"))
        for raw in ('{"a": 1, "b": 2}', '"ab"', '["yesterday", "x"]'):
            with pytest.raises(InvalidInput):
                store.execute(ListItems(flt(), cursor=_b64(raw)))

    # ------------------------------------------------------------ Retrieve: vectors

    def test_vector_top_k_is_exact(self, store: Store) -> None:
        rng = np.random.default_rng(9)
        n = 200
        vecs = np.stack([unit(rng) for _ in range(n)])
        users = rng.choice(["alice", "bob", "carol"], size=n)
        items = [make_item(f"vec {k}", user_id=str(users[k])) for k in range(n)]
        put(store, *items, vectors=list(vecs))
        # A perfect match in another tenant must not leak in.
        q = unit(rng)
        put(store, make_item("other tenant twin", tenant_id=OTHER_TENANT), vectors=[q])

        def brute(mask: np.ndarray, k: int) -> dict[str, float]:
            idx = np.flatnonzero(mask)
            scores = vecs[idx] @ q
            top = idx[np.argsort(-scores)[:k]]
            return {items[i].id: float(vecs[i] @ q) for i in top}

        for scope_keys, mask in (
            (("user:alice",), users == "alice"),
            (("user:alice", "user:bob"), users != "carol"),
            ((), np.ones(n, dtype=bool)),
        ):
            for k in (1, 10, 300):
                cands = vector_cands(store, q, k=k, scope_keys=scope_keys)
                expected = brute(mask, k)
                assert {c.item.id for c in cands} == set(expected), (scope_keys, k)
                for c in cands:
                    assert c.keyword is None
                    assert c.cosine == pytest.approx(expected[c.item.id], abs=1e-5)
                    assert c.vector is not None
                    stored = vecs[int(c.item.content.split()[1])]
                    assert np.asarray(c.vector, dtype=np.float32).tobytes() == stored.tobytes()

    def test_vector_search_uses_only_the_requested_model_and_dimension(self, store: Store) -> None:
        rng = np.random.default_rng(10)
        same = [make_item(f"same {k}") for k in range(5)]
        other_model = [make_item(f"other model {k}") for k in range(5)]
        short = [make_item(f"short {k}") for k in range(5)]
        bare = make_item("no vector at all")
        store.execute(
            Write(
                (
                    *(upsert(i, unit(rng)) for i in same),
                    *(upsert(i, unit(rng), model_id="other") for i in other_model),
                    *(upsert(i, unit(rng, 16)) for i in short),
                    upsert(bare),
                )
            )
        )

        def ids(cands: list[Candidate]) -> set[str]:
            return {c.item.id for c in cands}

        assert ids(vector_cands(store, unit(rng), k=100)) == {i.id for i in same}
        assert ids(vector_cands(store, unit(rng), k=100, model="other")) == {i.id for i in other_model}
        assert ids(vector_cands(store, unit(rng, 16), k=100)) == {i.id for i in short}
        assert vector_cands(store, unit(rng, 8), k=100) == []
        assert vector_cands(store, unit(rng), k=100, model="unknown") == []
        all_ids_ = tuple(i.id for i in [*same, *other_model, *short, bare])
        assert store.execute(VectorsFor(TENANT, MODEL, all_ids_)).keys() == {i.id for i in [*same, *short]}
        assert store.execute(VectorsFor(TENANT, "other", all_ids_)).keys() == {i.id for i in other_model}

    def test_retrieve_never_returns_items_outside_scope_or_inactive(self, store: Store) -> None:
        rng = np.random.default_rng(11)
        q = unit(rng)
        good = make_item("我喜欢喝咖啡 I like coffee")
        outside = [
            make_item("我喜欢喝咖啡 I like coffee", user_id="bob"),
            make_item("我喜欢喝咖啡 I like coffee", scope=Scope.PROJECT, project_id="p"),
            make_item("我喜欢喝咖啡 I like coffee", status=Status.ARCHIVED),
            make_item("我喜欢喝咖啡 I like coffee", status=Status.SUPERSEDED),
            make_item("我喜欢喝咖啡 I like coffee", expires_at=NOW - timedelta(seconds=1)),
        ]
        put(store, good, *outside, vectors=[q] * (1 + len(outside)))
        cands = store.execute(
            Retrieve(
                flt(scope_keys=("user:alice",)),
                MODEL,
                q,
                query_terms("咖啡 coffee"),
                vector_k=50,
                keyword_k=50,
            )
        )
        assert [c.item.id for c in cands] == [good.id]
        (c,) = cands
        assert c.cosine == pytest.approx(1.0, abs=1e-5)
        assert c.keyword is not None
        # The same items do come back when the filter asks for them.
        assert keyword_ids(store, "coffee", statuses=(), include_expired=True) == {good.id} | {
            i.id for i in outside
        }
        assert keyword_ids(store, "coffee", scope_keys=("user:bob",)) == {outside[0].id}

    def test_retrieve_respects_type_and_tag_filters(self, store: Store) -> None:
        q = unit(np.random.default_rng(12))
        a = make_item("walnut one", tags=("t",))
        b = make_item("walnut two", memory_type=MemoryType.SKILL)
        put(store, a, b, vectors=[q, q])
        assert keyword_ids(store, "walnut", tags=("t",)) == {a.id}
        assert keyword_ids(store, "walnut", memory_types=(MemoryType.SKILL,)) == {b.id}
        assert [c.item.id for c in vector_cands(store, q, tags=("t",))] == [a.id]
        assert [c.item.id for c in vector_cands(store, q, memory_types=(MemoryType.SKILL,))] == [b.id]

    def test_vector_k_and_keyword_k_limit_the_candidates(self, store: Store) -> None:
        rng = np.random.default_rng(13)
        items = [make_item(f"limit apricot {k}") for k in range(20)]
        put(store, *items, vectors=[unit(rng) for _ in items])
        q = unit(rng)
        assert len(vector_cands(store, q, k=3)) == 3
        assert len(vector_cands(store, q, k=0)) == 0
        kw = store.execute(Retrieve(flt(), MODEL, None, query_terms("apricot"), vector_k=0, keyword_k=4))
        assert len(kw) == 4
        both = store.execute(Retrieve(flt(), MODEL, q, query_terms("apricot"), vector_k=3, keyword_k=0))
        assert len(both) == 3
        assert all(c.keyword is None for c in both)

    # ------------------------------------------------------------ Retrieve: keywords

    def test_keyword_finds_chinese_two_character_words(self, store: Store) -> None:
        code = make_item("我喜欢写代码")
        weather = make_item("今天天气很好")
        put(store, code, weather)
        assert query_terms("代码") == ("代码",)
        assert keyword_ids(store, "代码") == {code.id}
        assert keyword_ids(store, "写代码") == {code.id}
        assert keyword_ids(store, "喜欢") == {code.id}
        assert keyword_ids(store, "天气") == {weather.id}
        assert keyword_ids(store, "咖啡") == set()

    def test_keyword_finds_english_by_stem(self, store: Store) -> None:
        pref = make_item("Alice has strong preferences about editor themes")
        other = make_item("Bob runs every morning")
        put(store, pref, other)
        assert keyword_ids(store, "prefer") == {pref.id}
        assert keyword_ids(store, "preferred") == {pref.id}
        assert keyword_ids(store, "THEME") == {pref.id}
        assert keyword_ids(store, "running") == {other.id}
        assert keyword_ids(store, "zebra") == set()

    def test_keyword_finds_code_switched_text_by_either_language(self, store: Store) -> None:
        item = make_item("我们决定用 Next.js 而不是 Remix")
        put(store, item, make_item("完全无关的句子 about gardening"))
        assert keyword_ids(store, "决定") == {item.id}
        assert keyword_ids(store, "Remix") == {item.id}
        assert keyword_ids(store, "Next.js") == {item.id}
        assert keyword_ids(store, "remix 框架") == {item.id}

    def test_keyword_finds_words_of_other_scripts(self, store: Store) -> None:
        """Russian by stem, Korean and Japanese by bigrams whatever particle follows, Thai,
        Arabic, Hindi and Vietnamese words: each script's own memory, and only it."""
        texts = {
            "ru": "Мой любимый писатель — Булгаков",
            "ko": "저는 서울에서 간호사로 일해요",
            "ja": "柴犬のハナを飼っています",
            "th": "ผมชอบกินอาหารไทยรสเผ็ด",
            "ar": "أنا أعمل مهندسا في القاهرة",
            "hi": "मैं दिल्ली में डॉक्टर हूँ",
            "vi": "Tôi là giáo viên ở Hà Nội",
        }
        items = {lang: make_item(text) for lang, text in texts.items()}
        put(store, *items.values(), make_item("plain English words about gardening"))
        for lang, query in (
            ("ru", "Кто его любимые писатели?"),
            ("ko", "서울은 어때요?"),
            ("ja", "ハナは元気？"),
            ("th", "อาหารไทย"),
            ("ar", "القاهرة"),
            ("hi", "दिल्ली"),
            ("vi", "giáo viên"),
        ):
            assert keyword_ids(store, query) == {items[lang].id}, lang

    def test_keyword_handles_awkward_terms(self, store: Store) -> None:
        item = make_item("plain words only")
        put(store, item)
        for terms in (('"',), ("AND",), ("OR", "NOT"), ("a*",), ("(",), ("col:val",), ("NEAR",)):
            cands = store.execute(Retrieve(flt(), MODEL, None, terms, vector_k=0, keyword_k=5))
            assert cands == [], terms
        assert keyword_ids(store, "words") == {item.id}

    def test_keyword_scores_better_matches_higher(self, store: Store) -> None:
        both = make_item("I write python and rust every day")
        one = make_item("python garden weekend cooking recipes")
        filler = [make_item(f"unrelated filler sentence number {k}") for k in range(6)]
        put(store, both, one, *filler)
        cands = store.execute(
            Retrieve(flt(), MODEL, None, query_terms("python rust"), vector_k=0, keyword_k=10)
        )
        scores = {c.item.id: c.keyword for c in cands}
        assert scores.keys() == {both.id, one.id}
        assert scores[both.id] > scores[one.id]  # type: ignore[operator]
        top = store.execute(Retrieve(flt(), MODEL, None, query_terms("python rust"), vector_k=0, keyword_k=1))
        assert [c.item.id for c in top] == [both.id]

    def test_keyword_scores_come_from_the_searched_scopes_only(self, store: Store) -> None:
        """BM25's collection is the searched scopes, all statuses: other users' and other
        tenants' words shift no score, nor do words a viewer may not see."""
        texts = (
            "python python python scripts for data",
            "I write python and rust every day",
            "rust is a systems language with a borrow checker and many other long words",
            "completely unrelated sentence about gardens",
        )
        mine = [make_item(t) for t in texts]
        mine.append(make_item("python rust archived note", status=Status.ARCHIVED))
        mine += [make_item(f"filler sentence number {k}") for k in range(6)]
        shown = [make_item(f"project {t}", scope=Scope.PROJECT, project_id="p1") for t in texts]
        put(store, *mine, *shown)

        def scores(**kw: Any) -> dict[str, float | None]:
            op = Retrieve(flt(**kw), MODEL, None, query_terms("python rust borrow"), vector_k=0, keyword_k=20)
            return {c.item.id: c.keyword for c in store.execute(op)}

        outside = Viewer(actor="k2", projects=("p1",))
        alice = scores(scope_keys=("user:alice",))
        outsider = scores(scope_keys=("project:p1",), viewer=outside)
        assert set(alice) == {i.id for i in mine[:3]}  # the archived item counts, but is not found
        hidden = make_item(
            "python rust secret python rust",
            scope=Scope.PROJECT,
            project_id="p1",
            visibility=Visibility.OWNER_ONLY,
            metadata={"created_by": "k1"},
        )
        bob = [make_item(f"python rust {t}", user_id="bob") for t in texts * 3]
        other = [make_item(f"rust borrow {t}", tenant_id="t2") for t in texts * 3]
        put(store, hidden, *bob)
        put(store, *other)
        assert scores(scope_keys=("user:alice",)) == alice
        assert scores(scope_keys=("project:p1",), viewer=outside) == outsider
        creator = scores(scope_keys=("project:p1",), viewer=Viewer(actor="k1", projects=("p1",)))
        assert hidden.id in creator
        assert creator.keys() - {hidden.id} == outsider.keys()
        # Searched together, two scopes are one collection: bob's words move alice's scores.
        both = scores(scope_keys=("user:alice", "user:bob"))
        assert all(both[i] != alice[i] for i in alice)

    def test_keyword_only_candidates_carry_cosine_and_vector(self, store: Store) -> None:
        """Found by keyword but outside the vector top-k: still gets its cosine and vector."""
        rng = np.random.default_rng(14)
        q = unit(rng)
        near = [make_item(f"near neighbour {k}") for k in range(20)]
        far = make_item("far away but says zebra")
        put(store, *near, far, vectors=[*(unit(rng) for _ in near), -q])
        cands = store.execute(Retrieve(flt(), MODEL, q, query_terms("zebra"), vector_k=5, keyword_k=5))
        by_id = {c.item.id: c for c in cands}
        assert len(cands) == 6
        assert far.id in by_id
        c = by_id[far.id]
        assert c.keyword is not None
        assert c.cosine == pytest.approx(-1.0, abs=1e-5)
        assert c.vector is not None
        assert np.asarray(c.vector, dtype=np.float32).tobytes() == (-q).tobytes()

    def test_candidates_carry_both_scores_where_they_exist(self, store: Store) -> None:
        rng = np.random.default_rng(15)
        q = unit(rng)
        hit = make_item("olive in both indexes")
        bare = make_item("olive without any vector")
        vec_only = make_item("nothing in common")
        store.execute(Write((upsert(hit, q), upsert(bare), upsert(vec_only, unit(rng)))))
        cands = store.execute(Retrieve(flt(), MODEL, q, query_terms("olive"), vector_k=10, keyword_k=10))
        by_id = {c.item.id: c for c in cands}
        assert by_id.keys() == {hit.id, bare.id, vec_only.id}
        assert by_id[hit.id].cosine == pytest.approx(1.0, abs=1e-5)
        assert by_id[hit.id].keyword is not None
        assert by_id[bare.id].cosine is None
        assert by_id[bare.id].vector is None
        assert by_id[bare.id].keyword is not None
        assert by_id[vec_only.id].keyword is None
        assert by_id[vec_only.id].cosine is not None
        assert by_id[hit.id].item == hit

    def test_retrieve_without_vector_is_keyword_only(self, store: Store) -> None:
        rng = np.random.default_rng(16)
        a, b = make_item("lemon tart"), make_item("plain bread")
        put(store, a, b, vectors=[unit(rng), unit(rng)])
        cands = store.execute(Retrieve(flt(), MODEL, None, query_terms("lemon"), vector_k=10, keyword_k=10))
        assert [c.item.id for c in cands] == [a.id]
        assert cands[0].keyword is not None
        assert cands[0].cosine is None

    def test_retrieve_with_empty_terms_is_vector_only(self, store: Store) -> None:
        rng = np.random.default_rng(17)
        q = unit(rng)
        a, b = make_item("lemon tart"), make_item("plain bread")
        put(store, a, b, vectors=[q, unit(rng)])
        cands = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=1, keyword_k=10))
        assert [c.item.id for c in cands] == [a.id]
        assert cands[0].keyword is None
        assert store.execute(Retrieve(flt(), MODEL, None, (), vector_k=10, keyword_k=10)) == []

    # ------------------------------------------------------------ Touch

    def test_touch_counts_access_without_history(self, store: Store) -> None:
        item = make_item("touch me", access_count=2)
        other = make_item("leave me")
        put(store, item, other)
        history = store.execute(GetHistory(TENANT, item.id))
        t1, t2 = NOW - timedelta(hours=2), NOW - timedelta(hours=1, microseconds=7)
        store.execute(Write((Touch(TENANT, (item.id, "unknown-id"), t1),)))
        store.execute(Write((Touch(TENANT, (item.id,), t2),)))
        got = get(store, item)
        assert got is not None
        assert got.access_count == 4
        assert got.last_used_at == t2
        assert got == item.model_copy(update={"access_count": 4, "last_used_at": t2})
        # Visible through every read path, not only GetItems.
        assert {i.id: i for i in store.execute(ListItems(flt(), limit=100)).items}[item.id] == got
        (cand,) = store.execute(Retrieve(flt(), MODEL, None, query_terms("touch"), vector_k=0, keyword_k=5))
        assert cand.item == got
        (row,) = [r for r in store.execute(DumpRows("items")).rows if r["id"] == item.id]
        assert MemoryItem.model_validate_json(row["doc"]) == got  # a copy of the store carries them too
        assert get(store, other) == other
        assert store.execute(GetHistory(TENANT, item.id)) == history
        # Still indexed after touching.
        assert keyword_ids(store, "touch") == {item.id}

    # ------------------------------------------------------------ events

    def test_record_event_and_count_events_since(self, store: Store) -> None:
        m = timedelta(minutes=1)
        store.execute(Write((RecordEvent("session:1", T0), RecordEvent("session:1", T0 + m))))
        store.execute(Write((RecordEvent("session:1", T0 + 2 * m), RecordEvent("session:2", T0 + 2 * m))))
        assert store.execute(CountEvents("session:1", T0 - m)) == 3
        assert store.execute(CountEvents("session:1", T0)) == 3  # at or after
        assert store.execute(CountEvents("session:1", T0 + m)) == 2
        assert store.execute(CountEvents("session:1", T0 + 90 * timedelta(seconds=1))) == 1
        assert store.execute(CountEvents("session:1", T0 + 3 * m)) == 0
        assert store.execute(CountEvents("session:2", T0)) == 1
        assert store.execute(CountEvents("session:3", T0)) == 0
        cst = timezone(timedelta(hours=8))
        assert store.execute(CountEvents("session:1", (T0 + m).astimezone(cst))) == 2

    # ------------------------------------------------------------ cache

    def test_cache_round_trips_float32_vectors_per_model(self, store: Store) -> None:
        rng = np.random.default_rng(18)
        special = np.array([0.0, -0.0, 1e-45, -3.4e38, 3.4e38, np.pi, 1 / 3, -1e-7], dtype=np.float32)
        v1 = rng.standard_normal(384).astype(np.float32)
        v2 = unit(rng)
        other = unit(rng)
        store.execute(
            Write((CachePut("m1", (("h1", v1), ("h2", special))), CachePut("m2", (("h1", other),))))
        )
        got = store.execute(CacheGet("m1", ("h1", "h2", "h3")))
        assert got.keys() == {"h1", "h2"}
        for key, want in (("h1", v1), ("h2", special)):
            arr = np.asarray(got[key])
            assert arr.dtype == np.float32
            assert arr.tobytes() == want.tobytes()
        assert store.execute(CacheGet("m2", ("h1", "h2")))["h1"].tobytes() == other.tobytes()
        assert store.execute(CacheGet("m2", ("h2",))) == {}
        assert store.execute(CacheGet("m3", ("h1",))) == {}
        assert store.execute(CacheGet("m1", ())) == {}
        store.execute(Write((CachePut("m1", (("h1", v2),)),)))
        assert store.execute(CacheGet("m1", ("h1",)))["h1"].tobytes() == v2.tobytes()
        assert store.execute(CacheGet("m2", ("h1",)))["h1"].tobytes() == other.tobytes()

    # ------------------------------------------------------------ VectorsFor

    def test_vectors_for_returns_stored_vectors_by_id(self, store: Store) -> None:
        rng = np.random.default_rng(19)
        items = [make_item(f"v{k}") for k in range(5)]
        vecs = [unit(rng) for _ in items]
        bare = make_item("no vector")
        foreign = make_item("foreign", tenant_id=OTHER_TENANT)
        store.execute(Write((*(upsert(i, v) for i, v in zip(items, vecs, strict=True)), upsert(bare))))
        store.execute(Write((upsert(foreign, unit(rng)),)))
        got = store.execute(VectorsFor(TENANT, MODEL, (*(i.id for i in items), bare.id, foreign.id, "nope")))
        assert got.keys() == {i.id for i in items}
        for i, v in zip(items, vecs, strict=True):
            assert np.asarray(got[i.id]).dtype == np.float32
            assert np.asarray(got[i.id]).tobytes() == v.tobytes()
        assert store.execute(VectorsFor(TENANT, MODEL, ())) == {}
        assert store.execute(VectorsFor(TENANT, "other", (items[0].id,))) == {}

    def test_set_vectors_replaces_vectors_and_nothing_else(self, store: Store) -> None:
        rng = np.random.default_rng(23)
        items = [make_item(f"set {k}", thread_id="t") for k in range(4)]
        bare = make_item("set bare")
        foreign = make_item("set foreign", tenant_id=OTHER_TENANT)
        store.execute(Write((*(upsert(i, unit(rng)) for i in items), upsert(bare))))
        store.execute(Write((upsert(foreign, unit(rng)),)))
        q = unit(rng, 16)
        assert vector_cands(store, q, k=100, model="new") == []  # read before: a cached scope is patched
        fresh = {i.id: unit(rng, 16) for i in [*items[:3], bare]}
        before = [get(store, i) for i in [*items, bare]]
        history = [len(store.execute(GetHistory(TENANT, i.id))) for i in [*items, bare]]
        vectors = (*fresh.items(), ("set unknown", unit(rng, 16)), (foreign.id, unit(rng, 16)))
        store.execute(Write((SetVectors(TENANT, "new", tuple(vectors)),)))
        got = store.execute(VectorsFor(TENANT, "new", tuple(i.id for i in [*items, bare])))
        assert got.keys() == fresh.keys()
        for item_id, v in fresh.items():
            assert np.asarray(got[item_id]).tobytes() == v.tobytes()
        # one vector per item: the old model's is gone; the item not named keeps its own
        assert store.execute(VectorsFor(TENANT, MODEL, tuple(i.id for i in items))).keys() == {items[3].id}
        assert {c.item.id for c in vector_cands(store, q, k=100, model="new")} == set(fresh)
        assert vector_cands(store, q, k=100, model="new", tenant_id=OTHER_TENANT) == []
        assert store.execute(VectorsFor(OTHER_TENANT, MODEL, (foreign.id,))).keys() == {foreign.id}
        assert [get(store, i) for i in [*items, bare]] == before
        assert [len(store.execute(GetHistory(TENANT, i.id))) for i in [*items, bare]] == history

    def test_set_vectors_with_a_bad_vector_writes_nothing(self, store: Store) -> None:
        rng = np.random.default_rng(24)
        a, b = make_item("set atomic a"), make_item("set atomic b")
        store.execute(Write((upsert(a, unit(rng)), upsert(b, unit(rng)))))
        with pytest.raises(InvalidInput):
            store.execute(
                Write(
                    (
                        SetVectors(TENANT, "new", ((a.id, unit(rng)),)),
                        SetVectors(TENANT, "", ((b.id, unit(rng)),)),
                    )
                )
            )
        assert store.execute(VectorsFor(TENANT, "new", (a.id, b.id))) == {}

    # ------------------------------------------------------------ GetStats

    def test_stats_count_by_type_scope_status_and_average(self, store: Store) -> None:
        items = [
            make_item("a", confidence=0.8, importance=0.2),
            make_item("b", memory_type=MemoryType.PREFERENCE, confidence=0.6, importance=0.4),
            make_item(
                "c",
                scope=Scope.PROJECT,
                project_id="p1",
                status=Status.ARCHIVED,
                confidence=1.0,
                importance=0.6,
            ),
            make_item("d", user_id="bob", expires_at=NOW - timedelta(days=1), confidence=0.2, importance=1.0),
        ]
        put(store, *items)
        put(store, make_item("foreign", tenant_id=OTHER_TENANT, confidence=0.0))
        s = store.execute(GetStats(flt(statuses=(), include_expired=True)))
        assert s.total == 4
        assert s.by_type == {"fact": 3, "preference": 1}
        assert s.by_scope == {"user": 3, "project": 1}
        assert s.by_status == {"active": 3, "archived": 1}
        assert s.avg_confidence == pytest.approx(0.65)
        assert s.avg_importance == pytest.approx(0.55)
        s = store.execute(GetStats(flt()))  # active, unexpired
        assert s.total == 2
        assert s.by_status == {"active": 2}
        assert s.avg_confidence == pytest.approx(0.7)
        s = store.execute(GetStats(flt(scope_keys=("user:alice", "project:p1"), statuses=())))
        assert s.total == 3
        assert s.by_scope == {"user": 2, "project": 1}
        s = store.execute(GetStats(flt(memory_types=(MemoryType.PREFERENCE,))))
        assert (s.total, s.by_type, s.avg_importance) == (1, {"preference": 1}, pytest.approx(0.4))  # type: ignore[comparison-overlap]

    # ------------------------------------------------------------ GetHistory

    def test_history_keeps_order_and_snapshots(self, store: Store) -> None:
        v1 = make_item("history v1")
        v2 = v1.evolve(content="history v2", version=2, updated_at=T0 + timedelta(hours=1))
        other = make_item("someone else")
        add = event_for(v1, reason="extracted", actor="agent-1")
        store.execute(Write((Upsert(v1, index_text(v1.content), add), upsert(other))))
        update = event_for(v2, HistoryAction.UPDATE, before=v1, reason="user edit", actor="alice")
        store.execute(Write((Upsert(v2, index_text(v2.content), update),)))
        store.execute(Write((Touch(TENANT, (v1.id,), NOW),)))
        gone = event_for(v2, HistoryAction.PURGE, before=v2, after=None, at=T0 + timedelta(hours=2))
        store.execute(Write((Purge(TENANT, v1.id, gone),)))

        history = store.execute(GetHistory(TENANT, v1.id))
        assert [e.action for e in history] == [HistoryAction.ADD, HistoryAction.UPDATE, HistoryAction.PURGE]
        seqs = [e.seq for e in history]
        assert all(s is not None for s in seqs)
        assert seqs == sorted(seqs)  # type: ignore[type-var]
        assert len(set(seqs)) == 3
        for got, want in zip(history, (add, update, gone), strict=True):
            assert got.model_dump(exclude={"seq"}) == want.model_dump(exclude={"seq"})
        assert history[0].before is None
        assert history[0].after == v1.to_json_dict()
        assert history[1].before == v1.to_json_dict()
        assert history[1].after == v2.to_json_dict()
        assert history[1].after["content"] == "history v2"
        assert history[2].after is None
        assert [e.action for e in store.execute(GetHistory(TENANT, other.id))] == [HistoryAction.ADD]

    def test_history_of_several_changes_in_one_write_keeps_their_order(self, store: Store) -> None:
        v1 = make_item("one write v1")
        versions = [v1, *(v1.evolve(version=k, content=f"one write v{k}") for k in range(2, 6))]
        store.execute(Write(tuple(upsert(v, action=HistoryAction.UPDATE) for v in versions)))
        history = store.execute(GetHistory(TENANT, v1.id))
        assert [e.version for e in history] == [1, 2, 3, 4, 5]
        assert get(store, v1) == versions[-1]

    # ------------------------------------------------------------ async

    async def test_async_operations(self, store: Store) -> None:
        rng = np.random.default_rng(20)
        q = unit(rng)
        item = make_item("异步 async memory about sailing", tags=("boat",))
        await store.aexecute(Write((upsert(item, q), RecordEvent("k", T0), CachePut(MODEL, (("h", q),)))))
        assert await store.aexecute(GetItems(TENANT, (item.id,))) == [item]
        page = await store.aexecute(ListItems(flt(tags=("boat",))))
        assert [i.id for i in page.items] == [item.id]
        cands = await store.aexecute(
            Retrieve(flt(), MODEL, q, query_terms("sailing 异步"), vector_k=5, keyword_k=5)
        )
        assert [c.item.id for c in cands] == [item.id]
        assert cands[0].keyword is not None
        assert cands[0].cosine == pytest.approx(1.0, abs=1e-5)
        assert (await store.aexecute(GetStats(flt()))).total == 1
        assert await store.aexecute(CountEvents("k", T0)) == 1
        assert (await store.aexecute(CacheGet(MODEL, ("h",))))["h"].tobytes() == q.tobytes()
        assert (await store.aexecute(VectorsFor(TENANT, MODEL, (item.id,))))[item.id].tobytes() == q.tobytes()
        await store.aexecute(Write((Touch(TENANT, (item.id,), NOW),)))
        touched = (await store.aexecute(GetItems(TENANT, (item.id,))))[0]
        assert touched.access_count == 1
        await store.aexecute(Write((purge(item),)))
        assert await store.aexecute(GetItems(TENANT, (item.id,))) == []
        history = await store.aexecute(GetHistory(TENANT, item.id))
        assert [e.action for e in history] == [HistoryAction.ADD, HistoryAction.PURGE]
        with pytest.raises(InvalidInput):
            await store.aexecute(ListItems(flt(), cursor="garbage"))

    async def test_async_write_is_atomic(self, store: Store) -> None:
        new = make_item("async newcomer")
        bad = upsert(make_item("vector without model"), unit(np.random.default_rng(8)), model_id=None)
        with pytest.raises(InvalidInput):
            await store.aexecute(Write((upsert(new), bad)))
        assert await store.aexecute(GetItems(TENANT, (new.id,))) == []

    async def test_concurrent_writers_and_readers(self, store: Store) -> None:
        """8 asyncio tasks and 8 threads write 25 items each while readers search."""
        seed_rng = np.random.default_rng(21)
        seeds = [make_item(f"seed plum {k}") for k in range(10)]
        put(store, *seeds, vectors=[unit(seed_rng) for _ in seeds])
        q = unit(seed_rng)
        errors: list[BaseException] = []
        reads = [0]
        stop = threading.Event()
        per_writer = 25

        def new_upsert(tag: str, rng: np.random.Generator, k: int) -> Write:
            item = make_item(f"plum written by {tag} number {k}", id=f"{tag}-{k:02d}")
            return Write((upsert(item, unit(rng)),))

        def thread_writer(w: int) -> None:
            try:
                rng = np.random.default_rng(100 + w)
                for k in range(per_writer):
                    store.execute(new_upsert(f"thread{w}", rng, k))
            except BaseException as exc:  # reported below
                errors.append(exc)

        def retrieve() -> Retrieve:
            return Retrieve(flt(), MODEL, q, query_terms("plum"), vector_k=5, keyword_k=5)

        def thread_reader() -> None:
            try:
                while not stop.is_set():
                    assert store.execute(retrieve())
                    reads[0] += 1
            except BaseException as exc:
                errors.append(exc)

        async def task_writer(w: int) -> None:
            rng = np.random.default_rng(200 + w)
            for k in range(per_writer):
                await store.aexecute(new_upsert(f"task{w}", rng, k))

        async def task_reader() -> None:
            while not stop.is_set():
                assert await store.aexecute(retrieve())
                reads[0] += 1
                await asyncio.sleep(0)

        writers = [threading.Thread(target=thread_writer, args=(w,)) for w in range(8)]
        readers = [threading.Thread(target=thread_reader) for _ in range(2)]
        for t in (*writers, *readers):
            t.start()
        async_readers = [asyncio.ensure_future(task_reader()) for _ in range(2)]
        try:
            await asyncio.gather(*(task_writer(w) for w in range(8)))
            await asyncio.to_thread(_join, writers)
        finally:
            stop.set()
            await asyncio.to_thread(_join, readers)
            await asyncio.gather(*async_readers)
        assert errors == []
        assert reads[0] > 0

        expected = {
            f"{kind}{w}-{k:02d}" for kind in ("thread", "task") for w in range(8) for k in range(per_writer)
        }
        listed = all_ids(store, page_size=37)
        assert len(listed) == len(set(listed)) == 400 + len(seeds)
        assert set(listed) == expected | {s.id for s in seeds}
        assert store.execute(GetStats(flt())).total == 410
        assert len(store.execute(GetItems(TENANT, tuple(sorted(expected))))) == 400
        assert len(store.execute(VectorsFor(TENANT, MODEL, tuple(sorted(expected))))) == 400
        assert len(keyword_ids(store, "written")) == 50  # keyword_k caps; index is there

    # ------------------------------------------------------------ guarded writes (ScopeClock / Guard)

    def test_guarded_writes_advance_their_scope_clock_only(self, store: Store) -> None:
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 0
        store.execute(Write((Guard(TENANT, "user:alice", 0), upsert(make_item("first guarded")))))
        store.execute(Write((Guard(TENANT, "user:alice", 1), upsert(make_item("second guarded")))))
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 2
        # Other scopes and other tenants keep their own clocks; unguarded writes leave them.
        put(store, make_item("unguarded"))
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 2
        assert store.execute(ScopeClock(TENANT, "user:bob")) == 0
        assert store.execute(ScopeClock(OTHER_TENANT, "user:alice")) == 0
        store.execute(Write((Guard(OTHER_TENANT, "user:alice", 0),)))
        assert store.execute(ScopeClock(OTHER_TENANT, "user:alice")) == 1
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 2

    @pytest.mark.parametrize("seen", [0, 1, 5])
    def test_a_stale_guard_refuses_the_whole_write(self, store: Store, seen: int) -> None:
        store.execute(Write((Guard(TENANT, "user:alice", 0),)))
        store.execute(Write((Guard(TENANT, "user:alice", 1),)))
        late = make_item("decided on a stale reading")
        with pytest.raises(WriteConflict):
            # The guard comes last here: it is still checked before anything is written.
            store.execute(Write((upsert(late), RecordEvent("k", T0), Guard(TENANT, "user:alice", seen))))
        assert get(store, late) is None
        assert store.execute(CountEvents("k", T0)) == 0
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 2

    def test_a_write_with_several_guards_needs_all_of_them(self, store: Store) -> None:
        store.execute(Write((Guard(TENANT, "user:bob", 0),)))
        item = make_item("two scopes")
        with pytest.raises(WriteConflict):
            store.execute(Write((Guard(TENANT, "user:alice", 0), Guard(TENANT, "user:bob", 0), upsert(item))))
        assert get(store, item) is None
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 0
        store.execute(Write((Guard(TENANT, "user:bob", 1), Guard(TENANT, "user:alice", 0), upsert(item))))
        assert get(store, item) == item
        assert [store.execute(ScopeClock(TENANT, k)) for k in ("user:alice", "user:bob")] == [1, 2]

    async def test_guarded_writes_async(self, store: Store) -> None:
        await store.aexecute(Write((Guard(TENANT, "user:alice", 0),)))
        assert await store.aexecute(ScopeClock(TENANT, "user:alice")) == 1
        with pytest.raises(WriteConflict):
            await store.aexecute(Write((Guard(TENANT, "user:alice", 0), upsert(make_item("late")))))
        assert await store.aexecute(ScopeClock(TENANT, "user:alice")) == 1

    def test_racing_guarded_writers_decide_once(self, store: Store) -> None:
        """16 threads each check for the item and add it if missing, else count one more
        mention: with guards, exactly one adds and no mention is lost."""
        barrier = threading.Barrier(16)
        outcomes: list[str] = []
        lock = threading.Lock()

        def writer() -> None:
            barrier.wait(timeout=30)
            for _ in range(200):
                seen = store.execute(ScopeClock(TENANT, "user:alice"))
                found = store.execute(ListItems(flt(scope_keys=("user:alice",)))).items
                if found:
                    old = found[0]
                    new = old.model_copy(update={"mention_count": old.mention_count + 1})
                    change, outcome = upsert(new, action=HistoryAction.REINFORCE, before=old), "reinforce"
                else:
                    change, outcome = upsert(make_item("the one and only")), "add"
                try:
                    store.execute(Write((Guard(TENANT, "user:alice", seen), change)))
                except WriteConflict:
                    continue
                with lock:
                    outcomes.append(outcome)
                return

        threads = [threading.Thread(target=writer) for _ in range(16)]
        for t in threads:
            t.start()
        _join(threads)
        assert sorted(outcomes) == ["add"] + ["reinforce"] * 15
        (item,) = store.execute(ListItems(flt(scope_keys=("user:alice",)))).items
        assert item.mention_count == 16
        assert store.execute(ScopeClock(TENANT, "user:alice")) == 16

    # ------------------------------------------------------------ the retrieval log

    def test_record_access_round_trips_newest_first_per_tenant(self, store: Store) -> None:
        a, b = make_item("green tea"), make_item("black coffee")
        put(store, a, b)
        first = access((a.id, 0.9), (b.id, 0.125), at=T0, project_id="网站", actor="key-1", kind="tool")
        second = access(at=T0 + timedelta(minutes=1), query="空的 query 🎉", user_id=None, agent_id="a1")
        third = access((b.id, 0.5), at=T0 + timedelta(minutes=2), kind="context", session_id="s 1")
        other = access((a.id, 1.0), at=T0 + timedelta(minutes=3), tenant_id=OTHER_TENANT, id=first.id)
        for entry in (first, second, third, other):
            store.execute(Write((RecordAccess(entry),)))
        assert accesses(store) == [third, second, first]
        assert accesses(store, OTHER_TENANT) == [other]
        assert first.retrieved_memory_ids == (a.id, b.id)
        # A restore may run twice: an id already logged is left as it is.
        store.execute(Write((RecordAccess(replace_query(first, "changed")),)))
        assert accesses(store)[-1] == first

    def test_list_accesses_filters_and_pages(self, store: Store) -> None:
        a, b = make_item("green tea"), make_item("black coffee")
        put(store, a, b)
        log = [
            access(
                (a.id, 0.9), (b.id, 0.1), at=T0 + timedelta(seconds=i), user_id="alice" if i % 2 else "bob"
            )
            if i % 3
            else access((b.id, 0.3), at=T0 + timedelta(seconds=i), project_id="p1")
            for i in range(12)
        ]
        log.append(access((a.id, 0.2), at=log[5].at, id="zz-same-time"))  # ties order by id
        store.execute(Write(tuple(RecordAccess(e) for e in log)))
        newest = sorted(log, key=lambda e: (e.at, e.id), reverse=True)
        assert accesses(store) == newest
        for size in (1, 2, 5):
            assert [e.id for e in accesses(store, limit=size)] == [e.id for e in newest]
        assert accesses(store, item_id=a.id) == [e for e in newest if a.id in e.retrieved_memory_ids]
        assert accesses(store, item_id="unknown") == []
        assert accesses(store, user_id="bob", limit=2) == [e for e in newest if e.user_id == "bob"]
        assert accesses(store, project_id="p1") == [e for e in newest if e.project_id == "p1"]
        since, until = T0 + timedelta(seconds=3), T0 + timedelta(seconds=7)
        window = accesses(store, since=since, until=until, item_id=b.id, limit=3)
        assert window == [e for e in newest if since <= e.at < until and b.id in e.retrieved_memory_ids]
        with pytest.raises(InvalidInput):
            store.execute(ListAccesses(TENANT, cursor="not-a-cursor"))

    def test_touch_and_its_access_land_together(self, store: Store) -> None:
        item = make_item("touched and logged")
        put(store, item)
        at = NOW - timedelta(hours=1)
        entry = access((item.id, 0.5), at=at)
        store.execute(Write((Touch(TENANT, (item.id,), at), RecordAccess(entry))))
        got = get(store, item)
        assert got is not None
        assert (got.access_count, got.last_used_at) == (1, at)
        assert accesses(store, item_id=item.id) == [entry]
        # An access that served nothing is logged alone.
        empty = access(at=NOW)
        store.execute(Write((RecordAccess(empty),)))
        assert accesses(store) == [empty, entry]

    def test_purge_forgets_the_item_in_the_log(self, store: Store) -> None:
        a, b = make_item("forget me"), make_item("keep me")
        put(store, a, b)
        entry = access((a.id, 0.9), (b.id, 0.5))
        store.execute(Write((RecordAccess(entry),)))
        store.execute(Write((purge(a),)))
        (left,) = accesses(store)
        assert left.retrieved_memory_ids == (b.id,)
        assert left.retrieved[0] == entry.retrieved[1]  # rank and scores as logged
        assert accesses(store, item_id=a.id) == []

    def test_forget_accesses_by_user_and_by_age(self, store: Store) -> None:
        item = make_item("logged")
        put(store, item)
        old_alice = access((item.id, 0.1), at=T0, user_id="alice")
        new_alice = access((item.id, 0.2), at=T0 + timedelta(days=2), user_id="alice")
        old_bob = access((item.id, 0.3), at=T0, user_id="bob")
        new_bob = access((item.id, 0.4), at=T0 + timedelta(days=2), user_id="bob")
        elsewhere = access((item.id, 0.5), at=T0, user_id="alice", tenant_id=OTHER_TENANT)
        store.execute(
            Write(tuple(RecordAccess(e) for e in (old_alice, new_alice, old_bob, new_bob, elsewhere)))
        )
        store.execute(Write((ForgetAccesses(TENANT, user_id="alice"),)))
        assert accesses(store) == [new_bob, old_bob]
        store.execute(Write((ForgetAccesses(TENANT, before=T0 + timedelta(days=1)),)))
        assert accesses(store) == [new_bob]
        assert accesses(store, item_id=item.id) == [new_bob]
        assert accesses(store, OTHER_TENANT) == [elsewhere]

    # ------------------------------------------------------------ close

    def test_close_is_idempotent(self, store: Store) -> None:
        store.close()
        store.close()

    def test_context_manager_closes(self, store: Store) -> None:
        with store as s:
            assert s is store
        with pytest.raises(StoreError):
            store.execute(GetItems(TENANT, ("x",)))

    @pytest.mark.parametrize("name", OP_NAMES)
    def test_closed_store_raises_store_error(self, store: Store, name: str) -> None:
        item = make_item("closing")
        put(store, item)
        op = sample_ops(item)[name]
        store.close()
        with pytest.raises(StoreError):
            store.execute(op)

    async def test_closed_store_raises_store_error_async(self, store: Store) -> None:
        item = make_item("closing")
        await store.aexecute(Write((upsert(item),)))
        ops = sample_ops(item)
        store.close()
        for name in OP_NAMES:
            with pytest.raises(StoreError):
                await store.aexecute(ops[name])

    # ------------------------------------------------------------ thread neighbours and time windows

    def test_neighbours_follow_thread_order_and_expand_candidates(self, store: Store) -> None:
        rng = np.random.default_rng(7)
        turns = [
            make_item(f"turn {i} of the chat", thread_id="s1", occurred_at=T0 + timedelta(minutes=i))
            for i in range(5)
        ]
        other = make_item("turn of another chat", thread_id="s2", occurred_at=T0)
        loose = make_item("a memory from no chat")
        vecs = [unit(rng) for _ in range(7)]
        put(store, *turns, other, loose, vectors=vecs)
        cands = store.execute(Retrieve(flt(), MODEL, vecs[2], (), vector_k=1, keyword_k=0, neighbours=1))
        by_id = {c.item.id: c for c in cands}
        assert set(by_id) == {turns[1].id, turns[2].id, turns[3].id}
        mid = by_id[turns[2].id]
        assert (mid.prev_id, mid.next_id) == (turns[1].id, turns[3].id)
        assert mid.prev_cosine == pytest.approx(float(vecs[1] @ vecs[2]), abs=1e-5)
        assert mid.next_cosine == pytest.approx(float(vecs[3] @ vecs[2]), abs=1e-5)
        assert by_id[turns[1].id].prev_id == turns[0].id
        two = store.execute(Retrieve(flt(), MODEL, vecs[0], (), vector_k=1, keyword_k=0, neighbours=2))
        assert {c.item.id for c in two} == {turns[0].id, turns[1].id, turns[2].id}
        assert two[0].prev_id is None or all(
            c.item.id != two[0].prev_id for c in two if c.item.id == turns[0].id
        )
        lone = store.execute(Retrieve(flt(), MODEL, vecs[6], (), vector_k=1, keyword_k=0, neighbours=1))
        assert [(c.item.id, c.prev_id, c.next_id) for c in lone] == [(loose.id, None, None)]

    def test_neighbour_keyword_scores_are_reported(self, store: Store) -> None:
        a = make_item("what is your favourite book", thread_id="chat", occurred_at=T0)
        b = make_item(
            "charlotte's web, without a doubt", thread_id="chat", occurred_at=T0 + timedelta(seconds=1)
        )
        put(store, a, b)
        cands = store.execute(
            Retrieve(flt(), MODEL, None, query_terms("favourite book"), 0, 10, neighbours=1)
        )
        by_id = {c.item.id: c for c in cands}
        assert set(by_id) == {a.id, b.id}
        assert by_id[b.id].keyword is None
        assert by_id[b.id].prev_keyword is not None and by_id[b.id].prev_keyword > 0  # type: ignore[operator]  # noqa: PT018
        assert by_id[a.id].next_id == b.id

    def test_time_windows_add_candidates_from_that_time(self, store: Store) -> None:
        rng = np.random.default_rng(11)
        q = unit(rng)
        near = [make_item(f"close match {i}", occurred_at=T0) for i in range(3)]
        may = make_item("something that happened in May 2023", occurred_at=datetime(2023, 5, 8, tzinfo=UTC))
        june = make_item("something in June 2022", occurred_at=datetime(2022, 6, 1, tzinfo=UTC))
        far = [(q * 0.9 + unit(rng) * 0.1) for _ in near]
        far = [(v / np.linalg.norm(v)).astype(np.float32) for v in far]
        put(store, *near, may, june, vectors=[*far, -q, -q])
        plain = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=3, keyword_k=0))
        assert may.id not in {c.item.id for c in plain}
        window = ((datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC)),)
        timed = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=3, keyword_k=0, time_ranges=window))
        assert may.id in {c.item.id for c in timed} and june.id not in {c.item.id for c in timed}  # noqa: PT018
        monthly = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=3, keyword_k=0, time_months=(6,)))
        assert june.id in {c.item.id for c in monthly}
        # A bounded time ("before 2023", "since 2023"): a window open on one side.
        before = ((EARLIEST, datetime(2023, 1, 1, tzinfo=UTC)),)
        timed = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=3, keyword_k=0, time_ranges=before))
        assert june.id in {c.item.id for c in timed} and may.id not in {c.item.id for c in timed}  # noqa: PT018
        since = ((datetime(2022, 7, 1, tzinfo=UTC), LATEST),)  # the near items are in it too
        timed = store.execute(Retrieve(flt(), MODEL, q, (), vector_k=3, keyword_k=0, time_ranges=since))
        assert {c.item.id for c in timed} == {c.item.id for c in plain}

    # ------------------------------------------------------------ the search primitives

    def test_vector_hits_are_the_nearest_live_items_best_first(self, store: Store) -> None:
        rng = np.random.default_rng(21)
        q = unit(rng)
        items = [make_item(f"primitive {k}", occurred_at=T0 + timedelta(days=k)) for k in range(12)]
        vecs = [unit(rng) for _ in items]
        expired = make_item("expired twin", expires_at=NOW - timedelta(seconds=1))
        bob = make_item("bob's twin", user_id="bob")
        put(store, *items, expired, bob, vectors=[*vecs, q, q])
        hits = store.execute(VectorHits(flt(scope_keys=("user:alice",)), MODEL, q, 5))
        expected = sorted(range(len(items)), key=lambda k: -float(vecs[k] @ q))[:5]
        assert [h.id for h in hits] == [items[k].id for k in expected]
        for h, k in zip(hits, expected, strict=True):
            assert h.score == pytest.approx(float(vecs[k] @ q), abs=1e-5)
        assert store.execute(VectorHits(flt(), MODEL, q, 0)) == []
        assert store.execute(VectorHits(flt(), "unknown", q, 5)) == []
        days = (T0 + timedelta(days=3), T0 + timedelta(days=6))
        timed = store.execute(VectorHits(flt(), MODEL, q, 10, time_ranges=(days,)))
        in_days = sorted(range(3, 6), key=lambda k: -float(vecs[k] @ q))
        assert [h.id for h in timed] == [items[k].id for k in in_days]
        month = items[0].occurred_at.month if items[0].occurred_at else 0
        monthly = store.execute(VectorHits(flt(), MODEL, q, 50, time_months=(month,)))
        assert {h.id for h in monthly} == {
            i.id for i in items if i.occurred_at and i.occurred_at.month == month
        }

    def test_keyword_hits_are_the_best_live_matches_best_first(self, store: Store) -> None:
        both = make_item("I write python and rust every day")
        one = make_item("python garden weekend cooking recipes")
        hidden = make_item("python and rust, archived", status=Status.ARCHIVED)
        filler = [make_item(f"unrelated filler sentence number {k}") for k in range(6)]
        put(store, both, one, hidden, *filler)
        hits = store.execute(KeywordHits(flt(), query_terms("python rust"), 10))
        assert [h.id for h in hits] == [both.id, one.id]
        assert hits[0].score > hits[1].score > 0
        assert [h.id for h in store.execute(KeywordHits(flt(), query_terms("python rust"), 1))] == [both.id]
        assert store.execute(KeywordHits(flt(), (), 10)) == []
        assert store.execute(KeywordHits(flt(), query_terms("python"), 0)) == []
        archived = store.execute(KeywordHits(flt(statuses=(Status.ARCHIVED,)), query_terms("rust"), 10))
        assert [h.id for h in archived] == [hidden.id]

    def test_thread_links_name_neighbours_within_reach(self, store: Store) -> None:
        turns = [
            make_item(f"turn {i}", thread_id="s1", occurred_at=T0 + timedelta(minutes=i)) for i in range(6)
        ]
        turns[4] = turns[4].evolve(expires_at=NOW - timedelta(seconds=1))
        loose = make_item("no thread")
        put(store, *turns, loose)
        ids = [t.id for t in turns]
        links = store.execute(ThreadLinks(flt(), (ids[2],), 0))
        assert links == {ids[2]: Link(ids[1], ids[3], True)}
        links = store.execute(ThreadLinks(flt(), (ids[2], loose.id), 2))
        assert links == {
            ids[0]: Link(None, ids[1], True),
            ids[1]: Link(ids[0], ids[2], True),
            ids[2]: Link(ids[1], ids[3], True),
            ids[3]: Link(ids[2], ids[4], True),
            ids[4]: Link(ids[3], ids[5], False),  # expired: named, but not live
        }
        assert store.execute(ThreadLinks(flt(), ("unknown", loose.id), 3)) == {}
        # Threads run through the filter's items only.
        narrowed = store.execute(ThreadLinks(flt(include_expired=True, tags=("none",)), (ids[2],), 1))
        assert narrowed == {}

    def test_load_hits_gives_items_vectors_and_the_cosines_vector_hits_give(self, store: Store) -> None:
        rng = np.random.default_rng(22)
        q = unit(rng)
        a, b, bare = make_item("load a"), make_item("load b"), make_item("Load the Café bare")
        bob = make_item("not in the filter", user_id="bob")
        va, vb = unit(rng), unit(rng)
        store.execute(Write((upsert(a, va), upsert(b, vb), upsert(bare), upsert(bob, unit(rng)))))
        f = flt(scope_keys=("user:alice",))
        scores = {h.id: h.score for h in store.execute(VectorHits(f, MODEL, q, 10))}
        loaded = store.execute(LoadHits(f, MODEL, q, (a.id, bare.id, bob.id, "unknown"), (b.id,)))
        assert set(loaded) == {a.id, bare.id, b.id}
        assert loaded[a.id].item == a
        assert loaded[a.id].cosine == scores[a.id]  # to the bit
        assert np.asarray(loaded[a.id].vector, dtype=np.float32).tobytes() == va.tobytes()
        # The index terms come back as written, or folded (lower case, no Latin diacritics).
        bare_terms = loaded[bare.id].terms
        assert bare_terms is not None
        assert fold_terms(bare_terms) == fold_terms(index_text(bare.content))
        assert loaded[bare.id] == Loaded(bare, None, None, bare_terms)
        assert loaded[b.id] == Loaded(None, None, scores[b.id], None)  # a context id: cosine only
        plain = store.execute(LoadHits(f, MODEL, None, (a.id,)))
        assert plain == {a.id: Loaded(a, None, None, index_text(a.content))}

    def test_retrieve_is_the_shared_flow_over_the_primitives(self, store: Store) -> None:
        """A backend's answer to Retrieve equals jiyi's shared flow run over its primitives."""
        rng = np.random.default_rng(23)
        words = ("apple", "banana", "cherry", "苹果", "香蕉")
        items = []
        for k in range(40):
            items.append(
                make_item(
                    f"{words[k % 5]} {words[(k * 3) % 5]} note {k}",
                    thread_id=("a", "b", None)[k % 3],
                    occurred_at=T0 + timedelta(hours=k % 7),
                    expires_at=NOW - timedelta(days=1) if k % 11 == 0 else None,
                )
            )
        put(store, *items, vectors=[unit(rng) for _ in items])
        for n in range(12):
            op = Retrieve(
                flt(),
                MODEL,
                None if n % 5 == 4 else unit(rng),
                query_terms(f"{words[n % 5]} {words[(n + 2) % 5]}") if n % 4 else (),
                vector_k=n % 6,
                keyword_k=(n * 2) % 7,
                neighbours=n % 3,
                time_months=(T0.month,) if n % 3 == 1 else (),
            )
            assert answer(store.execute(op)) == answer(retrieve(op, store.execute)), n

    def test_retrieve_sees_writes_made_after_an_earlier_search(self, store: Store) -> None:
        rng = np.random.default_rng(3)
        q = unit(rng)
        first = make_item("first")
        put(store, first, vectors=[q])
        assert [c.item.id for c in vector_cands(store, q)] == [first.id]
        second = make_item("second")
        put(store, second, vectors=[q])
        assert {c.item.id for c in vector_cands(store, q)} == {first.id, second.id}
        store.execute(Write((purge(first),)))
        assert [c.item.id for c in vector_cands(store, q)] == [second.id]

    # ------------------------------------------------------------ session messages

    def test_messages_append_in_order_and_read_back(self, store: Store) -> None:
        msgs = tuple(
            Message(role=r, content=f"m{i}", session_id="s", tenant_id=TENANT)  # type: ignore[arg-type]
            for i, r in enumerate(["system", "user", "assistant", "user"])
        )
        store.execute(Write((AppendMessages(msgs[:2]),)))
        store.execute(Write((AppendMessages(msgs[2:]),)))
        got = store.execute(GetMessages(TENANT, "s"))
        assert [m.content for m in got] == ["m0", "m1", "m2", "m3"]
        assert [m.seq for m in got] == [0, 1, 2, 3]
        assert [m.id for m in got] == [m.id for m in msgs]
        assert [m.content for m in store.execute(GetMessages(TENANT, "s", last=2))] == ["m2", "m3"]
        assert [m.content for m in store.execute(GetMessages(TENANT, "s", after_seq=1))] == ["m2", "m3"]
        assert store.execute(GetMessages(OTHER_TENANT, "s")) == []
        assert store.execute(GetMessages(TENANT, "other")) == []

    def test_messages_replace_range_atomically(self, store: Store) -> None:
        msgs = tuple(
            Message(role="user", content=f"m{i}", session_id="s", tenant_id=TENANT) for i in range(4)
        )
        store.execute(Write((AppendMessages(msgs),)))
        summary = Message(role="system", content="summary of m0 m1", session_id="s", tenant_id=TENANT, seq=0)
        store.execute(Write((DeleteMessages(TENANT, "s", (0, 1)), AppendMessages((summary,)))))
        assert [(m.seq, m.content) for m in store.execute(GetMessages(TENANT, "s"))] == [
            (0, "summary of m0 m1"),
            (2, "m2"),
            (3, "m3"),
        ]
        clash = Message(role="user", content="clash", session_id="s", tenant_id=TENANT, seq=2)
        with pytest.raises(InvalidInput):
            store.execute(
                Write(
                    (
                        AppendMessages(
                            (Message(role="user", content="x", session_id="s", tenant_id=TENANT),)
                        ),
                        AppendMessages((clash,)),
                    )
                )
            )
        assert len(store.execute(GetMessages(TENANT, "s"))) == 3
        nxt = Message(role="user", content="m4", session_id="s", tenant_id=TENANT)
        store.execute(Write((AppendMessages((nxt,)),)))
        assert store.execute(GetMessages(TENANT, "s", last=1))[0].seq == 4

    # ------------------------------------------------------------ checkpoints

    def test_checkpoints_round_trip_and_order(self, store: Store) -> None:
        msgs = (
            Message(
                role="user",
                content="你好，帮我订机票",
                session_id="s",
                tenant_id=TENANT,
                seq=0,
                tool_calls=({"id": "c1", "name": "book"},),
            ),
        )
        first = Checkpoint(
            session_id="s",
            tenant_id=TENANT,
            messages=msgs,
            agent_state={"todo": ["订票"]},
            tool_states={"book": {"step": 2}},
            pending_tool_calls=({"id": "c1", "name": "book", "args": {"to": "上海"}},),
            created_at=T0,
        )
        second = Checkpoint(
            session_id="s", tenant_id=TENANT, label="later", created_at=T0 + timedelta(minutes=1)
        )
        store.execute(Write((PutCheckpoint(first), PutCheckpoint(second))))
        assert store.execute(GetCheckpoint(TENANT, "s", first.id)) == first
        assert store.execute(GetCheckpoint(TENANT, "s")) == second
        assert [c.id for c in store.execute(ListCheckpoints(TENANT, "s"))] == [second.id, first.id]
        assert store.execute(GetCheckpoint(OTHER_TENANT, "s", first.id)) is None
        store.execute(Write((DeleteCheckpoints(TENANT, "s", (second.id,)),)))
        assert store.execute(GetCheckpoint(TENANT, "s")) == first
        assert store.execute(GetCheckpoint(TENANT, "nope")) is None

    # ------------------------------------------------------------ jobs

    def test_jobs_are_claimed_once_and_leases_expire(self, store: Store) -> None:
        jobs = [
            Job(
                kind="extract",
                tenant_id=TENANT,
                payload={"n": i},
                run_after=T0,
                created_at=T0 + timedelta(seconds=i),
            )
            for i in range(3)
        ]
        later = Job(kind="extract", tenant_id=TENANT, run_after=T0 + timedelta(hours=1), created_at=T0)
        store.execute(Write(tuple(PutJob(j) for j in [*jobs, later])))
        got = store.execute(ClaimJobs("w1", T0 + timedelta(seconds=5), lease_seconds=60, limit=2))
        assert [j.payload["n"] for j in got] == [0, 1]
        assert all(j.status == "running" and j.attempts == 1 and j.locked_by == "w1" for j in got)
        rest = store.execute(ClaimJobs("w2", T0 + timedelta(seconds=6), lease_seconds=60, limit=10))
        assert [j.payload["n"] for j in rest] == [2]
        assert store.execute(ClaimJobs("w3", T0 + timedelta(seconds=7), limit=10)) == []
        expired = store.execute(ClaimJobs("w3", T0 + timedelta(seconds=70), limit=10))
        assert {j.payload.get("n") for j in expired} == {0, 1, 2}
        assert all(j.attempts == 2 for j in expired)
        done = expired[0].model_copy(update={"status": "done"})
        store.execute(Write((PutJob(done),)))
        assert [j.id for j in store.execute(ListJobs(("done",)))] == [done.id]
        assert len(store.execute(ListJobs(("queued",)))) == 1
        assert store.execute(ClaimJobs("w4", T0 + timedelta(hours=2), kinds=("episode",))) == []

    def test_concurrent_claims_never_hand_out_a_job_twice(self, store: Store) -> None:
        store.execute(Write(tuple(PutJob(Job(kind="k", tenant_id=TENANT, run_after=T0)) for _ in range(40))))
        claimed: list[str] = []
        lock = threading.Lock()

        def worker(name: str) -> None:
            while True:
                got = store.execute(ClaimJobs(name, T0 + timedelta(seconds=1), lease_seconds=600, limit=3))
                if not got:
                    return
                with lock:
                    claimed.extend(j.id for j in got)

        threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        _join(threads)
        assert len(claimed) == 40 and len(set(claimed)) == 40  # noqa: PT018

    # ------------------------------------------------------------ DumpRows / LoadRows (store copies)

    @staticmethod
    def _fill_every_kind(store: Store) -> dict[str, Any]:
        rng = np.random.default_rng(7)
        full = full_item()
        a = make_item("我喜欢用 Python 写代码 dump alpha", memory_type=MemoryType.PREFERENCE)
        b = make_item("Alice lives in Berlin dump beta", created_at=T0 + timedelta(seconds=1))
        gone = make_item("to be purged dump gamma")
        vecs = {i.id: unit(rng) for i in (full, a, b)}
        put(store, full, a, b, gone, vectors=[vecs[full.id], vecs[a.id], vecs[b.id], None])
        b2 = b.model_copy(
            update={"content": "Alice lives in Munich dump beta", "version": 2, "updated_at": NOW}
        )
        store.execute(Write((upsert(b2, None, action=HistoryAction.UPDATE, before=b),)))
        store.execute(Write((purge(gone, at=NOW),)))
        msgs = [
            Message(tenant_id=TENANT, session_id=s, role=r, content=c, created_at=T0 + timedelta(seconds=n))  # type: ignore[arg-type]
            for n, (s, r, c) in enumerate(
                [("s1", "user", "你好"), ("s1", "assistant", "hello"), ("s2", "user", "第二个会话")]
            )
        ]
        store.execute(Write((AppendMessages(tuple(msgs)),)))
        stored = store.execute(GetMessages(TENANT, "s1"))
        cp = Checkpoint(tenant_id=TENANT, session_id="s1", messages=tuple(stored), created_at=T0)
        jobs = [
            Job(kind="extract", tenant_id=TENANT, run_after=T0),
            Job(kind="episode", tenant_id=TENANT, run_after=NOW),
        ]
        store.execute(
            Write(
                (
                    PutCheckpoint(cp),
                    *(PutJob(j) for j in jobs),
                    CachePut(MODEL, (("h1", unit(rng)), ("h2", unit(rng)))),
                    RecordEvent("rate:a", T0),
                    RecordEvent("rate:a", T0),
                    RecordEvent("rate:b", NOW),
                    RecordAccess(access((a.id, 0.1 + 0.2), (full.id, 1 / 3), at=T0, actor="键 1")),
                    RecordAccess(access(at=NOW, kind="context", query="nothing served")),
                    RecordAccess(access((a.id, 0.5), tenant_id=OTHER_TENANT, project_id="p 1")),
                )
            )
        )
        return {"items": [full, a, b2], "gone": gone, "vectors": vecs, "messages": stored}

    @staticmethod
    def _dump_all(store: Store, limit: int = 1000) -> dict[str, list[dict[str, Any]]]:
        from jiyi.store.base import ROW_KINDS, DumpRows

        out: dict[str, list[dict[str, Any]]] = {}
        for kind in ROW_KINDS:
            rows: list[dict[str, Any]] = []
            after: str | None = None
            for _ in range(10_000):
                page = store.execute(DumpRows(kind, after=after, limit=limit))
                assert (page.total is not None) == (after is None)
                rows.extend(page.rows)
                if page.next_after is None:
                    break
                after = page.next_after
            out[kind] = rows
        return out

    def test_dump_rows_of_an_empty_store(self, store: Store) -> None:
        from jiyi.store.base import ROW_KINDS, DumpRows

        for kind in ROW_KINDS:
            page = store.execute(DumpRows(kind))
            assert (page.rows, page.next_after, page.total) == ([], None, 0)
        with pytest.raises(InvalidInput):
            store.execute(DumpRows("nonsense"))

    def test_dump_rows_hold_everything_in_stable_pages(self, store: Store) -> None:
        import json

        from jiyi.store.base import DumpRows, vector_from_text

        data = self._fill_every_kind(store)
        whole = self._dump_all(store)
        assert self._dump_all(store, limit=2) == whole == self._dump_all(store, limit=1)
        json.dumps(whole)  # JSON-able as it is
        counts = {k: len(v) for k, v in whole.items()}
        assert counts == {
            "items": 3,
            "history": 6,
            "messages": 3,
            "checkpoints": 1,
            "jobs": 2,
            "embedding_cache": 2,
            "rate_events": 3,
            "retrievals": 3,
        }
        assert store.execute(DumpRows("history", limit=1)).total == 6
        by_id = {r["id"]: r for r in whole["items"]}
        for item in data["items"]:
            row = by_id[item.id]
            assert MemoryItem.model_validate_json(row["doc"]) == get(store, item)
            assert row["terms"]
        for item_id, vec in data["vectors"].items():
            (v,) = by_id[item_id]["vectors"]
            assert (v["model"], v["dim"]) == (MODEL, DIM)
            assert np.array_equal(vector_from_text(v["vec"]), vec)
        history = [r for r in whole["history"] if r["item_id"] == data["items"][2].id]
        events = store.execute(GetHistory(TENANT, data["items"][2].id))
        assert [r["seq"] for r in history] == [e.seq for e in events]
        assert [r["action"] for r in history] == ["add", "update"]
        assert [json.loads(r["after"]) for r in history] == [e.after for e in events]
        seqs = [r["seq"] for r in whole["history"]]
        assert seqs == sorted(seqs)
        assert [r["action"] for r in whole["history"] if r["item_id"] == data["gone"].id] == ["add", "purge"]
        assert [Message.model_validate_json(r["doc"]) for r in whole["messages"][:2]] == data["messages"]
        assert sorted((r["key"], r["at"]) for r in whole["rate_events"]) == [
            (r["key"], r["at"]) for r in whole["rate_events"]
        ]
        logged = accesses(store) + accesses(store, OTHER_TENANT)
        dumped = [MemoryAccess.from_json_dict(json.loads(r["doc"])) for r in whole["retrievals"]]
        assert dumped == sorted(logged, key=lambda e: (e.tenant_id, e.id))
        with pytest.raises(InvalidInput):
            store.execute(DumpRows("items", after="not a cursor"))

    def test_load_rows_restores_a_cleared_store_exactly(self, store: Store) -> None:
        from jiyi.store.base import ROW_KINDS, ClearRows, LoadRows

        data = self._fill_every_kind(store)
        before = self._dump_all(store)
        items = data["items"]
        q = data["vectors"][items[1].id]
        search = Retrieve(
            flt(statuses=()), MODEL, q, query_terms("dump Berlin Munich"), vector_k=5, keyword_k=5
        )
        found = [(c.item.id, c.cosine, c.keyword) for c in store.execute(search)]
        history = store.execute(GetHistory(TENANT, items[2].id))
        logged = accesses(store)
        store.execute(Write((ClearRows(ROW_KINDS),)))
        assert self._dump_all(store) == {k: [] for k in ROW_KINDS}
        assert store.execute(GetItems(TENANT, tuple(i.id for i in items))) == []
        for kind in ROW_KINDS:
            rows = before[kind]
            for start in range(0, len(rows), 2):  # in batches, one transaction each
                store.execute(Write((LoadRows(kind, tuple(rows[start : start + 2])),)))
        assert self._dump_all(store) == before
        assert store.execute(GetItems(TENANT, tuple(i.id for i in items))) == items
        assert store.execute(GetHistory(TENANT, items[2].id)) == history
        again = [(c.item.id, c.cosine, c.keyword) for c in store.execute(search)]
        assert [x[0] for x in again] == [x[0] for x in found]
        for (_, c1, k1), (_, c2, k2) in zip(again, found, strict=True):
            assert c1 == pytest.approx(c2, abs=1e-6) if c2 is not None else c1 is None
            assert k1 == pytest.approx(k2, rel=1e-9) if k2 is not None else k1 is None
        assert store.execute(GetMessages(TENANT, "s1")) == data["messages"]
        assert store.execute(CountEvents("rate:a", T0)) == 2
        assert accesses(store) == logged
        # New writes continue after the loaded history and message positions.
        new = make_item("after the load")
        put(store, new)
        last = max(r["seq"] for r in before["history"])
        assert store.execute(GetHistory(TENANT, new.id))[0].seq == last + 1
        store.execute(
            Write((AppendMessages((Message(tenant_id=TENANT, session_id="s1", role="user", content="x"),)),))
        )
        assert [m.seq for m in store.execute(GetMessages(TENANT, "s1"))] == [0, 1, 2]
        # An item id that is already there is refused, and nothing of that write lands.
        with pytest.raises(InvalidInput):
            store.execute(Write((LoadRows("items", tuple(before["items"][:1])),)))
        assert len(self._dump_all(store)["items"]) == 4

    # ------------------------------------------------------------ per-item visibility (Filter.viewer)

    @staticmethod
    def _visibility_world(store: Store) -> list[MemoryItem]:
        """Project items of every visibility and creator, plus user items (never restricted)
        and another tenant's, all sharing the word "zebra" and a vector."""
        rng = np.random.default_rng(21)

        def item(n: int, project: str | None, vis: Visibility, creator: Any) -> MemoryItem:
            meta = {} if creator is None else {"created_by": creator}
            scope = {"scope": Scope.PROJECT, "project_id": project} if project else {}
            return make_item(
                f"zebra note {n}",
                visibility=vis,
                metadata=meta,
                created_at=T0 + timedelta(seconds=n),
                **scope,
            )

        items = [
            item(0, "p1", Visibility.PUBLIC, "k1"),
            item(1, "p1", Visibility.MEMBERS, "k1"),
            item(2, "p1", Visibility.OWNER_ONLY, "k1"),
            item(3, "p1", Visibility.OWNER_ONLY, "k2"),
            item(4, "p1", Visibility.OWNER_ONLY, None),
            item(5, "p1", Visibility.OWNER_ONLY, 5),  # not a string: nobody's
            item(6, "p2", Visibility.PUBLIC, "k2"),
            item(7, "p2", Visibility.MEMBERS, "k2"),
            item(8, "p2", Visibility.OWNER_ONLY, "k2"),
            item(9, "项目 三", Visibility.MEMBERS, "k3"),
            item(10, None, Visibility.OWNER_ONLY, "k2"),  # user scope: visibility does not apply
            item(11, None, Visibility.MEMBERS, None),
        ]
        put(store, *items, vectors=[unit(rng) for _ in items])
        foreign = [
            make_item(
                "zebra foreign", tenant_id=OTHER_TENANT, scope=Scope.PROJECT, project_id="p1", visibility=v
            )
            for v in Visibility
        ]
        put(store, *foreign, vectors=[unit(rng) for _ in foreign])
        return items

    VIEWERS = (
        Viewer(sees_all=True),
        Viewer(actor="k1"),
        Viewer(actor="k1", projects=("p1",)),
        Viewer(actor="k2", projects=("p2",)),
        Viewer(actor="k2", projects=("p1", "p2")),
        Viewer(actor="k3", projects=("项目 三",)),
        Viewer(actor="5", projects=()),
        Viewer(projects=()),
        Viewer(),
    )

    def test_viewer_restricts_list_stats_and_retrieve_exactly_as_viewer_sees(self, store: Store) -> None:
        items = self._visibility_world(store)
        q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        for viewer in self.VIEWERS:
            want = [i.id for i in items if viewer.sees(i)]
            assert all_ids(store, viewer=viewer) == want, viewer
            stats = store.execute(GetStats(flt(viewer=viewer)))
            assert stats.total == len(want), viewer
            assert stats.by_scope.get("project", 0) == sum(
                1 for i in items if viewer.sees(i) and i.scope is Scope.PROJECT
            )
            vec = store.execute(Retrieve(flt(viewer=viewer), MODEL, q, (), vector_k=50, keyword_k=0))
            assert sorted(c.item.id for c in vec) == sorted(want), viewer
            assert keyword_ids(store, "zebra", viewer=viewer) == set(want), viewer
        # The rule's corners, spelled out.
        assert all_ids(store, viewer=Viewer(sees_all=True)) == all_ids(store) == [i.id for i in items]
        assert all_ids(store, viewer=Viewer(actor="k2", projects=("p2",))) == [
            items[i].id for i in (0, 3, 6, 7, 8, 10, 11)
        ]
        assert all_ids(store, viewer=Viewer(projects=())) == [items[i].id for i in (0, 6, 10, 11)]
        assert all_ids(store, viewer=Viewer(actor="5", projects=())) == [items[i].id for i in (0, 6, 10, 11)]

    def test_viewer_pages_hold_every_visible_item_once(self, store: Store) -> None:
        items = self._visibility_world(store)
        viewer = Viewer(actor="k1", projects=("p1",))
        want = [i.id for i in items if viewer.sees(i)]
        for size in (1, 2, 3):
            assert all_ids(store, page_size=size, viewer=viewer) == want
        out: list[str] = []
        cursor: str | None = None
        while True:
            page = store.execute(ListItems(flt(viewer=viewer), limit=2, cursor=cursor, descending=True))
            assert len(page.items) == 2 or page.next_cursor is None
            out.extend(i.id for i in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert out == want[::-1]

    def test_visibility_change_takes_effect_at_once(self, store: Store) -> None:
        items = self._visibility_world(store)
        viewer = Viewer(actor="k2", projects=("p2",))
        q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        members = items[1]  # p1, members, by k1: not visible to k2 (not a member of p1)

        def seen() -> tuple[bool, bool, bool, int]:
            listed = members.id in all_ids(store, viewer=viewer)
            cands = store.execute(Retrieve(flt(viewer=viewer), MODEL, q, (), vector_k=50, keyword_k=0))
            found = members.id in {c.item.id for c in cands}
            words = members.id in keyword_ids(store, "zebra", viewer=viewer)
            return listed, found, words, store.execute(GetStats(flt(viewer=viewer))).total

        before = seen()
        assert before[:3] == (False, False, False)
        public = members.evolve(visibility=Visibility.PUBLIC, version=2)
        store.execute(Write((upsert(public, action=HistoryAction.UPDATE, before=members),)))
        assert seen() == (True, True, True, before[3] + 1)
        private = public.evolve(visibility=Visibility.OWNER_ONLY, version=3)
        store.execute(Write((upsert(private, action=HistoryAction.UPDATE, before=public),)))
        assert seen() == before
        assert members.id in all_ids(store, viewer=Viewer(actor="k1", projects=()))

    def test_visibilities_filter_selects_by_visibility(self, store: Store) -> None:
        items = self._visibility_world(store)
        for wanted in ((Visibility.PUBLIC,), (Visibility.MEMBERS, Visibility.OWNER_ONLY)):
            assert all_ids(store, visibilities=wanted) == [i.id for i in items if i.visibility in wanted]
            assert keyword_ids(store, "zebra", visibilities=wanted) == {
                i.id for i in items if i.visibility in wanted
            }
        both = flt(visibilities=(Visibility.OWNER_ONLY,), viewer=Viewer(actor="k2", projects=()))
        assert store.execute(GetStats(both)).total == 3  # k2's two project items and the user item

    def test_invisible_thread_items_are_never_neighbours(self, store: Store) -> None:
        rng = np.random.default_rng(5)
        turns = [
            make_item(
                f"turn {i}",
                scope=Scope.PROJECT,
                project_id="p1",
                thread_id="t",
                occurred_at=T0 + timedelta(minutes=i),
                visibility=Visibility.OWNER_ONLY if i == 1 else Visibility.MEMBERS,
                metadata={"created_by": "k2"},
            )
            for i in range(3)
        ]
        vecs = [unit(rng) for _ in turns]
        put(store, *turns, vectors=vecs)
        viewer = Viewer(actor="k1")
        cands = store.execute(
            Retrieve(flt(viewer=viewer), MODEL, vecs[0], (), vector_k=1, keyword_k=0, neighbours=2)
        )
        by_id = {c.item.id: c for c in cands}
        assert set(by_id) == {turns[0].id, turns[2].id}
        assert by_id[turns[0].id].next_id == turns[2].id and by_id[turns[2].id].prev_id == turns[0].id  # noqa: PT018
        owner = store.execute(
            Retrieve(
                flt(viewer=Viewer(actor="k2")), MODEL, vecs[0], (), vector_k=1, keyword_k=0, neighbours=1
            )
        )
        assert {c.item.id for c in owner} == {turns[0].id, turns[1].id}


def replace_query(entry: MemoryAccess, query: str) -> MemoryAccess:
    return replace(entry, query=query)


def _join(threads: Iterable[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), f"{t.name} did not finish"
