"""Checks of caller input shared by every operation: ids, enums, scopes, limits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec

from jiyi.errors import InvalidInput
from jiyi.model import Scope, check_text_value, owner_scope, scope_key
from jiyi.problems import empty, not_one_of, too_large, too_small, wrong_type

MAX_LIMIT = 1000

P = ParamSpec("P")


class Problems:
    """Every problem of a call's arguments, so one error lists them all (as REST and the
    tools do) instead of the first: run each check with :meth:`check`, then :meth:`raise_any`."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.field: str | None = None

    def check(self, fn: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except InvalidInput as exc:
            for problem in exc.problems:
                self.add(problem, exc.field)

    def add(self, problem: str, field: str | None) -> None:
        self.found.append(problem)
        self.field = self.field or field

    def raise_any(self) -> None:
        """One :class:`InvalidInput` naming every problem found (the first one's field)."""
        if self.found:
            raise InvalidInput("; ".join(self.found), field=self.field, problems=tuple(self.found))


def scope_keys(
    user_id: str | None, project_id: str | None, session_id: str | None, agent_id: str | None
) -> tuple[str, ...]:
    pairs = (
        (Scope.SESSION, session_id),
        (Scope.PROJECT, project_id),
        (Scope.AGENT, agent_id),
        (Scope.USER, user_id),
    )
    keys: list[str] = []
    for scope, value in pairs:
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{scope.value}_id must be a non-empty string", field=f"{scope.value}_id")
        keys.append(scope_key(scope, value))
    return tuple(keys)


def infer_scope(
    scope: Scope | str | None,
    user_id: str | None,
    project_id: str | None,
    session_id: str | None,
    agent_id: str | None,
) -> Scope:
    """An explicit scope wins; otherwise the broadest long-lived scope whose id is given."""
    if scope is not None:
        try:
            return Scope(scope)
        except ValueError:
            raise InvalidInput(
                f"unknown scope {scope!r}; use one of {', '.join(s.value for s in Scope)}", field="scope"
            ) from None
    if any(v is not None for v in (user_id, project_id, agent_id, session_id)):
        return owner_scope(user_id, project_id, agent_id, session_id)
    raise InvalidInput(
        "say whose memory this is: give user_id, project_id, session_id or agent_id", field="user_id"
    )


def enum_tuple(kind: type[Any], values: Iterable[Any] | Any | None, name: str) -> tuple[Any, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        try:
            out.append(kind(v))
        except ValueError:
            raise InvalidInput(not_one_of(name, (m.value for m in kind), v), field=name) from None
    return tuple(out)


def check_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}", field=name)
    if not value.strip():
        raise InvalidInput(empty(name), field=name)
    try:
        return check_text_value(value)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc}", field=name) from None


def check_limit(limit: object, name: str = "limit") -> int:
    """A page or result size: an integer within 1..MAX_LIMIT."""
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidInput(wrong_type(name, "an integer", limit), field=name)
    if limit < 1:
        raise InvalidInput(too_small(name, 1, limit), field=name)
    if limit > MAX_LIMIT:
        raise InvalidInput(too_large(name, MAX_LIMIT, limit), field=name)
    return limit


def check_mapping(value: object, name: str) -> dict[str, Any] | None:
    """An optional JSON object argument (``metadata``, ``structured``) as a plain dict;
    its contents are checked where the item is built."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{name} must be a JSON object (a dict), not {type(value).__name__}", field=name)
    return dict(value)


def check_tags(value: object, name: str = "tags") -> tuple[str, ...]:
    """Tags: a list of strings (a bare string would become one tag per character)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidInput(f"{name} must be a list of strings, not {type(value).__name__}", field=name)
    tags = tuple(value)
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput(f"every tag must be a string, not {type(tag).__name__}", field=name)
    return tags
