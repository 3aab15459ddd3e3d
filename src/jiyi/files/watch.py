"""A polling watcher: a person's edits are synced without running ``jiyi sync``.

Every ``interval`` seconds a thread looks at the size and modification time of each
memory.md / learnings.md under the root (no extra dependency, works on every file
system, network mounts included). When a file changed *and* no longer matches what
jiyi last wrote (jiyi's own writes are not edits), its scope is handed to ``on_change``.
A file is acted on once it has stopped changing for one interval: an editor that
truncates and then writes would otherwise have a half-written file synced (its missing
lines read as deleted). The first look happens at start, so edits made while nothing was
watching are synced too (one interval later). ``jiyi serve --files DIR`` runs one;
:func:`watch_files` starts one for any :class:`~jiyi.memory.Memory` or
:class:`~jiyi.memory.AsyncMemory`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from jiyi.errors import ConfigError, InvalidInput
from jiyi.files.disk import FileLock, read_file
from jiyi.files.layout import FILE_NAMES, STATE_DIR, ScopeRef, decode_name
from jiyi.files.mirror import FileMirrorStore, workspace_of
from jiyi.files.report import SyncReport
from jiyi.files.state import load_state

log = logging.getLogger("jiyi.files")

Signature = tuple[int, int]


class FileWatcher:
    """Calls ``on_change(scopes)`` from a daemon thread when files of those scopes were
    edited. ``tenant_id`` limits it to one tenant's directory (default: all)."""

    def __init__(
        self,
        mirror: FileMirrorStore,
        on_change: Callable[[list[ScopeRef]], object],
        *,
        interval: float = 2.0,
        tenant_id: str | None = None,
    ) -> None:
        if not isinstance(interval, int | float) or isinstance(interval, bool) or interval <= 0:
            raise InvalidInput(
                f"interval must be a positive number of seconds, not {interval!r}", field="interval"
            )
        self.mirror = mirror
        self.interval = float(interval)
        self.tenant_id = tenant_id
        self._on_change = on_change
        self._seen: dict[tuple[ScopeRef, str], Signature] = {}
        self._pending: set[tuple[ScopeRef, str]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> FileWatcher:
        if not self.alive:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="jiyi-files-watcher", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # keep watching; the next poll tries again
                log.exception("jiyi files: syncing edited files failed")
            self._stop.wait(self.interval)

    def poll(self) -> list[ScopeRef]:
        """Look once; sync (via ``on_change``) the scopes whose files were edited."""
        current = self._signatures()
        previous, self._seen = self._seen, current
        moved = {key for key, sig in current.items() if previous.get(key) != sig}
        moved |= {key for key in previous if key not in current}
        # A file that changed since the last look may still be being written: wait until
        # it holds still for one interval.
        settled = self._pending - moved
        self._pending = (self._pending - settled) | moved
        edited = [ref for ref in sorted({key[0] for key in settled}) if self._edited(ref)]
        if edited:
            self._on_change(edited)
        return edited

    def _tenants(self) -> list[str]:
        if self.tenant_id is not None:
            return [self.tenant_id]
        root = self.mirror.workspace.root
        if not root.is_dir():
            return []
        names = [p.name for p in root.iterdir() if p.is_dir() and p.name != STATE_DIR]
        return sorted(t for t in (decode_name(n) for n in names) if t is not None)

    def _signatures(self) -> dict[tuple[ScopeRef, str], Signature]:
        ws = self.mirror.workspace
        out: dict[tuple[ScopeRef, str], Signature] = {}
        for tenant in self._tenants():
            refs, _ = ws.scan(tenant)
            for ref in refs:
                for name in FILE_NAMES:
                    try:
                        st = ws.file_path(ref, name).stat()
                    except OSError:
                        continue
                    out[(ref, name)] = (st.st_mtime_ns, st.st_size)
        return out

    def _edited(self, ref: ScopeRef) -> bool:
        """The files differ from what jiyi last wrote (or were deleted, or are new)."""
        ws = self.mirror.workspace
        with FileLock(ws.lock_path(ref)):  # never see jiyi's own write half done
            state = load_state(ws.state_path(ref), ref)
            for name in FILE_NAMES:
                disk = read_file(ws.file_path(ref, name))
                written = state.files.get(name) if state else None
                if disk.exists and disk.sha != written:
                    return True
                if not disk.exists and written is not None:
                    return True
        return False


def _log(report: SyncReport) -> None:
    for change in report.changes:
        log.info(
            "jiyi files: %s %s %s (%s)", change.file, change.action, change.item_id or "", change.direction
        )
    for conflict in report.conflicts:
        log.warning(
            "jiyi files: conflict in %s line %s (memory %s): %s",
            conflict.file,
            conflict.line,
            conflict.item_id,
            conflict.message,
        )
    for error in report.errors:
        log.warning("jiyi files: %s line %s: %s", error.file, error.line, error.message)


def _scope_kwargs(ref: ScopeRef) -> dict[str, str]:
    return {f"{ref.scope.value}_id": ref.scope_id, "tenant_id": ref.tenant_id}


def watch_files(
    memory: Any,
    *,
    interval: float = 2.0,
    loop: asyncio.AbstractEventLoop | None = None,
    start: bool = True,
    on_report: Callable[[SyncReport], object] | None = None,
) -> FileWatcher:
    """Watch the files of ``memory`` (a Memory or AsyncMemory opened with ``files=``)
    and sync each scope a person edits. For an AsyncMemory the syncs run on ``loop``
    (default: the running loop, so call this from inside it). ``on_report`` receives
    every sync's report (by default they are logged on the ``jiyi.files`` logger)."""
    mirror = workspace_of(getattr(getattr(memory, "runtime", None), "store", None) or memory)
    if mirror is None:
        raise ConfigError("watch_files needs a Memory opened with files=DIR")
    handle = on_report or _log
    sync_files = memory.sync_files
    if inspect.iscoroutinefunction(sync_files):
        target = loop or asyncio.get_running_loop()

        def on_change(refs: Sequence[ScopeRef]) -> None:
            for ref in refs:
                future = asyncio.run_coroutine_threadsafe(sync_files(**_scope_kwargs(ref)), target)
                handle(future.result())

    else:

        def on_change(refs: Sequence[ScopeRef]) -> None:
            for ref in refs:
                handle(sync_files(**_scope_kwargs(ref)))

    watcher = FileWatcher(mirror, on_change, interval=interval)
    return watcher.start() if start else watcher
