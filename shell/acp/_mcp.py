"""The MCP servers an editor passes with ``session/new``, ``session/load`` and ``session/resume``, as the
host's session-scope server settings. Pure.

An editor names its servers for people ("GitHub", "my files"); the host names a server's tools
``NAME__tool``, so each gets a server name of letters, digits, ``_`` and ``-`` made from its own, never
one of the host's configured servers (a number is added until it is free). Stdio and streamable HTTP
servers are taken; SSE servers, which the agent does not offer (``mcpCapabilities.sse`` is false), are left
out with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tool_bridge.mcp import McpServerSettings

from ._jsonrpc import INVALID_PARAMS, RpcError
from ._schema import McpServerHttp, McpServerStdio

__all__ = ["ClientServers", "client_servers", "server_name"]

_MAX_NAME = 32
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class ClientServers:
    """The servers to run for one session, by server name, and a warning for each one left out."""

    servers: dict[str, McpServerSettings] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def server_name(label: str, taken: Collection[str]) -> str:
    """A server name made from the editor's ``label`` that is not in ``taken``: its letters, digits, ``_``
    and ``-``, other runs of characters as one ``-``, at most 32 characters; ``-2``, ``-3``… added until
    it is free."""
    base = _UNSAFE.sub("-", label).strip("-")
    while "__" in base:
        base = base.replace("__", "_")
    base = base[:_MAX_NAME].strip("-_") or "server"
    name, number = base, 1
    while name in taken:
        number += 1
        suffix = f"-{number}"
        name = base[: _MAX_NAME - len(suffix)].rstrip("-_") + suffix
    return name


def client_servers(raw: list[dict[str, Any]], *, taken: Collection[str]) -> ClientServers:
    """The session-scope settings of the servers ``raw`` describes (the request's ``mcpServers``), named
    apart from ``taken`` and from each other. Raises :class:`RpcError` -32602 for an entry that is not a
    server of the schema, or a stdio command that is not an absolute path."""
    servers: dict[str, McpServerSettings] = {}
    warnings: list[str] = []
    for index, entry in enumerate(raw):
        kind = entry.get("type", "stdio") if isinstance(entry, dict) else None
        try:
            if kind == "stdio":
                stdio = msgspec.convert(entry, McpServerStdio)
                if not stdio.command.startswith("/"):
                    raise RpcError(
                        INVALID_PARAMS,
                        f"mcpServers[{index}] ({stdio.name}): command must be an absolute path,"
                        f" got {stdio.command!r}",
                    )
                settings = McpServerSettings(
                    command=stdio.command,
                    args=list(stdio.args),
                    env={variable.name: variable.value for variable in stdio.env},
                    scope="session",
                )
                label = stdio.name
            elif kind == "http":
                http = msgspec.convert(entry, McpServerHttp)
                headers = {header.name: header.value for header in http.headers}
                settings = McpServerSettings(url=http.url, headers=headers, scope="session")
                label = http.name
            elif kind == "sse":
                warnings.append(
                    f"the MCP server {entry.get('name', '?')!r} is not started: it speaks SSE, which this"
                    " agent does not offer (use stdio or streamable HTTP)"
                )
                continue
            else:
                raise RpcError(INVALID_PARAMS, f"mcpServers[{index}] is not an MCP server: {entry!r:.200}")
        except (msgspec.ValidationError, ValueError) as error:
            raise RpcError(INVALID_PARAMS, f"mcpServers[{index}]: {error}") from None
        servers[server_name(label, {*taken, *servers})] = settings
    return ClientServers(servers, tuple(warnings))
