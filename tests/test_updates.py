"""Update detection in Chinese and English: a later statement with a new value for the same
holder, subject and relation supersedes the earlier one; a near miss (another person,
another flight, another scope) never retires it; the same value said again reinforces.

The pairs are a sample of bench/data/updates.jsonl (both splits); the whole set is
measured by bench/updates.py (docs/benchmarks.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jiyi.memory import Memory
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.read.rank import SearchHit
from jiyi.store.base import Candidate
from jiyi.write.extract import Extracted, Turn
from jiyi.write.extract_rules import RuleExtractor
from jiyi.write.reconcile import Existing, decide
from jiyi.write.slots import apart, claims, compare, digits

from .test_reconcile import stored

DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "updates.jsonl"
T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)


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
    with Memory.open(tmp_path / "updates.db", clock=clock, background=False) as m:
        yield m


def _pair(mem: Memory, clock: Clock, old: str, new: str, user: str) -> tuple[str, str, str]:
    """Both statements through add(), a day apart: (decision on the new one, old status, new id)."""
    first = mem.add(old, user_id=user)
    assert first.item is not None
    clock.now += timedelta(days=1)
    second = mem.add(new, user_id=user)
    assert second.item is not None
    return second.decision.action, mem.get(first.item.id).status.value, second.item.id


UPDATES = [
    ("I live in Berlin.", "Actually, I moved to Munich.", "Where do I live?"),
    (
        "My flight to Tokyo is on Friday at 9am.",
        "Actually, my flight to Tokyo is on Friday at 5pm.",
        "flight to Tokyo",
    ),
    (
        "Our project budget is 2 million dollars.",
        "Our project budget is 3 million dollars.",
        "project budget",
    ),
    ("My manager is Sarah Lee.", "My manager is David Chen now.", "Who is my manager?"),
    ("My landlord is Mr. Brown.", "My landlord is Mrs. Garcia.", "Who is my landlord?"),
    ("The exam is on the 5th of May.", "The exam was rescheduled to the 12th of May.", "When is the exam?"),
    ("I am a vegetarian.", "I am no longer vegetarian, I eat fish again.", "Am I vegetarian?"),
    ("我去东京的航班是周五上午九点。", "其实我去东京的航班是周五下午五点。", "去东京的航班"),
    ("我住在北京。", "其实我上个月搬到上海了。", "我住在哪里？"),
    ("我女儿今年五岁。", "更正一下：我女儿今年六岁。", "我女儿几岁了？"),
    ("产品发布会定在3月3日。", "产品发布会推迟到3月17日了。", "产品发布会是哪天？"),
    ("我们的机房在法兰克福。", "我们的机房在都柏林。", "机房在哪里？"),
    ("我每天早上六点半起床。", "我每天早上五点四十五起床。", "我几点起床？"),
]


@pytest.mark.parametrize(("old", "new", "query"), UPDATES)
def test_a_changed_value_supersedes_and_the_current_one_ranks_first(
    mem: Memory, clock: Clock, old: str, new: str, query: str
) -> None:
    action, old_status, new_id = _pair(mem, clock, old, new, "u")
    assert action == "supersede"
    assert old_status == Status.SUPERSEDED.value
    hits = mem.search(query, user_id="u", limit=5)
    assert hits and hits[0].item.id == new_id
    assert all(h.item.content != old for h in hits)  # search answers for now


NEAR_MISSES = [
    ("My sister lives in Berlin.", "I live in Munich."),
    ("My flight to Tokyo is on Friday at 9am.", "My flight to Osaka is on Monday at 3pm."),
    ("I like cats.", "My daughter likes dogs."),
    ("I wake up at 6:30 on weekdays.", "I wake up at 9:00 on weekends."),
    ("I take my coffee with milk.", "I take my tea with lemon."),
    ("I listen to jazz while coding.", "I listen to podcasts while running."),
    ("I prefer window seats on flights.", "I prefer aisle seats on trains."),
    ("Our team has 8 engineers.", "Our team has 3 designers."),
    ("我喜欢猫。", "我女儿喜欢狗。"),
    ("我姐姐住在柏林。", "我住在慕尼黑。"),
    ("这个项目的负责人是张伟。", "这个项目的技术负责人是刘洋。"),
    ("我的体重是82公斤。", "我的行李箱重23公斤。"),
    ("服务器的内存是32GB。", "笔记本的内存是16GB。"),
    ("我工作日早上六点半起床。", "我周末早上九点起床。"),
    # one person, two relations, even with a word of change
    ("Tom is 30 years old.", "Tom moved to Paris in 2019."),
    ("李娜今年5岁。", "李娜在2005年搬到了厦门。"),
    ("王芳养了两只猫。", "王芳去年搬到了杭州。"),
    ("我女儿上三年级。", "我女儿现在在学小提琴。"),
]


@pytest.mark.parametrize(("old", "new"), NEAR_MISSES)
def test_a_near_miss_never_retires_the_other(mem: Memory, clock: Clock, old: str, new: str) -> None:
    action, old_status, new_id = _pair(mem, clock, old, new, "u")
    assert action not in ("supersede", "reinforce", "none")
    assert old_status == Status.ACTIVE.value
    assert mem.get(new_id).status == Status.ACTIVE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My daughter is five years old.", "My daughter is 5 years old."),
        ("I have 2 cats.", "I have two cats."),
        ("我女儿今年五岁。", "我女儿今年5岁。"),
        ("我父母住在哈尔滨。", "我父母还住在哈尔滨。"),
    ],
)
def test_the_same_value_in_other_words_reinforces(mem: Memory, clock: Clock, old: str, new: str) -> None:
    action, old_status, _ = _pair(mem, clock, old, new, "u")
    assert action == "reinforce"
    assert old_status == Status.ACTIVE.value


def test_a_changed_value_is_never_a_reinforce_even_when_close() -> None:
    item = stored("My cat's vet is Dr. Kim.", item_id="vet", memory_type=MemoryType.FACT)
    new = Extracted("My cat's vet is Dr. Rossi.", MemoryType.FACT, 0.9)
    decision = decide(new, [Existing(item, 0.9)])
    assert decision.action == "supersede" and decision.target_id == "vet"
    assert "rule f" in decision.reason and "rossi" in decision.reason


def test_a_less_similar_change_needs_a_word_of_change() -> None:
    # Structure says same slot; without "actually"/"moved" the embedding must agree more.
    item = stored("I live in Berlin.", item_id="home", memory_type=MemoryType.FACT)
    plain = decide(Extracted("I live in Munich.", MemoryType.FACT, 0.9), [Existing(item, 0.4)])
    assert plain.action != "supersede"
    cued = decide(Extracted("Actually, I moved to Munich.", MemoryType.FACT, 0.9), [Existing(item, 0.4)])
    assert cued.action == "supersede"


def test_possession_changes_only_with_a_cue() -> None:
    cats = stored("I have 2 cats", item_id="cats", memory_type=MemoryType.FACT)
    assert (
        decide(Extracted("I have 1 dog", MemoryType.FACT, 0.9), [Existing(cats, 0.7)]).action == "keep_both"
    )
    now = decide(Extracted("I have 3 cats now", MemoryType.FACT, 0.9), [Existing(cats, 0.8)])
    assert now.action == "supersede"


def test_claims_read_holder_subject_and_value() -> None:
    (mine,) = claims("My flight to Tokyo is on Friday at 5pm")
    assert mine.holder == frozenset() and {"flight", "tokyo"} <= mine.subject
    assert {"friday", "5pm"} <= set(mine.predicate)
    (hers,) = claims("我女儿今年六岁")
    assert hers.holder == frozenset({"女儿"}) and "6" in hers.predicate
    (wife,) = claims("My wife's office is in Building C")
    assert wife.holder == frozenset({"wife"})
    old, new = claims("I live in Berlin")[0], claims("Actually, I moved to Munich")[0]
    match = compare(old, new, cosine=0.45)
    assert match is not None and match.changed and match.old == ("berlin",) and match.new == ("munich",)
    assert compare(old, claims("My sister moved to Munich")[0]) is None


CONSTRUCTIONS = [
    # "changed X to Y" / 把X改成Y: the object is the thing that changed
    ("Our sprint length is 3 weeks.", "We changed our sprint length to 2 weeks."),
    ("The server has 32 GB of RAM.", "We upgraded the server to 64 GB of RAM."),
    ("Our product is called Nimbus.", "We renamed our product to Stratus."),
    ("我们的迭代周期是3周。", "我们把迭代周期改成了2周。"),
    # a leading adverb of time is not the subject
    ("I listen to jazz while coding.", "These days I listen to lo-fi hip hop while coding."),
    ("我写代码时听爵士乐。", "最近我写代码时改听白噪音了。"),
    # a clause without a subject continues the one before
    ("我在阿里巴巴工作。", "我跳槽了，后来在字节跳动工作。"),
    ("我的家庭医生是陈医生。", "我换了家庭医生，现在是赵医生。"),
    # where a thing is, said through whoever put it there
    ("I keep my spare key under the mat.", "I moved the spare key to the garage."),
    # when it was said is no part of the value
    ("My daughter is 5.", "My daughter just turned 6 last week!"),
    ("我女儿今年5岁。", "女儿上周过了6岁生日。"),
    # a time clause between the holder and the value says when, not what
    ("我儿子8岁，二年级。", "儿子过完生日9岁了，想要个乐高。"),
    ("女儿上一年级。", "女儿过完暑假上二年级了。"),
    ("我们公司在徐汇。", "我们公司过完年搬到浦东了。"),
]


@pytest.mark.parametrize(("old", "new"), CONSTRUCTIONS)
def test_a_change_said_in_another_construction_fills_the_same_slot(old: str, new: str) -> None:
    matches = [compare(o, n, cosine=0.6) for o in claims(old) for n in claims(new)]
    assert any(m is not None and m.changed for m in matches), [claims(old), claims(new)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My flight is on Friday.", "My sister changed her flight to Monday."),
        ("The team dinner is on Tuesday.", "We moved the standup to Thursday."),
        ("我把车停在车库。", "我妹妹把车停在路边了。"),
        ("我的牙医是陈医生。", "我妈妈换了家庭医生，现在是赵医生。"),
        ("I keep my passport in the drawer.", "I keep my keys in the drawer."),
        # an amount per month is not one per week
        ("I earn 5000 a month.", "I earn 1200 a week."),
        ("我每月房租4500。", "我每周房租1000。"),
        # with the time clause read as when, the holder still tells two people apart
        ("我儿子8岁。", "女儿过完生日9岁了。"),
    ],
)
def test_a_construction_about_another_thing_or_person_is_no_change(old: str, new: str) -> None:
    matches = [compare(o, n, cosine=0.9) for o in claims(old) for n in claims(new)]
    assert not any(m is not None and m.changed for m in matches), [claims(old), claims(new)]


def test_a_change_without_its_value_is_not_a_claim() -> None:
    # "我跳槽了" says a change happened but not to what: nothing to compare it with.
    assert claims("我跳槽了") == []
    assert [c.predicate for c in claims("我跳槽了，现在在字节跳动工作")] == [("字节", "跳动", "工作")]


def test_a_close_later_statement_ranks_first_when_nothing_was_reconciled(mem: Memory, clock: Clock) -> None:
    # The rules read no slot here ("related, keep both"), so both stay; the search still
    # puts the later statement first and says why (jiyi.read.versions.is_later_restatement).
    action, old_status, new_id = _pair(
        mem, clock, "我的笔记都同步到坚果云。", "我现在笔记都同步到iCloud了，坚果云不用了。", "u"
    )
    assert action in ("add", "keep_both") and old_status == Status.ACTIVE.value
    hits = mem.search("我的笔记同步到哪里？", user_id="u", limit=5, explain=True)
    assert hits[0].item.id == new_id
    older = next(h for h in hits if h.item.id != new_id)
    assert older.breakdown["contribution.later_statement"] < 0


def test_a_later_statement_about_someone_else_keeps_its_place(mem: Memory, clock: Clock) -> None:
    _pair(mem, clock, "My wife works at Siemens in Munich.", "I work at Bosch in Munich.", "u")
    hits = mem.search("Where does my wife work?", user_id="u", limit=5, explain=True)
    assert hits[0].item.content == "My wife works at Siemens in Munich."
    assert all("contribution.later_statement" not in h.breakdown for h in hits)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("My wife works at Siemens.", "I work at Bosch.", "another holder"),
        ("I wake up at 6:30 on weekdays.", "I wake up at 9 on weekends.", "another scope"),
        ("我喜欢猫。", "我也喜欢狗。", "one more value"),
        # a clause opening with 还有 / "also," turns to another topic; counted next, it adds one
        ("我住在苏州。", "还有我住到杭州了。", None),
        ("我养了一只猫。", "还有一只狗。", "one more value"),
        ("My rent is 1400.", "Also, my rent is 1100 now.", None),
        ("I have a cat.", "also a dog named Rex", "one more value"),
        ("The server has 32 GB of RAM.", "The laptop has 16 GB of RAM.", "another subject"),
        ("I drive a Honda Civic.", "I sold the Civic and drive a Tesla now.", None),
    ],
)
def test_apart_reads_what_keeps_two_statements_apart(old: str, new: str, why: str | None) -> None:
    assert apart(old, new) == why


def test_digits() -> None:
    assert digits("我女儿今年六岁，五点四十五起床") == "我女儿今年6岁，5:45起床"
    assert digits("two cats and one dog") == "2 cats and one dog"  # "one" is often a pronoun
    assert digits("我们一起去") == "我们一起去"


def test_every_near_miss_of_the_data_set_stays(mem: Memory, clock: Clock) -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    negatives = [r for r in rows if r["kind"] == "negative"]
    assert len(negatives) >= 100 and len([r for r in rows if r["kind"] == "update"]) >= 200
    retired = []
    for r in negatives:
        _, old_status, new_id = _pair(mem, clock, r["old"], r["new"], r["id"])
        if old_status != Status.ACTIVE.value or mem.get(new_id).status != Status.ACTIVE:
            retired.append(r["id"])
    assert retired == []


# -- the offline extractor ---------------------------------------------------------------------


def _extract(text: str) -> list[Extracted]:
    return RuleExtractor().extract([Turn("user", text)])


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I am vegetarian", "I am vegetarian"),
        ("I'm vegetarian.", "I'm vegetarian"),
        ("我上个月搬到上海了", "我上个月搬到上海了"),
        ("其实我上个月搬到上海了", "其实我上个月搬到上海了"),
        ("更正一下：我女儿今年六岁", "更正一下：我女儿今年六岁"),
        ("I'm 34 years old.", "I'm 34 years old"),
        ("我今年34岁", "我今年34岁"),
        ("My manager is Sarah Lee.", "My manager is Sarah Lee"),
        ("我的经理是王芳", "我的经理是王芳"),
        ("Our data center is in Frankfurt.", "Our data center is in Frankfurt"),
        ("Dinner with the Parkers is at 7pm on Saturday.", "Dinner with the Parkers is at 7pm on Saturday"),
        ("季度报告6月30日交", "季度报告6月30日交"),
        ("I no longer drink coffee.", "I no longer drink coffee"),
    ],
)
def test_the_extractor_catches_common_statements(text: str, content: str) -> None:
    assert [i.content for i in _extract(text)] == [content]


def test_a_chinese_switch_keeps_the_new_habit_and_the_turn() -> None:
    (item,) = _extract("我现在不喝咖啡了，改喝茶")
    assert item.memory_type is MemoryType.PREFERENCE and item.structured
    assert item.structured["object"] == "茶" and item.source_text == "我现在不喝咖啡了，改喝茶"


def test_ages_and_my_x_have_keys_but_family_members_do_not() -> None:
    assert _extract("I'm 34 years old")[0].key == "age"
    assert _extract("My birthday is March 3")[0].key == "my:birthday"
    assert _extract("My daughter is six")[0].key is None  # "my daughter is a doctor" is another fact


@pytest.mark.parametrize(
    "text",
    ["I'm tired.", "I'm so busy", "Maybe we should meet at 5pm.", "我今天9点开会", "I use Vim every day."],
)
def test_the_extractor_still_skips_moods_plans_and_today(text: str) -> None:
    assert all(i.memory_type is not MemoryType.FACT for i in _extract(text))


def test_remember_supersedes_a_correction_in_chinese(mem: Memory, clock: Clock) -> None:
    mem.remember([("user", "我住在北京。")], session_id="s1", user_id="u")
    mem.process_jobs()
    clock.now += timedelta(days=30)
    mem.remember([("user", "其实我上个月搬到上海了。")], session_id="s2", user_id="u")
    mem.process_jobs()
    facts = [i for i in mem.list(user_id="u").items if "resource" not in i.tags]
    status = {i.content: i.status for i in facts}
    assert status["我住在北京"] == Status.SUPERSEDED
    assert status["其实我上个月搬到上海了"] == Status.ACTIVE
    assert mem.search("我住在哪里？", user_id="u", limit=3)[0].item.content == "其实我上个月搬到上海了"


def test_an_unreconciled_newer_turn_ranks_above_the_statement_it_changes(tmp_path: Path) -> None:
    """When extraction misses a change, both turns stay as resources; the search still
    puts the newer version first, by the write path's own rules, and says why."""
    now = [datetime(2026, 3, 1, 9, tzinfo=UTC)]
    with Memory.open(tmp_path / "v.db", clock=lambda: now[0], background=False) as mem:
        for n, text in enumerate(
            ("I keep my spare key under the mat.", "I moved the spare key to the garage.")
        ):
            mem.remember([("user", text)], session_id=f"s{n}", user_id="u")
            mem.process_jobs(worker="t")
            now[0] += timedelta(days=1)
        hits = mem.search("Where is my spare key?", user_id="u", limit=5, explain=True, touch=False)
        texts = [h.item.content for h in hits]
        assert texts.index("I moved the spare key to the garage.") < texts.index(
            "I keep my spare key under the mat."
        )
        older = next(h for h in hits if h.item.content == "I keep my spare key under the mat.")
        assert older.breakdown["contribution.newer_version"] < 0
        assert all(h.item.status.value == "active" for h in hits)  # nothing was retired
        # A near miss about someone else is left in its place.
        mem.remember([("user", "My sister keeps her spare key in the garage.")], session_id="s9", user_id="u")
        mem.process_jobs(worker="t")
        hits = mem.search(
            "Where does my sister keep her key?", user_id="u", limit=5, explain=True, touch=False
        )
        assert not any(
            "contribution.newer_version" in h.breakdown and "sister" in h.item.content for h in hits
        )


@pytest.mark.parametrize(
    ("old", "new", "cosine"),
    [
        ("My monthly rent is 1,450 euros.", "I pay 1,520 euros in rent each month.", 0.84),
        ("Our team has 6 engineers.", "We're nine engineers on the team.", 0.84),
        ("那台数据库服务器内存是16G。", "数据库服务器加了内存条，现在是64G。", 0.81),
        ("我周二下午两点半看牙医。", "说错了，看牙是周二下午三点半。", 0.76),
        (
            "Our test suite has 2,400 tests.",
            "We're at 2,650 tests in the suite.",
            0.9,
        ),  # past the duplicate bar too
    ],
)
def test_another_amount_of_the_same_unit_supersedes(old: str, new: str, cosine: float) -> None:
    item = stored(old, item_id="old", memory_type=MemoryType.FACT)
    decision = decide(Extracted(new, MemoryType.FACT, 0.9), [Existing(item, cosine)])
    assert decision.action == "supersede" and decision.target_id == "old"
    assert "rule g" in decision.reason and "->" in decision.reason


@pytest.mark.parametrize(
    ("old", "new", "cosine", "kind"),
    [
        # another subject, shown by another number outside the amount
        ("Q1 revenue was 1.2 million.", "Q2 revenue came in at 1.5 million.", 0.78, MemoryType.FACT),
        # another holder
        ("My daughter is 6 years old.", "My son is 9 years old.", 0.8, MemoryType.FACT),
        # less alike than the bar (another activity with the same unit)
        ("I run 10 km every week.", "I swim 2 km every week.", 0.62, MemoryType.FACT),
        # events and habits add up rather than replace
        ("I ran 5 km on Monday.", "I ran 8 km on Monday.", 0.8, MemoryType.EVENT),
        ("I read 2 books a month.", "I read 3 books a month.", 0.8, MemoryType.HABIT),
        # another unit
        ("The laptop has 16 GB of memory.", "The laptop has 512 GB of disk space.", 0.8, MemoryType.FACT),
    ],
)
def test_amounts_that_are_not_a_change_are_kept(old: str, new: str, cosine: float, kind: MemoryType) -> None:
    item = stored(old, item_id="old", memory_type=kind)
    decision = decide(Extracted(new, kind, 0.9), [Existing(item, cosine)])
    assert decision.action != "supersede", decision.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("周日上午八点一刻，我飞大连", "周日上午8:15，我飞大连"),
        ("我周日早上8点15飞大连", "我周日早上8:15飞大连"),
        ("下午两点半开会", "下午2:30开会"),
        ("三点三刻", "3:45"),
        ("10点45分", "10:45"),
        ("快点来", "快点来"),
        ("12点", "12点"),
    ],
)
def test_a_chinese_clock_time_reads_as_hours_and_minutes(text: str, expected: str) -> None:
    assert digits(text) == expected


def test_one_clock_time_in_two_spellings_is_the_same_fact() -> None:
    item = stored("我周日早上8点15飞大连。", item_id="flight", memory_type=MemoryType.FACT)
    same = decide(Extracted("周日上午八点一刻，我飞大连。", MemoryType.FACT, 0.9), [Existing(item, 0.89)])
    assert same.action == "reinforce", same.reason
    later = decide(Extracted("我周日早上9点15飞大连。", MemoryType.FACT, 0.9), [Existing(item, 0.95)])
    assert later.action == "supersede", later.reason


def test_a_clause_naming_nobody_continues_the_person_before_it() -> None:
    # "下午从不喝浓茶" is about 李娜, not the speaker; an aside in brackets is no claim, and a
    # leading time of day is no subject.
    first, second = claims("李娜每天早上喝豆浆，下午从不喝浓茶（记录编号 t0c1n33）")
    assert first.subject == second.subject == frozenset({"李娜"})
    assert [c.subject for c in claims("我每天早上喝豆浆，下午从不喝浓茶")] == [frozenset(), frozenset()]
    assert len(claims("I live in Berlin (record 17)")) == 1
    # a time or frequency word where the subject would stand is no subject either
    assert [c.subject for c in claims("刘洋养了一只猫，今年4岁")] == [frozenset({"刘洋"})] * 2
    _, never = claims("Hiroshi prefers espresso and never drinks black tea after noon")
    assert never.subject == frozenset({"hiroshi"}) and never.negated
    older = stored("张伟每天早上喝豆浆，下午从不喝奶茶", item_id="zhang", memory_type=MemoryType.HABIT)
    other = decide(
        Extracted("李娜每天早上喝豆浆，下午从不喝浓茶", MemoryType.HABIT, 0.9), [Existing(older, 0.93)]
    )
    assert other.action != "supersede", other.reason


def changed(old: str, new: str) -> bool:
    """Whether some claim of ``new`` changes the value of some claim of ``old`` (close texts)."""
    found = [compare(a, b, cosine=0.9) for a in claims(old) for b in claims(new)]
    return any(m is not None and m.changed for m in found)


def test_a_quantity_changes_only_into_the_same_kind_of_quantity() -> None:
    # an age is not a year; an amount that gives way to words is another fact
    assert not changed("Tom is 30 years old.", "Tom moved to Paris in 2019.")
    assert not changed("李娜今年5岁。", "李娜在2005年搬到了厦门。")
    assert not changed("我女儿上三年级。", "我女儿现在在学小提琴。")
    # the same kind still changes: an age whose unit one side leaves out, ordinals, a
    # date given way to a state ("expires in 2025" / "was renewed")
    assert changed("My daughter is 5 years old.", "Actually, my daughter just turned 6.")
    assert changed("Grandma's visit is on the 3rd.", "Grandma's visit is postponed to the 10th.")
    assert changed("我们2019年搬到了杭州。", "其实我们2020年搬到了杭州。")


def test_chinese_hundreds_and_thousands_read_as_numbers() -> None:
    assert digits("家里宽带升级到千兆了") == "家里宽带升级到1000兆了"
    assert digits("两千块，一百零五个，一千二百元") == "2000块，105个，1200元"
    assert digits("五六个人，百分之五十") == "五六个人，百分之五十"  # no one number; a percentage


def test_a_frequency_word_is_no_subject_on_its_own() -> None:
    (never,) = claims("Never drink coffee after 3pm")
    assert never.subject == frozenset() and never.negated


def test_one_persons_facts_that_add_up_or_differ_in_kind_stay_apart() -> None:
    # allergies, pets and skills learned add up, whoever is named
    assert not changed("Priya is allergic to gluten.", "Priya is allergic to peanuts.")
    assert not changed("王芳对花生过敏。", "王芳对芒果过敏。")
    # "今年N岁" after a pet is that pet's age: another pet's age is no change of it
    assert not changed("陈静养了一只叫团子的猫，今年4岁。", "陈静养了一只叫豆豆的兔子，今年9岁。")
    # what someone never does adds up, and is no value of what they do
    assert not changed("Priya never drinks black tea after noon.", "Priya never drinks cola after noon.")
    assert not changed("张伟每天早上喝豆浆，下午从不喝奶茶。", "张伟每天晚上喝啤酒。")
    assert not changed("徐涛下午从不喝浓茶。", "徐涛在2021年搬到哈尔滨。")
    # another recurring day is another slot; a move to an earlier year is history
    assert not changed("Oskar runs 29 km every Friday in Bergen.", "Oskar runs 19 km every Tuesday in Cusco.")
    assert not changed("李娜在2005年搬到了厦门。", "李娜在2002年搬到了杭州。")
    # a word of change belongs to its sentence, not to another person's in the same text
    assert not changed(
        "Oskar runs 29 km every Friday.",
        "Dmitri moved to Bergen in 2020; also, Oskar runs 19 km every Tuesday.",
    )
    # while real changes still are
    assert changed("李娜在2002年搬到了杭州。", "李娜在2005年搬到了厦门。")
    assert changed("我抽烟。", "我去年把烟戒了。")
    assert changed("张伟每天早上喝豆浆。", "张伟每天早上喝咖啡。")
    assert changed("The team sync is every Monday.", "The team sync moved to every Wednesday.")


def _said(mem: Memory, clock: Clock, turns: list[tuple[str, str]]) -> dict[str, str]:
    """Turns said by named people, a session a week, through remember(): their ids by text."""
    for i, (speaker, text) in enumerate(turns):
        mem.remember([{"role": "user", "name": speaker, "content": text}], session_id=f"s{i}", user_id="u")
        mem.process_jobs()
        clock.now += timedelta(days=7)
    return {t.content.split(": ", 1)[1]: t.id for t in mem.list(user_id="u", tags=["turn"]).items}


def test_a_later_turn_saying_what_changed_ranks_above_what_it_changed(mem: Memory, clock: Clock) -> None:
    # Chatty turns of several sentences: no slot rule reads them and nothing is reconciled,
    # but the later one says, in a sentence with a word of change, that the defence moved.
    old = "Every single one. My PhD defence is set for May 12th, so I'm writing like crazy."
    new = "I have news too. My defence moved, my examiner can't travel in May. It's now June 23rd."
    ids = _said(mem, clock, [("Hannah", old), ("Leo", "I bought a used guitar last week."), ("Hannah", new)])
    hits = mem.search("When is Hannah's PhD defence?", user_id="u", limit=5, explain=True)
    # a turn or the fact extracted from it, shown in its place (jiyi.read.sources)
    turn_of = [next((r.target_id for r in h.item.relations), h.item.id) for h in hits]
    assert turn_of.index(ids[new]) < turn_of.index(ids[old])
    # the later turn rose above the earlier one, which kept its place below it
    assert hits[turn_of.index(ids[new])].breakdown["contribution.said_change"] > 0


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        ("I use a Pixel 7.", "I upgraded to a Pixel 9 last weekend.", "What phone do I have?"),
        (
            "I drive a 2015 Honda Civic.",
            "I sold the Civic and bought a Tesla Model 3.",
            "What car do I drive?",
        ),
        ("我的直属领导是王磊。", "王磊调走了，现在我向刘芳汇报。", "我的领导是谁？"),
        ("我们用禅道管理需求和bug。", "我们把禅道换成了飞书项目。", "我们用什么工具管理需求？"),
        ("我和朋友阿杰合租。", "阿杰搬走了，现在我一个人住。", "我和谁一起住？"),
        ("我的直属领导是王磊。", "王磊调去深圳了，新领导还没定。", "我的直属领导是谁？"),
        # the query's word inside another word of the older ("做主库" is cut 做主 | 库)
        ("我们用 MySQL 做主库。", "主库已经迁到 PostgreSQL 了。", "我们主库用什么数据库？"),
        (
            "I'm allergic to penicillin.",
            "Turns out I'm not allergic to penicillin after all.",
            "Am I allergic to any medication?",
        ),
    ],
)
def test_a_later_turn_that_names_the_old_value_as_changed_or_ended_ranks_above_it(
    mem: Memory, clock: Clock, old: str, new: str, query: str
) -> None:
    # No query word ties the two ("phone" is in neither); the later turn names what the
    # older gave as its value (the Pixel, 王磊) and says it changed or ended.
    ids = _said(mem, clock, [("Ana", old), ("Ana", new)])
    hits = mem.search(query, user_id="u", limit=5, explain=True)
    turn_of = [next((r.target_id for r in h.item.relations), h.item.id) for h in hits]
    assert turn_of.index(ids[new]) < turn_of.index(ids[old])


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        # the same person, another thing of theirs: a person in common is no tie
        ("My brother works at Google.", "My brother just moved to Seattle.", "Where does my brother work?"),
        ("李娜在银行上班，每天坐地铁。", "李娜最近搬到了厦门。", "李娜在哪里上班？"),
        # a question asks, it does not tell
        ("My rent is 1,450 euros a month.", "Is the rent going up now?", "How much is my rent?"),
        # "still" restates
        ("我们的周会在周一上午。", "周会还是周一上午，现在改在三楼开。", "周会在什么时候？"),
        # a time in common is no tie between two meetings
        ("预算评审是周四下午2点。", "招聘对齐会改到周四下午4点了。", "预算评审几点开？"),
        # the holder in common is another fact of theirs, also when it ended
        ("My sister works at Google.", "My sister sold her flat in Leeds.", "Where does my sister work?"),
    ],
)
def test_a_later_turn_about_something_else_is_no_said_change(
    mem: Memory, clock: Clock, old: str, new: str, query: str
) -> None:
    _said(mem, clock, [("Ana", old), ("Ana", new)])
    hits = mem.search(query, user_id="u", limit=5, explain=True)
    assert all("contribution.said_change" not in h.breakdown for h in hits)


def _episode_at(hits: list[SearchHit], says: str) -> int:
    """The rank of the first episode among ``hits`` whose text holds ``says``."""
    return next(i for i, h in enumerate(hits) if "episode" in h.item.tags and says in h.item.content)


def _sessions(mem: Memory, clock: Clock, texts: list[str]) -> None:
    """The user's turns through remember(), a session a week, each ended (its episode written)."""
    for i, text in enumerate(texts):
        mem.remember([{"role": "user", "content": text}], session_id=f"s{i}", user_id="u")
        mem.end_session(f"s{i}", user_id="u")
        mem.process_jobs()
        clock.now += timedelta(days=7)


def test_an_episodes_old_value_ranks_below_the_later_statement_that_changed_it(
    mem: Memory, clock: Clock
) -> None:
    # The first session's episode still says "I live in Clementi" after the move retired
    # that fact; the move ranks above the episode, which stays in the results.
    _sessions(
        mem,
        clock,
        ["I live in Clementi, close to NUS.", "I moved to Tampines to be closer to the kindergarten."],
    )
    old = next(i for i in mem.list(user_id="u", statuses=Status.SUPERSEDED).items)
    assert old.content.startswith("I live in Clementi")
    hits = mem.search("Where does he live now?", user_id="u", limit=5, explain=True)
    contents = [h.item.content for h in hits]
    moved = contents.index("I moved to Tampines to be closer to the kindergarten")
    episode = _episode_at(hits, "Clementi")
    assert moved < episode
    assert hits[episode].breakdown["contribution.replaced_in_summary"] < 0.0
    # a slot the later statement changed, without a key
    _sessions(mem, clock, ["My daughter is 5 years old.", "My daughter just turned 6!"])
    hits = mem.search("How old is my daughter?", user_id="u", limit=5, explain=True)
    contents = [h.item.content for h in hits]
    episode = _episode_at(hits, "5 years")
    assert contents.index("My daughter just turned 6") < episode
    # in Chinese, a household's move
    _sessions(
        mem, clock, ["住在 Clementi，离国大很近。", "全家搬到了 Tampines 的组屋，为了离豆豆的幼儿园近一点。"]
    )
    hits = mem.search("他家现在住在哪？", user_id="u", limit=5)
    contents = [h.item.content for h in hits]
    assert contents.index("全家搬到了 Tampines 的组屋，为了离豆豆的幼儿园近一点") < _episode_at(
        hits, "住在 Clementi"
    )


def test_an_episode_quoting_a_statement_found_older_goes_below_the_newer_with_it(
    mem: Memory, clock: Clock
) -> None:
    # Nothing was reconciled at write time; the search puts the later statement above the
    # earlier one, and the first session's episode, which quotes the earlier, follows it.
    _sessions(
        mem,
        clock,
        ["The kids' swim class is Saturday at 9.", "Swim class for the kids is Saturdays at 10:30."],
    )
    hits = mem.search("When is the kids' swim class?", user_id="u", limit=5, explain=True)
    contents = [h.item.content for h in hits]
    newer = contents.index("Swim class for the kids is Saturdays at 10:30")
    episode = _episode_at(hits, "at 9")
    assert newer < episode
    assert hits[episode].breakdown["contribution.replaced_in_summary"] < 0.0


def test_an_episode_quoting_what_a_correction_retired_goes_below_the_correction(
    mem: Memory, clock: Clock
) -> None:
    # The correction retired the first statement at write time, but no slot reading
    # aligns "看牙医" with "看牙是": the episode's line is tied to the retired statement by
    # its text, which the search found beside the correction.
    _sessions(mem, clock, ["我周二下午两点半看牙医。", "说错了，看牙是周二下午三点半。"])
    assert mem.list(user_id="u", statuses=Status.SUPERSEDED).items  # retired at write time
    hits = mem.search("我几点去看牙医？", user_id="u", limit=5, explain=True)
    contents = [h.item.content for h in hits]
    correction = contents.index("说错了，看牙是周二下午三点半")
    episode = _episode_at(hits, "两点半")
    assert correction < episode
    assert hits[episode].breakdown["contribution.replaced_in_summary"] < 0.0
    # An episode that quotes something else keeps its place above it.
    _sessions(mem, clock, ["我周三下午去做体检。"])
    hits = mem.search("我周三下午做什么？", user_id="u", limit=5, explain=True)
    checkup = next(h for h in hits if "episode" in h.item.tags and "体检" in h.item.content)
    assert "contribution.replaced_in_summary" not in checkup.breakdown


def test_an_episode_that_gives_the_same_value_or_another_key_keeps_its_place(
    mem: Memory, clock: Clock
) -> None:
    from jiyi.read.versions import is_replaced_in_summary
    from jiyi.store.base import Candidate

    def _cand(item: MemoryItem) -> Candidate:
        return Candidate(item, None, None, None)

    _sessions(mem, clock, ["I live in Lisbon.", "I work at Siemens."])
    items = mem.list(user_id="u", limit=50).items
    episodes = {i.content: i for i in items if "episode" in i.tags}
    lisbon, siemens = (
        next(i for c, i in episodes.items() if w in c) for w in ("I live in Lisbon", "Siemens")
    )
    fact = next(i for i in items if i.content == "I live in Lisbon")
    assert fact.metadata.get("key") == "location"
    later = fact.model_copy(update={"created_at": clock.now, "occurred_at": None})
    assert not is_replaced_in_summary(_cand(later), _cand(lisbon))  # the same value
    assert not is_replaced_in_summary(_cand(later), _cand(siemens))  # no line of that key
    moved = later.model_copy(update={"structured": {"key": "location", "value": "Porto"}})
    assert is_replaced_in_summary(_cand(moved), _cand(lisbon))
    # a named speaker's statement: an episode's lines do not say whose each was
    named = moved.model_copy(update={"metadata": {**moved.metadata, "speaker": "Ana"}})
    assert not is_replaced_in_summary(_cand(named), _cand(lisbon))
    # and the other way round: an episode is no later statement
    assert not is_replaced_in_summary(_cand(lisbon), _cand(later))


def test_change_sentences_are_the_sentences_that_say_a_change() -> None:
    from jiyi.write.slots import change_sentences

    text = "Oh, Lucy's wedding moved. The venue flooded. Is it still in Portland? It's now on September 21st."
    assert change_sentences(text) == ["oh, lucy's wedding moved.", " it's now on september 21st."]
    assert change_sentences("其实最后没签那套。我们换了一套离地铁近的，月租4200。") == [
        "其实最后没签那套。",
        "我们换了一套离地铁近的,月租4200。",
    ]
    # a point inside a number ends no sentence
    assert change_sentences("My rent is now 1,450.50 euros. OK.") == ["my rent is now 1,450.50 euros."]
    # a duration's "now" is no change; a question asks
    assert change_sentences("I've been writing for three months now. Is it now on Friday?") == []
    # a change announced in the present tense
    assert change_sentences("Heads up: standup moves to 10:15 starting Monday.") == [
        "heads up: standup moves to 10:15 starting monday."
    ]
    # what replaced the one before ("my new ..."), not any new thing
    assert change_sentences("My new shift starts at 7am. I read a new book.") == [
        "my new shift starts at 7am."
    ]
    assert change_sentences("我的新工位在12楼。新年快乐！") == ["我的新工位在12楼。"]


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("Where do I live?", "location"),
        ("Where does the user live now?", "location"),
        ("用户现在住在哪个城市？", "location"),
        ("我在哪家公司上班？", "employer"),
        ("What do I do for a living?", "profession"),
        ("How old am I?", "age"),
        ("Who is my GP?", "my:gp"),
        ("What is my address?", "my:address"),
        ("我的导师是谁？", "my:导师"),
        # about someone else, or no keyed fact
        ("Where does my sister live?", None),
        ("我姐姐住在哪？", None),
        ("What's my wife's name?", None),
        ("What time do I start work?", None),
    ],
)
def test_asked_key_reads_which_of_the_users_keyed_facts_a_question_asks_for(
    query: str, key: str | None
) -> None:
    from jiyi.read.asked import asked_key

    assert asked_key(query) == key


def test_the_users_own_fact_ranks_above_another_persons_near_miss(mem: Memory, clock: Clock) -> None:
    # The embedder puts "Where do I live?" closer to the sister's city than to the move.
    _sessions(mem, clock, ["My sister lives in Berlin.", "I moved to Munich last month."])
    hits = mem.search("Where do I live?", user_id="u", limit=5, explain=True)
    contents = [h.item.content for h in hits]
    assert contents[0] == "I moved to Munich last month"
    sister = contents.index("My sister lives in Berlin")
    assert hits[sister].breakdown["contribution.about_another"] < 0.0
    # asked about the sister, her statement keeps its place above the user's move
    hits = mem.search("Where does my sister live?", user_id="u", limit=5, explain=True)
    assert hits[0].item.content == "My sister lives in Berlin"
    assert all("contribution.about_another" not in h.breakdown for h in hits)


def test_an_attribute_key_is_the_whole_word() -> None:
    from jiyi.write.extract_rules import attribute_key

    assert attribute_key("address") == "my:address"  # not the "a" of "address" stripped
    assert attribute_key("theme") == "my:theme"
    assert attribute_key("the theme") == "my:theme"


def _turn_at(days: int, text: str, speaker: str | None = None) -> MemoryItem:
    """A user's kept turn, said ``days`` after T0."""
    meta: dict[str, object] = {"role": "user", **({"speaker": speaker} if speaker else {})}
    return MemoryItem.build(
        content=f"{speaker}: {text}" if speaker else text,
        memory_type=MemoryType.EVENT,
        user_id="u",
        tags=("resource", "turn"),
        metadata=meta,
        occurred_at=T0 + timedelta(days=days),
    )


def _with_vector(item: MemoryItem) -> Candidate:
    """A candidate carrying the default embedder's vector of its item."""
    from jiyi.embed.base import resolve_embedder

    return Candidate(item, None, None, resolve_embedder(None).embed([item.content])[0])


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        ("唉房东又说要涨房租，现在4500一个月已经很贵了", "房租最后谈成5200了，气死", "用户每月房租多少？"),
        # "还有" opening a turn changes the topic, it adds no value
        (
            "唉房东又说要涨房租，现在4500一个月已经很贵了",
            "还有房租最后谈成5200了，气死",
            "用户每月房租多少？",
        ),
        # clauses typed with spaces for commas
        (
            "另外国庆想去日本玩一周 大阪京都那种 要提前多久订票",
            "日本去不成了 签证没赶上 国庆就在上海待着吧",
            "用户国庆去日本了吗？",
        ),
        (
            "我儿子8岁，二年级，数学老是粗心，有啥办法吗",
            "开学了 小家伙升三年级了，英语开始难了",
            "用户儿子上几年级？",
        ),
        ("我现在每天通勤要一个半小时，太累了", "搬家以后通勤只要二十分钟了", "用户通勤要多久？"),
        (
            "ugh, my standup is at 9:30 which is brutal with the commute",
            "they put my standup at 9 sharp now",
            "When is my standup?",
        ),
    ],
)
def test_a_later_turn_on_the_asked_topic_is_the_later_of_a_near_tie(old: str, new: str, query: str) -> None:
    from jiyi.read.versions import is_later_on_topic
    from jiyi.text.tokenize import query_terms

    asked = frozenset(query_terms(query))
    earlier, later = _with_vector(_turn_at(0, old)), _with_vector(_turn_at(9, new))
    assert is_later_on_topic(later, earlier, asked)
    assert not is_later_on_topic(earlier, later, asked)  # the older is never the later


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        (
            "我儿子8岁，二年级，数学老是粗心，有啥办法吗",
            "儿子过完生日9岁了，想要个乐高，买哪个系列好",
            "用户的儿子几岁了？",
        ),
        ("My son is 8 and loves chess.", "My son just turned 9 last week!", "How old is my son?"),
    ],
)
def test_a_changed_number_of_the_asked_holder_is_the_later_when_a_number_is_asked(
    old: str, new: str, query: str
) -> None:
    # The query's word for the value ("几岁", "old") is in neither turn, and the word they
    # share is a person: only a query asking for a number makes that person's changed
    # number the topic.
    from jiyi.read.versions import is_later_on_topic
    from jiyi.text.tokenize import query_terms

    asked = frozenset(query_terms(query))
    earlier, later = _with_vector(_turn_at(0, old)), _with_vector(_turn_at(9, new))
    assert not is_later_on_topic(later, earlier, asked)
    assert is_later_on_topic(later, earlier, asked, number=True)
    assert not is_later_on_topic(earlier, later, asked, number=True)
    # another holder's number is another slot
    other = _with_vector(_turn_at(9, new.replace("儿子", "女儿").replace("son", "daughter")))
    assert not is_later_on_topic(other, earlier, asked, number=True)


@pytest.mark.parametrize(
    ("old", "new", "query", "speakers"),
    [
        # the later one only asks for help with the topic
        ("我姐婚礼是周四", "帮我想个婚礼上的简短祝福吧", "用户姐姐的婚礼是哪天？", (None, None)),
        (
            "My rent is 1,450 euros a month.",
            "Is the rent going up now?",
            "How much is my rent?",
            (None, None),
        ),
        # another subject that holds the topic's word
        (
            "The conference is in Austin.",
            "The workshop after the conference is in Dallas.",
            "Where is the conference?",
            (None, None),
        ),
        # a word of the query only the older holds: the closer answer
        (
            "I prefer window seats on flights.",
            "I prefer aisle seats on trains.",
            "Which seat do I prefer on flights?",
            (None, None),
        ),
        # another person's turn
        (
            "The rent is 1,450 a month.",
            "The rent is 1,600 at my place.",
            "How much is the rent?",
            ("Ana", "Ben"),
        ),
        # a name in common, another thing of it: far apart in meaning
        (
            "青鸟项目的消息队列选了 Kafka 而不是 RabbitMQ，因为需要 replay 和高吞吐。",
            "那次讨论最后定下来：青鸟的灰度发布先从新加坡商户开始，再推到印尼和越南。",
            "青鸟的 MQ 最后用的是哪个？",
            (None, None),
        ),
        # the same person's other fact: a person in common is no topic
        (
            "My brother works at Google.",
            "My brother just moved to Seattle.",
            "Where does my brother work?",
            (None, None),
        ),
    ],
)
def test_a_later_turn_that_does_not_answer_the_same_thing_is_not_moved(
    old: str, new: str, query: str, speakers: tuple[str | None, str | None]
) -> None:
    from jiyi.read.versions import is_later_on_topic
    from jiyi.text.tokenize import query_terms

    earlier, later = _with_vector(_turn_at(0, old, speakers[0])), _with_vector(_turn_at(9, new, speakers[1]))
    assert not is_later_on_topic(later, earlier, frozenset(query_terms(query)))


def test_a_later_turn_on_the_topic_rises_above_a_near_tie_in_search(mem: Memory, clock: Clock) -> None:
    _sessions(
        mem,
        clock,
        ["ugh, my standup is at 9:30 which is brutal with the commute", "they put my standup at 9 sharp now"],
    )
    hits = mem.search("When is my standup?", user_id="u", limit=5, explain=True)
    # the two sessions' summaries score within a hair of each other: the later goes first
    later, earlier = _episode_at(hits, "9 sharp"), _episode_at(hits, "9:30")
    assert later < earlier
    assert hits[later].breakdown["contribution.later_on_topic"] > 0
    assert not any("contribution.later_on_topic" in h.breakdown for h in hits if "9:30" in h.item.content)


def test_apart_strictly_reads_a_subject_that_only_holds_the_other_as_another() -> None:
    old, new = "The conference is in Austin.", "The workshop after the conference is in Dallas."
    assert apart(old, new) is None  # loosely, one slot (the write path's reading)
    assert apart(old, new, strict=True) == "another subject"
    assert apart("The conference is in Austin.", "The conference moved to Dallas.", strict=True) is None
