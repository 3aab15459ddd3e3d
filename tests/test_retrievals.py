"""The retrieval log (seed 002's context graph) through the library, the command line and
REST: what is logged for search, context and agent tools, "why was this retrieved",
visibility per key, export and import, retention, and the right to be forgotten.
Every store is a real SQLite file; nothing is mocked."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from jiyi.errors import NotFound
from jiyi.integrations.tools import MemoryTools
from jiyi.lifecycle import LifecyclePolicy
from jiyi.memory import AsyncMemory, Memory
from jiyi.store.base import MemoryAccess
from jiyi.store.sqlite import SQLiteStore
from jiyi.who import Owner

EMBEDDER = "hash:256"
ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def tick(self, **delta: float) -> datetime:
        self.at += timedelta(**delta)
        return self.at


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory.open(tmp_path / "log.db", embedder=EMBEDDER, clock=clock, background=False) as m:
        yield m


def _seed(mem: Memory) -> dict[str, str]:
    texts = {
        "tea": "Alice drinks green tea every morning",
        "bike": "Alice rides her bike to work on Fridays",
        "bob": "Bob drinks black coffee with no sugar",
    }
    ids = {}
    for name, text in texts.items():
        user = "bob" if name == "bob" else "alice"
        added = mem.add(text, user_id=user, memory_type="habit", infer=False)
        assert added.item is not None
        ids[name] = added.item.id
    return ids


def _log(mem: Memory, **filters: Any) -> list[MemoryAccess]:
    out: list[MemoryAccess] = []
    cursor = None
    while True:
        page = mem.retrievals(cursor=cursor, limit=2, **filters)
        out += page.accesses
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


# ---------------------------------------------------------------- the library


def test_search_logs_what_it_served_with_the_scores_it_returned(mem: Memory, clock: Clock) -> None:
    ids = _seed(mem)
    at = clock.tick(minutes=5)
    hits = mem.search("what does alice drink in the morning?", user_id="alice", explain=True, actor="key-7")
    assert hits and hits[0].item.id == ids["tea"]
    (access,) = _log(mem)
    assert (access.kind, access.at, access.user_id, access.actor) == ("search", at, "alice", "key-7")
    assert access.query == "what does alice drink in the morning?"
    assert access.retrieved_memory_ids == tuple(h.item.id for h in hits)
    for rank, (served, hit) in enumerate(zip(access.retrieved, hits, strict=True), start=1):
        assert (served.rank, served.score, served.similarity, served.relevance) == (
            rank,
            hit.score,
            hit.similarity,
            hit.relevance,
        )
    # The usage summary decay reads is the log's: one use, at the access's time.
    tea = mem.get(ids["tea"])
    assert (tea.access_count, tea.last_used_at) == (1, at)
    why = mem.why_retrieved(ids["tea"])
    assert (why.access_count, why.last_used_at) == (1, at)
    assert [(s.query, s.rank, s.score) for s in why.served] == [(access.query, 1, hits[0].score)]
    assert mem.why_retrieved(ids["bob"]).served == []


def test_the_logged_query_is_redacted_like_every_stored_text(mem: Memory) -> None:
    _seed(mem)
    mem.search("tea for alice@example.com or +86 138 0013 8000?", user_id="alice")
    (access,) = _log(mem)
    assert "alice@example.com" not in access.query and "138" not in access.query
    assert "[REDACTED_EMAIL]" in access.query


def test_context_logs_one_access_with_what_made_it_into_the_prompt(mem: Memory) -> None:
    ids = _seed(mem)
    ctx = mem.context("green tea", user_id="alice", budget_tokens=200, actor="agent-1")
    kept = [e.item.id for e in ctx.entries if e.item is not None]
    assert ids["tea"] in kept
    (access,) = _log(mem)  # the searches inside context() are not logged on their own
    assert (access.kind, access.actor, access.query) == ("context", "agent-1", "green tea")
    assert list(access.retrieved_memory_ids) == kept
    assert [r.rank for r in access.retrieved] == list(range(1, len(kept) + 1))
    assert mem.get(ids["tea"]).access_count == 1


def test_agent_tools_log_as_tool_calls_with_their_actor(mem: Memory) -> None:
    ids = _seed(mem)
    tools = MemoryTools(mem, user_id="alice")
    found = tools.call("memory_search", {"query": "green tea"})
    assert found["count"] >= 1
    (access,) = _log(mem)
    assert (access.kind, access.actor, access.user_id) == ("tool", "memory_tools", "alice")
    assert ids["tea"] in access.retrieved_memory_ids


def test_what_is_not_logged(mem: Memory, clock: Clock) -> None:
    ids = _seed(mem)
    mem.search("green tea", user_id="alice", touch=False)
    mem.search("green tea", user_id="alice", as_of=clock.at)
    assert _log(mem) == []
    assert mem.get(ids["tea"]).access_count == 0
    # A search that finds nothing is still a logged access (a question nothing answered).
    mem.search("quantum cooling systems", user_id="nobody")
    (empty,) = _log(mem)
    assert (empty.user_id, empty.retrieved) == ("nobody", ())


def test_filters_pages_and_bound_owner(mem: Memory, clock: Clock) -> None:
    ids = _seed(mem)
    times = []
    for i in range(5):
        times.append(clock.tick(minutes=1))
        mem.search("tea" if i % 2 else "coffee", user_id="alice" if i < 3 else "bob")
    everything = _log(mem)
    assert [a.at for a in everything] == sorted(times, reverse=True)
    assert {a.user_id for a in _log(mem, user_id="bob")} == {"bob"} and len(_log(mem, user_id="bob")) == 2
    assert _log(mem.bound(owner=Owner(user_id="bob"))) == _log(mem, user_id="bob")
    window = _log(mem, since=times[1], until=times[3])
    assert [a.at for a in window] == [times[2], times[1]]
    served_tea = _log(mem, item_id=ids["tea"])
    assert served_tea and all(ids["tea"] in a.retrieved_memory_ids for a in served_tea)
    with pytest.raises(NotFound):
        mem.retrievals(item_id="no-such-memory")


async def test_async_memory_has_the_same_operations(tmp_path: Path) -> None:
    async with AsyncMemory.open(tmp_path / "a.db", embedder=EMBEDDER, background=False) as amem:
        added = await amem.add("Alice drinks green tea every morning", user_id="alice", infer=False)
        assert added.item is not None
        await amem.search("green tea", user_id="alice")
        page = await amem.retrievals(item_id=added.item.id)
        assert [a.kind for a in page.accesses] == ["search"]
        why = await amem.why_retrieved(added.item.id)
        assert why.access_count == 1 and why.served[0].rank == 1


def test_purge_and_reset_forget_the_log(mem: Memory) -> None:
    ids = _seed(mem)
    mem.search("what does alice drink or ride?", user_id="alice")
    mem.search("coffee", user_id="bob")
    mem.delete(ids["bike"])  # archived: still there, its log with it
    assert _log(mem, item_id=ids["bike"])
    mem.delete(ids["bike"], hard=True)  # purged: the log forgets it
    assert all(ids["bike"] not in a.retrieved_memory_ids for a in _log(mem))
    with pytest.raises(NotFound):
        mem.why_retrieved(ids["bike"])
    assert mem.reset(user_id="alice") == 1
    assert {a.user_id for a in _log(mem)} == {"bob"}  # alice's queries are gone too


def test_export_and_import_carry_the_log(mem: Memory, tmp_path: Path, clock: Clock) -> None:
    _seed(mem)
    mem.search("green tea", user_id="alice", actor="key-1")
    clock.tick(seconds=1)
    mem.context("coffee", user_id="bob")
    rows = mem.export(retrievals=True)
    assert len(mem.export()) == 3 and len(rows) == 5
    logged = [r["retrieval"] for r in rows if "retrieval" in r]
    assert [r["kind"] for r in logged] == ["search", "context"]  # oldest first, after the memories
    with Memory.open(tmp_path / "copy.db", embedder=EMBEDDER, background=False) as copy:
        result = copy.import_items(rows, tenant_id="restored", trusted=True)
        assert (result.imported, result.retrievals) == (3, 2)
        again = copy.import_items(rows, tenant_id="restored", trusted=True)  # idempotent for the log
        assert again.retrievals == 2
        restored = copy.retrievals(tenant_id="restored").accesses
        original = mem.retrievals().accesses
        assert [a.to_json_dict() | {"tenant_id": "default"} for a in restored] == [
            a.to_json_dict() for a in original
        ]


def test_retention_drops_old_entries_in_the_maintenance_pass(mem: Memory, clock: Clock) -> None:
    ids = _seed(mem)
    mem.search("green tea", user_id="alice")
    clock.tick(days=60)
    mem.search("green tea", user_id="alice")
    clock.tick(days=40)  # the first access is 100 days old, the second 40
    dry = mem.maintain(dry_run=True)
    assert dry.retrievals_before == clock.at - timedelta(days=90) and len(_log(mem)) == 2
    report = mem.maintain()
    assert report.to_json_dict()["retrievals_before"] == (clock.at - timedelta(days=90)).isoformat()
    (left,) = _log(mem)
    assert left.at == T0 + timedelta(days=60)
    # The usage summary is not shortened by retention: decay still sees both uses.
    assert mem.get(ids["tea"]).access_count == 2
    keep_all = LifecyclePolicy(retention_days={"retrievals": None})
    clock.tick(days=400)
    assert mem.maintain(policy=keep_all).retrievals_before is None and len(_log(mem)) == 1


def test_a_log_that_cannot_be_written_never_fails_a_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broken.db"
    with Memory.open(path, embedder=EMBEDDER, background=False) as m:
        tea = m.add("Alice drinks green tea every morning", user_id="alice", infer=False).item
        assert tea is not None
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE memory_access_items")  # a real failure of the log's write
    with Memory(SQLiteStore(path), embedder=EMBEDDER, background=False) as m:
        hits = m.search("green tea", user_id="alice")
        assert [h.item.id for h in hits] == [tea.id]
    assert "retrieval log could not be written" in caplog.text


# ---------------------------------------------------------------- the command line


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT / "src"), "JIYI_EMBEDDER": EMBEDDER, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "jiyi.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_cli_lists_the_log_and_explains_one_memory(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Memory.open(db, embedder=EMBEDDER, background=False) as m:
        tea = m.add("Alice drinks green tea every morning", user_id="alice", infer=False).item
        assert tea is not None
    assert _cli("search", "green tea", "--user", "alice", db=db).returncode == 0
    out = _cli("retrievals", "--json", db=db)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    (access,) = data["accesses"]
    assert (access["kind"], access["query"], access["user_id"]) == ("search", "green tea", "alice")
    assert access["retrieved"][0]["item_id"] == tea.id and data["next_cursor"] is None
    why = _cli("retrievals", "--item", tea.id, db=db)
    assert why.returncode == 0 and "served 1 time(s)" in why.stdout and "'green tea'" in why.stdout
    why_json = json.loads(_cli("retrievals", "--item", tea.id, "--json", db=db).stdout)
    assert why_json["access_count"] == 1 and why_json["served"][0]["rank"] == 1
    text = _cli("retrievals", "--user", "alice", db=db).stdout
    assert "search" in text and f"#1 {tea.id}" in text
    assert _cli("retrievals", "--item", "nope", db=db).returncode == 1
    helped = " ".join(_cli("retrievals", "--help", db=db).stdout.split())
    assert "--item" in helped and "why that memory was retrieved" in helped
    exported = _cli("export", "--retrievals", db=db).stdout.splitlines()
    assert len(exported) == 2 and json.loads(exported[1])["retrieval"]["query"] == "green tea"


# ---------------------------------------------------------------- REST


@dataclass
class Api:
    client: httpx.AsyncClient
    tokens: dict[str, str]
    key_ids: dict[str, str]
    ids: dict[str, str]

    async def get(self, key: str, url: str, **params: Any) -> httpx.Response:
        return await self.client.get(url, params=params, headers={"X-API-Key": self.tokens[key]})

    async def search(self, key: str, query: str, **scope: str) -> None:
        r = await self.client.post(
            "/v1/memories/search", json={"query": query, **scope}, headers={"X-API-Key": self.tokens[key]}
        )
        assert r.status_code == 200, r.text


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    pytest.importorskip("fastapi")
    from jiyi.server.app import create_app
    from jiyi.server.auth import ApiKeys

    memory = AsyncMemory(SQLiteStore(tmp_path / "rest.db"), embedder=EMBEDDER, background=False)
    keys = ApiKeys()
    tokens, key_ids = {}, {}
    for name, tenant, role, projects in (
        ("owner", "acme", "owner", None),
        ("vw_apollo", "acme", "viewer", ["apollo"]),
        ("vw_zeus", "acme", "viewer", ["zeus"]),
        ("foreign", "globex", "owner", None),
    ):
        record, token = keys.add(tenant, role, projects=projects)
        tokens[name], key_ids[name] = token, record.id
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        ids = {}
        for name, key, body in (
            ("apollo", "owner", {"project_id": "apollo", "visibility": "members"}),
            ("zeus", "owner", {"project_id": "zeus", "visibility": "members"}),
            ("user", "owner", {"user_id": "alice"}),
            ("foreign", "foreign", {"project_id": "apollo"}),
        ):
            text = f"The {name} launch window opens on Tuesday morning"
            r = await client.post(
                "/v1/memories", json={"content": text, **body}, headers={"X-API-Key": tokens[key]}
            )
            assert r.status_code == 201, r.text
            ids[name] = r.json()["item"]["id"]
        a = Api(client, tokens, key_ids, ids)
        await a.search("owner", "launch window", project_id="apollo")
        await a.search("owner", "launch window", project_id="zeus")
        await a.search("owner", "launch window", user_id="alice")
        await a.search("foreign", "launch window", project_id="apollo")
        yield a
    await memory.aclose()


def _seen(r: httpx.Response) -> set[tuple[str | None, str | None]]:
    assert r.status_code == 200, r.text
    return {(a["project_id"], a["user_id"]) for a in r.json()["accesses"]}


async def test_rest_lists_the_log_as_each_key_may_see_it(api: Api) -> None:
    everything = await api.get("owner", "/v1/retrievals")
    assert _seen(everything) == {("apollo", None), ("zeus", None), (None, "alice")}
    assert {a["actor"] for a in everything.json()["accesses"]} == {api.key_ids["owner"]}
    # a viewer of zeus does not see what was asked in apollo, nor apollo's memories
    assert _seen(await api.get("vw_zeus", "/v1/retrievals")) == {("zeus", None), (None, "alice")}
    assert _seen(await api.get("vw_apollo", "/v1/retrievals")) == {("apollo", None), (None, "alice")}
    # another tenant's key sees its own log only, and nothing of acme's
    foreign = await api.get("foreign", "/v1/retrievals")
    assert _seen(foreign) == {("apollo", None)}
    served = {r["item_id"] for a in foreign.json()["accesses"] for r in a["retrieved"]}
    assert served == {api.ids["foreign"]}
    assert (await api.get("foreign", "/v1/retrievals", tenant_id="acme")).status_code == 404
    # filters and pages
    page = await api.get("owner", "/v1/retrievals", limit=2)
    assert len(page.json()["accesses"]) == 2 and page.json()["next_cursor"]
    rest = await api.get("owner", "/v1/retrievals", limit=2, cursor=page.json()["next_cursor"])
    assert len(rest.json()["accesses"]) == 1 and rest.json()["next_cursor"] is None
    assert _seen(await api.get("owner", "/v1/retrievals", user_id="alice")) == {(None, "alice")}
    by_item = await api.get("owner", "/v1/retrievals", item_id=api.ids["zeus"])
    assert _seen(by_item) == {("zeus", None)}


async def test_rest_why_retrieved_is_404_for_what_a_key_may_not_see(api: Api) -> None:
    r = await api.get("owner", f"/v1/memories/{api.ids['zeus']}/retrievals")
    assert r.status_code == 200, r.text
    why = r.json()
    assert why["access_count"] == 1 and why["served"][0]["rank"] == 1
    assert why["served"][0]["query"] == "launch window" and why["served"][0]["project_id"] == "zeus"
    assert (await api.get("vw_zeus", f"/v1/memories/{api.ids['zeus']}/retrievals")).status_code == 200
    for key, name in (("vw_apollo", "zeus"), ("foreign", "zeus"), ("foreign", "user"), ("owner", "foreign")):
        r = await api.get(key, f"/v1/memories/{api.ids[name]}/retrievals")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (key, name)
        r = await api.get(key, "/v1/retrievals", item_id=api.ids[name])
        assert r.status_code == 404, (key, name)
    exported = await api.client.get(
        "/v1/export", params={"retrievals": "true"}, headers={"X-API-Key": api.tokens["vw_zeus"]}
    )
    lines = [json.loads(line) for line in exported.text.splitlines()]
    logged = [line["retrieval"] for line in lines if "retrieval" in line]
    assert {(a["project_id"], a["user_id"]) for a in logged} == {("zeus", None), (None, "alice")}
