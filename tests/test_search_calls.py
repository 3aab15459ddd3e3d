"""What a search no longer asks per candidate (session 24): the same answers as the calls
it saves, every case; and what it asks for a replacement its pool lacked (its vector)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from jiyi.model import MemoryItem, MemoryType
from jiyi.read.fusion import continuations, named_speakers, people, replies
from jiyi.read.rank import _WORD_CHARS
from jiyi.store.base import Candidate
from jiyi.store.sqlcommon import ts
from jiyi.store.sqlite import _RowItems


def _other_person(said: Mapping[str, object], other: Mapping[str, object]) -> bool:
    """The test the reply and continuation features asked before session 24, per pair."""
    mine, theirs = said.get("speaker"), other.get("speaker")
    return (
        bool(mine)
        and bool(theirs)
        and mine != theirs
        and "assistant" not in (said.get("role"), other.get("role"))
    )


def _said(speaker: object, role: object) -> Candidate:
    metadata = {k: v for k, v in (("speaker", speaker), ("role", role)) if v is not None}
    item = MemoryItem(content="Did you go?", user_id="u", memory_type=MemoryType.EVENT, metadata=metadata)
    return Candidate(item, 0.5, None, None)


def test_replies_and_continuations_decide_every_turn_as_the_pair_test_did() -> None:
    kinds = [
        _said(speaker, role)
        for speaker in (None, "", "Ann", "Bob", 7)
        for role in (None, "user", "assistant")
    ]
    prev = np.array([-1, 0, 1], dtype=np.int64)
    own = np.array([0.25, 0.5, 0.75])
    for pool in itertools.product(kinds, repeat=3):
        md = [c.item.metadata for c in pool]
        speakers = people(pool)
        assert speakers[0] == [m.get("speaker") for m in md]
        reply = [0.0] + [own[i - 1] if _other_person(md[i], md[i - 1]) else 0.0 for i in (1, 2)]
        assert replies(pool, prev, own, speakers[1]).tolist() == reply
        same = md[0].get("speaker") == md[2].get("speaker")
        goes_on = same and _other_person(md[2], md[1]) and _other_person(md[0], md[1])
        assert continuations(pool, prev, own, speakers).tolist() == [0.0, 0.0, own[0] if goes_on else 0.0]
        assert named_speakers(speakers[0], "what did ann say").tolist() == [
            1.0 if m.get("speaker") == "Ann" else 0.0 for m in md
        ]


def test_word_chars_are_the_ranges_the_term_coverage_tested() -> None:
    def word_char(ch: str) -> bool:  # the function before session 24
        return "0" <= ch <= "9" or "a" <= ch <= "z" or "\u00c0" <= ch <= "\u024f"

    for code in itertools.chain(range(0x3000), range(0x4E00, 0x4E80), range(0xFF00, 0xFF80)):
        assert (chr(code) in _WORD_CHARS) == word_char(chr(code)), hex(code)


def test_row_items_overlay_usage_once_per_touch() -> None:
    rows = _RowItems(size=4)
    item = MemoryItem(content="I live in Lyon", user_id="u", memory_type=MemoryType.FACT)
    here, other, gone = (1, 0, "a"), (2, 0, "b"), (3, 0, "c")
    rows.put(here, item, "live lyon")
    rows.put(other, item, None)
    assert rows.missing([here, gone, other]) == {3: gone}
    unchanged = {1: (item.access_count, ts(item.last_used_at))}
    # No usage columns (or not here): None; the same usage: the cached item itself.
    assert rows.used([gone, other, here], unchanged) == [None, None, (item, "live lyon")]
    used = {1: (3, "2026-01-02T00:00:00.000000Z")}
    [(touched, terms)] = rows.used([here], used)  # type: ignore[misc]
    assert terms == "live lyon" and touched is not item
    assert touched.access_count == 3 and ts(touched.last_used_at) == used[1][1]
    assert rows.used([here], used) == [(touched, "live lyon")]  # copied once, then kept
    assert rows.used([here], used)[0][0] is touched  # type: ignore[index]


def test_a_replacement_found_through_what_it_superseded_carries_its_vector(tmp_path: Path) -> None:
    """MMR and the version tests compare candidates by their vectors: a replacement the
    pool did not hold, brought in by the item it superseded, is loaded with its own."""
    from jiyi import Memory
    from jiyi.driver import run
    from jiyi.model import Relation, RelationType, Status
    from jiyi.read.search import follow_replacements
    from jiyi.store.base import Filter, GetItems, VectorsFor

    with Memory.open(tmp_path / "m.db", embedder="hash:64") as mem:
        new, old = "new-car", "old-car"
        mem.import_items(
            [
                {
                    "id": new,
                    "content": "I drive a Model 3 now.",
                    "user_id": "u",
                    "relations": [{"type": "supersedes", "target_id": old}],
                },
                {
                    "id": old,
                    "content": "I drive a Honda Civic.",
                    "user_id": "u",
                    "status": "superseded",
                    "relations": [{"type": "superseded_by", "target_id": new}],
                },
            ]
        )
        rt = mem.runtime
        (item,) = rt.store.execute(GetItems("default", (old,)))
        assert item.relations == (Relation(type=RelationType.SUPERSEDED_BY, target_id=new),)
        stored = rt.store.execute(VectorsFor("default", "hash:64", (new,)))[new]
        flt = Filter(tenant_id="default", statuses=(Status.ACTIVE, Status.SUPERSEDED), include_expired=True)
        replaced = run(follow_replacements(rt, [Candidate(item, 0.8, 1.5, None)], flt, (Status.ACTIVE,)), rt)
        (cand,) = replaced.candidates
        assert cand.item.id == new and (cand.cosine, cand.keyword) == (0.8, 1.5)  # the old one's evidence
        assert cand.vector is not None and np.asarray(cand.vector).tobytes() == np.asarray(stored).tobytes()
        assert replaced.retired == {new: ("I drive a Honda Civic.",)}
