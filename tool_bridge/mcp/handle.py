"""The shared face of one MCP server: what its tools wait on and what the host shows.

The server actor publishes its state here; tool calls (on the trio loop) wait here for a ready
conversation; the host reads a `McpServerState` for display. It outlives the actor's incarnations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from tool_bridge.mcp.errors import unavailable_message
from tool_bridge.mcp.machine import ServerMachine, ServerStatus
from tool_bridge.mcp.settings import McpServerSettings
from tool_bridge.tools import ToolError

if TYPE_CHECKING:
    from tool_bridge.mcp._session import Connection

__all__ = ["McpServerHandle", "McpServerState", "status_notice"]


class McpServerState(msgspec.Struct, frozen=True):
    """A server as it is now: its status, restarts since it was first started, how many tools it offers,
    its last error, and the last announcement made about it (unavailable, available again)."""

    name: str
    status: ServerStatus
    restarts: int
    tools: int
    last_error: str = ""
    announcement: str = ""

    def describe(self) -> str:
        """``time: ready, 2 tools, 1 restart`` and, when not ready, the last error."""
        restarts = f"{self.restarts} restart" + ("" if self.restarts == 1 else "s")
        text = f"{self.name}: {self.status.value}, {self.tools} tools, {restarts}"
        if self.status is not ServerStatus.READY and self.last_error:
            text += f" (last error: {self.last_error.splitlines()[0][:200]})"
        return text


class McpServerHandle:
    """One server's shared state; thread-safe.

    Guarantees: `ready_connection` returns a live conversation once the server is ready, fails at once
    with a `ToolError` while it is unavailable or stopped, and waits (its caller bounds the wait) while it
    starts or restarts; listeners hear every change of the tool list.
    """

    def __init__(self, name: str, settings: McpServerSettings) -> None:
        self.name = name
        self.settings = settings
        self.machine = ServerMachine(
            name,
            max_restarts=settings.max_restarts,
            window=settings.restart_window,
            retry_every=settings.retry_every,
        )
        self._lock = threading.Lock()
        self._status = ServerStatus.STARTING
        self._restarts = 0
        self._last_error = ""
        self._announcement = ""
        self._connection: Connection | None = None
        self._remote_tools: tuple[Any, ...] = ()
        self._listeners: list[Callable[[McpServerHandle], None]] = []
        self._status_listeners: list[Callable[[ServerStatus, McpServerState], None]] = []
        self._settled = threading.Event()
        self._changed: trio.Event | None = None

    # -- read by anyone ------------------------------------------------------------------------------

    def state(self) -> McpServerState:
        """The server as it is now."""
        with self._lock:
            offered = sum(1 for tool in self._remote_tools if self.settings.offers(tool.name))
            return McpServerState(
                self.name, self._status, self._restarts, offered, self._last_error, self._announcement
            )

    def remote_tools(self) -> tuple[Any, ...]:
        """The tools the server listed last (SDK ``Tool`` values), offered or not."""
        with self._lock:
            return self._remote_tools

    def server_pid(self) -> int | None:
        """The process id (and group id) of the running stdio server, or None."""
        with self._lock:
            connection = self._connection
        process = connection.process if connection is not None else None
        return process.pid if process is not None else None

    def wait_settled(self, timeout: float) -> bool:
        """Block until the server is ready, unavailable or stopped (not starting or restarting), at most
        ``timeout`` seconds; whether it is."""
        return self._settled.wait(timeout)

    def on_tools_changed(self, listener: Callable[[McpServerHandle], None]) -> None:
        """Call ``listener(handle)`` whenever the server's tool list changes."""
        with self._lock:
            self._listeners.append(listener)

    def on_status_changed(self, listener: Callable[[ServerStatus, McpServerState], None]) -> None:
        """Call ``listener(before, state)`` whenever the server's status changes from ``before`` (on the
        thread that changed it: the listener must return at once and not raise)."""
        with self._lock:
            self._status_listeners.append(listener)

    # -- written by the server actor and its job -----------------------------------------------------

    def publish(self, *, announcement: str | None = None) -> None:
        """Copy the machine's state (status, restarts, last error) here."""
        machine = self.machine
        with self._lock:
            before = self._status
            self._status = machine.status
            self._restarts = machine.restarts
            self._last_error = machine.last_error
            if announcement is not None:
                self._announcement = announcement
            if machine.status in (ServerStatus.STARTING, ServerStatus.RESTARTING):
                self._settled.clear()
            else:
                self._settled.set()
            listeners = list(self._status_listeners) if before is not machine.status else []
        if listeners:
            state = self.state()
            for listener in listeners:
                listener(before, state)

    def attach(self, connection: Connection | None) -> None:
        """The live conversation (None when it ended); its tool list becomes the server's."""
        with self._lock:
            self._connection = connection
        if connection is not None:
            self.set_tools(connection.tools)

    def set_tools(self, tools: tuple[Any, ...]) -> None:
        """A new tool list (after the handshake or ``notifications/tools/list_changed``)."""
        with self._lock:
            changed = [tool.model_dump(mode="json") for tool in tools] != [
                tool.model_dump(mode="json") for tool in self._remote_tools
            ]
            self._remote_tools = tools
            listeners = list(self._listeners) if changed else []
        for listener in listeners:
            listener(self)

    async def wake(self) -> None:
        """Wake the calls waiting for a change (run on the trio loop after each `publish`)."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- used by tool calls, on the trio loop --------------------------------------------------------

    async def ready_connection(self) -> Connection:
        """The live conversation, once the server is ready. Raises `ToolError` at once while the server is
        unavailable or stopped; waits (unbounded here: the caller bounds it) while it (re)starts."""
        while True:
            with self._lock:
                status, connection = self._status, self._connection
                restarts, last_error = self._restarts, self._last_error
            if status is ServerStatus.UNAVAILABLE:
                raise ToolError(unavailable_message(self.name, restarts, last_error))
            if status is ServerStatus.STOPPED:
                raise ToolError(f"the MCP server {self.name} has been stopped")
            if status is ServerStatus.READY and connection is not None and not connection.lost.is_set():
                return connection
            if self._changed is None:
                self._changed = trio.Event()
            changed = self._changed
            await changed.wait()


def status_notice(before: ServerStatus, state: McpServerState) -> str | None:
    """What the sessions using a server are told of its change from ``before`` to ``state``: that it
    became unavailable, or is available again after being so; None for any other change."""
    if state.status is ServerStatus.UNAVAILABLE:
        return state.announcement or state.last_error or f"the MCP server {state.name} is unavailable"
    if state.status is ServerStatus.READY and before is ServerStatus.UNAVAILABLE:
        return state.announcement or f"the MCP server {state.name} is available again"
    return None
