"""The provider edge, whole steps against the embedded provider: answers that are not event streams, and
429s that no retry can fix, are each decided on the first attempt."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest

from sampler import Completed, Failed, LlmErrorKind, ModelRequest, SamplerSettings, UserMessage, http_client
from sampler import sample_step as step
from sampler.fake import FakeProvider, Fault, FaultPlan, Script
from tests.sampler._scripted_transport import ScriptedTransport, Status, chunk, finish

pytestmark = pytest.mark.trio

PROVIDERS = ["openai", "anthropic"]
REQUEST = ModelRequest(model="m", messages=(UserMessage.of_text("hi"),))


async def run(provider: FakeProvider, kind: Any) -> tuple[Any, list[Any]]:
    settings = SamplerSettings(base_url=provider.base_url, provider=kind)
    events: list[Any] = []
    async with http_client(settings) as client:
        outcome = await step(
            REQUEST,
            request_id="r",
            client=client,
            settings=settings,
            emit=events.append,
            rng=random.Random(1),
        )
    return outcome, events


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_streamed_request_answered_as_one_json_body_completes_on_the_first_attempt(kind: Any) -> None:
    with FakeProvider(
        Script.text("the whole answer"), faults=FaultPlan.scripted([Fault.whole_answer()])
    ) as fake:
        outcome, _ = await run(fake, kind)
        stats = fake.stats
    assert isinstance(outcome, Completed), outcome
    assert outcome.message.text == "the whole answer" and outcome.attempts == 1
    assert outcome.usage is not None and outcome.usage.output_tokens > 0
    assert stats.requests == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_json_error_with_status_200_fails_at_once_with_the_providers_words(kind: Any) -> None:
    with FakeProvider(Script.text("never"), faults=FaultPlan.scripted([Fault.error_in_200()])) as fake:
        outcome, _ = await run(fake, kind)
        stats = fake.stats
    assert isinstance(outcome, Failed), outcome
    assert outcome.attempts == 1 and stats.requests == 1
    assert outcome.error.kind is LlmErrorKind.PROVIDER
    assert "upstream request failed" in outcome.error.message


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_used_up_budget_is_sent_once(kind: Any) -> None:
    with FakeProvider(
        Script.text("never"), faults=FaultPlan.scripted([Fault.budget_exhausted()] * 3)
    ) as fake:
        outcome, _ = await run(fake, kind)
        stats = fake.stats
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.kind is LlmErrorKind.QUOTA_EXHAUSTED and outcome.error.status == 429
    assert outcome.attempts == 1 and stats.requests == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_request_larger_than_the_per_minute_limit_is_an_overflow_not_a_retry(kind: Any) -> None:
    faults = FaultPlan.scripted([Fault.request_too_large_tpm()] * 3)
    with FakeProvider(Script.text("never"), faults=faults) as fake:
        outcome, _ = await run(fake, kind)
        stats = fake.stats
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.kind is LlmErrorKind.CONTEXT_OVERFLOW
    assert outcome.attempts == 1 and stats.requests == 1


async def scripted(reply: Status) -> tuple[Any, ScriptedTransport]:
    transport = ScriptedTransport([reply])
    settings = SamplerSettings(base_url="http://gateway.test/v1")
    async with httpx.AsyncClient(transport=transport) as client:
        outcome = await step(REQUEST, request_id="r", client=client, settings=settings, emit=lambda _: None)
    return outcome, transport


async def test_a_200_page_that_is_neither_stream_nor_answer_fails_at_once_quoting_it() -> None:
    page = b"<html><body>Please sign in to the corporate proxy</body></html>"
    outcome, transport = await scripted(Status(200, page, {"content-type": "text/html"}))
    assert isinstance(outcome, Failed) and outcome.attempts == 1 and len(transport.requests) == 1
    assert outcome.error.kind is LlmErrorKind.PROVIDER and outcome.error.code == "not_an_event_stream"
    assert "text/html" in outcome.error.message and "corporate proxy" in outcome.error.message


async def test_an_event_stream_labelled_as_plain_text_is_still_read() -> None:
    body = chunk("mislabelled ") + chunk("stream") + finish()
    outcome, _ = await scripted(Status(200, body, {"content-type": "text/plain"}))
    assert isinstance(outcome, Completed) and outcome.message.text == "mislabelled stream"
