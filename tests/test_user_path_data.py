"""bench/data/user_path.jsonl and the conversation files beside it are well-formed: each
check can only pass on the value the user gave last."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "user_path.jsonl"
FIELDS = {"id", "batch", "lang", "old", "new", "query", "expect"}


def test_every_pair_is_complete_and_its_check_needs_the_new_value() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 60
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == FIELDS, r["id"]
        assert r["batch"] in {"probe-1", "probe-2", "probe-3", "probe-4"} and r["lang"] in {"zh", "en"}
        assert all(isinstance(r[k], str) and r[k].strip() for k in ("old", "new", "query")), r["id"]
        if r["expect"] is not None:
            # a word of the current value: in the later statement, not in the earlier one
            assert r["expect"] in r["new"] and r["expect"] not in r["old"], r["id"]


def _conversations(name: str) -> list[dict[str, Any]]:
    path = DATA.parent / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _check_conversation(c: dict[str, Any], ids: set[str]) -> None:
    assert c["id"] not in ids
    ids.add(str(c["id"]))
    sessions = c["sessions"]
    assert isinstance(sessions, list) and 2 <= len(sessions) <= 4
    said = [[t for role, t in s["turns"] if role == "user"] for s in sessions]
    for q in c["questions"]:
        assert q["kind"] in {"changed", "unchanged", "added"}, c["id"]
        holding = [i for i, turns in enumerate(said) for t in turns if any(e in t for e in q["expect"])]
        assert holding, (c["id"], q["query"])
        if q["kind"] == "changed":
            # the outdated wording was said in an earlier session than the current value
            old = [i for i, turns in enumerate(said) for t in turns if q["old"] in t]
            assert old and min(old) < max(holding), (c["id"], q["query"])


def test_every_conversation_can_only_pass_on_what_the_user_said_last() -> None:
    ids: set[str] = set()
    for name in ("now_dev.jsonl", "now_held.jsonl", "now_test.jsonl"):
        convs = _conversations(name)
        assert len(convs) == 16 and sorted(c["lang"] for c in convs) == ["en"] * 8 + ["zh"] * 8
        for c in convs:
            _check_conversation(c, ids)


def test_the_other_languages_can_only_pass_on_what_the_user_said_last() -> None:
    """now_multi.jsonl: Spanish, French, German, Japanese and Korean conversations, ids
    apart from the other files'. A changed fact's current words appear nowhere (in either
    role's turns) before the session where the user first says them, so that no memory of
    the outdated value can hold them."""
    ids = {
        str(c["id"])
        for name in ("now_dev.jsonl", "now_held.jsonl", "now_test.jsonl")
        for c in _conversations(name)
    }
    convs = _conversations("now_multi.jsonl")
    assert len(convs) == 12
    assert sorted(c["lang"] for c in convs) == ["de"] * 2 + ["es"] * 3 + ["fr"] * 2 + ["ja"] * 3 + ["ko"] * 2
    for c in convs:
        _check_other_language_conversation(c, ids)


def _check_other_language_conversation(c: dict[str, Any], ids: set[str]) -> None:
    """:func:`_check_conversation`, and a changed fact's current words in no turn of either
    role before the session where the user first says them."""
    _check_conversation(c, ids)
    turns = [[t for _, t in s["turns"]] for s in c["sessions"]]
    for q in c["questions"]:
        first = min(
            i
            for i, s in enumerate(c["sessions"])
            for role, t in s["turns"]
            if role == "user" and any(e in t for e in q["expect"])
        )
        if q["kind"] == "changed":
            earlier = [t for ts in turns[:first] for t in ts]
            assert not any(e in t for t in earlier for e in q["expect"]), (c["id"], q["query"])
        else:
            assert q["old"] is None, (c["id"], q["query"])


def test_the_other_languages_development_set_can_only_pass_on_what_the_user_said_last() -> None:
    """now_multi_dev.jsonl: the development set beside now_multi (Spanish, French, German,
    Japanese, Korean, Portuguese, Russian), checked as it is, ids apart from every other file's."""
    ids = {
        str(c["id"])
        for name in ("now_dev.jsonl", "now_held.jsonl", "now_test.jsonl", "now_multi.jsonl")
        for c in _conversations(name)
    }
    convs = _conversations("now_multi_dev.jsonl")
    assert len(convs) == 14
    assert sorted(c["lang"] for c in convs) == sorted(
        ["es"] * 3 + ["fr"] * 2 + ["de"] * 2 + ["ja"] * 3 + ["ko"] * 2 + ["pt", "ru"]
    )
    for c in convs:
        _check_other_language_conversation(c, ids)
