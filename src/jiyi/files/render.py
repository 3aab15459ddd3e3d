"""Writing a scope's memories as markdown.

The output depends only on the entries and the kept lines: no times, no counts, items
in (created_at, id) order, every section heading always present. The same database
state renders byte for byte the same, and one new item adds exactly one line::

    <!-- how to edit (a fixed comment) -->
    # Memory: user alice

    ## preference
    - I prefer concise answers <!-- id:4f1c... -->

    ## fact
    - 我在杭州工作 <!-- id:9a0b... -->
      (a second line of the same memory is indented)

    ## habit
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import quote

from jiyi.files.document import PREAMBLE, TAIL, Extras, Placed
from jiyi.files.layout import FILE_NAMES, ScopeRef, file_for, sections_of
from jiyi.model import MemoryType

# Characters an id keeps inside its comment; anything else (spaces, <, >, %) is %-encoded.
ID_SAFE = ":@#+=!$&'()*,;/~"

HEADER = (
    "<!-- jiyi: {what}.\n"
    "     Edit freely, then run `jiyi sync` (a server started with --files syncs by itself):\n"
    "     change a line's text to correct a memory; move a line under another heading to change its type;\n"
    "     delete a line to archive its memory (put the line back to restore it);\n"
    '     add a line "- ..." without an id to add a memory.\n'
    "     Keep the id comment at the end of each line: it ties the line to its memory.{more} -->"
)

_WHAT = {
    "memory.md": "semantic memory (preferences, facts, habits, events, context, constraints, decisions)",
    "learnings.md": "procedural memory (skills and patterns that worked or failed)",
}
_MORE = {
    "memory.md": "",
    "learnings.md": "\n     A recorded skill, failure pattern or decomposition is read back from its line (name, steps,\n"
    "     signs, mitigation, severity, task, subtasks); the counts in brackets at its end are kept as recorded.",
}
_TITLE = {"memory.md": "Memory", "learnings.md": "Learnings"}
_TYPES = frozenset(t.value for t in MemoryType)


def id_comment(item_id: str) -> str:
    return f"<!-- id:{quote(item_id, safe=ID_SAFE)} -->"


def item_lines(item_id: str, placed: Placed) -> list[str]:
    first, *rest = placed.entry.text.split("\n")
    return [f"- {first} {id_comment(item_id)}", *(f"  {line}" if line else "" for line in rest)]


def _title(name: str, ref: ScopeRef) -> str:
    shown = ref.scope_id
    if not shown.isprintable() or shown != shown.strip() or "<!--" in shown:
        shown = json.dumps(shown, ensure_ascii=False)
    return f"# {_TITLE[name]}: {ref.scope.value} {shown}"


def render_file(name: str, ref: ScopeRef, shown: Mapping[str, Placed], extras: Extras) -> str:
    """One file's text: the entries whose type belongs to it, and its kept lines."""
    mine = sorted(
        ((p.at, item_id, p) for item_id, p in shown.items() if file_for(p.entry.memory_type) == name),
        key=lambda t: (t[0], t[1]),
    )
    out = [HEADER.format(what=_WHAT[name], more=_MORE[name]), _title(name, ref), ""]
    preamble = extras.lines(PREAMBLE)
    if preamble:
        out.extend([*preamble, ""])
    sections = list(sections_of(name))
    # A known heading of the other file may hold kept lines here: keep it too.
    sections += [
        MemoryType(w) for w in sorted(extras.places()) if w in _TYPES and MemoryType(w) not in sections
    ]
    blocks: list[str] = []
    for memory_type in sections:
        lines = [f"## {memory_type.value}", *extras.lines(memory_type.value)]
        for _, item_id, placed in mine:
            if placed.entry.memory_type is memory_type:
                lines.extend(item_lines(item_id, placed))
        blocks.append("\n".join(lines) + "\n")
    text = "\n".join(out) + "\n" + "\n".join(blocks)
    tail = extras.lines(TAIL)
    if tail:
        text += "\n" + "\n".join(tail) + "\n"
    return text


def render_scope(ref: ScopeRef, shown: Mapping[str, Placed], extras: Mapping[str, Extras]) -> dict[str, str]:
    """Both files of a scope."""
    return {name: render_file(name, ref, shown, extras.get(name) or Extras()) for name in FILE_NAMES}
