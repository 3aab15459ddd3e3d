"""User and project profiles: read the aggregated profile, set or clear fields."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from jiyi.errors import InvalidInput
from jiyi.memory import AsyncMemory
from jiyi.model import MAX_ID_LENGTH
from jiyi.server.auth import Principal
from jiyi.server.deps import READ, WRITE, Mine, Reader, Writer, dump_entries, owned, same_tenant
from jiyi.server.schemas import ProfilePatch, ProfileResponse

# A profile is a user's or a project's: exactly one of the two (not any scope id).
ProfileOf = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="Whose profile: give user_id or project_id, not both.",
    ),
]

router = APIRouter(tags=["profiles"])

# set_profile's own keyword arguments: a body field of these names would override them
_RESERVED = ("user_id", "project_id", "tenant_id", "actor", "viewer")


def _field_values(body: ProfilePatch) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, value in body.fields.items():
        if name in _RESERVED:
            raise InvalidInput(f"unknown profile field {name!r}", field=name)
        values[name] = dump_entries(value) if isinstance(value, list) else value
    return values


async def _check_editor_owns(
    memory: AsyncMemory, who: Principal, user_id: str | None, project_id: str | None
) -> None:
    """Editors may change only a profile they set first (or one nobody has set)."""
    if who.role.can_edit_any:
        return
    current = await memory.profile(user_id=user_id, project_id=project_id)
    if current.item_id is not None:
        await owned(memory, who, current.item_id)


@router.get(
    "/v1/profile",
    summary="A user's or a project's profile (give user_id or project_id)",
    description="Aggregated from the scope's memories; explicitly set fields win. Each field "
    "says its source (explicit or aggregated) and the ids of the memories behind it.",
    responses=READ,
)
async def get_profile(
    who: Reader, memory: Mine, user_id: ProfileOf = None, project_id: ProfileOf = None
) -> ProfileResponse:
    profile = await memory.profile(user_id=user_id, project_id=project_id)
    return ProfileResponse.model_validate(profile.to_json_dict())


def _one_of(name: str, in_query: str | None, in_body: str | None) -> str | None:
    """An id given in the query string or the body (the same value if in both)."""
    if in_query is not None and in_body is not None and in_query != in_body:
        raise InvalidInput(
            f"{name} is {in_query!r} in the query but {in_body!r} in the body; give it once", field=name
        )
    return in_body if in_query is None else in_query


@router.patch(
    "/v1/profile",
    summary="Set or clear profile fields explicitly (give user_id or project_id, in the body or the query)",
    responses=WRITE,
)
async def patch_profile(
    body: ProfilePatch, who: Writer, memory: Mine, user_id: ProfileOf = None, project_id: ProfileOf = None
) -> ProfileResponse:
    same_tenant(who, body.tenant_id)
    user_id = _one_of("user_id", user_id, body.user_id)
    project_id = _one_of("project_id", project_id, body.project_id)
    values = _field_values(body)
    await _check_editor_owns(memory, who, user_id, project_id)
    profile = await memory.set_profile(
        user_id=user_id,
        project_id=project_id,
        **values,
    )
    return ProfileResponse.model_validate(profile.to_json_dict())
