"""The session's line to its history: asks that ride out restarts, writes that are kept until they can be
made, in order, and errors that say which of three things went wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors import ActorUnavailable, AskTimeout
from sampler import TextPart, UserMessage
from shell._protocol import Append, BeginTurn, EndTurn, FinishTurn, LogEvent, StartTurn
from shell.events import TurnCancelled, TurnStarted
from shell.session import write_to_store
from shell.session._history import History, HistoryError
from shell.store import open_store


class FakeChatState:
    """Answers asks with the writes it has made; fails the next ``failures`` asks with ``error``."""

    def __init__(self) -> None:
        self.made: list[Any] = []
        self.failures = 0
        self.error: Exception = ActorUnavailable("restarting")

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        if self.failures:
            self.failures -= 1
            raise self.error
        self.made.append(message)
        return len(self.made)


@pytest.fixture
def chat_state() -> FakeChatState:
    return FakeChatState()


def history(chat_state: FakeChatState, *, stopping: bool = False) -> History:
    return History(lambda: chat_state, lambda: stopping, [])  # type: ignore[arg-type, return-value]


PROMPT = UserMessage((TextPart("hello"),))
STARTED = TurnStarted("s", 3, "hello")


def test_an_ask_rides_out_a_restart(chat_state: FakeChatState) -> None:
    chat_state.failures = 4
    assert history(chat_state).ask(EndTurn()) == 1


def test_a_chat_state_that_stays_away_is_an_internal_error(chat_state: FakeChatState) -> None:
    chat_state.failures = 5
    with pytest.raises(HistoryError) as caught:
        history(chat_state).ask(EndTurn())
    assert caught.value.kind == "internal" and chat_state.made == []


def test_an_ask_whose_handler_started_is_never_sent_twice(chat_state: FakeChatState) -> None:
    chat_state.failures, chat_state.error = 1, AskTimeout("silent", delivered=True)
    with pytest.raises(HistoryError) as caught:
        history(chat_state).ask(EndTurn())
    assert caught.value.kind == "internal" and chat_state.failures == 0 and chat_state.made == []


def test_a_store_failure_is_a_store_error_and_is_not_tried_again(chat_state: FakeChatState) -> None:
    chat_state.failures, chat_state.error = 2, OSError("disk full")
    with pytest.raises(HistoryError) as caught:
        history(chat_state).ask(EndTurn())
    assert caught.value.kind == "store" and chat_state.failures == 1


def test_a_stopping_session_does_not_wait_for_a_restart(chat_state: FakeChatState) -> None:
    chat_state.failures = 1
    with pytest.raises(HistoryError) as caught:
        history(chat_state, stopping=True).ask(EndTurn())
    assert caught.value.kind == "aborted"


def test_recorded_writes_are_kept_in_order_until_they_can_be_made(chat_state: FakeChatState) -> None:
    line = history(chat_state)
    chat_state.failures = 5
    line.record(BeginTurn(1))
    line.record(EndTurn())  # kept behind the first, although the chat state is back
    assert line.kept == [BeginTurn(1), EndTurn()] and chat_state.made == []
    line.flush()
    assert chat_state.made == [BeginTurn(1), EndTurn()] and line.kept == []


def test_a_write_follows_the_kept_writes_and_is_kept_itself_when_it_cannot_be_made(
    chat_state: FakeChatState,
) -> None:
    line = history(chat_state)
    line.kept.append(BeginTurn(1))
    chat_state.failures = 5
    with pytest.raises(HistoryError):
        line.write(EndTurn())
    assert line.kept == [BeginTurn(1), EndTurn()]
    line.write(BeginTurn(2))
    assert chat_state.made == [BeginTurn(1), EndTurn(), BeginTurn(2)] and line.kept == []


def test_a_turn_start_is_one_ask_that_begins_the_turn_with_its_prompt_and_its_announcement(
    chat_state: FakeChatState,
) -> None:
    history(chat_state).begin_turn(3, PROMPT, STARTED, keep_on_failure=False)
    assert chat_state.made == [StartTurn(3, PROMPT, (STARTED,))]


def test_a_turn_start_without_its_announcement_stores_the_prompt_alone(chat_state: FakeChatState) -> None:
    history(chat_state).begin_turn(3, PROMPT, keep_on_failure=False)
    assert chat_state.made == [StartTurn(3, PROMPT)]


def test_a_turn_end_is_one_ask_or_kept_as_two_writes_behind_the_kept_ones(chat_state: FakeChatState) -> None:
    line = history(chat_state)
    line.finish_turn(3, "ended")
    assert chat_state.made == [FinishTurn(3, "ended")]
    chat_state.failures = 5
    line.finish_turn(4, "ended")
    assert line.kept == [EndTurn(), LogEvent(4, "ended")]


def test_a_turn_start_that_cannot_be_written_raises_or_is_kept_as_asked(chat_state: FakeChatState) -> None:
    line = history(chat_state)
    chat_state.failures = 5
    with pytest.raises(HistoryError):
        line.begin_turn(3, PROMPT, STARTED, keep_on_failure=False)
    assert line.kept == []
    chat_state.failures = 5
    line.begin_turn(3, PROMPT, STARTED, keep_on_failure=True)
    assert line.kept == [BeginTurn(3), Append(3, PROMPT), LogEvent(3, STARTED)]


def test_a_turn_start_is_refused_while_earlier_writes_wait(chat_state: FakeChatState) -> None:
    line = history(chat_state)
    line.kept.append(EndTurn())
    with pytest.raises(HistoryError) as caught:
        line.begin_turn(3, PROMPT, STARTED, keep_on_failure=False)
    assert caught.value.kind == "store" and chat_state.made == []


def test_a_stopping_session_never_keeps_a_turn_start(chat_state: FakeChatState) -> None:
    line = history(chat_state, stopping=True)
    chat_state.failures = 2
    with pytest.raises(HistoryError) as caught:
        line.begin_turn(3, PROMPT, STARTED, keep_on_failure=True)
    assert caught.value.kind == "aborted" and line.kept == []


def test_a_stopped_sessions_kept_writes_are_made_by_whoever_holds_the_store(tmp_path: Path) -> None:
    store = open_store(tmp_path / "sessions.db")
    store.create_session("s", workspace=str(tmp_path), model="m")
    event = TurnCancelled("s", 1, "aborted")
    for write in [BeginTurn(1), Append(1, PROMPT), LogEvent(1, event), EndTurn()]:
        write_to_store(store, "s", write)
    assert [m.message for m in store.load_messages("s")] == [PROMPT]
    assert [e.type for e in store.load_events("s")] == ["TurnCancelled"]
    assert store.get_session("s").status == "idle" and store.get_session("s").current_turn == 1
