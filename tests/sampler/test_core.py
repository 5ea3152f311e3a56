"""sample_step: every retry path, idle timeouts, projection fallbacks and cancellation, on a virtual clock."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
import trio

from sampler.core import FILTERED_MESSAGE, ProjectionMemory, SamplerSettings, sample_step
from sampler.errors import LlmErrorKind
from sampler.events import (
    Cancelled,
    Completed,
    Failed,
    Projection,
    StepProjectionFallback,
    StepRetrying,
    StepText,
)
from sampler.messages import ImagePart, ModelRequest, TextPart, UserMessage
from sampler.retry import RetryPolicy
from tests.sampler._scripted_transport import ScriptedTransport, Status, Stream, chunk, finish, stream_of

pytestmark = pytest.mark.trio

REQUEST = ModelRequest(model="m", messages=(UserMessage.of_text("hello"),))
SETTINGS = SamplerSettings(base_url="http://provider.test/v1", idle_timeout=30.0)
OVERLOADED = Status(503, {"error": {"message": "Service Unavailable", "type": "server_error"}})


async def run(
    script: list[Any], request: ModelRequest = REQUEST, **kwargs: Any
) -> tuple[Any, list[Any], Any]:
    transport = ScriptedTransport(script)
    events: list[Any] = []
    settings = kwargs.pop("settings", SETTINGS)
    async with httpx.AsyncClient(transport=transport) as client:
        outcome = await sample_step(
            request,
            request_id="r1",
            client=client,
            settings=settings,
            emit=events.append,
            rng=random.Random(1),
            **kwargs,
        )
    return outcome, events, transport


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def test_a_stream_completes_with_the_whole_message_and_coalesced_deltas(autojump_clock: Any) -> None:
    outcome, events, _ = await run([Stream(stream_of("The quick brown fox jumps", pieces=12))])
    assert isinstance(outcome, Completed)
    assert outcome.message.text == "The quick brown fox jumps"
    assert outcome.attempts == 1
    assert outcome.usage is not None and outcome.usage.output_tokens == 7
    deltas = of(events, StepText)
    assert "".join(d.text for d in deltas) == outcome.message.text
    assert len(deltas) < 12
    assert events[-1] is outcome


async def test_transient_failures_back_off_exponentially_up_to_the_cap(autojump_clock: Any) -> None:
    started = trio.current_time()
    outcome, events, transport = await run([OVERLOADED] * 10)
    assert isinstance(outcome, Failed)
    assert outcome.attempts == 10
    assert len(transport.requests) == 10
    assert "gave up after 10 attempts" in outcome.error.message
    delays = [e.delay for e in of(events, StepRetrying)]
    bases = [0.5, 1, 2, 4, 8, 16, 32, 32, 32]
    assert len(delays) == len(bases)
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay <= base * 1.25
    assert trio.current_time() - started == pytest.approx(sum(delays))
    assert [e.attempt for e in of(events, StepRetrying)] == list(range(1, 10))


async def test_the_attempt_budget_is_configurable(autojump_clock: Any) -> None:
    settings = SamplerSettings(base_url="http://p/v1", policy=RetryPolicy(max_attempts=3))
    outcome, _, transport = await run([OVERLOADED] * 3, settings=settings)
    assert isinstance(outcome, Failed) and outcome.attempts == 3
    assert len(transport.requests) == 3


async def test_a_retry_after_from_the_provider_replaces_the_backoff(autojump_clock: Any) -> None:
    limited = Status(
        429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"retry-after": "7"}
    )
    outcome, events, _ = await run([limited, Stream(stream_of("ok"))])
    assert isinstance(outcome, Completed) and outcome.attempts == 2
    assert [e.delay for e in of(events, StepRetrying)] == [7.0]
    assert of(events, StepRetrying)[0].kind is LlmErrorKind.RATE_LIMIT


async def test_a_retry_after_longer_than_the_limit_is_not_waited_out(autojump_clock: Any) -> None:
    started = trio.current_time()
    limited = Status(429, {"error": {"message": "slow down"}}, {"retry-after": "600"})
    outcome, events, _ = await run([limited])
    assert isinstance(outcome, Failed)
    assert outcome.error.kind is LlmErrorKind.RATE_LIMIT
    assert "600 s" in outcome.error.message
    assert trio.current_time() == started
    assert of(events, StepRetrying) == []


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (
            Status(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
            "auth",
        ),
        (
            Status(
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 8192 tokens. However, your "
                        "messages resulted in 9000 tokens.",
                        "code": "context_length_exceeded",
                    }
                },
            ),
            "context_overflow",
        ),
        (
            Status(
                429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
            ),
            "quota_exhausted",
        ),
        (Status(413, b"<html><title>413 Request Entity Too Large</title></html>"), "request_too_large"),
        (Stream([b"data: {not json\n\n"]), "syntax"),
    ],
)
async def test_errors_a_retry_cannot_fix_fail_at_once(autojump_clock: Any, reply: Any, kind: str) -> None:
    outcome, events, transport = await run([reply])
    assert isinstance(outcome, Failed)
    assert outcome.error.kind == kind
    assert outcome.attempts == 1
    assert len(transport.requests) == 1
    assert of(events, StepRetrying) == []


async def test_cancelling_during_a_backoff_ends_the_step_at_once(autojump_clock: Any) -> None:
    events: list[Any] = []
    transport = ScriptedTransport([OVERLOADED] * 5)
    async with httpx.AsyncClient(transport=transport) as client:
        with trio.move_on_after(0.1):
            await sample_step(REQUEST, request_id="r1", client=client, settings=SETTINGS, emit=events.append)
    assert isinstance(events[-1], Cancelled)
    assert events[-1].partial.interrupted and events[-1].partial.text == ""
    assert len(transport.requests) == 1
    assert trio.current_time() == pytest.approx(0.1)


async def test_cancelling_mid_stream_returns_what_had_streamed(autojump_clock: Any) -> None:
    events: list[Any] = []
    transport = ScriptedTransport([Stream([chunk("Hello, "), chunk("wor"), 100.0, finish()])])
    async with httpx.AsyncClient(transport=transport) as client:
        with trio.move_on_after(5):
            await sample_step(REQUEST, request_id="r1", client=client, settings=SETTINGS, emit=events.append)
    cancelled = events[-1]
    assert isinstance(cancelled, Cancelled)
    assert cancelled.partial.text == "Hello, wor"
    assert cancelled.partial.interrupted


class RacingConnects(httpx.AsyncBaseTransport):
    """Connects as happy eyeballs does: two attempts in a nursery, so a cancel reaches both of them and
    the nursery raises it as a group of two ``Cancelled``."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(trio.sleep_forever)
        raise AssertionError("an attempt never ends by itself")


async def test_a_cancel_raised_as_a_group_of_cancellations_still_ends_the_step_cancelled(
    autojump_clock: Any,
) -> None:
    events: list[Any] = []
    async with httpx.AsyncClient(transport=RacingConnects()) as client:
        with trio.move_on_after(1) as scope:
            await sample_step(REQUEST, request_id="r1", client=client, settings=SETTINGS, emit=events.append)
    assert scope.cancelled_caught
    assert [type(e) for e in events] == [Cancelled]
    assert events[0].partial.interrupted and events[0].partial.text == ""


async def test_a_stream_that_goes_silent_times_out_and_is_retried(autojump_clock: Any) -> None:
    outcome, events, _ = await run([Stream([chunk("partial"), 500.0]), Stream(stream_of("fresh"))])
    assert isinstance(outcome, Completed)
    assert outcome.message.text == "fresh"
    retrying = of(events, StepRetrying)[0]
    assert retrying.kind is LlmErrorKind.TIMEOUT
    assert "30 s" in retrying.message


async def test_a_failed_attempts_partial_output_is_discarded(autojump_clock: Any) -> None:
    broken = Stream([chunk("Half an ans"), httpx.RemoteProtocolError("peer closed connection")])
    outcome, events, _ = await run([broken, Stream(stream_of("Whole answer"))])
    assert isinstance(outcome, Completed)
    assert outcome.message.text == "Whole answer"
    retrying = of(events, StepRetrying)[0]
    assert retrying.kind is LlmErrorKind.CONNECTION
    assert retrying.discard_partial is True
    # Everything streamed after the StepRetrying notice belongs to the answer.
    after = events[events.index(retrying) + 1 :]
    assert "".join(d.text for d in of(after, StepText)) == "Whole answer"


async def test_an_error_inside_a_200_stream_is_classified_and_retried(autojump_clock: Any) -> None:
    in_stream = Stream(
        [chunk("x"), b'data: {"error": {"message": "Overloaded", "type": "overloaded_error"}}\n\n']
    )
    outcome, events, _ = await run([in_stream, Stream(stream_of("ok"))])
    assert isinstance(outcome, Completed)
    assert of(events, StepRetrying)[0].kind is LlmErrorKind.OVERLOADED


async def test_an_empty_response_is_retried(autojump_clock: Any) -> None:
    outcome, events, _ = await run([Stream([finish()]), Stream(stream_of("now"))])
    assert isinstance(outcome, Completed)
    assert of(events, StepRetrying)[0].kind is LlmErrorKind.EMPTY_RESPONSE


async def test_a_stream_cut_short_without_done_is_retried(autojump_clock: Any) -> None:
    outcome, events, _ = await run([Stream([chunk("no end")]), Stream(stream_of("ended"))])
    assert isinstance(outcome, Completed)
    assert of(events, StepRetrying)[0].kind is LlmErrorKind.CONNECTION


async def test_a_filtered_answer_fails_without_retry(autojump_clock: Any) -> None:
    outcome, events, _ = await run([Stream([chunk("I can"), finish("content_filter")])])
    assert isinstance(outcome, Failed)
    assert outcome.error.kind is LlmErrorKind.PROVIDER
    assert outcome.error.filtered
    assert outcome.error.message == FILTERED_MESSAGE
    assert of(events, StepRetrying) == []


def with_images(n: int) -> ModelRequest:
    parts = tuple(ImagePart("image/png", data="aGVsbG8=") for _ in range(n))
    return ModelRequest(model="m", messages=(UserMessage((TextPart("look"), *parts)),))


def image_count(body: dict[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    )


TOO_LARGE = Status(413, {"error": {"message": "Request too large"}})


async def test_too_large_degrades_media_then_strips_it_without_spending_attempts(autojump_clock: Any) -> None:
    memory = ProjectionMemory()
    outcome, events, transport = await run(
        [TOO_LARGE, TOO_LARGE, Stream(stream_of("seen"))], request=with_images(4), memory=memory
    )
    assert isinstance(outcome, Completed)
    assert outcome.attempts == 1
    assert outcome.projections == (Projection.DEGRADED_MEDIA, Projection.STRIPPED_MEDIA)
    assert [image_count(body) for body in transport.requests] == [4, 2, 0]
    assert [e.projection for e in of(events, StepProjectionFallback)] == list(outcome.projections)
    assert of(events, StepRetrying) == []
    # The turn's next step starts where this one ended.
    _, _, again = await run([Stream(stream_of("next"))], request=with_images(5), memory=memory)
    assert image_count(again.requests[0]) == 0


async def test_a_rejected_image_strips_media(autojump_clock: Any) -> None:
    rejected = Status(
        400, {"error": {"message": "Invalid image: could not process image", "type": "invalid_request_error"}}
    )
    outcome, _, transport = await run([rejected, Stream(stream_of("ok"))], request=with_images(1))
    assert isinstance(outcome, Completed)
    assert outcome.projections == (Projection.STRIPPED_MEDIA,)
    assert image_count(transport.requests[1]) == 0


async def test_a_structure_error_resends_a_strict_projection(autojump_clock: Any) -> None:
    from sampler.messages import ToolMessage, ToolResult

    orphan = ModelRequest(
        model="m", messages=(UserMessage.of_text("hi"), ToolMessage(ToolResult("call_9", "stray result")))
    )
    rejected = Status(
        400,
        {
            "error": {
                "message": "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with 'tool_calls'."
            }
        },
    )
    outcome, _, transport = await run([rejected, Stream(stream_of("ok"))], request=orphan)
    assert isinstance(outcome, Completed)
    assert outcome.projections == (Projection.STRICT_STRUCTURE,)
    assert all(message["role"] != "tool" for message in transport.requests[1]["messages"])


async def test_a_shape_error_with_nothing_left_to_degrade_fails(autojump_clock: Any) -> None:
    outcome, events, transport = await run([TOO_LARGE])
    assert isinstance(outcome, Failed)
    assert outcome.error.kind is LlmErrorKind.REQUEST_TOO_LARGE
    assert of(events, StepProjectionFallback) == []
    assert len(transport.requests) == 1


async def test_streamed_text_is_never_held_back_longer_than_the_coalescing_interval(
    autojump_clock: Any,
) -> None:
    seen: list[tuple[float, str]] = []

    def emit(event: Any) -> None:
        if isinstance(event, StepText):
            seen.append((trio.current_time(), event.text))

    transport = ScriptedTransport([Stream([chunk("a"), chunk("b"), 5.0, chunk("c"), finish()])])
    async with httpx.AsyncClient(transport=transport) as client:
        outcome = await sample_step(REQUEST, request_id="r1", client=client, settings=SETTINGS, emit=emit)
    assert isinstance(outcome, Completed) and outcome.message.text == "abc"
    assert [text for _, text in seen] == ["a", "b", "c"]
    assert seen[1][0] == pytest.approx(SETTINGS.coalesce_interval)
    assert seen[2][0] == pytest.approx(5.0)
