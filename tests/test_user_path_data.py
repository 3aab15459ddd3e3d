"""bench/data/user_path.jsonl is well-formed: each pair's check can only pass on the new value."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "user_path.jsonl"
FIELDS = {"id", "batch", "lang", "old", "new", "query", "expect"}


def test_every_pair_is_complete_and_its_check_needs_the_new_value() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 36
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == FIELDS, r["id"]
        assert r["batch"] in {"probe-1", "probe-2", "probe-3"} and r["lang"] in {"zh", "en"}
        assert all(isinstance(r[k], str) and r[k].strip() for k in ("old", "new", "query")), r["id"]
        if r["expect"] is not None:
            # a word of the current value: in the later statement, not in the earlier one
            assert r["expect"] in r["new"] and r["expect"] not in r["old"], r["id"]
