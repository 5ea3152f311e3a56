"""SessionStore.apply_repair: mended messages take the place of the originals, which stay stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sampler.messages import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, UserMessage
from shell.store import CompactionRejected, SessionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore.open(tmp_path / "sessions.db") as opened:
        opened.create_session("s", workspace=str(tmp_path), model="m")
        yield opened


def append(store: SessionStore, turn: int, *messages: Message) -> list[int]:
    return [store.append_message("s", turn, m) for m in messages]


CALL = AssistantMessage("", (ToolCall("c1", "ls", "{}"),))
ANSWER = ToolMessage(ToolResult("c1", "no result was recorded", is_error=True))


def test_the_mended_messages_take_the_place_of_the_replaced_ones_in_order(store: SessionStore) -> None:
    append(store, 1, UserMessage.of_text("a"), CALL)
    replaced = append(store, 2, UserMessage.of_text("b"))
    seqs = store.apply_repair(
        "s", replaced=[2, *replaced], messages=[(1, CALL), (1, ANSWER), (2, UserMessage.of_text("b"))]
    )
    append(store, 2, AssistantMessage("c"))

    projection = store.load_messages("s")
    assert [m.message for m in projection] == [
        UserMessage.of_text("a"),
        CALL,
        ANSWER,
        UserMessage.of_text("b"),
        AssistantMessage("c"),
    ]
    assert [m.seq for m in projection][1:4] == seqs
    assert [m.turn for m in projection] == [1, 1, 1, 2, 2]
    assert [m.is_summary for m in projection] == [False, True, True, True, False]
    everything = store.load_messages("s", include_replaced=True)
    assert [m.replaced_by for m in everything[:3]] == [None, seqs[0], seqs[0]]


@pytest.mark.parametrize(
    ("replaced", "messages", "reason"),
    [
        ([2], [], "at least one message"),
        ([], [(1, ANSWER)], "at least one message"),
        ([9], [(1, ANSWER)], "no message with seq"),
    ],
)
def test_an_invalid_repair_is_rejected_and_changes_nothing(
    store: SessionStore, replaced: list[int], messages: list[tuple[int, Message]], reason: str
) -> None:
    append(store, 1, UserMessage.of_text("a"), CALL)
    before = store.load_messages("s", include_replaced=True)
    with pytest.raises(CompactionRejected, match=reason):
        store.apply_repair("s", replaced=replaced, messages=messages)
    assert store.load_messages("s", include_replaced=True) == before


def test_a_message_already_replaced_cannot_be_repaired_again(store: SessionStore) -> None:
    append(store, 1, UserMessage.of_text("a"), CALL)
    store.apply_repair("s", replaced=[2], messages=[(1, CALL), (1, ANSWER)])
    with pytest.raises(CompactionRejected, match="already replaced"):
        store.apply_repair("s", replaced=[2], messages=[(1, CALL)])
