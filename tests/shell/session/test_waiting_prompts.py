"""Prompts acknowledged behind a running turn are stored as waiting, so that a host taking the session up
after its process ended runs each in its turn; one that cannot be stored is refused, not acknowledged."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

from sampler import UserMessage
from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell import AgentHost, load_settings
from shell import events as ev
from shell.messages import UserPrompt
from shell.store import StoreUnavailable, open_store

SLOW = Script.task([ToolStep([("shell", {"command": "sleep 1"})]), FinalAnswer("slow one done")])


def settings(provider: FakeProvider, store: Path) -> Any:
    return load_settings(
        environ={
            "TURNKEEP_STORE__PATH": str(store),
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_TOOLS__ALLOW": "shell",
        }
    )


def ends(events: queue.Queue[Any], count: int) -> dict[int, Any]:
    found: dict[int, Any] = {}
    while len(found) < count:
        event = events.get(timeout=30)
        if isinstance(event, ev.TERMINAL_EVENTS):
            assert event.turn not in found, f"turn {event.turn} ended twice"
            found[event.turn] = event
    return found


def test_a_prompt_acknowledged_behind_a_turn_is_stored_as_waiting_and_then_begun(tmp_path: Path) -> None:
    with FakeProvider(SLOW) as provider, AgentHost(settings(provider, tmp_path / "s.db")) as host:
        address = host.open(tmp_path / "ws", session_id="s1")
        events: queue.Queue[Any] = queue.Queue()
        host.subscribe("s1", events)
        assert address.ask(UserPrompt("first")) == 1
        assert address.ask(UserPrompt("second")) == 2
        stored = [e for e in host.store.load_events("s1") if e.type == "PromptQueued"]
        assert [e.turn for e in stored] == [2]  # the first began at once: it needs none
        assert {turn: type(end) for turn, end in ends(events, 2).items()} == {
            1: ev.TurnCompleted,
            2: ev.TurnCompleted,
        }
        assert host.store.load_queued_prompts("s1") == []  # begun: no longer waiting


def test_a_host_taking_up_a_session_runs_its_stored_waiting_prompts_in_their_turns(tmp_path: Path) -> None:
    store_path = tmp_path / "s.db"
    with open_store(store_path) as store:  # as a killed host left it: turn 1 running, turns 2 and 3 waiting
        store.create_session("s", workspace=str(tmp_path / "ws"), model="m")
        store.start_turn("s", 1, UserMessage.of_text("the running one"))
        store.append_event("s", 1, ev.TurnStarted("s", 1, "the running one"))
        store.append_event("s", 2, ev.PromptQueued("s", 2, "waiting two"))
        store.append_event("s", 3, ev.PromptQueued("s", 3, "waiting three"))
    with FakeProvider(Script.echo()) as provider, AgentHost(settings(provider, store_path)) as host:
        events: queue.Queue[Any] = queue.Queue()
        address = host.resume("s", subscribers=[events])
        found = ends(events, 3)
        assert [found[n].text for n in (1, 2, 3)] == [
            "echo: the running one",
            "echo: waiting two",
            "echo: waiting three",
        ]
        assert address.ask(UserPrompt("next")) == 4
        assert ends(events, 1)[4].text == "echo: next"


def test_a_prompt_that_cannot_be_stored_as_waiting_is_refused(tmp_path: Path) -> None:
    with FakeProvider(SLOW) as provider, AgentHost(settings(provider, tmp_path / "s.db")) as host:
        address = host.open(tmp_path / "ws", session_id="s1")
        events: queue.Queue[Any] = queue.Queue()
        host.subscribe("s1", events)
        assert address.ask(UserPrompt("first")) == 1
        store = host.store

        def refuse(*_: Any, **__: Any) -> int:
            raise StoreUnavailable("disk full")

        store.append_event = refuse  # type: ignore[method-assign]
        with pytest.raises(Exception, match="the session store failed: disk full"):
            address.ask(UserPrompt("second"))
        del store.append_event
        assert address.ask(UserPrompt("third")) == 2  # the refused one took no number
        assert {turn: type(end) for turn, end in ends(events, 2).items()} == {
            1: ev.TurnCompleted,
            2: ev.TurnCompleted,
        }


def test_resuming_a_session_whose_prompts_waited_for_a_turn_slot_runs_them(tmp_path: Path) -> None:
    store_path = tmp_path / "s.db"
    with open_store(store_path) as store:  # turn 1 ended; turn 2 waited for a free turn slot when killed
        store.create_session("s", workspace=str(tmp_path / "ws"), model="m")
        store.start_turn("s", 1, UserMessage.of_text("one"))
        store.finish_turn("s", 1, ev.TurnCompleted("s", 1, "echo: one", 1))
        store.append_event("s", 2, ev.PromptQueued("s", 2, "two"))
    with FakeProvider(Script.echo()) as provider, AgentHost(settings(provider, store_path)) as host:
        events: queue.Queue[Any] = queue.Queue()
        host.resume("s", subscribers=[events])  # no prompt is sent: the waiting one runs
        assert ends(events, 1)[2].text == "echo: two"
