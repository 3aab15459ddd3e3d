"""jiyi (记忆): long-term memory for LLM agents."""
