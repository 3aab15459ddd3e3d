"""Hostile input, generated: the public API either does what it was asked or refuses with
a jiyi error a person can act on, and a refusal leaves nothing behind (issue 15).

Hypothesis draws strings (lone surrogates, NUL, control and wide characters, very long
runs), structures (deep nesting, non-string keys, bytes, NaN, sets) and wrong types for
every argument of ``add``, ``search``, ``update``, ``remember`` and ``import_items``, and
for the REST service's ``/v1/import`` (JSON lines, which schemathesis cannot generate).
The bounded counts keep this in CI, and the examples are derandomized so that CI sees the
same cases every run (a new case is a code change, not luck); raise ``max_examples`` and
drop ``derandomize`` locally to explore. bench/attack.py runs the long version of the races.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jiyi.errors import JiyiError
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.store.sqlite import SQLiteStore

EMBEDDER = "hash:256"
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
)

# Text a person or an attacker might send: surrogates, NUL, RTL marks, CJK, emoji, long runs.
nasty_chars = st.sampled_from(
    ["\ud800", "\udfff", "\x00", "\u202e", "\ufeff", "记", "😀", "\n", "'", '"', "\\"]
)
texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(nasty_chars, st.characters()), max_size=30).map("".join),
    st.integers(1, 3).map(lambda n: "长" * (n * 20_000)),
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


json_like = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        texts,
        st.binary(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(texts, st.integers()), inner, max_size=4),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=12,
)
structures = st.one_of(json_like, st.integers(50, 400).map(nested))
anything = st.one_of(texts, structures, st.integers(), st.floats(), st.none())


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory.open(tmp_path_factory.mktemp("hostile") / "h.db", embedder=EMBEDDER, background=False) as m:
        m.add("a memory that must survive every refusal", user_id="u", infer=False)
        yield m


def _snapshot(mem: Memory) -> list[tuple[str, int]]:
    """Every row of the tenant, as (id, version): a refusal may change none of them."""
    return sorted((i.id, i.version) for i in mem.list(include_turns=True, limit=1000).items)


def _refused_or_done(call: Any, mem: Memory) -> None:
    before = _snapshot(mem)
    why = ""
    try:
        call()
    except JiyiError as exc:
        why = str(exc).strip() or "(no message)"
    if why:
        assert why != "(no message)", "a refusal says why"
        assert _snapshot(mem) == before, f"a refused call left something behind ({why})"
    # Whatever happened, the store still reads, searches and exports.
    mem.list(limit=5)
    mem.search("survive", user_id="u")
    assert sum(1 for _ in mem.export()) >= 1


@SETTINGS
@given(content=anything, metadata=anything, tags=anything, structured=anything, raw=anything, user=anything)
def test_add_with_hostile_arguments(
    mem: Memory, content: Any, metadata: Any, tags: Any, structured: Any, raw: Any, user: Any
) -> None:
    _refused_or_done(
        lambda: mem.add(content, user_id=user, metadata=metadata, tags=tags, structured=structured, raw=raw),
        mem,
    )


@SETTINGS
@given(query=anything, limit=anything, user=anything, tenant=anything)
def test_search_with_hostile_arguments(mem: Memory, query: Any, limit: Any, user: Any, tenant: Any) -> None:
    _refused_or_done(lambda: mem.search(query, user_id=user, limit=limit, tenant_id=tenant), mem)


@SETTINGS
@given(content=anything, metadata=anything, item_id=anything)
def test_update_with_hostile_arguments(mem: Memory, content: Any, metadata: Any, item_id: Any) -> None:
    target = mem.list(user_id="u", limit=1).items[0].id
    _refused_or_done(lambda: mem.update(target, content=content, metadata=metadata), mem)
    _refused_or_done(lambda: mem.get(item_id), mem)


@SETTINGS
@given(messages=st.one_of(anything, st.lists(st.one_of(anything, st.tuples(texts, anything)), max_size=3)))
def test_remember_with_hostile_messages(mem: Memory, messages: Any) -> None:
    _refused_or_done(lambda: mem.remember(messages, session_id="s", user_id="u"), mem)


@SETTINGS
@given(records=st.lists(st.one_of(anything, st.dictionaries(texts, anything, max_size=5)), max_size=4))
def test_import_with_hostile_records(mem: Memory, records: Any) -> None:
    _refused_or_done(lambda: mem.import_items(records), mem)


# ---------------------------------------------------------------- REST /v1/import


def _line(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, default=repr, allow_nan=True).encode(
            "utf-8", "surrogatepass"
        )
    except (ValueError, RecursionError):
        return b"{broken"


valid_records = st.fixed_dictionaries(
    {"content": st.sampled_from(["I like green tea", "我对花生过敏", "We met in Lisbon"]), "user_id": texts}
)
bodies = st.one_of(
    st.binary(max_size=200),
    st.lists(valid_records, min_size=1, max_size=3).map(lambda rows: b"\n".join(_line(r) for r in rows)),
    st.lists(st.one_of(structures, st.dictionaries(texts, anything, max_size=5)), max_size=4).map(
        lambda rows: b"\n".join(_line(r) for r in rows)
    ),
)


def test_rest_import_never_answers_5xx_and_refuses_whole(tmp_path: Path) -> None:
    """Every generated body: 200 with a count, or a 4xx in the API's error shape; a
    refused import adds nothing (it is all or nothing)."""
    loop = asyncio.new_event_loop()
    memory = AsyncMemory(SQLiteStore(tmp_path / "imp.db"), embedder=EMBEDDER, background=False)
    keys = ApiKeys()
    key = keys.add("acme", "owner")[1]
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    seen: list[int] = []

    async def one(body: bytes) -> None:
        before = (await memory.stats(include_turns=True)).total
        r = await client.post("/v1/import", content=body, headers={"X-API-Key": key})
        seen.append(r.status_code)
        assert r.status_code < 500, r.text
        if r.status_code == 200:
            assert r.json()["imported"] >= 0
        else:
            assert r.json()["error"]["message"]
            assert (await memory.stats(include_turns=True)).total == before

    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,
    )
    # One body known to be valid, so the "200 in seen" below never rests on luck: the
    # generated bodies differed after tests/test_mcp.py ran in the same process, and then
    # none of the 80 was a fully valid import.
    @given(body=bodies)
    @example(body=b'{"content": "I like green tea", "user_id": "u1"}')
    def check(body: bytes) -> None:
        loop.run_until_complete(one(body))

    try:
        check()
    finally:
        loop.run_until_complete(client.aclose())
        memory.store.close()
        loop.close()
    assert 200 in seen and any(400 <= code < 500 for code in seen)
