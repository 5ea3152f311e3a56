"""A host's telemetry: started from its settings, reading its sessions and its provider gate."""

from __future__ import annotations

from collections.abc import Callable

from actors import Address
from sampler.gate import GateSnapshot, GetGateStatus

from ..config import Settings
from ._metrics import HostReadings
from ._setup import Telemetry, start_telemetry

__all__ = ["start_host_telemetry"]

_GATE_ASK_TIMEOUT = 1.0
"""Seconds a metrics collection waits for the provider gate's snapshot before leaving the gauges out."""


def start_host_telemetry(
    settings: Settings, sessions: Callable[[], tuple[int, int]], provider_gate: Address | None
) -> Telemetry:
    """The telemetry ``settings.telemetry`` asks for; ``sessions`` gives (active, passivated) sessions,
    the gate's gauges ask ``provider_gate`` (left out when there is none, or it does not answer in time)."""

    def gate() -> GateSnapshot | None:
        if provider_gate is None:
            return None
        try:
            snapshot: GateSnapshot = provider_gate.ask(GetGateStatus(), timeout=_GATE_ASK_TIMEOUT)
        except Exception:
            return None
        return snapshot

    readings = HostReadings(sessions=sessions, gate=gate)
    return start_telemetry(settings.telemetry, provider=settings.provider.kind, readings=readings)
