"""The memory item, its enums and its relations (seeds 000, 002, 003).

A :class:`MemoryItem` is immutable; :meth:`MemoryItem.evolve` returns a validated copy.
Invalid values are refused at construction with :class:`~jiyi.errors.InvalidInput`
whose message names the field.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jiyi.errors import InvalidInput


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

    access_count: int = Field(default=0, ge=0)
    mention_count: int = Field(default=1, ge=1)
    version: int = Field(default=1, ge=1)
    relations: tuple[Relation, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned: list[str] = []
        for tag in value:
            tag = tag.strip()
            if not tag:
                raise ValueError("tags must not be blank")
            if len(tag) > 100:
                raise ValueError(f"tag {tag[:20]!r}... is longer than 100 characters")
            if tag not in cleaned:
                cleaned.append(tag)
        return tuple(cleaned)

    @field_validator("created_at", "updated_at", "occurred_at", "last_used_at", "expires_at")
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

    def evolve(self, **changes: Any) -> MemoryItem:
        """A validated copy with ``changes`` applied."""
        data = self.model_dump()
        data.update(changes)
        return MemoryItem.build(**data)

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (the export format)."""
        return self.model_dump(mode="json")


def invalid_from_pydantic(exc: ValidationError) -> InvalidInput:
    """Name the first offending field and say what is wrong with it."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or None
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    where = f"field {field!r}" if field else "memory item"
    extra = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    return InvalidInput(f"{where}: {msg}{extra}", field=field)


# ``structured["kind"]`` of procedural records (jiyi.procedural): their structure is the
# record itself (workflow, counts), not something read off the text.
SKILL, FAILURE, DECOMPOSITION = "skill", "failure", "decomposition"
