"""Offline session summaries: how many of the user's statements does a summary keep?

The data (``tests/data/summary_sessions.json``, our own writing) holds a Chinese and an
English session of 20 user turns, each answered by the assistant, with small talk, a
question and one statement said twice among them; for every statement the user made,
the phrases a summary must hold to count it as kept.

Figures per session, for the episode summary ``end_session`` writes offline
(``summarize_extractive``) and the compaction message (``compaction_summary``, which
must stay at most half as long as the turns it replaces): statements kept / stated,
summary tokens against the session's tokens, and lines.

    python bench/summary.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from common import REPO_ROOT, git_commit
from jiyi.session.summarize import compaction_summary, summarize_extractive
from jiyi.text.tokens import count_tokens
from jiyi.write.extract import Turn

DATA = REPO_ROOT / "tests" / "data" / "summary_sessions.json"


def turns_of(session: dict[str, Any]) -> list[Turn]:
    out: list[Turn] = []
    for text in session["user_turns"]:
        out += [Turn("user", text), Turn("assistant", session["assistant_reply"])]
    return out


def kept(summary: str, session: dict[str, Any]) -> int:
    return sum(all(p in summary for p in s["keep"]) for s in session["stated"])


def main(path: Path = DATA) -> int:
    data = json.loads(path.read_text(encoding="utf-8"))
    print(f"offline session summaries, commit {git_commit()}")
    for session in data["sessions"]:
        turns = turns_of(session)
        total = sum(count_tokens(t.content) for t in turns)
        for name, text in (
            ("episode", summarize_extractive(turns).summary),
            ("compaction", compaction_summary(turns)),
        ):
            print(
                f"  {session['lang']} {name:10} kept {kept(text, session):2}/{len(session['stated'])} statements, "
                f"{count_tokens(text):3} tokens of {total} ({len(text.splitlines())} lines)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA))
