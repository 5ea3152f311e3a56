"""The provider gate as an actor: it owns a :class:`GateState` and performs its decisions."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from actors import Actor, Timer, handles

from ._messages import Acquire, GetGateStatus, Release, Where, Withdraw
from ._shortcut import GateShortcut
from ._state import GateLimits, GateSnapshot, GateState, Grant, WaitReason

__all__ = ["GateWaiter", "ProviderGate"]

logger = logging.getLogger("turnkeep.sampler")


class GateWaiter(Protocol):
    """Whoever waits for a grant. Both calls come from the gate's thread and must return at once."""

    def granted(self, grant: Grant) -> None:
        """The request may be sent now."""

    def queued(self, place: int, reason: WaitReason, eta: float | None) -> None:
        """The request waits at ``place`` (0: next), because of ``reason``, until about ``eta`` seconds
        from now (None: until a request in flight ends)."""


class _Wake(msgspec.Struct, frozen=True, tag=True):
    """A budget or a cool-down may have ended."""


class ProviderGate(Actor):
    """One provider endpoint and credential, shared by every session of a host: requests pass only when
    every known limit allows, in fair order (see :class:`GateState`).

    Guarantees: it never asks anyone, so no wait can form a cycle through it; a waiter is told
    ``granted`` exactly once per lease it is granted; a crash loses its learned limits and its queue, and
    waiters, which ask again while they wait, rebuild the queue in the next incarnation. Given a
    ``shortcut`` shared with its clients, it keeps it open exactly while :meth:`GateState.open_now`.
    """

    def __init__(
        self,
        limits: GateLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        shortcut: GateShortcut | None = None,
    ) -> None:
        super().__init__()
        self._clock = clock
        self._shortcut = shortcut or GateShortcut()
        # A new incarnation knows nothing yet: nothing goes by the shortcut until it has learned again.
        self._shortcut.set_open(False)
        self._state = GateState(limits or GateLimits(), now=clock(), outside=lambda: self._shortcut.in_flight)
        self._waiters: dict[str, Any] = {}
        self._timer: Timer | None = None
        self._wake_at: float | None = None

    def on_stop(self) -> None:
        self._cancel_timer()

    @handles(Acquire)
    def _on_acquire(self, message: Acquire) -> None:
        self._waiters[message.lease] = message.waiter
        self._state.enqueue(
            message.lease, message.session, message.priority, message.tokens, self._clock(), rank=message.rank
        )
        self._pump()

    @handles(Release)
    def _on_release(self, message: Release) -> None:
        self._waiters.pop(message.lease, None)
        self._state.release(message.lease, message.observation, self._clock())
        self._pump()

    @handles(Withdraw)
    def _on_withdraw(self, message: Withdraw) -> None:
        self._waiters.pop(message.lease, None)
        self._state.withdraw(message.lease)
        self._pump()

    @handles(Where)
    def _on_where(self, message: Where) -> None:
        now = self._clock()
        found = self._state.waiting_for(message.lease, now)
        if found is not None:
            place, reason, until = found
            _call(message.waiter.queued, place, reason, None if until is None else max(0.0, until - now))

    @handles(GetGateStatus)
    def _on_status(self, message: GetGateStatus) -> GateSnapshot:
        return self._state.snapshot(self._clock())

    @handles(_Wake)
    def _on_wake(self, message: _Wake) -> None:
        self._timer = None
        self._wake_at = None
        self._pump()

    def _pump(self) -> None:
        now = self._clock()
        for grant in self._state.grant(now):
            waiter = self._waiters.pop(grant.lease, None)
            if waiter is not None:
                _call(waiter.granted, grant)
        self._shortcut.set_open(self._state.open_now(now))
        wake = self._state.next_wake(now)
        if wake is None or wake <= now:
            self._cancel_timer()
            return
        if self._wake_at is not None and self._wake_at <= wake:
            return
        self._cancel_timer()
        self._wake_at = wake
        self._timer = self.io.call_later(
            wake - now, functools.partial(self.address.tell, _Wake()), name="gate-wake"
        )

    def _cancel_timer(self) -> None:
        timer, self._timer, self._wake_at = self._timer, None, None
        if timer is not None:
            timer.cancel()


def _call(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        logger.exception("a provider gate waiter failed")
