"""Memory tools for function-calling agents: schemas and a dispatcher.

:data:`TOOLS` describes the seed's four tools (``memory_save``, ``memory_search``,
``memory_delete``, ``memory_stats``) plus ``memory_context`` in the OpenAI-compatible
function-calling shape (``{"type": "function", "function": {name, description,
parameters}}``); :data:`PROFILE_TOOL` (``memory_profile``, read-only) is added with
``profile_tool=True``; :data:`PROCEDURAL_TOOLS`, :data:`DOCUMENT_TOOLS`,
:data:`LIFECYCLE_TOOLS` (``memory_compress``, ``memory_uncompress``: the library's
``compress``/``uncompress`` over the bound scopes) and :data:`SESSION_TOOL` follow the
binding. :class:`MemoryTools` runs the calls a model makes::

    tools = MemoryTools(memory, user_id="alice", session_id="s1")
    client.chat.completions.create(..., tools=tools.schemas())
    for tc in message.tool_calls:
        result = tools.call(tc.function.name, tc.function.arguments)
        messages.append({"role": "tool", "tool_call_id": tc.id,
                         "content": json.dumps(result, ensure_ascii=False)})

Whose memory it is (tenant, user, project, session, agent) is bound when the
dispatcher is made, from the runtime configuration, never taken from the model.
``call`` never raises into the agent loop: unknown tools, bad JSON, arguments that do
not fit the schema and library errors come back as ``{"error": {"code", "message", "field", "problems"}}``
for the model to read. :class:`AsyncMemoryTools` is the same over
:class:`~jiyi.memory.AsyncMemory`: every tool is a :mod:`jiyi.effects` flow, run by the
library's sync or async driver, so the logic exists once.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from jiyi import items, procedural
from jiyi import profile as profile_flows
from jiyi.driver import arun, run
from jiyi.effects import Flow
from jiyi.errors import (
    InvalidInput,
    NotFound,
    error_code,
)
from jiyi.integrations import mem0_tools
from jiyi.lifecycle import compress as compress_flows
from jiyi.memory import AsyncMemory, Memory
from jiyi.model import MemoryItem, MemoryType, Scope, Source, Status, scope_key
from jiyi.problems import empty, not_one_of, too_large, too_long, too_small, type_name
from jiyi.read import context as context_flows
from jiyi.read import search as search_flows
from jiyi.read.context import Context
from jiyi.read.rank import DEFAULT_MIN_RELEVANCE
from jiyi.runtime import Runtime
from jiyi.session import flows as session_flows
from jiyi.session.chunking import MAX_DOCUMENT_CHARS
from jiyi.who import Caller, Owner
from jiyi.write import pipeline
from jiyi.write.gate import DONE

log = logging.getLogger("jiyi.tools")

MEMORY_TYPES: Final = tuple(t.value for t in MemoryType)
SCOPES: Final = tuple(s.value for s in Scope)
MAX_K: Final = 50
LEARNING_KINDS: Final = ("skill", "failure", "decomposition")
SEARCH_DEFAULT_LIMIT: Final = 5

_TYPE_HELP = (
    "Kind of memory: preference (likes, style: 'prefers dark mode'), fact (who the user is: "
    "'is a front-end engineer'), skill ('knows TypeScript well'), habit ('uses VS Code'), "
    "event ('shipped project A'), context (current project situation), constraint "
    "('must support PostgreSQL 16'), decision ('chose Next.js over Remix'), pattern."
)
_SCOPE_HELP = (
    "Whose memory: 'user' follows the user everywhere, 'project' is shared by the current "
    "project, 'session' lasts for this conversation, 'agent' belongs to this agent."
)


def _type_filter() -> dict[str, Any]:
    """The type filter's two spellings (fresh dicts for each tool's schema): ``memory_types``,
    the library's and REST's name, and ``memory_type`` for one kind (see _memory_types)."""
    return {
        "memory_types": {
            "type": "array",
            "items": {"type": "string", "enum": list(MEMORY_TYPES)},
            "description": "Only memories of these kinds (default: every kind). " + _TYPE_HELP,
        },
        "memory_type": {
            "type": "string",
            "enum": list(MEMORY_TYPES),
            "description": "One kind: the same as memory_types with one entry.",
        },
    }


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOLS: Final[list[dict[str, Any]]] = [
    _function(
        "memory_save",
        "Save one durable piece of information about the user or the project to long-term memory. "
        "Call it when the user asks you to remember something (「记住…」, 「帮我记住…」, 'remember that "
        "...') or tells you who they are or what they prefer (「我是…」, 「我喜欢…」, 'I am ...', 'I prefer "
        "...'). Write one self-contained statement in the user's own language. The write gate may "
        "refuse it (too short, small talk, low confidence) or merge it with an existing memory; "
        "personal data such as phone numbers is redacted. Returns status stored, reinforced or "
        "refused, with the reasons.",
        {
            "content": {
                "type": "string",
                "minLength": 1,
                "description": "The memory, as one self-contained statement, e.g. '用户是一名前端工程师'.",
            },
            "memory_type": {
                "type": "string",
                "enum": list(MEMORY_TYPES),
                "default": MemoryType.FACT.value,
                "description": _TYPE_HELP,
            },
            "scope": {
                "type": "string",
                "enum": list(SCOPES),
                "description": _SCOPE_HELP + " Default: the user when known.",
            },
        },
        ["content"],
    ),
    _function(
        "memory_search",
        "Recall what is known about the user or the project. Searches long-term memory by meaning "
        "and by keywords, in Chinese and English (a query in one language finds memories written in "
        "the other). Use it before answering anything that depends on the user's background, "
        "preferences or earlier decisions (「我之前说过…」, 「你还记得…吗」, 'what did we decide "
        "about ...'). Returns the best matches with id, content, memory_type and score.",
        {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "What to look for, in natural language.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_K,
                "description": "How many memories to return at most (default 5).",
            },
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_K,
                "description": "Another name for limit, kept for clients that say k.",
            },
            **_type_filter(),
            "scope": {
                "type": "string",
                "enum": list(SCOPES),
                "description": "Only this scope (default: every scope of this conversation). " + _SCOPE_HELP,
            },
            "min_relevance": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Leave out matches less likely than this to answer the query "
                f"(default {DEFAULT_MIN_RELEVANCE}; 0 returns every match).",
            },
        },
        ["query"],
    ),
    _function(
        "memory_delete",
        "Delete a memory that is outdated or wrong, or that the user asks you to forget (「忘掉…」, "
        "「删除这条记忆」, 'forget that ...'). Take the memory_id from memory_search. The memory is "
        "archived (recoverable) unless hard is true.",
        {
            "memory_id": {
                "type": "string",
                "minLength": 1,
                "description": "The id of the memory, as returned by memory_search.",
            },
            "hard": {
                "type": "boolean",
                "default": False,
                "description": "Purge it for good instead of archiving it. Only when the user insists.",
            },
            "with_sources": {
                "type": "boolean",
                "default": False,
                "description": "Also the conversation turn it was taken from and the session summaries "
                "quoting it, so its words answer no search again: when the user asks you to forget it.",
            },
        },
        ["memory_id"],
    ),
    _function(
        "memory_stats",
        "Count the memories kept about this user or project, by type, scope and status "
        "(「你记住了我多少信息」, 'how much do you remember about me?').",
        {},
        [],
    ),
    _function(
        "memory_context",
        "Load background for a task: the memories related to a topic grouped by type, summaries of "
        "past sessions and the recent turns of this conversation, as one prompt-ready text that "
        "fits a token budget. Use it at the start of a task or when the topic changes.",
        {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "The task or topic to gather background for.",
            },
            "budget_tokens": {
                "type": "integer",
                "minimum": 50,
                "maximum": 8000,
                "default": 1500,
                "description": "Largest size of the text, in tokens.",
            },
            "max_items": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_K,
                "default": 10,
                "description": "Most entries to include.",
            },
        },
        ["query"],
    ),
]

TOOL_NAMES: Final = tuple(t["function"]["name"] for t in TOOLS)

PROFILE_TOOL: Final[dict[str, Any]] = _function(
    "memory_profile",
    "Read the profile of the user and/or the current project: for the user their name, profession, "
    "preferred language and answer style and format, custom instructions, expertise, programming "
    "languages and tools; for a project its goal, tech stack, constraints, key decisions (with "
    "reasons), team conventions and current phase. Each field says whether it was set explicitly or "
    "gathered from memories. Use it when the user asks what you know about them (「你了解我什么」, "
    "'what do you know about me?') or before adapting your answers to them. Read-only.",
    {
        "scope": {
            "type": "string",
            "enum": ["user", "project"],
            "description": "Only this profile (default: the user's and the project's, as available).",
        },
    },
    [],
)
"""Offered when a dispatcher is made with ``profile_tool=True`` (the MCP server does)."""


_SCOPE_LEARN_HELP = (
    "Whose learning it is: 'user', 'project' or 'agent' (default: the user when known, else the "
    "project, else the agent)."
)
_TEXT_LIST: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 200}
_STEP: Final[dict[str, Any]] = {
    "anyOf": [
        {"type": "string", "minLength": 1, "maxLength": 200},
        {
            "type": "object",
            "properties": {"tool": {"type": "string", "minLength": 1, "maxLength": 200}},
            "required": ["tool"],
        },
    ]
}

PROCEDURAL_TOOLS: Final[list[dict[str, Any]]] = [
    _function(
        "memory_suggest",
        "Before starting a multi-step task, ask how it went before: returns the plan (subtasks, or a "
        "skill's tool-call workflow) that worked for the most similar earlier task, with its success "
        "rate as confidence, and the known failure patterns (risks) the task announces, most severe "
        "first, each with its mitigation. found is false when nothing similar enough succeeded; the "
        "reason then says what came closest (「这个任务以前怎么做的」, 'how did we do this before?').",
        {
            "task": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "The task about to be done, in natural language.",
            },
            "min_similarity": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "How similar an earlier task must be (0..1; default calibrated, 0.74).",
            },
            "min_success_rate": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 0.9,
                "description": "The least success rate a plan needs to be suggested.",
            },
        },
        ["task"],
    ),
    _function(
        "memory_learn",
        "Record what was learned from doing a task, so memory_suggest can reuse it. kind says what: "
        "'skill' - one run of a named tool-call workflow (name, workflow; optional description, task, "
        "succeeded, default true); 'failure' - a failure pattern (pattern, indicators: words in a task "
        "that announce it, mitigation, severity 1..5; optional description); 'decomposition' - how a "
        "task was split into subtasks and whether it worked (task, subtasks, strategy, succeeded). "
        "Recording the same skill, pattern or plan again updates its counts.",
        {
            "kind": {
                "type": "string",
                "enum": list(LEARNING_KINDS),
                "description": "skill, failure or decomposition; decides which other arguments apply.",
            },
            "name": {"type": "string", "minLength": 1, "maxLength": 200, "description": "skill: its name."},
            "workflow": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": _STEP,
                "description": "skill: the steps in order, tool names or objects with a 'tool' key.",
            },
            "description": {
                "type": "string",
                "maxLength": 1000,
                "description": "skill or failure: what it is, in a sentence.",
            },
            "task": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "decomposition: the task that was split; skill: the task it was used for.",
            },
            "succeeded": {
                "type": "boolean",
                "description": "skill (default true) or decomposition (required): whether it worked.",
            },
            "pattern": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "failure: the pattern's name, e.g. 'migration without backup'.",
            },
            "indicators": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": _TEXT_LIST,
                "description": "failure: words in a task that announce it (Chinese or English).",
            },
            "mitigation": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "failure: what to do instead.",
            },
            "severity": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5,
                "description": "failure: 1 (minor) to 5 (critical).",
            },
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": {"type": "string", "minLength": 1, "maxLength": 1000},
                "description": "decomposition: the parts the task was split into, in order.",
            },
            "strategy": {
                "type": "string",
                "enum": ["sequential", "parallel"],
                "description": "decomposition: whether the subtasks ran one after another or at once.",
            },
            "scope": {
                "type": "string",
                "enum": ["user", "project", "agent"],
                "description": _SCOPE_LEARN_HELP,
            },
        },
        ["kind"],
    ),
]
"""Offered when a user, project or agent is bound (learnings belong to one of them)."""

DOCUMENT_TOOLS: Final[list[dict[str, Any]]] = [
    _function(
        "memory_add_document",
        "Keep a whole document (notes, a spec, a README, meeting minutes) in long-term memory: it is "
        "split into overlapping chunks that memory_search and memory_context then find. Use it when "
        "the user hands you a text to keep (「把这份文档记下来」, 'keep this document'). Returns the "
        "document's parent_id (for memory_get_document) and its chunks. Tiny or low-value text is "
        "refused with the reason.",
        {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_DOCUMENT_CHARS,
                "description": "The document's full text.",
            },
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Its title."},
        },
        ["text"],
    ),
    _function(
        "memory_get_document",
        "Read a stored document again, whole, re-assembled from its chunks (take parent_id from "
        "memory_add_document or from a search hit's parent_id).",
        {
            "parent_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The document's id, as memory_add_document returned it.",
            },
        },
        ["parent_id"],
    ),
]

SESSION_TOOL: Final[dict[str, Any]] = _function(
    "memory_end_session",
    "End this conversation when the user is done (「今天就到这里」, 'that's all for today'): its "
    "session memories are archived and a summary of its remaining turns is queued as an episode "
    "that later conversations can recall. Returns the id of the queued job (null when no turn was "
    "left to summarise); ending it again is harmless: already_ended is true and nothing is queued.",
    {},
    [],
)
"""Offered when a session is bound (there is a session to end)."""

LIFECYCLE_TOOLS: Final[list[dict[str, Any]]] = [
    _function(
        "memory_compress",
        "Keep memory small: merge old, rarely used memories of this conversation's scopes into a few "
        "core memories (near-duplicates become one; clusters of 3+ related memories of one type become "
        "1-3 core memories). The originals are archived and linked, and memory_uncompress reverses it. "
        "Use it when the user asks to tidy up or condense what you remember (「整理一下记忆」, 'clean up "
        "your memory'); try dry_run first to see the proposed groups. Returns what was (or would be) "
        "compressed, group by group.",
        {
            "older_than_days": {
                "type": "number",
                "minimum": 0,
                "maximum": compress_flows.MAX_IDLE_DAYS,
                "default": 30.0,
                "description": "Only memories idle for at least this many days (default 30).",
            },
            "max_access": {
                "type": "integer",
                "minimum": 0,
                "maximum": 1000000,
                "default": 4,
                "description": "Only memories retrieved at most this many times (default 4).",
            },
            **_type_filter(),
            "dry_run": {
                "type": "boolean",
                "default": False,
                "description": "Only report the groups and the proposed core memories; change nothing.",
            },
        },
        [],
    ),
    _function(
        "memory_uncompress",
        "Undo one compression: the memories merged into a core memory are restored and every core "
        "memory of that compression is archived. Take core_id from memory_compress's result (or a "
        "search hit that is a core memory).",
        {
            "core_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The id of a core memory made by memory_compress.",
            },
        },
        ["core_id"],
    ),
]
"""Offered always: compress and undo it, over the bound scopes only."""


# ---------------------------------------------------------------- argument checking


class ToolCallError(Exception):
    """A call the model can fix: ``code`` says what kind, ``message`` says how."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, problems: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.problems = tuple(problems) or (message,)

    def to_json_dict(self) -> dict[str, Any]:
        """The REST service's error shape: code, message, field (or None), every problem."""
        error = {
            "code": self.code,
            "message": self.message,
            "field": self.field,
            "problems": list(self.problems),
        }
        return {"error": error}


def error_result(
    code: str, message: str, *, field: str | None = None, problems: Sequence[str] = ()
) -> dict[str, Any]:
    """The result shape of a failed call: ``{"error": {"code", "message", "field", "problems"}}``."""
    return ToolCallError(code, message, field=field, problems=problems).to_json_dict()


def _invalid(problems: Sequence[tuple[str, str]]) -> ToolCallError:
    """Every problem with the arguments at once, the first one's argument as the field."""
    return ToolCallError(
        "invalid_input",
        "; ".join(p for _, p in problems),
        field=problems[0][0],
        problems=[p for _, p in problems],
    )


def _is_integer(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer()
    )


_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
}


_ARTICLE = {"string": "a", "integer": "an", "number": "a", "boolean": "a", "array": "an", "object": "an"}


def parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments as a dict: a JSON object string (as models send it) or a mapping."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolCallError(
                "invalid_json", f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
            ) from None
    else:
        decoded = arguments
    if not isinstance(decoded, Mapping):
        raise ToolCallError("invalid_input", f"arguments must be a JSON object, not {type_name(decoded)}")
    return dict(decoded)


def validate_arguments(parameters: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``arguments`` against a tool's ``parameters`` schema and fill in defaults.

    Handles the subset of JSON Schema the tools use (an object of scalar properties with
    ``type``, ``enum``, ``minimum``/``maximum``, ``minLength``/``maxLength``, ``required``
    and ``additionalProperties: false``); the tests check it agrees with ``jsonschema``.
    Every problem is reported at once (the model fixes them in one retry); ``field``
    names the first.
    """
    properties: Mapping[str, Any] = parameters.get("properties", {})
    problems: list[tuple[str, str]] = []
    if parameters.get("additionalProperties") is False:
        allowed = ", ".join(properties) or "none"
        problems += [
            (name, f"unexpected argument {name!r}; this tool takes: {allowed}")
            for name in sorted(set(arguments) - set(properties))
        ]
    problems += [
        (name, f"missing required argument {name!r}")
        for name in parameters.get("required", [])
        if name not in arguments
    ]
    out: dict[str, Any] = {}
    for name, schema in properties.items():
        if name not in arguments:
            if "default" in schema:
                out[name] = copy.deepcopy(schema["default"])
            continue
        value, problem = _checked(name, schema, arguments[name])
        if problem:
            problems.append((name, problem))
        out[name] = value
    if problems:
        raise _invalid(problems)
    return out


def _checked(name: str, schema: Mapping[str, Any], value: Any) -> tuple[Any, str | None]:
    """``value`` (an integral float as an int) and what is wrong with it, if anything."""
    if "anyOf" in schema:
        return _any_of(name, schema["anyOf"], value)
    kind = schema.get("type")
    if kind is not None and not _TYPE_CHECKS[kind](value):
        return value, f"{name} must be {_ARTICLE[kind]} {kind}, not {type_name(value)}"
    if kind == "integer":
        value = int(value)
    if kind == "array":
        return _checked_array(name, schema, value)
    if kind == "object":
        return _checked_object(name, schema, value)
    if "enum" in schema and value not in schema["enum"]:
        return value, not_one_of(name, schema["enum"], value)
    if "minimum" in schema and value < schema["minimum"]:
        return value, too_small(name, schema["minimum"], value)
    if "maximum" in schema and value > schema["maximum"]:
        return value, too_large(name, schema["maximum"], value)
    if "minLength" in schema and len(value) < schema["minLength"]:
        return value, empty(name)
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return value, too_long(name, schema["maxLength"])
    return value, None


def _any_of(name: str, choices: list[Mapping[str, Any]], value: Any) -> tuple[Any, str | None]:
    """The first choice ``value`` fits, else the first choice's problem (whose type it has)."""
    problems: list[str] = []
    for choice in choices:
        checked, problem = _checked(name, choice, value)
        if problem is None:
            return checked, None
        problems.append(problem)
    fitting = [
        p for c, p in zip(choices, problems, strict=True) if _TYPE_CHECKS[c.get("type", "object")](value)
    ]
    if fitting:
        return value, fitting[0]
    kinds = " or ".join(f"{_ARTICLE[c['type']]} {c['type']}" for c in choices if "type" in c)
    return value, f"{name} must be {kinds}, not {type_name(value)}"


def _checked_array(name: str, schema: Mapping[str, Any], value: list[Any]) -> tuple[Any, str | None]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        return value, f"{name} must have at least {schema['minItems']} item(s)"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return value, f"{name} must have at most {schema['maxItems']} items"
    items: Mapping[str, Any] = schema.get("items", {})
    checked = [_checked(f"{name}[{i}]", items, entry) for i, entry in enumerate(value)]
    problems = [problem for _, problem in checked if problem]
    if problems:  # every bad item, as jsonschema lists them, so one retry can fix all
        return value, "; ".join(problems)
    return [entry for entry, _ in checked], None


def _checked_object(name: str, schema: Mapping[str, Any], value: Mapping[str, Any]) -> tuple[Any, str | None]:
    problems = [f"{name} needs {key!r}" for key in schema.get("required", []) if key not in value]
    out = dict(value)
    for key, sub in schema.get("properties", {}).items():
        if key in value:
            out[key], problem = _checked(f"{name}.{key}", sub, value[key])
            if problem:
                problems.append(problem)
    if problems:
        return value, "; ".join(problems)
    return out, None


def _failure(name: str, exc: Exception) -> dict[str, Any]:
    """An error as a result the model can read (codes as in the REST service's errors)."""
    if isinstance(exc, ToolCallError):
        return exc.to_json_dict()
    code = error_code(exc)
    if code == "not_found":
        return error_result(code, str(exc), field=_ID_FIELDS.get(name, "memory_id"))
    if isinstance(exc, InvalidInput):
        return error_result(code, str(exc), field=exc.field, problems=exc.problems)
    if code == "store_read_only":
        return error_result(code, f"memory is read-only here: {exc}")
    if code in ("store_error", "upstream_error"):
        log.warning("%s failed: %s", name, exc)
        return error_result(code, f"{name} failed: {exc}")
    if code == "config_error":
        return error_result(code, f"{name} is not available: {exc}")
    log.exception("%s raised an unexpected error", name)
    return error_result("internal_error", f"{name} failed unexpectedly ({type(exc).__name__}); it was logged")


# The argument an unknown id came from, for tools whose id is not a memory_id.
_ID_FIELDS: Final = {"memory_get_document": "parent_id", "memory_uncompress": "core_id"}


# ---------------------------------------------------------------- results


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _item_brief(item: MemoryItem) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": item.id,
        "content": item.content,
        "memory_type": item.memory_type.value,
        "scope": item.scope.value,
        "confidence": _round(item.confidence),
        "created_at": item.created_at.isoformat(),
    }
    if item.occurred_at is not None:
        data["occurred_at"] = item.occurred_at.isoformat()
    if item.status != Status.ACTIVE:
        data["status"] = item.status.value
    parent = item.metadata.get("parent_id")
    if isinstance(parent, str):  # a chunk of a document: memory_get_document reads it whole
        data["parent_id"] = parent
    return data


# ---------------------------------------------------------------- the dispatcher


class _ToolsBase:
    """Everything but running a flow: binding, schemas, validation and the tool flows."""

    def __init__(
        self,
        memory: Memory | AsyncMemory,
        *,
        owner: Owner | None = None,
        caller: Caller | None = None,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        actor: str | None = "memory_tools",
        profile_tool: bool = False,
        mem0_names: bool = False,
    ) -> None:
        # The edge builds who owns the memory and who calls once (jiyi.who); the loose
        # keywords are a shorthand for the same two values.
        if owner is None:
            owner = Owner(user_id=user_id, project_id=project_id, session_id=session_id, agent_id=agent_id)
        if caller is None:
            caller = Caller(tenant_id=tenant_id, actor=actor)
        bound: dict[str, str] = owner.values()
        if not bound:
            raise InvalidInput(
                "bind the tools to someone: give user_id, project_id, session_id or agent_id", field="user_id"
            )
        self.owner = owner
        self.caller = caller
        self.memory = memory
        self.rt: Runtime = memory.runtime
        self.ids: dict[str, str] = bound
        self.tenant_id = caller.tenant_id
        self.actor = caller.actor
        self.viewer = caller.viewer
        self.scopes: tuple[str, ...] = tuple(s.value for s in Scope if f"{s.value}_id" in bound)
        self._scope_keys = frozenset(scope_key(Scope(s), bound[f"{s}_id"]) for s in self.scopes)
        # Profiles exist for users and projects; with neither bound the tool has nothing to read.
        self._profile_scopes = [s for s in ("user", "project") if f"{s}_id" in bound]
        self._profile_tool = bool(profile_tool and self._profile_scopes)
        # Learnings belong to a user, project or agent (never to a session).
        self._learn_scopes = [s for s in ("user", "project", "agent") if f"{s}_id" in bound]
        # mem0 OpenMemory's tool names, as aliases (jiyi.integrations.mem0_tools)
        self._mem0_names = mem0_names
        self._schemas = self._bind_schemas()
        self._parameters = {t["function"]["name"]: t["function"]["parameters"] for t in self._schemas}
        self._flows: dict[str, Callable[[dict[str, Any]], Flow[dict[str, Any]]]] = {
            "memory_save": self._save,
            "memory_search": self._search,
            "memory_delete": self._delete,
            "memory_stats": self._stats,
            "memory_context": self._context,
        }
        if self._profile_tool:
            self._flows["memory_profile"] = self._profile
        if self._learn_scopes:
            self._flows["memory_suggest"] = self._suggest
            self._flows["memory_learn"] = self._learn
        self._flows["memory_add_document"] = self._add_document
        self._flows["memory_get_document"] = self._get_document
        self._flows["memory_compress"] = self._compress
        self._flows["memory_uncompress"] = self._uncompress
        if "session_id" in bound:
            self._flows["memory_end_session"] = self._end_session
        if mem0_names:
            for name, flow in mem0_tools.FLOWS.items():
                self._flows[name] = functools.partial(flow, self)

    def _bind_schemas(self) -> list[dict[str, Any]]:
        """The tools offered here (TOOLS, then those the binding allows), with the
        ``scope`` choices narrowed to the scopes bound here."""
        schemas = copy.deepcopy(TOOLS)
        for tool in schemas:
            scope = tool["function"]["parameters"]["properties"].get("scope")
            if scope is not None:
                scope["enum"] = list(self.scopes)
        narrowed: list[tuple[dict[str, Any], list[str]]] = []
        if self._profile_tool:
            narrowed.append((PROFILE_TOOL, self._profile_scopes))
        if self._learn_scopes:
            narrowed += [(tool, self._learn_scopes) for tool in PROCEDURAL_TOOLS]
        for tool, scopes in narrowed:
            fitted = copy.deepcopy(tool)
            scope = fitted["function"]["parameters"]["properties"].get("scope")
            if scope is not None:
                scope["enum"] = list(scopes)
            schemas.append(fitted)
        schemas += copy.deepcopy(DOCUMENT_TOOLS)
        schemas += copy.deepcopy(LIFECYCLE_TOOLS)
        if "session_id" in self.ids:
            schemas.append(copy.deepcopy(SESSION_TOOL))
        if self._mem0_names:
            schemas += copy.deepcopy(mem0_tools.MEM0_TOOLS)
        return schemas

    def schemas(self) -> list[dict[str, Any]]:
        """The tool definitions to send to the model (a fresh copy)."""
        return copy.deepcopy(self._schemas)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._flows)

    def _prepare(self, name: object, arguments: str | Mapping[str, Any] | None) -> Flow[dict[str, Any]]:
        if not isinstance(name, str) or name not in self._flows:
            raise ToolCallError(
                "unknown_tool",
                f"there is no tool named {name!r}; the memory tools are: {', '.join(self._flows)}",
            )
        given = parse_arguments(arguments)
        try:
            args = validate_arguments(self._parameters[name], given)
        except ToolCallError as exc:
            # Every problem at once: a learning's kind rules join the schema's.
            kind = given.get("kind")
            if name != "memory_learn" or kind not in LEARNING_KINDS:
                raise
            more = _learning_problems(kind, given)
            if not more:
                raise
            raise ToolCallError(
                exc.code, "; ".join([exc.message, *(p for _, p in more)]), field=exc.field
            ) from None
        return self._flows[name](args)

    # ------------------------------------------------------------ the tools (flows)

    def _save(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        result = yield from pipeline.add(
            self.rt,
            args["content"],
            memory_type=args["memory_type"],
            scope=args.get("scope"),
            tenant_id=self.tenant_id,
            viewer=self.viewer,
            source=Source.USER,
            actor=self.actor,
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            session_id=self.ids.get("session_id"),
            agent_id=self.ids.get("agent_id"),
        )
        decision = result.decision
        out: dict[str, Any] = {
            "status": DONE[decision.action],
            "reasons": list(decision.reasons),
        }
        if decision.redacted:
            out["redacted"] = list(decision.redacted)
        if result.item is not None:
            out["memory"] = _item_brief(result.item)
            out["id"] = result.item.id
        if decision.action == "reinforce":
            out["duplicate_of"] = decision.duplicate_of
            out["similarity"] = _round(decision.similarity)
            if result.item is not None:
                out["mention_count"] = result.item.mention_count
        return out

    def _search(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        scope = args.get("scope")
        ids = {f"{scope}_id": self.ids[f"{scope}_id"]} if scope else self.ids
        if "limit" in args and "k" in args and args["limit"] != args["k"]:
            raise ToolCallError("invalid_input", "give limit or k (the same thing), not both", field="k")
        hits = yield from search_flows.search(
            self.rt,
            args["query"],
            limit=args.get("limit", args.get("k", SEARCH_DEFAULT_LIMIT)),
            memory_types=_memory_types(args),
            tenant_id=self.tenant_id,
            viewer=self.viewer,
            user_id=ids.get("user_id"),
            project_id=ids.get("project_id"),
            session_id=ids.get("session_id"),
            agent_id=ids.get("agent_id"),
            min_relevance=args.get("min_relevance", DEFAULT_MIN_RELEVANCE),
            actor=self.actor,
            log_as="tool",
        )
        results = [
            {**_item_brief(h.item), "score": _round(h.score), "relevance": _round(h.relevance)} for h in hits
        ]
        return {"count": len(results), "results": results}

    def _delete(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        memory_id: str = args["memory_id"]
        item = yield from items.get(self.rt, memory_id, tenant_id=self.tenant_id, viewer=self.viewer)
        if item.scope_key not in self._scope_keys:
            # Someone else's memory in the same tenant: as invisible as another tenant's.
            raise NotFound(f"no memory with id {memory_id!r}", item_id=memory_id)
        if not args["hard"] and item.status == Status.ARCHIVED:
            return {"status": "already_archived", "id": item.id}
        also = yield from items.holders(self.rt, item.id, tenant_id=self.tenant_id, viewer=self.viewer)
        yield from items.delete(
            self.rt,
            item.id,
            hard=args["hard"],
            with_sources=args["with_sources"],
            tenant_id=self.tenant_id,
            viewer=self.viewer,
            actor=self.actor,
            reason="deleted by the agent",
        )
        out = {"status": "purged" if args["hard"] else "archived", "id": item.id, "content": item.content}
        # Said either way: the agent can tell the user where the words still are, or that they are gone.
        key = "sources_deleted" if args["with_sources"] else "still_held_by"
        return {**out, key: [h.id for h in also]} if also else out

    def _stats(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        stats = yield from items.stats(
            self.rt,
            tenant_id=self.tenant_id,
            viewer=self.viewer,
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            session_id=self.ids.get("session_id"),
            agent_id=self.ids.get("agent_id"),
        )
        return {
            "total": stats.total,
            "by_type": dict(stats.by_type),
            "by_scope": dict(stats.by_scope),
            "by_status": dict(stats.by_status),
            "avg_confidence": _round(stats.avg_confidence),
            "avg_importance": _round(stats.avg_importance),
        }

    def _context(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        ctx: Context = yield from context_flows.context(
            self.rt,
            args["query"],
            budget_tokens=args["budget_tokens"],
            max_items=args["max_items"],
            tenant_id=self.tenant_id,
            viewer=self.viewer,
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            session_id=self.ids.get("session_id"),
            agent_id=self.ids.get("agent_id"),
            actor=self.actor,
            log_as="tool",
        )
        return {
            "text": ctx.text,
            "tokens": ctx.tokens,
            "entries": len(ctx.entries),
            "by_source": dict(ctx.by_source),
            "dropped": ctx.dropped,
        }

    def _profile(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        scopes = [args["scope"]] if args.get("scope") else self._profile_scopes
        profiles = []
        for scope in scopes:
            prof = yield from profile_flows.profile(
                self.rt,
                tenant_id=self.tenant_id,
                viewer=self.viewer,
                user_id=self.ids["user_id"] if scope == "user" else None,
                project_id=self.ids["project_id"] if scope == "project" else None,
            )
            profiles.append(prof.to_json_dict(non_empty=True))
        return {"profiles": profiles}

    def _suggest(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        found = yield from procedural.suggest(
            self.rt,
            args["task"],
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            agent_id=self.ids.get("agent_id"),
            tenant_id=self.tenant_id,
            min_similarity=args.get("min_similarity"),
            min_success_rate=args["min_success_rate"],
            viewer=self.viewer,
        )
        return found.to_json_dict()

    def _learn(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        kind: str = args.pop("kind")
        _check_learning(kind, args)
        where: dict[str, Any] = {
            "user_id": self.ids.get("user_id"),
            "project_id": self.ids.get("project_id"),
            "agent_id": self.ids.get("agent_id"),
            "scope": args.pop("scope", None),
            "tenant_id": self.tenant_id,
            "actor": self.actor,
            "viewer": self.viewer,
            # A key that may change only what it created (an editor) updates only its own
            # learnings, as over REST; owners and admins see, and update, every one.
            "own_only": self.viewer is not None and not self.viewer.sees_all,
        }
        if kind == "skill":
            item = yield from procedural.record_skill(
                self.rt, args.pop("name"), args.pop("workflow"), **args, **where
            )
        elif kind == "failure":
            item = yield from procedural.record_failure(self.rt, args.pop("pattern"), **args, **where)
        else:
            item = yield from procedural.record_decomposition(
                self.rt, args.pop("task"), args.pop("subtasks"), **args, **where
            )
        return {
            "status": "recorded" if item.version == 1 else "updated",
            "kind": kind,
            "id": item.id,
            "memory": _item_brief(item),
            "learning": item.structured,
        }

    def _add_document(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        chunks = yield from session_flows.add_document(
            self.rt,
            args["text"],
            title=args.get("title"),
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            session_id=self.ids.get("session_id"),
            agent_id=self.ids.get("agent_id"),
            tenant_id=self.tenant_id,
            actor=self.actor,
        )
        return {
            "status": "stored",
            "parent_id": chunks[0].metadata["parent_id"],
            "chunks": len(chunks),
            "ids": [c.id for c in chunks],
        }

    def _get_document(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        parent_id: str = args["parent_id"]
        try:
            first: MemoryItem | None = yield from items.get(
                self.rt, f"{parent_id}#0", tenant_id=self.tenant_id, viewer=self.viewer
            )
        except NotFound:
            first = None
        if (
            first is None
            or first.scope_key not in self._scope_keys
            or first.metadata.get("parent_id") != parent_id
        ):
            # Another owner's document in the same tenant is as invisible as a missing one.
            raise NotFound(f"no document {parent_id!r} here; take the parent_id memory_add_document returned")
        text = yield from session_flows.get_document(
            self.rt, parent_id, tenant_id=self.tenant_id, viewer=self.viewer
        )
        out: dict[str, Any] = {
            "parent_id": parent_id,
            "text": text,
            "chunks": first.metadata.get("chunk_count"),
        }
        if isinstance(first.metadata.get("title"), str):
            out["title"] = first.metadata["title"]
        return out

    def _compress(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        report = yield from compress_flows.compress(
            self.rt,
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            session_id=self.ids.get("session_id"),
            agent_id=self.ids.get("agent_id"),
            tenant_id=self.tenant_id,
            memory_types=_memory_types(args),
            older_than_days=args["older_than_days"],
            max_access=args["max_access"],
            dry_run=args["dry_run"],
            actor=self.actor or compress_flows.ACTOR,
        )
        return report.to_json_dict()

    def _uncompress(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        core_id: str = args["core_id"]
        core = yield from items.get(self.rt, core_id, tenant_id=self.tenant_id, viewer=self.viewer)
        if core.scope_key not in self._scope_keys:
            # Someone else's core memory in the same tenant: as invisible as another tenant's.
            raise NotFound(f"no memory with id {core_id!r}", item_id=core_id)
        result = yield from compress_flows.uncompress(
            self.rt, core.id, tenant_id=self.tenant_id, actor=self.actor or compress_flows.ACTOR
        )
        return result.to_json_dict()

    def _end_session(self, args: dict[str, Any]) -> Flow[dict[str, Any]]:
        session_id = self.ids["session_id"]
        ended = yield from session_flows.end_session(
            self.rt,
            session_id,
            user_id=self.ids.get("user_id"),
            project_id=self.ids.get("project_id"),
            agent_id=self.ids.get("agent_id"),
            tenant_id=self.tenant_id,
            viewer=self.viewer,
        )
        return ended.to_json_dict()


_LEARN_ARGUMENTS: Final = frozenset(
    next(t for t in PROCEDURAL_TOOLS if t["function"]["name"] == "memory_learn")["function"]["parameters"][
        "properties"
    ]
)
# What each kind of learning needs, and what else it may take (besides kind and scope).
_LEARNING_FIELDS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "skill": (("name", "workflow"), ("description", "task", "succeeded")),
    "failure": (("pattern", "indicators", "mitigation", "severity"), ("description",)),
    "decomposition": (("task", "subtasks", "strategy", "succeeded"), ()),
}


def _learning_problems(kind: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every argument missing for ``kind``, and every one that belongs to another kind."""
    needed, optional = _LEARNING_FIELDS[kind]
    problems = [(f, f"a {kind} learning needs {f!r}") for f in needed if f not in args]
    allowed = {*needed, *optional, "scope", "kind"}
    takes = ", ".join((*needed, *optional))
    problems += [
        (f, f"{f!r} is not used by a {kind} learning (it takes {takes})")
        for f in args
        # Names no tool argument has are the schema's to report.
        if f not in allowed and f in _LEARN_ARGUMENTS
    ]
    return problems


def _check_learning(kind: str, args: Mapping[str, Any]) -> None:
    problems = _learning_problems(kind, args)
    if problems:
        raise _invalid(problems)


class MemoryTools(_ToolsBase):
    """Runs the memory tools on a :class:`~jiyi.memory.Memory` for one bound user/project/session.

    ``call(name, arguments)`` takes the tool name and its arguments (the JSON string a
    model produced, or a dict) and returns a JSON-serialisable dict: the tool's result,
    or ``{"error": {"code", "message", "field", "problems"}}``. It never raises for a bad call.
    """

    memory: Memory

    def __init__(
        self,
        memory: Memory,
        *,
        owner: Owner | None = None,
        caller: Caller | None = None,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        actor: str | None = "memory_tools",
        profile_tool: bool = False,
        mem0_names: bool = False,
    ) -> None:
        super().__init__(
            memory,
            owner=owner,
            caller=caller,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            actor=actor,
            profile_tool=profile_tool,
            mem0_names=mem0_names,
        )

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> dict[str, Any]:
        try:
            flow = self._prepare(name, arguments)
            return run(flow, self.rt)
        except Exception as exc:
            return _failure(name, exc)


class AsyncMemoryTools(_ToolsBase):
    """:class:`MemoryTools` over an :class:`~jiyi.memory.AsyncMemory`: ``await tools.call(...)``."""

    memory: AsyncMemory

    def __init__(
        self,
        memory: AsyncMemory,
        *,
        owner: Owner | None = None,
        caller: Caller | None = None,
        user_id: str | None = None,
        project_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        actor: str | None = "memory_tools",
        profile_tool: bool = False,
        mem0_names: bool = False,
    ) -> None:
        super().__init__(
            memory,
            owner=owner,
            caller=caller,
            user_id=user_id,
            project_id=project_id,
            session_id=session_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            actor=actor,
            profile_tool=profile_tool,
            mem0_names=mem0_names,
        )

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> dict[str, Any]:
        try:
            flow = self._prepare(name, arguments)
            return await arun(flow, self.rt)
        except Exception as exc:
            return _failure(name, exc)


def _memory_types(args: Mapping[str, Any]) -> list[str] | None:
    """The type filter: ``memory_types`` (the library's and REST's name) or ``memory_type``
    (one kind), not two different ones."""
    many, one = args.get("memory_types"), args.get("memory_type")
    if many is not None and one is not None and list(many) != [one]:
        raise ToolCallError(
            "invalid_input", "give memory_types or memory_type (one kind), not both", field="memory_type"
        )
    return list(many) if many is not None else [one] if one is not None else None
