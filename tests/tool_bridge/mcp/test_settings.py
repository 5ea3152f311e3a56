"""What an ``[mcp_servers.NAME]`` table and a ``--mcp`` option accept and refuse."""

from __future__ import annotations

import pytest

from tool_bridge.mcp import McpServerSettings, McpSettingsError, exposed_name, parse_mcp_option


def test_defaults_are_those_of_the_documentation() -> None:
    s = McpServerSettings(command="srv")
    assert (s.startup_timeout, s.tool_timeout, s.scope, s.transport) == (10.0, 120.0, "host", "stdio")
    assert (s.max_restarts, s.restart_window, s.retry_every, s.kill_after) == (3, 30.0, 60.0, 10.0)
    assert McpServerSettings(url="http://127.0.0.1:1/mcp").transport == "http"


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({}, None),
        ({"command": "a", "url": "http://x"}, None),
        ({"command": " "}, "command"),
        ({"url": "ftp://x"}, "url"),
        ({"command": "a", "headers": {"a": "b"}}, "headers"),
        ({"url": "http://x", "args": ["a"]}, "args"),
        ({"command": "a", "tool_timeout": 0}, "tool_timeout"),
        ({"command": "a", "max_restarts": -1}, "max_restarts"),
        ({"command": "a", "enabled_tools": ["x"], "disabled_tools": ["x"]}, "disabled_tools"),
    ],
)
def test_a_wrong_table_is_refused_naming_the_key(fields: dict[str, object], key: str | None) -> None:
    with pytest.raises(McpSettingsError) as caught:
        McpServerSettings(**fields)  # type: ignore[arg-type]
    assert caught.value.key == key


def test_enabled_and_disabled_tools_decide_what_is_offered() -> None:
    assert McpServerSettings(command="a", enabled_tools=["x"]).offers("x")
    assert not McpServerSettings(command="a", enabled_tools=["x"]).offers("y")
    assert not McpServerSettings(command="a", disabled_tools=["y"]).offers("y")


def test_the_cli_option_is_a_name_and_a_command_line() -> None:
    name, s = parse_mcp_option("time=uvx mcp-server-time --local-timezone 'Europe/Paris'")
    assert name == "time"
    assert (s.command, s.args) == ("uvx", ["mcp-server-time", "--local-timezone", "Europe/Paris"])
    for bad in ("time", "=cmd", "a__b=cmd", "time=", "time='unclosed"):
        with pytest.raises(McpSettingsError):
            parse_mcp_option(bad)


def test_exposed_names_join_server_and_tool_and_stay_valid() -> None:
    assert exposed_name("git", "git_status") == "git__git_status"
    assert exposed_name("fs", "read.file/v2") == "fs__read_file_v2"
    assert len(exposed_name("s", "x" * 100)) == 64
