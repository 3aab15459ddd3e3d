"""HTTP helpers shared by the OpenAI-compatible clients (embeddings and chat)."""

from __future__ import annotations

import email.utils
import math
import os
from datetime import UTC, datetime
from typing import Any

import httpx

# Servers sometimes echo large bodies (HTML error pages); keep error messages readable.
_MAX_ERROR_CHARS = 300


def env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Parse ``Retry-After`` (seconds or an HTTP date); ``None`` when absent or unreadable."""
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def server_message(response: httpx.Response) -> str:
    """The server's own explanation: OpenAI's ``{"error": {"message"}}`` or the raw text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        if message is None:
            message = body.get("message") or body.get("detail")
    if message is None:
        message = response.text
    text = " ".join(str(message).split())
    if len(text) > _MAX_ERROR_CHARS:
        text = text[:_MAX_ERROR_CHARS] + "..."
    return text or "(empty body)"
