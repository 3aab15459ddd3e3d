"""How a bad argument is described, in the same words on every interface.

The library's checks (:mod:`jiyi.validate`), the agent tools and MCP
(:mod:`jiyi.integrations.tools`) and REST (pydantic's errors, translated in
:mod:`jiyi.server.errors`) all say "limit must be at least 1, got 0", so a caller
who moves from one interface to another meets the same sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def type_name(value: object) -> str:
    """A JSON-ish name for a value's type, as a caller would say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def too_small(name: str, minimum: Any, got: Any) -> str:
    return f"{name} must be at least {minimum}, got {got!r}"


def too_large(name: str, maximum: Any, got: Any) -> str:
    return f"{name} must be at most {maximum}, got {got!r}"


def wrong_type(name: str, wanted: str, got: Any) -> str:
    """``wanted`` with its article: "an integer", "a string"."""
    return f"{name} must be {wanted}, not {type_name(got)}"


def empty(name: str) -> str:
    return f"{name} must not be empty"


def too_long(name: str, maximum: int) -> str:
    return f"{name} must be at most {maximum} characters"


def not_one_of(name: str, allowed: Iterable[Any], got: Any) -> str:
    return f"{name} must be one of: {', '.join(str(a) for a in allowed)}; got {got!r}"


_WANTED = {
    "int_parsing": "an integer",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_parsing": "a number",
    "float_type": "a number",
    "string_type": "a string",
    "bool_parsing": "a boolean",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
}
_QUOTED = re.compile(r"'([^']*)'")


def pydantic_problem(err: Mapping[str, Any], path: Sequence[str]) -> str | None:
    """A pydantic error (one entry of ``ValidationError.errors()``, at ``path`` below its
    location) in the words above, or None when it has no counterpart here."""
    name = path[0] + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path[1:])
    kind, ctx, got = err.get("type"), err.get("ctx") or {}, err.get("input")
    if kind in ("greater_than_equal", "less_than_equal") and isinstance(got, str):
        got = _number(got)  # a query parameter arrives as text
    if kind == "greater_than_equal":
        return too_small(name, ctx.get("ge"), got)
    if kind == "less_than_equal":
        return too_large(name, ctx.get("le"), got)
    if kind in _WANTED:
        return wrong_type(name, _WANTED[str(kind)], got)
    if kind in ("enum", "literal_error") and "expected" in ctx:
        return not_one_of(name, _QUOTED.findall(str(ctx["expected"])), got)
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return empty(name)
    if kind == "string_too_long" and "max_length" in ctx:
        return too_long(name, ctx["max_length"])
    if kind == "missing":
        return f"{name} is required"
    return None


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
