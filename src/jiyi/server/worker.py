"""The job worker inside ``jiyi serve``: drains the store's job queue in an asyncio task,
one job at a time, and stops without stranding a job.

Jobs live in the store and are claimed atomically (PostgreSQL: ``FOR UPDATE SKIP
LOCKED``), so any number of servers and ``jiyi worker`` processes can drain one queue and
each job runs once. A claimed job is leased to its worker (5 minutes); a worker that dies
leaves it to be claimed again when the lease runs out. A worker that is *stopped* does
better: :meth:`JobWorker.stop` lets the job in hand finish for ``grace`` seconds, and if it
has not, cancels it and puts every job this worker still holds back in the queue at once
(``attempts`` as before the claim), so a rolling restart neither loses nor delays work.

Claiming one job at a time (not a batch) is what makes that cheap: at most one job is
ever in hand, and a stopping worker never holds claimed jobs it has not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jiyi.model import utcnow
from jiyi.store.base import ListJobs, PutJob, Write

if TYPE_CHECKING:
    from jiyi.memory import AsyncMemory
    from jiyi.session.model import Job

log = logging.getLogger("jiyi.worker")


class JobWorker:
    """Runs queued jobs of ``memory``'s store as ``name`` until :meth:`stop`."""

    def __init__(self, memory: AsyncMemory, name: str, *, interval: float = 1.0) -> None:
        self.memory = memory
        self.name = name
        self.interval = interval
        self.processed = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="jiyi-worker")

    def wake(self) -> None:
        """Look at the queue now (a job was just queued) instead of at the next poll."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            try:
                reports = await self.memory.process_jobs(worker=self.name, limit=1)
            except Exception:  # keep the worker alive; the job rows hold the errors
                log.exception("job failed to run")
                reports = []
            self.processed += len(reports)
            if reports:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()

    async def stop(self, grace: float = 30.0) -> int:
        """Finish the job in hand (up to ``grace`` seconds), then stop; returns how many
        jobs were put back in the queue (those still held after the grace period)."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return 0
        try:
            await asyncio.wait_for(asyncio.shield(task), grace)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return await release_jobs(self.memory, self.name)


async def release_jobs(memory: AsyncMemory, worker: str) -> int:
    """Put every job ``worker`` holds (running, leased to it) back in the queue."""
    running = await memory.store.aexecute(ListJobs(("running",), limit=1000))
    changes = releases(running, worker)
    if changes:
        await memory.store.aexecute(Write(changes))
        log.warning("released %d job(s) held by %s", len(changes), worker)
    return len(changes)


def releases(running: Iterable[Job], worker: str) -> tuple[PutJob, ...]:
    """The writes that put the jobs of ``running`` that ``worker`` holds back in the queue."""
    now = utcnow()
    return tuple(
        PutJob(
            job.model_copy(
                update={
                    "status": "queued",
                    "attempts": max(0, job.attempts - 1),  # the claim did not get to try it
                    "locked_by": None,
                    "locked_until": None,
                    "run_after": now,
                    "updated_at": now,
                }
            )
        )
        for job in running
        if job.locked_by == worker
    )
