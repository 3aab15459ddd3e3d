"""The narrow storage interface every backend implements.

A backend runs *operations*: small frozen values (after LangGraph's ``GetOp``/``PutOp``),
each typed by what it returns. A backend has exactly two entry points,
:meth:`Store.execute` and :meth:`Store.aexecute`; everything else — gating, ranking,
reconciliation — lives above it and is shared by all backends.

Reads: :class:`GetItems`, :class:`ListItems`, :class:`GetHistory`, :class:`GetStats`,
:class:`CountEvents`, :class:`CacheGet`, :class:`VectorsFor`, :class:`GetMessages`,
:class:`GetCheckpoint`, :class:`ListCheckpoints`, :class:`ListJobs`, :class:`DumpRows`,
:class:`ScopeClock`, :class:`ListAccesses` (the retrieval log).
Search: the primitives :class:`VectorHits`, :class:`KeywordHits`, :class:`ThreadLinks` and
:class:`LoadHits` return raw evidence; :class:`Retrieve` (what callers ask) is answered
from them by shared code, :func:`jiyi.store.retrieve.retrieve`, written once for every
backend.
Writes: :class:`Write` — one transaction holding any number of :class:`Guard`, :class:`Upsert`,
:class:`Purge`, :class:`Touch`, :class:`RecordAccess`, :class:`ForgetAccesses`,
:class:`RecordEvent`, :class:`CachePut`, :class:`SetVectors`,
:class:`AppendMessages`, :class:`DeleteMessages`, :class:`PutCheckpoint`,
:class:`DeleteCheckpoints`, :class:`PutJob`; all of it lands or none of it does.
A :class:`Guard` in a write makes it conditional on a scope's :class:`ScopeClock`: the
duplicate check and the write it leads to are atomic per scope across threads,
processes and replicas.
:class:`ClaimJobs` takes queued jobs for one worker (a write that returns them).
"""

from __future__ import annotations

import abc
import base64
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from jiyi.effects import Ask
from jiyi.errors import InvalidInput
from jiyi.model import MAX_ID_LENGTH, MemoryItem, MemoryType, Scope, Status, Visibility, as_utc
from jiyi.session.model import Checkpoint, Job, Message

R = TypeVar("R")
Vector = npt.NDArray[np.float32]


class Op(Ask[R]):
    """Base of all store operations; ``R`` is the result type."""

    __slots__ = ()


# ---------------------------------------------------------------- values


class HistoryAction(StrEnum):
    ADD = "add"
    UPDATE = "update"
    REINFORCE = "reinforce"
    ARCHIVE = "archive"
    SUPERSEDE = "supersede"
    RESTORE = "restore"
    PURGE = "purge"
    IMPORT = "import"
    RESET = "reset"
    RECONCILE = "reconcile"
    """A reconciliation decided to change nothing; the reason is kept."""


class HistoryEvent(BaseModel):
    """One entry of the audit history. ``before``/``after`` are full item snapshots."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    tenant_id: str
    action: HistoryAction
    at: datetime
    version: int
    reason: str = ""
    actor: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    seq: int | None = None


def creator_of(item: MemoryItem) -> str | None:
    """Who created an item: ``metadata["created_by"]`` when it is a string (the REST
    service sets it to the API key's id), else None."""
    value = item.metadata.get("created_by")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Viewer:
    """Who is reading, for the per-item visibility of project-scope memories.

    ``public`` items are seen by everyone of the tenant; ``members`` items by members of
    their project (``projects=None``: member of every project); ``owner_only`` items by
    their creator (``actor`` equal to :func:`creator_of`). ``sees_all`` (owner and admin
    keys) lifts every restriction. User, agent and session memories are not affected.
    Passing no viewer at all (None) means no restriction: library users own their store.
    """

    actor: str | None = None
    projects: tuple[str, ...] | None = None
    sees_all: bool = False

    def __post_init__(self) -> None:
        if self.actor is not None and (
            not isinstance(self.actor, str) or not self.actor.strip() or len(self.actor) > MAX_ID_LENGTH
        ):
            raise InvalidInput(
                f"viewer actor must be a non-empty string of at most {MAX_ID_LENGTH} characters",
                field="actor",
            )
        given: object = self.projects  # callers may pass any iterable (or, by mistake, a string)
        if given is not None:
            if isinstance(given, str):
                raise InvalidInput(
                    "viewer projects must be a list of project ids, not one string", field="projects"
                )
            projects = tuple(dict.fromkeys(self.projects or ()))
            for p in projects:
                if not isinstance(p, str) or not p.strip() or len(p) > MAX_ID_LENGTH:
                    raise InvalidInput(
                        f"project id {p!r} must be a non-empty string of at most {MAX_ID_LENGTH} characters",
                        field="projects",
                    )
            # A tuple, so the viewer stays hashable (filters are cache keys).
            object.__setattr__(self, "projects", projects)
        if not isinstance(self.sees_all, bool):
            raise InvalidInput("viewer sees_all must be true or false", field="sees_all")

    def member_of(self, project_id: str | None) -> bool:
        if self.sees_all or self.projects is None:
            return True
        return project_id is not None and project_id in self.projects

    def sees(self, item: MemoryItem) -> bool:
        """The rule every backend's query implements, for one item in hand."""
        if self.sees_all or item.scope is not Scope.PROJECT or item.visibility is Visibility.PUBLIC:
            return True
        if item.visibility is Visibility.MEMBERS:
            return self.member_of(item.project_id)
        return self.actor is not None and creator_of(item) == self.actor


def history_event(
    action: HistoryAction,
    before: MemoryItem | None,
    after: MemoryItem | None,
    *,
    reason: str,
    at: datetime,
    actor: str | None,
) -> HistoryEvent:
    """The audit entry for one change: ``before``/``after`` snapshots (one may be None)."""
    ref = after or before
    if ref is None:
        raise ValueError("a history event needs the item before or after the change")
    return HistoryEvent(
        item_id=ref.id,
        tenant_id=ref.tenant_id,
        action=action,
        at=at,
        version=ref.version,
        reason=reason,
        actor=actor,
        before=None if before is None else before.to_json_dict(),
        after=None if after is None else after.to_json_dict(),
    )


@dataclass(frozen=True)
class Filter:
    """Which items an operation may see. ``scope_keys`` empty means every scope of the tenant.
    ``viewer`` (None: no restriction) hides project-scope items that viewer may not see."""

    tenant_id: str
    scope_keys: tuple[str, ...] = ()
    memory_types: tuple[MemoryType, ...] = ()
    statuses: tuple[Status, ...] = (Status.ACTIVE,)
    tags: tuple[str, ...] = ()  # every tag must be present
    without_tags: tuple[str, ...] = ()  # no tag of these may be present
    include_expired: bool = False
    now: datetime | None = None  # for expiry; required unless include_expired
    created_after: datetime | None = None
    created_before: datetime | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    visibilities: tuple[Visibility, ...] = ()  # empty: any
    viewer: Viewer | None = None

    def __post_init__(self) -> None:
        # Filters are built from user input in many places; the viewer is the one field
        # whose wrong type would otherwise fail deep inside a backend.
        if self.viewer is not None and not isinstance(self.viewer, Viewer):
            raise InvalidInput(
                f"viewer must be a jiyi.store.base.Viewer or None, not {type(self.viewer).__name__}",
                field="viewer",
            )


def same_audience(flt: Filter, item: MemoryItem) -> Filter:
    """``flt`` narrowed to the project items seen by exactly the people who see ``item``
    (the same visibility; for ``owner_only`` the same creator), so that deduplication and
    reconciliation never move content from one audience to another."""
    if item.scope is not Scope.PROJECT:
        return flt
    if item.visibility is Visibility.OWNER_ONLY:
        creator = creator_of(item)
        if creator is None:
            # Library use without actors: private items have no creator to match on.
            return replace(flt, visibilities=(Visibility.OWNER_ONLY,))
        own = Viewer(actor=creator, projects=())
        return replace(flt, visibilities=(Visibility.OWNER_ONLY,), viewer=own)
    return replace(flt, visibilities=(item.visibility,))


class Candidate(NamedTuple):
    """An item found by :class:`Retrieve`, with the evidence that found it.

    Items of one *thread* (same tenant, scope and ``thread_id``) are ordered by
    ``(occurred_at or created_at, insertion order)``; ``prev_id``/``next_id`` name the
    adjacent items and ``prev_*``/``next_*`` their evidence, so a ranker can use a turn's
    surroundings as context without loading them. (A named tuple: a search makes one per
    candidate, ~130 at LoCoMo scale, and a frozen dataclass took 5x as long to build.)
    """

    item: MemoryItem
    cosine: float | None  # None when the item has no vector for this model
    keyword: float | None  # BM25-style score, higher is better; None if no keyword match
    vector: Vector | None
    prev_id: str | None = None
    next_id: str | None = None
    prev_cosine: float | None = None
    next_cosine: float | None = None
    prev_keyword: float | None = None
    next_keyword: float | None = None
    terms: str | None = None
    """The item's index terms as the store keeps them (:class:`Loaded`), or None."""


@dataclass(frozen=True)
class StoreStats:
    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    avg_confidence: float | None
    avg_importance: float | None


@dataclass(frozen=True)
class Page:
    items: list[MemoryItem]
    next_cursor: str | None


AccessKind = Literal["search", "context", "tool"]
ACCESS_KINDS: tuple[AccessKind, ...] = ("search", "context", "tool")


@dataclass(frozen=True)
class Retrieved:
    """One memory a :class:`MemoryAccess` served: its place (1 = first) and its scores as
    the caller got them (``relevance`` when it was worked out, else None)."""

    item_id: str
    rank: int
    score: float
    similarity: float | None = None
    relevance: float | None = None


@dataclass(frozen=True)
class MemoryAccess:
    """One entry of the retrieval log, seed 002's context graph
    (``context_graph.record_memory_access(query, retrieved_memory_ids)``): which memories
    served which query, for whom (the searched owner ids), by whom (``actor``: an API
    key's id, an agent's tools), when, and how (``kind``: a search, a context assembly or
    an agent's tool call). ``query`` is stored redacted, like every text jiyi keeps."""

    id: str
    tenant_id: str
    at: datetime
    kind: AccessKind
    query: str
    retrieved: tuple[Retrieved, ...] = ()
    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    actor: str | None = None

    @property
    def retrieved_memory_ids(self) -> tuple[str, ...]:
        return tuple(r.item_id for r in self.retrieved)

    def to_json_dict(self) -> dict[str, Any]:
        """The access as JSON-ready values (``at`` in ISO 8601), as exports write it."""
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "at": self.at.isoformat(),
            "kind": self.kind,
            "query": self.query,
            "user_id": self.user_id,
            "project_id": self.project_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "actor": self.actor,
            "retrieved": [
                {
                    "item_id": r.item_id,
                    "rank": r.rank,
                    "score": r.score,
                    "similarity": r.similarity,
                    "relevance": r.relevance,
                }
                for r in self.retrieved
            ],
        }

    @classmethod
    def from_json_dict(cls, data: Any) -> MemoryAccess:
        """An access as :meth:`to_json_dict` wrote it; :class:`InvalidInput` names what is wrong."""
        try:
            served = data.get("retrieved") or []
            kind = data["kind"]
            if kind not in ACCESS_KINDS or not isinstance(served, list):
                raise ValueError(f"kind {kind!r} or its retrieved list")
            texts = ("user_id", "project_id", "session_id", "agent_id", "actor")
            for name in ("id", "tenant_id", "query", *texts):
                value = data.get(name)
                if value is not None and not isinstance(value, str):
                    raise ValueError(f"{name} must be a string")
            return cls(
                id=data["id"],
                tenant_id=data["tenant_id"],
                at=as_utc(datetime.fromisoformat(data["at"])),
                kind=kind,
                query=data["query"],
                retrieved=tuple(
                    Retrieved(
                        item_id=str(r["item_id"]),
                        rank=int(r["rank"]),
                        score=float(r["score"]),
                        similarity=None if r.get("similarity") is None else float(r["similarity"]),
                        relevance=None if r.get("relevance") is None else float(r["relevance"]),
                    )
                    for r in served
                ),
                **{name: data.get(name) for name in texts},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput(f"not a retrieval log entry: {exc}", field="retrieval") from None


@dataclass(frozen=True)
class AccessPage:
    accesses: list[MemoryAccess]
    next_cursor: str | None


# ---------------------------------------------------------------- reads


@dataclass(frozen=True)
class GetItems(Op[list[MemoryItem]]):
    """Items by id inside one tenant; unknown ids (or other tenants' ids) are simply absent."""

    tenant_id: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class ListItems(Op[Page]):
    """Items in (created_at, id) order, ``limit`` at a time, resuming after ``cursor``."""

    filter: Filter
    limit: int = 50
    cursor: str | None = None
    descending: bool = False


@dataclass(frozen=True)
class Retrieve(Op[list[Candidate]]):
    """Search candidates: the top ``vector_k`` by cosine and the top ``keyword_k`` by keyword score.

    ``terms`` are already-normalised index terms (see :mod:`jiyi.text.tokenize`).
    Candidates found by only one index still carry both scores where they exist.
    With ``time_ranges``/``time_months``, the top ``vector_k`` items (by cosine) whose
    ``occurred_at`` falls in a range, or in one of the months of any year, are
    candidates too. ``neighbours`` adds the items up to that many positions before and
    after each candidate in its thread.

    Backends do not implement this op themselves: :func:`jiyi.store.retrieve.retrieve`
    answers it, the same way for all, from the search primitives below
    (:class:`VectorHits`, :class:`KeywordHits`, :class:`ThreadLinks`, :class:`LoadHits`).
    """

    filter: Filter
    model_id: str
    vector: Vector | None
    terms: tuple[str, ...]
    vector_k: int
    keyword_k: int
    neighbours: int = 0
    time_ranges: tuple[tuple[datetime, datetime], ...] = ()
    time_months: tuple[int, ...] = ()
    shared_items: bool = False
    """The candidates' items may be the backend's own cached values, shared with later
    searches: read them, never change their ``metadata`` or ``structured`` (search asks for
    this, ranks ~100 candidates and hands out only its few hits, each :func:`detached`)."""


def detached(item: MemoryItem) -> MemoryItem:
    """A copy of ``item`` whose JSON fields (``metadata``, ``structured``) are copies too:
    the model is frozen, its dicts are not, so this is what a caller may change freely."""
    copy = item.model_copy()
    # Set on the copy's own __dict__, so the copy's set fields stay those of the original.
    copy.__dict__["metadata"] = _json_copy(item.metadata)
    if item.structured is not None:
        copy.__dict__["structured"] = _json_copy(item.structured)
    return copy


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars), faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


# The search primitives: raw evidence, from which jiyi.store.retrieve chooses candidates.
# "The filter's items" are those ``filter`` admits with expiry aside (threads run through
# expired turns); "live" ones are those it admits, expiry included.


class Hit(NamedTuple):
    """An item a search primitive found, with its score (cosine or BM25; higher is better)."""

    id: str
    score: float


@dataclass(frozen=True)
class VectorHits(Op[list[Hit]]):
    """The ``k`` live items whose vector of ``model_id`` (and of ``vector``'s dimension) is
    nearest ``vector`` by cosine, best first; equal scores in the backend's stable order.

    With ``time_ranges`` or ``time_months``, only items whose ``occurred_at`` falls in one
    of the ranges (start included, end not) or in one of the months (1-12) of any year."""

    filter: Filter
    model_id: str
    vector: Vector
    k: int
    time_ranges: tuple[tuple[datetime, datetime], ...] = ()
    time_months: tuple[int, ...] = ()


@dataclass(frozen=True)
class KeywordHits(Op[list[Hit]]):
    """The ``k`` live items that best match any of ``terms`` (normalised index terms) by
    BM25 over the searched scopes (the tenant when none is named), best first."""

    filter: Filter
    terms: tuple[str, ...]
    k: int


def keyword_collection(f: Filter) -> Filter:
    """BM25's collection for a :class:`KeywordHits` of filter ``f``: its scopes (the tenant
    when it names none), every status, expired items too; for a viewer who may not see
    every project item, what that viewer sees (hidden items' words must not show through
    the scores). Other scopes and tenants never count."""
    viewer = f.viewer if f.viewer is not None and not f.viewer.sees_all else None
    return Filter(f.tenant_id, f.scope_keys, statuses=(), include_expired=True, viewer=viewer)


class Link(NamedTuple):
    """An item's place in its thread: the ids of the items just before and after it (among
    the filter's items) and whether it is live itself."""

    prev_id: str | None
    next_id: str | None
    live: bool


@dataclass(frozen=True)
class ThreadLinks(Op[dict[str, Link]]):
    """Thread order around ``ids``: the :class:`Link` of each of them that has a thread and
    of every item up to ``reach`` positions before or after one of them in its thread.

    The filter's items with the same ``thread_id`` form a thread, ordered by
    ``(occurred_at or created_at, insertion order)``. Items without a thread, or not among
    the filter's items, have no entry."""

    filter: Filter
    ids: tuple[str, ...]
    reach: int = 0


class Loaded(NamedTuple):
    """What :class:`LoadHits` found for one id. ``item`` is None for a context id; ``vector``
    and ``cosine`` are None without a query vector or a stored vector of its model and
    dimension. ``terms`` are the index terms the item was written with (``Upsert.terms``,
    space-joined; a backend may keep them folded as :func:`jiyi.text.tokenize.fold_term`
    does), so a ranker can test phrasing without tokenizing the text again; None for a
    context id."""

    item: MemoryItem | None
    vector: Vector | None
    cosine: float | None
    terms: str | None = None


@dataclass(frozen=True)
class LoadHits(Op[dict[str, Loaded]]):
    """The filter's items ``ids`` with their vectors and cosines to ``vector``, and the
    cosines alone of ``context_ids``; ids that are not among the filter's items are absent.
    Cosines equal the ones :class:`VectorHits` gives, to the bit."""

    filter: Filter
    model_id: str
    vector: Vector | None
    ids: tuple[str, ...]
    context_ids: tuple[str, ...] = ()
    shared_items: bool = False
    """As :attr:`Retrieve.shared_items`: the items may be the backend's cached values."""


@dataclass(frozen=True)
class GetHistory(Op[list[HistoryEvent]]):
    tenant_id: str
    item_id: str


@dataclass(frozen=True)
class ListAccesses(Op[AccessPage]):
    """The tenant's retrieval log, newest first (by ``at``, then ``id``), ``limit`` at a
    time, resuming after ``cursor``. Each filter given narrows it: accesses that served
    ``item_id``, accesses made for that ``user_id`` / ``project_id`` / ``session_id`` /
    ``agent_id``, at or after ``since``, before ``until``. Every access comes with all it
    served, in rank order."""

    tenant_id: str
    item_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True)
class GetStats(Op[StoreStats]):
    filter: Filter


@dataclass(frozen=True)
class CountEvents(Op[int]):
    """How many :class:`RecordEvent` rows with this key happened at or after ``since``."""

    key: str
    since: datetime


@dataclass(frozen=True)
class ScopeClock(Op[int]):
    """How many guarded writes (:class:`Guard`) have committed in one scope of one tenant;
    0 for a scope never guarded. Read straight from the database (never from a cache)."""

    tenant_id: str
    scope_key: str


@dataclass(frozen=True)
class CacheGet(Op[dict[str, Vector]]):
    """Cached embeddings by text hash for one model."""

    model_id: str
    hashes: tuple[str, ...]


@dataclass(frozen=True)
class VectorsFor(Op[dict[str, Vector]]):
    """Stored vectors of the given items for one model (missing ones absent)."""

    tenant_id: str
    model_id: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class GetMessages(Op[list[Message]]):
    """A session's messages in ``seq`` order: after ``after_seq``, or the ``last`` N."""

    tenant_id: str
    session_id: str
    after_seq: int | None = None
    last: int | None = None


@dataclass(frozen=True)
class GetCheckpoint(Op[Checkpoint | None]):
    """One checkpoint by id, or the session's latest when ``checkpoint_id`` is None."""

    tenant_id: str
    session_id: str
    checkpoint_id: str | None = None


@dataclass(frozen=True)
class ListCheckpoints(Op[list[Checkpoint]]):
    """A session's checkpoints, newest first (without their message lists' contents
    trimmed: they are returned whole)."""

    tenant_id: str
    session_id: str
    limit: int = 50


@dataclass(frozen=True)
class ListJobs(Op[list[Job]]):
    """Jobs by status (all when empty), oldest first."""

    statuses: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    tenant_id: str | None = None
    limit: int = 100


ROW_KINDS: tuple[str, ...] = (
    "items",
    "history",
    "messages",
    "checkpoints",
    "jobs",
    "embedding_cache",
    "rate_events",
    "retrievals",
)
"""What :class:`DumpRows`/:class:`LoadRows` move, in the order a copy moves them."""


def vector_to_text(vector: Vector) -> str:
    """A vector as base64 of its little-endian float32 bytes (exact, JSON-able)."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def vector_from_text(text: str) -> Vector:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidInput("a dumped vector is not valid base64", field="vec") from exc
    if len(raw) % 4:
        raise InvalidInput("a dumped vector's length is not a multiple of 4 bytes", field="vec")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def check_row_kind(kind: str) -> str:
    if kind not in ROW_KINDS:
        raise InvalidInput(f"unknown row kind {kind!r}; expected one of {', '.join(ROW_KINDS)}", field="kind")
    return kind


@dataclass(frozen=True)
class RowPage:
    """A page of :class:`DumpRows`: backend-neutral, JSON-able rows.

    ``next_after`` resumes the dump (None at the end); ``total`` is the kind's row count,
    given on the first page only (``after`` None)."""

    rows: list[dict[str, Any]]
    next_after: str | None
    total: int | None = None


@dataclass(frozen=True)
class DumpRows(Op[RowPage]):
    """Every row of one kind (all tenants) in a stable order, ``limit`` at a time, resuming
    after the opaque cursor ``after``: for lossless copies between stores.

    Row shapes (times are fixed-width UTC text, vectors base64 little-endian float32):

    * ``items``: ``id``, ``doc`` (the item's JSON text), ``terms`` (keyword index terms),
      ``vectors`` (list of ``{"model", "dim", "vec"}``); in insertion order.
    * ``history``: ``seq``, ``item_id``, ``tenant_id``, ``action``, ``at``, ``version``,
      ``reason``, ``actor``, ``before``/``after`` (JSON text or None); by ``seq``.
    * ``messages``: ``tenant_id``, ``session_id``, ``seq``, ``doc``.
    * ``checkpoints``: ``tenant_id``, ``session_id``, ``id``, ``doc``.
    * ``jobs``: ``id``, ``doc``.
    * ``embedding_cache``: ``model``, ``text_hash``, ``vec``.
    * ``rate_events``: ``key``, ``at``.
    * ``retrievals``: ``tenant_id``, ``id``, ``doc`` (the retrieval log entry as JSON text,
      :meth:`MemoryAccess.to_json_dict`, with everything it served); by tenant and id.
    """

    kind: str
    after: str | None = None
    limit: int = 500


@dataclass(frozen=True)
class ClaimJobs(Op[list[Job]]):
    """Atomically take up to ``limit`` runnable jobs for ``worker``: queued (or running
    with an expired lease) and due at ``now``; they become running, leased until
    ``now + lease``, with ``attempts`` raised by one."""

    worker: str
    now: datetime
    lease_seconds: float = 300.0
    kinds: tuple[str, ...] = ()
    limit: int = 10


# ---------------------------------------------------------------- writes


@dataclass(frozen=True)
class Upsert:
    """Insert or replace ``item``; ``vector`` None on replace keeps the stored one."""

    item: MemoryItem
    terms: str
    event: HistoryEvent
    vector: Vector | None = None
    model_id: str | None = None


@dataclass(frozen=True)
class Purge:
    """Remove an item for good (its history stays; its rows in the retrieval log go)."""

    tenant_id: str
    item_id: str
    event: HistoryEvent


@dataclass(frozen=True)
class Touch:
    """Record that items were retrieved: ``last_used_at = at`` and ``access_count += 1``."""

    tenant_id: str
    ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True)
class RecordAccess:
    """Append one access to the retrieval log (with a search's :class:`Touch`, in the same
    write, so the usage counters and the log agree). An access whose id the tenant's log
    already holds is left as it is (a restore may run twice)."""

    access: MemoryAccess


@dataclass(frozen=True)
class ForgetAccesses:
    """Remove accesses of one tenant from the retrieval log, with what they served: every
    access made for ``user_id`` (a user's right to be forgotten) and every access older
    than ``before`` (retention). (:class:`Purge` removes a purged item's served rows.)"""

    tenant_id: str
    user_id: str | None = None
    before: datetime | None = None


@dataclass(frozen=True)
class RecordEvent:
    """A rate-limit event (e.g. one automatic extraction in a session)."""

    key: str
    at: datetime


@dataclass(frozen=True)
class CachePut:
    model_id: str
    entries: tuple[tuple[str, Vector], ...]


@dataclass(frozen=True)
class SetVectors:
    """Replace the stored vectors of items a tenant already holds, with ``model_id``'s (an
    embedder switch or a re-embedding: the items, their versions and history stay as they
    are; an item's vector of another model is replaced). Ids the tenant does not hold are
    skipped."""

    tenant_id: str
    model_id: str
    vectors: tuple[tuple[str, Vector], ...]


@dataclass(frozen=True)
class AppendMessages:
    """Add messages at the end of their session (the store assigns ``seq``), or at the
    given ``seq`` when a message carries one (a compaction summary takes the place of
    the first message it replaces)."""

    messages: tuple[Message, ...]


@dataclass(frozen=True)
class DeleteMessages:
    tenant_id: str
    session_id: str
    seqs: tuple[int, ...]


@dataclass(frozen=True)
class PutCheckpoint:
    checkpoint: Checkpoint


@dataclass(frozen=True)
class DeleteCheckpoints:
    tenant_id: str
    session_id: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class PutJob:
    """Insert or replace a job (enqueue, or record its outcome)."""

    job: Job


@dataclass(frozen=True)
class Guard:
    """Make a :class:`Write` conditional: it commits only if the scope's :class:`ScopeClock`
    still reads ``seen``, and then advances the clock by one. Otherwise the backend raises
    :class:`~jiyi.errors.WriteConflict` and nothing of the write lands.

    A writer that decides from what it read (the write pipeline: the nearest items, then
    add / reinforce / supersede) reads the clock before reading, and guards its write with
    it; of two such writers in one scope, the second learns that its reading is stale and
    decides again, so 16 identical adds at once make one item and 15 reinforcements. The
    backend checks the clock under the lock that already orders the scope's writers (the
    SQLite file's write lock; the clock row's lock in PostgreSQL), so this holds across
    threads, processes and replicas, and no lock is held while the writer embeds or asks
    a model. Guards are checked before any other change of their write."""

    tenant_id: str
    scope_key: str
    seen: int


@dataclass(frozen=True)
class LoadRows:
    """Insert rows of :class:`DumpRows` verbatim (ids, ``seq`` numbers, times, history
    order kept); an item id that already exists is refused. Used by store copies only."""

    kind: str
    rows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ClearRows:
    """Delete every row of the given kinds (all tenants), for a copy that overwrites."""

    kinds: tuple[str, ...]


Change = (
    Guard
    | Upsert
    | Purge
    | Touch
    | RecordAccess
    | ForgetAccesses
    | RecordEvent
    | CachePut
    | SetVectors
    | AppendMessages
    | DeleteMessages
    | PutCheckpoint
    | DeleteCheckpoints
    | PutJob
    | LoadRows
    | ClearRows
)


@dataclass(frozen=True)
class Write(Op[None]):
    """One atomic transaction."""

    changes: tuple[Change, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- the interface


class Store(abc.ABC):
    """A storage backend. Two entry points; a backend is one ``match`` over the op types,
    and hands :class:`Retrieve` to :func:`jiyi.store.retrieve.retrieve` (``aretrieve``)."""

    @abc.abstractmethod
    def execute(self, op: Op[R]) -> R:
        """Run one operation in the calling thread."""

    @abc.abstractmethod
    async def aexecute(self, op: Op[R]) -> R:
        """Run one operation without blocking the event loop."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and threads. Safe to call twice."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
