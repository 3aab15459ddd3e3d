"""User and project profiles (seed 000 layer 3): aggregated from items, explicit edits win."""

from __future__ import annotations


class ProfileFlows:
    """Profile flows, mixed into :class:`jiyi.memory.MemoryCore`."""
