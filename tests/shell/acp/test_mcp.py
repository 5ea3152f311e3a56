"""The editor's MCP servers as the host's session-scope servers: named apart, stdio and HTTP taken, SSE
left out, anything else refused."""

from __future__ import annotations

import pytest

from shell.acp._jsonrpc import RpcError
from shell.acp._mcp import client_servers, server_name
from tool_bridge.mcp import server_name_ok


@pytest.mark.parametrize(
    ("label", "taken", "expected"),
    [
        ("files", (), "files"),
        ("My GitHub!", (), "My-GitHub"),
        ("a__b___c", (), "a_b_c"),
        ("", (), "server"),
        ("???", (), "server"),
        ("files", ("files",), "files-2"),
        ("files", ("files", "files-2"), "files-3"),
        ("x" * 40, (), "x" * 32),
        ("x" * 40, ("x" * 32,), "x" * 30 + "-2"),
    ],
)
def test_a_label_becomes_a_free_server_name(label: str, taken: tuple[str, ...], expected: str) -> None:
    name = server_name(label, taken)
    assert name == expected
    assert server_name_ok(name)


def test_stdio_and_http_servers_become_session_scope_settings_named_apart_from_the_configured() -> None:
    given = client_servers(
        [
            {
                "name": "files",
                "command": "/usr/bin/files-mcp",
                "args": ["--root", "/w"],
                "env": [{"name": "TOKEN", "value": "t"}],
            },
            {
                "type": "http",
                "name": "files",
                "url": "https://mcp.example/x",
                "headers": [{"name": "Authorization", "value": "Bearer b"}],
            },
        ],
        taken={"files"},
    )
    assert list(given.servers) == ["files-2", "files-3"]
    stdio, http = given.servers.values()
    assert (stdio.command, stdio.args, stdio.env, stdio.scope) == (
        "/usr/bin/files-mcp",
        ["--root", "/w"],
        {"TOKEN": "t"},
        "session",
    )
    assert (http.url, http.headers, http.scope) == (
        "https://mcp.example/x",
        {"Authorization": "Bearer b"},
        "session",
    )
    assert given.warnings == ()


def test_an_sse_server_is_left_out_with_a_warning() -> None:
    given = client_servers([{"type": "sse", "name": "old", "url": "http://x/sse", "headers": []}], taken=())
    assert given.servers == {}
    (warning,) = given.warnings
    assert "'old'" in warning and "SSE" in warning


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "rel", "command": "files-mcp", "args": [], "env": []}, "absolute path"),
        ({"name": "no args", "command": "/bin/x"}, "mcpServers[0]"),
        ({"type": "http", "name": "bad", "url": "ftp://x", "headers": []}, "mcpServers[0]"),
        ({"type": "carrier-pigeon", "name": "coo"}, "not an MCP server"),
        ("a string", "not an MCP server"),
    ],
)
def test_an_entry_that_is_not_a_server_of_the_schema_is_refused(entry: object, says: str) -> None:
    with pytest.raises(RpcError) as caught:
        client_servers([entry], taken=())  # type: ignore[list-item]
    assert caught.value.code == -32602
    assert says in caught.value.message
