"""What a scope's files looked like at the last sync (``ROOT/.jiyi/state/...json``).

* ``base``: the entries file and database last agreed on: the common ancestor of the
  three-way merge.
* ``overrides``: where the written files differ from ``base``: a conflicting line keeps
  the person's text (an entry), a held or deleted-but-conflicting line shows nothing
  (None).
* ``extras``: lines kept verbatim per file.
* ``files``: the SHA-256 of each file as last written; a file is *clean* when it still
  has that hash, and only clean files are rewritten after an API write.
* ``serial``: raised by every commit and by every API write that found the files
  edited, so a sync notices writes that happened while it ran.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jiyi.files.document import Extras, Placed
from jiyi.files.layout import FILE_NAMES, ScopeRef
from jiyi.model import Scope

FORMAT = 1


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ScopeState:
    ref: ScopeRef
    serial: int = 0
    files: dict[str, str | None] = field(default_factory=dict)
    base: dict[str, Placed] = field(default_factory=dict)
    overrides: dict[str, Placed | None] = field(default_factory=dict)
    extras: dict[str, Extras] = field(default_factory=dict)

    def shown(self) -> dict[str, Placed]:
        """What the written files show, by id."""
        out = {i: p for i, p in self.base.items() if i not in self.overrides}
        out.update({i: p for i, p in self.overrides.items() if p is not None})
        return out

    def content(self) -> dict[str, Any]:
        """Everything but the serial (to tell whether a commit changes anything)."""
        return {
            "format": FORMAT,
            "tenant_id": self.ref.tenant_id,
            "scope": self.ref.scope.value,
            "scope_id": self.ref.scope_id,
            "files": {name: self.files.get(name) for name in FILE_NAMES},
            "base": {i: self.base[i].to_json() for i in sorted(self.base)},
            "overrides": {i: (None if p is None else p.to_json()) for i, p in sorted(self.overrides.items())},
            "extras": {
                name: extras.to_json() for name, extras in sorted(self.extras.items()) if extras.places()
            },
        }

    def to_json(self) -> str:
        return json.dumps(
            {**self.content(), "serial": self.serial}, ensure_ascii=False, separators=(",", ":")
        )

    @classmethod
    def from_json(cls, text: str) -> ScopeState:
        """Parse a state file; ValueError (or KeyError/TypeError) when it is damaged."""
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown state format {data.get('format')!r}")
        ref = ScopeRef(str(data["tenant_id"]), Scope(data["scope"]), str(data["scope_id"]))
        files = {str(k): (None if v is None else str(v)) for k, v in data["files"].items()}
        base = {str(k): Placed.from_json(v) for k, v in data["base"].items()}
        overrides = {
            str(k): (None if v is None else Placed.from_json(v)) for k, v in data["overrides"].items()
        }
        extras = {str(k): Extras.from_json(v) for k, v in data.get("extras", {}).items()}
        return cls(ref, int(data["serial"]), files, base, overrides, extras)


def load_state(path: Path, ref: ScopeRef) -> ScopeState | None:
    """The scope's state, or None when there is none (or it is damaged, or belongs to
    another scope: then the next sync merges without a common ancestor, which reports
    differences as conflicts instead of guessing)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = ScopeState.from_json(text)
    except (ValueError, KeyError, TypeError):
        return None
    return state if state.ref == ref else None


def read_scope_id(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        value = data["scope_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None
