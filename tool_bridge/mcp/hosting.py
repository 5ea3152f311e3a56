"""The MCP servers of a host: the host-scope ones started once and shared, the session-scope ones made
per session, and the registry and description each session gets."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import msgspec

from actors import ActorSystem, Address, ChaosPolicy, ChildSpec
from tool_bridge.mcp.actor import mcp_supervisor_spec, require_sdk
from tool_bridge.mcp.errors import McpSettingsError
from tool_bridge.mcp.handle import McpServerHandle
from tool_bridge.mcp.settings import McpServerSettings, server_name_ok
from tool_bridge.mcp.tools import McpToolRegistry
from tool_bridge.tools import ToolRegistry

__all__ = ["MCP_CHILD", "McpServers", "wait_settled"]

MCP_CHILD = "mcp"
"""The name of the supervisor of MCP servers, under the host and in a session subtree."""

_SETTLE_SLACK = 5.0
_BAD_NAME = "a server name is 1-32 letters, digits, '_' or '-' without '__'"


class McpServers:
    """The servers configured for a host (``[mcp_servers.NAME]``; disabled ones left out).

    Raises `McpSettingsError` for a name that cannot name a server, and `McpNotInstalled` (whose message is
    the install command) when a server is configured and the ``mcp`` SDK is missing.
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerSettings],
        *,
        environ: Mapping[str, str] | None = None,
        chaos: ChaosPolicy | None = None,
    ) -> None:
        for name in servers:
            if not server_name_ok(name):
                raise McpSettingsError(_BAD_NAME, key=f"mcp_servers.{name}")
        enabled = {name: each for name, each in servers.items() if each.enabled}
        if enabled:
            require_sdk()
        self._environ = dict(os.environ if environ is None else environ)
        self._session_environ = self._environ
        self._chaos = chaos
        self.host_handles = tuple(McpServerHandle(n, s) for n, s in enabled.items() if s.scope == "host")
        self._per_session = {n: s for n, s in enabled.items() if s.scope == "session"}

    def __bool__(self) -> bool:
        return bool(self.host_handles or self._per_session)

    def start(self, system: ActorSystem, parent: Address, workspace: Path) -> None:
        """Start the host-scope servers under ``parent`` and wait (at most each one's startup timeout and a
        few seconds) until each is ready or has failed, so the first sessions are offered their tools."""
        if not self.host_handles:
            return
        system.spawn(
            mcp_supervisor_spec(
                MCP_CHILD, self.host_handles, workspace=workspace, environ=self._environ, chaos=self._chaos
            ),
            parent=parent,
        )
        deadline = (
            time.monotonic() + max(h.settings.startup_timeout for h in self.host_handles) + _SETTLE_SLACK
        )
        for handle in self.host_handles:
            handle.wait_settled(max(0.0, deadline - time.monotonic()))

    def use_session_environment(self, environ: Mapping[str, str]) -> None:
        """The environment session-scope stdio servers start with (the host's tool environment: the
        host's variables without its credentials); a server's own ``env`` is set over it."""
        self._session_environ = dict(environ)

    def session_handles(
        self, extra: Mapping[str, McpServerSettings] | None = None
    ) -> tuple[McpServerHandle, ...]:
        """New handles for one session's own servers: the configured session-scope ones and ``extra``
        (servers given for this session alone, each run as a session-scope one). Raises
        `McpSettingsError` for an ``extra`` name that is not a server name or is a configured server's,
        and `McpNotInstalled` when an ``extra`` server is enabled but the ``mcp`` SDK is missing."""
        servers = dict(self._per_session)
        for name, each in (extra or {}).items():
            if not server_name_ok(name):
                raise McpSettingsError(_BAD_NAME, key=f"mcp_servers.{name}")
            if name in servers or any(handle.name == name for handle in self.host_handles):
                raise McpSettingsError(
                    f"a server named {name!r} is configured already", key=f"mcp_servers.{name}"
                )
            if each.enabled:
                require_sdk()
                servers[name] = msgspec.structs.replace(each, scope="session")
        return tuple(McpServerHandle(n, s) for n, s in servers.items())

    def session_spec(self, handles: Sequence[McpServerHandle], workspace: Path) -> ChildSpec | None:
        """The supervisor of a session's own servers (started in its workspace), or None without any."""
        if not handles:
            return None
        return mcp_supervisor_spec(
            MCP_CHILD, handles, workspace=workspace, environ=self._session_environ, chaos=self._chaos
        )

    def registry(
        self,
        base: ToolRegistry,
        session: Sequence[McpServerHandle] = (),
        *,
        only: Collection[str] | None = None,
    ) -> ToolRegistry:
        """``base`` with the tools of the host's servers and of ``session``'s own (``base`` itself when no
        server is configured); with ``only``, just the MCP tools of those names."""
        handles = (*self.host_handles, *session)
        return McpToolRegistry(base, handles, only=only) if handles else base

    def follow_tools(
        self,
        session: Sequence[McpServerHandle],
        registry: ToolRegistry,
        offer: Callable[[ToolRegistry], None],
    ) -> None:
        """Call ``offer(registry)`` whenever a server of the host or of ``session`` changes its tools, for
        as long as ``registry`` lives (a closed session's registry is not kept alive by its servers)."""
        held = weakref.ref(registry)

        def changed(_: McpServerHandle) -> None:
            alive = held()
            if alive is not None:
                offer(alive)

        for handle in (*self.host_handles, *session):
            handle.on_tools_changed(changed)

    def describe(self, session: Sequence[McpServerHandle] = ()) -> str:
        """``MCP fx: ready, 7 tools, 0 restarts; git: restarting, …`` or "" without servers."""
        states = [handle.state().describe() for handle in (*self.host_handles, *session)]
        return ("MCP " + "; ".join(states)) if states else ""


def wait_settled(handles: Sequence[McpServerHandle]) -> None:
    """Block until each server of ``handles`` has started or failed to, at most the longest startup
    timeout among them and a few seconds."""
    if not handles:
        return
    longest = max(handle.settings.startup_timeout for handle in handles)
    deadline = time.monotonic() + longest + _SETTLE_SLACK
    for handle in handles:
        handle.wait_settled(max(0.0, deadline - time.monotonic()))
