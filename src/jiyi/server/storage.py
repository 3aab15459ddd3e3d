"""Open the memory a server serves from a store URL (what ``jiyi serve`` and ``jiyi mcp`` do).

Kept apart from the FastAPI modules: the MCP server needs it without the web extras.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jiyi.memory import AsyncMemory
from jiyi.store.open import open_store


def open_memory(
    url_or_path: str | Path, *, redis: str | None = None, read_url: str | None = None, **options: Any
) -> AsyncMemory:
    """An :class:`~jiyi.memory.AsyncMemory` on the store ``url_or_path`` names.

    ``sqlite:///path.db``, ``postgresql://user@host/db`` (see :func:`jiyi.store.open.open_store`)
    or a plain file path, which is a SQLite file as before. ``redis`` (a Redis URL, which
    must answer) puts the shared Redis cache in front; ``read_url`` a PostgreSQL read replica
    (:mod:`jiyi.store.replica`). ``options`` go to AsyncMemory.
    """
    store = open_store(os.fspath(url_or_path), redis=redis, read_url=read_url)
    try:
        return AsyncMemory(store, **options)
    except BaseException:
        store.close()  # a bad embedder or gate option must not leave the store open
        raise
