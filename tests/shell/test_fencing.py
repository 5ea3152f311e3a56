"""Fenced writers: once a second host takes a session, the first one writes nothing more to it and stops
its copy; the turn ends once, in the host that owns the session."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from sampler import ToolMessage
from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell import Host, load_settings
from shell import events as ev
from shell.store import open_store
from shell.turn import INTERRUPTED_CALL
from tests._waiting import wait_until
from tests.shell.cli.test_cli import KEY_VAR, REPO, TIMEOUT, command, environment

SLOW_TOOL = Script.task(
    [ToolStep([("shell", {"command": "sleep 2; echo first >> owners.log"})]), FinalAnswer("the turn is done")]
)


def settings_environ(provider: FakeProvider, store: Path) -> dict[str, str]:
    return {
        "TURNKEEP_STORE__PATH": str(store),
        "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
        "TURNKEEP_PROVIDER__API_KEY_ENV": KEY_VAR,
        KEY_VAR: "sk-cli-test-0000",
        "TURNKEEP_TOOLS__ALLOW": "shell",
    }


def test_a_host_whose_session_another_host_took_writes_nothing_more_and_the_turn_ends_once(
    tmp_path: Path,
) -> None:
    store, workspace = tmp_path / "store.db", tmp_path / "ws"
    with FakeProvider(SLOW_TOOL) as provider:
        env = environment(TURNKEEP_STORE__PATH=str(store), TURNKEEP_TOOLS__ALLOW="shell")
        args = ["--base-url", provider.base_url, "--api-key-env", KEY_VAR, "--workspace", str(workspace)]
        first = subprocess.Popen(
            command("run", *args, "--json", "--allow-all", "go"),
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert first.stdout is not None
            heard: list[dict[str, Any]] = []
            for line in first.stdout:
                heard.append(json.loads(line))
                if heard[-1]["type"] == "tool_call_started":
                    break
            session_id = heard[0]["session"]
            # The first host is alive, its tool still running: the second takes the session over.
            with Host(load_settings(environ=settings_environ(provider, store))) as second:
                second.resume(session_id)
                with open_store(store) as reader:
                    assert wait_until(lambda: reader.get_session(session_id).status == "idle", TIMEOUT)
                heard += [json.loads(line) for line in first.stdout]
                assert first.wait(TIMEOUT) != 0
                stderr = first.stderr.read() if first.stderr is not None else ""
        finally:
            first.kill()
            first.wait(TIMEOUT)

    with open_store(store) as reader:
        record = reader.get_session(session_id)
        events = [e for e in reader.load_events(session_id) if e.turn == 1]
        history = [m.message for m in reader.load_messages(session_id)]
    assert record.owner_epoch == 2
    ends = [e.type for e in events if e.type in ("TurnCompleted", "TurnFailed", "TurnCancelled")]
    assert ends == ["TurnCompleted"]  # once, by the host that owns the session
    # The first host's tool ran to its end, but its result was refused: the owner's stands.
    assert (workspace / "owners.log").read_text() == "first\n"
    results = [m.result for m in history if isinstance(m, ToolMessage)]
    assert [(r.content, r.is_error) for r in results] == [(INTERRUPTED_CALL, True)]
    # The first host was told why it stopped, and said so.
    failed = [e for e in heard if e["type"] == "turn_failed"]
    assert [(e["turn"], e["kind"]) for e in failed] == [(1, "fenced")], heard
    assert "another host took this session over" in failed[0]["message"].lower()
    assert "took it over" in stderr and "writes nothing more" in stderr


def test_a_host_resumed_after_being_fenced_takes_the_session_back(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with FakeProvider(Script.echo()) as provider:
        environ = settings_environ(provider, store)
        with Host(load_settings(environ=environ)) as first, Host(load_settings(environ=environ)) as second:
            session = first.open(tmp_path / "ws")
            assert isinstance(session.run("one"), ev.TurnCompleted)
            second.resume(session.id).run("two")
            assert isinstance(first.resume(session.id).run("three"), ev.TurnCompleted)
            with open_store(store) as reader:
                assert reader.get_session(session.id).owner_epoch == 3
                completed = [e.turn for e in reader.load_events(session.id) if e.type == "TurnCompleted"]
            assert completed == [1, 2, 3]
