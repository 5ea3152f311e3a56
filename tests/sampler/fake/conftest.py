"""Fixtures for the fake provider's tests: providers that always stop, a loopback client, an SSE reader."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest

from sampler.fake import FakeProvider
from tests import _waiting as waiting

Event = tuple[str | None, str]


def parse_sse(text: str) -> list[Event]:
    """(event name, data) for every event of an SSE body, in order; fails on anything that is not SSE."""
    events: list[Event] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            field, sep, value = line.partition(":")
            assert sep, f"not an SSE field line: {line!r}"
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            else:
                raise AssertionError(f"unexpected SSE field {field!r}")
        events.append((name, "\n".join(data)))
    return events


def json_events(events: list[Event]) -> list[Any]:
    """The decoded data of each event, except OpenAI's [DONE]."""
    return [msgspec.json.decode(data) for _, data in events if data != "[DONE]"]


@pytest.fixture
def start_provider() -> Iterator[Callable[..., FakeProvider]]:
    """Start a provider with the given arguments; every one started is stopped after the test."""
    started: list[FakeProvider] = []

    def start(*args: Any, **kwargs: Any) -> FakeProvider:
        provider = FakeProvider(*args, **kwargs).start()
        started.append(provider)
        return provider

    yield start
    for provider in started:
        provider.stop()


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    """An httpx client with an API key and short timeouts."""
    with httpx.Client(headers={"authorization": "Bearer test-key"}, timeout=5.0) as client:
        yield client


@pytest.fixture
def wait_until() -> Callable[[Callable[[], bool]], None]:
    """Wait (at most 2 s) for a condition another thread makes true; fails the test if it never is."""

    def wait(condition: Callable[[], bool]) -> None:
        assert waiting.wait_until(condition, timeout=2.0), "condition not met within 2 s"

    return wait


@pytest.fixture
def sse() -> Callable[[str], list[Event]]:
    """The SSE parser: body text to (event name, data) pairs."""
    return parse_sse


@pytest.fixture
def sse_json() -> Callable[[str], list[Any]]:
    """Body text to the decoded data of each SSE event, [DONE] left out."""
    return lambda text: json_events(parse_sse(text))
