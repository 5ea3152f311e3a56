"""The OpenAI Chat Completions protocol (and the many servers compatible with it)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import msgspec

from .._sse import SseEvent
from ..messages import (
    AssistantMessage,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    SystemMessage,
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

__all__ = ["OpenAIAdapter", "OpenAIDecoder"]

_FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}

_encoder = msgspec.json.Encoder()


class OpenAIAdapter:
    """Encodes requests for ``POST {base}/chat/completions`` and decodes its SSE stream.

    Encoding: system, user, assistant and tool messages map to their roles; a user message of one text part
    is sent as a plain string, otherwise as content parts, media as ``image_url`` parts (inline data as a
    ``data:`` URL); tool results become ``tool`` messages, and an error result's content is prefixed with
    ``Error: `` since the protocol has no error flag. A streamed request asks for the final usage chunk.
    """

    name = "openai"
    path = "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """JSON content type and, given a key, ``Authorization: Bearer``."""
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def encode_request(self, request: ModelRequest, *, stream: bool = True) -> bytes:
        """The Chat Completions JSON body for ``request``."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": _encoded_messages(request.messages),
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return _encoder.encode(body)

    def new_decoder(self) -> OpenAIDecoder:
        """A decoder for one Chat Completions stream."""
        return OpenAIDecoder()


_MEMO_SIZE = 8192
_memo: dict[int, tuple[Message, dict[str, Any]]] = {}
"""The encodings of recent messages, by identity (each held, so that its id is not reused): a session's
next request sends the same message objects again, and only the new ones are encoded. Messages with
media are not kept: their encodings hold the media's data again."""
_memo_lock = threading.Lock()


def _encoded_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with _memo_lock:
        for message in messages:
            known = _memo.get(id(message))
            if known is not None and known[0] is message:
                out.append(known[1])
                continue
            encoded = _encode_message(message)
            out.append(encoded)
            if not (
                isinstance(message, UserMessage) and any(isinstance(p, ImagePart) for p in message.parts)
            ):
                if len(_memo) >= _MEMO_SIZE:
                    del _memo[next(iter(_memo))]
                _memo[id(message)] = (message, encoded)
    return out


def _encode_message(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        parts = message.parts
        if len(parts) == 1 and not isinstance(parts[0], ImagePart):
            return {"role": "user", "content": parts[0].text}
        content: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, ImagePart):
                url = f"data:{part.media_type};base64,{part.data}" if part.data is not None else part.url
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                content.append({"type": "text", "text": part.text})
        return {"role": "user", "content": content}
    if isinstance(message, AssistantMessage):
        encoded: dict[str, Any] = {"role": "assistant", "content": message.text}
        if message.tool_calls:
            encoded["content"] = message.text or None
            encoded["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments or "{}"},
                }
                for c in message.tool_calls
            ]
        return encoded
    assert isinstance(message, ToolMessage)
    result = message.result
    content_text = f"Error: {result.content}" if result.is_error else result.content
    return {"role": "tool", "tool_call_id": result.call_id, "content": content_text}


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCallChunk(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    """The reasoning some compatible servers stream beside the answer (DeepSeek, vLLM)."""
    reasoning: str | None = None
    """The same, as others name it (OpenRouter, Ollama)."""
    tool_calls: list[_ToolCallChunk] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None
    model: str | None = None


_chunk_decoder = msgspec.json.Decoder(_Chunk)


class OpenAIDecoder:
    """Decodes one Chat Completions stream (see :class:`sampler.providers.StreamDecoder`).

    Only the first choice is followed. A refusal is kept as text. ``[DONE]`` completes the stream and
    anything after it is ignored. An ``error`` SSE event, or a chunk carrying an ``error`` member, is
    emitted as :class:`StreamError`.
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = DecoderState()

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        """The events carried by one SSE event. Raises :class:`StreamDecodeError` on malformed data."""
        state = self._state
        if state.complete:
            return []
        data = event.data
        if event.event == "error":
            return [StreamError(event.event, data)]
        if data == "[DONE]":
            state.complete = True
            return [StreamDone()]
        if not data or data.isspace():
            return []
        try:
            chunk = _chunk_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise StreamDecodeError(data, str(exc)) from None
        if chunk.error is not None:
            return [StreamError(event.event, data)]
        out: list[StreamEvent] = []
        if chunk.model and state.model is None:
            state.model = chunk.model
        if chunk.choices:
            for choice in chunk.choices:
                if choice.index == 0:
                    self._choice(choice, out)
        usage = chunk.usage
        if usage is not None:
            details = usage.prompt_tokens_details
            reasoning = usage.completion_tokens_details
            state.usage = Usage(
                usage.prompt_tokens or 0,
                usage.completion_tokens or 0,
                (details.cached_tokens or 0) if details is not None else 0,
                (reasoning.reasoning_tokens or 0) if reasoning is not None else 0,
            )
            out.append(UsageUpdate(state.usage))
        return out

    def _choice(self, choice: _Choice, out: list[StreamEvent]) -> None:
        state = self._state
        delta = choice.delta
        if delta is not None:
            for reasoning in (delta.reasoning_content, delta.reasoning):
                if reasoning:
                    out.append(StreamReasoning(reasoning))
            for text in (delta.content, delta.refusal):
                if text:
                    state.text.append(text)
                    out.append(StreamText(text))
            if delta.tool_calls:
                for call in delta.tool_calls:
                    index = call.index if call.index is not None else self._implicit_index(call.id)
                    function = call.function
                    name = function.name if function is not None else None
                    fragment = (function.arguments if function is not None else None) or ""
                    builder = state.call(index, call.id, name)
                    if fragment:
                        builder.fragments.append(fragment)
                    out.append(ToolCallDelta(index, call.id, name, fragment))
        if choice.finish_reason is not None:
            state.finish_reason = _FINISH_REASONS.get(choice.finish_reason, FinishReason.UNKNOWN)

    def _implicit_index(self, call_id: str | None) -> int:
        # Some compatible servers omit the index: a new id starts a new call, no id continues the last.
        calls = self._state.calls
        if not calls:
            return 0
        if call_id:
            for index, builder in calls.items():
                if builder.id == call_id:
                    return index
            return max(calls) + 1
        return max(calls)

    def finish(self) -> AssistantResult:
        """The result assembled so far; ``complete`` is true only if ``[DONE]`` was seen."""
        return self._state.finish()

    def partial(self) -> AssistantMessage:
        """The message assembled so far, marked ``interrupted``."""
        return self._state.partial()
