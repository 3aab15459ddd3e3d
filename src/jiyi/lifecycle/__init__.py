"""Memory lifecycle: decay, expiry and retention. See :mod:`jiyi.lifecycle.maintain`."""

from jiyi.lifecycle.maintain import (
    Decision,
    ItemChange,
    LifecyclePolicy,
    MaintenanceReport,
    decay_score,
    decide_item,
    episode_importance,
    maintain_flow,
)

__all__ = [
    "Decision",
    "ItemChange",
    "LifecyclePolicy",
    "MaintenanceReport",
    "decay_score",
    "decide_item",
    "episode_importance",
    "maintain_flow",
]
