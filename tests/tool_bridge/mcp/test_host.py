"""MCP servers in a host: a third-party server from the package index called by a turn through the
embedded provider, a session's own server started in its workspace, nothing left after shutdown, and the
configured idempotency classes reaching a session's tools."""

from __future__ import annotations

import json
import queue
import sys
from pathlib import Path

import msgspec
import pytest

from sampler import ToolMessage
from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell import events as ev
from shell.host import AgentHost
from shell.messages import Subscribe, UserPrompt
from shell.session import tool_specs
from tests._waiting import wait_until
from tests.shell._settings import settings_for
from tests.shell.test_host import KEY
from tests.tool_bridge.mcp.conftest import alive, fixture_settings, read_pid
from tool_bridge import Idempotency, builtin_registry
from tool_bridge.mcp import McpServers, McpServerSettings, McpSettingsError

TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")


def _tool_results(host: AgentHost, session_id: str) -> list[tuple[str, bool]]:
    return [
        (m.message.result.content, m.message.result.is_error)
        for m in host.store.load_messages(session_id)
        if isinstance(m.message, ToolMessage)
    ]


def test_a_turn_calls_the_reference_time_server_installed_from_the_package_index(tmp_path: Path) -> None:
    script = Script.task(
        [ToolStep([("time__get_current_time", {"timezone": "Asia/Tokyo"})]), FinalAnswer("It is late.")]
    )
    time_server = McpServerSettings(command=str(TIME_SERVER), args=["--local-timezone", "UTC"])
    with FakeProvider(script) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_TOOLS__ALLOW="time__get_current_time")
        with AgentHost(settings.replace(mcp_servers={"time": time_server}), credentials=KEY) as host:  # type: ignore[arg-type]
            address = host.open(tmp_path / "ws", session_id="s1")
            assert "MCP time: ready" in host.describe("s1")
            inbox: queue.Queue[object] = queue.Queue()
            address.ask(Subscribe(inbox))
            address.ask(UserPrompt("what time is it in Tokyo?"))
            while not isinstance(event := inbox.get(timeout=30), ev.TERMINAL_EVENTS):
                pass
            assert isinstance(event, ev.TurnCompleted), event
            results = _tool_results(host, "s1")
            offered = [spec.name for spec in host._sessions["s1"].runtime.tool_specs]
    assert "time__get_current_time" in offered and "time__convert_time" in offered
    ((content, is_error),) = results
    assert not is_error
    assert json.loads(content)["timezone"] == "Asia/Tokyo"


def test_a_session_scope_server_runs_in_the_session_workspace_and_is_gone_after_shutdown(
    tmp_path: Path,
) -> None:
    pidfile, childfile = tmp_path / "server.pid", tmp_path / "child.pid"
    script = Script.task(
        [ToolStep([("own__spawn_child", {"pidfile": str(childfile)})]), FinalAnswer("spawned")]
    )
    own = fixture_settings(pidfile, scope="session")
    with FakeProvider(script) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_TOOLS__ALLOW="own__spawn_child")
        with AgentHost(settings.replace(mcp_servers={"own": own}), credentials=KEY) as host:  # type: ignore[arg-type]
            address = host.open(tmp_path / "ws", session_id="s1")
            inbox: queue.Queue[object] = queue.Queue()
            # The first message starts the session's subtree, its own server first.
            address.ask(Subscribe(inbox))
            server = read_pid(pidfile)
            assert Path(f"/proc/{server}/cwd").resolve() == (tmp_path / "ws").resolve()
            runtime = host._sessions["s1"].runtime
            assert wait_until(lambda: "own__spawn_child" in [spec.name for spec in runtime.tool_specs])
            address.ask(UserPrompt("leave a child behind"))
            while not isinstance(event := inbox.get(timeout=30), ev.TERMINAL_EVENTS):
                pass
            assert isinstance(event, ev.TurnCompleted), event
            assert _tool_results(host, "s1") == [(f"spawned {read_pid(childfile)}", False)]
            grandchild = read_pid(childfile)
            assert "MCP own: ready, 7 tools, 0 restarts" in host.describe("s1")
    assert not alive(server) and not alive(grandchild)


def test_the_serve_supervision_view_shows_the_hosts_mcp_servers(tmp_path: Path) -> None:
    from shell.serve._supervision import supervision

    time_server = McpServerSettings(command=str(TIME_SERVER), args=["--local-timezone", "UTC"])
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with AgentHost(settings.replace(mcp_servers={"time": time_server}), credentials=KEY) as host:  # type: ignore[arg-type]
            assert wait_until(lambda: "ready" in " ".join(supervision(host).mcp_servers), 30)
            (line,) = supervision(host).mcp_servers
    assert line.startswith("time: ready, 2 tools, 0 restarts")


def test_a_session_hears_that_its_mcp_server_became_unavailable(tmp_path: Path) -> None:
    broken = McpServerSettings(command=str(tmp_path / "no-such-server"), scope="session", max_restarts=1)
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with AgentHost(settings.replace(mcp_servers={"gone": broken}), credentials=KEY) as host:  # type: ignore[arg-type]
            address = host.open(tmp_path / "ws", session_id="s1")
            inbox: queue.Queue[object] = queue.Queue()
            address.ask(Subscribe(inbox))
            while not isinstance(event := inbox.get(timeout=30), ev.McpServerStatus):
                pass
    assert (event.session, event.server, event.status) == ("s1", "gone", "unavailable")
    assert event.message.startswith("MCP server gone is unavailable after 1 restarts")
    assert "no such command" in event.message and "retrying every 60 s" in event.message


def test_the_configured_idempotency_classes_reach_a_sessions_tools_and_change_nothing_offered(
    tmp_path: Path,
) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(
            provider,
            tmp_path,
            TURNKEEP_TOOLS__IDEMPOTENCY="shell=idempotent,fx__echo=side_effecting,fx__later=read_only",
            TURNKEEP_AGENTS__ENABLED="false",  # the tools offered are then exactly the registry's
        )
        with AgentHost(settings.replace(mcp_servers={"fx": fixture_settings()}), credentials=KEY) as host:  # type: ignore[arg-type]
            host.open(tmp_path / "ws", session_id="s1")
            session = host._sessions["s1"]
            registry = session.parts.registry
            classes = {
                name: registry.idempotency_of(name)
                for name in ("shell", "read_file", "fx__echo", "fx__slow", "fx__later", "fx__die")
            }
            offered = msgspec.json.encode(session.runtime.tool_specs)
            unconfigured = msgspec.json.encode(tool_specs(host.mcp.registry(builtin_registry())))
    assert classes == {
        "shell": Idempotency.IDEMPOTENT,
        "read_file": Idempotency.READ_ONLY,
        "fx__echo": Idempotency.SIDE_EFFECTING,
        "fx__slow": Idempotency.IDEMPOTENT,
        "fx__later": Idempotency.READ_ONLY,
        "fx__die": Idempotency.SIDE_EFFECTING,
    }
    assert b"fx__echo" in offered and offered == unconfigured


def test_servers_given_for_one_session_run_as_its_own_beside_the_configured_ones() -> None:
    servers = McpServers({"shared": fixture_settings(), "own": fixture_settings(scope="session")})
    given = {"editor": fixture_settings()}  # scope "host" as given: a session's servers are its own
    handles = servers.session_handles(given)
    assert [(h.name, h.settings.scope) for h in handles] == [("own", "session"), ("editor", "session")]
    assert [h.name for h in servers.session_handles()] == ["own"], "given servers are for that session alone"
    for taken in ("shared", "own"):
        with pytest.raises(McpSettingsError, match="configured already"):
            servers.session_handles({taken: fixture_settings()})
    with pytest.raises(McpSettingsError, match="1-32 letters"):
        servers.session_handles({"a__b": fixture_settings()})


def test_a_session_opened_with_a_taken_server_name_is_refused_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with AgentHost(settings.replace(mcp_servers={"fx": fixture_settings()}), credentials=KEY) as host:  # type: ignore[arg-type]
            with pytest.raises(McpSettingsError):
                host.open(tmp_path / "ws", session_id="s1", mcp_servers={"fx": fixture_settings()})
            assert host.list_sessions() == []
