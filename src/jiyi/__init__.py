"""jiyi (记忆): long-term memory for LLM agents, offline-first, Chinese and English.

Start with :class:`Memory` (sync) or :class:`AsyncMemory`; see the README for a tour.
"""

from jiyi.config import GateConfig, RankConfig
from jiyi.errors import (
    ConfigError,
    EmbedderError,
    InvalidInput,
    JiyiError,
    NotFound,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)
from jiyi.memory import AddResult, AsyncMemory, ImportResult, Memory
from jiyi.model import MemoryItem, MemoryType, Relation, RelationType, Scope, Source, Status, Visibility
from jiyi.read.rank import SearchHit
from jiyi.write.gate import GateDecision

__version__ = "0.1.0"

__all__ = [
    "AddResult",
    "AsyncMemory",
    "ConfigError",
    "EmbedderError",
    "GateConfig",
    "GateDecision",
    "ImportResult",
    "InvalidInput",
    "JiyiError",
    "Memory",
    "MemoryItem",
    "MemoryType",
    "NotFound",
    "RankConfig",
    "Relation",
    "RelationType",
    "Scope",
    "SearchHit",
    "Source",
    "Status",
    "StoreCorrupt",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "Visibility",
]
