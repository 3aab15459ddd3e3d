"""A LangGraph ``BaseStore`` backed by jiyi: ``graph.compile(store=JiyiStore(memory))``.

The checkpointer, :class:`JiyiCheckpointSaver` (``graph.compile(checkpointer=...)``),
lives in :mod:`jiyi.integrations.langgraph_checkpoint` and is re-exported here.

LangGraph's long-term memory API (``store.put/get/search/delete/list_namespaces``
inside a node) then reads and writes jiyi memories, so they get jiyi's offline hybrid
(meaning + words, Chinese and English) search, history and export::

    from jiyi import Memory
    from jiyi.integrations.langgraph import JiyiStore

    store = JiyiStore(Memory.open("memory.db"))
    graph = builder.compile(store=store)

How LangGraph items map onto jiyi memories
------------------------------------------
* **Item** ``(namespace, key)`` is one jiyi memory whose id is derived from
  ``(tenant, namespace, key)`` (``"lg-" + sha256``), so a get is one lookup by id.
  ``metadata["lg_namespace"]`` (a list) and ``metadata["lg_key"]`` keep the originals.
* **Namespace** to scope: ``("users"|"user", ID, ...)`` is ``user_id=ID``,
  ``("projects"|"project", ID, ...)`` ``project_id``, ``("agents"|"agent", ID, ...)``
  ``agent_id`` and ``("sessions"|"session"|"threads"|"thread", ID, ...)``
  ``session_id`` (:data:`DEFAULT_SCOPES`; pass ``scopes=`` a table or a callable to
  change it). A namespace of no known shape is the *user* scope named by its labels
  joined with ``/`` (``("prefs",)`` is ``user_id="prefs"``; a joined name longer than
  jiyi's id limit is replaced by a hash), which is how every namespace was filed
  before the table existed. The full namespace is in the metadata, so several
  namespaces of one user (``("users", "u1", "memories")``, ``("users", "u1",
  "prefs")``) share the scope and stay apart. Items carry the tag
  ``"langgraph"`` and one tag per namespace prefix (``"lg-ns:users"``,
  ``"lg-ns:users/alice"``, ...; hashed when longer than a tag may be), which is how a
  prefix is listed without scanning other memories.
* **Value** is stored verbatim in ``structured`` and returned from there. The memory's
  ``content`` (the text jiyi searches) is ``value["content"]`` when that is a
  string, else the fields named by ``index=[...]``, else the value as JSON.
* **Put** stores what it is given, with sensitive data redacted from every string in
  the value (as everywhere in jiyi: ``GateConfig.redact_pii`` and the tenant's policy;
  namespaces and keys are identifiers and kept). The rest of the write gate (length,
  low-value, de-duplication) is for free text an agent *might* want to keep, while a
  LangGraph ``put`` is an explicit write under a key. New keys go through
  ``import_items`` (no gate; validated, audited as "import"); existing keys through
  ``update`` (a new version, the old one kept in the history). When the gate would
  alter or refuse the new text (``update`` screens content), the item is overwritten
  through ``import_items`` instead, keeping its id, ``created_at`` and a higher version.
  ``put(..., None)`` / ``delete`` purge the memory (hard delete, audited).
* **Search** with a ``query`` is jiyi's hybrid search in every namespace under the
  prefix, merged by score; without one it lists the prefix, newest update first.
  ``filter`` is applied to the value's fields (``{"k": v}`` and the operators
  ``$eq $ne $gt $gte $lt $lte``, as LangGraph's own stores do).
* **TTL** (``supports_ttl = True``): ``put(..., ttl=minutes)`` (or ``TTLConfig``'s
  ``default_ttl``) sets the memory's ``expires_at``; an expired item is hidden from
  get, search and ``list_namespaces`` at once and archived by jiyi's maintenance
  (``jiyi maintain``), which is the sweep. A read with ``refresh_ttl`` (LangGraph's
  default, or ``TTLConfig.refresh_on_read``) moves ``expires_at`` to now + ttl (a new
  version, skipped when it would gain less than a tenth of the ttl or a minute).
* **Old data**: ids and tags never depended on the scope, so items written before
  namespaces were mapped (all under ``user_id="users/u1/memories"``) are found by
  get, search and ``list_namespaces`` as before; a ``put`` moves one to its mapped
  scope, and :meth:`JiyiStore.rescope` moves them all.
* **Session** scope ends with its jiyi session: ``end_session(ID)`` archives the
  items of ``("threads", ID, ...)``; map ``threads`` elsewhere with ``scopes=`` if a
  thread's items should outlive it.

:meth:`JiyiStore.batch` runs on a :class:`~jiyi.memory.Memory` or an
:class:`~jiyi.memory.AsyncMemory` through the library's sync driver and
:meth:`JiyiStore.abatch` through its async driver; the mapping is written once, as a
:mod:`jiyi.effects` flow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from jiyi import items
from jiyi.driver import arun, run
from jiyi.effects import Flow
from jiyi.errors import InvalidInput, NotFound, StoreReadOnly
from jiyi.integrations.langgraph_checkpoint import JiyiCheckpointSaver, checkpoint_session_id
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MAX_ID_LENGTH, MemoryItem, Status, as_utc, owner_scope
from jiyi.read import search as search_flows
from jiyi.runtime import Runtime
from jiyi.validate import MAX_LIMIT
from jiyi.write.gate import Screened, screen, scrub

__all__ = ["DEFAULT_SCOPES", "JiyiCheckpointSaver", "JiyiStore", "checkpoint_session_id", "scope_of"]

TAG: Final = "langgraph"
NS_TAG_PREFIX: Final = "lg-ns:"
MAX_TAG: Final = 100
TTL_KEY: Final = "lg_ttl"
SCOPE_FIELDS: Final = ("user_id", "project_id", "agent_id", "session_id")

DEFAULT_SCOPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "users": "user_id",
        "user": "user_id",
        "projects": "project_id",
        "project": "project_id",
        "agents": "agent_id",
        "agent": "agent_id",
        "sessions": "session_id",
        "session": "session_id",
        "threads": "session_id",
        "thread": "session_id",
    }
)
"""First label of a namespace -> the jiyi scope id its second label is."""

ScopeMap: TypeAlias = Mapping[str, str] | Callable[[tuple[str, ...]], Mapping[str, str] | None]
"""A table like :data:`DEFAULT_SCOPES`, or a callable from a namespace to scope ids
(``{"user_id": ..., "project_id": ...}``) or None for the default filing."""


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def item_id(tenant_id: str, namespace: tuple[str, ...], key: str) -> str:
    """The jiyi id of LangGraph item ``(namespace, key)`` for a tenant."""
    return "lg-" + _digest(tenant_id, list(namespace), key)[:40]


def scope_id(namespace: tuple[str, ...]) -> str:
    """The jiyi ``user_id`` a namespace of no known shape is stored under (its labels
    joined with ``/``); before namespaces were mapped, every namespace was."""
    joined = "/".join(namespace)
    return joined if len(joined) <= MAX_ID_LENGTH else "lg-ns-" + _digest(list(namespace))[:40]


def _check_table(table: Mapping[str, str]) -> Mapping[str, str]:
    for label, field in table.items():
        if not isinstance(label, str) or field not in SCOPE_FIELDS:
            raise InvalidInput(
                f"scopes: {label!r} -> {field!r}; map a namespace label to one of {', '.join(SCOPE_FIELDS)}",
                field="scopes",
            )
    return MappingProxyType(dict(table))


def _checked_ids(namespace: tuple[str, ...], ids: object) -> dict[str, str]:
    if not isinstance(ids, Mapping) or not ids:
        raise InvalidInput(
            f"scopes({namespace!r}) returned {ids!r}; expected a non-empty mapping of scope ids or None",
            field="scopes",
        )
    out: dict[str, str] = {}
    for field, value in ids.items():
        if field not in SCOPE_FIELDS:
            raise InvalidInput(f"scopes({namespace!r}): unknown scope id {field!r}", field="scopes")
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_LENGTH:
            raise InvalidInput(
                f"scopes({namespace!r}): {field} must be a non-empty string of at most {MAX_ID_LENGTH}",
                field="scopes",
            )
        out[field] = value
    return out


def scope_of(namespace: tuple[str, ...], scopes: ScopeMap = DEFAULT_SCOPES) -> dict[str, str]:
    """The jiyi scope ids (``user_id`` ...) namespace ``namespace`` is filed under."""
    if callable(scopes):
        got = scopes(namespace)
        return {"user_id": scope_id(namespace)} if got is None else _checked_ids(namespace, got)
    if len(namespace) >= 2 and namespace[0] in scopes:
        ident = namespace[1]
        if ident.strip() and len(ident) <= MAX_ID_LENGTH:
            return {scopes[namespace[0]]: ident}
    return {"user_id": scope_id(namespace)}


def _scope_fields(ids: Mapping[str, str]) -> dict[str, Any]:
    """Every scope field of a record: the given ids, the others cleared, and the scope."""
    fields: dict[str, Any] = {f: ids.get(f) for f in SCOPE_FIELDS}
    fields["scope"] = owner_scope(
        ids.get("user_id"), ids.get("project_id"), ids.get("agent_id"), ids.get("session_id")
    ).value
    return fields


def _ttl_minutes(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0 or ttl == float("inf"):
        raise InvalidInput(f"ttl must be a positive number of minutes or None, got {ttl!r}", field="ttl")
    return float(ttl)


def _expired(item: MemoryItem, now: datetime) -> bool:
    return item.expires_at is not None and as_utc(item.expires_at) <= now


def namespace_tag(prefix: tuple[str, ...]) -> str:
    """The tag every item at or below namespace ``prefix`` carries (``"langgraph"`` for ``()``)."""
    if not prefix:
        return TAG
    tag = NS_TAG_PREFIX + "/".join(prefix)
    return tag if len(tag) <= MAX_TAG else NS_TAG_PREFIX + "#" + _digest(list(prefix))[:40]


def _search_text(value: Mapping[str, Any], index: Sequence[str] | bool | None) -> str:
    content = value.get("content")
    if isinstance(content, str) and content.strip():
        return content.strip()
    if isinstance(index, list | tuple) and index:
        parts = [_field_text(value.get(field)) for field in index]
        text = "\n".join(p for p in parts if p)
        if text.strip():
            return text.strip()
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise InvalidInput(f"unsupported filter operator {op!r}", field="filter")


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    return not flt or all(_compare(value.get(k), v) for k, v in flt.items())


def _does_match(cond: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(namespace) < len(path):
        return False
    if cond.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif cond.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInput(f"unsupported match type {cond.match_type!r}", field="match_type")
    return all(p == "*" or n == p for n, p in pairs)


def _namespace_of(item: MemoryItem) -> tuple[str, ...] | None:
    ns = item.metadata.get("lg_namespace")
    if isinstance(ns, list) and all(isinstance(x, str) for x in ns):
        return tuple(ns)
    return None


def _value_of(item: MemoryItem) -> dict[str, Any]:
    return dict(item.structured or {})


def _current(item: MemoryItem, name: str) -> Any:
    value = getattr(item, name)
    if name == "scope":
        return value.value
    if name == "expires_at" and value is not None:
        return as_utc(value)
    return value


def _jsonable(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in record.items()}


def _screens_as_is(store: JiyiStore, content: str, old: MemoryItem) -> bool:
    """Whether update() would keep ``content`` unchanged (the gate neither refuses nor rewrites it)."""
    checked = screen(content, old.confidence, store.rt.gate, store.tenant_id)
    return isinstance(checked, Screened) and checked.text == content


class JiyiStore(BaseStore):
    """LangGraph's ``BaseStore`` over a jiyi :class:`Memory` (or :class:`AsyncMemory`).

    ``tenant_id`` picks the jiyi tenant (default: the memory's own). See the module
    documentation for how namespaces, keys and values are stored.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: Memory | AsyncMemory,
        *,
        tenant_id: str | None = None,
        scopes: ScopeMap = DEFAULT_SCOPES,
        ttl: TTLConfig | None = None,
    ) -> None:
        self.memory = memory
        self.rt: Runtime = memory.runtime
        self.tenant_id: str = tenant_id or self.rt.tenant_id
        if not callable(scopes) and not isinstance(scopes, Mapping):
            raise InvalidInput(
                "scopes must be a mapping of labels to scope ids or a callable", field="scopes"
            )
        self.scopes: ScopeMap = scopes if callable(scopes) else _check_table(scopes)
        if ttl is not None:
            if ttl.get("sweep_interval_minutes"):
                raise InvalidInput(
                    "sweep_interval_minutes: JiyiStore has no sweeper; expired items are hidden at "
                    "once and archived by jiyi's maintenance (jiyi maintain)",
                    field="ttl",
                )
            _ttl_minutes(ttl.get("default_ttl"))
        self.ttl_config = ttl

    def rescope(self) -> int:
        """Move every item of this tenant filed under another scope than ``scopes`` says
        (written before namespaces were mapped, or under another table) to its mapped
        scope; returns how many moved."""
        return run(self._rescope(), self.rt)

    async def arescope(self) -> int:
        """:meth:`rescope` through the async driver."""
        return await arun(self._rescope(), self.rt)

    # ------------------------------------------------------------ drivers

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run(self._batch(list(ops)), self.rt)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await arun(self._batch(list(ops)), self.rt)

    # ------------------------------------------------------------ the mapping, once

    def _batch(self, ops: list[Op]) -> Flow[list[Result]]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(op)))
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                raise InvalidInput(f"unknown store operation: {type(op).__name__}")
        return results

    def _load(self, namespace: tuple[str, ...], key: str) -> Flow[MemoryItem | None]:
        try:
            item = yield from items.get(
                self.rt, item_id(self.tenant_id, namespace, key), tenant_id=self.tenant_id
            )
        except NotFound:
            return None
        return item

    def _get(self, op: GetOp) -> Flow[Item | None]:
        item = yield from self._load(tuple(op.namespace), op.key)
        if item is None or item.status != Status.ACTIVE or _expired(item, self.rt.now()):
            return None
        if op.refresh_ttl:
            item = yield from self._refresh(item)
        return Item(
            value=_value_of(item),
            key=op.key,
            namespace=tuple(op.namespace),
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _refresh(self, item: MemoryItem) -> Flow[MemoryItem]:
        """Restart an item's ttl on read (LangGraph's ``refresh_ttl``)."""
        minutes = item.metadata.get(TTL_KEY)
        if not isinstance(minutes, int | float) or item.expires_at is None:
            return item
        ttl = timedelta(minutes=minutes)
        expires = self.rt.now() + ttl
        # A write per read would make every get a new version: skip a negligible gain.
        if expires - as_utc(item.expires_at) < min(ttl / 10, timedelta(minutes=1)):
            return item
        with contextlib.suppress(StoreReadOnly):
            item = yield from items.update(
                self.rt,
                item.id,
                tenant_id=self.tenant_id,
                reason="langgraph ttl refresh",
                actor=TAG,
                expires_at=expires,
            )
        return item

    def _fields(self, op: PutOp, value: dict[str, Any]) -> dict[str, Any]:
        """What a put writes, besides the id: text, value, identifiers, scope and expiry."""
        namespace = tuple(op.namespace)
        minutes = _ttl_minutes(op.ttl)
        metadata: dict[str, Any] = {"lg_namespace": list(namespace), "lg_key": op.key}
        if minutes is not None:
            metadata[TTL_KEY] = minutes
        return {
            "content": _search_text(value, op.index),
            "structured": value,
            "metadata": metadata,
            "tags": (TAG, *(namespace_tag(namespace[:n]) for n in range(1, len(namespace) + 1))),
            "expires_at": None if minutes is None else self.rt.now() + timedelta(minutes=minutes),
            **_scope_fields(scope_of(namespace, self.scopes)),
        }

    def _put(self, op: PutOp) -> Flow[None]:
        namespace = tuple(op.namespace)
        old = yield from self._load(namespace, op.key)
        if op.value is None:
            if old is not None:
                yield from items.delete(
                    self.rt, old.id, hard=True, reason="langgraph delete", tenant_id=self.tenant_id, actor=TAG
                )
            return None
        fields = self._fields(op, scrub(self.rt.gate, self.tenant_id, dict(op.value)))
        if old is None:
            record = {**fields, "id": item_id(self.tenant_id, namespace, op.key), "memory_type": "fact"}
            # The value is redacted above; the rest are identifiers, kept as they are.
            yield from items.import_items(
                self.rt, [_jsonable(record)], tenant_id=self.tenant_id, actor=TAG, trusted=True
            )
            return None
        changes = {k: v for k, v in fields.items() if v != _current(old, k)}
        if "content" in changes:  # else update() would drop the value as no longer describing the text
            changes["structured"] = fields["structured"]
        if old.status != Status.ACTIVE:
            changes["status"] = Status.ACTIVE
        content = fields["content"]
        verbatim = "content" not in changes or _screens_as_is(self, content, old)
        # Identifiers (namespace labels, scope ids, tags) are never redacted, and update()
        # screens text and scrubs metadata: write those changes verbatim through an import.
        if not verbatim or ({"metadata", "tags", "scope", *SCOPE_FIELDS} & changes.keys()):
            yield from self._overwrite(old, fields)
            return None
        if changes:
            yield from items.update(
                self.rt, old.id, tenant_id=self.tenant_id, reason="langgraph put", actor=TAG, **changes
            )
        return None

    def _overwrite(self, old: MemoryItem, fields: Mapping[str, Any]) -> Flow[None]:
        """Replace ``old`` verbatim, keeping its id and ``created_at``, as a higher version."""
        record = {
            **old.to_json_dict(),
            **fields,
            "status": Status.ACTIVE.value,
            "version": old.version + 1,
            "updated_at": self.rt.now(),
        }
        yield from items.import_items(
            self.rt, [_jsonable(record)], tenant_id=self.tenant_id, actor=TAG, trusted=True
        )
        return None

    def _rescope(self) -> Flow[int]:
        moved = 0
        for item in (yield from self._under(())):
            ns = _namespace_of(item)
            assert ns is not None  # _under keeps LangGraph items only
            wanted = _scope_fields(scope_of(ns, self.scopes))
            if all(_current(item, k) == v for k, v in wanted.items()):
                continue
            yield from self._overwrite(item, wanted)
            moved += 1
        return moved

    def _under(self, prefix: tuple[str, ...]) -> Flow[list[MemoryItem]]:
        """Every active LangGraph item at or below namespace ``prefix``."""
        out: list[MemoryItem] = []
        cursor: str | None = None
        while True:
            page = yield from items.list_page(
                self.rt,
                tenant_id=self.tenant_id,
                tags=(namespace_tag(prefix),),
                statuses=Status.ACTIVE,
                include_expired=False,
                limit=MAX_LIMIT,
                cursor=cursor,
            )
            for item in page.items:
                ns = _namespace_of(item)
                if (
                    ns is not None
                    and ns[: len(prefix)] == prefix
                    and isinstance(item.metadata.get("lg_key"), str)
                ):
                    out.append(item)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def _search(self, op: SearchOp) -> Flow[list[SearchItem]]:
        prefix = tuple(op.namespace_prefix)
        items = yield from self._under(prefix)
        found: list[tuple[MemoryItem, float | None]]
        if op.query is None or not op.query.strip():
            items.sort(key=lambda i: (i.updated_at, i.created_at), reverse=True)
            found = [(i, None) for i in items if _matches(_value_of(i), op.filter)]
        else:
            found = yield from self._scored(op, prefix, items)
        page = found[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            refreshed = []
            for item, score in page:
                refreshed.append(((yield from self._refresh(item)), score))
            page = refreshed
        return [
            SearchItem(
                namespace=_namespace_of(item) or (),
                key=str(item.metadata["lg_key"]),
                value=_value_of(item),
                created_at=item.created_at,
                updated_at=item.updated_at,
                score=score,
            )
            for item, score in page
        ]

    def _scored(
        self, op: SearchOp, prefix: tuple[str, ...], under: list[MemoryItem]
    ) -> Flow[list[tuple[MemoryItem, float | None]]]:
        """jiyi's hybrid search in every scope holding an item under ``prefix``, merged by score."""
        assert op.query is not None
        wanted = op.offset + op.limit
        pool = min(MAX_LIMIT, max(wanted * 4, wanted + 20) if op.filter else wanted)
        # Search the scopes the items are actually in: mapped, or filed before the mapping.
        scopes = sorted({(i.scope.value, i.scope_id) for i in under if i.scope_id is not None})
        scored: list[tuple[MemoryItem, float | None]] = []
        seen: set[str] = set()
        for scope, ident in scopes:
            hits = yield from search_flows.search(
                self.rt,
                op.query,
                user_id=ident if scope == "user" else None,
                project_id=ident if scope == "project" else None,
                session_id=ident if scope == "session" else None,
                agent_id=ident if scope == "agent" else None,
                tenant_id=self.tenant_id,
                tags=(namespace_tag(prefix),),
                limit=max(1, pool),
            )
            for hit in hits:
                hns = _namespace_of(hit.item)
                if hit.item.id in seen or hns is None or hns[: len(prefix)] != prefix:
                    continue
                if not isinstance(hit.item.metadata.get("lg_key"), str):
                    continue
                if _matches(_value_of(hit.item), op.filter):
                    seen.add(hit.item.id)
                    scored.append((hit.item, float(hit.score)))
        scored.sort(key=lambda pair: pair[1] or 0.0, reverse=True)
        return scored

    def _list_namespaces(self, op: ListNamespacesOp) -> Flow[list[tuple[str, ...]]]:
        prefix: tuple[str, ...] = ()
        for cond in op.match_conditions or ():
            if cond.match_type == "prefix":
                fixed: list[str] = []
                for label in cond.path:
                    if label == "*":
                        break
                    fixed.append(label)
                if len(fixed) > len(prefix):
                    prefix = tuple(fixed)
        items = yield from self._under(prefix)
        namespaces = {ns for i in items if (ns := _namespace_of(i)) is not None}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]
