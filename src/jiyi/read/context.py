"""Hierarchical context (seed 004): recent turns + related memories + session summaries.

:func:`context` assembles it in named steps: the profile section, recent turns, related
memories, past-session summaries; then de-duplication, the cap on entries and the token
budget; then the prompt text (seed 002's layout, :func:`format_context`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, MemoryType
from jiyi.profile import profile_prompt
from jiyi.read.rank import DEFAULT_MIN_RELEVANCE, SearchHit
from jiyi.read.retrievals import check_kind, record_access
from jiyi.read.search import search
from jiyi.runtime import Runtime
from jiyi.session.flows import is_summary, readable_messages
from jiyi.session.model import Message
from jiyi.store.base import AccessKind, GetMessages, Retrieved, Viewer
from jiyi.text.tokens import count_tokens
from jiyi.validate import MAX_LIMIT

ContextSource = Literal["recent", "semantic", "summary"]


@dataclass(frozen=True)
class ContextEntry:
    source: ContextSource
    text: str
    tokens: int
    item: MemoryItem | None = None
    message: Message | None = None
    score: float | None = None
    similarity: float | None = None
    relevance: float | None = None


@dataclass(frozen=True)
class Context:
    """What :func:`context` assembled: entries by source, and the prompt text."""

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


# A line of a profile or a session summary: "- Background: ...", "- User: ...", "- 事实：...".
_LABELLED = re.compile(r"^\s*-\s*(?:[^:：\n]{1,24}[:：]\s*)?")


def _key(text: str) -> str:
    return " ".join(text.split()).lower().rstrip(".。!！")


class _Fresh:
    """Texts already taken (whitespace and case folded), so nothing appears twice: a memory
    the profile already states, or a session summary all of whose lines are already in
    the section, is left out."""

    def __init__(self, profile: str | None = None) -> None:
        self._seen: set[str] = set()
        self._lines: set[str] = set()
        for line in (profile or "").splitlines():
            if line.lstrip().startswith("-"):
                self._lines.add(_key(_LABELLED.sub("", line)))

    def __call__(self, text: str) -> bool:
        key = _key(text)
        if key in self._seen or key in self._lines:
            return False
        lines = [_key(_LABELLED.sub("", line)) for line in text.splitlines() if line.strip()]
        if lines and all(line in self._lines for line in lines):
            return False
        self._seen.add(key)
        self._lines.add(key)
        self._lines.update(lines)
        return True


def context(
    rt: Runtime,
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
    min_relevance: float | None = DEFAULT_MIN_RELEVANCE,
    actor: str | None = None,
    log_as: AccessKind = "context",
    touch: bool = True,
) -> Flow[Context]:
    """Recent turns + related memories + session summaries, each tagged with its
    source, de-duplicated, capped at ``max_items``, fitted to ``budget_tokens`` and
    formatted as a prompt section grouped by memory type. The text, headings and markup
    counted, never exceeds ``budget_tokens``, and a section none of whose entries fit
    gets no heading (a budget too small for anything gives ""). ``viewer`` hides project
    memories it may not see, and a ``session_id`` of a session it may not read is
    NotFound (:func:`jiyi.session.flows.may_read_session`).

    Unless ``profile`` text is given or ``include_profile=False``, the user's and the
    project's profiles (:func:`jiyi.profile.profile`) lead the section, taking at most
    half of ``budget_tokens`` (left out when even that does not fit with the headings).

    Memories less likely than ``min_relevance`` to answer ``query`` are left out
    (:data:`jiyi.read.rank.DEFAULT_MIN_RELEVANCE` by default, so a prompt does not fill
    with what is almost surely unrelated); ``min_relevance=None`` keeps every match.

    The memories that made it into the section (not those the budget dropped) are
    marked as used and written to the retrieval log as one ``log_as`` access by
    ``actor`` (:mod:`jiyi.read.retrievals`), unless ``touch=False``."""
    if not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InvalidInput("budget_tokens must be a positive integer", field="budget_tokens")
    if not isinstance(include_profile, bool):
        raise InvalidInput("include_profile must be true or false", field="include_profile")
    kind = check_kind(log_as)
    tenant = rt.tenant(tenant_id)
    if session_id is not None and viewer is not None:
        yield from readable_messages(tenant, session_id, viewer)
    if profile is None and include_profile and (user_id is not None or project_id is not None):
        profile = yield from _profile_text(rt, user_id, project_id, tenant, budget_tokens // 2, viewer)
    scopes: dict[str, Any] = {
        "user_id": user_id,
        "project_id": project_id,
        "session_id": session_id,
        "agent_id": agent_id,
        "tenant_id": tenant,
        "viewer": viewer,
        "min_relevance": min_relevance,
    }
    if profile and count_tokens(format_context([], profile)) > budget_tokens:
        profile = None  # decided here, not in _fit: what it states is not repeated below
    fresh = _Fresh(profile)
    entries: list[ContextEntry] = []
    if session_id is not None and recent > 0:
        entries += yield from _recent_turns(tenant, session_id, recent, fresh)
    if semantic > 0:
        entries += yield from _related_memories(rt, query, semantic, summaries, scopes, fresh)
    if summaries > 0:
        entries += yield from _past_sessions(rt, query, summaries, scopes, fresh)
    kept, profile = _fit(entries, max_items, budget_tokens, profile)
    if touch:
        owner = {"user_id": user_id, "project_id": project_id, "session_id": session_id, "agent_id": agent_id}
        yield from record_access(rt, tenant, kind, query, _served(kept), rt.now(), owner=owner, actor=actor)
    text = format_context(kept, profile)
    by_source: dict[str, int] = {}
    for e in kept:
        by_source[e.source] = by_source.get(e.source, 0) + 1
    return Context(kept, text, count_tokens(text), len(entries) - len(kept), profile, by_source)


def _profile_text(
    rt: Runtime,
    user_id: str | None,
    project_id: str | None,
    tenant: str,
    max_tokens: int,
    viewer: Viewer | None,
) -> Flow[str | None]:
    text = yield from profile_prompt(
        rt, user_id=user_id, project_id=project_id, tenant_id=tenant, max_tokens=max_tokens, viewer=viewer
    )
    return text or None


def _recent_turns(
    tenant: str, session_id: str, recent: int, fresh: Callable[[str], bool]
) -> Flow[list[ContextEntry]]:
    msgs = yield from call(GetMessages(tenant, session_id, last=recent))
    if any(m.role == "system" for m in msgs):
        # A system prompt, a compaction summary or an end mark is no turn: the last
        # ``recent`` turns lie further back (compaction keeps a session short).
        msgs = yield from call(GetMessages(tenant, session_id))
    turns = [m for m in msgs if m.role != "system"][-recent:]
    return [
        ContextEntry("recent", f"{m.role}: {m.content}", m.token_count, message=m)
        for m in turns
        if fresh(m.content)
    ]


def _related_memories(
    rt: Runtime,
    query: str,
    semantic: int,
    summaries: int,
    scopes: dict[str, Any],
    fresh: Callable[[str], bool],
) -> Flow[list[ContextEntry]]:
    # Episodes are searched separately; ask for enough to fill ``semantic`` without them,
    # but never for more than search gives (semantic may itself be search's maximum).
    hits = yield from search(
        rt, query, limit=min(semantic + max(summaries, 5), MAX_LIMIT), touch=False, **scopes
    )
    # The stored profile item is shown as the profile section, not as a memory.
    hits = [h for h in hits if not {"episode", "profile"} & set(h.item.tags)][:semantic]
    return [_entry("semantic", h) for h in hits if fresh(h.item.content)]


def _entry(source: ContextSource, hit: SearchHit) -> ContextEntry:
    content = hit.item.content
    return ContextEntry(
        source,
        content,
        count_tokens(content),
        item=hit.item,
        score=hit.score,
        similarity=hit.similarity,
        relevance=hit.relevance,
    )


def _served(kept: Sequence[ContextEntry]) -> list[Retrieved]:
    """The memories in the section, in its order, as the retrieval log keeps them."""
    memories = [e for e in kept if e.item is not None]
    return [
        Retrieved(e.item.id, rank, e.score or 0.0, e.similarity, e.relevance)
        for rank, e in enumerate(memories, start=1)
        if e.item is not None
    ]


def _past_sessions(
    rt: Runtime, query: str, summaries: int, scopes: dict[str, Any], fresh: Callable[[str], bool]
) -> Flow[list[ContextEntry]]:
    hits = yield from search(rt, query, limit=summaries, tags=["episode"], touch=False, **scopes)
    entries = [_entry("summary", h) for h in hits if fresh(h.item.content)]
    session_id = scopes["session_id"]
    if session_id is not None:
        msgs = yield from call(GetMessages(scopes["tenant_id"], session_id))
        entries += [
            ContextEntry("summary", m.content, m.token_count, message=m)
            for m in msgs
            if is_summary(m) and fresh(m.content)
        ]
    return entries


def _fit(
    entries: list[ContextEntry], max_items: int, budget: int, profile: str | None
) -> tuple[list[ContextEntry], str | None]:
    """The entries (and the profile) whose formatted text fits ``budget``, headings and
    markup counted. Priority when space runs out: the profile, then recent turns, then
    memories by score, then summaries; a profile that does not fit on its own is left out."""
    if profile and count_tokens(format_context([], profile)) > budget:
        profile = None
    kept: list[ContextEntry] = []
    for entry in entries:
        if len(kept) >= max_items or entry.tokens > budget:
            continue
        # Measured on the text itself: a new section brings its heading along.
        if count_tokens(format_context([*kept, entry], profile)) <= budget:
            kept.append(entry)
    return kept, profile


def format_context(entries: Sequence[ContextEntry], profile: str | None = None) -> str:
    """Seed 002's layout: memories grouped by type, then past sessions, then recent turns."""
    sections: list[str] = []
    if profile:
        sections.append("## Profile\n" + profile.strip())
    memories = [
        e for e in entries if e.source == "semantic" and e.item is not None and "turn" not in e.item.tags
    ]
    for kind, heading in _TYPE_HEADINGS:
        lines = [
            _bullet(_dated(e.item)) for e in memories if e.item is not None and e.item.memory_type == kind
        ]
        if lines:
            sections.append(f"## {heading}\n" + "\n".join(lines))
    said = [e for e in entries if e.source == "semantic" and e.item is not None and "turn" in e.item.tags]
    if said:
        sections.append("## From Past Conversations\n" + "\n".join(_bullet(_dated(e.item)) for e in said))
    past = [e for e in entries if e.source == "summary"]
    if past:
        sections.append(
            "## Past Sessions\n" + "\n".join(_bullet(_dated(e.item) if e.item else e.text) for e in past)
        )
    recent = [e for e in entries if e.source == "recent"]
    if recent:
        sections.append("## Recent Conversation\n" + "\n".join(_bullet(e.text) for e in recent))
    if not sections:
        return ""
    return "# USER MEMORY\n\n" + "\n\n".join(sections)


def _bullet(text: str) -> str:
    """One entry of a section: a summary's own lines ("- Fact: ...") indented under it, not
    read as entries of their own."""
    return "- " + "\n  ".join(line for line in text.strip().splitlines() if line.strip())


def _dated(item: MemoryItem | None) -> str:
    if item is None:
        return ""
    when = item.occurred_at
    return f"[{when.date().isoformat()}] {item.content}" if when else item.content
