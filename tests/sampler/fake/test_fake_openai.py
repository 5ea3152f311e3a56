"""The OpenAI chat completions wire, and the scripted model seen through it."""

from __future__ import annotations

import msgspec
import openai
import pytest

from sampler.fake import SUMMARY_MARKER, SUMMARY_PREFIX, FinalAnswer, Script, ToolStep

WRITE = ("write_file", {"path": "a.txt", "content": "hi"})
TASK = Script.task([ToolStep([WRITE]), ToolStep([("read_file", {"path": "a.txt"})]), FinalAnswer("all done")])


def user(text):
    return {"role": "user", "content": text}


def chat(*messages, stream=True, usage=False):
    body = {"model": "m", "messages": list(messages), "stream": stream}
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def assistant_calls(call_id, name, arguments):
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def tool_result(call_id, text):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def content_of(chunks):
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_a_text_stream_is_valid_sse_ending_with_done(start_provider, http, sse, sse_json):
    provider = start_provider(Script.text("Hello, streaming world!"), chunk_chars=4)
    response = http.post(provider.base_url + "/chat/completions", json=chat(user("hi")))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response.text)
    assert events[-1] == (None, "[DONE]")
    chunks = sse_json(response.text)
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(chunks) == "Hello, streaming world!"
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 6
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_usage_arrives_in_a_final_chunk_only_when_asked(start_provider, http, sse_json):
    provider = start_provider(Script.text("12345678"))
    without = sse_json(http.post(provider.base_url + "/chat/completions", json=chat(user("hi"))).text)
    assert all("usage" not in chunk for chunk in without)
    body = chat(user("a" * 40), usage=True)
    chunks = sse_json(http.post(provider.base_url + "/chat/completions", json=body).text)
    assert chunks[-1]["choices"] == []
    # every string value of the messages counts: "user" + 40 characters = 44 characters = 11 tokens
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 2,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def test_chunks_makes_exactly_that_many_content_chunks(start_provider, http, sse_json):
    provider = start_provider(Script.text("x", chunks=5000))
    chunks = sse_json(http.post(provider.base_url + "/chat/completions", json=chat(user("go"))).text)
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 5000


def test_coalesced_writes_carry_the_same_events(start_provider, http, sse):
    one = start_provider(Script.text("the same answer either way"))
    many = start_provider(Script.text("the same answer either way"), events_per_write=7)
    body = chat(user("hi"))
    plain = sse(http.post(one.base_url + "/chat/completions", json=body).text)
    coalesced = sse(http.post(many.base_url + "/chat/completions", json=body).text)
    strip = lambda events: [msgspec.json.decode(d).get("choices") if d != "[DONE]" else d for _, d in events]  # noqa: E731
    assert strip(plain) == strip(coalesced)


def test_a_tool_step_streams_id_and_name_first_then_arguments_in_pieces(start_provider, http, sse_json):
    provider = start_provider(TASK, chunk_chars=5)
    chunks = sse_json(http.post(provider.base_url + "/chat/completions", json=chat(user("do it"))).text)
    deltas = [
        c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]
    ]
    assert deltas[0]["id"].startswith("call_")
    assert deltas[0]["function"] == {"name": "write_file", "arguments": ""}
    assert len(deltas) > 3
    assert all("id" not in piece for piece in deltas[1:])
    arguments = "".join(piece["function"]["arguments"] for piece in deltas)
    assert msgspec.json.decode(arguments) == WRITE[1]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_the_step_follows_the_tool_rounds_since_the_last_user_message(start_provider, http):
    provider = start_provider(TASK)

    def answer(*messages):
        reply = http.post(provider.base_url + "/chat/completions", json=chat(*messages, stream=False)).json()
        return reply["choices"][0]

    first = answer(user("do it"))
    call = first["message"]["tool_calls"][0]
    assert call["function"]["name"] == "write_file"
    history = [user("do it"), assistant_calls(call["id"], "write_file", call["function"]["arguments"])]
    history.append(tool_result(call["id"], "ok"))
    second = answer(*history)
    assert second["message"]["tool_calls"][0]["function"]["name"] == "read_file"
    history += [assistant_calls("c2", "read_file", "{}"), tool_result("c2", "hi")]
    third = answer(*history)
    assert third["finish_reason"] == "stop"
    assert third["message"]["content"] == "all done"
    assert answer(*history, {"role": "assistant", "content": "all done"}, user("again"))["finish_reason"] == (
        "tool_calls"
    )


def test_a_retried_request_gets_the_same_tool_call_ids(start_provider, http):
    provider = start_provider(TASK)
    body = chat(user("do it"), stream=False)
    ids = [
        http.post(provider.base_url + "/chat/completions", json=body).json()["choices"][0]["message"][
            "tool_calls"
        ][0]["id"]
        for _ in range(2)
    ]
    assert ids[0] == ids[1]


def test_the_default_script_echoes_the_last_user_message(start_provider, http):
    provider = start_provider()
    reply = http.post(
        provider.base_url + "/chat/completions", json=chat(user("one"), user("two"), stream=False)
    )
    assert reply.json()["choices"][0]["message"]["content"] == "echo: two"
    assert reply.json()["usage"]["completion_tokens"] == 3


def test_a_directive_selects_a_registered_script(start_provider, http):
    provider = start_provider(scripts={"writer": Script.text("written")})
    provider.register_script("late", Script.text("registered while running"))
    for text, expected in [
        ("[[script:writer]] go", "written"),
        ("[[script:late]]", "registered while running"),
    ]:
        reply = http.post(provider.base_url + "/chat/completions", json=chat(user(text), stream=False)).json()
        assert reply["choices"][0]["message"]["content"] == expected


def test_an_unknown_script_is_a_400(start_provider, http):
    provider = start_provider()
    reply = http.post(provider.base_url + "/chat/completions", json=chat(user("[[script:nope]]")))
    assert reply.status_code == 400
    assert "nope" in reply.json()["error"]["message"]
    assert provider.stats.rejections == {"unknown_script": 1}


def test_a_compaction_request_gets_a_deterministic_summary_that_keeps_the_script(start_provider, http):
    provider = start_provider(scripts={"w": Script.text("w")})
    history = [user("[[script:w]] build the thing"), {"role": "assistant", "content": "ok"}]
    body = chat(*history, user(f"{SUMMARY_MARKER} so far, briefly."), stream=False)
    summaries = [
        http.post(provider.base_url + "/chat/completions", json=body).json()["choices"][0]["message"][
            "content"
        ]
        for _ in range(2)
    ]
    assert summaries[0] == summaries[1]
    assert summaries[0].startswith(SUMMARY_PREFIX)
    assert "build the thing" in summaries[0]
    assert "[[script:w]]" in summaries[0]
    in_system = chat({"role": "system", "content": SUMMARY_MARKER.lower()}, user("x"), stream=False)
    content = http.post(provider.base_url + "/chat/completions", json=in_system).json()
    assert content["choices"][0]["message"]["content"].startswith(SUMMARY_PREFIX)


def test_malformed_requests_get_an_openai_400(start_provider, http):
    provider = start_provider()
    for body in (b"{not json", b'{"messages": []}', b'{"messages": [{"role": "robot", "content": "x"}]}'):
        reply = http.post(provider.base_url + "/chat/completions", content=body)
        assert reply.status_code == 400
        assert reply.json()["error"]["type"] == "invalid_request_error"
    assert provider.stats.rejections == {"bad_request": 3}


def test_the_official_client_streams_text_and_tool_calls(start_provider):
    provider = start_provider(TASK)
    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0)
    stream = client.chat.completions.create(model="m", messages=[user("do it")], stream=True)
    arguments = ""
    name = None
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or []:
            name = call.function.name or name
            arguments += call.function.arguments or ""
    assert name == "write_file"
    assert msgspec.json.decode(arguments) == WRITE[1]
    echo = start_provider()
    client = openai.OpenAI(base_url=echo.base_url, api_key="k", max_retries=0)
    completion = client.chat.completions.create(model="m", messages=[user("plain")])
    assert completion.choices[0].message.content == "echo: plain"


def test_finalanswer_rejects_zero_chunks():
    with pytest.raises(ValueError):
        FinalAnswer("x", chunks=0)


def test_finalanswer_rejects_a_finish_it_cannot_send():
    with pytest.raises(ValueError):
        FinalAnswer("x", finish="tool_calls")


def test_an_answer_cut_off_by_the_output_limit_ends_with_length(start_provider, http, sse_json):
    provider = start_provider(Script.task([FinalAnswer("and so the", finish="length")]))
    chunks = sse_json(http.post(provider.base_url + "/chat/completions", json=chat(user("hi"))).text)
    assert content_of(chunks) == "and so the"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_a_thought_streams_as_reasoning_content_before_the_answer(start_provider, http, sse_json):
    provider = start_provider(Script.task([ToolStep([WRITE], thought="First, write.")]), chunk_chars=6)
    chunks = sse_json(http.post(provider.base_url + "/chat/completions", json=chat(user("hi"))).text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    assert reasoning == "First, write."
    first_call = next(i for i, d in enumerate(deltas) if d.get("tool_calls"))
    assert all(not d.get("reasoning_content") for d in deltas[first_call:])
