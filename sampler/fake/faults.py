"""What can go wrong with a model call, and the plan that decides when it does.

A `Fault` describes one failure as a real provider or proxy produces it. A `FaultPlan` decides, request by
request, which fault (if any) the provider injects: first from its explicit queue, then by seeded
probabilities. For a given plan and the same order of requests the decisions are always the same.

The plan is consulted once per model call that passed the body-size and authentication checks; the token
endpoint never sees a fault.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

import msgspec

__all__ = [
    "FAULT_KINDS",
    "PROFILES",
    "STATUS_KINDS",
    "TRANSIENT_KINDS",
    "Fault",
    "FaultKind",
    "FaultPlan",
]

FaultKind = Literal[
    "rate_limit",
    "insufficient_quota",
    "server_error",
    "bad_gateway",
    "unavailable",
    "overloaded",
    "http_error",
    "reset",
    "stall",
    "empty",
    "content_filter",
    "stream_error",
    "token_expired",
    "context_overflow",
    "budget_exhausted",
    "request_too_large_tpm",
    "whole_answer",
    "error_in_200",
    "structure_rejected",
]
"""Every kind of fault; `ProviderStats.faults` counts injected faults by these names."""

FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)

_QUEUE_ONLY: frozenset[FaultKind] = frozenset(
    {
        "http_error",
        "context_overflow",
        "budget_exhausted",
        "request_too_large_tpm",
        "whole_answer",
        "error_in_200",
        "structure_rejected",
    }
)
"""Kinds only a scripted queue injects; a plan draws none of them."""

STATUS_KINDS: frozenset[FaultKind] = frozenset(
    {
        "rate_limit",
        "insufficient_quota",
        "server_error",
        "bad_gateway",
        "unavailable",
        "overloaded",
        "http_error",
        "budget_exhausted",
        "request_too_large_tpm",
        "error_in_200",
        "structure_rejected",
    }
)
"""Faults answered with an error response instead of the model's reply (`error_in_200` with status 200)."""

_TRANSIENT: tuple[FaultKind, ...] = (
    "rate_limit",
    "server_error",
    "bad_gateway",
    "unavailable",
    "overloaded",
    "reset",
    "stall",
    "empty",
    "stream_error",
)
TRANSIENT_KINDS: frozenset[FaultKind] = frozenset(_TRANSIENT)
"""Faults a client is expected to absorb by retrying the same request."""

_KIND_BY_STATUS: dict[int, FaultKind] = {
    429: "rate_limit",
    500: "server_error",
    502: "bad_gateway",
    503: "unavailable",
    529: "overloaded",
}

PROFILES: tuple[str, ...] = ("none", "light", "heavy")
"""The names `FaultPlan.profile` accepts."""


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """One injected failure. Build it with the class methods; the fields say how it unfolds.

    `after_chunks` counts the stream events sent before a mid-stream fault acts; a mid-stream fault never
    lets the stream finish, however large `after_chunks` is. Retry headers are sent exactly as given:
    `retry_after` as `Retry-After` (seconds), `retry_after_ms` as `retry-after-ms`.
    """

    kind: FaultKind
    http_status: int = 200
    retry_after: int | None = None
    retry_after_ms: int | None = None
    after_chunks: int = 0
    stall_seconds: float = 0.0
    hang: bool = False
    with_done: bool = True

    def __post_init__(self) -> None:
        if self.after_chunks < 0:
            raise ValueError(f"after_chunks must not be negative, got {self.after_chunks}")
        if self.stall_seconds < 0:
            raise ValueError(f"stall_seconds must not be negative, got {self.stall_seconds}")

    @classmethod
    def status(cls, code: int, *, retry_after: int | None = None, retry_after_ms: int | None = None) -> Fault:
        """An error status with the provider's real body for it.

        429, 500, 502, 503 and 529 are the kinds `rate_limit`, `server_error`, `bad_gateway` (an HTML
        proxy page), `unavailable` and `overloaded`; any other code from 400 to 599 is `http_error`.
        """
        if not 400 <= code <= 599:
            raise ValueError(f"an error status is 400..599, got {code}")
        kind = _KIND_BY_STATUS.get(code, "http_error")
        return cls(kind=kind, http_status=code, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def rate_limit(cls, *, retry_after: int | None = None, retry_after_ms: int | None = None) -> Fault:
        """429 rate limit exceeded (transient)."""
        return cls.status(429, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def insufficient_quota(cls) -> Fault:
        """Quota or credit exhausted (not transient): OpenAI's 429 `insufficient_quota`; on the Anthropic
        wire, its 400 "credit balance is too low" `invalid_request_error`."""
        return cls(kind="insufficient_quota", http_status=429)

    @classmethod
    def server_error(cls) -> Fault:
        """500 internal server error."""
        return cls.status(500)

    @classmethod
    def bad_gateway(cls) -> Fault:
        """502 with an HTML page, as a proxy in front of the provider sends it."""
        return cls.status(502)

    @classmethod
    def unavailable(cls, *, retry_after: int | None = None, retry_after_ms: int | None = None) -> Fault:
        """503 service unavailable."""
        return cls.status(503, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def overloaded(cls, *, retry_after: int | None = None, retry_after_ms: int | None = None) -> Fault:
        """529 `overloaded_error`."""
        return cls.status(529, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def reset(cls, *, after_chunks: int = 3) -> Fault:
        """The connection closes after `after_chunks` events, without finishing the chunked body.

        On a non-streaming call the body is cut in half instead.
        """
        return cls(kind="reset", after_chunks=after_chunks)

    @classmethod
    def stall(cls, *, seconds: float = 0.2, after_chunks: int = 1, hang: bool = False) -> Fault:
        """Nothing is sent for `seconds` after `after_chunks` events, then the stream goes on; with
        `hang=True` nothing more is sent until the client goes away (or the provider stops).

        On a non-streaming call the stall happens before the response.
        """
        return cls(kind="stall", stall_seconds=seconds, after_chunks=after_chunks, hang=hang)

    @classmethod
    def empty(cls, *, with_done: bool = True) -> Fault:
        """A 200 response with no content: only the end-of-stream events (`with_done`), or no body at all."""
        return cls(kind="empty", with_done=with_done)

    @classmethod
    def content_filter(cls, *, after_chunks: int = 1) -> Fault:
        """The answer stops after `after_chunks` content chunks with finish reason `content_filter`
        (Anthropic: stop reason `refusal`). Not transient: the response is complete."""
        return cls(kind="content_filter", after_chunks=after_chunks)

    @classmethod
    def stream_error(cls, *, after_chunks: int = 1) -> Fault:
        """An error event inside a 200 stream after `after_chunks` events (OpenAI `data: {"error": ...}`,
        Anthropic `event: error` with `overloaded_error`); the stream then ends. On a non-streaming call:
        500 (OpenAI) or 529 (Anthropic)."""
        return cls(kind="stream_error", after_chunks=after_chunks)

    @classmethod
    def context_overflow(cls) -> Fault:
        """A 400 context-overflow error in the provider's wording, whatever the request's size (for tests
        of compaction that must not depend on a window)."""
        return cls(kind="context_overflow", http_status=400)

    @classmethod
    def budget_exhausted(cls) -> Fault:
        """429 saying the account's budget is used up, as a LiteLLM proxy says it (`budget_exceeded`):
        never transient, whatever the status."""
        return cls(kind="budget_exhausted", http_status=429)

    @classmethod
    def request_too_large_tpm(cls) -> Fault:
        """429 saying the request alone is larger than the per-minute token limit (OpenAI's "Request too
        large for … on tokens per min (TPM)"): waiting cannot help, only a smaller request."""
        return cls(kind="request_too_large_tpm", http_status=429)

    @classmethod
    def whole_answer(cls) -> Fault:
        """A streamed request answered with the whole non-streamed answer as `200 application/json`, as
        some gateways do."""
        return cls(kind="whole_answer")

    @classmethod
    def error_in_200(cls) -> Fault:
        """A JSON error body with status 200 (a gateway's way of reporting an upstream failure)."""
        return cls(kind="error_in_200", http_status=200)

    @classmethod
    def structure_rejected(cls) -> Fault:
        """400 refusing the history's structure (a tool call without its result), in the wire's provider's
        words, whatever the request holds."""
        return cls(kind="structure_rejected", http_status=400)

    @classmethod
    def token_expired(cls) -> Fault:
        """401 for the request's access token, which stays expired from then on (refresh to go on)."""
        return cls(kind="token_expired", http_status=401)


class FaultPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Which fault each model call gets: the `queue` first, one entry per call (None = no fault), then
    the per-kind probabilities, drawn from a generator seeded with `seed`.

    Guarantee for probability-drawn faults: one request body (a retry sends the same body) is faulted at
    most `max_consecutive` times in total, whoever sends it. With `max_consecutive` of 9 or less (default
    3), a client that retries the same request up to 10 times always gets a clean answer. Queue entries
    are exact and ignore this limit. The named profiles draw only `TRANSIENT_KINDS`.

    Drawn faults use `retry_after_ms` for the `retry-after-ms` header of 429/503/529, `stall_seconds` and
    `stall_hangs` for stalls, and a mid-stream position from 0 to `max_after_chunks`.
    """

    seed: int = 0
    queue: tuple[Fault | None, ...] = ()
    rate_limit: float = 0.0
    insufficient_quota: float = 0.0
    server_error: float = 0.0
    bad_gateway: float = 0.0
    unavailable: float = 0.0
    overloaded: float = 0.0
    reset: float = 0.0
    stall: float = 0.0
    empty: float = 0.0
    content_filter: float = 0.0
    stream_error: float = 0.0
    token_expired: float = 0.0
    max_consecutive: int = 3
    stall_seconds: float = 0.2
    stall_hangs: bool = False
    retry_after_ms: int | None = 20
    max_after_chunks: int = 6

    def __post_init__(self) -> None:
        rates = self.rates()
        for kind, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"the probability of {kind} must be within 0..1, got {rate}")
        if sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault probabilities add up to more than 1: {sum(rates.values())}")
        if self.max_consecutive < 0 or self.max_after_chunks < 0 or self.stall_seconds < 0:
            raise ValueError("max_consecutive, max_after_chunks and stall_seconds must not be negative")

    def rates(self) -> dict[FaultKind, float]:
        """The probability of each kind that can be drawn (only non-zero ones), in `FAULT_KINDS` order."""
        values = {kind: float(getattr(self, kind)) for kind in FAULT_KINDS if kind not in _QUEUE_ONLY}
        return {kind: rate for kind, rate in values.items() if rate > 0.0}

    @classmethod
    def none(cls) -> FaultPlan:
        """No faults at all."""
        return cls()

    @classmethod
    def scripted(cls, faults: Iterable[Fault | None]) -> FaultPlan:
        """Exactly these faults, one per model call in arrival order (None = no fault), then none."""
        return cls(queue=tuple(faults))

    @classmethod
    def profile(
        cls,
        name: str,
        *,
        seed: int = 0,
        max_consecutive: int = 3,
        stall_seconds: float = 0.2,
        stall_hangs: bool = False,
        retry_after_ms: int | None = 20,
    ) -> FaultPlan:
        """A named mix of transient faults: "none", "light" (about 10 % of calls) or "heavy" (about 40 %).

        Raises ValueError for an unknown name.
        """
        rates = _PROFILE_RATES.get(name)
        if rates is None:
            raise ValueError(f"unknown fault profile {name!r}; expected one of {', '.join(PROFILES)}")
        plan = cls(
            seed=seed,
            max_consecutive=max_consecutive,
            stall_seconds=stall_seconds,
            stall_hangs=stall_hangs,
            retry_after_ms=retry_after_ms,
        )
        return msgspec.structs.replace(plan, **rates)


_PROFILE_RATES: dict[str, dict[str, float]] = {
    "none": {},
    "light": {
        "rate_limit": 0.03,
        "server_error": 0.01,
        "bad_gateway": 0.01,
        "unavailable": 0.01,
        "overloaded": 0.01,
        "reset": 0.015,
        "stall": 0.005,
        "empty": 0.005,
        "stream_error": 0.005,
    },
    "heavy": {
        "rate_limit": 0.10,
        "server_error": 0.04,
        "bad_gateway": 0.04,
        "unavailable": 0.04,
        "overloaded": 0.04,
        "reset": 0.06,
        "stall": 0.03,
        "empty": 0.025,
        "stream_error": 0.025,
    },
}
