"""``turnkeep sessions fork`` and ``rewind``, run as real processes on a store a real run wrote."""

from __future__ import annotations

import json
from pathlib import Path

from tests.shell.cli.conftest import Options
from tests.shell.cli.test_cli import json_lines, serving, turnkeep


def three_turns(options: Options, store: Path) -> str:
    with serving() as provider:
        started = json_lines(turnkeep("run", *options(provider), "--json", "one").stdout)[0]
        session = str(started["session"])
        for text in ("two", "three"):
            result = turnkeep("run", *options(provider), "--session", session, text)
            assert result.returncode == 0, result.stderr
    return session


def test_sessions_fork_prints_the_new_id_and_the_fork_holds_the_first_turns(options, store, tmp_path) -> None:
    source = three_turns(options, store)

    forked = turnkeep("sessions", "fork", source, "--at", "2", "--store", str(store))

    assert forked.returncode == 0, forked.stderr
    new = forked.stdout.strip()
    assert new and new != source
    shown = json.loads(turnkeep("sessions", "show", new, "--store", str(store), "--json").stdout)
    assert shown["session"]["turns"] == 2
    assert shown["session"]["forked_from"] == {"session": source, "turn": 2}
    users = [
        e["message"]["parts"][0]["text"] for e in shown["history"] if e["message"]["type"] == "UserMessage"
    ]
    assert users == ["one", "two"]
    logged = json_lines(turnkeep("sessions", "events", new, "--store", str(store), "--json").stdout)
    assert [(e["seq"], e["turn"], e["type"]) for e in logged] == [
        (1, 1, "turn_started"),
        (2, 1, "turn_completed"),
        (3, 2, "turn_started"),
        (4, 2, "turn_completed"),
    ]
    assert {e["session"] for e in logged} == {new}
    table = turnkeep("sessions", "list", "--store", str(store)).stdout
    assert "FORKED FROM" in table and f"{source} at turn 2" in table
    text = turnkeep("sessions", "show", new, "--store", str(store)).stdout
    assert f"forked from:    {source} at turn 2" in text

    elsewhere = turnkeep(
        "sessions",
        "fork",
        source,
        "--workspace",
        str(tmp_path / "other"),
        "--id",
        "all",
        "--store",
        str(store),
    )
    assert elsewhere.stdout == "all\n"
    listed = {
        s["id"]: s for s in json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)
    }
    assert (listed["all"]["turns"], listed["all"]["workspace"]) == (3, str((tmp_path / "other").resolve()))
    assert listed[source]["forked_from"] is None


def test_sessions_fork_past_the_last_turn_or_of_an_unknown_session_exits_2(options, store) -> None:
    source = three_turns(options, store)

    late = turnkeep("sessions", "fork", source, "--at", "4", "--store", str(store))
    unknown = turnkeep("sessions", "fork", "nope", "--store", str(store))
    negative = turnkeep("sessions", "rewind", source, "--to", "-1", "--store", str(store))

    assert (late.returncode, unknown.returncode, negative.returncode) == (2, 2, 2)
    assert "its last converged turn is 3" in late.stderr
    assert "there is no session 'nope'" in unknown.stderr
    assert "numbered from 0" in negative.stderr
    assert len(json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)) == 1


def test_sessions_rewind_archives_the_source_and_a_run_refuses_it(options, store) -> None:
    source = three_turns(options, store)

    rewound = turnkeep(
        "sessions", "rewind", source, "--to", "1", "--id", "back", "--store", str(store), "--json"
    )

    assert rewound.returncode == 0, rewound.stderr
    assert json.loads(rewound.stdout)["forked_from"] == {"session": source, "turn": 1}
    listed = {
        s["id"]: s["status"]
        for s in json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)
    }
    assert listed == {source: "archived", "back": "idle"}
    again = turnkeep("sessions", "rewind", source, "--to", "1", "--store", str(store))
    assert again.returncode == 2 and "archived already" in again.stderr
    with serving() as provider:
        refused = turnkeep("run", *options(provider), "--session", source, "four")
        continued = turnkeep("run", *options(provider), "--session", "back", "--json", "two again")
    assert refused.returncode == 2 and "is archived" in refused.stderr
    assert json_lines(continued.stdout)[-1]["turn"] == 2
