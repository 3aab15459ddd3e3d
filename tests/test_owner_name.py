"""The scope owner's name is no keyword in their own scope (jiyi.read.owner), and the
self-introductions it is read from (jiyi.profile_names)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jiyi import Memory
from jiyi.model import MemoryItem
from jiyi.profile_names import self_named, stated_name
from jiyi.read.owner import owner_terms
from jiyi.store.base import Candidate
from jiyi.text.tokenize import query_terms

IVAN = [
    "Меня зовут Иван Петров, я работаю инженером-программистом в банке.",
    "Моя жена Ольга преподаёт химию в школе.",
    "Каждое утро я пью чёрный кофе без сахара.",
    "По выходным я играю на гитаре.",
    "Летом мы планируем отпуск на Байкале.",
    "У меня аллергия на пенициллин.",
    "Мой сын Миша ходит в первый класс.",
]
DAVE = [
    "My name is Dave Miller and I work as a nurse in Leeds.",
    "My wife Anna teaches chemistry at a secondary school.",
    "Every morning I drink black coffee without sugar.",
    "I play the cello in an amateur orchestra on Thursdays.",
    "My colleague Priya runs the Berlin office.",
    "We are planning a holiday in Portugal this summer.",
    "I am allergic to penicillin.",
    "My daughter Mia is learning the violin.",
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "m.db") as m:
        m.import_items([{"content": c, "user_id": "ivan", "memory_type": "fact"} for c in IVAN])
        m.import_items([{"content": c, "user_id": "dave", "memory_type": "fact"} for c in DAVE])
        yield m


def _top(mem: Memory, query: str, user_id: str) -> str:
    return mem.search(query, user_id=user_id, touch=False)[0].item.content


def test_a_query_naming_the_owner_finds_the_first_person_memory(mem: Memory) -> None:
    # Without the rule the self-introduction came first on the name's keyword.
    assert _top(mem, "Чем занимается жена Ивана?", "ivan") == IVAN[1]
    assert _top(mem, "Where are Dave and his wife going this summer?", "dave") == DAVE[5]
    hit = next(
        h
        for h in mem.search("Чем занимается жена Ивана?", user_id="ivan", explain=True, touch=False)
        if h.item.content == IVAN[0]
    )
    assert hit.breakdown["keyword_bm25"] == 0.0  # the name is no keyword here


def test_a_name_still_counts_for_someone_else_and_when_asked_about(mem: Memory) -> None:
    # Priya is named in Dave's memories but is not Dave: her name is a keyword.
    hits = mem.search("What does Priya do?", user_id="dave", explain=True, touch=False)
    assert hits[0].item.content == DAVE[4]
    assert hits[0].breakdown["keyword_bm25"] > 0
    # Dave's name in another user's scope is no owner's name there.
    mem.add("Dave Miller from the ward lent me his bike.", user_id="ivan", memory_type="fact")
    found = mem.search("Dave Miller bike", user_id="ivan", explain=True, touch=False)[0]
    assert "Dave" in found.item.content and found.breakdown["keyword_bm25"] > 0
    # A question about the name itself keeps it.
    intro = mem.search("What is Dave's surname?", user_id="dave", explain=True, touch=False)[0]
    assert intro.item.content == DAVE[0] and intro.breakdown["keyword_bm25"] > 0


def test_a_scope_whose_owner_is_unknown_is_searched_as_before(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db") as mem:
        # No self-introduction: "Иван" may be anyone, and it stays a keyword.
        mem.import_items([{"content": c, "user_id": "u", "memory_type": "fact"} for c in IVAN[1:]])
        mem.add("Иван Петров из соседнего отдела одолжил мне велосипед.", user_id="u", memory_type="fact")
        hit = mem.search("Что одолжил Иван?", user_id="u", explain=True, touch=False)[0]
        assert hit.item.content.startswith("Иван Петров") and hit.breakdown["keyword_bm25"] > 0


def _cands(*texts: str, user_id: str = "u") -> list[Candidate]:
    return [Candidate(MemoryItem(content=t, user_id=user_id), 0.5, 1.0, None) for t in texts]


def test_owner_terms_only_for_one_introduced_owner_of_the_searched_user() -> None:
    terms = query_terms("What does Lucía drink in the morning?")
    intro = _cands("Me llamo Lucía Fernández y soy arquitecta en Sevilla.", "Tomo té verde por la mañana.")
    assert owner_terms(intro, "u", terms, "What does Lucía drink?") == {"lucía"}
    assert owner_terms(intro, "someone-else", terms, "What does Lucía drink?") == frozenset()
    assert owner_terms(intro, None, terms, "What does Lucía drink?") == frozenset()
    # Nothing but the name: left as it is.
    assert owner_terms(intro, "u", query_terms("Lucía"), "Lucía") == frozenset()
    # Two people introduce themselves in one scope: a name picks out one of them.
    both = [*intro, *_cands("Меня зовут Иван Петров.")]
    assert owner_terms(both, "u", terms, "What does Lucía drink?") == frozenset()
    # A speaker's turn is no owner's self-introduction, nor is the assistant's.
    paint = query_terms("What did Caroline paint?")
    turns = _cands("Caroline: My name is Caroline, by the way.")
    assert owner_terms(turns, "u", paint, "What did Caroline paint?") == frozenset()
    said = MemoryItem(content="My name is Caroline Smith.", user_id="u", metadata={"speaker": "Caroline"})
    assert owner_terms([Candidate(said, 0.5, 1.0, None)], "u", paint, "q") == frozenset()
    bot = MemoryItem(content="My name is Caroline.", user_id="u", metadata={"role": "assistant"})
    assert owner_terms([Candidate(bot, 0.5, 1.0, None)], "u", paint, "q") == frozenset()
    mine = MemoryItem(content="My name is Caroline.", user_id="u", metadata={"role": "user"})
    assert owner_terms([Candidate(mine, 0.5, 1.0, None)], "u", paint, "q") == {"carolin"}


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Меня зовут Иван Петров, я работаю в банке.", "Иван Петров"),
        ("Me llamo Lucía Fernández y soy arquitecta en Sevilla.", "Lucía Fernández"),
        ("私は佐藤由紀です。大阪の出版社で働いています。", "佐藤由紀"),
        ("저는 김민지이고 부산에 있는 병원에서 일해요.", "김민지"),
        ("我叫林晓，在上海当后端工程师。", "林晓"),
        ("Hi, my name is Dave.", "Dave"),
        ("Ich heiße Anna Müller und wohne in Berlin.", "Anna Müller"),
        ("佐藤と申します。", "佐藤"),
        ("私は編集者です。", None),  # an occupation
        ("저는 간호사예요.", None),
        ("Call me when you are done.", None),
        ("我叫张伟在字节跳动工作", None),  # where the name ends is not clear
        ("My wife Anna teaches chemistry.", None),
    ],
)
def test_self_named(text: str, name: str | None) -> None:
    assert self_named(text) == name


def test_stated_name_reads_structured_and_profile_items() -> None:
    extracted = MemoryItem(
        content="Call me Dave", user_id="u", structured={"key": "preferred_name", "value": "Dave"}
    )
    assert stated_name(extracted) == "Dave"
    profile = MemoryItem(content="Profile", user_id="u", tags=["profile"], structured={"username": "Иван"})
    assert stated_name(profile) == "Иван"
