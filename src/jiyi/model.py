"""The memory item, its enums and its relations (seeds 000, 002, 003).

A :class:`MemoryItem` is immutable; :meth:`MemoryItem.evolve` returns a validated copy.
Invalid values are refused at construction with :class:`~jiyi.errors.InvalidInput`
whose message names the field.

Input limits (README, "Input limits"): text must be valid Unicode (no lone surrogates);
a JSON field (``metadata``, ``structured``; a message's ``metadata`` and ``tool_calls``;
a checkpoint's state) holds JSON values only - objects with string keys, arrays,
strings, finite numbers, booleans, null - nested at most :data:`MAX_JSON_DEPTH` levels,
with at most :attr:`JsonLimits.entries` entries in one object or array and at most
:attr:`JsonLimits.size` bytes as JSON. They are checked where values enter: in the
models' validation, so every entry point (library, CLI, REST, MCP, import) refuses a
bad value with :class:`~jiyi.errors.InvalidInput` naming the field. Rows stored before
the limits existed are still read: :func:`load_stored` puts a marker in place of a JSON
value that breaks them.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jiyi.errors import InvalidInput
from jiyi.problems import pydantic_problem


class MemoryType(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    SKILL = "skill"
    HABIT = "habit"
    EVENT = "event"
    CONTEXT = "context"
    CONSTRAINT = "constraint"
    DECISION = "decision"
    PATTERN = "pattern"


class Scope(StrEnum):
    USER = "user"
    PROJECT = "project"
    SESSION = "session"
    AGENT = "agent"


class Source(StrEnum):
    USER = "user"
    AI = "ai"
    KNOWLEDGE_BASE = "knowledge_base"
    PROJECT_RESOURCE = "project_resource"
    SYSTEM = "system"


class Visibility(StrEnum):
    PUBLIC = "public"
    MEMBERS = "members"
    OWNER_ONLY = "owner_only"


class Status(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    SUPERSEDED = "superseded"


class RelationType(StrEnum):
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    REFINES = "refines"
    RELATED_TO = "related_to"
    DERIVED_FROM = "derived_from"
    SUPERSEDES = "supersedes"
    SUPERSEDED_BY = "superseded_by"


DEFAULT_TENANT = "default"
MAX_ID_LENGTH = 200
# The tag of what is kept as said, never reconciled against: turns, document chunks
# (jiyi.write.resources).
RESOURCE_TAG = "resource"
# The tag of the raw turns remember() keeps as resources (jiyi.write.resources).
TURN_TAG = "turn"
# The tag of the one item per user or project holding explicitly set profile fields
# (jiyi.profile): kept for its audited history, left out of list() and stats().
PROFILE_TAG = "profile"
# The tag of a session's summary, its episode (jiyi.session.flows).
EPISODE_TAG = "episode"
MAX_TAGS = 100
MAX_TAG_LENGTH = 100
MAX_JSON_DEPTH = 32
"""Levels of nested objects and arrays in one JSON field (``{"a": {"b": 1}}`` has 2)."""


@dataclass(frozen=True)
class JsonLimits:
    """How large one JSON field may be: nesting levels, entries of one object or array,
    and bytes of its JSON text (UTF-8, counted while checking; escapes aside)."""

    depth: int = MAX_JSON_DEPTH
    entries: int = 10_000
    size: int = 1_000_000


FIELD_LIMITS = JsonLimits()
"""Memory ``metadata`` and ``structured``, a message's ``metadata`` and ``tool_calls``."""
STATE_LIMITS = JsonLimits(entries=100_000, size=16_000_000)
"""A checkpoint's ``agent_state``, ``tool_states``, ``pending_tool_calls`` and ``metadata``
(a LangGraph checkpoint, serialized, lives in ``agent_state``)."""

UNREADABLE = "jiyi_unreadable"
"""The key of the marker :func:`load_stored` puts in place of a stored JSON value that
breaks the limits (written before they existed): ``{"jiyi_unreadable": "why"}``."""


def check_text_value(value: str) -> str:
    """``value`` if it is valid Unicode text; a lone surrogate (``"\\ud800"``, which no
    UTF-8 encoding, database or JSON body can carry) raises ValueError."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"text must be valid Unicode: it holds a lone surrogate "
                f"({value[exc.start]!r} at position {exc.start})"
            ) from None
    return value


def _where(path: tuple[str | int, ...]) -> str:
    if not path:
        return ""
    shown = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[:6])
    return f" (at {shown.lstrip('.')}{'...' if len(path) > 6 else ''})"


def _scalar_size(v: object, path: tuple[str | int, ...]) -> int | None:
    """The JSON size of a scalar (None: not a scalar); ValueError when it is not valid JSON."""
    if isinstance(v, str):
        try:
            check_text_value(v)
        except ValueError as exc:
            raise ValueError(f"{exc}{_where(path)}") from None
        return len(v) + 2 if v.isascii() else len(v.encode("utf-8")) + 2
    if v is None or isinstance(v, bool):
        return 5
    if isinstance(v, int):
        return v.bit_length() // 3 + 2
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{v} is not a JSON number{_where(path)}")
        return 24
    return None


def check_json(value: object, limits: JsonLimits = FIELD_LIMITS, *, at: tuple[str | int, ...] = ()) -> None:
    """Raise ValueError, saying where, unless ``value`` is JSON within ``limits``
    (``at``: where ``value`` sits inside the field, for the depth and the message).

    Iterative, so any nesting (even a cycle) is refused without recursion; the walk
    stops at the first problem, and the size budget bounds its work."""
    size = 0
    stack: list[tuple[object, int, tuple[str | int, ...]]] = [(value, len(at), at)]
    while stack:
        v, depth, path = stack.pop()
        scalar = _scalar_size(v, path)
        if scalar is not None:
            size += scalar
        elif isinstance(v, Mapping | list | tuple):
            if depth >= limits.depth:
                raise ValueError(f"JSON is nested deeper than {limits.depth} levels{_where(path)}")
            if len(v) > limits.entries:
                raise ValueError(f"an object or array holds more than {limits.entries} entries{_where(path)}")
            size += 2 + len(v)
            if isinstance(v, Mapping):
                for key, child in v.items():
                    if not isinstance(key, str):
                        raise ValueError(
                            f"object keys must be strings, not {type(key).__name__}{_where(path)}"
                        )
                    try:
                        check_text_value(key)
                    except ValueError as exc:
                        raise ValueError(f"{exc}{_where(path)}") from None
                    size += len(key) + 3
                    stack.append((child, depth + 1, (*path, key)))
            else:
                stack.extend((child, depth + 1, (*path, i)) for i, child in enumerate(v))
        else:
            raise ValueError(
                f"{type(v).__name__} is not a JSON value (use strings, numbers, booleans, null, "
                f"arrays and objects){_where(path)}"
            )
        if size > limits.size:
            raise ValueError(f"JSON is larger than {limits.size} bytes")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def owner_scope(
    user_id: str | None, project_id: str | None, agent_id: str | None, session_id: str | None = None
) -> Scope:
    """The scope an item gets when only ids are known: the broadest long-lived one given."""
    if user_id:
        return Scope.USER
    if project_id:
        return Scope.PROJECT
    if agent_id:
        return Scope.AGENT
    return Scope.SESSION


def in_agent_space(item: MemoryItem, agent_id: str | None) -> bool:
    """Whether a read that names ``agent_id`` sees ``item``: a user memory that names an
    agent belongs to that agent's space for that user (what a conversation with the agent
    yielded), so another agent does not see it; a user memory of no agent is every
    agent's. A read that names no agent (the whole user) sees all (docs/permissions.md)."""
    return agent_id is None or item.scope is not Scope.USER or item.agent_id in (None, agent_id)


def scope_key(scope: Scope, scope_id: str) -> str:
    """The single string that places an item in one memory space, e.g. ``user:alice``."""
    return f"{scope.value}:{scope_id}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class Relation(_Frozen):
    type: RelationType
    target_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    strength: float = Field(default=1.0, ge=0.0, le=1.0)


class MemoryItem(_Frozen):
    """One long-term memory. Field names follow MISSION.md."""

    id: str = Field(default_factory=new_id, min_length=1, max_length=MAX_ID_LENGTH)
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1, max_length=MAX_ID_LENGTH)

    content: str = Field(min_length=1)
    raw: str | None = None
    summary: str | None = None
    structured: dict[str, Any] | None = None

    memory_type: MemoryType = MemoryType.FACT
    scope: Scope = Scope.USER
    user_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)
    project_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)
    session_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)
    agent_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)

    source: Source = Source.USER
    source_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    thread_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)
    """Items of one thread are consecutive pieces of one conversation or document (raw
    turns, chunks), ordered by ``occurred_at`` (else ``created_at``) then insertion;
    search reads a piece together with its neighbours. Extracted facts have none."""

    confidence: float = Field(default=0.9, ge=0.0, le=1.0)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    visibility: Visibility = Visibility.MEMBERS
    status: Status = Status.ACTIVE
    tags: tuple[str, ...] = ()

    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    occurred_at: datetime | None = None
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    valid_from: datetime | None = None
    """When the fact became true (None: as far as anyone knows, always). jiyi learned it at
    ``created_at``; the history says when it was retired."""
    valid_to: datetime | None = None
    """When the fact stopped being true: set when a later statement supersedes it."""

    access_count: int = Field(default=0, ge=0)
    mention_count: int = Field(default=1, ge=1)
    version: int = Field(default=1, ge=1)
    relations: tuple[Relation, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    json_fields: ClassVar[Mapping[str, JsonLimits]] = {"metadata": FIELD_LIMITS, "structured": FIELD_LIMITS}
    """The JSON fields and their limits (see :func:`load_stored`)."""

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return check_text_value(value)

    @field_validator(
        "id",
        "tenant_id",
        "raw",
        "summary",
        "user_id",
        "project_id",
        "session_id",
        "agent_id",
        "source_id",
        "thread_id",
    )
    @classmethod
    def _valid_text(cls, value: str | None) -> str | None:
        return None if value is None else check_text_value(value)

    @field_validator("metadata", "structured")
    @classmethod
    def _json_within_limits(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json(value, FIELD_LIMITS)
        return value

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags, got {len(value)}")
        cleaned: list[str] = []
        for tag in value:
            tag = check_text_value(tag).strip()
            if not tag:
                raise ValueError("tags must not be blank")
            if len(tag) > MAX_TAG_LENGTH:
                raise ValueError(f"tag {tag[:20]!r}... is longer than {MAX_TAG_LENGTH} characters")
            if tag not in cleaned:
                cleaned.append(tag)
        return tuple(cleaned)

    @field_validator(
        "created_at", "updated_at", "occurred_at", "last_used_at", "expires_at", "valid_from", "valid_to"
    )
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)

    @model_validator(mode="after")
    def _scope_has_its_id(self) -> Self:
        if self.scope_id is None:
            raise ValueError(f"scope {self.scope.value!r} needs {self.scope.value}_id to be set")
        return self

    @property
    def scope_id(self) -> str | None:
        return {
            Scope.USER: self.user_id,
            Scope.PROJECT: self.project_id,
            Scope.SESSION: self.session_id,
            Scope.AGENT: self.agent_id,
        }[self.scope]

    @property
    def scope_key(self) -> str:
        assert self.scope_id is not None  # guaranteed by the validator
        return scope_key(self.scope, self.scope_id)

    @classmethod
    def build(cls, **fields: Any) -> MemoryItem:
        """Construct and validate, turning pydantic's error into :class:`InvalidInput`."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_from_pydantic(exc) from None

    def valid_at(self, when: datetime) -> bool:
        """Whether the fact was true at ``when`` (and jiyi knew it by then)."""
        start = self.valid_from or self.occurred_at or self.created_at
        known = self.created_at <= when
        return known and start <= when and (self.valid_to is None or when < self.valid_to)

    def evolve(self, **changes: Any) -> MemoryItem:
        """A validated copy with ``changes`` applied."""
        data = self.model_dump()
        data.update(changes)
        return MemoryItem.build(**data)

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (the export format)."""
        return self.model_dump(mode="json")


def invalid_from_pydantic(exc: ValidationError) -> InvalidInput:
    """Say what is wrong with every offending field (``field`` names the first)."""
    problems: list[str] = []
    fields: list[str | None] = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        said = pydantic_problem(err, [str(p) for p in err["loc"]]) if field else None
        problems.append(said or (f"field {field!r}: {msg}" if field else f"memory item: {msg}"))
        fields.append(field)
    return InvalidInput("; ".join(problems), field=fields[0], problems=tuple(problems))


# ---------------------------------------------------------------- reading stored rows

ModelT = TypeVar("ModelT", bound=BaseModel)

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_PRUNE_BELOW = MAX_JSON_DEPTH + 8
"""Containers of a stored document nested deeper than this are cut before parsing: far
below Python's recursion limit, and deep enough that a field within the limits (a
message's metadata inside a checkpoint sits a few levels down) is never cut."""


def _prune(text: str, keep: int) -> str:
    """``text`` (JSON) with every object or array nested deeper than ``keep`` levels
    replaced by ``null``: a scan of strings and brackets, so it never recurses."""
    out: list[str] = []
    depth, last, cut_from = 0, 0, -1
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == keep + 1 and cut_from < 0:
                cut_from = match.start()
        else:
            if depth == keep + 1 and cut_from >= 0:
                out += (text[last:cut_from], "null")
                last, cut_from = match.end(), -1
            depth -= 1
    out.append(text[last:])
    return "".join(out)


def _marker(field: str, why: str) -> str:
    return f"{field} was stored before jiyi's input limits and cannot be read: {why}"


def _readable_json(field: str, value: Any, limits: JsonLimits) -> Any:
    """``value``, or, where it breaks ``limits``, the same with each offending top-level
    entry replaced by a marker (``{"jiyi_unreadable": "why"}``), else the whole value."""
    try:
        check_json(value, limits)
        return value
    except ValueError as exc:
        why = str(exc)
    if isinstance(value, dict) and len(value) <= limits.entries:
        kept: dict[str, Any] = {}
        for number, (key, child) in enumerate(value.items()):
            try:
                check_json(child, limits, at=(key,))
                kept[key] = child
            except ValueError as exc:
                kept[key] = {UNREADABLE: _marker(field, str(exc))}
            try:
                check_text_value(key)
            except ValueError as exc:
                kept[f"{UNREADABLE}:{number}"] = {UNREADABLE: _marker(f"a key of {field}", str(exc))}
                del kept[key]
        try:
            check_json(kept, limits)
            return kept
        except ValueError as exc:
            why = str(exc)
    marker = {UNREADABLE: _marker(field, why)}
    return [marker] if isinstance(value, list) else marker


def readable_row(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a stored ``model``) with every JSON field that breaks the limits made
    readable (see :func:`_readable_json`); models nested in it (a checkpoint's messages)
    likewise."""
    out = dict(data)
    fields: Mapping[str, JsonLimits] = getattr(model, "json_fields", {})
    for name, limits in fields.items():
        if out.get(name) is not None:
            out[name] = _readable_json(name, out[name], limits)
    children: Mapping[str, type[BaseModel]] = getattr(model, "stored_children", {})
    for name, child in children.items():
        if isinstance(out.get(name), list):
            out[name] = [readable_row(child, v) if isinstance(v, dict) else v for v in out[name]]
    return out


def parse_stored(text: str | bytes) -> Any:
    """A stored JSON document, parsed without ever hitting a recursion limit: containers
    nested deeper than any valid field can be are cut (``null``) first."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return json.loads(_prune(text, _PRUNE_BELOW))


def load_stored(model: type[ModelT], doc: str | bytes) -> ModelT:
    """A stored row of ``model`` (MemoryItem, Message, Checkpoint) from its JSON document.

    A row written before the input limits existed may hold a JSON field nested too deep
    (or too large) for them, or for the JSON parser: instead of failing every read of
    its scope, such a field is replaced by a marker (``{"jiyi_unreadable": "why"}``, or
    that marker in place of each offending top-level entry), so the row can be listed,
    exported, edited and deleted. Any other problem raises as before."""
    try:
        return model.model_validate_json(doc)
    except ValidationError as exc:
        first = exc
    try:
        data = parse_stored(doc)
    except (ValueError, RecursionError):
        raise first from None
    if not isinstance(data, dict):
        raise first
    try:
        return model.model_validate(readable_row(model, data))
    except ValidationError:
        raise first from None


def stored_snapshot(text: str | None) -> dict[str, Any] | None:
    """A history snapshot (an item as JSON) from its stored text, made readable as
    :func:`load_stored` makes items readable."""
    if not text:
        return None
    data = parse_stored(text)
    if not isinstance(data, dict):
        return None
    return readable_row(MemoryItem, data)


# ``structured["kind"]`` of procedural records (jiyi.procedural): their structure is the
# record itself (workflow, counts), not something read off the text.
SKILL, FAILURE, DECOMPOSITION = "skill", "failure", "decomposition"
