"""Base URLs in either convention (with or without the API version) reach the same endpoint."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sampler import Completed, ModelRequest, SamplerSettings, UserMessage, http_client, sample_step
from sampler.fake import FakeProvider, Script
from sampler.providers import endpoint_url


@pytest.mark.parametrize(
    ("base_url", "path", "expected"),
    [
        ("https://api.openai.com/v1", "/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1/", "/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("https://api.anthropic.com", "/messages", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/", "/messages", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1", "/messages", "https://api.anthropic.com/v1/messages"),
        ("http://localhost:11434", "/chat/completions", "http://localhost:11434/v1/chat/completions"),
        (
            "https://openrouter.ai/api/v1",
            "/chat/completions",
            "https://openrouter.ai/api/v1/chat/completions",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "/chat/completions",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ),
        (
            "https://r.openai.azure.com/openai/deployments/gpt?api-version=2024-02-01",
            "/chat/completions",
            "https://r.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-02-01",
        ),
    ],
)
def test_the_endpoint_is_found_under_either_convention(base_url: str, path: str, expected: str) -> None:
    assert endpoint_url(base_url, path) == expected


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.trio
async def test_a_real_call_succeeds_with_a_base_url_with_or_without_v1(
    provider: Any, versioned: bool
) -> None:
    with FakeProvider(Script.text("hello there")) as fake:
        base_url = fake.base_url if versioned else fake.root_url
        settings = SamplerSettings(base_url=base_url, provider=provider)
        request = ModelRequest(model="m", messages=(UserMessage.of_text("hi"),))
        async with http_client(settings) as client:
            outcome = await sample_step(
                request,
                request_id="r",
                client=client,
                settings=settings,
                emit=lambda _: None,
                rng=random.Random(1),
            )
    assert isinstance(outcome, Completed) and outcome.message.text == "hello there"
