"""The same server over streamable HTTP on 127.0.0.1, and a tool list that changes while it runs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests._waiting import wait_until
from tests.tool_bridge.conftest import call
from tests.tool_bridge.mcp.conftest import FIXTURE, MakeMcpRig, fixture_settings
from tool_bridge import ToolCallBegan, ToolInvocation, ToolsFinished, ToolStatus
from tool_bridge.mcp import McpServerSettings, ServerStatus


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def http_server() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: _listening(port), 15.0), "the HTTP fixture server did not start"
        yield port, process
    finally:
        process.kill()
        process.wait(5)


def test_a_streamable_http_server_on_localhost_serves_calls(
    make_mcp_rig: MakeMcpRig, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = http_server
    settings = McpServerSettings(url=f"http://127.0.0.1:{port}/mcp", startup_timeout=10.0, tool_timeout=10.0)
    mcp = make_mcp_rig(settings, name="web")
    mcp.rig.run(call("c1", "web__echo", text="over http"), call("c2", "web__fail", message="nope"))
    ok, failed = mcp.rig.finished(timeout=15).outcomes
    assert (ok.status, ok.content) == (ToolStatus.OK, "over http")
    assert failed.is_error and "nope" in failed.content


def test_a_streamable_http_server_that_goes_away_is_restarted_by_ping_and_fails_its_calls_clearly(
    make_mcp_rig: MakeMcpRig, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, process = http_server
    settings = McpServerSettings(
        url=f"http://127.0.0.1:{port}/mcp", startup_timeout=2.0, ping_interval=0.5, ping_timeout=1.0
    )
    mcp = make_mcp_rig(settings, name="web")
    process.kill()
    process.wait(5)
    mcp.wait_status(ServerStatus.UNAVAILABLE, timeout=30)
    mcp.rig.run(call("c1", "web__echo", text="anyone?"))
    outcome = mcp.rig.finished().outcomes[0]
    assert outcome.is_error and outcome.content.startswith(
        "the MCP server web is unavailable after 3 restarts"
    )


def test_a_changed_tool_list_is_listed_again_and_offered(make_mcp_rig: MakeMcpRig) -> None:
    mcp = make_mcp_rig(fixture_settings(None, disabled_tools=["hang"]))
    assert mcp.handle.state().tools == 6
    mcp.rig.run(ToolInvocation("c1", "fx__grow", json.dumps({"name": "extra"})))
    assert mcp.rig.finished().outcomes[0].content == "added extra"
    assert wait_until(lambda: mcp.handle.state().tools == 7, 5.0), mcp.handle.state()
    assert wait_until(lambda: "fx__extra" in mcp.registries[0], 5.0), mcp.registries[0].names()
    mcp.rig.run(call("c2", "fx__extra", text="hi"), call("c3", "fx__hang"), batch="b2")
    extra, hidden = mcp.rig.finished("b2").outcomes
    assert extra.content == "extra: hi"
    assert hidden.status is ToolStatus.INVALID and "unknown tool `fx__hang`" in hidden.content


def test_a_call_in_flight_when_the_http_server_goes_away_ends_once_as_an_error(
    make_mcp_rig: MakeMcpRig, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, process = http_server
    settings = McpServerSettings(
        url=f"http://127.0.0.1:{port}/mcp", startup_timeout=2.0, tool_timeout=20.0, ping_interval=1.0
    )
    mcp = make_mcp_rig(settings, name="web")
    mcp.rig.run(call("c1", "web__slow", seconds=30))
    mcp.rig.expect(ToolCallBegan)
    process.kill()
    process.wait(5)
    outcome = mcp.rig.finished(timeout=15).outcomes[0]
    assert outcome.is_error and outcome.content.startswith("the MCP server web ")
    assert outcome.content.endswith("during the call; it is being restarted"), outcome.content
    assert len(mcp.rig.all_heard(ToolsFinished)) == 1
