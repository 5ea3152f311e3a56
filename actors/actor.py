"""Actors: pykka actors on strands, with typed handlers, one crash rule, and no silent loss."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pykka

from ._reply import Ask
from ._strands import Mailbox, Runner, blocking, current_worker
from .address import STOP, Address, Retry, StopRequest, _Internal
from .chaos import ChaosVerdict, _ChaosDice
from .errors import (
    ActorUnavailable,
    ChaosCrash,
    MessageDropped,
    Refuse,
    StuckHandler,
    SupervisorEscalation,
    UnhandledMessage,
)
from .messages import ExitReason

if TYPE_CHECKING:
    from .io import IoLoop
    from .system import ActorSystem

__all__ = ["Actor", "handles"]

logger = logging.getLogger("turnkeep.actors")

_HANDLES_ATTR = "__turnkeep_handles__"
F = TypeVar("F", bound=Callable[..., Any])


def handles(*message_types: type[Any]) -> Callable[[F], F]:
    """Mark a method of an :class:`Actor` as the handler of ``message_types`` (and their subclasses)."""
    if not message_types:
        raise TypeError("handles() needs at least one message type")

    def mark(method: F) -> F:
        setattr(method, _HANDLES_ATTR, message_types)
        return method

    return mark


@dataclass(eq=False)
class _Incarnation:
    """What the runtime knows about one incarnation of an actor."""

    system: ActorSystem
    address: Address
    number: int
    on_exit: Callable[[_Incarnation], None]
    chaos: _ChaosDice | None = None
    started: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    start_error: BaseException | None = None
    exit_reason: ExitReason = ExitReason.NORMAL
    exit_error: BaseException | None = None
    stop_requested: bool = False
    killed: bool = False
    current: tuple[Any, Ask | None, int, int] | None = None
    """The message whose handler runs now, with its ask and its crash counts."""


_MAX_INJECTED_REDELIVERIES = 3
"""A told message survives this many injected crashes in a row; one more makes it a dead letter."""


class _Crashed(Exception):
    pass


class Actor(pykka.Actor):
    """An actor whose handlers are methods marked ``@handles(MessageType)``.

    Guarantees:

    * one message at a time, dispatched by the message's type; the handler's return value is the reply to
      an ask;
    * a message with no handler is recorded as a dead letter, an asker gets
      :class:`~actors.UnhandledMessage`, and the actor keeps running;
    * a handler may raise :class:`~actors.Refuse` to answer with an error and keep running;
    * a handler that raises anything else is a crash whether the message was told or asked: an asker gets the
      exception; a told message is handed to the next incarnation once (its handler crashing again makes
      it a dead letter; a crash injected by a :class:`~actors.ChaosPolicy` happens before the handler
      runs, so it does not count against the message, which survives three of them in a row; the
      runtime's own bookkeeping, such as a supervisor's notice that a child ended, is never handed on); the
      incarnation ends at once (``on_stop`` does not run, ``on_failure`` does), messages still queued
      wait for the next incarnation, and the supervisor applies its strategy;
    * ``on_start`` runs before any message, ``on_stop`` after the last one on a cooperative stop;
    * a handler that runs past the system's ``stuck_after`` without returning or waiting inside
      :func:`~actors.blocking` ends the incarnation as a crash with :class:`~actors.StuckHandler` (what it
      returns later is dropped; ``on_failure`` runs on the runtime's watchdog thread).

    Actors run on strands of the system's worker pool, not on threads of their own (see
    :class:`~actors.ChildSpec`'s ``shares_strand``). They are started by a :class:`~actors.Supervisor`
    from a :class:`~actors.ChildSpec`, never with pykka's ``start()``; they reach each other only through
    :class:`~actors.Address`.
    """

    _handler_table: ClassVar[dict[type[Any], Callable[..., Any]]] = {}
    _tk: _Incarnation
    _tk_runner: Runner

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: dict[type[Any], str] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                for message_type in getattr(attr, _HANDLES_ATTR, ()):
                    names[message_type] = name
        # An override of a handler method, marked or not, handles the same types.
        cls._handler_table = {message_type: getattr(cls, name) for message_type, name in names.items()}

    # -- what handlers may use -----------------------------------------------------------------------

    @property
    def address(self) -> Address:
        """This actor's stable address."""
        return self._tk.address

    @property
    def system(self) -> ActorSystem:
        """The system this actor runs in."""
        return self._tk.system

    @property
    def io(self) -> IoLoop:
        """The system's shared trio loop, for everything that waits."""
        return self._tk.system.io

    @property
    def incarnation(self) -> int:
        """1 for the first start of this address's actor, then one more per restart."""
        return self._tk.number

    @property
    def stopping(self) -> bool:
        """Whether this incarnation has been asked to stop (a handler may cut long work short)."""
        return self._tk.stop_requested

    def stop_self(self) -> None:
        """Stop cooperatively after the messages already queued (``on_stop`` runs); the supervisor then
        restarts the actor if its restart type says so."""
        self.actor_ref.tell(STOP)

    # -- the loop ------------------------------------------------------------------------------------

    def _attach(self, incarnation: _Incarnation, runner: Runner) -> None:
        self._tk = incarnation
        self._tk_runner = runner

    @staticmethod
    def _create_actor_inbox() -> Mailbox:
        return Mailbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return pykka.ThreadingFuture()

    def _start_actor_loop(self) -> None:
        self._tk_runner.wake()

    def _tk_begin(self) -> bool:
        """Run ``on_start``; False when the incarnation ended there."""
        tk = self._tk
        try:
            self.on_start()
        except BaseException as exc:
            tk.start_error = exc
            self._end(ExitReason.CRASHED, exc, "on_start raised")
            return False
        else:
            if not tk.killed:
                tk.address._bind(self.actor_ref)
        finally:
            tk.started.set()
        return True

    def _tk_step(self, envelope: Any) -> bool:
        """Handle one envelope; False when the incarnation has ended."""
        tk = self._tk
        message = envelope.message
        if envelope.reply_to is not None:
            envelope.reply_to.set_exception(
                exc_info=(UnhandledMessage, UnhandledMessage("use Address.ask, not ActorRef.ask"), None)
            )
            return True
        if isinstance(message, StopRequest):
            if tk.killed:
                self._end(ExitReason.KILLED, None, "the actor was killed")
            else:
                self._stop_cooperatively()
            return False
        try:
            self._deliver(message)
        except _Crashed:
            return False
        return True

    def _tk_finish(self) -> None:
        """The incarnation has ended: watchers and the supervisor hear of it before anyone waiting wakes."""
        tk = self._tk
        try:
            tk.on_exit(tk)
        finally:
            tk.exited.set()

    def _tk_abandon(self, seconds: float) -> None:
        """End this incarnation as a crash because a handler has been stuck for ``seconds``; called from
        the pool's watchdog while that handler still runs (what it returns will be dropped)."""
        tk = self._tk
        current, tk.current = tk.current, None
        message, ask, crashes, injections = current if current is not None else (None, None, 0, 0)
        what = type(message).__name__ if message is not None else "a message"
        error = StuckHandler(
            f"{tk.address.name!r}: the handler of {what} ran for {seconds:.1f} s without returning or "
            "waiting in blocking(); its worker was replaced"
        )
        retry = None
        if ask is not None:
            ask.fail(error)
        elif message is None or isinstance(message, _Internal):
            pass
        elif crashes == 0:
            retry = Retry(message, 1, injections)
        else:
            tk.system.dead_letters.record(tk.address.name, message, f"stuck twice while handling it: {error}")
        self._end(ExitReason.CRASHED, error, f"was stuck in the handler of {what}", first=retry)
        self._tk_finish()

    def _deliver(self, message: Any) -> None:
        tk = self._tk
        ask: Ask | None = None
        crashes = injections = 0
        if type(message) is Retry:
            crashes, injections, message = message.crashes, message.injections, message.message
        if type(message) is Ask:
            ask = message
            if not ask.claim():
                tk.system.dead_letters.record(
                    tk.address.name, ask.message, "the asker gave up before delivery", was_ask=True
                )
                return
            message = ask.message
        if tk.killed:
            reason = "the actor was killed before handling it"
            self._reject(message, ask, reason, ActorUnavailable(f"{tk.address.name!r}: {reason}"))
            return
        handler = self._lookup(type(message))
        if handler is None:
            reason = f"{type(self).__name__} has no handler for {type(message).__name__}"
            self._reject(message, ask, reason, UnhandledMessage(f"{tk.address.name!r}: {reason}"))
            return
        injected = dropped = False
        result: Any = None
        error: BaseException | None = None
        tk.current = (message, ask, crashes, injections)
        worker = current_worker()
        if worker is not None:
            worker.enter_handler(self)
        try:
            if tk.chaos is not None:
                verdict, delay = tk.chaos.roll(message)
                if delay:
                    with blocking():
                        time.sleep(delay)
                if verdict is ChaosVerdict.DROP:
                    dropped = True
                elif verdict is ChaosVerdict.CRASH:
                    tk.system._count("chaos_crashes")
                    injected = True
                    raise ChaosCrash(f"injected crash in {tk.address.name!r} on {type(message).__name__}")
            if not dropped:
                result = handler(self, message)
        except BaseException as exc:
            error = exc
        if worker is not None and not worker.leave_handler():
            raise _Crashed  # declared stuck meanwhile: the incarnation has ended, and this is dropped
        tk.current = None
        if dropped:
            tk.system._count("chaos_drops")
            reason = "dropped by the chaos policy"
            self._reject(message, ask, reason, MessageDropped(f"{tk.address.name!r}: {reason}"))
            return
        if error is None:
            if ask is not None:
                ask.resolve(result)
            return
        if isinstance(error, Refuse):
            if ask is not None:
                ask.fail(error.error)
            else:
                tk.system.dead_letters.record(tk.address.name, message, f"refused: {error.error}")
            return
        retry = None
        if ask is not None:
            ask.fail(error)
        elif isinstance(message, _Internal):
            # The runtime's own bookkeeping belongs to this incarnation: its successor starts afresh.
            pass
        elif injected and injections < _MAX_INJECTED_REDELIVERIES:
            # Injected before the handler ran: the message was not handled, so it is not to blame.
            retry = Retry(message, crashes, injections + 1)
        elif injected:
            reason = f"injected crashes ended {injections + 1} incarnations in a row on it: {error!r}"
            tk.system.dead_letters.record(tk.address.name, message, reason)
        elif crashes == 0:
            # A told message has no one to hear of the crash: the next incarnation gets it, once.
            retry = Retry(message, 1, injections)
        else:
            reason = f"the actor crashed twice while handling it: {error!r}"
            tk.system.dead_letters.record(tk.address.name, message, reason)
        self._end(ExitReason.CRASHED, error, f"crashed on {type(message).__name__}", first=retry)
        raise _Crashed from None

    def _lookup(self, message_type: type[Any]) -> Callable[..., Any] | None:
        table = self._handler_table
        handler = table.get(message_type)
        if handler is None:
            for base in message_type.__mro__[1:]:
                handler = table.get(base)
                if handler is not None:
                    table[message_type] = handler
                    break
        return handler

    def _reject(self, message: Any, ask: Ask | None, reason: str, error: BaseException) -> None:
        if ask is not None:
            # The ask was claimed already: answer it directly, then record the message itself.
            ask.fail(error)
        self._tk.system.dead_letters.record(self._tk.address.name, message, reason, was_ask=ask is not None)

    def _stop_cooperatively(self) -> None:
        try:
            self.on_stop()
        except BaseException as exc:
            self._end(ExitReason.CRASHED, exc, "on_stop raised")
            return
        self._end(ExitReason.NORMAL, None, "the actor stopped")

    def _end(self, reason: ExitReason, error: BaseException | None, why: str, first: Any = None) -> None:
        tk = self._tk
        tk.exit_reason = reason
        tk.exit_error = error
        self.actor_stopped.set()
        tk.address._detach(
            self.actor_ref, self.actor_inbox, reason=f"{why}; queued while it was stopping", first=first
        )
        if error is not None:
            if isinstance(error, ChaosCrash):
                logger.info("%s %s: %s", tk.address.name, why, error)
            elif isinstance(error, SupervisorEscalation):  # its own words say all there is to say
                logger.warning("%s %s: %s", tk.address.name, why, error)
            else:
                logger.error("%s %s", tk.address.name, why, exc_info=error)
            try:
                self.on_failure(type(error), error, error.__traceback__)
            except Exception:
                logger.exception("%s: on_failure raised", tk.address.name)
