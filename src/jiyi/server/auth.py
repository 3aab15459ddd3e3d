"""API keys for the REST service and the MCP server over HTTP: hashed at rest, each bound
to one tenant and one role.

A key is shown once, when it is made, and looks like ``jiyi_<id>_<secret>``:

* ``id`` (12 hex characters) is public. It names the key in logs, in the history
  (``actor``) and in ``metadata.created_by`` of the memories it adds.
* ``secret`` (32 random bytes, URL-safe base64) is never stored. The key file keeps
  ``sha256(salt || secret)`` with a random 16-byte salt per key. The secret carries 256
  bits of entropy, so a fast hash is enough (nothing to brute-force); a slow one
  (scrypt) would only cost every request milliseconds.

The key file is JSON (``{"keys": [...]}``), written atomically with mode 0600.
:class:`ApiKeys` loaded with :meth:`ApiKeys.load` re-reads it when it changes on disk,
so a key added or revoked with :func:`create_key` / :func:`revoke_key` takes effect
without a restart.

Roles, from most to least powerful: ``owner`` and ``admin`` may do everything in their
tenant; ``editor`` may read everything, create memories and change or delete only the
memories it created; ``viewer`` may only read.

Project membership: an ``editor`` or ``viewer`` key may name the projects it belongs to
(``projects``; None, the default, makes it a member of every project of its tenant).
Project memories are then seen per their visibility (see :class:`jiyi.store.base.Viewer`
and docs/permissions.md): ``public`` by every key of the tenant, ``members`` by member
keys, ``owner_only`` by the key that created them; owner and admin keys see everything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from jiyi.errors import InvalidInput
from jiyi.model import MAX_ID_LENGTH, utcnow
from jiyi.store.base import Viewer
from jiyi.who import Caller

PREFIX = "jiyi_"
ID_CHARS = 12
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
"""Addresses a server without keys may bind: only this machine can reach them."""


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    EDITOR = "editor"
    VIEWER = "viewer"

    @property
    def a_key(self) -> str:
        """ "an owner key", "a viewer key": for messages."""
        return ("an " if self.value[0] in "aeiou" else "a ") + self.value + " key"

    @property
    def can_write(self) -> bool:
        return self is not Role.VIEWER

    @property
    def can_edit_any(self) -> bool:
        """May change or delete memories created by other keys (and import)."""
        return self in (Role.OWNER, Role.ADMIN)


@dataclass(frozen=True)
class KeyRecord:
    """One stored key: never the secret, only its salted hash."""

    id: str
    tenant: str
    role: Role
    salt: str
    hash: str
    created_at: str
    label: str | None = None
    projects: tuple[str, ...] | None = None
    """The projects this key is a member of; None: every project of the tenant."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["role"] = self.role.value
        if self.projects is None:
            del data["projects"]  # key files stay as they were for keys without a list
        else:
            data["projects"] = list(self.projects)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRecord:
        try:
            return cls(
                id=str(data["id"]),
                tenant=str(data["tenant"]),
                role=Role(data["role"]),
                salt=str(data["salt"]),
                hash=str(data["hash"]),
                created_at=str(data.get("created_at", "")),
                label=data.get("label"),
                projects=None if data.get("projects") is None else check_projects(data["projects"]),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise InvalidInput(f"bad key record in the key file: {exc}", field="keys") from None


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, its tenant, its role and its projects (None: all)."""

    key_id: str
    tenant: str
    role: Role
    projects: tuple[str, ...] | None = None

    @property
    def viewer(self) -> Viewer:
        """What this key may see: owner and admin keys see everything of their tenant."""
        return Viewer(actor=self.key_id, projects=self.projects, sees_all=self.role.can_edit_any)

    def member_of(self, project_id: str | None) -> bool:
        return self.viewer.member_of(project_id)

    @property
    def caller(self) -> Caller:
        """This key as the library's caller value: its tenant, what it sees, and its id
        as the actor in the history (built once per request; see :mod:`jiyi.who`)."""
        return Caller(tenant_id=self.tenant, viewer=self.viewer, actor=self.key_id)


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode("utf-8")).hexdigest()


def _check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > MAX_ID_LENGTH:
        raise InvalidInput(f"tenant must be a non-empty string of at most {MAX_ID_LENGTH} characters")
    return tenant


def _check_role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidInput(
            f"unknown role {role!r}; use one of {', '.join(r.value for r in Role)}", field="role"
        ) from None


def check_projects(projects: Iterable[str]) -> tuple[str, ...]:
    """A key's project list, validated: project ids, no blanks, duplicates dropped."""
    if isinstance(projects, str) or not isinstance(projects, Iterable):
        raise InvalidInput("projects must be a list of project ids", field="projects")
    out: list[str] = []
    for p in projects:
        if not isinstance(p, str) or not p.strip() or len(p) > MAX_ID_LENGTH:
            raise InvalidInput(
                f"project id {p!r} must be a non-empty string of at most {MAX_ID_LENGTH} characters",
                field="projects",
            )
        if p not in out:
            out.append(p)
    return tuple(out)


def parse_token(token: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed key, else None."""
    if not token.startswith(PREFIX):
        return None
    key_id, sep, secret = token[len(PREFIX) :].partition("_")
    if not sep or len(key_id) != ID_CHARS or not secret:
        return None
    if any(c not in "0123456789abcdef" for c in key_id):
        return None
    return key_id, secret


class ApiKeys:
    """A set of API keys, in memory or backed by a JSON file (reloaded when it changes)."""

    def __init__(self, records: Iterable[KeyRecord] = (), *, path: Path | None = None) -> None:
        self._records: dict[str, KeyRecord] = {r.id: r for r in records}
        self._path = path
        self._mtime: int | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ file

    @classmethod
    def load(cls, path: str | Path) -> ApiKeys:
        """Keys from a key file (an empty set when the file does not exist yet)."""
        keys = cls(path=Path(path))
        keys._reload(force=True)
        return keys

    @staticmethod
    def _read(path: Path) -> list[KeyRecord]:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"key file {path} is not valid JSON: {exc}", field="keys") from None
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise InvalidInput(f'key file {path} must hold {{"keys": [...]}}', field="keys")
        return [KeyRecord.from_json(r) for r in data["keys"]]

    def _reload(self, *, force: bool = False) -> None:
        if self._path is None:
            return
        try:
            mtime: int | None = self._path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if not force and mtime == self._mtime:
            return
        with self._lock:
            self._records = {r.id: r for r in self._read(self._path)}
            self._mtime = mtime

    def save(self, path: str | Path | None = None) -> None:
        """Write the key file atomically, readable by its owner only."""
        target = Path(path) if path is not None else self._path
        if target is None:
            raise InvalidInput("these keys have no file; pass a path", field="path")
        target.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"keys": [r.to_json() for r in self._records.values()]}, indent=2)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            os.chmod(tmp, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(payload + "\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------ keys

    def __len__(self) -> int:
        self._reload()
        return len(self._records)

    def records(self) -> list[KeyRecord]:
        self._reload()
        return list(self._records.values())

    def add(
        self,
        tenant: str,
        role: Role | str,
        *,
        label: str | None = None,
        projects: Iterable[str] | None = None,
    ) -> tuple[KeyRecord, str]:
        """Make a key; returns its record and the plaintext key (shown once, never stored).

        ``projects`` makes an editor or viewer key a member of those projects only (None:
        of every project; an empty list: of none)."""
        tenant = _check_tenant(tenant)
        checked = _check_role(role)
        members = None if projects is None else check_projects(projects)
        if members is not None and checked.can_edit_any:
            raise InvalidInput(
                f"an {checked.value} key sees every project of its tenant; "
                "give projects only to editor and viewer keys",
                field="projects",
            )
        key_id = secrets.token_hex(ID_CHARS // 2)
        while key_id in self._records:  # pragma: no cover - 48 random bits
            key_id = secrets.token_hex(ID_CHARS // 2)
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        record = KeyRecord(
            id=key_id,
            tenant=tenant,
            role=checked,
            salt=salt,
            hash=_digest(salt, secret),
            created_at=utcnow().isoformat(),
            label=label,
            projects=members,
        )
        self._records[key_id] = record
        return record, f"{PREFIX}{key_id}_{secret}"

    def revoke(self, key_id: str) -> bool:
        """Forget a key; True if it existed."""
        return self._records.pop(key_id, None) is not None

    def verify(self, token: str) -> Principal | None:
        """The principal of a valid key, else None (constant-time comparison)."""
        parsed = parse_token(token.strip())
        if parsed is None:
            return None
        self._reload()
        key_id, secret = parsed
        record = self._records.get(key_id)
        if record is None:
            return None
        if not hmac.compare_digest(_digest(record.salt, secret), record.hash):
            return None
        return Principal(key_id=record.id, tenant=record.tenant, role=record.role, projects=record.projects)


def create_key(
    store_path: str | Path,
    tenant: str,
    role: Role | str,
    *,
    label: str | None = None,
    projects: Iterable[str] | None = None,
) -> str:
    """Add a key to the key file at ``store_path`` (created if missing); returns the
    plaintext key. Print it once: only its salted hash is kept. ``projects``: see
    :meth:`ApiKeys.add`."""
    keys = ApiKeys.load(store_path)
    _, plaintext = keys.add(tenant, role, label=label, projects=projects)
    keys.save()
    return plaintext


def revoke_key(store_path: str | Path, key_id: str) -> bool:
    """Remove the key ``key_id`` from the key file; True if it was there."""
    keys = ApiKeys.load(store_path)
    removed = keys.revoke(key_id)
    if removed:
        keys.save()
    return removed
