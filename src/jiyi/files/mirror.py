"""API writes show up in the files: a store wrapper (as :mod:`jiyi.store.redis_cache`
wraps a store), applied by ``Memory(..., files=DIR)``.

For every :class:`~jiyi.store.base.Write` that changes what the files show (an item
added, edited, moved, archived, expired, purged; not a mention count or access time):

1. an intent naming the affected scopes goes into the journal (durably);
2. the write runs on the wrapped store;
3. each affected scope's files are rewritten, under its file lock, if they are *clean*
   (still exactly as last written). A person's unsynced edits are never overwritten:
   the files are left alone and the next sync merges both sides;
4. the intent is removed.

A crash between any two steps leaves the intent, and the next start syncs those
scopes (no database scan). Writes a sync makes (history actor ``files``) pass straight
through: the sync writes the files itself. The wrapper also runs the file operations
of :mod:`jiyi.files.ops` that sync flows yield.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from jiyi.driver import adrive, drive
from jiyi.errors import InvalidInput, WriteConflict
from jiyi.files.disk import (
    FileLock,
    atomic_write,
    crash_point,
    ensure_gitignore,
    read_file,
    require_locks,
    sweep_tmp,
)
from jiyi.files.document import Entry, Placed, at_key
from jiyi.files.journal import Intent, Journal
from jiyi.files.layout import FILE_NAMES, FILES_ACTOR, ScopeRef, Workspace, is_file_memory
from jiyi.files.ops import (
    BeginIntent,
    ClaimIntents,
    CommitResult,
    CommitScope,
    EndIntents,
    FileOp,
    ReadScope,
    ScanScopes,
    ScopeSnapshot,
    WorkspaceRoot,
    scope_items,
)
from jiyi.files.render import render_scope
from jiyi.files.state import ScopeState, digest, load_state
from jiyi.model import MemoryItem
from jiyi.store.base import Op, Purge, Store, Upsert, Write

R = TypeVar("R")
log = logging.getLogger("jiyi.files")


@dataclass(frozen=True)
class ApiChange:
    """An API write changed what the files show for one item."""

    item_id: str
    before: ScopeRef | None  # the scope whose files showed it
    after: MemoryItem | None  # the item as its scope's files should show it
    now: datetime


def _snapshot_item(data: dict[str, Any] | None) -> MemoryItem | None:
    if data is None:
        return None
    try:
        return MemoryItem.model_validate(data)
    except ValidationError:
        return None


def _seen(item: MemoryItem | None, now: datetime) -> tuple[ScopeRef, Entry, str] | None:
    if item is None or not is_file_memory(item, now):
        return None
    return ScopeRef.of(item), Entry.of(item), at_key(item.created_at)


def api_changes(write: Write) -> list[ApiChange]:
    """The items of a write whose appearance in the files changes (a sync's own writes,
    actor ``files``, are left out: the sync writes the files itself)."""
    out: list[ApiChange] = []
    for change in write.changes:
        if isinstance(change, Upsert):
            event = change.event
            if event.actor == FILES_ACTOR:
                continue
            before = _snapshot_item(event.before)
            old, new = _seen(before, event.at), _seen(change.item, event.at)
            if old != new:
                out.append(
                    ApiChange(change.item.id, old[0] if old else None, change.item if new else None, event.at)
                )
        elif isinstance(change, Purge) and change.event.actor != FILES_ACTOR:
            old = _seen(_snapshot_item(change.event.before), change.event.at)
            if old is not None:
                out.append(ApiChange(change.item_id, old[0], None, change.event.at))
    return out


def _refs(changes: list[ApiChange]) -> tuple[ScopeRef, ...]:
    refs: set[ScopeRef] = set()
    for c in changes:
        if c.before is not None:
            refs.add(c.before)
        if c.after is not None:
            refs.add(ScopeRef.of(c.after))
    return tuple(sorted(refs))


def _is_files_write(write: Write) -> bool:
    return any(isinstance(c, Upsert | Purge) and c.event.actor == FILES_ACTOR for c in write.changes)


class FileMirrorStore(Store):
    """A :class:`Store` that keeps each scope's memory.md / learnings.md under ``root``
    in step with ``inner`` (see the module doc). ``inner`` stays the index: searches,
    reads and other writes go straight to it."""

    def __init__(self, inner: Store, root: str | Path) -> None:
        if not isinstance(inner, Store):
            raise InvalidInput(f"inner must be a jiyi Store, not {type(inner).__name__}", field="inner")
        require_locks()
        self.inner = inner
        self.workspace = Workspace(root)
        self.journal = Journal(self.workspace.journal_dir)
        self._gitignore_done = False
        self._gitignore_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileMirrorStore({self.inner!r}, root={str(self.workspace.root)!r})"

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Transparent for what callers read off the wrapped store (e.g. a cache's stats).
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ------------------------------------------------------------ drivers

    def execute(self, op: Op[R]) -> R:
        if isinstance(op, Write):
            return cast(R, self._write(op))
        return self.inner.execute(op)

    async def aexecute(self, op: Op[R]) -> R:
        if isinstance(op, Write):
            return cast(R, await self._awrite(op))
        return await self.inner.aexecute(op)

    def _write(self, op: Write) -> None:
        changes = api_changes(op)
        if not changes:
            self.inner.execute(op)
            if _is_files_write(op):
                crash_point("sync-db-partial")
            return
        intent = self.journal.begin("api", _refs(changes))
        crash_point("api-journaled")
        self._write_inner(op, intent)
        crash_point("api-committed")
        try:
            now = _now(changes)
            fetched = {ref: self._drive(scope_items(ref, now)) for ref in self.needs_full_render(changes)}
            self.render_api_changes(changes, fetched)
        except Exception as exc:  # the write committed; the journal brings the files up later
            self._render_failed(exc, intent)
            return
        intent.done()

    async def _awrite(self, op: Write) -> None:
        changes = api_changes(op)
        if not changes:
            await self.inner.aexecute(op)
            if _is_files_write(op):
                crash_point("sync-db-partial")
            return
        intent = await asyncio.to_thread(self.journal.begin, "api", _refs(changes))
        crash_point("api-journaled")
        try:
            await self.inner.aexecute(op)
        except BaseException as exc:
            self._write_failed(exc, intent)
            raise
        crash_point("api-committed")
        try:
            now = _now(changes)
            need = await asyncio.to_thread(self.needs_full_render, changes)
            fetched = {ref: await self._adrive(scope_items(ref, now)) for ref in need}
            await asyncio.to_thread(self.render_api_changes, changes, fetched)
        except Exception as exc:
            self._render_failed(exc, intent)
            return
        await asyncio.to_thread(intent.done)

    def _write_inner(self, op: Write, intent: Intent) -> None:
        try:
            self.inner.execute(op)
        except BaseException as exc:
            self._write_failed(exc, intent)
            raise

    @staticmethod
    def _write_failed(exc: BaseException, intent: Intent) -> None:
        # A refused write (bad input, or a guard that lost a race) changed nothing; after
        # any other failure it is unknown whether it committed, so the intent stays for the
        # next start to check.
        if isinstance(exc, InvalidInput | WriteConflict):
            intent.done()
        else:
            intent.release()

    @staticmethod
    def _render_failed(exc: Exception, intent: Intent) -> None:
        log.warning(
            "jiyi files: could not update the files after a write (%s); the next sync or start will", exc
        )
        intent.release()

    def _drive(self, gen: Generator[Op[Any], Any, R]) -> R:
        return drive(gen, {Op: self.inner.execute})

    async def _adrive(self, gen: Generator[Op[Any], Any, R]) -> R:
        return await adrive(gen, {Op: self.inner.aexecute})

    # ------------------------------------------------------------ file operations

    def run_file_op(self, op: FileOp[Any]) -> Any:
        """Run one of the :mod:`jiyi.files.ops` operations (blocking)."""
        match op:
            case ReadScope(ref=ref):
                with self._lock(ref):
                    return self._snapshot(ref)
            case CommitScope():
                return self._commit(op)
            case ScanScopes(tenant_id=tenant):
                return self.workspace.scan(tenant)
            case BeginIntent(refs=refs, prefer=prefer):
                intent = self.journal.begin("sync", refs, prefer)
                crash_point("sync-journaled")
                return intent
            case EndIntents(intents=intents, done=done):
                for intent in intents:
                    intent.done() if done else intent.release()
                return None
            case ClaimIntents():
                sweep_tmp(self.workspace.tmp_dir)
                return self.journal.claim()
            case WorkspaceRoot():
                return str(self.workspace.root)
        raise InvalidInput(f"unknown file operation {type(op).__name__}")

    def _lock(self, ref: ScopeRef) -> FileLock:
        return FileLock(self.workspace.lock_path(ref))

    def _snapshot(self, ref: ScopeRef) -> ScopeSnapshot:
        files = {name: read_file(self.workspace.file_path(ref, name)) for name in FILE_NAMES}
        return ScopeSnapshot(ref, files, load_state(self.workspace.state_path(ref), ref))

    def _save_state(self, state: ScopeState) -> None:
        atomic_write(self.workspace.state_path(state.ref), state.to_json(), self.workspace.tmp_dir)

    def _gitignore(self) -> None:
        with self._gitignore_lock:
            if not self._gitignore_done:
                ws = self.workspace
                ensure_gitignore(ws.root, ws.tmp_dir, ws.internal / "locks" / "gitignore.lock")
                self._gitignore_done = True

    def _write_texts(self, snap: ScopeSnapshot, texts: Mapping[str, str | None]) -> tuple[str, ...]:
        written: list[str] = []
        for name in FILE_NAMES:
            text = texts.get(name)
            if text is None:
                continue
            current = snap.files[name]
            if current.exists and current.sha == digest(text):
                continue
            atomic_write(self.workspace.file_path(snap.ref, name), text, self.workspace.tmp_dir)
            written.append(name)
        if written:
            self._gitignore()
        return tuple(written)

    def _commit(self, op: CommitScope) -> CommitResult:
        with self._lock(op.ref):
            snap = self._snapshot(op.ref)
            if snap.fingerprint != op.expected:
                return CommitResult(False)
            crash_point("sync-db-applied")
            state = op.state
            if state is None:
                return CommitResult(True)
            written = self._write_texts(snap, dict(op.texts))
            crash_point("sync-file-written")
            old = snap.state
            if written or old is None or old.content() != state.content():
                state.serial = (old.serial if old else 0) + 1
                self._save_state(state)
            return CommitResult(True, written)

    # ------------------------------------------------------------ after an API write

    def needs_full_render(self, changes: list[ApiChange]) -> list[ScopeRef]:
        """Scopes that have no files yet: their first render reads the scope's items."""
        ws = self.workspace
        return [
            ref
            for ref in _refs(changes)
            if not ws.state_path(ref).exists() and not any(ws.file_path(ref, n).exists() for n in FILE_NAMES)
        ]

    def render_api_changes(
        self, changes: list[ApiChange], fetched: Mapping[ScopeRef, list[MemoryItem]]
    ) -> None:
        """Rewrite each affected scope's files if they are clean (blocking)."""
        for ref in _refs(changes):
            mine = [
                c for c in changes if c.before == ref or (c.after is not None and ScopeRef.of(c.after) == ref)
            ]
            with self._lock(ref):
                self._render_scope(ref, mine, fetched.get(ref))

    def _render_scope(self, ref: ScopeRef, changes: list[ApiChange], items: list[MemoryItem] | None) -> None:
        snap = self._snapshot(ref)
        state = snap.state
        now = _now(changes)
        if state is None or not any(state.files.values()):
            if any(f.exists for f in snap.files.values()):
                # Files a person made and no sync has read yet: mark the scope changed so
                # a running sync starts over, and leave the merge to it.
                marker = state or ScopeState(ref, files=dict.fromkeys(FILE_NAMES))
                marker.serial += 1
                self._save_state(marker)
                return
            if items is None:
                return  # the next sync writes them
            shown = {i.id: Placed.of(i) for i in items if is_file_memory(i, now) and i.scope_key == ref.key}
            if not shown:
                return
            state = ScopeState(ref, serial=state.serial if state else 0, base=shown)
        elif not self._clean(snap, state):
            state.serial += 1  # a person's edits are waiting: never overwrite them
            self._save_state(state)
            return
        else:
            for change in changes:
                if change.item_id in state.overrides:
                    continue  # a conflict or a held line: the next sync reports it
                if change.after is not None and ScopeRef.of(change.after) == ref:
                    state.base[change.item_id] = Placed.of(change.after)
                else:
                    state.base.pop(change.item_id, None)
        texts = render_scope(ref, state.shown(), state.extras)
        self._write_texts(snap, texts)
        crash_point("api-file-written")
        state.files = {name: digest(text) for name, text in texts.items()}
        state.serial += 1
        self._save_state(state)

    @staticmethod
    def _clean(snap: ScopeSnapshot, state: ScopeState) -> bool:
        # A deleted file counts as clean: it is written again.
        return all(not f.exists or f.sha == state.files.get(name) for name, f in snap.files.items())


def _now(changes: list[ApiChange]) -> datetime:
    return max(c.now for c in changes)


def workspace_of(store: Store) -> FileMirrorStore | None:
    """The files wrapper of a store, if it has one."""
    return store if isinstance(store, FileMirrorStore) else None


def file_handlers(store: Store) -> dict[type, tuple[Callable[[Any], Any], Callable[[Any], Awaitable[Any]]]]:
    """The runtime's (sync, async) handlers of :class:`~jiyi.files.ops.FileOp` effects for
    ``store``: its files wrapper runs them (async: in a worker thread); none without one."""
    mirror = workspace_of(store)
    if mirror is None:
        return {}

    async def in_thread(op: FileOp[Any]) -> Any:
        return await asyncio.to_thread(mirror.run_file_op, op)

    return {FileOp: (mirror.run_file_op, in_thread)}
