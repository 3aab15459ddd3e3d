"""Procedural memory: ``jiyi learn skill|failure|decomposition`` and ``jiyi suggest``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from jiyi.cli.common import EXIT_OK, Parser, emit, integer, json_arg, memory_command, scope, scope_args, short
from jiyi.errors import InvalidInput

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers
    from jiyi.memory import Memory
    from jiyi.model import MemoryItem


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "learn",
        help="record what worked or failed: a skill, a failure pattern or a task decomposition",
        description="Procedural memory: record a skill run, a failure pattern or how a task was split, "
        "so 'jiyi suggest' can advise on the next task. Recording the same skill, pattern or plan "
        "again updates its counts (a new version of the same memory).",
    )
    learn = p.add_subparsers(dest="learn_kind", metavar="KIND", parser_class=Parser, required=True)
    _register_skill(learn)
    _register_failure(learn)
    _register_decomposition(learn)
    p.set_defaults(handler=memory_command(cmd_learn))

    p = sub.add_parser(
        "suggest",
        help="advice for a task: a plan that worked for a similar one, and known risks",
        description="Find the most similar past task whose decomposition or skill succeeded often "
        "enough, and the failure patterns the task may run into (most severe first). "
        "Prints 'no suggestion' rather than guess.",
        epilog="Example: jiyi suggest '让接口响应更快，很紧急' --user alice",
    )
    p.add_argument("task", help="the task about to be done, in words")
    scope_args(p)
    p.add_argument("--min-similarity", type=float, metavar="X", help="similarity needed, 0..1 (default 0.74)")
    json_arg(p)
    p.set_defaults(handler=memory_command(cmd_suggest))


def _register_skill(learn: Subparsers) -> None:
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
    scope_args(k)
    json_arg(k)


def _register_failure(learn: Subparsers) -> None:
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
    k.add_argument("--severity", type=integer, required=True, metavar="1-5", help="1 (minor) to 5 (critical)")
    k.add_argument("--description", metavar="TEXT", help="what goes wrong")
    scope_args(k)
    json_arg(k)


def _register_decomposition(learn: Subparsers) -> None:
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
    scope_args(k)
    json_arg(k)


def _learning_scope(ns: argparse.Namespace) -> dict[str, Any]:
    if getattr(ns, "session", None):
        raise InvalidInput(
            "procedural memory belongs to a user, project or agent, not a session: drop --session"
        )
    return scope(ns)


def _structured(item: MemoryItem) -> dict[str, Any]:
    assert item.structured is not None  # every procedural item carries its structure
    return item.structured


def _record(ns: argparse.Namespace, mem: Memory) -> tuple[MemoryItem, str]:
    """Record what ``jiyi learn KIND`` describes: the item and its counts, as words."""
    where = _learning_scope(ns)
    if ns.learn_kind == "skill":
        item = mem.record_skill(
            ns.name, ns.step, description=ns.description, task=ns.task, succeeded=not ns.failed, **where
        )
        s = _structured(item)
        return item, f"{s['successes']} succeeded, {s['failures']} failed"
    if ns.learn_kind == "failure":
        item = mem.record_failure(
            ns.pattern,
            indicators=ns.indicator,
            mitigation=ns.mitigation,
            severity=ns.severity,
            description=ns.description,
            **where,
        )
        return item, f"seen {_structured(item)['occurrences']} time(s)"
    item = mem.record_decomposition(
        ns.task, ns.subtask, strategy=ns.strategy, succeeded=not ns.failed, **where
    )
    s = _structured(item)
    return item, f"used {s['usage_count']} time(s), success rate {s['success_rate']:.0%}"


def cmd_learn(ns: argparse.Namespace, mem: Memory) -> int:
    item, counts = _record(ns, mem)
    if ns.json:
        emit(item.to_json_dict())
    else:
        print(f"recorded {ns.learn_kind} (version {item.version}; {counts}): {short(item)}")
    return EXIT_OK


def cmd_suggest(ns: argparse.Namespace, mem: Memory) -> int:
    result = mem.suggest(ns.task, min_similarity=ns.min_similarity, **_learning_scope(ns))
    if ns.json:
        emit(result.to_json_dict())
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
