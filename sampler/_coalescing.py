"""Streamed text forwarded as few deltas, every stream of a trio run flushed by one shared ticker."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Protocol

import trio

from .events import SamplerEvent, StepText, StepThought

__all__ = ["Coalescer"]


class _Attempt(Protocol):
    pending: list[str]
    """The text streamed and not yet forwarded (kept by the attempt: a cancelled step reports it)."""
    streamed: bool
    """Whether any text was forwarded."""


class Coalescer:
    """Forwards one stream's text (and reasoning) as few deltas: the first piece at once, then at most one
    delta of each per ``interval``, and no piece is held back longer than ``interval``; reasoning held
    with text goes first.

    Text waiting for its time is forwarded by the trio run's one ticker, not by a task of its own. An
    error the ticker meets forwarding it is raised by the next :meth:`chunk_done` or :meth:`flush`, in
    the stream's own task. After :meth:`close`, nothing more is forwarded.
    """

    __slots__ = (
        "_attempt",
        "_closed",
        "_emit",
        "_failure",
        "_interval",
        "_next",
        "_request_id",
        "_scheduled",
        "pending",
        "thoughts",
    )

    def __init__(
        self, emit: Callable[[SamplerEvent], None], request_id: str, interval: float, attempt: _Attempt
    ) -> None:
        self._emit = emit
        self._request_id = request_id
        self._interval = interval
        self._attempt = attempt
        self.pending = attempt.pending
        self.thoughts: list[str] = []
        self._next = 0.0
        self._scheduled = False
        self._closed = False
        self._failure: BaseException | None = None

    def chunk_done(self, now: float) -> None:
        """A chunk's pieces were added to :attr:`pending` or :attr:`thoughts`: forward them now if their
        time has come, else when it comes."""
        self._raise_failure()
        if not (self.pending or self.thoughts):
            return
        if now >= self._next:
            self.flush(now)
        elif not self._scheduled:
            self._scheduled = True
            _ticker().schedule(self, self._next)

    def flush(self, now: float | None = None) -> None:
        """Forward whatever waits, now."""
        self._raise_failure()
        if self.thoughts:
            self._emit(StepThought(self._request_id, "".join(self.thoughts)))
            self.thoughts.clear()
            if not self.pending:
                self._next = (trio.current_time() if now is None else now) + self._interval
        if self.pending:
            self._emit(StepText(self._request_id, "".join(self.pending)))
            self.pending.clear()
            self._attempt.streamed = True
            self._next = (trio.current_time() if now is None else now) + self._interval

    def close(self) -> None:
        """The stream ended (or failed, or was cancelled): forward nothing more."""
        self._closed = True

    def _due(self, now: float) -> float | None:
        """Called by the ticker at the time asked for: forward what waits, or name a later time."""
        if self._closed or self._failure is not None or not (self.pending or self.thoughts):
            self._scheduled = False
            return None
        if now < self._next:  # forwarded meanwhile by a chunk: its interval starts again
            return self._next
        self._scheduled = False
        try:
            self.flush(now)
        except Exception as exc:
            self._failure = exc
        return None

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is not None:
            self._failure = None
            raise failure


class _Ticker:
    """One task of a trio run that forwards every coalescer's waiting text when it comes due: all that
    are due at one wake-up go together, with one timer for all of them."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Coalescer]] = []
        self._order = itertools.count()
        self._sleep: trio.CancelScope | None = None

    def schedule(self, coalescer: Coalescer, due: float) -> None:
        heapq.heappush(self._heap, (due, next(self._order), coalescer))
        sleep = self._sleep
        if sleep is not None and due < sleep.deadline:
            sleep.deadline = due

    async def run(self) -> None:
        heap = self._heap
        while True:
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as sleep:
                self._sleep = sleep
                await trio.sleep_forever()
            self._sleep = None
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                coalescer = heapq.heappop(heap)[2]
                later = coalescer._due(now)
                if later is not None:
                    heapq.heappush(heap, (later, next(self._order), coalescer))


_TICKER: trio.lowlevel.RunVar[_Ticker] = trio.lowlevel.RunVar("turnkeep_coalescing_ticker")


def _ticker() -> _Ticker:
    """The ticker of the current trio run, started the first time it is asked for."""
    try:
        return _TICKER.get()
    except LookupError:
        ticker = _Ticker()
        _TICKER.set(ticker)
        trio.lowlevel.spawn_system_task(ticker.run, name="turnkeep coalescing ticker")
        return ticker
