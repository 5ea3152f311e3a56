"""``turnkeep sessions list`` and ``show`` of child sessions (run by a parent's ``agent`` tool call), run as
real processes on a store holding a parent, its children, a grandchild and a fork of a child."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sampler.messages import UserMessage
from shell.store import ParentLink, open_store
from tests.shell.cli.test_cli import json_lines, turnkeep


@pytest.fixture
def family(store: Path) -> Path:
    """``lead`` (a user's session) runs ``kid-a`` in turn 1 and ``kid-b`` in turn 2; ``kid-a`` runs
    ``grandkid``; ``kid-a`` is forked to ``kid-a-fork``; ``loner`` is a user's session of its own."""
    with open_store(store) as sessions:
        for name in ("lead", "loner"):
            sessions.create_session(name, workspace="/w", model="m")
        sessions.create_session(
            "kid-a", workspace="/w", model="m", parent=ParentLink("lead", 1, "call_a", "explorer")
        )
        sessions.create_session(
            "kid-b", workspace="/w", model="m", parent=ParentLink("lead", 2, "call_b", "writer")
        )
        sessions.create_session(
            "grandkid", workspace="/w", model="m", parent=ParentLink("kid-a", 1, "call_g", "explorer")
        )
        sessions.start_turn("kid-a", 1, UserMessage.of_text("look around"))
        sessions.end_turn("kid-a")
        sessions.close_session("kid-b")
        sessions.fork_session("kid-a", "kid-a-fork")
    return store


def test_sessions_list_marks_each_child_with_its_parent_turn_and_profile(family) -> None:
    result = turnkeep("sessions", "list", "--store", str(family))

    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split()[-4:] == ["FORKED", "FROM", "CHILD", "OF"]
    by_id = {row.split()[0]: row for row in rows}
    assert set(by_id) == {"lead", "loner", "kid-a", "kid-b", "grandkid", "kid-a-fork"}
    assert by_id["kid-a"].rstrip().endswith("lead (turn 1, agent explorer)")
    assert by_id["kid-b"].rstrip().endswith("lead (turn 2, agent writer)")
    assert by_id["grandkid"].rstrip().endswith("kid-a (turn 1, agent explorer)")
    for user in ("lead", "loner"):
        assert by_id[user].split()[-2:] == ["-", "-"]
    assert by_id["kid-a-fork"].split()[-5:] == ["kid-a", "at", "turn", "1", "-"]
    # The column starts at the same place in every row.
    start = header.index("CHILD OF")
    assert by_id["kid-b"][start:] == "lead (turn 2, agent writer)"
    assert by_id["lead"][start:] == "-"


def test_sessions_list_json_gives_each_session_its_parent_or_null(family) -> None:
    result = turnkeep("sessions", "list", "--store", str(family), "--json")

    assert result.returncode == 0, result.stderr
    parents = {entry["id"]: entry["parent"] for entry in json_lines(result.stdout)}
    assert parents == {
        "lead": None,
        "loner": None,
        "kid-a": {"session": "lead", "turn": 1, "call": "call_a", "profile": "explorer"},
        "kid-b": {"session": "lead", "turn": 2, "call": "call_b", "profile": "writer"},
        "grandkid": {"session": "kid-a", "turn": 1, "call": "call_g", "profile": "explorer"},
        "kid-a-fork": None,
    }


def test_sessions_show_of_a_parent_lists_its_children_and_not_theirs(family) -> None:
    result = turnkeep("sessions", "show", "lead", "--store", str(family))

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "child of:       -" in lines
    section = lines[lines.index("children (2):") + 1 :][:3]
    assert section[0].split() == ["kid-a", "idle", "turn", "1", "agent", "explorer", "(call", "call_a)"]
    assert section[1].split() == ["kid-b", "closed", "turn", "2", "agent", "writer", "(call", "call_b)"]
    assert section[2] == ""
    assert "grandkid" not in result.stdout


def test_sessions_show_of_a_child_names_its_parent_and_its_own_children(family) -> None:
    text = turnkeep("sessions", "show", "kid-a", "--store", str(family)).stdout
    assert "child of:       lead (turn 1, call call_a, agent explorer)" in text
    assert "children (1):\ngrandkid  idle     turn 1 agent explorer (call call_g)\n" in text

    shown = json.loads(turnkeep("sessions", "show", "kid-a", "--store", str(family), "--json").stdout)
    assert shown["session"]["parent"] == {
        "session": "lead",
        "turn": 1,
        "call": "call_a",
        "profile": "explorer",
    }
    assert [(c["id"], c["status"], c["parent"]["turn"]) for c in shown["children"]] == [
        ("grandkid", "idle", 1)
    ]


def test_sessions_show_of_a_session_without_children_has_no_children_section(family) -> None:
    for name in ("loner", "kid-a-fork"):
        text = turnkeep("sessions", "show", name, "--store", str(family)).stdout
        assert "child of:       -" in text
        assert "children" not in text
        shown = json.loads(turnkeep("sessions", "show", name, "--store", str(family), "--json").stdout)
        assert (shown["session"]["parent"], shown["children"]) == (None, [])
