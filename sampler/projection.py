"""Degraded projections of a request, for re-sending when a provider rejects its shape.

Each projection is a pure function from a :class:`ModelRequest` to a :class:`ModelRequest`. It returns the
very request it was given (``projected is request``) when there was nothing to change, so a caller can tell
that re-sending would be pointless. A projection never drops text the user or the model produced: what it
cannot send as structure it sends as plain text.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from .messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelRequest,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    UserPart,
)

__all__ = [
    "CONVERSATION_START_TEXT",
    "degrade_media",
    "media_placeholder",
    "strict_structure",
    "strip_media",
]

CONVERSATION_START_TEXT = "(The conversation so far follows.)"
"""The user text :func:`strict_structure` puts first when a conversation would otherwise open with the
assistant."""


def media_placeholder(part: ImagePart) -> TextPart:
    """The text part that stands in for a dropped media part."""
    return TextPart(f"[{part.media_type} omitted: dropped to fit the provider's request size limit]")


def degrade_media(request: ModelRequest, keep: int = 2) -> ModelRequest:
    """The request with only its ``keep`` newest media parts; each older one becomes a placeholder text.

    Raises ``ValueError`` if ``keep`` is negative.
    """
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    remaining = keep
    changed = False
    newest_first: list[Message] = []
    for message in reversed(request.messages):
        if isinstance(message, UserMessage) and any(isinstance(p, ImagePart) for p in message.parts):
            parts: list[UserPart] = []
            for part in reversed(message.parts):
                if isinstance(part, ImagePart):
                    if remaining > 0:
                        remaining -= 1
                    else:
                        part = media_placeholder(part)
                        changed = True
                parts.append(part)
            parts.reverse()
            message = UserMessage(tuple(parts))
        newest_first.append(message)
    if not changed:
        return request
    newest_first.reverse()
    return msgspec.structs.replace(request, messages=tuple(newest_first))


def strip_media(request: ModelRequest) -> ModelRequest:
    """The request with every media part replaced by a placeholder text."""
    return degrade_media(request, keep=0)


def strict_structure(request: ModelRequest) -> ModelRequest:
    """The request reshaped to the strictest structure providers accept.

    Guarantees on the result:

    - every tool result directly follows the assistant message holding its call, in call order;
    - a call without a result becomes text of its assistant message, and a result without a call (or a
      second result for the same call) becomes user text, where it was;
    - system messages come first, merged into one; a later system message becomes user text where it was;
    - no two consecutive user messages, nor two consecutive assistant messages; no empty message, no
      empty text part;
    - the first message after the system message is a user message.
    """
    reshaped = _merge_neighbours(_pair_tool_results(request.messages))
    first = next((i for i, m in enumerate(reshaped) if not isinstance(m, SystemMessage)), None)
    if first is not None and not isinstance(reshaped[first], UserMessage):
        reshaped.insert(first, UserMessage.of_text(CONVERSATION_START_TEXT))
    messages = tuple(reshaped)
    if messages == request.messages:
        return request
    return msgspec.structs.replace(request, messages=messages)


def _pair_tool_results(messages: Sequence[Message]) -> list[Message]:
    first_result: dict[str, int] = {}
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            first_result.setdefault(message.result.call_id, i)
    paired: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id in first_result:
                    paired.add(call.id)

    out: list[Message] = []
    emitted: set[str] = set()
    seen_conversation = False
    for i, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            out.append(message if not seen_conversation else UserMessage.of_text(message.content))
            continue
        seen_conversation = True
        if isinstance(message, UserMessage):
            out.append(message)
        elif isinstance(message, ToolMessage):
            call_id = message.result.call_id
            if call_id not in paired or first_result[call_id] != i:
                out.append(UserMessage.of_text(_orphan_result_text(message.result)))
        else:
            kept: list[ToolCall] = []
            texts = [message.text]
            for call in message.tool_calls:
                if call.id in paired and call.id not in emitted:
                    emitted.add(call.id)
                    kept.append(call)
                else:
                    texts.append(_orphan_call_text(call))
            out.append(AssistantMessage(_join(texts), tuple(kept), message.interrupted))
            for call in kept:
                result_message = messages[first_result[call.id]]
                assert isinstance(result_message, ToolMessage)
                out.append(result_message)
    return out


def _merge_neighbours(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for original in messages:
        message = _without_empty_text(original)
        if message is None:
            continue
        previous = out[-1] if out else None
        if isinstance(previous, UserMessage) and isinstance(message, UserMessage):
            out[-1] = UserMessage(previous.parts + message.parts)
        elif isinstance(previous, SystemMessage) and isinstance(message, SystemMessage):
            out[-1] = SystemMessage(_join([previous.content, message.content]))
        elif (
            isinstance(previous, AssistantMessage)
            and isinstance(message, AssistantMessage)
            and not previous.tool_calls
        ):
            out[-1] = AssistantMessage(
                _join([previous.text, message.text]),
                message.tool_calls,
                previous.interrupted or message.interrupted,
            )
        else:
            out.append(message)
    return out


def _without_empty_text(message: Message) -> Message | None:
    if isinstance(message, UserMessage):
        parts = tuple(p for p in message.parts if not isinstance(p, TextPart) or p.text)
        if len(parts) == len(message.parts):
            return message
        return UserMessage(parts) if parts else None
    if isinstance(message, AssistantMessage):
        return message if message.text or message.tool_calls else None
    if isinstance(message, SystemMessage):
        return message if message.content else None
    return message


def _orphan_call_text(call: ToolCall) -> str:
    return f"[called tool {call.name} with arguments {call.arguments}; no result was recorded]"


def _orphan_result_text(result: ToolResult) -> str:
    kind = "error from" if result.is_error else "result of"
    return f"[{kind} tool call {result.call_id}]\n{result.content}"


def _join(texts: list[str]) -> str:
    return "\n\n".join(t for t in texts if t)
