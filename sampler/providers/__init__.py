"""Provider adapters: each turns a :class:`~sampler.messages.ModelRequest` into a provider's request body
and the provider's SSE stream back into :class:`StreamEvent` values and an :class:`AssistantResult`."""

from __future__ import annotations

from typing import Literal, TypeAlias

from ._base import (
    AssistantResult,
    ProviderAdapter,
    StreamDecodeError,
    StreamDecoder,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolCallDelta,
    UsageUpdate,
)
from ._url import endpoint_url
from ._whole import decode_whole
from .anthropic import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS, AnthropicAdapter, AnthropicDecoder
from .openai import OpenAIAdapter, OpenAIDecoder

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "AnthropicAdapter",
    "AnthropicDecoder",
    "AssistantResult",
    "OpenAIAdapter",
    "OpenAIDecoder",
    "ProviderAdapter",
    "ProviderName",
    "StreamDecodeError",
    "StreamDecoder",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamReasoning",
    "StreamText",
    "ToolCallDelta",
    "UsageUpdate",
    "decode_whole",
    "endpoint_url",
    "get_adapter",
]

ProviderName: TypeAlias = Literal["openai", "anthropic"]
"""The names :func:`get_adapter` knows."""

_ADAPTERS: dict[str, ProviderAdapter] = {"openai": OpenAIAdapter(), "anthropic": AnthropicAdapter()}


def get_adapter(name: ProviderName) -> ProviderAdapter:
    """The adapter registered under ``name`` (adapters are stateless and shared).

    Raises ``ValueError`` for an unknown name.
    """
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(sorted(_ADAPTERS))}") from None
