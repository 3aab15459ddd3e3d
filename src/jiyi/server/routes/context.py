"""Prompt context: the memories, recent session messages and profile that fit a token
budget, assembled for one query."""

from __future__ import annotations

from fastapi import APIRouter

from jiyi.server.deps import READ, Mine, Reader, same_tenant
from jiyi.server.schemas import ContextEntryOut, ContextRequest, ContextResponse

router = APIRouter(tags=["context"])


@router.post("/v1/context", summary="Assemble prompt context", responses=READ)
async def build_context(body: ContextRequest, who: Reader, memory: Mine) -> ContextResponse:
    same_tenant(who, body.tenant_id)
    ctx = await memory.bound(owner=body.owner()).context(
        body.query,
        budget_tokens=body.budget_tokens,
        max_items=body.max_items,
        recent=body.recent,
        semantic=body.semantic,
        summaries=body.summaries,
        profile=body.profile,
        min_relevance=body.min_relevance,
    )
    entries = [
        ContextEntryOut(
            source=e.source,
            text=e.text,
            tokens=e.tokens,
            score=e.score,
            item_id=e.item.id if e.item else None,
            message_id=e.message.id if e.message else None,
        )
        for e in ctx.entries
    ]
    return ContextResponse(
        text=ctx.text,
        tokens=ctx.tokens,
        dropped=ctx.dropped,
        profile=ctx.profile,
        by_source=ctx.by_source,
        entries=entries,
    )
