"""The worker threads that run strands (see :mod:`._strands`): a queue of ready strands (work under way
first), a pool that grows while its workers wait and shrinks when idle, and a watchdog for handlers that
never return."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._strands import Strand, _State, _Worker, current_worker

if TYPE_CHECKING:
    from .actor import Actor

__all__ = ["StrandPool"]

logger = logging.getLogger("turnkeep.actors")

_EXTRA_KEEPALIVE = 5.0
"""How long a worker beyond the pool's size waits for work before it ends."""
_IO_FIRST_STREAK = 8
"""Strands woken by I/O taken in a row, at most, while other ready strands wait."""


class StrandPool:
    """The worker threads of one :class:`~actors.ActorSystem`.

    ``size`` workers run strands; a worker waiting inside :func:`blocking` does not count, so the pool
    grows (up to ``max_workers``) while ready strands wait and every worker is busy or blocked, and the
    extra workers end after a few idle seconds. A handler running past ``stuck_after`` outside
    :func:`blocking` is stuck: ``on_stuck(actor, seconds)`` is called on the watchdog's thread and the
    worker is replaced.
    """

    def __init__(
        self,
        size: int,
        *,
        stuck_after: float,
        on_stuck: Callable[[Actor, float], None],
        max_workers: int = 512,
        name: str = "turnkeep-worker",
    ) -> None:
        if size < 1:
            raise ValueError("a strand pool needs at least one worker")
        self.size = size
        self.stuck_after = stuck_after
        self.max_workers = max(size, max_workers)
        self._on_stuck = on_stuck
        self._name = name
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: deque[Strand] = deque()
        self._io_first: deque[Strand] = deque()
        """Strands woken from the I/O loop's thread: taken before those of :attr:`_queue`."""
        self._streak = 0
        self._workers: set[_Worker] = set()
        self._all: list[_Worker] = []
        """Every worker started, for the join at shutdown (replaced and retired ones included)."""
        self._idle = 0
        self._wakes = 0
        self._blocked_count = 0
        self._serial = 0
        self._closed = False
        self._stop_watchdog = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name=f"{name}-watchdog", daemon=True)
        self._watchdog.start()

    def strand(self, name: str) -> Strand:
        """A new, empty strand."""
        return Strand(self, name)

    @property
    def workers(self) -> int:
        """Workers alive now (blocked ones included)."""
        with self._lock:
            return len(self._workers)

    def owns_current_thread(self) -> bool:
        """Whether the calling thread is one of this pool's workers."""
        worker = current_worker()
        return worker is not None and worker.pool is self

    def retire_worker_of(self, actor: Actor) -> None:
        """``actor``'s incarnation was killed while its worker is inside one of its callbacks: that worker
        ends when the callback returns, and another takes its place now."""
        runner = getattr(actor, "_tk_runner", None)
        worker = runner.worker if runner is not None else None
        if worker is not None:
            self._abandon(worker)

    def shutdown(self, deadline: float) -> list[str]:
        """Stop every worker (after the strands queued now); returns the names of threads still alive at
        ``deadline``."""
        with self._lock:
            self._closed = True
            self._work.notify_all()
        self._stop_watchdog.set()
        self._watchdog.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            threads = [w.thread for w in self._all]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        leftover = [t.name for t in threads if t.is_alive() and t is not threading.current_thread()]
        if self._watchdog.is_alive():
            leftover.append(self._watchdog.name)
        return leftover

    # -- used by strands and workers -----------------------------------------------------------------

    def _submit(self, strand: Strand, *, io_first: bool = False) -> None:
        with self._lock:
            (self._io_first if io_first else self._queue).append(strand)
            if self._idle > self._wakes:
                self._wakes += 1
                self._work.notify()
            elif not self._closed and self._short_locked():
                self._spawn_locked()

    def _short_locked(self) -> bool:
        """Whether fewer than ``size`` workers can run strands now."""
        running = len(self._workers) - self._blocked_count - self._idle
        return running + self._wakes < self.size and len(self._workers) < self.max_workers

    def _spawn_locked(self) -> None:
        self._serial += 1
        worker = _Worker(self, f"{self._name}-{self._serial}")
        self._workers.add(worker)
        self._all.append(worker)
        if len(self._all) > 4 * self.max_workers:
            self._all = [w for w in self._all if w.thread.is_alive() or w is worker]
        worker.thread.start()

    def _take(self, worker: _Worker) -> Strand | None:
        with self._lock:
            while not self._waiting_locked():
                if self._closed:
                    return None
                extra = len(self._workers) > self.size
                self._idle += 1
                notified = self._work.wait(_EXTRA_KEEPALIVE if extra else None)
                self._idle -= 1
                if notified and self._wakes:
                    self._wakes -= 1
                if not notified and not self._waiting_locked() and len(self._workers) > self.size:
                    self._workers.discard(worker)
                    return None
            if self._io_first and (self._streak < _IO_FIRST_STREAK or not self._queue):
                self._streak += 1
                return self._io_first.popleft()
            self._streak = 0
            return self._queue.popleft()

    def _waiting_locked(self) -> bool:
        """Whether ready strands wait for a worker."""
        return bool(self._queue or self._io_first)

    def _blocked(self, delta: int) -> None:
        with self._lock:
            self._blocked_count += delta
            idle = self._idle > self._wakes
            grows = delta > 0 and not idle and not self._closed
            if grows and self._waiting_locked() and self._short_locked():
                self._spawn_locked()

    def _gone(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
            if self._waiting_locked() and not self._closed and self._short_locked():
                self._spawn_locked()

    def _abandon(self, worker: _Worker) -> None:
        """Replace ``worker``: it ends once its callback returns; its strand goes on without it."""
        with worker._lock:
            if worker.abandoned:
                return
            worker.abandoned = True
        with self._lock:
            self._workers.discard(worker)
        strand = worker.strand
        if strand is not None:
            with strand._lock:
                resubmit = strand._holder is worker and bool(strand._queued)
                if strand._holder is worker:
                    strand._release_locked()
                    if not resubmit:
                        strand._state = _State.IDLE
            if resubmit:
                self._submit(strand)
        with self._lock:
            if self._waiting_locked() and not self._closed and self._short_locked():
                self._spawn_locked()

    def _watch(self) -> None:
        interval = min(1.0, max(0.05, self.stuck_after / 4))
        while not self._stop_watchdog.wait(interval):
            now = time.monotonic()
            with self._lock:
                workers = list(self._workers)
            for worker in workers:
                since = worker.since
                if since is None or worker.depth or now - since < self.stuck_after:
                    continue
                with worker._lock:
                    since = worker.since
                    stuck = since is not None and not worker.depth and now - since >= self.stuck_after
                    actor = worker.actor if stuck else None
                    if actor is not None:
                        worker.discard = True
                if actor is None:
                    continue
                self._abandon(worker)
                try:
                    self._on_stuck(actor, now - (since or now))
                except Exception:
                    logger.exception("ending a stuck actor failed")
