"""The provider gate's decisions, as a pure state machine: who may send a request now, and who waits why.

Nothing here reads a clock or holds a thread: every call takes ``now`` (monotonic seconds), so the rules
are tested by calling them, and the actor that owns a :class:`GateState` only performs what it decides.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ._limits import Budget, Observation

__all__ = ["GateLimits", "GateSnapshot", "GateState", "Grant", "WaitReason"]

_FIRST_COOL_DOWN = 1.0
_MAX_COOL_DOWN = 30.0


class WaitReason(enum.StrEnum):
    """Why the request at the head of the queue waits."""

    COOL_DOWN = "cool_down"
    """The provider refused a request for load and asked (or was given) a pause for every session."""
    BUDGET = "budget"
    """A budget the provider reported, or one configured per minute, is spent until it refills."""
    CONCURRENCY = "concurrency"
    """As many requests as allowed are in flight; the next release lets one more go."""


@dataclass(frozen=True)
class GateLimits:
    """Ceilings the operator configures, for providers that send no rate-limit headers (None: none).

    ``aging`` is how many seconds of waiting raise a request by one priority level, so background work
    still progresses beside interactive work. Until the provider has answered once, at most
    ``first_requests`` are in flight: a crowd of sessions starting at once does not meet limits the gate
    has not had a chance to learn.
    """

    max_concurrent: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    aging: float = 10.0
    first_requests: int = 4

    def __post_init__(self) -> None:
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 or None, got {self.max_concurrent!r}")
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0 or None, got {value!r}")
        if not (math.isfinite(self.aging) and self.aging > 0):
            raise ValueError(f"aging must be > 0, got {self.aging!r}")
        if self.first_requests < 1:
            raise ValueError(f"first_requests must be >= 1, got {self.first_requests!r}")


@dataclass(frozen=True)
class Grant:
    """``lease`` may send its request now; it waited ``waited`` seconds in the gate."""

    lease: str
    waited: float


@dataclass(frozen=True)
class GateSnapshot:
    """The gate's state at one moment, for ``describe()`` and the CLI."""

    in_flight: int
    waiting: dict[int, int]
    """Requests waiting, by priority (0 most urgent)."""
    cool_down: float
    """Seconds until the shared cool-down ends (0: none)."""
    requests_remaining: float | None
    tokens_remaining: float | None
    refusals: int
    """Refusals for load seen in a row, the last success aside."""

    def describe(self) -> str:
        """One line for diagnostics."""
        queue = ", ".join(f"p{priority}: {count}" for priority, count in sorted(self.waiting.items()))
        parts = [f"{self.in_flight} in flight", f"waiting [{queue}]"]
        if self.cool_down > 0:
            parts.append(f"cool-down {self.cool_down:.1f} s")
        if self.requests_remaining is not None:
            parts.append(f"{self.requests_remaining:g} requests left")
        if self.tokens_remaining is not None:
            parts.append(f"{self.tokens_remaining:g} tokens left")
        return "provider gate: " + "; ".join(parts)


@dataclass
class _Waiting:
    lease: str
    session: str
    priority: int
    tokens: int
    since: float
    arrival: int
    rank: int = 0


class _Bucket:
    """A per-minute budget that refills continuously; a request larger than the whole budget goes when
    the bucket is full (it could never go otherwise)."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0
        self.level = per_minute
        self.at = now

    def _fill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now

    def ready_at(self, amount: float, now: float) -> float:
        self._fill(now)
        need = min(amount, self.capacity)
        return now if self.level >= need else now + (need - self.level) / self.rate

    def take(self, amount: float, now: float) -> None:
        self._fill(now)
        self.level -= min(amount, self.capacity)


@dataclass
class _Reported:
    """A budget the provider's headers reported, counted down by the grants since.

    Providers say when the budget is *fully* replenished, so with its limit known it refills at
    ``(limit - remaining) / reset_in`` per second, continuously; without a limit it is unknown again once
    its reset time has passed.
    """

    remaining: float
    limit: float | None
    reset_at: float | None
    rate: float | None
    at: float

    def refill(self, now: float) -> None:
        if now <= self.at:
            return
        if self.rate is not None and self.limit is not None:
            self.remaining = min(self.limit, self.remaining + (now - self.at) * self.rate)
        elif self.reset_at is not None and now >= self.reset_at:
            self.remaining, self.reset_at = math.inf, None
        self.at = now

    def ready_at(self, amount: float, now: float) -> float:
        self.refill(now)
        need = max(1.0, amount if self.limit is None else min(amount, self.limit))
        if self.remaining >= need:
            return now
        if self.rate:
            return now + (need - self.remaining) / self.rate
        return self.reset_at if self.reset_at is not None else now

    def take(self, amount: float) -> None:
        self.remaining = max(0.0, self.remaining - amount)


@dataclass
class GateState:
    """Grants requests in fair order under every budget known. Not thread-safe: one owner performs it.

    Order: the most urgent priority first, a request's priority rising by one level per ``aging`` seconds
    waited; within a priority, round-robin across sessions (the session served longest ago first); within a
    session, the lowest rank first, then first come first served. The request chosen must fit every
    budget, or everyone waits for it — so a large request is never starved by small ones.
    """

    limits: GateLimits = field(default_factory=GateLimits)
    now: float = 0.0
    outside: Callable[[], int] = lambda: 0
    """Requests in flight the gate did not grant itself (they went by its shortcut): counted as in
    flight in every decision and report."""
    _waiting: dict[str, _Waiting] = field(default_factory=dict)
    _in_flight: dict[str, int] = field(default_factory=dict)
    _served: dict[str, int] = field(default_factory=dict)
    _serial: itertools.count[int] = field(default_factory=itertools.count)
    _arrivals: itertools.count[int] = field(default_factory=itertools.count)
    _cool_until: float = 0.0
    _refusals: int = 0
    _answered: bool = False
    _requests: _Reported | None = None
    _tokens: _Reported | None = None
    _rpm: _Bucket | None = None
    _tpm: _Bucket | None = None

    def __post_init__(self) -> None:
        if self.limits.requests_per_minute is not None:
            self._rpm = _Bucket(self.limits.requests_per_minute, self.now)
        if self.limits.tokens_per_minute is not None:
            self._tpm = _Bucket(self.limits.tokens_per_minute, self.now)

    # -- inputs --------------------------------------------------------------------------------------

    def enqueue(
        self, lease: str, session: str, priority: int, tokens: int, now: float, *, rank: int = 0
    ) -> None:
        """``lease`` (a request of ``session`` estimated at ``tokens`` input tokens) waits for a grant;
        among the waiting requests of ``session``, a lower ``rank`` goes first. Asking again for a lease
        already waiting or in flight changes nothing."""
        if lease in self._waiting or lease in self._in_flight:
            return
        self._waiting[lease] = _Waiting(
            lease, session, max(0, priority), max(0, tokens), now, next(self._arrivals), max(0, rank)
        )

    def withdraw(self, lease: str) -> None:
        """``lease`` no longer waits (its step was cancelled or gave up)."""
        self._waiting.pop(lease, None)

    def release(self, lease: str, observation: Observation | None, now: float) -> None:
        """``lease``'s request ended; ``observation`` is what its answer said of the limits (None: no
        answer arrived). A release for a lease the gate does not know still teaches it the limits."""
        self._waiting.pop(lease, None)
        self._in_flight.pop(lease, None)
        if observation is not None:
            self._learn(observation, now)

    # -- decisions -----------------------------------------------------------------------------------

    def grant(self, now: float) -> list[Grant]:
        """The leases that may send now, in order; each is counted in flight from here on."""
        granted: list[Grant] = []
        while self._waiting:
            chosen = self._next(now)
            if self._blocked(chosen, now) is not None:
                break
            del self._waiting[chosen.lease]
            self._in_flight[chosen.lease] = chosen.tokens
            self._served[chosen.session] = next(self._serial)
            for bucket, amount in ((self._rpm, 1), (self._tpm, chosen.tokens)):
                if bucket is not None:
                    bucket.take(amount, now)
            for reported, amount in ((self._requests, 1), (self._tokens, chosen.tokens)):
                if reported is not None:
                    reported.take(amount)
            granted.append(Grant(chosen.lease, now - chosen.since))
        return granted

    def open_now(self, now: float) -> bool:
        """Whether a request arriving now would be granted at once whatever its size, and its answer,
        if a success without rate-limit headers, would teach nothing: no request waits, no cool-down,
        no budget or ceiling is known, and the provider has answered, without a refusal since."""
        return (
            not self._waiting
            and now >= self._cool_until
            and self._answered
            and not self._refusals
            and self.limits.max_concurrent is None
            and self._rpm is None
            and self._tpm is None
            and _unbounded(self._requests, now)
            and _unbounded(self._tokens, now)
        )

    def waiting_for(self, lease: str, now: float) -> tuple[int, WaitReason, float | None] | None:
        """For a waiting lease: its place in line (0 first), why the head of the line waits, and when that
        ends (absolute; None when it ends with a release). None when ``lease`` is not waiting."""
        if lease not in self._waiting:
            return None
        order = self._order(now)
        place = next(index for index, waiting in enumerate(order) if waiting.lease == lease)
        blocked = self._blocked(order[0], now)
        if blocked is None:
            return place, WaitReason.CONCURRENCY, None
        return (place, *blocked)

    def next_wake(self, now: float) -> float | None:
        """When the head of the line can go without any release (absolute), or None."""
        if not self._waiting:
            return None
        blocked = self._blocked(self._next(now), now)
        if blocked is None:
            return now
        return blocked[1]

    def snapshot(self, now: float) -> GateSnapshot:
        """The gate's state now."""
        waiting: dict[int, int] = {}
        for item in self._waiting.values():
            waiting[item.priority] = waiting.get(item.priority, 0) + 1
        return GateSnapshot(
            in_flight=len(self._in_flight) + self.outside(),
            waiting=waiting,
            cool_down=max(0.0, self._cool_until - now),
            requests_remaining=_left(self._requests, now),
            tokens_remaining=_left(self._tokens, now),
            refusals=self._refusals,
        )

    # -- inside --------------------------------------------------------------------------------------

    def _order(self, now: float) -> list[_Waiting]:
        aging = self.limits.aging

        def key(item: _Waiting) -> tuple[int, int, int]:
            effective = max(0, item.priority - int((now - item.since) // aging))
            return effective, self._served.get(item.session, -1), item.arrival

        # Rank orders the requests of one session key only: it picks each key's head.
        firsts: dict[str, _Waiting] = {}
        for item in sorted(self._waiting.values(), key=lambda w: (w.rank, w.arrival)):
            firsts.setdefault(item.session, item)
        heads = sorted(firsts.values(), key=key)
        rest = sorted(
            (w for w in self._waiting.values() if firsts[w.session] is not w),
            key=lambda w: (*key(w)[:2], w.rank, w.arrival),
        )
        return heads + rest

    def _next(self, now: float) -> _Waiting:
        return self._order(now)[0]

    def _blocked(self, item: _Waiting, now: float) -> tuple[WaitReason, float | None] | None:
        if now < self._cool_until:
            return WaitReason.COOL_DOWN, self._cool_until
        ready = now
        for bucket, amount in ((self._rpm, 1), (self._tpm, item.tokens)):
            if bucket is not None:
                ready = max(ready, bucket.ready_at(amount, now))
        for reported, amount in ((self._requests, 1), (self._tokens, item.tokens)):
            if reported is not None:
                ready = max(ready, reported.ready_at(amount, now))
        if ready > now:
            return WaitReason.BUDGET, ready
        limit = self.limits.max_concurrent
        if not self._answered:
            limit = self.limits.first_requests if limit is None else min(limit, self.limits.first_requests)
        if limit is not None and len(self._in_flight) + self.outside() >= limit:
            return WaitReason.CONCURRENCY, None
        return None

    def _learn(self, observation: Observation, now: float) -> None:
        self._answered = True
        if observation.refused_for_rate:
            self._refusals += 1
            pause = observation.retry_after
            if pause is None:
                pause = min(_FIRST_COOL_DOWN * 2 ** (self._refusals - 1), _MAX_COOL_DOWN)
            self._cool_until = max(self._cool_until, now + pause)
        else:
            if 200 <= observation.status < 300:
                self._refusals = 0
            if observation.retry_after is not None and observation.status == 503:
                self._cool_until = max(self._cool_until, now + observation.retry_after)
        # What the provider reported was counted before the requests still in flight reached it.
        if observation.requests is not None:
            fresh = _reported(observation.requests, len(self._in_flight) + self.outside(), now)
            self._requests = _merged(self._requests, fresh)
        if observation.tokens is not None:
            fresh = _reported(observation.tokens, sum(self._in_flight.values()), now)
            self._tokens = _merged(self._tokens, fresh)


def _reported(budget: Budget, in_flight: float, now: float) -> _Reported:
    remaining = max(0.0, budget.remaining - in_flight)
    limit, reset_in = budget.limit, budget.reset_in
    rate = None
    if limit is not None and reset_in is not None:
        # Full again in reset_in seconds: the rate it refills at (as fast as possible when already full).
        rate = (limit - budget.remaining) / reset_in if reset_in > 0 and limit > budget.remaining else None
    reset_at = None if reset_in is None else now + reset_in
    return _Reported(remaining, limit, reset_at, rate, now)


def _merged(known: _Reported | None, fresh: _Reported) -> _Reported:
    """``fresh`` as the budget from now on, never above what ``known`` leaves now.

    Answers to requests sent at about the same time arrive in any order, so a report can be older than
    the one the gate holds: it may lower the budget, never raise it. The budget rises by refilling (a
    budget that cannot refill, reported without a reset, is simply replaced).
    """
    if known is not None and (known.rate is not None or known.reset_at is not None):
        known.refill(fresh.at)
        fresh.remaining = min(fresh.remaining, known.remaining)
    return fresh


def _unbounded(reported: _Reported | None, now: float) -> bool:
    if reported is None:
        return True
    reported.refill(now)
    return math.isinf(reported.remaining)


def _left(reported: _Reported | None, now: float) -> float | None:
    if reported is None:
        return None
    reported.refill(now)
    return None if math.isinf(reported.remaining) else reported.remaining
