"""The embedded provider's rate limits: buckets that refill, refusals with Retry-After, both header
families on every answer, and none at all when asked to omit them."""

from __future__ import annotations

import pytest

from sampler.fake._ratelimit import RateLimit, RateLimiter
from sampler.gate import observe


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_requests_beyond_the_bucket_are_refused_until_it_refills() -> None:
    clock = Clock()
    limiter = RateLimiter(
        RateLimit(requests_per_minute=120, burst_seconds=1.0), clock=clock, wall=lambda: 0.0
    )
    assert [limiter.admit(10).allowed for _ in range(3)] == [True, True, False]
    refused = limiter.admit(10)
    assert refused.exhausted == "requests"
    clock.now = 0.5
    assert limiter.admit(10).allowed


def test_a_refusal_says_when_to_come_back_in_both_forms_and_the_gate_reads_it() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(tokens_per_minute=600, burst_seconds=60.0), clock=clock, wall=lambda: 1e9)
    assert limiter.admit(600).allowed
    refused = limiter.admit(100)
    headers = {name.decode(): value.decode() for name, value in refused.headers}
    assert (refused.exhausted, headers["retry-after"], headers["retry-after-ms"]) == ("tokens", "10", "10000")
    seen = observe(429, headers, 1e9)
    assert seen.retry_after == 10.0
    assert seen.tokens is not None and (seen.tokens.limit, seen.tokens.remaining) == (600, 0)
    assert seen.tokens.reset_in == pytest.approx(60.0)
    assert headers["anthropic-ratelimit-tokens-reset"].startswith("2001-09-09T01:47:40")


def test_headers_can_be_left_out_and_limits_must_be_positive() -> None:
    quiet = RateLimiter(RateLimit(requests_per_minute=60, burst_seconds=1.0, headers=False), clock=Clock())
    quiet.admit(1)
    assert quiet.admit(1) == quiet.admit(1)
    assert not quiet.admit(1).allowed and quiet.admit(1).headers == ()
    with pytest.raises(ValueError, match="requests_per_minute"):
        RateLimit(requests_per_minute=0)
