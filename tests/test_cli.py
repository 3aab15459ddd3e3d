"""The ``jiyi`` command, run as a real subprocess against real SQLite files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg import give_back, pg_dsn, take_schema, with_params  # noqa: F401

ENV = {**os.environ, "PYTHONIOENCODING": "utf-8"}


def jiyi(
    *args: str,
    db: Path | None = None,
    stdin: str | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "jiyi.cli"]
    if db is not None:
        cmd += ["--db", str(db)]
    proc = subprocess.run(
        [*cmd, *args], input=stdin, capture_output=True, text=True, env=env or ENV, timeout=120
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"jiyi {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def test_add_then_search_finds_chinese_memory_from_paraphrase_and_english(db: Path) -> None:
    added = json.loads(
        jiyi(
            "add",
            "我最喜欢的编程语言是 Python，平时用它做数据分析",
            "--user",
            "li",
            "--type",
            "preference",
            "--json",
            db=db,
        ).stdout
    )
    jiyi("add", "我住在成都，每天骑自行车上班", "--user", "li", db=db)
    jiyi("add", "我们团队下个月要发布新版本的支付系统", "--user", "li", "--type", "context", db=db)
    target = added["item"]["id"]
    for query in ("她喜欢用什么语言写程序？", "which programming language does the user like?"):
        hits = json.loads(jiyi("search", query, "--user", "li", "--limit", "3", "--json", db=db).stdout)
        assert hits[0]["id"] == target, query
        assert {"id", "content", "score", "memory_type"} <= hits[0].keys()
        assert hits[0]["memory_type"] == "preference"
        assert hits[0]["score"] >= hits[-1]["score"]


def test_interface_points(db: Path, tmp_path: Path) -> None:
    out = jiyi(
        "add",
        "Caroline went to an LGBTQ support group",
        "--user",
        "conv-1",
        "--type",
        "event",
        "--occurred",
        "2023-05-08",
        "--json",
        db=db,
    )
    item = json.loads(out.stdout)["item"]
    assert item["occurred_at"].startswith("2023-05-08T00:00:00")
    lines = [
        {
            "content": "Melanie painted a sunrise over a lake",
            "memory_type": "event",
            "user_id": "conv-1",
            "id": "D1:5",
            "occurred_at": "2023-05-08T13:56:00",
            "metadata": {"dia_id": "D1:5"},
        },
        {"content": "Melanie's kids love dinosaurs", "memory_type": "fact", "user_id": "conv-1"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    assert json.loads(jiyi("import", str(src), "--json", db=db).stdout) == {"imported": 2}
    hits = json.loads(
        jiyi("search", "what did Melanie paint?", "--user", "conv-1", "--limit", "2", "--json", db=db).stdout
    )
    assert hits[0]["id"] == "D1:5"
    exported = [json.loads(x) for x in jiyi("export", db=db).stdout.splitlines()]
    assert len(exported) == 3
    for row in exported:
        assert {
            "id",
            "content",
            "memory_type",
            "user_id",
            "occurred_at",
            "metadata",
            "created_at",
            "confidence",
        } <= row.keys()
    # export -> import into a fresh file -> export: identical
    dump = tmp_path / "dump.jsonl"
    jiyi("export", "--output", str(dump), db=db)
    copy = tmp_path / "copy.db"
    jiyi("import", str(dump), db=copy)
    assert jiyi("export", db=copy).stdout == dump.read_text(encoding="utf-8")


def test_show_update_history_delete_list_stats(db: Path) -> None:
    item = json.loads(
        jiyi("add", "User's favourite editor is Neovim", "--user", "u", "--json", db=db).stdout
    )["item"]
    shown = json.loads(jiyi("show", item["id"], "--json", db=db).stdout)
    assert shown["content"] == "User's favourite editor is Neovim"
    jiyi("update", item["id"], "--text", "User's favourite editor is Helix", "--reason", "switched", db=db)
    history = json.loads(jiyi("history", item["id"], "--json", db=db).stdout)
    assert [h["action"] for h in history] == ["add", "update"]
    assert history[1]["reason"] == "switched"
    human = jiyi("history", item["id"], db=db).stdout
    assert "Helix" in human and "switched" in human
    jiyi("delete", item["id"], db=db)
    page = json.loads(jiyi("list", "--user", "u", "--json", db=db).stdout)
    assert [i["status"] for i in page["items"]] == ["archived"]
    stats = json.loads(jiyi("stats", "--json", db=db).stdout)
    assert stats["total"] == 1 and stats["by_status"] == {"archived": 1}
    jiyi("delete", item["id"], "--hard", db=db)
    assert json.loads(jiyi("stats", "--json", db=db).stdout)["total"] == 0


def test_list_pages_with_cursor(db: Path, tmp_path: Path) -> None:
    src = tmp_path / "many.jsonl"
    src.write_text(
        "\n".join(
            json.dumps({"content": f"note {i}", "memory_type": "fact", "user_id": "p"}) for i in range(7)
        ),
        encoding="utf-8",
    )
    jiyi("import", str(src), db=db)
    first = json.loads(jiyi("list", "--user", "p", "--limit", "5", "--json", db=db).stdout)
    second = json.loads(
        jiyi("list", "--user", "p", "--limit", "5", "--cursor", first["next_cursor"], "--json", db=db).stdout
    )
    assert len(first["items"]) == 5 and len(second["items"]) == 2 and second["next_cursor"] is None
    assert {i["id"] for i in first["items"]}.isdisjoint(i["id"] for i in second["items"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "", "--user", "u"], "content must not be empty"),
        (["add", "hello there world", "--user", "u", "--type", "gossip"], "--type must be one of: "),
        (["add", "hello there world"], "give --user"),
        (["add", "hello there world", "--user", "u", "--confidence", "1.5"], "confidence"),
        (["add", "hi", "--user", "u"], "refused: too short"),
        (["add", "hello there world", "--user", "u", "--occurred", "yesterday"], "not an ISO date"),
        (["search", "anything", "--user", "u", "--limit", "0"], "limit must be"),
        (["search", "anything"], "at least one scope"),
        (["show", "no-such-id"], "no memory with id 'no-such-id'"),
        (["history", "no-such-id"], "no memory with id"),
        (["delete", "no-such-id"], "no memory with id"),
        (["import", "/does/not/exist.jsonl"], "cannot read"),
        (["list", "--cursor", "bogus"], "cursor"),
        (["reset", "--user", "u"], "--yes"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(db: Path, args: list[str], message: str) -> None:
    proc = jiyi(*args, db=db, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) >= 1 and message in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_import_line_writes_nothing(db: Path, tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(
        '{"content": "fine record here", "memory_type": "fact", "user_id": "u"}\n{not json\n',
        encoding="utf-8",
    )
    proc = jiyi("import", str(src), db=db, check=False)
    assert proc.returncode == 1 and "line 2: not valid JSON" in proc.stderr
    assert json.loads(jiyi("stats", "--json", db=db).stdout)["total"] == 0


def test_corrupt_database_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(os.urandom(4096))
    proc = jiyi("stats", db=bad, check=False)
    assert proc.returncode == 1
    assert "not a usable jiyi database" in proc.stderr and "Traceback" not in proc.stderr


def test_gate_env_variables_honoured(db: Path) -> None:
    env = {**ENV, "MEMORY_MIN_LENGTH": "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "jiyi.cli", "--db", str(db), "add", "猫咪", "--user", "u"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_two_processes_writing_the_same_file(db: Path) -> None:
    script = (
        "import sys\n"
        "from jiyi.config import GateConfig\n"
        "from jiyi.memory import Memory\n"
        "with Memory.open(sys.argv[1], embedder='hash:64', gate=GateConfig.from_env()) as m:\n"
        "    for i in range(60):\n"
        "        r = m.add(f'process {sys.argv[2]} wrote memory number {i} of sixty', user_id='shared',\n"
        "                  metadata={'p': sys.argv[2], 'i': i})\n"
        "        assert r.item is not None, r.decision\n"
    )
    from jiyi.memory import Memory

    Memory.open(db, embedder="hash:64").close()  # create the schema first
    # A strict duplicate threshold keeps the near-identical sentences apart.
    env = {**ENV, "MEMORY_DUPLICATE_THRESHOLD": "1.0"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(db), name], env=env, stderr=subprocess.PIPE, text=True
        )
        for name in ("A", "B")
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    with Memory.open(db, embedder="hash:64") as m:
        items = m.export()
    assert len(items) == 120
    assert {(i["metadata"]["p"], i["metadata"]["i"]) for i in items} == {
        (p, i) for p in "AB" for i in range(60)
    }
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_help_is_useful() -> None:
    out = jiyi("--help").stdout
    for word in ("add", "search", "import", "export", "demo", "--db"):
        assert word in out
    assert "--occurred" in jiyi("add", "--help").stdout


def test_demo_runs(tmp_path: Path) -> None:
    out = jiyi("demo", db=tmp_path / "demo.db").stdout
    assert "redacted email, phone" in out
    assert "reinforced" in out
    assert "refused" in out
    assert "Next.js" in out
    assert "Stored 7 memories: constraint 1, decision 1, fact 2, habit 1, preference 2" in out  # not a dict
    # Each hit shows its calibrated relevance: the one that answers scores far above the rest.
    relevances = [
        float(line.split()[1]) for line in out.splitlines() if line.strip().startswith("relevance ")
    ]
    assert len(relevances) == 10 and all(0.0 <= r <= 1.0 for r in relevances)
    assert sum(r > 0.5 for r in relevances[0::2]) >= 4 and all(r < 0.5 for r in relevances[1::2])
    # The user's path: two sessions through remember(), the second changes the first.
    assert "superseded  我住在杭州  ->  我上个月搬到上海了" in out
    assert "superseded  平时写代码用 VS Code  ->  我现在用 Cursor 写代码" in out
    after = out.split("Q: 用户现在住在哪个城市？", 1)[1].splitlines()
    assert "我上个月搬到上海了" in after[1]  # the current value first
    tickets = out.split("Q: Which tool does the team track tickets in?", 1)[1].splitlines()
    assert "Linear" in tickets[1] and "a later turn that says it changed" in tickets[2]


def test_remember_worker_jobs_context(db: Path) -> None:
    out = json.loads(
        jiyi(
            "remember",
            "帮我记住：我的生日是三月五日",
            "I prefer window seats on flights",
            "--session",
            "s1",
            "--user",
            "u",
            "--json",
            db=db,
        ).stdout
    )
    assert out["job_id"] and len(out["messages"]) == 2
    jobs = json.loads(jiyi("jobs", "--json", db=db).stdout)
    assert [j["status"] for j in jobs] == ["queued"]
    worked = jiyi("worker", "--once", db=db)
    assert "done" in worked.stdout
    assert [j["status"] for j in json.loads(jiyi("jobs", "--json", db=db).stdout)] == ["done"]
    hits = json.loads(
        jiyi("search", "where does the user like to sit on a plane", "--user", "u", "--json", db=db).stdout
    )
    assert "window seats" in hits[0]["content"]
    ctx = json.loads(jiyi("context", "birthday", "--user", "u", "--session", "s1", "--json", db=db).stdout)
    assert {e["source"] for e in ctx["entries"]} >= {"recent"}
    assert ctx["text"].startswith("# USER MEMORY")
    proc = jiyi("remember", "hello there", "--user", "u", db=db, check=False)
    assert proc.returncode == 1 and "--session" in proc.stderr


def test_remember_keeps_who_said_it(db: Path) -> None:
    # A conversation between two people, one turn per call, each named with --name.
    turns = [
        ("Jolene", "I have a few game recommendations: Zelda and Animal Crossing."),
        ("Deborah", "Thanks, I will look them up tonight."),
        ("Jolene", "Oh, and Overcooked 2 too!"),
    ]
    for name, text in turns:
        jiyi("remember", text, "--name", name, "--session", "s1", "--user", "u", db=db)
    jiyi("worker", "--once", db=db)
    hits = json.loads(
        jiyi("search", "Which games does Jolene recommend?", "--user", "u", "--json", db=db).stdout
    )
    by_text = {h["content"]: h for h in hits}
    more = by_text["Jolene: Oh, and Overcooked 2 too!"]
    assert more["metadata"]["speaker"] == "Jolene"
    assert more["breakdown"]["similarity.continues"] > 0 and more["breakdown"]["similarity.speaker"] > 0
    assert by_text["Deborah: Thanks, I will look them up tonight."]["breakdown"]["similarity.speaker"] == 0
    explained = jiyi("search", "Which games does Jolene recommend?", "--user", "u", "--explain", db=db).stdout
    assert "continues" in explained and "speaker" in explained
    proc = jiyi("remember", "hi", "--name", " ", "--session", "s1", "--user", "u", db=db, check=False)
    assert proc.returncode == 1 and "--name is empty" in proc.stderr


def test_maintain_dry_run_changes_nothing(db: Path, tmp_path: Path) -> None:
    old = {
        "content": "User once mentioned liking jazz",
        "memory_type": "fact",
        "user_id": "m",
        "created_at": "2020-01-01T00:00:00Z",
        "updated_at": "2020-01-01T00:00:00Z",
    }
    src = tmp_path / "old.jsonl"
    src.write_text(json.dumps(old) + "\n", encoding="utf-8")
    jiyi("import", str(src), db=db)
    before = jiyi("export", db=db).stdout
    kept = json.loads(jiyi("maintain", "--dry-run", "--json", db=db).stdout)
    assert kept["counts"]["archive"] == 0  # idle long-term memory is kept unless asked
    report = json.loads(jiyi("maintain", "--archive-idle", "--dry-run", "--json", db=db).stdout)
    assert report["counts"]["archive"] == 1 and report["dry_run"] is True
    assert jiyi("export", db=db).stdout == before
    jiyi("maintain", "--archive-idle", db=db)
    assert json.loads(jiyi("stats", "--json", db=db).stdout)["by_status"] == {"archived": 1}


def test_search_explain_says_which_hit_holds_the_kind_of_answer_asked(db: Path) -> None:
    jiyi("add", "We went camping at Lake Tahoe last weekend", "--user", "u1", db=db)
    jiyi("add", "I love camping with my kids", "--user", "u1", db=db)
    out = jiyi("search", "When did we go camping?", "--user", "u1", "--explain", db=db).stdout
    said_when, no_time = out.split("Lake Tahoe")[1].split("I love camping")
    # the memory that says when carries the answer evidence; the other does not
    assert ", answer " in said_when and ", answer " not in no_time
    assert "evidence: meaning" in said_when


def test_search_can_say_nothing_relevant(tmp_path: Path) -> None:
    # (a cross-lingual paraphrase can fall below the calibrated 0.5 cut: the cuts here are 0 and ~1)
    db = tmp_path / "r.db"
    jiyi(
        "add",
        "我们决定用 Next.js 而不是 Remix，因为团队更熟悉 React",
        "--user",
        "u",
        "--type",
        "decision",
        db=db,
    )
    args = ("search", "which framework did we choose?", "--user", "u", "--min-relevance")
    found = json.loads(jiyi(*args, "0", "--json", db=db).stdout)
    assert found and 0.0 <= found[0]["relevance"] <= 1.0
    assert "nothing relevant" in jiyi(*args, "0.9999", db=db).stdout
    bad = jiyi(*args, "2", db=db, check=False)
    assert bad.returncode == 1 and "min_relevance" in bad.stderr


# ------------------------------------------------------------------ --db takes a store URL


def test_db_takes_a_sqlite_url_and_so_does_jiyi_db(tmp_path: Path) -> None:
    path = tmp_path / "url.db"
    url = f"sqlite:///{path}"  # an absolute path: sqlite:////...
    added = json.loads(
        jiyi(
            "--db", url, "--embedder", "hash:64", "add", "hello world memory", "--user", "a", "--json"
        ).stdout
    )
    assert path.is_file()
    env = {**ENV, "JIYI_DB": url}
    hits = json.loads(
        jiyi("--embedder", "hash:64", "search", "hello world", "--user", "a", "--json", env=env).stdout
    )
    assert [h["id"] for h in hits] == [added["item"]["id"]]
    # --db wins over $JIYI_DB; a plain path is still a SQLite file
    other = tmp_path / "other.db"
    stats = json.loads(jiyi("--embedder", "hash:64", "stats", "--json", db=other, env=env).stdout)
    assert stats["total"] == 0 and other.is_file()
    # the worker opens the store the same way
    jiyi(
        "--db",
        url,
        "--embedder",
        "hash:64",
        "remember",
        "我住在成都，每天骑自行车上班",
        "--session",
        "s1",
        "--user",
        "a",
    )
    worker = jiyi("--embedder", "hash:64", "worker", "--once", env=env)
    assert "processed 1 job(s)" in worker.stderr


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    """A URL naming an empty, migrated schema of the test server (emptied again afterwards)."""
    schema = take_schema()
    yield with_params(pg_dsn, schema=schema)
    give_back(pg_dsn, schema)


def test_db_takes_a_postgresql_url(pg_url: str) -> None:
    base = ("--db", pg_url, "--embedder", "hash:64")
    added = json.loads(jiyi(*base, "add", "hello world memory", "--user", "a", "--json").stdout)
    item_id = added["item"]["id"]
    hits = json.loads(jiyi(*base, "search", "hello world", "--user", "a", "--json").stdout)
    assert [h["id"] for h in hits] == [item_id]
    assert "hello world memory" in jiyi(*base, "show", item_id).stdout
    jiyi(*base, "remember", "我住在成都，每天骑自行车上班", "--session", "s1", "--user", "a")
    assert "processed 1 job(s)" in jiyi(*base, "worker", "--once").stderr
    assert [j["status"] for j in json.loads(jiyi(*base, "jobs", "--json").stdout)] == ["done"]
    env = {**ENV, "JIYI_DB": pg_url}
    assert json.loads(jiyi("--embedder", "hash:64", "stats", "--json", env=env).stdout)["total"] >= 1


@pytest.mark.parametrize(
    ("db", "args", "message"),
    [
        ("mysql://u@h/db", ["stats"], "unknown store URL scheme 'mysql'"),
        ("postgresql:/x", ["stats"], "is not a PostgreSQL URL"),
        ("sqlite:/x.db", ["add", "hello world memory", "--user", "a"], "is not a SQLite URL"),
        ("postgresql://me:pw12345@127.0.0.1:1/db?connect_timeout=2", ["stats"], "cannot reach PostgreSQL"),
        ("postgresql://me@127.0.0.1:1/db?connect_timeout=2", ["serve"], "cannot reach PostgreSQL"),
    ],
)
def test_bad_store_url_fails_with_one_line(db: str, args: list[str], message: str) -> None:
    for proc in (
        jiyi("--db", db, *args, check=False),
        jiyi(*args, check=False, env={**ENV, "JIYI_DB": db}),
    ):
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert "pw12345" not in proc.stderr


def test_db_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    for db, args in ((str(missing / "x.db"), ["stats"]), (f"sqlite:///{missing}/x.db", ["worker", "--once"])):
        proc = jiyi("--db", db, *args, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.strip() == f"jiyi: error: directory {missing} does not exist"
    assert not missing.exists()


def test_search_as_of_a_past_date(tmp_path: Path) -> None:
    db = tmp_path / "asof.db"
    jiyi("add", "Alice keeps a small herb garden on her balcony", "--user", "a", db=db)
    now = json.loads(jiyi("search", "what does Alice grow?", "--user", "a", "--json", db=db).stdout)
    assert now and "herb garden" in now[0]["content"]
    past = jiyi("search", "what does Alice grow?", "--user", "a", "--as-of", "2001-01-01", "--json", db=db)
    assert json.loads(past.stdout) == []  # nothing was known then
    bad = jiyi("search", "x", "--user", "a", "--as-of", "yesterday", db=db, check=False)
    assert bad.returncode != 0 and "ISO date" in bad.stderr


def test_the_tenant_from_the_environment_reaches_every_command(db: Path) -> None:
    """$JIYI_TENANT is part of the caller built once per command: get, history and delete
    find the item the same tenant added, and another tenant does not."""
    acme = {**ENV, "JIYI_TENANT": "acme"}
    item = json.loads(jiyi("add", "I prefer green tea", "--user", "u", "--json", db=db, env=acme).stdout)[
        "item"
    ]
    assert json.loads(jiyi("show", item["id"], "--json", db=db, env=acme).stdout)["id"] == item["id"]
    assert "add" in jiyi("history", item["id"], db=db, env=acme).stdout
    other = jiyi("show", item["id"], db=db, env={**ENV, "JIYI_TENANT": "globex"}, check=False)
    assert other.returncode != 0 and item["id"] in other.stderr
    jiyi("delete", item["id"], db=db, env=acme)
    assert json.loads(jiyi("show", item["id"], "--json", db=db, env=acme).stdout)["status"] == "archived"


def test_global_options_after_the_command_and_log_level(tmp_path: Path) -> None:
    db = tmp_path / "after.db"
    env = {**ENV, "JIYI_EMBEDDER": "hash:256"}
    jiyi(
        "add", "我最喜欢的编程语言是 Python", "--user", "li", "--db", str(db), "--log-level", "debug", env=env
    )
    listed = jiyi("list", "--user", "li", "--json", "--db", str(db), env=env)
    assert json.loads(listed.stdout)["items"][0]["content"] == "我最喜欢的编程语言是 Python"
    # Before the command it still works, and a value before it is not reset by the command's defaults.
    assert "Python" in jiyi("--db", str(db), "--log-level", "info", "list", "--user", "li", env=env).stdout
    bad = jiyi("list", "--log-level", "loud", "--db", str(db), check=False, env=env)
    assert bad.returncode == 2 and "invalid choice: 'loud'" in bad.stderr


def test_an_unknown_option_points_at_the_commands_own_help(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jiyi.cli import main

    for argv, command in [
        (["search", "x", "--user", "a", "--occurred-after", "yesterday"], "jiyi search"),
        (
            ["keys", "create", "--keys", str(db.with_suffix(".json")), "--tenant", "t", "--bogus"],
            "jiyi keys create",
        ),
    ]:
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--db", str(db)])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "unrecognized arguments:" in err and f"(see '{command} --help')" in err, err


def test_every_option_has_help_text() -> None:
    import argparse

    from jiyi.cli import _every_command, build_parser

    parser = build_parser()
    missing = [
        f"{p.prog} {a.option_strings or a.dest}"
        for p in [parser, *_every_command(parser)]
        for a in p._actions
        if a.help is None and not isinstance(a, argparse._SubParsersAction)
    ]
    assert not missing, missing


def test_errors_under_json_are_json_and_list_every_problem(db: Path) -> None:
    missing = jiyi("show", "no-such-id", "--json", db=db, check=False)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"] == {
        "code": "not_found",
        "message": "no memory with id 'no-such-id'",
        "field": "id",
        "problems": ["no memory with id 'no-such-id'"],
    }
    usage = jiyi("search", "--json", db=db, check=False)
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"]["code"] == "usage_error"
    records = '{"content": "x", "memory_type": "fact", "user_id": "u", "confidence": 7, "importance": -1}\n'
    refused = jiyi("import", "-", "--json", db=db, stdin=records, check=False)
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "invalid_input" and len(error["problems"]) == 2, error
    assert "confidence" in error["message"] and "importance" in error["message"]
    assert "more problem" not in error["message"]


def test_piping_into_head_ends_quietly_and_stats_are_rounded(tmp_path: Path) -> None:
    db = tmp_path / "pipe.db"
    lines = "".join(
        json.dumps(
            {
                "content": f"memory number {i} with enough words to be kept",
                "memory_type": "fact",
                "user_id": "u",
                "confidence": 0.7 + (i % 3) / 10,
            }
        )
        + "\n"
        for i in range(2000)
    )
    jiyi("import", "-", db=db, stdin=lines, env={**ENV, "JIYI_EMBEDDER": "hash:256"})
    cmd = f"{sys.executable} -m jiyi.cli --db {db} list --json --limit 1000 | head -c 100"
    piped = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=ENV, timeout=120)
    assert piped.stdout.startswith('{"items"') and "Traceback" not in piped.stderr, piped.stderr
    stats = json.loads(jiyi("stats", "--json", db=db).stdout)
    assert stats["avg_confidence"] == round(stats["avg_confidence"], 3)
    shown = jiyi("stats", db=db).stdout
    assert "0000000" not in shown
    # counts read as words, not as a Python dict
    assert "by_type         fact 2000" in shown and "{" not in shown, shown


def test_new_user_papercuts_have_actionable_answers(db: Path, tmp_path: Path) -> None:
    # A mem0 export given without --from is named as one, with the option to use.
    export = tmp_path / "mem0.json"
    export.write_text(json.dumps({"results": [{"id": "m1", "memory": "likes tea", "user_id": "alice"}]}))
    proc = jiyi("import", str(export), db=db, check=False)
    assert proc.returncode != 0 and "--from mem0" in proc.stderr, proc.stderr
    assert json.loads(jiyi("import", str(export), "--from", "mem0", "--json", db=db).stdout)["imported"] == 1
    # An empty message is refused, not queued.
    proc = jiyi("remember", "", "--session", "s1", "--user", "alice", "--json", db=db, check=False)
    assert proc.returncode != 0 and json.loads(proc.stdout or proc.stderr)["error"]["field"] == "messages"
    assert json.loads(jiyi("jobs", "--json", db=db).stdout) == []
    # The library's name for the token budget works on the CLI too.
    ctx = json.loads(
        jiyi("context", "tea", "--user", "alice", "--budget-tokens", "50", "--json", db=db).stdout
    )
    assert ctx["tokens"] <= 50


def test_role_words_read_as_english() -> None:
    from jiyi.server.auth import Role

    assert [r.a_key for r in Role] == ["an owner key", "an admin key", "an editor key", "a viewer key"]


def test_documents_and_ending_a_session(db: Path, tmp_path: Path) -> None:
    """add-document / get-document / end-session: the library's add_document,
    get_document and end_session (before, only the tools and MCP had them)."""
    text = "\n\n".join(
        f"第{i}节：支付服务在扣款失败 {i} 分钟后重试，并把每次尝试写入审计表。" * 6 for i in range(1, 60)
    )
    doc = tmp_path / "retry-policy.md"
    doc.write_text(text, encoding="utf-8")
    fast = ("--embedder", "hash:256")
    stored = json.loads(jiyi(*fast, "add-document", str(doc), "--user", "li", "--json", db=db).stdout)
    assert stored["status"] == "stored" and stored["chunks"] == len(stored["ids"]) >= 2
    back = json.loads(jiyi(*fast, "get-document", stored["parent_id"], "--json", db=db).stdout)
    assert back == {
        "parent_id": stored["parent_id"],
        "title": "retry-policy.md",
        "chunks": stored["chunks"],
        "text": text,
    }
    assert jiyi(*fast, "get-document", stored["parent_id"], db=db).stdout == text + "\n"
    piped = jiyi(*fast, "add-document", "-", "--title", "notes", "--user", "li", db=db, stdin=text)
    assert "chunk(s)" in piped.stdout and "jiyi get-document" in piped.stdout
    missing = jiyi(*fast, "get-document", "nope", db=db, check=False)
    assert missing.returncode == 1 and "no document 'nope'" in missing.stderr

    jiyi(
        *fast,
        "remember",
        "我们决定下周三在杭州办发布会，因为客户都在那边",
        "--session",
        "s1",
        "--user",
        "li",
        db=db,
    )
    note = json.loads(
        jiyi(*fast, "add", "在这个会话里起草发布清单", "--session", "s1", "--json", db=db).stdout
    )["item"]
    ended = json.loads(
        jiyi(*fast, "end-session", "--session", "s1", "--user", "li", "--process", "--json", db=db).stdout
    )
    assert ended["status"] == "ended" and ended["episode_job_id"]
    assert any(r["kind"] == "episode" and r["status"] == "done" for r in ended["reports"])
    shown = json.loads(jiyi(*fast, "show", note["id"], "--json", db=db).stdout)
    assert shown["status"] == "archived"
    # ending it again is a no-op that says so: no second episode of the same turns
    again = jiyi(*fast, "end-session", "--session", "s1", "--user", "li", db=db).stdout
    assert "session s1 was already ended" in again and "queued" in again and "episode job" not in again
    again_json = json.loads(jiyi(*fast, "end-session", "--session", "s1", "--json", db=db).stdout)
    assert again_json["already_ended"] and again_json["episode_job_id"] is None
    jobs = json.loads(jiyi(*fast, "jobs", "--json", db=db).stdout)
    assert [j["kind"] for j in jobs].count("episode") == 1
    refused = jiyi(*fast, "end-session", "--user", "li", db=db, check=False)
    assert refused.returncode == 1 and "--session" in refused.stderr


# A Python without some packages: the import of each blocked top-level name fails as it
# does when the package is not installed.
WITHOUT = """
import sys
from importlib.abc import MetaPathFinder

class Missing(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in set(sys.argv[1].split(",")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from jiyi.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("blocked", "args", "said"),
    [
        (
            "fastapi",
            ["serve", "--port", "1"],
            "jiyi serve needs the 'server' extra (fastapi is not installed)",
        ),
        ("mcp,mcp_types", ["mcp", "--user", "u"], "jiyi mcp needs the 'mcp' extra ("),
    ],
)
def test_a_missing_extra_is_one_line_saying_how_to_install_it(
    db: Path, blocked: str, args: list[str], said: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT, blocked, "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert said in proc.stderr and "pip install '.[" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_sessions_messages_and_checkpoints(db: Path) -> None:
    """jiyi messages and jiyi checkpoint save|list|restore: the library's messages and
    checkpoints (before, only the library and REST had them)."""
    fast = ("--embedder", "hash:256")
    jiyi(*fast, "remember", "我们决定下周三在杭州办发布会", "好的", "--session", "s1", "--user", "li", db=db)
    saved = json.loads(
        jiyi(
            *fast,
            "checkpoint",
            "save",
            "--session",
            "s1",
            "--label",
            "before",
            "--state",
            '{"todo": ["book"]}',
            "--json",
            db=db,
        ).stdout
    )
    assert saved["label"] == "before" and len(saved["messages"]) == 2
    jiyi(*fast, "remember", "改成周四", "--session", "s1", "--user", "li", db=db)
    assert [
        m["content"]
        for m in json.loads(jiyi(*fast, "messages", "--session", "s1", "--last", "1", "--json", db=db).stdout)
    ] == ["改成周四"]
    listed = json.loads(jiyi(*fast, "checkpoint", "list", "--session", "s1", "--json", db=db).stdout)
    assert [c["id"] for c in listed] == [saved["id"]]
    restored = jiyi(*fast, "checkpoint", "restore", saved["id"], "--session", "s1", db=db).stdout
    assert "restored" in restored and '"todo": ["book"]' in restored
    shown = jiyi(*fast, "messages", "--session", "s1", db=db).stdout
    assert "我们决定下周三在杭州办发布会" in shown and "改成周四" not in shown
    missing = jiyi(*fast, "checkpoint", "restore", "nope", "--session", "s1", db=db, check=False)
    assert missing.returncode == 1 and "no checkpoint 'nope' for session 's1'" in missing.stderr


def test_export_to_a_missing_folder_or_a_folder_is_a_clear_error(db: Path, tmp_path: Path) -> None:
    jiyi("add", "I keep my bike in the hallway", "--user", "u", db=db)
    for target, says in ((tmp_path / "nodir" / "x.jsonl", "no directory"), (tmp_path, "is a directory")):
        proc = jiyi("export", "-o", str(target), "--user", "u", db=db, check=False)
        assert proc.returncode == 1 and says in proc.stderr and "Traceback" not in proc.stderr
    out = tmp_path / "ok.jsonl"
    jiyi("export", "-o", str(out), "--user", "u", db=db)
    assert "bike" in out.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_a_port_out_of_range_is_refused_before_the_server_starts(db: Path) -> None:
    proc = jiyi("serve", "--port", "99999", db=db, check=False)
    assert proc.returncode == 2 and "must be a port from 0 to 65535" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ending_a_session_that_holds_no_message_says_so(db: Path) -> None:
    out = jiyi("end-session", "--session", "nosuch", "--user", "u", db=db).stdout
    assert "holds no messages" in out and "ended session" not in out


def test_a_superseding_add_says_what_it_replaced(db: Path) -> None:
    first = json.loads(jiyi("add", "I live in Munich", "--user", "u", "--json", db=db).stdout)["item"]["id"]
    out = jiyi("add", "I moved to Berlin last month", "--user", "u", db=db).stdout
    assert out.startswith(f"stored (supersedes {first}): ")
