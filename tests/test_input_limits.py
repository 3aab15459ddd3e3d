"""Input limits (README "Input limits"): JSON fields are nested at most 32 levels, hold
JSON values only and stay within a size; text is valid Unicode. Every entry point refuses
a value that breaks them with InvalidInput naming the field (422 over REST), and a store
that already holds such a row (written before the limits) still lists, exports and
deletes it. Real SQLite files throughout; the REST service runs in process over
``httpx.ASGITransport``; the CLI runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jiyi import Memory
from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory
from jiyi.model import MemoryItem
from jiyi.store.sqlite import SQLiteStore

EMBEDDER = "hash:64"
MAX_JSON_DEPTH = 32  # documented in the README (Input limits)
UNREADABLE = "jiyi_unreadable"  # the key of the marker a too-deep stored value reads as


def nested(levels: int) -> dict[str, Any]:
    """An object nested ``levels`` levels deep: ``nested(2) == {"a": {}}``."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def nested_text(levels: int) -> str:
    """The JSON text of ``nested(levels)``, built without recursion (any depth)."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with Memory.open(tmp_path / "m.db", embedder=EMBEDDER) as memory:
        yield memory


# ---------------------------------------------------------------- the library refuses


def test_nesting_depth_limit_is_exact(mem: Memory) -> None:
    deepest = nested(MAX_JSON_DEPTH)
    item = mem.add("I like green tea very much", user_id="u", metadata={"x": 1}, structured=deepest).item
    assert item is not None
    assert mem.get(item.id).structured == deepest  # read back as written
    with pytest.raises(InvalidInput) as info:
        mem.add("I like black tea very much", user_id="u", structured={"b": deepest})
    assert info.value.field == "structured" and "deeper than 32 levels" in str(info.value)


@pytest.mark.parametrize("levels", [33, 250, 2000])
@pytest.mark.parametrize("field", ["metadata", "structured"])
def test_too_deep_json_is_refused_by_add_update_and_import(mem: Memory, field: str, levels: int) -> None:
    deep = nested(levels)
    with pytest.raises(InvalidInput) as info:
        mem.add("I like green tea very much", user_id="u", **{field: deep})
    assert info.value.field == field and "nested deeper than 32 levels" in str(info.value)

    item = mem.add("My cat is called Miso", user_id="u").item
    assert item is not None
    with pytest.raises(InvalidInput) as info:
        mem.update(item.id, **{field: deep})
    assert info.value.field == field

    with pytest.raises(InvalidInput) as info:
        mem.import_items([{"content": "imported text here", "user_id": "u", field: deep}])
    assert info.value.field == field and "record 1" in str(info.value)

    # Nothing bad got in: the scope still reads, searches and takes new memories.
    assert [i.id for i in mem.list(user_id="u").items] == [item.id]
    assert mem.search("cat", user_id="u")[0].item.id == item.id
    assert mem.add("I live in Chengdu with my family", user_id="u").item is not None
    assert mem.context("cat", user_id="u").entries


def test_session_json_fields_are_limited(mem: Memory) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.add_messages("s1", [{"role": "user", "content": "hello there", "metadata": nested(40)}])
    assert info.value.field == "metadata"
    with pytest.raises(InvalidInput) as info:
        mem.save_checkpoint("s1", agent_state={"todo": nested(300)})
    assert info.value.field == "agent_state"
    with pytest.raises(InvalidInput) as info:
        mem.save_checkpoint("s1", pending_tool_calls=[nested(40)])
    assert info.value.field == "pending_tool_calls"
    assert mem.messages("s1") == [] and mem.list_checkpoints("s1") == []
    # Within the limits, as before.
    checkpoint = mem.save_checkpoint("s1", agent_state={"todo": ["x"], "deep": nested(20)})
    assert mem.list_checkpoints("s1")[0].agent_state == checkpoint.agent_state


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"blob": b"\x00\xff"}, "bytes is not a JSON value"),
        ({"when": {1, 2}}, "set is not a JSON value"),
        ({"x": float("nan")}, "not a JSON number"),
        ({"x": list(range(10_001))}, "more than 10000 entries"),
        ({"x": "y" * 1_000_001}, "larger than 1000000 bytes"),
    ],
)
def test_json_fields_hold_json_within_a_size(mem: Memory, value: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.add("I like green tea very much", user_id="u", metadata=value)
    assert info.value.field == "metadata" and said in str(info.value)


def test_a_cycle_is_refused_not_looped_on() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(InvalidInput) as info:
        MemoryItem.build(content="cyclic metadata here", user_id="u", metadata=cycle)
    assert info.value.field == "metadata"


# ---------------------------------------------------------------- over REST: 422, and the scope keeps working


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    pytest.importorskip("fastapi")
    from jiyi.server.app import create_app

    memory = AsyncMemory(SQLiteStore(tmp_path / "rest.db"), embedder=EMBEDDER)
    app = create_app(memory, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        yield c
    await memory.aclose()


def _body(text: str) -> dict[str, Any]:
    return {"content": text, "headers": {"content-type": "application/json"}}


def _refused(r: httpx.Response, field: str | None) -> None:
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input", error
    if field is not None:
        assert error["field"] == field and "deeper than 32 levels" in error["message"], error


@pytest.mark.parametrize("levels", [200, 400, 2000])
async def test_rest_answers_422_for_too_deep_json(client: httpx.AsyncClient, levels: int) -> None:
    deep = nested_text(levels)

    def named(field: str) -> str | None:  # past Python's JSON parser: "could not be parsed", still 422
        return field if levels < 900 else None

    for field in ("metadata", "structured"):
        text = f'{{"content": "I like green tea very much", "user_id": "u", "{field}": {deep}}}'
        _refused(await client.post("/v1/memories", **_body(text)), named(field))
    line = f'{{"content": "imported text here", "user_id": "u", "metadata": {deep}}}'
    _refused(await client.post("/v1/import", content=line.encode()), "metadata" if levels < 900 else "body")
    text = f'{{"agent_state": {deep}}}'
    _refused(await client.post("/v1/sessions/s1/checkpoints", **_body(text)), named("agent_state"))
    text = f'{{"user_id": "u", "messages": [{{"role": "user", "content": "hi there", "metadata": {deep}}}]}}'
    _refused(await client.post("/v1/sessions/s1/messages", **_body(text)), named("metadata"))

    # The scope was not poisoned: adds, search, context and export answer.
    r = await client.post("/v1/memories", json={"content": "My cat is called Miso", "user_id": "u"})
    assert r.status_code == 201, r.text
    r = await client.post("/v1/memories/search", json={"query": "cat", "user_id": "u"})
    assert r.status_code == 200 and r.json()["hits"], r.text
    r = await client.post("/v1/context", json={"query": "cat", "user_id": "u"})
    assert r.status_code == 200, r.text
    r = await client.get("/v1/export")
    assert r.status_code == 200 and len(r.text.splitlines()) == 1, r.text
    r = await client.get("/v1/sessions/s1/checkpoints")
    assert r.status_code == 200 and r.json() == [], r.text


# ---------------------------------------------------------------- rows stored before the limits


def _poison(db: Path, item_id: str, levels: int) -> None:
    """Rewrite an item's stored document (and its history) with fields ``levels`` deep,
    as a store written before the limits may hold them."""
    con = sqlite3.connect(db)
    try:
        doc = json.loads(con.execute("SELECT doc FROM items WHERE id = ?", (item_id,)).fetchone()[0])
        doc["metadata"] = {"created_by": "k1", "deep": None}
        doc["structured"] = None
        text = json.dumps(doc)
        deep = nested_text(levels)
        text = text.replace('"deep": null', f'"deep": {deep}').replace(
            '"structured": null', f'"structured": {deep}'
        )
        con.execute("UPDATE items SET doc = ? WHERE id = ?", (text, item_id))
        con.execute("UPDATE history SET after = ? WHERE item_id = ?", (text, item_id))
        con.commit()
    finally:
        con.close()


@pytest.mark.parametrize("levels", [40, 250, 990])
def test_a_stored_too_deep_row_is_listed_exported_and_deleted(tmp_path: Path, levels: int) -> None:
    db = tmp_path / "old.db"
    with Memory.open(db, embedder=EMBEDDER) as mem:
        poisoned = mem.add("I like green tea very much", user_id="u").item
        other = mem.add("My cat is called Miso", user_id="u").item
        assert poisoned is not None and other is not None
    _poison(db, poisoned.id, levels)

    with Memory.open(db, embedder=EMBEDDER) as mem:
        listed = {i.id: i for i in mem.list(user_id="u").items}
        assert set(listed) == {poisoned.id, other.id}
        item = listed[poisoned.id]
        # The readable part stays; the too-deep value is a marker saying why.
        assert item.metadata["created_by"] == "k1"
        assert "deeper than 32 levels" in item.metadata["deep"][UNREADABLE]
        assert item.structured is not None and UNREADABLE in item.structured["a"]
        assert mem.get(poisoned.id).content == "I like green tea very much"
        assert {h.item.id for h in mem.search("green tea", user_id="u")} == {poisoned.id, other.id}
        assert "green tea" in mem.context("green tea", user_id="u").text
        exported = [json.dumps(record) for record in mem.export()]
        assert len(exported) == 2
        assert [e.action.value for e in mem.history(poisoned.id)] == ["add"]
        # New writes to the scope work, and the row can be edited and deleted.
        assert mem.add("I live in Chengdu with my family", user_id="u").item is not None
        mem.update(poisoned.id, importance=0.9)
        mem.delete(poisoned.id)
        assert mem.get(poisoned.id).status.value == "archived"
        mem.delete(poisoned.id, hard=True)
        assert poisoned.id not in {i.id for i in mem.list(user_id="u").items}


def test_a_stored_too_deep_checkpoint_is_still_listed(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Memory.open(db, embedder=EMBEDDER) as mem:
        mem.add_messages("s1", [("user", "hello there")])
        saved = mem.save_checkpoint("s1", agent_state={"todo": ["x"], "deep": None})
    con = sqlite3.connect(db)
    doc = con.execute("SELECT doc FROM checkpoints").fetchone()[0]
    con.execute("UPDATE checkpoints SET doc = ?", (doc.replace('"deep":null', f'"deep":{nested_text(300)}'),))
    con.commit()
    con.close()
    with Memory.open(db, embedder=EMBEDDER) as mem:
        (checkpoint,) = mem.list_checkpoints("s1")
        assert checkpoint.id == saved.id and checkpoint.agent_state["todo"] == ["x"]
        assert UNREADABLE in checkpoint.agent_state["deep"]
        assert [m.content for m in mem.restore_checkpoint("s1", saved.id).messages] == ["hello there"]


def test_cli_lists_and_exports_a_stored_too_deep_row(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Memory.open(db, embedder=EMBEDDER) as mem:
        poisoned = mem.add("I like green tea very much", user_id="u").item
        assert poisoned is not None
    _poison(db, poisoned.id, 250)
    env = {**os.environ, "JIYI_EMBEDDER": EMBEDDER, "PYTHONIOENCODING": "utf-8"}
    for args in (["list", "--user", "u"], ["export"]):
        proc = subprocess.run(
            [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and poisoned.id in proc.stdout


# ---------------------------------------------------------------- text must be valid Unicode

LONE = "\ud800"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"metadata": {"note": f"a{LONE}b"}}, "metadata"),
        ({"metadata": {f"k{LONE}": 1}}, "metadata"),
        ({"metadata": {"deeper": [{"x": LONE}]}}, "metadata"),
        ({"structured": {"value": "\udfff"}}, "structured"),
        ({"tags": ["ok", f"t{LONE}"]}, "tags"),
        ({"raw": f"raw {LONE} text"}, "raw"),
        ({"summary": LONE}, "summary"),
    ],
)
def test_lone_surrogates_are_refused_naming_the_field(
    mem: Memory, fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.add("I like green tea very much", user_id="u", **fields)
    assert info.value.field == field and "valid Unicode" in str(info.value)
    str(info.value).encode("utf-8")  # the message itself is printable anywhere
    assert mem.list(user_id="u").items == []


def test_lone_surrogates_in_content_messages_and_checkpoints_are_refused(mem: Memory) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.add(f"I like green tea {LONE} very much", user_id="u")
    assert info.value.field == "content"
    with pytest.raises(InvalidInput) as info:
        mem.add_messages("s1", [("user", f"hello {LONE}")])
    assert info.value.field == "content"
    with pytest.raises(InvalidInput) as info:
        mem.add_messages("s1", [{"role": "user", "content": "hello", "metadata": {"x": LONE}}])
    assert info.value.field == "metadata"
    with pytest.raises(InvalidInput) as info:
        mem.save_checkpoint("s1", label=LONE)
    assert info.value.field == "label"
    with pytest.raises(InvalidInput) as info:
        mem.save_checkpoint("s1", agent_state={"todo": [LONE]})
    assert info.value.field == "agent_state"
    item = mem.add("I like green tea very much", user_id="u").item
    assert item is not None
    with pytest.raises(InvalidInput) as info:
        mem.update(item.id, metadata={"x": LONE})
    assert info.value.field == "metadata"
    assert mem.messages("s1") == [] and mem.get(item.id).metadata == {}


async def test_rest_answers_422_for_lone_surrogates(client: httpx.AsyncClient) -> None:
    escaped = "\\ud800"  # JSON's escape for the lone surrogate: valid JSON, invalid text
    bodies = [
        (
            "/v1/memories",
            f'{{"content": "I like green tea", "user_id": "u", "metadata": {{"x": "{escaped}"}}}}',
        ),
        ("/v1/memories", f'{{"content": "I like green tea", "user_id": "u", "tags": ["{escaped}"]}}'),
        ("/v1/memories", f'{{"content": "I like green tea", "user_id": "u", "raw": "{escaped}"}}'),
        ("/v1/memories", f'{{"content": "I like {escaped} tea", "user_id": "u"}}'),
        (
            "/v1/sessions/s1/messages",
            f'{{"user_id": "u", "messages": [{{"role": "user", "content": "hi {escaped}"}}]}}',
        ),
        ("/v1/sessions/s1/checkpoints", f'{{"agent_state": {{"{escaped}": 1}}}}'),
    ]
    for url, text in bodies:
        r = await client.post(url, **_body(text))
        assert r.status_code == 422, (url, text, r.text)
        error = r.json()["error"]
        assert error["code"] == "invalid_input" and "nicode" in error["message"], error
    r = await client.post(
        "/v1/import",
        content=f'{{"content": "imported text", "user_id": "u", "tags": ["{escaped}"]}}'.encode(),
    )
    assert r.status_code == 422, r.text
    # Still serving, and nothing got in.
    r = await client.get("/v1/memories", params={"user_id": "u"})
    assert r.status_code == 200 and r.json()["items"] == [], r.text
    r = await client.get("/v1/sessions/s1/messages")
    assert r.status_code == 200 and r.json() == [], r.text
