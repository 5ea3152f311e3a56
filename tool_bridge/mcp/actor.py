"""McpServerActor: owns one MCP server (its process or connection, handshake, tool list, calls in
flight) and performs what its `ServerMachine` decides; the waiting happens on the shared trio loop."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from actors import (
    Actor,
    ChaosPolicy,
    ChildSpec,
    Job,
    JobFailed,
    RestartIntensity,
    Strategy,
    Supervisor,
    Timer,
    handles,
)
from tool_bridge.mcp.errors import McpError, McpNotInstalled
from tool_bridge.mcp.handle import McpServerHandle
from tool_bridge.mcp.machine import ServerStatus, Step

__all__ = ["McpServerActor", "ReconnectMcp", "mcp_supervisor_spec", "require_sdk"]

logger = logging.getLogger("turnkeep.tool_bridge.mcp")

_STOP_WAIT = 8.0
"""How long stopping the actor waits for its server to be stopped (terminate, grace, kill, reap)."""


def require_sdk() -> None:
    """Raise `McpNotInstalled` (whose message is the install command) unless the ``mcp`` SDK imports."""
    try:
        import mcp.client.session  # noqa: F401
    except ImportError:
        raise McpNotInstalled() from None


class ReconnectMcp(msgspec.Struct, frozen=True, tag=True):
    """Told to a server's actor: start the server again now (an unavailable one included), forgetting the
    failures counted against its restart intensity."""


class _Connected(msgspec.Struct, frozen=True, tag=True):
    generation: int


class _Ended(msgspec.Struct, frozen=True, tag=True):
    generation: int
    reason: str


class _RetryDue(msgspec.Struct, frozen=True, tag=True):
    pass


class McpServerActor(Actor):
    """Runs the server of ``handle`` with ``workspace`` as its default working directory and ``environ`` as
    the environment of a stdio server (the server's own ``env`` set over it).

    Guarantees: each start attempt is one job on the IoLoop that starts the server, completes the handshake
    within ``startup_timeout``, lists the tools and serves calls until the server exits, its connection
    drops or it fails a ping; its end is reported here and the `ServerMachine` decides: restart,
    unavailable (with a retry every ``retry_every`` seconds), or nothing. `ReconnectMcp` starts it again at
    once. Stopping or crashing the actor cancels the job, which stops the server process (terminate, then
    kill the whole group) before the stop completes (bounded); a new incarnation starts the server again,
    counted as a restart.
    """

    def __init__(
        self, handle: McpServerHandle, *, workspace: Path, environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self._handle = handle
        self._workspace = workspace
        self._environ = dict(os.environ if environ is None else environ)
        self._job: Job | None = None
        self._retry: Timer | None = None

    def on_start(self) -> None:
        machine = self._handle.machine
        try:
            require_sdk()
        except McpNotInstalled as exc:
            self._perform(machine.give_up(str(exc)))
            return
        if machine.generation == 0:
            self._perform(machine.start())
        elif machine.status is ServerStatus.STOPPED:
            self._perform(machine.resume())
        else:
            self._perform(machine.failed(machine.generation, time.monotonic(), "its actor restarted"))

    def on_stop(self) -> None:
        _cancel(self._retry)
        self._handle.machine.stop()
        self._handle.publish()
        self._wake()
        self._end_job(wait=True)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _cancel(self._retry)
        self._end_job(wait=True)

    @handles(ReconnectMcp)
    def _on_reconnect(self, _: ReconnectMcp) -> None:
        logger.info("MCP server %s: reconnect requested", self._handle.name)
        self._perform(self._handle.machine.reconnect())

    @handles(_Connected)
    def _on_connected(self, message: _Connected) -> None:
        self._perform(self._handle.machine.connected(message.generation))

    @handles(_Ended)
    def _on_ended(self, message: _Ended) -> None:
        machine = self._handle.machine
        if message.generation != machine.generation:
            return
        logger.info("MCP server %s: %s", self._handle.name, message.reason)
        self._handle.attach(None)
        self._perform(machine.failed(message.generation, time.monotonic(), message.reason))

    @handles(_RetryDue)
    def _on_retry_due(self, _: _RetryDue) -> None:
        self._perform(self._handle.machine.retry_due())

    @handles(JobFailed)
    def _on_job_failed(self, message: JobFailed) -> None:
        if self._job is None or message.job_id != self._job.id:
            return
        machine = self._handle.machine
        reason = f"its connection broke: {type(message.error).__name__}: {message.error}"
        self._handle.attach(None)
        self._perform(machine.failed(machine.generation, time.monotonic(), reason))

    def _perform(self, step: Step) -> None:
        if step.announce:
            logger.warning("%s", step.announce)
        self._handle.publish(announcement=step.announce)
        if step.connect is not None:
            self._end_job(wait=False)
            self._job = self.io.submit(
                self._serve,
                step.connect,
                name=f"mcp:{self._handle.name}:{step.connect}",
                owner=self.address,
            )
        if step.retry_in is not None:
            address = self.address
            _cancel(self._retry)
            self._retry = self.io.call_later(
                step.retry_in, lambda: address.tell(_RetryDue()), name="mcp-retry"
            )
        self._wake()

    def _wake(self) -> None:
        self.io.submit(self._handle.wake, name=f"mcp-wake:{self._handle.name}")

    async def _serve(self, generation: int) -> None:
        from tool_bridge.mcp._session import serve

        handle, me = self._handle, self.address

        def ready(connection: Any) -> None:
            handle.attach(connection)
            me.tell(_Connected(generation))

        try:
            reason = await serve(
                handle.name,
                handle.settings,
                cwd=self._workspace,
                env=self._environ,
                on_ready=ready,
                on_tools=handle.set_tools,
            )
        except McpError as exc:
            reason = str(exc)
        me.tell(_Ended(generation, reason))

    def _end_job(self, *, wait: bool) -> None:
        job, self._job = self._job, None
        if job is None or job.done:
            return
        job.cancel()
        if wait:
            try:
                job.wait(_STOP_WAIT)
            except TimeoutError:
                logger.error(
                    "MCP server %s: its server did not stop within %g s", self._handle.name, _STOP_WAIT
                )
            except Exception:
                pass


def _cancel(job: Job | Timer | None) -> None:
    if job is not None:
        job.cancel()


def mcp_supervisor_spec(
    name: str,
    handles: Sequence[McpServerHandle],
    *,
    workspace: Path,
    environ: Mapping[str, str] | None = None,
    chaos: ChaosPolicy | None = None,
) -> ChildSpec:
    """A supervisor (``one_for_one``) with one `McpServerActor` per handle, each at ``<name>/<server>``.
    Its start does not wait for the servers (they start at the same time, on the IoLoop): a call to a
    server still starting waits for it. An actor's restarts are its own business (its server's failures
    are counted by its machine), so the supervisor allows many."""
    children = [
        ChildSpec(
            handle.name,
            _factory(handle, workspace, environ),
            shutdown_timeout=_STOP_WAIT + 4.0,
            chaos=chaos,
        )
        for handle in handles
    ]
    return ChildSpec(
        name,
        lambda: Supervisor(children, strategy=Strategy.ONE_FOR_ONE, intensity=RestartIntensity(1000, 5.0)),
        shutdown_timeout=_STOP_WAIT + 8.0,
    )


def _factory(handle: McpServerHandle, workspace: Path, environ: Mapping[str, str] | None) -> Any:
    return lambda: McpServerActor(handle, workspace=workspace, environ=environ)
