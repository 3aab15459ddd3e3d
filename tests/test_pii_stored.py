"""No personal data or secret survives anywhere jiyi stores text.

A realistic session (a zh/en conversation with an e-mail, a +86 mobile, a US phone, an
OpenAI key, an AWS secret key, a password, a Chinese ID number and a card number; then
the worker, compaction, episodes, a checkpoint, a document, ``add`` with every text
field, an update, an import, a profile, procedural records and a LangGraph put) is run
against a real store; then every table is read back with the database's own client
(every text column, JSON decoded) and every file of the ``files=`` workspace is read,
and none of those values, nor anything the detector recognises, may be found.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jiyi.config import GateConfig, SessionConfig
from jiyi.errors import ConfigError
from jiyi.memory import Memory
from jiyi.store.base import Store
from jiyi.store.sqlite import SQLiteStore
from jiyi.text.pii import PiiKind, redact

# Assembled at runtime so secret scanners do not flag this file.
EMAIL = "zhang.san" + "@example.com"
EMAIL2 = "li.si" + "@example.org"
CN_MOBILE = "+86 138 " + "0013 8000"
CN_MOBILE2 = "139" + "12345678"
US_PHONE = "(415) " + "555-0132"
OPENAI_KEY = "sk-" + "proj-" + "T3st" * 8
AWS_SECRET = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"
PASSWORD = "hunter2" + "-xyz"
CN_ID = "11010519491231" + "002X"
CARD = "4111 1111 " + "1111 1111"

# Every way each value could be written down: as given, and without separators.
NEEDLES = {
    "email": (EMAIL, EMAIL2),
    "cn_mobile": (CN_MOBILE, "13800138000", "138 0013 8000", CN_MOBILE2),
    "us_phone": (US_PHONE, "555-0132", "4155550132"),
    "openai_key": (OPENAI_KEY, "T3stT3stT3st"),
    "aws_secret": (AWS_SECRET, "bPxRfiCYEXAMPLEKEY"),
    "password": (PASSWORD,),
    "cn_id": (CN_ID, "11010519491231"),
    "card": (CARD, "4111111111111111"),
}

CONVERSATION = [
    ("user", f"记住：我的邮箱是 {EMAIL}，手机号是 {CN_MOBILE}"),
    ("assistant", "好的，我记住了。"),
    ("user", f"I am a data engineer at Acme. My US phone is {US_PHONE} and my password is {PASSWORD}"),
    ("assistant", "Noted."),
    ("user", f"Remember that my OpenAI key is {OPENAI_KEY} and my AWS secret key is {AWS_SECRET}"),
    ("assistant", "OK."),
    ("user", f"我的身份证号是{CN_ID}，信用卡号是{CARD}，我喜欢用 Python 写数据管道"),
    ("assistant", "明白。"),
    ("user", f"我们决定用 PostgreSQL 而不是 MySQL，因为 {EMAIL2} 的团队更熟悉它"),
    ("assistant", f"好的，需要时我会打 {CN_MOBILE2} 联系你。"),
]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def run_session(mem: Memory) -> None:
    """Every path that stores text, with personal data in what it is given."""
    ids = {"user_id": "alice"}
    mem.remember(CONVERSATION[:6], session_id="s1", **ids)
    mem.remember(CONVERSATION[6:], session_id="s1", **ids)  # past max_turns: compaction
    mem.add_messages(
        "s1",
        [
            {
                "role": "assistant",
                "content": f"calling the CRM for {EMAIL}",
                "tool_calls": [{"name": "crm_lookup", "arguments": {"phone": CN_MOBILE}}],
                "metadata": {"note": f"card {CARD}"},
            }
        ],
        user_id="alice",
    )
    mem.wait_for_jobs()
    mem.compact("s1", **ids)
    mem.end_session("s1", **ids)
    mem.wait_for_jobs()
    mem.add_episode(
        f"User shared {EMAIL} and asked to call {US_PHONE}",
        key_topics=[f"contact {CN_MOBILE2}"],
        actions_taken=[f"stored password {PASSWORD}"],
        outcomes=[f"card {CARD} verified"],
        session_id="s1",
        **ids,
    )
    mem.save_checkpoint(
        "s1",
        agent_state={"todo": [f"call {CN_MOBILE}", "book a table"], "contact": {"phone": CN_MOBILE2}},
        tool_states={"mailer": {"to": EMAIL, "key": OPENAI_KEY}},
        pending_tool_calls=[{"name": "pay", "arguments": {"card": CARD}}],
        metadata={"why": f"user id {CN_ID}"},
        label=f"before paying with {CARD}",
    )
    mem.add_document(
        "Onboarding notes.\n\n"
        + "The support desk answers every question within a day. " * 20
        + f"\n\nWrite to {EMAIL} or call {US_PHONE}; the shared password is {PASSWORD}.",
        title=f"notes for {EMAIL2}",
        **ids,
    )
    added = mem.add(
        f"The user's backup e-mail is {EMAIL2}",
        raw=f"original: {EMAIL2}, phone {CN_MOBILE}, AWS secret {AWS_SECRET}",
        summary=f"backup contact {EMAIL2} / {US_PHONE}",
        structured={"email": EMAIL2, "nested": {"ids": [CN_ID], "key": OPENAI_KEY}},
        metadata={"source_note": f"typed by {EMAIL}", "card": CARD},
        tags=["contact", f"owner:{EMAIL}"],
        **ids,
    )
    assert added.item is not None
    mem.update(
        added.item.id,
        summary=f"now also {CN_MOBILE2}",
        metadata={"source_note": f"my password is {PASSWORD}"},
        reason=f"the user called from {US_PHONE}",
    )
    mem.import_items(
        [
            {
                "content": f"Imported: reach Alice at {EMAIL} or {CN_MOBILE}",
                "raw": f"crm row: {CN_ID}, {CARD}",
                "summary": f"alice {US_PHONE}",
                "structured": {"aws": AWS_SECRET},
                "metadata": {"crm": {"password": PASSWORD}},
                "tags": [f"crm:{CN_MOBILE2}"],
                "memory_type": "fact",
                "user_id": "alice",
            }
        ]
    )
    mem.set_profile(
        user_id="alice",
        background=f"data engineer, reachable at {EMAIL}",
        expertise_areas=[f"on call via {CN_MOBILE2}"],
    )
    mem.set_profile(
        project_id="apollo", key_decisions=[{"decision": "use PostgreSQL", "reason": f"ask {EMAIL2}"}]
    )
    mem.record_failure(
        "rate_limit",
        indicators=["urgent", "尽快"],
        mitigation=f"call the API one request at a time; escalate to {EMAIL}",
        description=f"the key {OPENAI_KEY} was throttled",
        severity=4,
        metadata={"seen_by": US_PHONE},
        **ids,
    )
    mem.record_skill(
        "send_report",
        [{"tool": "render_pdf"}, {"tool": "send_mail", "to": EMAIL2}],
        task=f"send the weekly report to {EMAIL2} and text {CN_MOBILE2}",
        **ids,
    )
    mem.record_decomposition(
        f"migrate the CRM of {EMAIL}",
        [f"export rows with {CN_ID}", "import them"],
        strategy="sequential",
        succeeded=True,
        **ids,
    )
    soft = mem.add("Alice prefers short answers in the morning", memory_type="preference", **ids)
    assert soft.item is not None
    mem.delete(soft.item.id, reason=f"asked by {EMAIL}")
    from jiyi.integrations.langgraph import JiyiStore

    JiyiStore(mem).put(("users", "alice"), "contact", {"content": f"mail {EMAIL}", "phone": CN_MOBILE})
    # Queries are logged (the retrieval log) and cached: a query holding personal data
    # must be stored redacted like any other text.
    assert mem.search(f"who has the e-mail {EMAIL} or phone {CN_MOBILE}?", **ids)
    mem.context(f"我的密码是 {PASSWORD}，手机 {CN_MOBILE2}", **ids)
    mem.wait_for_jobs()


@dataclass
class Walk:
    """What was read back, and every trace of personal data found in it."""

    tables: set[str] = field(default_factory=set)
    columns: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    values: int = 0
    found: list[str] = field(default_factory=list)

    def check(self, where: str, value: Any) -> None:
        if isinstance(value, bytes | memoryview):
            # Blobs (vectors, full-text index pages): only the literal values could hide there.
            self._needles(where, bytes(value).decode("utf-8", "ignore"))
            return
        if not isinstance(value, str):
            return
        self.values += 1
        self._needles(where, value)
        for text in _strings(value):
            hit = redact(text)
            if hit.found:
                shown = ", ".join(f"{m.kind.value}:{text[m.start : m.end]!r}" for m in hit.matches)
                self.found.append(f"{where}: detector finds {shown}")

    def _needles(self, where: str, text: str) -> None:
        squashed = re.sub(r"[\s()\-]", "", text)
        for kind, needles in NEEDLES.items():
            for needle in needles:
                if needle in text or re.sub(r"[\s()\-]", "", needle) in squashed:
                    self.found.append(f"{where}: {kind} {needle!r}")


def _strings(value: str) -> Iterator[str]:
    """The text itself, and every string inside it when it is JSON."""
    yield value
    if value[:1] in "{[":
        try:
            data = json.loads(value)
        except ValueError:
            return
        yield from _json_strings(data)


def _json_strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield str(k)
            yield from _json_strings(v)
    elif isinstance(data, list):
        for v in data:
            yield from _json_strings(v)


def walk_sqlite(path: Path, walk: Walk) -> None:
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cur = con.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            walk.tables.add(table)
            walk.columns.update(f"{table}.{col}" for col in cols)
            for row in cur:
                for col, value in zip(cols, row, strict=True):
                    walk.check(f"{table}.{col}", value)
    finally:
        con.close()


def walk_files(root: Path, walk: Walk) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(root))
        walk.files.add(rel)
        walk.check(rel, path.read_bytes().decode("utf-8", "replace"))


def memory(store: Store, files: Path | None = None) -> Memory:
    return Memory(
        store,
        embedder="hash:256",
        clock=Clock(),
        background=False,
        files=files,
        session=SessionConfig(max_turns=6, keep_recent=2),
    )


def test_no_personal_data_in_any_table_or_file_of_a_sqlite_store(tmp_path: Path) -> None:
    db, ws = tmp_path / "memory.db", tmp_path / "context"
    with memory(SQLiteStore(db), files=ws) as mem:
        run_session(mem)
        stored = mem.list(user_id="alice").items
        mem.sync_files(user_id="alice")
    walk = Walk()
    walk_sqlite(db, walk)
    walk_files(ws, walk)
    # The database file itself, free pages and journal included: nothing deleted lingers.
    for name in sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("memory.db")):
        walk._needles(f"bytes of {name}", (tmp_path / name).read_bytes().decode("latin-1"))
    print(
        f"\nchecked {len(walk.tables)} tables, {len(walk.columns)} columns, {walk.values} text values, "
        f"{len(walk.files)} files"
    )
    assert not walk.found, "\n".join(walk.found)
    # The session really went through every path (and redaction kept what is not personal).
    assert {
        "items",
        "history",
        "messages",
        "checkpoints",
        "jobs",
        "embedding_cache",
        "memory_access",
    } <= walk.tables
    assert any(p.endswith("memory.md") for p in walk.files) and any(
        p.endswith("learnings.md") for p in walk.files
    )
    with sqlite3.connect(db) as conn:
        queries = [q for (q,) in conn.execute("SELECT query FROM memory_access")]
    assert any("[REDACTED_EMAIL]" in q for q in queries), queries  # the search was logged, redacted
    contents = " ".join(i.content for i in stored)
    for placeholder in ("[REDACTED_EMAIL]", "[REDACTED_PHONE]", "[REDACTED_API_KEY]"):
        assert placeholder in contents
    assert "PostgreSQL" in contents and "Python" in contents
    assert any("resource" in i.tags for i in stored) and any("episode" in i.tags for i in stored)


def test_no_personal_data_in_any_table_of_a_postgres_store() -> None:
    pytest.importorskip("psycopg")
    from jiyi.store.postgres import PostgresStore
    from tests.pg import give_back, server_dsn, take_schema

    dsn = server_dsn()
    schema = take_schema()
    try:
        with memory(PostgresStore(dsn, schema=schema)) as mem:
            run_session(mem)
        walk = Walk()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            columns = conn.execute(
                "SELECT table_name, column_name, udt_name FROM information_schema.columns "
                "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
                (schema,),
            ).fetchall()
            for table, column, kind in columns:
                walk.tables.add(table)
                walk.columns.add(f"{table}.{column}")
                rows = conn.execute(f'SELECT "{column}"::text FROM "{schema}"."{table}"').fetchall()
                for (value,) in rows:
                    if kind == "tsvector" and value is not None:
                        # Lexemes with positions ('password':153) are no prose for the
                        # detector; the values themselves must still be absent.
                        walk._needles(f"{table}.{column}", value)
                    else:
                        walk.check(f"{table}.{column}", value)
        print(f"\nchecked {len(walk.tables)} tables, {len(walk.columns)} columns, {walk.values} text values")
        assert not walk.found, "\n".join(walk.found)
        assert {"items", "history", "messages", "checkpoints", "jobs"} <= walk.tables
    finally:
        give_back(dsn, schema)


def test_the_switch_and_a_tenant_policy_keep_what_they_say(tmp_path: Path) -> None:
    gate = GateConfig(tenant_pii={"lab": False, "acme": ["email"]})
    with Memory(SQLiteStore(tmp_path / "t.db"), embedder="hash:256", background=False, gate=gate) as mem:
        kept = mem.add(f"lab contact {EMAIL}, {CN_MOBILE}", user_id="u", tenant_id="lab", raw=EMAIL)
        only_mail = mem.add(f"acme contact {EMAIL}, {CN_MOBILE}", user_id="u", tenant_id="acme")
        default = mem.add(f"default contact {EMAIL}, {CN_MOBILE}", user_id="u")
        assert kept.item is not None and only_mail.item is not None and default.item is not None
        assert kept.item.content == f"lab contact {EMAIL}, {CN_MOBILE}" and kept.item.raw == EMAIL
        assert only_mail.item.content == f"acme contact [REDACTED_EMAIL], {CN_MOBILE}"
        assert default.item.content == "default contact [REDACTED_EMAIL], [REDACTED_PHONE]"
        mem.add_messages("s", [("user", f"call {CN_MOBILE}")], tenant_id="lab")
        assert mem.messages("s", tenant_id="lab")[0].content == f"call {CN_MOBILE}"
    off = GateConfig(redact_pii=False)
    with Memory(SQLiteStore(tmp_path / "o.db"), embedder="hash:256", background=False, gate=off) as mem:
        cp = mem.save_checkpoint("s", agent_state={"phone": CN_MOBILE})
        assert mem.restore_checkpoint("s", cp.id).agent_state == {"phone": CN_MOBILE}


def test_asking_to_keep_a_value_still_redacts_it_and_names_the_kind(tmp_path: Path) -> None:
    with Memory(SQLiteStore(tmp_path / "k.db"), embedder="hash:256", background=False) as mem:
        result = mem.add(f"记住我的手机号 {CN_MOBILE2}，一定要保存原号码", user_id="alice")
        assert result.item is not None
        assert result.item.content == "记住我的手机号 [REDACTED_PHONE]，一定要保存原号码"
        assert result.decision.redacted == ("phone",)
        assert "redacted sensitive data: phone" in result.decision.reasons


def test_a_trusted_import_restores_an_export_verbatim(tmp_path: Path) -> None:
    record = {
        "content": f"reach Alice at {EMAIL}",
        "raw": CN_MOBILE,
        "memory_type": "fact",
        "user_id": "alice",
    }
    with Memory(SQLiteStore(tmp_path / "i.db"), embedder="hash:256", background=False) as mem:
        mem.import_items([{**record, "id": "trusted"}], trusted=True)
        mem.import_items([{**record, "id": "plain"}])
        assert mem.get("trusted").content == record["content"] and mem.get("trusted").raw == CN_MOBILE
        assert mem.get("plain").content == "reach Alice at [REDACTED_EMAIL]"
        assert mem.get("plain").raw == "[REDACTED_PHONE]"


def test_gate_config_policy_and_environment() -> None:
    every = frozenset(PiiKind)
    assert GateConfig().redaction() == every
    assert GateConfig(redact_pii=False).redaction("any") == frozenset()
    gate = GateConfig(
        pii_kinds={"email", PiiKind.PHONE}, tenant_pii={"lab": False, "acme": ["ip"], "on": True}
    )
    assert gate.redaction() == gate.redaction("other") == {PiiKind.EMAIL, PiiKind.PHONE}
    assert gate.redaction("lab") == frozenset()
    assert gate.redaction("acme") == {PiiKind.IP}
    assert gate.redaction("on") == {PiiKind.EMAIL, PiiKind.PHONE}
    assert GateConfig(redact_pii=False, tenant_pii={"strict": True}).redaction("strict") == every
    env = GateConfig.from_env(
        {"MEMORY_REDACT_PII": "Email, phone", "MEMORY_REDACT_PII_TENANTS": '{"lab": false, "acme": ["ip"]}'}
    )
    assert env.redaction() == {PiiKind.EMAIL, PiiKind.PHONE} and env.redaction("acme") == {PiiKind.IP}
    assert env.redaction("lab") == frozenset()
    assert GateConfig.from_env({"MEMORY_REDACT_PII": "off"}).redaction() == frozenset()
    assert GateConfig.from_env({"MEMORY_REDACT_PII": "1"}).redaction() == every
    for bad in ({"MEMORY_REDACT_PII": "email,passport"}, {"MEMORY_REDACT_PII_TENANTS": '["lab"]'}):
        with pytest.raises(ConfigError):
            GateConfig.from_env(bad)
    with pytest.raises(ConfigError):
        GateConfig(pii_kinds="email")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        GateConfig(tenant_pii={"x": ["passport"]})  # type: ignore[dict-item]


def test_langgraph_namespaces_and_keys_are_identifiers(tmp_path: Path) -> None:
    from jiyi.integrations.langgraph import JiyiStore

    with Memory(SQLiteStore(tmp_path / "lg.db"), embedder="hash:256", background=False) as mem:
        store = JiyiStore(mem)
        namespace = ("users", "13800138000")  # an application's choice of ids is kept
        store.put(namespace, CN_MOBILE2, {"content": f"phone {CN_MOBILE}", "card": CARD})
        store.put(namespace, CN_MOBILE2, {"content": f"now {CN_MOBILE2}", "card": CARD})
        got = store.get(namespace, CN_MOBILE2)
        assert got is not None and got.namespace == namespace and got.key == CN_MOBILE2
        assert got.value == {"content": "now [REDACTED_PHONE]", "card": "[REDACTED_CREDIT_CARD]"}
        assert namespace in store.list_namespaces(prefix=("users",))


def test_jiyi_import_redacts_unless_trusted(tmp_path: Path) -> None:
    from tests.test_cli import jiyi

    src = tmp_path / "in.jsonl"
    record = {
        "content": f"reach Alice at {EMAIL}",
        "raw": CN_MOBILE,
        "memory_type": "fact",
        "user_id": "alice",
    }
    src.write_text(json.dumps(record) + "\n", encoding="utf-8")
    jiyi("import", str(src), db=tmp_path / "plain.db")
    jiyi("import", str(src), "--trusted", db=tmp_path / "trusted.db")
    (plain,) = map(json.loads, jiyi("export", db=tmp_path / "plain.db").stdout.splitlines())
    (trusted,) = map(json.loads, jiyi("export", db=tmp_path / "trusted.db").stdout.splitlines())
    assert (plain["content"], plain["raw"]) == ("reach Alice at [REDACTED_EMAIL]", "[REDACTED_PHONE]")
    assert (trusted["content"], trusted["raw"]) == (record["content"], CN_MOBILE)
