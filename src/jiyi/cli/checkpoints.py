"""A session's state: ``jiyi messages`` (its messages) and ``jiyi checkpoint
save|list|restore`` (the library's ``messages``, ``save_checkpoint``, ``list_checkpoints``
and ``restore_checkpoint``; REST's ``/v1/sessions/{id}/messages`` and ``.../checkpoints``)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from jiyi.cli.common import EXIT_OK, Parser, clip, emit, integer, json_arg, json_object, memory_command
from jiyi.errors import InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory
    from jiyi.session.model import Checkpoint


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--session", "--session-id", dest="session", metavar="ID", required=True, help="session id"
    )
    p.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")
    json_arg(p)


def register(sub: Subparsers) -> None:
    p = sub.add_parser("messages", help="a session's messages, oldest first")
    _session_args(p)
    p.add_argument("--last", type=integer, metavar="N", help="only the last N messages")
    p.set_defaults(handler=memory_command(cmd_messages))

    p = sub.add_parser(
        "checkpoint",
        help="save, list or restore a session's checkpoints",
        description="A checkpoint keeps a session's messages and an agent's state (todo list, "
        "tool states, pending tool calls); restoring one puts the messages back as they were.",
    )
    kinds = p.add_subparsers(dest="checkpoint_action", metavar="ACTION", parser_class=Parser, required=True)
    k = kinds.add_parser("save", help="save the session's messages and an agent state")
    _session_args(k)
    k.add_argument("--label", help="a name for the checkpoint")
    k.add_argument(
        "--state", type=json_object, metavar="JSON", help='the agent state, e.g. \'{"todo": ["x"]}\''
    )
    k.set_defaults(handler=memory_command(cmd_checkpoint_save))
    k = kinds.add_parser("list", help="the session's checkpoints, newest first")
    _session_args(k)
    k.add_argument("--limit", type=integer, default=50, help="at most this many (default 50)")
    k.set_defaults(handler=memory_command(cmd_checkpoint_list))
    k = kinds.add_parser("restore", help="put the session's messages back as a checkpoint kept them")
    _session_args(k)
    k.add_argument("checkpoint_id", metavar="CHECKPOINT_ID", help="the checkpoint's id (see checkpoint list)")
    k.add_argument(
        "--keep-messages",
        action="store_true",
        help="only print the checkpoint; leave the messages as they are",
    )
    k.set_defaults(handler=memory_command(cmd_checkpoint_restore))


def cmd_messages(ns: argparse.Namespace, mem: Memory) -> int:
    msgs = mem.messages(session_id=ns.session, last=ns.last)
    if ns.json:
        emit([m.model_dump(mode="json") for m in msgs])
        return EXIT_OK
    for m in msgs:
        calls = f"  (calls {', '.join(c.get('name', '?') for c in m.tool_calls)})" if m.tool_calls else ""
        print(f"{m.seq:>4}  {m.role:<9} {clip(m.content, 100)}{calls}")
    if not msgs:
        print(f"no messages in session {ns.session}")
    return EXIT_OK


def _print_checkpoint(cp: Checkpoint) -> None:
    label = f"  {cp.label}" if cp.label else ""
    print(f"{cp.id}  {cp.created_at.isoformat()}  {len(cp.messages)} message(s){label}")


def cmd_checkpoint_save(ns: argparse.Namespace, mem: Memory) -> int:
    cp = mem.save_checkpoint(session_id=ns.session, agent_state=ns.state, label=ns.label)
    if ns.json:
        emit(cp.model_dump(mode="json"))
    else:
        _print_checkpoint(cp)
    return EXIT_OK


def cmd_checkpoint_list(ns: argparse.Namespace, mem: Memory) -> int:
    cps = mem.list_checkpoints(session_id=ns.session, limit=ns.limit)
    if ns.json:
        emit([cp.model_dump(mode="json") for cp in cps])
        return EXIT_OK
    for cp in cps:
        _print_checkpoint(cp)
    if not cps:
        print(f"no checkpoints of session {ns.session}")
    return EXIT_OK


def cmd_checkpoint_restore(ns: argparse.Namespace, mem: Memory) -> int:
    if not ns.checkpoint_id.strip():
        raise InvalidInput("give the checkpoint's id (see jiyi checkpoint list)", field="checkpoint_id")
    cp = mem.restore_checkpoint(
        session_id=ns.session, checkpoint_id=ns.checkpoint_id, replace_messages=not ns.keep_messages
    )
    if ns.json:
        emit(cp.model_dump(mode="json"))
        return EXIT_OK
    done = (
        "kept the messages as they are" if ns.keep_messages else "the session's messages are the checkpoint's"
    )
    print(f"restored {cp.id}: {done} ({len(cp.messages)})")
    if cp.agent_state:
        print(f"agent state: {json.dumps(cp.agent_state, ensure_ascii=False, default=str)}")
    return EXIT_OK
