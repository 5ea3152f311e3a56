"""The outcome table: how each turn end answers its prompt."""

from __future__ import annotations

import pytest

from shell import events as ev
from shell.acp._outcome import Failure, Stop, outcome_of


def failed(kind: str, message: str = "why") -> ev.TurnFailed:
    return ev.TurnFailed("s1", 3, kind, message)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (ev.TurnCompleted("s1", 3, "done", 2), Stop("end_turn")),
        (ev.TurnCompleted("s1", 3, "done", 2, finish_reason="length"), Stop("max_tokens")),
        (ev.TurnCompleted("s1", 3, "done", 2, finish_reason="content_filter"), Stop("end_turn")),
        (ev.TurnCancelled("s1", 3, "user_cancelled"), Stop("cancelled")),
        (ev.TurnCancelled("s1", 3, "aborted"), Stop("cancelled")),
        (ev.TurnCancelled("s1", 3, "interrupted"), Stop("cancelled")),
        (failed("max_steps"), Stop("max_turn_requests")),
        (failed("doom_loop"), Stop("max_turn_requests")),
        (failed("context_overflow"), Stop("max_tokens")),
    ],
)
def test_turn_ends_that_have_a_stop_reason(event: object, expected: Stop) -> None:
    assert outcome_of(event, cancel_read=False) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        ev.TurnCompleted("s1", 3, "done", 2),
        ev.TurnCompleted("s1", 3, "done", 2, finish_reason="length"),
        failed("max_steps"),
        failed("auth"),
        failed("rate_limit"),
    ],
)
def test_any_end_after_the_cancel_was_read_is_cancelled(event: object) -> None:
    assert outcome_of(event, cancel_read=True) == Stop("cancelled")  # type: ignore[arg-type]


def test_refused_credentials_are_authentication_required() -> None:
    outcome = outcome_of(failed("auth", "401 from the provider"), cancel_read=False)
    assert isinstance(outcome, Failure) and outcome.code == -32000
    assert outcome.data["kind"] == "auth"


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [("rate_limit", True), ("connection", True), ("quota_exhausted", False), ("provider", False)],
)
def test_other_failures_are_internal_errors_saying_what_when_and_whether_to_retry(
    kind: str, retryable: bool
) -> None:
    outcome = outcome_of(failed(kind, "it broke"), cancel_read=False)
    assert isinstance(outcome, Failure) and outcome.code == -32603
    assert outcome.data == {
        "kind": kind,
        "message": "it broke",
        "retryable": retryable,
        "session": "s1",
        "turn": 3,
    }
