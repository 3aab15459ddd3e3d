"""Who is calling and whose memory it is, as two values built once at the edge.

A REST request, an MCP session, an agent's tools or a CLI command knows both before it
calls the library: the *caller* (tenant, viewer for visibility, actor for the audit log)
and the *owner* of the memory (user, project, session, agent). ``Memory.bound(owner=...,
caller=...)`` gives a view of the same Memory whose every operation receives them, so
they are not threaded through each call::

    alice = mem.bound(owner=Owner(user_id="alice"), caller=Caller(tenant_id="acme", actor="key-1"))
    alice.add("I prefer tea")          # user alice, tenant acme, created by key-1
    alice.search("what does she drink?")

An argument given in the call wins over the bound one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jiyi.errors import InvalidInput
from jiyi.model import MAX_ID_LENGTH
from jiyi.store.base import Viewer


def _check_id(value: str | None, name: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_LENGTH):
        raise InvalidInput(
            f"{name} must be a non-empty string of at most {MAX_ID_LENGTH} characters", field=name
        )


@dataclass(frozen=True)
class Owner:
    """Whose memory: any of user, project, session and agent."""

    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        for name, value in self.values().items():
            _check_id(value, name)

    def values(self) -> dict[str, Any]:
        """The ids that are set, as the API's keyword arguments."""
        ids = {
            "user_id": self.user_id,
            "project_id": self.project_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
        }
        return {k: v for k, v in ids.items() if v is not None}


@dataclass(frozen=True)
class Caller:
    """Who is calling: the tenant, what it may see (``viewer``) and who it is in the
    audit history (``actor``)."""

    tenant_id: str | None = None
    viewer: Viewer | None = None
    actor: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.tenant_id, "tenant_id")
        _check_id(self.actor, "actor")
        if self.viewer is not None and not isinstance(self.viewer, Viewer):
            raise InvalidInput("viewer must be a jiyi.store.base.Viewer", field="viewer")

    def values(self) -> dict[str, Any]:
        given = {"tenant_id": self.tenant_id, "viewer": self.viewer, "actor": self.actor}
        return {k: v for k, v in given.items() if v is not None}
