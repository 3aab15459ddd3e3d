"""Memory items one by one and in bulk: get, list, history, stats, update, delete, reset,
export and import, as flows over a :class:`~jiyi.runtime.Runtime`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput, NotFound
from jiyi.model import (
    DECOMPOSITION,
    EPISODE_TAG,
    FAILURE,
    PROFILE_TAG,
    RESOURCE_TAG,
    SKILL,
    TURN_TAG,
    MemoryItem,
    MemoryType,
    RelationType,
    Status,
    invalid_from_pydantic,
)
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.store.base import (
    Change,
    Filter,
    ForgetAccesses,
    GetHistory,
    GetItems,
    GetStats,
    HistoryAction,
    HistoryEvent,
    ListItems,
    MemoryAccess,
    Page,
    Purge,
    RecordAccess,
    StoreStats,
    Upsert,
    Viewer,
    Write,
    history_event,
)
from jiyi.text.tokenize import index_text
from jiyi.validate import MAX_LIMIT, Problems, check_limit, check_text, enum_tuple, infer_scope, scope_keys
from jiyi.write.gate import GateDecision, screen, scrub, scrub_fields

IMPORT_BATCH = 256
SELF_DESCRIBED = frozenset({SKILL, FAILURE, DECOMPOSITION})
"""``structured["kind"]`` of procedural records: their structure is the record itself (the
workflow, counts), not something read off the text, so a wording change keeps it."""


RETRIEVAL_RECORD = "retrieval"
"""The key of an exported retrieval log entry (``export(retrievals=True)``)."""


@dataclass(frozen=True)
class ImportResult:
    imported: int
    embedded: int
    retrievals: int = 0
    """Retrieval log entries put back (records ``{"retrieval": {...}}``)."""
    replaced: int = 0
    """Of ``imported``, the records whose id the store already held: that memory now reads
    as the record says (importing one export twice stores nothing twice)."""


def last_snapshot(events: Sequence[HistoryEvent]) -> MemoryItem | None:
    """The item as the newest readable snapshot of its history shows it (None if none is)."""
    for event in reversed(events):
        snapshot = event.after or event.before
        if snapshot is not None:
            try:
                return MemoryItem.model_validate(snapshot)
            except ValidationError:
                continue
    return None


def change_event(
    rt: Runtime,
    action: HistoryAction,
    before: MemoryItem | None,
    after: MemoryItem | None,
    reason: str,
    actor: str | None,
) -> HistoryEvent:
    # A reason may quote what someone said ("re-confirmed by: ...", a caller's reason).
    subject = after or before
    reason = scrub(rt.gate, subject.tenant_id if subject is not None else None, reason)
    return history_event(action, before, after, reason=reason, at=rt.now(), actor=actor)


def require(
    rt: Runtime, item_id: str, tenant_id: str | None, viewer: Viewer | None = None
) -> Flow[MemoryItem]:
    check_text(item_id, "id")
    found = yield from call(GetItems(rt.tenant(tenant_id), (item_id,)))
    # An item the viewer may not see answers exactly like one that does not exist.
    if not found or (viewer is not None and not viewer.sees(found[0])):
        raise NotFound(f"no memory with id {item_id!r}", item_id=item_id)
    return found[0]


def all_items(rt: Runtime, flt: Filter) -> Flow[list[MemoryItem]]:
    """Every item the filter matches, following the cursor page by page."""
    items: list[MemoryItem] = []
    cursor: str | None = None
    while True:
        page = yield from call(ListItems(flt, limit=MAX_LIMIT, cursor=cursor))
        items.extend(page.items)
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


def get(
    rt: Runtime, item_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[MemoryItem]:
    """One memory by id; :class:`~jiyi.errors.NotFound` if this tenant has none (or
    none that ``viewer`` may see)."""
    return (yield from require(rt, item_id, tenant_id, viewer))


def _hidden_turns(include_turns: bool, tags: Sequence[str]) -> tuple[str, ...]:
    """Tags left out of lists and counts unless asked for: raw turns (unless
    ``include_turns``) and the profile items of explicit profile edits, which are how
    :mod:`jiyi.profile` keeps its fields and history, not memories of their own."""
    hidden = () if include_turns or TURN_TAG in tags else (TURN_TAG,)
    return hidden if PROFILE_TAG in tags else (*hidden, PROFILE_TAG)


def list_page(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    memory_types: Iterable[MemoryType | str] | MemoryType | str | None = None,
    statuses: Iterable[Status | str] | Status | str | None = None,
    tags: Sequence[str] = (),
    include_expired: bool = True,
    limit: int = 50,
    cursor: str | None = None,
    newest_first: bool = False,
    viewer: Viewer | None = None,
    include_turns: bool = False,
) -> Flow[Page]:
    """Memories in creation order, ``limit`` at a time; pass ``page.next_cursor`` to go on.

    Without scope ids, every scope of the tenant is listed. All statuses unless given.
    ``viewer`` hides project memories it may not see. The raw turns ``remember()`` keeps
    (the resource layer) are left out unless ``include_turns`` or ``tags`` asks for them:
    they are what was said, not what is known, and would drown the list. So is the item
    holding a user's or project's explicitly set profile fields (``tags=["profile"]``
    lists it): read it with ``profile()``.
    """
    problems = Problems()
    problems.check(check_limit, limit)
    problems.check(scope_keys, user_id, project_id, session_id, agent_id)
    problems.check(enum_tuple, MemoryType, memory_types, "memory_types")
    problems.check(enum_tuple, Status, statuses, "statuses")
    problems.raise_any()
    flt = Filter(
        tenant_id=rt.tenant(tenant_id),
        scope_keys=scope_keys(user_id, project_id, session_id, agent_id),
        memory_types=enum_tuple(MemoryType, memory_types, "memory_types"),
        statuses=enum_tuple(Status, statuses, "statuses"),
        tags=tuple(tags),
        without_tags=_hidden_turns(include_turns, tags),
        include_expired=include_expired,
        now=rt.now(),
        viewer=viewer,
    )
    return (yield from call(ListItems(flt, limit=limit, cursor=cursor, descending=newest_first)))


def history(
    rt: Runtime, /, item_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[list[HistoryEvent]]:
    """Every recorded change of one memory, oldest first (kept after a hard delete).

    With a ``viewer``, the whole history is shown when the item as it is now (after a
    hard delete: as it last was) is visible to it, else :class:`NotFound`."""
    check_text(item_id, "id")
    tenant = rt.tenant(tenant_id)
    events = yield from call(GetHistory(tenant, item_id))
    if events and viewer is not None and not viewer.sees_all:
        current = yield from call(GetItems(tenant, (item_id,)))
        latest = current[0] if current else last_snapshot(events)
        if latest is None or not viewer.sees(latest):
            events = []
    if not events:
        raise NotFound(f"no memory with id {item_id!r}", item_id=item_id)
    return events


def stats(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    include_turns: bool = False,
) -> Flow[StoreStats]:
    """Counts by type, scope and status, with average confidence and importance
    (of the memories ``viewer`` may see, when given); raw turns only with ``include_turns``."""
    flt = Filter(
        tenant_id=rt.tenant(tenant_id),
        scope_keys=scope_keys(user_id, project_id, session_id, agent_id),
        without_tags=_hidden_turns(include_turns, ()),
        statuses=(),
        include_expired=True,
        viewer=viewer,
    )
    return (yield from call(GetStats(flt)))


def update(
    rt: Runtime,
    /,
    item_id: str,
    *,
    tenant_id: str | None = None,
    reason: str = "",
    actor: str | None = None,
    viewer: Viewer | None = None,
    **changes: Any,
) -> Flow[MemoryItem]:
    """Change fields of a memory; the version goes up and the old one stays in history.

    Changing ``content`` re-embeds and re-indexes the item. ``id``, ``tenant_id``,
    ``created_at`` and ``version`` cannot be changed. An item ``viewer`` may not see
    is :class:`NotFound`.
    """
    frozen = {"id", "tenant_id", "created_at", "version"} & changes.keys()
    if frozen:
        raise InvalidInput(f"cannot change {', '.join(sorted(frozen))}", field=sorted(frozen)[0])
    unknown = set(changes) - set(MemoryItem.model_fields)
    if unknown:
        raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    if not changes:
        raise InvalidInput("nothing to update: pass at least one field to change")
    old = yield from require(rt, item_id, tenant_id, viewer)
    if "content" in changes:
        content = check_text(changes["content"], "content")
        checked = screen(content, changes.get("confidence", old.confidence), rt.gate, old.tenant_id)
        if isinstance(checked, GateDecision):
            raise InvalidInput(f"content refused: {'; '.join(checked.reasons)}", field="content")
        changes["content"] = checked.text
    changes = scrub_fields(rt.gate, old.tenant_id, changes)  # raw, summary, structured, metadata, tags
    reworded = "structured" not in changes and changes.get("content", old.content) != old.content
    if reworded and old.structured and old.structured.get("kind") in SELF_DESCRIBED:
        # A learning's text is its record written out (learnings.md grammar): read the
        # new text back into the record suggest() uses, or refuse it with the reason.
        from jiyi.files.learnings import parse_learning

        parsed = parse_learning(old, changes["content"], redact_pii=rt.gate.redaction(old.tenant_id))
        changes["content"], changes["structured"] = parsed.content, parsed.structured
        if parsed.importance is not None and "importance" not in changes:
            changes["importance"] = parsed.importance
    elif reworded and old.structured:
        # What was extracted from the old wording no longer describes the new one (a
        # profile would keep reading 前端 after a person wrote 后端).
        changes["structured"] = None
    new = old.evolve(**changes, version=old.version + 1, updated_at=rt.now())
    vector, cache_put = None, None
    if new.content != old.content:
        vectors, cache_put = yield from embed_memories(rt, [new.content])
        vector = vectors[0]
    action = (
        HistoryAction.ARCHIVE
        if new.status == Status.ARCHIVED and old.status != Status.ARCHIVED
        else (
            HistoryAction.RESTORE
            if old.status != Status.ACTIVE and new.status == Status.ACTIVE
            else HistoryAction.UPDATE
        )
    )
    upsert = Upsert(
        new,
        index_text(new.content),
        change_event(rt, action, old, new, reason or f"updated {', '.join(sorted(changes))}", actor),
        vector=vector,
        model_id=rt.embedder.model_id if vector is not None else None,
    )
    yield from call(Write((cache_put, upsert) if cache_put else (upsert,)))
    return new


def delete(
    rt: Runtime,
    item_id: str,
    *,
    hard: bool = False,
    reason: str = "",
    with_sources: bool = False,
    tenant_id: str | None = None,
    actor: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[MemoryItem]:
    """Soft delete archives the memory (reversible with ``update(status="active")``);
    ``hard=True`` purges it. Both are recorded in the history. Returns the item as it was.
    An item ``viewer`` may not see is :class:`NotFound`.

    A memory taken from a conversation still has its words in the turn it came from and in
    the summary of that session, which a search finds as well. ``with_sources=True``
    archives or purges those too (:func:`holders` lists them), in the same write: what the user asked
    to forget then answers no search."""
    old = yield from require(rt, item_id, tenant_id, viewer)
    also = (yield from _holders(rt, old, viewer)) if with_sources else []
    why = reason or ("purged on request" if hard else "archived on request")
    changes: list[Change] = []
    shown = old
    for item in (old, *also):
        said = why if item is old else f"{why}, with {old.id}, whose words it holds"
        rest = _without_quote(item, old.content) if item is not old else None
        if rest is not None:
            # A session's summary says more than this memory: only the lines quoting it go.
            new = item.evolve(
                content=rest,
                summary=rest if item.summary else None,
                version=item.version + 1,
                updated_at=rt.now(),
            )
            vectors, put = yield from embed_memories(rt, [rest])
            event = change_event(
                rt, HistoryAction.UPDATE, item, new, f"{said}: the lines quoting it left out", actor
            )
            upsert = Upsert(new, index_text(rest), event, vector=vectors[0], model_id=rt.embedder.model_id)
            changes += [put, upsert] if put is not None else [upsert]
            continue
        if hard:
            event = change_event(rt, HistoryAction.PURGE, item, None, said, actor)
            changes.append(Purge(item.tenant_id, item.id, event))
        elif item.status != Status.ARCHIVED:
            new = item.evolve(status=Status.ARCHIVED, version=item.version + 1, updated_at=rt.now())
            event = change_event(rt, HistoryAction.ARCHIVE, item, new, said, actor)
            changes.append(Upsert(new, index_text(new.content), event))
            shown = new if item is old else shown
    if changes:
        yield from call(Write(tuple(changes)))
    return shown


def _without_quote(item: MemoryItem, quoted: str) -> str | None:
    """A session summary's text without its lines that quote ``quoted``; None when it is no
    summary, or when nothing else would be left (then it goes whole)."""
    if EPISODE_TAG not in item.tags:
        return None
    kept = [line for line in item.content.splitlines() if quoted not in line and line.strip()]
    return "\n".join(kept) if kept else None


def holders(
    rt: Runtime, item_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[list[MemoryItem]]:
    """The memories besides ``item_id`` that hold its words: the turns or document chunks it
    was taken from (its ``derived_from`` relations, where those are kept as said) and the
    summaries (episodes) of its session that quote it. ``delete(..., with_sources=True)``
    deletes them with it."""
    item = yield from require(rt, item_id, tenant_id, viewer)
    return (yield from _holders(rt, item, viewer))


def _holders(rt: Runtime, item: MemoryItem, viewer: Viewer | None) -> Flow[list[MemoryItem]]:
    sources = tuple(r.target_id for r in item.relations if r.type == RelationType.DERIVED_FROM)
    found = list((yield from call(GetItems(item.tenant_id, sources)))) if sources else []
    out = [f for f in found if RESOURCE_TAG in f.tags and (viewer is None or viewer.sees(f))]
    if item.session_id is not None and item.content.strip():
        flt = Filter(
            tenant_id=item.tenant_id,
            scope_keys=(item.scope_key,),
            tags=(EPISODE_TAG,),
            statuses=(),
            include_expired=True,
            viewer=viewer,
        )
        episodes = yield from all_items(rt, flt)
        out += [e for e in episodes if e.session_id == item.session_id and item.content in e.content]
    return list({h.id: h for h in out if h.id != item.id}.values())


def reset(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    actor: str | None = None,
) -> Flow[int]:
    """Purge every memory in the given scopes (at least one is required). Audited.

    The retrieval log forgets them too: a purged memory's served rows go, and with
    ``user_id`` every access made for that user (the right to be forgotten)."""
    keys = scope_keys(user_id, project_id, session_id, agent_id)
    if not keys:
        raise InvalidInput("reset needs at least one scope id; it never wipes a whole tenant by accident")
    flt = Filter(tenant_id=rt.tenant(tenant_id), scope_keys=keys, statuses=(), include_expired=True)
    reason = f"scoped reset of {', '.join(keys)}"
    items = yield from all_items(rt, flt)
    changes: list[Purge | ForgetAccesses] = [
        Purge(item.tenant_id, item.id, change_event(rt, HistoryAction.RESET, item, None, reason, actor))
        for item in items
    ]
    purged = len(changes)
    if user_id is not None:
        changes.append(ForgetAccesses(flt.tenant_id, user_id=user_id))
    if changes:
        yield from call(Write(tuple(changes)))
    return purged


def export(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    retrievals: bool = False,
) -> Flow[list[dict[str, Any]]]:
    """Every memory (all statuses) as JSON-ready dicts with every field (only those
    ``viewer`` may see, when given).

    With ``retrievals=True`` the retrieval log follows the memories, one record per
    access, ``{"retrieval": {...}}`` (:meth:`~jiyi.store.base.MemoryAccess.to_json_dict`;
    the accesses made for the given owner ids, as ``viewer`` may see them);
    :func:`import_items` puts such records back into the log."""
    flt = Filter(
        tenant_id=rt.tenant(tenant_id),
        scope_keys=scope_keys(user_id, project_id, session_id, agent_id),
        statuses=(),
        include_expired=True,
        viewer=viewer,
    )
    items = yield from all_items(rt, flt)
    rows = [item.to_json_dict() for item in items]
    if retrievals:
        # Imported here: the retrieval log's flows use this module's require().
        from jiyi.read.retrievals import retrievals as log_page

        cursor: str | None = None
        logged: list[MemoryAccess] = []
        while True:
            page = yield from log_page(
                rt,
                user_id=user_id,
                project_id=project_id,
                session_id=session_id,
                agent_id=agent_id,
                tenant_id=flt.tenant_id,
                viewer=viewer,
                limit=MAX_LIMIT,
                cursor=cursor,
            )
            logged += page.accesses
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        rows += [{RETRIEVAL_RECORD: a.to_json_dict()} for a in reversed(logged)]  # oldest first
    return rows


def import_items(
    rt: Runtime,
    /,
    records: Iterable[Mapping[str, Any]],
    *,
    tenant_id: str | None = None,
    actor: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    trusted: bool = False,
) -> Flow[ImportResult]:
    """Load memories (no gate: this restores, it does not extract).

    Sensitive data is redacted from every text field (content, raw, summary, structured,
    metadata, tags) as the tenant's policy says, unless ``trusted=True``: a restore of
    jiyi's own export, kept verbatim.

    Every record is validated before anything is written, and everything is written
    in one transaction: a bad record or a failure leaves the store unchanged.
    Records need ``content``, ``memory_type`` and a scope id (``user_id`` ...);
    the other fields are optional and kept when present (an export round-trips).
    Records ``{"retrieval": {...}}`` (``export(retrievals=True)``) go back into the
    retrieval log; an access already logged is left as it is.
    ``progress(done, total)`` is called as embedding proceeds.
    """
    items: list[MemoryItem] = []
    accesses: list[MemoryAccess] = []
    now = rt.now()
    for number, record in enumerate(records, start=1):
        if not isinstance(record, Mapping):
            raise InvalidInput(f"record {number}: expected an object, got {type(record).__name__}")
        if RETRIEVAL_RECORD in record:
            accesses.append(_imported_access(rt, number, record[RETRIEVAL_RECORD], tenant_id, trusted))
        else:
            items.append(_imported_item(rt, number, record, tenant_id, now, trusted))
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInput(f"id {dup!r} appears more than once in the import", field="id")
    replaced = 0
    by_tenant: dict[str, list[str]] = {}
    for item in items:
        by_tenant.setdefault(item.tenant_id, []).append(item.id)
    for tenant, tenant_ids in by_tenant.items():
        for start in range(0, len(tenant_ids), MAX_LIMIT):
            replaced += len((yield from call(GetItems(tenant, tuple(tenant_ids[start : start + MAX_LIMIT])))))
    changes: list[Any] = []
    embedded = 0
    for start in range(0, len(items), IMPORT_BATCH):
        batch = items[start : start + IMPORT_BATCH]
        vectors, cache_put = yield from embed_memories(rt, [i.content for i in batch])
        embedded += len(batch)
        if cache_put:
            changes.append(cache_put)
        for item, vector in zip(batch, vectors, strict=True):
            event = change_event(rt, HistoryAction.IMPORT, None, item, "imported", actor)
            changes.append(
                Upsert(item, index_text(item.content), event, vector=vector, model_id=rt.embedder.model_id)
            )
        if progress:
            progress(embedded, len(items))
    changes += [RecordAccess(a) for a in accesses]
    if changes:
        yield from call(Write(tuple(changes)))
    return ImportResult(imported=len(items), embedded=embedded, retrievals=len(accesses), replaced=replaced)


def _imported_item(
    rt: Runtime, number: int, record: Mapping[str, Any], tenant_id: str | None, now: datetime, trusted: bool
) -> MemoryItem:
    data = dict(record)
    # An explicit tenant wins over what the records say (imports cross tenants safely).
    if tenant_id is not None:
        data["tenant_id"] = tenant_id
    else:
        data.setdefault("tenant_id", rt.tenant_id)
    # Records without a time keep the file's order (list() is in creation order).
    data.setdefault("created_at", now + timedelta(microseconds=number))
    data.setdefault("updated_at", data["created_at"])
    if not trusted:
        data = scrub_fields(rt.gate, str(data["tenant_id"]), data)
    if "scope" not in data:
        try:
            data["scope"] = infer_scope(
                None,
                data.get("user_id"),
                data.get("project_id"),
                data.get("session_id"),
                data.get("agent_id"),
            )
        except InvalidInput as exc:
            raise InvalidInput(f"record {number}: {exc}", field=exc.field) from None
    try:
        return MemoryItem.model_validate(data)
    except ValidationError as exc:
        err = invalid_from_pydantic(exc)
        problems = tuple(f"record {number}: {p}" for p in err.problems)
        raise InvalidInput(f"record {number}: {err}", field=err.field, problems=problems) from None


def _imported_access(
    rt: Runtime, number: int, value: Any, tenant_id: str | None, trusted: bool
) -> MemoryAccess:
    """A retrieval log entry of an export, in the import's tenant (its query redacted as
    the tenant's policy says, unless ``trusted``)."""
    try:
        access = MemoryAccess.from_json_dict(value)
    except InvalidInput as exc:
        raise InvalidInput(f"record {number}: {exc}", field=exc.field) from None
    tenant = tenant_id if tenant_id is not None else (access.tenant_id or rt.tenant_id)
    query = access.query if trusted else scrub(rt.gate, tenant, access.query)
    return replace(access, tenant_id=tenant, query=query)
