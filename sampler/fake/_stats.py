"""What the provider did, counted so that tests can hold a client's view against it."""

from __future__ import annotations

import threading
from typing import Literal

import msgspec

from .faults import FaultKind

__all__ = ["ProviderStats", "Rejection", "StatsCounter"]

Rejection = Literal[
    "too_large", "auth", "bad_request", "image", "context_overflow", "unknown_script", "rate_limit"
]
"""Why a model call was refused without a fault: 413, 401, malformed, image, window, unknown script."""


class ProviderStats(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of the provider's counters.

    `requests` counts every model call received (`by_wire`: per "openai" / "anthropic" endpoint);
    `completed` those answered with a complete 200 response (including ones that stalled and resumed, or
    were content-filtered); `faults` every injected fault by kind; `rejections` refusals by reason;
    `token_refreshes` / `token_refusals` the token endpoint's grants and refusals; `disconnects` the
    responses the client abandoned before their end; `input_tokens`, `cached_tokens` and `output_tokens`
    add up the usage reported in the completed responses that carried one.
    """

    requests: int = 0
    completed: int = 0
    by_wire: dict[str, int] = msgspec.field(default_factory=dict)
    faults: dict[str, int] = msgspec.field(default_factory=dict)
    rejections: dict[str, int] = msgspec.field(default_factory=dict)
    token_refreshes: int = 0
    token_refusals: int = 0
    disconnects: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_faults(self) -> int:
        """All injected faults, whatever their kind."""
        return sum(self.faults.values())


class StatsCounter:
    """The live counters behind `ProviderStats`. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = 0
        self._completed = 0
        self._by_wire: dict[str, int] = {}
        self._faults: dict[str, int] = {}
        self._rejections: dict[str, int] = {}
        self._token_refreshes = 0
        self._token_refusals = 0
        self._disconnects = 0
        self._usage = [0, 0, 0]

    def request(self, wire: str) -> None:
        with self._lock:
            self._requests += 1
            self._by_wire[wire] = self._by_wire.get(wire, 0) + 1

    def completed(self, usage: tuple[int, int, int] | None = None) -> None:
        """Count a complete response, and the (input, cached, output) usage it reported, if any."""
        with self._lock:
            self._completed += 1
            if usage is not None:
                for index, value in enumerate(usage):
                    self._usage[index] += value

    def fault(self, kind: FaultKind) -> None:
        with self._lock:
            self._faults[kind] = self._faults.get(kind, 0) + 1

    def rejection(self, reason: Rejection) -> None:
        with self._lock:
            self._rejections[reason] = self._rejections.get(reason, 0) + 1

    def token_grant(self, granted: bool) -> None:
        with self._lock:
            if granted:
                self._token_refreshes += 1
            else:
                self._token_refusals += 1

    def disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1

    def snapshot(self) -> ProviderStats:
        with self._lock:
            return ProviderStats(
                requests=self._requests,
                completed=self._completed,
                by_wire=dict(self._by_wire),
                faults=dict(self._faults),
                rejections=dict(self._rejections),
                token_refreshes=self._token_refreshes,
                token_refusals=self._token_refusals,
                disconnects=self._disconnects,
                input_tokens=self._usage[0],
                cached_tokens=self._usage[1],
                output_tokens=self._usage[2],
            )
