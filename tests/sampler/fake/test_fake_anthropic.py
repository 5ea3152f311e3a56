"""The Anthropic messages wire, and the scripted model seen through it."""

from __future__ import annotations

import msgspec

from sampler._sse import SseParser
from sampler.fake import FinalAnswer, Script, ToolStep
from sampler.providers import StreamReasoning, StreamText
from sampler.providers.anthropic import AnthropicDecoder

WRITE = ("write_file", {"path": "a.txt", "content": "hi"})
TASK = Script.task([ToolStep([WRITE], text="Writing."), FinalAnswer("done")])


def messages(*items, stream=True, system=None):
    body = {"model": "claude-fake", "max_tokens": 100, "messages": list(items), "stream": stream}
    if system is not None:
        body["system"] = system
    return body


def user(content):
    return {"role": "user", "content": content}


def test_a_text_stream_has_the_full_event_sequence(start_provider, http, sse):
    provider = start_provider(Script.text("Hello there"), chunk_chars=4)
    response = http.post(provider.base_url + "/messages", json=messages(user("hi")))
    assert response.status_code == 200
    assert "request-id" in response.headers
    events = sse(response.text)
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    payloads = [msgspec.json.decode(data) for _, data in events]
    assert all(payload["type"] == name for name, payload in zip(names, payloads, strict=True))
    start = payloads[0]["message"]
    assert start["role"] == "assistant" and start["model"] == "claude-fake"
    assert start["usage"]["input_tokens"] == 2  # "user" + "hi" = 6 characters
    text = "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta")
    assert text == "Hello there"
    assert payloads[-2]["delta"]["stop_reason"] == "end_turn"
    assert payloads[-2]["usage"]["output_tokens"] == 3


def test_a_tool_step_streams_a_text_block_then_a_tool_use_block(start_provider, http, sse_json):
    provider = start_provider(TASK, chunk_chars=6)
    payloads = sse_json(http.post(provider.base_url + "/messages", json=messages(user("go"))).text)
    starts = [p for p in payloads if p["type"] == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use"]
    tool = starts[1]["content_block"]
    assert tool["name"] == "write_file" and tool["id"].startswith("toolu_") and tool["input"] == {}
    pieces = [p["delta"] for p in payloads if p["type"] == "content_block_delta" and p["index"] == 1]
    assert len(pieces) > 1 and all(piece["type"] == "input_json_delta" for piece in pieces)
    assert msgspec.json.decode("".join(piece["partial_json"] for piece in pieces)) == WRITE[1]
    assert [p["delta"]["stop_reason"] for p in payloads if p["type"] == "message_delta"] == ["tool_use"]


def test_tool_results_advance_the_task_and_a_new_user_message_restarts_it(start_provider, http):
    provider = start_provider(TASK)

    def answer(*items):
        return http.post(provider.base_url + "/messages", json=messages(*items, stream=False)).json()

    first = answer(user("go"))
    assert first["stop_reason"] == "tool_use"
    tool_use = first["content"][1]
    assert tool_use["input"] == WRITE[1]
    result = user([{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "ok"}])
    second = answer(user("go"), {"role": "assistant", "content": first["content"]}, result)
    assert second["content"] == [{"type": "text", "text": "done"}]
    assert second["stop_reason"] == "end_turn"
    assert second["usage"]["output_tokens"] == 1
    again = answer(user("go"), {"role": "assistant", "content": first["content"]}, result, user("more"))
    assert again["stop_reason"] == "tool_use"


def test_an_answer_cut_off_by_the_output_limit_stops_on_max_tokens(start_provider, http):
    provider = start_provider(Script.task([FinalAnswer("and so the", finish="length")]))
    answer = http.post(provider.base_url + "/messages", json=messages(user("go"), stream=False)).json()
    assert answer["content"] == [{"type": "text", "text": "and so the"}]
    assert answer["stop_reason"] == "max_tokens"


def test_the_system_prompt_and_content_blocks_are_read(start_provider, http):
    provider = start_provider(scripts={"s": Script.text("from system")})
    body = messages(
        user([{"type": "text", "text": "hi"}]),
        stream=False,
        system=[{"type": "text", "text": "[[script:s]]"}],
    )
    assert http.post(provider.base_url + "/messages", json=body).json()["content"][0]["text"] == "from system"


def test_malformed_requests_get_an_anthropic_400(start_provider, http):
    provider = start_provider()
    reply = http.post(
        provider.base_url + "/messages", json={"messages": [{"role": "system", "content": "x"}]}
    )
    assert reply.status_code == 400
    assert reply.json()["type"] == "error"
    assert reply.json()["error"]["type"] == "invalid_request_error"


def test_a_thought_streams_as_a_thinking_block_the_decoder_keeps_out_of_the_answer(start_provider, http):
    provider = start_provider(
        Script.task([FinalAnswer("Answer.", thought="Thinking it over.")]), chunk_chars=5
    )
    response = http.post(provider.base_url + "/messages", json=messages(user("hi")))
    parser, decoder = SseParser(), AnthropicDecoder()
    events = [event for sse in parser.feed(response.content) for event in decoder.feed(sse)]
    assert "".join(e.text for e in events if isinstance(e, StreamReasoning)) == "Thinking it over."
    assert "".join(e.text for e in events if isinstance(e, StreamText)) == "Answer."
    result = decoder.finish()
    assert result.complete and result.message.text == "Answer."
