"""The write gate (seed 000): pure checks that decide whether text may become a memory.

Order: length -> low value -> confidence -> sensitive data (redacted, not refused) ->
rate limit (automatic extractions only) -> duplicate (reinforce instead of add). The
last two need the store; the write pipeline (:mod:`jiyi.write.pipeline`) asks it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from jiyi.config import GateConfig
from jiyi.model import MemoryItem
from jiyi.text.lowvalue import low_value_reason
from jiyi.text.pii import redact, redact_value

Action = Literal["add", "reinforce", "reject", "update", "merge", "supersede", "none"]
"""``reject`` is the gate's; the others are what the write pipeline decided (see
:mod:`jiyi.write.reconcile`)."""
DONE: dict[str, str] = {
    "add": "stored",
    "reinforce": "reinforced",
    "reject": "refused",
    "update": "updated",
    "merge": "merged",
    "supersede": "superseded",  # stored; the old value is kept as superseded
    "none": "kept_existing",  # a more confident value is kept; nothing new stored
}
"""Each action in the words the agent tools, the CLI and the demo answer with."""
T = TypeVar("T")

_PLACEHOLDER = re.compile(r"\[REDACTED_[A-Z_]+\]")
_WORD = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided and why; every refusal carries its reasons."""

    action: Action
    reasons: tuple[str, ...]
    redacted: tuple[str, ...] = ()
    """Kinds of sensitive data removed before storage."""
    duplicate_of: str | None = None
    similarity: float | None = None

    @property
    def accepted(self) -> bool:
        return self.action != "reject"

    def to_json_dict(self) -> dict[str, object]:
        return {
            "action": self.action,
            "reasons": list(self.reasons),
            "redacted": list(self.redacted),
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
        }


@dataclass(frozen=True)
class Screened:
    """Text that passed the content checks, possibly redacted."""

    text: str
    reasons: tuple[str, ...]
    redacted: tuple[str, ...]


def text_width(text: str) -> int:
    """Length for the minimum-length check: a wide (CJK) character counts as two, since
    one carries about as much as a short English word (「我叫王芳」 is a whole fact)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def scrub(cfg: GateConfig, tenant_id: str | None, value: T) -> T:
    """``value`` with every string in it redacted as the tenant's policy says
    (:meth:`GateConfig.redaction`): the one call every path that stores text makes."""
    return redact_value(value, cfg.redaction(tenant_id))


ITEM_TEXT = ("content", "raw", "summary", "structured", "metadata", "tags")
"""A memory's fields that hold text (ids and timestamps are identifiers, never redacted)."""
_IDENTIFIERS = frozenset({"created_by"})
"""Metadata that names someone by id (who created an item decides who may see it)."""


def scrub_fields(cfg: GateConfig, tenant_id: str | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` (a memory's fields, or some of them) with the text ones (:data:`ITEM_TEXT`)
    redacted as the tenant's policy says; metadata's ``created_by`` is an id and kept."""
    kinds = cfg.redaction(tenant_id)
    out = dict(fields)
    if not kinds:
        return out
    for name in ITEM_TEXT:
        value = out.get(name)
        if value is None:
            continue
        if name == "metadata" and isinstance(value, Mapping):
            out[name] = {k: v if k in _IDENTIFIERS else redact_value(v, kinds) for k, v in value.items()}
        else:
            out[name] = redact_value(value, kinds)
    return out


def scrub_item(cfg: GateConfig, item: MemoryItem) -> MemoryItem:
    """The item with its text fields redacted as its tenant's policy says (the same item
    when nothing changes)."""
    fields = {name: getattr(item, name) for name in ITEM_TEXT}
    scrubbed = scrub_fields(cfg, item.tenant_id, fields)
    changed = {k: v for k, v in scrubbed.items() if v != fields[k]}
    return item.evolve(**changed) if changed else item


def screen(
    content: str, confidence: float, cfg: GateConfig, tenant_id: str | None = None
) -> Screened | GateDecision:
    """Content checks that need no store. Returns a rejection or the text to store
    (redacted as ``tenant_id``'s policy says)."""
    text = content.strip()
    width = text_width(text)
    if width < cfg.min_length:
        shown = f"{len(text)} characters" + (f" (width {width})" if width != len(text) else "")
        return GateDecision("reject", (f"too short: {shown}, minimum is {cfg.min_length}",))
    if len(text) > cfg.max_length:
        return GateDecision(
            "reject",
            (
                f"too long: {len(text)} characters, maximum is {cfg.max_length}; split it or store it as a resource",
            ),
        )
    if cfg.skip_low_value:
        why = low_value_reason(text)
        if why:
            return GateDecision("reject", (f"low value: {why}",))
    if confidence < cfg.min_confidence:
        return GateDecision(
            "reject", (f"confidence {confidence:.2f} is below the minimum {cfg.min_confidence:.2f}",)
        )
    reasons = [
        f"length {len(text)} within {cfg.min_length}..{cfg.max_length}",
        f"confidence {confidence:.2f}",
    ]
    kinds: tuple[str, ...] = ()
    wanted = cfg.redaction(tenant_id)
    if wanted:
        result = redact(text, wanted)
        if result.found:
            kinds = tuple(k.value for k in result.kinds)
            text = result.text
            reasons.append(f"redacted sensitive data: {', '.join(kinds)}")
            rest = _PLACEHOLDER.sub(" ", text)
            if not _WORD.search(rest):
                return GateDecision("reject", ("nothing but sensitive data is left after redaction",), kinds)
    return Screened(text=text, reasons=tuple(reasons), redacted=kinds)


def rate_limit_decision(used: int, cfg: GateConfig, session_id: str) -> GateDecision | None:
    """A rejection when the session has used up its automatic extractions."""
    if used >= cfg.max_extractions:
        hours = cfg.extraction_window.total_seconds() / 3600
        return GateDecision(
            "reject",
            (
                f"rate limit: session {session_id!r} already had {used} automatic extractions "
                f"in the last {hours:g} h (maximum {cfg.max_extractions}); explicit saves are not limited",
            ),
        )
    return None


_EXPLICIT = re.compile(r"记住|记一下|别忘了|不要忘|\bremember\b|\bdon'?t forget\b|\bnote that\b", re.I)
_SAFETY = re.compile(
    r"过敏|哮喘|糖尿病|高血压|心脏病|癫痫|怀孕|孕期|血型|用药|药物|不能吃|不能喝|忌口|病史|吃素|素食|清真|"
    r"\ballerg|\basthma\b|\bdiabet|\bepilep|\bpregnan|\bblood type\b|\bmedication|\bintoleran|"
    r"\bcan'?t (?:eat|drink|have)\b|\bheart condition\b|\bhypertension\b|\bvegetarian\b|\bvegan\b|"
    r"\bhalal\b|\bkosher\b|\bgluten\b",
    re.I,
)
_CORRECTION = re.compile(
    r"其实|更正|纠正|改成|改为|改[喝吃用去]|不再|已经不|现在不|搬到|推迟到|提前到|换成|不是.{0,20}而是|说错了|"
    r"\bactually\b|\bcorrection\b|\bi meant\b|\bno longer\b|\bnot anymore\b|\bswitched to\b|"
    r"\bmoved to\b|\bpostponed\b|\bchanged (?:it |my )?to\b|\binstead\b",
    re.I,
)


def never_rate_limited(content: str, source_text: str = "", reasons: Sequence[str] = ()) -> str | None:
    """Why a candidate is kept even past the rate limit (None: it is not): an explicit
    request (记住 / remember), a safety fact (allergy, health) or a correction."""
    # A rule's candidate is one clause of its turn; a model's is a rewording, so its
    # source turn is read too.
    said = content if any(r.startswith("rule:") for r in reasons) else f"{source_text} {content}"
    if any(r.startswith("rule:remember") for r in reasons) or _EXPLICIT.search(said):
        return "explicit request"
    if _SAFETY.search(said):
        return "safety fact"
    if _CORRECTION.search(said):
        return "correction"
    return None


def rate_key(tenant_id: str, session_id: str) -> str:
    return f"extract:{tenant_id}:{session_id}"


def reinforced_confidence(confidence: float, step: float) -> float:
    """The one reinforce rule: a re-confirmed memory gains ``step`` confidence, capped at 1."""
    return round(min(1.0, confidence + step), 6)


def duplicate_decision(
    screened: Screened, best_id: str | None, best_cosine: float | None, cfg: GateConfig
) -> GateDecision:
    """Reinforce the closest item in the same scope when it is close enough, else add."""
    if best_id is not None and best_cosine is not None and best_cosine >= cfg.duplicate_threshold:
        return GateDecision(
            "reinforce",
            (
                *screened.reasons,
                f"duplicate of {best_id} (cosine {best_cosine:.3f} >= {cfg.duplicate_threshold:.2f}): "
                f"reinforced it instead of adding",
            ),
            screened.redacted,
            duplicate_of=best_id,
            similarity=best_cosine,
        )
    closest = "" if best_cosine is None else f" (closest cosine {best_cosine:.3f})"
    return GateDecision(
        "add",
        (*screened.reasons, f"no duplicate in scope{closest}"),
        screened.redacted,
        similarity=best_cosine,
    )
