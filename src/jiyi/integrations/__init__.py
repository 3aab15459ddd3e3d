"""Ways to plug jiyi into agent frameworks: function-calling tools (:mod:`jiyi.integrations.tools`)."""

from jiyi.integrations.tools import TOOLS, AsyncMemoryTools, MemoryTools

__all__ = ["TOOLS", "AsyncMemoryTools", "MemoryTools"]
