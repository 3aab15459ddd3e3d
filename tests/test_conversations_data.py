"""bench/data/conversations_zh_en.json is well-formed for bench/locomo.py: LoCoMo's layout,
session dates in LoCoMo's format and in order, unique dia_ids, and every question has a
valid category and evidence that names turns of its own conversation; at least two
questions per conversation ask what is true now (``"now": true``: a value that changed,
whose evidence is the latest statement only; ``"superseded"`` names the earlier turn it
replaced)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "conversations_zh_en.json"
# LoCoMo's session date format, "1:56 pm on 8 May, 2023", as bench/locomo.py reads it.
DATE_TIME = re.compile(r"\d{1,2}:\d{2} [ap]m on \d{1,2} [A-Z][a-z]+, \d{4}")
SESSION = re.compile(r"session_(\d+)")
CATEGORIES = {1, 2, 3, 4, 5}


def turn_order(dia_id: str) -> tuple[int, int]:
    session, turn = dia_id[1:].split(":")
    return int(session), int(turn)


def samples() -> list[dict[str, Any]]:
    with open(DATA, encoding="utf-8") as fh:
        data = json.load(fh)
    assert isinstance(data, list)
    return data


def test_ten_conversations_alternating_halves() -> None:
    data = samples()
    # --half-report splits conversations 1-5 / 6-10.
    assert len(data) == 10
    assert len({s["sample_id"] for s in data}) == 10


@pytest.mark.parametrize("sample", samples(), ids=lambda s: str(s["sample_id"]))
def test_conversation_well_formed(sample: dict[str, Any]) -> None:
    conv = sample["conversation"]
    speakers = {conv["speaker_a"], conv["speaker_b"]}
    assert len(speakers) == 2
    numbers = sorted(int(m[1]) for key in conv if (m := SESSION.fullmatch(key)))
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(numbers) >= 3
    dia_ids: set[str] = set()
    previous: datetime | None = None
    for n in numbers:
        stamp = conv[f"session_{n}_date_time"]
        assert DATE_TIME.fullmatch(stamp), stamp
        at = datetime.strptime(stamp, "%I:%M %p on %d %B, %Y")
        assert previous is None or at.date() > previous.date(), stamp
        previous = at
        turns = conv[f"session_{n}"]
        assert turns
        for i, turn in enumerate(turns, 1):
            assert turn["dia_id"] == f"D{n}:{i}"
            assert turn["speaker"] in speakers
            assert turn["text"].strip()
            dia_ids.add(turn["dia_id"])
    assert sample["qa"]
    for qa in sample["qa"]:
        assert qa["category"] in CATEGORIES, qa
        assert qa["question"].strip() and str(qa["answer"]).strip(), qa
        assert qa["evidence"], qa
        assert len(set(qa["evidence"])) == len(qa["evidence"]), qa
        for ev in qa["evidence"]:
            assert ev in dia_ids, (qa["question"], ev)
        assert qa.get("now", False) in (True, False), qa
        # The statement a "now" question's answer replaced: an earlier turn, never evidence.
        old = qa.get("superseded", [])
        assert not old or qa.get("now"), qa
        assert not set(old) & set(qa["evidence"]), qa
        for ev in old:
            assert ev in dia_ids, (qa["question"], ev)
            assert all(turn_order(ev) < turn_order(e) for e in qa["evidence"]), qa
    assert sum(1 for qa in sample["qa"] if qa.get("now")) >= 2
