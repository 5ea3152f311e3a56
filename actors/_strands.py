"""Strands: actors run, one message at a time each, on a small shared pool of worker threads.

A strand is a group of actors that run one after another, never at the same time: a message one of them
tells another is handled by the same worker right after the current handler, without waking a thread.
Each actor runs on one strand. Workers take ready strands from a queue (those made ready from the I/O
loop's thread first, see :func:`mark_io_thread`); a strand runs a bounded number of messages before it
goes to the back of the queue, so that no strand holds a worker for long.

Blocking is declared with :func:`blocking`: while a handler waits there, its strand's other actors go on
(on another worker), and the pool adds a worker if the ones it has are all busy or waiting. A handler
that runs past the pool's ``stuck_after`` outside :func:`blocking` is stuck: its worker is replaced, and
its actor's incarnation ends as a crash (:class:`~actors.StuckHandler`), which its supervisor handles.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pykka._envelope import Envelope

    from ._pool import StrandPool
    from .actor import Actor

__all__ = ["blocking"]

logger = logging.getLogger("turnkeep.actors")

_BUDGET = 64
"""Messages a strand handles before it yields its worker to the next ready strand."""

_local = threading.local()


def mark_io_thread() -> None:
    """Strands woken from the calling thread (the I/O loop's: answers to I/O) go before strands woken
    from any other thread, so that work under way is not held behind new work."""
    _local.io_first = True


class _Blocking:
    """The context manager :func:`blocking` returns (one for all: the worker keeps the nesting)."""

    __slots__ = ()

    def __enter__(self) -> None:
        worker: _Worker | None = getattr(_local, "worker", None)
        if worker is not None:
            worker._enter_blocking()

    def __exit__(self, *_: object) -> None:
        worker: _Worker | None = getattr(_local, "worker", None)
        if worker is not None:
            worker._leave_blocking()


_BLOCKING = _Blocking()


def blocking() -> contextlib.AbstractContextManager[None]:
    """Mark a wait inside a handler (a reply, a lock, a file or a database write): while it lasts, the
    other actors of the handler's strand go on, the pool may add a worker, and the time does not count
    towards the handler being stuck. Does nothing outside a worker; nests."""
    return _BLOCKING


def wait_helping(mate: Runner, answered: Callable[[], bool], deadline: float) -> None:
    """Before a handler blocks on a reply from ``mate``: when ``mate`` is an actor of the handler's own
    strand, ready to run, run it on this thread until ``answered()`` is true, it has nothing left to
    handle, or the monotonic ``deadline`` passes. An ask of a strand-mate is so answered by the asking
    thread itself, with no other worker needed. Only the asked actor runs here: another strand-mate (a
    supervisor waiting for the asker to stop, say) could wait on the handler that waits below it. Does
    nothing outside a worker, or where the handler no longer holds its strand."""
    worker = current_worker()
    if worker is not None:
        worker._help(mate, answered, deadline)


def current_worker() -> _Worker | None:
    """The worker running on this thread, if any."""
    return getattr(_local, "worker", None)


class _State(enum.Enum):
    IDLE = "idle"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"


class Mailbox:
    """An actor's inbox (pykka's ``ActorInbox``): putting a message makes its actor ready on its strand."""

    __slots__ = ("_items", "runner")

    def __init__(self) -> None:
        self._items: deque[Envelope[Any]] = deque()
        self.runner: Runner | None = None

    def put(self, envelope: Envelope[Any], /) -> None:
        self._items.append(envelope)
        runner = self.runner
        if runner is not None:
            runner.wake()

    def get(self) -> Envelope[Any]:
        raise RuntimeError("a strand's mailbox is never waited on")

    def get_nowait(self) -> Envelope[Any]:
        try:
            return self._items.popleft()
        except IndexError:
            raise queue.Empty from None

    def empty(self) -> bool:
        return not self._items


class Runner:
    """One actor incarnation's place on its strand."""

    __slots__ = ("actor", "begun", "mailbox", "state", "strand", "worker")

    def __init__(self, actor: Actor, mailbox: Mailbox, strand: Strand) -> None:
        self.actor = actor
        self.mailbox = mailbox
        self.strand = strand
        self.state = _State.IDLE
        self.begun = False
        self.worker: _Worker | None = None

    def wake(self) -> None:
        """There is something to run: make the runner ready (once) and its strand queued (once)."""
        self.strand._ready(self)


class Strand:
    """Actors that never run at the same time; see the module's docstring."""

    __slots__ = ("_holder", "_holder_blocked", "_lock", "_pool", "_queued", "_state", "name")

    def __init__(self, pool: StrandPool, name: str) -> None:
        self.name = name
        self._pool = pool
        self._lock = threading.Lock()
        self._queued: deque[Runner] = deque()
        self._state = _State.IDLE
        self._holder: _Worker | None = None
        self._holder_blocked = False

    def __repr__(self) -> str:
        return f"<Strand {self.name!r} {self._state.value}>"

    def runner(self, actor: Actor, mailbox: Mailbox) -> Runner:
        """A place on this strand for ``actor``; it runs (``on_start`` first) once :meth:`Runner.wake`."""
        runner = Runner(actor, mailbox, self)
        mailbox.runner = runner
        return runner

    def _ready(self, runner: Runner) -> None:
        with self._lock:
            if runner.state is not _State.IDLE:
                return
            submit = self._queue_locked(runner)
        if submit:
            self._pool._submit(self, io_first=getattr(_local, "io_first", False))

    def _queue_locked(self, runner: Runner) -> bool:
        """Queue ``runner``; True when the strand must now be submitted to the pool: it was idle, or its
        holder is blocked (and may be waiting for this very runner)."""
        runner.state = _State.READY
        self._queued.append(runner)
        if self._state is _State.IDLE:
            self._state = _State.READY
            return True
        if self._state is _State.RUNNING and self._holder_blocked:
            self._release_locked()
            return True
        return False

    def _release_locked(self) -> None:
        """The holder gives the strand up (it is blocked, or gone); the strand is queued for another."""
        holder = self._holder
        if holder is not None:
            holder.strand = None
        self._holder = None
        self._holder_blocked = False
        self._state = _State.READY

    def _requeue(self, runner: Runner) -> None:
        """``runner`` ran on a worker that no longer holds this strand: queue it again, or let it idle."""
        with self._lock:
            if not runner.mailbox._items:
                runner.state = _State.IDLE
                return
            submit = self._queue_locked(runner)
        if submit:
            self._pool._submit(self)


class _Worker:
    """One thread of the pool."""

    __slots__ = ("_lock", "abandoned", "actor", "depth", "discard", "pool", "since", "strand", "thread")

    def __init__(self, pool: StrandPool, name: str) -> None:
        self.pool = pool
        self.strand: Strand | None = None
        self.depth = 0
        self.since: float | None = None
        """When the handler now running began (or last left a blocking wait); None outside handlers."""
        self.actor: Actor | None = None
        self.abandoned = False
        """Replaced: the thread ends once the callback it is in returns."""
        self.discard = False
        """The handler now running was declared stuck: what it returns is dropped."""
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    # -- what actors call ----------------------------------------------------------------------------

    def enter_handler(self, actor: Actor) -> None:
        self.actor = actor
        self.since = time.monotonic()

    def leave_handler(self) -> bool:
        """The handler returned; False when it was declared stuck meanwhile (its result is discarded)."""
        with self._lock:
            self.since = None
            return not self.discard

    def _enter_blocking(self) -> None:
        self.depth += 1
        if self.depth > 1:
            return
        strand = self.strand
        if strand is not None:
            with strand._lock:
                if strand._holder is self:
                    strand._holder_blocked = True
                    release = bool(strand._queued)
                    if release:
                        strand._release_locked()
                else:
                    release = False
            if release:
                self.pool._submit(strand)
        self.pool._blocked(+1)

    def _leave_blocking(self) -> None:
        self.depth -= 1
        if self.depth:
            return
        self.pool._blocked(-1)
        strand = self.strand
        if strand is not None:
            with strand._lock:
                if strand._holder is self:
                    strand._holder_blocked = False
        if self.since is not None:
            self.since = time.monotonic()

    def _help(self, mate: Runner, answered: Callable[[], bool], deadline: float) -> None:
        strand = self.strand
        if strand is None or mate.strand is not strand or self.depth or self.abandoned:
            return
        actor, since, discard = self.actor, self.since, self.discard
        try:
            while not answered() and time.monotonic() < deadline:
                with strand._lock:
                    if (
                        self.strand is not strand
                        or strand._holder is not self
                        or mate.state is not _State.READY
                    ):
                        return
                    strand._queued.remove(mate)
                    mate.state = _State.RUNNING
                self._run_runner(mate, _BUDGET)
                if self.abandoned:
                    return
        finally:
            # The waiting handler goes on: a nested handler declared stuck does not make it stuck.
            with self._lock:
                self.actor, self.discard = actor, discard
                self.since = None if since is None else time.monotonic()

    # -- the loop ------------------------------------------------------------------------------------

    def _main(self) -> None:
        _local.worker = self
        try:
            while True:
                strand = self.pool._take(self)
                if strand is None:
                    return
                self._run(strand)
                if self.abandoned:
                    return
        finally:
            _local.worker = None
            self.pool._gone(self)

    def _run(self, strand: Strand) -> None:
        with strand._lock:
            strand._state = _State.RUNNING
            strand._holder = self
            self.strand = strand
        budget = _BUDGET
        while True:
            with strand._lock:
                if self.strand is not strand:
                    return
                if not strand._queued or budget <= 0:
                    self.strand = None
                    strand._holder = None
                    if not strand._queued:
                        strand._state = _State.IDLE
                        return
                    strand._state = _State.READY
                    resubmit = True
                else:
                    runner = strand._queued.popleft()
                    runner.state = _State.RUNNING
                    resubmit = False
            if resubmit:
                self.pool._submit(strand)
                return
            budget -= self._run_runner(runner, budget)
            if self.abandoned:
                return

    def _run_runner(self, runner: Runner, budget: int) -> int:
        actor = runner.actor
        items = runner.mailbox._items
        runner.worker = self
        handled = 0
        alive = True
        try:
            if not runner.begun:
                runner.begun = True
                alive = actor._tk_begin()
            while alive and handled < budget and items:
                handled += 1
                alive = actor._tk_step(items.popleft())
                if self.abandoned or self.strand is not runner.strand:
                    break
        except BaseException:
            logger.exception("the runtime failed while running %s", actor)
            alive = False
        finally:
            runner.worker = None
        if not alive:
            runner.state = _State.DONE
            if not self.discard:  # a stuck incarnation was ended by the watchdog already
                actor._tk_finish()
            return handled
        strand = runner.strand
        if self.strand is not strand:
            strand._requeue(runner)
            return handled
        with strand._lock:
            if items:
                runner.state = _State.READY
                strand._queued.append(runner)
            else:
                runner.state = _State.IDLE
        return max(handled, 1)
