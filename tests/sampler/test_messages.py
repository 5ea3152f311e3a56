"""The internal model of a conversation, and its degraded projections."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sampler.messages import (
    AssistantMessage,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
    media_parts_count,
)
from sampler.projection import (
    CONVERSATION_START_TEXT,
    degrade_media,
    media_placeholder,
    strict_structure,
    strip_media,
)
from sampler.providers import AssistantResult, StreamDone, StreamError, StreamText, ToolCallDelta, UsageUpdate


def image(n: int) -> ImagePart:
    return ImagePart("image/png", data=f"DATA{n}")


def call(id: str, name: str = "read", arguments: str = '{"path": "a"}') -> ToolCall:
    return ToolCall(id, name, arguments)


def result(id: str, content: str = "ok", is_error: bool = False) -> ToolMessage:
    return ToolMessage(ToolResult(id, content, is_error))


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(model="m", messages=messages)


# --- the structs ------------------------------------------------------------------------------------------

EVERY_STRUCT: list[Any] = [
    TextPart("hi"),
    ImagePart("image/jpeg", data="AAAA"),
    ImagePart("image/png", url="https://example.invalid/a.png"),
    ToolCall("c1", "read", '{"path": "x"}'),
    ToolResult("c1", "content", is_error=True),
    SystemMessage("be brief"),
    UserMessage((TextPart("look"), ImagePart("image/png", data="AAAA"))),
    AssistantMessage("text", (ToolCall("c1", "read", "{}"),), interrupted=True),
    ToolMessage(ToolResult("c1", "done")),
    Usage(10, 5, cached_tokens=3),
    ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ModelRequest(
        model="m",
        messages=(SystemMessage("s"), UserMessage.of_text("u"), AssistantMessage("a"), result("c")),
        tools=(ToolSpec("t", "d", {"type": "object"}),),
        max_tokens=100,
        temperature=0.5,
        top_p=0.9,
        stop=("END",),
    ),
    StreamText("x"),
    ToolCallDelta(0, "c1", "read", '{"a'),
    UsageUpdate(Usage(1, 2)),
    StreamError("error", '{"error": {}}'),
    StreamDone(),
    AssistantResult(AssistantMessage("x"), Usage(1, 1), FinishReason.STOP, complete=True),
]


@pytest.mark.parametrize("value", EVERY_STRUCT, ids=lambda v: type(v).__name__)
def test_every_struct_round_trips_through_msgspec_json(value: Any):
    assert msgspec.json.decode(msgspec.json.encode(value), type=type(value)) == value


def test_a_history_decodes_back_to_the_right_message_kinds():
    history: list[Message] = [
        SystemMessage("s"),
        UserMessage.of_text("u"),
        AssistantMessage("", (call("c"),)),
        result("c"),
    ]
    decoded = msgspec.json.decode(msgspec.json.encode(history), type=list[Message])
    assert decoded == history
    assert [type(m) for m in decoded] == [SystemMessage, UserMessage, AssistantMessage, ToolMessage]


def test_messages_are_frozen():
    message = AssistantMessage("x")
    with pytest.raises(AttributeError):
        message.text = "y"  # type: ignore[misc]


def test_an_image_part_needs_data_or_url():
    with pytest.raises(ValueError, match="data or url"):
        ImagePart("image/png")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"type": "ImagePart", "media_type": "image/png"}', type=ImagePart)


def test_finish_reason_is_persisted_as_its_string():
    assert msgspec.json.encode(FinishReason.CONTENT_FILTER) == b'"content_filter"'


def test_usages_add_field_by_field():
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)


def test_media_parts_count_counts_images_across_messages():
    messages = (
        UserMessage((image(1), TextPart("t"), image(2))),
        AssistantMessage("a"),
        UserMessage((image(3),)),
    )
    assert media_parts_count(request(*messages)) == 3
    assert media_parts_count(list(messages)) == 3
    assert media_parts_count(request(UserMessage.of_text("none"))) == 0


# --- degrade_media and strip_media --------------------------------------------------------------------------


def test_degrade_keeps_exactly_the_two_newest_media_parts():
    original = request(
        UserMessage((image(1), TextPart("first"))),
        AssistantMessage("seen"),
        UserMessage((image(2), image(3))),
        AssistantMessage("seen"),
        UserMessage((TextPart("last"), image(4))),
    )
    degraded = degrade_media(original)
    assert media_parts_count(degraded) == 2
    assert degraded.messages == (
        UserMessage((media_placeholder(image(1)), TextPart("first"))),
        AssistantMessage("seen"),
        UserMessage((media_placeholder(image(2)), image(3))),
        AssistantMessage("seen"),
        UserMessage((TextPart("last"), image(4))),
    )


def test_degrade_with_a_custom_keep():
    original = request(UserMessage((image(1), image(2), image(3))))
    assert degrade_media(original, keep=1).messages == (
        UserMessage((media_placeholder(image(1)), media_placeholder(image(2)), image(3))),
    )


def test_placeholder_says_the_media_was_dropped_for_the_size_limit():
    text = media_placeholder(ImagePart("image/webp", url="u")).text
    assert "image/webp" in text
    assert "dropped" in text
    assert "size limit" in text


def test_degrade_returns_the_same_request_when_nothing_is_dropped():
    original = request(UserMessage((image(1), image(2))), AssistantMessage("x"))
    assert degrade_media(original) is original


def test_degrade_keeps_the_other_request_fields():
    original = ModelRequest(
        model="m", messages=(UserMessage((image(1),)),), tools=(ToolSpec("t", "d", {}),), max_tokens=7
    )
    degraded = degrade_media(original, keep=0)
    assert (degraded.model, degraded.tools, degraded.max_tokens) == ("m", original.tools, 7)


def test_degrade_rejects_a_negative_keep():
    with pytest.raises(ValueError, match="keep"):
        degrade_media(request(), keep=-1)


def test_strip_replaces_every_media_part_with_a_placeholder():
    original = request(UserMessage((image(1), TextPart("t"))), UserMessage((image(2),)))
    stripped = strip_media(original)
    assert media_parts_count(stripped) == 0
    assert stripped.messages == (
        UserMessage((media_placeholder(image(1)), TextPart("t"))),
        UserMessage((media_placeholder(image(2)),)),
    )


def test_strip_returns_the_same_request_without_media():
    original = request(UserMessage.of_text("plain"))
    assert strip_media(original) is original


# --- strict_structure ---------------------------------------------------------------------------------------


def test_strict_structure_leaves_a_well_formed_conversation_alone():
    original = request(
        SystemMessage("s"),
        UserMessage.of_text("u"),
        AssistantMessage("a", (call("c1"), call("c2"))),
        result("c1"),
        result("c2"),
        AssistantMessage("done"),
    )
    assert strict_structure(original) is original


def test_strict_structure_moves_results_next_to_their_calls_in_call_order():
    projected = strict_structure(
        request(
            UserMessage.of_text("u"),
            AssistantMessage("", (call("c1"), call("c2"))),
            UserMessage.of_text("while you work"),
            result("c2"),
            result("c1"),
        )
    )
    assert projected.messages == (
        UserMessage.of_text("u"),
        AssistantMessage("", (call("c1"), call("c2"))),
        result("c1"),
        result("c2"),
        UserMessage.of_text("while you work"),
    )


def test_strict_structure_turns_a_call_without_result_into_assistant_text():
    projected = strict_structure(
        request(
            UserMessage.of_text("u"),
            AssistantMessage("let me look", (call("c1", "grep", '{"q": "x"}'), call("c2"))),
            result("c2"),
        )
    )
    assistant = projected.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls == (call("c2"),)
    assert assistant.text.startswith("let me look\n\n")
    assert "grep" in assistant.text
    assert '{"q": "x"}' in assistant.text
    assert projected.messages[2] == result("c2")


def test_strict_structure_turns_a_result_without_call_into_user_text():
    projected = strict_structure(
        request(
            UserMessage.of_text("u"), result("ghost", "the content", is_error=True), AssistantMessage("a")
        )
    )
    assert len(projected.messages) == 2
    user, assistant = projected.messages
    assert isinstance(user, UserMessage)
    assert assistant == AssistantMessage("a")
    merged_text = "\n".join(p.text for p in user.parts if isinstance(p, TextPart))
    assert "ghost" in merged_text
    assert "the content" in merged_text
    assert "error" in merged_text


def test_strict_structure_turns_a_second_result_for_one_call_into_text():
    projected = strict_structure(
        request(
            UserMessage.of_text("u"),
            AssistantMessage("", (call("c1"),)),
            result("c1", "first"),
            result("c1", "second"),
        )
    )
    assert projected.messages[:3] == (
        UserMessage.of_text("u"),
        AssistantMessage("", (call("c1"),)),
        result("c1", "first"),
    )
    last = projected.messages[3]
    assert isinstance(last, UserMessage)
    assert any(isinstance(p, TextPart) and "second" in p.text for p in last.parts)


def test_strict_structure_merges_consecutive_same_role_messages():
    projected = strict_structure(
        request(
            SystemMessage("s1"),
            SystemMessage("s2"),
            UserMessage.of_text("u1"),
            UserMessage((image(1),)),
            AssistantMessage("a1"),
            AssistantMessage("a2", (call("c"),)),
            result("c"),
        )
    )
    assert projected.messages == (
        SystemMessage("s1\n\ns2"),
        UserMessage((TextPart("u1"), image(1))),
        AssistantMessage("a1\n\na2", (call("c"),)),
        result("c"),
    )


def test_strict_structure_turns_a_late_system_message_into_user_text():
    projected = strict_structure(
        request(SystemMessage("s"), UserMessage.of_text("u"), AssistantMessage("a"), SystemMessage("late"))
    )
    assert projected.messages == (
        SystemMessage("s"),
        UserMessage.of_text("u"),
        AssistantMessage("a"),
        UserMessage.of_text("late"),
    )


def test_strict_structure_drops_empty_messages_and_empty_text_parts():
    projected = strict_structure(
        request(
            UserMessage((TextPart(""), TextPart("u"))),
            AssistantMessage(""),
            UserMessage((TextPart(""),)),
            AssistantMessage("a"),
        )
    )
    assert projected.messages == (UserMessage.of_text("u"), AssistantMessage("a"))


def test_strict_structure_opens_with_a_user_message():
    projected = strict_structure(request(SystemMessage("s"), AssistantMessage("hello")))
    assert projected.messages == (
        SystemMessage("s"),
        UserMessage.of_text(CONVERSATION_START_TEXT),
        AssistantMessage("hello"),
    )


def test_strict_structure_keeps_every_piece_of_text():
    projected = strict_structure(
        request(
            UserMessage.of_text("alpha"),
            AssistantMessage("beta", (call("c1", arguments='{"gamma": 1}'),)),
            result("c9", "delta"),
            SystemMessage("epsilon"),
        )
    )
    encoded = msgspec.json.encode(projected).decode()
    for word in ("alpha", "beta", "gamma", "delta", "epsilon"):
        assert word in encoded
