"""Procedural memory (seeds 002, 004): skills, failure patterns, task decompositions."""

from __future__ import annotations


class ProceduralFlows:
    """Procedural flows, mixed into :class:`jiyi.memory.MemoryCore`."""
