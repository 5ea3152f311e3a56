"""Coalescer: streamed text forwarded as few deltas, every stream of a trio run flushed by one ticker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from sampler._coalescing import Coalescer
from sampler.events import StepText, StepThought

pytestmark = pytest.mark.trio

INTERVAL = 0.05


@dataclass
class Attempt:
    pending: list[str] = field(default_factory=list)
    streamed: bool = False


class Seen:
    """An emit callable: every event with the (virtual) time it was forwarded."""

    def __init__(self) -> None:
        self.events: list[tuple[float, Any]] = []

    def __call__(self, event: Any) -> None:
        self.events.append((trio.current_time(), event))

    def texts(self) -> list[tuple[float, str]]:
        return [(at, e.text) for at, e in self.events if isinstance(e, StepText)]


def coalescer(seen: Seen, request_id: str = "r1") -> Coalescer:
    return Coalescer(seen, request_id, INTERVAL, Attempt())


def piece(c: Coalescer, text: str) -> None:
    c.pending.append(text)
    c.chunk_done(trio.current_time())


async def test_the_first_piece_goes_at_once_and_the_next_when_the_interval_is_over(
    autojump_clock: Any,
) -> None:
    seen = Seen()
    c = coalescer(seen)
    start = trio.current_time()
    piece(c, "a")
    await trio.sleep(0.01)
    piece(c, "b")
    await trio.sleep(0.01)
    piece(c, "c")
    await trio.sleep(1)
    assert seen.texts() == [(start, "a"), (pytest.approx(start + INTERVAL), "bc")]


async def test_text_that_waits_is_never_held_longer_than_the_interval(autojump_clock: Any) -> None:
    seen = Seen()
    c = coalescer(seen)
    piece(c, "a")
    await trio.sleep(5)
    arrived = trio.current_time()
    piece(c, "b")
    await trio.sleep(0.001)
    piece(c, "c")
    await trio.sleep(1)
    times = [at for at, _ in seen.texts()]
    assert [text for _, text in seen.texts()] == ["a", "b", "c"]
    assert times[1] == arrived
    assert times[2] - times[1] == pytest.approx(INTERVAL)


async def test_at_most_one_delta_per_interval_even_when_a_chunk_forwards_before_the_ticker(
    autojump_clock: Any,
) -> None:
    seen = Seen()
    c = coalescer(seen)
    piece(c, "a")
    await trio.sleep(0.01)
    piece(c, "b")  # due at INTERVAL
    c.pending.append("c")
    c.chunk_done(trio.current_time() + INTERVAL)  # a chunk read late forwards "bc" itself
    await trio.sleep(0.02)
    piece(c, "d")
    await trio.sleep(1)
    texts = seen.texts()
    assert [text for _, text in texts] == ["a", "bc", "d"]
    assert texts[2][0] - texts[1][0] >= INTERVAL - 1e-9


async def test_reasoning_held_with_text_goes_first(autojump_clock: Any) -> None:
    seen = Seen()
    c = coalescer(seen)
    piece(c, "a")
    c.thoughts.append("think")
    piece(c, "b")
    await trio.sleep(1)
    kinds = [(type(e).__name__, e.text) for _, e in seen.events]
    assert kinds == [("StepText", "a"), ("StepThought", "think"), ("StepText", "b")]
    assert all(isinstance(e, StepText | StepThought) for _, e in seen.events)


async def test_a_closed_stream_forwards_nothing_more(autojump_clock: Any) -> None:
    seen = Seen()
    c = coalescer(seen)
    start = trio.current_time()
    piece(c, "a")
    piece(c, "b")
    c.close()
    await trio.sleep(1)
    assert seen.texts() == [(start, "a")]
    assert c.pending == ["b"]  # kept by the attempt, which reports it as what had streamed


async def test_every_stream_of_a_run_shares_one_task_for_its_deltas(autojump_clock: Any) -> None:
    seen = Seen()
    start = trio.current_time()
    streams = [coalescer(seen, f"r{i}") for i in range(50)]
    for c in streams:
        piece(c, "first")
    await trio.sleep(0)
    before = trio.lowlevel.current_statistics().tasks_living
    for c in streams:
        piece(c, "second")
    assert trio.lowlevel.current_statistics().tasks_living <= before + 1
    await trio.sleep(1)
    assert sorted(e.request_id for _, e in seen.events if e.text == "second") == sorted(
        f"r{i}" for i in range(50)
    )
    assert all(at == pytest.approx(start + INTERVAL) for at, e in seen.events if e.text == "second")


async def test_an_error_forwarding_waiting_text_is_raised_in_the_streams_own_task(
    autojump_clock: Any,
) -> None:
    calls: list[Any] = []

    def emit(event: Any) -> None:
        calls.append(event)
        if len(calls) == 2:
            raise RuntimeError("the subscriber broke")

    c = Coalescer(emit, "r1", INTERVAL, Attempt())
    piece(c, "a")
    piece(c, "b")
    await trio.sleep(1)  # the ticker's forward of "b" fails; the run goes on
    with pytest.raises(RuntimeError, match="the subscriber broke"):
        piece(c, "c")
