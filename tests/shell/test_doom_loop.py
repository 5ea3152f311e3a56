from dataclasses import dataclass, field
from itertools import count

import pytest

from sampler.messages import ToolCall, ToolResult
from shell.doom_loop import (
    DOOM_LOOP_REMINDER,
    DoomLoopDetector,
    DoomLoopOutcome,
    DoomLoopRule,
    DoomLoopVerdict,
    normalise_arguments,
)

_ids = count()


def call(name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(f"call-{next(_ids)}", name, arguments)


def ok(tool_call: ToolCall, content: str = "done") -> ToolResult:
    return ToolResult(tool_call.id, content)


def error(tool_call: ToolCall, content: str) -> ToolResult:
    return ToolResult(tool_call.id, content, is_error=True)


def run(
    detector: DoomLoopDetector, name: str, arguments: str = "{}", times: int = 1
) -> list[DoomLoopVerdict]:
    kinds = []
    for _ in range(times):
        tool_call = call(name, arguments)
        kinds.append(detector.observe(tool_call, ok(tool_call, f"result {next(_ids)}")).verdict)
    return kinds


# --- argument normalisation ---------------------------------------------------------------------------


def test_normalised_arguments_ignore_key_order_and_whitespace_between_tokens():
    assert normalise_arguments('{"b": 1, "a": {"y": 2, "x": 3}}') == normalise_arguments(
        '{"a":{"x":3,"y":2},"b":1}'
    )


def test_normalised_arguments_keep_string_values_exactly():
    assert normalise_arguments('{"text": "a  b"}') != normalise_arguments('{"text": "a b"}')


def test_invalid_json_arguments_are_compared_as_stripped_text():
    assert normalise_arguments('  {"path": "a"  ') == '{"path": "a"'
    assert normalise_arguments("{broken") != normalise_arguments("{broken2")


# --- identical calls ------------------------------------------------------------------------------------


def test_same_call_three_times_in_a_row_warns_with_a_reason():
    detector = DoomLoopDetector()
    outcomes = []
    for _ in range(3):
        tool_call = call("write_file", '{"path": "a.txt", "content": "x"}')
        outcomes.append(detector.observe(tool_call, ok(tool_call)))
    assert [v.verdict for v in outcomes] == [DoomLoopVerdict.OK, DoomLoopVerdict.OK, DoomLoopVerdict.WARN]
    assert outcomes[-1].rule is DoomLoopRule.IDENTICAL_CALLS
    assert outcomes[-1].reason == "write_file called 3 times in a row with the same arguments"


def test_same_call_with_reordered_keys_counts_as_identical():
    detector = DoomLoopDetector()
    kinds = [
        detector.observe(c, ok(c)).verdict
        for c in (
            call("read_file", '{"path": "a", "limit": 10}'),
            call("read_file", '{"limit":10,"path":"a"}'),
            call("read_file", '{ "path" : "a" , "limit" : 10 }'),
        )
    ]
    assert kinds[-1] is DoomLoopVerdict.WARN


def test_different_arguments_break_the_streak():
    detector = DoomLoopDetector()
    assert run(detector, "read_file", '{"path": "a"}', times=2) == [DoomLoopVerdict.OK] * 2
    assert run(detector, "read_file", '{"path": "b"}') == [DoomLoopVerdict.OK]
    assert run(detector, "read_file", '{"path": "a"}', times=2) == [DoomLoopVerdict.OK] * 2


def test_identical_calls_threshold_is_configurable():
    detector = DoomLoopDetector(identical_calls=5)
    assert run(detector, "shell", times=5) == [DoomLoopVerdict.OK] * 4 + [DoomLoopVerdict.WARN]


def test_identical_calls_zero_turns_the_rule_off():
    detector = DoomLoopDetector(identical_calls=0, max_cycle_length=0)
    assert run(detector, "shell", times=11) == [DoomLoopVerdict.OK] * 11


# --- cycles ---------------------------------------------------------------------------------------------


def test_a_cycle_of_two_repeated_three_times_warns():
    detector = DoomLoopDetector()
    kinds = []
    for _ in range(3):
        kinds += run(detector, "read_file", '{"path": "a"}')
        kinds += run(detector, "shell", '{"cmd": "make"}')
    assert kinds == [DoomLoopVerdict.OK] * 5 + [DoomLoopVerdict.WARN]


def test_the_cycle_reason_names_the_tools_in_order():
    detector = DoomLoopDetector()
    outcome = DoomLoopOutcome(DoomLoopVerdict.OK)
    for _ in range(3):
        for name in ("read_file", "shell"):
            tool_call = call(name)
            outcome = detector.observe(tool_call, ok(tool_call))
    assert outcome.rule is DoomLoopRule.CYCLE
    assert outcome.reason == "cycle read_file → shell repeated 3 times"


def test_a_cycle_of_three_is_detected():
    detector = DoomLoopDetector()
    kinds = []
    for _ in range(3):
        for name in ("a", "b", "c"):
            kinds += run(detector, name)
    assert kinds == [DoomLoopVerdict.OK] * 8 + [DoomLoopVerdict.WARN]


def test_a_cycle_longer_than_max_cycle_length_is_not_detected():
    detector = DoomLoopDetector(max_cycle_length=3)
    kinds = []
    for _ in range(4):
        for name in ("a", "b", "c", "d"):
            kinds += run(detector, name)
    assert set(kinds) == {DoomLoopVerdict.OK}


def test_a_cycle_repeated_only_twice_is_not_detected():
    detector = DoomLoopDetector()
    kinds = run(detector, "a") + run(detector, "b") + run(detector, "a") + run(detector, "b")
    assert set(kinds) == {DoomLoopVerdict.OK}


def test_a_cycle_of_the_same_tool_with_alternating_arguments_is_detected():
    detector = DoomLoopDetector()
    kinds = []
    for _ in range(3):
        kinds += run(detector, "read_file", '{"path": "a"}') + run(detector, "read_file", '{"path": "b"}')
    assert kinds[-1] is DoomLoopVerdict.WARN


def test_cycles_need_identical_calls_repetitions():
    detector = DoomLoopDetector(identical_calls=2)
    kinds = run(detector, "a") + run(detector, "b") + run(detector, "a") + run(detector, "b")
    assert kinds == [DoomLoopVerdict.OK] * 3 + [DoomLoopVerdict.WARN]


# --- repeated errors ------------------------------------------------------------------------------------


def test_the_same_error_three_times_warns_even_across_tools_and_arguments():
    detector = DoomLoopDetector()
    outcomes = []
    for name, arguments in (("read_file", '{"path": "a"}'), ("shell", '{"cmd": "ls"}'), ("grep", "{}")):
        tool_call = call(name, arguments)
        outcomes.append(detector.observe(tool_call, error(tool_call, "permission denied")))
    assert [v.verdict for v in outcomes] == [DoomLoopVerdict.OK, DoomLoopVerdict.OK, DoomLoopVerdict.WARN]
    assert outcomes[-1].rule is DoomLoopRule.REPEATED_ERRORS
    assert outcomes[-1].reason == "the same error 3 times: permission denied"


def test_a_successful_result_breaks_an_error_streak():
    detector = DoomLoopDetector()
    kinds = []
    for name in ("a", "b", "c", "d"):
        tool_call = call(name)
        kinds.append(detector.observe(tool_call, error(tool_call, "boom")).verdict)
        if name == "b":
            kinds += run(detector, "e")
    assert set(kinds) == {DoomLoopVerdict.OK}


def test_different_error_contents_do_not_count_as_the_same_error():
    detector = DoomLoopDetector()
    kinds = []
    for index, name in enumerate(("a", "b", "c", "d")):
        tool_call = call(name)
        kinds.append(detector.observe(tool_call, error(tool_call, f"error {index % 2}")).verdict)
    assert set(kinds) == {DoomLoopVerdict.OK}


def test_errors_of_exempt_tools_still_count():
    detector = DoomLoopDetector(exempt_tools=["poll"])
    kinds = []
    for arguments in ('{"job": 1}', '{"job": 2}', '{"job": 3}'):
        tool_call = call("poll", arguments)
        kinds.append(detector.observe(tool_call, error(tool_call, "job runner unreachable")).verdict)
    assert kinds[-1] is DoomLoopVerdict.WARN


def test_a_long_error_is_shortened_in_the_reason():
    detector = DoomLoopDetector()
    outcome = DoomLoopOutcome(DoomLoopVerdict.OK)
    for name in ("a", "b", "c"):
        tool_call = call(name)
        outcome = detector.observe(tool_call, error(tool_call, "x" * 5_000))
    assert outcome.verdict is DoomLoopVerdict.WARN
    assert len(outcome.reason) < 250


# --- exemptions and the hard limit ----------------------------------------------------------------------


def test_exempt_tools_may_repeat_identical_calls():
    detector = DoomLoopDetector(exempt_tools=["poll"])
    assert run(detector, "poll", '{"job": 7}', times=11) == [DoomLoopVerdict.OK] * 11


def test_exempt_tools_are_not_part_of_cycles():
    detector = DoomLoopDetector(exempt_tools=["sleep"])
    kinds = []
    for _ in range(5):
        kinds += run(detector, "check_status") + run(detector, "sleep", '{"seconds": 5}')
    assert set(kinds) == {DoomLoopVerdict.OK}


def test_the_hard_limit_fails_exempt_tools_at_once():
    detector = DoomLoopDetector(exempt_tools=["poll"], hard_limit=12)
    outcomes = []
    for _ in range(12):
        tool_call = call("poll", '{"job": 7}')
        outcomes.append(detector.observe(tool_call, ok(tool_call)))
    assert [v.verdict for v in outcomes] == [DoomLoopVerdict.OK] * 11 + [DoomLoopVerdict.FAIL]
    assert outcomes[-1].rule is DoomLoopRule.HARD_LIMIT
    assert "poll called 12 times in a row" in outcomes[-1].reason


def test_the_hard_limit_applies_to_every_tool_even_with_the_other_rules_off():
    detector = DoomLoopDetector(identical_calls=0, max_cycle_length=0, repeated_errors=0, hard_limit=4)
    assert run(detector, "shell", times=4) == [DoomLoopVerdict.OK] * 3 + [DoomLoopVerdict.FAIL]


def test_the_hard_limit_fails_without_a_warning_first():
    detector = DoomLoopDetector(hard_limit=2)
    assert run(detector, "shell", times=2) == [DoomLoopVerdict.OK, DoomLoopVerdict.FAIL]
    assert not detector.warned


def test_the_hard_limit_counts_identical_calls_across_a_warning():
    detector = DoomLoopDetector(hard_limit=4)
    assert run(detector, "shell", times=4) == [DoomLoopVerdict.OK] * 2 + [
        DoomLoopVerdict.WARN,
        DoomLoopVerdict.FAIL,
    ]


def test_the_hard_limit_cannot_be_turned_off():
    with pytest.raises(ValueError, match="hard_limit"):
        DoomLoopDetector(hard_limit=0)


def test_negative_settings_are_refused():
    with pytest.raises(ValueError, match="identical_calls"):
        DoomLoopDetector(identical_calls=-1)


# --- warn, then fail; turns -----------------------------------------------------------------------------


def test_a_warning_resets_the_window_so_the_model_gets_a_fair_chance():
    detector = DoomLoopDetector()
    assert run(detector, "shell", times=3)[-1] is DoomLoopVerdict.WARN
    assert run(detector, "shell", times=2) == [DoomLoopVerdict.OK] * 2


def test_a_second_detection_in_the_same_turn_fails():
    detector = DoomLoopDetector()
    assert run(detector, "shell", times=3)[-1] is DoomLoopVerdict.WARN
    assert detector.warned
    assert run(detector, "read_file", times=3) == [
        DoomLoopVerdict.OK,
        DoomLoopVerdict.OK,
        DoomLoopVerdict.FAIL,
    ]


def test_a_detection_by_another_rule_after_a_warning_also_fails():
    detector = DoomLoopDetector()
    assert run(detector, "shell", times=3)[-1] is DoomLoopVerdict.WARN
    kinds = []
    for name in ("a", "b", "c"):
        tool_call = call(name)
        kinds.append(detector.observe(tool_call, error(tool_call, "boom")).verdict)
    assert kinds == [DoomLoopVerdict.OK, DoomLoopVerdict.OK, DoomLoopVerdict.FAIL]


def test_reset_starts_a_new_turn_without_history_or_warning():
    detector = DoomLoopDetector()
    assert run(detector, "shell", times=3)[-1] is DoomLoopVerdict.WARN
    run(detector, "shell", times=2)
    detector.reset()
    assert not detector.warned
    assert run(detector, "shell", times=2) == [DoomLoopVerdict.OK] * 2
    assert run(detector, "shell") == [DoomLoopVerdict.WARN]


def test_reset_clears_the_hard_limit_count():
    detector = DoomLoopDetector(exempt_tools=["poll"], hard_limit=3)
    run(detector, "poll", times=2)
    detector.reset()
    assert run(detector, "poll", times=2) == [DoomLoopVerdict.OK] * 2


def test_ok_outcomes_carry_no_reason():
    detector = DoomLoopDetector()
    tool_call = call("shell")
    assert detector.observe(tool_call, ok(tool_call)) == DoomLoopOutcome(DoomLoopVerdict.OK, "", None)


def test_the_reminder_asks_the_model_to_change_approach():
    assert "different approach" in DOOM_LOOP_REMINDER


# --- settings -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    identical_calls: int = 3
    max_cycle_length: int = 3
    repeated_errors: int = 3
    exempt_tools: tuple[str, ...] = field(default=())
    hard_limit: int = 12


def test_a_detector_can_be_made_from_settings():
    detector = DoomLoopDetector.from_settings(Limits(identical_calls=2, exempt_tools=("poll",), hard_limit=5))
    assert run(detector, "shell", times=2) == [DoomLoopVerdict.OK, DoomLoopVerdict.WARN]
    assert run(detector, "poll", times=5) == [DoomLoopVerdict.OK] * 4 + [DoomLoopVerdict.FAIL]
