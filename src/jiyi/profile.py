"""User and project profiles (seed 000 layer 3): aggregated from items, explicit edits win.

A :class:`Profile` holds every field of a user profile (``username``, ``background``,
``profession``, ``communication_style``, ``response_format``, ``language_preference``,
``characteristics``, ``content`` (custom instructions), ``expertise_areas``,
``programming_languages``, ``frequently_used_tools``) or of a project profile
(``project_goal``, ``tech_stack``, ``constraints``, ``key_decisions``,
``team_conventions``, ``current_phase``). Each value says where it came from:
``"explicit"`` (set with :meth:`ProfileFlows.set_profile`) or ``"aggregated"`` (read out
of the scope's active memory items by :mod:`jiyi.profile_rules`), with the ids of the
items that are its evidence.

Explicit values are stored durably as one memory item per scope (memory_type
``context``, tagged ``profile`` and ``pinned``, ``structured`` = the explicit fields),
changed through the normal audited history. That item is not embedded or keyword
indexed (it is injected whole, never searched for), is never aggregation input, and is
not a memory a person sees: ``list()`` and ``stats()`` leave it out unless asked for by
its tag (``tags=["profile"]``); ``get``, ``history`` and ``export`` still reach it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jiyi.effects import Flow, call
from jiyi.errors import InvalidInput, NotFound
from jiyi.items import change_event
from jiyi.lifecycle.maintain import PINNED_TAG
from jiyi.model import PROFILE_TAG, MemoryItem, MemoryType, Scope, Source, Status, as_utc, scope_key
from jiyi.profile_lexicon import natural_language
from jiyi.profile_rules import (
    CHOICES,
    INPUT_TYPES,
    LIST_FIELDS,
    PROJECT_FIELDS,
    USER_FIELDS,
    KeyDecision,
    ProfileScope,
    Value,
    aggregate,
    fields_of,
)
from jiyi.runtime import Runtime
from jiyi.store.base import Filter, GetItems, HistoryAction, ListItems, Upsert, Viewer, Write
from jiyi.text.pii import PiiKind, redact_value
from jiyi.text.tokens import count_tokens

__all__ = [
    "PROFILE_TAG",
    "PROJECT_FIELDS",
    "USER_FIELDS",
    "FieldSource",
    "KeyDecision",
    "Profile",
    "ProfileField",
    "ProfileScope",
]

FieldSource = Literal["explicit", "aggregated"]

MAX_TEXT = 2000
MAX_LIST = 50
MAX_ENTRY = 500
ITEMS_PER_TYPE = 40
"""Newest active items read per memory type: keeps a profile of a large scope fast."""

# Not statements about the user or project: document chunks, session summaries, and the
# procedural memory's workflows (typed "skill", but a way of doing a task, not expertise).
_SKIP_TAGS = frozenset({PROFILE_TAG, "resource", "episode", "procedural"})

LABELS: dict[str, str] = {
    "username": "Name",
    "profession": "Profession",
    "language_preference": "Preferred language",
    "communication_style": "Communication style",
    "response_format": "Response format",
    "content": "Custom instructions",
    "background": "Background",
    "expertise_areas": "Expertise",
    "programming_languages": "Programming languages",
    "frequently_used_tools": "Frequently used tools",
    "characteristics": "Characteristics",
    "project_goal": "Goal",
    "current_phase": "Current phase",
    "tech_stack": "Tech stack",
    "key_decisions": "Key decisions",
    "constraints": "Constraints",
    "team_conventions": "Team conventions",
}
"""Prompt labels, in prompt order (most useful first: what is cut when space runs out is last)."""

_SENTENCE_LISTS = frozenset({"constraints", "team_conventions"})
_LANG_TAG = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


@dataclass(frozen=True)
class ProfileField:
    """One field's value, where it came from, and the ids of the items behind it."""

    value: Value | None
    source: FieldSource
    evidence: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.value is None or self.value == () or self.value == ""

    def to_json_dict(self) -> dict[str, Any]:
        return {"value": _json_value(self.value), "source": self.source, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Profile:
    """A user or project profile: every field of its scope, in the seed's order.

    ``profile["profession"]`` is a field's value (None, or ``()`` for a list, when
    nothing is known); ``profile.fields[name]`` also has its source and evidence.
    ``item_id`` is the item holding the explicit values (its history is the history
    of explicit edits), None before the first edit.
    """

    scope: ProfileScope
    scope_id: str
    tenant_id: str
    fields: Mapping[str, ProfileField]
    item_id: str | None = None
    updated_at: datetime | None = field(default=None, compare=False)

    def __getitem__(self, name: str) -> Value | None:
        try:
            return self.fields[name].value
        except KeyError:
            raise KeyError(f"a {self.scope} profile has no field {name!r}") from None

    @property
    def explicit(self) -> dict[str, Value]:
        """The explicitly set fields and their values."""
        return {k: f.value for k, f in self.fields.items() if f.source == "explicit" and f.value is not None}

    @property
    def empty(self) -> bool:
        return all(f.empty for f in self.fields.values())

    def to_prompt(self, max_tokens: int | None = None) -> str:
        """A short block for a system prompt: one line per non-empty field, "" when none.

        With ``max_tokens``, fields that do not fit are left out (the least useful go
        first: the prompt order is name, profession, language, style ... for users and
        goal, phase, tech stack, decisions ... for projects).
        """
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 0):
            raise InvalidInput("max_tokens must be a non-negative integer", field="max_tokens")
        heading = "User profile:" if self.scope == "user" else "Project profile:"
        lines = [heading]
        used = 0
        for name in LABELS:
            f = self.fields.get(name)
            if f is None or f.empty:
                continue
            block = _block(name, f.value)
            candidate = "\n".join([*lines, block])
            if max_tokens is not None and count_tokens(candidate) > max_tokens:
                continue
            lines.append(block)
            used += 1
        return "\n".join(lines) if used else ""

    def to_json_dict(self, *, non_empty: bool = False) -> dict[str, Any]:
        """``{"scope", "scope_id", "fields": {name: {"value", "source", "evidence"}}, "text"}``."""
        return {
            "scope": self.scope,
            "scope_id": self.scope_id,
            "fields": {k: f.to_json_dict() for k, f in self.fields.items() if not (non_empty and f.empty)},
            "text": self.to_prompt(),
        }


def _json_value(value: Value | None) -> Any:
    if isinstance(value, tuple):
        return [v.to_json_dict() if isinstance(v, KeyDecision) else v for v in value]
    return value


def _block(name: str, value: Value | None) -> str:
    label = LABELS[name]
    if isinstance(value, str):
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        if len(lines) > 1:
            return f"- {label}:\n" + "\n".join(f"  - {line}" for line in lines)
        return f"- {label}: {value.strip()}"
    assert value is not None
    if name == "key_decisions":
        out = []
        for d in value:
            assert isinstance(d, KeyDecision)
            extra = [f"reason: {d.reason}"] if d.reason else []
            if d.at is not None:
                extra.append(d.at.date().isoformat())
            out.append(f"  - {d.decision}" + (f" ({'; '.join(extra)})" if extra else ""))
        return f"- {label}:\n" + "\n".join(out)
    if name in _SENTENCE_LISTS:
        return f"- {label}:\n" + "\n".join(f"  - {v}" for v in value)
    return f"- {label}: " + ", ".join(str(v) for v in value)


# ---------------------------------------------------------------- checking explicit values


def _which(user_id: object, project_id: object) -> tuple[ProfileScope, str]:
    given = [(n, v) for n, v in (("user_id", user_id), ("project_id", project_id)) if v is not None]
    if len(given) != 1:
        raise InvalidInput(
            "a profile belongs to one user or one project: give exactly one of user_id or project_id",
            field="user_id" if not given else given[1][0],
        )
    name, value = given[0]
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string", field=name)
    return ("user" if name == "user_id" else "project"), value


def _viewer(viewer: object) -> Viewer | None:
    if viewer is not None and not isinstance(viewer, Viewer):
        raise InvalidInput(
            f"viewer must be a jiyi.store.base.Viewer, not {type(viewer).__name__}", field="viewer"
        )
    return viewer


def _tenant(tenant_id: object, default: str) -> str:
    if tenant_id is None:
        return default
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise InvalidInput("tenant_id must be a non-empty string", field="tenant_id")
    return tenant_id


def _text(name: str, value: object, limit: int = MAX_TEXT, pii: Collection[PiiKind] = ()) -> str:
    if not isinstance(value, str):
        raise InvalidInput(
            f"{name} must be a string (or None to clear it), not {type(value).__name__}", field=name
        )
    text = value.strip()
    if not text:
        raise InvalidInput(f"{name} must not be empty; pass None to clear it", field=name)
    if len(text) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters", field=name)
    return redact_value(text, pii)  # like any stored memory: no e-mail, phone or key numbers


def _when(name: str, value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return None if value is None else as_utc(value)
    if isinstance(value, str):
        try:
            return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise InvalidInput(f"{name} must be an ISO date-time such as 2024-05-01T12:00:00Z", field=name)


def _decision_value(index: int, value: object, pii: Collection[PiiKind]) -> KeyDecision:
    where = f"key_decisions[{index}]"
    if isinstance(value, KeyDecision):
        value = {"decision": value.decision, "reason": value.reason, "at": value.at}
    if isinstance(value, str):
        return KeyDecision(_text(where, value, MAX_ENTRY, pii))
    if not isinstance(value, Mapping):
        raise InvalidInput(
            f"{where} must be an object with decision, reason and at (or a string), not {type(value).__name__}",
            field=where,
        )
    unknown = sorted(set(value) - {"decision", "reason", "at"})
    if unknown:
        raise InvalidInput(f"{where} has unknown key {unknown[0]!r}; use decision, reason, at", field=where)
    if "decision" not in value:
        raise InvalidInput(f"{where} needs a decision", field=f"{where}.decision")
    reason = value.get("reason")
    return KeyDecision(
        _text(f"{where}.decision", value["decision"], MAX_ENTRY, pii),
        None if reason is None else _text(f"{where}.reason", reason, MAX_ENTRY, pii),
        _when(f"{where}.at", value.get("at")),
    )


def check_field(scope: ProfileScope, name: str, value: object, pii: Collection[PiiKind] = ()) -> Value | None:
    """A checked, normalised explicit value for one field (None clears it), with the
    ``pii`` kinds of sensitive data redacted from its text.

    Raises :class:`~jiyi.errors.InvalidInput` naming the field for an unknown name or a
    value of the wrong type.
    """
    allowed = fields_of(scope)
    if name not in allowed:
        other: ProfileScope = "project" if scope == "user" else "user"
        hint = f" ({name} is a {other} profile field)" if name in fields_of(other) else ""
        raise InvalidInput(
            f"unknown {scope} profile field {name!r}{hint}; use one of {', '.join(allowed)}", field=name
        )
    if value is None:
        return None
    if name == "key_decisions":
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise InvalidInput("key_decisions must be a list of decisions", field=name)
        if len(value) > MAX_LIST:
            raise InvalidInput(f"key_decisions holds more than {MAX_LIST} entries", field=name)
        return tuple(_decision_value(i, v, pii) for i, v in enumerate(value))
    if name in LIST_FIELDS:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise InvalidInput(f"{name} must be a list of strings, not {type(value).__name__}", field=name)
        if len(value) > MAX_LIST:
            raise InvalidInput(f"{name} holds more than {MAX_LIST} entries", field=name)
        out: dict[str, str] = {}
        for i, v in enumerate(value):
            text = _text(f"{name}[{i}]", v, MAX_ENTRY, pii)
            out.setdefault(" ".join(text.casefold().split()), text)
        return tuple(out.values())
    text = _text(name, value, pii=pii)
    if name in CHOICES:
        choice = text.lower()
        if choice not in CHOICES[name]:
            raise InvalidInput(f"{name} must be one of {', '.join(CHOICES[name])}, got {text!r}", field=name)
        return choice
    if name == "language_preference":
        tag = natural_language(text)
        if tag is not None:
            return tag
        if not _LANG_TAG.match(text):
            raise InvalidInput(
                f"language_preference must be a language tag such as zh-CN, en or ja, got {text!r}",
                field=name,
            )
        head, *rest = re.split(r"[-_]", text)
        return "-".join([head.lower(), *(p.upper() if len(p) == 2 else p for p in rest)])
    return text


def _stored_values(scope: ProfileScope, item: MemoryItem | None) -> dict[str, Value]:
    """The explicit values held by the profile item (an archived one holds none)."""
    if item is None or item.status != Status.ACTIVE or not isinstance(item.structured, dict):
        return {}
    out: dict[str, Value] = {}
    for name, raw in item.structured.items():
        try:
            value = check_field(scope, name, raw)
        except InvalidInput:
            continue  # edited by hand into something unusable: that field falls back to aggregation
        if value is not None:
            out[name] = value
    return out


# ---------------------------------------------------------------- flows


def profile_item_id(tenant_id: str, scope: ProfileScope, scope_id: str) -> str:
    """The id of the item holding a scope's explicit profile (one per tenant and scope)."""
    digest = hashlib.sha256(f"{tenant_id}\0{scope}\0{scope_id}".encode()).hexdigest()
    return f"profile-{digest[:32]}"


def _stored_item(
    tenant: str, scope: ProfileScope, scope_id: str, viewer: Viewer | None
) -> Flow[MemoryItem | None]:
    found = yield from call(GetItems(tenant, (profile_item_id(tenant, scope, scope_id),)))
    if found:
        return found[0] if viewer is None or viewer.sees(found[0]) else None
    # An imported profile keeps the id it had elsewhere: find it by its tag.
    flt = Filter(
        tenant_id=tenant,
        scope_keys=(scope_key(Scope(scope), scope_id),),
        statuses=(),
        tags=(PROFILE_TAG,),
        include_expired=True,
        viewer=viewer,
    )
    page = yield from call(ListItems(flt, limit=1, descending=True))
    return page.items[0] if page.items else None


def _recent_items(
    rt: Runtime, tenant: str, key: str, per_type: int, viewer: Viewer | None
) -> Flow[list[MemoryItem]]:
    now = rt.now()
    items: list[MemoryItem] = []
    for kind in INPUT_TYPES:
        flt = Filter(tenant_id=tenant, scope_keys=(key,), memory_types=(kind,), now=now, viewer=viewer)
        page = yield from call(ListItems(flt, limit=per_type, descending=True))
        items.extend(i for i in page.items if i.thread_id is None and not _SKIP_TAGS.intersection(i.tags))
    return items


def _build(
    scope: ProfileScope, scope_id: str, tenant: str, stored: MemoryItem | None, items: list[MemoryItem]
) -> Profile:
    explicit = _stored_values(scope, stored)
    found = aggregate(items, scope)
    out: dict[str, ProfileField] = {}
    for name in fields_of(scope):
        if name in explicit:
            assert stored is not None
            out[name] = ProfileField(explicit[name], "explicit", (stored.id,))
        elif name in found:
            agg = found[name]
            out[name] = ProfileField(agg.value, "aggregated", agg.evidence)
        else:
            empty: Value | None = () if name in LIST_FIELDS or name == "key_decisions" else None
            out[name] = ProfileField(empty, "aggregated", ())
    stamps = [i.updated_at for i in items] + ([stored.updated_at] if stored else [])
    return Profile(
        scope=scope,
        scope_id=scope_id,
        tenant_id=tenant,
        fields=out,
        item_id=stored.id if stored else None,
        updated_at=max(stamps) if stamps else None,
    )


def _render(scope: ProfileScope, scope_id: str, values: Mapping[str, Value]) -> str:
    """The stored item's content: what a person listing memories sees."""
    shown = Profile(
        scope,
        scope_id,
        "",
        {n: ProfileField(values[n], "explicit") for n in fields_of(scope) if n in values},
    ).to_prompt()
    title = f"Profile of {scope} {scope_id} (set explicitly)"
    if not shown:
        return f"{title}: no fields set"
    _heading, body = shown.split("\n", 1)
    return f"{title}\n{body}"


def _as_stored(values: Mapping[str, Value]) -> dict[str, Any]:
    return {k: _json_value(v) for k, v in values.items()}


def _profile_flow(
    rt: Runtime, user_id: object, project_id: object, tenant_id: object, viewer: Viewer | None
) -> Flow[Profile]:
    scope, scope_id = _which(user_id, project_id)
    tenant = _tenant(tenant_id, rt.tenant_id)
    viewer = _viewer(viewer)
    stored = yield from _stored_item(tenant, scope, scope_id, viewer)
    per_type = max(1, min(1000, int(getattr(rt, "profile_items_per_type", ITEMS_PER_TYPE))))
    items = yield from _recent_items(rt, tenant, scope_key(Scope(scope), scope_id), per_type, viewer)
    return _build(scope, scope_id, tenant, stored, items)


def profile(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    tenant_id: str | None = None,
    viewer: Viewer | None = None,
) -> Flow[Profile]:
    """The profile of one user or one project (give exactly one of the ids).

    Fields are aggregated from the scope's active preference, fact, skill, habit,
    constraint, decision and context items (the newest
    :attr:`profile_items_per_type` of each type); explicitly set fields
    (:meth:`set_profile`) win over aggregated ones. With a ``viewer``, only the
    project items it may see count (see :class:`~jiyi.store.base.Viewer`).
    """
    return (yield from _profile_flow(rt, user_id, project_id, tenant_id, viewer))


def set_profile(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    tenant_id: str | None = None,
    actor: str | None = None,
    viewer: Viewer | None = None,
    **fields: Any,
) -> Flow[Profile]:
    """Set profile fields explicitly; ``None`` clears a field (back to aggregation).

    ``set_profile(user_id="alice", profession="前端工程师", programming_languages=["TypeScript"])``.
    List fields take lists of strings; ``key_decisions`` takes objects with
    ``decision``, ``reason`` and ``at`` (or plain strings). Explicit values are kept
    in one item per scope, changed in one audited write; returns the new profile.
    Unknown fields and wrong value types raise :class:`~jiyi.errors.InvalidInput`
    naming the field, before anything is written.
    """
    scope, scope_id = _which(user_id, project_id)
    tenant = _tenant(tenant_id, rt.tenant_id)
    if not fields:
        raise InvalidInput(
            "nothing to set: pass at least one profile field, e.g. profession='data scientist'",
            field=fields_of(scope)[0],
        )
    # Explicit values are stored text: redacted as the tenant's policy says.
    pii = rt.gate.redaction(tenant)
    checked = {name: check_field(scope, name, value, pii) for name, value in fields.items()}
    viewer = _viewer(viewer)
    if actor is not None and not isinstance(actor, str):
        raise InvalidInput(f"actor must be a string, not {type(actor).__name__}", field="actor")
    if viewer is not None and scope == "project" and not viewer.member_of(scope_id):
        raise NotFound(f"no project {scope_id!r} is visible here", item_id=scope_id)
    stored = yield from _stored_item(tenant, scope, scope_id, None)
    if stored is not None and viewer is not None and not viewer.sees(stored):
        raise NotFound(f"no project {scope_id!r} is visible here", item_id=scope_id)
    current = _stored_values(scope, stored)
    values = dict(current)
    for name, value in checked.items():
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value
    if values != current:
        upsert = _upsert(rt, tenant, scope, scope_id, stored, current, values, actor)
        yield from call(Write((upsert,)))
    return (yield from _profile_flow(rt, user_id, project_id, tenant, viewer))


def profile_prompt(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    tenant_id: str | None = None,
    max_tokens: int | None = None,
    viewer: Viewer | None = None,
) -> Flow[str]:
    """The prompt text of the user's and/or the project's profile ("" when nothing is
    known), within ``max_tokens`` if given; the user's profile comes first."""
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0
    ):
        raise InvalidInput(
            f"max_tokens must be a whole number >= 0 (or None for no limit), not {max_tokens!r}",
            field="max_tokens",
        )
    if user_id is None and project_id is None:
        raise InvalidInput("give user_id and/or project_id: whose profile to show", field="user_id")
    texts: list[str] = []
    left = max_tokens
    for ids in ({"user_id": user_id}, {"project_id": project_id}):
        if next(iter(ids.values())) is None:
            continue
        prof = yield from _profile_flow(rt, ids.get("user_id"), ids.get("project_id"), tenant_id, viewer)
        text = prof.to_prompt(None if left is None else max(0, left - 1))
        if text:
            texts.append(text)
            if left is not None:
                left -= count_tokens(text) + 1
    return "\n\n".join(texts)


def _upsert(
    rt: Runtime,
    tenant: str,
    scope: ProfileScope,
    scope_id: str,
    stored: MemoryItem | None,
    before: Mapping[str, Value],
    values: dict[str, Value],
    actor: str | None,
) -> Upsert:
    now = rt.now()
    set_names = [n for n in values if before.get(n) != values[n]]
    cleared = [n for n in before if n not in values]
    reason = "; ".join(
        part
        for part in (
            f"profile: set {', '.join(set_names)}" if set_names else "",
            f"cleared {', '.join(cleared)}" if cleared else "",
        )
        if part
    )
    content = _render(scope, scope_id, values)
    if stored is None:
        item = MemoryItem.build(
            id=profile_item_id(tenant, scope, scope_id),
            tenant_id=tenant,
            content=content,
            structured=_as_stored(values),
            memory_type=MemoryType.CONTEXT,
            scope=Scope(scope),
            user_id=scope_id if scope == "user" else None,
            project_id=scope_id if scope == "project" else None,
            source=Source.USER,
            confidence=1.0,
            importance=1.0,
            tags=(PROFILE_TAG, PINNED_TAG),
            # Who first set it: editor keys may change only what they created.
            metadata={"profile": scope, **({"created_by": actor} if actor else {})},
            created_at=now,
            updated_at=now,
        )
        return Upsert(item, "", change_event(rt, HistoryAction.ADD, None, item, reason, actor))
    status = Status.ACTIVE if values else Status.ARCHIVED
    new = stored.evolve(
        content=content,
        structured=_as_stored(values),
        status=status,
        tags=tuple(dict.fromkeys((*stored.tags, PROFILE_TAG))),
        version=stored.version + 1,
        updated_at=now,
    )
    if status == Status.ARCHIVED:
        action = HistoryAction.ARCHIVE
    elif stored.status != Status.ACTIVE:
        action = HistoryAction.RESTORE
    else:
        action = HistoryAction.UPDATE
    # Not indexed: the profile is injected whole, and searches and reconciliation must not find it.
    return Upsert(new, "", change_event(rt, action, stored, new, reason, actor))
