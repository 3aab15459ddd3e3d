"""The resource layer (seed 000, memU's first layer): what was said, kept as said.

Every turn that ``remember()`` receives becomes a searchable *resource* item (tags
``resource`` and ``turn``) when its extraction job runs: its text (redacted like every
stored text, with the speaker's name in front when there is one), the time it was said,
the session as its thread (so a search sees the turns around it) and the message id as
its source. What extraction finds in a turn links back to it (``derived_from``), so a
fact no rule extracted is still findable, and every extracted fact can show its source.
Pure acknowledgements ("OK", "Thanks!", "好的", "收到") and an assistant's courtesies
("Congrats! How are you celebrating?") are not kept (:func:`keeps_turn`).

A user's turn is kept with confidence 1.0 (it is what the person said); an assistant's
with the gate's minimum confidence (``GateConfig.min_confidence``, 0.7): it is a record
of what the assistant answered, not something the person stated, and its long, topical
text must not crowd the person's own words out of a search (the seed formula weighs
confidence at 0.3). So is a user's turn that only asks ("how long does it take for them
to settle in?", "牛腩要炖多久啊", :func:`~jiyi.write.extract_rules.asks_only`): a question
states nothing about the person, and the embedder puts a question close to every other
question, so "Which city do I live in?" found "how long does it take ..." first. Its
metadata says so (``asks_only``: true). So is a turn that states nothing else ("yes pls",
"要！": :func:`~jiyi.write.extract_rules.states_nothing`; ``states_nothing``: true).

Resources are exempt from decay and never reconciled against (they are evidence, not
claims); how long raw turns are kept is ``LifecyclePolicy.retention_days["turns"]``
(default: kept, like the memories they support).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jiyi.effects import Flow
from jiyi.items import change_event
from jiyi.model import RESOURCE_TAG, TURN_TAG, MemoryItem, MemoryType, Source, owner_scope
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.store.base import Change, HistoryAction, Upsert
from jiyi.text.lowvalue import is_acknowledgement, is_courtesy
from jiyi.text.tokenize import index_text
from jiyi.write.extract_rules import asks_only, states_nothing
from jiyi.write.gate import scrub

_MIN_CHARS = 2


@dataclass(frozen=True)
class Resources:
    """The resource items of one job's turns and the changes that store them."""

    by_turn: dict[int, MemoryItem]
    changes: list[Change]


def is_resource(item: MemoryItem) -> bool:
    """Resources (turns, document chunks) are evidence: never reconciled against."""
    return RESOURCE_TAG in item.tags


def keeps_turn(role: object, text: str) -> bool:
    """Whether a turn becomes a resource: a user's or an assistant's, with content. A
    pure acknowledgement ("OK", "Sure!", "Thanks 👍", "好的", "嗯嗯", "收到", "Спасибо!";
    :func:`~jiyi.text.lowvalue.is_acknowledgement`) is not kept: it would only clutter
    search and context. Nor is an assistant's reply of nothing but courtesy and questions
    ("Congrats! That's huge. How are you celebrating?", "Got it, I'll keep that in mind.";
    :func:`~jiyi.text.lowvalue.is_courtesy`): it put "Congrats!" into prompts about
    anything near the news. A person's own "Congrats, Mel!" is kept: between people it is
    what happened. ``remember()`` counts them in ``RememberResult.turns_skipped``."""
    text = text.strip()
    if role not in ("user", "assistant") or len(text) < _MIN_CHARS or is_acknowledgement(text):
        return False
    return not (role == "assistant" and is_courtesy(text))


def store_turns(
    rt: Runtime,
    turns: Sequence[Mapping[str, Any]],
    *,
    tenant: str,
    owner: Mapping[str, str | None],
    times: Sequence[datetime | None],
) -> Flow[Resources]:
    """Resource items for ``turns`` (the job payload's), embedded through the cache."""
    now = rt.now()
    items: dict[int, MemoryItem] = {}
    for i, turn in enumerate(turns):
        item = _turn_item(rt, turn, tenant, owner, times[i] if i < len(times) else None, now)
        if item is not None:
            items[i] = item
    if not items:
        return Resources({}, [])
    vectors, cache_put = yield from embed_memories(rt, [i.content for i in items.values()])
    changes: list[Change] = [cache_put] if cache_put else []
    for item, vector in zip(items.values(), vectors, strict=True):
        event = change_event(
            rt, HistoryAction.ADD, None, item, "what was said, kept as a resource", "pipeline"
        )
        changes.append(
            Upsert(item, index_text(item.content), event, vector=vector, model_id=rt.embedder.model_id)
        )
    return Resources(items, changes)


def _turn_item(
    rt: Runtime,
    turn: Mapping[str, Any],
    tenant: str,
    owner: Mapping[str, str | None],
    said_at: datetime | None,
    now: datetime,
) -> MemoryItem | None:
    text = str(turn.get("content") or "").strip()
    if not keeps_turn(turn.get("role"), text):
        return None
    text = scrub(rt.gate, tenant, text)  # the tenant's redaction policy, as every stored text
    name = turn.get("name")
    content = f"{name}: {text}" if name else text
    meta: dict[str, Any] = {"role": turn["role"]}
    if name:
        meta["speaker"] = name
    # Why this person's turn has the lower confidence: it only asks, or states nothing.
    low = turn["role"] == "user" and states_nothing(text)
    if low:
        meta["asks_only" if asks_only(text) else "states_nothing"] = True
    return MemoryItem.build(
        content=content[: rt.gate.max_length],
        memory_type=MemoryType.EVENT,
        scope=owner_scope(owner.get("user_id"), owner.get("project_id"), owner.get("agent_id")),
        tenant_id=tenant,
        user_id=owner.get("user_id"),
        project_id=owner.get("project_id"),
        session_id=owner.get("session_id"),
        agent_id=owner.get("agent_id"),
        thread_id=owner.get("session_id"),
        confidence=1.0 if turn["role"] == "user" and not low else rt.gate.min_confidence,
        importance=0.3,
        tags=(RESOURCE_TAG, TURN_TAG),
        metadata=meta,
        source=Source.USER if turn["role"] == "user" else Source.AI,
        source_id=turn.get("id"),
        occurred_at=said_at,
        created_at=now,
        updated_at=now,
    )
