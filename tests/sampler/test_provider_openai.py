"""The OpenAI Chat Completions adapter: request bodies and stream decoding."""

from __future__ import annotations

import json
from typing import Any

import msgspec
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
    OpenAIAdapter,
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
from sampler.providers.openai import OpenAIDecoder

adapter = get_adapter("openai")


def body(*messages: Any, **fields: Any) -> dict[str, Any]:
    request = ModelRequest(model="gpt-test", messages=messages, **fields)
    decoded: dict[str, Any] = json.loads(adapter.encode_request(request))
    return decoded


def encoded_messages(*messages: Any) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = body(*messages)["messages"]
    return encoded


# --- the request --------------------------------------------------------------------------------------------


def test_registry_gives_the_openai_adapter():
    assert isinstance(adapter, OpenAIAdapter)
    assert adapter.name == "openai"
    assert adapter.path == "/chat/completions"


def test_unknown_provider_name_is_a_value_error():
    with pytest.raises(ValueError, match="unknown provider"):
        get_adapter("nope")  # type: ignore[arg-type]


def test_headers_carry_a_bearer_token():
    assert adapter.headers("sk-1") == {"content-type": "application/json", "authorization": "Bearer sk-1"}
    assert "authorization" not in adapter.headers(None)


def test_a_streamed_request_asks_for_usage():
    encoded = body(UserMessage.of_text("hi"))
    assert encoded == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_a_non_streamed_request_has_no_stream_fields():
    request = ModelRequest(model="m", messages=(UserMessage.of_text("hi"),))
    encoded = json.loads(adapter.encode_request(request, stream=False))
    assert "stream" not in encoded
    assert "stream_options" not in encoded


def test_sampling_settings_are_sent_only_when_set():
    encoded = body(UserMessage.of_text("hi"), max_tokens=10, temperature=0.2, top_p=0.5, stop=("X", "Y"))
    assert (encoded["max_tokens"], encoded["temperature"], encoded["top_p"], encoded["stop"]) == (
        10,
        0.2,
        0.5,
        ["X", "Y"],
    )
    assert not {"max_tokens", "temperature", "top_p", "stop", "tools"} & body(UserMessage.of_text("x")).keys()


def test_tools_are_functions():
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    encoded = body(UserMessage.of_text("hi"), tools=(ToolSpec("read", "Read a file", schema),))
    assert encoded["tools"] == [
        {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": schema}}
    ]


def test_system_message():
    assert encoded_messages(SystemMessage("be brief")) == [{"role": "system", "content": "be brief"}]


def test_user_message_with_parts_and_images():
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
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                {"type": "image_url", "image_url": {"url": "https://example.invalid/x.jpg"}},
            ],
        }
    ]


def test_assistant_text_message():
    assert encoded_messages(AssistantMessage("hello")) == [{"role": "assistant", "content": "hello"}]


def test_assistant_tool_calls_have_null_content_when_there_is_no_text():
    message = AssistantMessage("", (ToolCall("c1", "read", '{"path":"a"}'), ToolCall("c2", "ls", "")))
    assert encoded_messages(message) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path":"a"}'}},
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        }
    ]


def test_tool_results_are_tool_messages_and_errors_are_marked_in_the_content():
    assert encoded_messages(
        ToolMessage(ToolResult("c1", "fine")), ToolMessage(ToolResult("c2", "boom", True))
    ) == [
        {"role": "tool", "tool_call_id": "c1", "content": "fine"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
    ]


# --- the stream ---------------------------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "gpt-test",
            "choices": [choice],
            **extra,
        }
    )


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )


def stream_bytes(datas: list[str]) -> bytes:
    return b"".join(f"data: {d}\n\n".encode() for d in datas)


def decode(datas: list[str], chunk_size: int = 7) -> tuple[OpenAIDecoder, list[StreamEvent]]:
    """Runs the data lines through the SSE parser in small chunks, then the decoder."""
    raw = stream_bytes(datas)
    parser = SseParser()
    decoder = adapter.new_decoder()
    assert isinstance(decoder, OpenAIDecoder)
    events: list[StreamEvent] = []
    for i in range(0, len(raw), chunk_size):
        for sse in parser.feed(raw[i : i + chunk_size]):
            events.extend(decoder.feed(sse))
    for sse in parser.close():
        events.extend(decoder.feed(sse))
    return decoder, events


TEXT_STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hel"}),
    chunk({"content": "lo, "}),
    chunk({"content": "wörld"}),
    chunk({}, "stop"),
    usage_chunk(12, 3, cached=8),
    "[DONE]",
]


def test_text_stream_assembles_the_message_usage_and_finish_reason():
    decoder, events = decode(TEXT_STREAM)
    assert events == [
        StreamText("Hel"),
        StreamText("lo, "),
        StreamText("wörld"),
        UsageUpdate(Usage(12, 3, 8)),
        StreamDone(),
    ]
    result = decoder.finish()
    assert result.message == AssistantMessage("Hello, wörld")
    assert result.usage == Usage(12, 3, 8)
    assert result.finish_reason is FinishReason.STOP
    assert result.complete
    assert result.produced


def test_parallel_tool_calls_split_across_many_chunks_are_assembled_by_index():
    datas = [
        chunk({"role": "assistant", "content": None}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read"}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "ls"}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"dir":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "x"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": ' "/"}'}}]}),
        chunk({}, "tool_calls"),
        usage_chunk(50, 20),
        "[DONE]",
    ]
    decoder, events = decode(datas, chunk_size=3)
    result = decoder.finish()
    assert result.message == AssistantMessage(
        "", (ToolCall("call_a", "read", '{"path": "x"}'), ToolCall("call_b", "ls", '{"dir": "/"}'))
    )
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert result.complete
    assert result.produced
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(0, "call_a", "read", "")
    assert "".join(d.arguments_fragment for d in deltas if d.index == 1) == '{"dir": "/"}'


def test_text_and_a_tool_call_in_one_message():
    datas = [
        chunk({"content": "Let me check."}),
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "ls", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    decoder, _ = decode(datas)
    assert decoder.finish().message == AssistantMessage("Let me check.", (ToolCall("c", "ls", "{}"),))


def test_streamed_reasoning_is_reported_apart_and_kept_out_of_the_answer():
    datas = [
        chunk({"role": "assistant", "reasoning_content": "Think"}),
        chunk({"reasoning": "ing."}),
        chunk({"content": "Answer."}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    decoder, events = decode(datas)
    assert [e for e in events if isinstance(e, StreamReasoning | StreamText)] == [
        StreamReasoning("Think"),
        StreamReasoning("ing."),
        StreamText("Answer."),
    ]
    assert decoder.finish().message == AssistantMessage("Answer.")


def test_tool_call_without_index_continues_the_call_with_the_same_or_no_id():
    datas = [
        chunk({"tool_calls": [{"id": "a", "function": {"name": "x", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "y", "arguments": "{}"}}]}),
        "[DONE]",
    ]
    decoder, _ = decode(datas)
    assert decoder.finish().message.tool_calls == (ToolCall("a", "x", "{}"), ToolCall("b", "y", "{}"))


def test_a_tool_call_without_id_or_arguments_gets_defaults():
    datas = [
        chunk({"tool_calls": [{"index": 0, "function": {"name": "now"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    decoder, _ = decode(datas)
    assert decoder.finish().message.tool_calls == (ToolCall("call_0", "now", "{}"),)


def test_content_filter_finish_reason():
    decoder, _ = decode([chunk({"content": "I can"}), chunk({}, "content_filter"), "[DONE]"])
    result = decoder.finish()
    assert result.finish_reason is FinishReason.CONTENT_FILTER
    assert result.message.text == "I can"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("length", FinishReason.LENGTH),
        ("function_call", FinishReason.TOOL_CALLS),
        ("something_new", FinishReason.UNKNOWN),
    ],
)
def test_other_finish_reasons(reason: str, expected: FinishReason):
    decoder, _ = decode([chunk({"content": "x"}, reason), "[DONE]"])
    assert decoder.finish().finish_reason is expected


def test_a_refusal_is_kept_as_text():
    decoder, events = decode([chunk({"refusal": "I can't help with that."}), chunk({}, "stop"), "[DONE]"])
    assert decoder.finish().message.text == "I can't help with that."
    assert StreamText("I can't help with that.") in events


def test_an_error_member_in_a_chunk_is_a_stream_error():
    error = json.dumps({"error": {"message": "overloaded", "type": "server_error", "code": 529}})
    decoder, events = decode([chunk({"content": "par"}), error])
    assert events == [StreamText("par"), StreamError(None, error)]
    result = decoder.finish()
    assert not result.complete
    assert result.message == AssistantMessage("par", interrupted=True)


def test_an_error_event_is_a_stream_error_with_its_name():
    decoder = adapter.new_decoder()
    assert decoder.feed(SseEvent("error", "not even json")) == [StreamError("error", "not even json")]


def test_missing_done_leaves_the_stream_incomplete():
    decoder, events = decode(TEXT_STREAM[:-1])
    assert StreamDone() not in events
    result = decoder.finish()
    assert not result.complete
    assert result.message == AssistantMessage("Hello, wörld", interrupted=True)
    assert result.usage == Usage(12, 3, 8)


def test_an_empty_stream_produced_nothing():
    decoder, _ = decode([chunk({"role": "assistant", "content": ""}), chunk({}, "stop"), "[DONE]"])
    result = decoder.finish()
    assert result.complete
    assert not result.produced
    assert result.usage is None


def test_malformed_json_raises_a_stream_decode_error_with_the_data_truncated():
    decoder = adapter.new_decoder()
    bad = '{"choices": [' + "x" * 1000
    with pytest.raises(StreamDecodeError) as caught:
        decoder.feed(SseEvent(None, bad))
    assert isinstance(caught.value, ValueError)
    assert caught.value.data.startswith('{"choices": [xxx')
    assert len(caught.value.data) <= 201
    assert len(str(caught.value)) < 400


def test_wrongly_typed_json_is_a_stream_decode_error_too():
    decoder = adapter.new_decoder()
    with pytest.raises(StreamDecodeError):
        decoder.feed(SseEvent(None, '{"choices": "nope"}'))


def test_partial_gives_what_was_assembled_so_far_as_interrupted():
    decoder, _ = decode(TEXT_STREAM[:3])
    assert decoder.partial() == AssistantMessage("Hello, ", interrupted=True)


def test_events_after_done_are_ignored():
    decoder, _ = decode([*TEXT_STREAM, chunk({"content": "late"})])
    assert decoder.finish().message.text == "Hello, wörld"


def test_other_choices_and_blank_data_are_ignored():
    other = json.dumps({"choices": [{"index": 1, "delta": {"content": "other"}}]})
    decoder = adapter.new_decoder()
    assert decoder.feed(SseEvent(None, other)) == []
    assert decoder.feed(SseEvent(None, "  ")) == []
    assert decoder.finish().message.text == ""


def test_the_assembled_result_round_trips_through_msgspec_json():
    decoder, _ = decode(TEXT_STREAM)
    result = decoder.finish()
    assert msgspec.json.decode(msgspec.json.encode(result), type=type(result)) == result


def test_a_message_sent_again_is_encoded_as_the_first_time_and_a_changed_history_as_itself() -> None:
    from sampler.providers import openai as wire

    adapter = wire.OpenAIAdapter()
    first = (UserMessage.of_text("hi"), AssistantMessage("", (ToolCall("c1", "read_file", "{}"),)))
    later = (*first, ToolMessage(ToolResult("c1", "done", is_error=True)), UserMessage.of_text("more"))
    once = msgspec.json.decode(adapter.encode_request(ModelRequest(model="m", messages=first)))
    again = msgspec.json.decode(adapter.encode_request(ModelRequest(model="m", messages=later)))
    assert again["messages"][:2] == once["messages"]
    assert again["messages"][2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: done"},
        {"role": "user", "content": "more"},
    ]
    equal_but_new = (UserMessage.of_text("hi"), UserMessage.of_text("other"))
    fresh = msgspec.json.decode(adapter.encode_request(ModelRequest(model="m", messages=equal_but_new)))
    assert [m["content"] for m in fresh["messages"]] == ["hi", "other"]
    image = UserMessage((TextPart("see"), ImagePart("image/png", data="AA==")))
    adapter.encode_request(ModelRequest(model="m", messages=(image,)))
    assert id(image) not in wire._memo  # an encoding with media holds its data again: not kept
