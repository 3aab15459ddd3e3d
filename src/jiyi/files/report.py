"""What a sync did (or, with ``dry_run``, would do), file by file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Direction = Literal["to_db", "to_file"]


@dataclass(frozen=True)
class FileChange:
    """One change: a file edit applied to the database (``to_db``), or a database change
    written into the file (``to_file``).

    ``action`` is ``added``, ``changed`` (text), ``moved`` (section, i.e. memory type),
    ``archived`` (line deleted), ``restored`` (line put back), ``reinforced`` (a new line
    repeated an existing memory, which got the mention instead) or ``removed`` (gone from
    the database, so gone from the file)."""

    file: str
    action: str
    direction: Direction
    item_id: str | None
    text: str
    line: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class FileConflict:
    """A memory changed differently in the file and in the database since the last
    sync. Neither side was overwritten; the file keeps the person's text. Resolve by
    editing the line to match, or sync with ``prefer="file"`` / ``prefer="db"``."""

    file: str
    item_id: str
    line: int | None
    file_text: str | None  # None: the line was deleted
    db_text: str | None  # None: archived, expired or deleted in the database
    file_type: str | None
    db_type: str | None

    @property
    def message(self) -> str:
        side_f = "deleted in the file" if self.file_text is None else f"file says {self.file_text!r}"
        side_d = "gone from the database" if self.db_text is None else f"database says {self.db_text!r}"
        if self.file_text is not None and self.db_text is not None and self.file_text == self.db_text:
            side_f = f"file has it under ## {self.file_type}"
            side_d = f"database under ## {self.db_type}"
        return f"{side_f}; {side_d}"


@dataclass(frozen=True)
class FileError:
    """A line (``line`` None: a whole file) that was not applied, and why. The line stays
    in the file as the person wrote it."""

    file: str
    line: int | None
    message: str
    text: str = ""


@dataclass(frozen=True)
class SyncReport:
    """The outcome of :meth:`~jiyi.memory.Memory.sync_files` over one or more scopes."""

    root: str
    dry_run: bool = False
    scopes: tuple[str, ...] = ()
    changes: tuple[FileChange, ...] = ()
    conflicts: tuple[FileConflict, ...] = ()
    errors: tuple[FileError, ...] = ()
    written: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No conflict and no error remains."""
        return not self.conflicts and not self.errors

    def count(self, direction: Direction, action: str | None = None) -> int:
        return sum(
            1 for c in self.changes if c.direction == direction and (action is None or c.action == action)
        )

    def files(self) -> list[str]:
        """Every file the report mentions, in path order."""
        names = {c.file for c in self.changes} | {c.file for c in self.conflicts}
        names |= {e.file for e in self.errors} | set(self.written)
        return sorted(names)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "scopes": list(self.scopes),
            "written": list(self.written),
            "files": {
                name: {
                    "changes": [asdict(c) for c in self.changes if c.file == name],
                    "conflicts": [
                        {**asdict(c), "message": c.message} for c in self.conflicts if c.file == name
                    ],
                    "errors": [asdict(e) for e in self.errors if e.file == name],
                }
                for name in self.files()
            },
        }


@dataclass
class ReportBuilder:
    root: str
    dry_run: bool
    scopes: list[str] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)
    conflicts: list[FileConflict] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    written: list[str] = field(default_factory=list)

    def build(self) -> SyncReport:
        return SyncReport(
            self.root,
            self.dry_run,
            tuple(self.scopes),
            tuple(self.changes),
            tuple(self.conflicts),
            tuple(self.errors),
            tuple(self.written),
        )
