"""The errors of the MCP wing and the messages a failed call shows the model."""

from __future__ import annotations

__all__ = [
    "INSTALL_HINT",
    "McpError",
    "McpNotInstalled",
    "McpSettingsError",
    "McpStartError",
    "exited_message",
    "unavailable_message",
]

INSTALL_HINT = "pip install 'turnkeep[mcp]'"
"""The command that installs what MCP servers need."""


class McpError(Exception):
    """Base of the MCP wing's errors."""


class McpSettingsError(McpError, ValueError):
    """An ``[mcp_servers.NAME]`` table (or a ``--mcp`` option) is wrong; ``key`` names the setting."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key


class McpNotInstalled(McpError):
    """An MCP server is configured but the ``mcp`` package is not installed; the message says how to."""

    def __init__(self) -> None:
        super().__init__(f"MCP servers need the `mcp` package: {INSTALL_HINT}")


class McpStartError(McpError):
    """A server could not be started or failed its handshake; the message carries its stderr tail."""


def exited_message(server: str, how: str) -> str:
    """What a call in flight reads when its server went away (``how``: ``exited (code 3)``, ``lost its
    connection (…)``)."""
    return f"the MCP server {server} {how} during the call; it is being restarted"


def unavailable_message(server: str, restarts: int, last_error: str) -> str:
    """What a call reads while its server is unavailable."""
    last = last_error or "unknown"
    return f"the MCP server {server} is unavailable after {restarts} restarts; last error: {last}"
