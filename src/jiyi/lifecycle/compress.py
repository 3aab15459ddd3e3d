"""Compression of old, rarely used memories (seed 002)."""

from __future__ import annotations


class CompressionFlows:
    """Compression flows, mixed into :class:`jiyi.memory.MemoryCore`."""
