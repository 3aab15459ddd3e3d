"""``jiyi profile``: show or edit a user or project profile."""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any

from jiyi.cli.common import EXIT_OK, emit, json_arg, memory_command, scope
from jiyi.errors import InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory
    from jiyi.profile import Profile


def register(sub: Subparsers) -> None:
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
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_profile))


def _profile_value(name: str, raw: str) -> Any:
    """``--set`` text as a field value: JSON arrays as given, lists split at commas."""
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


def _changes(ns: argparse.Namespace) -> dict[str, Any]:
    """The fields ``--set`` and ``--clear`` change (None: cleared), checked by name."""
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
    return changes


def _listed(value: Any) -> str:
    if isinstance(value, dict):  # a key decision
        return str(value["decision"]) + (f" (because {value['reason']})" if value.get("reason") else "")
    return str(value)


def _print_profile(profile: Profile) -> None:
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


def cmd_profile(ns: argparse.Namespace, mem: Memory) -> int:
    who = {"user_id": ns.user, "project_id": ns.project, "tenant_id": scope(ns).get("tenant_id")}
    changes = _changes(ns)
    profile = mem.set_profile(**who, **changes) if changes else mem.profile(**who)
    if ns.json:
        emit(profile.to_json_dict())
    else:
        _print_profile(profile)
    return EXIT_OK
