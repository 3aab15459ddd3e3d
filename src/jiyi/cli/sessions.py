"""Conversations: remember (session messages + queued extraction), worker, jobs, context,
end-session."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jiyi.cli.common import EXIT_OK, emit, integer, json_arg, memory_command, scope, scope_args
from jiyi.errors import InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory
    from jiyi.session.flows import JobReport
    from jiyi.session.model import Job


def register(sub: Subparsers) -> None:
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
    p.add_argument(
        "--name",
        default=None,
        metavar="NAME",
        help="who said the messages, in a conversation between people (e.g. Caroline): kept with "
        "each turn, so search can read who said what and favour what a named person said",
    )
    scope_args(p)
    p.add_argument("--process", action="store_true", help="run the queued jobs before returning")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_remember))

    p = sub.add_parser("worker", help="run queued background jobs (extraction, episodes)")
    p.add_argument("--once", action="store_true", help="stop when the queue is empty")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    p.add_argument(
        "--batch",
        type=integer,
        default=1,
        help="jobs claimed at a time (default 1: on SIGTERM the worker finishes the job in hand "
        "and holds no claimed job it has not started)",
    )
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_worker))

    p = sub.add_parser("jobs", help="list background jobs and their status")
    p.add_argument(
        "--status",
        action="append",
        choices=["queued", "running", "done", "failed"],
        help="only jobs in this state (repeatable; default: all)",
    )
    p.add_argument(
        "--limit", type=integer, default=50, help="at most this many jobs, newest first (default 50)"
    )
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_jobs))

    p = sub.add_parser("context", help="assemble recent turns, related memories and summaries for a prompt")
    p.add_argument("query", help="what the agent is about to do or answer")
    scope_args(p)
    p.add_argument(
        "--budget",
        "--budget-tokens",
        dest="budget",
        type=integer,
        default=1500,
        help="token budget (default 1500; budget_tokens in the library, REST and MCP)",
    )
    p.add_argument("--max-items", type=integer, default=10, help="at most this many entries (default 10)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_context))

    p = sub.add_parser(
        "end-session",
        help="end a session: archive its session memories, queue a summary of its turns",
        description="End the conversation --session names: its session-scope memories are archived "
        "and a summary of its remaining turns is queued as an episode, filed under --user, --project "
        "or --agent (run 'jiyi worker --once', or pass --process).",
    )
    scope_args(p)
    p.add_argument("--process", action="store_true", help="run the queued jobs before returning")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_end_session))


def _report_json(r: JobReport) -> dict[str, Any]:
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


def _print_reports(reports: Iterable[JobReport]) -> None:
    for r in reports:
        print(f"job {r.job_id} ({r.kind}): {r.status}" + (f" - {r.error}" if r.error else ""))
        for o in r.outcomes:
            print(f"  {o.action:<9} {o.candidate.content}")
            print(f"            why: {o.reason}")


def cmd_remember(ns: argparse.Namespace, mem: Memory) -> int:
    if not ns.session:
        raise InvalidInput("remember needs --session ID (the conversation the messages belong to)")
    empty = [i for i, text in enumerate(ns.messages, 1) if not text.strip()]
    if empty:
        raise InvalidInput(f"message {empty[0]} is empty: give the text of each message", field="messages")
    others = {k: v for k, v in scope(ns).items() if k != "session_id"}
    if ns.name is not None and not ns.name.strip():
        raise InvalidInput("--name is empty: give the speaker's name, or leave --name out", field="name")
    messages = [{"role": ns.role, "content": text, "name": ns.name} for text in ns.messages]
    result = mem.remember(messages, session_id=ns.session, **others)
    reports = mem.process_jobs() if ns.process else []
    if ns.json:
        emit(
            {
                "messages": [m.model_dump(mode="json") for m in result.messages],
                "job_id": result.job_id,
                "compacted": None if result.compacted is None else result.compacted.removed,
                "turns_skipped": result.turns_skipped,
                "reports": [_report_json(r) for r in reports],
            }
        )
        return EXIT_OK
    print(f"kept {len(result.messages)} message(s) in session {ns.session}")
    if result.job_id:
        print(f"queued extraction job {result.job_id}" + ("" if ns.process else " (run: jiyi worker --once)"))
    if result.compacted:
        print(f"compacted {result.compacted.removed} old turns into a summary")
    if result.turns_skipped:
        print(f"{result.turns_skipped} acknowledgement turn(s) not kept as searchable turns")
    _print_reports(reports)
    return EXIT_OK


def cmd_worker(ns: argparse.Namespace, mem: Memory) -> int:
    """Run jobs until stopped. Any number of workers (and servers) can share one store:
    each job is claimed once. SIGTERM or Ctrl-C stops it after the job batch in hand."""
    import signal
    import socket
    import threading

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    name = f"cli-{socket.gethostname()}:{os.getpid()}"
    done = 0
    try:
        while not stop.is_set():
            reports = mem.process_jobs(worker=name, limit=max(1, ns.batch))
            done += len(reports)
            _show(ns, reports)
            if not reports:
                if ns.once:
                    break
                stop.wait(max(0.1, ns.interval))
    except KeyboardInterrupt:
        _release(mem, name)  # the interrupted job goes back to the queue, not to its lease's end
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not ns.json:
        print(f"processed {done} job(s)", file=sys.stderr)
    return EXIT_OK


def _release(mem: Memory, name: str) -> None:
    from jiyi.server.worker import releases
    from jiyi.store.base import ListJobs, Write

    running = mem.store.execute(ListJobs(("running",), limit=1000))
    changes = releases(running, name)
    if changes:
        mem.store.execute(Write(changes))
        print(f"put {len(changes)} interrupted job(s) back in the queue", file=sys.stderr)


def _show(ns: argparse.Namespace, reports: list[JobReport]) -> None:
    if ns.json:
        for r in reports:
            emit(_report_json(r))
    else:
        _print_reports(reports)


def cmd_jobs(ns: argparse.Namespace, mem: Memory) -> int:
    jobs = mem.jobs(statuses=ns.status or (), limit=ns.limit)
    if ns.json:
        emit([j.model_dump(mode="json") for j in jobs])
        return EXIT_OK
    for j in jobs:
        err = f"  last error: {j.last_error.splitlines()[0]}" if j.last_error else ""
        print(f"{j.id}  {j.kind:<8} {j.status:<8} attempts {j.attempts}/{j.max_attempts}{err}{_did(j)}")
        for refused in (j.result or {}).get("refused", []):
            print(f"    not stored: {refused['content'][:80]!r}: {refused['reason']}")
    return EXIT_OK


def _did(job: Job) -> str:
    """``  add 2, reinforce 1, rejected 1`` for a finished job."""
    actions = (job.result or {}).get("actions") or {}
    return ("  " + ", ".join(f"{k} {v}" for k, v in sorted(actions.items()))) if actions else ""


def cmd_context(ns: argparse.Namespace, mem: Memory) -> int:
    ctx = mem.context(ns.query, budget_tokens=ns.budget, max_items=ns.max_items, **scope(ns))
    if ns.json:
        emit(
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


def cmd_end_session(ns: argparse.Namespace, mem: Memory) -> int:
    if not ns.session:
        raise InvalidInput("end-session needs --session ID (the conversation to end)", field="session_id")
    ended = mem.end_session(session_id=ns.session)  # --user ... reach it through the bound Memory
    job_id = ended.episode_job_id
    reports = mem.process_jobs() if ns.process and job_id else []
    if ns.json:
        emit({**ended.to_json_dict(), "reports": [_report_json(r) for r in reports]})
        return EXIT_OK
    if not ended.found:
        print(
            f"session {ns.session} holds no messages (none was ever added, or not in this scope): nothing to end"
        )
    elif ended.already_ended:
        when = f" at {ended.ended_at:%Y-%m-%d %H:%M:%S} UTC" if ended.ended_at else ""
        print(f"session {ns.session} was already ended{when}; no turn was added since, nothing queued")
    else:
        print(f"ended session {ns.session}")
    if ended.archived:
        print(f"archived {ended.archived} session-scope memor{'y' if ended.archived == 1 else 'ies'}")
    if job_id:
        print(
            f"queued episode job {job_id} ({ended.turns} turn{'' if ended.turns == 1 else 's'})"
            + ("" if ns.process else " (run: jiyi worker --once)")
        )
    elif ended.found and not ended.already_ended:
        print("no turn was left to summarise")
    _print_reports(reports)
    return EXIT_OK
