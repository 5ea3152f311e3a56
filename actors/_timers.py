"""Timers of an IoLoop: one heap and one task for all of them, armed and cancelled from any thread."""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable

import trio

from ._strands import blocking
from .errors import ActorError

__all__ = ["Timer", "TimerCancelled", "Timers"]

logger = logging.getLogger("turnkeep.actors")

_COMPACT_AT = 1024
"""Cancelled timers kept in the heap, at least, before it is rebuilt without them."""


class TimerCancelled(ActorError):
    """Raised by :meth:`Timer.wait` when the timer was cancelled (or its loop stopped) before it fired."""


class Timer:
    """A callback due on the loop's thread at a time. Thread-safe: cancel or wait on it from anywhere; a
    timer cancelled before its time never fires."""

    __slots__ = ("_callback", "_cancelled", "_done", "_owner", "due", "name")

    def __init__(self, due: float, callback: Callable[[], None], name: str, owner: Timers | None) -> None:
        self.due = due
        """When it fires, on ``time.monotonic()``'s clock."""
        self.name = name
        self._callback: Callable[[], None] | None = callback
        self._cancelled = False
        self._done: threading.Event | None = None
        self._owner = owner

    def __repr__(self) -> str:
        return f"<Timer {self.name!r} {'cancelled' if self._cancelled else 'armed'}>"

    @property
    def cancelled(self) -> bool:
        """Whether it was cancelled before it fired."""
        return self._cancelled

    @property
    def done(self) -> bool:
        """Whether it fired or was cancelled."""
        return self._callback is None

    def cancel(self) -> None:
        """Make sure it does not fire, unless it already did. Idempotent."""
        if self._callback is not None:
            self._cancelled = True
            self._finish()
            if self._owner is not None:
                self._owner._dropped += 1  # a hint for compaction: an undercount only delays it

    def wait(self, timeout: float) -> None:
        """Return once it has fired; raises :class:`TimerCancelled`, or ``TimeoutError`` past ``timeout``."""
        done = self._done
        if done is None:
            done = self._done = threading.Event()
            if self._callback is None:
                done.set()
        with blocking():
            fired = done.wait(timeout)
        if not fired:
            raise TimeoutError(f"timer {self.name!r} did not fire within {timeout:g} s")
        if self._cancelled:
            raise TimerCancelled(f"timer {self.name!r} was cancelled")

    def _fire(self) -> None:
        callback = self._callback
        if callback is None or self._cancelled:
            return
        try:
            callback()
        except Exception:
            logger.exception("timer %r failed", self.name)
        finally:
            self._finish()

    def _finish(self) -> None:
        self._callback = None
        done = self._done
        if done is not None:
            done.set()


class Timers:
    """The timers of one trio run: :meth:`arm` from any thread; :meth:`run` is the task that fires them.

    Arming a timer later than every armed one costs a heap push under a lock and wakes nothing; only a
    timer that comes due first wakes the loop (through ``wake``) to shorten its sleep."""

    def __init__(self, wake: Callable[[Callable[[], None]], bool]) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._sleep: trio.CancelScope | None = None
        self._closed = False
        self._dropped = 0
        """About how many cancelled timers the heap holds."""

    def arm(self, delay: float, callback: Callable[[], None], name: str) -> Timer:
        """A timer calling ``callback()`` on the loop's thread ``delay`` seconds from now; one armed after
        :meth:`close` is cancelled already."""
        timer = Timer(time.monotonic() + max(0.0, delay), callback, name, self)
        with self._lock:
            if self._closed:
                timer.cancel()
                return timer
            heapq.heappush(self._heap, (timer.due, next(self._order), timer))
            first = self._heap[0][2] is timer
        if first and not self._wake(self._rearm):
            timer.cancel()
        return timer

    def pending(self) -> list[str]:
        """The names of the timers armed and neither fired nor cancelled, soonest first."""
        with self._lock:
            entries = sorted(self._heap)
        return [timer.name for _, _, timer in entries if not timer.done]

    def close(self) -> None:
        """Cancel every armed timer; any armed later is cancelled at once."""
        with self._lock:
            self._closed = True
            heap, self._heap = self._heap, []
        for _, _, timer in heap:
            timer.cancel()

    async def run(self) -> None:
        """Fire every timer when it comes due, until cancelled (then :meth:`close`)."""
        try:
            while True:
                with self._lock:
                    due = self._heap[0][0] if self._heap else math.inf
                with trio.CancelScope(deadline=_deadline(due)) as sleep:
                    self._sleep = sleep
                    await trio.sleep_forever()
                self._sleep = None
                for timer in self._take_due():
                    timer._fire()
        finally:
            self.close()

    def _take_due(self) -> list[Timer]:
        now = time.monotonic()
        due: list[Timer] = []
        with self._lock:
            heap = self._heap
            while heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[2]
                if not timer.done:
                    due.append(timer)
            if self._dropped >= _COMPACT_AT and self._dropped * 2 > len(heap):
                self._heap = [entry for entry in heap if not entry[2].done]
                heapq.heapify(self._heap)
                self._dropped = 0
        return due

    def _rearm(self) -> None:
        """On the loop's thread: wake the sleep to re-read the soonest due time."""
        sleep = self._sleep
        if sleep is not None:
            sleep.deadline = -math.inf


def _deadline(due: float) -> float:
    """``due`` (on ``time.monotonic()``'s clock) on the current trio run's clock."""
    if due == math.inf:
        return math.inf
    return trio.current_time() + (due - time.monotonic())
