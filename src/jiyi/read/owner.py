"""The scope owner's name is no keyword in their own scope.

Almost every memory in a user's scope is about that user, in the first person ("my wife
teaches chemistry", "I drink black coffee"). A query that names the user ("What does
Ivan's wife do?") names the subject of nearly every memory there, not what is asked
about; yet the one memory that spells the name, the user's self-introduction ("Меня
зовут Иван Петров, я работаю ..."), matches it as a rare keyword and outranks the answer.
So in a search of a user's scope, the query terms of the user's own name are a stop word:
BM25, term coverage and phrase evidence leave them out. Unless the query asks about a name
("What is Ivan's surname?"), or the name is all the query says.

The name comes from the search's own pool (no store round trip): an explicit profile's
``username``, a name an extractor stored, or a self-introduction at the start of a
memory (:func:`jiyi.profile_names.stated_name`), among the candidates in the user's own
scope. The pool holds it exactly when it matters: the name's keyword brought it in. A
turn written with a speaker ("Caroline: ...") or said by a named speaker (``metadata``
``speaker``: a conversation between people kept in one scope) or by the assistant is not
the owner's self-introduction; a
scope where two people introduce themselves (a group's, or several people's memories in
one scope) has no single owner; both, and a scope whose owner never said their name, are
searched as before.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

from jiyi.model import Scope
from jiyi.profile_names import stated_name
from jiyi.store.base import Candidate
from jiyi.text.tokenize import query_terms

# Words asking for a name: then the name is what is asked about.
_ASKS_NAME = re.compile(
    r"\bnames?\b|\bcalled\b|\bsurname|\bзов[уё]т|\bим[яеи]\b|\bфамили|\bотчеств|\bnombre|\bapellido|\bllama|"
    r"\bnome\b|\bsobrenome|\bchama|\bnom\b|\bappel|\bhei(?:ß|ss)t|\bchiama|"
    r"名前|名字|姓名|叫什么|苗字|이름|성함",
    re.IGNORECASE,
)


def owner_terms(
    candidates: Sequence[Candidate], user_id: str | None, terms: Sequence[str], query: str
) -> frozenset[str]:
    """The query ``terms`` that spell the name of the user whose scope is searched, as the
    pool's memories in that scope give it; empty when the query asks about a name, when
    nothing else would be left, or when no name is known."""
    if user_id is None or not terms:
        return frozenset()
    names = {
        name
        for c in candidates
        if (item := c.item).user_id == user_id
        and item.scope is Scope.USER
        # The owner's own statement (cheaper than reading the name, and often no): not a
        # named speaker's of a conversation kept in the scope ("Caroline" introducing
        # herself to Melanie), not the assistant's. Inline: asked of every candidate.
        and (metadata := item.metadata).get("speaker") is None
        and metadata.get("role") != "assistant"
        and (name := stated_name(item))
    }
    spelled = [_spelled(name) for name in names]
    if any(a.isdisjoint(b) for a, b in itertools.combinations(spelled, 2)):
        # Two people introduce themselves here (a group's or a shared scope): a name picks
        # out one of them, so it is a keyword after all.
        return frozenset()
    skip = frozenset(t for t in terms if any(t in s for s in spelled))
    if not skip or len(skip) == len(set(terms)) or _ASKS_NAME.search(query):
        return frozenset()
    return skip


@functools.lru_cache(maxsize=1024)
def _spelled(name: str) -> frozenset[str]:
    """A name's index terms (tokenized once: the same owner is searched again and again)."""
    return frozenset(query_terms(name))
