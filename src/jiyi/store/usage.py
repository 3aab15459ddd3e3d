"""Search usage writes sent in the background, shared by the SQL stores.

Every search writes what it used (:class:`~jiyi.store.base.Touch`: counters and
``last_used_at``; :class:`~jiyi.store.base.RecordAccess`: the retrieval log). The caller
needs none of it back, so a store hands that write to a thread of its own and the search
returns; the store's next operation waits for it, so nothing reads around it (a search's
own reads wait only for their thread's writes: :data:`SEARCH_READS`).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from jiyi.store.base import (
    KeywordHits,
    LoadHits,
    Op,
    RecordAccess,
    Retrieve,
    ThreadLinks,
    Touch,
    VectorHits,
    Write,
)

SEARCH_READS = (Retrieve, VectorHits, KeywordHits, ThreadLinks, LoadHits)
"""The reads of a search. They wait only for the usage writes their own thread queued (a
caller's next search sees its last one's counts), not for other threads': they read the
counters only for recency, where a moment's delay changes nothing, and a search that
waited for every other thread's queued writes was slower under concurrent load (REST load
test, 8 clients: search p50 ~47 -> ~36 ms without that wait; docs/benchmarks.md)."""


def waits_for_all(op: Op[Any]) -> bool:
    """Whether ``op`` waits for every usage write queued before it, or (a search's read,
    :data:`SEARCH_READS`) only for its own thread's."""
    return not isinstance(op, SEARCH_READS)


def usage_write(op: Write) -> tuple[Touch | None, RecordAccess | None] | None:
    """The parts of a search's usage write: a :class:`Touch` and at most one
    :class:`RecordAccess` (either alone too). None for any other write (those are never
    sent in the background)."""
    touches = [c for c in op.changes if isinstance(c, Touch)]
    logs = [c for c in op.changes if isinstance(c, RecordAccess)]
    if len(touches) > 1 or len(logs) > 1 or len(touches) + len(logs) != len(op.changes) or not op.changes:
        return None
    return (touches[0] if touches else None), (logs[0] if logs else None)


_log = logging.getLogger("jiyi.retrievals")


class UsageWriter:
    """Sends a store's search usage writes (counters and retrieval log) from a thread of
    its own, so a search returns without waiting for them. The store calls :meth:`flush`
    before every other operation it runs (a log listing reads the log, an update rewrites
    the counters: each sees every usage write this process queued before it, as when the
    writes were synchronous; a search's reads see their own thread's, :data:`SEARCH_READS`)
    and :meth:`close` when it closes, so a normal close loses nothing. What is queued while
    a write is out goes next, all in one transaction (the store's ``send``: one round trip
    on PostgreSQL, one commit on SQLite): under many concurrent searches, what an
    operation that must see them waits for stays about one write, whatever the queue's
    length. A failure is logged (``jiyi.retrievals``) and
    dropped, as :func:`jiyi.read.retrievals.record_access` does with a synchronous one."""

    def __init__(self, send: Callable[[list[Write]], None], after: Callable[[], None] | None = None) -> None:
        self._send = send
        # The store's own upkeep (SQLite: starting the log checkpoint its usage commits
        # skip), run once a batch is sent and its waiters are released.
        self._after = after
        self._cond = threading.Condition()
        self._queue: deque[Write] = deque()
        # Writes are numbered as queued; every write up to ``_done`` has been sent (or has
        # failed). Read without the lock by the fast paths.
        self._queued = 0
        self._done = 0
        self._mine: dict[int, int] = {}  # thread -> the number of the last write it queued
        self._thread: threading.Thread | None = None
        self._stopping = False
        _writers.add(self)

    def take(self, op: Op[Any]) -> bool:
        """Queue ``op`` if it is a search's usage write (:func:`usage_write`); False for
        any other operation, or once the writer is closed (the caller runs it itself)."""
        return isinstance(op, Write) and usage_write(op) is not None and self.submit(op)

    def before(self, op: Op[Any]) -> None:
        """Wait, before the store runs ``op``, for the writes it must see (:func:`waits_for_all`)."""
        self.flush(own=not waits_for_all(op))

    async def abefore(self, op: Op[Any]) -> None:
        """:meth:`before` without blocking the event loop (marked on the loop's thread,
        which queued this task's writes; waited for in another)."""
        if self.pending:
            await asyncio.to_thread(self.wait, self.mark(own=not waits_for_all(op)))

    def submit(self, op: Write) -> bool:
        """Queue ``op``; False once the writer is closed (the caller sends it itself)."""
        with self._cond:
            if self._stopping:
                return False
            self._queue.append(op)
            self._queued += 1
            self._mine[threading.get_ident()] = self._queued
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="jiyi-usage-writer", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return True

    @property
    def pending(self) -> bool:
        return self._done < self._queued

    def flush(self, *, own: bool = False) -> None:
        """Wait until every write queued so far (``own``: by this thread) has been sent and
        committed (or failed). Writes queued meanwhile are not waited for: under a steady
        stream of searches an operation waits for one batch, not until the queue happens
        to be empty."""
        self.wait(self.mark(own=own))

    def mark(self, *, own: bool = False) -> int:
        """The number of the last write queued so far (``own``: by this thread), for
        :meth:`wait` (which may run in another thread)."""
        return self._mine.get(threading.get_ident(), 0) if own else self._queued

    def wait(self, target: int) -> None:
        """Wait until every write up to number ``target`` has been sent (or has failed)."""
        if self._done >= target or threading.current_thread() is self._thread:
            return
        with self._cond:
            while self._done < target:
                self._cond.wait()

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _start_afresh(self) -> None:
        self._cond = threading.Condition()
        self._queue.clear()
        self._queued = self._done = 0
        self._mine = {}
        self._thread = None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
                last = self._queued  # the queue holds every write up to this number
            try:
                self._send(batch)
            except Exception:
                _log.warning(
                    "the retrieval log could not be written (%d search usage write(s) sent in the background): "
                    "their counts and log entries are lost",
                    len(batch),
                    exc_info=True,
                )
            finally:
                with self._cond:
                    self._done = last
                    # Threads whose writes are all sent need no entry (threads come and go).
                    self._mine = {t: n for t, n in self._mine.items() if n > last}
                    self._cond.notify_all()
            if self._after is not None:
                try:
                    self._after()
                except Exception:
                    _log.warning("the store's upkeep after a search usage write failed", exc_info=True)


_writers: weakref.WeakSet[UsageWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: each writer starts afresh (what
    the parent had queued is the parent's to send), so a flush never waits for a thread
    that is not there."""
    for writer in list(_writers):
        writer._start_afresh()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    """Send the usage writes of stores that were never closed (atexit runs before the
    writers' daemon threads are stopped)."""
    for writer in list(_writers):
        writer.close()
