"""What every command shares: exit codes, the parser class, option types and groups,
output helpers, opening the store ``--db`` names, and mapping errors to exit codes.

The CLI's environment variables (``JIYI_DB``, ``JIYI_REDIS_URL``, ``JIYI_READ_DB``, ``JIYI_EMBEDDER``,
``JIYI_LLM``, ``JIYI_FILES``, ``JIYI_TENANT``) are read here, at the edge, and nowhere in the library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from jiyi.errors import (
    ConfigError,
    InvalidInput,
    JiyiError,
    error_code,
)

if TYPE_CHECKING:
    from jiyi.memory import Memory
    from jiyi.model import MemoryItem
    from jiyi.store.base import Store
    from jiyi.who import Caller, Owner

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130

Handler = Callable[[argparse.Namespace], int]
"""What ``set_defaults(handler=...)`` holds: runs one parsed command, returns its exit code."""
MemoryHandler = Callable[[argparse.Namespace, "Memory"], int]
"""A command that works on the Memory the global options name (see :func:`memory_command`)."""


class Parser(argparse.ArgumentParser):
    """A usage error exits 2 with one line that points at ``--help`` (JSON on stdout when
    the command line asked for ``--json``)."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        text = f"{message} (see '{self.prog} --help')"
        if Parser.json_errors:
            emit_error("usage_error", text)
            self.exit(EXIT_USAGE)
        self.exit(EXIT_USAGE, f"jiyi: error: {text}\n")


LOG_LEVELS = ("debug", "info", "warning", "error")


def setup_logging(level: str | None) -> None:
    """Log ``level`` and above on stderr: ``--log-level``, else ``$JIYI_LOG_LEVEL``, else warning."""
    import logging

    chosen = (level or os.environ.get("JIYI_LOG_LEVEL") or "warning").lower()
    if chosen not in LOG_LEVELS:
        chosen = "warning"  # a bad environment value must not stop the command
    logging.basicConfig(
        level=chosen.upper(),
        stream=sys.stderr,
        format="jiyi: %(levelname)s %(name)s: %(message)s",
        force=True,
    )


if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[Parser]
    """What each command module's ``register(subparsers)`` adds its commands to."""


# ------------------------------------------------------------------ option types


def iso_datetime(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO date or date-time, e.g. 2024-05-01 or 2024-05-01T14:30"
        ) from None


def integer(value: str) -> int:
    """An integer option; its range is checked where the library takes it, in the words
    every interface uses (:mod:`jiyi.problems`)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, not {value!r}") from None


def port(value: str) -> int:
    """A TCP port, 0 (any free one) to 65535: checked here, before a server starts."""
    number = integer(value)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, not {number}")
    return number


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(value: str) -> float:
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


def json_object(value: str) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError('must be a JSON object, e.g. \'{"key": "value"}\'')
    return data


# ------------------------------------------------------------------ option groups


def scope_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scope (whose memory)")
    g.add_argument("--user", "--user-id", dest="user", metavar="ID", help="user id")
    g.add_argument("--project", "--project-id", dest="project", metavar="ID", help="project id")
    g.add_argument("--session", "--session-id", dest="session", metavar="ID", help="session id")
    g.add_argument("--agent", "--agent-id", dest="agent", metavar="ID", help="agent id")
    g.add_argument("--tenant", metavar="ID", help="tenant id (default: $JIYI_TENANT or 'default')")


def json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def files_arg(p: argparse.ArgumentParser, what: str = "the memory files' directory") -> None:
    p.add_argument(
        "--files", dest="files_dir", metavar="DIR", type=Path, help=f"{what} (default: $JIYI_FILES)"
    )


def files_dir(ns: argparse.Namespace) -> Path | None:
    """``--files`` after the command, before it, or ``$JIYI_FILES``."""
    chosen: Path | None = getattr(ns, "files_dir", None) or getattr(ns, "files_root", None)
    if chosen is None and os.environ.get("JIYI_FILES"):
        chosen = Path(os.environ["JIYI_FILES"])
    return chosen


def scope(ns: argparse.Namespace) -> dict[str, Any]:
    """The scope ids given (``--user`` ...), with the tenant defaulting to ``$JIYI_TENANT``."""
    out = {
        "user_id": getattr(ns, "user", None),
        "project_id": getattr(ns, "project", None),
        "session_id": getattr(ns, "session", None),
        "agent_id": getattr(ns, "agent", None),
        "tenant_id": getattr(ns, "tenant", None) or os.environ.get("JIYI_TENANT") or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def embedder_spec(ns: argparse.Namespace) -> str | None:
    return ns.embedder or os.environ.get("JIYI_EMBEDDER") or None


def llm_spec(ns: argparse.Namespace) -> str | None:
    return ns.llm or os.environ.get("JIYI_LLM") or None


# ------------------------------------------------------------------ output


def emit(data: Any) -> None:
    """One line of JSON on stdout."""
    print(json.dumps(data, ensure_ascii=False, indent=None, default=str))


def short(item: MemoryItem) -> str:
    """An item on one line: a session summary's lines joined by " / "."""
    text = " / ".join(line.strip() for line in item.content.splitlines() if line.strip())
    return f"{item.id}  [{item.memory_type.value}] {text}"


def clip(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ------------------------------------------------------------------ the store


def default_db_path() -> Path:
    """The per-user data directory's ``memory.db``."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("jiyi", appauthor=False)) / "memory.db"


def store_url(ns: argparse.Namespace) -> str:
    """The store the global ``--db`` names: the option, else ``$JIYI_DB``, else the
    per-user default file. A plain path means a SQLite file (see :mod:`jiyi.store.open`)."""
    if ns.db is not None:
        return str(ns.db)
    return os.environ.get("JIYI_DB") or str(default_db_path())


def store_target(ns: argparse.Namespace) -> str:
    """:func:`store_url`, its SQLite directory created when no ``--db`` was given."""
    from jiyi.store.open import sqlite_path

    url = store_url(ns)
    path = sqlite_path(url)  # a bad URL fails here, with the reason
    if ns.db is None and path is not None and path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return url


def redis_url(ns: argparse.Namespace) -> str | None:
    """The Redis the global ``--redis`` names, else ``$JIYI_REDIS_URL``, else None."""
    chosen: str | None = getattr(ns, "redis", None) or os.environ.get("JIYI_REDIS_URL") or None
    return chosen


def read_url(ns: argparse.Namespace) -> str | None:
    """The read replica the global ``--read-db`` names, else ``$JIYI_READ_DB``, else None."""
    chosen: str | None = getattr(ns, "read_db", None) or os.environ.get("JIYI_READ_DB") or None
    return chosen


def open_db(ns: argparse.Namespace) -> Store:
    """Open (and migrate) the store the global ``--db`` names, behind ``--redis`` if given,
    reading from ``--read-db`` if given."""
    from jiyi.store.open import open_store

    return open_store(store_target(ns), redis=redis_url(ns), read_url=read_url(ns))


def sqlite_file(ns: argparse.Namespace) -> Path:
    """The SQLite file ``--db`` names, for commands that run on a SQLite file only."""
    from jiyi.store.open import redact_url, sqlite_path

    url = store_target(ns)
    path = sqlite_path(url)
    if path is None:
        raise InvalidInput(
            f"jiyi {ns.command} runs on a SQLite database only, not {redact_url(url)}: "
            "give --db a file path or sqlite:///path.db"
        )
    return Path(path)


def open_memory(ns: argparse.Namespace) -> Memory:
    """The Memory the global options name: ``--db``, ``--embedder``, ``--llm``, ``--files``
    (or their environment variables) and the ``MEMORY_*`` gate settings; jobs run only
    when a command runs them."""
    from jiyi.config import GateConfig
    from jiyi.memory import Memory

    store = open_db(ns)
    try:
        return Memory(
            store,
            embedder=embedder_spec(ns),
            llm=llm_spec(ns),
            gate=GateConfig.from_env(),
            background=False,
            files=files_dir(ns),
        )
    except BaseException:
        store.close()
        raise


def owner_and_caller(ns: argparse.Namespace) -> tuple[Owner, Caller]:
    """The command line's owner (``--user``/``--project``/``--session``/``--agent``) and
    caller (``--tenant`` or ``$JIYI_TENANT``), built once for every command."""
    from jiyi.who import Caller, Owner

    ids = scope(ns)
    tenant = ids.pop("tenant_id", None)
    return Owner(**ids), Caller(tenant_id=tenant)


def with_memory(ns: argparse.Namespace, command: MemoryHandler) -> int:
    """Run ``command`` on :func:`open_memory` bound to the command line's owner and
    caller (so ``$JIYI_TENANT`` reaches every operation), closing it afterwards."""
    mem = open_memory(ns)
    try:
        owner, caller = owner_and_caller(ns)
        return command(ns, mem.bound(owner=owner, caller=caller))
    finally:
        mem.close()


def memory_command(command: MemoryHandler) -> Handler:
    """``command`` as a handler that opens the Memory first."""

    def handler(ns: argparse.Namespace) -> int:
        return with_memory(ns, command)

    handler.__name__ = handler.__qualname__ = getattr(command, "__name__", "handler")
    handler.__doc__ = command.__doc__
    return handler


# ------------------------------------------------------------------ errors


def emit_error(code: str, message: str, *, field: str | None = None, problems: Sequence[str] = ()) -> None:
    """An error as JSON on stdout, in the REST API's shape (plus every problem listed)."""
    emit(
        {"error": {"code": code, "message": message, "field": field, "problems": list(problems) or [message]}}
    )


def run(handler: Handler, ns: argparse.Namespace) -> int:
    """``handler(ns)``, with jiyi's errors as one line on stderr (as JSON on stdout under
    ``--json``) and an exit code; a closed pipe (``jiyi list --json | head``) ends quietly."""
    try:
        code = handler(ns)
        sys.stdout.flush()  # a closed pipe shows here, not in Python's exit
        return code
    except JiyiError as exc:
        if getattr(ns, "json", False):
            problems = exc.problems if isinstance(exc, InvalidInput) else ()
            emit_error(error_code(exc), one_line(exc), field=getattr(exc, "field", None), problems=problems)
        elif isinstance(exc, InvalidInput | ConfigError):
            print(f"jiyi: error: {as_flags(one_line(exc))}", file=sys.stderr)
        else:
            print(f"jiyi: failed: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:
        # The reader went away: nothing left to say, and Python must not complain at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("jiyi: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# A quoted name ('user_id') is a value the user typed, not an argument: left alone.
_ARGUMENT = re.compile(r"(?<!['\w])(?:(user|project|session|agent)_id|memory_types?)(?!['\w])")


def as_flags(text: str) -> str:
    """The library's argument names in an error as the options a CLI user types
    (``user_id`` -> ``--user``, ``memory_types`` -> ``--type``); JSON output keeps them."""
    return _ARGUMENT.sub(lambda m: f"--{m.group(1)}" if m.group(1) else "--type", text)


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a database's DETAIL and HINT lines joined to it, its
    tabs and runs of spaces as one space)."""
    return " ".join(str(exc).split())
