"""Procedural memory (seeds 002 §3.2/§5.3, 004 §8.8): skills, failure patterns, task
decompositions, and advice for a new task.

Three kinds of learnings are stored as ordinary memory items, so search, history,
export and the lifecycle treat them like any other memory:

* **skill** (``memory_type="skill"``): a tool-call workflow that worked, with its
  success and failure counts. ``structured = {"kind": "skill", "skill_name",
  "workflow": [{"step", "tool", ...}], "successes", "failures", ...}``.
* **failure** (``memory_type="pattern"``): a way things went wrong, the words that
  announce it and what to do instead. ``structured = {"kind": "failure", "pattern",
  "indicators", "mitigation", "severity", "occurrences", ...}``.
* **decomposition** (``memory_type="pattern"``): how a task was split into subtasks
  and how often that worked. ``structured = {"kind": "decomposition",
  "query_pattern", "subtasks", "strategy", "success_rate", "usage_count"}``.

Recording the same learning again (same skill name; same failure pattern; the same
plan for the same or a similar task) writes a new version of the existing item instead
of adding one; the audit history keeps every version.

:meth:`ProceduralFlows.suggest` answers "how did a task like this go before?": the best
matching successful decomposition or skill, and the risks of known failure patterns
(seed 004's ``Suggest`` and ``CheckRisks``). It never invents a plan: with nothing
similar enough in memory the suggestion is empty, with confidence 0.

Similarity is the cosine of the configured embedder. The default threshold
(:data:`MIN_SIMILARITY`, 0.74) was calibrated for the default USE-m3 embedder on Chinese
and English task pairs (docs/procedural.md). It, :data:`NEAR_IDENTICAL` and a
``min_similarity`` passed in are read on that embedder's scale and moved onto the
configured one's (:func:`jiyi.embed.scale.on_scale`; e5: 0.74 -> 0.94).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from jiyi.effects import Flow, call
from jiyi.embed.cached import embed_documents, query_vector
from jiyi.embed.scale import on_scale
from jiyi.errors import InvalidInput, StoreReadOnly
from jiyi.items import all_items, change_event
from jiyi.model import (
    DECOMPOSITION,
    FAILURE,
    MAX_ID_LENGTH,
    SKILL,
    MemoryItem,
    MemoryType,
    Scope,
    Source,
    Status,
    Visibility,
    owner_scope,
    scope_key,
)
from jiyi.read.statements import embed_memories
from jiyi.runtime import Runtime
from jiyi.store.base import (
    CachePut,
    Filter,
    HistoryAction,
    Retrieve,
    Touch,
    Upsert,
    Viewer,
    Write,
    creator_of,
    same_audience,
)
from jiyi.text.tokenize import index_text, normalise, query_terms
from jiyi.write.gate import scrub, scrub_item

if TYPE_CHECKING:
    pass

MIN_SIMILARITY = 0.74
"""Cosine (USE-m3) at which a stored task counts as the same task as a new one. Chosen on
half of a set of zh/en paraphrase and non-paraphrase pairs as the lowest value with no
false match there; see docs/procedural.md for both halves' figures. Moved onto another
embedder's scale with :func:`jiyi.embed.scale.on_scale`."""
MIN_SUCCESS_RATE = 0.9
"""Seed 004: only decompositions/skills that succeeded at least this often are suggested."""
NEAR_IDENTICAL = 0.9
"""Cosine at which two lists of subtasks count as one plan when recording (stricter than
:data:`MIN_SIMILARITY`: recording merges counts, so it must not merge different plans).
On the default embedder's scale, as :data:`MIN_SIMILARITY`."""

STRATEGIES = ("parallel", "sequential")
Strategy = Literal["parallel", "sequential"]
SuggestionKind = Literal["decomposition", "skill"]

PROCEDURAL_TAG = "procedural"

MAX_NAME = 200
MAX_TEXT = 1000
MAX_ITEMS = 50
_POOL = 50  # candidates taken from each index when looking for similar tasks
_TASK_EXAMPLES = 5  # example tasks kept per skill (newest last)
_VARIANTS = 5  # other wordings kept per decomposition (newest last)

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NAME_SEP = re.compile(r"[\s_\-]+")


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Risk:
    """A known failure pattern that applies to a task (seed 004 ``Warning``)."""

    pattern: str
    mitigation: str
    severity: int
    item_id: str
    matched_indicators: tuple[str, ...]
    """The pattern's indicators found in the task (empty when matched by similarity)."""
    similarity: float
    occurrences: int
    reason: str

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "mitigation": self.mitigation,
            "severity": self.severity,
            "item_id": self.item_id,
            "matched_indicators": list(self.matched_indicators),
            "similarity": round(self.similarity, 4),
            "occurrences": self.occurrences,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Suggestion:
    """What :meth:`ProceduralFlows.suggest` found. ``kind`` is None (and ``confidence``
    0) when nothing in memory is similar and successful enough; ``risks`` are filled
    either way, most severe first."""

    task: str
    kind: SuggestionKind | None
    confidence: float
    """The success rate of the suggested decomposition or skill (seed 004); 0 if none."""
    reason: str
    item_id: str | None = None
    matched: str | None = None
    """The stored task (or the skill's description or name) that matched."""
    similarity: float = 0.0
    subtasks: tuple[str, ...] = ()
    strategy: Strategy | None = None
    skill_name: str | None = None
    workflow: tuple[dict[str, Any], ...] = ()
    success_rate: float | None = None
    usage_count: int = 0
    risks: tuple[Risk, ...] = ()

    @property
    def found(self) -> bool:
        return self.kind is not None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "found": self.found,
            "kind": self.kind,
            "confidence": round(self.confidence, 4),
            "reason": self.reason,
            "item_id": self.item_id,
            "matched": self.matched,
            "similarity": round(self.similarity, 4),
            "subtasks": list(self.subtasks),
            "strategy": self.strategy,
            "skill_name": self.skill_name,
            "workflow": [dict(s) for s in self.workflow],
            "success_rate": None if self.success_rate is None else round(self.success_rate, 4),
            "usage_count": self.usage_count,
            "risks": [r.to_json_dict() for r in self.risks],
        }


# ---------------------------------------------------------------- what the flows need


# ---------------------------------------------------------------- input checks


def _text(value: object, name: str, max_len: int = MAX_TEXT) -> str:
    """One line of text: whitespace runs (newlines too) become one space, since these
    strings end up in one-line entries of learnings.md."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}", field=name)
    text = _SPACE.sub(" ", value).strip()
    if not text:
        raise InvalidInput(f"{name} must not be empty", field=name)
    if len(text) > max_len:
        raise InvalidInput(f"{name} is {len(text)} characters long; the limit is {max_len}", field=name)
    return text


def _optional_text(value: object, name: str, max_len: int = MAX_TEXT) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and not value.strip():
        return None
    return _text(value, name, max_len)


def _text_list(values: object, name: str, what: str, max_len: int = MAX_TEXT) -> list[str]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InvalidInput(f"{name} must be a list of strings ({what})", field=name)
    if not values:
        raise InvalidInput(f"{name} must not be empty: give at least one ({what})", field=name)
    if len(values) > MAX_ITEMS:
        raise InvalidInput(f"{name} has {len(values)} entries; the limit is {MAX_ITEMS}", field=name)
    return [_text(v, f"{name}[{i}]", max_len) for i, v in enumerate(values)]


def _who(rt: Runtime, tenant_id: object, actor: object, viewer: object) -> str:
    """The tenant to use, after checking the caller-identity arguments: a wrong type here
    would otherwise surface as a storage or validation error far from its cause."""
    if tenant_id is not None and (
        not isinstance(tenant_id, str) or not tenant_id.strip() or len(tenant_id) > MAX_ID_LENGTH
    ):
        raise InvalidInput(
            f"tenant_id must be a non-empty string of at most {MAX_ID_LENGTH} characters", field="tenant_id"
        )
    if actor is not None and not isinstance(actor, str):
        raise InvalidInput(f"actor must be a string, not {type(actor).__name__}", field="actor")
    if viewer is not None and not isinstance(viewer, Viewer):
        raise InvalidInput(
            f"viewer must be a jiyi.store.base.Viewer, not {type(viewer).__name__}", field="viewer"
        )
    return rt.tenant(tenant_id)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false, not {value!r}", field=name)
    return value


def _severity(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise InvalidInput(
            f"severity must be an integer from 1 (minor) to 5 (critical), got {value!r}", field="severity"
        )
    return value


def _strategy(value: object) -> Strategy:
    if value == "parallel":
        return "parallel"
    if value == "sequential":
        return "sequential"
    raise InvalidInput(f"unknown strategy {value!r}; use 'parallel' or 'sequential'", field="strategy")


def _rate(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be a number within 0..1, got {value!r}", field=name)
    return float(value)


def _workflow(steps: object) -> list[dict[str, Any]]:
    """Steps as ``{"step": n, "tool": ..., **extra}``, numbered 1.. in the given order."""
    hint = "tool names in order, or objects with a 'tool' key"
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence):
        raise InvalidInput(f"workflow must be a list of steps ({hint})", field="workflow")
    if not steps:
        raise InvalidInput(f"workflow must not be empty: give the skill's steps ({hint})", field="workflow")
    if len(steps) > MAX_ITEMS:
        raise InvalidInput(f"workflow has {len(steps)} steps; the limit is {MAX_ITEMS}", field="workflow")
    out: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        where = f"workflow[{i}]"
        if isinstance(step, str):
            out.append({"step": i + 1, "tool": _text(step, where, MAX_NAME)})
            continue
        if not isinstance(step, Mapping):
            raise InvalidInput(f"{where} must be a tool name or an object with a 'tool' key", field=where)
        if "tool" not in step:
            raise InvalidInput(f"{where} has no 'tool': name the tool this step calls", field=where)
        extra = {k: v for k, v in step.items() if k not in ("step", "tool")}
        if any(not isinstance(k, str) for k in extra):
            raise InvalidInput(f"{where}: keys must be strings", field=where)
        try:
            json.dumps(extra)
        except (TypeError, ValueError):
            raise InvalidInput(f"{where}: extra fields must be JSON values", field=where) from None
        out.append({"step": i + 1, "tool": _text(step["tool"], f"{where}.tool", MAX_NAME), **extra})
    return out


def _owner(
    scope: Scope | str | None, user_id: str | None, project_id: str | None, agent_id: str | None
) -> Scope:
    for name, value in (("user_id", user_id), ("project_id", project_id), ("agent_id", agent_id)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"{name} must be a non-empty string", field=name)
    if scope is not None:
        try:
            chosen = Scope(scope)
        except ValueError:
            chosen = None
        if chosen is None or chosen == Scope.SESSION:
            raise InvalidInput(
                f"unknown scope {scope!r} for a learning; use user, project or agent", field="scope"
            )
        given = {Scope.USER: user_id, Scope.PROJECT: project_id, Scope.AGENT: agent_id}[chosen]
        if given is None:
            raise InvalidInput(f"scope {chosen.value!r} needs {chosen.value}_id", field="scope")
        return chosen
    if user_id is None and project_id is None and agent_id is None:
        raise InvalidInput(
            "say whose learning this is: give user_id, project_id or agent_id", field="user_id"
        )
    return owner_scope(user_id, project_id, agent_id)


def _search_keys(user_id: str | None, project_id: str | None, agent_id: str | None) -> tuple[str, ...]:
    keys: list[str] = []
    for scope, value in ((Scope.PROJECT, project_id), (Scope.AGENT, agent_id), (Scope.USER, user_id)):
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{scope.value}_id must be a non-empty string", field=f"{scope.value}_id")
        keys.append(scope_key(scope, value))
    if not keys:
        raise InvalidInput(
            "give at least one scope to look in: user_id, project_id or agent_id", field="user_id"
        )
    return tuple(keys)


# ---------------------------------------------------------------- text helpers


def _is_zh(*texts: str | None) -> bool:
    """Chinese wording when any of the person's own words are Chinese."""
    return any(t and _HAN.search(t) for t in texts)


def _name_key(name: str) -> str:
    """``Deep Research``, ``deep-research`` and ``deep_research`` name one skill."""
    return _NAME_SEP.sub("_", normalise(name)).strip("_")


def _wording(text: str) -> tuple[str, ...]:
    """A task's words, ignoring case, punctuation, stop words and inflection."""
    return query_terms(text) or (_SPACE.sub("", normalise(text)),)


def _numbers(text: str) -> tuple[str, ...]:
    return tuple(sorted(_NUMBER.findall(normalise(text))))


def _near_identical(a: str, b: str, cosine: float, bar: float = NEAR_IDENTICAL) -> bool:
    """Same wording, or nearly so (cosine >= ``bar``, :data:`NEAR_IDENTICAL` on the
    embedder's scale). Numbers must agree: the embedder barely tells "Python 3.11" from
    "Python 3.12", but they are different tasks."""
    if _wording(a) == _wording(b):
        return True
    return cosine >= bar and _numbers(a) == _numbers(b)


def _indicator_key(indicator: str) -> tuple[str, ...]:
    return _wording(indicator)


def _indicator_hit(indicator: str, task_terms: frozenset[str], task_squashed: str) -> bool:
    """All of the indicator's terms occur in the task. Chinese indicators also match as a
    substring, since jieba may cut the task and the indicator differently."""
    terms = query_terms(indicator)
    if terms and all(t in task_terms for t in terms):
        return True
    if _HAN.search(indicator):
        return _SPACE.sub("", normalise(indicator)) in task_squashed
    return False


def _humanise(name: str) -> str:
    return _NAME_SEP.sub(" ", name).strip()


def _quote(text: str, zh: bool) -> str:
    return f"「{text}」" if zh else f"“{text}”"


def _runs(successes: int, total: int, zh: bool) -> str:
    return f"{total} 次中成功 {successes} 次" if zh else f"{successes} of {total} runs succeeded"


def skill_content(name: str, workflow: Sequence[Mapping[str, Any]], description: str | None, zh: bool) -> str:
    """The one-line, human-readable form of a skill."""
    steps = " → ".join(str(s["tool"]) for s in workflow)
    if zh:
        return f"技能 {name}{f'（{description}）' if description else ''}：{steps}"
    return f"Skill {name}{f' ({description})' if description else ''}: {steps}"


def failure_content(
    pattern: str,
    indicators: Sequence[str],
    mitigation: str,
    severity: int,
    description: str | None,
    zh: bool,
) -> str:
    """The one-line, human-readable form of a failure pattern."""
    if zh:
        about = f"{description}，" if description else ""
        return f"失败模式 {pattern}（{about}严重度 {severity}）：征兆：{'、'.join(indicators)}；对策：{mitigation}"
    about = f"{description}; " if description else ""
    return (
        f"Failure pattern {pattern} ({about}severity {severity}): "
        f"signs: {', '.join(indicators)}; mitigation: {mitigation}"
    )


def decomposition_content(task: str, subtasks: Sequence[str], strategy: Strategy, zh: bool) -> str:
    """The one-line, human-readable form of a task decomposition."""
    n = len(subtasks)
    if zh:
        how = "并行" if strategy == "parallel" else "串行"
        return f"把{_quote(task, True)}拆成 {n} 个{how}子任务：{'；'.join(subtasks)}"
    plural = "" if n == 1 else "s"
    return f"Split {_quote(task, False)} into {n} {strategy} subtask{plural}: {'; '.join(subtasks)}"


# ---------------------------------------------------------------- reading stored learnings


@dataclass(frozen=True)
class _Plan:
    """A stored decomposition or skill, read defensively (people edit these)."""

    item: MemoryItem
    kind: SuggestionKind
    successes: int
    uses: int
    texts: tuple[str, ...]  # what a new task is compared with
    subtasks: tuple[str, ...] = ()
    strategy: Strategy | None = None
    skill_name: str | None = None
    workflow: tuple[dict[str, Any], ...] = ()

    @property
    def rate(self) -> float:
        return self.successes / self.uses if self.uses else 0.0


@dataclass(frozen=True)
class _Failure:
    item: MemoryItem
    pattern: str
    indicators: tuple[str, ...]
    mitigation: str
    severity: int
    occurrences: int
    texts: tuple[str, ...]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _strings(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return tuple(value)


def _read_plan(item: MemoryItem) -> _Plan | None:
    data = item.structured
    if not isinstance(data, dict):
        return None
    if data.get("kind") == DECOMPOSITION:
        task, subtasks, uses = (
            data.get("query_pattern"),
            _strings(data.get("subtasks")),
            _count(data.get("usage_count")),
        )
        rate = data.get("success_rate")
        if not isinstance(task, str) or not task.strip() or not subtasks or not uses:
            return None
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            return None
        strategy = data.get("strategy")
        if strategy not in STRATEGIES:
            return None
        variants = _strings(data.get("variants")) or ()
        return _Plan(
            item,
            "decomposition",
            successes=round(rate * uses),
            uses=uses,
            texts=(task, *variants),
            subtasks=subtasks,
            strategy=_strategy(strategy),
        )
    if data.get("kind") == SKILL:
        name, ok, bad = data.get("skill_name"), _count(data.get("successes")), _count(data.get("failures"))
        workflow = data.get("workflow")
        if not isinstance(name, str) or not name.strip() or ok is None or bad is None or not ok + bad:
            return None
        if not isinstance(workflow, list) or not workflow:
            return None
        if not all(isinstance(s, dict) and isinstance(s.get("tool"), str) for s in workflow):
            return None
        tasks = _strings(data.get("tasks")) or ()
        description = data.get("description")
        about = description if isinstance(description, str) and description.strip() else _humanise(name)
        return _Plan(
            item,
            "skill",
            successes=ok,
            uses=ok + bad,
            texts=(*tasks, about),
            strategy="sequential",  # a workflow's steps run in order
            skill_name=name,
            workflow=tuple(dict(s) for s in workflow),
        )
    return None


def _read_failure(item: MemoryItem) -> _Failure | None:
    data = item.structured
    if not isinstance(data, dict) or data.get("kind") != FAILURE:
        return None
    pattern, mitigation = data.get("pattern"), data.get("mitigation")
    indicators = _strings(data.get("indicators")) or ()
    severity, occurrences = data.get("severity"), _count(data.get("occurrences"))
    if not isinstance(pattern, str) or not pattern.strip() or not isinstance(mitigation, str):
        return None
    if isinstance(severity, bool) or not isinstance(severity, int) or not 1 <= severity <= 5:
        return None
    description = data.get("description")
    about = description if isinstance(description, str) and description.strip() else _humanise(pattern)
    return _Failure(item, pattern, indicators, mitigation, severity, occurrences or 1, (about,))


# ---------------------------------------------------------------- the flows


@dataclass(frozen=True)
class _Caller:
    """Whose learning it is and who records it, as the record flows were given them
    (:func:`_base_item` and :func:`_save` check them)."""

    scope: Scope | str | None
    user_id: str | None
    project_id: str | None
    agent_id: str | None
    tenant_id: str | None
    source: Source | str
    metadata: Mapping[str, Any] | None
    actor: str | None
    visibility: Visibility | str
    viewer: Viewer | None


@dataclass(frozen=True)
class _Version:
    """What a record flow writes: the learning's text, record and importance, the
    reason kept in its history, and words it is also found by."""

    content: str
    structured: dict[str, Any]
    importance: float
    reason: str
    extra_terms: str = ""


def record_skill(
    rt: Runtime,
    /,
    name: str,
    workflow: Sequence[str | Mapping[str, Any]],
    *,
    description: str | None = None,
    task: str | None = None,
    succeeded: bool = True,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    scope: Scope | str | None = None,
    tenant_id: str | None = None,
    source: Source | str = Source.AI,
    metadata: Mapping[str, Any] | None = None,
    actor: str | None = None,
    visibility: Visibility | str = Visibility.MEMBERS,
    viewer: Viewer | None = None,
    own_only: bool = False,
) -> Flow[MemoryItem]:
    """Record one run of a skill: a named tool-call workflow (seed 002 §5.3).

    ``workflow`` lists the steps in order: tool names, or objects with a ``tool`` key
    and any other JSON fields (they are numbered ``step`` 1, 2, ...). ``task`` is the
    task the skill was used for; a few are kept so :meth:`suggest` can match new
    tasks against them. Recording a skill name that is already known in this scope
    (ignoring case, spaces, ``-`` and ``_``) adds the run to its counts as a new
    version of the same item; a successful run's workflow becomes the stored one.
    With ``own_only=True`` (the REST service passes it for editor keys, which may
    change only what they created) a learning is updated only if the same creator
    made it; otherwise a new item is recorded. The same holds for
    :meth:`record_failure` and :meth:`record_decomposition`.
    """
    name = _text(name, "name", MAX_NAME)
    steps = _workflow(workflow)
    description = _optional_text(description, "description")
    task = _optional_text(task, "task")
    succeeded = _flag(succeeded, "succeeded")
    who = _Caller(
        scope=scope,
        user_id=user_id,
        project_id=project_id,
        agent_id=agent_id,
        tenant_id=tenant_id,
        source=source,
        metadata=metadata,
        actor=actor,
        visibility=visibility,
        viewer=viewer,
    )
    base = _base_item(rt, MemoryType.SKILL, SKILL, who)
    # Sensitive data never enters procedural memory (the gate's redaction, same policy).
    name, description, task, steps = scrub(rt.gate, base.tenant_id, (name, description, task, steps))
    old = yield from _find_named(rt, base, viewer, SKILL, "skill_name", _name_key(name), own_only)
    version = _skill_version(old, name, steps, description, task, succeeded)
    return (yield from _save(rt, base, old, who, version))


def _skill_version(
    old: MemoryItem | None,
    name: str,
    steps: list[dict[str, Any]],
    description: str | None,
    task: str | None,
    succeeded: bool,
) -> _Version:
    """A skill's next version: one more run in its counts, the task among its examples."""
    data: dict[str, Any] = dict(old.structured or {}) if old else {}
    successes = (_count(data.get("successes")) or 0) + succeeded
    failures = (_count(data.get("failures")) or 0) + (not succeeded)
    if old is not None and not succeeded and isinstance(data.get("workflow"), list) and data["workflow"]:
        steps = data["workflow"]  # a failed run does not replace a workflow that worked
    tasks = [t for t in (_strings(data.get("tasks")) or ()) if task is None or _wording(t) != _wording(task)]
    if task:
        tasks.append(task)
    name = str(data.get("skill_name") or name)
    if description is None and isinstance(data.get("description"), str):
        description = data["description"]
    structured = {
        **data,
        "kind": SKILL,
        "skill_name": name,
        "workflow": steps,
        "successes": successes,
        "failures": failures,
        "tasks": tasks[-_TASK_EXAMPLES:],
    }
    if description:
        structured["description"] = description
    content = skill_content(name, steps, description, _is_zh(name, description, *tasks))
    outcome = "succeeded" if succeeded else "failed"
    return _Version(
        content,
        structured,
        importance=0.7,  # seed 002 §5.3
        reason=f"skill run {outcome} ({successes} succeeded, {failures} failed)",
        extra_terms=" ".join(tasks),
    )


def record_failure(
    rt: Runtime,
    /,
    pattern: str,
    *,
    indicators: Sequence[str],
    mitigation: str,
    severity: int,
    description: str | None = None,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    scope: Scope | str | None = None,
    tenant_id: str | None = None,
    source: Source | str = Source.AI,
    metadata: Mapping[str, Any] | None = None,
    actor: str | None = None,
    visibility: Visibility | str = Visibility.MEMBERS,
    viewer: Viewer | None = None,
    own_only: bool = False,
) -> Flow[MemoryItem]:
    """Record a failure pattern (seed 004 ``FailurePattern``): its name, the words in a
    task that announce it (``indicators``, Chinese or English), what to do instead
    and how bad it is (``severity`` 1..5).

    The same pattern again (same name, ignoring case, spaces, ``-`` and ``_``) raises
    ``occurrences`` and merges the indicators; the newest mitigation and severity win.
    """
    pattern = _text(pattern, "pattern", MAX_NAME)
    found = _text_list(indicators, "indicators", "words in a task that announce this failure", MAX_NAME)
    mitigation = _text(mitigation, "mitigation")
    severity = _severity(severity)
    description = _optional_text(description, "description")
    _check_indicators(found)
    who = _Caller(
        scope=scope,
        user_id=user_id,
        project_id=project_id,
        agent_id=agent_id,
        tenant_id=tenant_id,
        source=source,
        metadata=metadata,
        actor=actor,
        visibility=visibility,
        viewer=viewer,
    )
    base = _base_item(rt, MemoryType.PATTERN, FAILURE, who)
    pattern, mitigation, description, found = scrub(
        rt.gate, base.tenant_id, (pattern, mitigation, description, found)
    )
    old = yield from _find_named(rt, base, viewer, FAILURE, "pattern", _name_key(pattern), own_only)
    version = _failure_version(old, pattern, found, mitigation, severity, description)
    return (yield from _save(rt, base, old, who, version))


def _check_indicators(indicators: Sequence[str]) -> None:
    for i, indicator in enumerate(indicators):
        if not query_terms(indicator) and not _HAN.search(indicator):
            raise InvalidInput(
                f"indicator {indicator!r} has no words to look for in a task", field=f"indicators[{i}]"
            )


def _failure_version(
    old: MemoryItem | None,
    pattern: str,
    found: Sequence[str],
    mitigation: str,
    severity: int,
    description: str | None,
) -> _Version:
    """A failure pattern's next version: one more occurrence, the indicators merged."""
    data: dict[str, Any] = dict(old.structured or {}) if old else {}
    merged: dict[tuple[str, ...], str] = {}
    for indicator in [*(_strings(data.get("indicators")) or ()), *found]:
        merged.setdefault(_indicator_key(indicator), indicator)
    occurrences = (_count(data.get("occurrences")) or 0) + 1
    pattern = str(data.get("pattern") or pattern)
    if description is None and isinstance(data.get("description"), str):
        description = data["description"]
    structured = {
        **data,
        "kind": FAILURE,
        "pattern": pattern,
        "indicators": list(merged.values()),
        "mitigation": mitigation,
        "severity": severity,
        "occurrences": occurrences,
    }
    if description:
        structured["description"] = description
    zh = _is_zh(pattern, description, mitigation, *merged.values())
    return _Version(
        failure_content(pattern, list(merged.values()), mitigation, severity, description, zh),
        structured,
        # Severity 5 reaches the lifecycle's protection level (0.9): never archived.
        importance=0.5 + 0.1 * (severity - 1),
        reason=f"failure seen ({occurrences} time{'s' if occurrences != 1 else ''})",
    )


def record_decomposition(
    rt: Runtime,
    /,
    task: str,
    subtasks: Sequence[str],
    *,
    strategy: Strategy | str,
    succeeded: bool,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    scope: Scope | str | None = None,
    tenant_id: str | None = None,
    source: Source | str = Source.AI,
    metadata: Mapping[str, Any] | None = None,
    actor: str | None = None,
    visibility: Visibility | str = Visibility.MEMBERS,
    viewer: Viewer | None = None,
    own_only: bool = False,
) -> Flow[MemoryItem]:
    """Record how a task was split into subtasks and whether that worked (seed 004
    ``DecompositionMemory``); ``strategy`` is ``"parallel"`` or ``"sequential"``.

    The same plan (same strategy, near-identical subtasks) recorded for the same task
    - the same wording, or one similar at :data:`MIN_SIMILARITY`, as when an agent
    follows a :meth:`suggest` result - updates ``usage_count`` and ``success_rate`` of
    the stored item as a new version; the new wording is kept in ``variants``. A
    different plan for the task is a different decomposition and is kept next to
    it, with its own success rate; :meth:`suggest` picks the better one.
    """
    task = _text(task, "task")
    steps = _text_list(subtasks, "subtasks", "the parts the task was split into")
    plan_strategy = _strategy(strategy)
    succeeded = _flag(succeeded, "succeeded")
    who = _Caller(
        scope=scope,
        user_id=user_id,
        project_id=project_id,
        agent_id=agent_id,
        tenant_id=tenant_id,
        source=source,
        metadata=metadata,
        actor=actor,
        visibility=visibility,
        viewer=viewer,
    )
    base = _base_item(rt, MemoryType.PATTERN, DECOMPOSITION, who)
    task, steps = scrub(rt.gate, base.tenant_id, (task, steps))
    plan, cache_put = yield from _find_decomposition(
        rt, base, viewer, task, steps, plan_strategy, _flag(own_only, "own_only")
    )
    version = _decomposition_version(plan, task, steps, plan_strategy, succeeded)
    return (yield from _save(rt, base, plan.item if plan else None, who, version, cache_put=cache_put))


def _decomposition_version(
    plan: _Plan | None, task: str, steps: list[str], strategy: Strategy, succeeded: bool
) -> _Version:
    """A decomposition's next version (``plan``: the stored one with the same plan):
    one more use, and the task's wording among its variants."""
    old = plan.item if plan else None
    data: dict[str, Any] = dict(old.structured or {}) if old else {}
    uses = (plan.uses if plan else 0) + 1
    successes = (plan.successes if plan else 0) + succeeded
    query_pattern = plan.texts[0] if plan else task
    # Other wordings of the task are kept: a later task may resemble one of them more.
    variants = list(plan.texts[1:]) if plan else []
    if plan and all(_wording(task) != _wording(t) for t in plan.texts):
        variants.append(task)
    structured = {
        **data,
        "kind": DECOMPOSITION,
        "query_pattern": query_pattern,
        "subtasks": list(plan.subtasks) if plan else steps,
        "strategy": strategy,
        "success_rate": successes / uses,
        "usage_count": uses,
    }
    if variants:
        structured["variants"] = variants[-_VARIANTS:]
    content = decomposition_content(
        query_pattern,
        structured["subtasks"],
        strategy,
        _is_zh(query_pattern, *structured["subtasks"]),
    )
    outcome = "succeeded" if succeeded else "failed"
    return _Version(
        content,
        structured,
        importance=0.6,
        reason=f"decomposition used, {outcome} ({successes} of {uses} succeeded)",
    )


def suggest(
    rt: Runtime,
    /,
    task: str,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    min_similarity: float | None = None,
    min_success_rate: float = MIN_SUCCESS_RATE,
    touch: bool = True,
    viewer: Viewer | None = None,
) -> Flow[Suggestion]:
    """How to approach ``task``, from what worked and failed before (seed 004
    ``Suggest`` + ``CheckRisks``), across the given scopes.

    The suggestion is the stored decomposition or skill most similar to the task
    (cosine >= ``min_similarity``, default :data:`MIN_SIMILARITY`, given on the default
    embedder's scale and moved onto the configured one's; same wording counts as 1.0)
    whose success rate is at least ``min_success_rate``; ties go to the
    better-proven one. Its ``confidence`` is that success rate. With no such item
    the suggestion is empty (``kind`` None, confidence 0) and ``reason`` says what
    came closest. ``risks`` are the failure patterns whose indicators occur in the
    task, or whose description is as similar as ``min_similarity``, most severe first.
    The items used are marked as used (``touch=False`` writes nothing). ``viewer``
    hides project learnings it may not see (see :class:`~jiyi.store.base.Viewer`).
    """
    task = _text(task, "task")
    given = MIN_SIMILARITY if min_similarity is None else _rate(min_similarity, "min_similarity")
    # Given on the default embedder's scale, as every cosine setting; compared (and shown
    # in the reason) on the configured one's.
    floor = on_scale(given, rt.embedder.model_id)
    min_rate = _rate(min_success_rate, "min_success_rate")
    keys = _search_keys(user_id, project_id, agent_id)
    tenant = _who(rt, tenant_id, None, viewer)
    touch = _flag(touch, "touch")
    now = rt.now()
    qvec = yield from query_vector(rt, task)
    plans, failures = yield from _learnings(
        rt, task, qvec, Filter(tenant_id=tenant, scope_keys=keys, now=now, viewer=viewer)
    )
    cosine, cache_put = yield from _cosines(rt, qvec, plans, failures)
    best_text = _closeness(task, cosine)
    zh = _is_zh(task)
    chosen, closest = _choose(plans, best_text, floor, min_rate)
    risks = _risks(task, failures, best_text, floor, zh)
    used = [r.item_id for r in risks]
    if chosen is None:
        result = Suggestion(task, None, 0.0, _nothing_reason(closest, floor, min_rate, zh), risks=risks)
    else:
        used.append(chosen[2].item.id)
        result = _suggestion(task, chosen, risks, zh)
    if touch and (used or cache_put):
        yield from _mark_used(tenant, used, cache_put, now)
    return result


def _learnings(
    rt: Runtime, task: str, qvec: np.ndarray, where: Filter
) -> Flow[tuple[list[_Plan], list[_Failure]]]:
    """The decompositions and skills most like the task, and every failure pattern, in
    the scopes ``where`` names."""
    found = yield from call(
        Retrieve(
            replace(where, memory_types=(MemoryType.SKILL, MemoryType.PATTERN)),
            rt.embedder.model_id,
            qvec,
            query_terms(task),
            _POOL,
            _POOL,
        )
    )
    plans = [p for p in (_read_plan(c.item) for c in found) if p is not None]
    stored = yield from all_items(rt, replace(where, memory_types=(MemoryType.PATTERN,), tags=(FAILURE,)))
    return plans, [f for f in (_read_failure(i) for i in stored) if f is not None]


def _cosines(
    rt: Runtime, qvec: np.ndarray, plans: Sequence[_Plan], failures: Sequence[_Failure]
) -> Flow[tuple[dict[str, float], CachePut | None]]:
    """The cosine of each learning's texts with the task, and the vectors to cache."""
    texts = list(
        dict.fromkeys([*(t for p in plans for t in p.texts), *(t for f in failures for t in f.texts)])
    )
    cosine: dict[str, float] = {}
    cache_put: CachePut | None = None
    if texts:
        vectors, cache_put = yield from embed_documents(rt, texts)
        q = np.asarray(qvec, dtype=np.float32)
        cosine = {t: float(vectors[i] @ q) for i, t in enumerate(texts)}
    return cosine, cache_put


def _closeness(task: str, cosine: Mapping[str, float]) -> Callable[[Sequence[str]], tuple[float, str]]:
    """The most similar of some texts to the task, and its similarity (same wording: 1.0)."""
    words = _wording(task)

    def best_text(candidates: Sequence[str]) -> tuple[float, str]:
        scored = [(1.0 if _wording(t) == words else cosine[t], t) for t in candidates]
        return max(scored, key=lambda s: s[0])

    return best_text


def _choose(
    plans: Sequence[_Plan],
    best_text: Callable[[Sequence[str]], tuple[float, str]],
    floor: float,
    min_rate: float,
) -> tuple[tuple[float, float, _Plan, str] | None, tuple[float, _Plan, str] | None]:
    """The plan to suggest as (rank, similarity, plan, matched text), if one is similar
    and successful enough, and the most similar plan (for the reason when none is)."""
    chosen: tuple[float, float, _Plan, str] | None = None
    closest: tuple[float, _Plan, str] | None = None
    for plan in plans:
        sim, text = best_text(plan.texts)
        if closest is None or sim > closest[0]:
            closest = (sim, plan, text)
        if sim < floor or plan.rate < min_rate:
            continue
        # Laplace-smoothed rate: 9 of 10 beats 1 of 1 at equal similarity.
        rank = sim * (plan.successes + 1) / (plan.uses + 2)
        if chosen is None or (rank, sim) > (chosen[0], chosen[1]):
            chosen = (rank, sim, plan, text)
    return chosen, closest


def _suggestion(
    task: str, chosen: tuple[float, float, _Plan, str], risks: tuple[Risk, ...], zh: bool
) -> Suggestion:
    _, sim, plan, text = chosen
    return Suggestion(
        task,
        plan.kind,
        plan.rate,
        _found_reason(plan, text, sim, zh),
        item_id=plan.item.id,
        matched=text,
        similarity=sim,
        subtasks=plan.subtasks,
        strategy=plan.strategy,
        skill_name=plan.skill_name,
        workflow=plan.workflow,
        success_rate=plan.rate,
        usage_count=plan.uses,
        risks=risks,
    )


def _mark_used(tenant: str, used: Sequence[str], cache_put: CachePut | None, now: datetime) -> Flow[None]:
    """Mark the learnings a suggestion used, and cache the vectors it computed."""
    changes: list[Any] = [cache_put] if cache_put else []
    if used:
        changes.append(Touch(tenant, tuple(dict.fromkeys(used)), now))
    with contextlib.suppress(StoreReadOnly):  # advice from a read-only store is still advice
        yield from call(Write(tuple(changes)))


# ---------------------------------------------------------------- steps of the flows


def _base_item(rt: Runtime, memory_type: MemoryType, kind: str, who: _Caller) -> MemoryItem:
    """A placeholder item that validates the scope, tenant and caller and carries them to
    the lookups, with the creator :func:`_save` will record: the lookups of an
    ``owner_only`` learning must find that creator's earlier version."""
    now = rt.now()
    base = MemoryItem.build(
        content=kind,
        memory_type=memory_type,
        scope=_owner(who.scope, who.user_id, who.project_id, who.agent_id),
        tenant_id=_who(rt, who.tenant_id, who.actor, who.viewer),
        user_id=who.user_id,
        project_id=who.project_id,
        agent_id=who.agent_id,
        visibility=who.visibility,
        tags=(PROCEDURAL_TAG, kind),
        created_at=now,
        updated_at=now,
    )
    metadata, viewer = who.metadata, who.viewer
    given = metadata.get("created_by") if isinstance(metadata, Mapping) else None
    creator = given if isinstance(given, str) else viewer.actor if viewer is not None else None
    return base if creator is None else base.evolve(metadata={"created_by": creator})


def _same_owner(base: MemoryItem, item: MemoryItem) -> bool:
    """For an ``owner_only`` project learning: ``item`` has the same creator (also when
    neither has one, as in library use without a viewer)."""
    if base.scope is not Scope.PROJECT or base.visibility is not Visibility.OWNER_ONLY:
        return True
    return creator_of(item) == creator_of(base)


def _same_space(base: MemoryItem, viewer: Viewer | None, kind: str) -> Filter:
    """Where a learning recorded again is looked for: its scope and, for project
    learnings, its audience; never among items the viewer may not see."""
    flt = Filter(
        tenant_id=base.tenant_id,
        scope_keys=(base.scope_key,),
        memory_types=(base.memory_type,),
        # An archived learning recorded again comes back, with its counts.
        statuses=(Status.ACTIVE, Status.ARCHIVED),
        tags=(kind,),
        now=base.created_at,
        viewer=viewer,
    )
    if base.scope is Scope.PROJECT and base.visibility is Visibility.OWNER_ONLY and creator_of(base) is None:
        # No creator to match by viewer: the caller keeps those without one (_same_owner).
        return replace(flt, visibilities=(Visibility.OWNER_ONLY,))
    return same_audience(flt, base)


def _prefer(items: Sequence[MemoryItem]) -> MemoryItem | None:
    if not items:
        return None
    return max(items, key=lambda i: (i.status == Status.ACTIVE, i.updated_at))


def _find_named(
    rt: Runtime,
    base: MemoryItem,
    viewer: Viewer | None,
    kind: str,
    key_field: str,
    key: str,
    own_only: object = False,
) -> Flow[MemoryItem | None]:
    own = _flag(own_only, "own_only")
    items = yield from all_items(rt, _same_space(base, viewer, kind))
    same = [
        i
        for i in items
        if isinstance(i.structured, dict)
        and _same_owner(base, i)
        and (not own or creator_of(i) == creator_of(base))
        and i.structured.get("kind") == kind
        and isinstance(i.structured.get(key_field), str)
        and _name_key(i.structured[key_field]) == key
    ]
    return _prefer(same)


def _find_decomposition(
    rt: Runtime,
    base: MemoryItem,
    viewer: Viewer | None,
    task: str,
    subtasks: Sequence[str],
    strategy: Strategy,
    own_only: bool = False,
) -> Flow[tuple[_Plan | None, CachePut | None]]:
    """The stored decomposition with the same plan (same strategy, near-identical
    subtasks) for the same task (same wording, or similar at :data:`MIN_SIMILARITY`
    with the same numbers). The usual case is an agent recording a plan that
    :meth:`~ProceduralFlows.suggest` gave it, for a task worded its own way."""
    qvec = yield from query_vector(rt, task)
    found = yield from call(
        Retrieve(
            _same_space(base, viewer, DECOMPOSITION), rt.embedder.model_id, qvec, query_terms(task), 20, 20
        )
    )
    plans = [
        p
        for p in (_read_plan(c.item) for c in found)
        if p is not None
        and _same_owner(base, p.item)
        and (not own_only or creator_of(p.item) == creator_of(base))
        and p.kind == "decomposition"
        and p.strategy == strategy
        and len(p.subtasks) == len(subtasks)
    ]
    if not plans:
        return None, None
    joined = "; ".join(subtasks)
    texts = list(
        dict.fromkeys([task, joined, *(t for p in plans for t in (*p.texts, "; ".join(p.subtasks)))])
    )
    vectors, cache_put = yield from embed_documents(rt, texts)
    vec = {t: vectors[i] for i, t in enumerate(texts)}
    task_bar, plan_bar = (on_scale(b, rt.embedder.model_id) for b in (MIN_SIMILARITY, NEAR_IDENTICAL))

    def same_task(other: str) -> bool:
        if _wording(task) == _wording(other):
            return True
        return float(vec[task] @ vec[other]) >= task_bar and _numbers(task) == _numbers(other)

    def same_plan(other: str) -> bool:
        return _near_identical(joined, other, float(vec[joined] @ vec[other]), plan_bar)

    matches = [p for p in plans if any(map(same_task, p.texts)) and same_plan("; ".join(p.subtasks))]
    best = _prefer([p.item for p in matches])
    return next((p for p in matches if p.item is best), None), cache_put


def _save(
    rt: Runtime,
    base: MemoryItem,
    old: MemoryItem | None,
    who: _Caller,
    version: _Version,
    *,
    cache_put: CachePut | None = None,
) -> Flow[MemoryItem]:
    """Add the learning, or write it as the next version of ``old``: one transaction."""
    metadata, viewer = who.metadata, who.viewer
    content, structured, importance = version.content, version.structured, version.importance
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be an object", field="metadata")
    now = base.created_at
    if old is None:
        meta = dict(metadata or {})
        if viewer is not None and viewer.actor is not None:
            meta = {"created_by": viewer.actor, **meta}  # as add() does: owner_only needs it
        new = base.evolve(
            content=content,
            structured=structured,
            importance=importance,
            source=who.source,
            metadata=meta,
        )
        action = HistoryAction.ADD
    else:
        new = old.evolve(
            content=content,
            structured=structured,
            importance=importance,
            status=Status.ACTIVE,
            mention_count=old.mention_count + 1,
            # What the item already says wins: e.g. who created it.
            metadata={**dict(metadata or {}), **old.metadata},
            tags=tuple(dict.fromkeys((*old.tags, *base.tags))),
            version=old.version + 1,
            updated_at=now,
        )
        action = HistoryAction.RESTORE if old.status != Status.ACTIVE else HistoryAction.UPDATE
    new = scrub_item(rt.gate, new)  # the caller's metadata, and what an older version kept
    changes: list[Any] = [cache_put] if cache_put else []
    vector = None
    if old is None or new.content != old.content:
        vectors, put = yield from embed_memories(rt, [new.content])
        vector = vectors[0]
        if put:
            changes.append(put)
    changes.append(
        Upsert(
            new,
            index_text(f"{new.content} {version.extra_terms}"),
            change_event(rt, action, old, new, version.reason, who.actor),
            vector=vector,
            model_id=rt.embedder.model_id if vector is not None else None,
        )
    )
    yield from call(Write(tuple(changes)))
    return new


def _risks(
    task: str,
    failures: Sequence[_Failure],
    best_text: Callable[[Sequence[str]], tuple[float, str]],
    floor: float,
    zh: bool,
) -> tuple[Risk, ...]:
    terms = frozenset(query_terms(task))
    squashed = _SPACE.sub("", normalise(task))
    out: list[Risk] = []
    for f in failures:
        hits = tuple(i for i in f.indicators if _indicator_hit(i, terms, squashed))
        sim, _ = best_text(f.texts)
        if not hits and sim < floor:
            continue
        if hits:
            said = ("、" if zh else ", ").join(_quote(h, zh) for h in hits)
            why = f"任务中出现{said}" if zh else f"the task mentions {said}"
        else:
            why = (
                f"任务与此失败模式相似（相似度 {sim:.2f}）"
                if zh
                else f"the task resembles this failure (similarity {sim:.2f})"
            )
        out.append(Risk(f.pattern, f.mitigation, f.severity, f.item.id, hits, sim, f.occurrences, why))
    out.sort(key=lambda r: (-r.severity, -len(r.matched_indicators), -r.similarity, -r.occurrences))
    return tuple(out)


def _found_reason(plan: _Plan, text: str, sim: float, zh: bool) -> str:
    runs = _runs(plan.successes, plan.uses, zh)
    if plan.kind == "decomposition":
        if zh:
            return f"参考相似的成功任务{_quote(text, True)}（相似度 {sim:.2f}；{runs}）"
        return f"Based on a similar successful task {_quote(text, False)} (similarity {sim:.2f}; {runs})"
    name = plan.skill_name or ""
    if zh:
        return f"技能 {name} 适用于相似的任务{_quote(text, True)}（相似度 {sim:.2f}；{runs}）"
    return f"Skill {name} fits a similar task {_quote(text, False)} (similarity {sim:.2f}; {runs})"


def _nothing_reason(closest: tuple[float, _Plan, str] | None, floor: float, min_rate: float, zh: bool) -> str:
    if closest is None:
        return "记忆中没有可参考的任务分解或技能" if zh else "No decomposition or skill in memory to go by"
    sim, plan, text = closest
    if sim < floor:
        if zh:
            return f"没有足够相似的成功经验：最接近的是{_quote(text, True)}（相似度 {sim:.2f} < {floor:.2f}）"
        return f"Nothing similar enough: the closest is {_quote(text, False)} (similarity {sim:.2f} < {floor:.2f})"
    runs = _runs(plan.successes, plan.uses, zh)
    if zh:
        return f"相似的{_quote(text, True)}成功率太低（{runs}，低于 {min_rate:.0%}）"
    return f"{_quote(text, False)} is similar but did not succeed often enough ({runs}; below {min_rate:.0%})"
