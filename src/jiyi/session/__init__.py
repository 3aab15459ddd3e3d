"""Sessions: short-term messages, compaction, episodes, checkpoints, resources."""
