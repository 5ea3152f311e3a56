"""Supervisors: OTP restart strategies, restart types and restart intensity over actor children."""

from __future__ import annotations

import contextlib
import enum
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pykka

from ._strands import blocking
from .actor import Actor, _Incarnation, handles
from .address import STOP, Address, _Internal
from .chaos import ChaosPolicy
from .errors import ChildStartError, Refuse, SupervisorEscalation
from .messages import ExitReason

__all__ = [
    "ChildInfo",
    "ChildSpec",
    "Restart",
    "RestartIntensity",
    "StartChild",
    "StopChild",
    "Strategy",
    "Supervisor",
    "WhichChildren",
]


class Restart(enum.StrEnum):
    """When a child that ended is started again."""

    PERMANENT = "permanent"
    """Always."""
    TRANSIENT = "transient"
    """Only after a crash; not after a normal stop, nor after a child supervisor gave up (OTP's
    ``shutdown``). The child's spec stays, without an actor: a one_for_all or rest_for_one restart of its
    siblings starts it again."""
    TEMPORARY = "temporary"
    """Never; the child is removed when it ends."""


class Strategy(enum.StrEnum):
    """Which children a supervisor restarts when one of them crashes."""

    ONE_FOR_ONE = "one_for_one"
    """Only the crashed child."""
    ONE_FOR_ALL = "one_for_all"
    """Every child: the others are stopped (in reverse start order), then all start again in order."""
    REST_FOR_ONE = "rest_for_one"
    """The crashed child and the children started after it."""


@dataclass(frozen=True, slots=True)
class RestartIntensity:
    """At most ``max_restarts`` restarts within ``within`` seconds; one more makes the supervisor fail."""

    max_restarts: int = 3
    within: float = 5.0


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How a supervisor starts, restarts and stops one child.

    ``factory`` returns a new, not yet started :class:`Actor` (a :class:`Supervisor` for a subtree) each
    time it is called. ``shutdown_timeout`` bounds the cooperative stop; past it the child is killed.
    ``start_timeout`` bounds ``on_start``. ``chaos`` injects faults into this child (or, for a supervisor,
    into its whole subtree). ``shares_strand`` runs the child on its supervisor's strand: it never runs at
    the same time as the supervisor or the siblings that share it, and their messages to each other are
    handled without waking another thread; otherwise it gets a strand of its own.
    """

    name: str
    factory: Callable[[], Actor]
    restart: Restart = Restart.PERMANENT
    shutdown_timeout: float = 5.0
    start_timeout: float = 5.0
    chaos: ChaosPolicy | None = None
    shares_strand: bool = False


class StartChild(msgspec.Struct, frozen=True, tag=True):
    """Ask a supervisor to start a child; the reply is its :class:`Address`, or ChildStartError/ValueError."""

    spec: Any


class StopChild(msgspec.Struct, frozen=True, tag=True):
    """Ask a supervisor to stop a child for good and forget it; the reply says whether it existed."""

    name: str


class WhichChildren(msgspec.Struct, frozen=True, tag=True):
    """Ask a supervisor for its children; the reply is a tuple of :class:`ChildInfo` in start order."""


class ChildInfo(msgspec.Struct, frozen=True):
    """One child of a supervisor as it is now."""

    name: str
    address: str
    restart: Restart
    incarnation: int
    status: str


@dataclass(eq=False)
class _Child:
    spec: ChildSpec
    address: Address
    actor: Actor | None = None
    incarnation: int = 0


@dataclass(eq=False, slots=True)
class _ChildExited(_Internal):
    child: _Child
    """The supervisor's own record of the child: a successor supervisor has records of its own."""
    incarnation: int
    reason: ExitReason
    error: BaseException | None


@dataclass(eq=False)
class _Restarts:
    intensity: RestartIntensity
    times: deque[float] = field(default_factory=deque)

    def allow(self) -> bool:
        now = time.monotonic()
        while self.times and now - self.times[0] > self.intensity.within:
            self.times.popleft()
        if len(self.times) >= self.intensity.max_restarts:
            return False
        self.times.append(now)
        return True


class Supervisor(Actor):
    """Starts its children in order, restarts them by its strategy, and stops them in reverse order.

    A crash of a child is handled by ``strategy``; a child's restart type says whether it comes back.
    More restarts than ``intensity`` allows make the supervisor stop every child and fail itself with
    :class:`~actors.SupervisorEscalation`, which its own parent handles in turn. Children can be added at
    run time with :class:`StartChild`.

    As in OTP, a supervisor that ends for any reason ends its children first, and a restarted supervisor
    starts from its child specs: nothing its predecessor was told about its children reaches it.
    """

    def __init__(
        self,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: RestartIntensity | None = None,
        chaos: ChaosPolicy | None = None,
    ) -> None:
        super().__init__()
        self._initial = tuple(children)
        self._strategy = strategy
        self._restarts = _Restarts(intensity or RestartIntensity())
        self._subtree_chaos = chaos
        self._children: list[_Child] = []
        self._stopping = False

    def on_start(self) -> None:
        try:
            for spec in self._initial:
                self._add(spec)
        except BaseException:
            self._stop_all()
            raise

    def on_stop(self) -> None:
        self._stop_all()

    def on_failure(self, *_: Any) -> None:
        self._stop_all()

    # -- messages ------------------------------------------------------------------------------------

    @handles(StartChild)
    def _on_start_child(self, message: StartChild) -> Address:
        if not isinstance(message.spec, ChildSpec):
            raise Refuse(TypeError(f"StartChild needs a ChildSpec, got {type(message.spec).__name__}"))
        try:
            return self._add(message.spec)
        except (ChildStartError, ValueError) as exc:
            raise Refuse(exc) from exc

    @handles(StopChild)
    def _on_stop_child(self, message: StopChild) -> bool:
        child = self._find(message.name)
        if child is None:
            return False
        self._stop_child(child, restarting=False)
        self._children.remove(child)
        self.on_child_gone(child.address)
        return True

    @handles(WhichChildren)
    def _on_which_children(self, _: WhichChildren) -> tuple[ChildInfo, ...]:
        return tuple(
            ChildInfo(c.spec.name, c.address.name, c.spec.restart, c.incarnation, c.address.status)
            for c in self._children
        )

    @handles(_ChildExited)
    def _on_child_exited(self, message: _ChildExited) -> None:
        child = message.child
        if child not in self._children or child.incarnation != message.incarnation or self._stopping:
            return
        child.actor = None
        restart = child.spec.restart
        if restart is Restart.TEMPORARY:
            child.address._close("the temporary actor ended and is not restarted")
            self._children.remove(child)
            self.on_child_gone(child.address)
        elif restart is Restart.TRANSIENT and _ended_by_choice(message):
            # As in OTP, the spec stays: a later group restart starts it again.
            child.address._close("the transient actor ended and is not restarted")
        else:
            self._restart(child, message.error)

    # -- for subclasses ------------------------------------------------------------------------------

    def on_child_gone(self, address: Address) -> None:
        """Called once a child is no longer supervised: a temporary one that ended, or one stopped by
        :class:`StopChild`. Does nothing here; a supervisor whose children never come back may
        :meth:`ActorSystem.forget` their addresses."""

    def start_child(self, spec: ChildSpec) -> Address:
        """Start a child from inside one of this supervisor's own handlers (a subclass's, say) and return
        its address; it is supervised like any child. Raises :class:`ChildStartError` when it fails to
        start and :class:`ValueError` when the name is taken. From any other thread, ask the supervisor
        instead (``ActorSystem.spawn(spec, parent=...)``)."""
        return self._add(spec)

    def stop_children(self) -> None:
        """Stop every child now, in reverse start order, each within its shutdown timeout; none is
        restarted. For a subclass ending its own work (from one of its handlers or hooks)."""
        self._stop_all()

    # -- children ------------------------------------------------------------------------------------

    def _find(self, name: str) -> _Child | None:
        return next((c for c in self._children if c.spec.name == name), None)

    def _add(self, spec: ChildSpec) -> Address:
        if self._find(spec.name) is not None:
            raise ValueError(f"{self.address.name!r} already has a child named {spec.name!r}")
        prefix = "" if self.address is self.system.root else f"{self.address.name}/"
        address = self.system.address(prefix + spec.name)
        if address.alive:
            raise ValueError(f"an actor is already running at {address.name!r}")
        child = _Child(spec, address)
        try:
            self._launch(child)
        except ChildStartError:
            address._close("the actor failed to start")
            raise
        self._children.append(child)
        return address

    def _launch(self, child: _Child) -> None:
        spec = child.spec
        child.incarnation += 1
        name = child.address.name
        try:
            actor = spec.factory()
        except Exception as exc:
            raise ChildStartError(f"{name!r}: the factory raised {exc!r}") from exc
        if not isinstance(actor, Actor):
            raise ChildStartError(
                f"{name!r}: the factory returned {type(actor).__name__}, not a turnkeep.Actor"
            )
        chaos = spec.chaos or self._subtree_chaos
        if isinstance(actor, Supervisor):
            actor._subtree_chaos = actor._subtree_chaos or chaos
            dice = None
        else:
            dice = chaos.for_incarnation(name, child.incarnation) if chaos else None
        incarnation = _Incarnation(
            self.system, child.address, child.incarnation, lambda ended: self._child_ended(child, ended), dice
        )
        self.system._launch(actor, incarnation, self._tk_runner.strand if spec.shares_strand else None)
        with blocking():
            started = incarnation.started.wait(spec.start_timeout)
        if not started:
            self._kill(child, actor, f"on_start did not finish within {spec.start_timeout:g} s")
            raise ChildStartError(f"{name!r}: on_start did not finish within {spec.start_timeout:g} s")
        if incarnation.start_error is not None:
            err = incarnation.start_error
            raise ChildStartError(f"{name!r}: on_start raised {err!r}") from err
        child.actor = actor

    def _child_ended(self, child: _Child, incarnation: _Incarnation) -> None:
        """Runs in the child's thread as it ends."""
        self.system._incarnation_ended(incarnation)
        if incarnation.stop_requested or not incarnation.started.is_set() or incarnation.start_error:
            return
        self.address.tell(
            _ChildExited(child, incarnation.number, incarnation.exit_reason, incarnation.exit_error)
        )

    def _restart(self, failed: _Child, error: BaseException | None) -> None:
        while True:
            if not self._restarts.allow():
                self._escalate(failed, error)
            index = self._children.index(failed)
            if self._strategy is Strategy.ONE_FOR_ONE:
                group = [failed]
            elif self._strategy is Strategy.ONE_FOR_ALL:
                group = list(self._children)
            else:
                group = self._children[index:]
            for child in reversed(group):
                if child.actor is not None:
                    self._stop_child(child, restarting=child.spec.restart is not Restart.TEMPORARY)
            for child in [c for c in group if c is not failed and c.spec.restart is Restart.TEMPORARY]:
                child.address._close("a sibling crashed and temporary actors are not restarted")
                self._children.remove(child)
            try:
                for child in group:
                    if child in self._children:
                        self.system._count("restarts", ("restart", child.address.name))
                        self._launch(child)
                return
            except ChildStartError as exc:
                error = exc
                failed = next(c for c in group if c.actor is None and c in self._children)

    def _escalate(self, failed: _Child, error: BaseException | None) -> None:
        intensity = self._restarts.intensity
        self.system._count("escalations", ("escalation", self.address.name))
        self._stop_all()
        raise SupervisorEscalation(
            f"{self.address.name!r} gave up after more than {intensity.max_restarts} restarts within "
            f"{intensity.within:g} s; the last failure was in {failed.address.name!r}: {error!r}"
        ) from error

    def _stop_all(self) -> None:
        self._stopping = True
        # Children waiting for a restart will not get one: what waits for them fails now, so the
        # siblings blocked on them can stop in time.
        for child in self._children:
            if child.actor is None:
                child.address._close("its supervisor stopped before restarting it")
        for child in reversed(self._children):
            self._stop_child(child, restarting=False)
        self._children.clear()

    def _stop_child(self, child: _Child, *, restarting: bool) -> None:
        actor = child.actor
        if actor is not None:
            incarnation = actor._tk
            incarnation.stop_requested = True
            child.address._begin_stop(actor.actor_ref, STOP, restarting=restarting)
            with blocking():
                exited = incarnation.exited.wait(child.spec.shutdown_timeout)
            if not exited:
                self._kill(child, actor, f"did not stop within {child.spec.shutdown_timeout:g} s")
            child.actor = None
        if not restarting:
            child.address._close("the actor has stopped")

    def _kill(self, child: _Child, actor: Actor, why: str) -> None:
        incarnation = actor._tk
        incarnation.stop_requested = True
        incarnation.killed = True
        self.system._record_forced(f"{child.address.name}: {why} and was killed")
        child.address._detach(actor.actor_ref, actor.actor_inbox, reason="the actor was killed")
        child.address._notify_down(ExitReason.KILLED, None, incarnation.number)
        self.system.pool.retire_worker_of(actor)  # the worker it holds is replaced now
        with contextlib.suppress(pykka.ActorDeadError):
            actor.actor_ref.tell(STOP)  # ends the incarnation if it ever gets back to its mailbox


def _ended_by_choice(exit: _ChildExited) -> bool:
    """A normal stop, or a supervisor that gave up: in OTP both end with a reason (``normal``,
    ``shutdown``) after which a transient child is not restarted."""
    return exit.reason is ExitReason.NORMAL or isinstance(exit.error, SupervisorEscalation)
