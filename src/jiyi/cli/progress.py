"""Progress of long commands (``import``, ``copy``, ``maintain``, ``sync``) on stderr.

Shown when stderr is a terminal and the command does not print ``--json``; the
``JIYI_PROGRESS`` environment variable overrides the terminal check: ``always``,
``never``, or ``plain`` (always, as plain text instead of bars). Bars are drawn with
rich when it is installed (``pip install '.[progress]'``); without it (or with
``plain``), one line per kind of work is rewritten in place on a terminal, and a line
per step is printed elsewhere (a log), so the core install stays light.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import TracebackType
from typing import Any, TextIO

MODES = ("auto", "always", "never", "plain")


def _mode(ns: argparse.Namespace) -> str | None:
    """How to show progress for this command: "rich", "plain" or None (not at all)."""
    if getattr(ns, "json", False):
        return None  # the output is for a program
    mode = os.environ.get("JIYI_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        mode = "auto"
    if mode == "never" or (mode == "auto" and not sys.stderr.isatty()):
        return None
    if mode == "plain":
        return "plain"
    try:
        import rich.progress  # noqa: F401
    except ImportError:
        return "plain"
    return "rich"


class Progress:
    """``with Progress(ns) as show: show("embedding", done, total)``; a no-op when
    progress is not wanted. ``total=None``: the amount is not known in advance."""

    def __init__(self, ns: argparse.Namespace) -> None:
        self.mode = _mode(ns)
        self.stream: TextIO = sys.stderr
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}
        self._open_line = False

    def __enter__(self) -> Progress:
        if self.mode == "rich":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bars

            console = Console(file=self.stream, force_terminal=True)
            columns = (
                TextColumn("{task.description:<16}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            self._bars = Bars(*columns, console=console, transient=False)
            self._bars.start()
        return self

    def __call__(self, label: str, done: int, total: int | None) -> None:
        if self.mode == "rich":
            task = self._tasks.get(label)
            if task is None:
                task = self._tasks[label] = self._bars.add_task(label, total=total)
            self._bars.update(task, completed=done, total=total)
        elif self.mode == "plain":
            line = f"{label:<16} {done}/{total}" if total else f"{label:<16} {done}"
            if not self.stream.isatty():
                print(line, file=self.stream, flush=True)
                return
            print(f"\r{line}\x1b[K", end="", file=self.stream, flush=True)
            self._open_line = True
            if total is not None and done >= total:
                print(file=self.stream, flush=True)
                self._open_line = False

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bars is not None:
            self._bars.stop()
        if self._open_line:
            print(file=self.stream, flush=True)
