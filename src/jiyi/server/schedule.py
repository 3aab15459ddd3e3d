"""Lifecycle maintenance on a schedule inside the server (issue 6: "on a schedule").

:class:`MaintenanceScheduler` runs :meth:`jiyi.memory.AsyncMemory.maintain` for every
tenant the server knows (the tenants of its API keys, or ``default`` without keys)
once at start-up and then every ``interval`` seconds, as an asyncio task beside the
request handlers. Each pass is logged as one JSON line on the ``jiyi.maintenance``
logger and kept as :attr:`MaintenanceScheduler.last` (served by ``GET /v1/maintenance``).

Passes run one after the other, never two at once; a failing pass is logged and the
next one runs on time (the store's history already records every change a pass made).

Replicas: with a ``lease`` (:class:`~jiyi.server.shared.RedisLease`, from ``--redis``) a
replica runs a tenant's pass only if it takes the lease ``maintenance:TENANT`` for 90% of
the interval; the others record the pass as skipped. So N servers started together run
each tenant's pass once per interval, not N times.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel

from jiyi.errors import InvalidInput
from jiyi.lifecycle import LifecyclePolicy, MaintenanceReport
from jiyi.memory import AsyncMemory
from jiyi.model import utcnow

log = logging.getLogger("jiyi.maintenance")


class Lease(Protocol):
    """A named lock with a time to live, shared by replicas."""

    owner: str

    async def take(self, name: str, seconds: float) -> bool: ...


@dataclass
class PassRecord:
    """One scheduled pass over one tenant."""

    tenant_id: str
    started_at: datetime
    report: MaintenanceReport | None = None
    error: str | None = None
    skipped: str | None = None
    """Why this replica did not run the pass (another one holds the tenant's lease)."""

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tenant_id": self.tenant_id, "started_at": self.started_at.isoformat()}
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.report is not None:
            rep = self.report.to_json_dict()
            out.update(
                dry_run=rep["dry_run"],
                scanned=rep["scanned"],
                counts=rep["counts"],
                messages_removed=rep["messages_removed"],
            )
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class MaintenanceScheduler:
    """Runs a maintenance pass per tenant every ``interval`` seconds."""

    memory: AsyncMemory
    tenants: Callable[[], list[str]]
    interval: float
    policy: LifecyclePolicy | None = None
    lease: Lease | None = None
    last: dict[str, PassRecord] = field(default_factory=dict)
    passes: int = 0
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.interval, bool)
            or not isinstance(self.interval, int | float)
            or not self.interval > 0
        ):
            raise InvalidInput(
                f"the maintenance interval must be a positive number of seconds, got {self.interval!r}",
                field="maintain_every",
            )

    async def run_once(self) -> list[PassRecord]:
        """One pass over every tenant, now."""
        records = [await self._pass(tenant) for tenant in sorted(set(self.tenants()))]
        self.passes += 1
        return records

    async def _pass(self, tenant: str) -> PassRecord:
        record = PassRecord(tenant, utcnow())
        if self.lease is not None and not await self.lease.take(
            f"maintenance:{tenant}", max(1.0, self.interval * 0.9)
        ):
            record.skipped = "another replica holds this tenant's maintenance lease"
        else:
            try:
                record.report = await self.memory.maintain(policy=self.policy, tenant_id=tenant)
            except Exception as exc:  # keep the schedule alive; the log says what failed
                record.error = f"{type(exc).__name__}: {exc}"
                log.exception("maintenance pass failed for tenant %s", tenant)
            else:
                log.info(json.dumps({"event": "maintenance", **record.to_json_dict()}, ensure_ascii=False))
        self.last[tenant] = record
        return record

    async def _loop(self) -> None:
        while True:
            await self.run_once()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="jiyi-maintenance")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class MaintenanceStatus(BaseModel):
    """What ``GET /v1/maintenance`` answers."""

    enabled: bool
    interval_seconds: float | None = None
    passes: int = 0
    last: dict[str, Any] | None = None
