"""Where the files live, and which memories they hold.

A workspace is one root directory::

    ROOT/.gitignore                          ".jiyi/" (the internal state is not versioned)
    ROOT/<tenant>/<scope>/<scope_id>/memory.md      semantic memory
    ROOT/<tenant>/<scope>/<scope_id>/learnings.md   procedural memory (skill, pattern)
    ROOT/.jiyi/state/<tenant>/<scope>/<scope_id>.json   what the files held at the last sync
    ROOT/.jiyi/locks/...                     one lock file per scope
    ROOT/.jiyi/journal/<uuid>.json           intents of writes in flight (crash repair)
    ROOT/.jiyi/tmp/                          temporary files of atomic writes

Tenant and scope ids become directory names by :func:`encode_name`: lower-case ASCII
letters, digits, ``_``, ``-`` and ``.`` stay, everything else (upper case included, so two
ids never share a directory on a case-insensitive file system) is percent-encoded as
UTF-8; a name never starts with a dot; over-long names are cut and end in ``~`` and a
hash.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote

from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, MemoryType, Scope, Status, scope_key

MEMORY_FILE = "memory.md"
LEARNINGS_FILE = "learnings.md"
FILE_NAMES: tuple[str, ...] = (MEMORY_FILE, LEARNINGS_FILE)

MEMORY_SECTIONS: tuple[MemoryType, ...] = (
    MemoryType.PREFERENCE,
    MemoryType.FACT,
    MemoryType.HABIT,
    MemoryType.EVENT,
    MemoryType.CONTEXT,
    MemoryType.CONSTRAINT,
    MemoryType.DECISION,
)
LEARNING_SECTIONS: tuple[MemoryType, ...] = (MemoryType.SKILL, MemoryType.PATTERN)

EXCLUDED_TAGS = frozenset({"episode", "profile"})
"""Episodes (the episodic layer) and profiles have their own records, not these files."""

FILES_ACTOR = "files"
"""The history actor of every change a sync makes."""

STATE_DIR = ".jiyi"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.")
_MAX_NAME = 120  # bytes; file systems allow 255, paths should stay readable


def file_for(memory_type: MemoryType) -> str:
    """The file a memory of this type is written to."""
    return LEARNINGS_FILE if memory_type in LEARNING_SECTIONS else MEMORY_FILE


def sections_of(name: str) -> tuple[MemoryType, ...]:
    return LEARNING_SECTIONS if name == LEARNINGS_FILE else MEMORY_SECTIONS


def is_file_memory(item: MemoryItem, now: datetime) -> bool:
    """Whether the files show this item: active, unexpired, not a raw turn or document
    chunk (those have a ``thread_id``), not an episode nor a profile."""
    return (
        item.status is Status.ACTIVE
        and item.thread_id is None
        and not EXCLUDED_TAGS.intersection(item.tags)
        and (item.expires_at is None or item.expires_at > now)
    )


def encode_name(value: str) -> str:
    """A file-system-safe, case-insensitively unique directory name for an id."""
    parts: list[str] = []
    for ch in value:
        if ch in _SAFE:
            parts.append(ch)
        else:
            parts.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    name = "".join(parts)
    if name.startswith("."):
        name = "%2E" + name[1:]  # never hidden, never "." or ".."
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
        cut = name[: _MAX_NAME - len(digest) - 1]
        if "%" in cut[-2:]:
            cut = cut[: cut.rindex("%")]
        name = f"{cut}~{digest}"
    return name


def decode_name(name: str) -> str | None:
    """The id a directory name stands for; None when the name is not one
    :func:`encode_name` makes (or is a cut one: its id is in the scope's state)."""
    if "~" in name or not name:
        return None
    try:
        value = unquote(name, errors="strict")
    except UnicodeDecodeError:
        return None
    return value if encode_name(value) == name else None


@dataclass(frozen=True, order=True)
class ScopeRef:
    """One memory space whose files are kept: tenant, scope and scope id."""

    tenant_id: str
    scope: Scope
    scope_id: str

    @property
    def key(self) -> str:
        return scope_key(self.scope, self.scope_id)

    @property
    def ids(self) -> dict[str, str]:
        """The keyword arguments that name this scope in the Memory API."""
        return {f"{self.scope.value}_id": self.scope_id, "scope": self.scope.value}

    @classmethod
    def of(cls, item: MemoryItem) -> ScopeRef:
        assert item.scope_id is not None  # the model guarantees it
        return cls(item.tenant_id, item.scope, item.scope_id)

    @classmethod
    def from_key(cls, tenant_id: str, key: str) -> ScopeRef:
        scope, _, value = key.partition(":")
        return cls(tenant_id, Scope(scope), value)

    def describe(self) -> str:
        return f"{self.scope.value} {self.scope_id}"


class Workspace:
    """Paths inside one workspace root (no I/O besides :meth:`scan`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if isinstance(root, str) and not root.strip():
            raise InvalidInput("the files directory must not be empty", field="files")
        if not isinstance(root, str | os.PathLike):
            raise InvalidInput(f"files must be a directory path, not {type(root).__name__}", field="files")
        path = Path(root).expanduser()
        if path.exists() and not path.is_dir():
            raise InvalidInput(f"files: {path} exists and is not a directory", field="files")
        self.root = path.resolve()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def internal(self) -> Path:
        return self.root / STATE_DIR

    @property
    def journal_dir(self) -> Path:
        return self.internal / "journal"

    @property
    def tmp_dir(self) -> Path:
        return self.internal / "tmp"

    def _parts(self, ref: ScopeRef) -> tuple[str, str, str]:
        return encode_name(ref.tenant_id), ref.scope.value, encode_name(ref.scope_id)

    def scope_dir(self, ref: ScopeRef) -> Path:
        tenant, scope, name = self._parts(ref)
        return self.root / tenant / scope / name

    def file_path(self, ref: ScopeRef, name: str) -> Path:
        return self.scope_dir(ref) / name

    def state_path(self, ref: ScopeRef) -> Path:
        tenant, scope, name = self._parts(ref)
        return self.internal / "state" / tenant / scope / f"{name}.json"

    def lock_path(self, ref: ScopeRef) -> Path:
        tenant, scope, name = self._parts(ref)
        return self.internal / "locks" / tenant / scope / f"{name}.lock"

    def relative(self, ref: ScopeRef, name: str) -> str:
        """A file's path relative to the root, with ``/`` (what reports show)."""
        return self.file_path(ref, name).relative_to(self.root).as_posix()

    def scan(self, tenant_id: str) -> tuple[list[ScopeRef], list[tuple[str, str]]]:
        """Scopes of a tenant that have files or a state on disk, and directories that
        look like scopes but are not (path, why)."""
        found: set[ScopeRef] = set()
        odd: list[tuple[str, str]] = []
        tenant = encode_name(tenant_id)
        for scope in Scope:
            base = self.root / tenant / scope.value
            if base.is_dir():
                for entry in sorted(base.iterdir()):
                    if not entry.is_dir() or not any((entry / n).is_file() for n in FILE_NAMES):
                        continue
                    value = decode_name(entry.name)
                    if value is None:
                        value = self._id_from_state(tenant_id, scope, entry.name)
                    if value is None:
                        rel = entry.relative_to(self.root).as_posix()
                        meant = unquote(entry.name)
                        odd.append(
                            (
                                rel,
                                f"{rel} is not read: the files of {scope.value} {meant!r} belong in "
                                f"{encode_name(meant)} (directory names keep lower-case letters, digits, "
                                "_ - . and write anything else as %XX); rename it",
                            )
                        )
                        continue
                    found.add(ScopeRef(tenant_id, scope, value))
            states = self.internal / "state" / tenant / scope.value
            if states.is_dir():
                for entry in sorted(states.glob("*.json")):
                    value = decode_name(entry.stem) or self._id_from_state(tenant_id, scope, entry.stem)
                    if value is not None:
                        found.add(ScopeRef(tenant_id, scope, value))
        return sorted(found), odd

    def _id_from_state(self, tenant_id: str, scope: Scope, name: str) -> str | None:
        from jiyi.files.state import read_scope_id

        path = self.internal / "state" / encode_name(tenant_id) / scope.value / f"{name}.json"
        return read_scope_id(path)
