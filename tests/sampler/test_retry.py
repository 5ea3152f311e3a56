"""Specification of the retry policy: back-off, Retry-After, exhaustion, what is never retried, config."""

from __future__ import annotations

import random

import msgspec
import pytest

from sampler.errors import LlmError, LlmErrorKind, classify_http_error, parse_retry_after
from sampler.retry import RetryDecision, RetryPolicy, backoff_delay, decide, is_retryable

K = LlmErrorKind
POLICY = RetryPolicy()
EXPECTED_BACKOFF = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 32.0]


def error(kind: LlmErrorKind = K.TIMEOUT, **fields: object) -> LlmError:
    return LlmError(kind=kind, message=fields.pop("message", "it failed"), **fields)  # type: ignore[arg-type]


# --- Defaults ---------------------------------------------------------------------------------------------


def test_the_default_policy_is_the_designed_one():
    policy = RetryPolicy()

    assert policy == RetryPolicy(
        max_attempts=10,
        base_delay=0.5,
        factor=2.0,
        max_delay=32.0,
        jitter=0.25,
        retryable_statuses=(408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529),
        max_retry_after=60.0,
    )


# --- Back-off ---------------------------------------------------------------------------------------------


def test_without_jitter_the_backoff_doubles_from_half_a_second_up_to_32_seconds():
    policy = RetryPolicy(jitter=0.0)
    rng = random.Random(0)

    delays = [backoff_delay(policy, attempt, rng) for attempt in range(1, 10)]

    assert delays == EXPECTED_BACKOFF


def test_jitter_adds_up_to_a_quarter_and_never_subtracts_over_many_seeds():
    lowest = [float("inf")] * len(EXPECTED_BACKOFF)
    highest = [0.0] * len(EXPECTED_BACKOFF)
    for seed in range(500):
        rng = random.Random(seed)
        for index, base in enumerate(EXPECTED_BACKOFF):
            delay = backoff_delay(POLICY, index + 1, rng)
            assert base <= delay <= base * 1.25
            lowest[index] = min(lowest[index], delay)
            highest[index] = max(highest[index], delay)

    for index, base in enumerate(EXPECTED_BACKOFF):  # the whole jitter range is actually used
        assert lowest[index] < base * 1.01
        assert highest[index] > base * 1.24


def test_the_same_seed_gives_the_same_delays():
    first = [backoff_delay(POLICY, attempt, random.Random(42)) for attempt in range(1, 10)]
    second = [backoff_delay(POLICY, attempt, random.Random(42)) for attempt in range(1, 10)]
    other = [backoff_delay(POLICY, attempt, random.Random(43)) for attempt in range(1, 10)]

    assert first == second
    assert first != other


def test_a_very_late_attempt_stays_at_the_cap():
    delay = backoff_delay(POLICY, 100_000, random.Random(1))

    assert 32.0 <= delay <= 40.0


def test_a_zero_base_delay_never_waits():
    policy = RetryPolicy(base_delay=0.0)

    assert [backoff_delay(policy, attempt, random.Random(1)) for attempt in (1, 5, 100_000)] == [
        0.0,
        0.0,
        0.0,
    ]


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempts_are_counted_from_one(attempt):
    with pytest.raises(ValueError, match="attempt"):
        backoff_delay(POLICY, attempt, random.Random(1))
    with pytest.raises(ValueError, match="attempt"):
        decide(error(), attempt, POLICY, random.Random(1))


# --- What is retried --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [K.CONNECTION, K.TIMEOUT, K.RATE_LIMIT, K.OVERLOADED, K.EMPTY_RESPONSE])
def test_transient_kinds_are_retried(kind):
    decision = decide(error(kind), 1, POLICY, random.Random(1))

    assert is_retryable(error(kind), POLICY)
    assert decision.retry
    assert 0.5 <= decision.delay <= 0.625
    assert decision.error == error(kind)


@pytest.mark.parametrize(
    "kind",
    [
        K.CONTEXT_OVERFLOW,
        K.REQUEST_TOO_LARGE,
        K.IMAGE_FORMAT,
        K.REQUEST_STRUCTURE,
        K.QUOTA_EXHAUSTED,
        K.AUTH,
        K.SYNTAX,
        K.ABORT,
        K.PROVIDER,
        K.UNKNOWN,
    ],
)
def test_kinds_that_need_a_different_request_are_never_retried(kind):
    failure = error(kind, status=400, retry_after=1.0)

    decision = decide(failure, 1, POLICY, random.Random(1))

    assert not is_retryable(failure, POLICY)
    assert decision == RetryDecision(retry=False, error=failure)
    assert decision.error is failure


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529])
def test_status_errors_are_retried_for_the_retryable_statuses(status):
    # 520-524 are Cloudflare's answers for an origin that is unreachable or slow: transient by definition.
    assert is_retryable(error(K.STATUS, status=status), POLICY)


@pytest.mark.parametrize("status", [None, 501, 505, 511, 525, 526])
def test_status_errors_are_not_retried_for_other_statuses(status):
    assert not is_retryable(error(K.STATUS, status=status), POLICY)


def test_the_retryable_statuses_come_from_the_policy():
    policy = RetryPolicy(retryable_statuses=(524,))

    assert is_retryable(error(K.STATUS, status=524), policy)
    assert not is_retryable(error(K.STATUS, status=500), policy)


def test_an_empty_response_from_a_content_filter_is_not_retried():
    assert is_retryable(error(K.EMPTY_RESPONSE), POLICY)
    assert not is_retryable(error(K.EMPTY_RESPONSE, filtered=True), POLICY)


# --- Exhaustion -------------------------------------------------------------------------------------------


def test_nine_failures_are_retried_with_the_backoff_and_the_tenth_gives_up():
    rng = random.Random(3)
    failure = error(K.CONNECTION, message="connection reset")

    decisions = [decide(failure, attempt, POLICY, rng) for attempt in range(1, 11)]

    assert [decision.retry for decision in decisions] == [True] * 9 + [False]
    for decision, base in zip(decisions[:-1], EXPECTED_BACKOFF, strict=True):
        assert base <= decision.delay <= base * 1.25
    last = decisions[-1]
    assert last.error.kind is K.CONNECTION
    assert last.error.message == "connection reset (gave up after 10 attempts)"
    assert last.delay == 0.0


def test_exhaustion_follows_the_configured_max_attempts():
    policy = RetryPolicy(max_attempts=3)
    rng = random.Random(3)

    assert decide(error(), 2, policy, rng).retry
    assert not decide(error(), 3, policy, rng).retry
    assert not decide(error(), 4, policy, rng).retry


def test_a_single_attempt_policy_gives_up_at_once():
    decision = decide(error(message=""), 1, RetryPolicy(max_attempts=1), random.Random(1))

    assert not decision.retry
    assert decision.error.message == "gave up after 1 attempt"


def test_exhaustion_wins_over_a_retry_after():
    decision = decide(error(K.RATE_LIMIT, retry_after=2.0), 10, POLICY, random.Random(1))

    assert not decision.retry
    assert decision.error.kind is K.RATE_LIMIT
    assert "gave up after 10 attempts" in decision.error.message


# --- Retry-After ------------------------------------------------------------------------------------------


def test_retry_after_seconds_replace_the_backoff():
    failure = classify_http_error(429, "slow down", {"Retry-After": "7"})

    decision = decide(failure, 1, POLICY, random.Random(1))

    assert decision == RetryDecision(retry=True, error=failure, delay=7.0)


def test_retry_after_as_an_http_date_replaces_the_backoff():
    now = 1_735_732_800.0  # 2025-01-01 12:00:00 UTC
    wait = parse_retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:20 GMT"}, now=now)
    failure = error(K.RATE_LIMIT, status=429, retry_after=wait)

    decision = decide(failure, 4, POLICY, random.Random(1))

    assert decision.retry
    assert decision.delay == 20.0


def test_retry_after_ms_replaces_the_backoff():
    failure = classify_http_error(529, "", {"retry-after-ms": "250", "retry-after": "30"})

    decision = decide(failure, 6, POLICY, random.Random(1))

    assert decision.retry
    assert decision.delay == 0.25


def test_a_retry_after_at_the_limit_is_waited_out():
    decision = decide(error(K.OVERLOADED, retry_after=60.0), 1, POLICY, random.Random(1))

    assert decision.retry
    assert decision.delay == 60.0


def test_a_retry_after_beyond_the_limit_stops_as_a_rate_limit_naming_the_wait():
    failure = error(K.OVERLOADED, status=503, message="Service Unavailable", retry_after=120.0)

    decision = decide(failure, 1, POLICY, random.Random(1))

    assert not decision.retry
    assert decision.error.kind is K.RATE_LIMIT
    assert decision.error.status == 503
    assert decision.error.retry_after == 120.0
    assert decision.error.message == (
        "provider asked to retry after 120 s, more than the 60 s limit: Service Unavailable"
    )


def test_the_retry_after_limit_comes_from_the_policy():
    policy = RetryPolicy(max_retry_after=300.0)

    assert decide(error(K.RATE_LIMIT, retry_after=120.0), 1, policy, random.Random(1)).delay == 120.0


def test_a_retry_after_does_not_make_a_permanent_error_retryable():
    failure = error(K.QUOTA_EXHAUSTED, status=429, retry_after=1.0)

    assert decide(failure, 1, POLICY, random.Random(1)).error is failure


# --- Configuration ----------------------------------------------------------------------------------------


def test_the_environment_sets_the_attempts_per_step():
    base = RetryPolicy(base_delay=0.1)

    policy = RetryPolicy.from_env(base, {"TURNKEEP_MAX_ATTEMPTS_PER_STEP": "3"})

    assert policy == RetryPolicy(base_delay=0.1, max_attempts=3)


@pytest.mark.parametrize("environ", [{}, {"TURNKEEP_MAX_ATTEMPTS_PER_STEP": ""}, {"OTHER": "4"}])
def test_without_the_variable_the_base_policy_is_kept(environ):
    base = RetryPolicy(max_attempts=7)

    assert RetryPolicy.from_env(base, environ) is base
    assert RetryPolicy.from_env(None, environ) == RetryPolicy()


def test_the_process_environment_is_read_by_default(monkeypatch):
    monkeypatch.setenv("TURNKEEP_MAX_ATTEMPTS_PER_STEP", " 4 ")

    assert RetryPolicy.from_env().max_attempts == 4


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", "1e3", "+3", "\uff13"])
def test_an_invalid_attempt_count_in_the_environment_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match="TURNKEEP_MAX_ATTEMPTS_PER_STEP"):
        RetryPolicy.from_env(None, {"TURNKEEP_MAX_ATTEMPTS_PER_STEP": value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", -3),
        ("max_attempts", True),
        ("base_delay", -0.1),
        ("base_delay", float("nan")),
        ("max_delay", -1.0),
        ("max_retry_after", -5.0),
        ("factor", 0.5),
        ("jitter", -0.01),
        ("jitter", 1.5),
        ("retryable_statuses", (42,)),
    ],
)
def test_out_of_range_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**{field: value})


def test_a_policy_decodes_from_configuration():
    policy = msgspec.json.decode(b'{"max_attempts": 3, "retryable_statuses": [429, 503]}', type=RetryPolicy)

    assert policy == RetryPolicy(max_attempts=3, retryable_statuses=(429, 503))


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (b'{"jitter": 2}', "jitter"),
        (b'{"max_attempts": 0}', "max_attempts"),
        (b'{"max_attempt": 3}', "max_attempt"),
    ],
)
def test_bad_configuration_is_refused_naming_the_field(document, field):
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.json.decode(document, type=RetryPolicy)


def test_a_policy_and_a_decision_are_immutable_and_serialisable():
    decision = decide(error(K.RATE_LIMIT, retry_after=2.0), 1, POLICY, random.Random(1))

    assert msgspec.msgpack.decode(msgspec.msgpack.encode(decision), type=RetryDecision) == decision
    with pytest.raises(AttributeError):
        POLICY.max_attempts = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        decision.retry = False  # type: ignore[misc]
