"""Reading a provider's limits from its answer: Retry-After in every form, both header families, and
never an error for a value that cannot be read."""

from __future__ import annotations

import email.utils

from hypothesis import given
from hypothesis import strategies as st

from sampler.gate import Budget, observe

NOW = 1_800_000_000.0


def test_retry_after_in_seconds_milliseconds_and_as_an_http_date() -> None:
    assert observe(429, {"Retry-After": "7"}, NOW).retry_after == 7.0
    assert observe(429, {"retry-after-ms": "1500", "retry-after": "9"}, NOW).retry_after == 1.5
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert observe(429, {"Retry-After": date}, NOW).retry_after == 30.0


def test_a_date_in_the_past_means_no_pause_and_an_absurd_one_is_capped_at_a_day() -> None:
    past = email.utils.formatdate(NOW - 60, usegmt=True)
    assert observe(429, {"retry-after": past}, NOW).retry_after == 0.0
    assert observe(429, {"retry-after": "99999999"}, NOW).retry_after == 24 * 3600.0


def test_openai_headers_give_request_and_token_budgets_with_duration_resets() -> None:
    seen = observe(
        200,
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "30000",
            "x-ratelimit-remaining-tokens": "29000",
            "x-ratelimit-reset-tokens": "6m0s",
        },
        NOW,
    )
    assert seen.requests == Budget(500, 499, 0.12)
    assert seen.tokens == Budget(30000, 29000, 360.0)


def test_anthropic_headers_give_the_tightest_token_budget_and_timestamp_resets() -> None:
    reset = "2027-01-15T08:00:30Z"
    from datetime import datetime

    now = datetime.fromisoformat("2027-01-15T08:00:00+00:00").timestamp()
    seen = observe(
        200,
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-input-tokens-limit": "40000",
            "anthropic-ratelimit-input-tokens-remaining": "100",
            "anthropic-ratelimit-input-tokens-reset": reset,
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "anthropic-ratelimit-output-tokens-remaining": "7000",
            "anthropic-ratelimit-output-tokens-reset": reset,
        },
        now,
    )
    assert seen.requests == Budget(50, 0, 30.0)
    assert seen.tokens == Budget(40000, 100, 30.0)


def test_bad_values_are_ignored() -> None:
    seen = observe(
        429,
        {
            "retry-after": "soon",
            "x-ratelimit-remaining-requests": "-3",
            "x-ratelimit-remaining-tokens": "nan",
        },
        NOW,
    )
    assert (seen.retry_after, seen.requests, seen.tokens) == (None, None, None)
    assert seen.refused_for_rate


@given(
    status=st.integers(min_value=0, max_value=999),
    headers=st.dictionaries(
        st.sampled_from(
            [
                "retry-after",
                "retry-after-ms",
                "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests",
                "x-ratelimit-limit-tokens",
                "x-ratelimit-remaining-tokens",
                "x-ratelimit-reset-tokens",
                "anthropic-ratelimit-requests-remaining",
                "anthropic-ratelimit-requests-reset",
            ]
        )
        | st.text(max_size=20),
        st.text(max_size=40),
        max_size=8,
    ),
)
def test_observe_never_raises(status: int, headers: dict[str, str]) -> None:
    seen = observe(status, headers, NOW)
    for value in (seen.retry_after, *(b.reset_in for b in (seen.requests, seen.tokens) if b is not None)):
        assert value is None or 0.0 <= value <= 24 * 3600.0
