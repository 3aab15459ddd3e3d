"""Copying whole stores between backends: SQLite -> PostgreSQL -> SQLite, through the
Memory API, :func:`jiyi.store.copy.copy_store` and the ``jiyi copy``/``jiyi migrate`` commands."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jiyi.errors import ConfigError, InvalidInput, StoreUnavailable
from jiyi.memory import Memory
from jiyi.store.base import ROW_KINDS, CountEvents, DumpRows, RecordEvent, Store, Write
from jiyi.store.copy import copy_store, row_counts
from jiyi.store.open import open_store, redact_url, sqlite_path, store_kind
from jiyi.store.sqlite import SQLiteStore
from tests.pg import drop_schema, new_schema, pg_dsn, with_params  # noqa: F401

ENV = {**os.environ, "PYTHONIOENCODING": "utf-8"}
EMBEDDER = "hash:64"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
QUERIES = ("Python 代码", "where does Alice live?", "数据库 PostgreSQL", "咖啡", "deadline")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _memory(store: Store) -> Memory:
    return Memory(store, embedder=EMBEDDER, background=False, clock=Clock())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jiyi.cli", *args], capture_output=True, text=True, env=ENV, timeout=300
    )


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    """A URL naming a brand-new schema of the test server (dropped afterwards)."""
    schema = new_schema()
    yield with_params(pg_dsn, schema=schema)
    drop_schema(pg_dsn, schema)


def _fill(path: Path) -> dict[str, Any]:
    """A SQLite store with every kind of data, written through the Memory API."""
    mem = _memory(SQLiteStore(path))
    try:
        a = mem.add("我喜欢用 Python 写代码", user_id="alice", memory_type="preference", tags=["编程"]).item
        b = mem.add("Alice lives in Berlin", user_id="alice", importance=0.8).item
        mem.add(
            "我们的数据库是 PostgreSQL，不用 MySQL",
            user_id="alice",
            project_id="网站",
            memory_type="decision",
        )
        mem.add("每天早上喝一杯咖啡", user_id="alice", occurred_at=T0 - timedelta(days=3))
        mem.add("The project deadline is Friday", user_id="bob", metadata={"来源": "chat"})
        c = mem.add("临时的备忘：周三开会", user_id="alice").item
        assert a is not None and b is not None and c is not None
        mem.update(b.id, content="Alice lives in Munich now", reason="moved")  # superseding edit, history
        mem.delete(c.id, reason="不需要了")  # archived
        gone = mem.add("to be purged for good", user_id="alice").item
        assert gone is not None
        mem.delete(gone.id, hard=True)
        mem.add_messages("s1", [("user", "你好，我叫 Alice"), ("assistant", "你好 Alice！")], user_id="alice")
        mem.remember(
            [("user", "I moved to Munich last week")], session_id="s2", user_id="alice"
        )  # queues a job
        mem.save_checkpoint("s1", agent_state={"step": 2, "备注": "中文"}, label="before tools")
        mem.store.execute(
            Write((RecordEvent("extract:default:s2", T0), RecordEvent("extract:default:s2", T0)))
        )
        mem.search("where does Alice live?", user_id="alice", actor="key-1", explain=True)  # the log
        mem.context("编程", user_id="alice", project_id="网站")
        return {"ids": [a.id, b.id, c.id], "gone": gone.id}
    finally:
        mem.close()


def _snapshot(store: Store, ids: list[str]) -> dict[str, Any]:
    mem = _memory(store)
    return {
        "export": [mem.export(user_id=u) for u in ("alice", "bob")],
        "project": mem.export(user_id="alice", project_id="网站"),
        "history": [[e.model_dump() for e in mem.history(i)] for i in ids],
        "messages": [mem.messages(s) for s in ("s1", "s2")],
        "checkpoints": mem.list_checkpoints("s1"),
        "jobs": mem.jobs(),
        "search": [
            [h.item.id for h in mem.search(q, user_id="alice", touch=False, statuses=None)] for q in QUERIES
        ],
        "counts": row_counts(store),
        "rate": store.execute(CountEvents("extract:default:s2", T0)),
        "retrievals": [a.to_json_dict() for a in mem.retrievals().accesses],
    }


def _dump(store: Store) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in ROW_KINDS:
        rows: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = store.execute(DumpRows(kind, after=after, limit=3))
            rows.extend(page.rows)
            if page.next_after is None:
                break
            after = page.next_after
        out[kind] = rows
    return out


def test_sqlite_to_postgres_and_back_is_lossless(tmp_path: Path, pg_url: str) -> None:
    filled = _fill(tmp_path / "a.db")
    ids = [*filled["ids"], filled["gone"]]
    seen: list[tuple[str, int, int | None]] = []
    with (
        open_store(str(tmp_path / "a.db")) as source,
        open_store(pg_url) as pg,
        open_store(f"sqlite:///{tmp_path / 'b.db'}") as back,
    ):
        original = _snapshot(source, ids)
        assert all(original["counts"][k] for k in ROW_KINDS), original["counts"]
        assert all(original["search"]) and original["rate"] == 2
        report = copy_store(source, pg, batch=2, progress=lambda k, d, t: seen.append((k, d, t)))
        assert report.counts == original["counts"]
        assert [k for k, d, _t in seen if d == 0] == list(ROW_KINDS)  # a start call per kind
        assert seen[-1] == ("retrievals", 2, 2)
        copy_store(pg, back, batch=500)
        in_pg, in_back = _snapshot(pg, ids), _snapshot(back, ids)
        assert in_pg == original
        assert in_back == original
        assert _dump(back) == _dump(source)
        assert original["history"][1][-1]["reason"] == "moved"
        assert original["history"][3][-1]["action"] == "purge"
        # The copies stay usable: new writes land after the copied history.
        mem = _memory(pg)
        new = mem.add("复制之后的新记忆", user_id="alice").item
        assert new is not None and mem.history(new.id)[0].seq is not None
        assert mem.history(new.id)[0].seq > max(e["seq"] for h in original["history"] for e in h)


def test_copy_refuses_a_non_empty_destination_unless_overwriting(tmp_path: Path) -> None:
    _fill(tmp_path / "a.db")
    with SQLiteStore(tmp_path / "a.db") as source, SQLiteStore(tmp_path / "b.db") as dest:
        _memory(dest).add("already here", user_id="zoe")
        with pytest.raises(InvalidInput, match="not empty"):
            copy_store(source, dest)
        assert row_counts(dest)["items"] == 1
        report = copy_store(source, dest, overwrite=True)
        assert row_counts(dest) == row_counts(source) == report.counts
        with pytest.raises(InvalidInput):
            copy_store(source, source)


def test_open_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///rel/x.db") == "rel/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    assert (
        sqlite_path(":memory:") == sqlite_path("sqlite://") == sqlite_path("sqlite:///:memory:") == ":memory:"
    )
    assert sqlite_path("plain/file.db") == "plain/file.db"
    assert sqlite_path("postgresql://u@h/db") is None
    assert store_kind("postgres://u@h/db") == "postgresql"
    with open_store("sqlite:///rel.db") as s:
        assert isinstance(s, SQLiteStore)
    assert (tmp_path / "rel.db").exists()
    with open_store(f"sqlite:///{tmp_path}/abs.db") as s:  # four slashes: absolute
        assert Path(s.path) == tmp_path / "abs.db"
    with open_store("plain.db") as s, open_store(":memory:") as m:
        assert isinstance(s, SQLiteStore) and isinstance(m, SQLiteStore)
    for bad in ("mysql://u@h/db", "sqlite:/x.db", "", "redis://h"):
        with pytest.raises(InvalidInput):
            open_store(bad)
    assert redact_url("postgresql://me:s3cret@h:5/db") == "postgresql://me:***@h:5/db"


def test_open_store_without_psycopg_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jiyi.store.postgres", None)  # import fails as without the extra
    with pytest.raises(ConfigError, match=r"pip install '\.\[postgres\]' in jiyi's clone"):
        open_store("postgresql://u@localhost/db")


def test_unreachable_server_names_the_host_not_the_password() -> None:
    with pytest.raises(StoreUnavailable) as info:
        open_store("postgresql://me:hunter2secret@127.0.0.1:1/db?connect_timeout=2", timeout=2)
    assert "127.0.0.1:1" in str(info.value) and "hunter2secret" not in str(info.value)


# ---------------------------------------------------------------- the commands


def test_cli_copy_and_migrate_status(tmp_path: Path, pg_url: str) -> None:
    _fill(tmp_path / "a.db")
    src = f"sqlite:///{tmp_path / 'a.db'}"
    status = _cli("migrate", "--db", pg_url, "--status")
    assert status.returncode == 0, status.stderr
    assert "applied" not in status.stdout.replace("0 applied", "")
    assert "pending" in status.stdout and "initial schema" in status.stdout

    done = _cli("copy", "--from", src, "--to", pg_url, "--batch", "3")
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stdout and "items" in done.stdout
    assert done.stderr == ""  # progress stays quiet: stderr is not a terminal here
    again = _cli("copy", "--from", src, "--to", pg_url)
    assert again.returncode == 1 and "not empty" in again.stderr and len(again.stderr.splitlines()) == 1
    over = _cli("copy", "--from", src, "--to", pg_url, "--overwrite", "--json")
    assert over.returncode == 0, over.stderr

    status = _cli("migrate", "--db", pg_url, "--status")
    assert status.returncode == 0 and "0 pending" in status.stdout
    applied = _cli("migrate", "--db", pg_url)
    assert applied.returncode == 0 and "up to date" in applied.stdout

    back = tmp_path / "b.db"
    done = _cli("copy", "--from", pg_url, "--to", str(back))
    assert done.returncode == 0, done.stderr
    with SQLiteStore(tmp_path / "a.db") as a, SQLiteStore(back) as b:
        assert _dump(a) == _dump(b)


def test_cli_migrate_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    status = _cli("migrate", "--db", str(path), "--status")
    assert status.returncode == 0 and "no database" in status.stdout and not path.exists()
    applied = _cli("migrate", "--db", f"sqlite:///{path}")
    assert applied.returncode == 0 and "applied" in applied.stdout and "initial schema" in applied.stdout
    status = _cli("--db", str(path), "migrate", "--status", "--json")
    assert status.returncode == 0 and '"pending": []' in status.stdout
    assert "up to date" in _cli("migrate", "--db", str(path)).stdout


def test_cli_bad_urls_fail_with_one_line(tmp_path: Path) -> None:
    for args, needle in (
        (("copy", "--from", "mysql://u@h/db", "--to", str(tmp_path / "x.db")), "unknown store URL scheme"),
        (("copy", "--from", str(tmp_path / "missing.db"), "--to", str(tmp_path / "x.db")), "does not exist"),
        (("copy", "--from", str(tmp_path / "x.db"), "--to", str(tmp_path / "x.db")), "does not exist"),
        (("migrate", "--db", "ftp://h/x"), "unknown store URL scheme"),
        (
            (
                "copy",
                "--from",
                ":memory:",
                "--to",
                "postgresql://me:pw12345@127.0.0.1:1/db?connect_timeout=1",
            ),
            "source cannot be",
        ),
    ):
        proc = _cli(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    SQLiteStore(tmp_path / "x.db").close()
    proc = _cli(
        "copy",
        "--from",
        str(tmp_path / "x.db"),
        "--to",
        "postgresql://me:pw12345@127.0.0.1:1/db?connect_timeout=1",
    )
    assert proc.returncode == 1 and "127.0.0.1:1" in proc.stderr and "pw12345" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
