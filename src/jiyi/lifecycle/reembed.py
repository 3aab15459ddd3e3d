"""Give stored memories the vectors of the embedder in use: after switching embedders, or to
add what a newer version keeps (a long memory's statement vectors, :mod:`jiyi.read.statements`).

A memory whose vector came from another embedder is found by its words only, since a search
compares the query with vectors of its own model; nothing says so at search time. This walks
the memories a page at a time: a memory without a vector of the current model gets one
(:class:`~jiyi.store.base.SetVectors`: the memory, its version and history stay as they are),
and, where the ranking reads statements, every statement vector missing from the embedding
cache is embedded and cached. Each page is one transaction, so a run stopped halfway keeps
what it finished and a second run picks up the rest; a run over a store already up to date
embeds nothing.

``force`` embeds every memory and statement again, whatever vectors they have, and replaces
the cached ones: for a model that changed under the same ``model_id`` (a new version of a
package, a server that now runs another model under the same name), whose old vectors the
store cannot tell from new ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from jiyi.effects import Flow, call, embed
from jiyi.embed.cached import embed_documents
from jiyi.model import MemoryItem
from jiyi.read.statements import statement_texts, used
from jiyi.runtime import Runtime
from jiyi.store.base import CacheGet, CachePut, Change, Filter, ListItems, SetVectors, VectorsFor, Write
from jiyi.store.sqlcommon import text_hash
from jiyi.validate import Problems, check_limit, scope_keys

PAGE = 256
"""Memories per page (one listing, one embedding batch, one transaction)."""


@dataclass(frozen=True)
class ReembedReport:
    """What a :func:`reembed` run found and did (with ``dry_run``: what it would do)."""

    model_id: str
    memories: int
    """Memories looked at (every status, raw turns included)."""
    embedded: int
    """Memories given a vector of ``model_id`` (they had none, or another model's)."""
    statements: int
    """Statement vectors added to the embedding cache (with ``force``: written again)."""
    dry_run: bool = False
    force: bool = False

    @property
    def up_to_date(self) -> bool:
        """Nothing was (or, in a dry run, would be) embedded."""
        return not (self.embedded or self.statements)

    def to_json_dict(self) -> dict[str, Any]:
        return {**asdict(self), "up_to_date": self.up_to_date}


def reembed(
    rt: Runtime,
    /,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    tenant_id: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    page_size: int = PAGE,
    progress: Callable[[ReembedReport], None] | None = None,
) -> Flow[ReembedReport]:
    """Give every memory of the tenant (or of the given scopes) a vector of the current
    embedder, and cache the statement vectors the search reads; see the module's text.

    ``dry_run`` counts what would be embedded and writes nothing. ``force`` embeds every
    memory and statement again, the cache bypassed, and replaces their vectors. ``progress``
    gets the running totals after each page. Safe to run again, and beside other writers: a
    memory written meanwhile already has its vector, and one purged meanwhile is skipped."""
    problems = Problems()
    problems.check(scope_keys, user_id, project_id, session_id, agent_id)
    problems.check(check_limit, page_size, "page_size")
    flags: tuple[tuple[str, object], ...] = (("dry_run", dry_run), ("force", force))
    for name, flag in flags:  # a caller's "yes" would pass as true
        if not isinstance(flag, bool):
            problems.add(f"{name} must be true or false, not {flag!r}", name)
    problems.raise_any()
    tenant = rt.tenant(tenant_id)
    model = rt.embedder.model_id
    flt = Filter(
        tenant_id=tenant,
        scope_keys=scope_keys(user_id, project_id, session_id, agent_id),
        statuses=(),
        include_expired=True,
    )
    report = ReembedReport(model, 0, 0, 0, dry_run, force)
    counted: set[str] = set()  # statements already counted (a dry run's; with force, embedded)
    cursor: str | None = None
    while True:
        page = yield from call(ListItems(flt, limit=page_size, cursor=cursor))
        if page.items:
            if force:
                embedded, statements = yield from _page_again(rt, tenant, page.items, counted, dry_run)
            else:
                embedded, statements = yield from _page(rt, tenant, page.items, counted if dry_run else None)
            report = ReembedReport(
                model,
                report.memories + len(page.items),
                report.embedded + embedded,
                report.statements + statements,
                dry_run,
                force,
            )
            if progress is not None:
                progress(report)
        cursor = page.next_cursor
        if cursor is None or not page.items:
            return report


def _page(
    rt: Runtime, tenant: str, items: list[MemoryItem], counted: set[str] | None
) -> Flow[tuple[int, int]]:
    """One page: (memories embedded, statement vectors cached), written in one transaction;
    with ``counted`` (a dry run: the statements counted on earlier pages) only counted."""
    model = rt.embedder.model_id
    have = yield from call(VectorsFor(tenant, model, tuple(i.id for i in items)))
    missing = [i for i in items if i.id not in have]
    wanted = statement_texts(i.content for i in items) if used(rt) else []
    if counted is not None:
        hashes = [h for h in dict.fromkeys(text_hash(t) for t in wanted) if h not in counted]
        cached = yield from call(CacheGet(model, tuple(hashes)))
        fresh = [h for h in hashes if h not in cached]
        counted.update(fresh)
        counted.update(text_hash(i.content) for i in missing)  # cached by a run as they are embedded
        return len(missing), len(fresh)
    if not (missing or wanted):
        return 0, 0
    # One pass through the cache: the texts without a vector and every statement; only what
    # the cache lacks is embedded.
    texts = [i.content for i in missing]
    vectors, put = yield from embed_documents(rt, [*texts, *wanted])
    changes: list[Change] = [] if put is None else [put]
    if missing:
        changes.append(
            SetVectors(
                tenant, model, tuple((i.id, v) for i, v in zip(missing, vectors[: len(missing)], strict=True))
            )
        )
    if changes:
        yield from call(Write(tuple(changes)))
    added = {h for h, _ in put.entries} if put is not None else set()
    return len(missing), len(added & {text_hash(t) for t in wanted})


def _page_again(
    rt: Runtime, tenant: str, items: list[MemoryItem], done: set[str], dry_run: bool
) -> Flow[tuple[int, int]]:
    """One page with ``force``: every memory and every statement not done on an earlier page
    (``done``, their hashes) embedded by the model itself, not read from the cache, and
    written over what the store and the cache held; with ``dry_run`` only counted."""
    model = rt.embedder.model_id
    wanted = statement_texts(i.content for i in items) if used(rt) else []
    fresh = [t for t in dict.fromkeys(wanted) if text_hash(t) not in done]
    done.update(text_hash(t) for t in fresh)
    if dry_run or not items:
        return len(items), len(fresh)
    texts = list(dict.fromkeys([*(i.content for i in items), *fresh]))
    vectors = yield from embed(texts)
    by_text = dict(zip(texts, vectors, strict=True))
    changes: list[Change] = [
        CachePut(model, tuple((text_hash(t), v) for t, v in by_text.items())),
        SetVectors(tenant, model, tuple((i.id, by_text[i.content]) for i in items)),
    ]
    yield from call(Write(tuple(changes)))
    return len(items), len(fresh)
