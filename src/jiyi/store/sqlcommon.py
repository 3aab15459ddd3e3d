"""Helpers shared by the SQL backends: time format, cursors, scope tokens, vector blobs,
the viewer condition."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime

import numpy as np

from jiyi.errors import InvalidInput
from jiyi.model import as_utc
from jiyi.store.base import Vector, Viewer

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def ts(value: datetime | None) -> str | None:
    """Fixed-width UTC text, so string order is time order."""
    if value is None:
        return None
    v = as_utc(value)
    # strftime("%Y") does not zero-pad years below 1000 on Linux, which would break ordering.
    return f"{v.year:04d}-{v:%m-%dT%H:%M:%S.%f}Z"


def viewer_clause(viewer: Viewer, a: str, in_projects: str, actor: str) -> str | None:
    """:meth:`Viewer.sees` as a condition over alias ``a`` (None: the viewer sees all).

    Other scopes and public items pass; ``members`` items need a membership, written by
    the backend as ``in_projects`` (``project_id`` among the viewer's projects, bound
    by the caller when ``viewer.projects`` is non-empty); ``owner_only`` items need their
    creator, the placeholder ``actor`` (bound when ``viewer.actor`` is set). Placeholders
    appear in that order."""
    if viewer.sees_all:
        return None
    seen = [f"{a}.scope <> 'project'", f"{a}.visibility = 'public'"]
    if viewer.projects is None:
        seen.append(f"{a}.visibility = 'members'")
    elif viewer.projects:
        seen.append(f"({a}.visibility = 'members' AND {in_projects})")
    if viewer.actor is not None:
        seen.append(f"({a}.visibility = 'owner_only' AND {a}.created_by = {actor})")
    return f"({' OR '.join(seen)})"


def encode_cursor(created_at: str, item_id: str) -> str:
    raw = json.dumps([created_at, item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not (isinstance(data, list) and len(data) == 2 and all(isinstance(x, str) for x in data)):
            raise ValueError
        created_at, item_id = data
        datetime.strptime(created_at[-27:], _TIME_FORMAT)  # must be a time this module wrote
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cursor {cursor[:40]!r} is not one this store issued", field="cursor") from exc
    return created_at, item_id


def _token(prefix: str, *parts: str) -> str:
    # A hash keeps arbitrary ids (spaces, colons, CJK) out of the keyword tokenizer's way.
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=10).hexdigest()
    return f"{prefix}{digest}"


def scope_token(tenant_id: str, scope_key: str) -> str:
    return _token("s", tenant_id, scope_key)


def tenant_token(tenant_id: str) -> str:
    return _token("t", tenant_id)


def to_blob(vector: Vector) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype=np.float32)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
