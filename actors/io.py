"""The IoLoop: one trio event loop, in its own thread, where everything that waits runs."""

from __future__ import annotations

import enum
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from ._strands import blocking, mark_io_thread
from ._timers import Timer, TimerCancelled, Timers
from .errors import ActorError
from .messages import JobFailed

if TYPE_CHECKING:
    from .address import Address

__all__ = ["IoLoop", "IoLoopClosed", "Job", "JobCancelled", "JobState", "Timer", "TimerCancelled"]

logger = logging.getLogger("turnkeep.actors")


class IoLoopClosed(ActorError):
    """The loop is not running (not started yet, or shut down)."""


class JobCancelled(ActorError):
    """Raised by :meth:`Job.wait` when the job was cancelled before it finished."""


class JobState(enum.StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Job:
    """One async function running on the IoLoop. Thread-safe: cancel or wait on it from anywhere."""

    __slots__ = (
        "_args",
        "_cancel_requested",
        "_done",
        "_error",
        "_fn",
        "_loop",
        "_result",
        "_scope",
        "id",
        "name",
        "owner",
        "state",
    )

    def __init__(
        self,
        loop: IoLoop,
        job_id: int,
        name: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        owner: Address | None,
    ) -> None:
        self.id = job_id
        self.name = name
        self.owner = owner
        self.state = JobState.PENDING
        self._loop = loop
        self._fn = fn
        self._args = args
        self._scope: trio.CancelScope | None = None
        self._cancel_requested = False
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.name!r} {self.state}>"

    @property
    def done(self) -> bool:
        """Whether the job has finished, failed or been cancelled."""
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        """The exception the job raised, if it failed."""
        return self._error

    def cancel(self) -> None:
        """Cancel the job's cancel scope; a job not started yet never starts. Idempotent."""
        self._cancel_requested = True
        if self._done.is_set():
            return
        self._loop._call_soon(self._cancel_in_loop)

    def _cancel_in_loop(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def wait(self, timeout: float) -> Any:
        """The job's return value; raises what it raised, :class:`JobCancelled`, or ``TimeoutError``."""
        with blocking():
            done = self._done.wait(timeout)
        if not done:
            raise TimeoutError(f"job {self.name!r} did not finish within {timeout:g} s")
        if self.state is JobState.CANCELLED:
            raise JobCancelled(f"job {self.name!r} was cancelled")
        if self._error is not None:
            raise self._error
        return self._result

    async def _run(self) -> None:
        try:
            try:
                with trio.CancelScope() as scope:
                    self._scope = scope
                    if self._cancel_requested:
                        scope.cancel()
                    self.state = JobState.RUNNING
                    try:
                        self._result = await self._fn(*self._args)
                    except Exception as exc:
                        self._fail(exc)
                        return
                    self.state = JobState.DONE
            except Exception as exc:
                # Raised beside the job's own cancellation (a group of Cancelled and an error, of which the
                # scope keeps the error): the job failed, and the loop that runs every job goes on.
                self._fail(exc)
                return
            if scope.cancelled_caught:
                self.state = JobState.CANCELLED
        except trio.Cancelled:
            self.state = JobState.CANCELLED
            raise
        finally:
            self._done.set()
            self._loop._forget(self)

    def _fail(self, exc: Exception) -> None:
        self._error = exc
        self.state = JobState.FAILED
        if self.owner is not None:
            self.owner.tell(JobFailed(job_id=self.id, name=self.name, error=exc))
        else:
            logger.error("job %r failed", self.name, exc_info=exc)


class IoLoop:
    """One trio loop in one thread, shared by every actor of a system.

    Guarantees: :meth:`submit` never blocks and works from any thread, including the loop's own; a job's
    exception is told to its owner as :class:`~actors.JobFailed` (or logged when it has none), never
    swallowed; :meth:`shutdown` cancels every job and reports those that did not end within its deadline.
    """

    def __init__(self, name: str = "turnkeep-io") -> None:
        self._name = name
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._root_scope: trio.CancelScope | None = None
        self._ids = itertools.count(1)
        self._jobs: set[Job] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._ready = threading.Event()
        self._timers = Timers(self._call_soon)

    @property
    def running(self) -> bool:
        """Whether jobs can be submitted."""
        return self._token is not None and not self._closed

    @property
    def trio_token(self) -> trio.lowlevel.TrioToken:
        """The loop's token, for ``trio.from_thread`` calls."""
        if self._token is None:
            raise IoLoopClosed("the IoLoop has not been started")
        return self._token

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        return threading.current_thread() is self._thread

    def start(self, timeout: float = 5.0) -> None:
        """Start the loop's thread and return once it accepts jobs."""
        if self._thread is not None:
            raise RuntimeError("the IoLoop was already started")
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name=self._name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise IoLoopClosed(f"the IoLoop did not start within {timeout:g} s")

    async def _main(self) -> None:
        mark_io_thread()
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._root_scope = scope
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._timers.run, name="timers")
                self._ready.set()
                await trio.sleep_forever()

    def submit(
        self,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        name: str | None = None,
        owner: Address | None = None,
    ) -> Job:
        """Run ``await fn(*args)`` on the loop. After shutdown the job is returned already cancelled."""
        job_name = name or str(getattr(fn, "__qualname__", "job"))
        job = Job(self, next(self._ids), job_name, fn, args, owner)
        with self._lock:
            accepted = not self._closed and self._token is not None
            if accepted:
                self._jobs.add(job)
        if not accepted or not self._call_soon(self._spawn, job):
            self._forget(job)
            job.state = JobState.CANCELLED
            job._done.set()
        return job

    def call_later(self, delay: float, callback: Callable[[], None], *, name: str = "timer") -> Timer:
        """Call ``callback()`` on the loop's thread after ``delay`` seconds, unless cancelled first. Never
        blocks and works from any thread; after shutdown the timer is returned already cancelled. An
        exception from ``callback`` is logged."""
        if self._closed or self._token is None:
            timer = Timer(0.0, callback, name, None)
            timer.cancel()
            return timer
        return self._timers.arm(delay, callback, name)

    def pending_timers(self) -> list[str]:
        """The names of the timers armed by :meth:`call_later` that have neither fired nor been
        cancelled, soonest first."""
        return self._timers.pending()

    def run(self, fn: Callable[..., Awaitable[Any]], *args: Any, timeout: float) -> Any:
        """Submit and wait: the job's result, or its error; cancelled and ``TimeoutError`` past ``timeout``.
        Not callable from the loop's own thread."""
        if self.in_loop_thread():
            raise RuntimeError("IoLoop.run() would block the loop it waits for")
        job = self.submit(fn, *args)
        try:
            return job.wait(timeout)
        except TimeoutError:
            job.cancel()
            raise

    def shutdown(self, timeout: float = 5.0) -> list[str]:
        """Cancel every job and stop the loop; returns the names of jobs still running at the deadline."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
        self._timers.close()
        if self._thread is None:
            return []
        if self._root_scope is not None:
            self._call_soon(self._root_scope.cancel)
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                return sorted(job.name for job in self._jobs)
        return []

    def _spawn(self, job: Job) -> None:
        if self._nursery is None or self._root_scope is None or self._root_scope.cancel_called:
            job.state = JobState.CANCELLED
            job._done.set()
            self._forget(job)
            return
        self._nursery.start_soon(job._run, name=job.name)

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> bool:
        token = self._token
        if token is None:
            return False
        try:
            token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            return False
        return True

    def _forget(self, job: Job) -> None:
        with self._lock:
            self._jobs.discard(job)
