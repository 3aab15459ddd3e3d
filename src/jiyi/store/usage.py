"""Search usage writes sent in the background, shared by the SQL stores.

Every search writes what it used (:class:`~jiyi.store.base.Touch`: counters and
``last_used_at``; :class:`~jiyi.store.base.RecordAccess`: the retrieval log). The caller
needs none of it back, so a store hands that write to a thread of its own and the search
returns; the store's next operation waits for it, so nothing reads around it.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable

from jiyi.store.base import RecordAccess, Touch, Write


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
    before every other operation it runs (a later search reads ``last_used_at``, a log
    listing reads the log: each sees every usage write this process made before it, as
    when the writes were synchronous) and :meth:`close` when it closes, so a normal close
    loses nothing. What is queued while a write is out goes next, all in one transaction
    (the store's ``send``: one round trip on PostgreSQL, one commit on SQLite): under many
    concurrent searches, what an operation that must see them waits for stays about one
    write, whatever the queue's length. A failure is logged (``jiyi.retrievals``) and
    dropped, as :func:`jiyi.read.retrievals.record_access` does with a synchronous one."""

    def __init__(self, send: Callable[[list[Write]], None]) -> None:
        self._send = send
        self._cond = threading.Condition()
        self._queue: deque[Write] = deque()
        self._pending = 0  # queued or being sent; read without the lock by flush()
        self._thread: threading.Thread | None = None
        self._stopping = False
        _writers.add(self)

    def submit(self, op: Write) -> bool:
        """Queue ``op``; False once the writer is closed (the caller sends it itself)."""
        with self._cond:
            if self._stopping:
                return False
            self._queue.append(op)
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="jiyi-usage-writer", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return True

    @property
    def pending(self) -> bool:
        return self._pending > 0

    def flush(self) -> None:
        """Wait until every write queued so far has been sent and committed (or failed)."""
        if self._pending == 0 or threading.current_thread() is self._thread:
            return
        with self._cond:
            while self._pending:
                self._cond.wait()

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
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
                    self._pending -= len(batch)
                    self._cond.notify_all()


_writers: weakref.WeakSet[UsageWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: each writer starts afresh (what
    the parent had queued is the parent's to send), so a flush never waits for a thread
    that is not there."""
    for writer in list(_writers):
        writer._cond = threading.Condition()
        writer._queue.clear()
        writer._pending = 0
        writer._thread = None


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    """Send the usage writes of stores that were never closed (atexit runs before the
    writers' daemon threads are stopped)."""
    for writer in list(_writers):
        writer.close()
