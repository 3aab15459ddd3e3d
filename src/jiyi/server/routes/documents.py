"""Documents: a whole text kept as overlapping chunks under one parent id, and read back
whole (the library's ``add_document`` / ``get_document``, the tools' and MCP's
``memory_add_document`` / ``memory_get_document``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from jiyi.errors import NotFound
from jiyi.model import MAX_ID_LENGTH, owner_scope
from jiyi.server.deps import READ, WRITE, Mine, Reader, Writer, member_writes, same_tenant
from jiyi.server.schemas import DocumentOut, DocumentRequest, DocumentStored

router = APIRouter(tags=["documents"])

ParentId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="The document's id, as POST /v1/documents returned it.",
    ),
]


@router.post(
    "/v1/documents",
    summary="Keep a document: split into ~2,000-token chunks that search and context find",
    status_code=201,
    responses=WRITE,
)
async def add_document(body: DocumentRequest, who: Writer, memory: Mine) -> DocumentStored:
    same_tenant(who, body.tenant_id)
    member_writes(who, owner_scope(body.user_id, body.project_id, body.agent_id), body.project_id)
    chunks = await memory.bound(owner=body.owner()).add_document(
        body.text, title=body.title, source_id=body.source_id
    )
    return DocumentStored(
        parent_id=str(chunks[0].metadata["parent_id"]), chunks=len(chunks), ids=[c.id for c in chunks]
    )


@router.get(
    "/v1/documents/{parent_id}", summary="A document, whole, re-assembled from its chunks", responses=READ
)
async def get_document(parent_id: ParentId, who: Reader, memory: Mine) -> DocumentOut:
    try:
        first = await memory.get(f"{parent_id}#0")
    except NotFound:
        first = None
    if first is None or first.metadata.get("parent_id") != parent_id:
        raise NotFound(f"no document {parent_id!r}; take the parent_id POST /v1/documents returned")
    text = await memory.get_document(parent_id)
    title = first.metadata.get("title")
    return DocumentOut(
        parent_id=parent_id,
        title=title if isinstance(title, str) else None,
        chunks=int(first.metadata.get("chunk_count", 1)),
        text=text,
    )
