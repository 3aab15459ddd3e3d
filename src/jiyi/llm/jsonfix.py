"""Reading JSON out of what language models actually return.

Models asked for JSON often answer with almost-JSON: a code fence around it, a sentence
before or after it, a ``<think>`` block, single quotes, trailing commas, Python's
``True``/``None``, unquoted keys, full-width ``：`` and ``，``, or an answer cut off by the
token limit. :func:`parse_json_answer` reads all of these; :func:`repair_json` also says
what it had to fix. Both are pure functions.

Valid JSON is read by :func:`json.loads` unchanged. Everything else goes through a small
lenient parser. For a cut-off answer, open strings and brackets are closed, but an array
element that the cut went through is dropped, since it may be incomplete (a memory
"用户喜欢喝咖" must not be stored): ``[{"a": 1}, {"a": 2`` reads as ``[{"a": 1}]``.

When nothing usable can be read, :class:`~jiyi.llm.base.LLMError` is raised with the
reason and a short excerpt of the answer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from jiyi.errors import LLMError

__all__ = ["Repaired", "parse_json_answer", "repair_json", "unwrap_list"]


@dataclass(frozen=True)
class Repaired:
    """A value read from a model's answer, with what had to be fixed to read it."""

    value: Any
    repairs: tuple[str, ...] = ()
    """Kinds of fixes applied, e.g. ``("code fence", "trailing comma")``; empty for clean JSON."""
    truncated: bool = False
    """The answer was cut off: brackets were closed and a cut-off array element dropped."""


def parse_json_answer(text: str) -> Any:
    """The JSON value in a model's answer, repaired when needed. Raises :class:`LLMError`."""
    return repair_json(text).value


def repair_json(text: str) -> Repaired:
    """Like :func:`parse_json_answer`, and reports the repairs. Raises :class:`LLMError`."""
    if not isinstance(text, str):
        raise LLMError(f"expected the model's answer as text, not {type(text).__name__}")
    body = text.strip().lstrip("\ufeff").strip()
    if not body:
        raise LLMError("the model's answer is empty")
    clean = _strict(body)
    if clean is not None:
        return _finish(clean[0], [], truncated=False)
    repairs: list[str] = []
    unthought = _THINK.sub("", body).strip()
    if unthought != body:
        repairs.append("reasoning block")
        body = unthought
    fenced = _fenced(body)
    if fenced is not None:
        repairs.append("code fence")
        body = fenced
    if repairs:
        clean = _strict(body)
        if clean is not None:
            return _finish(clean[0], repairs, truncated=False)
    return _search(body, repairs, original=text)


def unwrap_list(value: Any, key: str = "memories") -> list[Any]:
    """The list of items in an answer, whichever way the model wrapped it.

    Accepts a top-level list, ``{key: [...]}`` (the key matched case-insensitively), an
    object whose only member is a list (``{"items": [...]}``) or an object wrapping such an
    object, and a single item object (one with ``"content"``). ``{key: null}`` is an empty
    list. Anything else raises :class:`LLMError`.
    """
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        raise LLMError(f"expected a JSON object with a {key!r} list, got {_kind(value)}")
    if key in value:
        inner = value[key]
    else:
        same = [k for k in value if k.strip().lower() == key.lower()]
        if same:
            inner = value[same[0]]
        elif len(value) == 1 and isinstance(next(iter(value.values())), list | dict):
            inner = next(iter(value.values()))
        elif "content" in value:
            return [value]
        else:
            keys = ", ".join(repr(k) for k in list(value)[:8]) or "none"
            raise LLMError(f"expected a JSON object with a {key!r} list, got an object with keys {keys}")
    if inner is None:
        return []
    if isinstance(inner, list):
        return inner
    if isinstance(inner, dict):
        return unwrap_list(inner, key)
    raise LLMError(f"{key!r} should be a list, not {_kind(inner)}")


# -- locating the JSON ------------------------------------------------------------------------

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.S)
_START = re.compile(r"[{\[]")
# Each failed start costs one pass over the text; starts inside a parsed value are skipped.
_MAX_STARTS = 32
_MAX_DEPTH = 200


def _strict(text: str) -> tuple[Any] | None:
    try:
        return (json.loads(text, strict=False),)
    except (ValueError, RecursionError):
        return None


def _fenced(text: str) -> str | None:
    """The first fenced block holding an object or a list (an unclosed fence runs to the end)."""
    for match in _FENCE.finditer(text):
        inner = match.group(1).strip()
        if _START.search(inner):
            return inner
    return None


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _search(body: str, repairs: list[str], original: str) -> Repaired:
    """Try the lenient parser at each ``{``/``[``; keep the value that spans the most text."""
    best: tuple[int, int, Any, _Parser] | None = None
    failure: _Fail | None = None
    skip_until = -1
    tried = 0
    for match in _START.finditer(body):
        start = match.start()
        if start < skip_until:
            continue
        tried += 1
        if tried > _MAX_STARTS:
            break
        parser = _Parser(body, start)
        try:
            value = parser.parse()
        except _Fail as exc:
            if failure is None or exc.pos > failure.pos:
                failure = exc
            continue
        skip_until = parser.i
        if best is None or parser.i - start > best[1] - best[0]:
            best = (start, parser.i, value, parser)
    if best is None:
        if failure is None:
            raise LLMError(f"no JSON object or list in the model's answer: {_excerpt(original)!r}")
        raise LLMError(
            f"the model's answer is not JSON that can be repaired ({failure.message} at character "
            f"{failure.pos}): {_excerpt(original)!r}"
        )
    start, end, value, parser = best
    if body[:start].strip():
        repairs.append("prose before")
    if body[end:].strip():
        repairs.append("prose after")
    repairs.extend(parser.repairs)
    return _finish(value, repairs, truncated=parser.cut)


def _finish(value: Any, repairs: list[str], *, truncated: bool) -> Repaired:
    # A JSON string holding JSON (double-encoded) is read once more.
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            inner = repair_json(value)
        except LLMError:
            pass
        else:
            merged = [*repairs, "double-encoded", *inner.repairs]
            return Repaired(inner.value, tuple(dict.fromkeys(merged)), inner.truncated or truncated)
    return Repaired(value, tuple(dict.fromkeys(repairs)), truncated)


# -- the lenient parser -------------------------------------------------------------------------

_SPACE = " \t\r\n\ufeff\u00a0\u3000"
_COMMA = ",，"
_COLON = ":："
_CLOSERS = "}]"
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’"}
_STOP = {close: re.compile(r"[\\" + re.escape(close) + "]") for close in set(_QUOTES.values())}
# A bare token (key, literal, number or unquoted word) runs up to whitespace or punctuation.
_BARE = re.compile(r"[^\s,:{}\[\]\"'，：“”‘’]+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "nan": math.nan,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}
_PYTHON_LITERALS: dict[str, Any] = {"True": True, "False": False, "None": None}


class _Fail(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _Parser:
    """Recursive descent over one candidate; ``cut`` is set when the text ends inside a value."""

    def __init__(self, text: str, start: int) -> None:
        self.s = text
        self.n = len(text)
        self.i = start
        self.cut = False
        self._repairs: dict[str, None] = {}

    @property
    def repairs(self) -> list[str]:
        return list(self._repairs)

    def note(self, what: str) -> None:
        self._repairs.setdefault(what)

    def parse(self) -> Any:
        value, ok = self.value(0)
        if not ok:  # pragma: no cover - candidates start with a bracket, which is always usable
            raise _Fail("the answer ends inside a value", self.i)
        if self.cut:
            self.note("closed a cut-off answer")
        return value

    # -- tokens ---------------------------------------------------------------------------

    def skip(self) -> bool:
        """Skip whitespace and comments; ``True`` when the text ended (``cut`` is then set)."""
        s, n, i = self.s, self.n, self.i
        while i < n:
            c = s[i]
            if c in _SPACE:
                i += 1
            elif c == "#" or s.startswith("//", i):
                self.note("comment")
                end = s.find("\n", i)
                i = n if end < 0 else end + 1
            elif s.startswith("/*", i):
                self.note("comment")
                end = s.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:
                break
        self.i = i
        if i >= n:
            self.cut = True
            return True
        return False

    def _closes(self, j: int) -> bool:
        """Whether a quote whose next character is at ``j`` ends its string.

        Valid JSON always has ``, : } ]`` (after spaces) or the end after a closing quote;
        a quote followed by anything else is taken as part of the text ("他说"好"了").
        """
        s, n = self.s, self.n
        while j < n and s[j] in " \t\r":
            j += 1
        return j >= n or s[j] in ",:}]，：\n" or s.startswith(("//", "/*"), j)

    def string(self) -> str:
        s, n = self.s, self.n
        quote = s[self.i]
        close = _QUOTES[quote]
        if quote == "'":
            self.note("single quotes")
        elif quote != '"':
            self.note("curly quotes")
        stop = _STOP[close]
        i = self.i + 1
        parts: list[str] = []
        # The first quote taken as text: if the string then runs to the end, that quote closed it.
        first_kept: tuple[int, str] | None = None
        while True:
            found = stop.search(s, i)
            if found is None or (s[found.start()] == "\\" and found.start() + 1 >= n):
                return self._string_ends(parts, s[i:] if found is None else s[i : found.start()], first_kept)
            j = found.start()
            parts.append(s[i:j])
            if s[j] == "\\":
                escape = s[j + 1]
                if escape in _ESCAPES:
                    parts.append(_ESCAPES[escape])
                    i = j + 2
                elif escape == "u":
                    code = s[j + 2 : j + 6]
                    if len(code) < 4 and j + 2 + len(code) >= n and _HEX4.fullmatch(code.ljust(4, "0")):
                        return self._string_ends(parts, "", first_kept)
                    if not _HEX4.fullmatch(code):
                        self.note("bad escape")
                        parts.append("\\u")
                        i = j + 2
                        continue
                    point = int(code, 16)
                    i = j + 6
                    low = s[i + 2 : i + 6]
                    if 0xD800 <= point < 0xDC00 and s.startswith("\\u", i) and _HEX4.fullmatch(low):
                        low_point = int(low, 16)
                        if 0xDC00 <= low_point < 0xE000:
                            point = 0x10000 + ((point - 0xD800) << 10) + (low_point - 0xDC00)
                            i += 6
                    parts.append("\ufffd" if 0xD800 <= point < 0xE000 else chr(point))
                else:
                    self.note("bad escape")
                    parts.append("\\" + escape)
                    i = j + 2
                continue
            if self._closes(j + 1):
                self.i = j + 1
                return "".join(parts)
            if first_kept is None:
                first_kept = (j + 1, "".join(parts))
            self.note("unescaped quote")
            parts.append(s[j])
            i = j + 1

    def _string_ends(self, parts: list[str], tail: str, first_kept: tuple[int, str] | None) -> str:
        """The text ended inside a string: close it there, or at the first quote taken as text."""
        if first_kept is not None:
            self.i, text = first_kept
            return text
        self.i = self.n
        self.cut = True
        return "".join(parts) + tail

    def bare(self) -> str:
        match = _BARE.match(self.s, self.i)
        if match is None:
            raise _Fail(f"unexpected {self.s[self.i]!r}", self.i)
        self.i = match.end()
        return match.group()

    # -- values ---------------------------------------------------------------------------

    def value(self, depth: int) -> tuple[Any, bool]:
        """One value at ``self.i`` (not at the end); ``ok`` is false for a cut-off scalar."""
        c = self.s[self.i]
        if c == "{":
            return self.object(depth + 1), True
        if c == "[":
            return self.array(depth + 1), True
        if c in _QUOTES:
            return self.string(), True
        return self.scalar()

    def scalar(self) -> tuple[Any, bool]:
        token = self.bare()
        at_end = self.i >= self.n
        if at_end:
            self.cut = True
        lowered = token.lower()
        if token in _PYTHON_LITERALS or lowered == "none":
            self.note("python literal")
            return _PYTHON_LITERALS.get(token), True
        if lowered in _LITERALS:
            return _LITERALS[lowered], True
        if _NUMBER.fullmatch(token):
            if any(ch in token for ch in ".eE"):
                return float(token), True
            return int(token), True
        if at_end:  # a word cut off by the end may be a partial literal or number
            return token, False
        self.note("unquoted string")
        return token, True

    def key(self) -> str:
        if self.s[self.i] in _QUOTES:
            return self.string()
        token = self.bare()
        self.note("unquoted key")
        if self.i >= self.n:
            self.cut = True
        return token

    def object(self, depth: int) -> dict[str, Any]:
        if depth > _MAX_DEPTH:
            raise _Fail("nested too deeply", self.i)
        self.i += 1
        out: dict[str, Any] = {}
        s = self.s
        while True:
            if self.skip():
                return out
            c = s[self.i]
            if c == "}":
                self.i += 1
                return out
            if c == "]":
                self.note("mismatched bracket")
                return out
            if c in _COMMA:
                self.note("extra comma")
                self.i += 1
                continue
            key = self.key()
            if self.cut or self.skip():
                return out  # a cut-off key is dropped
            if s[self.i] not in _COLON:
                raise _Fail(f"expected ':' after key {key[:40]!r}", self.i)
            self.i += 1
            if self.skip():
                return out
            if s[self.i] in _COMMA or s[self.i] in _CLOSERS:
                raise _Fail(f"no value for key {key[:40]!r}", self.i)
            value, ok = self.value(depth)
            if ok:
                out[key] = value
            if self.cut or self.skip():
                return out
            self._after_item(s[self.i])

    def array(self, depth: int) -> list[Any]:
        if depth > _MAX_DEPTH:
            raise _Fail("nested too deeply", self.i)
        self.i += 1
        out: list[Any] = []
        s = self.s
        while True:
            if self.skip():
                return out
            c = s[self.i]
            if c == "]":
                self.i += 1
                return out
            if c == "}":
                self.note("mismatched bracket")
                return out
            if c in _COMMA:
                self.note("extra comma")
                self.i += 1
                continue
            value, ok = self.value(depth)
            if self.cut:
                self.note("dropped a cut-off item")
                return out  # the element the cut went through may be incomplete
            if ok:  # pragma: no branch - only cut-off scalars are not ok
                out.append(value)
            if self.skip():
                return out
            self._after_item(s[self.i])

    def _after_item(self, c: str) -> None:
        """After a member or element: a comma, a closer (left for the loop), or a missing comma."""
        if c in _COMMA:
            self.i += 1
            if not self.skip() and self.s[self.i] in _CLOSERS:
                self.note("trailing comma")
        elif c not in _CLOSERS:
            self.note("missing comma")
