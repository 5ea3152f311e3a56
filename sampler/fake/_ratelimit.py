"""The embedded provider's rate limits: token buckets for requests and tokens per minute, answered the way
hosted providers answer them (429 with Retry-After, and OpenAI's and Anthropic's rate-limit headers)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from ._wire import Header, Response, json_response

__all__ = ["RateLimit", "RateLimiter", "Verdict", "refusal"]


class RateLimit(msgspec.Struct, frozen=True, kw_only=True):
    """Limits per minute (None: none) that refill continuously; a bucket holds ``burst_seconds`` worth of
    its rate. ``headers = False`` sends neither Retry-After nor rate-limit headers, as some providers."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_seconds: float = 60.0
    headers: bool = True

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"RateLimit.{name} must be > 0 or None, got {value!r}")
        if not (math.isfinite(self.burst_seconds) and self.burst_seconds > 0):
            raise ValueError(f"RateLimit.burst_seconds must be > 0, got {self.burst_seconds!r}")


class Verdict(msgspec.Struct, frozen=True):
    """Whether a request is let through, what it ran out of when not, and the headers to answer with."""

    allowed: bool
    exhausted: str
    """``requests`` or ``tokens`` when refused, "" when allowed."""
    headers: tuple[Header, ...]


class _Bucket:
    def __init__(self, per_minute: float, burst_seconds: float, now: float) -> None:
        self.capacity = per_minute * burst_seconds / 60.0
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.at = now

    def fill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` (at most the capacity) is available."""
        need = min(amount, self.capacity)
        return max(0.0, (need - self.level) / self.rate)

    def until_full(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


class RateLimiter:
    """Admits requests against the limits; thread-safe. ``clock`` is monotonic seconds, ``wall`` the epoch
    seconds the Anthropic reset timestamps are written in."""

    def __init__(
        self,
        limits: RateLimit,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        now = clock()
        self._requests = (
            None
            if limits.requests_per_minute is None
            else _Bucket(limits.requests_per_minute, limits.burst_seconds, now)
        )
        self._tokens = (
            None
            if limits.tokens_per_minute is None
            else _Bucket(limits.tokens_per_minute, limits.burst_seconds, now)
        )

    def admit(self, tokens: int) -> Verdict:
        """Take one request of ``tokens`` input tokens from the buckets, or refuse it without taking."""
        with self._lock:
            now = self._clock()
            waits: dict[str, float] = {}
            for name, bucket, amount in (("requests", self._requests, 1), ("tokens", self._tokens, tokens)):
                if bucket is not None:
                    bucket.fill(now)
                    waits[name] = bucket.wait_for(amount)
            exhausted = next((name for name, wait in waits.items() if wait > 0), "")
            if not exhausted:
                for bucket, amount in ((self._requests, 1), (self._tokens, tokens)):
                    if bucket is not None:
                        bucket.level -= min(amount, bucket.capacity)
            retry = max(waits.values(), default=0.0) if exhausted else None
            return Verdict(not exhausted, exhausted, self._headers(retry))

    def _headers(self, retry_after: float | None) -> tuple[Header, ...]:
        if not self.limits.headers:
            return ()
        headers: list[Header] = []
        if retry_after is not None:
            headers.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
            headers.append((b"retry-after-ms", str(max(1, math.ceil(retry_after * 1000))).encode()))
        wall = self._wall()
        for name, bucket in (("requests", self._requests), ("tokens", self._tokens)):
            if bucket is None:
                continue
            limit, remaining, reset = str(int(bucket.capacity)), str(int(bucket.level)), bucket.until_full()
            stamp = datetime.fromtimestamp(wall + reset, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            headers += [
                (f"x-ratelimit-limit-{name}".encode(), limit.encode()),
                (f"x-ratelimit-remaining-{name}".encode(), remaining.encode()),
                (f"x-ratelimit-reset-{name}".encode(), _duration(reset).encode()),
                (f"anthropic-ratelimit-{name}-limit".encode(), limit.encode()),
                (f"anthropic-ratelimit-{name}-remaining".encode(), remaining.encode()),
                (f"anthropic-ratelimit-{name}-reset".encode(), stamp.encode()),
            ]
        return tuple(headers)


def _duration(seconds: float) -> str:
    """OpenAI's way of writing a reset: ``"20ms"``, ``"1.5s"``, ``"6m0s"``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"


def refusal(wire: str, verdict: Verdict) -> Response:
    """The 429 a provider of ``wire`` (``openai`` or ``anthropic``) answers when ``verdict`` refused."""
    what = verdict.exhausted or "requests"
    unit = "requests per min (RPM)" if what == "requests" else "tokens per min (TPM)"
    message = f"Rate limit reached for {unit}. Please try again later."
    if wire == "anthropic":
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": what, "param": None, "code": "rate_limit_exceeded"}}
    return json_response(429, body, verdict.headers)
