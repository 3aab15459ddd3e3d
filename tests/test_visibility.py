"""Per-item visibility (public / members / owner_only) attacked on purpose, through every
REST endpoint and through the library's ``viewer`` argument.

One tenant (``acme``) holds project memories of every visibility in two projects
(``apollo``, ``zeus``) and a user memory; keys of every role, members and non-members,
and a key of another tenant (``globex``) try to read, count, find, change and delete
them. The expected outcome of every key for every item is written out by hand in
:data:`SEES`, not derived from the code under test. Nothing is mocked: every request goes
through FastAPI and the library into a real SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.cli import main as cli_main
from jiyi.errors import InvalidInput, NotFound
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, Relation, RelationType, Status, Visibility
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys, KeyRecord, Principal, Role
from jiyi.store.base import Filter, Viewer, creator_of, same_audience
from jiyi.store.sqlite import SQLiteStore
from tests.pg import pg_dsn  # noqa: F401

EMBEDDER = "hash:256"
ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- the world

KEYS: dict[str, tuple[str, str, list[str] | None]] = {
    # name: (tenant, role, projects)
    "owner": ("acme", "owner", None),
    "admin": ("acme", "admin", None),
    "ed_apollo": ("acme", "editor", ["apollo"]),
    "ed_zeus": ("acme", "editor", ["zeus"]),
    "ed_any": ("acme", "editor", None),
    "vw_apollo": ("acme", "viewer", ["apollo"]),
    "vw_zeus": ("acme", "viewer", ["zeus"]),
    "vw_none": ("acme", "viewer", []),
    "foreign": ("globex", "owner", None),
}

# name, key that adds it, project (None: a memory of user alice), visibility, content
TABLE = [
    ("pub", "ed_apollo", "apollo", "public", "The apollo rocket launch is planned for Tuesday morning"),
    ("mem", "ed_apollo", "apollo", "members", "Apollo budget for the next quarter is two million dollars"),
    ("own_ed", "ed_apollo", "apollo", "owner_only", "My private apollo reminder: ask Lisa about telemetry"),
    ("own_admin", "admin", "apollo", "owner_only", "Admin note on apollo: the vendor contract is in review"),
    ("adm_pub", "admin", "apollo", "public", "Apollo team standup moves to ten o'clock on Mondays"),
    ("z_pub", "ed_zeus", "zeus", "public", "Zeus database migration finished without downtime last night"),
    ("z_mem", "ed_zeus", "zeus", "members", "Zeus staging servers will be retired in December"),
    ("z_own", "ed_zeus", "zeus", "owner_only", "Personal zeus todo: rotate the staging credentials soon"),
    # user scope: visibility does not apply, every key of the tenant sees it
    ("user", "ed_apollo", None, "owner_only", "Alice prefers dark mode in every editor she uses"),
    # another tenant, same project name
    ("foreign", "foreign", "apollo", "members", "Apollo is the globex code name for the new billing system"),
]
ITEMS: dict[str, tuple[str, dict[str, Any]]] = {
    name: (key, {"content": text, "visibility": vis, **({"project_id": p} if p else {"user_id": "alice"})})
    for name, key, p, vis, text in TABLE
}

ACME = frozenset(n for n in ITEMS if n != "foreign")
PROJECT_OF = {n: body.get("project_id") for n, (_, body) in ITEMS.items()}

# Who sees what, written out by hand (the rule: public -> every key of the tenant,
# members -> member keys, owner_only -> its creator; owner/admin -> everything).
SEES: dict[str, frozenset[str]] = {
    "owner": ACME,
    "admin": ACME,
    "ed_apollo": frozenset({"pub", "mem", "own_ed", "adm_pub", "z_pub", "user"}),
    "ed_zeus": frozenset({"pub", "adm_pub", "z_pub", "z_mem", "z_own", "user"}),
    "ed_any": frozenset({"pub", "mem", "adm_pub", "z_pub", "z_mem", "user"}),
    "vw_apollo": frozenset({"pub", "mem", "adm_pub", "z_pub", "user"}),
    "vw_zeus": frozenset({"pub", "adm_pub", "z_pub", "z_mem", "user"}),
    "vw_none": frozenset({"pub", "adm_pub", "z_pub", "user"}),
    "foreign": frozenset({"foreign"}),
}
READERS = tuple(KEYS)
ACME_KEYS = tuple(k for k in KEYS if k != "foreign")


@dataclass
class World:
    memory: AsyncMemory
    client: httpx.AsyncClient
    tokens: dict[str, str]
    key_ids: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)

    async def call(self, key: str, method: str, url: str, **kw: Any) -> httpx.Response:
        return await self.client.request(method, url, headers={"X-API-Key": self.tokens[key]}, **kw)

    def names(self, ids: Any) -> set[str]:
        by_id = {v: k for k, v in self.ids.items()}
        return {by_id.get(i, i) for i in ids}

    async def add(self, key: str, **body: Any) -> httpx.Response:
        return await self.call(key, "POST", "/v1/memories", json=body)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "vis.db"), embedder=EMBEDDER)
    keys = ApiKeys()
    tokens: dict[str, str] = {}
    key_ids: dict[str, str] = {}
    for name, (tenant, role, projects) in KEYS.items():
        record, token = keys.add(tenant, role, projects=projects)
        tokens[name], key_ids[name] = token, record.id
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        w = World(memory, client, tokens, key_ids)
        for name, (key, body) in ITEMS.items():
            r = await w.add(key, **body)
            assert r.status_code == 201, r.text
            assert r.json()["decision"]["action"] == "add", (name, r.text)
            w.ids[name] = r.json()["item"]["id"]
        yield w
    await memory.aclose()


def _not_found(r: httpx.Response, item_id: str) -> str:
    """Assert a 404 ``not_found`` and return its message with the id blanked out, so that
    an invisible item's answer can be compared with a nonexistent one's."""
    assert r.status_code == 404, r.text
    err = r.json()["error"]
    assert err["code"] == "not_found"
    return str(err["message"]).replace(item_id, "<id>")


async def _all_pages(w: World, key: str, limit: int, **params: Any) -> list[str]:
    out: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        r = await w.call(key, "GET", "/v1/memories", params=query)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["items"]) <= limit
        out.extend(i["id"] for i in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return out
        assert len(page["items"]) == limit  # a cursor only after a full page
    raise AssertionError("the listing never ended")


# ---------------------------------------------------------------- reads by id


async def test_get_and_history_are_404_for_every_item_a_key_may_not_see(world: World) -> None:
    w = world
    missing = uuid.uuid4().hex
    for key in READERS:
        absent = _not_found(await w.call(key, "GET", f"/v1/memories/{missing}"), missing)
        absent_history = _not_found(await w.call(key, "GET", f"/v1/memories/{missing}/history"), missing)
        for name, item_id in w.ids.items():
            get = await w.call(key, "GET", f"/v1/memories/{item_id}")
            history = await w.call(key, "GET", f"/v1/memories/{item_id}/history")
            if name in SEES[key]:
                assert get.status_code == 200, (key, name, get.text)
                assert get.json()["id"] == item_id
                assert history.status_code == 200 and history.json()[0]["action"] == "add"
            else:
                # exactly what an id that never existed answers: nothing is revealed
                assert _not_found(get, item_id) == absent, (key, name)
                assert _not_found(history, item_id) == absent_history, (key, name)
                assert "owner_only" not in get.text and "members" not in get.text


async def test_owner_only_is_seen_by_its_creator_even_outside_its_projects(world: World) -> None:
    w = world
    # ed_zeus is not a member of apollo, yet the owner_only item it is given stays its own
    record = {
        "id": "imported-1",
        "content": "Imported apollo note that belongs to the zeus editor",
        "project_id": "apollo",
        "visibility": "owner_only",
        "metadata": {"created_by": w.key_ids["ed_zeus"]},
    }
    r = await w.call("admin", "POST", "/v1/import", content=json.dumps(record).encode())
    assert r.status_code == 200, r.text
    assert (await w.call("ed_zeus", "GET", "/v1/memories/imported-1")).status_code == 200
    for key in ("ed_apollo", "ed_any", "vw_apollo", "vw_zeus", "vw_none", "foreign"):
        _not_found(await w.call(key, "GET", "/v1/memories/imported-1"), "imported-1")
    for key in ("owner", "admin"):
        assert (await w.call(key, "GET", "/v1/memories/imported-1")).status_code == 200


# ---------------------------------------------------------------- lists, counts, export


async def test_list_pages_stats_and_export_hold_exactly_what_a_key_may_see(world: World) -> None:
    w = world
    for key in READERS:
        want = SEES[key]
        listed = await _all_pages(w, key, 50)
        assert w.names(listed) == want, key
        for size in (1, 2):
            paged = await _all_pages(w, key, size)
            assert paged == listed, (key, size)  # each visible item once, in the same order
        newest = await _all_pages(w, key, 3, newest_first="true")
        assert newest == listed[::-1], key
        for project in ("apollo", "zeus"):
            scoped = await _all_pages(w, key, 2, project_id=project)
            assert w.names(scoped) == {n for n in want if PROJECT_OF[n] == project}, (key, project)

        stats = (await w.call(key, "GET", "/v1/stats")).json()
        assert stats["total"] == len(want), key
        assert stats["by_scope"].get("project", 0) == len(want - {"user"}), key
        assert sum(stats["by_status"].values()) == len(want)
        apollo = (await w.call(key, "GET", "/v1/stats", params={"project_id": "apollo"})).json()
        assert apollo["total"] == len({n for n in want if PROJECT_OF[n] == "apollo"}), key

        r = await w.call(key, "GET", "/v1/export")
        assert r.status_code == 200
        rows = [json.loads(line) for line in r.text.splitlines()]
        assert w.names(row["id"] for row in rows) == want, key
        zeus = await w.call(key, "GET", "/v1/export", params={"project_id": "zeus"})
        assert w.names(json.loads(x)["id"] for x in zeus.text.splitlines()) == {
            n for n in want if PROJECT_OF[n] == "zeus"
        }


async def test_archived_and_expired_items_obey_visibility_too(world: World) -> None:
    w = world
    assert (await w.call("ed_apollo", "DELETE", f"/v1/memories/{w.ids['own_ed']}")).status_code == 200
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    r = await w.call("admin", "PATCH", f"/v1/memories/{w.ids['mem']}", json={"expires_at": past})
    assert r.status_code == 200
    for key in ACME_KEYS:
        archived = await _all_pages(w, key, 10, status="archived")
        assert w.names(archived) == ({"own_ed"} & SEES[key]), key
        listed = await _all_pages(w, key, 10, include_expired="true")
        assert w.names(listed) == SEES[key]
        live = await _all_pages(w, key, 10, include_expired="false")
        assert w.names(live) == SEES[key] - {"mem"}


# ---------------------------------------------------------------- search and context


async def test_search_and_context_find_only_what_a_key_may_see(world: World) -> None:
    w = world
    for key in READERS:
        for project, word in (("apollo", "apollo"), ("zeus", "zeus")):
            want = {n for n in SEES[key] if PROJECT_OF[n] == project}
            r = await w.call(
                key,
                "POST",
                "/v1/memories/search",
                json={"query": word, "project_id": project, "threshold": 0.0, "limit": 100},
            )
            assert r.status_code == 200, r.text
            assert w.names(h["item"]["id"] for h in r.json()["hits"]) == want, (key, project)
            statuses = {"statuses": ["active", "archived", "superseded"]}
            r = await w.call(
                key,
                "POST",
                "/v1/memories/search",
                json={"query": word, "project_id": project, "threshold": 0.0, "limit": 3, **statuses},
            )
            assert w.names(h["item"]["id"] for h in r.json()["hits"]) <= want
            ctx = await w.call(
                key,
                "POST",
                "/v1/context",
                json={
                    "query": word,
                    "project_id": project,
                    "semantic": 50,
                    "max_items": 100,
                    "budget_tokens": 100_000,
                    "summaries": 0,
                },
            )
            assert ctx.status_code == 200, ctx.text
            body = ctx.json()
            assert w.names(e["item_id"] for e in body["entries"]) == want, (key, project)
            for name, (_, item) in ITEMS.items():
                if name not in want:
                    assert item["content"] not in body["text"], (key, name)


# ---------------------------------------------------------------- changes


async def test_update_and_delete_obey_role_ownership_and_visibility(world: World) -> None:
    w = world
    missing = uuid.uuid4().hex
    editors = ("ed_apollo", "ed_zeus", "ed_any")
    created = {key: {n for n, (k, _) in ITEMS.items() if k == key} for key in editors}
    for key in editors:
        absent = _not_found(
            await w.call(key, "PATCH", f"/v1/memories/{missing}", json={"importance": 0.3}), missing
        )
        for name, item_id in w.ids.items():
            if name in created[key]:
                continue  # its own items are changed below, once every refusal is checked
            tries = [
                await w.call(key, "PATCH", f"/v1/memories/{item_id}", json={"importance": 0.3}),
                await w.call(key, "PATCH", f"/v1/memories/{item_id}", json={"visibility": "public"}),
                await w.call(key, "DELETE", f"/v1/memories/{item_id}"),
                await w.call(key, "DELETE", f"/v1/memories/{item_id}?hard=true"),
            ]
            for r in tries:
                if name in SEES[key]:  # seen, but somebody else's: forbidden
                    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (key, name)
                else:  # unseen: exactly like an id that never existed
                    assert _not_found(r, item_id) == absent, (key, name)
    # nothing was changed by the refusals
    for name, item_id in w.ids.items():
        key = "foreign" if name == "foreign" else "owner"
        item = (await w.call(key, "GET", f"/v1/memories/{item_id}")).json()
        assert (item["version"], item["importance"], item["status"]) == (1, 0.5, "active"), name

    # an editor changes and deletes what it created, whatever its visibility
    for key in editors:
        for name in created[key]:
            item_id = w.ids[name]
            r = await w.call(key, "PATCH", f"/v1/memories/{item_id}", json={"importance": 0.3})
            assert r.status_code == 200 and r.json()["importance"] == 0.3, (key, name)
            r = await w.call(key, "DELETE", f"/v1/memories/{item_id}?hard=true")
            assert r.status_code == 200, (key, name)
    left = ACME - created["ed_apollo"] - created["ed_zeus"]
    assert w.names(await _all_pages(w, "owner", 50)) == left == {"own_admin", "adm_pub"}

    # viewer keys are refused by role before any lookup: an invisible item and a
    # nonexistent one answer the same 403, so the refusal reveals nothing either
    for key in ("vw_apollo", "vw_zeus", "vw_none"):
        for item_id in (w.ids["own_admin"], w.ids["adm_pub"], missing):
            for method, kw in (("PATCH", {"json": {"importance": 0.1}}), ("DELETE", {})):
                r = await w.call(key, method, f"/v1/memories/{item_id}", **kw)
                assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"

    # the other tenant: 404 for every acme id, even for its owner key, and the other way round
    for item_id in (w.ids["own_admin"], w.ids["adm_pub"]):
        r = await w.call("foreign", "PATCH", f"/v1/memories/{item_id}", json={"importance": 0.1})
        _not_found(r, item_id)
        _not_found(await w.call("foreign", "DELETE", f"/v1/memories/{item_id}"), item_id)
    for method in ("GET", "DELETE"):
        _not_found(await w.call("owner", method, f"/v1/memories/{w.ids['foreign']}"), w.ids["foreign"])


async def test_owner_and_admin_change_anything_of_their_tenant(world: World) -> None:
    w = world
    r = await w.call("admin", "PATCH", f"/v1/memories/{w.ids['own_ed']}", json={"importance": 0.8})
    assert r.status_code == 200 and r.json()["metadata"]["created_by"] == w.key_ids["ed_apollo"]
    r = await w.call("owner", "DELETE", f"/v1/memories/{w.ids['z_own']}")
    assert r.status_code == 200 and r.json()["status"] == "archived"
    r = await w.call("owner", "DELETE", f"/v1/memories/{w.ids['own_admin']}?hard=true")
    assert r.status_code == 200
    # the admin's purged owner_only item: its history is still the admin's to read, nobody else's
    history = f"/v1/memories/{w.ids['own_admin']}/history"
    assert [e["action"] for e in (await w.call("admin", "GET", history)).json()] == ["add", "purge"]
    for key in ("ed_apollo", "ed_any", "vw_apollo", "vw_none"):
        _not_found(await w.call(key, "GET", history), w.ids["own_admin"])


async def test_a_visibility_change_takes_effect_at_once_everywhere(world: World) -> None:
    w = world
    item = w.ids["mem"]  # apollo, members, created by ed_apollo

    async def view(key: str) -> tuple[int, bool, bool, int, bool]:
        got = (await w.call(key, "GET", f"/v1/memories/{item}")).status_code
        listed = item in await _all_pages(w, key, 2, project_id="apollo")
        search = await w.call(
            key,
            "POST",
            "/v1/memories/search",
            json={"query": "apollo budget", "project_id": "apollo", "threshold": 0.0, "limit": 50},
        )
        found = item in {h["item"]["id"] for h in search.json()["hits"]}
        total = (await w.call(key, "GET", "/v1/stats")).json()["total"]
        exported = item in (await w.call(key, "GET", "/v1/export")).text
        return got, listed, found, total, exported

    before = {k: await view(k) for k in ("vw_apollo", "vw_zeus", "ed_any", "ed_apollo")}
    assert before["vw_apollo"][:3] == (200, True, True) and before["vw_zeus"][:3] == (404, False, False)

    r = await w.call("ed_apollo", "PATCH", f"/v1/memories/{item}", json={"visibility": "owner_only"})
    assert r.status_code == 200 and r.json()["visibility"] == "owner_only"
    for key in ("vw_apollo", "ed_any"):
        got, listed, found, total, exported = await view(key)
        assert (got, listed, found, exported) == (404, False, False, False), key
        assert total == before[key][3] - 1
    assert (await view("ed_apollo"))[:3] == (200, True, True)

    r = await w.call("ed_apollo", "PATCH", f"/v1/memories/{item}", json={"visibility": "public"})
    assert r.status_code == 200
    got, listed, found, total, exported = await view("vw_zeus")
    assert (got, listed, found, exported) == (200, True, True, True)
    assert total == before["vw_zeus"][3] + 1
    # ... and its history now shows the whole story to everybody, including the private spell
    events = (await w.call("vw_zeus", "GET", f"/v1/memories/{item}/history")).json()
    assert [e["after"]["visibility"] for e in events] == ["members", "owner_only", "public"]


# ---------------------------------------------------------------- writes into projects


async def test_only_members_create_project_memories(world: World) -> None:
    w = world
    for vis in ("public", "members", "owner_only"):
        body = {"content": f"ed_zeus tries to write into apollo ({vis})", "project_id": "apollo"}
        r = await w.add("ed_zeus", **body, visibility=vis)
        assert r.status_code == 403, r.text
        assert r.json()["error"] == {
            "code": "forbidden",
            "message": "this key is not a member of project 'apollo'",
            "field": "project_id",
            "problems": ["this key is not a member of project 'apollo'"],
        }
        r = await w.add("ed_zeus", **body, visibility=vis, scope="project")
        assert r.status_code == 403
        for key, content in (
            ("ed_any", body["content"]),
            ("admin", f"The admin files a {vis} apollo memory, which no list forbids"),
        ):
            r = await w.add(key, content=content, project_id="apollo", visibility=vis)
            assert r.status_code == 201 and r.json()["decision"]["action"] == "add", r.text
    # a user memory that merely names the project is not a project memory
    r = await w.add(
        "ed_zeus", content="Alice reviews the apollo design doc", user_id="alice", project_id="apollo"
    )
    assert r.status_code == 201 and r.json()["item"]["scope"] == "user"
    # remember: messages whose extraction would land in apollo
    messages = {"messages": [{"role": "user", "content": "Remember that apollo ships in May"}]}
    r = await w.call("ed_zeus", "POST", "/v1/sessions/s1/messages", json={**messages, "project_id": "apollo"})
    assert r.status_code == 403 and r.json()["error"]["field"] == "project_id"
    r = await w.call(
        "ed_zeus",
        "POST",
        "/v1/sessions/s1/messages",
        json={**messages, "project_id": "apollo", "user_id": "u"},
    )
    assert r.status_code == 201
    r = await w.call(
        "ed_apollo", "POST", "/v1/sessions/s2/messages", json={**messages, "project_id": "apollo"}
    )
    assert r.status_code == 201
    # nothing was written by the refused calls
    assert (await w.call("owner", "GET", "/v1/stats", params={"project_id": "apollo"})).json()[
        "total"
    ] == 5 + 6


async def test_add_never_reinforces_nor_reveals_an_item_of_another_audience(world: World) -> None:
    w = world
    secret = ITEMS["own_ed"][1]["content"]
    # ed_any cannot see ed_apollo's private note: adding the same words makes a new item
    r = await w.add("ed_any", content=secret, project_id="apollo", visibility="owner_only")
    assert r.status_code == 201 and r.json()["decision"]["action"] == "add"
    assert r.json()["decision"]["duplicate_of"] is None
    mine = r.json()["item"]
    assert mine["id"] != w.ids["own_ed"] and mine["metadata"]["created_by"] == w.key_ids["ed_any"]
    # the same as a members item: still new (the private one is not its audience)
    r = await w.add("ed_apollo", content=secret, project_id="apollo", visibility="members")
    assert r.json()["decision"]["action"] == "add"
    # even the creator's own public copy does not fold into its private note
    r = await w.add("ed_apollo", content=secret, project_id="apollo", visibility="public")
    assert r.json()["decision"]["action"] == "add"
    public = r.json()["item"]["id"]
    # within one audience duplicates still reinforce
    r = await w.add("ed_apollo", content=secret, project_id="apollo", visibility="owner_only")
    assert r.json()["decision"]["action"] == "reinforce" and r.json()["item"]["id"] == w.ids["own_ed"]
    r = await w.add("vw_apollo", content=secret, project_id="apollo", visibility="public")
    assert r.status_code == 403  # viewers never write
    r = await w.add("ed_zeus", content=secret, project_id="zeus", visibility="public")
    assert r.json()["decision"]["action"] == "add"  # another project: another scope
    r = await w.add("ed_any", content=secret, project_id="apollo", visibility="public")
    assert r.json()["decision"]["action"] == "reinforce" and r.json()["item"]["id"] == public
    own = (await w.call("owner", "GET", f"/v1/memories/{w.ids['own_ed']}")).json()
    assert own["mention_count"] == 2  # only its creator's own repetition


# ---------------------------------------------------------------- import, other endpoints


async def test_import_is_for_owner_and_admin_and_keeps_visibility(world: World) -> None:
    w = world
    records = [
        {
            "id": f"imp-{v}",
            "content": f"Imported apollo memory, {v}",
            "project_id": "apollo",
            "visibility": v,
            "metadata": {"created_by": w.key_ids["ed_apollo"]},
        }
        for v in ("public", "members", "owner_only")
    ]
    body = "\n".join(json.dumps(r) for r in records).encode()
    for key in ("ed_apollo", "ed_any", "vw_apollo"):
        r = await w.call(key, "POST", "/v1/import", content=body)
        assert r.status_code == 403
    r = await w.call("owner", "POST", "/v1/import", content=body)
    assert r.status_code == 200 and r.json()["imported"] == 3
    seen = {
        "ed_apollo": {"imp-public", "imp-members", "imp-owner_only"},
        "ed_zeus": {"imp-public"},
        "vw_apollo": {"imp-public", "imp-members"},
        "admin": {"imp-public", "imp-members", "imp-owner_only"},
        "foreign": set(),
    }
    for key, want in seen.items():
        listed = {i for i in await _all_pages(w, key, 50) if i.startswith("imp-")}
        assert listed == want, key


async def test_profiles_learnings_and_suggestions_reveal_nothing_hidden(world: World) -> None:
    w = world
    failure = {
        "kind": "failure",
        "project_id": "apollo",
        "visibility": "owner_only",
        "pattern": "apollo deploys break on fridays",
        "indicators": ["deploy", "friday"],
        "mitigation": "freeze deploys after thursday noon",
        "severity": 4,
    }
    r = await w.call("ed_zeus", "POST", "/v1/learnings", json=failure)
    assert r.status_code == 403 and r.json()["error"]["field"] == "project_id"
    r = await w.call("vw_apollo", "POST", "/v1/learnings", json=failure)
    assert r.status_code == 403
    r = await w.call("ed_apollo", "POST", "/v1/learnings", json=failure)
    assert r.status_code == 201, r.text
    risk = r.json()["id"]
    stack = await w.add(
        "ed_apollo",
        content="Apollo uses PostgreSQL and Redis as its tech stack",
        project_id="apollo",
        visibility="owner_only",
        memory_type="decision",
    )
    assert stack.status_code == 201
    hidden_ids = {risk, stack.json()["item"]["id"]}
    hidden_words = ("freeze deploys", "PostgreSQL")
    task = {"task": "deploy apollo on friday", "project_id": "apollo", "min_similarity": 0.0}
    for key in READERS:
        suggestion = await w.call(key, "POST", "/v1/suggest", json=task)
        profile = await w.call(key, "GET", "/v1/profile", params={"project_id": "apollo"})
        assert suggestion.status_code == 200 and profile.status_code == 200, key
        text = suggestion.text + profile.text
        unseen = {w.ids[n] for n in ITEMS if n not in SEES[key]}
        assert not any(i in text for i in unseen), key
        if key in ("owner", "admin", "ed_apollo"):
            assert all(word in text for word in hidden_words), key
        else:
            assert not any(i in text for i in hidden_ids), key
            assert not any(word in text for word in hidden_words), key


async def test_other_tenant_sees_nothing_and_no_key_sees_it(world: World) -> None:
    w = world
    assert w.names(await _all_pages(w, "foreign", 10)) == {"foreign"}
    assert (await w.call("foreign", "GET", "/v1/stats")).json()["total"] == 1
    for key in ACME_KEYS:
        _not_found(await w.call(key, "GET", f"/v1/memories/{w.ids['foreign']}"), w.ids["foreign"])
        r = await w.call(key, "GET", "/v1/stats", params={"tenant_id": "globex"})
        assert r.status_code == 404
    r = await w.call(
        "foreign", "POST", "/v1/memories/search", json={"query": "apollo", "project_id": "apollo"}
    )
    assert w.names(h["item"]["id"] for h in r.json()["hits"]) == {"foreign"}


async def test_single_tenant_mode_sees_everything(tmp_path: Path) -> None:
    memory = AsyncMemory(SQLiteStore(tmp_path / "local.db"), embedder=EMBEDDER)
    await memory.add(
        "A private apollo note kept locally",
        project_id="apollo",
        visibility="owner_only",
        metadata={"created_by": "someone"},
    )
    app = create_app(memory, keys=None, rate_limit_per_minute=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        r = await client.get("/v1/stats")
        assert r.status_code == 200 and r.json()["total"] == 1
    await memory.aclose()


# ---------------------------------------------------------------- keys with projects


def test_key_projects_are_validated_stored_and_optional(tmp_path: Path) -> None:
    keys = ApiKeys()
    for role in ("owner", "admin"):
        with pytest.raises(InvalidInput, match="only to editor and viewer keys"):
            keys.add("acme", role, projects=["apollo"])
    for bad in (["apollo", " "], "apollo", [""], ["x" * 201]):
        with pytest.raises(InvalidInput):
            keys.add("acme", "editor", projects=bad)
    record, token = keys.add("acme", "viewer", projects=["apollo", "阿波罗", "apollo"])
    assert record.projects == ("apollo", "阿波罗")
    principal = keys.verify(token)
    assert principal is not None and principal.projects == ("apollo", "阿波罗")
    assert principal.viewer == Viewer(actor=record.id, projects=("apollo", "阿波罗"), sees_all=False)
    assert principal.member_of("阿波罗") and not principal.member_of("zeus")
    admin = Principal("k", "acme", Role.ADMIN)
    assert admin.viewer.sees_all and admin.member_of("anything")

    path = tmp_path / "keys.json"
    keys.save(path)
    data = json.loads(path.read_text())
    assert data["keys"][0]["projects"] == ["apollo", "阿波罗"]
    again = ApiKeys.load(path)
    assert again.verify(token) == principal
    # a key file written before project lists existed still loads: member of everything
    plain, plain_token = keys.add("acme", "editor")
    assert "projects" not in plain.to_json()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"keys": [plain.to_json()]}))
    loaded = ApiKeys.load(old).verify(plain_token)
    assert loaded is not None and loaded.projects is None and loaded.member_of("any")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"keys": [{**plain.to_json(), "projects": "apollo"}]}))
    with pytest.raises(InvalidInput, match="bad key record"):
        ApiKeys.load(broken)
    assert KeyRecord.from_json({**plain.to_json(), "projects": []}).projects == ()


def test_cli_keys_create_with_projects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    assert (
        cli_main(
            [
                "keys",
                "create",
                "--keys",
                str(path),
                "--tenant",
                "acme",
                "--role",
                "viewer",
                "--projects",
                "apollo, zeus",
            ]
        )
        == 0
    )
    token = capsys.readouterr().out.strip()
    principal = ApiKeys.load(path).verify(token)
    assert principal is not None and principal.projects == ("apollo", "zeus")
    assert cli_main(["keys", "create", "--keys", str(path), "--tenant", "acme", "--projects", ""]) == 0
    none = ApiKeys.load(path).verify(capsys.readouterr().out.strip())
    assert none is not None and none.role is Role.EDITOR and none.projects == ()
    assert cli_main(["keys", "create", "--keys", str(path), "--tenant", "acme"]) == 0
    every = ApiKeys.load(path).verify(capsys.readouterr().out.strip())
    assert every is not None and every.projects is None
    assert (
        cli_main(
            [
                "keys",
                "create",
                "--keys",
                str(path),
                "--tenant",
                "acme",
                "--role",
                "admin",
                "--projects",
                "apollo",
            ]
        )
        == 1
    )
    assert "only to editor and viewer keys" in capsys.readouterr().err
    assert cli_main(["keys", "create", "--keys", str(path), "--tenant", "acme", "--projects", "a,,b"]) == 1
    assert "must be a non-empty string" in capsys.readouterr().err
    assert len(ApiKeys.load(path)) == 3


# ---------------------------------------------------------------- the library's viewer


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    memory = Memory(SQLiteStore(tmp_path / "lib.db"), embedder=EMBEDDER, background=False)
    yield memory
    memory.close()


def _library_world(mem: Memory) -> dict[str, MemoryItem]:
    out: dict[str, MemoryItem] = {}
    for name, (key, body) in ITEMS.items():
        if name == "foreign":
            continue
        result = mem.add(**body, metadata={"created_by": key})
        assert result.item is not None
        out[name] = result.item
    return out


LIB_VIEWERS: dict[str, Viewer] = {
    "admin": Viewer(actor="admin", sees_all=True),
    "ed_apollo": Viewer(actor="ed_apollo", projects=("apollo",)),
    "ed_zeus": Viewer(actor="ed_zeus", projects=("zeus",)),
    "ed_any": Viewer(actor="ed_any"),
    "vw_none": Viewer(actor="vw_none", projects=()),
}


def test_library_viewer_restricts_every_read_flow(mem: Memory) -> None:
    items = _library_world(mem)
    names = {i.id: n for n, i in items.items()}
    for key, viewer in LIB_VIEWERS.items():
        want = SEES[key]
        assert {names[i.id] for i in mem.list(viewer=viewer, limit=100).items} == want, key
        assert mem.stats(viewer=viewer).total == len(want)
        assert {names[r["id"]] for r in mem.export(viewer=viewer)} == want
        for project in ("apollo", "zeus"):
            hits = mem.search(project, project_id=project, threshold=0.0, limit=50, viewer=viewer)
            assert {names[h.item.id] for h in hits} == {n for n in want if PROJECT_OF[n] == project}
            ctx = mem.context(
                project,
                project_id=project,
                semantic=50,
                max_items=100,
                budget_tokens=10**5,
                summaries=0,
                viewer=viewer,
            )
            assert {names[e.item.id] for e in ctx.entries if e.item} == {
                n for n in want if PROJECT_OF[n] == project
            }
        for name, item in items.items():
            if name in want:
                assert mem.get(item.id, viewer=viewer).id == item.id
                assert mem.history(item.id, viewer=viewer)[0].item_id == item.id
            else:
                for read in (mem.get, mem.history):
                    with pytest.raises(NotFound, match=re.escape(f"no memory with id {item.id!r}")):
                        read(item.id, viewer=viewer)
                with pytest.raises(NotFound):
                    mem.update(item.id, importance=0.1, viewer=viewer)
                with pytest.raises(NotFound):
                    mem.delete(item.id, hard=True, viewer=viewer)
    # no viewer: the library user owns the store and sees everything
    assert {names[i.id] for i in mem.list(limit=100).items} == ACME
    assert mem.stats().total == len(ACME)
    # the changes refused above changed nothing
    assert all(mem.get(i.id).version == 1 for i in items.values())


def test_library_update_and_delete_with_a_viewer(mem: Memory) -> None:
    items = _library_world(mem)
    viewer = LIB_VIEWERS["ed_apollo"]
    changed = mem.update(items["own_ed"].id, visibility="members", viewer=viewer)
    assert changed.visibility is Visibility.MEMBERS
    assert mem.get(changed.id, viewer=LIB_VIEWERS["ed_any"]).id == changed.id
    mem.delete(items["mem"].id, hard=True, viewer=viewer)
    with pytest.raises(NotFound):
        mem.get(items["mem"].id, viewer=viewer)


def test_history_of_a_purged_item_follows_its_last_snapshot(mem: Memory) -> None:
    items = _library_world(mem)
    for name in ("own_admin", "pub"):
        mem.delete(items[name].id, hard=True)
    with pytest.raises(NotFound):
        mem.history(items["own_admin"].id, viewer=LIB_VIEWERS["ed_any"])
    assert [e.action.value for e in mem.history(items["own_admin"].id, viewer=LIB_VIEWERS["admin"])] == [
        "add",
        "purge",
    ]
    assert len(mem.history(items["pub"].id, viewer=LIB_VIEWERS["vw_none"])) == 2


def test_add_with_a_viewer_names_the_creator_and_dedupes_within_what_it_sees(mem: Memory) -> None:
    items = _library_world(mem)
    viewer = Viewer(actor="ed_any")
    fresh = mem.add(
        "A brand new apollo thought from the any-project editor",
        project_id="apollo",
        visibility="owner_only",
        viewer=viewer,
    )
    assert fresh.item is not None and creator_of(fresh.item) == "ed_any"
    named = mem.add(
        "Another apollo thought, filed for someone else",
        project_id="apollo",
        metadata={"created_by": "ed_apollo"},
        viewer=viewer,
    )
    assert named.item is not None and creator_of(named.item) == "ed_apollo"
    again = mem.add(
        ITEMS["own_ed"][1]["content"], project_id="apollo", visibility="owner_only", viewer=viewer
    )
    assert again.decision.action == "add" and again.item is not None and again.item.id != items["own_ed"].id


def test_search_never_follows_a_replacement_the_viewer_may_not_see(mem: Memory) -> None:
    old = mem.add("Apollo telemetry runs on port 8080", project_id="apollo").item
    new = mem.add(
        "Apollo telemetry now runs on the internal port",
        project_id="apollo",
        visibility="owner_only",
        metadata={"created_by": "ed_apollo"},
    ).item
    assert old is not None and new is not None
    mem.update(
        old.id,
        status="superseded",
        relations=[Relation(type=RelationType.SUPERSEDED_BY, target_id=new.id)],
    )
    query = "apollo telemetry port 8080"
    mine = mem.search(query, project_id="apollo", threshold=0.0, viewer=Viewer(actor="ed_apollo"))
    assert new.id in {h.item.id for h in mine}
    theirs = mem.search(query, project_id="apollo", threshold=0.0, viewer=Viewer(actor="ed_any"))
    assert {h.item.id for h in theirs} == set()
    everything = mem.search(
        query,
        project_id="apollo",
        threshold=0.0,
        statuses=["active", "superseded"],
        viewer=Viewer(actor="ed_any"),
    )
    assert {h.item.id for h in everything} == {old.id}


def test_extraction_never_folds_a_conversation_into_a_private_item(mem: Memory) -> None:
    private = mem.add(
        "The apollo release is planned for May",
        project_id="apollo",
        visibility="owner_only",
        metadata={"created_by": "ed_apollo"},
    ).item
    assert private is not None
    mem.remember(
        [("user", "Remember that the apollo release is planned for May")],
        session_id="s1",
        project_id="apollo",
    )
    assert mem.wait_for_jobs(60)
    after = mem.get(private.id)
    assert (after.mention_count, after.version, after.content) == (1, 1, private.content)
    extracted = [i for i in mem.list(project_id="apollo").items if i.id != private.id]
    assert extracted and all(i.visibility is Visibility.MEMBERS for i in extracted)
    assert mem.stats(project_id="apollo", viewer=Viewer(actor="other")).total == len(extracted)


async def test_async_memory_takes_a_viewer_too(tmp_path: Path) -> None:
    memory = AsyncMemory(SQLiteStore(tmp_path / "a.db"), embedder=EMBEDDER)
    added = await memory.add(
        "Zeus rollout notes for the staging cluster",
        project_id="zeus",
        visibility="owner_only",
        viewer=Viewer(actor="me"),
    )
    assert added.item is not None
    stranger = Viewer(actor="you")
    got, page, stats = await asyncio.gather(
        memory.get(added.item.id, viewer=Viewer(actor="me")),
        memory.list(viewer=stranger),
        memory.stats(viewer=stranger),
    )
    assert got.id == added.item.id and page.items == [] and stats.total == 0
    with pytest.raises(NotFound):
        await memory.get(added.item.id, viewer=stranger)
    await memory.aclose()


# ---------------------------------------------------------------- the value itself


def test_viewer_validates_and_stays_hashable() -> None:
    v = Viewer(actor="k", projects=["b", "a", "b"])  # type: ignore[arg-type]
    assert v.projects == ("b", "a") and hash(v) == hash(Viewer(actor="k", projects=("b", "a")))
    for bad in ({"actor": ""}, {"actor": 5}, {"projects": "apollo"}, {"projects": [""]}, {"sees_all": 1}):
        with pytest.raises(InvalidInput):
            Viewer(**bad)
    project = MemoryItem.build(content="x note", scope="project", project_id="p", visibility="owner_only")
    assert not Viewer().sees(project)  # no actor never matches a missing creator
    assert Viewer(sees_all=True).sees(project)
    user = MemoryItem.build(content="x note", user_id="u", visibility="owner_only")
    assert Viewer(projects=()).sees(user)


def test_same_audience_narrows_project_filters_only() -> None:
    base = Filter(tenant_id="t", viewer=Viewer(actor="k"))
    user = MemoryItem.build(content="x note", user_id="u", visibility="public")
    assert same_audience(base, user) is base
    members = MemoryItem.build(content="x note", scope="project", project_id="p")
    assert same_audience(base, members).visibilities == (Visibility.MEMBERS,)
    assert same_audience(base, members).viewer == base.viewer
    own = MemoryItem.build(
        content="x note",
        scope="project",
        project_id="p",
        visibility="owner_only",
        metadata={"created_by": "c"},
    )
    narrowed = same_audience(base, own)
    assert narrowed.visibilities == (Visibility.OWNER_ONLY,)
    assert narrowed.viewer == Viewer(actor="c", projects=())
    # No creator (library use without actors): private items without one match each other.
    anonymous = same_audience(Filter(tenant_id="t"), own.evolve(metadata={}))
    assert anonymous.viewer is None and anonymous.visibilities == (Visibility.OWNER_ONLY,)
    assert Status.ACTIVE in narrowed.statuses


def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "permissions.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "docs/permissions.md", "exec"), {})


# ---------------------------------------------------------------- upgrading an existing store


def _upgrade_items() -> list[MemoryItem]:
    return [
        MemoryItem.build(
            content="Owner-only apollo note",
            scope="project",
            project_id="apollo",
            visibility="owner_only",
            metadata={"created_by": "k1"},
        ),
        MemoryItem.build(
            content="A NUL \u0000 inside an owner-only note",
            scope="project",
            project_id="apollo",
            visibility="owner_only",
            metadata={"created_by": "k1", "raw": "\u0000"},
        ),
        MemoryItem.build(content="A members note of apollo", scope="project", project_id="apollo"),
    ]


def _check_upgraded(store: Any, items: list[MemoryItem]) -> None:
    from jiyi.store.base import ListItems

    def ids(viewer: Viewer) -> set[str]:
        flt = Filter(tenant_id="default", statuses=(), include_expired=True, viewer=viewer)
        return {i.id for i in store.execute(ListItems(flt, limit=100)).items}

    assert ids(Viewer(actor="k1", projects=())) == {items[0].id, items[1].id}
    assert ids(Viewer(actor="k2")) == {items[2].id}


def _creator_migration(migrations: list[tuple[str, tuple[str, ...]]]) -> int:
    return [name for name, _ in migrations].index("creator column for owner_only visibility") + 1


def test_sqlite_store_upgrade_fills_the_creator_column(tmp_path: Path) -> None:
    import sqlite3

    from jiyi.store.sqlite import MIGRATIONS
    from jiyi.testing.conformance import put

    path = tmp_path / "old.db"
    items = _upgrade_items()
    with SQLiteStore(path) as store:
        put(store, *items)
    version = _creator_migration(MIGRATIONS)
    conn = sqlite3.connect(path)  # back to the schema before the migration, data kept
    conn.execute("ALTER TABLE items DROP COLUMN created_by")
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
    conn.commit()
    conn.close()
    reopened = SQLiteStore(path)
    try:
        assert version in reopened.applied_migrations()
        _check_upgraded(reopened, items)
    finally:
        reopened.close()


def test_postgres_store_upgrade_fills_the_creator_column(pg_dsn: str) -> None:  # noqa: F811
    import psycopg

    from jiyi.store.postgres import MIGRATIONS, PostgresStore
    from jiyi.testing.conformance import put
    from tests.pg import drop_schema, new_schema

    schema = new_schema()
    items = _upgrade_items()
    try:
        with PostgresStore(pg_dsn, schema=schema) as store:
            put(store, *items)
        version = _creator_migration(MIGRATIONS)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{schema}".items DROP COLUMN created_by')
            conn.execute(f'DELETE FROM "{schema}".jiyi_schema_migrations WHERE version = %s', (version,))
        reopened = PostgresStore(pg_dsn, schema=schema)
        try:
            assert version in reopened.applied_migrations()
            _check_upgraded(reopened, items)
        finally:
            reopened.close()
    finally:
        drop_schema(pg_dsn, schema)


def test_a_viewer_of_the_wrong_type_is_refused_plainly(tmp_path: Path) -> None:
    from jiyi.errors import InvalidInput as Invalid

    with Memory.open(tmp_path / "v.db", embedder="hash:64") as m:
        for call in (
            lambda: m.list(viewer="k"),  # type: ignore[arg-type]
            lambda: m.search("x y z", user_id="u", viewer={"actor": "k"}),  # type: ignore[arg-type]
            lambda: m.context("x y z", user_id="u", include_profile="yes"),  # type: ignore[arg-type]
        ):
            with pytest.raises(Invalid) as err:
                call()
            assert err.value.field in ("viewer", "include_profile")


def test_private_project_notes_without_a_creator_still_deduplicate(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "d.db", embedder="hash:64") as m:
        first = m.add("the launch date moves to May", project_id="p", visibility="owner_only")
        again = m.add("the launch date moves to May", project_id="p", visibility="owner_only")
        assert first.item is not None and again.decision.action == "reinforce"
        assert again.item is not None and again.item.id == first.item.id


def test_cli_keys_list_shows_keys_never_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    assert cli_main(["keys", "list", "--keys", str(path)]) == 1
    assert "no key file" in capsys.readouterr().err
    argv = ["keys", "create", "--keys", str(path), "--tenant", "acme", "--role", "viewer"]
    assert cli_main([*argv, "--projects", "apollo", "--label", "ci bot"]) == 0
    token = capsys.readouterr().out.strip()
    assert cli_main(["keys", "list", "--keys", str(path)]) == 0
    out = capsys.readouterr().out
    key_id = ApiKeys.load(path).records()[0].id
    assert out.startswith(f"{key_id}  acme  viewer  apollo  ") and out.rstrip().endswith("ci bot")
    secret = token.removeprefix("jiyi_").partition("_")[2]  # the secret may hold "_" itself
    assert len(secret) > 8 and secret not in out
    assert cli_main(["keys", "list", "--keys", str(path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["id"] == key_id and row["projects"] == ["apollo"] and row["label"] == "ci bot"
    assert set(row) == {"id", "tenant", "role", "projects", "created_at", "label"}
