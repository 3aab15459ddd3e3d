"""Memories from other systems, as records for :meth:`jiyi.Memory.import_items`.

* :func:`mem0_records`: a mem0 export, i.e. what ``get_all`` returns
  (``{"results": [...]}``), a ``{"memories": [...]}`` object or a plain list of memory
  objects (``id``, ``memory``, ``user_id`` / ``agent_id`` / ``run_id``, ``metadata``,
  ``categories``, ``created_at``, ``updated_at``, ``expiration_date``).
* :func:`letta_records`: the memory blocks of a Letta Agent File (``.af``), either
  format: the current one (``{"agents": [{"name", "block_ids"}], "blocks": [{"id",
  "label", "value"}]}``) or the first (one agent with ``"core_memory": [{"label",
  "value"}]``). The ``human`` block is about the user (user scope); every other block
  (``persona``, custom ones) belongs to the agent (agent scope, the agent's name as id).
  A block's text is split into one memory per line; lines that state nothing (a field
  still unknown, "Age: ?"; a heading ending with a colon; a template line about the
  memory itself, "This is what I know so far about the user, I should expand this as I
  learn more about them."; a line of questions only) are left out.
  :func:`letta_import` also says which lines were left out and why.

Both return plain records; ``import_items`` validates them all before writing any, in
one transaction, and redacts sensitive data. ``jiyi import --from mem0|letta FILE``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from jiyi.compat.mem0 import MEM0_TYPES
from jiyi.errors import InvalidInput
from jiyi.model import MemoryType

__all__ = ["LettaImport", "SkippedLine", "letta_import", "letta_records", "mem0_records"]


def mem0_records(data: object, *, user_id: str | None = None) -> list[dict[str, Any]]:
    """jiyi records from a mem0 export; ``user_id`` owns records that name no owner."""
    rows = _mem0_rows(data)
    problems: list[str] = []
    records = []
    for number, row in enumerate(rows, start=1):
        record, problem = _mem0_record(row, user_id)
        if problem:
            problems.append(f"record {number}: {problem}")
        else:
            records.append(record)
    if problems:
        raise InvalidInput("mem0 export: " + "; ".join(problems))
    return records


def _mem0_rows(data: object) -> Sequence[Any]:
    if isinstance(data, Mapping):
        for key in ("results", "memories"):
            if isinstance(data.get(key), list):
                return data[key]  # type: ignore[no-any-return]
        raise InvalidInput('a mem0 export is a list of memories or an object with "results" or "memories"')
    if isinstance(data, list):
        return data
    raise InvalidInput(f"a mem0 export is JSON: a list or an object, not {type(data).__name__}")


def _mem0_record(row: object, user_id: str | None) -> tuple[dict[str, Any], str | None]:
    if not isinstance(row, Mapping):
        return {}, f"expected an object, got {type(row).__name__}"
    text = next((row[k] for k in ("memory", "text", "content") if isinstance(row.get(k), str)), None)
    if not text or not text.strip():
        return {}, 'no text ("memory")'
    metadata = dict(row.get("metadata") or {})
    record: dict[str, Any] = {"content": text, "metadata": {**metadata, "imported_from": "mem0"}}
    kind = str(metadata.get("memory_type") or row.get("memory_type") or "fact")
    record["memory_type"] = MEM0_TYPES.get(kind, kind if kind in set(MemoryType) else "fact")
    if isinstance(row.get("id"), str) and row["id"]:
        record["id"] = row["id"]
    owners = {"user_id": row.get("user_id"), "agent_id": row.get("agent_id"), "session_id": row.get("run_id")}
    owners = {k: v for k, v in owners.items() if v}
    if not owners and user_id is None:
        return {}, "names no user_id, agent_id or run_id (give a default user)"
    record.update(owners or {"user_id": user_id})
    for field in ("created_at", "updated_at"):
        if row.get(field):
            record[field] = row[field]
    if row.get("expiration_date"):
        record["expires_at"] = row["expiration_date"]
    categories = row.get("categories") or metadata.get("categories")
    if isinstance(categories, list):
        record["tags"] = [str(c) for c in categories]
    return record, None


@dataclass(frozen=True)
class SkippedLine:
    """A line of a Letta block that was not imported, and why."""

    agent: str
    block: str
    line: str
    reason: str

    def to_json_dict(self) -> dict[str, str]:
        return {"agent": self.agent, "block": self.block, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class LettaImport:
    """What :func:`letta_import` read: the records to import and the lines it left out."""

    records: list[dict[str, Any]]
    skipped: list[SkippedLine] = dataclass_field(default_factory=list)


def letta_records(data: object, *, user_id: str | None = None) -> list[dict[str, Any]]:
    """jiyi records from a Letta Agent File's memory blocks. ``user_id`` owns the
    ``human`` block's memories (required when the file has one). :func:`letta_import`
    also returns the lines left out and why."""
    return letta_import(data, user_id=user_id).records


def letta_import(data: object, *, user_id: str | None = None) -> LettaImport:
    """:func:`letta_records` and every line left out (:class:`SkippedLine`): a field
    still unknown, a heading, a template line about the memory itself, a line of
    questions only, a repeat."""
    if not isinstance(data, Mapping):
        raise InvalidInput("a Letta Agent File is a JSON object")
    records: list[dict[str, Any]] = []
    skipped: list[SkippedLine] = []
    for agent, blocks in _letta_agents(data):
        for block in blocks:
            label = str(block.get("label") or "block")
            value = block.get("value")
            if not isinstance(value, str):
                continue
            if label == "human":
                if user_id is None:
                    raise InvalidInput(
                        f"agent {agent!r} has a human block: say whose memories these are (user_id / --user)",
                        field="user_id",
                    )
                owner = {"user_id": user_id}
            else:
                owner = {"agent_id": agent}
            meta = {"imported_from": "letta", "letta_agent": agent, "letta_block": label}
            kept, left_out = _statements(value)
            skipped += [SkippedLine(agent, label, line, reason) for line, reason in left_out]
            for line in kept:
                records.append(
                    {
                        "content": line,
                        "memory_type": "fact",
                        **owner,
                        "metadata": meta,
                        "tags": [f"letta:{label}"],
                    }
                )
    return LettaImport(records, skipped)


def _letta_agents(data: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(agent name, its memory blocks) for each agent of the file."""
    if isinstance(data.get("agents"), list):
        by_id = {b.get("id"): b for b in data.get("blocks") or [] if isinstance(b, Mapping)}
        out = []
        for agent in data["agents"]:
            if not isinstance(agent, Mapping):
                raise InvalidInput("agents[] must hold objects")
            name = str(agent.get("name") or agent.get("id") or "agent")
            blocks = [by_id[i] for i in agent.get("block_ids") or [] if i in by_id]
            blocks += [
                b
                for b in agent.get("memory_blocks") or agent.get("core_memory") or []
                if isinstance(b, Mapping)
            ]
            out.append((name, blocks))
        return out
    if isinstance(data.get("core_memory"), list):
        name = str(data.get("name") or "agent")
        return [(name, [b for b in data["core_memory"] if isinstance(b, Mapping)])]
    raise InvalidInput('not a Letta Agent File: no "agents" nor "core_memory"')


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
# "Age: ?", "Last name: unknown", "国籍：未知": a field the agent has not learnt yet.
_UNKNOWN = re.compile(
    r"^[^:：]{1,40}[:：]\s*(?:[?？]+|-+|unknown|n/?a|none|tbd|not known( yet)?|未知|不详|暂无)?\s*$", re.I
)


# Template lines Letta and MemGPT start a block with: they speak about the block or tell
# the agent to fill it in, and state nothing about the user (or the agent). Recognised by
# what they talk about (this memory / section, what is known so far, learning more over
# time), not by their exact wording.
_TEMPLATE = re.compile(
    r"""^(?:
        this\s+is\s+(?:what\s+i\s+know|my\s+section|the\s+section|where\s+i\s+(?:keep|store))\b
      | (?:the\s+)?following\s+is\s+(?:a|an|my|the)\s+(?:starter|template|default|example)\b
      | (?:here\s+is|this\s+is)\s+(?:a|an|my|the)\s+(?:starter|template|default|example)\s+(?:persona|human|profile)\b
      | i\s+(?:don'?t|do\s+not)\s+(?:yet\s+)?know\s+anything\s+(?:yet\s+)?about\s+
        (?:them|him|her|the\s+(?:user|human|person)|my\s+user|this\s+person|myself)\b
      | (?:there'?s|there\s+is)\s+nothing\s+here\s+yet\b
      | (?:nothing\s+is\s+known|no\s+information)\s+(?:yet|so\s+far)\b
      | i\s+(?:should|will|must|can|need\s+to)\s+(?:update|expand|edit|add\s+to|fill\s+in|grow)\s+
        (?:this|these|it|(?:my|the)\s+(?:core\s+)?(?:memory|memories|section|block|notes|persona|profile))\b
        .*\b(?:over\s+time|as\s+i|when\s+i|learn)
      | (?:这是|以下是)我(?:目前|到目前为止|现在)?(?:对|关于)(?:用户|对方|他|她|人类)的?(?:了解|信息|记忆|所知)
      | 我(?:应该|会|要|需要)(?:随着|在).{0,20}(?:更新|补充|扩展|完善)(?:这|这部分|这段|这些)?(?:记忆|信息)
      | 我(?:还|目前|暂时)?(?:不|没有)(?:了解|知道)(?:关于)?(?:用户|对方|他|她)的?任何
    )""",
    re.I | re.X,
)
# A line of questions only ("What's their name? Where are they from?"): it asks, states nothing.
_QUESTIONS = re.compile(r"^(?:[^.!?。！？:：]+[?？]\s*)+$")


def _statements(value: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A block's text as one statement per line, bullets removed, repeats dropped, and
    the lines left out with the reason. A line that states nothing is left out: a field
    still unknown ("Age: ?", the templates Letta starts its human block with), a heading
    that introduces the next lines ("The following is a starter persona, and it can be
    expanded ...:"), a template line about the block itself ("This is what I know so far
    about the user, I should expand this as I learn more about them.") and a line of
    questions only."""
    seen: dict[str, None] = {}
    skipped: list[tuple[str, str]] = []
    for line in value.splitlines():
        text = _BULLET.sub("", line).strip()
        if not text:
            continue
        if text.endswith((":", "：")):
            skipped.append((text, "a heading, or a field with no value"))
        elif _UNKNOWN.match(text):
            skipped.append((text, "a field not known yet"))
        elif _TEMPLATE.match(text):
            skipped.append((text, "a template line about the memory block, not about anyone"))
        elif _QUESTIONS.match(text):
            skipped.append((text, "questions only: states nothing"))
        elif text in seen:
            skipped.append((text, "repeats an earlier line"))
        else:
            seen[text] = None
    return list(seen), skipped
