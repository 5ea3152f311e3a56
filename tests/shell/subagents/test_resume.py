"""Subagents survive their host: a parent whose host was killed with SIGKILL while its children ran, taken up
by another host, does not run its finished children again (their stored answers are its results) and takes
up its unfinished child where it was."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from sampler.fake import FakeProvider
from shell import AgentHost
from shell import events as ev
from tests._waiting import wait_until

from ._family import Requests, of_type, results, settings, until_end

REPO = Path(__file__).resolve().parents[3]


def test_a_parent_resumed_after_its_host_was_killed_does_not_run_its_finished_children_again(
    tmp_path: Path,
) -> None:
    requests = Requests()
    # The unfinished child's call comes first, so that the finished ones' results are not yet journaled
    # in the parent (results are stored in call order): their calls run again, and find their children.
    prompt = "fan quick:sleep8 quick:a quick:b"
    with FakeProvider(requests.script) as provider:
        config = settings(provider, tmp_path)  # writes the config file the process reads
        host = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.shell.subagents._host_process",
                str(tmp_path / "turnkeep.toml"),
                str(tmp_path / "store.db"),
                provider.base_url,
                str(tmp_path / "w"),
                prompt,
            ],
            cwd=REPO,
            stderr=subprocess.DEVNULL,
        )
        try:
            with AgentHost(config) as reader:  # reads the store only: it opens no session
                assert wait_until(lambda: _progress(reader) == ({"a done", "b done"}, 1), 60)
        finally:
            host.send_signal(signal.SIGKILL)
            host.wait(timeout=30)
        assert (requests.count("a"), requests.count("b"), requests.count("sleep8")) == (1, 1, 1)

        events: queue.Queue[Any] = queue.Queue()
        with AgentHost(config) as again:
            again.resume("p", subscribers=[events])
            end, seen = until_end(events)
            children = again.store.children("p")
            closed = wait_until(
                lambda: {again.store.get_session(c.id).status for c in children} == {"closed"}, 10
            )
    assert isinstance(end, ev.TurnCompleted)
    late, a, b = results(end)
    assert (a, b) == ("a done", "b done")
    assert late == "sleep8 woke"  # its shell call was interrupted (it may have had effects): not run again
    assert (requests.count("a"), requests.count("b")) == (1, 1)
    assert len(children) == 3 and closed
    started = of_type(seen, ev.SubagentStarted)
    assert len(started) == 3 and all(e.reattached for e in started)
    assert sorted(e.outcome for e in of_type(seen, ev.SubagentFinished)) == ["completed"] * 3


def _progress(host: AgentHost) -> tuple[set[str], int]:
    """The answers of the children of ``p`` that completed, and how many others are in their tool call."""
    answers: set[str] = set()
    in_tool = 0
    if not any(record.id == "p" for record in host.store.list_sessions()):
        return answers, in_tool
    for child in host.store.children("p"):
        stored = host.store.load_turn_events(child.id, 1)
        ends = [e for e in stored if e.type in ("TurnCompleted", "TurnFailed", "TurnCancelled")]
        answers.update(
            msgspec.json.decode(e.body, type=ev.TurnCompleted).text for e in ends if e.type == "TurnCompleted"
        )
        if not ends and any(e.type == "ToolCallStarted" for e in stored):
            in_tool += 1
    return answers, in_tool
