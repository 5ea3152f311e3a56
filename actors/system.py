"""The ActorSystem: root supervisor, address registry, dead-letter log and IoLoop, with a clean end."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, cast

import msgspec

from ._pool import StrandPool
from ._strands import Mailbox, Strand
from .actor import Actor, _Incarnation
from .address import STOP, Address
from .chaos import ChaosPolicy
from .dead_letters import DeadLetterLog
from .errors import ChildStartError
from .io import IoLoop, Timer
from .messages import ExitReason
from .supervisor import ChildSpec, RestartIntensity, StartChild, StopChild, Strategy, Supervisor

__all__ = ["ActorSystem", "ShutdownReport"]

logger = logging.getLogger("turnkeep.actors")

_ROOT = "root"


class ShutdownReport(msgspec.Struct, frozen=True):
    """How a system ended: why, what had to be forced, and what (if anything) is still running."""

    reason: str
    forced: tuple[str, ...]
    """Actors that did not stop within their shutdown timeout and were killed."""
    unfinished_jobs: tuple[str, ...]
    """IoLoop jobs that ignored cancellation past the deadline."""
    leftover_threads: tuple[str, ...]
    """Threads started by the system that were still alive when shutdown returned."""
    dead_letters: int
    duration: float

    @property
    def clean(self) -> bool:
        """Whether everything stopped cooperatively and no thread was left behind."""
        return not (self.forced or self.unfinished_jobs or self.leftover_threads)


class ActorSystem:
    """Holds a tree of supervised actors and the IoLoop they share; use it as a context manager.

    ``ask_timeout`` is the default deadline of :meth:`Address.ask`; ``restart_wait`` bounds how long a
    message waits for a restarting actor before it becomes a dead letter. The root supervisor uses
    ``strategy`` and ``intensity``; when it fails, the system shuts itself down with the reason.
    :meth:`shutdown` stops every actor cooperatively (each ``on_stop`` runs), then the IoLoop, and reports
    what had to be forced; after it, no thread started by the system is left running, barring a handler
    that never returns (reported in :attr:`ShutdownReport.leftover_threads`).
    """

    def __init__(
        self,
        *,
        ask_timeout: float = 10.0,
        restart_wait: float = 5.0,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: RestartIntensity | None = None,
        chaos: ChaosPolicy | None = None,
        dead_letter_capacity: int = 10_000,
        workers: int = 4,
        stuck_after: float = 60.0,
    ) -> None:
        self.ask_timeout = ask_timeout
        self.restart_wait = restart_wait
        self.dead_letters = DeadLetterLog(dead_letter_capacity)
        self._lock = threading.Lock()
        self._shutdown_lock = threading.Lock()
        self._addresses: dict[str, Address] = {}
        self._live: set[_Incarnation] = set()
        self._forced: list[str] = []
        self._counters: collections.Counter[str] = collections.Counter()
        self._observers: list[Callable[[str, str], None]] = []
        self._report: ShutdownReport | None = None
        self._terminated = threading.Event()
        self._failure: str | None = None
        self.pool = StrandPool(workers, stuck_after=stuck_after, on_stuck=self._stuck)
        self.io = IoLoop()
        self.io.start()
        self.root = self.address(_ROOT)
        supervisor = Supervisor(strategy=strategy, intensity=intensity, chaos=chaos)
        self._root_incarnation = _Incarnation(self, self.root, 1, self._root_ended)
        self._launch(supervisor, self._root_incarnation)
        if not self._root_incarnation.started.wait(5.0) or self._root_incarnation.start_error:
            self.io.shutdown(1.0)
            self.pool.shutdown(time.monotonic() + 1.0)
            raise ChildStartError("the root supervisor did not start")

    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    # -- public API ----------------------------------------------------------------------------------

    def address(self, name: str) -> Address:
        """The address called ``name``; the same object every time. Messages to a name where no actor was
        ever started become dead letters."""
        with self._lock:
            address = self._addresses.get(name)
            if address is None:
                address = self._addresses[name] = Address(name, self)
            return address

    def forget(self, name: str) -> int:
        """Drop the addresses ``name`` and below it (``name/…``) where nothing runs or starts, nothing
        waits, nobody watches and no activator is set, so that a long-running system does not keep one for
        every actor that ever ended; returns how many were dropped. An address asked for again afterwards is
        a fresh one (``unbound``), which behaves as the dropped one would have; an ``Address`` object still
        held elsewhere keeps working (its messages become dead letters)."""
        below = name + "/"
        with self._lock:
            dropped = [
                key
                for key, address in self._addresses.items()
                if (key == name or key.startswith(below)) and address._forgettable()
            ]
            for key in dropped:
                del self._addresses[key]
        return len(dropped)

    def spawn(self, spec: ChildSpec, parent: Address | None = None) -> Address:
        """Start a child under ``parent`` (default: the root supervisor) and return its address once its
        ``on_start`` has finished. Raises :class:`~actors.ChildStartError` or ``ValueError``."""
        target = parent or self.root
        result: Address = target.ask(StartChild(spec), timeout=spec.start_timeout + self.ask_timeout)
        return result

    def stop(self, name: str, parent: Address | None = None, timeout: float | None = None) -> bool:
        """Stop the child ``name`` of ``parent`` for good; False when there is no such child."""
        result: bool = (parent or self.root).ask(StopChild(name), timeout=timeout or self.ask_timeout + 30)
        return result

    def watch(self, target: Address, watcher: Address) -> None:
        """Tell ``watcher`` a :class:`~actors.Down` each time an incarnation at ``target`` ends.

        As OTP's monitors do for a process that does not exist, a watch placed while no incarnation is
        running or starting at ``target`` is answered with one ``Down(reason=NOPROC)``; unlike a monitor, it
        stays in place and also covers the incarnations that may start there later.
        """
        target._add_watcher(watcher)

    def unwatch(self, target: Address, watcher: Address) -> None:
        """Stop the notices of :meth:`watch`."""
        target._remove_watcher(watcher)

    def metrics(self) -> dict[str, int]:
        """Counters since start: crashes, restarts, chaos_crashes, chaos_drops, killed, dead_letters."""
        with self._lock:
            counts = dict(self._counters)
        counts["dead_letters"] = self.dead_letters.total
        return counts

    def observe(self, observer: Callable[[str, str], None]) -> None:
        """Call ``observer(fact, address_name)`` for every supervision fact from now on, from the thread
        where it happens: ``"restart"`` (an actor is started again), ``"escalation"`` (a supervisor gave
        up) and ``"crash"`` (an incarnation crashed). An observer that raises is logged and kept."""
        with self._lock:
            self._observers.append(observer)

    @property
    def terminated(self) -> bool:
        """Whether the system has shut down."""
        return self._terminated.is_set()

    def wait_terminated(self, timeout: float) -> bool:
        """Wait until the system has shut down (by :meth:`shutdown` or a root failure)."""
        return self._terminated.wait(timeout)

    @property
    def report(self) -> ShutdownReport | None:
        """The shutdown report, once the system has shut down."""
        return self._report

    def shutdown(self, timeout: float = 10.0, reason: str = "shutdown requested") -> ShutdownReport:
        """Stop everything cooperatively within ``timeout`` and report what had to be forced.
        Idempotent; must not be called from an actor's own thread (use :meth:`request_shutdown`)."""
        if self._is_actor_thread():
            raise RuntimeError("shutdown() would wait for the calling actor; use request_shutdown()")
        with self._shutdown_lock:
            if self._report is not None:
                return self._report
            started = time.monotonic()
            deadline = started + timeout
            root = self._root_incarnation
            if not root.exited.is_set():
                root.stop_requested = True
                ref = self._root_ref
                self.root._begin_stop(ref, STOP, restarting=False)
                if not root.exited.wait(max(0.0, deadline - time.monotonic())):
                    root.killed = True
                    self._record_forced(f"{_ROOT}: did not stop within the shutdown timeout")
            self.root._close("the system has shut down")
            unfinished = self.io.shutdown(max(0.1, deadline - time.monotonic()))
            with self._lock:
                addresses = list(self._addresses.values())
            for address in addresses:
                address.set_activator(None)
                address._close("the system has shut down")
            leftover = self._join_threads(deadline)
            self._report = ShutdownReport(
                reason=self._failure or reason,
                forced=tuple(self._forced),
                unfinished_jobs=tuple(unfinished),
                leftover_threads=tuple(leftover),
                dead_letters=self.dead_letters.total,
                duration=time.monotonic() - started,
            )
            self._terminated.set()
            if not self._report.clean:
                logger.warning("shutdown was not clean: %s", self._report)
            return self._report

    def request_shutdown(self, reason: str = "shutdown requested", timeout: float = 10.0) -> None:
        """Start :meth:`shutdown` on a thread of its own and return at once; safe from any thread."""
        threading.Thread(
            target=self.shutdown, kwargs={"timeout": timeout, "reason": reason}, name="turnkeep-shutdown"
        ).start()

    # -- used by the runtime -------------------------------------------------------------------------

    def _launch(self, actor: Actor, incarnation: _Incarnation, strand: Strand | None = None) -> None:
        """Start ``incarnation`` of ``actor`` on ``strand`` (a new one of its own when None)."""
        strand = strand or self.pool.strand(incarnation.address.name)
        actor._attach(incarnation, strand.runner(actor, cast(Mailbox, actor.actor_inbox)))
        if incarnation.address is self.root:
            self._root_ref = actor.actor_ref
        with self._lock:
            self._live.add(incarnation)
        incarnation.address._expect()
        actor._start_actor_loop()

    def _incarnation_ended(self, incarnation: _Incarnation) -> None:
        with self._lock:
            self._live.discard(incarnation)
            crashed = incarnation.exit_reason is ExitReason.CRASHED
            if crashed:
                self._counters["crashes"] += 1
        if crashed:
            self._tell_observers("crash", incarnation.address.name)
        if not incarnation.killed:
            incarnation.address._notify_down(
                incarnation.exit_reason, incarnation.exit_error, incarnation.number
            )

    def _root_ended(self, incarnation: _Incarnation) -> None:
        self._incarnation_ended(incarnation)
        if incarnation.stop_requested:
            return
        self._failure = f"the root supervisor failed: {incarnation.exit_error!r}"
        logger.error("%s; shutting the system down", self._failure)
        self.request_shutdown(self._failure)

    def _record_forced(self, what: str) -> None:
        with self._lock:
            self._forced.append(what)
            self._counters["killed"] += 1

    def _count(self, counter: str, fact: tuple[str, str] | None = None) -> None:
        with self._lock:
            self._counters[counter] += 1
        if fact is not None:
            self._tell_observers(*fact)

    def _tell_observers(self, fact: str, name: str) -> None:
        with self._lock:
            observers = list(self._observers)
        for observer in observers:
            try:
                observer(fact, name)
            except Exception:
                logger.exception("a supervision observer failed")

    def _schedule(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.io.call_later(delay, callback, name="restart-wait")

    def _stuck(self, actor: Actor, seconds: float) -> None:
        self._count("stuck")
        actor._tk_abandon(seconds)

    def _is_actor_thread(self) -> bool:
        return self.pool.owns_current_thread()

    def _join_threads(self, deadline: float) -> list[str]:
        leftover = self.pool.shutdown(deadline)
        io_thread = self.io._thread
        if io_thread is not None and io_thread.is_alive():
            leftover.append(io_thread.name)
        return leftover

    def __repr__(self) -> str:
        state = "terminated" if self.terminated else "running"
        return f"<turnkeep.ActorSystem {state}, {len(self._live)} actors>"

    def _debug_state(self) -> dict[str, Any]:
        with self._lock:
            return {name: a.status for name, a in self._addresses.items()}
