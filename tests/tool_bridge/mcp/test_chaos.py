"""MCP server actors crashed on purpose, a missing SDK, and the chaos workload with and without MCP."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actors import ChaosPolicy
from shell._chaos._report import replay_command
from shell._chaos._workload import _plan
from tests._waiting import wait_until
from tests.tool_bridge.conftest import call
from tests.tool_bridge.mcp.conftest import MakeMcpRig, alive, fixture_settings, read_pid
from tool_bridge import ToolCallBegan, ToolsFinished
from tool_bridge.mcp import INSTALL_HINT, McpNotInstalled, McpServers, ReconnectMcp, ServerStatus


def test_a_crashed_server_actor_takes_its_process_down_ends_its_calls_once_and_comes_back(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile = tmp_path / "server.pid"
    crash = ChaosPolicy(crash_probability=1.0, crash_on=(ReconnectMcp,))
    mcp = make_mcp_rig(fixture_settings(pidfile, max_restarts=10), chaos=crash)
    first = read_pid(pidfile)
    mcp.rig.run(call("c1", "fx__slow", seconds=30))
    mcp.rig.expect(ToolCallBegan)
    mcp.actor().tell(ReconnectMcp())
    outcome = mcp.rig.finished(timeout=20).outcomes[0]
    assert outcome.is_error and outcome.content.startswith("the MCP server fx ")
    assert "during the call; it is being restarted" in outcome.content
    assert not alive(first)
    # The message is handed to each new incarnation until the runtime gives up on it; each crash is a restart.
    assert wait_until(lambda: mcp.handle.state().restarts >= 4, 30.0), mcp.handle.state()
    mcp.wait_status(ServerStatus.READY)
    mcp.rig.run(call("c2", "fx__echo", text="after the crashes"), batch="b2")
    assert mcp.rig.finished("b2", timeout=20).outcomes[0].content == "after the crashes"
    assert [f.batch_id for f in mcp.rig.all_heard(ToolsFinished)] == ["b1", "b2"]


def test_a_configured_server_without_the_sdk_stops_the_host_at_start_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp.client.session", None)
    with pytest.raises(McpNotInstalled) as caught:
        McpServers({"fx": fixture_settings()})
    assert INSTALL_HINT in str(caught.value)
    assert not McpServers({"fx": fixture_settings(enabled=False)}), "a disabled server needs nothing"


def test_the_chaos_workload_without_mcp_is_the_one_it_always_was_and_with_it_half_calls_mcp() -> None:
    plain = _plan(7, 6, 4, 0.1)
    assert plain == _plan(7, 6, 4, 0.1, mcp=False)
    with_mcp = _plan(7, 6, 4, 0.1, mcp=True)
    scripts = [turn.script for plan in with_mcp for turn in plan.turns]
    assert 0 < scripts.count("mcp") < len(scripts)
    for old, new in zip(plain, with_mcp, strict=True):
        for before, after in zip(old.turns, new.turns, strict=True):
            assert after.script in (before.script, "mcp") and after.cancel == before.cancel
    command = replay_command(
        seed=7, sessions=6, turns=4, actor_crash_rate=0.0, profile="light", mcp_crash_rate=0.05
    )
    assert command.endswith("--mcp-crash-rate 0.05")
