"""The child session of an ``agent`` call: its id is derived from the call's place (parent session, turn,
call id), the same every time for the same place and different for any other, shows its parent to people
reading lists of sessions, and is a valid session id (a grandchild's too)."""

from __future__ import annotations

import pytest

from shell.serve._api import SESSION_ID
from shell.session import SessionPath, check_session_id
from shell.subagents import child_session_id
from shell.subagents._ids import MAX_CHILD_ID


def test_the_same_call_gives_the_same_child() -> None:
    assert child_session_id("p", 3, "call_1") == child_session_id("p", 3, "call_1")


@pytest.mark.parametrize(
    "other",
    [("q", 3, "call_1"), ("p", 4, "call_1"), ("p", 3, "call_2"), ("p", 31, "call_1"), ("p3", 1, "call_1")],
    ids=["parent", "turn", "call", "turn-digits", "parent-and-turn"],
)
def test_a_call_in_another_place_gives_another_child(other: tuple[str, int, str]) -> None:
    assert child_session_id(*other) != child_session_id("p", 3, "call_1")


def test_calls_whose_parts_run_together_do_not_collide() -> None:
    ids = {
        child_session_id("p", 1, "12"),
        child_session_id("p", 11, "2"),
        child_session_id("p1", 1, "2"),
    }
    assert len(ids) == 3


def test_the_child_id_starts_with_its_parent_id_and_shows_the_turn() -> None:
    child = child_session_id("my-session", 7, "call_x")
    assert child.startswith("my-session.agent-7-")
    digest = child.removeprefix("my-session.agent-7-")
    assert len(digest) == 12 and all(c in "0123456789abcdef" for c in digest)


def test_child_and_grandchild_ids_are_valid_session_ids() -> None:
    child = child_session_id("root", 1, "call_1")
    grandchild = child_session_id(child, 2, "call with spaces/and slash")
    for session_id in (child, grandchild):
        assert check_session_id(session_id) == session_id
        assert SessionPath(session_id, "host").subtree == f"host/session/{session_id}"
    assert grandchild.startswith(child + ".agent-2-")


def test_a_child_id_stays_within_what_the_http_service_takes_however_long_its_parents_are() -> None:
    parent = "p" * 60
    child = child_session_id(parent, 12, "call_x")
    grandchild = child_session_id(child, 3, "call_y")
    assert len(child) == len(grandchild) == MAX_CHILD_ID
    assert child != child_session_id(parent, 12, "call_z")
    assert SESSION_ID.fullmatch(child) and SESSION_ID.fullmatch(grandchild)
