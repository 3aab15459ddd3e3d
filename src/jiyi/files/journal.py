"""The intent journal: what a crash could leave half done, so the next start repairs it
without scanning the database.

Before a write that must reach both the database and the files, an *intent* naming the
affected scopes is made durable in ``ROOT/.jiyi/journal/<uuid>.json``, and its writer
holds an ``flock`` on it. The intent is removed once files and database agree. A killed
process leaves its intent behind, unlocked (the kernel drops the lock), so whoever opens
the workspace next finds it and syncs just those scopes; intents still locked belong
to a live writer and are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from jiyi.files.disk import fsync_dir, lock_fd
from jiyi.files.layout import ScopeRef
from jiyi.model import Scope


@dataclass
class Intent:
    """One journal entry, locked by this process while it is held."""

    path: Path
    kind: str  # "api": an API write; "sync": a sync applying file edits
    refs: tuple[ScopeRef, ...]
    prefer: str | None = None
    _fd: int | None = field(default=None, repr=False)

    def done(self) -> None:
        """Files and database agree: forget the intent."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.release()

    def release(self) -> None:
        """Stop holding the intent but keep it, for the next start to repair."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # an abandoned flow must not keep the lock forever
        with contextlib.suppress(Exception):
            self.release()


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def begin(self, kind: str, refs: tuple[ScopeRef, ...], prefer: str | None = None) -> Intent:
        """Write an intent durably (locked before it becomes visible under its name)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            lock_fd(fd, wait=True)  # a new file: nobody else holds it
            body = {
                "kind": kind,
                "prefer": prefer,
                "scopes": [[r.tenant_id, r.scope.value, r.scope_id] for r in refs],
            }
            os.write(fd, json.dumps(body, ensure_ascii=False).encode("utf-8"))
            os.fsync(fd)
            path = self.directory / f"{uuid.uuid4().hex}.json"
            os.rename(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_dir(self.directory)
        return Intent(path, kind, refs, prefer, fd)

    def pending(self) -> bool:
        """Whether any intent (or a temp file of one a writer never finished) is on
        disk (cheap: one directory listing)."""
        try:
            return any(True for _ in self.directory.iterdir())
        except FileNotFoundError:
            return False

    def claim(self) -> list[Intent]:
        """Intents whose writers are gone, now locked by the caller (oldest first)."""
        try:
            names = list(self.directory.iterdir())
        except FileNotFoundError:
            return []
        entries = sorted(names, key=_age)
        claimed: list[Intent] = []
        for path in entries:
            fd = _lock_now(path)
            if fd is None:
                continue
            if path.suffix != ".json":  # a temp file its writer never renamed
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)
                continue
            intent = _read(path, fd)
            if intent is None:  # unreadable: it can name nothing to repair
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)
                continue
            claimed.append(intent)
        return claimed


def _age(path: Path) -> tuple[float, str]:
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:  # removed meanwhile by its writer
        return (0.0, path.name)


def _lock_now(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    if not lock_fd(fd, wait=False):
        os.close(fd)
        return None
    return fd


def _read(path: Path, fd: int) -> Intent | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        refs = tuple(ScopeRef(str(t), Scope(s), str(i)) for t, s, i in data["scopes"])
        prefer = data.get("prefer")
        kind = str(data["kind"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Intent(path, kind, refs, prefer if prefer in ("file", "db") else None, fd)
