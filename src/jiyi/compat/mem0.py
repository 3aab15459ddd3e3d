"""mem0's API over jiyi: ``from jiyi.compat.mem0 import Memory`` where code said
``from mem0 import Memory``.

The names, arguments and plain-dict results are mem0's (``add``, ``search``, ``get``,
``get_all``, ``update``, ``delete``, ``delete_all``, ``history``, ``reset``;
``{"results": [{"id", "memory", "score", "metadata", ...}]}``); what happens underneath
is jiyi's: the write gate, reconciliation, PII redaction, the audit history. mem0's
``run_id`` is jiyi's ``session_id``. Where the two differ (docs/migrate-from-mem0.md):

* ``add(..., infer=True)`` on a plain string stores that statement (reconciled against
  what is known); on a list of messages the extractor (offline rules, or the LLM given
  as ``llm=``) finds the memories, as mem0's LLM does. Writes the gate refuses are listed
  under ``"rejected"`` with the reason, instead of vanishing.
* ``reset()`` wipes every memory of the tenant only with ``confirm=True``; the audit
  history is kept.

Every operation is a flow (:mod:`jiyi.effects`) written once here; :class:`Memory` runs
it and :class:`AsyncMemory` awaits it, like :mod:`jiyi.memory`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from jiyi import items
from jiyi import memory as _native
from jiyi.driver import arun, run
from jiyi.effects import Flow
from jiyi.errors import InvalidInput, NotFound
from jiyi.model import MemoryItem, Status
from jiyi.runtime import Runtime
from jiyi.session.foreign import as_mapping, content_text
from jiyi.store.base import Filter, Viewer
from jiyi.validate import MAX_LIMIT, check_limit, check_text
from jiyi.write import pipeline
from jiyi.write.extract import Extracted, Turn

__all__ = ["AsyncMemory", "Memory", "matches", "to_record"]

P = ParamSpec("P")
R = TypeVar("R")

# What jiyi's reconciliation did, in mem0's event names.
_EVENTS = {
    "add": "ADD",
    "keep_both": "ADD",
    "update": "UPDATE",
    "merge": "UPDATE",
    "supersede": "UPDATE",
    "reinforce": "NONE",
    "none": "NONE",
}
_IDS = ("user_id", "agent_id", "run_id")
MEM0_TYPES = {"procedural_memory": "skill"}
"""mem0's ``memory_type`` values that name one of jiyi's types."""


# ---------------------------------------------------------------- records and filters


def to_record(item: MemoryItem, score: float | None = None) -> dict[str, Any]:
    """A jiyi memory as mem0 returns one: a plain dict, ids present only when set."""
    out: dict[str, Any] = {
        "id": item.id,
        "memory": item.content,
        "hash": hashlib.md5(item.content.encode("utf-8")).hexdigest(),  # mem0's content hash
        "metadata": dict(item.metadata) or None,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if score is not None:
        out["score"] = score
    for name, value in (("user_id", item.user_id), ("agent_id", item.agent_id), ("run_id", item.session_id)):
        if value is not None:
            out[name] = value
    out["memory_type"] = item.memory_type.value
    if item.expires_at is not None:
        # The last day it holds (expires_at is the first moment it does not).
        out["expiration_date"] = (item.expires_at - timedelta(microseconds=1)).date().isoformat()
    return out


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda have, want: have == want,
    "ne": lambda have, want: have != want,
    "gt": lambda have, want: have is not None and have > want,
    "gte": lambda have, want: have is not None and have >= want,
    "lt": lambda have, want: have is not None and have < want,
    "lte": lambda have, want: have is not None and have <= want,
    "in": lambda have, want: have in want,
    "nin": lambda have, want: have not in want,
    "contains": lambda have, want: isinstance(have, str | list) and want in have,
    "icontains": lambda have, want: isinstance(have, str) and str(want).lower() in have.lower(),
}


def check_filters(filters: object) -> list[str]:
    """Every problem with a mem0 filter (empty when it is usable)."""
    if not isinstance(filters, Mapping):
        return [f"filters must be a mapping, not {type(filters).__name__}"]
    problems: list[str] = []
    for key, want in filters.items():
        if key in ("AND", "OR"):
            if not isinstance(want, list):
                problems.append(f"filters.{key} must be a list of filters")
                continue
            for part in want:
                problems += check_filters(part)
        elif key == "NOT":
            for part in want if isinstance(want, list) else [want]:
                problems += check_filters(part)
        elif isinstance(want, Mapping):
            unknown = sorted(set(want) - set(_OPERATORS))
            if unknown:
                problems.append(
                    f"filters.{key}: unknown operator(s) {', '.join(unknown)}; use {', '.join(_OPERATORS)}"
                )
    return problems


def matches(record: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether a record passes mem0 ``filters``: ``{"key": value}`` (equal; ``"*"``: any
    value), ``{"key": {"in": [...]}}`` and the other operators, ``AND`` / ``OR`` / ``NOT``.
    Keys name a record's fields (``user_id``, ``memory_type``, ...) or its metadata's."""
    fields = {**(record.get("metadata") or {}), **record}
    for key, want in filters.items():
        if key == "AND":
            ok = all(matches(record, part) for part in want)
        elif key == "OR":
            ok = any(matches(record, part) for part in want)
        elif key == "NOT":
            ok = not any(matches(record, part) for part in (want if isinstance(want, list) else [want]))
        elif isinstance(want, Mapping):
            ok = all(_OPERATORS[op](fields.get(key), arg) for op, arg in want.items())
        else:
            ok = key in fields if want == "*" else fields.get(key) == want
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- argument checks


def _scope(
    user_id: str | None, agent_id: str | None, run_id: str | None, filters: Mapping[str, Any] | None
) -> dict[str, str]:
    """The ids of a call (mem0 also accepts them inside ``filters``); at least one."""
    ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    # mem0 also takes the ids as filters: {"user_id": "a"} or {"AND": [{"user_id": "a"}, ...]}.
    conditions = [filters or {}, *[c for c in (filters or {}).get("AND") or [] if isinstance(c, Mapping)]]
    for name in _IDS:
        for condition in conditions:
            value = condition.get(name)
            if ids[name] is None and isinstance(value, str) and value != "*":
                ids[name] = value
    given = {k: v for k, v in ids.items() if v is not None}
    if not given:
        raise InvalidInput("give at least one of user_id, agent_id or run_id", field="user_id")
    for name, value in given.items():
        check_text(value, name)
    return given


def _native_scope(ids: Mapping[str, str]) -> dict[str, Any]:
    """The one jiyi scope to read: the user's, else the agent's, else the run's (the scope
    an :func:`add` with these ids writes to); the other ids then narrow it."""
    for name, native_name in (("user_id", "user_id"), ("agent_id", "agent_id"), ("run_id", "session_id")):
        if name in ids:
            return {native_name: ids[name]}
    raise AssertionError("no id")  # _scope guarantees one


def _narrowed(record: Mapping[str, Any], ids: Mapping[str, str], filters: Mapping[str, Any] | None) -> bool:
    return all(record.get(k) == v for k, v in ids.items()) and (not filters or matches(record, filters))


def _limit(limit: int | None, top_k: int | None, default: int) -> int:
    if limit is not None and top_k is not None and limit != top_k:
        raise InvalidInput("give limit or top_k (the same thing), not both", field="limit")
    chosen = limit if limit is not None else top_k if top_k is not None else default
    return check_limit(chosen, "limit" if limit is not None else "top_k")


def _expiry(expiration_date: str | date | datetime | None) -> datetime | None:
    """mem0's ``expiration_date`` ("YYYY-MM-DD"): the memory holds through that day."""
    if expiration_date is None:
        return None
    if isinstance(expiration_date, datetime):
        return expiration_date if expiration_date.tzinfo else expiration_date.replace(tzinfo=UTC)
    if isinstance(expiration_date, str):
        try:
            expiration_date = date.fromisoformat(expiration_date)
        except ValueError:
            raise InvalidInput(
                f"expiration_date must be YYYY-MM-DD, got {expiration_date!r}", field="expiration_date"
            ) from None
    if isinstance(expiration_date, date):
        return datetime.combine(expiration_date + timedelta(days=1), time(), tzinfo=UTC)
    raise InvalidInput(
        "expiration_date must be a YYYY-MM-DD string, a date or a datetime", field="expiration_date"
    )


def _turns(messages: object) -> tuple[list[dict[str, Any]], bool]:
    """The messages as ``{"role", "content"}`` dicts, and whether a plain string was given."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}], True
    if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
        messages = [messages]
    out = []
    for i, raw in enumerate(messages):
        data = as_mapping(raw)
        if not isinstance(data, Mapping) or not isinstance(data.get("role"), str):
            raise InvalidInput(
                f"messages[{i}] must be a {{'role', 'content'}} dict or a LangChain message", field="messages"
            )
        out.append(
            {
                "role": data["role"],
                "content": content_text(data.get("content") or ""),
                "name": data.get("name"),
            }
        )
    if not out:
        raise InvalidInput("no messages given", field="messages")
    return out, False


# ---------------------------------------------------------------- the operations, as flows


def add(
    rt: Runtime,
    /,
    messages: Any,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    infer: bool = True,
    memory_type: str | None = None,
    expiration_date: str | date | datetime | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    actor: str | None = None,
) -> Flow[dict[str, Any]]:
    """Add memories: a string, a ``{"role", "content"}`` dict or a list of them, or
    LangChain messages. ``infer=True`` extracts (a plain string the extractor does not
    recognise is kept as one statement) and reconciles; ``infer=False`` stores every
    non-system message as given.

    ``tenant_id``, ``viewer`` and ``actor`` say who calls (:class:`jiyi.who.Caller`), as in
    every operation here; ``Memory(native=mem.bound(caller=...))`` fills them in."""
    ids = _scope(user_id, agent_id, run_id, None)
    turns, plain = _turns(messages)
    common: dict[str, Any] = {
        "user_id": ids.get("user_id"),
        "agent_id": ids.get("agent_id"),
        "session_id": ids.get("run_id"),
        "metadata": dict(metadata or {}),
        "expires_at": _expiry(expiration_date),
        "tenant_id": tenant_id,
        "viewer": viewer,
        "actor": actor,
    }
    if memory_type is not None:
        common["memory_type"] = MEM0_TYPES.get(memory_type, memory_type)
    writes: list[tuple[str, dict[str, Any]]] = []
    if infer:
        candidates = yield from _extract(rt, turns)
        writes = [(c.content, _found(c)) for c in candidates]
    if not writes and (plain or not infer):
        # A statement the extractor does not recognise is still what the caller asked to keep.
        writes = [(t["content"], {}) for t in turns if t["role"] != "system" and t["content"].strip()]
    results: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for text, extra in writes:
        done = yield from pipeline.add(rt, text, **{**extra, **common}, infer=infer)
        if done.item is None:
            rejected.append({"memory": text, "reason": "; ".join(done.decision.reasons)})
        else:
            event = _EVENTS.get(done.decision.action, "ADD")
            results.append({"id": done.item.id, "memory": done.item.content, "event": event})
    return {"results": results, "rejected": rejected} if rejected else {"results": results}


def _found(c: Extracted) -> dict[str, Any]:
    """What an extracted candidate says beyond its text, as :func:`pipeline.add` options."""
    return {
        "confidence": c.confidence,
        "importance": c.importance,
        "structured": c.structured,
        "raw": c.source_text or None,
        "memory_type": c.memory_type,
    }


def _extract(rt: Runtime, turns: list[dict[str, Any]]) -> Flow[list[Extracted]]:
    said = [Turn(t["role"], t["content"]) for t in turns if t["role"] in ("user", "assistant")]
    if rt.llm is not None:
        from jiyi.write.extract_llm import LLMExtractor

        result = yield from LLMExtractor(rt.llm).flow(said)
        return list(result.items)
    from jiyi.write.extract_rules import RuleExtractor

    return RuleExtractor().extract(said)


def search(
    rt: Runtime,
    /,
    query: str,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    limit: int | None = None,
    top_k: int | None = None,
    filters: Mapping[str, Any] | None = None,
    threshold: float | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[dict[str, Any]]:
    """Memories that answer ``query``, best first: ``{"results": [{..., "score"}]}``."""
    from jiyi.read import search as search_flows

    problems = check_filters(filters) if filters is not None else []
    if problems:
        raise InvalidInput("; ".join(problems), field="filters")
    ids = _scope(user_id, agent_id, run_id, filters)
    wanted = _limit(limit, top_k, 100)
    narrow = len(ids) > 1 or bool(filters)
    fetch = min(MAX_LIMIT, wanted * 4) if narrow else wanted  # room for what the narrowing drops
    hits = yield from search_flows.search(
        rt, query, **_native_scope(ids), limit=fetch, threshold=threshold, tenant_id=tenant_id, viewer=viewer
    )
    records = [to_record(h.item, round(h.score, 4)) for h in hits]
    return {"results": [r for r in records if _narrowed(r, ids, filters)][:wanted]}


def get(
    rt: Runtime, /, memory_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[dict[str, Any] | None]:
    """One memory as a dict, or None when there is none with this id."""
    try:
        item = yield from items.get(rt, memory_id, tenant_id=tenant_id, viewer=viewer)
    except NotFound:
        return None
    return to_record(item)


def get_all(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    filters: Mapping[str, Any] | None = None,
    limit: int | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[dict[str, Any]]:
    """The active memories of a scope, oldest first, at most ``limit`` (default 100)."""
    problems = check_filters(filters) if filters is not None else []
    if problems:
        raise InvalidInput("; ".join(problems), field="filters")
    ids = _scope(user_id, agent_id, run_id, filters)
    wanted = _limit(limit, top_k, 100)
    records = yield from _matching(
        rt, ids, filters, statuses=[Status.ACTIVE], at_most=wanted, tenant_id=tenant_id, viewer=viewer
    )
    return {"results": records}


def _matching(
    rt: Runtime,
    ids: Mapping[str, str],
    filters: Mapping[str, Any] | None,
    *,
    statuses: Sequence[Status],
    at_most: int | None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[dict[str, Any]]]:
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while at_most is None or len(found) < at_most:
        page = yield from items.list_page(
            rt,
            **_native_scope(ids),
            statuses=statuses,
            include_expired=False,
            limit=MAX_LIMIT,
            cursor=cursor,
            tenant_id=tenant_id,
            viewer=viewer,
        )
        found += [r for r in map(to_record, page.items) if _narrowed(r, ids, filters)]
        cursor = page.next_cursor
        if cursor is None:
            break
    return found if at_most is None else found[:at_most]


def update(
    rt: Runtime,
    /,
    memory_id: str,
    data: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    actor: str | None = None,
) -> Flow[dict[str, Any]]:
    """Replace a memory's text (a new version; the old one stays in its history)."""
    changes: dict[str, Any] = {"content": data}
    if metadata is not None:
        changes["metadata"] = dict(metadata)
    yield from items.update(
        rt,
        memory_id,
        reason="updated through the mem0 API",
        tenant_id=tenant_id,
        viewer=viewer,
        actor=actor,
        **changes,
    )
    return {"message": "Memory updated successfully!"}


def delete(
    rt: Runtime,
    /,
    memory_id: str,
    *,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    actor: str | None = None,
) -> Flow[dict[str, Any]]:
    """Delete one memory for good (as mem0 does); the deletion stays in its history."""
    yield from items.delete(
        rt,
        memory_id,
        hard=True,
        reason="deleted through the mem0 API",
        tenant_id=tenant_id,
        viewer=viewer,
        actor=actor,
    )
    return {"message": "Memory deleted successfully!"}


def delete_all(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
    actor: str | None = None,
) -> Flow[dict[str, Any]]:
    """Delete every memory with all the given ids (at least one id is required)."""
    ids = _scope(user_id, agent_id, run_id, None)
    every = list(Status)
    records = yield from _matching(
        rt, ids, None, statuses=every, at_most=None, tenant_id=tenant_id, viewer=viewer
    )
    for record in records:
        yield from items.delete(
            rt,
            record["id"],
            hard=True,
            reason="delete_all through the mem0 API",
            tenant_id=tenant_id,
            viewer=viewer,
            actor=actor,
        )
    return {"message": "Memories deleted successfully!"}


def history(
    rt: Runtime, /, memory_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[list[dict[str, Any]]]:
    """A memory's changes, oldest first, in mem0's shape (``old_memory``, ``new_memory``,
    ``event``); jiyi's own action and reason are kept beside them."""
    events = yield from items.history(rt, memory_id, tenant_id=tenant_id, viewer=viewer)
    out = []
    for e in events:
        old = (e.before or {}).get("content")
        new = (e.after or {}).get("content")
        event = (
            "DELETE"
            if e.after is None or e.action.value in ("purge", "reset", "archive")
            else ("ADD" if e.before is None else "UPDATE")
        )
        out.append(
            {
                "id": f"{e.item_id}:{e.seq if e.seq is not None else e.version}",
                "memory_id": e.item_id,
                "old_memory": old,
                "new_memory": new,
                "event": event,
                "created_at": e.at.isoformat(),
                "updated_at": e.at.isoformat(),
                "is_deleted": event == "DELETE",
                "actor_id": e.actor,
                "action": e.action.value,
                "reason": e.reason,
            }
        )
    return out


def reset(
    rt: Runtime, /, *, confirm: bool = False, tenant_id: str | None = None, actor: str | None = None
) -> Flow[dict[str, Any]]:
    """Delete every memory of the tenant. Refused unless ``confirm=True``: one call
    without ids would otherwise wipe every user's memory. The history is kept."""
    if confirm is not True:
        raise InvalidInput("reset() deletes every memory of every user; call reset(confirm=True) to do it")
    flt = Filter(tenant_id=rt.tenant(tenant_id), statuses=(), include_expired=True)
    every = yield from items.all_items(rt, flt)
    for item in every:
        yield from items.delete(
            rt, item.id, hard=True, reason="reset through the mem0 API", tenant_id=tenant_id, actor=actor
        )
    return {"message": "Memory store reset successfully!"}


# ---------------------------------------------------------------- the classes


class _Op(Generic[P, R]):
    """One operation of the table; a method on :class:`Memory`, awaited on :class:`AsyncMemory`."""

    def __init__(self, fn: Callable[Concatenate[Runtime, P], Flow[R]]) -> None:
        self.fn = fn

    @overload
    def __get__(self, obj: None, owner: type) -> _Op[P, R]: ...
    @overload
    def __get__(self, obj: Memory, owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, obj: AsyncMemory, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, obj: object, owner: type) -> Any:
        if obj is None:
            return self
        return obj._bind(self.fn)  # type: ignore[attr-defined]


class _Table:
    add = _Op(add)
    search = _Op(search)
    get = _Op(get)
    get_all = _Op(get_all)
    update = _Op(update)
    delete = _Op(delete)
    delete_all = _Op(delete_all)
    history = _Op(history)
    reset = _Op(reset)


def _options_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """jiyi options from a mem0-style config: ``db``, ``tenant_id``, and ``llm`` /
    ``embedder`` as ``{"provider": "openai", "config": {"model": ...}}`` or jiyi specs."""
    if not isinstance(config, Mapping):
        raise InvalidInput("config must be a mapping", field="config")
    problems: list[str] = []
    options: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("version", "history_db_path"):
            continue  # jiyi keeps the history in its own store
        if key == "db" or key == "tenant_id":
            options[key] = value
        elif key in ("llm", "embedder"):
            spec = _provider_spec(value)
            if spec is None:
                problems.append(
                    f"{key}: give a jiyi spec (e.g. openai:MODEL) or {{'provider': 'openai', 'config': {{'model': ...}}}}"
                )
            else:
                options[key] = spec
        elif key == "vector_store":
            problems.append(
                "vector_store: jiyi keeps vectors in its own store; give db=PATH or a postgresql:// URL"
            )
        else:
            problems.append(f"{key}: not a setting jiyi reads (db, tenant_id, llm, embedder)")
    if problems:
        raise InvalidInput("config: " + "; ".join(problems), field="config")
    return options


def _provider_spec(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and value.get("provider") == "openai":
        model = (value.get("config") or {}).get("model")
        return f"openai:{model}" if isinstance(model, str) else None
    return None


def _open_native(
    kind: type[_native.Memory] | type[_native.AsyncMemory], db: str | Path | None, options: dict[str, Any]
) -> Any:
    if db is None:
        import os

        from jiyi.cli.common import default_db_path

        db = os.environ.get("JIYI_DB") or default_db_path()
        if "://" not in str(db):
            Path(db).parent.mkdir(parents=True, exist_ok=True)
    return kind.open(db, **options)


class Memory(_Table):
    """mem0's ``Memory`` over a jiyi :class:`jiyi.Memory` (``.native``).

    ``Memory()`` opens jiyi's default store ($JIYI_DB, else the per-user data directory);
    ``Memory(db="memory.db", embedder=..., llm=...)`` takes jiyi's options;
    ``Memory(native=jiyi_memory)`` wraps one you have.
    """

    def __init__(
        self, db: str | Path | None = None, *, native: _native.Memory | None = None, **options: Any
    ) -> None:
        self.native = native if native is not None else _open_native(_native.Memory, db, options)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Memory:
        """Build from a config dict (see :func:`_options_from_config`)."""
        options = _options_from_config(config)
        return cls(options.pop("db", None), **options)

    def _bind(self, fn: Callable[..., Flow[R]]) -> Callable[..., R]:
        runtime = self.native.runtime

        native = self.native

        @functools.wraps(fn)
        def method(*args: Any, **kwargs: Any) -> R:
            # A bound native (mem.bound(caller=...)) fills tenant, viewer and actor.
            return run(fn(runtime, *args, **native._with_defaults(fn, kwargs)), runtime)

        return method

    def close(self) -> None:
        self.native.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory(_Table):
    """mem0's ``AsyncMemory``: the same operations as :class:`Memory`, awaited."""

    def __init__(
        self, db: str | Path | None = None, *, native: _native.AsyncMemory | None = None, **options: Any
    ) -> None:
        self.native = native if native is not None else _open_native(_native.AsyncMemory, db, options)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AsyncMemory:
        options = _options_from_config(config)
        return cls(options.pop("db", None), **options)

    def _bind(self, fn: Callable[..., Flow[R]]) -> Callable[..., Awaitable[R]]:
        runtime = self.native.runtime

        native = self.native

        @functools.wraps(fn)
        async def method(*args: Any, **kwargs: Any) -> R:
            return await arun(fn(runtime, *args, **native._with_defaults(fn, kwargs)), runtime)

        return method

    async def aclose(self) -> None:
        await self.native.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
