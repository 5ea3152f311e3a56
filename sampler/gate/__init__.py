"""The provider gate: one per provider endpoint and credential, shared by every session of a host.

Every model request passes through it — :meth:`GateClient.acquire` before sending, :meth:`GateClient.release`
with what the answer said — so a rate limit one session meets pauses every session (a shared cool-down,
budgets from the provider's rate-limit headers, configured per-minute ceilings and a concurrency limit),
and requests are let through round-robin across sessions by priority, with aging. The decisions are a pure
state machine (:class:`GateState`); :class:`ProviderGate` is the actor that performs them.
"""

from ._actor import GateWaiter, ProviderGate
from ._client import GateClient, GateTimeout, QueueInfo
from ._limits import Budget, Observation, observe
from ._messages import Acquire, GetGateStatus, Release, Where, Withdraw
from ._shortcut import GateShortcut
from ._state import GateLimits, GateSnapshot, GateState, Grant, WaitReason

__all__ = [
    "Acquire",
    "Budget",
    "GateClient",
    "GateLimits",
    "GateShortcut",
    "GateSnapshot",
    "GateState",
    "GateTimeout",
    "GateWaiter",
    "GetGateStatus",
    "Grant",
    "Observation",
    "ProviderGate",
    "QueueInfo",
    "Release",
    "WaitReason",
    "Where",
    "Withdraw",
    "observe",
]
