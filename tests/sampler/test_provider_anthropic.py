"""The Anthropic Messages adapter: request bodies and stream decoding."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from sampler._sse import SseEvent, SseParser
from sampler.messages import (
    AssistantMessage,
    FinishReason,
    ImagePart,
    ModelRequest,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)
from sampler.providers import (
    ANTHROPIC_VERSION,
    DEFAULT_MAX_TOKENS,
    AnthropicAdapter,
    StreamDecodeError,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolCallDelta,
    UsageUpdate,
    get_adapter,
)
from sampler.providers.anthropic import AnthropicDecoder

adapter = get_adapter("anthropic")


def body(*messages: Any, **fields: Any) -> dict[str, Any]:
    request = ModelRequest(model="claude-test", messages=messages, **fields)
    decoded: dict[str, Any] = json.loads(adapter.encode_request(request))
    return decoded


def encoded_messages(*messages: Any) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = body(*messages)["messages"]
    return encoded


# --- the request --------------------------------------------------------------------------------------------


def test_registry_gives_the_anthropic_adapter():
    assert isinstance(adapter, AnthropicAdapter)
    assert adapter.name == "anthropic"
    assert adapter.path == "/messages"


def test_headers_carry_the_api_key_and_version():
    assert adapter.headers("k-1") == {
        "content-type": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
        "x-api-key": "k-1",
    }
    assert ANTHROPIC_VERSION == "2023-06-01"
    assert "x-api-key" not in adapter.headers(None)


def test_minimal_request_has_the_required_max_tokens_and_streams():
    assert body(UserMessage.of_text("hi")) == {
        "model": "claude-test",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }
    assert DEFAULT_MAX_TOKENS == 4096


def test_a_non_streamed_request_has_no_stream_field():
    request = ModelRequest(model="m", messages=(UserMessage.of_text("hi"),))
    assert "stream" not in json.loads(adapter.encode_request(request, stream=False))


def test_sampling_settings():
    encoded = body(UserMessage.of_text("hi"), max_tokens=10, temperature=0.2, top_p=0.5, stop=("X",))
    assert (encoded["max_tokens"], encoded["temperature"], encoded["top_p"], encoded["stop_sequences"]) == (
        10,
        0.2,
        0.5,
        ["X"],
    )


def test_system_messages_go_top_level():
    encoded = body(SystemMessage("one"), UserMessage.of_text("hi"), SystemMessage("two"))
    assert encoded["system"] == "one\n\ntwo"
    assert encoded["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_tools_have_an_input_schema():
    schema = {"type": "object", "properties": {}}
    encoded = body(UserMessage.of_text("hi"), tools=(ToolSpec("ls", "List", schema),))
    assert encoded["tools"] == [{"name": "ls", "description": "List", "input_schema": schema}]


def test_user_images_are_base64_or_url_sources():
    message = UserMessage(
        (
            TextPart("look"),
            ImagePart("image/png", data="QUJD"),
            ImagePart("image/jpeg", url="https://example.invalid/x.jpg"),
        )
    )
    assert encoded_messages(message) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.invalid/x.jpg"}},
            ],
        }
    ]


def test_assistant_tool_calls_are_tool_use_blocks_with_parsed_input():
    message = AssistantMessage(
        "checking", (ToolCall("t1", "read", '{"path": "a"}'), ToolCall("t2", "now", ""))
    )
    assert encoded_messages(UserMessage.of_text("u"), message)[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "now", "input": {}},
        ],
    }


@pytest.mark.parametrize("arguments", ['{"path": "a', "[1, 2]"])
def test_arguments_that_are_not_a_json_object_are_sent_as_raw_text(arguments: str):
    message = AssistantMessage("", (ToolCall("t1", "read", arguments),))
    encoded = encoded_messages(UserMessage.of_text("u"), message)[1]
    assert encoded["content"] == [
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"raw_arguments": arguments}}
    ]


def test_tool_results_are_grouped_into_one_user_message_with_following_text():
    messages = encoded_messages(
        UserMessage.of_text("u"),
        AssistantMessage("", (ToolCall("t1", "a", "{}"), ToolCall("t2", "b", "{}"))),
        ToolMessage(ToolResult("t1", "fine")),
        ToolMessage(ToolResult("t2", "boom", is_error=True)),
        UserMessage.of_text("and now?"),
    )
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "fine"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True},
            {"type": "text", "text": "and now?"},
        ],
    }
    assert len(messages) == 3


def test_empty_text_and_empty_messages_are_left_out():
    messages = encoded_messages(
        UserMessage((TextPart(""), TextPart("u"))), AssistantMessage(""), UserMessage.of_text("again")
    )
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "u"}, {"type": "text", "text": "again"}]}
    ]


# --- the stream ---------------------------------------------------------------------------------------------


def sse(kind: str, **payload: Any) -> tuple[str, str]:
    return kind, json.dumps({"type": kind, **payload})


def message_start(input_tokens: int = 25, cache_read: int = 0, cache_creation: int = 0) -> tuple[str, str]:
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_creation,
    }
    return sse(
        "message_start",
        message={"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": usage},
    )


def text_block(index: int, *pieces: str) -> list[tuple[str, str]]:
    return [
        sse("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *(sse("content_block_delta", index=index, delta={"type": "text_delta", "text": p}) for p in pieces),
        sse("content_block_stop", index=index),
    ]


def tool_block(index: int, id: str, name: str, *fragments: str) -> list[tuple[str, str]]:
    return [
        sse(
            "content_block_start",
            index=index,
            content_block={"type": "tool_use", "id": id, "name": name, "input": {}},
        ),
        *(
            sse("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": f})
            for f in fragments
        ),
        sse("content_block_stop", index=index),
    ]


def message_end(stop_reason: str, output_tokens: int) -> list[tuple[str, str]]:
    return [
        sse(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        sse("message_stop"),
    ]


def decode(
    events: Sequence[tuple[str | None, str]], chunk_size: int = 11
) -> tuple[AnthropicDecoder, list[StreamEvent]]:
    """Writes the events as an SSE byte stream, then parses it in small chunks and decodes it."""
    raw = b"".join(
        (f"event: {kind}\n" if kind is not None else "").encode() + f"data: {data}\n\n".encode()
        for kind, data in events
    )
    parser = SseParser()
    decoder = adapter.new_decoder()
    assert isinstance(decoder, AnthropicDecoder)
    out: list[StreamEvent] = []
    for i in range(0, len(raw), chunk_size):
        for event in parser.feed(raw[i : i + chunk_size]):
            out.extend(decoder.feed(event))
    return decoder, out


TEXT_STREAM: list[tuple[str | None, str]] = [
    message_start(input_tokens=20, cache_read=100, cache_creation=5),
    sse("ping"),
    *text_block(0, "Hel", "lo"),
    *message_end("end_turn", 7),
]


def test_text_stream_assembles_the_message_usage_and_finish_reason():
    decoder, events = decode(TEXT_STREAM)
    assert events == [
        UsageUpdate(Usage(125, 1, 100)),
        StreamText("Hel"),
        StreamText("lo"),
        UsageUpdate(Usage(125, 7, 100)),
        StreamDone(),
    ]
    result = decoder.finish()
    assert result.message == AssistantMessage("Hello")
    assert result.usage == Usage(125, 7, 100)
    assert result.finish_reason is FinishReason.STOP
    assert result.complete
    assert result.produced


def test_a_thinking_block_is_reported_apart_and_kept_out_of_the_answer():
    thinking = [
        sse(
            "content_block_start",
            index=0,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        ),
        sse("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Think"}),
        sse("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "ing."}),
        sse("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig"}),
        sse("content_block_stop", index=0),
    ]
    decoder, events = decode(
        [message_start(), *thinking, *text_block(1, "Answer."), *message_end("end_turn", 9)]
    )
    assert [e for e in events if isinstance(e, StreamReasoning | StreamText)] == [
        StreamReasoning("Think"),
        StreamReasoning("ing."),
        StreamText("Answer."),
    ]
    assert decoder.finish().message == AssistantMessage("Answer.")


def test_text_and_parallel_tool_calls_split_across_many_deltas():
    decoder, events = decode(
        [
            message_start(),
            *text_block(0, "Checking ", "both."),
            *tool_block(1, "toolu_a", "read", '{"pa', 'th": ', '"x"}'),
            *tool_block(2, "toolu_b", "ls", "", '{"dir"', ': "/"}'),
            *message_end("tool_use", 40),
        ],
        chunk_size=5,
    )
    result = decoder.finish()
    assert result.message == AssistantMessage(
        "Checking both.",
        (ToolCall("toolu_a", "read", '{"path": "x"}'), ToolCall("toolu_b", "ls", '{"dir": "/"}')),
    )
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert ToolCallDelta(0, "toolu_a", "read", "") in events
    assert ToolCallDelta(1, None, None, ': "/"}') in events


def test_a_tool_call_without_input_deltas_has_empty_object_arguments():
    decoder, _ = decode([message_start(), *tool_block(0, "toolu_n", "now"), *message_end("tool_use", 3)])
    assert decoder.finish().message.tool_calls == (ToolCall("toolu_n", "now", "{}"),)


def test_a_tool_call_whose_input_comes_whole_in_its_start_block_keeps_it():
    start = sse(
        "content_block_start",
        index=0,
        content_block={"type": "tool_use", "id": "t", "name": "x", "input": {"a": 1}},
    )
    decoder, _ = decode([message_start(), start, *message_end("tool_use", 3)])
    assert decoder.finish().message.tool_calls == (ToolCall("t", "x", '{"a": 1}'),)


def test_thinking_blocks_are_skipped():
    thinking = [
        sse("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        sse("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm"}),
        sse("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig"}),
        sse("content_block_stop", index=0),
    ]
    decoder, _ = decode([message_start(), *thinking, *text_block(1, "answer"), *message_end("end_turn", 9)])
    assert decoder.finish().message == AssistantMessage("answer")


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("tool_use", FinishReason.TOOL_CALLS),
        ("max_tokens", FinishReason.LENGTH),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.UNKNOWN),
    ],
)
def test_stop_reasons(reason: str, expected: FinishReason):
    decoder, _ = decode([message_start(), *text_block(0, "x"), *message_end(reason, 2)])
    assert decoder.finish().finish_reason is expected


def test_an_error_event_is_a_stream_error():
    error = sse("error", error={"type": "overloaded_error", "message": "Overloaded"})
    decoder, events = decode([message_start(), *text_block(0, "par")[:2], error])
    assert events[-1] == StreamError("error", error[1])
    result = decoder.finish()
    assert not result.complete
    assert result.message == AssistantMessage("par", interrupted=True)


def test_events_without_names_are_dispatched_by_their_type():
    unnamed = [(None, data) for _, data in TEXT_STREAM]
    decoder, _ = decode(unnamed)
    result = decoder.finish()
    assert (result.message.text, result.complete, result.usage) == ("Hello", True, Usage(125, 7, 100))


def test_an_unnamed_error_is_a_stream_error():
    decoder = adapter.new_decoder()
    data = json.dumps({"type": "error", "error": {"type": "api_error"}})
    assert decoder.feed(SseEvent(None, data)) == [StreamError("error", data)]


def test_unknown_events_are_ignored():
    decoder = adapter.new_decoder()
    assert decoder.feed(SseEvent("brand_new", json.dumps({"type": "brand_new"}))) == []


def test_missing_message_stop_leaves_the_stream_incomplete():
    decoder, events = decode(TEXT_STREAM[:-1])
    assert StreamDone() not in events
    result = decoder.finish()
    assert not result.complete
    assert result.message == AssistantMessage("Hello", interrupted=True)


def test_an_empty_message_produced_nothing():
    decoder, _ = decode([message_start(), *message_end("end_turn", 0)])
    result = decoder.finish()
    assert result.complete
    assert not result.produced


def test_malformed_json_raises_a_stream_decode_error():
    decoder = adapter.new_decoder()
    with pytest.raises(StreamDecodeError) as caught:
        decoder.feed(
            SseEvent("content_block_delta", '{"type": "content_block_delta", "index": 0, "delta": {')
        )
    assert "content_block_delta" in str(caught.value)


def test_malformed_json_in_an_unnamed_event_raises_too():
    with pytest.raises(StreamDecodeError):
        adapter.new_decoder().feed(SseEvent(None, "{nope"))


def test_partial_gives_what_was_assembled_so_far_as_interrupted():
    decoder, _ = decode([message_start(), *tool_block(0, "t", "read", '{"pa')[:2]])
    assert decoder.partial() == AssistantMessage("", (ToolCall("t", "read", '{"pa'),), interrupted=True)


def test_events_after_message_stop_are_ignored():
    decoder, _ = decode([*TEXT_STREAM, *text_block(1, "late")])
    assert decoder.finish().message.text == "Hello"
