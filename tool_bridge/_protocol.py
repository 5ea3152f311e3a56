"""What a ToolSupervisor and its ToolActors say to each other, and the timers a ToolSupervisor tells
itself; nothing outside the tool bridge sends these."""

from __future__ import annotations

import msgspec

from tool_bridge.results import ToolOutcome

__all__ = [
    "AbortCall",
    "CallFinished",
    "CallStarted",
    "GraceOver",
    "KillCall",
    "KillDue",
    "PermissionExpired",
    "RunCall",
    "StartOverdue",
]


class RunCall(msgspec.Struct, frozen=True, tag=True):
    """Told to a ToolActor to start its call; the first message it handles."""

    call_id: str


class AbortCall(msgspec.Struct, frozen=True, tag=True):
    """Told to a ToolActor to ask its call to stop early (the soft abort): its abort event is set."""

    call_id: str


class KillCall(msgspec.Struct, frozen=True, tag=True):
    """Told to a ToolActor to end its call now (the hard kill): its job is cancelled, a process group is
    killed, and the actor stops without reporting an outcome."""

    call_id: str


class CallStarted(msgspec.Struct, frozen=True, tag=True):
    """Told by a ToolActor (at address name ``actor``) to its supervisor once its call is running."""

    actor: str
    batch_id: str
    call_id: str


class CallFinished(msgspec.Struct, frozen=True, tag=True):
    """Told by a ToolActor (at address name ``actor``) to its supervisor with its call's outcome.

    ``abandoned`` says the tool's worker thread was left running (a thread tool that timed out or was
    aborted).
    """

    actor: str
    batch_id: str
    call_id: str
    outcome: ToolOutcome
    abandoned: bool = False


class PermissionExpired(msgspec.Struct, frozen=True, tag=True):
    """The ToolSupervisor to itself: call ``index`` of batch ``serial`` asked for permission too long ago."""

    serial: int
    index: int


class StartOverdue(msgspec.Struct, frozen=True, tag=True):
    """The ToolSupervisor to itself: call ``index`` of batch ``serial`` was told to start too long ago."""

    serial: int
    index: int


class GraceOver(msgspec.Struct, frozen=True, tag=True):
    """The ToolSupervisor to itself: batch ``serial``'s abort grace is over."""

    serial: int


class KillDue(msgspec.Struct, frozen=True, tag=True):
    """The ToolSupervisor to itself: what still runs of batch ``serial`` is to be killed now."""

    serial: int
