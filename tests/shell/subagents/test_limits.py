"""Whether one more child may start: ``refusal`` checks the limits of ``[agents]`` in a fixed order —
switched off, the calling session's depth, children of the turn running at once, children the turn has
started (only for a call that starts a new child), children running in the host — and says which one
refused, naming its setting; within every limit it answers None."""

from __future__ import annotations

import pytest

from shell.config import AgentsSettings
from shell.subagents import ChildCounts, refusal

LIMITS = AgentsSettings(max_depth=2, max_children_at_once=2, max_children_per_turn=3, max_children_per_host=4)
WITHIN = ChildCounts(depth=1, running_in_turn=1, started_in_turn=2, running_in_host=3)
"""One below every limit of LIMITS."""
AT_EVERY_LIMIT = ChildCounts(depth=2, running_in_turn=2, started_in_turn=3, running_in_host=4)


def counts(**changed: int) -> ChildCounts:
    fields = {
        "depth": WITHIN.depth,
        "running_in_turn": WITHIN.running_in_turn,
        "started_in_turn": WITHIN.started_in_turn,
        "running_in_host": WITHIN.running_in_host,
    }
    return ChildCounts(**{**fields, **changed})


def test_within_every_limit_a_child_may_start_whether_new_or_taken_up_again() -> None:
    assert refusal(WITHIN, LIMITS, new=True) is None
    assert refusal(WITHIN, LIMITS, new=False) is None
    assert refusal(ChildCounts(0, 0, 0, 0), AgentsSettings(), new=True) is None


def test_switched_off_every_call_is_refused_saying_so() -> None:
    said = refusal(ChildCounts(0, 0, 0, 0), AgentsSettings(enabled=False), new=True)
    assert said is not None
    assert said.startswith("subagent refused:")
    assert "[agents] enabled = false" in said


def test_a_session_at_max_depth_may_not_start_children() -> None:
    said = refusal(counts(depth=2), LIMITS, new=True)
    assert said is not None
    assert "depth 2" in said and "agents.max_depth is 2" in said
    assert refusal(counts(depth=3), LIMITS, new=False) is not None
    assert refusal(counts(depth=1), LIMITS, new=True) is None


def test_a_turn_with_max_children_at_once_running_may_not_start_another() -> None:
    said = refusal(counts(running_in_turn=2), LIMITS, new=True)
    assert said is not None
    assert "2 children of this turn are running" in said
    assert "agents.max_children_at_once" in said
    # Taking up an existing child runs one more at once too.
    assert refusal(counts(running_in_turn=2), LIMITS, new=False) == said


def test_a_turn_that_started_max_children_per_turn_may_not_start_a_new_one() -> None:
    said = refusal(counts(started_in_turn=3), LIMITS, new=True)
    assert said is not None
    assert "started 3 children" in said
    assert "agents.max_children_per_turn" in said


def test_the_total_per_turn_does_not_refuse_a_call_taking_up_its_existing_child() -> None:
    assert refusal(counts(started_in_turn=3), LIMITS, new=False) is None
    assert refusal(counts(started_in_turn=50), LIMITS, new=False) is None


def test_a_host_with_max_children_per_host_running_may_not_start_another() -> None:
    said = refusal(counts(running_in_host=4), LIMITS, new=True)
    assert said is not None
    assert "4 children are running in this host" in said
    assert "agents.max_children_per_host" in said
    assert refusal(counts(running_in_host=4), LIMITS, new=False) == said


@pytest.mark.parametrize(
    ("limits", "at", "named"),
    [
        (AgentsSettings(enabled=False, max_depth=2), AT_EVERY_LIMIT, "enabled = false"),
        (LIMITS, AT_EVERY_LIMIT, "agents.max_depth"),
        (LIMITS, counts(running_in_turn=2, started_in_turn=3, running_in_host=4), "max_children_at_once"),
        (LIMITS, counts(started_in_turn=3, running_in_host=4), "agents.max_children_per_turn"),
        (LIMITS, counts(running_in_host=4), "agents.max_children_per_host"),
    ],
    ids=["enabled-first", "then-depth", "then-at-once", "then-per-turn", "then-per-host"],
)
def test_the_limits_are_checked_in_order_and_the_first_one_passed_is_named(
    limits: AgentsSettings, at: ChildCounts, named: str
) -> None:
    said = refusal(at, limits, new=True)
    assert said is not None and named in said
    others = {
        "enabled = false",
        "agents.max_depth",
        "max_children_at_once",
        "agents.max_children_per_turn",
        "agents.max_children_per_host",
    } - {named}
    assert not any(other in said for other in others)
