"""Reconciliation: what to do with a new memory given the similar ones already stored.

The caller finds stored items similar to a candidate (vector search, key lookup) and
passes them in as :class:`Existing`; this module only decides. It does no I/O.

Two deciders return the same :class:`Decision`:

* :func:`decide` applies fixed rules (seed 001's semantic upsert, seed 002's
  merge/replace/keep-both idea). Each reason names its rule:

  a. nothing active is similar (none given, or the closest is below
     ``related_threshold``) and no other rule applies -> ``add``;
  b. an active item fills the same key slot ("favourite_language"): the same value
     -> ``reinforce``; a different value -> ``supersede`` it when the candidate is at
     least as confident, otherwise ``none`` (the more confident value stays);
  c. the same meaning: the same text, or cosine >= ``duplicate_threshold`` -> ``reinforce``
     (confidence + ``reinforce_step``, mentions + 1), unless the two carry different key
     slots or different numbers, which makes them different facts (rule e);
  d. a preference or decision with the opposite polarity on the same object
     ("I like coffee" / "I no longer like coffee", "我喜欢喝咖啡" / "我不再喜欢喝咖啡了",
     structured ``polarity`` like/dislike, a clause of the candidate's source turn such
     as "I no longer prefer tabs; I prefer spaces", or a decision whose choice the other
     one rejected) -> ``supersede``, at any similarity (the caller found the items similar;
     the object must match);
  e. related (cosine >= ``related_threshold``) but different facts -> ``keep_both``;
  g. (before e) a statement that gives another amount of the same unit ("my rent is 1,450
     euros" / "I pay 1,520 euros in rent"), cosine >= ``amount_threshold``, every other
     number the same, by the same holder about the same subject (:func:`jiyi.write.slots.apart`),
     and neither an event nor something that adds up (habit, preference, skill) -> ``supersede``.

  They are checked in the order b, c (same text), d, c (cosine), e, a: the polarity
  check comes before the cosine duplicate check because "I like X" and "I no longer
  like X" are often very close in embedding space.

* :class:`LLMReconciler` asks a chat model. Stored items are shown to the model with
  short integer ids (0, 1, ...), never their real ids, and :func:`read_reconcile` maps
  the number back, so the model cannot invent or mistype an id; an unknown number or
  action is an :class:`~jiyi.errors.LLMError`, which :func:`~jiyi.llm.base.json_flow`
  answers with one repair retry.

A decision never names an id that was not among the existing items. Applying it (adding
the new item, marking the old one superseded with a relation, bumping the mention count)
is the caller's job.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal, get_args

from jiyi.embed.scale import on_scale, stretch
from jiyi.errors import ConfigError, InvalidInput, LLMError
from jiyi.llm.base import ChatFlow, ChatModel, Message, arun_chat, json_flow, resolve_chat_model, run_chat
from jiyi.llm.jsonfix import repair_json
from jiyi.model import MemoryItem, MemoryType, Status
from jiyi.text.tokenize import EN_STOP, terms
from jiyi.write.extract import Extracted
from jiyi.write.gate import reinforced_confidence
from jiyi.write.slots import GAP, Claim, SlotMatch, apart, claims, compare, digits

__all__ = [
    "RECONCILE_SYSTEM_PROMPT",
    "Action",
    "Decision",
    "Existing",
    "LLMReconciler",
    "ReconcileConfig",
    "build_reconcile_messages",
    "decide",
    "read_reconcile",
    "reconcile_flow",
]

Action = Literal["add", "update", "merge", "keep_both", "supersede", "reinforce", "none"]
ACTIONS: tuple[Action, ...] = get_args(Action)


@dataclass(frozen=True)
class Existing:
    """A stored item similar to the candidate, found by the caller, with its cosine similarity."""

    item: MemoryItem
    cosine: float


@dataclass(frozen=True)
class Decision:
    """What to do with a candidate memory, and why."""

    action: Action
    target_id: str | None
    """The existing item acted on (superseded, reinforced, updated, merged into, related to);
    always one of the ids passed in, or ``None``."""
    content: str | None
    """New content of the target for ``update`` and ``merge``; ``None`` otherwise."""
    reason: str
    """Human-readable: the rule (or model) that decided, and the similarity."""
    confidence: float | None = None
    """Confidence to store on the item that is kept: the new item for add / keep_both /
    supersede, the target for reinforce / update / merge; ``None`` for ``none``."""
    kept: str | None = None
    """For ``supersede``: what the retired item says besides what changed, stored as a
    memory of its own (:func:`keep_the_rest`); ``None``: nothing else."""


@dataclass(frozen=True)
class ReconcileConfig:
    """Thresholds of the rule-based :func:`decide`."""

    duplicate_threshold: float = 0.85
    """Cosine at or above which the candidate says the same as a stored item (reinforce it)."""
    related_threshold: float = 0.6
    """Cosine below which a stored item is unrelated (the candidate is simply added)."""
    slot_threshold: float = 0.5
    """Cosine from which a statement with the same holder, subject and relation but another
    value supersedes a stored one (rule f); :attr:`cue_discount` lower when it says the
    change ("actually", "现在", "moved to") about a shared subject or relation."""
    cue_discount: float = 0.2
    """How much lower the slot bar is when the structure says the change: a difference of
    two cosines, so another embedder's is this times its :func:`~jiyi.embed.scale.stretch`
    (:func:`config_on_scale`), not a bar moved with :func:`~jiyi.embed.scale.on_scale`."""
    reinforce_step: float = 0.05
    """Confidence added to a re-confirmed item (seed 001), capped at 1.0."""
    amount_threshold: float = 0.7
    """Cosine from which a statement giving another amount of the same unit supersedes a
    stored one when nothing else differs (rule g; the later-statement bar of
    :mod:`jiyi.read.versions`: below it, "I run 10 km a week" / "I swim 2 km a week")."""

    def __post_init__(self) -> None:
        for name in (
            "duplicate_threshold",
            "related_threshold",
            "reinforce_step",
            "slot_threshold",
            "cue_discount",
            "amount_threshold",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be a number within 0..1, not {value!r}")
        if self.related_threshold > self.duplicate_threshold:
            raise ConfigError(
                f"related_threshold ({self.related_threshold}) must not exceed "
                f"duplicate_threshold ({self.duplicate_threshold})"
            )


def config_on_scale(cfg: ReconcileConfig, model_id: str) -> ReconcileConfig:
    """``cfg`` for the embedder ``model_id``: every cosine bar moved onto its scale
    (:func:`jiyi.embed.scale.on_scale`; the bars are given on the default embedder's, where
    e5 would find most distinct statements duplicates) and the cue discount stretched."""
    moved = replace(
        cfg,
        duplicate_threshold=on_scale(cfg.duplicate_threshold, model_id),
        related_threshold=on_scale(cfg.related_threshold, model_id),
        slot_threshold=on_scale(cfg.slot_threshold, model_id),
        amount_threshold=on_scale(cfg.amount_threshold, model_id),
        # A difference of two cosines is not a bar: on_scale leaves 0.2 as it is (below
        # the unrelated level), which put e5's cued bar at 0.887 - 0.2 = 0.687, under e5's
        # unrelated level (0.83). It narrows with the span from unrelated to identical (e5:
        # 0.2 -> 0.045), so the discounted bar sits where on_scale puts slot_threshold - 0.2.
        cue_discount=cfg.cue_discount * stretch(model_id),
    )
    return cfg if moved == cfg else moved


# -- small helpers ----------------------------------------------------------------------------


def _short(text: str, limit: int = 40) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


_PUNCT_SPACE = re.compile(r"[\s\W_]+", re.UNICODE)


def _norm(value: Any) -> str:
    """Text for equality checks: NFKC, case-folded, without spaces or punctuation."""
    if isinstance(value, list | tuple):
        value = " ".join(str(v) for v in value)
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return _PUNCT_SPACE.sub("", text)


def _item_key(item: MemoryItem) -> str | None:
    raw = (item.structured or {}).get("key") or item.metadata.get("key")
    return _clean_key(raw)


def _candidate_key(candidate: Extracted) -> str | None:
    return _clean_key(candidate.key or (candidate.structured or {}).get("key"))


def _clean_key(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    key = re.sub(r"[\s\-]+", "_", raw.strip().casefold()).strip("_")
    return key or None


_MISSING = object()


def _item_value(item: MemoryItem) -> Any:
    structured = item.structured or {}
    if "value" in structured and structured["value"] is not None:
        return structured["value"]
    value = item.metadata.get("value")
    return _MISSING if value is None else value


def _candidate_value(candidate: Extracted) -> Any:
    structured = candidate.structured or {}
    value = structured.get("value")
    return _MISSING if value is None else value


def _same_value(a_value: Any, a_content: str, b_value: Any, b_content: str) -> bool:
    """Compare two key slots: by their values when both have one, else a value against the other's text."""
    if a_value is not _MISSING and b_value is not _MISSING:
        return _norm(a_value) == _norm(b_value)
    if a_value is not _MISSING:
        needle = _norm(a_value)
        return bool(needle) and needle in _norm(b_content)
    if b_value is not _MISSING:
        needle = _norm(b_value)
        return bool(needle) and needle in _norm(a_content)
    return _norm(a_content) == _norm(b_content)


def _shown(value: Any, content: str) -> str:
    return _short(content if value is _MISSING else str(value))


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _plain(text: str) -> str:
    # "five" and 五岁 are the same numbers as 5 and 5岁; 八点一刻 the same time as 8:15.
    return digits(unicodedata.normalize("NFKC", text).casefold())


def _numbers(text: str) -> frozenset[str]:
    return frozenset(_NUMBER.findall(_plain(text)))


# A number and what it counts: the next word ("1,450 euros", "20 mg", "nine engineers") or
# the next Han characters (4岁, 76公斤, 50万), and what it is "of" ("16 GB of memory").
_QUANTITY = re.compile(
    r"(?<![a-z\d.,])(\d+(?:[.,]\d+)?)\s*([a-z%]+|[\u4e00-\u9fff]{1,2})(?:\s+of\s+([a-z]+))?"
)
# A time of day, hours:minutes (2:30pm; 下午2:30 as digits() writes 两点半).
_CLOCK = re.compile(r"(?<![\d.,:])\d{1,2}:\d{2}(?![\d:])")


@dataclass(frozen=True)
class _Quantities:
    amounts: dict[str, set[str]]
    """Each unit with the numbers it comes with ("euro" -> {"1,450"}; times as "o'clock")."""
    of: dict[str, set[str]]
    """Each unit with what it is of ("gb" -> {"memory"})."""
    rest: frozenset[str]
    """The numbers outside those quantities (the 2 of 周二, the 1 of Q1)."""


def _quantities(text: str) -> _Quantities:
    norm = _plain(text)
    amounts: dict[str, set[str]] = {}
    of: dict[str, set[str]] = {}
    for m in _CLOCK.finditer(norm):
        amounts.setdefault("o'clock", set()).add(m.group())
    norm = _CLOCK.sub(" ", norm)
    for m in _QUANTITY.finditer(norm):
        unit = m.group(2)
        if unit in EN_STOP:  # "room 214 is", "at 9 on": no unit
            continue
        unit = unit[:-1] if len(unit) > 3 and unit.endswith("s") else unit
        amounts.setdefault(unit, set()).add(m.group(1))
        if m.group(3):
            of.setdefault(unit, set()).add(m.group(3))
    return _Quantities(amounts, of, frozenset(_NUMBER.findall(_QUANTITY.sub(" ", norm))))


def _changed_quantity(new: str, old: str) -> str | None:
    """The unit whose amount changed between two statements that count the same things with
    one number each ("my rent is 1,450 euros" / "I pay 1,520 euros in rent") while every
    other number stays, or None. "16 GB of memory" and "512 GB of disk" count different
    things."""
    a, b = _quantities(old), _quantities(new)
    if a.rest != b.rest or any(a.of[u] != b.of[u] for u in a.of.keys() & b.of.keys()):
        return None
    for unit in a.amounts.keys() & b.amounts.keys():
        was, now = a.amounts[unit], b.amounts[unit]
        if len(was) == len(now) == 1 and was != now:
            return f"{unit}: {next(iter(was))} -> {next(iter(now))}"
    return None


# -- polarity ----------------------------------------------------------------------------------

# Negations that may stand right before a preference or usage verb.
_EN_NEG = (
    r"no\s+longer|not\s+any\s*more|do\s+not|does\s+not|did\s+not|don't|doesn't|didn't|will\s+not|won't|"
    r"can\s+not|cannot|can't|never|not|stopped|quit|used\s+to"
)
_ZH_NEG = r"再也不|已经不|不再|从不|不会再?|不想再?|不太|没有|不|没|别"
_FAMILIES: dict[str, tuple[str, str]] = {
    # family: (positive verbs, which a negation may precede; inherently negative verbs)
    "like": (
        r"\b(?:likes?|liked|liking|loves?|loved|loving|enjoys?|enjoyed|enjoying|prefers?|preferred|preferring|"
        r"(?:a\s+)?(?:big\s+)?fan\s+of|fond\s+of)\b|喜欢|喜爱|偏好|偏爱|热爱|钟爱|最爱|爱喝|爱吃|爱用|爱看|爱玩",
        r"\b(?:dislikes?|disliked|hates?|hated|hating|detests?|detested|can't\s+stand|cannot\s+stand)\b|"
        r"讨厌|厌恶|反感|受不了",
    ),
    "use": (
        r"\b(?:uses?|using|chooses?|chose|chosen|choosing|picks?|picked|adopts?|adopted|go(?:es)?\s+with|"
        r"went\s+with|switch(?:es|ed)?\s+to)\b|使用|采用|选用|选择|改用|(?:(?<=[我们在都也还只不再没定])|(?<=主要)|"
        r"(?<=一直)|(?<=习惯))用(?![户途法处量品于])",
        r"\b(?:avoids?|avoided|avoiding|rejects?|rejected|rejecting)\b|弃用|放弃|不用",
    ),
    "consume": (
        r"\b(?:drinks?|drank|drinking|eats?|ate|eating)\b|喝|吃",
        r"戒了|戒掉",
    ),
}
_ANYMORE = re.compile(r"\b(?:any\s*more|no\s+more)\b")


@lru_cache(maxsize=1)
def _family_patterns() -> dict[str, tuple[re.Pattern[str], re.Pattern[str]]]:
    out: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {}
    for family, (positive, negative) in _FAMILIES.items():
        verb = re.compile(
            rf"(?P<neg>(?:\b(?:{_EN_NEG})\b\s+(?:(?:really|even|much|like)\s+)?|(?:{_ZH_NEG})\s*))?"
            rf"(?P<verb>{positive})"
        )
        out[family] = (verb, re.compile(negative))
    return out


# Words that say nothing about the object of a stance.
_FILLER = (
    "user users i we really very much still now currently anymore any more longer again today decided decide "
    "用户 我 我们 现在 目前 真的 非常 特别 一直 已经 了 最 很 都 也 还 决定 打算"
)


@lru_cache(maxsize=1)
def _filler_terms() -> frozenset[str]:
    return frozenset(terms(_FILLER))


@dataclass(frozen=True)
class _Stance:
    polarity: dict[str, int]
    """family ("like", "use", "consume", or "*" for an explicit structured polarity) -> +1 / -1"""
    obj: frozenset[str]


_POSITIVE_WORDS = frozenset({"like", "likes", "love", "prefer", "positive", "+", "+1", "1", "喜欢", "正面"})
_NEGATIVE_WORDS = frozenset(
    {"dislike", "dislikes", "hate", "negative", "-", "-1", "avoid", "against", "讨厌", "不喜欢", "负面"}
)


# A stance of someone else ("my wife doesn't like coffee") says nothing about the user's own.
_THIRD_PARTY = re.compile(
    r"\b(?:he|she|they|his|her|hers|him|them|their|wife|husband|partner|girlfriend|boyfriend|friends?|"
    r"mother|mom|mum|father|dad|parents?|sons?|daughters?|kids?|children|colleagues?|coworkers?|boss|"
    r"brothers?|sisters?)\b|他|她|妻子|老婆|老公|丈夫|男朋友|女朋友|朋友|妈妈|母亲|爸爸|父亲|父母|儿子|女儿|"
    r"孩子|同事|老板|哥哥|姐姐|弟弟|妹妹"
)


def _text_stance(text: str) -> _Stance | None:
    norm = unicodedata.normalize("NFKC", text).replace("’", "'").casefold()
    if _THIRD_PARTY.search(norm):
        return None
    signs: dict[str, set[int]] = {}
    spans: list[tuple[int, int]] = []
    for family, (verb, negative) in _family_patterns().items():
        for m in verb.finditer(norm):
            signs.setdefault(family, set()).add(-1 if m.group("neg") else 1)
            spans.append(m.span())
        for m in negative.finditer(norm):
            signs.setdefault(family, set()).add(-1)
            spans.append(m.span())
    if not signs:
        return None
    flip = bool(_ANYMORE.search(norm))
    polarity: dict[str, int] = {}
    for family, found in signs.items():
        if len(found) == 1:  # mixed signs in one text ("likes tea, not coffee") are ambiguous
            sign = next(iter(found))
            polarity[family] = -1 if flip else sign
    if not polarity:
        return None
    return _Stance(polarity, _object_terms(norm, spans))


def _object_terms(text: str, spans: list[tuple[int, int]] | None = None) -> frozenset[str]:
    """Terms of ``text`` without its stance phrases (``spans``, found when not given) and filler."""
    norm = unicodedata.normalize("NFKC", text).replace("’", "'").casefold()
    if spans is None:
        spans = [
            m.span()
            for verb, negative in _family_patterns().values()
            for pattern in (verb, negative)
            for m in pattern.finditer(norm)
        ]
    rest = list(norm)
    for start, end in spans:
        rest[start:end] = [" "] * (end - start)
    return frozenset(terms("".join(rest))) - _filler_terms()


def _structured_stance(structured: Mapping[str, Any] | None, text: str) -> _Stance | None:
    if not structured:
        return None
    raw = next((structured[k] for k in ("polarity", "sentiment", "stance") if k in structured), None)
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        return None
    word = str(raw).strip().casefold()
    if word in _POSITIVE_WORDS:
        sign = 1
    elif word in _NEGATIVE_WORDS:
        sign = -1
    else:
        return None
    target = next((structured[k] for k in ("object", "item", "target", "value") if structured.get(k)), None)
    return _Stance({"*": sign}, _object_terms(str(target) if target is not None else text))


def _stance(structured: Mapping[str, Any] | None, text: str) -> _Stance | None:
    return _structured_stance(structured, text) or _text_stance(text)


def _same_object(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= 0.5


def _opposed(a: _Stance, b: _Stance) -> str | None:
    """The family in which ``a`` and ``b`` take opposite sides of the same object, if any."""
    if not _same_object(a.obj, b.obj):
        return None
    for family, sign in a.polarity.items():
        for other_family, other_sign in b.polarity.items():
            if (family == other_family or "*" in (family, other_family)) and sign == -other_sign:
                return family if family != "*" else other_family
    return None


def _reversed_decision(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> str | None:
    """A choice of one decision that the other one rejected."""
    if not a or not b:
        return None

    def rejected(s: Mapping[str, Any]) -> set[str]:
        raw = s.get("rejected") or s.get("alternatives") or ()
        if isinstance(raw, str):
            raw = [raw]
        return {_norm(r) for r in raw if isinstance(r, str | int | float)} - {""}

    for x, y in ((a, b), (b, a)):
        choice = x.get("choice")
        if isinstance(choice, str) and _norm(choice) and _norm(choice) in rejected(y):
            return choice
    return None


_POLAR_TYPES = frozenset({MemoryType.PREFERENCE, MemoryType.DECISION, MemoryType.HABIT})
# Events happen many times and rules stack: neither has one value per slot.
_NO_SLOT_TYPES = frozenset({MemoryType.EVENT, MemoryType.PATTERN, MemoryType.CONSTRAINT})
# Several habits and preferences hold at once: only a word of change replaces one.
_STACKING_TYPES = frozenset({MemoryType.HABIT, MemoryType.PREFERENCE, MemoryType.SKILL})


# -- the rules ---------------------------------------------------------------------------------


def _check_existing(existing: Sequence[Existing]) -> list[Existing]:
    checked: list[Existing] = []
    for i, e in enumerate(existing):
        if not isinstance(e, Existing):
            raise InvalidInput(f"existing[{i}] is {type(e).__name__}, not Existing", field="existing")
        if isinstance(e.cosine, bool) or not isinstance(e.cosine, int | float) or not math.isfinite(e.cosine):
            raise InvalidInput(
                f"existing[{i}].cosine must be a finite number, not {e.cosine!r}", field="existing"
            )
        checked.append(e)
    return checked


def _active(existing: Sequence[Existing]) -> list[Existing]:
    """Active items, most similar first (ties keep the caller's order)."""
    active = [e for e in _check_existing(existing) if e.item.status == Status.ACTIVE]
    return sorted(active, key=lambda e: -e.cosine)


def decide(
    candidate: Extracted, existing: Sequence[Existing], cfg: ReconcileConfig | None = None
) -> Decision:
    """Decide by fixed rules (see the module docstring) what to do with ``candidate``."""
    cfg = cfg or ReconcileConfig()
    if not isinstance(candidate, Extracted):
        raise InvalidInput(
            f"candidate must be an Extracted, not {type(candidate).__name__}", field="candidate"
        )
    active = _active(existing)
    inactive = len(existing) - len(active)
    if not active:
        why = f" ({inactive} similar item(s) are archived or superseded)" if inactive else ""
        return Decision(
            "add",
            None,
            None,
            f"rule a (nothing similar): no active stored item is similar{why}; add as new",
            candidate.confidence,
        )
    for rule in (_by_key, _by_text, _by_polarity, _by_slot, _by_similarity):
        decision = rule(candidate, active, cfg)
        if decision is not None:
            return decision
    raise AssertionError("unreachable: _by_similarity always decides")  # pragma: no cover


def keep_the_rest(decision: Decision, candidate: Extracted, targets: Mapping[str, MemoryItem]) -> Decision:
    """``decision``, with what the item it retires says besides the change (:attr:`Decision.kept`).

    "I moved to Berlin" changes where "I live in Munich and work as a nurse" lives, not that
    job; retired whole, the job would answer no search again (a retired item lends its
    words to what replaced it). So the clauses of the older (:func:`jiyi.write.slots.claims`)
    that no clause of the candidate speaks of (:func:`_touches`) are kept as a memory of their
    own: "I work as a nurse". A value said with more in one clause ("in Munich with my dog
    Rex") is not parted, and retires whole as before."""
    target = targets.get(decision.target_id or "") if decision.action == "supersede" else None
    if target is None:
        return decision
    mine = _candidate_claims(candidate)
    theirs = claims(target.content)
    rest = [old.text for old in theirs if not any(_touches(old, new) for new in mine)]
    if not rest or len(rest) == len(theirs):
        # All of it changed, or none of it reads as the slot changed (a model's or a key's
        # decision about the whole item): the decision stands.
        return decision
    kept = _in_its_words("; ".join(rest), target.content)
    return replace(
        decision,
        kept=kept,
        reason=f"{decision.reason}; what {target.id} says besides, {_short(kept, 60)!r}, is kept as a memory of its own",
    )


def _in_its_words(text: str, source: str) -> str:
    """``text``, read off ``source`` lowercased, with each word as ``source`` writes it
    ("i work at google" -> "I work at Google") and a capital first letter."""
    written = {w.lower(): w for w in re.findall(r"[^\W_]+(?:'[^\W_]+)?", source)}
    out = re.sub(r"[^\W_]+(?:'[^\W_]+)?", lambda m: written.get(m.group(), m.group()), text)
    return out[:1].upper() + out[1:]


def _touches(old: Claim, new: Claim) -> bool:
    """Whether ``new`` speaks of what ``old`` does: a word of its subject or of its relation
    and value in common ("i live in munich" / "i moved to berlin" share the relation, read
    as ``live``; "i work as a nurse" shares nothing with it). Stricter than
    :func:`jiyi.write.slots.compare`, for which any two of the speaker's clauses fill one slot."""
    return bool(old.subject & new.subject) or bool((set(old.predicate) & set(new.predicate)) - {GAP})


def _by_key(candidate: Extracted, active: list[Existing], cfg: ReconcileConfig) -> Decision | None:
    key = _candidate_key(candidate)
    if key is None:
        return None
    same_slot = [e for e in active if _item_key(e.item) == key]
    if not same_slot:
        return None
    value = _candidate_value(candidate)
    for e in same_slot:
        old_value = _item_value(e.item)
        if _same_value(value, candidate.content, old_value, e.item.content):
            new_confidence = reinforced_confidence(e.item.confidence, cfg.reinforce_step)
            return Decision(
                "reinforce",
                e.item.id,
                None,
                f"rule b (same key {key!r}, same value {_shown(old_value, e.item.content)!r}): re-confirms "
                f"{e.item.id} (cosine {e.cosine:.3f}); confidence {e.item.confidence:.2f} -> "
                f"{new_confidence:.2f}, mentions +1",
                new_confidence,
            )
    old = max(same_slot, key=lambda e: (e.item.confidence, e.cosine))
    new_shown = _shown(value, candidate.content)
    old_shown = _shown(_item_value(old.item), old.item.content)
    if candidate.confidence >= old.item.confidence:
        return Decision(
            "supersede",
            old.item.id,
            None,
            f"rule b (same key {key!r}, different value): new value {new_shown!r} (confidence "
            f"{candidate.confidence:.2f}) supersedes {old_shown!r} (confidence {old.item.confidence:.2f}) "
            f"of {old.item.id} (cosine {old.cosine:.3f}); the old item is kept as superseded",
            candidate.confidence,
        )
    return Decision(
        "none",
        old.item.id,
        None,
        f"rule b (same key {key!r}, different value): keeps the more confident existing value "
        f"{old_shown!r} of {old.item.id} (confidence {old.item.confidence:.2f} > {candidate.confidence:.2f} "
        f"of {new_shown!r}; cosine {old.cosine:.3f})",
        None,
    )


def _by_text(candidate: Extracted, active: list[Existing], cfg: ReconcileConfig) -> Decision | None:
    text = _norm(candidate.content)
    for e in active:
        if text and _norm(e.item.content) == text:
            new_confidence = reinforced_confidence(e.item.confidence, cfg.reinforce_step)
            return Decision(
                "reinforce",
                e.item.id,
                None,
                f"rule c (duplicate, same text): {e.item.id} already says this (cosine {e.cosine:.3f}); "
                f"confidence {e.item.confidence:.2f} -> {new_confidence:.2f}, mentions +1",
                new_confidence,
            )
    return None


_CLAUSE = re.compile(r"[;；,，.。!！?？\n]+|\bbut\b|\bhowever\b|但是|不过|可是", re.IGNORECASE)


def _candidate_stances(candidate: Extracted) -> list[tuple[str, _Stance]]:
    """The candidate's own stance, then those of the clauses of the turn it came from.

    "I no longer prefer tabs; I prefer spaces" yields the candidate "I prefer spaces";
    the clause "I no longer prefer tabs" is what contradicts a stored "I prefer tabs".
    """
    out: list[tuple[str, _Stance]] = []
    own = _stance(candidate.structured, candidate.content)
    if own is not None:
        out.append(("the new statement", own))
    if candidate.source_text and _norm(candidate.source_text) != _norm(candidate.content):
        for clause in _CLAUSE.split(candidate.source_text):
            found = _text_stance(clause) if clause.strip() else None
            if found is not None:
                out.append((f"the user's words {_short(clause.strip())!r}", found))
    return out


def _by_polarity(candidate: Extracted, active: list[Existing], cfg: ReconcileConfig) -> Decision | None:
    mine: list[tuple[str, _Stance]] | None = None
    for e in active:
        reversed_choice = None
        if candidate.memory_type == MemoryType.DECISION or e.item.memory_type == MemoryType.DECISION:
            reversed_choice = _reversed_decision(candidate.structured, e.item.structured)
        if reversed_choice is not None:
            return Decision(
                "supersede",
                e.item.id,
                None,
                f"rule d (reversed decision): {reversed_choice!r} is chosen by one decision and rejected by "
                f"the other, {e.item.id} (cosine {e.cosine:.3f}); the newer decision supersedes it",
                candidate.confidence,
            )
        if candidate.memory_type not in _POLAR_TYPES and e.item.memory_type not in _POLAR_TYPES:
            continue
        if mine is None:
            mine = _candidate_stances(candidate)
        theirs = _stance(e.item.structured, e.item.content) if mine else None
        if theirs is None:
            continue
        for source, stance in mine:
            family = _opposed(stance, theirs)
            if family is None:
                continue
            sign = stance.polarity.get(family, stance.polarity.get("*"))
            now = "positive" if sign == 1 else "negative"
            obj = ", ".join(sorted(stance.obj & theirs.obj))
            return Decision(
                "supersede",
                e.item.id,
                None,
                f"rule d (opposite polarity): {source} is {now} ({family}) about the same object "
                f"({obj}) as {e.item.id}, which says the opposite (cosine {e.cosine:.3f}); the newer "
                f"statement supersedes it",
                candidate.confidence,
            )
    return None


def _candidate_claims(candidate: Extracted) -> list[Claim]:
    """Claims of the candidate, then of the other clauses of the turn it came from."""
    found = claims(candidate.content)
    if candidate.source_text and _norm(candidate.source_text) != _norm(candidate.content):
        found += claims(candidate.source_text)
    return found


def _slot_match(
    mine: list[Claim], item: MemoryItem, cosine: float, cfg: ReconcileConfig, stacking: bool
) -> SlotMatch | None:
    """The strongest slot match between the candidate's claims and an item's: a change first."""
    best: SlotMatch | None = None
    for old in claims(item.content):
        for new in mine:
            match = compare(
                old,
                new,
                cosine=cosine,
                min_cosine=cfg.slot_threshold,
                stacking=stacking,
                cue_discount=cfg.cue_discount,
            )
            if match is not None and (best is None or (match.changed and not best.changed)):
                best = match
    return best


def _by_slot(candidate: Extracted, active: list[Existing], cfg: ReconcileConfig) -> Decision | None:
    """Rule f: the same holder, subject and relation with a different value supersedes
    ("my flight is at 9am" -> "... at 5pm", "I live in Berlin" -> "I moved to Munich");
    the same value re-confirms. Another holder or subject is never touched."""
    if candidate.memory_type in _NO_SLOT_TYPES:
        return None
    mine = _candidate_claims(candidate)
    if not mine:
        return None
    for e in active:
        if e.item.memory_type in _NO_SLOT_TYPES:
            continue
        stacking = bool({candidate.memory_type, e.item.memory_type} & _STACKING_TYPES)
        match = _slot_match(mine, e.item, e.cosine, cfg, stacking)
        if match is None:
            continue
        if match.changed:
            return Decision(
                "supersede",
                e.item.id,
                None,
                f"rule f (same slot, new value): {match.reason}; the newer statement supersedes "
                f"{e.item.id} (cosine {e.cosine:.3f}), which is kept as superseded",
                candidate.confidence,
            )
        # A duplicate by similarity is rule c's to reinforce; this catches the same value
        # said in other words ("5" / "five", "still").
        if (
            cfg.related_threshold <= e.cosine < cfg.duplicate_threshold
            and _different_facts(candidate, e.item) is None
        ):
            new_confidence = reinforced_confidence(e.item.confidence, cfg.reinforce_step)
            return Decision(
                "reinforce",
                e.item.id,
                None,
                f"rule f (same slot, same value): {match.reason}; re-confirms {e.item.id} (cosine "
                f"{e.cosine:.3f}); confidence {e.item.confidence:.2f} -> {new_confidence:.2f}, mentions +1",
                new_confidence,
            )
    return None


def _by_similarity(candidate: Extracted, active: list[Existing], cfg: ReconcileConfig) -> Decision:
    best = active[0]
    if best.cosine >= cfg.duplicate_threshold:
        different = _different_facts(candidate, best.item)
        if different is None:
            new_confidence = reinforced_confidence(best.item.confidence, cfg.reinforce_step)
            return Decision(
                "reinforce",
                best.item.id,
                None,
                f"rule c (duplicate): cosine {best.cosine:.3f} >= {cfg.duplicate_threshold:.2f} with "
                f"{best.item.id}, same meaning; confidence {best.item.confidence:.2f} -> "
                f"{new_confidence:.2f}, mentions +1",
                new_confidence,
            )
        changed = _new_amount(candidate, best.item)
        if changed:
            return _amount_changed(candidate, best, changed)
        return Decision(
            "keep_both",
            best.item.id,
            None,
            f"rule e (related): cosine {best.cosine:.3f} with {best.item.id} is a duplicate by similarity, "
            f"but {different}; keep both (related)",
            candidate.confidence,
        )
    if best.cosine >= max(cfg.amount_threshold, cfg.related_threshold) and (
        changed := _new_amount(candidate, best.item)
    ):
        return _amount_changed(candidate, best, changed)
    if best.cosine >= cfg.related_threshold:
        return Decision(
            "keep_both",
            best.item.id,
            None,
            f"rule e (related): cosine {best.cosine:.3f} with {best.item.id} is within "
            f"{cfg.related_threshold:.2f}..{cfg.duplicate_threshold:.2f}: related but different facts; "
            f"keep both (related)",
            candidate.confidence,
        )
    return Decision(
        "add",
        None,
        None,
        f"rule a (nothing similar): the closest stored item {best.item.id} has cosine {best.cosine:.3f} < "
        f"{cfg.related_threshold:.2f}; add as new",
        candidate.confidence,
    )


def _amount_changed(candidate: Extracted, best: Existing, changed: str) -> Decision:
    return Decision(
        "supersede",
        best.item.id,
        None,
        f"rule g (same quantity, new amount): cosine {best.cosine:.3f} with {best.item.id}, {changed}, "
        f"and nothing in the two statements' structure keeps them apart; the newer statement "
        f"supersedes it, which is kept as superseded",
        candidate.confidence,
    )


def _new_amount(candidate: Extracted, item: MemoryItem) -> str | None:
    """Rule g: a statement (not an event or a habit, which add up) that gives another amount
    of the same unit than a close stored one by the same holder about the same subject."""
    kinds = {candidate.memory_type, item.memory_type}
    if kinds & (_NO_SLOT_TYPES | _STACKING_TYPES):
        return None
    changed = _changed_quantity(candidate.content, item.content)
    if changed is None or apart(item.content, candidate.content) is not None:
        return None
    return changed


def _different_facts(candidate: Extracted, item: MemoryItem) -> str | None:
    mine, theirs = _candidate_key(candidate), _item_key(item)
    if mine and theirs and mine != theirs:
        return f"the key slots differ ({mine!r} vs {theirs!r})"
    a, b = _numbers(candidate.content), _numbers(item.content)
    if a != b and (a or b):
        return f"the numbers differ ({', '.join(sorted(a)) or 'none'} vs {', '.join(sorted(b)) or 'none'})"
    return None


# -- with a language model ---------------------------------------------------------------------

RECONCILE_SYSTEM_PROMPT = """\
You maintain the long-term memory of an AI assistant. A new memory was extracted from a conversation; \
some similar memories are already stored. Decide what to do with the new memory.

Actions:
- add: the stored memories do not cover it; store it as a new memory (target null).
- reinforce: a stored memory already says the same thing; only re-confirm it.
- update: a stored memory is about the same thing and the new one makes it more precise or complete \
without contradicting it; rewrite that memory as "content".
- merge: the new memory and a stored one are two parts of one fact; write the one combined memory as "content".
- supersede: the new memory replaces a stored one because something changed: a new value of the same \
attribute, a changed preference, a reversed decision. The old memory is kept as history.
- keep_both: related but different facts; store the new memory next to the stored one.
- none: the new memory adds nothing or is less reliable than a stored memory; store nothing.

Rules:
1. "target" is the number in brackets of the stored memory you act on, exactly as shown; null for add. \
Never make up a number.
2. "content" is required for update and merge, and null otherwise. Write it in the language of the memories: \
Chinese stays Chinese, English stays English. Keep every detail that is still true.
3. Prefer supersede over update when the old statement is no longer true: history matters.
4. A memory with higher confidence is more reliable.

Answer with only a JSON object, no prose and no code fence:
{"action": "supersede", "target": 0, "content": null, "reason": "the user changed their favourite language"}"""


def _describe(candidate: Extracted) -> str:
    details = [f"type {candidate.memory_type.value}", f"confidence {candidate.confidence:.2f}"]
    key = _candidate_key(candidate)
    if key:
        details.append(f"key {key}")
    return f"{' '.join(candidate.content.split())} ({', '.join(details)})"


def _describe_item(number: int, e: Existing) -> str:
    item = e.item
    details = [f"type {item.memory_type.value}", f"confidence {item.confidence:.2f}"]
    key = _item_key(item)
    if key:
        details.append(f"key {key}")
    details.append(f"similarity {e.cosine:.2f}")
    if item.mention_count > 1:
        details.append(f"confirmed {item.mention_count} times")
    return f"[{number}] {' '.join(item.content.split())} ({', '.join(details)})"


def _shown_items(existing: Sequence[Existing]) -> list[Existing]:
    """The items shown to the model, in the order that gives them their numbers."""
    return [e for e in _check_existing(existing) if e.item.status == Status.ACTIVE]


def build_reconcile_messages(candidate: Extracted, existing: Sequence[Existing]) -> list[Message]:
    """The messages asking the model to reconcile ``candidate`` with the active ``existing`` items.

    Items are numbered 0..n-1 in the order given (archived and superseded ones are left
    out); their real ids never appear in the prompt.
    """
    shown = _shown_items(existing)
    lines = [
        "New memory:",
        _describe(candidate),
        "",
        "Stored memories:",
        *(_describe_item(i, e) for i, e in enumerate(shown)),
        "",
        f"Targets are numbers 0 to {len(shown) - 1}." if shown else "There are no stored memories.",
        'Answer with the JSON object {"action": ..., "target": ..., "content": ..., "reason": ...} only.',
    ]
    return [
        {"role": "system", "content": RECONCILE_SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


_ACTION_SYNONYMS: dict[str, Action] = {
    "replace": "supersede",
    "replaced": "supersede",
    "supersedes": "supersede",
    "superseded": "supersede",
    "contradict": "supersede",
    "contradicts": "supersede",
    "new": "add",
    "insert": "add",
    "create": "add",
    "store": "add",
    "keep": "keep_both",
    "both": "keep_both",
    "keepboth": "keep_both",
    "related": "keep_both",
    "duplicate": "reinforce",
    "confirm": "reinforce",
    "reinforced": "reinforce",
    "updated": "update",
    "refine": "update",
    "merged": "merge",
    "combine": "merge",
    "skip": "none",
    "ignore": "none",
    "noop": "none",
    "nothing": "none",
    "null": "none",
    "no_op": "none",
}
_NEEDS_TARGET = frozenset({"update", "merge", "supersede", "reinforce"})
_NEEDS_CONTENT = frozenset({"update", "merge"})


def _action(raw: Any) -> Action:
    if raw is None:
        raw = "none"
    if not isinstance(raw, str):
        raise LLMError(f'"action" must be a string, not {raw!r}')
    name = re.sub(r"[\s\-]+", "_", raw.strip().casefold())
    for action in ACTIONS:
        if name == action:
            return action
    mapped = _ACTION_SYNONYMS.get(name) or _ACTION_SYNONYMS.get(name.replace("_", ""))
    if mapped is None:
        raise LLMError(f"unknown action {raw!r}; use one of {', '.join(ACTIONS)}")
    return mapped


def _target(raw: Any, count: int) -> int | None:
    if raw is None:
        return None
    number: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        number = raw
    elif isinstance(raw, float) and raw.is_integer():
        number = int(raw)
    elif isinstance(raw, str):
        text = raw.strip().strip("[]#").strip()
        if text.casefold() in ("", "null", "none"):
            return None
        if re.fullmatch(r"-?\d+", text):
            number = int(text)
    if number is None:
        raise LLMError(
            f'"target" must be the number of a stored memory (0 to {count - 1}) or null, not {raw!r}'
        )
    if not 0 <= number < count:
        raise LLMError(
            f"target {number} is not one of the stored memories (0 to {count - 1})"
            if count
            else f"target {number} is not valid: there are no stored memories"
        )
    return number


def read_reconcile(
    answer: str,
    existing: Sequence[Existing],
    *,
    candidate: Extracted | None = None,
    cfg: ReconcileConfig | None = None,
) -> Decision:
    """Read the model's answer to :func:`build_reconcile_messages`. Raises :class:`LLMError`.

    The integer target is mapped back to the real id of the item shown under that number.
    Unknown actions, targets outside the shown range, a missing target for update / merge /
    supersede / reinforce, and missing content for update / merge are all refused.
    ``candidate`` and ``cfg`` only set :attr:`Decision.confidence`.
    """
    cfg = cfg or ReconcileConfig()
    shown = _shown_items(existing)
    value = repair_json(answer).value
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        raise LLMError(f'expected a JSON object with "action" and "target", got {type(value).__name__}')
    data = {str(k).strip().casefold(): v for k, v in value.items()}
    if "action" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
        data = {str(k).strip().casefold(): v for k, v in next(iter(data.values())).items()}
    if "action" not in data:
        raise LLMError('the answer has no "action"')
    action = _action(data["action"])
    number = _target(data.get("target", data.get("target_id", data.get("id"))), len(shown))
    if action in _NEEDS_TARGET and number is None:
        raise LLMError(f'action {action!r} needs a "target": the number of a stored memory')
    if action == "add":
        number = None
    content = data.get("content")
    if action in _NEEDS_CONTENT:
        if not isinstance(content, str) or not content.strip():
            raise LLMError(f'action {action!r} needs the new text as "content"')
        content = content.strip()
    else:
        content = None
    raw_reason = data.get("reason")
    said = raw_reason.strip() if isinstance(raw_reason, str) and raw_reason.strip() else "no reason given"
    target = shown[number] if number is not None else None
    where = f" on stored memory [{number}] {target.item.id} (cosine {target.cosine:.3f})" if target else ""
    reason = f"model decided {action}{where}: {said}"
    return Decision(
        action,
        target.item.id if target else None,
        content,
        reason,
        _confidence(action, target, candidate, cfg),
    )


def _confidence(
    action: Action, target: Existing | None, candidate: Extracted | None, cfg: ReconcileConfig
) -> float | None:
    if action == "none":
        return None
    if action == "reinforce" and target is not None:
        return reinforced_confidence(target.item.confidence, cfg.reinforce_step)
    if action in ("update", "merge") and target is not None:
        base = target.item.confidence
        return max(base, candidate.confidence) if candidate is not None else base
    return candidate.confidence if candidate is not None else None


def reconcile_flow(
    candidate: Extracted,
    existing: Sequence[Existing],
    *,
    cfg: ReconcileConfig | None = None,
    max_attempts: int = 2,
) -> ChatFlow[Decision]:
    """Reconciliation by a model as a chat flow: prompt, answer, checks, one repair retry.

    With no active existing item the answer is ``add`` and no model call is made.
    """
    if not _shown_items(existing):
        return Decision(
            "add",
            None,
            None,
            "nothing similar is stored; add as new (no model call needed)",
            candidate.confidence,
        )
    messages = build_reconcile_messages(candidate, existing)

    def parse(answer: str) -> Decision:
        return read_reconcile(answer, existing, candidate=candidate, cfg=cfg)

    done = yield from json_flow(messages, parse, max_attempts=max_attempts)
    return done.value


class LLMReconciler:
    """Reconciles with a chat model (an instance, a ``messages -> str`` callable or ``"openai:MODEL"``)."""

    def __init__(
        self,
        model: ChatModel | Callable[[list[Message]], str] | str,
        *,
        cfg: ReconcileConfig | None = None,
        max_attempts: int = 2,
    ) -> None:
        resolved = resolve_chat_model(model)
        if resolved is None:
            raise ConfigError("LLMReconciler needs a chat model, e.g. 'openai:gpt-4o-mini'")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be a positive integer, not {max_attempts!r}")
        self._model = resolved
        self._cfg = cfg or ReconcileConfig()
        self._max_attempts = max_attempts

    @property
    def model(self) -> ChatModel:
        return self._model

    def __repr__(self) -> str:
        return f"LLMReconciler(model={self._model.model_id!r}, max_attempts={self._max_attempts})"

    def flow(self, candidate: Extracted, existing: Sequence[Existing]) -> ChatFlow[Decision]:
        return reconcile_flow(candidate, existing, cfg=self._cfg, max_attempts=self._max_attempts)

    def decide(self, candidate: Extracted, existing: Sequence[Existing]) -> Decision:
        """The model's decision. Raises :class:`LLMError` when no usable answer comes back."""
        return run_chat(self.flow(candidate, existing), self._model)

    async def adecide(self, candidate: Extracted, existing: Sequence[Existing]) -> Decision:
        return await arun_chat(self.flow(candidate, existing), self._model)
