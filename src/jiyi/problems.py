"""How a bad argument is described, in the same words on every interface.

The library's checks (:mod:`jiyi.validate`), the agent tools and MCP
(:mod:`jiyi.integrations.tools`) and REST (pydantic's errors, translated in
:mod:`jiyi.server.errors`) all say "limit must be at least 1, got 0", so a caller
who moves from one interface to another meets the same sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def not_one_of(name: str, allowed: Iterable[Any], got: Any) -> str:
    return f"{name} must be one of: {', '.join(str(a) for a in allowed)}; got {got!r}"
