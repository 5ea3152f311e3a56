"""How an MCP server's failures end its calls: restart intensity, unavailable and reconnect, a garbled or
silent server, a call past its timeout, an aborted call whose server hangs, and shutdown."""

from __future__ import annotations

import time
from pathlib import Path

from actors import ActorSystem
from tests._waiting import wait_until
from tests.tool_bridge.conftest import call
from tests.tool_bridge.mcp.conftest import MakeMcpRig, alive, fixture_settings, kill_group, read_pid
from tool_bridge import ToolBridgeSettings, ToolStatus
from tool_bridge.mcp import McpServerSettings, ReconnectMcp, ServerStatus


def test_more_kills_than_the_intensity_allows_make_it_unavailable_until_reconnected(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile = tmp_path / "server.pid"
    mcp = make_mcp_rig(fixture_settings(pidfile, max_restarts=3, restart_window=30.0))
    pid = read_pid(pidfile)
    for kill in range(4):
        kill_group(pid)
        if kill < 3:
            pid = read_pid(pidfile, other_than=pid)
            mcp.wait_status(ServerStatus.READY)
    mcp.wait_status(ServerStatus.UNAVAILABLE)
    assert "unavailable after 3 restarts" in mcp.handle.state().announcement
    began = time.monotonic()
    mcp.rig.run(call("c1", "fx__echo", text="hi"))
    outcome = mcp.rig.finished().outcomes[0]
    assert outcome.duration < 0.1, "the call itself answers at once"
    assert time.monotonic() - began < 1.0, "and the batch around it (a tool actor started and stopped)"
    assert outcome.is_error
    assert outcome.content.startswith("the MCP server fx is unavailable after 3 restarts; last error: ")
    assert "killed by signal 9" in outcome.content
    mcp.actor().tell(ReconnectMcp())
    mcp.wait_status(ServerStatus.READY)
    mcp.rig.run(call("c2", "fx__echo", text="back"), batch="b2")
    assert mcp.rig.finished("b2").outcomes[0].content == "back"


def test_a_server_writing_garbage_on_stdout_fails_clearly_with_its_stderr_and_is_retried(
    make_mcp_rig: MakeMcpRig,
) -> None:
    mcp = make_mcp_rig(fixture_settings(None, "--garbage", max_restarts=0, retry_every=0.5), ready=False)
    mcp.wait_status(ServerStatus.UNAVAILABLE)
    error = mcp.handle.state().last_error
    assert "not a JSON-RPC message on stdout: b'this is not JSON-RPC'" in error
    assert "[stderr]\nfixture: about to misbehave" in error
    # Unavailable, it is tried again on its back-off, and stays unavailable while it keeps failing.
    assert wait_until(lambda: mcp.handle.machine.generation >= 3, 10.0)
    assert mcp.status() is ServerStatus.UNAVAILABLE


def test_a_server_that_never_answers_the_handshake_fails_at_the_startup_timeout(
    make_mcp_rig: MakeMcpRig,
) -> None:
    settings = fixture_settings(None, "--silent", max_restarts=0, startup_timeout=2.0)
    began = time.monotonic()
    mcp = make_mcp_rig(settings, ready=False)
    mcp.wait_status(ServerStatus.UNAVAILABLE)
    assert time.monotonic() - began < 8.0
    error = mcp.handle.state().last_error
    assert "did not complete its handshake within 2 s" in error
    assert "reading but never answering" in error


def test_a_call_past_its_timeout_is_cancelled_and_the_server_serves_on(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    mcp = make_mcp_rig(fixture_settings(None, tool_timeout=1.0))
    markfile = tmp_path / "cancelled"
    mcp.rig.run(call("c1", "fx__slow", seconds=30, markfile=str(markfile)))
    outcome = mcp.rig.finished(timeout=10).outcomes[0]
    assert outcome.status is ToolStatus.TIMED_OUT and "timed out after 1 s" in outcome.content
    assert wait_until(markfile.exists, 5.0), "the server heard notifications/cancelled"
    mcp.rig.run(call("c2", "fx__echo", text="still here"), batch="b2")
    assert mcp.rig.finished("b2").outcomes[0].content == "still here"
    assert mcp.handle.state().restarts == 0


def test_a_hanging_call_is_aborted_at_the_grace_and_its_server_group_killed_at_kill_after(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile, childfile = tmp_path / "server.pid", tmp_path / "child.pid"
    bridge = ToolBridgeSettings(abort_grace=2.5, kill_after=10.0)
    mcp = make_mcp_rig(fixture_settings(pidfile, kill_after=10.0, ping_timeout=1.0), bridge=bridge)
    server = read_pid(pidfile)
    mcp.rig.run(call("c1", "fx__hang", pidfile=str(childfile)))
    grandchild = read_pid(childfile)
    aborted_at = mcp.rig.abort()
    outcome = mcp.rig.finished(timeout=5).outcomes[0]
    assert outcome.status is ToolStatus.ABORTED
    assert time.monotonic() - aborted_at <= 2.6
    assert alive(server) and alive(grandchild)
    assert wait_until(lambda: not alive(grandchild) and not alive(server), 15.0)
    killed_after = time.monotonic() - aborted_at
    assert 9.5 <= killed_after <= 14.5, killed_after
    assert wait_until(lambda: mcp.handle.state().restarts == 1, 10.0)
    mcp.wait_status(ServerStatus.READY)
    assert "did not answer a ping within 1 s" in mcp.handle.state().last_error


def test_shutdown_leaves_no_server_process_behind(
    system: ActorSystem, make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile, childfile = tmp_path / "server.pid", tmp_path / "child.pid"
    mcp = make_mcp_rig(fixture_settings(pidfile))
    server = read_pid(pidfile)
    mcp.rig.run(call("c1", "fx__spawn_child", pidfile=str(childfile)))
    assert mcp.rig.finished().outcomes[0].content.startswith("spawned ")
    grandchild = read_pid(childfile)
    system.stop("mcp", timeout=15.0)
    assert not alive(server) and not alive(grandchild)
    assert mcp.handle.state().status is ServerStatus.STOPPED


def test_a_server_whose_command_does_not_exist_is_unavailable_with_that_reason(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    missing = McpServerSettings(command=str(tmp_path / "no-such-server"), max_restarts=1)
    mcp = make_mcp_rig(missing, ready=False)
    mcp.wait_status(ServerStatus.UNAVAILABLE)
    mcp.rig.run(call("c1", "fx__echo", text="hi"))
    outcome = mcp.rig.finished().outcomes[0]
    assert outcome.is_error and outcome.status is ToolStatus.ERROR
    assert "has not listed its tools yet" in outcome.content
    assert f"could not be started: no such command '{tmp_path / 'no-such-server'}'" in outcome.content
