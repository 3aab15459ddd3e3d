"""Request and response bodies of the REST service (they make the OpenAPI document).

Request models forbid unknown fields, so a typo is a 422 naming the field. None of them
lets the caller choose a tenant: the tenant comes from the API key. ``tenant_id`` is
accepted only to be checked: a value other than the key's tenant answers 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict

from jiyi.lifecycle.compress import MAX_IDLE_DAYS
from jiyi.model import MAX_ID_LENGTH, MemoryItem, MemoryType, Scope, Source, Status, Visibility
from jiyi.read.rank import DEFAULT_MIN_RELEVANCE
from jiyi.session.chunking import MAX_DOCUMENT_CHARS
from jiyi.session.model import Message
from jiyi.who import Owner

Id = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)
# JSON types are kept: true is not 1, 1 is not true ("lax" coercion would accept both)
Int = Annotated[int, Strict()]
Bool = Annotated[bool, Strict()]
Float = Annotated[float, Strict()]  # a number: false is not 0.0
TENANT_DOC = "Optional; must equal the API key's tenant (any other value answers 404)."


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_id: str | None = Field(default=None, description=TENANT_DOC)


class _Scopes(_Request):
    user_id: str | None = Id
    project_id: str | None = Id
    session_id: str | None = Id
    agent_id: str | None = Id

    def owner(self) -> Owner:
        """Whose memory the request is about, as the library's owner value."""
        return Owner(
            user_id=self.user_id,
            project_id=self.project_id,
            session_id=self.session_id,
            agent_id=self.agent_id,
        )


# ---------------------------------------------------------------- memories


class AddRequest(_Scopes):
    # What the server enforces, stated: a memory belongs to a scope, so one of the ids is needed.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [{"required": [k]} for k in ("user_id", "project_id", "session_id", "agent_id")]
        },
    )

    content: str = Field(
        min_length=1,
        description="The memory, in Chinese or English. The write gate refuses content shorter than "
        "MEMORY_MIN_LENGTH characters after trimming (default 5) or longer than MEMORY_MAX_LENGTH.",
    )
    memory_type: MemoryType = MemoryType.FACT
    scope: Scope | None = Field(default=None, description="Inferred from the ids when omitted.")
    confidence: Float = Field(default=0.9, ge=0.0, le=1.0)
    importance: Float = Field(default=0.5, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: Source = Source.USER
    source_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    occurred_at: datetime | None = None
    expires_at: datetime | None = None
    raw: str | None = None
    summary: str | None = None
    structured: dict[str, Any] | None = None
    visibility: Visibility = Visibility.MEMBERS


class GateDecisionOut(BaseModel):
    action: str = Field(description="add, reinforce or reject")
    reasons: list[str]
    redacted: list[str] = Field(description="Kinds of sensitive data removed before storage.")
    duplicate_of: str | None = None
    similarity: float | None = None


class AddResponse(BaseModel):
    item: MemoryItem
    decision: GateDecisionOut


class RefusedDetail(BaseModel):
    code: Literal["refused"] = "refused"
    message: str
    field: str | None = "content"
    decision: GateDecisionOut


class RefusedResponse(BaseModel):
    """422 body when the write gate refuses a memory: the reasons are in ``decision``."""

    error: RefusedDetail


class SearchRequest(_Scopes):
    query: str = Field(min_length=1)
    memory_types: list[MemoryType] = Field(default_factory=list)
    statuses: list[Status] = Field(default_factory=list, description="Default: active only.")
    tags: list[str] = Field(default_factory=list, description="Every tag must be present.")
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    limit: Int = Field(default=10, ge=1, le=1000)
    threshold: Float | None = Field(default=None, ge=0.0, le=1.0)
    min_relevance: Float | None = Field(
        default=DEFAULT_MIN_RELEVANCE,
        ge=0.0,
        le=1.0,
        description=f"Drop hits less relevant than this (default {DEFAULT_MIN_RELEVANCE}: only "
        "near-certain non-matches go; 0.5 is the strict cut, below which a hit probably does not answer "
        "the query). 0 or null returns every match.",
    )
    include_expired: Bool = False
    explain: Bool = False
    as_of: datetime | None = Field(
        default=None, description="Answer for a past moment: what was true and known then (no usage touch)."
    )


class SearchHitOut(BaseModel):
    item: MemoryItem
    score: float
    similarity: float
    relevance: float | None = Field(default=None, description="Set with min_relevance or explain.")
    breakdown: dict[str, float] = Field(description="Evidence and each signal's contribution.")


class SearchResponse(BaseModel):
    hits: list[SearchHitOut]


class PageResponse(BaseModel):
    items: list[MemoryItem]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at the end.")


class RetrievedOut(BaseModel):
    """One memory an access served: its place in the answer (1 = first) and its scores."""

    item_id: str
    rank: int
    score: float
    similarity: float | None = None
    relevance: float | None = None


class MemoryAccessOut(BaseModel):
    """One entry of the retrieval log: a search, context assembly or agent tool call."""

    id: str
    at: datetime
    kind: Literal["search", "context", "tool"]
    query: str = Field(description="As stored: sensitive data redacted.")
    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    actor: str | None = Field(default=None, description="Who asked: an API key's id, an agent's tools.")
    retrieved: list[RetrievedOut]


class RetrievalsResponse(BaseModel):
    accesses: list[MemoryAccessOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at the end.")


class ServedForOut(BaseModel):
    """One query that served the memory, with the memory's rank and scores in its answer."""

    access_id: str
    at: datetime
    kind: Literal["search", "context", "tool"]
    query: str
    rank: int
    score: float
    similarity: float | None = None
    relevance: float | None = None
    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    actor: str | None = None


class WhyRetrievedResponse(BaseModel):
    """Why a memory was retrieved: the queries that served it, newest first."""

    item_id: str
    access_count: int
    last_used_at: datetime | None
    served: list[ServedForOut]
    next_cursor: str | None


class UpdateRequest(_Request):
    """Only the fields present are changed; the version goes up and history keeps the old one."""

    content: str | None = Field(default=None, min_length=1)
    memory_type: MemoryType | None = None
    confidence: Float | None = Field(default=None, ge=0.0, le=1.0)
    importance: Float | None = Field(default=None, ge=0.0, le=1.0)
    tags: list[str] | None = Field(default=None, max_length=100)
    metadata: dict[str, Any] | None = Field(
        default=None, description="Replaces the metadata; created_by is kept as it was."
    )
    status: Status | None = None
    summary: str | None = None
    structured: dict[str, Any] | None = None
    occurred_at: datetime | None = None
    expires_at: datetime | None = None
    visibility: Visibility | None = None
    reason: str = Field(default="", max_length=2000, description="Why; kept in the history.")


class HistoryEventOut(BaseModel):
    item_id: str
    action: str
    at: datetime
    version: int
    reason: str
    actor: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    seq: int | None


class StatsResponse(BaseModel):
    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    avg_confidence: float | None
    avg_importance: float | None


class ImportResponse(BaseModel):
    imported: int
    embedded: int
    retrievals: int = Field(default=0, description="Retrieval log entries put back.")


# ---------------------------------------------------------------- context and sessions


class ContextRequest(_Scopes):
    query: str = Field(min_length=1)
    budget_tokens: Int = Field(default=1500, ge=1, le=1_000_000)
    max_items: Int = Field(default=10, ge=1, le=1000)
    recent: Int = Field(default=5, ge=0, le=1000)
    semantic: Int = Field(default=5, ge=0, le=1000)
    summaries: Int = Field(default=2, ge=0, le=1000)
    profile: str | None = None
    min_relevance: Float | None = Field(
        default=DEFAULT_MIN_RELEVANCE,
        ge=0.0,
        le=1.0,
        description=f"Leave out memories less relevant than this (default {DEFAULT_MIN_RELEVANCE}); "
        "0 keeps every match.",
    )


class ContextEntryOut(BaseModel):
    source: str = Field(description="recent, semantic or summary")
    text: str
    tokens: int
    score: float | None = None
    item_id: str | None = None
    message_id: str | None = None


class ContextResponse(BaseModel):
    text: str = Field(description="The assembled prompt section.")
    tokens: int
    dropped: int
    profile: str | None
    by_source: dict[str, int]
    entries: list[ContextEntryOut]


# ---------------------------------------------------------------- profiles


class KeyDecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: str = Field(min_length=1, max_length=500)
    reason: str | None = Field(default=None, max_length=500)
    at: datetime | None = None


class KeyDecisionOut(BaseModel):
    decision: str
    reason: str | None
    at: datetime | None


class ProfilePatch(_Request):
    """Explicit profile values by field name; ``null`` clears a field (back to aggregation).

    User fields: username, background, profession, communication_style (concise, detailed,
    technical), response_format (markdown, plain, code), language_preference (zh-CN, en,
    ja ...), characteristics, content, expertise_areas, programming_languages,
    frequently_used_tools. Project fields: project_goal, tech_stack, constraints,
    key_decisions, team_conventions, current_phase. Lists take arrays of strings;
    key_decisions takes an array of {decision, reason, at}.
    Whose profile: ``user_id`` or ``project_id`` here, as in every other body, or in the
    query string.
    """

    user_id: str | None = Id
    project_id: str | None = Id
    fields: dict[str, str | list[str] | list[KeyDecisionIn] | None] = Field(
        min_length=1, max_length=50, description="Field name -> new value (null clears)."
    )


class ProfileFieldOut(BaseModel):
    value: str | list[str] | list[KeyDecisionOut] | None = Field(
        description="null (or [] for a list) when nothing is known."
    )
    source: Literal["explicit", "aggregated"]
    evidence: list[str] = Field(
        description="Ids of the memories behind the value (for an explicit value: the profile's own item)."
    )


class ProfileResponse(BaseModel):
    scope: Literal["user", "project"]
    scope_id: str
    fields: dict[str, ProfileFieldOut] = Field(description="Every field of the scope's profile, in order.")
    text: str = Field(description="The profile as a system-prompt block; empty when nothing is known.")


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    name: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    metadata: dict[str, Any] = Field(default_factory=dict)


class RememberRequest(_Request):
    messages: list[MessageIn] = Field(min_length=1, max_length=1000)
    user_id: str | None = Id
    project_id: str | None = Id
    agent_id: str | None = Id


class CompactionOut(BaseModel):
    removed: int
    tokens_before: int
    tokens_after: int
    summary: Message | None = None
    episode_job_id: str | None = None


class RememberResponse(BaseModel):
    messages: list[Message]
    job_id: str | None = Field(description="The queued extraction job, if any.")
    compacted: CompactionOut | None
    turns_skipped: int = Field(
        default=0,
        description="Turns not kept as searchable resources: pure acknowledgements "
        "('OK', 'Thanks!', '好的', '收到') or a single character. They stay in the session.",
    )


class CheckpointRequest(_Request):
    label: str | None = Field(default=None, max_length=500)
    agent_state: dict[str, Any] = Field(default_factory=dict)
    tool_states: dict[str, Any] = Field(default_factory=dict)
    pending_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class EndSessionRequest(_Request):
    """Whose session it is: the episode of its remaining turns is filed under these ids."""

    user_id: str | None = Id
    project_id: str | None = Id
    agent_id: str | None = Id


class SessionEnded(BaseModel):
    status: Literal["ended"] = "ended"
    session_id: str
    episode_job_id: str | None = Field(
        description="The queued job that summarises the remaining turns as an episode (null: no turn was left, "
        "or the session was already ended)."
    )
    already_ended: bool = Field(
        default=False,
        description="The session had been ended and no turn was added since: nothing was queued (ending "
        "a session again is a no-op). Turns added after an end are summarised, alone, by the next end.",
    )
    turns: int = Field(
        default=0, description="Turns in the queued episode (those since the previous end, if any)."
    )
    archived: int = Field(default=0, description="Session-scope memories archived by this call.")
    ended_at: datetime | None = Field(
        default=None, description="When the session was ended (its first end, when already_ended)."
    )


# ---------------------------------------------------------------- documents


class DocumentRequest(_Scopes):
    """The library's ``add_document``: a whole text, kept as overlapping chunks."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [{"required": [k]} for k in ("user_id", "project_id", "session_id", "agent_id")]
        },
    )
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS, description="The document's full text.")
    title: str | None = Field(default=None, min_length=1, max_length=200, description="Its title.")
    source_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="Where it came from (a file, a URL).",
    )


class DocumentStored(BaseModel):
    status: Literal["stored"] = "stored"
    parent_id: str = Field(description="The document's id: GET /v1/documents/{parent_id} reads it whole.")
    chunks: int
    ids: list[str] = Field(description="The chunks' memory ids, in order.")


class DocumentOut(BaseModel):
    parent_id: str
    title: str | None = None
    chunks: int
    text: str = Field(description="The document, re-assembled from its chunks exactly as it was stored.")


class Health(BaseModel):
    status: str


# ---------------------------------------------------------------- procedural memory


class _Learning(_Request):
    user_id: str | None = Id
    project_id: str | None = Id
    agent_id: str | None = Id
    scope: Literal["user", "project", "agent"] | None = Field(
        default=None, description="Inferred from the ids when omitted."
    )
    visibility: Visibility = Visibility.MEMBERS


class WorkflowStepIn(BaseModel):
    """One step of a skill: the tool it calls, plus any other JSON fields (arguments ...)."""

    model_config = ConfigDict(extra="allow")

    tool: str = Field(min_length=1, max_length=200)


class SkillLearning(_Learning):
    """One run of a skill (seed 002): recording a known name again updates its counts."""

    kind: Literal["skill"]
    name: str = Field(min_length=1, max_length=200)
    workflow: list[str | WorkflowStepIn] = Field(
        min_length=1, max_length=50, description="The steps in order: tool names or step objects."
    )
    description: str | None = Field(default=None, max_length=1000)
    task: str | None = Field(default=None, max_length=1000, description="The task it was used for.")
    succeeded: Bool = True


class FailureLearning(_Learning):
    """A failure pattern (seed 004): the same pattern again raises occurrences, merges indicators."""

    kind: Literal["failure"]
    pattern: str = Field(min_length=1, max_length=200)
    indicators: list[str] = Field(
        min_length=1, max_length=50, description="Words in a task that announce this failure."
    )
    mitigation: str = Field(min_length=1, max_length=1000)
    severity: Int = Field(ge=1, le=5, description="1 (minor) to 5 (critical).")
    description: str | None = Field(default=None, max_length=1000)


class DecompositionLearning(_Learning):
    """A task decomposition (seed 004): the same plan for a similar task updates its counts."""

    kind: Literal["decomposition"]
    task: str = Field(min_length=1, max_length=1000)
    subtasks: list[str] = Field(min_length=1, max_length=50)
    strategy: Literal["parallel", "sequential"]
    succeeded: Bool


LearningRequest = SkillLearning | FailureLearning | DecompositionLearning
"""The body of ``POST /v1/learnings``, told apart by ``kind``."""


class SuggestRequest(_Request):
    task: str = Field(min_length=1, max_length=1000)
    user_id: str | None = Id
    project_id: str | None = Id
    agent_id: str | None = Id
    min_similarity: Float | None = Field(
        default=None, ge=0.0, le=1.0, description="Default 0.74 (calibrated for the default embedder)."
    )
    min_success_rate: Float = Field(default=0.9, ge=0.0, le=1.0)


class RiskOut(BaseModel):
    pattern: str
    mitigation: str
    severity: int
    item_id: str
    matched_indicators: list[str]
    similarity: float
    occurrences: int
    reason: str


class SuggestionOut(BaseModel):
    """Empty (``found`` false, ``kind`` null, ``confidence`` 0) when nothing fits; ``risks`` either way."""

    task: str
    found: bool
    kind: Literal["decomposition", "skill"] | None
    confidence: float = Field(description="Success rate of the suggested decomposition or skill.")
    reason: str
    item_id: str | None
    matched: str | None
    similarity: float
    subtasks: list[str]
    strategy: Literal["parallel", "sequential"] | None
    skill_name: str | None
    workflow: list[dict[str, Any]]
    success_rate: float | None
    usage_count: int
    risks: list[RiskOut]


# ---------------------------------------------------------------- lifecycle


class CompressRequest(_Scopes):
    """The library's ``compress``: the scopes (none: every scope of the tenant) and the policy."""

    memory_types: list[MemoryType] = Field(default_factory=list, description="Default: every type.")
    older_than_days: Float = Field(
        default=30.0, ge=0.0, le=MAX_IDLE_DAYS, description="Idle for at least this many days."
    )
    max_access: Int = Field(default=4, ge=0, description="Retrieved at most this many times.")
    dry_run: Bool = Field(default=False, description="Report the groups and proposed texts; write nothing.")


class UncompressRequest(_Request):
    core_id: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, description="A core memory made by compress."
    )
