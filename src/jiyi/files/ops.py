"""The file side of a sync as store operations.

Flows do no I/O: a sync *yields* these operations like any other store op, and the
:class:`~jiyi.files.mirror.FileMirrorStore` wrapper runs them (on a worker thread under
the async driver). Each runs under its scope's file lock and returns at once; no lock
is held between two of them, so a sync commits optimistically: :class:`CommitScope`
writes only if the files and state are still what :class:`ReadScope` returned.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from jiyi.effects import Ask
from jiyi.files.disk import OnDisk
from jiyi.files.journal import Intent
from jiyi.files.layout import FILE_NAMES, ScopeRef, is_file_memory
from jiyi.files.state import ScopeState
from jiyi.model import MemoryItem, Status
from jiyi.store.base import Filter, ListItems, Op

R = TypeVar("R")

Fingerprint = tuple[tuple[tuple[str, bool, str | None], ...], int]


@dataclass(frozen=True)
class ScopeSnapshot:
    """A scope's files as found on disk, and its state."""

    ref: ScopeRef
    files: dict[str, OnDisk]
    state: ScopeState | None

    @property
    def fingerprint(self) -> Fingerprint:
        return (
            tuple((name, self.files[name].exists, self.files[name].sha) for name in FILE_NAMES),
            self.state.serial if self.state is not None else -1,
        )


@dataclass(frozen=True)
class CommitResult:
    ok: bool  # False: files or state changed since the snapshot; read again and retry
    written: tuple[str, ...] = ()


class FileOp(Ask[R]):
    """An effect of the files layer (not a store operation): run by the handlers that
    :func:`jiyi.files.mirror.file_handlers` gives the runtime of a Memory opened with ``files=``."""

    __slots__ = ()


@dataclass(frozen=True)
class ReadScope(FileOp[ScopeSnapshot]):
    ref: ScopeRef


@dataclass(frozen=True)
class CommitScope(FileOp[CommitResult]):
    """Write the files (None: leave that one alone) and the state, if nothing changed
    since ``expected``."""

    ref: ScopeRef
    expected: Fingerprint
    texts: tuple[tuple[str, str | None], ...]
    state: ScopeState | None


@dataclass(frozen=True)
class ScanScopes(FileOp[tuple[list[ScopeRef], list[tuple[str, str]]]]):
    """Scopes of a tenant with files or state on disk, and odd directories (path, why)."""

    tenant_id: str


@dataclass(frozen=True)
class BeginIntent(FileOp[Intent]):
    refs: tuple[ScopeRef, ...]
    prefer: str | None = None


@dataclass(frozen=True)
class EndIntents(FileOp[None]):
    """``done``: remove the intents; otherwise only let go of them (kept for repair)."""

    intents: tuple[Intent, ...]
    done: bool = True


@dataclass(frozen=True)
class ClaimIntents(FileOp[list[Intent]]):
    """Intents left by processes that died, now held by the caller."""


@dataclass(frozen=True)
class WorkspaceRoot(FileOp[str]):
    """The workspace root (for reports)."""


def scope_items(ref: ScopeRef, now: datetime) -> Generator[Op[Any], Any, list[MemoryItem]]:
    """The scope's items the files hold, page by page (a scope, never the whole store)."""
    flt = Filter(tenant_id=ref.tenant_id, scope_keys=(ref.key,), statuses=(Status.ACTIVE,), now=now)
    items: list[MemoryItem] = []
    cursor: str | None = None
    while True:
        page = yield ListItems(flt, limit=1000, cursor=cursor)
        items.extend(i for i in page.items if is_file_memory(i, now))
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor
