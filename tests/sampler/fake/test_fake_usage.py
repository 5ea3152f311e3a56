"""The usage the embedded provider reports: prompt, cached prefix and output, in both wire formats."""

from __future__ import annotations

from sampler.fake import Script


def openai_chat(*messages, stream=True):
    return {
        "model": "gpt-fake",
        "messages": list(messages),
        "stream": stream,
        "stream_options": {"include_usage": True},
    }


def anthropic_messages(*messages, stream=True):
    return {"model": "claude-fake", "max_tokens": 100, "messages": list(messages), "stream": stream}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


FIRST = user("a" * 400)
"""'user' + 400 characters: 101 tokens."""


def test_a_prompt_that_extends_an_earlier_one_reports_that_prefix_as_cached_openai(
    start_provider, http, sse_json
):
    provider = start_provider(Script.text("fine"))
    url = provider.base_url + "/chat/completions"
    first = sse_json(http.post(url, json=openai_chat(FIRST)).text)[-1]["usage"]
    assert first["prompt_tokens"] == 101
    assert first["prompt_tokens_details"] == {"cached_tokens": 0}
    follow = openai_chat(FIRST, assistant("fine"), user("more"))
    second = sse_json(http.post(url, json=follow).text)[-1]["usage"]
    assert second["prompt_tokens_details"] == {"cached_tokens": 101}
    assert second["prompt_tokens"] > 101
    stats = provider.stats
    assert (stats.input_tokens, stats.cached_tokens) == (101 + second["prompt_tokens"], 101)
    assert stats.output_tokens == first["completion_tokens"] + second["completion_tokens"]


def test_a_whole_response_reports_its_cached_tokens_openai(start_provider, http):
    provider = start_provider(Script.text("fine"))
    url = provider.base_url + "/chat/completions"
    http.post(url, json=openai_chat(FIRST, stream=False))
    body = http.post(url, json=openai_chat(FIRST, stream=False)).json()
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 101}
    assert provider.stats.cached_tokens == 101


def test_anthropic_reports_the_cached_prefix_as_cache_reads_apart_from_the_input(
    start_provider, http, sse_json
):
    provider = start_provider(Script.text("fine"))
    url = provider.base_url + "/messages"
    http.post(url, json=anthropic_messages(FIRST))
    payloads = sse_json(http.post(url, json=anthropic_messages(FIRST, assistant("fine"), user("more"))).text)
    usage = payloads[0]["message"]["usage"]
    assert usage["cache_read_input_tokens"] == 101
    assert usage["cache_creation_input_tokens"] == 0
    stats = provider.stats
    assert stats.cached_tokens == 101
    assert stats.input_tokens == 101 + usage["input_tokens"] + usage["cache_read_input_tokens"]


def test_a_different_prompt_reads_nothing_from_the_cache(start_provider, http, sse_json):
    provider = start_provider(Script.text("fine"))
    url = provider.base_url + "/chat/completions"
    http.post(url, json=openai_chat(FIRST))
    other = sse_json(http.post(url, json=openai_chat(user("b" * 400))).text)[-1]["usage"]
    assert other["prompt_tokens_details"] == {"cached_tokens": 0}


def test_a_stream_without_usage_asked_adds_nothing_to_the_reported_totals(start_provider, http):
    provider = start_provider(Script.text("fine"))
    body = {"model": "gpt-fake", "messages": [FIRST], "stream": True}
    http.post(provider.base_url + "/chat/completions", json=body)
    stats = provider.stats
    assert stats.completed == 1
    assert (stats.input_tokens, stats.output_tokens) == (0, 0)
