"""Session data: messages (short-term memory), checkpoints and background jobs.

Text must be valid Unicode and JSON fields stay within the input limits of
:mod:`jiyi.model` (a message's ``metadata`` and ``tool_calls``: :data:`FIELD_LIMITS`;
a checkpoint's state: :data:`STATE_LIMITS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jiyi.model import (
    DEFAULT_TENANT,
    FIELD_LIMITS,
    MAX_ID_LENGTH,
    STATE_LIMITS,
    JsonLimits,
    as_utc,
    check_json,
    check_text_value,
    invalid_from_pydantic,
    new_id,
    utcnow,
)

Role = Literal["user", "assistant", "system", "tool"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def build(cls, **fields: Any) -> Self:
        """Construct and validate, turning pydantic's error into :class:`~jiyi.errors.InvalidInput`
        that names the field (as :meth:`jiyi.model.MemoryItem.build` does)."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_from_pydantic(exc) from None


class Message(_Frozen):
    """One message of a session. ``seq`` orders a session's messages; the store assigns it."""

    role: Role
    content: str
    session_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1, max_length=MAX_ID_LENGTH)
    user_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    agent_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    token_count: int = Field(default=0, ge=0)
    created_at: datetime = Field(default_factory=utcnow)
    seq: int | None = Field(default=None, ge=0)
    id: str = Field(default_factory=new_id, min_length=1, max_length=MAX_ID_LENGTH)

    json_fields: ClassVar[Mapping[str, JsonLimits]] = {"metadata": FIELD_LIMITS, "tool_calls": FIELD_LIMITS}
    """The JSON fields and their limits (see :func:`jiyi.model.load_stored`)."""

    @field_validator("content", "session_id", "tenant_id", "user_id", "agent_id", "name", "id")
    @classmethod
    def _valid_text(cls, value: str | None) -> str | None:
        return None if value is None else check_text_value(value)

    @field_validator("metadata", "tool_calls")
    @classmethod
    def _json_within_limits(cls, value: object) -> object:
        check_json(value, FIELD_LIMITS)
        return value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


class Checkpoint(_Frozen):
    """A session's state at one moment (seed 000): enough to resume after a refresh,
    an interruption or an error."""

    session_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1, max_length=MAX_ID_LENGTH)
    id: str = Field(default_factory=new_id, min_length=1, max_length=MAX_ID_LENGTH)
    label: str | None = None
    messages: tuple[Message, ...] = ()
    agent_state: dict[str, Any] = Field(default_factory=dict)
    """Agent internals: todo list, reasoning context, ..."""
    tool_states: dict[str, Any] = Field(default_factory=dict)
    pending_tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls awaiting a person's approval (human in the loop)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)

    json_fields: ClassVar[Mapping[str, JsonLimits]] = {
        "agent_state": STATE_LIMITS,
        "tool_states": STATE_LIMITS,
        "pending_tool_calls": STATE_LIMITS,
        "metadata": STATE_LIMITS,
    }
    """The JSON fields and their limits (see :func:`jiyi.model.load_stored`)."""
    stored_children: ClassVar[Mapping[str, type[BaseModel]]] = {"messages": Message}

    @field_validator("session_id", "tenant_id", "id", "label")
    @classmethod
    def _valid_text(cls, value: str | None) -> str | None:
        return None if value is None else check_text_value(value)

    @field_validator("agent_state", "tool_states", "pending_tool_calls", "metadata")
    @classmethod
    def _json_within_limits(cls, value: object) -> object:
        check_json(value, STATE_LIMITS)
        return value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


JobStatus = Literal["queued", "running", "done", "failed"]


class Job(_Frozen):
    """A unit of background work (extraction, episodes, embedding), kept in the store so
    that nothing is lost when a process dies and failures stay visible."""

    kind: str = Field(min_length=1, max_length=100)
    payload: dict[str, Any] = Field(default_factory=dict)
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1, max_length=MAX_ID_LENGTH)
    id: str = Field(default_factory=new_id, min_length=1, max_length=MAX_ID_LENGTH)
    status: JobStatus = "queued"
    attempts: int = Field(default=0, ge=0)
    max_attempts: int = Field(default=5, ge=1)
    last_error: str | None = None
    result: dict[str, Any] | None = None
    """What a finished job did: counts by action and every refused candidate with its reason."""
    run_after: datetime = Field(default_factory=utcnow)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    locked_by: str | None = None
    locked_until: datetime | None = None

    @field_validator("run_after", "created_at", "updated_at", "locked_until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)
