"""The Anthropic Messages protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .._sse import SseEvent
from ..messages import (
    AssistantMessage,
    FinishReason,
    ImagePart,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._base import (
    AssistantResult,
    DecoderState,
    StreamDecodeError,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolCallDelta,
    UsageUpdate,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicAdapter", "AnthropicDecoder"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every request."""

DEFAULT_MAX_TOKENS = 4096
"""The ``max_tokens`` sent when the request leaves it unset (the protocol requires one)."""

_STOP_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.CONTENT_FILTER,
}

_encoder = msgspec.json.Encoder()
_any_decoder = msgspec.json.Decoder()


class AnthropicAdapter:
    """Encodes requests for ``POST {base}/messages`` and decodes its SSE stream.

    Encoding: every system message goes, in order and joined by blank lines, into the top-level
    ``system``; user text and media become ``text`` and ``image`` blocks (inline data as a base64 source,
    otherwise a url source); assistant tool calls become ``tool_use`` blocks whose ``input`` is the parsed
    arguments (arguments that are not a JSON object are sent as ``{"raw_arguments": <text>}``); tool
    results become ``tool_result`` blocks of a user message. Adjacent messages of the same role are merged,
    empty text blocks and empty messages are left out.
    """

    name = "anthropic"
    path = "/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """JSON content type, ``anthropic-version`` and, given a key, ``x-api-key``."""
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def encode_request(self, request: ModelRequest, *, stream: bool = True) -> bytes:
        """The Messages JSON body for ``request``; ``max_tokens`` defaults to :data:`DEFAULT_MAX_TOKENS`."""
        system: list[str] = []
        turns: list[dict[str, Any]] = []
        for message in request.messages:
            if isinstance(message, SystemMessage):
                if message.content:
                    system.append(message.content)
                continue
            role, blocks = _encode_blocks(message)
            if not blocks:
                continue
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        }
        if system:
            body["system"] = "\n\n".join(system)
        body["messages"] = turns
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if stream:
            body["stream"] = True
        return _encoder.encode(body)

    def new_decoder(self) -> AnthropicDecoder:
        """A decoder for one Messages stream."""
        return AnthropicDecoder()


def _encode_blocks(message: UserMessage | AssistantMessage | ToolMessage) -> tuple[str, list[dict[str, Any]]]:
    blocks: list[dict[str, Any]] = []
    if isinstance(message, UserMessage):
        for part in message.parts:
            if isinstance(part, ImagePart):
                source: dict[str, Any]
                if part.data is not None:
                    source = {"type": "base64", "media_type": part.media_type, "data": part.data}
                else:
                    source = {"type": "url", "url": part.url}
                blocks.append({"type": "image", "source": source})
            elif part.text:
                blocks.append({"type": "text", "text": part.text})
        return "user", blocks
    if isinstance(message, AssistantMessage):
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        blocks.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c)}
            for c in message.tool_calls
        )
        return "assistant", blocks
    result = message.result
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id, "content": result.content}
    if result.is_error:
        block["is_error"] = True
    return "user", [block]


def _tool_input(call: ToolCall) -> Any:
    if not call.arguments.strip():
        return {}
    try:
        value = _any_decoder.decode(call.arguments)
    except msgspec.DecodeError:
        value = None
    return value if isinstance(value, dict) else {"raw_arguments": call.arguments}


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _MessageInfo(msgspec.Struct):
    usage: _Usage | None = None
    stop_reason: str | None = None
    model: str | None = None


class _MessageStart(msgspec.Struct):
    message: _MessageInfo


class _Block(msgspec.Struct):
    type: str
    id: str | None = None
    name: str | None = None
    text: str | None = None
    input: msgspec.Raw = msgspec.Raw(b"{}")


class _BlockStart(msgspec.Struct):
    index: int
    content_block: _Block


class _Delta(msgspec.Struct):
    type: str
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None


class _BlockDelta(msgspec.Struct):
    index: int
    delta: _Delta


class _StopInfo(msgspec.Struct):
    stop_reason: str | None = None


class _MessageDelta(msgspec.Struct):
    delta: _StopInfo | None = None
    usage: _Usage | None = None


class _Typed(msgspec.Struct):
    type: str = ""


_typed_decoder = msgspec.json.Decoder(_Typed)


def _decode(decoder: msgspec.json.Decoder[Any], data: str) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise StreamDecodeError(data, str(exc)) from None


class AnthropicDecoder:
    """Decodes one Messages stream (see :class:`sampler.providers.StreamDecoder`).

    Text blocks are concatenated into the message text, ``tool_use`` blocks become tool calls (in block
    order) with their ``input_json_delta`` fragments as arguments; a thinking block's ``thinking_delta``
    text is emitted as :class:`StreamReasoning` (shown, not kept in the message); other blocks are
    skipped.
    Usage is the prompt from ``message_start`` (cache reads and writes included) and the output from the
    last ``message_delta``. ``message_stop`` completes the stream and anything after it is ignored. An
    ``error`` event is emitted as :class:`StreamError`.
    """

    __slots__ = ("_call_of_block", "_preset", "_state", "_usage")

    def __init__(self) -> None:
        self._state = DecoderState()
        self._call_of_block: dict[int, int] = {}
        self._preset: set[int] = set()
        self._usage = [0, 0, 0, 0]  # input, cache read, cache creation, output

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        """The events carried by one SSE event. Raises :class:`StreamDecodeError` on malformed data."""
        if self._state.complete:
            return []
        kind = event.event
        handler = _HANDLERS.get(kind) if kind is not None else None
        if handler is None:
            if kind == "ping" or not event.data or event.data.isspace():
                return []
            kind = _decode(_typed_decoder, event.data).type
            handler = _HANDLERS.get(kind)
            if handler is None:
                return []
        return handler(self, event)

    def _block_delta(self, event: SseEvent) -> list[StreamEvent]:
        chunk: _BlockDelta = _decode(_block_delta_decoder, event.data)
        delta = chunk.delta
        if delta.type == "text_delta":
            if delta.text:
                self._state.text.append(delta.text)
                return [StreamText(delta.text)]
        elif delta.type == "thinking_delta":
            if delta.thinking:
                return [StreamReasoning(delta.thinking)]
        elif delta.type == "input_json_delta":
            call = self._call_of_block.get(chunk.index)
            if call is not None and delta.partial_json:
                builder = self._state.calls[call]
                if call in self._preset:
                    self._preset.discard(call)
                    builder.fragments.clear()
                builder.fragments.append(delta.partial_json)
                return [ToolCallDelta(call, None, None, delta.partial_json)]
        return []

    def _block_start(self, event: SseEvent) -> list[StreamEvent]:
        chunk: _BlockStart = _decode(_block_start_decoder, event.data)
        block = chunk.content_block
        if block.type == "text":
            if block.text:
                self._state.text.append(block.text)
                return [StreamText(block.text)]
        elif block.type == "tool_use":
            call = self._call_of_block[chunk.index] = len(self._call_of_block)
            builder = self._state.call(call, block.id, block.name)
            preset = bytes(block.input).strip()
            if preset and preset != b"{}":
                builder.fragments.append(preset.decode())
                self._preset.add(call)
            return [ToolCallDelta(call, block.id, block.name, "")]
        return []

    def _message_start(self, event: SseEvent) -> list[StreamEvent]:
        chunk: _MessageStart = _decode(_message_start_decoder, event.data)
        if chunk.message.model:
            self._state.model = chunk.message.model
        return self._update_usage(chunk.message.usage)

    def _message_delta(self, event: SseEvent) -> list[StreamEvent]:
        chunk: _MessageDelta = _decode(_message_delta_decoder, event.data)
        if chunk.delta is not None and chunk.delta.stop_reason is not None:
            self._state.finish_reason = _STOP_REASONS.get(chunk.delta.stop_reason, FinishReason.UNKNOWN)
        return self._update_usage(chunk.usage)

    def _message_stop(self, event: SseEvent) -> list[StreamEvent]:
        self._state.complete = True
        return [StreamDone()]

    def _error(self, event: SseEvent) -> list[StreamEvent]:
        return [StreamError(event.event or "error", event.data)]

    def _ignore(self, event: SseEvent) -> list[StreamEvent]:
        return []

    def _update_usage(self, usage: _Usage | None) -> list[StreamEvent]:
        if usage is None:
            return []
        counts = self._usage
        for i, value in enumerate(
            (
                usage.input_tokens,
                usage.cache_read_input_tokens,
                usage.cache_creation_input_tokens,
                usage.output_tokens,
            )
        ):
            if value is not None:
                counts[i] = value
        self._state.usage = Usage(counts[0] + counts[1] + counts[2], counts[3], counts[1])
        return [UsageUpdate(self._state.usage)]

    def finish(self) -> AssistantResult:
        """The result assembled so far; ``complete`` is true only if ``message_stop`` was seen."""
        return self._state.finish()

    def partial(self) -> AssistantMessage:
        """The message assembled so far, marked ``interrupted``."""
        return self._state.partial()


_block_delta_decoder = msgspec.json.Decoder(_BlockDelta)
_block_start_decoder = msgspec.json.Decoder(_BlockStart)
_message_start_decoder = msgspec.json.Decoder(_MessageStart)
_message_delta_decoder = msgspec.json.Decoder(_MessageDelta)

_HANDLERS: dict[str, Callable[[AnthropicDecoder, SseEvent], list[StreamEvent]]] = {
    "content_block_delta": AnthropicDecoder._block_delta,
    "content_block_start": AnthropicDecoder._block_start,
    "content_block_stop": AnthropicDecoder._ignore,
    "message_start": AnthropicDecoder._message_start,
    "message_delta": AnthropicDecoder._message_delta,
    "message_stop": AnthropicDecoder._message_stop,
    "error": AnthropicDecoder._error,
}
