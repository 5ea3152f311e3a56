"""A batch of tool calls as the ToolSupervisor tracks it: the state of each call, the groups they run in,
and the outcomes of calls that did not report one themselves. Data and pure rules; the supervisor acts."""

from __future__ import annotations

import enum
import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from actors import Address, Down, ExitReason, Timer
from tool_bridge.messages import ToolInvocation
from tool_bridge.results import ToolOutcome, ToolStatus
from tool_bridge.tools import Tool

__all__ = ["Batch", "Call", "CallState", "ChildNames", "cancel", "ended", "groups", "why_down"]

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.:-]")


class CallState(enum.Enum):
    """Where a call of a batch is."""

    PENDING = "waiting for the calls before it"
    ASKING = "waiting for permission"
    STARTING = "told to start"
    RUNNING = "running"
    DONE = "done"


@dataclass(eq=False)
class Call:
    """One call of a batch: what the model asked, its decoded tool, where it is, and its outcome."""

    batch: Batch
    index: int
    invocation: ToolInvocation
    tool: Tool[Any] | None = None
    args: msgspec.Struct | None = None
    state: CallState = CallState.PENDING
    outcome: ToolOutcome | None = None
    child: str = ""
    actor: Address | None = None
    """The call's ToolActor, until it has ended."""
    started_at: float | None = None
    timer: Timer | None = None

    @property
    def call_id(self) -> str:
        return self.invocation.call_id

    @property
    def tool_name(self) -> str:
        return self.tool.name if self.tool is not None else self.invocation.name


@dataclass(eq=False)
class Batch:
    """One `RunTools`: its calls, the groups still to run, and whether it was aborted or reported."""

    serial: int
    batch_id: str
    reply_to: Address
    calls: list[Call] = field(default_factory=list)
    groups: deque[list[Call]] = field(default_factory=deque)
    current: list[Call] = field(default_factory=list)
    aborted: bool = False
    reported: bool = False
    grace: Timer | None = None
    kill: Timer | None = None


def groups(calls: Iterable[Call]) -> deque[list[Call]]:
    """Consecutive parallel-safe calls form one group; every other call is a group of its own."""
    groups: deque[list[Call]] = deque()
    joinable = False
    for call in calls:
        parallel = call.tool is not None and call.tool.parallel_safe
        if parallel and joinable:
            groups[-1].append(call)
        else:
            groups.append([call])
        joinable = parallel
    return groups


def ended(call: Call, status: ToolStatus, content: str) -> ToolOutcome:
    """The outcome of a call that did not report one itself."""
    started = call.started_at
    return ToolOutcome(
        call_id=call.call_id,
        tool=call.tool_name,
        content=content,
        is_error=True,
        status=status,
        interrupted=started is not None,
        duration=0.0 if started is None else time.monotonic() - started,
    )


def why_down(message: Down) -> str:
    """What the model reads for a call whose ToolActor ended before reporting an outcome."""
    if message.reason is ExitReason.CRASHED:
        return f"the tool crashed: {message.error}"
    if message.reason is ExitReason.KILLED:
        return "the tool crashed: its actor did not stop in time and was killed"
    return "the tool crashed: its actor stopped before reporting an outcome"


def cancel(timer: Timer | None) -> None:
    """Cancel ``timer`` if there is one."""
    if timer is not None:
        timer.cancel()


class ChildNames:
    """The names of a supervisor's call actors: ``call-<call id>`` with unsafe characters replaced by ``_``
    and ``-2``, ``-3``… when a name was used before, so no two calls ever share one."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def new(self, call_id: str) -> str:
        """A name never handed out before, for the call ``call_id``."""
        base = "call-" + (_UNSAFE_NAME.sub("_", call_id)[:64] or "_")
        name, number = base, 1
        while name in self._used:
            number += 1
            name = f"{base}-{number}"
        self._used.add(name)
        return name
