"""Stable names for actors that outlive any one incarnation."""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from ._reply import Ask
from .errors import ActorUnavailable
from .messages import Down, ExitReason

if TYPE_CHECKING:
    from .dead_letters import DeadLetterLog

__all__ = ["Address"]


class _Timer(Protocol):
    def cancel(self) -> None: ...


class _Runtime(Protocol):
    dead_letters: DeadLetterLog
    restart_wait: float
    ask_timeout: float

    def _schedule(self, delay: float, callback: Callable[[], None]) -> _Timer: ...


class _State(enum.Enum):
    UNBOUND = "no actor has been started at this address"
    RUNNING = "running"
    BUFFERING = "restarting"
    STOPPING = "the actor is stopping"
    STOPPED = "the actor has stopped"


class Address:
    """A stable name (``"session/42/chat_state"``) that resolves to the current incarnation of an actor.

    Guarantees: a message told or asked here is handled by exactly one incarnation, or recorded as a dead
    letter with the reason — never silently lost. While the actor restarts, messages wait (at most the
    system's ``restart_wait``) and are then delivered in order to the new incarnation. :meth:`tell` never
    blocks; :meth:`ask` never waits past its deadline.
    """

    __slots__ = (
        "_activator",
        "_expiry",
        "_lock",
        "_pending",
        "_ref",
        "_runtime",
        "_state",
        "_unanswered",
        "_watchers",
        "name",
    )

    def __init__(self, name: str, runtime: _Runtime) -> None:
        self.name = name
        self._runtime = runtime
        self._lock = threading.Lock()
        self._state = _State.UNBOUND
        self._ref: pykka.ActorRef[Any] | None = None
        self._pending: deque[tuple[float, Any]] | None = None
        """Messages waiting for the next incarnation, with the time each was queued (None when empty)."""
        self._expiry: _Timer | None = None
        """The timer that dead-letters waiting messages once they have waited ``restart_wait``."""
        self._watchers: list[Address] = []
        self._unanswered: list[Address] = []
        """Watchers that began watching between two incarnations: told NOPROC if no next one comes."""
        self._activator: Callable[[Address], None] | None = None

    def __repr__(self) -> str:
        return f"turnkeep.Address({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Address) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def alive(self) -> bool:
        """Whether an incarnation is currently accepting messages."""
        return self._state is _State.RUNNING

    @property
    def status(self) -> str:
        """A short word for the address's state: unbound, running, restarting, stopping or stopped."""
        return {_State.BUFFERING: "restarting"}.get(self._state, self._state.name.lower())

    def tell(self, message: Any) -> None:
        """Send ``message`` without waiting; it is handled, or recorded as a dead letter."""
        self._send(message, activate=True)

    def _send(self, message: Any, *, activate: bool) -> None:
        activator: Callable[[Address], None] | None = None
        with self._lock:
            state = self._state
            if state is _State.RUNNING:
                assert self._ref is not None
                try:
                    self._ref.tell(message)
                    return
                except pykka.ActorDeadError:
                    # The incarnation has just ended; its inbox is about to be handed back here.
                    self._state = _State.BUFFERING
                    self._hold_locked([message])
                    return
            elif state is _State.BUFFERING or (state is _State.STOPPING and self._activator is not None):
                # Stopping with an activator: it waits for the stop to end, then for the next actor.
                self._hold_locked([message])
                return
            elif state in (_State.STOPPED, _State.UNBOUND) and activate and self._activator is not None:
                self._state = _State.BUFFERING
                self._hold_locked([message])
                activator = self._activator
        if activator is not None:
            activator(self)
            return
        self._runtime.dead_letters.record(self.name, message, state.value)

    def set_activator(self, activator: Callable[[Address], None] | None) -> None:
        """Start an actor on demand: a message to this address while it is stopped, or before any actor was
        started here, waits (bounded, as during a restart) and ``activator(address)`` is called, once, to
        start an actor here. The activator must not block; it runs on the sender's thread. A message that
        comes while the actor is stopping waits too, and the activator is called once the stop ends."""
        with self._lock:
            self._activator = activator

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Send ``message`` and return the handler's reply, or raise what the handler raised.

        Raises :class:`~actors.ActorUnavailable` when the message cannot be delivered,
        :class:`~actors.AskTimeout` past ``timeout`` (default: the system's ``ask_timeout``),
        :class:`~actors.UnhandledMessage` when the actor has no handler for it.
        """
        ask = Ask(message)
        self.tell(ask)
        ref = self._ref
        mate = getattr(ref.actor_inbox, "runner", None) if ref is not None else None
        return ask.wait(self._runtime.ask_timeout if timeout is None else timeout, self.name, mate)

    # -- used by the runtime -------------------------------------------------------------------------

    def _bind(self, ref: pykka.ActorRef[Any]) -> None:
        """Make ``ref`` the current incarnation and deliver, in order, what waited for it."""
        now = time.monotonic()
        expired: list[Any] = []
        with self._lock:
            self._ref = ref
            self._state = _State.RUNNING
            self._unanswered.clear()
            for queued_at, message in self._release_locked():
                if now - queued_at > self._runtime.restart_wait:
                    expired.append(message)
                else:
                    ref.tell(message)
        self._dead(expired, f"the actor did not come back within {self._runtime.restart_wait:g} s")

    def _expect(self) -> None:
        """An incarnation is starting: hold messages for it (bounded) instead of refusing them."""
        with self._lock:
            if self._state not in (_State.RUNNING, _State.BUFFERING):
                self._state = _State.BUFFERING

    def _begin_stop(self, ref: pykka.ActorRef[Any], stop_message: Any, *, restarting: bool) -> None:
        """Queue ``stop_message`` behind everything already sent; later messages wait for the next
        incarnation (``restarting``) or become dead letters."""
        with self._lock:
            if self._ref is ref and self._state is _State.RUNNING:
                self._state = _State.BUFFERING if restarting else _State.STOPPING
                ref.tell(stop_message)
            elif self._ref is ref:
                ref.tell(stop_message)

    def _detach(self, ref: pykka.ActorRef[Any], inbox: Any, *, reason: str, first: Any = None) -> None:
        """The incarnation ``ref`` has ended: take back what is still in its inbox (after ``first``, if
        given). It waits for the next incarnation unless the address is stopping, in which case it
        becomes a dead letter."""
        dead: list[Any] = []
        with self._lock:
            # Drained under the lock: a sender that found the incarnation alive has finished its put.
            leftovers = _drain(inbox)
            if first is not None:
                leftovers.insert(0, first)
            if self._ref is ref:
                self._ref = None
                if self._state is _State.RUNNING:
                    self._state = _State.BUFFERING
                if self._state is _State.BUFFERING or (
                    self._state is _State.STOPPING and self._activator is not None
                ):
                    self._hold_locked(leftovers, first=True)
                else:
                    dead = leftovers
            else:
                dead = leftovers
        self._dead(dead, reason)

    def _forgettable(self) -> bool:
        """Whether nothing runs, starts, waits or is watched here, and nothing would start here by itself:
        a fresh address in its place would behave the same."""
        with self._lock:
            return (
                self._state in (_State.UNBOUND, _State.STOPPED)
                and not self._pending
                and not self._watchers
                and not self._unanswered
                and self._activator is None
            )

    def _close(self, reason: str) -> None:
        """No incarnation will follow: everything waiting becomes a dead letter, as will later messages.
        With an activator, what waits is kept for the actor the activator is then told to start."""
        with self._lock:
            self._ref = None
            activator = self._activator if self._pending else None
            if activator is not None:
                self._state = _State.BUFFERING
                pending: deque[tuple[float, Any]] = deque()
                unanswered: list[Address] = []
            else:
                self._state = _State.STOPPED
                pending = self._release_locked()
                unanswered, self._unanswered = self._unanswered, []
        if activator is not None:
            activator(self)
        self._dead([message for _, message in pending], reason)
        for watcher in unanswered:
            self._tell_down(watcher, Down(address=self.name, reason=ExitReason.NOPROC))

    def _hold_locked(self, messages: list[Any], *, first: bool = False) -> None:
        """Queue ``messages`` for the next incarnation (ahead of what waits already, when ``first``), and
        make sure a timer will dead-letter them should none come within ``restart_wait``."""
        if not messages:
            return
        now = time.monotonic()
        if self._pending is None:
            self._pending = deque()
        if first:
            self._pending.extendleft((now, message) for message in reversed(messages))
        else:
            self._pending.extend((now, message) for message in messages)
        self._arm_locked(now)

    def _arm_locked(self, now: float) -> None:
        if self._expiry is None and self._pending:
            oldest = min(queued_at for queued_at, _ in self._pending)
            delay = max(0.0, oldest + self._runtime.restart_wait - now)
            self._expiry = self._runtime._schedule(delay, self._expire)

    def _release_locked(self) -> deque[tuple[float, Any]]:
        """Take every waiting message and disarm the expiry timer."""
        pending, self._pending = self._pending or deque(), None
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        return pending

    def _expire(self) -> None:
        bound = self._runtime.restart_wait
        now = time.monotonic()
        with self._lock:
            if self._state is not _State.BUFFERING or self._pending is None:
                return
            self._expiry = None
            expired = [message for queued_at, message in self._pending if now - queued_at >= bound]
            remaining = deque(item for item in self._pending if now - item[0] < bound)
            self._pending = remaining or None
            self._arm_locked(now)
        self._dead(expired, f"the actor did not come back within {bound:g} s")

    def _dead(self, messages: list[Any], reason: str) -> None:
        for message in messages:
            if isinstance(message, Retry):
                message = message.message
            if isinstance(message, _Internal):
                message.undeliverable(self.name)
            else:
                self._runtime.dead_letters.record(self.name, message, reason)

    def _add_watcher(self, watcher: Address) -> None:
        """``watcher`` hears of every later incarnation's end; if none is running or starting now, and none
        follows, it is told ``Down(NOPROC)`` (at once when the address was never started or has stopped)."""
        with self._lock:
            if watcher not in self._watchers:
                self._watchers.append(watcher)
            state = self._state
            between = state is _State.BUFFERING and self._ref is None
            if between and watcher not in self._unanswered:
                self._unanswered.append(watcher)
        if state in (_State.UNBOUND, _State.STOPPED):
            self._tell_down(watcher, Down(address=self.name, reason=ExitReason.NOPROC))

    def _remove_watcher(self, watcher: Address) -> None:
        with self._lock:
            if watcher in self._watchers:
                self._watchers.remove(watcher)
            if watcher in self._unanswered:
                self._unanswered.remove(watcher)

    def _notify_down(self, reason: ExitReason, error: BaseException | None, incarnation: int) -> None:
        with self._lock:
            watchers = list(self._watchers)
            self._unanswered.clear()
        notice = Down(address=self.name, reason=reason, error=error, incarnation=incarnation)
        for watcher in watchers:
            self._tell_down(watcher, notice)

    @staticmethod
    def _tell_down(watcher: Address, notice: Down) -> None:
        if watcher._state is _State.STOPPED:
            return  # the watcher has gone for good; the notice concerns nobody
        watcher._send(notice, activate=False)  # a notice does not wake a passivated watcher


class _Internal:
    """A runtime message with its own rule for what happens when it cannot be delivered."""

    __slots__ = ()

    def undeliverable(self, address: str) -> None:
        """Called instead of recording a dead letter."""


class StopRequest(_Internal):
    """Tells one incarnation to stop after the messages queued before it; never passed on to another."""

    __slots__ = ()


STOP = StopRequest()


class Retry:
    """A told message whose handling crashed the previous incarnation, handed to the next one;
    ``crashes`` counts the crashes its own handler caused, ``injections`` the injected crashes in a row
    before its handler ran."""

    __slots__ = ("crashes", "injections", "message")

    def __init__(self, message: Any, crashes: int, injections: int) -> None:
        self.message = message
        self.crashes = crashes
        self.injections = injections


def _drain(inbox: Any) -> list[Any]:
    messages: list[Any] = []
    while True:
        try:
            envelope = inbox.get_nowait()
        except queue.Empty:
            return messages
        if envelope.reply_to is not None:
            envelope.reply_to.set_exception(
                exc_info=(ActorUnavailable, ActorUnavailable("the actor stopped before handling it"), None)
            )
        elif not isinstance(envelope.message, StopRequest):
            messages.append(envelope.message)
