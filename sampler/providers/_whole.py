"""A complete, non-streamed answer (``chat.completion`` or Anthropic ``message``) read as a finished stream.

Some gateways answer a streamed request with the whole answer as one JSON body. :func:`decode_whole` reads
such a body in either dialect; anything else is not an answer and yields ``None``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..messages import AssistantMessage, FinishReason, ToolCall, Usage
from ._base import AssistantResult

__all__ = ["decode_whole"]

_OPENAI_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_ANTHROPIC_STOP = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.CONTENT_FILTER,
}


def decode_whole(body: bytes | str) -> AssistantResult | None:
    """The answer in ``body`` as a complete result, or ``None`` when ``body`` is not a complete answer
    (not JSON, an error object, or JSON of another shape). Never raises."""
    try:
        data = msgspec.json.decode(body)
    except (msgspec.DecodeError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or "error" in data:
        return None
    try:
        if isinstance(data.get("choices"), list):
            return _openai(data)
        if data.get("type") == "message" and isinstance(data.get("content"), list):
            return _anthropic(data)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return None


def _openai(data: dict[str, Any]) -> AssistantResult | None:
    choices = data["choices"]
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        return None
    message = choices[0]["message"]
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    calls = tuple(
        ToolCall(str(call["id"]), str(function["name"]), _arguments(function.get("arguments")))
        for call in message.get("tool_calls") or ()
        for function in (call["function"],)
    )
    usage = data.get("usage")
    return AssistantResult(
        AssistantMessage(text, calls),
        _openai_usage(usage),
        _OPENAI_FINISH.get(str(choices[0].get("finish_reason")), FinishReason.UNKNOWN),
        complete=True,
        model=_model(data),
    )


def _anthropic(data: dict[str, Any]) -> AssistantResult:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        if block.get("type") == "text":
            texts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(str(block["id"]), str(block["name"]), _arguments(block.get("input"))))
    usage = data.get("usage")
    return AssistantResult(
        AssistantMessage("".join(texts), tuple(calls)),
        _anthropic_usage(usage),
        _ANTHROPIC_STOP.get(str(data.get("stop_reason")), FinishReason.UNKNOWN),
        complete=True,
        model=_model(data),
    )


def _openai_usage(usage: object) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens_details"), usage.get("completion_tokens_details")
    return Usage(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(prompt.get("cached_tokens") or 0) if isinstance(prompt, dict) else 0,
        int(completion.get("reasoning_tokens") or 0) if isinstance(completion, dict) else 0,
    )


def _anthropic_usage(usage: object) -> Usage | None:
    """Anthropic's input excludes what was read from or written to the cache: the prompt is all three."""
    if not isinstance(usage, dict):
        return None
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + read + written
    return Usage(prompt, int(usage.get("output_tokens") or 0), read)


def _model(data: dict[str, Any]) -> str | None:
    model = data.get("model")
    return model if isinstance(model, str) and model else None


def _arguments(value: object) -> str:
    if isinstance(value, str):
        return value or "{}"
    return msgspec.json.encode(value if value is not None else {}).decode()
