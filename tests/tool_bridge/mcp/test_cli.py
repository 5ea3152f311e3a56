"""``turnkeep run --mcp`` and the chat's ``/mcp`` command, as real processes against the embedded provider."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from tests.shell.cli.test_cli import KEY_VAR, json_lines, serving, turnkeep
from tests.tool_bridge.mcp.conftest import FIXTURE


@pytest.fixture
def options(tmp_path: Path) -> Callable[[FakeProvider], list[str]]:
    """The options that point a command at the provider, a store and a workspace in tmp_path."""

    def make(provider: FakeProvider) -> list[str]:
        store, workspace = str(tmp_path / "sessions.db"), str(tmp_path / "ws")
        return [
            "--base-url",
            provider.base_url,
            "--api-key-env",
            KEY_VAR,
            "--store",
            store,
            "--workspace",
            workspace,
        ]

    return make


SERVER = f"fx={shlex.quote(sys.executable)} {shlex.quote(str(FIXTURE))}"
ECHO = Script.task([ToolStep([("fx__echo", {"text": "from the cli"})]), FinalAnswer("Echoed.")])


def test_run_with_a_one_off_mcp_server_calls_its_tool(options) -> None:
    with serving(ECHO) as provider:
        result = turnkeep("run", *options(provider), "--allow", "fx__echo", "--mcp", SERVER, "--json", "go")
    assert result.returncode == 0, result.stderr
    events = json_lines(result.stdout)
    finished = [e for e in events if e.get("type") == "tool_call_finished"]
    assert [(e["tool"], e["is_error"]) for e in finished] == [("fx__echo", False)], events
    assert events[-1]["type"] == "turn_completed"


def test_run_refuses_an_mcp_option_it_cannot_read(options) -> None:
    with serving(ECHO) as provider:
        result = turnkeep("run", *options(provider), "--mcp", "no command", "go")
    assert result.returncode == 2
    assert "--mcp wants NAME=COMMAND" in result.stderr


def test_chat_shows_the_servers_and_reconnects_one(options) -> None:
    with serving(Script.echo()) as provider:
        result = turnkeep(
            "chat",
            *options(provider),
            "--mcp",
            SERVER,
            stdin="/mcp\n/mcp reconnect fx\n/mcp reconnect nope\n",
        )
    assert result.returncode == 0, result.stderr
    assert "fx: ready, 7 tools, 0 restarts" in result.stderr
    assert "reconnecting the MCP server fx" in result.stderr
    assert "there is no MCP server 'nope'" in result.stderr
