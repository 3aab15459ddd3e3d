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
* **Namespace** ``("users", "alice", "memories")`` is the *user* scope
  ``user_id="users/alice/memories"`` (the labels joined with ``/``; a joined name
  longer than jiyi's id limit is replaced by a hash). Items carry the tag
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
* **TTL** is not supported (``supports_ttl = False``).

:meth:`JiyiStore.batch` runs on a :class:`~jiyi.memory.Memory` or an
:class:`~jiyi.memory.AsyncMemory` through the library's sync driver and
:meth:`JiyiStore.abatch` through its async driver; the mapping is written once, as a
:mod:`jiyi.effects` flow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

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
)

from jiyi import items
from jiyi.driver import arun, run
from jiyi.effects import Flow
from jiyi.errors import InvalidInput, NotFound
from jiyi.integrations.langgraph_checkpoint import JiyiCheckpointSaver, checkpoint_session_id
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MAX_ID_LENGTH, MemoryItem, Status
from jiyi.read import search as search_flows
from jiyi.runtime import Runtime
from jiyi.validate import MAX_LIMIT
from jiyi.write.gate import Screened, screen, scrub

__all__ = ["JiyiCheckpointSaver", "JiyiStore", "checkpoint_session_id"]

TAG: Final = "langgraph"
NS_TAG_PREFIX: Final = "lg-ns:"
MAX_TAG: Final = 100


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def item_id(tenant_id: str, namespace: tuple[str, ...], key: str) -> str:
    """The jiyi id of LangGraph item ``(namespace, key)`` for a tenant."""
    return "lg-" + _digest(tenant_id, list(namespace), key)[:40]


def scope_id(namespace: tuple[str, ...]) -> str:
    """The jiyi ``user_id`` a namespace is stored under."""
    joined = "/".join(namespace)
    return joined if len(joined) <= MAX_ID_LENGTH else "lg-ns-" + _digest(list(namespace))[:40]


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


class JiyiStore(BaseStore):
    """LangGraph's ``BaseStore`` over a jiyi :class:`Memory` (or :class:`AsyncMemory`).

    ``tenant_id`` picks the jiyi tenant (default: the memory's own). See the module
    documentation for how namespaces, keys and values are stored.
    """

    supports_ttl: bool = False

    def __init__(self, memory: Memory | AsyncMemory, *, tenant_id: str | None = None) -> None:
        self.memory = memory
        self.rt: Runtime = memory.runtime
        self.tenant_id: str = tenant_id or self.rt.tenant_id

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
        if item is None or item.status != Status.ACTIVE:
            return None
        return Item(
            value=_value_of(item),
            key=op.key,
            namespace=tuple(op.namespace),
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _put(self, op: PutOp) -> Flow[None]:
        namespace = tuple(op.namespace)
        old = yield from self._load(namespace, op.key)
        if op.value is None:
            if old is not None:
                yield from items.delete(
                    self.rt, old.id, hard=True, reason="langgraph delete", tenant_id=self.tenant_id, actor=TAG
                )
            return None
        value = scrub(self.rt.gate, self.tenant_id, dict(op.value))
        content = _search_text(value, op.index)
        fields: dict[str, Any] = {
            "content": content,
            "structured": value,
            "metadata": {"lg_namespace": list(namespace), "lg_key": op.key},
            "tags": [TAG, *(namespace_tag(namespace[:n]) for n in range(1, len(namespace) + 1))],
        }
        if old is None:
            record = {
                **fields,
                "id": item_id(self.tenant_id, namespace, op.key),
                "user_id": scope_id(namespace),
                "memory_type": "fact",
            }
            # The value is redacted above; the rest are identifiers, kept as they are.
            yield from items.import_items(
                self.rt, [record], tenant_id=self.tenant_id, actor=TAG, trusted=True
            )
            return None
        changes = {k: v for k, v in fields.items() if k != "content"}
        changes["tags"] = tuple(changes["tags"])
        for name in ("metadata", "tags"):  # identifiers: written once, never redacted
            if changes[name] == getattr(old, name):
                del changes[name]
        if old.status != Status.ACTIVE:
            changes["status"] = Status.ACTIVE
        if content != old.content:
            checked = screen(content, old.confidence, self.rt.gate, self.tenant_id)
            if not (isinstance(checked, Screened) and checked.text == content):
                # The gate would refuse or rewrite the text: overwrite verbatim instead.
                record = {
                    **old.to_json_dict(),
                    **fields,
                    "status": Status.ACTIVE.value,
                    "version": old.version + 1,
                    "updated_at": self.rt.now(),
                }
                yield from items.import_items(
                    self.rt, [record], tenant_id=self.tenant_id, actor=TAG, trusted=True
                )
                return None
            changes["content"] = content
        yield from items.update(
            self.rt, old.id, tenant_id=self.tenant_id, reason="langgraph put", actor=TAG, **changes
        )
        return None

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
            wanted = op.offset + op.limit
            pool = min(MAX_LIMIT, max(wanted * 4, wanted + 20) if op.filter else wanted)
            scopes = sorted({ns for i in items if (ns := _namespace_of(i)) is not None})
            scored: list[tuple[MemoryItem, float | None]] = []
            seen: set[str] = set()
            for ns in scopes:
                hits = yield from search_flows.search(
                    self.rt,
                    op.query,
                    user_id=scope_id(ns),
                    tenant_id=self.tenant_id,
                    tags=(TAG,),
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
            found = scored
        return [
            SearchItem(
                namespace=_namespace_of(item) or (),
                key=str(item.metadata["lg_key"]),
                value=_value_of(item),
                created_at=item.created_at,
                updated_at=item.updated_at,
                score=score,
            )
            for item, score in found[op.offset : op.offset + op.limit]
        ]

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
