"""The text view ``run`` and ``chat`` share: tool calls on one line, results folded, each turn's end with
its usage."""

from __future__ import annotations

import io

from shell import events as ev
from shell.cli._turn_view import TextView, fold
from shell.usage import TokenUsage, TurnUsage


def test_fold_keeps_the_first_two_lines_and_counts_the_rest() -> None:
    assert fold("one\ntwo\nthree\nfour\n") == ["one", "two", "(2 more lines)"]
    assert fold("one\ntwo\nthree") == ["one", "two", "(1 more line)"]
    assert fold("\nonly\n") == ["only"]
    assert fold("x" * 150) == ["x" * 97 + "..."]


def shown(*events: object) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    view = TextView(out, err)
    for event in events:
        view.show(event)
    return out.getvalue(), err.getvalue()


def test_a_tool_call_shows_its_arguments_then_its_outcome_and_folded_result() -> None:
    started = ev.ToolCallStarted("s", 1, "c1", "shell", '{"command": "ls"}')
    finished = ev.ToolCallFinished("s", 1, "c1", "shell", False, "ok", "a\nb\nc\nd")
    failed = ev.ToolCallFinished("s", 1, "c2", "read_file", True, "error", "no such file\nat all")
    _, err = shown(started, finished, failed)
    assert err == (
        '[tool shell {"command": "ls"}]\n[tool shell ok]\n  a\n  b\n  (2 more lines)\n'
        "[tool read_file error: no such file at all]\n"
    )


def test_each_end_of_a_turn_says_how_it_ended_and_what_it_used() -> None:
    usage = TurnUsage(steps=TokenUsage(input_tokens=120, output_tokens=7), cost=0.0125)
    out, err = shown(ev.TextDelta("s", 1, "Hi"), ev.TurnCompleted("s", 1, "Hi", 2, usage))
    assert (out, err) == ("Hi\n", "[turn 1 completed in 2 steps]\n[usage: 120 in, 7 out, cost 0.0125]\n")
    _, err = shown(ev.TurnFailed("s", 2, "doom_loop", "stopped", usage))
    assert err == "[the turn failed (doom_loop): stopped]\n[usage: 120 in, 7 out, cost 0.0125]\n"
    _, err = shown(ev.TurnCancelled("s", 3, "user_cancelled"))
    assert err == "[the turn was cancelled (user_cancelled)]\n[usage: 0 in, 0 out]\n"


def test_a_resumed_turn_and_a_waiting_prompt_are_said_so() -> None:
    resumed = ev.TurnResumed("s", 1, 2, 1, ("c1",), ("c2", "c3"))
    _, err = shown(resumed, ev.TurnResumed("s", 1, 0, 2), ev.PromptQueued("s", 2, "next"))
    assert err == (
        "[resumed after step 2 (its host had stopped); 1 tool calls run again; 2 interrupted (may have taken"
        " effect)]\n[resumed after step 0 (its host had stopped)]\n[prompt waits as turn 2]\n"
    )
