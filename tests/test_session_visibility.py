"""Sessions, jobs, checkpoints and context follow the visibility and ownership rules of
memories (docs/permissions.md): a session of a project is read by members only (owner and
admin keys see all), the job queue hides jobs of projects a key may not see, context with
a hidden session is "not found", and restoring a checkpoint needs the key that wrote the
session (or an owner/admin key). Real SQLite files and real HTTP requests through FastAPI;
nothing is mocked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.errors import Forbidden, NotFound
from jiyi.memory import AsyncMemory, Memory
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.session.model import Message
from jiyi.store.base import AppendMessages, Viewer, Write
from jiyi.store.sqlite import SQLiteStore

EMBEDDER = "hash:256"
SECRET = "Apollo budget for the next quarter is two million dollars"

KEYS: dict[str, tuple[str, list[str] | None]] = {
    "owner": ("owner", None),
    "ed_apollo": ("editor", ["apollo"]),
    "ed_apollo2": ("editor", ["apollo"]),
    "ed_any": ("editor", None),
    "ed_zeus": ("editor", ["zeus"]),
    "vw_zeus": ("viewer", ["zeus"]),
    "vw_none": ("viewer", []),
    "vw_apollo": ("viewer", ["apollo"]),
}


@dataclass
class World:
    client: httpx.AsyncClient
    tokens: dict[str, str]

    async def call(self, key: str, method: str, url: str, **kw: Any) -> httpx.Response:
        return await self.client.request(method, url, headers={"X-API-Key": self.tokens[key]}, **kw)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    memory = AsyncMemory(SQLiteStore(tmp_path / "sv.db"), embedder=EMBEDDER)
    keys = ApiKeys()
    tokens: dict[str, str] = {}
    for name, (role, projects) in KEYS.items():
        _, tokens[name] = keys.add("acme", role, projects=projects)
    app = create_app(memory, keys=keys, rate_limit_per_minute=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        w = World(client, tokens)
        r = await w.call(
            "ed_apollo",
            "POST",
            "/v1/sessions/s-apollo/messages",
            json={"project_id": "apollo", "messages": [{"role": "user", "content": SECRET}]},
        )
        assert r.status_code == 201, r.text
        r = await w.call(
            "ed_apollo",
            "POST",
            "/v1/sessions/s-alice/messages",
            json={"user_id": "alice", "messages": [{"role": "user", "content": "I prefer green tea"}]},
        )
        assert r.status_code == 201, r.text
        yield w
    await memory.aclose()


def _is_not_found(r: httpx.Response) -> None:
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "not_found"


async def test_a_project_session_is_read_by_members_only(world: World) -> None:
    for key in ("vw_zeus", "vw_none"):
        _is_not_found(await world.call(key, "GET", "/v1/sessions/s-apollo/messages"))
        _is_not_found(await world.call(key, "GET", "/v1/sessions/s-apollo/checkpoints"))
        r = await world.call(key, "POST", "/v1/context", json={"query": "budget", "session_id": "s-apollo"})
        _is_not_found(r)
        # A session of no project stays readable by every key of the tenant.
        r = await world.call(key, "GET", "/v1/sessions/s-alice/messages")
        assert r.status_code == 200 and [m["content"] for m in r.json()] == ["I prefer green tea"]
    for key in ("owner", "ed_apollo", "ed_any", "vw_apollo"):
        r = await world.call(key, "GET", "/v1/sessions/s-apollo/messages")
        assert r.status_code == 200, (key, r.text)
        assert [m["content"] for m in r.json()] == [SECRET]
        r = await world.call(key, "POST", "/v1/context", json={"query": "budget", "session_id": "s-apollo"})
        assert r.status_code == 200 and SECRET in r.json()["text"], (key, r.text)


async def test_a_project_session_is_ended_by_members_only(world: World) -> None:
    """Ending a session archives its session memories and queues a summary of its turns:
    a key that may not read the session gets "not found" and changes nothing."""
    _is_not_found(
        await world.call("ed_zeus", "POST", "/v1/sessions/s-apollo/end", json={"project_id": "apollo"})
    )
    jobs = (await world.call("owner", "GET", "/v1/jobs")).json()
    assert not [j for j in jobs if j["kind"] == "episode"]
    r = await world.call("ed_apollo", "POST", "/v1/sessions/s-apollo/end", json={"project_id": "apollo"})
    assert r.status_code == 200 and r.json()["episode_job_id"], r.text


async def test_the_job_queue_hides_jobs_of_projects_a_key_may_not_see(world: World) -> None:
    for key, sees in (("vw_zeus", False), ("vw_none", False), ("vw_apollo", True), ("owner", True)):
        r = await world.call(key, "GET", "/v1/jobs")
        assert r.status_code == 200, r.text
        sessions = {j["payload"].get("session_id") for j in r.json()}
        assert ("s-apollo" in sessions) is sees, (key, sessions)
        assert (SECRET in r.text) is sees, key
        assert "s-alice" in sessions, key  # a job of no project is everyone's, as before


async def test_a_checkpoint_is_restored_only_by_the_key_that_wrote_the_session(world: World) -> None:
    r = await world.call("ed_apollo", "POST", "/v1/sessions/s-apollo/checkpoints", json={"label": "before"})
    assert r.status_code == 201, r.text
    cp = r.json()["id"]
    # ed_apollo2 is a member (it may read) but wrote nothing in this session.
    r = await world.call(
        "ed_apollo2",
        "POST",
        "/v1/sessions/s-apollo/messages",
        json={"project_id": "apollo", "messages": [{"role": "user", "content": "ed2 was here"}]},
    )
    assert r.status_code == 201, r.text
    r = await world.call("ed_any", "POST", f"/v1/sessions/s-apollo/checkpoints/{cp}/restore")
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "forbidden"
    r = await world.call("ed_apollo2", "POST", f"/v1/sessions/s-apollo/checkpoints/{cp}/restore")
    assert r.status_code == 403, r.text  # it would remove ed_apollo's message
    # A non-member may not even learn that the checkpoint exists.
    _is_not_found(await world.call("ed_zeus", "POST", f"/v1/sessions/s-apollo/checkpoints/{cp}/restore"))
    r = await world.call("owner", "GET", "/v1/sessions/s-apollo/messages")
    assert [m["content"] for m in r.json()] == [SECRET, "ed2 was here"]
    # The owner may restore anything of its tenant.
    r = await world.call("owner", "POST", f"/v1/sessions/s-apollo/checkpoints/{cp}/restore")
    assert r.status_code == 200, r.text
    r = await world.call("owner", "GET", "/v1/sessions/s-apollo/messages")
    assert [m["content"] for m in r.json()] == [SECRET]
    # Now ed_apollo wrote every message and the checkpoint: it may restore.
    r = await world.call("ed_apollo", "POST", f"/v1/sessions/s-apollo/checkpoints/{cp}/restore")
    assert r.status_code == 200, r.text


async def test_message_metadata_cannot_claim_another_writer_or_drop_the_project(world: World) -> None:
    r = await world.call(
        "ed_any",
        "POST",
        "/v1/sessions/s-apollo/messages",
        json={
            "project_id": "apollo",
            "messages": [
                {
                    "role": "user",
                    "content": "forged",
                    "metadata": {"created_by": "someone", "project_id": None},
                }
            ],
        },
    )
    assert r.status_code == 201, r.text
    meta = r.json()["messages"][-1]["metadata"]
    assert meta["project_id"] == "apollo" and meta["created_by"] != "someone"
    _is_not_found(await world.call("vw_zeus", "GET", "/v1/sessions/s-apollo/messages"))


# ---------------------------------------------------------------- the library


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "lib.db"), embedder=EMBEDDER, background=False) as m:
        yield m


ALICE = Viewer(actor="alice", projects=("apollo",))
BOB = Viewer(actor="bob", projects=("apollo",))
ZOE = Viewer(actor="zoe", projects=("zeus",))
ROOT = Viewer(actor="root", sees_all=True)


def test_library_session_flows_take_a_viewer(mem: Memory) -> None:
    mem.remember([("user", SECRET)], session_id="s1", project_id="apollo", viewer=ALICE)
    assert [m.content for m in mem.messages("s1", viewer=BOB)] == [SECRET]
    assert [m.content for m in mem.messages("s1")] == [SECRET]  # no viewer: no restriction
    with pytest.raises(NotFound):
        mem.messages("s1", viewer=ZOE)
    with pytest.raises(NotFound):
        mem.working_window("s1", viewer=ZOE)
    with pytest.raises(NotFound):
        mem.context("budget", project_id="apollo", session_id="s1", viewer=ZOE)
    assert SECRET in mem.context("budget", project_id="apollo", session_id="s1", viewer=BOB).text
    assert [j.payload["session_id"] for j in mem.jobs(viewer=ZOE)] == []
    assert [j.payload["session_id"] for j in mem.jobs(viewer=BOB)] == ["s1"]
    with pytest.raises(NotFound):
        mem.save_checkpoint("s1", viewer=ZOE)
    cp = mem.save_checkpoint("s1", viewer=ALICE)
    assert cp.metadata["created_by"] == "alice"
    with pytest.raises(NotFound):
        mem.list_checkpoints("s1", viewer=ZOE)
    assert [c.id for c in mem.list_checkpoints("s1", viewer=BOB)] == [cp.id]
    with pytest.raises(NotFound):
        mem.restore_checkpoint("s1", cp.id, viewer=ZOE)
    with pytest.raises(Forbidden):
        mem.restore_checkpoint("s1", cp.id, viewer=BOB)
    assert mem.restore_checkpoint("s1", cp.id, replace_messages=False, viewer=BOB).id == cp.id  # reading
    assert mem.restore_checkpoint("s1", cp.id, viewer=ALICE).id == cp.id
    assert mem.restore_checkpoint("s1", cp.id, viewer=ROOT).id == cp.id
    assert mem.restore_checkpoint("s1", cp.id).id == cp.id  # no viewer: the library user owns the store


def test_a_compacted_project_session_stays_a_project_session(tmp_path: Path) -> None:
    from jiyi.config import SessionConfig

    cfg = SessionConfig(max_turns=2, keep_recent=1)
    with Memory(SQLiteStore(tmp_path / "c.db"), embedder=EMBEDDER, background=False, session=cfg) as mem:
        for i in range(4):
            mem.remember(
                [("user", f"{SECRET} (turn {i})")], session_id="s1", project_id="apollo", viewer=ALICE
            )
        msgs = mem.messages("s1")
        assert any(m.role == "system" for m in msgs)
        assert all(m.metadata.get("project_id") == "apollo" for m in msgs)
        with pytest.raises(NotFound):
            mem.messages("s1", viewer=ZOE)


def test_sessions_stored_before_writers_were_recorded(mem: Memory) -> None:
    """Rows without ``project_id``/``created_by`` (written by an older version): readable
    by everyone of the tenant as before, restorable only by owner/admin or the library."""
    old = Message(role="user", content="an old message", session_id="old", tenant_id="default")
    mem.store.execute(Write((AppendMessages((old,)),)))  # as an older version stored it
    assert [m.content for m in mem.messages("old", viewer=ZOE)] == ["an old message"]
    cp = mem.save_checkpoint("old")
    with pytest.raises(Forbidden):
        mem.restore_checkpoint("old", cp.id, viewer=ZOE)
    assert mem.restore_checkpoint("old", cp.id, viewer=ROOT).id == cp.id
