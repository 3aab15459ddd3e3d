"""Files as source of truth (seed 002): memory.md and learnings.md per scope."""

from __future__ import annotations


class FileFlows:
    """File sync flows, mixed into :class:`jiyi.memory.MemoryCore`."""
