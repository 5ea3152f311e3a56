import random

import pytest

from sampler.fake import SUMMARY_MARKER as FAKE_PROVIDER_MARKER
from sampler.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from shell.compaction import (
    SUMMARY_MARKER,
    CompactionPlan,
    build_summary_request,
    chunk_for_summary,
    plan_compaction,
    shrank_enough,
    stub_tool_outputs,
    summary_message,
)
from shell.session import TokenEstimator

ESTIMATOR = TokenEstimator()


class Counting:
    """An estimator that counts characters of text, so sizes in tests are exact."""

    def estimate(self, messages):
        total = 0
        for message in messages:
            if isinstance(message, SystemMessage):
                total += len(message.content)
            elif isinstance(message, UserMessage):
                total += sum(len(p.text) for p in message.parts if isinstance(p, TextPart))
            elif isinstance(message, AssistantMessage):
                total += len(message.text) + sum(len(c.arguments) for c in message.tool_calls)
            else:
                total += len(message.result.content)
        return total


def user(text: str) -> UserMessage:
    return UserMessage.of_text(text)


def tool_step(call_id: str, output: str = "ok", name: str = "read_file") -> list[Message]:
    return [
        AssistantMessage("", (ToolCall(call_id, name, '{"path": "a"}'),)),
        ToolMessage(ToolResult(call_id, output)),
    ]


def history(*turns: list[Message], system: bool = True) -> list[tuple[int, int, Message]]:
    """Entries for `turns` (turn numbers from 1), after a system message when `system`."""
    entries: list[tuple[int, int, Message]] = []
    if system:
        entries.append((0, 0, SystemMessage("You are a coding agent.")))
    for number, messages in enumerate(turns, start=1):
        for message in messages:
            entries.append((len(entries), number, message))
    return entries


def seqs_of_turns(entries, *turns: int) -> tuple[int, ...]:
    return tuple(seq for seq, turn, _message in entries if turn in turns)


def user_text(message: Message) -> str:
    assert isinstance(message, UserMessage)
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


# --- plan_compaction ------------------------------------------------------------------------------------


def test_older_turns_are_replaced_and_the_newest_two_kept():
    entries = history(
        [user("one"), AssistantMessage("1")],
        [user("two"), *tool_step("c2"), AssistantMessage("2")],
        [user("three"), AssistantMessage("3")],
        [user("four"), AssistantMessage("4")],
    )
    plan = plan_compaction(entries, estimator=ESTIMATOR)
    assert isinstance(plan, CompactionPlan)
    assert plan.replaced == seqs_of_turns(entries, 1, 2)


def test_the_leading_system_messages_are_never_replaced():
    entries = [
        (0, 0, SystemMessage("rules")),
        (1, 0, SystemMessage("more rules")),
        *[(seq, seq, user(f"turn {seq}")) for seq in range(2, 6)],
    ]
    plan = plan_compaction(entries, keep_recent_turns=1, estimator=ESTIMATOR)
    assert plan is not None
    assert plan.replaced == (2, 3, 4)


def test_keep_recent_turns_is_honoured():
    entries = history(*[[user(f"q{n}"), AssistantMessage(f"a{n}")] for n in range(1, 6)])
    plan = plan_compaction(entries, keep_recent_turns=3, estimator=ESTIMATOR)
    assert plan is not None
    assert plan.replaced == seqs_of_turns(entries, 1, 2)


def test_keep_recent_turns_zero_replaces_everything_but_the_system_prompt():
    entries = history([user("q1")], [user("q2")])
    plan = plan_compaction(entries, keep_recent_turns=0, estimator=ESTIMATOR)
    assert plan is not None
    assert plan.replaced == (1, 2)


def test_nothing_to_summarise_gives_none():
    assert plan_compaction([], estimator=ESTIMATOR) is None
    assert plan_compaction(history(system=True), estimator=ESTIMATOR) is None
    assert plan_compaction(history([user("q1")], [user("q2")]), estimator=ESTIMATOR) is None


def test_a_negative_keep_recent_turns_is_refused():
    with pytest.raises(ValueError):
        plan_compaction(history([user("q")]), keep_recent_turns=-1, estimator=ESTIMATOR)


def test_the_plan_carries_the_summary_request_for_the_replaced_messages():
    entries = history([user("please refactor parser.py")], [user("q2")], [user("q3")])
    plan = plan_compaction(entries, estimator=ESTIMATOR)
    assert plan is not None
    system, request = plan.summary_request_messages
    assert isinstance(system, SystemMessage)
    assert "please refactor parser.py" in user_text(request)
    assert "q2" not in user_text(request)


def test_the_plan_estimates_before_and_after():
    entries = history([user("x" * 4_000)], [user("q2")], [user("q3")])
    plan = plan_compaction(entries, estimator=ESTIMATOR)
    assert plan is not None
    messages = [message for _seq, _turn, message in entries]
    assert plan.estimated_before == ESTIMATOR.estimate(messages)
    assert plan.estimated_after_without_summary == ESTIMATOR.estimate([messages[0], *messages[2:]])


def test_a_tool_call_split_from_its_result_by_a_turn_boundary_is_kept_with_it():
    # An odd history where a turn number changes between a tool call and its result.
    entries = [
        (0, 0, SystemMessage("sys")),
        (1, 1, user("q1")),
        (2, 1, AssistantMessage("", (ToolCall("c1", "shell", "{}"),))),
        (3, 2, ToolMessage(ToolResult("c1", "out"))),
        (4, 2, AssistantMessage("a2")),
        (5, 3, user("q3")),
    ]
    plan = plan_compaction(entries, keep_recent_turns=2, estimator=ESTIMATOR)
    assert plan is not None
    assert plan.replaced == (1,)


def test_a_target_moves_the_boundary_forward_to_keep_what_fits():
    entries = history(
        [user("q1")],
        [user("q2"), *tool_step("c1", "a" * 1_000), *tool_step("c2", "b" * 1_000), AssistantMessage("done")],
    )
    plan = plan_compaction(entries, keep_recent_turns=1, estimator=Counting(), target_tokens=1_100)
    assert plan is not None
    kept = [message for seq, _turn, message in entries if seq not in plan.replaced]
    assert kept[0] == entries[0][2]
    assert kept[1:] == [*tool_step("c2", "b" * 1_000), AssistantMessage("done")]
    assert plan.estimated_after_without_summary <= 1_100


def test_a_target_that_nothing_meets_still_keeps_the_last_message():
    entries = history([user("q1")], [user("q2"), AssistantMessage("z" * 5_000)])
    plan = plan_compaction(entries, keep_recent_turns=2, estimator=Counting(), target_tokens=10)
    assert plan is not None
    assert plan.replaced == (1, 2)


def test_a_target_that_is_met_changes_nothing():
    entries = history([user("q1")], [user("q2")], [user("q3")])
    with_target = plan_compaction(entries, estimator=Counting(), target_tokens=10_000)
    without = plan_compaction(entries, estimator=Counting())
    assert with_target == without


def random_history(rng: random.Random) -> list[tuple[int, int, Message]]:
    entries: list[tuple[int, int, Message]] = []
    if rng.random() < 0.7:
        entries.append((0, 0, SystemMessage("sys")))
    for turn in range(1, rng.randint(1, 6) + 1):
        entries.append((len(entries), turn, user(f"q{turn}" * rng.randint(1, 50))))
        for step in range(rng.randint(0, 4)):
            ids = [f"t{turn}s{step}c{n}" for n in range(rng.randint(1, 3))]
            calls = tuple(ToolCall(i, "shell", '{"cmd": "ls"}') for i in ids)
            entries.append((len(entries), turn, AssistantMessage("thinking", calls)))
            for i in ids:
                entries.append((len(entries), turn, ToolMessage(ToolResult(i, "x" * rng.randint(0, 900)))))
        if rng.random() < 0.8:
            entries.append((len(entries), turn, AssistantMessage(f"answer {turn}")))
    return entries


def assert_pairs_on_one_side(entries, replaced: set[int]) -> None:
    side_of_call: dict[str, bool] = {}
    for seq, _turn, message in entries:
        if isinstance(message, AssistantMessage):
            for tool_call in message.tool_calls:
                side_of_call[tool_call.id] = seq in replaced
        elif isinstance(message, ToolMessage):
            assert side_of_call[message.result.call_id] == (seq in replaced)


@pytest.mark.parametrize("seed", range(200))
def test_generated_histories_never_have_a_tool_call_split_from_its_results(seed):
    rng = random.Random(seed)
    entries = random_history(rng)
    target = rng.choice([None, 50, 300, 2_000])
    plan = plan_compaction(
        entries, keep_recent_turns=rng.randint(0, 3), estimator=Counting(), target_tokens=target
    )
    if plan is None:
        return
    replaced = set(plan.replaced)
    assert_pairs_on_one_side(entries, replaced)
    seqs = [seq for seq, _turn, _message in entries]
    first = seqs.index(plan.replaced[0])
    assert plan.replaced == tuple(seqs[first : first + len(plan.replaced)])
    assert not any(isinstance(m, SystemMessage) and s in replaced for s, _t, m in entries[: first + 1])


# --- the summary request and the summary ----------------------------------------------------------------


def test_the_summary_request_contains_the_marker_exactly():
    _system, request = build_summary_request([user("hello")])
    assert SUMMARY_MARKER == "Summarize the conversation"
    assert SUMMARY_MARKER in user_text(request)


def test_the_marker_is_the_one_the_embedded_provider_recognises():
    assert SUMMARY_MARKER == FAKE_PROVIDER_MARKER


def test_the_summary_instructions_ask_for_what_matters():
    system, _request = build_summary_request([])
    assert isinstance(system, SystemMessage)
    for topic in ("Goals", "Decisions", "Files touched", "Open tasks", "Tool results that matter"):
        assert topic in system.content


def test_the_transcript_holds_every_message_in_order():
    messages = [
        SystemMessage("earlier summary"),
        UserMessage((TextPart("look at this [[script:tools]]"), ImagePart("image/png", data="AAAA"))),
        AssistantMessage("I will read it.", (ToolCall("c1", "read_file", '{"path": "notes.md"}'),)),
        ToolMessage(ToolResult("c1", "no such file", is_error=True)),
        AssistantMessage("partial", interrupted=True),
    ]
    _system, request = build_summary_request(messages)
    text = user_text(request)
    pieces = [
        "earlier summary",
        "look at this [[script:tools]]",
        "[image/png image]",
        "I will read it.",
        'name="read_file"',
        '{"path": "notes.md"}',
        "no such file",
        "partial",
    ]
    positions = [text.index(piece) for piece in pieces]
    assert positions == sorted(positions)
    assert "AAAA" not in text
    assert '<tool_result id="c1" name="read_file" error>' in text
    assert "<assistant interrupted>" in text


def test_the_summary_message_is_labelled_with_the_count():
    message = summary_message("  The user wants a parser.\n", 12)
    assert user_text(message) == "[Summary of 12 earlier messages]\nThe user wants a parser."
    assert user_text(summary_message("x", 1)).startswith("[Summary of 1 earlier message]")


# --- chunking -------------------------------------------------------------------------------------------


def flatten(chunks):
    return [message for chunk in chunks for message in chunk]


def test_chunks_hold_all_messages_in_order():
    messages = [user(f"message {n} " + "w" * (n * 37 % 500)) for n in range(60)]
    chunks = chunk_for_summary(messages, 1_000, ESTIMATOR)
    assert len(chunks) > 1
    assert flatten(chunks) == messages
    assert all(chunks)


@pytest.mark.parametrize("seed", range(50))
def test_chunks_of_generated_histories_hold_all_messages_in_order(seed):
    rng = random.Random(seed)
    messages = [message for _seq, _turn, message in random_history(rng)]
    chunks = chunk_for_summary(messages, rng.choice([1, 400, 800, 5_000]), ESTIMATOR)
    assert flatten(chunks) == messages
    assert all(chunks)


def test_chunks_fit_the_budget_with_the_instructions():
    overhead = ESTIMATOR.estimate(build_summary_request(()))
    messages = [user("v" * 400) for _ in range(30)]
    for chunk in chunk_for_summary(messages, overhead + 500, ESTIMATOR):
        assert sum(ESTIMATOR.estimate([m]) for m in chunk) <= 500


def test_a_message_larger_than_the_budget_forms_a_chunk_of_its_own():
    big = user("b" * 40_000)
    messages = [user("small"), big, user("small again")]
    chunks = chunk_for_summary(messages, 2_000, ESTIMATOR)
    assert [big] in chunks
    assert flatten(chunks) == messages


def test_a_tool_call_and_its_results_share_a_chunk_when_they_fit():
    overhead = ESTIMATOR.estimate(build_summary_request(()))
    first = user("u" * 1_200)
    step = tool_step("c1", "r" * 1_200)
    chunks = chunk_for_summary([first, *step], overhead + 500, ESTIMATOR)
    assert chunks == [[first], step]


def test_chunking_nothing_gives_no_chunks():
    assert chunk_for_summary([], 100, ESTIMATOR) == []


def test_chunking_needs_a_positive_budget():
    with pytest.raises(ValueError):
        chunk_for_summary([user("x")], 0, ESTIMATOR)


# --- stubbing tool outputs ------------------------------------------------------------------------------


def test_old_long_tool_outputs_are_replaced_by_a_stub():
    output = "".join(chr(ord("a") + n % 26) for n in range(18_433))
    entries = history([user("q1"), *tool_step("c1", output)], [user("q2")], [user("q3")])
    stubs = stub_tool_outputs(entries, keep_recent_turns=2)
    assert len(stubs) == 1
    seq, message = stubs[0]
    assert seq == 3
    assert isinstance(message, ToolMessage)
    assert message.result.call_id == "c1"
    assert message.result.content == (
        "[tool output cut: 18,233 chars removed to fit the context window]\n" + output[:200]
    )


def test_stubs_keep_the_error_flag():
    entries = history([user("q1"), *tool_step("c1", "e" * 500)], [user("q2")])
    failing = [
        (seq, turn, ToolMessage(ToolResult("c1", m.result.content, is_error=True)))
        if isinstance(m, ToolMessage)
        else (seq, turn, m)
        for seq, turn, m in entries
    ]
    [(_seq, message)] = stub_tool_outputs(failing, keep_recent_turns=1)
    assert isinstance(message, ToolMessage)
    assert message.result.is_error


def test_short_and_recent_tool_outputs_are_left_alone():
    entries = history(
        [user("q1"), *tool_step("c1", "short")],
        [user("q2"), *tool_step("c2", "x" * 10_000)],
    )
    assert stub_tool_outputs(entries, keep_recent_turns=1) == []


def test_an_output_already_cut_is_not_cut_again():
    entries = history([user("q1"), *tool_step("c1", "y" * 1_000)], [user("q2")])
    [(seq, stubbed)] = stub_tool_outputs(entries, keep_recent_turns=1)
    again = [(s, t, stubbed if s == seq else m) for s, t, m in entries]
    assert stub_tool_outputs(again, keep_recent_turns=1) == []


def test_max_chars_sets_how_much_is_kept():
    entries = history([user("q1"), *tool_step("c1", "z" * 100)], [user("q2")])
    [(_seq, message)] = stub_tool_outputs(entries, keep_recent_turns=1, max_chars=10)
    assert isinstance(message, ToolMessage)
    assert message.result.content.endswith("]\n" + "z" * 10)
    assert "90 chars removed" in message.result.content


# --- shrinking ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [(1_000, 900, True), (1_000, 901, False), (1_000, 100, True), (1_000, 1_000, False), (0, 0, False)],
)
def test_shrank_enough_needs_the_minimum_fraction(before, after, expected):
    assert shrank_enough(before, after) is expected


def test_shrank_enough_with_no_minimum_still_needs_a_decrease():
    assert shrank_enough(1_000, 999, min_shrink=0.0)
    assert not shrank_enough(1_000, 1_000, min_shrink=0.0)


def test_shrank_enough_refuses_a_fraction_out_of_range():
    with pytest.raises(ValueError):
        shrank_enough(10, 5, min_shrink=1.0)
