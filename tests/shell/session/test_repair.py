"""plan_repair: what a poisoned projection is mended into, and what is left alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sampler.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from sampler.projection import strict_structure
from shell.session._repair import NO_RESULT, Repair, Soundness, plan_repair


def entries(*messages: Message, turn: int = 1) -> list[tuple[int, int, Message]]:
    return [(seq, turn, message) for seq, message in enumerate(messages, start=1)]


def call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "read_file", '{"path": "a"}')


def result(call_id: str, content: str = "ok") -> ToolMessage:
    return ToolMessage(ToolResult(call_id, content))


def projection(history: list[tuple[int, int, Message]], repair: Repair) -> list[Message]:
    """The projection after the repair: the untouched head, then the mended tail."""
    head = [m for seq, _, m in history if seq not in repair.replaced]
    return head + [message for _, message in repair.messages]


def assert_valid_structure(messages: list[Message]) -> None:
    problems = _pairs(messages)
    assert not problems, problems


def _pairs(messages: list[Message]) -> list[str]:
    problems: list[str] = []
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            following = messages[index + 1 : index + 1 + len(message.tool_calls)]
            ids = [m.result.call_id for m in following if isinstance(m, ToolMessage)]
            if sorted(ids) != sorted(c.id for c in message.tool_calls):
                problems.append(f"message {index}: calls answered by {ids}")
        if isinstance(message, ToolMessage):
            before = messages[:index]
            holders = [m for m in before if isinstance(m, AssistantMessage)]
            if not any(c.id == message.result.call_id for m in holders for c in m.tool_calls):
                problems.append(f"message {index}: result without its call")
    return problems


def test_a_valid_projection_needs_no_repair() -> None:
    history = entries(
        UserMessage.of_text("read a"),
        AssistantMessage("", (call("c1"),)),
        result("c1"),
        AssistantMessage("done"),
        UserMessage.of_text("thanks"),
    )
    assert plan_repair(history) is None
    assert plan_repair(history, merge_roles=True) is None


def test_results_in_another_order_than_their_calls_need_no_repair() -> None:
    history = entries(
        UserMessage.of_text("read both"),
        AssistantMessage("", (call("c1"), call("c2"))),
        result("c2", "finished first"),
        result("c1"),
        AssistantMessage("done"),
    )
    assert plan_repair(history) is None


def test_an_unpaired_tool_call_gets_an_error_result_right_after_it() -> None:
    history = entries(
        UserMessage.of_text("read a"),
        AssistantMessage("let me look", (call("c1"), call("c2"))),
        result("c2", "two"),
        UserMessage.of_text("next question"),
    )
    repair = plan_repair(history)
    assert repair is not None
    mended = projection(history, repair)
    assert mended[1] == history[1][2]
    assert mended[2] == ToolMessage(ToolResult("c1", NO_RESULT, is_error=True))
    assert mended[3] == result("c2", "two")
    assert mended[4] == UserMessage.of_text("next question")
    assert repair.done == ("1 unpaired tool call(s) answered with an error result",)
    assert_valid_structure(mended)


def test_an_unpaired_call_in_the_last_message_still_has_a_place_to_go() -> None:
    history = entries(UserMessage.of_text("go"), AssistantMessage("", (call("c9"),)))
    repair = plan_repair(history)
    assert repair is not None and repair.replaced == (2,)
    assert projection(history, repair)[1:] == [
        AssistantMessage("", (call("c9"),)),
        ToolMessage(ToolResult("c9", NO_RESULT, is_error=True)),
    ]


def test_orphan_and_duplicate_results_are_dropped_and_a_separated_one_is_moved() -> None:
    history = entries(
        result("ghost", "from nowhere"),
        UserMessage.of_text("read"),
        AssistantMessage("", (call("c1"),)),
        UserMessage.of_text("interjection"),
        result("c1", "late"),
        result("c1", "twice"),
    )
    repair = plan_repair(history)
    assert repair is not None
    mended = projection(history, repair)
    assert mended == [
        UserMessage.of_text("read"),
        AssistantMessage("", (call("c1"),)),
        result("c1", "late"),
        UserMessage.of_text("interjection"),
    ]
    assert set(repair.done) == {
        "2 orphan tool result(s) dropped",
        "1 tool result(s) moved next to their call",
    }
    assert_valid_structure(mended)


def test_an_empty_image_becomes_a_placeholder_and_a_good_one_stays() -> None:
    good = ImagePart("image/png", data="iVBORw0KGgo=")
    history = entries(
        UserMessage((TextPart("look"), ImagePart("image/png", data=""), good)),
        AssistantMessage("I see one image"),
    )
    repair = plan_repair(history)
    assert repair is not None and repair.replaced == (1, 2)
    first = projection(history, repair)[0]
    assert isinstance(first, UserMessage)
    assert first.parts == (TextPart("look"), TextPart("[image/png omitted: it was empty]"), good)


def test_after_an_image_was_rejected_every_image_becomes_a_placeholder() -> None:
    history = entries(UserMessage((TextPart("look"), ImagePart("image/png", url="https://x/y.png"))))
    assert plan_repair(history) is None
    repair = plan_repair(history, drop_images=True)
    assert repair is not None
    assert projection(history, repair)[0] == UserMessage(
        (TextPart("look"), TextPart("[image/png omitted: the provider rejected it]"))
    )


def test_same_role_neighbours_are_merged_only_once_the_provider_rejected_the_structure() -> None:
    history = [
        (1, 1, UserMessage.of_text("first prompt, whose turn failed")),
        (2, 2, UserMessage.of_text("second prompt")),
        (3, 2, AssistantMessage("part one", interrupted=True)),
        (4, 3, AssistantMessage("part two")),
        (5, 3, AssistantMessage("")),
    ]
    assert plan_repair(history) is None
    repair = plan_repair(history, merge_roles=True)
    assert repair is not None and repair.replaced == (1, 2, 3, 4, 5)
    assert repair.messages == (
        (2, UserMessage((TextPart("first prompt, whose turn failed"), TextPart("second prompt")))),
        (3, AssistantMessage("part one\n\npart two", (), True)),
    )
    assert "2 consecutive same-role message(s) merged" in repair.done
    assert "1 empty message(s) dropped" in repair.done


def test_the_repair_replaces_only_the_tail_from_the_first_defect() -> None:
    history = entries(
        UserMessage.of_text("a"),
        AssistantMessage("b"),
        UserMessage.of_text("c"),
        AssistantMessage("", (call("c1"),)),
        UserMessage.of_text("d"),
    )
    repair = plan_repair(history)
    assert repair is not None
    assert repair.replaced == (4, 5)
    assert [m for _, m in repair.messages][1] == ToolMessage(ToolResult("c1", NO_RESULT, is_error=True))


def test_the_mended_projection_is_one_strict_structure_leaves_alone() -> None:
    history = entries(
        UserMessage.of_text("x"),
        AssistantMessage("", (call("c1"), call("c2"))),
        result("c2"),
        result("orphan"),
        UserMessage.of_text("y"),
        UserMessage.of_text("z"),
    )
    repair = plan_repair(history, merge_roles=True)
    assert repair is not None
    mended = tuple(projection(history, repair))
    request = ModelRequest(model="m", messages=mended)
    assert strict_structure(request) is request


_part = st.sampled_from([TextPart("t"), ImagePart("image/png", data=""), ImagePart("image/png", data="AA==")])


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, int, Message]]:
    """Random projections: prompts (some with images), answers, tool calls (ids never reused) and results
    for calls made or not, in any order."""
    messages: list[Message] = []
    made: list[str] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "result", "orphan"]))
        if kind == "user":
            messages.append(UserMessage(tuple(draw(st.lists(_part, min_size=1, max_size=3)))))
        elif kind == "assistant":
            messages.append(AssistantMessage(draw(st.sampled_from(["", "text"]))))
        elif kind == "calls":
            ids = [f"c{n}_{i}" for i in range(draw(st.integers(1, 3)))]
            made += ids
            messages.append(AssistantMessage("", tuple(call(i) for i in ids)))
        elif kind == "result" and made:
            messages.append(result(draw(st.sampled_from(made))))
        else:
            messages.append(result(f"ghost{n}"))
    return [(seq, seq, m) for seq, m in enumerate(messages, start=1)]


@settings(max_examples=300, deadline=None)
@given(history=histories(), merge_roles=st.booleans(), drop_images=st.booleans())
def test_any_history_is_mended_into_a_valid_one_and_mending_it_again_changes_nothing(
    history: list[tuple[int, int, Message]], merge_roles: bool, drop_images: bool
) -> None:
    repair = plan_repair(history, merge_roles=merge_roles, drop_images=drop_images)
    if repair is None:
        mended = [m for _, _, m in history]
    else:
        assert repair.replaced == tuple(seq for seq, _, _ in history[-len(repair.replaced) :])
        mended = projection(history, repair)
    assert_valid_structure(mended)
    images = [p for m in mended if isinstance(m, UserMessage) for p in m.parts if isinstance(p, ImagePart)]
    assert all(p.data for p in images) and not (drop_images and images)
    again = [(seq, seq, m) for seq, m in enumerate(mended, start=1)]
    assert plan_repair(again, merge_roles=merge_roles, drop_images=drop_images) is None


@st.composite
def well_formed(draw: st.DrawFn) -> list[tuple[int, int, Message]]:
    """Projections as turns write them: prompts, answers, and calls each answered right after, in any
    order; then, sometimes, one message dropped, repeated or moved."""
    messages: list[Message] = []
    for n in range(draw(st.integers(0, 6))):
        messages.append(UserMessage(tuple(draw(st.lists(_part, min_size=1, max_size=2)))))
        for step in range(draw(st.integers(0, 2))):
            ids = [f"c{n}_{step}_{i}" for i in range(draw(st.integers(1, 3)))]
            messages.append(AssistantMessage("", tuple(call(i) for i in ids)))
            messages += [result(i) for i in draw(st.permutations(ids))]
        messages.append(AssistantMessage("done"))
    if messages and draw(st.booleans()):
        index = draw(st.integers(0, len(messages) - 1))
        how = draw(st.sampled_from(["drop", "repeat", "move"]))
        moved = messages.pop(index) if how != "repeat" else messages[index]
        if how != "drop":
            messages.insert(draw(st.integers(0, len(messages))), moved)
    return [(seq, seq, m) for seq, m in enumerate(messages, start=1)]


@settings(max_examples=400, deadline=None)
@given(history=st.one_of(histories(), well_formed()))
def test_a_projection_known_sound_needs_no_repair(history: list[tuple[int, int, Message]]) -> None:
    messages = [m for _, _, m in history]
    soundness = Soundness()
    for message in messages:
        soundness.add(message)
    assert soundness.sound == Soundness(messages).sound
    if soundness.sound:
        assert plan_repair(history) is None


def test_projections_as_turns_write_them_are_known_sound() -> None:
    turn = [
        UserMessage.of_text("go"),
        AssistantMessage("", (call("a"), call("b"))),
        result("b"),
        result("a"),
        AssistantMessage("done"),
    ]
    assert Soundness(turn).sound
    assert not Soundness(turn[:3]).sound  # a call still unanswered
    assert not Soundness([*turn, result("a")]).sound  # a result twice
    assert not Soundness([UserMessage((ImagePart("image/png", data=""),))]).sound
