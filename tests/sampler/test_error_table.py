"""Specification by example: real error bodies of many providers and proxies, each classified as the kind
that lets the session act on it; and a classifier that never raises, whatever arrives."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampler.errors import LlmError, LlmErrorKind, classify_http_error
from sampler.errors._wordings import FIELDS, MEANINGS, WORDINGS

from .data.error_bodies import TABLE, Body

K = LlmErrorKind


@pytest.mark.parametrize(
    "entry", TABLE, ids=[f"{i:03d}-{b.provider}-{b.status}" for i, b in enumerate(TABLE)]
)
def test_every_real_body_is_classified_as_the_kind_the_session_can_act_on(entry: Body) -> None:
    error = classify_http_error(entry.status, entry.body, entry.headers)

    assert error.kind is entry.expected, (entry.source, error)
    assert error.status == entry.status
    assert error.message, "the provider's words are carried over"


def test_the_table_is_large_varied_and_sourced() -> None:
    providers = {entry.provider for entry in TABLE}

    assert len(TABLE) >= 150
    assert len(providers) >= 20
    assert all(entry.source.strip() for entry in TABLE)
    for needed in (
        "OpenAI",
        "Anthropic",
        "Gemini",
        "Amazon Bedrock",
        "Together",
        "Fireworks",
        "Cerebras",
        "LM Studio",
        "LiteLLM proxy",
        "Hugging Face TGI",
        "Ollama",
        "llama.cpp server",
        "xAI",
        "DeepSeek",
        "Mistral",
        "Groq",
        "OpenRouter",
        "Cloudflare",
    ):
        assert needed in providers, needed


@pytest.mark.parametrize(
    ("kind", "at_least"),
    [
        (K.CONTEXT_OVERFLOW, 30),
        (K.QUOTA_EXHAUSTED, 12),
        (K.IMAGE_FORMAT, 12),
        (K.REQUEST_STRUCTURE, 15),
        (K.RATE_LIMIT, 15),
        (K.AUTH, 10),
        (K.STATUS, 10),
        (K.PROVIDER, 10),
    ],
)
def test_every_family_is_represented(kind: LlmErrorKind, at_least: int) -> None:
    assert sum(entry.expected is kind for entry in TABLE) >= at_least


def test_a_request_larger_than_the_per_minute_limit_is_overflow_but_a_full_minute_is_a_rate_limit() -> None:
    too_large = (
        '{"error": {"message": "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, '
        'Requested 45000.", "type": "tokens", "code": "rate_limit_exceeded"}}'
    )
    full = (
        '{"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used '
        '29000, Requested 2000.", "type": "tokens", "code": "rate_limit_exceeded"}}'
    )

    assert classify_http_error(429, too_large, {}).kind is K.CONTEXT_OVERFLOW
    assert classify_http_error(429, full, {}).kind is K.RATE_LIMIT


@pytest.mark.parametrize(
    "message",
    [
        "Invalid 'user': string too long. Expected a string with maximum length 64, but got a string "
        "with length 80 instead.",
        "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, "
        "but got a string with length 65 instead.",
        "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array "
        "with length 129 instead.",
        "Invalid 'metadata.input_summary': string too long. Expected a string with maximum length 512, "
        "but got a string with length 513 instead.",
        "Invalid 'instructions': string too long. Expected a string with maximum length 1048576, but "
        "got a string with length 1048577 instead.",
        "metadata.user_id: String should have at most 256 characters",
        "tools.0.custom.description: String should have at most 1024 characters",
        "body.stop: List should have at most 4 items after validation, not 5",
    ],
)
def test_a_field_longer_than_allowed_is_a_parameter_error_not_an_overflow(message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})

    error = classify_http_error(400, body, {})

    assert (error.kind, error.message) == (K.PROVIDER, message)


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("messages[2].content", "Invalid 'messages[2].content': string too long."),
        ("input[4].content[0].text", "Invalid 'input[4].content[0].text': string too long."),
        ("messages", "Invalid 'messages': array too long."),
        (None, "messages.3.content.0.text: String should have at most 10485760 characters"),
        (None, "contents[7].parts[0].text: String should have at most 10485760 characters"),
    ],
)
def test_a_part_of_the_conversation_longer_than_allowed_is_an_overflow(
    param: str | None, message: str
) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": param}})

    assert classify_http_error(400, body, {}).kind is K.CONTEXT_OVERFLOW


def test_html_boilerplate_never_decides_the_kind() -> None:
    page = (
        "<html><head><title>example.com | 524: A timeout occurred</title></head><body>"
        "The origin is overloaded; the prompt is too long; "
        "your credit balance is too low; invalid image</body></html>"
    )

    assert classify_http_error(524, page, {}).kind is K.STATUS
    assert classify_http_error(524, page, {}).message == "example.com | 524: A timeout occurred"


def test_a_router_setting_named_in_a_gateway_message_is_not_an_overflow() -> None:
    message = "litellm.APIError: upstream failed. context_window_fallbacks=None"
    body = json.dumps({"error": {"message": message, "code": "500"}})

    assert classify_http_error(500, body, {}).kind is K.STATUS


def test_every_table_entry_of_the_classifier_names_its_source_and_compiles() -> None:
    for entry in WORDINGS:
        re.compile(entry.pattern)
        assert entry.source.strip(), entry
    for meaning in MEANINGS:
        assert len(meaning.groups) >= 2 and meaning.source.strip(), meaning
        for group in meaning.groups:
            re.compile(group)
    assert all(field.source.strip() and field.value for field in FIELDS)


_headers = st.dictionaries(
    st.sampled_from(["retry-after", "Retry-After-Ms", "x-amzn-ErrorType", "content-type", "x-other"]),
    st.text(max_size=40),
    max_size=4,
)


@settings(max_examples=400, deadline=None)
@given(status=st.integers(min_value=-1000, max_value=10_000), body=st.binary(max_size=2048), headers=_headers)
def test_the_classifier_never_raises_on_random_bytes(
    status: int, body: bytes, headers: dict[str, str]
) -> None:
    error = classify_http_error(status, body, headers)

    assert isinstance(error, LlmError) and isinstance(error.kind, LlmErrorKind)


_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=60),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "error",
                    "message",
                    "code",
                    "type",
                    "status",
                    "param",
                    "details",
                    "metadata",
                    "raw",
                    "errors",
                    "msg",
                    "reason",
                    "error_code",
                    "__type",
                    "retryDelay",
                    "@type",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(status=st.integers(min_value=100, max_value=999), value=_json_like, headers=_headers)
def test_the_classifier_never_raises_on_random_json_of_provider_shape(
    status: int, value: object, headers: dict[str, str]
) -> None:

    error = classify_http_error(status, json.dumps(value), headers)

    assert isinstance(error, LlmError) and error.status == status


def test_a_limit_per_minute_is_waited_out_but_one_per_day_is_not() -> None:
    def body(message: str) -> str:
        return json.dumps({"message": message, "type": "too_many_requests_error", "code": "quota_exceeded"})

    assert classify_http_error(429, body("Tokens per minute limit exceeded"), {}).kind is K.RATE_LIMIT
    assert classify_http_error(429, body("Requests per day limit exceeded"), {}).kind is K.QUOTA_EXHAUSTED
