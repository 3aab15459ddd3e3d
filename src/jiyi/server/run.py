"""Start the REST service under uvicorn (what ``jiyi serve`` calls)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jiyi.config import GateConfig
from jiyi.errors import ConfigError
from jiyi.memory import AsyncMemory
from jiyi.server.app import create_app
from jiyi.server.auth import LOOPBACK, ApiKeys
from jiyi.server.storage import open_memory


def serve(
    db_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    keys_file: str | Path | None = None,
    *,
    embedder: str | None = None,
    llm: str | None = None,
    max_body_bytes: int = 1_000_000,
    rate_limit_per_minute: int | None = 600,
    worker: bool = True,
    log_level: str = "info",
    maintain_every: float | None = 86400.0,
    files: str | Path | None = None,
    watch_interval: float = 2.0,
    redis: str | None = None,
    read_url: str | None = None,
) -> None:
    """Serve the store ``db_path`` names on ``host:port`` until interrupted.

    ``db_path`` is a SQLite file path, ``sqlite:///path.db`` or ``postgresql://user@host/db``
    (see :func:`jiyi.store.open.open_store`).

    With ``keys_file`` (JSON, made by :func:`jiyi.server.auth.create_key`) every request
    needs one of its keys. Without it the server runs in single-tenant mode (tenant
    ``default``, full access), which is allowed only on a loopback address: any other
    ``host`` raises :class:`~jiyi.errors.ConfigError` before anything starts.
    ``worker=True`` runs queued extraction jobs in the server process. The gate reads
    the ``MEMORY_*`` environment variables. ``maintain_every`` (seconds; default one
    day, None to disable) runs the lifecycle pass for every tenant on that schedule.
    ``files`` keeps memory.md / learnings.md per scope under that directory: API writes
    update them, and a watcher syncs a person's edits every ``watch_interval`` seconds.

    ``redis`` (a Redis URL; it must answer) makes this server one of several replicas on
    the same store: the cache, the per-key rate limit and the maintenance lease are shared
    through it (see :mod:`jiyi.server.shared` and docs/deploy.md). SIGTERM or Ctrl-C stops
    taking requests, finishes (or puts back) the job in hand, and closes the store.
    ``read_url`` (PostgreSQL only) sends searches, lists and gets to that read replica.
    """
    keys: ApiKeys | None = None
    if keys_file is None:
        if host not in LOOPBACK:
            raise ConfigError(
                f"refusing to serve on {host} without API keys: pass a keys file "
                "(jiyi serve --keys FILE; create keys with jiyi keys create) or bind to 127.0.0.1"
            )
    else:
        keys = ApiKeys.load(keys_file)
        if not len(keys):
            raise ConfigError(f"the keys file {keys_file} holds no keys; create one first (jiyi keys create)")
    asyncio.run(
        _serve(
            db_path,
            host,
            port,
            keys,
            embedder=embedder,
            llm=llm,
            max_body_bytes=max_body_bytes,
            rate_limit_per_minute=rate_limit_per_minute,
            worker=worker,
            log_level=log_level,
            maintain_every=maintain_every,
            files=files,
            watch_interval=watch_interval,
            redis=redis,
            read_url=read_url,
        )
    )


async def _serve(
    db_path: str | Path,
    host: str,
    port: int,
    keys: ApiKeys | None,
    *,
    embedder: str | None,
    llm: str | None,
    max_body_bytes: int,
    rate_limit_per_minute: int | None,
    worker: bool,
    log_level: str,
    maintain_every: float | None,
    files: str | Path | None = None,
    watch_interval: float = 2.0,
    redis: str | None = None,
    read_url: str | None = None,
) -> None:
    import uvicorn

    from jiyi.files import watch_files

    memory = open_memory(
        db_path,
        redis=redis,
        read_url=read_url,
        embedder=embedder,
        llm=llm,
        gate=GateConfig.from_env(),
        files=files,
    )
    watcher = watch_files(memory, interval=watch_interval) if files is not None else None
    try:
        app = create_app(
            memory,
            keys=keys,
            max_body_bytes=max_body_bytes,
            rate_limit_per_minute=rate_limit_per_minute,
            start_worker=worker,
            maintain_every=maintain_every,
            redis=redis,
        )
        _log_to_stderr(log_level)
        await _warm_up(memory)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, proxy_headers=False)
        await uvicorn.Server(config).serve()
    finally:
        if watcher is not None:  # off the loop: a sync it is waiting for needs the loop
            await asyncio.to_thread(watcher.stop)
        await memory.aclose()


async def _warm_up(memory: AsyncMemory) -> None:
    """Load the embedding model before the first request (the default takes ~1.5 s), so a
    user's first search is not the slow one. A remote embedder that does not answer is
    logged, not fatal: searches will say what failed."""
    import logging

    try:
        await asyncio.to_thread(memory.embedder.embed, ["jiyi"])
    except Exception as exc:  # any failure: serve anyway, and say so
        logging.getLogger("jiyi.server").warning("the embedder did not answer at start: %s", exc)


def _log_to_stderr(level: str) -> None:
    """uvicorn configures its own loggers only; jiyi's request and worker logs need a handler."""
    import logging

    log = logging.getLogger("jiyi")
    # The CLI's --log-level already gave the root logger a handler: adding another would
    # print every line twice.
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(level.upper())
