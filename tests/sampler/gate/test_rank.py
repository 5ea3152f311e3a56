"""A request's rank at the gate: among the waiting requests of one ``session`` key (a family of sessions,
whose children rank below their parent) the lowest rank is granted first, then the earliest; across keys
the round-robin is unchanged whatever the ranks; and a request enqueued without a rank has rank 0, so
callers that give none are served first come, first served as before."""

from __future__ import annotations

from sampler.gate import GateLimits, GateState, Observation, WaitReason


def one_at_a_time() -> GateState:
    return GateState(GateLimits(max_concurrent=1))


def served(state: GateState, start: float = 1.0) -> list[str]:
    """Grant and release, one request at a time, until none waits; the leases in the order granted."""
    order: list[str] = []
    now = start
    while True:
        grants = state.grant(now)
        if not grants:
            return order
        assert len(grants) == 1, "max_concurrent=1 lets one go at a time"
        order.append(grants[0].lease)
        state.release(grants[0].lease, Observation(200), now)
        now += 1.0


def test_within_one_session_key_a_lower_rank_that_arrived_later_goes_first() -> None:
    state = one_at_a_time()
    state.enqueue("busy", "family", 0, 1, 0.0)
    assert [grant.lease for grant in state.grant(0.0)] == ["busy"]
    state.enqueue("child", "family", 0, 1, 0.1, rank=1)
    state.enqueue("parent", "family", 0, 1, 0.2, rank=0)
    assert state.grant(0.3) == [], "one is in flight"
    assert state.waiting_for("parent", 0.3) == (0, WaitReason.CONCURRENCY, None)
    assert state.waiting_for("child", 0.3) == (1, WaitReason.CONCURRENCY, None)
    state.release("busy", Observation(200), 1.0)
    assert served(state) == ["parent", "child"]


def test_within_one_session_key_requests_go_by_rank_then_by_arrival() -> None:
    state = one_at_a_time()
    state.enqueue("grandchild", "family", 0, 1, 0.0, rank=2)
    state.enqueue("child-a", "family", 0, 1, 0.1, rank=1)
    state.enqueue("parent-a", "family", 0, 1, 0.2, rank=0)
    state.enqueue("child-b", "family", 0, 1, 0.3, rank=1)
    state.enqueue("parent-b", "family", 0, 1, 0.4, rank=0)
    assert served(state) == ["parent-a", "parent-b", "child-a", "child-b", "grandchild"]


def test_across_session_keys_the_round_robin_holds_whatever_the_ranks() -> None:
    state = one_at_a_time()
    for n in range(3):
        state.enqueue(f"a-root{n}", "a", 0, 1, 0.0)
    for n in range(3):
        state.enqueue(f"b-deep{n}", "b", 0, 1, 0.1, rank=3)
    assert served(state) == ["a-root0", "b-deep0", "a-root1", "b-deep1", "a-root2", "b-deep2"]


def test_a_low_rank_does_not_let_a_key_jump_a_key_served_longer_ago() -> None:
    state = one_at_a_time()
    state.enqueue("a1", "a", 0, 1, 0.0)
    assert served(state) == ["a1"]
    state.enqueue("b1", "b", 0, 1, 5.0)
    assert served(state, 6.0) == ["b1"]
    # "a" was served longer ago than "b": its request goes first, though its rank is higher.
    state.enqueue("b2", "b", 0, 1, 10.0, rank=0)
    state.enqueue("a2", "a", 0, 1, 10.1, rank=3)
    assert served(state, 11.0) == ["a2", "b2"]


def test_without_a_rank_requests_of_one_key_are_first_come_first_served() -> None:
    state = one_at_a_time()
    for n in range(4):
        state.enqueue(f"r{n}", "s", 0, 1, float(n))
    assert served(state, 10.0) == ["r0", "r1", "r2", "r3"]


def test_the_default_rank_is_0() -> None:
    state = one_at_a_time()
    state.enqueue("ranked-1", "s", 0, 1, 0.0, rank=1)
    state.enqueue("unranked", "s", 0, 1, 0.1)
    state.enqueue("ranked-0", "s", 0, 1, 0.2, rank=0)
    assert served(state) == ["unranked", "ranked-0", "ranked-1"]


def test_a_negative_rank_counts_as_rank_0() -> None:
    state = one_at_a_time()
    state.enqueue("first", "s", 0, 1, 0.0)
    state.enqueue("negative", "s", 0, 1, 0.1, rank=-5)
    assert served(state) == ["first", "negative"]


def test_priority_still_comes_before_rank_across_keys() -> None:
    state = GateState(GateLimits(max_concurrent=1, aging=1000.0))
    state.enqueue("background-root", "batch", 1, 1, 0.0, rank=0)
    state.enqueue("interactive-child", "chat", 0, 1, 0.1, rank=2)
    assert served(state) == ["interactive-child", "background-root"]
