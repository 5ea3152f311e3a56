"""The IoLoop: one trio loop for all waiting; jobs report, cancel and shut down within deadlines."""

from __future__ import annotations

import threading

import pytest
import trio

from actors import Actor, ActorSystem, ChildSpec, IoLoop, JobCancelled, JobFailed, JobState, handles


@pytest.fixture
def loop():
    io = IoLoop()
    io.start()
    yield io
    assert io.shutdown(5.0) == []


def test_a_job_runs_on_the_loop_thread_and_returns_its_result(loop: IoLoop) -> None:
    async def where() -> str:
        await trio.sleep(0)
        return threading.current_thread().name

    assert loop.run(where, timeout=5) == "turnkeep-io"


def test_cancelling_a_job_cancels_its_scope(loop: IoLoop) -> None:
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await trio.sleep_forever()

    job = loop.submit(forever)
    assert started.wait(5)
    job.cancel()
    with pytest.raises(JobCancelled):
        job.wait(5)
    assert job.state is JobState.CANCELLED


def test_a_job_that_fails_while_it_is_cancelled_fails_and_the_loop_runs_on(loop: IoLoop) -> None:
    """An error raised beside the cancellation (a group of Cancelled and the error, as a library's nursery
    raises when a connection fails while it is torn down) fails the job; it never ends the shared loop."""
    started = threading.Event()

    async def fails_when_cancelled() -> None:
        async def cleanup_that_fails() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise ConnectionError("the server went away during the teardown")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cleanup_that_fails)
            started.set()
            await trio.sleep_forever()

    job = loop.submit(fails_when_cancelled)
    assert started.wait(5)
    job.cancel()
    with pytest.raises(ExceptionGroup) as failed:
        job.wait(5)
    assert failed.group_contains(ConnectionError)
    assert job.state is JobState.FAILED

    async def still_there() -> str:
        return "running"

    assert loop.run(still_there, timeout=5) == "running"


def test_a_job_failure_is_told_to_its_owner(system: ActorSystem) -> None:
    received: list[JobFailed] = []
    got = threading.Event()

    class Owner(Actor):
        @handles(JobFailed)
        def failed(self, message: JobFailed) -> None:
            received.append(message)
            got.set()

    owner = system.spawn(ChildSpec("owner", Owner))

    async def broken() -> None:
        raise ValueError("bad frame")

    job = system.io.submit(broken, name="broken", owner=owner)
    assert got.wait(5)
    assert received[0].name == "broken"
    assert isinstance(received[0].error, ValueError)
    assert job.state is JobState.FAILED
    with pytest.raises(ValueError, match="bad frame"):
        job.wait(1)


def test_shutdown_cancels_every_job() -> None:
    io = IoLoop()
    io.start()

    async def forever() -> None:
        await trio.sleep_forever()

    jobs = [io.submit(forever) for _ in range(5)]
    assert io.shutdown(5.0) == []
    assert all(job.state is JobState.CANCELLED for job in jobs)
    late = io.submit(forever)
    assert late.done and late.state is JobState.CANCELLED


def test_a_job_that_ignores_cancellation_for_a_while_delays_shutdown_within_its_deadline() -> None:
    io = IoLoop()
    io.start()
    started = threading.Event()

    async def stubborn() -> None:
        with trio.CancelScope(shield=True):
            started.set()
            await trio.sleep(0.3)

    io.submit(stubborn, name="stubborn")
    assert started.wait(5)
    assert io.shutdown(0.05) == ["stubborn"]
    assert io._thread is not None
    io._thread.join(5)
    assert not io._thread.is_alive()


def test_call_later_runs_the_callback_unless_cancelled(loop: IoLoop) -> None:
    fired = threading.Event()
    never = threading.Event()
    loop.call_later(0.01, fired.set)
    cancelled = loop.call_later(0.05, never.set)
    cancelled.cancel()
    assert fired.wait(5)
    assert not never.wait(0.1)


def test_run_refuses_to_block_the_loop_from_inside(loop: IoLoop) -> None:
    async def inner() -> int:
        return 1

    async def outer() -> str:
        try:
            loop.run(inner, timeout=1)
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "would block" in loop.run(outer, timeout=5)
