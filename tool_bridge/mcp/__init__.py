"""MCP tool servers as supervised actors: each configured server is an `McpServerActor` that owns its
process or connection and restarts it by its restart intensity; its tools are bridge tools named
``SERVER__tool``, run under the same permission rules and is_error discipline as the built-in ones.

Configure servers with `McpServerSettings` (the ``[mcp_servers.NAME]`` tables), make one
`McpServerHandle` per server, start the actors with `mcp_supervisor_spec`, and offer the tools with an
`McpToolRegistry`. The SDK (``pip install 'turnkeep[mcp]'``) is only imported when a server starts. A
tool's idempotency class comes from the server's annotations of it (`annotated_idempotency`).
"""

from __future__ import annotations

from .actor import McpServerActor, ReconnectMcp, mcp_supervisor_spec, require_sdk
from .errors import (
    INSTALL_HINT,
    McpError,
    McpNotInstalled,
    McpSettingsError,
    McpStartError,
    exited_message,
    unavailable_message,
)
from .handle import McpServerHandle, McpServerState, status_notice
from .hosting import MCP_CHILD, McpServers, wait_settled
from .machine import ServerMachine, ServerStatus, Step
from .settings import McpServerSettings, parse_mcp_option, server_name_ok
from .tools import McpArguments, McpTool, McpToolRegistry, annotated_idempotency, exposed_name, mcp_tools

__all__ = [
    "INSTALL_HINT",
    "MCP_CHILD",
    "McpArguments",
    "McpError",
    "McpNotInstalled",
    "McpServerActor",
    "McpServerHandle",
    "McpServerSettings",
    "McpServerState",
    "McpServers",
    "McpSettingsError",
    "McpStartError",
    "McpTool",
    "McpToolRegistry",
    "ReconnectMcp",
    "ServerMachine",
    "ServerStatus",
    "Step",
    "annotated_idempotency",
    "exited_message",
    "exposed_name",
    "mcp_supervisor_spec",
    "mcp_tools",
    "parse_mcp_option",
    "require_sdk",
    "server_name_ok",
    "status_notice",
    "unavailable_message",
    "wait_settled",
]
