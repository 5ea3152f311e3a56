"""The provider-neutral model of a conversation, a model request and its usage.

Every type here is a frozen msgspec Struct that round-trips through ``msgspec.json``: the session history is
a sequence of :data:`Message` and is persisted as such. Provider adapters translate to and from these types;
nothing outside ``sampler.providers`` sees a provider's wire format.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeAlias

import msgspec

__all__ = [
    "AssistantMessage",
    "FinishReason",
    "ImagePart",
    "Message",
    "ModelRequest",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "UserPart",
    "media_parts_count",
]


class TextPart(msgspec.Struct, frozen=True, tag=True):
    """A piece of user text."""

    text: str


class ImagePart(msgspec.Struct, frozen=True, tag=True):
    """A media part (an image) given either inline as base64 ``data`` or by ``url``; at least one is set."""

    media_type: str
    """The MIME type, such as ``image/png``."""
    data: str | None = None
    """The base64-encoded bytes, without a ``data:`` prefix."""
    url: str | None = None

    def __post_init__(self) -> None:
        if self.data is None and self.url is None:
            raise ValueError("an ImagePart needs data or url")


UserPart: TypeAlias = TextPart | ImagePart
"""What a user message is made of."""


class ToolCall(msgspec.Struct, frozen=True, tag=True):
    """A tool invocation requested by the model."""

    id: str
    """The provider's call id; a tool result refers to it."""
    name: str
    arguments: str
    """The arguments exactly as the model produced them: a JSON text, not guaranteed to be valid."""


class ToolResult(msgspec.Struct, frozen=True, tag=True):
    """The outcome of one tool call, as shown to the model."""

    call_id: str
    """The :attr:`ToolCall.id` this answers."""
    content: str
    is_error: bool = False


class SystemMessage(msgspec.Struct, frozen=True, tag=True):
    """Instructions from the host, not from the user."""

    content: str


class UserMessage(msgspec.Struct, frozen=True, tag=True):
    """What the user said: text and media parts, in order."""

    parts: tuple[UserPart, ...]

    @classmethod
    def of_text(cls, text: str) -> UserMessage:
        """A user message made of one text part."""
        return cls((TextPart(text),))


class AssistantMessage(msgspec.Struct, frozen=True, tag=True):
    """What the model produced in one step: text and the tool calls it requested."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    interrupted: bool = False
    """True when the message was cut short (cancelled or the stream broke) and is what was salvaged; its
    tool calls, if any, have not been run and their arguments may be incomplete."""


class ToolMessage(msgspec.Struct, frozen=True, tag=True):
    """One tool result, sent back to the model after the assistant message that requested it."""

    result: ToolResult


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""One entry of a conversation. A union of tagged Structs, so a ``list[Message]`` decodes unambiguously."""


class Usage(msgspec.Struct, frozen=True, tag=True):
    """Tokens a request consumed, as reported by the provider.

    ``input_tokens`` counts the whole prompt, cached tokens included; ``cached_tokens`` is the part of it
    that was served from the provider's prompt cache. ``reasoning_tokens`` is the part of
    ``output_tokens`` the model spent reasoning, where the provider reports it (0 otherwise).
    """

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        """The usage of both, field by field (for summing attempts or steps)."""
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


class FinishReason(enum.StrEnum):
    """Why the model stopped producing output."""

    STOP = "stop"
    """It finished its answer (or hit a stop sequence)."""
    TOOL_CALLS = "tool_calls"
    """It stopped to have its tool calls run."""
    LENGTH = "length"
    """It hit the output token limit (or the context window)."""
    CONTENT_FILTER = "content_filter"
    """The provider withheld or cut the output (a content filter or a refusal)."""
    UNKNOWN = "unknown"
    """The provider gave no reason, or one this module does not know."""


class ToolSpec(msgspec.Struct, frozen=True, tag=True):
    """A tool the model may call."""

    name: str
    description: str
    parameters: dict[str, Any]
    """The JSON schema of the arguments object."""


class ModelRequest(msgspec.Struct, frozen=True, tag=True):
    """One model call: the conversation so far, the tools offered and the sampling settings.

    ``None`` settings are left to the provider's default, except where a provider requires a value (the
    adapter documents its default).
    """

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    """Stop sequences."""


def media_parts_count(messages: ModelRequest | Iterable[Message]) -> int:
    """The number of media parts in a request or a sequence of messages."""
    if isinstance(messages, ModelRequest):
        messages = messages.messages
    return sum(
        1
        for message in messages
        if isinstance(message, UserMessage)
        for part in message.parts
        if isinstance(part, ImagePart)
    )
