"""Files as the source of truth (seed 002): memory.md and learnings.md per scope.

Open a Memory with ``files=DIR`` and every scope's memories are also kept as
human-editable, git-friendly markdown (``DIR/<tenant>/<scope>/<id>/memory.md`` for
semantic memory, ``learnings.md`` for skills and patterns; see :mod:`.layout`)::

    mem = Memory.open("memory.db", files="memories")
    mem.add("I prefer dark mode", user_id="alice", memory_type="preference")
    # memories/default/user/alice/memory.md now lists it; edit the file, then
    report = mem.sync_files(user_id="alice")

* API writes rewrite the files (:mod:`.mirror`), unless a person has unsynced edits.
* :func:`jiyi.files.flows.sync_files` merges file and database three ways (:mod:`.merge`).
* A crash between file and database loses nothing (:mod:`.journal`), and is repaired
  when a Memory is next opened with ``files=``.
* :class:`FileWatcher` / :func:`watch_files` sync edits as they happen (:mod:`.watch`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from jiyi.errors import InvalidInput, JiyiError
from jiyi.files.layout import ScopeRef, Workspace
from jiyi.files.mirror import FileMirrorStore, workspace_of
from jiyi.files.report import FileChange, FileConflict, FileError, SyncReport
from jiyi.files.watch import FileWatcher, watch_files
from jiyi.store.base import Store

if TYPE_CHECKING:
    from jiyi.runtime import Runtime

__all__ = [
    "FileChange",
    "FileConflict",
    "FileError",
    "FileMirrorStore",
    "FileWatcher",
    "ScopeRef",
    "SyncReport",
    "Workspace",
    "repair_files",
    "watch_files",
    "with_files",
]


def with_files(store: Store, files: str | Path | None) -> Store:
    """``store`` wrapped so API writes reach the files under ``files`` (unchanged when
    ``files`` is None or the store already keeps them there)."""
    if files is None:
        return store
    mirror = workspace_of(store)
    if mirror is not None:
        if mirror.workspace.root != Workspace(files).root:
            raise InvalidInput(
                f"the store already keeps its files in {mirror.workspace.root}, not {files}", field="files"
            )
        return store
    return FileMirrorStore(store, files)


def repair_files(rt: Runtime) -> SyncReport | None:
    """Sync the scopes a crashed process left half written (see :mod:`.journal`). Cheap
    when there is nothing to repair: one directory listing. Problems are logged, never
    raised: opening a Memory must not fail because a file needs attention."""
    mirror = workspace_of(rt.store)
    if mirror is None or not mirror.journal.pending():
        return None
    from jiyi.driver import run
    from jiyi.files.flows import recover_files

    try:
        report = run(recover_files(rt), rt)
    except JiyiError as exc:
        logging.getLogger("jiyi.files").warning("jiyi files: repairing after a crash failed: %s", exc)
        return None
    for conflict in report.conflicts:
        logging.getLogger("jiyi.files").warning(
            "jiyi files: conflict in %s (memory %s): %s", conflict.file, conflict.item_id, conflict.message
        )
    return report
