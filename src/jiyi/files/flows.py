"""The sync as flows (over a :class:`~jiyi.runtime.Runtime`): read the files,
read the scope's items, merge three ways, apply the person's edits through the Memory
API (``update``, ``delete``, ``add`` with the write gate; history actor ``files``), then
write the files. File I/O is yielded as operations the files wrapper runs."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from jiyi.effects import Flow, call
from jiyi.errors import ConfigError, InvalidInput
from jiyi.files.disk import OnDisk
from jiyi.files.document import Extras
from jiyi.files.layout import FILE_NAMES, FILES_ACTOR, MEMORY_FILE, ScopeRef, is_file_memory
from jiyi.files.merge import Action, Applied, Known, Prefer, finish_sync, plan_sync, preview
from jiyi.files.mirror import workspace_of
from jiyi.files.ops import (
    BeginIntent,
    ClaimIntents,
    CommitScope,
    EndIntents,
    ReadScope,
    ScanScopes,
    ScopeSnapshot,
    WorkspaceRoot,
    scope_items,
)
from jiyi.files.parse import ScopeParse, parse_scope
from jiyi.files.render import render_file
from jiyi.files.report import FileError, ReportBuilder, SyncReport
from jiyi.items import delete, update
from jiyi.model import MAX_ID_LENGTH, MemoryItem, Scope, Status
from jiyi.runtime import Runtime
from jiyi.store.base import Filter, GetHistory, GetItems, ListItems
from jiyi.write.pipeline import add

if TYPE_CHECKING:
    pass

ATTEMPTS = 4  # commits retried when an API write or another sync touched the files meanwhile


def _check_files(rt: Runtime) -> None:
    if workspace_of(rt.store) is None:
        raise ConfigError(
            "this Memory keeps no files: open it with files=DIR (e.g. Memory.open(path, files='memories')) "
            "or run `jiyi sync --files DIR`"
        )


def _check_id(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string", field=name)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{name} must be at most {MAX_ID_LENGTH} characters", field=name)
    return value


def _explicit_scopes(tenant: str, ids: dict[Scope, str | None]) -> list[ScopeRef]:
    return [
        ScopeRef(tenant, scope, _check_id(value, f"{scope.value}_id"))
        for scope, value in ids.items()
        if value is not None
    ]


def sync_files(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    prefer: Prefer = None,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Flow[SyncReport]:
    """Merge each scope's memory.md / learnings.md with the database, three ways.

    A person's edits go to the database (changed text is re-embedded, a line moved
    to another section changes the type, a deleted line archives, a new line is added
    through the write gate); database changes go to the files. A memory changed
    differently on both sides is a *conflict*: reported, neither side overwritten,
    reported again until the line is edited to match or ``prefer="file"`` /
    ``prefer="db"`` picks a side. Malformed lines are reported with line numbers and
    kept. Without scope ids, every scope of the tenant that has memories or files is
    synced. ``dry_run=True`` reports what would change and writes nothing.
    ``progress(done, total)`` is called after each scope.
    """
    _check_files(rt)
    if prefer not in (None, "file", "db"):
        raise InvalidInput(f"prefer must be 'file', 'db' or None, not {prefer!r}", field="prefer")
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run must be true or false", field="dry_run")
    tenant = _check_id(tenant_id, "tenant_id") if tenant_id is not None else rt.tenant_id
    refs = _explicit_scopes(
        tenant,
        {
            Scope.USER: user_id,
            Scope.PROJECT: project_id,
            Scope.SESSION: session_id,
            Scope.AGENT: agent_id,
        },
    )
    report = ReportBuilder((yield from call(WorkspaceRoot())), dry_run)
    if not refs:
        refs = yield from _tenant_scopes(rt, tenant, report)
    for done, ref in enumerate(refs, 1):
        yield from _sync_scope(rt, ref, prefer, dry_run, report)
        if progress is not None:
            progress(done, len(refs))
    return report.build()


def recover_files(rt: Runtime, /) -> Flow[SyncReport]:
    """Finish what a crash interrupted: sync the scopes named by intents that dead
    processes left in the journal (no database scan). Runs by itself when a Memory
    is opened with ``files=``; returns an empty report when there is nothing to do."""
    _check_files(rt)
    report = ReportBuilder((yield from call(WorkspaceRoot())), False)
    intents = yield from call(ClaimIntents())
    if not intents:
        return report.build()
    scopes: dict[ScopeRef, Prefer] = {}
    for intent in intents:
        for ref in intent.refs:
            # A crashed `sync --prefer` finishes as asked; the other intents just sync.
            wanted: Prefer = "file" if intent.prefer == "file" else "db" if intent.prefer == "db" else None
            scopes[ref] = scopes.get(ref) or wanted
    failed: set[ScopeRef] = set()
    try:
        for ref, prefer in sorted(scopes.items()):
            ok = yield from _sync_scope(rt, ref, prefer, False, report)
            if not ok:
                failed.add(ref)
    except Exception:
        yield from call(EndIntents(tuple(intents), done=False))
        raise
    done = tuple(i for i in intents if not failed.intersection(i.refs))
    kept = tuple(i for i in intents if failed.intersection(i.refs))
    yield from call(EndIntents(done))
    if kept:
        yield from call(EndIntents(kept, done=False))
    return report.build()


def _tenant_scopes(rt: Runtime, tenant: str, report: ReportBuilder) -> Flow[list[ScopeRef]]:
    """Every scope with memories the files hold, or with files or state on disk."""
    now = rt.now()
    found: set[ScopeRef] = set()
    flt = Filter(tenant_id=tenant, statuses=(Status.ACTIVE,), now=now)
    cursor: str | None = None
    while True:
        page = yield from call(ListItems(flt, limit=1000, cursor=cursor))
        found.update(ScopeRef.of(i) for i in page.items if is_file_memory(i, now))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    on_disk, odd = yield from call(ScanScopes(tenant))
    found.update(on_disk)
    for path, why in odd:
        report.errors.append(FileError(path, None, why))
    return sorted(found)


def _texts_for_parse(snap: ScopeSnapshot) -> dict[str, str | None]:
    """Each file's text; a deleted file counts as unchanged (it is written again: deleting
    a whole file never archives its memories), a missing one never written is skipped."""
    texts: dict[str, str | None] = {}
    state = snap.state
    for name in FILE_NAMES:
        disk: OnDisk = snap.files[name]
        if disk.exists:
            texts[name] = disk.text
        elif state is not None and state.files.get(name) is not None:
            texts[name] = render_file(name, snap.ref, state.shown(), state.extras.get(name) or Extras())
    return texts


def _lookup(
    rt: Runtime, ref: ScopeRef, parse: ScopeParse, visible: dict[str, MemoryItem]
) -> Flow[dict[str, Known]]:
    """What the database knows of ids the files show that the scope's items lack."""
    ids = tuple(sorted(i for i in parse.by_id if i not in visible))
    if not ids:
        return {}
    found = {i.id: i for i in (yield from call(GetItems(ref.tenant_id, ids)))}
    known: dict[str, Known] = {}
    for item_id in ids:
        if item_id in found:
            known[item_id] = Known(found[item_id])
        else:
            events = yield from call(GetHistory(ref.tenant_id, item_id))
            known[item_id] = Known(None, purged=bool(events))
    return known


def _apply(rt: Runtime, ref: ScopeRef, action: Action, rel: Callable[[str], str]) -> Flow[Applied]:
    """Run one database action through the Memory API; a refusal is an outcome, not a failure."""
    try:
        target = action.item_id or ""  # updates and archives always name their item
        if action.kind in ("update", "restore"):
            item = yield from update(
                rt,
                target,
                tenant_id=ref.tenant_id,
                reason=action.reason,
                actor=FILES_ACTOR,
                **dict(action.changes),
            )
            return Applied(item)
        if action.kind == "archive":
            item = yield from delete(
                rt, target, tenant_id=ref.tenant_id, reason=action.reason, actor=FILES_ACTOR
            )
            return Applied(item)
        assert action.line is not None
        entry = action.line.entry
        result = yield from add(
            rt,
            entry.text,
            memory_type=entry.memory_type,
            tenant_id=ref.tenant_id,
            source_id=rel(action.line.file)[:MAX_ID_LENGTH],
            actor=FILES_ACTOR,
            scope=ref.scope,
            **{f"{ref.scope.value}_id": ref.scope_id},  # type: ignore[arg-type]  # one scope id
        )
        return Applied(result.item, result.decision)
    except InvalidInput as exc:  # the gate refused the text, or the memory is gone
        return Applied(error=str(exc))


def _sync_scope(
    rt: Runtime, ref: ScopeRef, prefer: Prefer, dry_run: bool, report: ReportBuilder
) -> Generator[Any, Any, bool]:
    """Sync one scope; True when its files were committed (or nothing needed writing)."""
    report.scopes.append(ref.key if ref.tenant_id == rt.tenant_id else f"{ref.tenant_id}/{ref.key}")
    ws = workspace_of(rt.store)
    assert ws is not None

    def rel(name: str) -> str:
        return ws.workspace.relative(ref, name)

    intent = None
    applied = []
    committed = False
    try:
        for _ in range(ATTEMPTS):
            now = rt.now()
            snap = yield from call(ReadScope(ref))
            items = yield from scope_items(ref, now)
            visible = {i.id: i for i in items}
            parse = parse_scope(_texts_for_parse(snap))
            known = yield from _lookup(rt, ref, parse, visible)
            plan = plan_sync(
                ref, parse, snap.state, visible, known, prefer=prefer, now=now, gate=rt.gate, rel=rel
            )
            if dry_run:
                changes, refused = preview(plan)
                report.changes.extend([*changes, *plan.changes])
                report.conflicts.extend(plan.conflicts)
                report.errors.extend([*plan.errors, *refused])
                return True
            if plan.actions and intent is None:
                intent = yield from call(BeginIntent((ref,), prefer))
            results = []
            for action in plan.actions:
                results.append((action, (yield from _apply(rt, ref, action, rel))))
            files_exist = any(f.exists for f in snap.files.values())
            done = finish_sync(plan, results, snap.state, now=now, files_exist=files_exist)
            applied.extend(done.changes)
            commit = yield from call(
                CommitScope(ref, snap.fingerprint, tuple(done.texts.items()), done.state)
            )
            if commit.ok:
                committed = True
                report.changes.extend([*applied, *plan.changes])
                report.conflicts.extend(plan.conflicts)
                report.errors.extend([*plan.errors, *done.errors])
                report.written.extend(rel(name) for name in commit.written)
                break
        else:
            report.changes.extend(applied)
            report.errors.append(
                FileError(
                    rel(MEMORY_FILE),
                    None,
                    "the files kept changing while they were being synced; run the sync again",
                )
            )
    except Exception:
        if intent is not None:
            yield from call(EndIntents((intent,), done=False))
        raise
    if intent is not None:
        yield from call(EndIntents((intent,), done=committed))
    return committed
