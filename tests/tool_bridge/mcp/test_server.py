"""An MCP server's tools called through the tool bridge: results, errors, and a server that dies."""

from __future__ import annotations

from pathlib import Path

from tests.tool_bridge.conftest import call
from tests.tool_bridge.mcp.conftest import MakeMcpRig, alive, fixture_settings, read_pid
from tool_bridge import PermissionPolicy, PermissionRule, Subject, ToolStatus
from tool_bridge.mcp import ServerStatus


def test_a_tool_of_the_server_is_a_tool_named_server__tool(make_mcp_rig: MakeMcpRig) -> None:
    mcp = make_mcp_rig(fixture_settings())
    mcp.rig.run(call("c1", "fx__echo", text="hello"))
    outcome = mcp.rig.finished().outcomes[0]
    assert (outcome.status, outcome.content, outcome.is_error) == (ToolStatus.OK, "hello", False)


def test_an_error_result_is_an_error_and_bad_arguments_are_invalid(make_mcp_rig: MakeMcpRig) -> None:
    mcp = make_mcp_rig(fixture_settings())
    mcp.rig.run(call("c1", "fx__fail", message="no such row"), call("c2", "fx__echo", txt="typo"))
    failed, invalid = mcp.rig.finished().outcomes
    assert failed.is_error and failed.status is ToolStatus.ERROR and "no such row" in failed.content
    assert invalid.status is ToolStatus.INVALID and "'text' is a required property" in invalid.content


def test_a_server_exiting_mid_call_ends_the_call_once_naming_it_and_comes_back(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile = tmp_path / "server.pid"
    mcp = make_mcp_rig(fixture_settings(pidfile))
    first = read_pid(pidfile)
    mcp.rig.run(call("c1", "fx__die", code=3))
    outcome = mcp.rig.finished().outcomes[0]
    assert outcome.is_error
    assert outcome.content == "the MCP server fx exited (code 3) during the call; it is being restarted"
    mcp.rig.run(call("c2", "fx__echo", text="again"), batch="b2")
    assert mcp.rig.finished("b2", timeout=20).outcomes[0].content == "again"
    assert read_pid(pidfile, other_than=first) != first
    assert not alive(first)
    state = mcp.handle.state()
    assert (state.status, state.restarts) == (ServerStatus.READY, 1)


def test_permission_rules_and_argument_patterns_apply_to_mcp_tools(make_mcp_rig: MakeMcpRig) -> None:
    policy = PermissionPolicy(
        [PermissionRule("fx__echo", "deny", pattern="secret*"), PermissionRule("fx__fail", "deny")],
        default="allow",
        use_default_rules=False,
        subjects={"fx__echo": Subject("text", "glob")},
    )
    mcp = make_mcp_rig(fixture_settings(), policy=policy)
    mcp.rig.run(
        call("c1", "fx__echo", text="secret plans"),
        call("c2", "fx__echo", text="public plans"),
        call("c3", "fx__fail", message="x"),
    )
    statuses = [(o.status, o.content) for o in mcp.rig.finished().outcomes]
    assert [status for status, _ in statuses] == [ToolStatus.DENIED, ToolStatus.OK, ToolStatus.DENIED]
    assert statuses[1][1] == "public plans"


def test_a_call_to_a_server_still_starting_waits_for_its_tool_list(make_mcp_rig: MakeMcpRig) -> None:
    mcp = make_mcp_rig(fixture_settings(None, "--delay", "4"), ready=False)
    assert mcp.status() is ServerStatus.STARTING
    mcp.rig.run(call("c1", "fx__echo", text="worth the wait"), call("c2", "fx__nothing"))
    echoed, unknown = mcp.rig.finished(timeout=20).outcomes
    assert (echoed.status, echoed.content) == (ToolStatus.OK, "worth the wait")
    assert unknown.is_error and "offers no tool `fx__nothing`; it offers: `fx__echo`" in unknown.content
