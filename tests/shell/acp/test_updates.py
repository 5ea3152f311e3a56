"""Session events as updates: a call announced before anything else is said of it, texts clipped to the
line budget, and a stored history replayed in order with each call's final status."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from shell import events as ev
from shell.acp._schema import SessionNotification
from shell.acp._updates import UpdateBuilder, clip
from shell.usage import TokenUsage, TurnUsage
from tests.shell.acp._agent_process import validator
from tool_bridge import PermissionRequested


def as_json(update: Any) -> dict[str, Any]:
    """The update as the notification line it is written in, checked against the schema."""
    line = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": SessionNotification(session_id="s", update=update),
    }
    message: dict[str, Any] = json.loads(msgspec.json.encode(line))
    assert not list(validator().iter_errors(message))
    update_json: dict[str, Any] = message["params"]["update"]
    return update_json


def test_a_permission_request_announces_its_call_first_and_the_start_then_updates_it() -> None:
    builder = UpdateBuilder(1000)
    before, params = builder.permission("s", PermissionRequested("c1", "shell", '{"command": "ls"}', "ask"))
    assert [as_json(u)["sessionUpdate"] for u in before] == ["tool_call"]
    assert as_json(before[0])["kind"] == "execute"
    assert [o.option_id for o in params.options] == ["allow_once", "allow_always", "reject"]
    started = builder.live(ev.ToolCallStarted("s", 1, "c1", "shell", '{"command": "ls"}'), now=0)
    assert as_json(started[0])["sessionUpdate"] == "tool_call_update"
    finished = builder.live(ev.ToolCallFinished("s", 1, "c1", "shell", True, "denied", "no"), now=0)
    assert as_json(finished[-1])["status"] == "failed"


def test_text_is_clipped_to_the_budget() -> None:
    builder = UpdateBuilder(1000, max_text=100)
    (update,) = builder.live(ev.TextDelta("s", 1, "x" * 1000), now=0)
    assert len(as_json(update)["content"]["text"]) <= 100
    assert clip("short", 100) == "short"


def test_usage_is_measured_against_the_window_with_the_cost() -> None:
    usage = TurnUsage(steps=TokenUsage(input_tokens=300, output_tokens=100, reported=2), cost=0.5)
    (update,) = UpdateBuilder(1000).live(ev.TurnCompleted("s", 1, "", 2, usage), now=0)
    assert as_json(update) == {
        "sessionUpdate": "usage_update",
        "used": 200,
        "size": 1000,
        "cost": {"amount": 0.5, "currency": "USD"},
    }


def test_a_replay_shows_prompts_texts_and_calls_in_order_and_an_unfinished_turn_as_interrupted() -> None:
    stored = [
        ev.TurnStarted("s", 1, "first"),
        ev.ToolCallStarted("s", 1, "c1", "read_file", '{"path": "a"}'),
        ev.ToolCallFinished("s", 1, "c1", "read_file", False, "ok", "text"),
        ev.TurnCompleted("s", 1, "answer", 2),
        ev.TurnStarted("s", 2, "second"),
        ev.ToolCallStarted("s", 2, "c2", "shell", '{"command": "sleep 9"}'),
    ]
    shown = [as_json(u) for u in UpdateBuilder(1000).replay(stored)]
    assert [u["sessionUpdate"] for u in shown] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert shown[2]["status"] == "completed"
    assert shown[7]["status"] == "failed"
    assert shown[8]["content"]["text"].strip() == "[interrupted]"


def test_the_running_turn_is_not_replayed_as_interrupted() -> None:
    stored = [ev.TurnStarted("s", 1, "first")]
    kinds = [as_json(u)["sessionUpdate"] for u in UpdateBuilder(1000).replay(stored, running_turn=1)]
    assert kinds == ["user_message_chunk"]
