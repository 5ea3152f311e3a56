"""The interpreter's garbage collector, tuned for a host: what lives as long as sessions stays out of its
passes, so that a full pass does not stop every stream in the process for a tenth of a second.

A host of hundreds of sessions holds a few hundred thousand objects the collector tracks (actors, their
mailboxes, histories), nearly all of them long-lived. The interpreter's own full pass walks all of them
each time the old objects grow by a quarter: 100-170 ms with the interpreter's lock held, at 400 sessions.
While a host holds the collector (``host.collector = true``, the default):

- the objects alive when a session's actors have started are frozen (``gc.freeze``): no pass walks them;
- a full collection of everything, frozen included, runs when sessions have stopped (closed, passivated,
  taken over) in numbers that may have left garbage behind, or when the frozen objects have doubled since
  the last one (so what is frozen is never more than twice what is alive);
- the youngest generation is collected every 10,000 allocations instead of every 700.

When the last host that holds it lets it go, the collector is as it was: thresholds restored, nothing frozen.
"""

from __future__ import annotations

import gc
import threading
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "full_collection_due", "hold", "release", "session_started", "session_stopped"]

YOUNG_THRESHOLD: Final = 10_000
"""Allocations between two collections of the youngest generation while a host holds the collector."""
_MIN_STOPS: Final = 32
"""Sessions stopped, at least, before their leftovers call for a full collection."""


def full_collection_due(stopped: int, live: int, frozen: int, frozen_after_last: int) -> bool:
    """Whether a full collection is due: ``stopped`` sessions have stopped since the last one and ``live``
    run now; ``frozen`` objects are frozen now and ``frozen_after_last`` were right after the last one."""
    if stopped >= max(_MIN_STOPS, live // 4):
        return True
    return frozen > 2 * max(frozen_after_last, 50_000)


class _Collector:
    """The process's one collector policy, shared by every host in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: tuple[int, int, int] | None = None
        self._live = 0
        self._stopped = 0
        self._frozen_after_last = 0

    def hold(self) -> None:
        with self._lock:
            self._holders += 1
            if self._holders == 1:
                self._saved = gc.get_threshold()
                _, older, oldest = self._saved
                gc.set_threshold(max(YOUNG_THRESHOLD, self._saved[0]), older, oldest)
                self._live = self._stopped = 0
                self._frozen_after_last = gc.get_freeze_count()

    def release(self) -> None:
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders == 0:
                if self._saved is not None:
                    gc.set_threshold(*self._saved)
                gc.unfreeze()

    def session_started(self) -> None:
        with self._lock:
            if not self._holders:
                return
            self._live += 1
            gc.collect(1)  # the young garbage goes first: what is frozen should be alive
            gc.freeze()
            self._collect_if_due()

    def session_stopped(self) -> None:
        with self._lock:
            if not self._holders:
                return
            self._live = max(0, self._live - 1)
            self._stopped += 1
            self._collect_if_due()

    def _collect_if_due(self) -> None:
        if full_collection_due(self._stopped, self._live, gc.get_freeze_count(), self._frozen_after_last):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self._stopped = 0
            self._frozen_after_last = gc.get_freeze_count()


_COLLECTOR = _Collector()


def hold() -> None:
    """A host starts: tune the collector for hosts (see the module), unless another host already did."""
    _COLLECTOR.hold()


def release() -> None:
    """A host stopped: when no other host holds the collector, it is as it was before the first."""
    _COLLECTOR.release()


def session_started() -> None:
    """A session's actors have started: freeze what is alive now (and collect everything when due)."""
    _COLLECTOR.session_started()


def session_stopped() -> None:
    """A session's actors have stopped: collect everything when enough have stopped since the last time."""
    _COLLECTOR.session_stopped()
