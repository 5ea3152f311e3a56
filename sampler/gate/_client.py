"""A request's side of the gate, on trio: wait for a grant with a deadline, then report the answer."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import trio

from ._limits import Observation, observe
from ._messages import Acquire, Release, Where, Withdraw
from ._shortcut import GateShortcut
from ._state import Grant, WaitReason

__all__ = ["GateClient", "GateTimeout", "QueueInfo"]


class GateTimeout(Exception):
    """A request waited in the provider gate past its deadline; its step fails with this message."""


@dataclass(frozen=True)
class QueueInfo:
    """Where a request waits: ``place`` in line (0: next), ``reason``, and the expected wait in seconds
    (None: until a request in flight ends)."""

    place: int
    reason: WaitReason
    expected_wait: float | None


class _Waiter:
    """Hands the gate's answers, made on the gate's thread, to the waiting trio task."""

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self.changed = trio.Event()
        self.grant: Grant | None = None
        self.where: QueueInfo | None = None

    def granted(self, grant: Grant) -> None:
        self._soon(self._set_grant, grant)

    def queued(self, place: int, reason: WaitReason, eta: float | None) -> None:
        self._soon(self._set_where, QueueInfo(place, reason, eta))

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        with suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn, *args)

    def _set_grant(self, grant: Grant) -> None:
        if self.grant is None:
            self.grant = grant
            self.changed.set()

    def _set_where(self, where: QueueInfo) -> None:
        self.where = where
        self.changed.set()


class GateClient:
    """One session's way through a host's provider gate (``gate`` is its address, anything with ``tell``).

    :meth:`acquire` returns once the request may be sent, or raises :class:`GateTimeout` after
    ``max_wait`` seconds; while it waits it asks again every ``resend_every`` seconds (so a gate that
    restarted learns of it) and, once it has waited ``queued_after`` seconds, reports where it waits to
    ``on_queued``. Cancelled, it withdraws. Every granted request must be :meth:`release`-d.

    ``session`` is the key the gate takes turns by (sessions sharing one share its turns) and ``rank`` the
    client's place among the requests of that key (lower first). With the gate's ``shortcut``, a request
    the gate would let through at once goes without a message to it, and its answer is told to the gate
    only when it has something to teach (see :class:`GateShortcut`).
    """

    def __init__(
        self,
        gate: Any,
        *,
        session: str,
        priority: int = 0,
        rank: int = 0,
        max_wait: float = 600.0,
        queued_after: float = 2.0,
        resend_every: float = 1.0,
        shortcut: GateShortcut | None = None,
    ) -> None:
        if not (math.isfinite(max_wait) and max_wait > 0):
            raise ValueError(f"max_wait must be > 0, got {max_wait!r}")
        self.gate = gate
        self.session = session
        self.priority = priority
        self.rank = rank
        self.max_wait = max_wait
        self.queued_after = queued_after
        self.resend_every = resend_every
        self.shortcut = shortcut
        self._direct: set[str] = set()

    async def acquire(
        self, lease: str, tokens: int, on_queued: Callable[[QueueInfo], None] = lambda info: None
    ) -> Grant:
        """Wait for the gate to let ``lease`` (about ``tokens`` input tokens) go."""
        if self.shortcut is not None and self.shortcut.take():
            self._direct.add(lease)
            return Grant(lease, 0.0)
        waiter = _Waiter()
        ask = Acquire(lease, self.session, self.priority, tokens, waiter, self.rank)
        start = trio.current_time()
        deadline = start + self.max_wait
        report_at = start + self.queued_after
        # Ask where it waits in time to report it, and to say why should the deadline come first.
        where_at = start + min(self.queued_after, self.max_wait / 2)
        asked_where = reported = False
        resend_at = start + self.resend_every
        self.gate.tell(ask)
        try:
            while waiter.grant is None:
                now = trio.current_time()
                if now >= deadline:
                    raise GateTimeout(self._overdue(waiter.where))
                if waiter.where is not None and not reported and now >= report_at:
                    reported = True
                    on_queued(waiter.where)
                if now >= resend_at:
                    self.gate.tell(ask)
                    resend_at = now + self.resend_every
                if not asked_where and now >= where_at:
                    asked_where = True
                    self.gate.tell(Where(lease, waiter))
                wake = min(deadline, resend_at)
                if not asked_where:
                    wake = min(wake, where_at)
                if not reported:
                    wake = min(wake, max(report_at, now)) if waiter.where is not None else wake
                with trio.move_on_at(wake):
                    await waiter.changed.wait()
                waiter.changed = trio.Event()
        except BaseException:
            if waiter.grant is None:
                self.gate.tell(Withdraw(lease))
            else:
                self.gate.tell(Release(lease))
            raise
        return waiter.grant

    def release(
        self, lease: str, status: int | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        """``lease``'s request ended with ``status`` and ``headers`` (None: no answer arrived)."""
        observation = None if status is None else observe(status, headers or {}, time.time())
        if lease in self._direct:
            self._direct.discard(lease)
            assert self.shortcut is not None
            self.shortcut.give_back()
            if _teaches_nothing(observation):
                return
        self.gate.tell(Release(lease, observation))

    def _overdue(self, where: QueueInfo | None) -> str:
        why = f" ({where.reason.value.replace('_', '-')})" if where is not None else ""
        return f"waited {self.max_wait:g} s in the provider gate{why} without being let through"


def _teaches_nothing(observation: Observation | None) -> bool:
    """Whether the gate, its shortcut open, would learn nothing from ``observation``."""
    return observation is None or (
        200 <= observation.status < 300
        and observation.retry_after is None
        and observation.requests is None
        and observation.tokens is None
    )
