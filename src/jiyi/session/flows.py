"""Conversation memory as flows: session messages, compaction, background extraction,
reconciliation, episodes, checkpoints, documents and hierarchical context.

These are methods of :class:`~jiyi.memory.MemoryCore` (mixed in), written as flows like
the rest of the API, so the sync and async drivers run them unchanged. ``remember`` only
appends messages and queues work; :meth:`SessionFlows.process_jobs` (the in-process
worker thread, or ``jiyi worker``) does extraction and episodes later.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from jiyi.config import SessionConfig
from jiyi.effects import Flow, call, embed
from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, MemoryType, Relation, RelationType, Source, Status, owner_scope
from jiyi.session.model import Checkpoint, Job, Message
from jiyi.store.base import (
    AppendMessages,
    CachePut,
    ClaimJobs,
    CountEvents,
    DeleteCheckpoints,
    DeleteMessages,
    Filter,
    GetCheckpoint,
    GetItems,
    GetMessages,
    HistoryAction,
    HistoryEvent,
    ListCheckpoints,
    PutCheckpoint,
    PutJob,
    RecordEvent,
    Retrieve,
    Store,
    Upsert,
    Viewer,
    Write,
    same_audience,
)
from jiyi.text.tokenize import index_text, query_terms
from jiyi.text.tokens import count_message_tokens, count_tokens
from jiyi.write.extract import Extracted, Turn
from jiyi.write.gate import GateDecision, rate_key, screen

if TYPE_CHECKING:
    from jiyi.config import GateConfig, RankConfig
    from jiyi.embed.base import Embedder, Vectors
    from jiyi.llm.base import ChatModel
    from jiyi.read.rank import SearchHit


# ---------------------------------------------------------------- settings and results


@dataclass(frozen=True)
class RememberResult:
    messages: list[Message]
    job_id: str | None
    """The queued extraction job (None when there was nothing to extract)."""
    compacted: CompactionResult | None


@dataclass(frozen=True)
class CompactionResult:
    removed: int
    summary: Message | None
    tokens_before: int
    tokens_after: int
    episode_job_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What the pipeline did with one extracted candidate."""

    candidate: Extracted
    action: str
    reason: str
    item_id: str | None = None
    target_id: str | None = None


@dataclass(frozen=True)
class JobReport:
    job_id: str
    kind: str
    status: str
    outcomes: tuple[Outcome, ...] = ()
    error: str | None = None


ContextSource = Literal["recent", "semantic", "summary"]


@dataclass(frozen=True)
class ContextEntry:
    source: ContextSource
    text: str
    tokens: int
    item: MemoryItem | None = None
    message: Message | None = None
    score: float | None = None


@dataclass(frozen=True)
class Context:
    """What :meth:`SessionFlows.context` assembled: entries by source, and the prompt text."""

    entries: list[ContextEntry]
    text: str
    tokens: int
    dropped: int = 0
    profile: str | None = None
    by_source: dict[str, int] = field(default_factory=dict)


_TYPE_HEADINGS: list[tuple[MemoryType, str]] = [
    (MemoryType.PREFERENCE, "User Preferences"),
    (MemoryType.FACT, "Known Facts"),
    (MemoryType.SKILL, "Skills"),
    (MemoryType.HABIT, "Habits"),
    (MemoryType.CONSTRAINT, "Constraints"),
    (MemoryType.DECISION, "Decisions"),
    (MemoryType.CONTEXT, "Project Context"),
    (MemoryType.EVENT, "Events"),
    (MemoryType.PATTERN, "Patterns"),
]


class _Core(Protocol):
    """What the session flows need from :class:`~jiyi.memory.MemoryCore`."""

    store: Store
    embedder: Embedder
    gate: GateConfig
    rank: RankConfig
    tenant_id: str
    session_config: SessionConfig
    llm: ChatModel | None

    def now(self) -> datetime: ...

    def _embed_documents(self, texts: Sequence[str]) -> Flow[tuple[Vectors, CachePut | None]]: ...

    def _event(
        self,
        action: HistoryAction,
        before: MemoryItem | None,
        after: MemoryItem | None,
        reason: str,
        actor: str | None,
    ) -> HistoryEvent: ...

    search: Callable[..., Flow[list[SearchHit]]]
    profile_prompt: Callable[..., Flow[str]]


def _as_message(raw: Message | Mapping[str, Any] | tuple[str, str], base: dict[str, Any]) -> Message:
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
            f"a message must be a Message, a mapping or (role, content), not {type(raw).__name__}"
        )
    data.pop("seq", None)
    try:
        msg = Message.model_validate(data)
    except Exception as exc:  # pydantic's error, said plainly
        from pydantic import ValidationError

        from jiyi.model import invalid_from_pydantic

        if isinstance(exc, ValidationError):
            raise invalid_from_pydantic(exc) from None
        raise
    if not msg.token_count:
        msg = msg.model_copy(update={"token_count": count_message_tokens(msg.role, msg.content)})
    return msg


def _turn_job(
    core: _Core, kind: str, tenant: str, turns: Sequence[Message], scope_ids: Mapping[str, str | None]
) -> Job:
    """A queued job over conversation turns (what was said, by whom, when)."""
    now = core.now()
    return Job(
        kind=kind,
        tenant_id=tenant,
        max_attempts=core.session_config.job_attempts,
        payload={
            **scope_ids,
            "turns": [
                {"role": m.role, "content": m.content, "name": m.name, "at": m.created_at.isoformat()}
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


def _is_summary(m: Message) -> bool:
    return m.role == "system" and m.metadata.get("kind") == "summary"


class SessionFlows:
    """Conversation flows, mixed into :class:`~jiyi.memory.MemoryCore`."""

    # ------------------------------------------------------------ session messages

    def add_messages(
        self: _Core,
        /,
        session_id: str,
        messages: Sequence[Message | Mapping[str, Any] | tuple[str, str]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Flow[list[Message]]:
        """Append messages to a session's short-term memory (no extraction)."""
        base = {
            "session_id": session_id,
            "tenant_id": tenant_id or self.tenant_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "created_at": self.now(),
        }
        msgs = tuple(_as_message(m, base) for m in messages)
        if not msgs:
            raise InvalidInput("no messages given", field="messages")
        yield from call(Write((AppendMessages(msgs),)))
        return (yield from call(GetMessages(msgs[0].tenant_id, session_id, last=len(msgs))))

    def messages(
        self: _Core, /, session_id: str, *, tenant_id: str | None = None, last: int | None = None
    ) -> Flow[list[Message]]:
        """A session's messages in order (the ``last`` N when given)."""
        return (yield from call(GetMessages(tenant_id or self.tenant_id, session_id, last=last)))

    def working_window(
        self: _Core, /, session_id: str, *, max_tokens: int = 4000, tenant_id: str | None = None
    ) -> Flow[list[Message]]:
        """Messages for the next model call: every system message, then as many of the
        most recent turns as fit in ``max_tokens`` (oldest dropped first)."""
        msgs = yield from call(GetMessages(tenant_id or self.tenant_id, session_id))
        system = [m for m in msgs if m.role == "system"]
        budget = max_tokens - sum(m.token_count for m in system)
        kept: list[Message] = []
        for m in reversed([m for m in msgs if m.role != "system"]):
            if m.token_count > budget:
                break
            kept.append(m)
            budget -= m.token_count
        chosen = {m.seq for m in system} | {m.seq for m in kept}
        return [m for m in msgs if m.seq in chosen]

    def remember(
        self: _Core,
        /,
        messages: Sequence[Message | Mapping[str, Any] | tuple[str, str]],
        *,
        session_id: str,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Flow[RememberResult]:
        """Keep messages in the session and queue their extraction; returns at once.

        The messages and the extraction job land in one transaction, so a crash cannot
        lose one without the other. Compaction runs here when the session is too long.
        """
        tenant = tenant_id or self.tenant_id
        if user_id is None and project_id is None and agent_id is None:
            raise InvalidInput(
                "say whose memory this is: give user_id, project_id or agent_id", field="user_id"
            )
        base = {
            "session_id": session_id,
            "tenant_id": tenant,
            "user_id": user_id,
            "agent_id": agent_id,
            "created_at": self.now(),
        }
        msgs = tuple(_as_message(m, base) for m in messages)
        if not msgs:
            raise InvalidInput("no messages given", field="messages")
        cfg = self.session_config
        changes: list[Any] = [AppendMessages(msgs)]
        job: Job | None = None
        if cfg.extract and any(m.role == "user" for m in msgs):
            ids = {
                "session_id": session_id,
                "user_id": user_id,
                "project_id": project_id,
                "agent_id": agent_id,
            }
            job = _turn_job(self, "extract", tenant, msgs, ids)
            changes.append(PutJob(job))
        yield from call(Write(tuple(changes)))
        stored = yield from call(GetMessages(tenant, session_id, last=len(msgs)))
        compacted = yield from SessionFlows._compact_if_needed(
            self, session_id, tenant, user_id, project_id, agent_id
        )
        return RememberResult(stored, job.id if job else None, compacted)

    def compact(
        self: _Core,
        /,
        session_id: str,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Flow[CompactionResult]:
        """Summarise all but the most recent turns into one system message, now."""
        tenant = tenant_id or self.tenant_id
        result = yield from SessionFlows._compact(self, session_id, tenant, user_id, project_id, agent_id)
        return result

    def _compact_if_needed(
        self: _Core,
        session_id: str,
        tenant: str,
        user_id: str | None,
        project_id: str | None,
        agent_id: str | None,
    ) -> Flow[CompactionResult | None]:
        msgs = yield from call(GetMessages(tenant, session_id))
        cfg = self.session_config
        if len(_turns(msgs)) <= cfg.max_turns and sum(m.token_count for m in msgs) <= cfg.max_tokens:
            return None
        return (yield from SessionFlows._compact(self, session_id, tenant, user_id, project_id, agent_id))

    def _compact(
        self: _Core,
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
        keep = self.session_config.keep_recent
        old = turns[: max(0, len(turns) - keep)]
        if not old:
            return CompactionResult(0, None, before, before)
        previous = [m for m in msgs if _is_summary(m)]
        prev_text = "\n".join(m.content for m in previous) or None
        text = compaction_summary([Turn(m.role, m.content) for m in old], prev_text)
        first = min([m.seq for m in previous + old if m.seq is not None])
        summary = Message(
            role="system",
            content=text,
            session_id=session_id,
            tenant_id=tenant,
            user_id=user_id,
            agent_id=agent_id,
            metadata={"kind": "summary", "replaced": len(old) + len(previous)},
            token_count=count_message_tokens("system", text),
            created_at=self.now(),
            seq=first,
        )
        removed = tuple(m.seq for m in previous + old if m.seq is not None)
        changes: list[Any] = [DeleteMessages(tenant, session_id, removed), AppendMessages((summary,))]
        episode: Job | None = None
        if self.session_config.episodes:
            ids = {
                "session_id": session_id,
                "user_id": user_id,
                "project_id": project_id,
                "agent_id": agent_id,
            }
            episode = _turn_job(self, "episode", tenant, old, ids)
            changes.append(PutJob(episode))
        yield from call(Write(tuple(changes)))
        after = before - sum(m.token_count for m in previous + old) + summary.token_count
        return CompactionResult(len(old), summary, before, after, episode.id if episode else None)

    def end_session(
        self: _Core,
        /,
        session_id: str,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Flow[str | None]:
        """Queue an episode for the session's remaining turns; returns the job id."""
        tenant = tenant_id or self.tenant_id
        msgs = yield from call(GetMessages(tenant, session_id))
        turns = _turns(msgs)
        if not turns:
            return None
        ids = {"session_id": session_id, "user_id": user_id, "project_id": project_id, "agent_id": agent_id}
        job = _turn_job(self, "episode", tenant, turns, ids)
        yield from call(Write((PutJob(job),)))
        return job.id

    # ------------------------------------------------------------ the worker

    def process_jobs(
        self: _Core, /, *, worker: str = "worker", limit: int = 10, kinds: Sequence[str] = ()
    ) -> Flow[list[JobReport]]:
        """Run up to ``limit`` queued jobs. Failures are retried with backoff and stay
        visible (status ``failed`` with the error) once attempts are used up."""
        now = self.now()
        jobs = yield from call(ClaimJobs(worker, now, kinds=tuple(kinds), limit=limit))
        reports: list[JobReport] = []
        for job in jobs:
            try:
                if job.kind == "extract":
                    outcomes = yield from SessionFlows._run_extract(self, job)
                elif job.kind == "episode":
                    outcomes = yield from SessionFlows._run_episode(self, job)
                else:
                    raise InvalidInput(f"unknown job kind {job.kind!r}")
            except Exception as exc:  # a job's failure must not stop the others
                error = f"{type(exc).__name__}: {exc}"
                final = job.attempts >= job.max_attempts
                delay = self.session_config.job_backoff_seconds * (2 ** max(0, job.attempts - 1))
                failed = job.model_copy(
                    update={
                        "status": "failed" if final else "queued",
                        "last_error": error + ("" if final else "\n" + traceback.format_exc(limit=3)),
                        "run_after": self.now() + timedelta(seconds=delay),
                        "updated_at": self.now(),
                        "locked_by": None,
                        "locked_until": None,
                    }
                )
                yield from call(Write((PutJob(failed),)))
                reports.append(JobReport(job.id, job.kind, failed.status, error=error))
                continue
            done = job.model_copy(
                update={"status": "done", "updated_at": self.now(), "locked_by": None, "locked_until": None}
            )
            yield from call(Write((PutJob(done),)))
            reports.append(JobReport(job.id, job.kind, "done", tuple(outcomes)))
        return reports

    def jobs(
        self: _Core, /, *, statuses: Sequence[str] = (), limit: int = 100, tenant_id: str | None = None
    ) -> Flow[list[Job]]:
        """Queued, running, done or failed jobs of one tenant (visibility for operators)."""
        from jiyi.store.base import ListJobs

        return (
            yield from call(ListJobs(tuple(statuses), limit=limit, tenant_id=tenant_id or self.tenant_id))
        )

    # ------------------------------------------------------------ extraction -> gate -> reconcile

    def _run_extract(self: _Core, job: Job) -> Flow[list[Outcome]]:
        raw_turns = job.payload.get("turns", [])
        turns = [Turn(t["role"], t["content"]) for t in raw_turns]
        if self.llm is not None:
            from jiyi.write.extract_llm import LLMExtractor

            result = yield from LLMExtractor(self.llm).flow(turns)
            candidates = list(result.items)
        else:
            from jiyi.write.extract_rules import RuleExtractor

            candidates = RuleExtractor().extract(turns)
        # When and by whom each turn was said follows the candidate into the store.
        times = [datetime.fromisoformat(t["at"]) if t.get("at") else None for t in raw_turns]
        names = [t.get("name") for t in raw_turns]
        return (
            yield from SessionFlows.store_extracted(
                self, candidates, turn_times=times, turn_names=names, **_scope_of(job)
            )
        )

    def store_extracted(
        self: _Core,
        /,
        candidates: Sequence[Extracted],
        *,
        session_id: str | None,
        user_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        turn_times: Sequence[datetime | None] = (),
        turn_names: Sequence[str | None] = (),
    ) -> Flow[list[Outcome]]:
        """Gate, reconcile and store extracted candidates (automatic: rate-limited per session).

        ``turn_times``/``turn_names`` (indexed like the turns the candidates came from)
        give each item the time its turn was said (``occurred_at``) and the speaker.

        All candidates are embedded in one call. Every decision lands in the history.
        """
        from jiyi.write.reconcile import Existing, ReconcileConfig, decide, reconcile_flow

        tenant = tenant_id or self.tenant_id
        now = self.now()
        scope = owner_scope(user_id, project_id, agent_id)
        outcomes: list[Outcome] = []
        passed: list[tuple[Extracted, str, tuple[str, ...]]] = []
        for cand in candidates:
            checked = screen(cand.content, cand.confidence, self.gate)
            if isinstance(checked, GateDecision):
                outcomes.append(Outcome(cand, "rejected", "; ".join(checked.reasons)))
            else:
                passed.append((cand, checked.text, checked.reasons))
        if session_id is not None and passed:
            used = yield from call(
                CountEvents(rate_key(tenant, session_id), now - self.gate.extraction_window)
            )
            room = max(0, self.gate.max_extractions - used)
            for cand, _, _ in passed[room:]:
                outcomes.append(
                    Outcome(
                        cand,
                        "rejected",
                        f"rate limit: {self.gate.max_extractions} automatic extractions per session per day",
                    )
                )
            passed = passed[:room]
        if not passed:
            return outcomes
        vectors, cache_put = yield from self._embed_documents([text for _, text, _ in passed])
        changes: list[Any] = [cache_put] if cache_put else []
        rcfg = ReconcileConfig(
            duplicate_threshold=self.gate.duplicate_threshold, reinforce_step=self.gate.reinforce_step
        )
        pending: dict[str, MemoryItem] = {}
        for (cand, text, _), vector in zip(passed, vectors, strict=True):
            turn = cand.turn_index
            said_at = turn_times[turn] if turn is not None and 0 <= turn < len(turn_times) else None
            speaker = turn_names[turn] if turn is not None and 0 <= turn < len(turn_names) else None
            meta: dict[str, Any] = {"extracted_by": list(cand.reasons)}
            if cand.key:
                meta["key"] = cand.key
            if speaker:
                meta["speaker"] = speaker
            item = MemoryItem.build(
                content=text,
                memory_type=cand.memory_type,
                scope=scope,
                tenant_id=tenant,
                user_id=user_id,
                project_id=project_id,
                session_id=session_id,
                agent_id=agent_id,
                confidence=cand.confidence,
                importance=cand.importance,
                structured=cand.structured,
                metadata=meta,
                source=Source.USER,
                raw=cand.source_text or None,
                occurred_at=said_at,
                created_at=now,
                updated_at=now,
            )
            # Reconcile only with memories of the same audience: never fold a members
            # conversation into a public item, nor into someone's owner_only one.
            flt = same_audience(Filter(tenant_id=tenant, scope_keys=(item.scope_key,), now=now), item)
            found = yield from call(
                Retrieve(
                    flt,
                    self.embedder.model_id,
                    vector,
                    query_terms(text),
                    self.session_config.similar_k,
                    self.session_config.similar_k,
                )
            )
            existing = [Existing(pending.get(c.item.id, c.item), c.cosine or 0.0) for c in found]
            existing.sort(key=lambda e: -e.cosine)
            if self.llm is not None and existing:
                decision = yield from reconcile_flow(cand, existing)
            else:
                decision = decide(cand, existing, rcfg)
            why = f"{decision.action}: {decision.reason} [{', '.join(cand.reasons) or 'extracted'}]"
            targets = {e.item.id: e.item for e in existing}
            target = targets.get(decision.target_id) if decision.target_id else None
            new_upsert = Upsert(
                item,
                index_text(item.content),
                self._event(HistoryAction.ADD, None, item, why, "pipeline"),
                vector=vector,
                model_id=self.embedder.model_id,
            )
            action = decision.action
            if action in ("add", "keep_both") or (target is None and action not in ("none",)):
                if action == "keep_both" and target is not None:
                    item = item.evolve(
                        relations=(Relation(type=RelationType.RELATED_TO, target_id=target.id),)
                    )
                    new_upsert = Upsert(
                        item,
                        new_upsert.terms,
                        self._event(HistoryAction.ADD, None, item, why, "pipeline"),
                        vector=vector,
                        model_id=self.embedder.model_id,
                    )
                changes.append(new_upsert)
                outcomes.append(
                    Outcome(
                        cand,
                        "add" if action != "keep_both" else "keep_both",
                        why,
                        item.id,
                        decision.target_id,
                    )
                )
            elif action == "reinforce" and target is not None:
                updated = target.evolve(
                    mention_count=target.mention_count + 1,
                    confidence=(
                        decision.confidence
                        if decision.confidence is not None
                        else min(1.0, target.confidence + self.gate.reinforce_step)
                    ),
                    updated_at=now,
                )
                changes.append(
                    Upsert(
                        updated,
                        index_text(updated.content),
                        self._event(HistoryAction.REINFORCE, target, updated, why, "pipeline"),
                    )
                )
                pending[target.id] = updated
                outcomes.append(Outcome(cand, "reinforce", why, target.id, target.id))
            elif action in ("update", "merge") and target is not None:
                content = decision.content or text
                updated = target.evolve(
                    content=content,
                    version=target.version + 1,
                    confidence=decision.confidence
                    if decision.confidence is not None
                    else max(target.confidence, cand.confidence),
                    updated_at=now,
                )
                same = content == text
                if same:
                    new_vec = vector
                else:
                    fresh = yield from embed([content])
                    new_vec = fresh[0]
                changes.append(
                    Upsert(
                        updated,
                        index_text(content),
                        self._event(HistoryAction.UPDATE, target, updated, why, "pipeline"),
                        vector=new_vec,
                        model_id=self.embedder.model_id,
                    )
                )
                pending[target.id] = updated
                outcomes.append(Outcome(cand, action, why, target.id, target.id))
            elif action == "supersede" and target is not None:
                item = item.evolve(relations=(Relation(type=RelationType.SUPERSEDES, target_id=target.id),))
                old = target.evolve(
                    status=Status.SUPERSEDED,
                    version=target.version + 1,
                    relations=(
                        *target.relations,
                        Relation(type=RelationType.SUPERSEDED_BY, target_id=item.id),
                    ),
                    updated_at=now,
                )
                changes.append(
                    Upsert(
                        item,
                        index_text(item.content),
                        self._event(HistoryAction.ADD, None, item, why, "pipeline"),
                        vector=vector,
                        model_id=self.embedder.model_id,
                    )
                )
                changes.append(
                    Upsert(
                        old,
                        index_text(old.content),
                        self._event(HistoryAction.SUPERSEDE, target, old, why, "pipeline"),
                    )
                )
                pending[target.id] = old
                outcomes.append(Outcome(cand, "supersede", why, item.id, target.id))
            else:  # "none": nothing changes, but the decision is still recorded
                if target is not None:
                    changes.append(
                        Upsert(
                            target,
                            index_text(target.content),
                            self._event(HistoryAction.RECONCILE, target, target, why, "pipeline"),
                        )
                    )
                outcomes.append(Outcome(cand, "none", why, None, decision.target_id))
            if session_id is not None and outcomes[-1].action not in ("none",):
                changes.append(RecordEvent(rate_key(tenant, session_id), now))
        yield from call(Write(tuple(changes)))
        return outcomes

    # ------------------------------------------------------------ episodes

    def _run_episode(self: _Core, job: Job) -> Flow[list[Outcome]]:
        from jiyi.session.summarize import summarize_extractive, summary_flow

        turns = [Turn(t["role"], t["content"]) for t in job.payload.get("turns", [])]
        if not turns:
            return []
        if self.llm is not None:
            summary = yield from summary_flow(turns)
        else:
            summary = summarize_extractive(turns)
        scope_ids = _scope_of(job)
        started = job.payload.get("started_at")
        occurred = datetime.fromisoformat(started) if isinstance(started, str) else self.now()
        item = yield from SessionFlows.add_episode(
            self,
            summary.summary,
            key_topics=summary.key_topics,
            actions_taken=summary.actions_taken,
            outcomes=summary.outcomes,
            importance=summary.importance,
            occurred_at=occurred,
            **scope_ids,
        )
        return [
            Outcome(Extracted(summary.summary, MemoryType.EVENT, 1.0), "episode", "episode written", item.id)
        ]

    def add_episode(
        self: _Core,
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
    ) -> Flow[MemoryItem]:
        """Store an episode (seed 001): searchable like any memory, tagged ``episode``."""
        now = self.now()
        scope = owner_scope(user_id, project_id, agent_id)
        item = MemoryItem.build(
            content=summary,
            summary=summary,
            memory_type=MemoryType.EVENT,
            scope=scope,
            tenant_id=tenant_id or self.tenant_id,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            importance=importance,
            confidence=1.0,
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
        vectors, cache_put = yield from self._embed_documents([summary])
        upsert = Upsert(
            item,
            index_text(f"{summary} {topics}"),
            self._event(HistoryAction.ADD, None, item, "episode of a session", "pipeline"),
            vector=vectors[0],
            model_id=self.embedder.model_id,
        )
        yield from call(Write((cache_put, upsert) if cache_put else (upsert,)))
        return item

    # ------------------------------------------------------------ checkpoints

    def save_checkpoint(
        self: _Core,
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
    ) -> Flow[Checkpoint]:
        """Save a session's state; by default its current messages."""
        tenant = tenant_id or self.tenant_id
        if messages is None:
            messages = yield from call(GetMessages(tenant, session_id))
        cp = Checkpoint(
            session_id=session_id,
            tenant_id=tenant,
            label=label,
            messages=tuple(messages),
            agent_state=dict(agent_state or {}),
            tool_states=dict(tool_states or {}),
            pending_tool_calls=tuple(dict(c) for c in pending_tool_calls),
            metadata=dict(metadata or {}),
            created_at=self.now(),
        )
        yield from call(Write((PutCheckpoint(cp),)))
        return cp

    def restore_checkpoint(
        self: _Core,
        /,
        session_id: str,
        checkpoint_id: str | None = None,
        *,
        replace_messages: bool = True,
        tenant_id: str | None = None,
    ) -> Flow[Checkpoint]:
        """Load a checkpoint (the latest when no id is given). With ``replace_messages``
        the session's messages become exactly the checkpoint's, in one transaction."""
        from jiyi.errors import NotFound

        tenant = tenant_id or self.tenant_id
        cp = yield from call(GetCheckpoint(tenant, session_id, checkpoint_id))
        if cp is None:
            what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "no checkpoint"
            raise NotFound(f"{what} for session {session_id!r}")
        if replace_messages:
            current = yield from call(GetMessages(tenant, session_id))
            seqs = tuple(m.seq for m in current if m.seq is not None)
            yield from call(
                Write((DeleteMessages(tenant, session_id, seqs), AppendMessages(tuple(cp.messages))))
            )
        return cp

    def list_checkpoints(
        self: _Core, /, session_id: str, *, limit: int = 50, tenant_id: str | None = None
    ) -> Flow[list[Checkpoint]]:
        """A session's checkpoints, newest first."""
        return (yield from call(ListCheckpoints(tenant_id or self.tenant_id, session_id, limit)))

    def prune_checkpoints(
        self: _Core,
        /,
        session_id: str,
        *,
        keep_last: int = 5,
        older_than: datetime | None = None,
        tenant_id: str | None = None,
    ) -> Flow[int]:
        """Delete all but the newest ``keep_last`` checkpoints (and any older than ``older_than``)."""
        tenant = tenant_id or self.tenant_id
        cps = yield from call(ListCheckpoints(tenant, session_id, limit=100_000))
        doomed = [
            c.id
            for i, c in enumerate(cps)
            if i >= keep_last or (older_than is not None and c.created_at < older_than)
        ]
        if doomed:
            yield from call(Write((DeleteCheckpoints(tenant, session_id, tuple(doomed)),)))
        return len(doomed)

    # ------------------------------------------------------------ resources (documents, long answers)

    def add_document(
        self: _Core,
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
    ) -> Flow[list[MemoryItem]]:
        """Store a document as chunks (~2000 tokens, ~200 overlap) sharing a parent id;
        all chunks are embedded in one call and written in one transaction. Low-value
        text (tiny, errors, small talk) is refused with the reason."""
        from jiyi.model import new_id
        from jiyi.session.chunking import chunk_text, resource_skip_reason

        if not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        why = resource_skip_reason(text)
        if why:
            raise InvalidInput(f"not stored: {why}", field="text")
        cfg = self.session_config
        chunks = chunk_text(text, max_tokens=cfg.chunk_tokens, overlap_tokens=cfg.chunk_overlap)
        parent = parent_id or new_id()
        scope = owner_scope(user_id, project_id, agent_id)
        now = self.now()
        items = [
            MemoryItem.build(
                id=f"{parent}#{c.index}",
                thread_id=parent,
                content=c.text,
                memory_type=memory_type,
                scope=scope,
                tenant_id=tenant_id or self.tenant_id,
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
                },
                created_at=now,
                updated_at=now,
            )
            for c in chunks
        ]
        vectors, cache_put = yield from self._embed_documents([i.content for i in items])
        changes: list[Any] = [cache_put] if cache_put else []
        for item, vector in zip(items, vectors, strict=True):
            terms = index_text(f"{title} {item.content}" if title else item.content)
            event = self._event(
                HistoryAction.ADD,
                None,
                item,
                f"chunk {item.metadata['chunk_index'] + 1} of {len(items)} of {parent}",
                None,
            )
            changes.append(Upsert(item, terms, event, vector=vector, model_id=self.embedder.model_id))
        yield from call(Write(tuple(changes)))
        return items

    def get_document(
        self: _Core, /, parent_id: str, *, tenant_id: str | None = None, viewer: Viewer | None = None
    ) -> Flow[str]:
        """The whole document again, re-assembled from its chunks in order (NotFound when
        ``viewer`` may not see it)."""
        from jiyi.errors import NotFound
        from jiyi.session.chunking import Chunk, reassemble

        if not isinstance(parent_id, str) or not parent_id:
            raise InvalidInput("parent_id must be a non-empty string", field="parent_id")
        first = yield from call(GetItems(tenant_id or self.tenant_id, (f"{parent_id}#0",)))
        if not first or (viewer is not None and not viewer.sees(first[0])):
            raise NotFound(f"no document {parent_id!r}")
        count = int(first[0].metadata.get("chunk_count", 1))
        items = yield from call(
            GetItems(tenant_id or self.tenant_id, tuple(f"{parent_id}#{i}" for i in range(count)))
        )
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

    # ------------------------------------------------------------ hierarchical context (seed 004)

    def context(
        self: _Core,
        /,
        query: str,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        budget_tokens: int = 1500,
        max_items: int = 10,
        recent: int = 5,
        semantic: int = 5,
        summaries: int = 2,
        profile: str | None = None,
        viewer: Viewer | None = None,
        include_profile: bool = True,
    ) -> Flow[Context]:
        """Recent turns + related memories + session summaries, each tagged with its
        source, de-duplicated, capped at ``max_items``, fitted to ``budget_tokens`` and
        formatted as a prompt section grouped by memory type. ``viewer`` hides project
        memories it may not see.

        Unless ``profile`` text is given or ``include_profile=False``, the user's and the
        project's profiles (:meth:`~jiyi.profile.ProfileFlows.profile`) lead the section,
        taking at most half of ``budget_tokens``."""
        if not isinstance(budget_tokens, int) or budget_tokens < 1:
            raise InvalidInput("budget_tokens must be a positive integer", field="budget_tokens")
        if not isinstance(include_profile, bool):
            raise InvalidInput("include_profile must be true or false", field="include_profile")
        tenant = tenant_id or self.tenant_id
        if profile is None and include_profile and (user_id is not None or project_id is not None):
            profile = (
                yield from self.profile_prompt(
                    user_id=user_id,
                    project_id=project_id,
                    tenant_id=tenant,
                    max_tokens=budget_tokens // 2,
                    viewer=viewer,
                )
            ) or None
        scopes = {
            "user_id": user_id,
            "project_id": project_id,
            "session_id": session_id,
            "agent_id": agent_id,
        }
        entries: list[ContextEntry] = []
        seen: set[str] = set()

        def fresh(text: str) -> bool:
            key = " ".join(text.split()).lower()
            if key in seen:
                return False
            seen.add(key)
            return True

        if session_id is not None and recent > 0:
            msgs = yield from call(GetMessages(tenant, session_id, last=recent))
            for m in msgs:
                if m.role != "system" and fresh(m.content):
                    entries.append(ContextEntry("recent", f"{m.role}: {m.content}", m.token_count, message=m))
        if semantic > 0:
            # Episodes are searched separately below; ask for enough to fill ``semantic`` without them.
            hits = yield from self.search(
                query, tenant_id=tenant, limit=semantic + max(summaries, 5), viewer=viewer, **scopes
            )
            # The stored profile item is shown as the profile section, not as a memory.
            hits = [h for h in hits if not {"episode", "profile"} & set(h.item.tags)][:semantic]
            for h in hits:
                if fresh(h.item.content):
                    entries.append(
                        ContextEntry(
                            "semantic",
                            h.item.content,
                            count_tokens(h.item.content),
                            item=h.item,
                            score=h.score,
                        )
                    )
        if summaries > 0:
            hits = yield from self.search(
                query, tenant_id=tenant, limit=summaries, tags=["episode"], viewer=viewer, **scopes
            )
            for h in hits:
                if fresh(h.item.content):
                    entries.append(
                        ContextEntry(
                            "summary",
                            h.item.content,
                            count_tokens(h.item.content),
                            item=h.item,
                            score=h.score,
                        )
                    )
            if session_id is not None:
                msgs = yield from call(GetMessages(tenant, session_id))
                for m in msgs:
                    if _is_summary(m) and fresh(m.content):
                        entries.append(ContextEntry("summary", m.content, m.token_count, message=m))
        # Priority when space runs out: recent turns, then memories by score, then summaries.
        budget = budget_tokens - (count_tokens(profile) if profile else 0)
        kept: list[ContextEntry] = []
        for entry in entries:
            if len(kept) >= max_items or entry.tokens > budget:
                continue
            kept.append(entry)
            budget -= entry.tokens
        text = format_context(kept, profile)
        by_source: dict[str, int] = {}
        for e in kept:
            by_source[e.source] = by_source.get(e.source, 0) + 1
        return Context(kept, text, count_tokens(text), len(entries) - len(kept), profile, by_source)


def _scope_of(job: Job) -> dict[str, Any]:
    p = job.payload
    return {
        "session_id": p.get("session_id"),
        "user_id": p.get("user_id"),
        "project_id": p.get("project_id"),
        "agent_id": p.get("agent_id"),
        "tenant_id": job.tenant_id,
    }


def format_context(entries: Sequence[ContextEntry], profile: str | None = None) -> str:
    """Seed 002's layout: memories grouped by type, then past sessions, then recent turns."""
    sections: list[str] = []
    if profile:
        sections.append("## Profile\n" + profile.strip())
    memories = [e for e in entries if e.source == "semantic" and e.item is not None]
    for kind, heading in _TYPE_HEADINGS:
        lines = [f"- {_dated(e.item)}" for e in memories if e.item is not None and e.item.memory_type == kind]
        if lines:
            sections.append(f"## {heading}\n" + "\n".join(lines))
    past = [e for e in entries if e.source == "summary"]
    if past:
        sections.append(
            "## Past Sessions\n" + "\n".join(f"- {_dated(e.item) if e.item else e.text}" for e in past)
        )
    recent = [e for e in entries if e.source == "recent"]
    if recent:
        sections.append("## Recent Conversation\n" + "\n".join(f"- {e.text}" for e in recent))
    if not sections:
        return ""
    return "# USER MEMORY\n\n" + "\n\n".join(sections)


def _dated(item: MemoryItem | None) -> str:
    if item is None:
        return ""
    when = item.occurred_at
    return f"[{when.date().isoformat()}] {item.content}" if when else item.content
