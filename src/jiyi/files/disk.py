"""File-system primitives: atomic writes, a per-scope lock, the ``.gitignore`` line and
the test-only crash hook."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from jiyi.errors import ConfigError, StoreError

CRASH_ENV = "JIYI_FILES_CRASH_AT"
"""Test-only hook: ``JIYI_FILES_CRASH_AT=<point>`` kills the process with SIGKILL when
it reaches that point, so tests can prove a crash there loses nothing. Points: an API
write: ``api-journaled``, ``api-committed``, ``api-file-written``; a sync:
``sync-journaled``, ``sync-db-partial``, ``sync-db-applied``, ``sync-file-written``."""

LOCK_TIMEOUT = 60.0


def require_locks() -> None:
    """Files need POSIX advisory locks (``fcntl.flock``): Linux, macOS, BSD."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        raise ConfigError(
            "files= needs a POSIX system (Linux, macOS): fcntl.flock is not available"
        ) from None


def lock_fd(fd: int, *, wait: bool) -> bool:
    """An exclusive ``flock`` on ``fd``; without ``wait``, False when someone holds it."""
    import fcntl

    if wait:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def unlock_fd(fd: int) -> None:
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)


def crash_point(name: str) -> None:
    """Die here, without any cleanup, when the test hook names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass(frozen=True)
class OnDisk:
    """One file as found: missing, not UTF-8 (``text`` None), or its text and hash."""

    exists: bool
    text: str | None = None
    sha: str | None = None


def read_file(path: Path) -> OnDisk:
    import hashlib

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return OnDisk(False)
    except IsADirectoryError:
        return OnDisk(True, None, "directory")
    sha = hashlib.sha256(data).hexdigest()
    try:
        return OnDisk(True, data.decode("utf-8"), sha)
    except UnicodeDecodeError:
        return OnDisk(True, None, sha)


def atomic_write(path: Path, text: str, tmp_dir: Path) -> None:
    """Replace ``path`` with ``text``: a reader sees the old file or the new one, never a
    mix, and after return the new one survives a power cut (temp + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    data = text.encode("utf-8")
    try:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        _write_replace(path, data, mode, tmp_dir)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        # The state directory is on another file system: use a temp file next to the target.
        _write_replace(path, data, mode, path.parent)
    fsync_dir(path.parent)


def _write_replace(path: Path, data: bytes, mode: int, where: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=where, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileLock:
    """An exclusive ``flock`` on a lock file, waited for at most ``timeout`` seconds.

    Each acquisition opens its own descriptor, so the lock excludes other threads of
    this process as well as other processes (a CLI ``jiyi sync`` next to a server). The
    kernel drops it when the holder dies, so a killed process never leaves it held."""

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        pause = 0.002
        while not lock_fd(fd, wait=False):
            if time.monotonic() >= deadline:
                os.close(fd)
                raise StoreError(
                    f"{self.path} stayed locked for {self.timeout:g} s (another jiyi sync or "
                    "server is writing these files); try again"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        self._fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            unlock_fd(fd)
            os.close(fd)


def ensure_gitignore(root: Path, tmp_dir: Path, lock: Path) -> None:
    """``.jiyi/`` in ROOT/.gitignore: the internal state is not something to version."""
    path = root / ".gitignore"
    with FileLock(lock):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            atomic_write(path, ".jiyi/\n", tmp_dir)
            return
        except (OSError, UnicodeDecodeError):
            return  # not ours to repair
        if any(line.strip().strip("/") == ".jiyi" for line in text.splitlines()):
            return
        sep = "" if not text or text.endswith("\n") else "\n"
        atomic_write(path, f"{text}{sep}.jiyi/\n", tmp_dir)


def sweep_tmp(tmp_dir: Path, older_than: float = 600.0) -> None:
    """Remove temp files a killed writer left behind."""
    if not tmp_dir.is_dir():
        return
    limit = time.time() - older_than
    for entry in tmp_dir.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_file() and entry.stat().st_mtime < limit:
                entry.unlink()
