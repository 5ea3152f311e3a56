"""A session's prompts in flight: each is answered exactly once, by its own turn's end, whichever of its
acknowledgement and its end comes first; a cancel read first makes it ``cancelled``."""

from __future__ import annotations

from shell import events as ev
from shell.acp._ledger import Answer, PromptLedger
from shell.acp._outcome import Stop


def done(turn: int) -> ev.TurnCompleted:
    return ev.TurnCompleted("s", turn, "ok", 1)


def test_each_prompt_is_answered_by_its_own_turn() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    ledger.submit("b")
    assert ledger.acknowledge("a", 1) == []
    assert ledger.acknowledge("b", 2) == []
    assert ledger.turn_ended(done(2)) == [Answer("b", Stop("end_turn"))]
    assert ledger.turn_ended(done(1)) == [Answer("a", Stop("end_turn"))]
    assert ledger.owed == 0


def test_an_end_that_comes_before_the_acknowledgement_answers_at_the_acknowledgement() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    assert ledger.turn_ended(done(1)) == []
    assert ledger.acknowledge("a", 1) == [Answer("a", Stop("end_turn"))]


def test_a_second_end_of_the_same_turn_answers_nothing() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    ledger.acknowledge("a", 1)
    assert len(ledger.turn_ended(done(1))) == 1
    assert ledger.turn_ended(done(1)) == []
    assert ledger.turn_ended(ev.TurnCancelled("s", 1, "aborted")) == []


def test_a_cancel_read_before_the_end_makes_every_owed_prompt_cancelled() -> None:
    ledger = PromptLedger()
    for request, turn in (("a", 1), ("b", 2)):
        ledger.submit(request)
        ledger.acknowledge(request, turn)
    ledger.submit("c")  # not acknowledged yet
    assert ledger.cancel() == [1, 2]
    assert ledger.cancelled_turn(2)
    assert ledger.turn_ended(done(1)) == [Answer("a", Stop("cancelled"))]
    assert ledger.turn_ended(done(2)) == [Answer("b", Stop("cancelled"))]
    ledger.acknowledge("c", 3)
    assert ledger.turn_ended(done(3)) == [Answer("c", Stop("cancelled"))]


def test_a_prompt_after_the_cancel_is_not_cancelled() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    ledger.cancel()
    ledger.submit("b")
    ledger.acknowledge("a", 1)
    ledger.acknowledge("b", 2)
    assert ledger.turn_ended(done(2)) == [Answer("b", Stop("end_turn"))]


def test_cancelling_one_request_leaves_the_others() -> None:
    ledger = PromptLedger()
    for request, turn in (("a", 1), ("b", 2)):
        ledger.submit(request)
        ledger.acknowledge(request, turn)
    assert ledger.cancel("b") == [2]
    assert not ledger.cancelled_turn(1)


def test_refused_and_drained_prompts_leave_the_ledger_once() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    ledger.submit("b")
    assert ledger.refuse("a")
    assert not ledger.refuse("a")
    assert ledger.drain() == [Answer("b", Stop("cancelled"))]
    assert ledger.drain() == []


def test_ends_no_prompt_can_claim_are_not_kept() -> None:
    ledger = PromptLedger()
    ledger.submit("a")
    ledger.turn_ended(done(7))  # a turn resumed from the store, say
    ledger.acknowledge("a", 1)
    assert ledger._ended == {}
