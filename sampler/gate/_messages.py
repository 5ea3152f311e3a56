"""What a request's waiter and the provider gate tell each other. The gate never asks anyone."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Acquire", "GetGateStatus", "Release", "Where", "Withdraw"]


class Acquire(msgspec.Struct, frozen=True, tag=True):
    """``lease`` (a request of ``session``, about ``tokens`` input tokens) asks to be sent. The gate calls
    ``waiter.granted(grant)`` when it may; asking again for the same lease changes nothing. ``rank``
    orders the requests of one ``session`` key: a lower rank goes first (a family of sessions sharing a
    key puts the parent's requests before its children's)."""

    lease: str
    session: str
    priority: int
    tokens: int
    waiter: Any
    rank: int = 0


class Release(msgspec.Struct, frozen=True, tag=True):
    """``lease``'s request ended; ``observation`` (a :class:`sampler.gate.Observation`, or None when no answer
    arrived) is what its answer said of the provider's limits."""

    lease: str
    observation: Any = None


class Withdraw(msgspec.Struct, frozen=True, tag=True):
    """``lease`` no longer waits for a grant."""

    lease: str


class Where(msgspec.Struct, frozen=True, tag=True):
    """Asks, by a tell, where ``lease`` waits; the gate answers with ``waiter.queued(place, reason, eta)``."""

    lease: str
    waiter: Any


class GetGateStatus(msgspec.Struct, frozen=True, tag=True):
    """Asked of the gate: answered with a :class:`sampler.gate.GateSnapshot`."""
