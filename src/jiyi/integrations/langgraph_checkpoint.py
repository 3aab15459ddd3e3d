"""A LangGraph checkpointer backed by jiyi: ``graph.compile(checkpointer=JiyiCheckpointSaver(memory))``.

A graph compiled with it keeps its state between calls, across processes and after a
crash, in jiyi's database (the SQLite file, or PostgreSQL: it only uses the
:class:`~jiyi.store.base.Store` interface, so it works on every backend). Interrupts,
``Command(resume=...)``, ``get_state``/``get_state_history``, time travel and subgraphs
work as with LangGraph's own savers::

    from jiyi import Memory
    from jiyi.integrations.langgraph import JiyiCheckpointSaver

    saver = JiyiCheckpointSaver(Memory.open("memory.db"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "chat-42"}})

How LangGraph checkpoints map onto jiyi
---------------------------------------
Every record is a jiyi session checkpoint (:class:`jiyi.session.model.Checkpoint`) of
the saver's tenant, labelled ``"langgraph"``; a saver of another tenant sees none of
them.

* **Thread** ``thread_id`` is the jiyi session ``"lg:" + thread_id``
  (:func:`checkpoint_session_id`; hashed when longer than an id may be). Its
  checkpoints are listed by ``memory.list_checkpoints("lg:chat-42")``. The ``lg:``
  prefix keeps them apart from a jiyi conversation that uses the thread id itself as
  its session id (``restore_checkpoint`` there would otherwise replace its messages).
* **Checkpoint** is one record whose id is the LangGraph ``checkpoint_id`` and whose
  ``created_at`` is the time inside that id (LangGraph's ids are time-ordered UUIDv6),
  so the store's newest-first order is LangGraph's order. ``agent_state["langgraph"]``
  holds the checkpoint and its metadata serialized with the saver's ``serde``
  (``JsonPlusSerializer`` by default; bytes as base64 in JSON) and the parent's id;
  ``metadata`` repeats the JSON-able part of the LangGraph metadata for people
  looking at the database. Checkpoints of a subgraph (``checkpoint_ns`` not empty)
  live in a session of their own.
* **Pending writes** of a checkpoint are records in a session of their own (one per
  checkpoint, so loading a checkpoint reads exactly its writes), one record per
  ``(task_id, idx)``: a regular write is kept once (the first one wins), a special
  one (error, interrupt, resume, scheduled) is replaced, as LangGraph's savers do.
* **Indexes** (small records) name the namespaces of each thread and the threads of
  the tenant, so ``list`` without a namespace, ``list(None)`` and ``delete_thread``
  find everything without scanning other sessions.

Each ``put``/``put_writes``/``delete_thread`` is one atomic store ``Write``. The sync
methods run on ``store.execute`` and the async ones on ``store.aexecute``; the mapping
is written once, as generator flows (see :mod:`jiyi.effects`).
"""

from __future__ import annotations

import base64
import binascii
import builtins
import hashlib
import json
import random
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.base import Checkpoint as GraphCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from jiyi.driver import adrive, drive
from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput, StoreCorrupt
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import DEFAULT_TENANT, MAX_ID_LENGTH, as_utc, utcnow
from jiyi.session.model import Checkpoint
from jiyi.store.base import (
    Change,
    DeleteCheckpoints,
    GetCheckpoint,
    ListCheckpoints,
    Op,
    PutCheckpoint,
    Store,
    Write,
)

__all__ = ["JiyiCheckpointSaver", "checkpoint_session_id"]

R = TypeVar("R")

LABEL: Final = "langgraph"
"""The label of every record the saver writes."""
KEY: Final = "langgraph"
"""The ``agent_state`` key holding a record's LangGraph body."""
THREADS_SESSION: Final = "lg#threads"
"""The session listing a tenant's threads (one small record per thread)."""
_ALL: Final = 1_000_000  # "every record of the session": ListCheckpoints has no cursor
_FIRST_PAGE: Final = 32
_UUID_TICKS_AT_UNIX_EPOCH: Final = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01
_UNIX_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- naming


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()[:40]


def checkpoint_session_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """The jiyi session holding a thread's checkpoints in namespace ``checkpoint_ns``.

    ``"lg:" + thread_id`` for the graph itself; subgraph namespaces (and thread ids too
    long for an id) get a hashed ``"lg#c#..."`` session.
    """
    if not checkpoint_ns and len(thread_id) + 3 <= MAX_ID_LENGTH:
        return "lg:" + thread_id
    return "lg#c#" + _digest(thread_id, checkpoint_ns)


def _writes_session(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    return "lg#w#" + _digest(thread_id, checkpoint_ns, checkpoint_id)


def _writes_index_session(thread_id: str, checkpoint_ns: str) -> str:
    """Which checkpoints of a namespace have writes (found even if the checkpoint is gone)."""
    return "lg#x#" + _digest(thread_id, checkpoint_ns)


def _namespace_index_session(thread_id: str) -> str:
    return "lg#n#" + _digest(thread_id)


def _write_id(task_id: str, idx: int) -> str:
    rid = f"{task_id}#{idx}"
    return rid if len(rid) <= MAX_ID_LENGTH else "h#" + _digest(task_id, str(idx))


def checkpoint_time(checkpoint_id: str, ts: object = None, now: Callable[[], datetime] = utcnow) -> datetime:
    """When a checkpoint was made: the time inside a UUIDv6 id (LangGraph's ids), which
    keeps time order and id order the same; else the checkpoint's ``ts``; else ``now()``."""
    try:
        uid = UUID(checkpoint_id)
    except ValueError:
        uid = None
    if uid is not None and uid.version == 6 and str(uid) == checkpoint_id:
        ticks = ((uid.int >> 80) << 12) | ((uid.int >> 64) & 0x0FFF)
        return _UNIX_EPOCH + timedelta(microseconds=(ticks - _UUID_TICKS_AT_UNIX_EPOCH) // 10)
    if isinstance(ts, str):
        try:
            return as_utc(datetime.fromisoformat(ts))
        except ValueError:
            pass
    return as_utc(now())


# ---------------------------------------------------------------- input checks


def _id(value: object, what: str) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | UUID) and not isinstance(value, bool):
        text = str(value)  # LangGraph accepts ints and UUIDs as thread ids
    else:
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}", field=what)
    if not text:
        raise InvalidInput(f"{what} must not be empty", field=what)
    return text


def _checkpoint_id(value: object) -> str:
    cid = _id(value, "checkpoint_id")
    if len(cid) > MAX_ID_LENGTH:
        raise InvalidInput(f"checkpoint_id is longer than {MAX_ID_LENGTH} characters", field="checkpoint_id")
    return cid


def _configurable(config: object) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise InvalidInput(
            "config must be a mapping like {'configurable': {'thread_id': '...'}}", field="config"
        )
    conf = config.get("configurable")
    if not isinstance(conf, Mapping) or conf.get("thread_id") is None:
        raise InvalidInput(
            "config['configurable']['thread_id'] is required: pass "
            "{'configurable': {'thread_id': '...'}} to invoke/stream/get_state",
            field="thread_id",
        )
    return conf


def _namespace(conf: Mapping[str, Any]) -> str | None:
    ns = conf.get("checkpoint_ns")
    if ns is not None and not isinstance(ns, str):
        raise InvalidInput("checkpoint_ns must be a string", field="checkpoint_ns")
    return ns


def _target(config: object) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id or None)`` of a config."""
    conf = _configurable(config)
    cid = conf.get("checkpoint_id")
    return (
        _id(conf["thread_id"], "thread_id"),
        _namespace(conf) or "",
        _checkpoint_id(cid) if cid else None,
    )


def _check_listing(filter: object, limit: object) -> None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise InvalidInput("limit must be an integer or None", field="limit")
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidInput("filter must be a mapping of metadata keys to values", field="filter")


def _before_id(before: object) -> str | None:
    """The checkpoint id a listing stops before (None: no limit)."""
    if before is None:
        return None
    # Only its checkpoint id matters; a thread id is not required.
    marker = before.get("configurable") if isinstance(before, Mapping) else None
    if not isinstance(marker, Mapping):
        raise InvalidInput(
            "before must be a config like {'configurable': {'checkpoint_id': '...'}}", field="before"
        )
    return _checkpoint_id(marker["checkpoint_id"]) if marker.get("checkpoint_id") else None


# ---------------------------------------------------------------- drivers


def _drive(flow: Flow[R], store: Store) -> R:
    return drive(flow, {Op: store.execute})


async def _adrive(flow: Flow[R], store: Store) -> R:
    return await adrive(flow, {Op: store.aexecute})


# ---------------------------------------------------------------- the mapping, once


def _body(record: Checkpoint, kind: str) -> dict[str, Any] | None:
    """The LangGraph body of a record the saver wrote, or None for anything else."""
    body = record.agent_state.get(KEY)
    if isinstance(body, dict) and body.get("kind") == kind:
        return body
    return None


def _json_safe(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The plain values of LangGraph metadata, for people reading the database."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if value is None or isinstance(value, str | int | float | bool):
            out[str(key)] = value
        elif isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            out[str(key)] = {str(k): v for k, v in value.items()}  # e.g. "parents"
    return out


class _Flows:
    """The saver's operations as store-op flows, for one tenant, serializer and clock."""

    def __init__(self, tenant_id: str, serde: SerializerProtocol, now: Callable[[], datetime]) -> None:
        self.tenant = tenant_id
        self.serde = serde
        self.now = now

    # ------------------------------------------------------------ (de)serialization

    def _dump(self, value: Any) -> dict[str, str]:
        kind, data = self.serde.dumps_typed(value)
        return {"type": kind, "data": base64.b64encode(data).decode("ascii")}

    def _load(self, blob: object) -> Any:
        if not (
            isinstance(blob, dict) and isinstance(blob.get("type"), str) and isinstance(blob.get("data"), str)
        ):
            raise StoreCorrupt("a LangGraph checkpoint record lacks its serialized value")
        try:
            data = base64.b64decode(blob["data"].encode("ascii"), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise StoreCorrupt("a LangGraph checkpoint record holds invalid base64") from exc
        return self.serde.loads_typed((blob["type"], data))

    # ------------------------------------------------------------ small records

    def _index(self, session_id: str, record_id: str, body: dict[str, Any]) -> PutCheckpoint:
        return PutCheckpoint(
            Checkpoint(
                session_id=session_id,
                tenant_id=self.tenant,
                id=record_id,
                label=LABEL,
                agent_state={KEY: body},
                metadata={KEY: body["kind"]},
                created_at=self.now(),
            )
        )

    def _namespace_entry(self, thread_id: str, ns: str) -> PutCheckpoint:
        return self._index(
            _namespace_index_session(thread_id),
            _digest(ns),
            {"kind": "namespace", "thread_id": thread_id, "checkpoint_ns": ns},
        )

    def _all(self, session_id: str) -> Flow[builtins.list[Checkpoint]]:
        return (yield from call(ListCheckpoints(self.tenant, session_id, limit=_ALL)))

    def _namespaces(self, thread_id: str) -> Flow[builtins.list[str]]:
        rows = yield from self._all(_namespace_index_session(thread_id))
        found = {body["checkpoint_ns"] for r in rows if (body := _body(r, "namespace"))}
        return sorted(found | {""})  # the root namespace even if its index entry is missing

    # ------------------------------------------------------------ reads

    def _writes(self, thread_id: str, ns: str, checkpoint_id: str) -> Flow[builtins.list[PendingWrite]]:
        rows = yield from self._all(_writes_session(thread_id, ns, checkpoint_id))
        bodies = [b for r in rows if (b := _body(r, "write")) and b.get("checkpoint_id") == checkpoint_id]
        bodies.sort(key=lambda b: writes_sort_key(b["task_path"], b["task_id"], b["idx"]))
        return [(b["task_id"], b["channel"], self._load(b["value"])) for b in bodies]

    def _tuple(self, body: dict[str, Any]) -> Flow[CheckpointTuple]:
        thread_id, ns, cid = body["thread_id"], body["checkpoint_ns"], body["checkpoint_id"]
        writes = yield from self._writes(thread_id, ns, cid)
        parent = body.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}},
            checkpoint=self._load(body["checkpoint"]),
            metadata=self._load(body["metadata"]),
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=writes,
        )

    def _scan(
        self, session_id: str, keep: Callable[[dict[str, Any]], bool], limit: int | None
    ) -> Flow[builtins.list[tuple[Checkpoint, dict[str, Any]]]]:
        """The session's checkpoint records that ``keep`` accepts, newest first, at most
        ``limit``; read in growing pages so a short listing reads little."""
        page = _ALL if limit is None else max(_FIRST_PAGE, limit)
        verdicts: dict[str, bool] = {}
        while True:
            rows = yield from call(ListCheckpoints(self.tenant, session_id, limit=page))
            found: builtins.list[tuple[Checkpoint, dict[str, Any]]] = []
            for row in rows:
                body = _body(row, "checkpoint")
                if body is None:
                    continue
                if row.id not in verdicts:
                    verdicts[row.id] = keep(body)
                if verdicts[row.id]:
                    found.append((row, body))
            if len(rows) < page or page >= _ALL or (limit is not None and len(found) >= limit):
                return found if limit is None else found[:limit]
            page = min(_ALL, page * 4)

    def get_tuple(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        thread_id, ns, cid = _target(config)
        session_id = checkpoint_session_id(thread_id, ns)
        record = yield from call(GetCheckpoint(self.tenant, session_id, cid))
        if record is None:
            return None
        body = _body(record, "checkpoint")
        if body is None:
            if cid is not None:
                return None
            # Someone wrote a record of their own into the session: take our newest.
            ours = yield from self._scan(session_id, lambda _: True, 1)
            if not ours:
                return None
            body = ours[0][1]
        return (yield from self._tuple(body))

    def list(
        self,
        config: RunnableConfig | None,
        filter: Mapping[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Flow[builtins.list[CheckpointTuple]]:
        _check_listing(filter, limit)
        if limit is not None and limit <= 0:
            return []
        before_id = _before_id(before)
        targets, only_id = yield from self._targets(config)
        keep = self._keeper(only_id, before_id, filter)
        found: builtins.list[tuple[Checkpoint, dict[str, Any]]] = []
        for thread_id, ns in targets:
            session_id = checkpoint_session_id(thread_id, ns)
            if only_id is not None:
                found += yield from self._one(session_id, only_id, keep)
            else:
                found += yield from self._scan(session_id, keep, limit)
        # Newest first across namespaces and threads, in the store's own order.
        found.sort(key=lambda pair: (pair[0].created_at, pair[1]["checkpoint_id"]), reverse=True)
        if limit is not None:
            found = found[:limit]
        out: builtins.list[CheckpointTuple] = []
        for _, body in found:
            out.append((yield from self._tuple(body)))
        return out

    def _targets(
        self, config: RunnableConfig | None
    ) -> Flow[tuple[builtins.list[tuple[str, str]], str | None]]:
        """The (thread, namespace) pairs a listing reads (no config: all of them), and the
        one checkpoint id the config names, if any."""
        if config is None:
            targets: builtins.list[tuple[str, str]] = []
            rows = yield from self._all(THREADS_SESSION)
            for thread_id in sorted({b["thread_id"] for r in rows if (b := _body(r, "thread"))}):
                namespaces = yield from self._namespaces(thread_id)
                targets += [(thread_id, ns) for ns in namespaces]
            return targets, None
        conf = _configurable(config)
        thread_id = _id(conf["thread_id"], "thread_id")
        ns = _namespace(conf)
        only_id = _checkpoint_id(conf["checkpoint_id"]) if conf.get("checkpoint_id") else None
        if ns is not None:
            namespaces = [ns]
        else:
            namespaces = yield from self._namespaces(thread_id)
        return [(thread_id, n) for n in namespaces], only_id

    def _keeper(
        self, only_id: str | None, before_id: str | None, filter: Mapping[str, Any] | None
    ) -> Callable[[dict[str, Any]], bool]:
        """Whether a checkpoint record belongs in the listing."""

        def keep(body: dict[str, Any]) -> bool:
            cid = body["checkpoint_id"]
            if only_id is not None and cid != only_id:
                return False
            if before_id is not None and cid >= before_id:
                return False
            if filter:
                metadata = self._load(body["metadata"])
                return all(metadata.get(k) == v for k, v in filter.items())
            return True

        return keep

    def _one(
        self, session_id: str, checkpoint_id: str, keep: Callable[[dict[str, Any]], bool]
    ) -> Flow[builtins.list[tuple[Checkpoint, dict[str, Any]]]]:
        """The named checkpoint of a session, if it is there and ``keep`` accepts it."""
        record = yield from call(GetCheckpoint(self.tenant, session_id, checkpoint_id))
        body = None if record is None else _body(record, "checkpoint")
        if record is not None and body is not None and keep(body):
            return [(record, body)]
        return []

    # ------------------------------------------------------------ writes

    def put(
        self,
        config: RunnableConfig,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
    ) -> Flow[RunnableConfig]:
        thread_id, ns, parent_id = _target(config)
        if not isinstance(checkpoint, Mapping):
            raise InvalidInput("checkpoint must be a LangGraph checkpoint (a mapping)", field="checkpoint")
        cid = _checkpoint_id(checkpoint.get("id"))
        full_metadata = get_checkpoint_metadata(config, metadata)
        body = {
            "kind": "checkpoint",
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": cid,
            "parent_checkpoint_id": parent_id,
            "checkpoint": self._dump(checkpoint),
            "metadata": self._dump(full_metadata),
        }
        record = Checkpoint(
            session_id=checkpoint_session_id(thread_id, ns),
            tenant_id=self.tenant,
            id=cid,
            label=LABEL,
            agent_state={KEY: body},
            metadata={
                KEY: "checkpoint",
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "parent_checkpoint_id": parent_id,
                "metadata": _json_safe(full_metadata),
            },
            created_at=checkpoint_time(cid, checkpoint.get("ts"), self.now),
        )
        thread_entry = self._index(
            THREADS_SESSION, _digest(thread_id), {"kind": "thread", "thread_id": thread_id}
        )
        yield from call(Write((PutCheckpoint(record), self._namespace_entry(thread_id, ns), thread_entry)))
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> Flow[None]:
        thread_id, ns, cid = _target(config)
        if cid is None:
            raise InvalidInput(
                "put_writes needs config['configurable']['checkpoint_id'] (the checkpoint the writes belong to)",
                field="checkpoint_id",
            )
        task = _id(task_id, "task_id")
        if not isinstance(task_path, str):
            raise InvalidInput("task_path must be a string", field="task_path")
        entries: builtins.list[tuple[int, str, Any]] = []
        for i, write in enumerate(writes):
            if not (
                isinstance(write, tuple | builtins.list) and len(write) == 2 and isinstance(write[0], str)
            ):
                raise InvalidInput("each write must be a (channel, value) pair", field="writes")
            # Special channels (error, interrupt, ...) have fixed negative slots and are replaced.
            entries.append((WRITES_IDX_MAP.get(write[0], i), write[0], write[1]))
        if not entries:
            return None
        session_id = _writes_session(thread_id, ns, cid)
        existing: set[str] = set()
        if any(idx >= 0 for idx, _, _ in entries):
            existing = {r.id for r in (yield from self._all(session_id))}
        at = checkpoint_time(cid, None, self.now)
        changes: builtins.list[Change] = []
        for idx, channel, value in entries:
            rid = _write_id(task, idx)
            if idx >= 0 and rid in existing:
                continue  # a regular write is kept once, like LangGraph's own savers
            body = {
                "kind": "write",
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": cid,
                "task_id": task,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "value": self._dump(value),
            }
            meta = {
                KEY: "write",
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": cid,
                "channel": channel,
            }
            changes.append(
                PutCheckpoint(
                    Checkpoint(
                        session_id=session_id,
                        tenant_id=self.tenant,
                        id=rid,
                        label=LABEL,
                        agent_state={KEY: body},
                        metadata=meta,
                        created_at=at,
                    )
                )
            )
        if not changes:
            return None
        changes.append(
            self._index(
                _writes_index_session(thread_id, ns),
                cid,
                {"kind": "writes", "thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid},
            )
        )
        changes.append(self._namespace_entry(thread_id, ns))
        yield from call(Write(tuple(changes)))
        return None

    def delete_thread(self, thread_id: object) -> Flow[None]:
        thread = _id(thread_id, "thread_id")
        changes: builtins.list[Change] = []

        def drop(session_id: str, rows: Sequence[Checkpoint]) -> None:
            if rows:
                changes.append(DeleteCheckpoints(self.tenant, session_id, tuple(r.id for r in rows)))

        for ns in (yield from self._namespaces(thread)):
            session_id = checkpoint_session_id(thread, ns)
            checkpoints = yield from self._all(session_id)
            index_id = _writes_index_session(thread, ns)
            with_writes = yield from self._all(index_id)
            ids = {b["checkpoint_id"] for r in checkpoints if (b := _body(r, "checkpoint"))}
            ids |= {b["checkpoint_id"] for r in with_writes if (b := _body(r, "writes"))}
            for cid in sorted(ids):
                writes_id = _writes_session(thread, ns, cid)
                drop(writes_id, (yield from self._all(writes_id)))
            drop(session_id, checkpoints)
            drop(index_id, with_writes)
        namespace_id = _namespace_index_session(thread)
        drop(namespace_id, (yield from self._all(namespace_id)))
        changes.append(DeleteCheckpoints(self.tenant, THREADS_SESSION, (_digest(thread),)))
        yield from call(Write(tuple(changes)))
        return None


# ---------------------------------------------------------------- the saver


class JiyiCheckpointSaver(BaseCheckpointSaver[str]):
    """LangGraph's ``BaseCheckpointSaver`` on jiyi's store, for one tenant.

    ``target`` is a :class:`~jiyi.memory.Memory`, an :class:`~jiyi.memory.AsyncMemory`
    (their store, tenant and clock are used) or a bare :class:`~jiyi.store.base.Store`
    (tenant ``"default"``). ``tenant_id`` overrides the tenant; a saver of another
    tenant sees none of these checkpoints. ``serde`` is LangGraph's serializer
    (``JsonPlusSerializer`` by default). The caller owns the store and closes it.

    Sync methods (``invoke``/``stream``) run on ``store.execute``, async ones
    (``ainvoke``/``astream``) on ``store.aexecute``. See the module documentation for
    how checkpoints and writes are stored.
    """

    def __init__(
        self,
        target: Memory | AsyncMemory | Store,
        *,
        tenant_id: str | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if isinstance(target, Memory | AsyncMemory):
            self.store: Store = target.runtime.store
            tenant = tenant_id if tenant_id is not None else target.runtime.tenant_id
            self._now: Callable[[], datetime] = target.runtime.now
        elif isinstance(target, Store):
            self.store = target
            tenant = tenant_id if tenant_id is not None else DEFAULT_TENANT
            self._now = utcnow
        else:
            raise InvalidInput(
                f"JiyiCheckpointSaver needs a jiyi Memory, AsyncMemory or Store, not {type(target).__name__}",
                field="target",
            )
        if not isinstance(tenant, str) or not tenant or len(tenant) > MAX_ID_LENGTH:
            raise InvalidInput(
                f"tenant_id must be a non-empty string of at most {MAX_ID_LENGTH} characters",
                field="tenant_id",
            )
        self.tenant_id: str = tenant

    def _flows(self) -> _Flows:
        # Built per call: ``with_allowlist`` clones the saver with another serde.
        return _Flows(self.tenant_id, self.serde, self._now)

    # ------------------------------------------------------------ sync

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the thread's latest
        in ``checkpoint_ns``) with its pending writes, or None."""
        return _drive(self._flows().get_tuple(config), self.store)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of the thread in ``config`` (one namespace when
        ``checkpoint_ns`` is given, else all), or of every thread of the tenant when
        ``config`` is None; only those whose metadata has every ``filter`` item, older
        than ``before``'s checkpoint, at most ``limit``."""
        return iter(_drive(self._flows().list(config, filter, before, limit), self.store))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; ``config``'s ``checkpoint_id`` is its parent. Returns its config."""
        return _drive(self._flows().put(config, checkpoint, metadata), self.store)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the checkpoint ``config`` names."""
        _drive(self._flows().put_writes(config, writes, task_id, task_path), self.store)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread (all namespaces), in one transaction."""
        _drive(self._flows().delete_thread(thread_id), self.store)

    # ------------------------------------------------------------ async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await _adrive(self._flows().get_tuple(config), self.store)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        for item in await _adrive(self._flows().list(config, filter, before, limit), self.store):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: GraphCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await _adrive(self._flows().put(config, checkpoint, metadata), self.store)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await _adrive(self._flows().put_writes(config, writes, task_id, task_path), self.store)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await _adrive(self._flows().delete_thread(thread_id), self.store)

    # ------------------------------------------------------------ versions

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """``"<counter>.<random>"``: increasing, and two forks of one version differ."""
        if current is None:
            counter = 0
        elif isinstance(current, int | float):
            counter = int(current)
        else:
            counter = int(str(current).split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"
