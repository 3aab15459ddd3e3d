"""JSON lines, read once for every edge (``jiyi import``, ``POST /v1/import``)."""

from __future__ import annotations

import json
from typing import Any

from jiyi.errors import InvalidInput
from jiyi.model import MAX_JSON_DEPTH


def parse_jsonl(text: str, *, source: str = "the input", field: str | None = None) -> list[dict[str, Any]]:
    """One JSON object per non-blank line of ``text``; an :class:`InvalidInput` naming
    ``source`` and the line number for the first line that is not one."""
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{source} line {number}: not valid JSON ({exc.msg})", field=field) from None
        except RecursionError:  # too deep for Python's parser: far past what a JSON field may have
            raise InvalidInput(
                f"{source} line {number}: JSON is nested deeper than {MAX_JSON_DEPTH} levels", field=field
            ) from None
        if not isinstance(record, dict):
            raise InvalidInput(f"{source} line {number}: expected a JSON object", field=field)
        records.append(record)
    return records


def decode_jsonl(data: bytes, *, source: str = "the input", field: str | None = None) -> list[dict[str, Any]]:
    """:func:`parse_jsonl` of UTF-8 bytes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{source} must be UTF-8 JSON lines", field=field) from None
    return parse_jsonl(text, source=source, field=field)
