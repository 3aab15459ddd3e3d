"""Helpers shared by the benchmark scripts in ``bench/`` (not part of the library).

Scripts import this as ``from common import ...``: running ``python bench/<script>.py``
puts ``bench/`` first on ``sys.path``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import os
import platform
import resource
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent


def git_commit(root: Path = REPO_ROOT) -> str | None:
    """The short commit of the working tree, or None when git is unavailable."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else whatever platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def total_ram_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "ram_gb": total_ram_gb(),
        "python": platform.python_version(),
    }


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def percentiles_ms(samples: Sequence[float], points: Sequence[int] = (50, 95)) -> dict[str, float]:
    """``{"p50": .., "p95": ..}`` of samples given in milliseconds (0.0 when empty)."""
    if not samples:
        return {f"p{p}": 0.0 for p in points}
    values = np.percentile(np.asarray(samples, dtype=np.float64), list(points))
    return {f"p{p}": round(float(v), 2) for p, v in zip(points, values, strict=True)}


def jsonable(value: Any) -> Any:
    """Dataclasses, enums, mappings, timedeltas and datetimes as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return str(value)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
