"""Re-embedding stored memories (jiyi.lifecycle.reembed, ``jiyi reembed``): after an embedder
switch every memory gets a vector the search can compare, and long memories their statement
vectors; nothing else of a memory changes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jiyi import Memory
from jiyi.config import RankConfig
from jiyi.errors import InvalidInput
from jiyi.lifecycle.reembed import ReembedReport
from jiyi.read.statements import statement_texts
from jiyi.store.base import CacheGet, CachePut, SetVectors, VectorsFor, Write
from jiyi.store.postgres import PostgresStore
from jiyi.store.sqlcommon import text_hash
from tests.pg import drop_schema, new_schema, pg_dsn  # noqa: F401
from tests.test_cli import jiyi

ON = RankConfig(statements=True)  # the small hash embedders read statements only when told
TEXTS = [
    "I adopted a beagle called Scout. It was a busy week at work.",
    "We moved to Lyon in May. The flat is small but bright.",
    "我住在杭州，在一家互联网公司做前端。",
    "Coffee, black, no sugar.",
    "My sister Ana lives in Porto. She teaches maths.",
]


def _fill(mem: Memory, user: str = "u", tenant: str | None = None) -> list[str]:
    result = mem.import_items([{"content": t, "user_id": user} for t in TEXTS], tenant_id=tenant)
    assert result.imported == len(TEXTS)
    return [i.id for i in mem.list(user_id=user, tenant_id=tenant, include_turns=True).items]


def _vectors(mem: Memory, ids: list[str], model: str, tenant: str = "default") -> set[str]:
    return set(mem.runtime.store.execute(VectorsFor(tenant, model, tuple(ids))))


def _vector_hits(mem: Memory, query: str, user: str = "u") -> list[str]:
    """Ids the search found by meaning (a cosine from the embedder in use; 0 without a vector)."""
    hits = mem.search(query, user_id=user, touch=False, explain=True, limit=10)
    return [h.item.id for h in hits if h.breakdown["cosine"] > 0.0]


def test_a_switch_of_embedder_is_finished_by_reembed(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64") as mem:
        ids = _fill(mem)
        history = [len(mem.history(i)) for i in ids]
        items = [mem.get(i) for i in ids]
    with Memory.open(path, embedder="hash:128", rank=ON) as mem:
        assert _vectors(mem, ids, "hash:128") == set()
        assert _vector_hits(mem, "beagle Scout") == []  # found by its words at most
        seen: list[ReembedReport] = []
        report = mem.reembed(page_size=2, progress=seen.append)
        assert (report.model_id, report.memories, report.embedded) == ("hash:128", 5, 5)
        assert report.statements == len(statement_texts(TEXTS)) > 0
        assert [r.memories for r in seen] == [2, 4, 5]  # a page at a time
        assert _vectors(mem, ids, "hash:128") == set(ids)
        assert _vectors(mem, ids, "hash:64") == set()  # one vector per memory
        assert _vector_hits(mem, "beagle Scout")  # the scope the search cached is brought up to date
        found = mem.runtime.store.execute(
            CacheGet("hash:128", tuple(text_hash(t) for t in statement_texts(TEXTS)))
        )
        assert len(found) == report.statements
        assert [mem.get(i) for i in ids] == items  # same versions, same times
        assert [len(mem.history(i)) for i in ids] == history
        again = mem.reembed()
        assert (again.memories, again.embedded, again.statements, again.up_to_date) == (5, 0, 0, True)


def test_a_dry_run_counts_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64") as mem:
        ids = _fill(mem)
        # statements shared across pages (and one that is a whole memory) are counted once
        more = ["Snow all day. It was a busy week at work.", "Coffee, black, no sugar. Then work."]
        mem.import_items([{"content": t, "user_id": "u"} for t in more])
    with Memory.open(path, embedder="hash:128", rank=ON) as mem:
        dry = mem.reembed(dry_run=True, page_size=2)
        assert (dry.dry_run, dry.memories, dry.embedded) == (True, 7, 7)
        assert dry.statements == len(set(statement_texts([*TEXTS, *more])) - {"Coffee, black, no sugar."})
        assert _vectors(mem, ids, "hash:128") == set()
        done = mem.reembed(page_size=2)
        assert (done.embedded, done.statements) == (dry.embedded, dry.statements)


def test_only_the_named_scope_and_tenant_are_reembedded(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64") as mem:
        mine = _fill(mem, "u")
        theirs = _fill(mem, "v")
        other_tenant = _fill(mem, "u", tenant="t2")
    with Memory.open(path, embedder="hash:128") as mem:
        assert mem.reembed(user_id="u").embedded == 5
        assert _vectors(mem, mine, "hash:128") == set(mine)
        assert _vectors(mem, theirs, "hash:128") == set()
        assert _vectors(mem, other_tenant, "hash:128", tenant="t2") == set()
        assert mem.reembed(tenant_id="t2").embedded == 5
        assert _vectors(mem, other_tenant, "hash:128", tenant="t2") == set(other_tenant)


def test_archived_memories_and_kept_turns_are_reembedded_too(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64", background=False) as mem:
        ids = _fill(mem)
        mem.delete(ids[0])  # archived: a restore must find it searchable
        mem.remember(
            [{"role": "user", "content": "I play the cello on Sundays."}], session_id="s", user_id="u"
        )
        turns = [i.id for i in mem.list(user_id="u", include_turns=True).items if i.id not in ids]
    with Memory.open(path, embedder="hash:128") as mem:
        report = mem.reembed()
        assert report.embedded == report.memories == len(ids) + len(turns)
        assert _vectors(mem, [*ids, *turns], "hash:128") == {*ids, *turns}


def test_bad_arguments_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "m.db", embedder="hash:64") as mem:
        with pytest.raises(InvalidInput, match="page_size") as err:
            mem.reembed(page_size=0, user_id="")
        assert "user_id" in str(err.value)
        with pytest.raises(InvalidInput, match="page_size"):
            mem.reembed(page_size=True)


def test_reembed_on_postgresql(pg_dsn: str) -> None:  # noqa: F811
    schema = new_schema()
    try:
        with Memory(PostgresStore(pg_dsn, schema=schema), embedder="hash:64") as mem:
            ids = _fill(mem)
        with Memory(PostgresStore(pg_dsn, schema=schema), embedder="hash:128", rank=ON) as mem:
            assert _vector_hits(mem, "beagle Scout") == []
            report = mem.reembed(page_size=3)
            assert (report.memories, report.embedded) == (5, 5)
            assert report.statements == len(statement_texts(TEXTS))
            assert _vectors(mem, ids, "hash:128") == set(ids)
            assert _vector_hits(mem, "beagle Scout")
            assert mem.reembed().up_to_date
            forced = mem.reembed(force=True, page_size=3)  # every vector and cache row written again
            assert (forced.embedded, forced.statements) == (5, report.statements)
            assert _vector_hits(mem, "beagle Scout") and mem.reembed().up_to_date
    finally:
        drop_schema(pg_dsn, schema)


def test_the_command_reports_and_dry_runs(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory.open(db, embedder="hash:64") as mem:
        _fill(mem)
    dry = jiyi("--embedder", "hash:128", "reembed", "--dry-run", db=db)
    assert "5 memories looked at; would embed 5 memories" in dry.stdout
    out = json.loads(jiyi("--embedder", "hash:128", "reembed", "--user", "u", "--json", db=db).stdout)
    assert out == {
        "model_id": "hash:128",
        "memories": 5,
        "embedded": 5,
        "statements": 0,  # a hash embedder reads statements only when RankConfig says so
        "dry_run": False,
        "force": False,
        "up_to_date": False,
    }
    assert "(already up to date)" in jiyi("--embedder", "hash:128", "reembed", db=db).stdout
    forced = json.loads(jiyi("--embedder", "hash:128", "reembed", "--force", "--json", db=db).stdout)
    assert (forced["force"], forced["embedded"]) == (True, 5)
    bad = jiyi("reembed", "--page-size", "0", db=db, check=False)
    assert bad.returncode != 0 and "page_size" in bad.stderr


def test_a_search_says_once_when_memories_lack_its_embedders_vectors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash:64") as mem:
        _fill(mem)
    with Memory.open(path, embedder="hash:72") as mem, caplog.at_level("WARNING", logger="jiyi.search"):
        mem.search("beagle Scout", user_id="u", touch=False)
        mem.search("Lyon flat", user_id="u", touch=False)
        said = [r.getMessage() for r in caplog.records if "no vector of hash:72" in r.getMessage()]
        assert len(said) == 1 and "jiyi reembed" in said[0]
        mem.reembed()
        caplog.clear()
        mem.search("beagle Scout", user_id="u", touch=False)
        assert not [r for r in caplog.records if "no vector" in r.getMessage()]


def test_force_embeds_again_what_a_model_changed_under_its_name(tmp_path: Path) -> None:
    """Vectors of an older version of a model that kept its name look current: only
    ``force`` replaces them, in the store and in the embedding cache."""
    with Memory.open(tmp_path / "m.db", embedder="hash:64", rank=ON) as mem:
        ids = _fill(mem)
        mem.reembed()
        store, model = mem.runtime.store, "hash:64"
        stale = np.full(64, 0.125, dtype=np.float32)  # unit length, like nothing the model gives
        statements = list(dict.fromkeys(statement_texts(TEXTS)))
        assert statements
        store.execute(Write((SetVectors("default", model, tuple((i, stale) for i in ids)),)))
        store.execute(Write((CachePut(model, tuple((text_hash(t), stale) for t in statements)),)))
        assert mem.reembed().up_to_date  # nothing tells the old vectors from new ones
        dry = mem.reembed(dry_run=True, force=True, page_size=2)
        assert (dry.memories, dry.embedded, dry.statements, dry.force) == (5, 5, len(statements), True)
        assert all(
            np.allclose(v, stale) for v in store.execute(VectorsFor("default", model, tuple(ids))).values()
        )
        report = mem.reembed(force=True, page_size=2)
        assert (report.embedded, report.statements) == (5, len(statements))
        embedder = mem.runtime.embedder
        got = store.execute(VectorsFor("default", model, tuple(ids)))
        for item_id in ids:
            content = mem.get(item_id).content
            assert np.allclose(got[item_id], embedder.embed([content])[0], atol=1e-6)
        cached = store.execute(CacheGet(model, tuple(text_hash(t) for t in statements)))
        assert len(cached) == len(statements)
        for text in statements:
            assert np.allclose(cached[text_hash(text)], embedder.embed([text])[0], atol=1e-6)
        assert len(mem.history(ids[0])) == 1  # the memory itself is as it was
        with pytest.raises(InvalidInput, match="force"):
            mem.reembed(force="yes")  # type: ignore[arg-type]
