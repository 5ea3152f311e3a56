"""Timers of the IoLoop: armed and cancelled from any thread, fired on the loop's thread in due order,
never fired once cancelled, and none left armed after shutdown."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from actors import IoLoop, Timer, TimerCancelled


@pytest.fixture
def loop() -> Iterator[IoLoop]:
    io = IoLoop()
    io.start()
    yield io
    assert io.shutdown(5.0) == []


def test_a_timer_fires_once_on_the_loop_thread(loop: IoLoop) -> None:
    threads: list[str] = []
    timer = loop.call_later(0.01, lambda: threads.append(threading.current_thread().name), name="t")
    timer.wait(5)
    assert threads == ["turnkeep-io"]
    assert timer.done and not timer.cancelled
    assert loop.pending_timers() == []


def test_timers_fire_in_the_order_they_come_due(loop: IoLoop) -> None:
    fired: list[str] = []
    timers = [
        loop.call_later(delay, lambda n=name: fired.append(n), name=name)
        for name, delay in (("third", 0.06), ("first", 0.0), ("second", 0.03))
    ]
    for timer in timers:
        timer.wait(5)
    assert fired == ["first", "second", "third"]


def test_a_cancelled_timer_never_fires_and_its_wait_says_so(loop: IoLoop) -> None:
    never = threading.Event()
    cancelled = loop.call_later(0.02, never.set, name="never")
    cancelled.cancel()
    cancelled.cancel()  # idempotent
    later = loop.call_later(0.05, lambda: None)
    later.wait(5)
    assert not never.is_set()
    with pytest.raises(TimerCancelled, match="never"):
        cancelled.wait(5)
    assert cancelled.cancelled and cancelled.done


def test_cancelling_after_it_fired_changes_nothing(loop: IoLoop) -> None:
    timer = loop.call_later(0.0, lambda: None)
    timer.wait(5)
    timer.cancel()
    assert not timer.cancelled
    timer.wait(5)  # still fired, not cancelled


def test_a_timer_due_before_the_armed_ones_wakes_the_loop(loop: IoLoop) -> None:
    far = loop.call_later(3600.0, lambda: None, name="far")
    soon = threading.Event()
    loop.call_later(0.01, soon.set, name="soon")
    assert soon.wait(5)  # not held back by the hour-long sleep
    assert loop.pending_timers() == ["far"]
    far.cancel()


def test_timers_armed_from_many_threads_all_fire(loop: IoLoop) -> None:
    count = 200
    fired = threading.Semaphore(0)

    def arm() -> None:
        for n in range(count):
            loop.call_later((n % 5) / 100, fired.release)

    threads = [threading.Thread(target=arm) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert all(fired.acquire(timeout=5) for _ in range(4 * count))


def test_a_failing_callback_is_logged_and_the_timers_after_it_still_fire(
    loop: IoLoop, caplog: pytest.LogCaptureFixture
) -> None:
    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="turnkeep.actors"):
        loop.call_later(0.0, fail, name="failing")
        loop.call_later(0.01, lambda: None).wait(5)
    assert any("failing" in record.getMessage() and record.exc_info for record in caplog.records)


def test_cancelled_timers_do_not_pile_up_in_the_heap(loop: IoLoop) -> None:
    timers = [loop.call_later(3600.0, lambda: None) for _ in range(5000)]
    for timer in timers:
        timer.cancel()
    loop.call_later(0.0, lambda: None).wait(5)  # a firing is when the heap is looked at
    assert len(loop._timers._heap) < 5000
    assert loop.pending_timers() == []


def test_after_shutdown_no_timer_fires_and_new_ones_are_cancelled_at_once() -> None:
    io = IoLoop()
    io.start()
    never = threading.Event()
    armed = io.call_later(0.05, never.set, name="armed")
    assert io.shutdown(5.0) == []
    late: Timer = io.call_later(0.0, never.set, name="late")
    assert armed.cancelled and late.cancelled
    with pytest.raises(TimerCancelled):
        armed.wait(1)
    assert not never.wait(0.1)


def test_waiting_on_a_timer_that_does_not_fire_in_time_is_a_timeout(loop: IoLoop) -> None:
    timer = loop.call_later(3600.0, lambda: None, name="slow")
    with pytest.raises(TimeoutError, match="slow"):
        timer.wait(0.01)
    timer.cancel()
