"""Fenced writers: a store that took a session writes to it only until another store takes it, on both
backends; the refused write stores nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sampler import UserMessage
from shell import events as ev
from shell.store import SessionStore, StaleOwner, open_store


def two_stores(target: Path | str) -> tuple[SessionStore, SessionStore]:
    first = open_store(target)
    first.create_session("s", workspace="/w", model="m")
    return first, open_store(target)


def test_taking_a_session_increments_its_owner_epoch(store_target: Path | str) -> None:
    first, second = two_stores(store_target)
    with first, second:
        assert first.get_session("s").owner_epoch == 0
        assert first.take_session("s") == 1
        assert second.take_session("s") == 2
        assert first.get_session("s").owner_epoch == 2


def test_a_store_whose_session_was_taken_by_another_writes_nothing_more(store_target: Path | str) -> None:
    first, second = two_stores(store_target)
    with first, second:
        first.take_session("s")
        first.start_turn("s", 1, UserMessage.of_text("mine"))
        second.take_session("s")
        writes = [
            lambda: first.append_message("s", 1, UserMessage.of_text("stale")),
            lambda: first.append_event("s", 1, ev.TurnCancelled("s", 1, "aborted")),
            lambda: first.finish_turn("s", 1, ev.TurnCancelled("s", 1, "aborted")),
            lambda: first.begin_turn("s", 2),
            lambda: first.end_turn("s"),
            lambda: first.set_learned_window("s", 1000),
            lambda: first.start_turn("s", 2, UserMessage.of_text("stale")),
        ]
        for write in writes:
            with pytest.raises(StaleOwner) as refused:
                write()
            assert (refused.value.epoch, refused.value.current) == (1, 2)
            assert "taken by another host" in str(refused.value)
        record = second.get_session("s")
        assert (record.status, record.current_turn, record.learned_window) == ("in_turn", 1, None)
        assert [m.message for m in second.load_messages("s")] == [UserMessage.of_text("mine")]
        assert second.load_events("s") == []
        assert second.append_message("s", 1, UserMessage.of_text("the owner's")) == 2


def test_taking_the_session_back_makes_a_store_the_owner_again(store_target: Path | str) -> None:
    first, second = two_stores(store_target)
    with first, second:
        first.take_session("s")
        second.take_session("s")
        assert first.take_session("s") == 3
        first.append_message("s", 1, UserMessage.of_text("again"))
        with pytest.raises(StaleOwner):
            second.append_message("s", 1, UserMessage.of_text("stale"))


def test_a_store_that_never_took_the_session_writes_unfenced(store_target: Path | str) -> None:
    first, second = two_stores(store_target)
    with first, second:
        first.take_session("s")
        assert second.append_message("s", 0, UserMessage.of_text("administration")) == 1
        second.take_session("s")
        second.release_session("s")
        first.take_session("s")
        assert second.append_message("s", 0, UserMessage.of_text("released")) == 2


def test_of_writes_racing_a_take_only_those_committed_before_it_are_stored(store_target: Path | str) -> None:
    first, second = two_stores(store_target)
    with first, second:
        first.take_session("s")
        stored: list[int] = []
        refused: list[StaleOwner] = []
        started = threading.Event()

        def keep_writing() -> None:
            for n in range(100_000):  # bounded: the take below ends it long before
                try:
                    stored.append(first.append_message("s", 1, UserMessage.of_text(f"w{n}")))
                except StaleOwner as exc:
                    refused.append(exc)
                    return
                started.set()

        writer = threading.Thread(target=keep_writing)
        writer.start()
        assert started.wait(30)
        epoch = second.take_session("s")
        writer.join(30)
        assert not writer.is_alive()
        kept = [m.seq for m in second.load_messages("s")]
        assert kept == stored  # every acknowledged write is stored, and nothing after the refusal
        assert len(refused) == 1 and refused[0].current == epoch
