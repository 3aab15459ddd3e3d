"""Conversation memory as flows: session messages, compaction, background extraction,
reconciliation, episodes, checkpoints, documents and hierarchical context.

These are flows over a :class:`~jiyi.runtime.Runtime`, written like
the rest of the API, so the sync and async drivers run them unchanged. ``remember`` only
appends messages and queues work; :func:`process_jobs` (the in-process
worker thread, or ``jiyi worker``) does extraction and episodes later.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jiyi.effects import Flow, call
from jiyi.errors import Forbidden, InvalidInput, LLMError, NotFound, WriteConflict
from jiyi.items import all_items, change_event
from jiyi.model import MemoryItem, MemoryType, Scope, Source, Status, owner_scope, scope_key
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.session.foreign import as_mapping
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AppendMessages,
    Change,
    ClaimJobs,
    DeleteCheckpoints,
    DeleteMessages,
    Filter,
    GetCheckpoint,
    GetItems,
    GetMessages,
    Guard,
    HistoryAction,
    ListCheckpoints,
    PutCheckpoint,
    PutJob,
    ScopeClock,
    Upsert,
    Viewer,
    Write,
)
from jiyi.text.tokenize import index_text
from jiyi.text.tokens import count_message_tokens
from jiyi.write.extract import Extracted, Turn
from jiyi.write.extract_rules import CONFIDENCE_FACT
from jiyi.write.gate import scrub
from jiyi.write.pipeline import GUARD_ATTEMPTS, Outcome, store_extracted
from jiyi.write.resources import keeps_turn, store_turns

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- settings and results


@dataclass(frozen=True)
class RememberResult:
    messages: list[Message]
    job_id: str | None
    """The queued extraction job (None when there was nothing to extract)."""
    compacted: CompactionResult | None
    turns_skipped: int = 0
    """Turns not kept as searchable resources because they only acknowledge ("OK",
    "Thanks!", "好的", "收到"), are an assistant's courtesy ("Congrats! How are you
    celebrating?") or are a single character (:func:`jiyi.write.resources.keeps_turn`).
    They stay in the session buffer."""


@dataclass(frozen=True)
class CompactionResult:
    removed: int
    summary: Message | None
    tokens_before: int
    tokens_after: int
    episode_job_id: str | None = None


@dataclass(frozen=True)
class SessionEnd:
    """What :func:`end_session` did.

    A session's end is recorded in the session itself (a system message of kind
    ``session_end``, see :func:`is_end_mark`), so ending it again is idempotent: with no
    turn added since, ``already_ended`` is True and no episode is queued. Turns added
    after an end are a continuation: the next end queues an episode of those turns only."""

    session_id: str
    episode_job_id: str | None
    """The queued episode job (None when no turn was left to summarise)."""
    already_ended: bool = False
    """The session had been ended and no turn was added since: nothing new was queued."""
    turns: int = 0
    """Turns in the queued episode (those said since the previous end, if any)."""
    archived: int = 0
    """Session-scope memories archived by this call."""
    ended_at: datetime | None = None
    """When the session was ended: now, or for ``already_ended`` the earlier end that still holds."""

    @property
    def found(self) -> bool:
        """Whether the session holds any message: ending one that holds none records nothing
        (no end mark would create it)."""
        return self.ended_at is not None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "status": "ended",
            "session_id": self.session_id,
            "episode_job_id": self.episode_job_id,
            "already_ended": self.already_ended,
            "turns": self.turns,
            "archived": self.archived,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
        }


@dataclass(frozen=True)
class JobReport:
    job_id: str
    kind: str
    status: str
    outcomes: tuple[Outcome, ...] = ()
    error: str | None = None


def _as_message(
    rt: Runtime,
    raw: Message | Mapping[str, Any] | tuple[str, str],
    base: dict[str, Any],
    marks: Mapping[str, str] | None = None,
) -> Message:
    raw = as_mapping(raw)  # type: ignore[assignment]  # LangChain / OpenAI shapes
    if isinstance(raw, Message):
        data = raw.model_dump()
        data.update(
            {k: v for k, v in base.items() if data.get(k) is None or k in ("tenant_id", "session_id")}
        )
    elif isinstance(raw, tuple):
        if len(raw) != 2:
            raise InvalidInput("a message tuple must be (role, content)", field="messages")
        data = {**base, "role": raw[0], "content": raw[1]}
    elif isinstance(raw, Mapping):
        data = {**base, **{k: v for k, v in raw.items() if v is not None}}
        # The session decides where a message lives, never the message itself.
        data.update(tenant_id=base["tenant_id"], session_id=base["session_id"])
    else:
        raise InvalidInput(
            "a message must be a Message, a mapping, (role, content) or a LangChain message, "
            f"not {type(raw).__name__}",
            field="messages",
        )
    data.pop("seq", None)
    if marks:  # who wrote it and its project come from the call, never from the message
        data["metadata"] = {**(data.get("metadata") or {}), **marks}
    try:
        msg = Message.model_validate(data)
    except Exception as exc:  # pydantic's error, said plainly
        from pydantic import ValidationError

        from jiyi.model import invalid_from_pydantic

        if isinstance(exc, ValidationError):
            raise invalid_from_pydantic(exc) from None
        raise
    msg = scrub_message(rt, msg)
    if not msg.token_count:
        msg = msg.model_copy(update={"token_count": count_message_tokens(msg.role, msg.content)})
    return msg


def scrub_message(rt: Runtime, msg: Message) -> Message:
    """The message with sensitive data redacted from its content, tool calls and metadata
    (the tenant's policy): short-term memory is stored text like any other."""
    fields = (msg.content, msg.tool_calls, msg.metadata)
    content, tool_calls, metadata = scrub(rt.gate, msg.tenant_id, fields)
    if (content, tool_calls, metadata) == fields:
        return msg
    return msg.model_copy(update={"content": content, "tool_calls": tool_calls, "metadata": metadata})


def _turn_job(
    rt: Runtime, kind: str, tenant: str, turns: Sequence[Message], scope_ids: Mapping[str, str | None]
) -> Job:
    """A queued job over conversation turns (what was said, by whom, when)."""
    now = rt.now()
    return Job(
        kind=kind,
        tenant_id=tenant,
        max_attempts=rt.session.job_attempts,
        payload={
            **scope_ids,
            # Messages are redacted when stored; turns stored before that are redacted here.
            "turns": [
                {
                    "role": m.role,
                    "content": scrub(rt.gate, tenant, m.content),
                    "name": m.name,
                    "at": m.created_at.isoformat(),
                    "id": m.id,
                }
                for m in turns
            ],
            "started_at": turns[0].created_at.isoformat() if turns else now.isoformat(),
        },
        run_after=now,
        created_at=now,
        updated_at=now,
    )


def _turns(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role in ("user", "assistant")]


def is_summary(m: Message) -> bool:
    return m.role == "system" and m.metadata.get("kind") == "summary"


END_KIND = "session_end"


def is_end_mark(m: Message) -> bool:
    """The record :func:`end_session` leaves in a session: which turns its episode
    covered (``metadata.through_seq``) and its job (``metadata.episode_job_id``). Not a
    turn: it is left out of episodes, the working window and the context."""
    return m.role == "system" and m.metadata.get("kind") == END_KIND


def _ended_through(msgs: Sequence[Message]) -> tuple[int, Message | None]:
    """The last seq an end of the session covered (-1: never ended) and that end's mark."""
    marks = [m for m in msgs if is_end_mark(m)]
    if not marks:
        return -1, None
    last = marks[-1]
    through = last.metadata.get("through_seq")
    return (through if isinstance(through, int) else last.seq if last.seq is not None else -1), last


# ---------------------------------------------------------------- who may read a session

WRITER_KEY = "created_by"
PROJECT_KEY = "project_id"


def _message_list(messages: object) -> list[Any]:
    """The messages argument as a list: a list (or tuple) of messages, never a bare
    string or mapping (which would be read one character or key at a time)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidInput(
            f"messages must be a list of messages (role and content), not {type(messages).__name__}",
            field="messages",
        )
    return list(messages)


def _marks(viewer: Viewer | None, project_id: str | None) -> dict[str, str]:
    """What a new message records about itself: the project its session belongs to and
    the viewer's actor as its writer (docs/permissions.md, "Sessions")."""
    marks: dict[str, str] = {}
    if project_id is not None:
        marks[PROJECT_KEY] = project_id
    if viewer is not None and viewer.actor is not None:
        marks[WRITER_KEY] = viewer.actor
    return marks


def session_projects(msgs: Sequence[Message]) -> set[str]:
    """The projects recorded on a session's messages (none for a session of no project,
    or one stored before projects were recorded). A summary of messages of several
    projects records them all, as a list."""
    out: set[str] = set()
    for m in msgs:
        value = m.metadata.get(PROJECT_KEY)
        values = value if isinstance(value, list) else [value]
        out.update(v for v in values if isinstance(v, str))
    return out


def _project_mark(msgs: Sequence[Message], project_id: str | None) -> dict[str, Any]:
    """The project mark of a message that replaces ``msgs`` (a compaction summary)."""
    projects = sorted(session_projects(msgs) | ({project_id} if project_id is not None else set()))
    if not projects:
        return {}
    return {PROJECT_KEY: projects[0] if len(projects) == 1 else projects}


def may_read_session(viewer: Viewer | None, msgs: Sequence[Message]) -> bool:
    """Members only, as for a ``members`` project memory: ``viewer`` must be a member of
    every project recorded on the messages. No viewer, or a session of no project, is
    no restriction."""
    return viewer is None or all(viewer.member_of(p) for p in session_projects(msgs))


def _hidden(session_id: str) -> NotFound:
    return NotFound(f"no session {session_id!r}")


def readable_messages(
    tenant: str, session_id: str, viewer: Viewer | None, extra: Sequence[Message] = ()
) -> Flow[list[Message]]:
    """All the session's messages, or NotFound when ``viewer`` may not read the session."""
    msgs = yield from call(GetMessages(tenant, session_id))
    if not may_read_session(viewer, [*msgs, *extra]):
        raise _hidden(session_id)
    return msgs


def add_messages(
    rt: Runtime,
    /,
    session_id: str,
    messages: Sequence[Message | Mapping[str, Any] | tuple[str, str]],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    project_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[Message]]:
    """Append messages to a session's short-term memory (no extraction). ``project_id``
    makes it a project session (read by members only); ``viewer.actor`` is recorded as
    the writer (``metadata.created_by``)."""
    base = {
        "session_id": session_id,
        "tenant_id": rt.tenant(tenant_id),
        "user_id": user_id,
        "agent_id": agent_id,
        "created_at": rt.now(),
    }
    marks = _marks(viewer, project_id)
    msgs = tuple(_as_message(rt, m, base, marks) for m in _message_list(messages))
    if not msgs:
        raise InvalidInput("no messages given", field="messages")
    yield from call(Write((AppendMessages(msgs),)))
    return (yield from call(GetMessages(msgs[0].tenant_id, session_id, last=len(msgs))))


def messages(
    rt: Runtime,
    /,
    session_id: str,
    *,
    tenant_id: str | None = None,
    last: int | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[Message]]:
    """A session's messages in order (the ``last`` N when given); NotFound when
    ``viewer`` may not read the session (:func:`may_read_session`)."""
    tenant = rt.tenant(tenant_id)
    if viewer is not None:
        yield from readable_messages(tenant, session_id, viewer)
    return (yield from call(GetMessages(tenant, session_id, last=last)))


def working_window(
    rt: Runtime,
    /,
    session_id: str,
    *,
    max_tokens: int = 4000,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[Message]]:
    """Messages for the next model call: every system message, then as many of the
    most recent turns as fit in ``max_tokens`` (oldest dropped first).

    An assistant message that calls tools and the tool results answering it are kept or
    dropped together: a model API refuses a tool result whose call is missing."""
    msgs = [
        m
        for m in (yield from readable_messages(rt.tenant(tenant_id), session_id, viewer))
        if not is_end_mark(m)
    ]
    system = [m for m in msgs if m.role == "system"]
    budget = max_tokens - sum(m.token_count for m in system)
    kept: list[Message] = []
    for group in reversed(tool_call_groups([m for m in msgs if m.role != "system"])):
        cost = sum(m.token_count for m in group)
        if cost > budget:
            break
        kept.extend(group)
        budget -= cost
    chosen = {m.seq for m in system} | {m.seq for m in kept}
    return [m for m in msgs if m.seq in chosen]


def tool_call_groups(msgs: Sequence[Message]) -> list[list[Message]]:
    """``msgs`` in order, cut into units that must stay together: one message, or an
    assistant message with tool calls followed by the tool results that answer it."""
    groups: list[list[Message]] = []
    for m in msgs:
        opener = groups[-1][0] if groups else None
        if m.role == "tool" and opener is not None and opener.role == "assistant" and opener.tool_calls:
            groups[-1].append(m)
        else:
            groups.append([m])
    return groups


def remember(
    rt: Runtime,
    /,
    messages: Sequence[Message | Mapping[str, Any] | tuple[str, str]],
    *,
    session_id: str,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[RememberResult]:
    """Keep messages in the session and queue their extraction; returns at once.

    The messages and the extraction job land in one transaction, so a crash cannot
    lose one without the other. Compaction runs here when the session is too long.
    ``project_id`` makes the session a project session (its messages, jobs and
    checkpoints are read by members only) and ``viewer.actor`` is recorded as the
    messages' writer (``metadata.created_by``), as :func:`add_messages` does.

    With ``SessionConfig.keep_turns`` each user and assistant turn also becomes a
    searchable resource, except pure acknowledgements ("OK", "Sure!", "Thanks", "好的",
    "嗯嗯", "收到": after punctuation and emoji are removed, only words of a small zh/en
    list are left); those stay in the session buffer and are counted in
    ``RememberResult.turns_skipped``. Answers ("No.", "可以") and turns with content
    ("好的，我明天九点到") are kept.
    """
    tenant = rt.tenant(tenant_id)
    if user_id is None and project_id is None and agent_id is None:
        raise InvalidInput("say whose memory this is: give user_id, project_id or agent_id", field="user_id")
    base = {
        "session_id": session_id,
        "tenant_id": tenant,
        "user_id": user_id,
        "agent_id": agent_id,
        "created_at": rt.now(),
    }
    marks = _marks(viewer, project_id)
    msgs = tuple(_as_message(rt, m, base, marks) for m in _message_list(messages))
    if not msgs:
        raise InvalidInput("no messages given", field="messages")
    cfg = rt.session
    changes: list[Any] = [AppendMessages(msgs)]
    job: Job | None = None
    extract = cfg.extract and any(m.role == "user" for m in msgs)
    said = [m for m in msgs if m.role in ("user", "assistant") and m.content.strip()]
    kept = [m for m in said if keeps_turn(m.role, m.content)] if cfg.keep_turns else []
    skipped = len(said) - len(kept) if cfg.keep_turns else 0
    if extract or kept:
        ids = {
            "session_id": session_id,
            "user_id": user_id,
            "project_id": project_id,
            "agent_id": agent_id,
        }
        job = _turn_job(rt, "extract", tenant, msgs, ids)
        changes.append(PutJob(job))
    yield from call(Write(tuple(changes)))
    stored = yield from call(GetMessages(tenant, session_id, last=len(msgs)))
    compacted = yield from _compact_if_needed(rt, session_id, tenant, user_id, project_id, agent_id)
    return RememberResult(stored, job.id if job else None, compacted, skipped)


def compact(
    rt: Runtime,
    /,
    session_id: str,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
) -> Flow[CompactionResult]:
    """Summarise all but the most recent turns into one system message, now."""
    tenant = rt.tenant(tenant_id)
    result = yield from _compact(rt, session_id, tenant, user_id, project_id, agent_id)
    return result


def _compact_if_needed(
    rt: Runtime,
    session_id: str,
    tenant: str,
    user_id: str | None,
    project_id: str | None,
    agent_id: str | None,
) -> Flow[CompactionResult | None]:
    msgs = yield from call(GetMessages(tenant, session_id))
    cfg = rt.session
    if len(_turns(msgs)) <= cfg.max_turns and sum(m.token_count for m in msgs) <= cfg.max_tokens:
        return None
    return (yield from _compact(rt, session_id, tenant, user_id, project_id, agent_id))


def _compact(
    rt: Runtime,
    session_id: str,
    tenant: str,
    user_id: str | None,
    project_id: str | None,
    agent_id: str | None,
) -> Flow[CompactionResult]:
    from jiyi.session.summarize import compaction_summary

    msgs = yield from call(GetMessages(tenant, session_id))
    before = sum(m.token_count for m in msgs)
    turns = _turns(msgs)
    keep = rt.session.keep_recent
    old = turns[: max(0, len(turns) - keep)]
    if not old:
        return CompactionResult(0, None, before, before)
    previous = [m for m in msgs if is_summary(m)]
    prev_text = "\n".join(m.content for m in previous) or None
    text = scrub(rt.gate, tenant, compaction_summary([Turn(m.role, m.content) for m in old], prev_text))
    first = min([m.seq for m in previous + old if m.seq is not None])
    summary = Message(
        role="system",
        content=text,
        session_id=session_id,
        tenant_id=tenant,
        user_id=user_id,
        agent_id=agent_id,
        # The summary keeps the session's project, so a compacted session stays members-only.
        metadata={"kind": "summary", "replaced": len(old) + len(previous), **_project_mark(msgs, project_id)},
        token_count=count_message_tokens("system", text),
        created_at=rt.now(),
        seq=first,
    )
    removed = tuple(m.seq for m in previous + old if m.seq is not None)
    changes: list[Any] = [DeleteMessages(tenant, session_id, removed), AppendMessages((summary,))]
    episode: Job | None = None
    # Turns an end of the session already queued as an episode are not summarised twice.
    through, _ = _ended_through(msgs)
    unsummarised = [m for m in old if m.seq is None or m.seq > through]
    if rt.session.episodes and unsummarised:
        ids = {
            "session_id": session_id,
            "user_id": user_id,
            "project_id": project_id,
            "agent_id": agent_id,
        }
        episode = _turn_job(rt, "episode", tenant, unsummarised, ids)
        changes.append(PutJob(episode))
    yield from call(Write(tuple(changes)))
    after = before - sum(m.token_count for m in previous + old) + summary.token_count
    return CompactionResult(len(old), summary, before, after, episode.id if episode else None)


def end_session(
    rt: Runtime,
    /,
    session_id: str,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[SessionEnd]:
    """Queue an episode for the session's remaining turns and record the end in the
    session. Idempotent: ending an ended session to which no turn was added is a no-op
    (``already_ended``, no second episode); turns added after an end form, at the next
    end, an episode of those turns only. Session-scope memories end with their session:
    they are archived, each with the reason in its history. ``viewer`` must be able to
    read the session (else NotFound), as for its messages.

    Two ends at once (threads, processes, replicas) queue one episode: each guards its
    write with the session scope's clock (:class:`~jiyi.store.base.Guard`), and the one
    that lost the race reads the session again and finds it ended."""
    tenant = rt.tenant(tenant_id)
    key = scope_key(Scope.SESSION, session_id)
    for attempt in range(1, GUARD_ATTEMPTS + 1):
        seen = yield from call(ScopeClock(tenant, key))
        try:
            return (
                yield from _end_once(
                    rt, session_id, tenant, Guard(tenant, key, seen), user_id, project_id, agent_id, viewer
                )
            )
        except WriteConflict:
            if attempt == GUARD_ATTEMPTS:
                raise
            log.debug("session %s changed while it was ended; reading it again", session_id)
    raise AssertionError("unreachable")


def _end_once(
    rt: Runtime,
    session_id: str,
    tenant: str,
    guard: Guard,
    user_id: str | None,
    project_id: str | None,
    agent_id: str | None,
    viewer: Viewer | None,
) -> Flow[SessionEnd]:
    msgs = yield from readable_messages(tenant, session_id, viewer)
    through, mark = _ended_through(msgs)
    ended = yield from _end_session_memories(rt, tenant, session_id)
    archived = len(ended)
    if not msgs:  # no such session: nothing to summarise, and no mark that would create it
        if ended:
            yield from call(Write((guard, *ended)))
        return SessionEnd(session_id, None, archived=archived)
    turns = [m for m in _turns(msgs) if m.seq is None or m.seq > through]
    if mark is not None and not turns:
        if ended:  # session memories written after the end end with it too
            yield from call(Write((guard, *ended)))
        return SessionEnd(session_id, None, already_ended=True, archived=archived, ended_at=mark.created_at)
    changes: list[Change] = [guard, *ended]
    job = None
    if turns:
        ids = {"session_id": session_id, "user_id": user_id, "project_id": project_id, "agent_id": agent_id}
        job = _turn_job(rt, "episode", tenant, turns, ids)
        changes.append(PutJob(job))
    now = rt.now()
    last_seq = max((m.seq for m in msgs if m.seq is not None), default=-1)
    end_mark = Message(
        role="system",
        content="(session ended)",
        session_id=session_id,
        tenant_id=tenant,
        user_id=user_id,
        agent_id=agent_id,
        metadata={
            "kind": END_KIND,
            "through_seq": last_seq,
            "episode_job_id": job.id if job else None,
            "turns": len(turns),
            # the session's own projects only: ``project_id`` files the episode, and must
            # not make the session members-only after the fact
            **_project_mark(msgs, None),
            **_marks(viewer, None),
        },
        token_count=0,
        created_at=now,
    )
    changes.append(AppendMessages((end_mark,)))
    yield from call(Write(tuple(changes)))
    return SessionEnd(session_id, job.id if job else None, turns=len(turns), archived=archived, ended_at=now)


def _end_session_memories(rt: Runtime, tenant: str, session_id: str) -> Flow[list[Change]]:
    flt = Filter(tenant_id=tenant, scope_keys=(scope_key(Scope.SESSION, session_id),), include_expired=True)
    now = rt.now()
    changes: list[Change] = []
    for item in (yield from all_items(rt, flt)):
        ended = item.evolve(status=Status.ARCHIVED, version=item.version + 1, updated_at=now)
        event = change_event(rt, HistoryAction.ARCHIVE, item, ended, "its session ended", "lifecycle")
        changes.append(Upsert(ended, index_text(ended.content), event))
    return changes


def process_jobs(
    rt: Runtime, /, *, worker: str = "worker", limit: int = 10, kinds: Sequence[str] = ()
) -> Flow[list[JobReport]]:
    """Run up to ``limit`` queued jobs. Failures are retried with backoff and stay
    visible (status ``failed`` with the error) once attempts are used up."""
    now = rt.now()
    jobs = yield from call(ClaimJobs(worker, now, kinds=tuple(kinds), limit=limit))
    reports: list[JobReport] = []
    for job in jobs:
        try:
            if job.kind == "extract":
                outcomes = yield from _run_extract(rt, job)
            elif job.kind == "episode":
                outcomes = yield from _run_episode(rt, job)
            else:
                raise InvalidInput(f"unknown job kind {job.kind!r}")
        except Exception as exc:  # a job's failure must not stop the others
            error = f"{type(exc).__name__}: {exc}"
            final = job.attempts >= job.max_attempts
            delay = rt.session.job_backoff_seconds * (2 ** max(0, job.attempts - 1))
            failed = job.model_copy(
                update={
                    "status": "failed" if final else "queued",
                    # An error may quote the text it failed on.
                    "last_error": scrub(
                        rt.gate,
                        job.tenant_id,
                        error + ("" if final else "\n" + traceback.format_exc(limit=3)),
                    ),
                    "run_after": rt.now() + timedelta(seconds=delay),
                    "updated_at": rt.now(),
                    "locked_by": None,
                    "locked_until": None,
                }
            )
            yield from call(Write((PutJob(failed),)))
            reports.append(JobReport(job.id, job.kind, failed.status, error=error))
            continue
        done = job.model_copy(
            update={
                "status": "done",
                "updated_at": rt.now(),
                "locked_by": None,
                "locked_until": None,
                "result": scrub(rt.gate, job.tenant_id, job_result(outcomes)),
            }
        )
        yield from call(Write((PutJob(done),)))
        reports.append(JobReport(job.id, job.kind, "done", tuple(outcomes)))
    return reports


def job_result(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """A finished job's result: how many candidates each action took, and every refused
    one with its reason, so nothing a user said vanishes silently."""
    actions: dict[str, int] = {}
    for o in outcomes:
        actions[o.action] = actions.get(o.action, 0) + 1
    refused = [
        {"content": o.candidate.content, "reason": o.reason} for o in outcomes if o.action == "rejected"
    ]
    result: dict[str, Any] = {"actions": actions, "refused": refused}
    notes = [o.reason for o in outcomes if o.action == "fallback"]
    if notes:
        result["notes"] = notes
    return result


def jobs(
    rt: Runtime,
    /,
    *,
    statuses: Sequence[str] = (),
    limit: int = 100,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[Job]]:
    """Queued, running, done or failed jobs of one tenant (visibility for operators).
    ``viewer`` hides jobs of projects it is not a member of (their payload holds what
    was said); ``limit`` counts the jobs shown."""
    from jiyi.store.base import ListJobs

    tenant = rt.tenant(tenant_id)
    asked = limit
    while True:
        found = yield from call(ListJobs(tuple(statuses), limit=asked, tenant_id=tenant))
        shown = [j for j in found if viewer is None or _job_visible(viewer, j)]
        if len(shown) >= limit or len(found) < asked:
            return shown[:limit]
        asked *= 4


def _job_visible(viewer: Viewer, job: Job) -> bool:
    """A job of a project is seen by that project's members; a job of no project by all."""
    project = job.payload.get("project_id")
    return not isinstance(project, str) or viewer.member_of(project)


def _run_extract(rt: Runtime, job: Job) -> Flow[list[Outcome]]:
    raw_turns = job.payload.get("turns", [])
    turns = [Turn(t["role"], t["content"]) for t in raw_turns]
    candidates: list[Extracted] = []
    fell_back: list[Outcome] = []
    if rt.session.extract and rt.llm is not None:
        from jiyi.write.extract_llm import LLMExtractor

        try:
            result = yield from LLMExtractor(rt.llm).flow(turns)
            candidates = list(result.items)
        except LLMError as exc:
            # A model that is down must not lose what was said: the offline rules extract
            # instead, and the job's result and the log say so.
            why = f"the LLM extractor failed ({exc}); extracted with the offline rules instead"
            log.warning("job %s: %s", job.id, why)
            fell_back.append(Outcome(Extracted("", MemoryType.FACT, 0.0), "fallback", why))
            candidates = _rule_candidates(turns)
    elif rt.session.extract:
        candidates = _rule_candidates(turns)
    # When and by whom each turn was said follows the candidate into the store.
    times = [datetime.fromisoformat(t["at"]) if t.get("at") else None for t in raw_turns]
    names = [t.get("name") for t in raw_turns]
    scope = _scope_of(job)
    resources = None
    if rt.session.keep_turns:
        resources = yield from store_turns(rt, raw_turns, tenant=job.tenant_id, owner=scope, times=times)
    stored = yield from store_extracted(
        rt, candidates, turn_times=times, turn_names=names, resources=resources, **scope
    )
    return [*fell_back, *stored]


def _rule_candidates(turns: Sequence[Turn]) -> list[Extracted]:
    from jiyi.write.extract_rules import RuleExtractor

    return RuleExtractor().extract(turns)


def _run_episode(rt: Runtime, job: Job) -> Flow[list[Outcome]]:
    from jiyi.session.summarize import summarize_extractive, summary_flow

    turns = [Turn(t["role"], t["content"]) for t in job.payload.get("turns", [])]
    if not turns:
        return []
    if rt.llm is not None:
        summary = yield from summary_flow(turns)
    else:
        summary = summarize_extractive(turns)
    scope_ids = _scope_of(job)
    started = job.payload.get("started_at")
    occurred = datetime.fromisoformat(started) if isinstance(started, str) else rt.now()
    item = yield from add_episode(
        rt,
        summary.summary,
        key_topics=summary.key_topics,
        actions_taken=summary.actions_taken,
        outcomes=summary.outcomes,
        importance=summary.importance,
        occurred_at=occurred,
        # What jiyi made of a session, not what anyone said: held as surely as a fact the
        # extractor reads from a turn, below the turns themselves (1.0).
        confidence=EPISODE_CONFIDENCE,
        **scope_ids,
    )
    return [
        Outcome(
            Extracted(summary.summary, MemoryType.EVENT, EPISODE_CONFIDENCE),
            "episode",
            "episode written",
            item.id,
        )
    ]


EPISODE_CONFIDENCE = CONFIDENCE_FACT
"""The confidence of an episode a session's end writes (the extractor's for a stated fact)."""


def add_episode(
    rt: Runtime,
    /,
    summary: str,
    *,
    key_topics: Sequence[str] = (),
    actions_taken: Sequence[str] = (),
    outcomes: Sequence[str] = (),
    importance: float = 0.5,
    occurred_at: datetime | None = None,
    session_id: str | None = None,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    confidence: float = 1.0,
) -> Flow[MemoryItem]:
    """Store an episode (seed 001): searchable like any memory, tagged ``episode``.
    Its text (summary, topics, actions, outcomes) is redacted like any stored text.
    ``confidence``: how sure the caller is of it (a session's end writes its own at
    :data:`EPISODE_CONFIDENCE`)."""
    now = rt.now()
    summary, key_topics, actions_taken, outcomes = scrub(
        rt.gate, rt.tenant(tenant_id), (summary, tuple(key_topics), tuple(actions_taken), tuple(outcomes))
    )
    scope = owner_scope(user_id, project_id, agent_id)
    item = MemoryItem.build(
        content=summary,
        summary=summary,
        memory_type=MemoryType.EVENT,
        scope=scope,
        tenant_id=rt.tenant(tenant_id),
        user_id=user_id,
        project_id=project_id,
        session_id=session_id,
        agent_id=agent_id,
        importance=importance,
        confidence=confidence,
        source=Source.SYSTEM,
        tags=("episode",),
        structured={
            "key_topics": list(key_topics),
            "actions_taken": list(actions_taken),
            "outcomes": list(outcomes),
        },
        occurred_at=occurred_at or now,
        created_at=now,
        updated_at=now,
    )
    topics = " ".join(key_topics)
    vectors, cache_put = yield from embed_memories(rt, [summary])
    upsert = Upsert(
        item,
        index_text(f"{summary} {topics}"),
        change_event(rt, HistoryAction.ADD, None, item, "episode of a session", "pipeline"),
        vector=vectors[0],
        model_id=rt.embedder.model_id,
    )
    yield from call(Write((cache_put, upsert) if cache_put else (upsert,)))
    return item


def save_checkpoint(
    rt: Runtime,
    /,
    session_id: str,
    *,
    agent_state: Mapping[str, Any] | None = None,
    tool_states: Mapping[str, Any] | None = None,
    pending_tool_calls: Sequence[Mapping[str, Any]] = (),
    messages: Sequence[Message] | None = None,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[Checkpoint]:
    """Save a session's state; by default its current messages. Sensitive data is
    redacted from the messages and from every string in the states, the pending tool
    calls, the metadata and the label (the tenant's policy). ``viewer`` must be able to
    read the session (else NotFound); its actor is recorded as ``metadata.created_by``."""
    tenant = rt.tenant(tenant_id)
    current = yield from readable_messages(tenant, session_id, viewer, messages or ())
    if messages is None:
        messages = current
    metadata = {**(metadata or {}), **_marks(viewer, None)}
    cp = Checkpoint.build(
        session_id=session_id,
        tenant_id=tenant,
        label=scrub(rt.gate, tenant, label),
        messages=tuple(scrub_message(rt, m) for m in messages),
        agent_state=scrub(rt.gate, tenant, dict(agent_state or {})),
        tool_states=scrub(rt.gate, tenant, dict(tool_states or {})),
        pending_tool_calls=scrub(rt.gate, tenant, tuple(dict(c) for c in pending_tool_calls)),
        metadata=scrub(rt.gate, tenant, dict(metadata or {})),
        created_at=rt.now(),
    )
    yield from call(Write((PutCheckpoint(cp),)))
    return cp


def restore_checkpoint(
    rt: Runtime,
    /,
    session_id: str,
    checkpoint_id: str | None = None,
    *,
    replace_messages: bool = True,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[Checkpoint]:
    """Load a checkpoint (the latest when no id is given). With ``replace_messages``
    the session's messages become exactly the checkpoint's, in one transaction.

    ``viewer`` must be able to read the session and the checkpoint (else NotFound, as if
    there were none); replacing messages needs a ``sees_all`` viewer or the one that
    wrote every current message and the checkpoint (else :class:`Forbidden`)."""
    tenant = rt.tenant(tenant_id)
    cp = yield from call(GetCheckpoint(tenant, session_id, checkpoint_id))
    what = f"no checkpoint {checkpoint_id!r}" if checkpoint_id else "no checkpoint"
    if cp is None:
        raise NotFound(f"{what} for session {session_id!r}")
    try:
        current = yield from readable_messages(tenant, session_id, viewer, cp.messages)
    except NotFound:
        raise NotFound(f"{what} for session {session_id!r}") from None
    if replace_messages:
        _check_may_replace(viewer, session_id, current, cp)
        seqs = tuple(m.seq for m in current if m.seq is not None)
        # A checkpoint saved before redaction (or under another policy) is redacted as it is written back.
        restored = tuple(scrub_message(rt, m) for m in cp.messages)
        restored += _carried_end(current, restored)
        yield from call(Write((DeleteMessages(tenant, session_id, seqs), AppendMessages(restored))))
    return cp


def _carried_end(current: Sequence[Message], restored: Sequence[Message]) -> tuple[Message, ...]:
    """An end that already queued an episode for turns the checkpoint brings back still
    covers them: without its mark, the next end would summarise them a second time. The
    mark is carried over, covering the restored turns only (turns added after the restore
    are new and form an episode of their own)."""
    through, mark = _ended_through(current)
    kept, _ = _ended_through(restored)
    covered = [m.seq for m in restored if m.seq is not None and kept < m.seq <= through]
    if mark is None or not covered:
        return ()
    return (
        mark.model_copy(update={"seq": None, "metadata": {**mark.metadata, "through_seq": max(covered)}}),
    )


def _check_may_replace(
    viewer: Viewer | None, session_id: str, current: Sequence[Message], cp: Checkpoint
) -> None:
    """Restoring replaces messages: only their writer may do that (or a ``sees_all`` viewer).
    A message or checkpoint without a recorded writer (stored by an older version, or by
    the library without a viewer) counts as someone else's."""
    if viewer is None or viewer.sees_all:
        return
    writers = {m.metadata.get(WRITER_KEY) for m in current} | {cp.metadata.get(WRITER_KEY)}
    if viewer.actor is None or writers != {viewer.actor}:
        raise Forbidden(
            f"checkpoint {cp.id!r} of session {session_id!r} would replace messages this caller did "
            "not write; only their writer or an owner/admin key may restore it"
        )


def list_checkpoints(
    rt: Runtime,
    /,
    session_id: str,
    *,
    limit: int = 50,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[list[Checkpoint]]:
    """A session's checkpoints, newest first; NotFound when ``viewer`` may not read the
    session, and a checkpoint holding messages of a project it is not in is left out."""
    tenant = rt.tenant(tenant_id)
    current = yield from readable_messages(tenant, session_id, viewer)
    cps = yield from call(ListCheckpoints(tenant, session_id, limit))
    return [c for c in cps if may_read_session(viewer, [*current, *c.messages])]


def prune_checkpoints(
    rt: Runtime,
    /,
    session_id: str,
    *,
    keep_last: int = 5,
    older_than: datetime | None = None,
    tenant_id: str | None = None,
) -> Flow[int]:
    """Delete all but the newest ``keep_last`` checkpoints (and any older than ``older_than``)."""
    tenant = rt.tenant(tenant_id)
    cps = yield from call(ListCheckpoints(tenant, session_id, limit=100_000))
    doomed = [
        c.id
        for i, c in enumerate(cps)
        if i >= keep_last or (older_than is not None and c.created_at < older_than)
    ]
    if doomed:
        yield from call(Write((DeleteCheckpoints(tenant, session_id, tuple(doomed)),)))
    return len(doomed)


def add_document(
    rt: Runtime,
    /,
    text: str,
    *,
    title: str | None = None,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    source: Source | str = Source.KNOWLEDGE_BASE,
    source_id: str | None = None,
    memory_type: MemoryType | str = MemoryType.CONTEXT,
    parent_id: str | None = None,
    actor: str | None = None,
) -> Flow[list[MemoryItem]]:
    """Store a document as chunks (~2000 tokens, ~200 overlap) sharing a parent id, embedded
    in one call, written in one transaction; low-value text (tiny, errors, small talk) is
    refused with the reason. ``actor`` is kept as ``metadata.created_by``, as ``add`` does."""
    from jiyi.model import new_id
    from jiyi.session.chunking import chunk_text, resource_skip_reason

    if not isinstance(text, str):
        raise InvalidInput("text must be a string", field="text")
    # Redacted before chunking, so the chunks' offsets and get_document() agree.
    text, title = scrub(rt.gate, rt.tenant(tenant_id), (text, title))
    why = resource_skip_reason(text)
    if why:
        raise InvalidInput(f"not stored: {why}", field="text")
    cfg = rt.session
    chunks = chunk_text(text, max_tokens=cfg.chunk_tokens, overlap_tokens=cfg.chunk_overlap)
    parent = parent_id or new_id()
    scope = owner_scope(user_id, project_id, agent_id)
    now = rt.now()
    items = [
        MemoryItem.build(
            id=f"{parent}#{c.index}",
            thread_id=parent,
            content=c.text,
            memory_type=memory_type,
            scope=scope,
            tenant_id=rt.tenant(tenant_id),
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            source=source,
            source_id=source_id,
            confidence=1.0,
            tags=("resource",),
            metadata={
                "parent_id": parent,
                "chunk_index": c.index,
                "chunk_count": c.count,
                "start": c.start,
                "end": c.end,
                **({"title": title} if title else {}),
                **({WRITER_KEY: actor} if actor else {}),
            },
            created_at=now,
            updated_at=now,
        )
        for c in chunks
    ]
    vectors, cache_put = yield from embed_memories(rt, [i.content for i in items])
    changes: list[Any] = [cache_put] if cache_put else []
    for item, vector in zip(items, vectors, strict=True):
        terms = index_text(f"{title} {item.content}" if title else item.content)
        event = change_event(
            rt,
            HistoryAction.ADD,
            None,
            item,
            f"chunk {item.metadata['chunk_index'] + 1} of {len(items)} of {parent}",
            actor,
        )
        changes.append(Upsert(item, terms, event, vector=vector, model_id=rt.embedder.model_id))
    yield from call(Write(tuple(changes)))
    return items


def get_document(
    rt: Runtime, /, parent_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
) -> Flow[str]:
    """The whole document again, re-assembled from its chunks in order (NotFound when
    ``viewer`` may not see it)."""
    from jiyi.session.chunking import Chunk, reassemble

    if not isinstance(parent_id, str) or not parent_id:
        raise InvalidInput("parent_id must be a non-empty string", field="parent_id")
    first = yield from call(GetItems(rt.tenant(tenant_id), (f"{parent_id}#0",)))
    if not first or (viewer is not None and not viewer.sees(first[0])):
        raise NotFound(f"no document {parent_id!r}")
    count = int(first[0].metadata.get("chunk_count", 1))
    items = yield from call(GetItems(rt.tenant(tenant_id), tuple(f"{parent_id}#{i}" for i in range(count))))
    chunks = [
        Chunk(
            i.content,
            int(i.metadata["chunk_index"]),
            count,
            int(i.metadata["start"]),
            int(i.metadata["end"]),
        )
        for i in items
    ]
    return reassemble(sorted(chunks, key=lambda c: c.index))


def _scope_of(job: Job) -> dict[str, Any]:
    p = job.payload
    return {
        "session_id": p.get("session_id"),
        "user_id": p.get("user_id"),
        "project_id": p.get("project_id"),
        "agent_id": p.get("agent_id"),
        "tenant_id": job.tenant_id,
    }
