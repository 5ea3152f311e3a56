"""``turnkeep chaos --subagents``: turns that fan out to child sessions, under actor crashes, converge with
every family whole; and the family checks can fail."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shell import events as ev
from shell._chaos import run
from shell._chaos._families import family_violations
from shell.store import ParentLink, SessionStore


@pytest.mark.timeout(600)
def test_a_short_run_that_fans_out_under_actor_crashes_exits_0_with_no_violation() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(seed=2, sessions=4, turns=2, actor_crash_rate=0.05, as_json=True, subagents=True)
    report: dict[str, Any] = msgspec.json.decode(out.getvalue())
    assert report["violations"] == []
    assert code == 0
    assert report["replay"].endswith("--subagents")
    assert report["children"] > 0


# -- the checks can fail ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore.open(tmp_path / "store.db") as opened:
        opened.create_session("p", workspace=str(tmp_path), model="m")
        yield opened


def _child(store: SessionStore, tmp_path: Path, call: str, *, turn: bool = True, close: bool = True) -> str:
    child = f"p.{call}"
    store.create_session(
        child, workspace=str(tmp_path), model="m", parent=ParentLink("p", 1, call, "general")
    )
    if turn:
        store.begin_turn(child, 1)
        store.append_event(child, 1, ev.TurnStarted(child, 1, "task"))
        store.append_event(child, 1, ev.TurnCompleted(child, 1, "done", 1))
        store.end_turn(child)
    if close:
        store.close_session(child)
    return child


def _parent_turn(store: SessionStore, *calls: str, finished: tuple[str, ...] | None = None) -> None:
    store.begin_turn("p", 1)
    store.append_event("p", 1, ev.TurnStarted("p", 1, "fan out"))
    for call in calls:
        store.append_event("p", 1, ev.SubagentStarted("p", 1, call, f"p.{call}", "general", "part"))
    for call in calls if finished is None else finished:
        store.append_event("p", 1, ev.SubagentFinished("p", 1, call, f"p.{call}", "general", "completed"))
    store.append_event("p", 1, ev.TurnCompleted("p", 1, "all done", 2))
    store.end_turn("p")


def test_a_whole_family_has_no_violation(store: SessionStore, tmp_path: Path) -> None:
    _child(store, tmp_path, "c1")
    _child(store, tmp_path, "c2", turn=False)  # its call was cancelled before it took its prompt
    _parent_turn(store, "c1", "c2")
    assert family_violations(store, ["p"], outlive=10) == []


def test_a_child_left_open_or_without_its_end_is_a_violation(store: SessionStore, tmp_path: Path) -> None:
    _child(store, tmp_path, "c1", close=False)
    child = _child(store, tmp_path, "c2", turn=False, close=False)
    store.begin_turn(child, 1)  # took its prompt, never ended
    _parent_turn(store, "c1", "c2")
    found = family_violations(store, ["p"], outlive=10)
    assert "p.c1 (child of p): it is idle, not closed" in found
    assert "p.c2 (child of p): its turn 1 has 0 ends" in found


def test_a_subagent_started_without_its_one_finished_is_a_violation(
    store: SessionStore, tmp_path: Path
) -> None:
    _child(store, tmp_path, "c1")
    _child(store, tmp_path, "c2")
    _parent_turn(store, "c1", "c2", finished=("c1", "c1"))
    found = family_violations(store, ["p"], outlive=10)
    assert found == [
        "p: turn 1, call c1: 1 subagent_started and 2 subagent_finished, not one each",
        "p: turn 1, call c2: 1 subagent_started and 0 subagent_finished, not one each",
    ]


def test_a_child_that_ended_long_after_its_parents_turn_is_a_violation(
    store: SessionStore, tmp_path: Path
) -> None:
    _child(store, tmp_path, "c1")
    _parent_turn(store, "c1")
    found = family_violations(store, ["p"], outlive=-5)  # as if the child had ended 5 s after its parent
    assert len(found) == 1 and found[0].startswith("p.c1 (child of p): it ended ")
