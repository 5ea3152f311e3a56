"""What every provider adapter offers, the events its stream decoder emits, and the shared assembly."""

from __future__ import annotations

from typing import Protocol, TypeAlias

import msgspec

from .._sse import SseEvent
from ..messages import AssistantMessage, FinishReason, ModelRequest, ToolCall, Usage

__all__ = [
    "AssistantResult",
    "DecoderState",
    "ProviderAdapter",
    "StreamDecodeError",
    "StreamDecoder",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamReasoning",
    "StreamText",
    "ToolCallDelta",
    "UsageUpdate",
]

_DATA_SHOWN = 200


class StreamText(msgspec.Struct, frozen=True, tag=True):
    """More assistant text, in stream order."""

    text: str


class StreamReasoning(msgspec.Struct, frozen=True, tag=True):
    """More of the model's reasoning, in stream order, where the provider streams it (shown, never part
    of the answer)."""

    text: str


class ToolCallDelta(msgspec.Struct, frozen=True, tag=True):
    """A fragment of the tool call at position ``index``; ``id`` and ``name`` are set when first known."""

    index: int
    id: str | None
    name: str | None
    arguments_fragment: str


class UsageUpdate(msgspec.Struct, frozen=True, tag=True):
    """The usage so far; a later update supersedes an earlier one."""

    usage: Usage


class StreamError(msgspec.Struct, frozen=True, tag=True):
    """The provider reported an error inside the stream; ``data`` is its payload, unparsed.

    The decoder does not judge it: the caller classifies it (``sampler.errors.classify_stream_error``).
    """

    event: str | None
    data: str


class StreamDone(msgspec.Struct, frozen=True, tag=True):
    """The provider ended the stream properly ([DONE], message_stop). Nothing follows it."""


StreamEvent: TypeAlias = StreamText | StreamReasoning | ToolCallDelta | UsageUpdate | StreamError | StreamDone
"""What :meth:`StreamDecoder.feed` emits."""


class AssistantResult(msgspec.Struct, frozen=True, tag=True):
    """Everything a finished (or broken) stream produced."""

    message: AssistantMessage
    """The assembled message; ``interrupted`` is set when the stream did not end properly."""
    usage: Usage | None
    """The last usage the provider reported, or ``None`` if it reported none."""
    finish_reason: FinishReason
    complete: bool
    """True when the stream ended properly; false when it was cut short."""
    model: str | None = None
    """The model that answered, as the provider named it (None when it did not)."""

    @property
    def produced(self) -> bool:
        """True when the stream produced any text or any tool call; false is an empty response."""
        return bool(self.message.text or self.message.tool_calls)


class StreamDecodeError(ValueError):
    """A data line of the stream was not the JSON the provider's protocol promises.

    ``data`` holds the start of the offending payload (at most 200 characters).
    """

    def __init__(self, data: str, reason: str) -> None:
        shown = data if len(data) <= _DATA_SHOWN else data[:_DATA_SHOWN] + "…"
        super().__init__(f"malformed stream data ({reason}): {shown!r}")
        self.data = shown


class StreamDecoder(Protocol):
    """The decoder of one response stream. Stateful; not reusable across responses."""

    def feed(self, event: SseEvent) -> list[StreamEvent]:
        """The events carried by one SSE event. Raises :class:`StreamDecodeError` on malformed data."""
        ...

    def finish(self) -> AssistantResult:
        """The result assembled from everything fed so far."""
        ...

    def partial(self) -> AssistantMessage:
        """The message assembled so far, marked ``interrupted`` (for salvage on cancellation)."""
        ...


class ProviderAdapter(Protocol):
    """How to speak to one provider's API: the request body, the path, the headers, the stream."""

    @property
    def name(self) -> str:
        """The registry name, such as ``"openai"``."""
        ...

    @property
    def path(self) -> str:
        """The endpoint path, relative to the provider's base URL."""
        ...

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers (authentication included when ``api_key`` is given)."""
        ...

    def encode_request(self, request: ModelRequest, *, stream: bool = True) -> bytes:
        """The JSON body for ``request``."""
        ...

    def new_decoder(self) -> StreamDecoder:
        """A decoder for one response stream."""
        ...


class _CallBuilder:
    __slots__ = ("fragments", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.fragments: list[str] = []


class DecoderState:
    """The assembly shared by the decoders: text, tool calls by index, usage, finish reason."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _CallBuilder] = {}
        self.usage: Usage | None = None
        self.finish_reason = FinishReason.UNKNOWN
        self.complete = False
        self.model: str | None = None

    def call(self, index: int, id: str | None, name: str | None) -> _CallBuilder:
        """The builder of the call at ``index``, created on first sight; a later id or name fills gaps."""
        builder = self.calls.get(index)
        if builder is None:
            builder = self.calls[index] = _CallBuilder(id or "", name or "")
        else:
            if id and not builder.id:
                builder.id = id
            if name and not builder.name:
                builder.name = name
        return builder

    def message(self, interrupted: bool) -> AssistantMessage:
        """The message assembled so far; a call that got no argument text gets ``{}``."""
        calls = tuple(
            ToolCall(b.id or f"call_{index}", b.name, "".join(b.fragments) or "{}")
            for index, b in sorted(self.calls.items())
        )
        return AssistantMessage("".join(self.text), calls, interrupted)

    def finish(self) -> AssistantResult:
        """See :meth:`StreamDecoder.finish`."""
        return AssistantResult(
            self.message(interrupted=not self.complete),
            self.usage,
            self.finish_reason,
            self.complete,
            self.model,
        )

    def partial(self) -> AssistantMessage:
        """See :meth:`StreamDecoder.partial`."""
        return self.message(interrupted=True)
