"""The one result of an ``agent`` call, from how its child's turn ended: a completed child's answer (cut to
the output cap, saying how much was cut); else an ``is_error`` result saying what happened — failed with
its kind, cancelled with its reason, or past its deadline — with the child's partial answer (its last 2000
characters) where it was cut off. The child's usage is carried from its end event."""

from __future__ import annotations

import pytest

from shell import events as ev
from shell.subagents import ChildResult, result_of
from shell.usage import TokenUsage, TurnUsage

USAGE = TurnUsage(model="child-model", steps=TokenUsage(input_tokens=120, output_tokens=30, reported=2))
CAP = 1000


def result(
    end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled | None,
    *,
    deadline: float | None = None,
    partial: str = "",
    output_cap: int = CAP,
) -> ChildResult:
    return result_of("reviewer", end, deadline=deadline, partial=partial, output_cap=output_cap)


def completed(text: str) -> ev.TurnCompleted:
    return ev.TurnCompleted("c", 1, text, 3, usage=USAGE)


def test_a_completed_child_s_answer_is_the_result() -> None:
    got = result(completed("the answer"), partial="ignored partial")
    assert got == ChildResult("completed", "", "the answer", False, USAGE)


def test_an_answer_as_long_as_the_cap_is_kept_whole() -> None:
    text = "x" * CAP
    assert result(completed(text)).content == text


def test_an_answer_longer_than_the_cap_is_cut_to_it_saying_how_many_characters_were_cut() -> None:
    got = result(completed("abcdefghij"), output_cap=4)
    assert got.content == "abcd\n[… 6 more characters of the subagent's answer were cut]"
    assert got.outcome == "completed" and not got.is_error


def test_a_failed_child_is_an_error_naming_its_profile_kind_and_message() -> None:
    failed = ev.TurnFailed("c", 1, "max_steps", "the turn reached the limit", usage=USAGE)
    got = result(failed, partial="some text")
    assert got.outcome == "failed"
    assert got.message == "max_steps: the turn reached the limit"
    assert got.content == "subagent reviewer failed: max_steps: the turn reached the limit"
    assert got.is_error
    assert got.usage == USAGE


def test_a_cancelled_child_is_an_error_with_its_reason_and_its_partial_answer() -> None:
    cancelled = ev.TurnCancelled("c", 1, "aborted", usage=USAGE)
    got = result(cancelled, partial="  half an answer\n")
    assert got.outcome == "cancelled"
    assert got.message == "cancelled (aborted)"
    assert got.content == "subagent reviewer was cancelled (aborted); its partial answer:\nhalf an answer"
    assert got.is_error
    assert got.usage == USAGE


@pytest.mark.parametrize("partial", ["", "  \n\t "])
def test_a_cancelled_child_without_text_says_it_had_no_partial_answer(partial: str) -> None:
    got = result(ev.TurnCancelled("c", 1, "user_cancelled"), partial=partial)
    assert got.content == "subagent reviewer was cancelled (user_cancelled); it had no partial answer"


def test_a_child_past_its_deadline_is_an_error_saying_so_with_its_partial_answer() -> None:
    cancelled = ev.TurnCancelled("c", 1, "aborted", usage=USAGE)
    got = result(cancelled, deadline=2.5, partial="so far")
    assert got.outcome == "deadline"
    assert got.message == "ran past its deadline of 2.5 s and was cancelled"
    assert got.content == (
        "subagent reviewer ran past its deadline of 2.5 s and was cancelled; its partial answer:\nso far"
    )
    assert got.is_error
    assert got.usage == USAGE


def test_the_deadline_outcome_wins_whatever_end_the_cancelled_child_reached() -> None:
    assert result(completed("late answer"), deadline=600.0).outcome == "deadline"
    assert "deadline of 600 s" in result(None, deadline=600.0).content
    assert result(None, deadline=1.0).content.endswith("; it had no partial answer")


def test_of_a_long_partial_answer_only_its_last_2000_characters_are_kept_after_an_ellipsis() -> None:
    partial = "a" * 500 + "b" * 2000
    got = result(None, deadline=1.0, partial=partial)
    kept = got.content.split("; its partial answer:\n", 1)[1]
    assert kept == "…" + "b" * 2000
    whole = "c" * 2000
    assert result(None, deadline=1.0, partial=whole).content.endswith(":\n" + whole)
    cancelled = result(ev.TurnCancelled("c", 1, "aborted"), partial=partial)
    assert cancelled.content.endswith(":\n…" + "b" * 2000)


def test_no_end_heard_is_an_internal_failure_with_no_usage() -> None:
    got = result(None, partial="text")
    assert got.outcome == "failed"
    assert got.message == "internal: its turn ended without an end the call could hear"
    assert got.content == "subagent reviewer failed: " + got.message
    assert got.is_error
    assert got.usage == TurnUsage()
