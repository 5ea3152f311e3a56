"""The host's provider gate in whole turns: a refusal one session meets pauses the others' requests, a
wait past the gate's deadline fails the step saying so, and a provider's rate limit is met by pacing
instead of a storm of refusals."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from sampler.fake import FakeProvider, Fault, FaultPlan, RateLimit, Script
from shell import events as ev
from shell.host import AgentHost
from shell.messages import Subscribe, UserPrompt
from tests.shell._settings import settings_for
from tests.shell.test_host import KEY

DEADLINE = 30.0


def turn(host: AgentHost, root: Path, session_id: str, text: str) -> queue.Queue[Any]:
    """Open ``session_id``, subscribe a queue to it and send ``text``; the queue gets its events."""
    inbox: queue.Queue[Any] = queue.Queue()
    address = host.open(root / session_id, session_id=session_id)
    address.ask(Subscribe(inbox))
    address.tell(UserPrompt(text))
    return inbox


def crowd(host: AgentHost, root: Path, sessions: int) -> list[queue.Queue[Any]]:
    """``sessions`` sessions opened first, then every one's prompt sent at once; their inboxes."""
    opened = []
    for n in range(sessions):
        inbox: queue.Queue[Any] = queue.Queue()
        address = host.open(root / f"s{n}", session_id=f"s{n}")
        address.ask(Subscribe(inbox))
        opened.append((address, inbox))
    for n, (address, _) in enumerate(opened):
        address.tell(UserPrompt(f"n{n}"))
    return [inbox for _, inbox in opened]


def until_end(inbox: queue.Queue[Any]) -> list[Any]:
    events = [inbox.get(timeout=DEADLINE)]
    while not isinstance(events[-1], ev.TERMINAL_EVENTS):
        events.append(inbox.get(timeout=DEADLINE))
    return events


def until(inbox: queue.Queue[Any], kind: type) -> list[Any]:
    events = [inbox.get(timeout=DEADLINE)]
    while not isinstance(events[-1], kind):
        events.append(inbox.get(timeout=DEADLINE))
    return events


def test_a_refusal_with_retry_after_pauses_every_sessions_requests_at_the_gate(tmp_path: Path) -> None:
    refusal = Fault(kind="rate_limit", http_status=429, retry_after=1)
    with FakeProvider(Script.echo(), faults=FaultPlan.scripted([refusal])) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_PROVIDER__LIMITS__QUEUED_AFTER="0.05")
        with AgentHost(settings, credentials=KEY) as host:
            first = turn(host, tmp_path, "first", "one")
            until(first, ev.Retrying)
            others = [turn(host, tmp_path, name, name) for name in ("second", "third")]
            ends = [until_end(inbox) for inbox in (first, *others)]
            status = host.describe_gate()
        requests = provider.stats.requests
    assert all(isinstance(events[-1], ev.TurnCompleted) for events in ends)
    for events in ends[1:]:
        queued = [e for e in events if isinstance(e, ev.Queued)]
        assert queued and queued[0].reason == "cool_down", events
    assert requests == 4  # the refused one again, and each of the others once: none sent into the pause
    assert status.startswith("provider gate: 0 in flight")


def test_a_wait_past_the_gates_deadline_fails_the_turn_saying_so(tmp_path: Path) -> None:
    long_pause = Fault(kind="rate_limit", http_status=429, retry_after=60)
    with FakeProvider(Script.echo(), faults=FaultPlan.scripted([long_pause])) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_PROVIDER__LIMITS__MAX_WAIT="0.3")
        with AgentHost(settings, credentials=KEY) as host:
            first = turn(host, tmp_path, "first", "one")
            until(first, ev.Retrying)
            second = until_end(turn(host, tmp_path, "second", "two"))
    end = second[-1]
    assert isinstance(end, ev.TurnFailed) and end.kind == "rate_limit"
    assert "waited 0.3 s in the provider gate (cool-down)" in end.message


LIMIT = RateLimit(requests_per_minute=600, burst_seconds=0.2)
"""10 requests a second, 2 at once."""


def test_sessions_sharing_a_rate_limited_provider_are_paced_not_refused(tmp_path: Path) -> None:
    with FakeProvider(Script.echo(), rate_limit=LIMIT) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_HOST__MAX_CONCURRENT_TURNS="20")
        with AgentHost(settings, credentials=KEY) as host:
            ends = [until_end(inbox)[-1] for inbox in crowd(host, tmp_path, 20)]
        stats = provider.stats
    assert all(isinstance(end, ev.TurnCompleted) for end in ends)
    # Before the first answer taught it the limit, the gate let a few requests out at once.
    assert stats.rejections.get("rate_limit", 0) <= 2, stats


def test_with_the_gate_disabled_each_session_meets_the_limit_on_its_own(tmp_path: Path) -> None:
    with FakeProvider(Script.echo(), rate_limit=LIMIT) as provider:
        settings = settings_for(
            provider,
            tmp_path,
            TURNKEEP_HOST__MAX_CONCURRENT_TURNS="20",
            TURNKEEP_PROVIDER__LIMITS__ENABLED="false",
        )
        with AgentHost(settings, credentials=KEY) as host:
            assert host.provider_gate is None and host.describe_gate() == "provider gate: disabled"
            for inbox in crowd(host, tmp_path, 20):
                until_end(inbox)
        stats = provider.stats
    assert stats.rejections.get("rate_limit", 0) >= 10, stats
