"""The current value first, also when nothing was reconciled at write time.

Reconciliation retires an old fact when a new one changes it, and the ranking then keeps
the replacement above it (:func:`jiyi.read.rank.replacements_first`). But a turn kept as
a resource is never reconciled (it is a record of what was said), and when extraction
misses a statement ("We upgraded the server to 64 GB of RAM" after "The server has 32 GB
of RAM") both turns stay active and the older can rank first.

So among the best candidates, a pair where at least one is a resource is put through the
write path's own rules (:func:`jiyi.write.reconcile.decide`, the newer as the candidate
against the older with their cosine): when they would say ``supersede`` or ``update``,
the ranking (:func:`jiyi.read.rank.newer_versions_first`) puts the newer just above the
older and shows the older's drop as ``contribution.newer_version``. Nothing is retired or
changed in the store.

The write path's rules read values; they miss changes said in ways they do not parse ("I
sold the Civic and bought a Tesla Model 3", "Priya left, so Tom is my manager now"). So
a second, looser test (:func:`is_later_restatement`) also puts the newer of two of a
person's statements first when the two are close in meaning (cosine >= 0.7 on the default
embedder's scale) and nothing in their structure keeps them apart: another holder, subject
or scope, or "also" (:func:`jiyi.write.slots.apart`). Of two close statements
about the same thing, the later is the better guess of what is true now; a near miss
about another person or thing keeps its place.

In a conversation the change is often said in a chatty turn of several sentences ("I have
news too. My defence moved, my examiner can't travel in May. It's now June 23rd."), which
neither test reads. A third (:func:`is_said_change`) puts such a turn first when one of
its sentences carries a word of change (:func:`jiyi.write.slots.change_sentences`) and
shares with the older statement a word of the query that is not a person: the query says
what the two are about, the cue that the later one changed it. Or the sentence names
what the older statement gave as its value, as changed or ended ("I use a Pixel 7" ->
"I upgraded to a Pixel 9", "I drive a Honda Civic" -> "I sold the Civic"): the query
need not share a word with either ("What phone do I have?").

A session's summary (an episode) is a record of what was said then, so it keeps an old
value after a later session retires it: "- Fact: I live in Clementi" still ranks for "where
does he live now?" above "We moved to Tampines". A fourth test
(:func:`is_replaced_in_summary`) puts the user's later statement above an earlier episode
one of whose lines it changes: a keyed statement (a city, an employer) whose key the line
gives another value, or a statement that retired another at write time whose slot the
line fills with another value. When the search found the retired statement itself (it
lends its evidence to its replacement, :func:`jiyi.read.search.follow_replacements`), an
earlier episode quoting it goes below the replacement too (:func:`quotes_retired`), with
no slot reading: "- 事实：我周二下午两点半看牙医" below "说错了，看牙是周二下午三点半".
"""

from __future__ import annotations

import functools
import re

from jiyi.embed.scale import on_scale
from jiyi.model import RESOURCE_TAG, MemoryItem, MemoryType, RelationType
from jiyi.session.digest import user_lines
from jiyi.store.base import Candidate
from jiyi.text.tokenize import terms
from jiyi.write.extract import Extracted, Turn
from jiyi.write.extract_rules import RuleExtractor, stated_clauses
from jiyi.write.reconcile import Existing, ReconcileConfig, decide
from jiyi.write.slots import (
    Claim,
    apart,
    change_sentences,
    claims,
    compare,
    ending_sentences,
    is_person,
    is_time_or_amount,
)

TOP = 10
"""Pairs among this many best candidates are compared (at most 45 pairs)."""

CHANGES = ("supersede", "update")

RESTATEMENT_COSINE = 0.7
"""How close two statements must be for the later to count as what is true now
(:func:`is_later_restatement`). Chosen on the tuning halves of the update sets
(bench/updates.py: dev, fresh-tune); 0.6-0.65 fixed a few more stale values but put
twice as many near misses above the fact asked about. Given on the default embedder's
scale; :func:`restatement_bar` moves it onto another's."""

_SENTENCE_END = re.compile(r"(?:[.!?;]+\s+|[。！？；]+\s*)(?=\S)")


def _one_sentence(text: str) -> bool:
    """Whether a text is one sentence (a speaker's name in front does not count)."""
    return _SENTENCE_END.search(text.strip()) is None


def _speaker(item: MemoryItem) -> tuple[object, object] | None:
    """Who said a kept turn (its role and name); None for anything else."""
    if RESOURCE_TAG not in item.tags:
        return None
    return item.metadata.get("role"), item.metadata.get("speaker")


def _same_speaker(a: MemoryItem, b: MemoryItem) -> bool:
    """Whether a pair can be two versions of one person's statement: at least one is a
    user's turn, and when both are turns, the same person said them. A named speaker's
    turn is not compared with an extracted fact (in a conversation between several
    people whose statement the fact was is not known here): "I moved" by one friend is no
    correction of "I live in Berlin" by another."""
    sa, sb = _speaker(a), _speaker(b)
    if a.user_id != b.user_id or (sa is None and sb is None):
        return False
    if sa is not None and sb is not None:
        return sa == sb and sa[0] == "user"
    turn = sa if sa is not None else sb
    return turn is not None and turn[0] == "user" and turn[1] is None


_STATEMENTS = frozenset(
    {MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.HABIT, MemoryType.CONTEXT, MemoryType.CONSTRAINT}
)
"""Kinds of memory that hold one current value; events, rules and summaries stack."""


def _statement(item: MemoryItem) -> bool:
    return item.memory_type in _STATEMENTS and not {"episode", "profile"} & set(item.tags)


def _later(newer: MemoryItem, older: MemoryItem) -> bool:
    return (newer.occurred_at or newer.created_at) > (older.occurred_at or older.created_at)


def may_follow(newer: Candidate, older: Candidate) -> bool:
    """Whether ``newer`` can be a later version of ``older`` at all: the same user's, and
    said later. Every test of a pair here (:func:`is_newer_version`,
    :func:`is_later_restatement`, :func:`is_replaced_in_summary`, :func:`is_said_change`,
    :func:`is_later_on_topic`) asks both, so a pair that fails this fails them all; the
    ranking asks it first (about half the pairs of a search's best are in the wrong order)."""
    a, b = older.item, newer.item
    return a.user_id == b.user_id and _later(b, a)


def _cosine(a: Candidate, b: Candidate) -> float:
    # Stored vectors are unit length (as MMR assumes), so the dot product is the cosine.
    u, v = a.vector, b.vector
    return float(u @ v) if u is not None and v is not None and u.shape == v.shape else 0.0


def restatement_bar(model_id: str) -> float:
    """:data:`RESTATEMENT_COSINE` on the scale of the embedder ``model_id``: e5 puts two
    unrelated sentences at ~0.83, above 0.7, so every pair of one person's statements
    sharing a word would pass (:func:`jiyi.embed.scale.on_scale`; e5: 0.7 -> 0.93)."""
    return on_scale(RESTATEMENT_COSINE, model_id)


def is_later_restatement(newer: Candidate, older: Candidate, bar: float = RESTATEMENT_COSINE) -> bool:
    """Whether ``newer`` is a later statement by the same person about what ``older`` is
    about: close in meaning (cosine >= ``bar``, :func:`restatement_bar` of the embedder
    whose vectors the candidates carry), both one sentence, and not kept apart by their
    structure (:func:`jiyi.write.slots.apart`)."""
    a, b = older.item, newer.item
    turns = _speaker(a) is not None or _speaker(b) is not None
    if turns and not _same_speaker(a, b):
        return False
    if not turns and not (
        a.user_id == b.user_id
        and a.metadata.get("speaker") == b.metadata.get("speaker")  # facts of one person
        and _statement(a)
        and _statement(b)
    ):
        return False
    if not _later(b, a) or not (_one_sentence(b.content) and _one_sentence(a.content)):
        return False
    # A shared word as well as the cosine: the bar is moved onto the embedder's scale from
    # one level per embedder, a word in common needs no scale.
    # Cheapest first: this runs for pairs among a search's ten best, on every search.
    if _cosine(newer, older) < bar:
        return False
    return bool(_terms(a.content) & _terms(b.content)) and cached_apart(a.content, b.content) is None


@functools.lru_cache(maxsize=4096)
def _terms(text: str) -> frozenset[str]:
    # Texts come back search after search (the same memories rank for related queries).
    return frozenset(terms(text))


cached_apart = functools.lru_cache(maxsize=4096)(apart)
""":func:`jiyi.write.slots.apart` kept per pair: the same pairs meet search after search
(here and in :mod:`jiyi.read.asked`)."""


def is_newer_version(newer: Candidate, older: Candidate, cfg: ReconcileConfig) -> bool:
    """Whether ``newer``, said later by the same person, is a statement the write path
    would let retire ``older``."""
    a, b = older.item, newer.item
    if not _same_speaker(a, b) or not _later(b, a):
        return False
    if not (_one_sentence(b.content) and _one_sentence(a.content)):
        # The rules read statements; a turn of several sentences ("Thanks, Mel! I'm
        # still looking into counseling jobs. It's important to me.") is conversation,
        # where values differ for many reasons besides a change.
        return False
    # No similarity floor: the write path has none either (its neighbours are the nearest
    # items, as these are the best candidates for one query); its slot rules decide.
    cos = _cosine(newer, older)
    # A kept turn is typed as an event; compared as what it states (a fact), as the
    # statement extraction would have made of it.
    candidate = Extracted(content=b.content, memory_type=MemoryType.FACT, confidence=b.confidence)
    old = a.model_copy(update={"memory_type": MemoryType.FACT}) if RESOURCE_TAG in a.tags else a
    decision = decide(candidate, [Existing(old, cos)], cfg)
    return decision.action in CHANGES and decision.target_id == a.id


def is_said_change(newer: Candidate, older: Candidate, asked: frozenset[str]) -> bool:
    """Whether ``newer`` is a later turn or statement of the same person one of whose
    sentences says that something changed ("My defence moved, ... It's now June 23rd",
    "上线推到明年一月十五号") about what the query asks and ``older`` said: that sentence
    and ``older`` share a word of the query (``asked``, its index terms) that names
    neither a person nor a value (a person in common is another fact of theirs); or that
    sentence names what ``older`` gave as its value (:func:`_object_terms`: "I use a Pixel
    7" -> "I upgraded to a Pixel 9", "我的直属领导是王磊" -> "王磊调走了，现在我向刘芳汇报")."""
    a, b = older.item, newer.item
    if not _one_person(a, b) or not _later(b, a):
        return False
    # Cheapest first: most turns say no change, and most pairs share no query word.
    new_text = said_text(b)
    changed = _change_sentences(new_text)
    ended = _ended_sentences(new_text)
    if not (changed or ended):
        return False
    old_text = said_text(a)
    topic = _held(old_text, asked)
    if topic:
        topic -= _who(old_text)
    if topic and any(_held(s, topic) - _who(s) for s in changed):
        return True
    named = _object_terms(old_text) - asked
    return bool(named) and any(_names(named, _content_terms(s)) for s in (*changed, *ended))


LATER_ON_TOPIC_MARGIN = 0.03
"""How far below an older statement a later one on the same topic may score and still go
above it (:func:`is_later_on_topic`): a near tie, not a clearly better match."""

TOPIC_COSINE = 0.3
"""How close in meaning two texts must be for :func:`is_later_on_topic`: just above the
default embedder's level for two unrelated texts (0.25), so that a shared name alone ("青鸟的
消息队列" / "青鸟的灰度发布") does not tie them. On the default embedder's scale."""


def is_later_on_topic(
    newer: Candidate,
    older: Candidate,
    asked: frozenset[str],
    bar: float = TOPIC_COSINE,
    number: bool = False,
) -> bool:
    """Whether ``newer`` is a later turn, statement or session summary of the same user that
    (scoring within :data:`LATER_ON_TOPIC_MARGIN` of ``older``, which the ranking checks)
    shares with it a word of the query that names neither a person nor a value, is close to
    it in meaning (cosine >= ``bar``: :data:`TOPIC_COSINE` on the scale of the embedder whose
    vectors the candidates carry), their structure not keeping them apart
    (another holder, subject or scope, "also": :func:`jiyi.write.slots.apart`). Of two
    near-equal answers about one thing, the later is the better guess of what is true now
    ("现在4500一个月" then "房租最后谈成5200了"; "我儿子8岁，二年级" then "小家伙升三年级了"),
    though neither says that it changed anything. ``number``: the query asks for a number,
    so a changed number in a slot the query names counts, the holder's name being the word.
    """
    a, b = older.item, newer.item
    if not _later(b, a):
        return False
    if not (_one_person(a, b) or _summary_of(b, a)) or _cosine(newer, older) < bar:
        return False
    old_text, new_text = said_text(a), said_text(b)
    who = _who(old_text) | _who(new_text)
    # A word of the query only the older holds makes it the closer answer ("window seats on
    # flights" against "aisle seats on trains", asked about flights).
    old_asked, new_asked = _held(old_text, asked), _held(new_text, asked)
    if old_asked - new_asked - who:
        return False
    if _apart_for_topic(old_text, new_text) is not None:
        return False
    # Where the later one names the topic it must state something, not ask for help
    # with it ("帮我想个婚礼上的祝福吧" says nothing of when the wedding is).
    topic = old_asked & new_asked - who
    if topic and any(_held(c, topic) for c in _stated(new_text)):
        return True
    # Or one of its clauses gives a slot of the older another value, the query naming a word
    # of that slot that is not a person ("我儿子二年级" -> "小家伙升三年级了", asked the grade).
    slots = _changed_slots(old_text, new_text)
    if any((asked & _content_terms(x.text) & _content_terms(y.text)) - who for x, y in slots):
        return True
    # Or the query asks for a number (``number``: :func:`jiyi.text.answers.asked_kind`) and
    # names the slot, its holder too, and the slot's number changed: asked how old the son
    # is, "我儿子8岁" -> "儿子过完生日9岁了" (the query's "几岁" is no word of either).
    return number and any(
        x.numeric
        and y.numeric
        and x.numeric != y.numeric
        and asked & _content_terms(x.text) & _content_terms(y.text)
        for x, y in slots
    )


@functools.lru_cache(maxsize=4096)
def _changed_slots(old: str, new: str) -> tuple[tuple[Claim, Claim], ...]:
    """The claim pairs of two texts where the newer gives the older's slot another value."""
    return tuple(
        (x, y) for x in claims(old) for y in claims(new) if (m := compare(x, y)) is not None and m.changed
    )


@functools.lru_cache(maxsize=4096)
def _apart_for_topic(old: str, new: str) -> str | None:
    """What keeps two texts apart for :func:`is_later_on_topic`: for two statements of one
    claim each, :func:`jiyi.write.slots.apart` read strictly ("the workshop after the
    conference" is another subject than "the conference"); for chatty turns of several
    claims, whose subjects the claim reader reads too roughly, another holder, scope or
    one more value only."""
    if len(claims(old)) == 1 and len(claims(new)) == 1:
        return apart(old, new, strict=True)
    why = apart(old, new)
    return None if why == "another subject" else why


@functools.lru_cache(maxsize=4096)
def _stated(text: str) -> tuple[str, ...]:
    """The clauses of a turn (or of a summary's lines) that state something."""
    return tuple(c for line in text.splitlines() for c in stated_clauses(line))


def _summary_of(summary: MemoryItem, said: MemoryItem) -> bool:
    """Whether ``summary`` is a later session summary of the user whose own turn or
    statement ``said`` is (not a named speaker's: a summary's lines do not say who)."""
    return (
        "episode" in summary.tags
        and summary.user_id == said.user_id
        and said.metadata.get("speaker") is None
        and said.metadata.get("role", "user") == "user"
        and (_statement(said) or RESOURCE_TAG in said.tags)
    )


@functools.lru_cache(maxsize=4096)
def _ended_sentences(text: str) -> tuple[str, ...]:
    # Texts come back search after search, as for _change_sentences.
    return tuple(ending_sentences(text))


def _names(named: frozenset[str], said: frozenset[str]) -> bool:
    """Whether ``said`` holds one of the ``named`` terms; a Chinese term inside a longer
    one counts (the tokenizer reads "用禅道" in one text and "禅道" in another)."""
    if named & said:
        return True
    han = [n for n in named if _HAN.match(n)]
    return any(n in m or m in n for n in han for m in said if _HAN.match(m))


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]{2}")


@functools.lru_cache(maxsize=4096)
def _object_terms(text: str) -> frozenset[str]:
    """Terms of what a one-claim statement gives as its value ("I drive a 2015 Honda
    Civic" -> civic, honda; "我的直属领导是王磊" -> 王磊): its terms less its holder's and
    subject's and, where the claim reads as verb | object, the verb's; for a statement the
    claim reader does not parse ("我和朋友阿杰合租"), its terms less the people it is about.
    Times and amounts are left out. Empty for a text of several claims, which is
    conversation rather than one statement."""
    found = claims(text)
    if not found:
        named = _content_terms(text) - _who(text)
    elif len(found) == 1:
        c = found[0]
        drop = {t for w in (*c.holder, *c.subject) for t in terms(w)}
        if "|" in c.predicate:
            drop.update(terms(c.predicate[0]))
        named = _content_terms(text) - drop
    else:
        return frozenset()
    # A time or an amount in common ("周四下午") ties two different things by chance.
    return frozenset(t for t in named if not is_time_or_amount(t))


@functools.lru_cache(maxsize=4096)
def _change_sentences(text: str) -> tuple[str, ...]:
    # Texts come back search after search (the same turns rank for related queries).
    return tuple(change_sentences(text))


def said_text(item: MemoryItem) -> str:
    """What a turn says, without the speaker's name in front (a name the two turns of one
    speaker always share)."""
    name = item.metadata.get("speaker")
    if isinstance(name, str) and item.content.startswith(f"{name}: "):
        return item.content[len(name) + 2 :]
    return item.content


@functools.lru_cache(maxsize=4096)
def _held(text: str, asked: frozenset[str]) -> frozenset[str]:
    """The query terms ``asked`` that ``text`` holds: among its terms, or, for a term of two
    or more Han characters, anywhere in it (the segmenter cuts "做主库" as 做主 | 库, the
    query "主库用什么" as 主库 | 用)."""
    held = _content_terms(text) & asked
    rest = [t for t in asked - held if len(t) > 1 and _ALL_HAN.fullmatch(t)]
    return held | frozenset(t for t in rest if t in text) if rest else held


_ALL_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")


@functools.lru_cache(maxsize=4096)
def _content_terms(text: str) -> frozenset[str]:
    """Terms that can tie two statements to one topic: not a lone Han character
    (开, 说) and not a bare number (a value, which is what changes)."""
    return frozenset(t for t in terms(text) if len(t) > 1 and not t.isdigit())


def _one_person(a: MemoryItem, b: MemoryItem) -> bool:
    """Whether ``b`` (a turn or statement) can change what ``a`` holds: the same speaker
    (a turn, or a fact extracted from one, names who said it), or ``a`` is a summary of
    that user's earlier session (an episode holds what was said then)."""
    if a.user_id != b.user_id or not (_statement(b) or RESOURCE_TAG in b.tags):
        return False
    if "episode" in a.tags:
        return True
    if not (_statement(a) or RESOURCE_TAG in a.tags):
        return False
    sa, sb = a.metadata.get("speaker"), b.metadata.get("speaker")
    ra, rb = a.metadata.get("role", "user"), b.metadata.get("role", "user")
    return sa == sb and ra == rb == "user"


# Any capitalised word, a sentence's first too ("Maria teaches math"): one that is not a
# name ("Piano lessons ...") only makes the tie stricter.
_NAME = re.compile(r"\b[A-Z][a-z]+")


@functools.lru_cache(maxsize=4096)
def _who(text: str) -> frozenset[str]:
    """Terms naming whom a text is about: its claims' holders ("my brother"), subjects that
    are people (a relative, a capitalised name, two or three Han characters led by a
    common surname) and capitalised names. A person in common ties two statements to that
    person, not to one fact of theirs ("My brother works at Google" / "My brother just
    moved to Seattle"); a thing in common (the rent, the wedding, 血压) does."""
    found = {m.group() for m in _NAME.finditer(text)}
    for c in claims(text):
        found.update(c.holder)
        found.update(w for w in c.subject if is_person(w))
    return frozenset(t for w in found for t in terms(w))


_extractor = RuleExtractor()


def is_replaced_in_summary(newer: Candidate, older: Candidate) -> bool:
    """Whether ``newer``, a user's statement, is later than ``older``, an episode of that
    user one of whose lines (what the user said or stated,
    :func:`jiyi.session.digest.user_lines`) it changes: a keyed statement (a city, an
    employer: :attr:`Extracted.key`) whose key the line gives another value, or a
    statement that retired another at write time whose slot the line fills with another
    value (:func:`jiyi.write.slots.compare`: "My daughter just turned 6" against "- Fact:
    My daughter is 5 years old")."""
    a, b = older.item, newer.item
    if "episode" not in a.tags or a.user_id != b.user_id or not _statement(b) or not _later(b, a):
        return False
    # A named speaker's fact (a conversation between several people): an episode's lines
    # do not say whose statement each was.
    if b.metadata.get("speaker") is not None:
        return False
    key, value = b.metadata.get("key"), (b.structured or {}).get("value")
    if isinstance(key, str) and isinstance(value, str):
        said = _keyed_values(a.content).get(key)
        if said is not None and _norm(value) not in said:
            return True
    if not any(r.type == RelationType.SUPERSEDES for r in b.relations):
        return False
    return any(_fills_with_another(line, b.content) for line in user_lines(a.content))


def quotes_older(episode: Candidate, older: Candidate, newer: Candidate) -> bool:
    """Whether ``episode`` is an episode earlier than ``newer`` one of whose user lines says
    what ``older`` says: when ``older`` gives way to ``newer``, the episode's copy of it
    does too ("- Fact: The kids' swim class is Saturday at 9" below "Swim class for the
    kids is Saturdays at 10:30")."""
    if episode.item is older.item:
        return False
    return quotes_retired(episode, said_text(older.item), newer)


def quotes_retired(episode: Candidate, said: str, newer: Candidate) -> bool:
    """Whether ``episode`` is an episode earlier than ``newer`` one of whose user lines says
    ``said``: the text of a statement ``newer`` retired, at write time
    (:func:`jiyi.read.search.follow_replacements` brings it) or in this ranking
    (:func:`quotes_older`). "- 事实：我周二下午两点半看牙医" goes with the fact it quotes, which
    "说错了，看牙是周二下午三点半" superseded, though no slot reading aligns the two."""
    a, b = episode.item, newer.item
    if "episode" not in a.tags or a.user_id != b.user_id or not _later(b, a):
        return False
    letters = _letters(said)
    return bool(letters) and any(
        letters in line or line in letters for line in _user_letters(a.content) if line
    )


@functools.lru_cache(maxsize=1024)
def _user_letters(summary: str) -> tuple[str, ...]:
    return tuple(_letters(line) for line in user_lines(summary))


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


@functools.lru_cache(maxsize=4096)
def _fills_with_another(line: str, statement: str) -> bool:
    """Whether ``statement`` gives a slot of ``line`` another value. Asked only of a
    statement the write path already let retire another, so the slot reading alone
    decides (the cosine is not asked again)."""
    return any(
        (m := compare(old, new)) is not None and m.changed
        for old in claims(line)
        for new in claims(statement)
    )


@functools.lru_cache(maxsize=1024)
def _keyed_values(summary: str) -> dict[str, frozenset[str]]:
    """Per key, the values an episode's user lines state (read by the offline extractor).
    Episodes come back search after search; most have no keyed line."""
    found: dict[str, set[str]] = {}
    for text in user_lines(summary):
        for e in _extractor.extract([Turn("user", text)]):
            value = (e.structured or {}).get("value")
            if e.key is not None and isinstance(value, str):
                found.setdefault(e.key, set()).add(_norm(value))
    return {k: frozenset(v) for k, v in found.items()}


def _norm(value: str) -> str:
    return " ".join(value.casefold().split())
