"""``turnkeep run --json`` with a turn that hands parts to subagents: the subagent events are printed,
and each child's own events too, nested in a ``subagent_event`` that names the child."""

from __future__ import annotations

import json

from tests.shell.cli.conftest import Options
from tests.shell.cli.test_cli import serving, turnkeep
from tests.shell.subagents._family import Requests


def test_run_json_prints_the_subagent_events_and_the_childrens_own_nested(options: Options) -> None:
    with serving(Requests().script) as provider:
        result = turnkeep("run", *options(provider), "--json", "fan general:a general:b")
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [event["type"] for event in printed]
    assert kinds.count("subagent_started") == kinds.count("subagent_finished") == 2
    children = {event["child"] for event in printed if event["type"] == "subagent_started"}
    nested = {
        (event["child"], event["event"]["type"]) for event in printed if event["type"] == "subagent_event"
    }
    assert {(child, "turn_completed") for child in children} <= nested
    assert all(
        event["event"]["session"] == event["child"] for event in printed if event["type"] == "subagent_event"
    )
    assert printed[-1]["type"] == "turn_completed"
    assert printed[-1]["text"] == "results: a done | b done"
    assert [item["child"] for item in printed[-1]["usage"]["children"]] != []
