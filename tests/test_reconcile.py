"""Reconciliation: every rule of decide() in Chinese and English, and the LLM reconciler."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import ScriptedChatModel
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.write.extract import Extracted
from jiyi.write.reconcile import (
    RECONCILE_SYSTEM_PROMPT,
    Decision,
    Existing,
    LLMReconciler,
    ReconcileConfig,
    build_reconcile_messages,
    decide,
    keep_the_rest,
    read_reconcile,
    reconcile_flow,
)

P = MemoryType.PREFERENCE


def stored(
    content: str,
    *,
    item_id: str,
    memory_type: MemoryType = P,
    confidence: float = 0.9,
    structured: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    status: Status = Status.ACTIVE,
) -> MemoryItem:
    return MemoryItem.build(
        id=item_id,
        content=content,
        memory_type=memory_type,
        user_id="u1",
        confidence=confidence,
        structured=structured,
        metadata=metadata or {},
        status=status,
    )


def cand(
    content: str,
    *,
    memory_type: MemoryType = P,
    confidence: float = 0.9,
    key: str | None = None,
    structured: dict[str, Any] | None = None,
) -> Extracted:
    return Extracted(content, memory_type, confidence, key=key, structured=structured)


PYTHON = stored(
    "我喜欢 Python",
    item_id="py",
    confidence=0.8,
    structured={"key": "favourite_language", "value": "Python"},
)


def rust(confidence: float) -> Extracted:
    return cand(
        "我最喜欢的编程语言是 Rust",
        confidence=confidence,
        key="favourite_language",
        structured={"key": "favourite_language", "value": "Rust"},
    )


# -- rule a: nothing similar ------------------------------------------------------------------------


def test_nothing_similar_adds() -> None:
    decision = decide(cand("I like green tea"), [])
    assert decision == Decision("add", None, None, decision.reason, 0.9)
    assert decision.reason.startswith("rule a (nothing similar)")


@pytest.mark.parametrize(
    ("new", "old"),
    [("User lives in Berlin", "User likes jazz"), ("用户住在杭州", "用户喜欢爵士乐")],
)
def test_unrelated_item_below_related_threshold_adds(new: str, old: str) -> None:
    decision = decide(cand(new, memory_type=MemoryType.FACT), [Existing(stored(old, item_id="x"), 0.31)])
    assert decision.action == "add" and decision.target_id is None
    assert "rule a" in decision.reason and "0.310" in decision.reason
    assert decision.confidence == 0.9


def test_only_superseded_or_archived_items_are_ignored() -> None:
    old = stored("I like coffee", item_id="old", status=Status.SUPERSEDED)
    archived = stored("I like coffee", item_id="arc", status=Status.ARCHIVED)
    decision = decide(cand("I like coffee"), [Existing(old, 1.0), Existing(archived, 0.99)])
    assert decision.action == "add" and decision.target_id is None
    assert "archived or superseded" in decision.reason


# -- rule b: same key ---------------------------------------------------------------------------------


def test_same_key_new_value_more_confident_supersedes() -> None:
    decision = decide(rust(0.95), [Existing(PYTHON, 0.55)])
    assert decision.action == "supersede"
    assert decision.target_id == "py"
    assert decision.confidence == 0.95
    assert decision.content is None
    assert "rule b" in decision.reason and "favourite_language" in decision.reason
    assert "'Rust'" in decision.reason and "'Python'" in decision.reason and "cosine 0.550" in decision.reason


def test_same_key_equal_confidence_supersedes() -> None:
    assert decide(rust(0.8), [Existing(PYTHON, 0.55)]).action == "supersede"


def test_same_key_less_confident_keeps_the_existing_value() -> None:
    decision = decide(rust(0.7), [Existing(PYTHON, 0.55)])
    assert decision.action == "none"
    assert decision.target_id == "py"
    assert decision.confidence is None
    assert "keeps the more confident existing value" in decision.reason


def test_same_key_same_value_reinforces() -> None:
    again = cand(
        "我最喜欢 python",
        key="Favourite Language",
        structured={"key": "favourite_language", "value": "python"},
        confidence=0.9,
    )
    decision = decide(again, [Existing(PYTHON, 0.4)])
    assert decision.action == "reinforce" and decision.target_id == "py"
    assert decision.confidence == pytest.approx(0.85)  # 0.8 + 0.05
    assert "same value" in decision.reason and "mentions +1" in decision.reason


def test_key_in_metadata_and_value_found_in_content() -> None:
    old = stored("User's favourite editor is Vim", item_id="ed", metadata={"key": "favourite_editor"})
    same = cand("User prefers Vim", key="favourite_editor", structured={"value": "vim"})
    other = cand("User prefers Emacs", key="favourite_editor", structured={"value": "Emacs"})
    assert decide(same, [Existing(old, 0.7)]).action == "reinforce"
    assert decide(other, [Existing(old, 0.7)]).action == "supersede"


def test_key_rule_wins_over_a_closer_item() -> None:
    close = stored("我喜欢 Rust 的编译器", item_id="close")
    decision = decide(rust(0.95), [Existing(close, 0.97), Existing(PYTHON, 0.5)])
    assert decision.action == "supersede" and decision.target_id == "py"


def test_key_rule_ignores_superseded_slot_holders() -> None:
    gone = PYTHON.evolve(status=Status.SUPERSEDED)
    decision = decide(rust(0.5), [Existing(gone, 0.9)])
    assert decision.action == "add" and decision.target_id is None


# -- rule c: duplicates -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [("The user likes green tea", "User likes green tea"), ("用户爱喝绿茶", "用户喜欢喝绿茶")],
)
def test_duplicate_reinforces(new: str, old: str) -> None:
    item = stored(old, item_id="tea", confidence=0.97)
    decision = decide(cand(new), [Existing(stored("x y z", item_id="other"), 0.6), Existing(item, 0.91)])
    assert decision.action == "reinforce" and decision.target_id == "tea"
    assert decision.confidence == 1.0  # capped
    assert "rule c" in decision.reason and "cosine 0.910" in decision.reason


def test_same_text_reinforces_whatever_the_cosine() -> None:
    item = stored("User likes green tea.", item_id="tea", confidence=0.8)
    decision = decide(cand("user likes  GREEN tea"), [Existing(item, 0.2)])
    assert decision.action == "reinforce" and decision.target_id == "tea"
    assert "same text" in decision.reason


def test_close_but_different_numbers_or_keys_are_kept_both() -> None:
    # Another count of the same things is a change (rule g); other numbers are other facts.
    cats = stored("User has 2 cats", item_id="cats", memory_type=MemoryType.FACT)
    decision = decide(cand("User has 3 cats", memory_type=MemoryType.FACT), [Existing(cats, 0.96)])
    assert decision.action == "supersede" and "rule g" in decision.reason
    room = stored("Room 214 is booked for the offsite", item_id="room", memory_type=MemoryType.FACT)
    decision = decide(
        cand("Room 215 is booked for the offsite", memory_type=MemoryType.FACT), [Existing(room, 0.96)]
    )
    assert decision.action == "keep_both" and "numbers differ" in decision.reason
    city = stored(
        "用户的家乡是杭州", item_id="home", metadata={"key": "home_city"}, memory_type=MemoryType.FACT
    )
    work = cand("用户的工作城市是杭州", memory_type=MemoryType.FACT, key="work_city")
    decision = decide(work, [Existing(city, 0.93)])
    assert decision.action == "keep_both" and "key slots differ" in decision.reason


def test_custom_thresholds() -> None:
    item = stored("User likes green tea", item_id="tea")
    cfg = ReconcileConfig(duplicate_threshold=0.95, related_threshold=0.5, reinforce_step=0.1)
    assert decide(cand("User enjoys green tea"), [Existing(item, 0.9)], cfg).action == "keep_both"
    assert decide(cand("User enjoys green tea"), [Existing(item, 0.96)], cfg).confidence == 1.0
    with pytest.raises(ConfigError, match="related_threshold"):
        ReconcileConfig(duplicate_threshold=0.5, related_threshold=0.6)
    with pytest.raises(ConfigError, match="reinforce_step"):
        ReconcileConfig(reinforce_step=2.0)


# -- rule d: opposite polarity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("I no longer like coffee", "I like coffee"),
        ("User doesn't like coffee anymore", "User likes coffee"),
        ("I hate coffee", "I love coffee"),
        ("I stopped using Vim", "I use Vim"),
        ("I like coffee again", "I don't like coffee"),
        ("我不再喜欢喝咖啡了", "我喜欢喝咖啡"),
        ("用户讨厌喝绿茶", "用户喜欢喝绿茶"),
        ("我们决定不用 MySQL", "我们决定用 MySQL"),
    ],
)
def test_opposite_polarity_supersedes_even_when_very_similar(new: str, old: str) -> None:
    item = stored(old, item_id="old", confidence=0.95)
    decision = decide(cand(new, confidence=0.8), [Existing(item, 0.93)])
    assert decision.action == "supersede", decision.reason
    assert decision.target_id == "old" and decision.confidence == 0.8
    assert "rule d" in decision.reason and "cosine 0.930" in decision.reason


def test_structured_polarity() -> None:
    old = stored("用户喜欢辣的菜", item_id="spicy", structured={"polarity": "like", "object": "辣的菜"})
    new = cand("用户现在不能吃辣的菜", structured={"polarity": "dislike", "object": "辣的菜"})
    decision = decide(new, [Existing(old, 0.7)])
    assert decision.action == "supersede" and decision.target_id == "spicy"


def test_reversed_decision_supersedes() -> None:
    old = stored(
        "Chose MySQL over PostgreSQL",
        item_id="db",
        memory_type=MemoryType.DECISION,
        structured={"choice": "MySQL", "rejected": ["PostgreSQL"]},
    )
    new = cand(
        "Switched to PostgreSQL instead of MySQL because of JSON queries",
        memory_type=MemoryType.DECISION,
        structured={"choice": "PostgreSQL", "rejected": ["MySQL"], "reason": "JSON queries"},
    )
    decision = decide(new, [Existing(old, 0.8)])
    assert decision.action == "supersede" and "reversed decision" in decision.reason


@pytest.mark.parametrize(
    ("turn", "statement", "old"),
    [
        (
            "I no longer prefer tabs; I prefer spaces for indentation now.",
            "I prefer spaces for indentation",
            "I prefer tabs for indentation",
        ),
        ("我不再喜欢喝美式咖啡了，现在只喝茶", "用户现在只喝茶", "我喜欢喝美式咖啡"),
    ],
)
def test_a_negated_clause_of_the_source_turn_supersedes(turn: str, statement: str, old: str) -> None:
    item = stored(old, item_id="old")
    new = Extracted(statement, P, 0.85, source_text=turn)
    decision = decide(new, [Existing(item, 0.7)])
    assert decision.action == "supersede" and decision.target_id == "old"
    assert "the user's words" in decision.reason
    assert decide(Extracted(statement, P, 0.85), [Existing(item, 0.7)]).action == "keep_both"


def test_someone_elses_stance_is_not_the_users() -> None:
    item = stored("I like coffee", item_id="c")
    decision = decide(cand("My wife doesn't like coffee"), [Existing(item, 0.8)])
    assert decision.action == "keep_both"
    turn = Extracted("用户喜欢喝茶", P, 0.9, source_text="我老婆不喜欢咖啡，我喜欢喝茶")
    assert decide(turn, [Existing(stored("我喜欢咖啡", item_id="z"), 0.65)]).action == "keep_both"


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("I don't like Java", "I like Python"),
        ("我不喜欢 Java", "我喜欢 Python"),
        ("I use Vim", "I don't like Vim"),
    ],
)
def test_polarity_on_another_object_or_kind_is_not_a_conflict(new: str, old: str) -> None:
    decision = decide(cand(new), [Existing(stored(old, item_id="o"), 0.7)])
    assert decision.action == "keep_both", decision.reason


# -- rule e: related -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("User likes jazz from the 1950s", "User plays the saxophone"),
        ("用户周末喜欢去西湖跑步", "用户每天早上跑五公里"),
    ],
)
def test_related_but_different_keeps_both(new: str, old: str) -> None:
    items = [Existing(stored("unrelated", item_id="far"), 0.61), Existing(stored(old, item_id="near"), 0.74)]
    decision = decide(cand(new, memory_type=MemoryType.HABIT), items)
    assert decision.action == "keep_both" and decision.target_id == "near"
    assert "rule e" in decision.reason and "cosine 0.740" in decision.reason
    assert decision.confidence == 0.9


def test_targets_are_always_given_ids_and_input_is_checked() -> None:
    pool = [
        Existing(PYTHON, 0.6),
        Existing(stored("I like coffee", item_id="c"), 0.9),
        Existing(stored("User has 2 cats", item_id="k"), 0.86),
    ]
    for text in ("I no longer like coffee", "I like coffee", "User has 3 cats", "hello", "我喜欢 Go"):
        for key in (None, "favourite_language"):
            decision = decide(cand(text, key=key), pool)
            assert decision.target_id in (None, "py", "c", "k")
            assert decision.reason
    with pytest.raises(InvalidInput, match="cosine"):
        decide(cand("x"), [Existing(PYTHON, float("nan"))])


# -- with a model ----------------------------------------------------------------------------------------

A = stored("User likes coffee", item_id="real-a", confidence=0.9)
GONE = stored("User likes tea", item_id="real-gone", status=Status.SUPERSEDED)
B = stored("User drinks two cups of coffee a day", item_id="real-b", confidence=0.7)
POOL = [Existing(A, 0.92), Existing(GONE, 0.88), Existing(B, 0.75)]
NEW = cand("User no longer drinks coffee", confidence=0.85)


def answer(**fields: Any) -> str:
    return json.dumps(fields)


def test_prompt_shows_short_numbers_not_real_ids() -> None:
    system, user = build_reconcile_messages(NEW, POOL)
    assert system == {"role": "system", "content": RECONCILE_SYSTEM_PROMPT}
    prompt = user["content"]
    assert "User no longer drinks coffee (type preference, confidence 0.85)" in prompt
    assert "[0] User likes coffee" in prompt and "similarity 0.92" in prompt
    assert "[1] User drinks two cups of coffee a day" in prompt
    assert "User likes tea" not in prompt and "[2]" not in prompt
    assert "real-" not in prompt and "real-" not in system["content"]
    assert "numbers 0 to 1" in prompt


def test_model_target_number_maps_to_the_real_id() -> None:
    model = ScriptedChatModel([answer(action="supersede", target=1, content=None, reason="stopped drinking")])
    decision = LLMReconciler(model).decide(NEW, POOL)
    assert decision.action == "supersede" and decision.target_id == "real-b"
    assert decision.confidence == 0.85 and decision.content is None
    assert "stopped drinking" in decision.reason and "[1]" in decision.reason and "0.750" in decision.reason
    assert len(model.calls) == 1 and model.calls[0].json_mode


def test_update_and_merge_carry_content_and_reinforce_bumps_confidence() -> None:
    model = ScriptedChatModel(
        [
            answer(action="merge", target="0", content="User likes coffee, two cups a day", reason="parts"),
            answer(action="duplicate", target=0, reason="same"),
            answer(action="replace", target="[1]", reason="changed"),
        ]
    )
    reconciler = LLMReconciler(model)
    merged = reconciler.decide(NEW, POOL)
    assert (merged.action, merged.target_id, merged.content) == (
        "merge",
        "real-a",
        "User likes coffee, two cups a day",
    )
    assert merged.confidence == 0.9  # the more confident of the two
    reinforced = reconciler.decide(NEW, POOL)
    assert reinforced.action == "reinforce" and reinforced.confidence == pytest.approx(0.95)
    replaced = reconciler.decide(NEW, POOL)
    assert replaced.action == "supersede" and replaced.target_id == "real-b"


def test_out_of_range_target_is_retried_then_refused() -> None:
    model = ScriptedChatModel([answer(action="supersede", target=2), answer(action="supersede", target=7)])
    with pytest.raises(
        LLMError, match=r"target 7 is not one of the stored memories \(0 to 1\).*after 2 attempts"
    ):
        LLMReconciler(model).decide(NEW, POOL)
    assert len(model.calls) == 2
    retry = model.calls[1].messages
    assert retry[-2]["role"] == "assistant" and '"target": 2' in retry[-2]["content"]
    assert "target 2 is not one of the stored memories" in retry[-1]["content"]


def test_out_of_range_then_valid() -> None:
    model = ScriptedChatModel([answer(action="reinforce", target=-1), answer(action="reinforce", target=0)])
    decision = LLMReconciler(model).decide(NEW, POOL)
    assert decision.target_id == "real-a" and len(model.calls) == 2


def test_garbage_then_valid_is_retried() -> None:
    model = ScriptedChatModel(
        ["I think you should supersede the first one.", answer(action="add", target=None)]
    )
    decision = LLMReconciler(model).decide(NEW, POOL)
    assert decision.action == "add" and decision.target_id is None and decision.confidence == 0.85
    assert len(model.calls) == 2
    assert "could not be used" in model.calls[1].messages[-1]["content"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (answer(action="obliterate", target=0), "unknown action 'obliterate'"),
        (answer(action="update", target=0), "needs the new text"),
        (answer(action="supersede", target=None), 'needs a "target"'),
        (answer(action="supersede", target="real-a"), "must be the number of a stored memory"),
        (answer(action="reinforce", target=True), "must be the number of a stored memory"),
        ('["a list"]', "expected a JSON object"),
        (answer(target=0), 'no "action"'),
    ],
)
def test_unusable_answers_are_refused(bad: str, message: str) -> None:
    with pytest.raises(LLMError, match=message):
        read_reconcile(bad, POOL)


def test_add_ignores_a_target_and_keep_both_may_name_one() -> None:
    assert read_reconcile(answer(action="add", target=1), POOL).target_id is None
    both = read_reconcile('```json\n{"action": "keep both", "target": 1, reason: "different"}\n```', POOL)
    assert both.action == "keep_both" and both.target_id == "real-b"


def test_no_active_existing_means_add_without_a_call() -> None:
    model = ScriptedChatModel()
    reconciler = LLMReconciler(model)
    assert reconciler.decide(NEW, []).action == "add"
    assert reconciler.decide(NEW, [Existing(GONE, 0.99)]).action == "add"
    assert model.calls == []
    flow = reconcile_flow(NEW, [])
    with pytest.raises(StopIteration) as stop:
        next(flow)
    assert stop.value.value.action == "add"


async def test_async_decide() -> None:
    model = ScriptedChatModel(["nope", answer(action="none", target=0, reason="already known")])
    decision = await LLMReconciler(model).adecide(NEW, POOL)
    assert decision.action == "none" and decision.target_id == "real-a" and decision.confidence is None
    assert len(model.calls) == 2


def test_reconciler_needs_a_model() -> None:
    with pytest.raises(ConfigError):
        LLMReconciler(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_attempts"):
        LLMReconciler(ScriptedChatModel(), max_attempts=0)


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        ("I live in Munich and work as a nurse", "I moved to Berlin last month", "I work as a nurse"),
        ("I live in Munich and work at Google", "I moved to Berlin", "I work at Google"),
        ("我住在杭州，养了一只叫豆豆的狗", "我搬到上海了", "养了一只叫豆豆的狗"),
    ],
)
def test_a_change_keeps_what_else_the_older_item_says(old: str, new: str, kept: str) -> None:
    item = stored(old, item_id="old", memory_type=MemoryType.FACT)
    candidate = Extracted(content=new, memory_type=MemoryType.FACT, confidence=0.9, source_text=new)
    decision = decide(candidate, [Existing(item, 0.4)])
    assert decision.action == "supersede" and decision.kept is None
    done = keep_the_rest(decision, candidate, {"old": item})
    assert done.action == "supersede" and done.target_id == "old"
    assert done.kept == kept and "kept as a memory of its own" in done.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Munich", "I moved to Berlin last month"),  # all of it changed
        ("I live in Munich and work as a nurse", "I moved to Berlin and quit nursing"),  # both clauses
    ],
)
def test_a_change_of_all_an_item_says_still_supersedes_it(old: str, new: str) -> None:
    item = stored(old, item_id="old", memory_type=MemoryType.FACT)
    candidate = Extracted(content=new, memory_type=MemoryType.FACT, confidence=0.9, source_text=new)
    decision = decide(candidate, [Existing(item, 0.4)])
    assert decision.action == "supersede"
    assert keep_the_rest(decision, candidate, {"old": item}) == decision
