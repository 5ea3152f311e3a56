"""What each wire reports about usage and the answering model, streamed or whole, read the same way."""

from __future__ import annotations

import json

from sampler._sse import SseEvent
from sampler.messages import Usage
from sampler.providers._whole import decode_whole
from sampler.providers.anthropic import AnthropicDecoder
from sampler.providers.openai import OpenAIDecoder


def test_an_openai_stream_gives_cached_and_reasoning_tokens_and_the_answering_model() -> None:
    decoder = OpenAIDecoder()
    chunk = {
        "model": "gpt-x-2026",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
    }
    usage = {
        "choices": [],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 12},
        },
    }
    for data in (chunk, usage):
        decoder.feed(SseEvent(None, json.dumps(data)))
    decoder.feed(SseEvent(None, "[DONE]"))
    result = decoder.finish()
    assert result.usage == Usage(120, 30, 100, 12)
    assert result.model == "gpt-x-2026"


def test_an_anthropic_stream_counts_cache_reads_and_writes_in_the_prompt_and_names_the_model() -> None:
    decoder = AnthropicDecoder()
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-y",
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5},
        },
    }
    decoder.feed(SseEvent("message_start", json.dumps(start)))
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}
    decoder.feed(SseEvent("message_delta", json.dumps(delta)))
    result = decoder.finish()
    assert result.usage == Usage(125, 7, 100)
    assert result.model == "claude-y"


def test_a_whole_openai_answer_reads_the_same_usage_details() -> None:
    body = {
        "model": "gpt-x-2026",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 50,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
    result = decode_whole(json.dumps(body))
    assert result is not None
    assert (result.usage, result.model) == (Usage(50, 5, 40, 2), "gpt-x-2026")


def test_a_whole_anthropic_answer_counts_its_cache_in_the_prompt() -> None:
    body = {
        "type": "message",
        "model": "claude-y",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 60, "output_tokens": 4},
    }
    result = decode_whole(json.dumps(body))
    assert result is not None
    assert (result.usage, result.model) == (Usage(63, 4, 60), "claude-y")


def test_a_whole_answer_without_usage_or_model_reports_none() -> None:
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]
    }
    result = decode_whole(json.dumps(body))
    assert result is not None
    assert (result.usage, result.model) == (None, None)
