"""mem0's REST paths and bodies, under ``/mem0``: a thin edge over
:mod:`jiyi.compat.mem0` for clients written against mem0's platform API.

The paths are mem0's (``/v1/memories/``, ``/v1/memories/search/``,
``/v1/memories/{id}/``, ``/v1/memories/{id}/history/``, with their trailing slashes)
behind the prefix ``/mem0``, because jiyi's own routes already use ``/v1/memories``
with other bodies: a mem0 client is pointed at ``http://host:port/mem0``. The results
are those of mem0's ``Memory`` (``{"results": [...]}``, plain dicts), as the library
layer returns them.

The same keys, tenancy, visibility and roles as jiyi's routes apply (see
:mod:`jiyi.server.app`): a viewer key only reads, an editor key changes only the
memories it created, deleting a whole user's memories needs an owner or admin key.
mem0's ``Authorization: Token <key>`` is accepted beside ``Bearer`` and ``X-API-Key``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, ConfigDict, Field

from jiyi.compat import mem0
from jiyi.model import MAX_ID_LENGTH
from jiyi.server.auth import Principal
from jiyi.server.deps import (
    READ,
    WRITE,
    ItemId,
    ScopeQuery,
    api_key_header,
    bearer,
    current_memory,
    principal,
)
from jiyi.server.errors import ApiError

router = APIRouter(prefix="/mem0/v1", tags=["mem0"])

Record = dict[str, Any]
Id = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)


class _Body(BaseModel):
    # mem0's client adds output_format, version and async_mode to its bodies: accepted,
    # with no effect (jiyi answers in the v1.1 shape and synchronously).
    model_config = ConfigDict(extra="forbid")

    output_format: str | None = Field(default=None, description="Accepted for mem0 clients; ignored.")
    version: str | None = Field(default=None, description="Accepted for mem0 clients; ignored.")
    async_mode: bool | None = Field(default=None, description="Accepted for mem0 clients; ignored.")


class Mem0Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str = Field(min_length=1, max_length=50, description="user, assistant or system.")
    content: str
    name: str | None = None


class Mem0AddRequest(_Body):
    messages: str | list[Mem0Message] = Field(description="A statement, or a conversation to extract from.")
    user_id: str | None = Id
    agent_id: str | None = Id
    run_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID_LENGTH, description="jiyi's session."
    )
    metadata: dict[str, Any] | None = None
    infer: bool = Field(default=True, description="false: store every non-system message as given.")
    memory_type: str | None = None
    expiration_date: str | None = Field(default=None, description="YYYY-MM-DD: the last day it holds.")


class Mem0SearchRequest(_Body):
    query: str = Field(min_length=1)
    user_id: str | None = Id
    agent_id: str | None = Id
    run_id: str | None = Id
    filters: dict[str, Any] | None = None
    top_k: int | None = Field(default=None, ge=1, le=1000)
    limit: int | None = Field(default=None, ge=1, le=1000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)


class Mem0UpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="The memory's new text.")
    metadata: dict[str, Any] | None = None


async def mem0_caller(
    request: Request,
    api_key: Annotated[str | None, Security(api_key_header)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    """jiyi's caller check, also taking mem0's ``Authorization: Token <key>``."""
    token = None
    if authorization is not None and authorization[:6].lower() == "token ":
        token = authorization[6:].strip()
    return await principal(request, api_key or token, credentials)


Caller = Annotated[Principal, Depends(mem0_caller)]


def _layer(request: Request, who: Principal) -> mem0.AsyncMemory:
    """The mem0 layer over the library, acting as the caller (tenant, viewer, actor)."""
    return mem0.AsyncMemory(native=current_memory(request).bound(caller=who.caller))


def _writer(who: Principal) -> None:
    if not who.role.can_write:
        raise ApiError(403, f"{who.role.a_key} can only read")


async def _changeable(layer: mem0.AsyncMemory, who: Principal, memory_id: str) -> Record:
    """The memory, checked to be changeable by ``who``: editors change only what they
    created; an id the key cannot see is 404."""
    _writer(who)
    record = await layer.get(memory_id)
    if record is None:
        raise ApiError(404, f"no memory with id {memory_id!r}", field="memory_id")
    if not who.role.can_edit_any and (record.get("metadata") or {}).get("created_by") != who.key_id:
        raise ApiError(403, "an editor key can only change memories it created")
    return record


@router.get("/ping/", summary="Check the key (mem0's client calls it when it starts)", responses=READ)
async def ping(who: Caller) -> Record:
    return {"status": "ok", "org_id": None, "project_id": None, "user_email": None, "tenant": who.tenant}


@router.post("/memories/", summary="Add memories (mem0's add)", responses=WRITE)
async def add(body: Mem0AddRequest, who: Caller, request: Request) -> Record:
    _writer(who)
    messages = body.messages if isinstance(body.messages, str) else [m.model_dump() for m in body.messages]
    return await _layer(request, who).add(
        messages,
        user_id=body.user_id,
        agent_id=body.agent_id,
        run_id=body.run_id,
        metadata={**(body.metadata or {}), "created_by": who.key_id},
        infer=body.infer,
        memory_type=body.memory_type,
        expiration_date=body.expiration_date,
    )


@router.get("/memories/", summary="A user's, agent's or run's memories (mem0's get_all)", responses=READ)
async def get_all(
    who: Caller,
    request: Request,
    user_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    run_id: ScopeQuery = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
) -> Record:
    return await _layer(request, who).get_all(user_id=user_id, agent_id=agent_id, run_id=run_id, limit=limit)


@router.post("/memories/search/", summary="Search memories (mem0's search)", responses=READ)
async def search(body: Mem0SearchRequest, who: Caller, request: Request) -> Record:
    return await _layer(request, who).search(
        body.query,
        user_id=body.user_id,
        agent_id=body.agent_id,
        run_id=body.run_id,
        filters=body.filters,
        top_k=body.top_k,
        limit=body.limit,
        threshold=body.threshold,
    )


@router.delete(
    "/memories/",
    summary="Delete every memory of a user, agent or run (mem0's delete_all; owner or admin key)",
    responses=WRITE,
)
async def delete_all(
    who: Caller,
    request: Request,
    user_id: ScopeQuery = None,
    agent_id: ScopeQuery = None,
    run_id: ScopeQuery = None,
) -> Record:
    if not who.role.can_edit_any:
        raise ApiError(403, f"{who.role.a_key} cannot delete all memories; it needs an owner or admin key")
    return await _layer(request, who).delete_all(user_id=user_id, agent_id=agent_id, run_id=run_id)


@router.get("/memories/{memory_id}/", summary="One memory (mem0's get)", responses=READ)
async def get(memory_id: ItemId, who: Caller, request: Request) -> Record:
    record = await _layer(request, who).get(memory_id)
    if record is None:
        raise ApiError(404, f"no memory with id {memory_id!r}", field="memory_id")
    return record


@router.put("/memories/{memory_id}/", summary="Replace a memory's text (mem0's update)", responses=WRITE)
async def update(memory_id: ItemId, body: Mem0UpdateRequest, who: Caller, request: Request) -> Record:
    layer = _layer(request, who)
    old = await _changeable(layer, who, memory_id)
    metadata = None
    if body.metadata is not None:
        # created_by records who made the item: no update may forge or drop it
        metadata = {k: v for k, v in body.metadata.items() if k != "created_by"}
        made_by = (old.get("metadata") or {}).get("created_by")
        if made_by is not None:
            metadata["created_by"] = made_by
    return await layer.update(memory_id, body.text, metadata=metadata)


@router.delete("/memories/{memory_id}/", summary="Delete a memory for good (mem0's delete)", responses=WRITE)
async def delete(memory_id: ItemId, who: Caller, request: Request) -> Record:
    layer = _layer(request, who)
    await _changeable(layer, who, memory_id)
    return await layer.delete(memory_id)


@router.get("/memories/{memory_id}/history/", summary="A memory's changes (mem0's history)", responses=READ)
async def history(memory_id: ItemId, who: Caller, request: Request) -> list[Record]:
    return await _layer(request, who).history(memory_id)
