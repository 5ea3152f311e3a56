"""Turns a `FaultPlan` into one decision per model call, in arrival order."""

from __future__ import annotations

import random
import threading

from .faults import Fault, FaultKind, FaultPlan

# Bodies remembered for the per-request fault limit; beyond this the oldest are forgotten.
_REMEMBERED_BODIES = 200_000


class FaultDecider:
    """The running state of one plan: queue position, generator, faults per request body. Thread-safe."""

    def __init__(self, plan: FaultPlan) -> None:
        self._plan = plan
        self._queue = plan.queue
        self._position = 0
        self._rng = random.Random(plan.seed)
        self._rates = list(plan.rates().items())
        self._faulted: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def next(self, body_key: bytes) -> Fault | None:
        """The fault for the next model call, whose body digests to `body_key` (None = no fault)."""
        with self._lock:
            if self._position < len(self._queue):
                fault = self._queue[self._position]
                self._position += 1
                return fault
            if not self._rates:
                return None
            # Always draw the same amount per call, so one suppressed fault does not shift the others.
            roll = self._rng.random()
            detail_seed = self._rng.getrandbits(32)
            kind = self._pick(roll)
            if kind is None:
                return None
            count = self._faulted.get(body_key, 0)
            if count >= self._plan.max_consecutive:
                return None
            if count == 0 and len(self._faulted) >= _REMEMBERED_BODIES:
                del self._faulted[next(iter(self._faulted))]
            self._faulted[body_key] = count + 1
            return self._build(kind, random.Random(detail_seed))

    def _pick(self, roll: float) -> FaultKind | None:
        edge = 0.0
        for kind, rate in self._rates:
            edge += rate
            if roll < edge:
                return kind
        return None

    def _build(self, kind: FaultKind, rng: random.Random) -> Fault:
        plan = self._plan
        position = rng.randint(0, plan.max_after_chunks)
        match kind:
            case "rate_limit" | "unavailable" | "overloaded":
                status = {"rate_limit": 429, "unavailable": 503, "overloaded": 529}[kind]
                return Fault.status(status, retry_after_ms=plan.retry_after_ms)
            case "server_error":
                return Fault.server_error()
            case "bad_gateway":
                return Fault.bad_gateway()
            case "insufficient_quota":
                return Fault.insufficient_quota()
            case "reset":
                return Fault.reset(after_chunks=position)
            case "stall":
                return Fault.stall(seconds=plan.stall_seconds, after_chunks=position, hang=plan.stall_hangs)
            case "empty":
                return Fault.empty(with_done=rng.random() < 0.5)
            case "content_filter":
                return Fault.content_filter(after_chunks=position)
            case "stream_error":
                return Fault.stream_error(after_chunks=position)
            case "token_expired":
                return Fault.token_expired()
            case "http_error":
                return Fault.status(500)
            case "context_overflow":
                return Fault.context_overflow()
            case "budget_exhausted":
                return Fault.budget_exhausted()
            case "request_too_large_tpm":
                return Fault.request_too_large_tpm()
            case "whole_answer":
                return Fault.whole_answer()
            case "error_in_200":
                return Fault.error_in_200()
            case "structure_rejected":
                return Fault.structure_rejected()
