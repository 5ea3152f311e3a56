"""The gate's decisions: a shared cool-down, budgets from headers and from configuration, a concurrency
limit, round-robin fairness across sessions with priorities and aging, and a queue that explains itself."""

from __future__ import annotations

import pytest

from sampler.gate import Budget, GateLimits, GateState, Observation, WaitReason


def leases(state: GateState, now: float) -> list[str]:
    return [grant.lease for grant in state.grant(now)]


def test_a_few_requests_go_until_the_provider_has_answered_then_every_one_without_limits() -> None:
    state = GateState()
    for n in range(7):
        state.enqueue(f"r{n}", f"s{n}", 0, 100, 0.0)
    assert leases(state, 0.0) == ["r0", "r1", "r2", "r3"]
    assert state.waiting_for("r4", 0.0) == (0, WaitReason.CONCURRENCY, None)
    state.release("r0", Observation(200), 0.5)
    assert leases(state, 0.5) == ["r4", "r5", "r6"]
    assert state.next_wake(0.5) is None


def test_a_429_with_retry_after_pauses_every_session_until_then() -> None:
    state = GateState()
    state.enqueue("a1", "a", 0, 10, 0.0)
    assert leases(state, 0.0) == ["a1"]
    state.release("a1", Observation(429, retry_after=5.0), 1.0)
    state.enqueue("b1", "b", 0, 10, 1.0)
    state.enqueue("c1", "c", 0, 10, 1.5)
    assert leases(state, 2.0) == []
    assert state.waiting_for("c1", 2.0) == (1, WaitReason.COOL_DOWN, 6.0)
    assert state.next_wake(2.0) == 6.0
    assert leases(state, 6.0) == ["b1", "c1"]


def test_a_429_without_retry_after_cools_down_for_longer_each_time_in_a_row_until_a_success() -> None:
    state = GateState()
    for n, expected in enumerate([1.0, 2.0, 4.0]):
        state.release(f"x{n}", Observation(429), 100.0 * n)
        assert state.snapshot(100.0 * n).cool_down == expected
    state.release("ok", Observation(200), 400.0)
    state.release("again", Observation(429), 500.0)
    assert state.snapshot(500.0).cool_down == 1.0


def test_a_spent_header_budget_makes_requests_wait_until_it_has_refilled_enough() -> None:
    state = GateState()
    # 1 of 10 left, full again in 30 s: it refills at 0.3 a second.
    state.release("first", Observation(200, requests=Budget(10, 1, 30.0)), 0.0)
    state.enqueue("r1", "s", 0, 5, 0.0)
    state.enqueue("r2", "s", 0, 5, 0.0)
    assert leases(state, 0.0) == ["r1"]
    place, reason, until = state.waiting_for("r2", 1.0) or (None, None, None)
    assert (place, reason) == (0, WaitReason.BUDGET) and until == pytest.approx(1 / 0.3)
    assert leases(state, 3.3) == []
    assert leases(state, 3.34) == ["r2"]


def test_a_token_budget_counts_each_requests_estimated_tokens() -> None:
    state = GateState()
    state.release("first", Observation(200, tokens=Budget(1000, 250, 60.0)), 0.0)  # 12.5 tokens a second
    state.enqueue("small", "s", 0, 200, 0.0)
    state.enqueue("large", "t", 0, 200, 0.0)
    assert leases(state, 0.0) == ["small"]
    assert state.next_wake(0.0) == pytest.approx(12.0)


def test_configured_per_minute_ceilings_refill_continuously() -> None:
    state = GateState(GateLimits(requests_per_minute=60, tokens_per_minute=600, first_requests=100))
    for n in range(62):
        state.enqueue(f"r{n}", f"s{n % 7}", 0, 1, 0.0)
    assert len(leases(state, 0.0)) == 60
    assert state.next_wake(0.0) == pytest.approx(1.0)
    assert len(leases(state, 1.0)) == 1
    big = GateState(GateLimits(tokens_per_minute=600))
    big.enqueue("huge", "s", 0, 10_000, 0.0)
    assert leases(big, 0.0) == ["huge"]  # larger than the whole budget: it goes when the budget is full


def test_at_most_max_concurrent_requests_are_in_flight_and_a_release_lets_the_next_go() -> None:
    state = GateState(GateLimits(max_concurrent=2))
    for n in range(3):
        state.enqueue(f"r{n}", f"s{n}", 0, 1, 0.0)
    assert leases(state, 0.0) == ["r0", "r1"]
    assert state.waiting_for("r2", 0.0) == (0, WaitReason.CONCURRENCY, None)
    assert state.next_wake(0.0) is None
    state.release("r0", None, 1.0)
    assert leases(state, 1.0) == ["r2"]


def test_sessions_take_turns_so_a_long_turn_cannot_starve_the_others() -> None:
    state = GateState(GateLimits(max_concurrent=1))
    for n in range(5):
        state.enqueue(f"busy{n}", "busy", 0, 1, 0.0)
    state.enqueue("quiet", "quiet", 0, 1, 0.1)
    order = []
    for step in range(6):
        (grant,) = state.grant(float(step + 1))
        order.append(grant.lease)
        state.release(grant.lease, Observation(200), float(step + 1))
    assert order == ["busy0", "quiet", "busy1", "busy2", "busy3", "busy4"]


def test_interactive_goes_before_background_and_aging_lets_background_progress() -> None:
    state = GateState(GateLimits(max_concurrent=1, aging=10.0))
    state.enqueue("bg", "batch", 1, 1, 0.0)
    state.enqueue("fg1", "chat", 0, 1, 0.0)
    state.enqueue("fg2", "chat2", 0, 1, 0.0)
    assert leases(state, 0.0) == ["fg1"]
    state.release("fg1", None, 1.0)
    assert leases(state, 1.0) == ["fg2"]
    state.enqueue("fg3", "chat", 0, 1, 11.0)
    state.release("fg2", None, 12.0)
    # bg has waited 12 s: one level up, level with interactive, and served longer ago than chat.
    assert leases(state, 12.0) == ["bg"]


def test_enqueue_is_idempotent_and_withdraw_forgets() -> None:
    state = GateState(GateLimits(max_concurrent=1))
    state.enqueue("r1", "s", 0, 1, 0.0)
    assert leases(state, 0.0) == ["r1"]
    state.enqueue("r1", "s", 0, 1, 0.5)  # asked again while in flight
    state.enqueue("r2", "s", 0, 1, 0.5)
    state.enqueue("r2", "s", 0, 1, 0.6)
    assert state.snapshot(0.6).waiting == {0: 1}
    state.withdraw("r2")
    assert state.waiting_for("r2", 0.6) is None
    assert state.snapshot(0.6).describe() == "provider gate: 1 in flight; waiting []"


def test_limits_refuse_values_that_cannot_be_limits() -> None:
    with pytest.raises(ValueError, match="max_concurrent"):
        GateLimits(max_concurrent=0)
    with pytest.raises(ValueError, match="requests_per_minute"):
        GateLimits(requests_per_minute=-1)
    with pytest.raises(ValueError, match="aging"):
        GateLimits(aging=0)
    with pytest.raises(ValueError, match="first_requests"):
        GateLimits(first_requests=0)


def test_a_reported_budget_refills_at_the_rate_its_reset_implies_never_beyond_its_limit() -> None:
    state = GateState()
    state.release("seen", Observation(200, requests=Budget(2, 0, 1.0)), 0.0)  # 2 a second
    for n in range(4):
        state.enqueue(f"r{n}", f"s{n}", 0, 1, 0.0)
    assert leases(state, 0.25) == []
    assert leases(state, 0.5) == ["r0"]
    assert leases(state, 10.0) == ["r1", "r2"]
    assert state.snapshot(10.0).requests_remaining == 0


def test_a_reported_budget_is_lowered_by_the_requests_still_in_flight() -> None:
    state = GateState()
    for n in range(3):
        state.enqueue(f"r{n}", f"s{n}", 0, 1, 0.0)
    assert len(leases(state, 0.0)) == 3
    state.release("r0", Observation(200, requests=Budget(10, 5, 60.0)), 0.1)
    assert state.snapshot(0.1).requests_remaining == 3


def test_a_report_older_than_the_one_held_lowers_the_budget_never_raises_it() -> None:
    state = GateState()
    for n in range(2):
        state.enqueue(f"r{n}", f"s{n}", 0, 1, 0.0)
    assert len(leases(state, 0.0)) == 2
    # The second request's answer (nothing left) arrives before the first's (one left, written earlier).
    state.release("r1", Observation(200, requests=Budget(2, 0, 0.2)), 0.1)
    state.release("r0", Observation(200, requests=Budget(2, 1, 0.1)), 0.1)
    assert state.snapshot(0.1).requests_remaining == 0
    state.enqueue("r2", "s2", 0, 1, 0.1)
    assert leases(state, 0.15) == []
    assert leases(state, 0.2) == ["r2"]  # refilled at the 10 a second the reports imply


def test_a_budget_reported_without_a_reset_is_replaced_by_the_next_report() -> None:
    state = GateState()
    state.release("a", Observation(200, requests=Budget(None, 0, None)), 0.0)
    state.release("b", Observation(200, requests=Budget(None, 7, None)), 1.0)
    assert state.snapshot(1.0).requests_remaining == 7


def test_the_gate_is_open_to_its_shortcut_only_while_nothing_could_hold_a_request_back() -> None:
    state = GateState()
    assert not state.open_now(0.0)  # the provider has not answered yet
    state.release("a", Observation(200), 0.0)
    assert state.open_now(0.0)
    state.enqueue("w", "s", 0, 1, 0.0)
    state.enqueue("x", "s", 0, 1, 0.0)
    assert state.open_now(0.0) is False  # requests wait (until granted)
    leases(state, 0.0)
    assert state.open_now(0.0)
    state.release("b", Observation(429, retry_after=2.0), 1.0)
    assert not state.open_now(2.5)  # in the cool-down
    assert not state.open_now(3.5)  # a refusal not yet followed by a success
    state.release("c", Observation(200), 3.5)
    assert state.open_now(3.5)
    state.release("d", Observation(200, requests=Budget(100, 99, 60.0)), 4.0)
    assert not state.open_now(4.0)  # a budget is known
    limited = GateState(GateLimits(max_concurrent=8))
    limited.release("e", Observation(200), 0.0)
    assert not limited.open_now(0.0)  # a ceiling is configured
