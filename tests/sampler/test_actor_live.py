"""SamplerActor against the embedded provider on a real socket, for both provider adapters."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Actor, ActorSystem, ChildSpec, handles
from sampler import (
    Cancelled,
    CancelSample,
    Completed,
    Failed,
    LlmErrorKind,
    ModelRequest,
    Sample,
    SamplerActor,
    SamplerRuntime,
    SamplerSettings,
    StepRetrying,
    StepText,
    UserMessage,
)
from sampler.fake import FakeProvider, Fault, FaultPlan, Script
from sampler.retry import RetryPolicy
from tests.actors.conftest import system_threads

PROVIDERS = ["openai", "anthropic"]


class Collector(Actor):
    def __init__(self, inbox: queue.Queue[Any]) -> None:
        super().__init__()
        self.inbox = inbox

    @handles(object)
    def collect(self, message: Any) -> None:
        self.inbox.put(message)


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    before = system_threads()
    with ActorSystem() as sys:
        yield sys
    assert sys.report is not None and sys.report.clean
    assert system_threads() - before == set()


def start(
    system: ActorSystem, provider: FakeProvider, kind: str, **settings: Any
) -> tuple[Any, queue.Queue[Any]]:
    inbox: queue.Queue[Any] = queue.Queue()
    system.spawn(ChildSpec("collector", lambda: Collector(inbox)))
    base_url = provider.base_url
    runtime = SamplerRuntime(
        SamplerSettings(
            base_url=base_url, provider=kind, idle_timeout=settings.pop("idle_timeout", 5.0), **settings
        ),  # type: ignore[arg-type]
        api_key=lambda: "test-key",
        seed=1,
    )
    return system.spawn(ChildSpec("sampler", lambda: SamplerActor(runtime))), inbox


def until_outcome(inbox: queue.Queue[Any]) -> list[Any]:
    events = []
    while True:
        event = inbox.get(timeout=10)
        events.append(event)
        if isinstance(event, Completed | Failed | Cancelled):
            return events


REQUEST = ModelRequest(model="fake-model", messages=(UserMessage.of_text("hello there"),))


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_step_streams_and_completes(system: ActorSystem, kind: str) -> None:
    with FakeProvider(Script.text("Hello from the embedded provider.")) as provider:
        sampler, inbox = start(system, provider, kind)
        sampler.tell(Sample("r1", "1", REQUEST, "collector"))
        events = until_outcome(inbox)
    outcome = events[-1]
    assert isinstance(outcome, Completed)
    assert outcome.message.text == "Hello from the embedded provider."
    assert "".join(e.text for e in events if isinstance(e, StepText)) == outcome.message.text
    assert outcome.usage is not None and outcome.usage.input_tokens > 0


@pytest.mark.parametrize("kind", PROVIDERS)
def test_transient_faults_are_retried_on_a_real_socket(system: ActorSystem, kind: str) -> None:
    faults = FaultPlan.scripted(
        [
            Fault.rate_limit(retry_after_ms=20),
            Fault.reset(after_chunks=2),
            Fault.overloaded(retry_after_ms=20),
        ]
    )
    policy = RetryPolicy(base_delay=0.01, max_delay=0.05)
    with FakeProvider(Script.text("Eventually fine."), faults=faults) as provider:
        sampler, inbox = start(system, provider, kind, policy=policy)
        sampler.tell(Sample("r1", "1", REQUEST, "collector"))
        events = until_outcome(inbox)
        injected = provider.stats
    outcome = events[-1]
    assert isinstance(outcome, Completed), outcome
    assert outcome.message.text == "Eventually fine."
    assert outcome.attempts == 4
    kinds = [e.kind for e in events if isinstance(e, StepRetrying)]
    assert kinds == [LlmErrorKind.RATE_LIMIT, LlmErrorKind.CONNECTION, LlmErrorKind.OVERLOADED]
    assert injected is not None


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_cancel_mid_stream_returns_the_partial_answer(system: ActorSystem, kind: str) -> None:
    faults = FaultPlan.scripted([Fault.stall(after_chunks=6, hang=True)])
    with FakeProvider(
        Script.text("A long answer that will never finish streaming."), faults=faults
    ) as provider:
        sampler, inbox = start(system, provider, kind, coalesce_interval=0.0)
        sampler.tell(Sample("r1", "1", REQUEST, "collector"))
        first = inbox.get(timeout=10)
        assert isinstance(first, StepText)
        sampler.tell(CancelSample("r1"))
        events = [first, *until_outcome(inbox)]
    outcome = events[-1]
    assert isinstance(outcome, Cancelled)
    assert outcome.partial.interrupted
    assert outcome.partial.text and "A long answer".startswith(outcome.partial.text[:5])


@pytest.mark.parametrize("kind", PROVIDERS)
def test_an_expired_token_is_reported_as_auth(system: ActorSystem, kind: str) -> None:
    faults = FaultPlan.scripted([Fault.token_expired()])
    with FakeProvider(Script.text("unreachable"), faults=faults) as provider:
        sampler, inbox = start(system, provider, kind)
        sampler.tell(Sample("r1", "1", REQUEST, "collector"))
        outcome = until_outcome(inbox)[-1]
    assert isinstance(outcome, Failed)
    assert outcome.error.kind is LlmErrorKind.AUTH
    assert outcome.attempts == 1


def test_steps_run_one_at_a_time_in_order(system: ActorSystem) -> None:
    with FakeProvider(Script.echo()) as provider:
        sampler, inbox = start(system, provider, "openai")
        for n in range(3):
            request = ModelRequest(model="fake-model", messages=(UserMessage.of_text(f"message {n}"),))
            sampler.tell(Sample(f"r{n}", "1", request, "collector"))
        outcomes = [until_outcome(inbox)[-1] for _ in range(3)]
    assert [o.request_id for o in outcomes] == ["r0", "r1", "r2"]
    assert all(isinstance(o, Completed) for o in outcomes)
