"""Lifecycle maintenance on a schedule inside the server (real SQLite, injected clock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory
from jiyi.model import Status
from jiyi.server.app import create_app
from jiyi.server.auth import ApiKeys
from jiyi.server.schedule import MaintenanceScheduler

EMBEDDER = "hash:256"
START = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def mem(tmp_path: Path) -> AsyncIterator[AsyncMemory]:
    memory = AsyncMemory.open(tmp_path / "s.db", embedder=EMBEDDER, clock=Clock())
    yield memory
    await memory.aclose()


async def _expiring(mem: AsyncMemory, tenant: str, content: str) -> str:
    res = await mem.add(
        content, user_id="u1", tenant_id=tenant, expires_at=START + timedelta(days=1), importance=0.5
    )
    assert res.item is not None
    return res.item.id


async def _wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_server_runs_maintenance_for_every_tenant_on_schedule(mem: AsyncMemory) -> None:
    keys = ApiKeys()
    admin_a = keys.add("acme", "admin")[1]
    editor_a = keys.add("acme", "editor")[1]
    keys.add("globex", "owner")
    a = await _expiring(mem, "acme", "the staging password rotates on Friday")
    b = await _expiring(mem, "globex", "deploy freeze until the audit ends")
    keep = (await mem.add("Alice prefers tea over coffee", user_id="u1", tenant_id="acme")).item
    assert keep is not None
    clock = mem.core.rt.clock
    assert isinstance(clock, Clock)
    clock.now = START + timedelta(days=2)  # both items are now past their expiry

    app = create_app(mem, keys=keys, rate_limit_per_minute=None, maintain_every=0.05)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
    ):
        await _wait_for(lambda: len(app.state.maintenance.last) == 2)
        assert (await mem.get(a, tenant_id="acme")).status == Status.ARCHIVED
        assert (await mem.get(b, tenant_id="globex")).status == Status.ARCHIVED
        assert (await mem.get(keep.id, tenant_id="acme")).status == Status.ACTIVE
        history = await mem.history(a, tenant_id="acme")
        assert history[-1].actor == "lifecycle" and "expire" in history[-1].reason

        r = await client.get("/v1/maintenance", headers={"X-API-Key": admin_a})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["enabled"] is True and body["interval_seconds"] == 0.05 and body["passes"] >= 1
        assert body["last"]["tenant_id"] == "acme"  # only its own tenant's pass
        assert body["last"]["counts"].get("expire", 0) + body["last"]["counts"].get("keep", 0) >= 1

        r = await client.get("/v1/maintenance", headers={"X-API-Key": editor_a})
        assert r.status_code == 403

        # The schedule keeps going: a later pass sees the new state.
        passes = app.state.maintenance.passes
        await _wait_for(lambda: app.state.maintenance.passes > passes)
    # Leaving the lifespan stops the task.
    assert app.state.maintenance._task is None


async def test_schedule_is_off_unless_asked(mem: AsyncMemory) -> None:
    app = create_app(mem)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765"
    ) as client:
        r = await client.get("/v1/maintenance")
        assert r.status_code == 200 and r.json() == {
            "enabled": False,
            "interval_seconds": None,
            "passes": 0,
            "last": None,
        }


async def test_a_failing_pass_is_recorded_and_the_next_one_still_runs(mem: AsyncMemory) -> None:
    calls: list[str] = []

    def tenants() -> list[str]:
        calls.append("x")
        return ["default"]

    sched = MaintenanceScheduler(mem, tenants, 0.01)
    mem.store.close()  # every pass now fails inside the store
    first = await sched.run_once()
    assert first[0].error and first[0].tenant_id == "default"
    sched.start()
    await _wait_for(lambda: sched.passes >= 3)
    await sched.stop()
    assert sched.last["default"].error is not None


async def test_interval_must_be_positive(mem: AsyncMemory) -> None:
    for bad in (0, -1.0, "soon", True):
        with pytest.raises(InvalidInput, match="positive"):
            MaintenanceScheduler(mem, lambda: ["default"], bad)  # type: ignore[arg-type]


def test_serve_takes_the_schedule_as_a_duration() -> None:
    from jiyi.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["serve", "--maintain-every", "6h"]).maintain_every == 21600.0
    assert parse(["serve", "--maintain-every", "90"]).maintain_every == 90.0
    assert parse(["serve"]).maintain_every == 86400.0
    with pytest.raises(SystemExit):
        parse(["serve", "--maintain-every", "soon"])
