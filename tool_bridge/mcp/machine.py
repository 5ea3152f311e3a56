"""The life of one MCP server as a pure state machine: what to do when it starts, fails or is retried.

The actor feeds it what happened (`ServerMachine.connected`, `ServerMachine.failed`, …) and performs the
`Step` it returns; nothing here waits, reads a clock or touches a process.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

__all__ = ["ServerMachine", "ServerStatus", "Step"]


class ServerStatus(enum.StrEnum):
    """Where a server is in its life, as `AgentHost.describe` and the CLI show it."""

    STARTING = "starting"
    """Its first start (process or connection, handshake, tool list) is under way."""
    READY = "ready"
    """Handshake done and tools listed: calls run."""
    RESTARTING = "restarting"
    """It failed and is being started again; calls wait (bounded) for it."""
    UNAVAILABLE = "unavailable"
    """It failed more often than its restart intensity allows; calls fail at once until a retry works."""
    STOPPED = "stopped"
    """Its host or session is shutting down; calls fail at once."""


@dataclass(frozen=True, slots=True)
class Step:
    """What the actor does after an event: start attempt ``connect`` (a new generation) now, schedule a
    retry ``retry_in`` seconds from now, and announce ``announce`` (an event for subscribers and the log)."""

    connect: int | None = None
    retry_in: float | None = None
    announce: str | None = None


class ServerMachine:
    """The decisions for one server named ``name``.

    Guarantees: each start attempt has its own generation and events of an older generation change
    nothing; at most ``max_restarts`` restarts follow failures within ``window`` seconds, one failure more
    makes the server ``unavailable`` (announced once) with a retry every ``retry_every`` seconds; a
    successful start (first, restart, retry or reconnect) makes it ``ready``; `reconnect` starts it again
    at once whatever its state (except stopped) and forgets the failures counted so far.
    """

    def __init__(self, name: str, *, max_restarts: int, window: float, retry_every: float) -> None:
        self.name = name
        self.status = ServerStatus.STARTING
        self.generation = 0
        self.restarts = 0
        """Restarts after failures since the server was first started (for display)."""
        self.last_error = ""
        self._max_restarts = max_restarts
        self._window = window
        self._retry_every = retry_every
        self._failures: deque[float] = deque()
        self._attempting = False

    def start(self) -> Step:
        """The server's first start."""
        return self._attempt()

    def connected(self, generation: int) -> Step:
        """Attempt ``generation`` completed its handshake and listed its tools."""
        if generation != self.generation or self.status is ServerStatus.STOPPED:
            return Step()
        self._attempting = False
        was = self.status
        self.status = ServerStatus.READY
        if was is ServerStatus.UNAVAILABLE:
            self._failures.clear()
            return Step(announce=f"MCP server {self.name} is available again")
        return Step()

    def failed(self, generation: int, now: float, reason: str) -> Step:
        """Attempt ``generation`` failed to start, or its server exited or lost its connection, at ``now``."""
        if generation != self.generation or self.status is ServerStatus.STOPPED:
            return Step()
        self._attempting = False
        self.last_error = reason
        if self.status is ServerStatus.UNAVAILABLE:
            return Step(retry_in=self._retry_every)
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self._window:
            self._failures.popleft()
        if len(self._failures) > self._max_restarts:
            self.status = ServerStatus.UNAVAILABLE
            return Step(
                retry_in=self._retry_every,
                announce=(
                    f"MCP server {self.name} is unavailable after {self.restarts} restarts "
                    f"(more than {self._max_restarts} within {self._window:g} s); last error: {reason}; "
                    f"retrying every {self._retry_every:g} s"
                ),
            )
        self.restarts += 1
        self.status = ServerStatus.RESTARTING
        return self._attempt()

    def resume(self) -> Step:
        """Start a stopped server again (its session was passivated and is active again)."""
        if self.status is not ServerStatus.STOPPED:
            return Step()
        self.status = ServerStatus.STARTING
        self._failures.clear()
        return self._attempt()

    def retry_due(self) -> Step:
        """The back-off timer of an unavailable server fired."""
        if self.status is not ServerStatus.UNAVAILABLE or self._attempting:
            return Step()
        return self._attempt()

    def reconnect(self) -> Step:
        """An explicit request to start the server again now."""
        if self.status is ServerStatus.STOPPED:
            return Step()
        self._failures.clear()
        if self.status is not ServerStatus.STARTING:
            self.status = ServerStatus.RESTARTING
        return self._attempt()

    def give_up(self, reason: str) -> Step:
        """The server cannot be run at all (its SDK is missing): unavailable, with no retry."""
        self.status = ServerStatus.UNAVAILABLE
        self.last_error = reason
        self._attempting = False
        return Step(announce=f"MCP server {self.name} is unavailable: {reason}")

    def stop(self) -> None:
        """The server is being shut down for good."""
        self.status = ServerStatus.STOPPED
        self._attempting = False

    def _attempt(self) -> Step:
        self.generation += 1
        self._attempting = True
        return Step(connect=self.generation)
