"""Chat models: the protocol, an OpenAI-compatible client, a scripted test double, JSON repair."""

from jiyi.errors import LLMError
from jiyi.llm.base import (
    ChatModel,
    ScriptedChatModel,
    acomplete,
    forbid_network_models,
    resolve_chat_model,
)
from jiyi.llm.jsonfix import parse_json_answer

__all__ = [
    "ChatModel",
    "LLMError",
    "ScriptedChatModel",
    "acomplete",
    "forbid_network_models",
    "parse_json_answer",
    "resolve_chat_model",
]
