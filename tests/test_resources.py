"""The resource layer: every turn kept as said, searchable, redacted, linked from what was
extracted from it, and retired with the fact it supported when that fact is superseded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.cli.memories import explain_lines
from jiyi.config import SessionConfig
from jiyi.lifecycle import LifecyclePolicy
from jiyi.memory import Memory
from jiyi.model import RelationType, Status

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    session = SessionConfig(keep_turns=True)
    with Memory.open(tmp_path / "res.db", session=session, clock=clock, background=False) as m:
        yield m


def _turns(mem: Memory, user: str = "u") -> list[str]:
    return [i.content for i in mem.list(user_id=user, tags=["turn"], limit=100).items]


def test_what_no_rule_extracts_is_still_findable(mem: Memory) -> None:
    mem.remember(
        [
            {
                "role": "user",
                "content": "Last spring we took the night train to Vienna with my cousin Mia",
                "name": "Ana",
            },
            ("assistant", "That sounds like a lovely trip!"),
        ],
        session_id="s1",
        user_id="u",
    )
    (report,) = mem.process_jobs()
    assert [o.action for o in report.outcomes] == ["resource", "resource"]
    assert sorted(_turns(mem)) == [
        "Ana: Last spring we took the night train to Vienna with my cousin Mia",
        "That sounds like a lovely trip!",
    ]
    hit = mem.search("who travelled to Vienna by train?", user_id="u")[0].item
    assert "Vienna" in hit.content and hit.thread_id == "s1" and hit.source_id is not None
    assert hit.metadata["speaker"] == "Ana"


def test_extracted_facts_link_to_their_turn_and_turns_are_redacted(mem: Memory) -> None:
    mem.remember(
        [("user", "I prefer dark mode in every editor. My email is jane.doe@corp.com")],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    (turn,) = mem.list(user_id="u", tags=["turn"]).items
    assert "jane.doe@corp.com" not in turn.content and "[REDACTED_EMAIL]" in turn.content
    facts = [i for i in mem.list(user_id="u").items if "turn" not in i.tags]
    assert facts and all(
        any(r.type == RelationType.DERIVED_FROM and r.target_id == turn.id for r in f.relations)
        for f in facts
    )


def test_a_superseded_fact_retires_the_turn_it_came_from(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "I prefer tabs for indentation.")], session_id="s1", user_id="u")
    mem.process_jobs()
    clock.now += timedelta(days=7)
    mem.remember(
        [("user", "I no longer prefer tabs; I prefer spaces for indentation now.")],
        session_id="s2",
        user_id="u",
    )
    mem.process_jobs()
    hits = mem.search("tabs or spaces for indentation?", user_id="u")
    assert "spaces" in hits[0].item.content
    old_turn = next(
        i for i in mem.list(user_id="u", tags=["turn"]).items if i.content.startswith("I prefer tabs")
    )
    assert old_turn.status == Status.SUPERSEDED
    assert all(h.item.id != old_turn.id for h in hits)


def test_remember_keeps_turns_by_default_and_lists_leave_them_out(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "default.db", background=False) as m:
        m.remember(
            [("user", "I am allergic to shellfish"), ("user", "We drove to the coast in an old red van")],
            session_id="s1",
            user_id="u",
        )
        m.process_jobs()
        known = m.list(user_id="u").items
        said = m.list(user_id="u", include_turns=True).items
        assert known and all("turn" not in i.tags for i in known)
        assert len(said) == len(known) + 2
        assert m.stats(user_id="u").total == len(known)
        assert m.stats(user_id="u", include_turns=True).total == len(said)
        # what no rule extracted is still found, from the turn itself
        assert "red van" in m.search("what vehicle did they drive to the coast?", user_id="u")[0].item.content


def test_turns_are_kept_by_default_and_retention_is_a_policy(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "We adopted a grey kitten called Pixel today")], session_id="s1", user_id="u")
    mem.process_jobs()
    (turn,) = mem.list(user_id="u", tags=["turn"]).items
    clock.now += timedelta(days=800)
    mem.maintain()
    assert mem.get(turn.id).status == Status.ACTIVE
    mem.maintain(policy=LifecyclePolicy(retention_days={"turns": 365}))
    assert mem.get(turn.id).status == Status.ARCHIVED


def test_a_fact_and_the_turn_it_came_from_take_one_place(mem: Memory) -> None:
    mem.remember(
        [("user", "My favourite drink is oolong tea, by the way"), ("user", "We sailed to Hydra in June")],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    turns = {i.id: i for i in mem.list(user_id="u", tags=["turn"]).items}
    facts = [i for i in mem.list(user_id="u").items if any(r.target_id in turns for r in i.relations)]
    assert facts, "the drink preference is extracted and linked to its turn"
    hits = mem.search("what does the user like to drink?", user_id="u", limit=5)
    ids = [h.item.id for h in hits]
    fact = next(f for f in facts if "oolong" in f.content)
    (source,) = (r.target_id for r in fact.relations if r.target_id in turns)
    assert ids[0] == fact.id and source not in ids  # the fact, once, in first place
    # a turn nothing was extracted from is still found as itself
    sail = mem.search("where did they sail to?", user_id="u", limit=3)
    assert "Hydra" in sail[0].item.content


def test_a_turn_that_says_more_than_its_fact_stands_for_it(mem: Memory) -> None:
    # Extraction kept one clause; the turn also says where the person lives. Shown in the
    # fact's place, the fact alone would hide that.
    said = "Toronto winter is here, my hands are too cold to type on my phone outside lol"
    mem.remember([("user", said)], session_id="s1", user_id="u")
    mem.process_jobs()
    (turn,) = mem.list(user_id="u", tags=["turn"]).items
    (fact,) = [i for i in mem.list(user_id="u").items if any(r.target_id == turn.id for r in i.relations)]
    assert fact.content != said and "Toronto" not in fact.content
    hits = mem.search("Where does the user live?", user_id="u", limit=5)
    ids = [h.item.id for h in hits]
    assert turn.id in ids and fact.id not in ids
    assert "fact_score" in hits[ids.index(turn.id)].breakdown


def test_a_fact_that_replaced_an_older_value_shows_rather_than_its_turn(mem: Memory, clock: Clock) -> None:
    # The fact carries the version chain (what it replaced); its turn is only evidence.
    mem.remember([("user", "I live in Hangzhou.")], session_id="s1", user_id="u")
    mem.process_jobs()
    clock.now += timedelta(days=7)
    said = "Big news: I moved to Shanghai last month. The commute to the new office is much shorter."
    mem.remember([("user", said)], session_id="s2", user_id="u")
    mem.process_jobs()
    hits = mem.search("Where does the user live?", user_id="u", limit=5)
    top = hits[0].item
    # the turn says more (the commute), but the fact is what replaced Hangzhou
    assert top.content == "I moved to Shanghai last month" and "turn" not in top.tags
    assert any(r.type == RelationType.SUPERSEDES for r in top.relations)


def test_a_named_speakers_turn_says_no_more_than_its_fact_for_the_name(mem: Memory) -> None:
    mem.remember(
        [{"role": "user", "name": "Ana", "content": "My favourite drink is oolong tea"}],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    hits = mem.search("what does Ana like to drink?", user_id="u", limit=5)
    assert [h.item.content for h in hits] == ["My favourite drink is oolong tea"]  # the fact, not "Ana: ..."


def test_pure_acknowledgements_are_not_kept_as_turns_and_are_counted(mem: Memory) -> None:
    result = mem.remember(
        [
            ("user", "Should we deploy on Friday?"),
            ("assistant", "Sure!"),
            ("user", "No."),  # an answer, not an acknowledgement
            ("assistant", "OK 👍"),
            ("user", "Thanks"),
            ("user", "好的，我明天九点到"),
            ("assistant", "好的"),
            ("user", "嗯嗯"),
            ("assistant", "收到！"),
        ],
        session_id="s1",
        user_id="u",
    )
    assert result.turns_skipped == 6
    assert len(result.messages) == 9  # the session buffer keeps every turn
    mem.process_jobs()
    assert sorted(_turns(mem)) == sorted(["Should we deploy on Friday?", "No.", "好的，我明天九点到"])
    only_thanks = mem.remember([("assistant", "Thanks!"), ("assistant", "嗯")], session_id="s2", user_id="u")
    assert only_thanks.turns_skipped == 2 and only_thanks.job_id is None  # nothing to do: no job


@pytest.mark.parametrize(
    ("text", "ack"),
    [
        ("OK", True),
        ("Sure!", True),
        ("Thanks 👍", True),
        ("Got it, thanks!", True),
        ("好的", True),
        ("嗯嗯", True),
        ("收到～", True),
        ("好的谢谢", True),
        ("No.", False),
        ("Yes", False),
        ("可以", False),
        ("OK, use port 8080", False),
        ("好的，我明天九点到", False),
        ("Thanks, Anna", False),
        ("okay then", False),
        ("Спасибо!", True),
        ("ありがとうございます！", True),
        ("감사합니다~", True),
        ("¡Muchas gracias!", True),
        ("Merci beaucoup 👍", True),
        ("Danke schön", True),
        ("Спасибо, я приду завтра в девять", False),
        ("Vale, nos vemos mañana", False),
    ],
)
def test_what_counts_as_an_acknowledgement(text: str, ack: bool) -> None:
    from jiyi.text.lowvalue import is_acknowledgement

    assert is_acknowledgement(text) is ack


def test_an_assistants_answer_is_kept_with_less_confidence_than_what_the_user_said(mem: Memory) -> None:
    # The assistant's reply repeats the user's words at length; what the person said is
    # the memory (confidence 1.0), the reply a record of an answer (the gate's minimum).
    answer = (
        "Taking the train from the airport to your hotel is usually much cheaper than a taxi. "
        "From the airport the express train to the city centre costs about 20 dollars, while a taxi "
        "from the airport to a hotel in the centre can cost 60 to 80 dollars, more at night. "
        "If your hotel is near a station, the train from the airport is also faster than a taxi "
        "in traffic; a taxi is easier with heavy luggage."
    )
    mem.remember(
        [
            ("user", "I'm taking the train from the airport to my hotel, a taxi quoted me 70 dollars"),
            ("assistant", answer),
        ],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    turns = mem.list(user_id="u", tags=["turn"], limit=10).items
    assert sorted((t.metadata["role"], t.confidence) for t in turns) == [("assistant", 0.7), ("user", 1.0)]
    hits = mem.search("how much does a taxi from the airport to my hotel cost?", user_id="u", limit=5)
    weight = {h.item.metadata.get("role"): h.breakdown["contribution.confidence"] for h in hits}
    assert weight["assistant"] == pytest.approx(0.7 * 0.3)  # the seed formula weighs confidence at 0.3


def test_a_users_turn_that_only_asks_is_kept_with_less_confidence(mem: Memory) -> None:
    # A question states nothing about the person, and the embedder finds every question
    # close to every other: "Which city do I live in?" found "how long does it take ..."
    # first. Kept and searchable, below what the person stated.
    mem.remember(
        [
            ("user", "We adopted a second cat, a tabby named Pickle. I live in Portland."),
            ("user", "how long does it usually take for them to get along"),
            ("user", "牛腩要炖多久啊"),
        ],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    turns = {t.content: t.confidence for t in mem.list(user_id="u", tags=["turn"], limit=10).items}
    assert turns == {
        "We adopted a second cat, a tabby named Pickle. I live in Portland.": 1.0,
        "how long does it usually take for them to get along": 0.7,
        "牛腩要炖多久啊": 0.7,
    }
    asking = [t for t in mem.list(user_id="u", tags=["turn"], limit=10).items if t.confidence < 1.0]
    assert all(t.metadata["asks_only"] is True for t in asking) and len(asking) == 2
    hits = mem.search("Which city does the user live in?", user_id="u", limit=3)
    assert "Portland" in hits[0].item.content


def test_a_users_turn_that_states_nothing_is_kept_with_less_confidence(mem: Memory) -> None:
    # An answer or a reaction on its own ("yes pls", "要！") says nothing about the person;
    # a short one with a name in it does ("it's Slack"). (A bare "perfect" is not kept.)
    mem.remember(
        [("user", "yes pls"), ("user", "it's Slack. ugh"), ("user", "要！")],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    turns = {t.content: t for t in mem.list(user_id="u", tags=["turn"], limit=10).items}
    assert {c: t.confidence for c, t in turns.items()} == {
        "yes pls": 0.7,
        "it's Slack. ugh": 1.0,
        "要！": 0.7,
    }
    assert turns["yes pls"].metadata["states_nothing"] is True
    assert "asks_only" not in turns["yes pls"].metadata
    assert "states_nothing" not in turns["it's Slack. ugh"].metadata


def test_a_reply_is_found_through_the_question_before_it(mem: Memory) -> None:
    mem.remember(
        [
            {"role": "user", "content": "How did your kids like the military memorial?", "name": "Maria"},
            {"role": "user", "content": "They were awestruck and humbled.", "name": "John"},
            {"role": "user", "content": "We should plan a picnic in the park soon.", "name": "Maria"},
            {"role": "user", "content": "My new job starts next Monday.", "name": "John"},
        ],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    hits = mem.search("What did John's kids think of the memorial?", user_id="u", min_relevance=0.0)
    by_text = {h.item.content: h for h in hits}
    answer = by_text["John: They were awestruck and humbled."]
    # The answer shares no word with the query: the question before it (someone else's)
    # lends it its evidence, and the breakdown says so.
    assert answer.breakdown["similarity.reply"] > 0
    question = by_text["Maria: How did your kids like the military memorial?"]
    assert question.breakdown.get("similarity.reply", 0.0) == 0.0
    assert any("reply" in line for line in explain_lines(answer.breakdown))


def test_a_turn_is_found_through_what_its_speaker_said_before(mem: Memory) -> None:
    mem.remember(
        [
            {
                "role": "user",
                "content": "I have a few game recommendations: Zelda and Animal Crossing.",
                "name": "Jolene",
            },
            {"role": "user", "content": "Thanks, I will look them up tonight.", "name": "Deborah"},
            {
                "role": "user",
                "content": "Oh, and Overcooked 2 too!",
                "name": "Jolene",
            },
            {"role": "user", "content": "My sister visits next week.", "name": "Deborah"},
        ],
        session_id="s1",
        user_id="u",
    )
    mem.process_jobs()
    hits = mem.search("Which games does Jolene recommend?", user_id="u", min_relevance=0.0)
    by_text = {h.item.content: h for h in hits}
    more = by_text["Jolene: Oh, and Overcooked 2 too!"]
    # Jolene goes on with her list after Deborah's turn: what she said two turns before
    # lends the later turn its evidence, and the breakdown and the explanation say so.
    assert more.breakdown["similarity.continues"] > 0
    assert any("continues" in line for line in explain_lines(more.breakdown))
    # The query names Jolene: what she said counts, what Deborah said does not.
    assert more.breakdown["similarity.speaker"] > 0
    other = by_text["Deborah: Thanks, I will look them up tonight."]
    assert other.breakdown.get("similarity.speaker", 0.0) == 0.0
    assert other.breakdown.get("similarity.continues", 0.0) == 0.0


@pytest.mark.parametrize(
    ("text", "courtesy"),
    [
        ("Congrats! That's huge. How are you celebrating?", True),
        ("Got it! I'll keep that in mind.", True),
        ("I'm so sorry to hear that. How are you holding up?", True),
        ("That sounds like a plan!", True),
        ("Thank you for sharing that.\n\nWhat motivates you to eat less meat?", True),
        ("恭喜你！太棒了！你打算怎么庆祝？", True),
        ("¡Felicidades! ¿Cómo lo vas a celebrar?", True),
        ("축하해요! 어떻게 축하할 거예요?", True),
        ("Congrats! Stripe's offices are in South San Francisco.", False),  # content
        ('Sure! How about "Digital Marketing Specialist"?', False),  # a question offering something
        ("Great! Want to try Hevy?", False),
        ("Good luck with the interview on Friday!", False),
        ("Which city do you live in?", False),  # a question alone is no courtesy
        ("Congratulations, Anna!", False),
    ],
)
def test_what_counts_as_an_assistants_courtesy(text: str, courtesy: bool) -> None:
    from jiyi.text.lowvalue import is_courtesy

    assert is_courtesy(text) is courtesy


def test_an_assistants_courtesy_is_not_kept_but_a_persons_is(mem: Memory) -> None:
    # "Congrats! That's huge." put itself into prompts about anything near the news.
    result = mem.remember(
        [
            ("user", "I just got promoted to senior engineer at Stripe!"),
            ("assistant", "Congrats! That's huge. How are you celebrating?"),
            ("user", "Congrats to me, I guess! Dinner with Mel tonight."),
            ("assistant", "Got it, I'll keep that in mind."),
        ],
        session_id="s1",
        user_id="u",
    )
    assert result.turns_skipped == 2 and len(result.messages) == 4  # the buffer keeps every turn
    mem.process_jobs()
    assert sorted(_turns(mem)) == [
        "Congrats to me, I guess! Dinner with Mel tonight.",
        "I just got promoted to senior engineer at Stripe!",
    ]


def test_context_does_not_repeat_what_the_profile_or_its_memories_already_say(mem: Memory) -> None:
    mem.remember(
        [("user", "I'm allergic to shellfish, so no shrimp please."), ("assistant", "Noted, no shellfish.")],
        session_id="s1",
        user_id="u",
    )
    mem.end_session("s1", user_id="u")
    while mem.process_jobs():
        pass
    ctx = mem.context("what should I cook for dinner?", user_id="u")
    assert ctx.profile is not None and "allergic to shellfish" in ctx.profile
    # Said once, in the profile: not again as a constraint nor as the session's summary,
    # whose every line is that statement.
    assert ctx.text.count("allergic to shellfish") == 1, ctx.text
    assert all("allergic to shellfish" not in e.text for e in ctx.entries)
    bare = mem.context("what should I cook for dinner?", user_id="u", include_profile=False)
    assert any("allergic to shellfish" in e.text for e in bare.entries)


@pytest.mark.parametrize("text", ["k" * 60 + "x", "嗯" * 200 + "x", "ha" * 140 + "x", "好的" * 140 + "!x"])
def test_low_value_readers_take_no_time_on_a_text_with_many_ways_to_split(text: str) -> None:
    # One regex "^(?:(?:k|kk)\s*)+$" tried every split of "kkkk…x" before failing: an add
    # of 30 such characters took seconds and of 50 never returned. A timeout, not a timing:
    # the reading is linear now, and the old one would not finish at all.
    import signal

    from jiyi.text.lowvalue import is_acknowledgement, is_courtesy, low_value_reason

    def stop(*_: object) -> None:
        raise TimeoutError("exponential backtracking")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    try:
        assert low_value_reason(text) is None
        assert not is_acknowledgement(text) and not is_courtesy(text)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
