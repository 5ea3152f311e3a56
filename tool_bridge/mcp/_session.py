"""One conversation with an MCP server through the official SDK: start, handshake, tool list, calls,
pings, and the end of it. Only the server actor's job uses this module."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tool_bridge.mcp._stdio import ServerProcess, open_stdio
from tool_bridge.mcp.errors import McpStartError, exited_message
from tool_bridge.mcp.settings import McpServerSettings
from tool_bridge.tools import ToolError

__all__ = ["Connection", "ServerGone", "render_result", "serve"]

logger = logging.getLogger("turnkeep.tool_bridge.mcp")

_EXIT_CODE_WAIT = 2.0
"""How long a call whose connection closed waits for the server's exit code before it reports."""


@dataclass(eq=False)
class Connection:
    """A ready conversation: the SDK session, the server's tools, and the event set when it ends.

    ``reason`` says how it ended (``exited (code 3)``, ``did not answer a ping within 5 s``…).
    """

    name: str
    settings: McpServerSettings
    session: ClientSession
    tools: tuple[mcp_types.Tool, ...]
    process: ServerProcess | None
    nursery: trio.Nursery
    lost: trio.Event = field(default_factory=trio.Event)
    reason: str = ""

    def end(self, reason: str) -> None:
        """End the conversation (first reason wins); the serving job then tears it down."""
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool``; raises `ToolError` naming the server when the conversation ends during the call.
        Cancelling it sends ``notifications/cancelled`` (the SDK's courtesy cancel) and has the server's
        responsiveness checked ``kill_after`` seconds later."""
        if self.process is not None and self.process.process.poll() is not None:
            # Dead before the request was written: the call never reached it.
            self.end(self.process.reason or "exited")
            raise ServerGone()
        outcome: list[mcp_types.CallToolResult | MCPError] = []

        async def run(nursery: trio.Nursery) -> None:
            try:
                result = await self.session.call_tool(tool, arguments)
            except MCPError as exc:
                outcome.append(exc)
            else:
                if isinstance(result, mcp_types.CallToolResult):
                    outcome.append(result)
                else:
                    outcome.append(MCPError(-32603, f"unexpected result type {type(result).__name__}"))
            nursery.cancel_scope.cancel()

        async def watch(nursery: trio.Nursery) -> None:
            await self.lost.wait()
            nursery.cancel_scope.cancel()

        settled = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, nursery)
                nursery.start_soon(watch, nursery)
            settled = True
        finally:
            if not settled:
                self.check_later()
        ended = outcome[0] if outcome else None
        if isinstance(ended, mcp_types.CallToolResult):
            return ended
        if ended is not None and ended.code != mcp_types.CONNECTION_CLOSED:
            raise ToolError(f"the MCP server {self.name} answered with an error: {ended.message}")
        with trio.move_on_after(_EXIT_CODE_WAIT):
            await self.lost.wait()
        # A connection that closed under a call ends the conversation, whatever its transport noticed.
        self.end("lost its connection")
        raise ToolError(exited_message(self.name, self.reason))

    def check_later(self) -> None:
        """After an abandoned call: ``kill_after`` seconds from now the server must answer a ping within
        ``ping_timeout``, or its conversation ends (its process group killed) and it is restarted."""
        if self.lost.is_set():
            return
        with suppress(RuntimeError):
            self.nursery.start_soon(self._check, self.settings.kill_after)

    async def _check(self, delay: float) -> None:
        await trio.sleep(delay)
        await self.ping()

    async def ping(self) -> bool:
        """Ping the server; one not answering within ``ping_timeout`` has its conversation ended."""
        timeout = self.settings.ping_timeout
        with trio.move_on_after(timeout):
            try:
                await self.session.send_ping()
            except MCPError as exc:
                self.end(f"failed a ping: {exc.message}")
                return False
            return True
        self.end(f"did not answer a ping within {timeout:g} s")
        return False


async def serve(
    name: str,
    settings: McpServerSettings,
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_ready: Callable[[Connection], None],
    on_tools: Callable[[tuple[mcp_types.Tool, ...]], None],
) -> str:
    """Start the server, hand the ready `Connection` to ``on_ready`` and serve it until it ends; returns
    how it ended. Raises `McpStartError` (with the server's stderr tail) when it cannot be started or fails
    its handshake within ``startup_timeout``. Whatever happens, the server process is stopped on return."""
    changed = trio.Event()
    changed_flag: list[trio.Event] = [changed]

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed_flag[0].set()
        elif isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %s", name, message)

    started: list[ServerProcess | None] = []
    served: list[Connection] = []
    try:
        async with _transport(name, settings, cwd, env) as (streams, process):
            started.append(process)
            async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
                try:
                    with trio.fail_after(settings.startup_timeout):
                        tools = await _handshake(session, process)
                except Exception as exc:
                    raise McpStartError(_start_failure(name, settings, exc, process)) from None
                async with trio.open_nursery() as nursery:
                    connection = Connection(name, settings, session, tools, process, nursery)
                    served.append(connection)
                    if process is not None:
                        nursery.start_soon(_follow_process, process, connection)
                    nursery.start_soon(_keep_pinging, connection)
                    nursery.start_soon(_refresh_tools, connection, changed_flag, on_tools)
                    on_ready(connection)
                    await connection.lost.wait()
                    nursery.cancel_scope.cancel()
                if process is not None:
                    process.kill()
    except Exception as exc:
        failure = _unwrap(exc)
        if served:
            served[0].end(f"lost its connection: {type(failure).__name__}: {failure}")
        elif isinstance(failure, McpStartError):
            raise failure from None
        else:
            process = started[0] if started else None
            raise McpStartError(_start_failure(name, settings, failure, process)) from None
    return served[0].reason if served else "ended before it was ready"


class ServerGone(Exception):
    """The conversation had already ended when a call was about to be sent."""


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def _transport(
    name: str, settings: McpServerSettings, cwd: Path, env: Mapping[str, str]
) -> AsyncIterator[tuple[tuple[Any, Any], ServerProcess | None]]:
    if settings.command is not None:
        merged = {**env, **settings.env}
        where = Path(settings.cwd) if settings.cwd else cwd
        async with open_stdio(
            name,
            [settings.command, *settings.args],
            env=merged,
            cwd=where,
            tail_chars=settings.stderr_tail,
            logger=logging.getLogger(f"turnkeep.mcp.{name}"),
        ) as (streams, process):
            yield streams, process
        return
    assert settings.url is not None
    headers = dict(settings.headers)
    if settings.bearer_token_env:
        token = os.environ.get(settings.bearer_token_env)
        if not token:
            raise McpStartError(
                f"the MCP server {name} needs a bearer token in ${settings.bearer_token_env}, "
                "which is not set"
            )
        headers["Authorization"] = f"Bearer {token}"
    client = create_mcp_http_client(headers=headers)
    async with client, streamable_http_client(settings.url, http_client=client) as streams:
        yield streams, None


async def _handshake(session: ClientSession, process: ServerProcess | None) -> tuple[mcp_types.Tool, ...]:
    async def attempt() -> tuple[mcp_types.Tool, ...]:
        await session.initialize()
        return await list_tools(session)

    if process is None:
        return await attempt()
    # A server that exits or writes garbage during the handshake ends it at once, not at the timeout.
    found: list[tuple[mcp_types.Tool, ...]] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            found.append(await attempt())
            nursery.cancel_scope.cancel()

        async def watch() -> None:
            await process.ended.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(run)
        nursery.start_soon(watch)
    if not found:
        raise McpStartError(process.reason)
    return found[0]


async def list_tools(session: ClientSession) -> tuple[mcp_types.Tool, ...]:
    """Every tool the server lists, following its pagination (at most 100 pages)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


async def _follow_process(process: ServerProcess, connection: Connection) -> None:
    await process.ended.wait()
    connection.end(process.reason)


async def _keep_pinging(connection: Connection) -> None:
    while not connection.lost.is_set():
        await trio.sleep(connection.settings.ping_interval)
        await connection.ping()


async def _refresh_tools(
    connection: Connection,
    changed: list[trio.Event],
    on_tools: Callable[[tuple[mcp_types.Tool, ...]], None],
) -> None:
    while True:
        await changed[0].wait()
        changed[0] = trio.Event()
        with trio.move_on_after(connection.settings.startup_timeout):
            try:
                tools = await list_tools(connection.session)
            except MCPError as exc:
                logger.warning("MCP server %s: could not list its tools again: %s", connection.name, exc)
                continue
            connection.tools = tools
            on_tools(tools)


def _start_failure(
    name: str, settings: McpServerSettings, exc: BaseException, process: ServerProcess | None
) -> str:
    exc = _unwrap(exc)
    if isinstance(exc, trio.TooSlowError):
        what = f"did not complete its handshake within {settings.startup_timeout:g} s"
    elif isinstance(exc, McpStartError):
        what = str(exc)
    elif isinstance(exc, MCPError):
        what = f"failed its handshake: {exc.message}"
    elif isinstance(exc, FileNotFoundError):
        what = f"could not be started: no such command {settings.command!r}"
    else:
        what = f"failed to start: {type(exc).__name__}: {exc}"
    if process is not None and process.ended.is_set() and process.reason not in what:
        what += f"; it {process.reason}"
    if process is not None:
        process.keep_unread_stderr()
    tail = process.stderr_tail().strip() if process is not None else ""
    return f"the MCP server {name} {what}" + (f"\n[stderr]\n{tail}" if tail else "")


def render_result(result: mcp_types.CallToolResult) -> str:
    """The text the model reads for a tool result: text blocks as they are, others described."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        else:
            parts.append(json.dumps(block.model_dump(mode="json", exclude_none=True)))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)
