"""The messages of the tool bridge.

A session tells `RunTools` and `AbortTools` to its ToolSupervisor and hears back `ToolCallBegan`,
`ToolCallEnded`, `PermissionRequested` (from `tool_bridge.permissions`), `ToolAbandoned` and exactly one
`ToolsFinished` per batch; it answers permission requests with a `PermissionDecision` told to the
ToolSupervisor. What the ToolSupervisor and its ToolActors say to each other is private
(`tool_bridge._protocol`).
"""

from __future__ import annotations

import msgspec

from tool_bridge.results import ToolOutcome

__all__ = [
    "AbortTools",
    "RunTools",
    "ToolAbandoned",
    "ToolCallBegan",
    "ToolCallEnded",
    "ToolInvocation",
    "ToolsFinished",
]


class ToolInvocation(msgspec.Struct, frozen=True, tag=True):
    """One call the model made: its id, the tool's name, and the arguments as raw JSON text."""

    call_id: str
    name: str
    arguments: str


class RunTools(msgspec.Struct, frozen=True, tag=True):
    """Run the calls of one model step. ``reply_to`` is the address name that hears about them.

    Exactly one `ToolsFinished` answers it, with one outcome per call in the order of ``calls``.
    """

    batch_id: str
    calls: tuple[ToolInvocation, ...]
    reply_to: str
    traceparent: str | None = None
    """The W3C trace context the calls run in (the turn's span), when the host traces its turns."""


class ToolCallBegan(msgspec.Struct, frozen=True, tag=True):
    """A call has been allowed and its tool has started running."""

    batch_id: str
    call_id: str
    tool: str


class ToolCallEnded(msgspec.Struct, frozen=True, tag=True):
    """A call of a batch has its outcome, told as soon as it has one (before the batch's `ToolsFinished`,
    which repeats it), so that the session can store each result as it comes. At most one per call; a
    call may have none (its outcome was decided as the batch ended), and `ToolsFinished` stays the whole
    answer."""

    batch_id: str
    outcome: ToolOutcome


class ToolsFinished(msgspec.Struct, frozen=True, tag=True):
    """Every call of a batch has an outcome (result, error, denied, invalid, timed_out, aborted or crashed),
    in the order of the calls. Told exactly once per `RunTools`, whatever the tools did."""

    batch_id: str
    outcomes: tuple[ToolOutcome, ...]


class AbortTools(msgspec.Struct, frozen=True, tag=True):
    """The turn is cancelled: stop the batch's calls. Calls that end within the abort grace keep their
    outcome; the others are recorded ``aborted``; what still runs at the kill deadline is killed."""

    batch_id: str


class ToolAbandoned(msgspec.Struct, frozen=True, tag=True):
    """A call's tool could not be stopped (a worker thread cannot be interrupted) and was left to finish in
    the background; whatever it returns is discarded."""

    batch_id: str
    call_id: str
    tool: str
    reason: str
