"""Subagents, whole turns against the embedded provider: a parent fans out to children and gets exactly one
result per child — the answer, or an error naming the failure, the cancel or the deadline — within the
limits of [agents]; a cancelled parent leaves no child running."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors import ChaosPolicy
from sampler.actor import Sample
from shell import events as ev
from shell.messages import Cancel, UserPrompt
from shell.session import SessionChaos
from tests._waiting import wait_until

from ._family import Requests, family_host, of_type, results, run_turn, until_end


def test_a_parent_fans_out_to_four_children_and_reads_each_answer_as_its_tool_result(tmp_path: Path) -> None:
    requests = Requests()
    with family_host(tmp_path, requests) as (host, _):
        end, seen = run_turn(host, tmp_path, "fan quick:a quick:b general:c quick:d")
        children = host.store.children("p")
        assert wait_until(lambda: all(host.store.get_session(c.id).status == "closed" for c in children), 10)
        assert host.subagents.running == 0
    assert isinstance(end, ev.TurnCompleted)
    assert results(end) == ["a done", "b done", "c done", "d done"]
    started, finished = of_type(seen, ev.SubagentStarted), of_type(seen, ev.SubagentFinished)
    assert sorted(e.description for e in started) == ["a", "b", "c", "d"]
    assert sorted((e.child, e.outcome) for e in finished) == sorted((e.child, "completed") for e in started)
    # Each child is a stored session of its own, linked to the call that ran it, and ran once.
    assert sorted((c.parent.turn, c.parent.call, c.parent.profile) for c in children if c.parent) == sorted(
        (1, e.call_id, e.profile) for e in started
    )
    assert [requests.count(task) for task in "abcd"] == [1, 1, 1, 1]
    # The children's own events are relayed on the parent's stream, each in a subagent_event.
    relayed = {(e.child, e.event["type"]) for e in of_type(seen, ev.SubagentEvent)}
    assert {(e.child, kind) for e in started for kind in ("turn_started", "turn_completed")} <= relayed
    # Their usage is itemised in the parent turn's, apart from its own steps.
    assert sorted(item.child for item in end.usage.children) == sorted(e.child for e in started)
    assert all(item.tokens.reported == 1 for item in end.usage.children)
    assert end.usage.steps.reported == 2


def test_a_child_whose_sampler_crashes_until_its_subtree_gives_up_is_one_error_and_the_parent_completes(
    tmp_path: Path,
) -> None:
    crashing = SessionChaos(sampler=ChaosPolicy(crash_probability=1.0, crash_on=(Sample,)))
    with family_host(tmp_path, Requests(), chaos=SessionChaos(children={"flaky": crashing})) as (host, _):
        end, seen = run_turn(host, tmp_path, "fan quick:a quick:b flaky:c quick:d")
    assert isinstance(end, ev.TurnCompleted)
    answers = results(end)
    assert [answers[i] for i in (0, 1, 3)] == ["a done", "b done", "d done"]
    assert answers[2].startswith("Error: subagent flaky failed: internal:")
    outcomes = {e.profile: e.outcome for e in of_type(seen, ev.SubagentFinished)}
    assert outcomes == {"quick": "completed", "flaky": "failed"}
    assert len(of_type(seen, ev.SubagentFinished)) == 4


def test_a_child_that_runs_past_its_deadline_is_cancelled_and_its_partial_answer_returned(
    tmp_path: Path,
) -> None:
    with family_host(tmp_path, Requests()) as (host, _):
        started = time.monotonic()
        end, seen = run_turn(host, tmp_path, "fan sleepy:sleep60 quick:a")
        took = time.monotonic() - started
        (child,) = [c for c in host.store.children("p") if c.parent and c.parent.profile == "sleepy"]
        child_end = _stored_end(host.store, child.id)
    assert isinstance(end, ev.TurnCompleted)
    late, quick = results(end)
    assert late.startswith("Error: subagent sleepy ran past its deadline of 1.5 s and was cancelled")
    assert "its partial answer:\nworking" in late
    assert quick == "a done"
    assert isinstance(child_end, ev.TurnCancelled)
    (finished,) = [e for e in of_type(seen, ev.SubagentFinished) if e.profile == "sleepy"]
    assert finished.outcome == "deadline"
    assert took < 1.5 + 2.5 + 5.0  # the deadline, the child's abort grace, and slack for a busy machine
    assert not _running_commands("started-sleep60")


@pytest.mark.parametrize("how", ["cancel", "close"])
def test_cancelling_or_closing_the_parent_mid_fan_out_ends_every_child_and_leaves_nothing_running(
    tmp_path: Path, how: str
) -> None:
    requests = Requests()
    with family_host(tmp_path, requests) as (host, _):
        events: queue.Queue[Any] = queue.Queue()
        address = host.open(tmp_path / "w", session_id="p")
        host.subscribe("p", events)
        address.ask(UserPrompt("fan quick:sleep31 quick:sleep32 quick:sleep33 quick:sleep34"))
        assert wait_until(lambda: _children_in_their_tool(host) == 4, 30)
        cancelled_at = time.time()  # the clock the store stamps its rows with
        if how == "cancel":
            assert address.ask(Cancel())
        else:
            host.close("p")
        end, seen = until_end(events)
        children = host.store.children("p")
        assert wait_until(lambda: all(_stored_end(host.store, c.id) is not None for c in children), 10)
        ended_within = max(_ended_at(host.store, c.id) for c in children) - cancelled_at
        assert all(isinstance(_stored_end(host.store, c.id), ev.TurnCancelled) for c in children)
        assert wait_until(lambda: all(host.store.get_session(c.id).status == "closed" for c in children), 15)
        assert wait_until(lambda: not _running_commands("started-sleep3"), 15)
        assert not set(host.active()) & {c.id for c in children}
        assert host.subagents.running == 0
    assert isinstance(end, ev.TurnCancelled)
    assert end.reason == ("user_cancelled" if how == "cancel" else "aborted")
    assert len(children) == 4
    assert ended_within < 2.5 + 1.5  # the abort grace, and slack for a busy machine
    # Every child the parent heard begin, it heard end: as cancelled.
    assert sorted(e.call_id for e in of_type(seen, ev.SubagentStarted)) == sorted(
        e.call_id for e in of_type(seen, ev.SubagentFinished)
    )
    assert {e.outcome for e in of_type(seen, ev.SubagentFinished)} == {"cancelled"}


@pytest.mark.parametrize(
    ("limits", "refused"),
    [
        ({"TURNKEEP_AGENTS__MAX_CHILDREN_AT_ONCE": "2"}, "children of this turn are running"),
        ({"TURNKEEP_AGENTS__MAX_CHILDREN_PER_TURN": "2"}, "this turn has started 2 children"),
        ({"TURNKEEP_AGENTS__MAX_CHILDREN_PER_HOST": "2"}, "children are running in this host"),
    ],
)
def test_a_child_past_a_limit_is_refused_with_an_error_naming_the_limit(
    tmp_path: Path, limits: dict[str, str], refused: str
) -> None:
    with family_host(tmp_path, Requests(), **limits) as (host, _):
        end, seen = run_turn(host, tmp_path, "fan quick:sleep1 quick:sleep1.0 quick:sleep1.00")
        children = host.store.children("p")
    assert isinstance(end, ev.TurnCompleted)
    answers = results(end)
    assert sum(a.endswith(" woke") for a in answers) == 2
    (refusal,) = [a for a in answers if not a.endswith(" woke")]
    assert refusal.startswith("Error: subagent refused:") and refused in refusal
    assert len(children) == 2 and len(of_type(seen, ev.SubagentStarted)) == 2


def test_an_unknown_profile_is_refused_and_a_child_at_the_deepest_level_has_no_agent_tool(
    tmp_path: Path,
) -> None:
    with family_host(tmp_path, Requests()) as (host, _):
        end, _seen = run_turn(host, tmp_path, "fan nobody:a quick:fan+quick:x")
        (child,) = host.store.children("p")
        grandchildren = host.store.children(child.id)
    assert isinstance(end, ev.TurnCompleted)
    nobody, answer = results(end)
    assert nobody.startswith(
        "Error: subagent refused: there is no agent profile 'nobody'; the profiles are general, quick,"
    )
    # agents.max_depth is 1: the child (depth 1) was not offered the tool, and calling it anyway is refused.
    assert answer.startswith("results: Error: unknown tool `agent`; available tools:")
    assert grandchildren == []


def test_with_a_deeper_limit_a_child_runs_children_of_its_own(tmp_path: Path) -> None:
    with family_host(tmp_path, Requests(), TURNKEEP_AGENTS__MAX_DEPTH="2") as (host, _):
        end, _seen = run_turn(host, tmp_path, "fan quick:fan+quick:x+quick:y")
        (child,) = host.store.children("p")
        grandchildren = host.store.children(child.id)
    assert isinstance(end, ev.TurnCompleted)
    assert end.text == "results: results: x done | y done"
    assert sorted(g.parent.profile for g in grandchildren if g.parent) == ["quick", "quick"]


def _stored_end(store: Any, session_id: str) -> Any:
    """The stored end of the session's first turn, or None."""
    for stored in reversed(store.load_turn_events(session_id, 1)):
        if stored.type in _ENDS:
            return msgspec.json.decode(stored.body, type=ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled)
    return None


def _ended_at(store: Any, session_id: str) -> float:
    """When the end of the session's first turn was stored (seconds since the epoch)."""
    ends = [e for e in store.load_turn_events(session_id, 1) if e.type in _ENDS]
    return float(ends[-1].created_at)


_ENDS = ("TurnCompleted", "TurnFailed", "TurnCancelled")


def _children_in_their_tool(host: Any) -> int:
    """How many children of ``p`` have started their tool call."""
    return sum(
        any(stored.type == "ToolCallStarted" for stored in host.store.load_turn_events(child.id, 1))
        for child in host.store.children("p")
    )


def _running_commands(marker: str) -> list[int]:
    """The processes of this machine whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
