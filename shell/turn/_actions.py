"""What a turn asks its session to do. The session performs them in order.

An ``Ask…`` action is a question to the session's history or sampler whose answer comes back as an input
(:class:`AskBuild` → ``RequestBuilt``, …); the machine puts it last in the list it returns, so the answer
is fed before anything else happens. :class:`Finish` is last too: nothing follows it, ever.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from sampler import Message, ModelRequest
from tool_bridge.messages import ToolInvocation

from .. import events as ev

__all__ = [
    "AppendMessage",
    "ArmProbe",
    "AskApply",
    "AskBuild",
    "AskLearnWindow",
    "AskPlan",
    "AskStepStatus",
    "AskStub",
    "Emit",
    "Finish",
    "Publish",
    "ScheduleResubmit",
    "SendSample",
    "StartAuthRefresh",
    "StartTools",
    "StopSample",
    "StopTools",
    "TellCalibrate",
    "TurnAction",
    "TurnEnd",
]

TurnEnd = ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled
"""The three ways a turn ends."""


@dataclass(frozen=True, slots=True)
class AppendMessage:
    """Append ``message`` to the history (persisted before it returns)."""

    message: Message


@dataclass(frozen=True, slots=True)
class Emit:
    """Persist ``event`` in the session's event log, then publish it."""

    event: msgspec.Struct


@dataclass(frozen=True, slots=True)
class Publish:
    """Publish ``event`` to subscribers without persisting it (text deltas)."""

    event: msgspec.Struct


@dataclass(frozen=True, slots=True)
class TellCalibrate:
    """Tell the history how many tokens the provider counted for a request it estimated."""

    estimated: int
    reported: int


@dataclass(frozen=True, slots=True)
class AskBuild:
    """Ask the history for the step's request; answered by ``RequestBuilt``."""


@dataclass(frozen=True, slots=True)
class AskPlan:
    """Ask the history for a compaction plan (``chunk_tokens``: summarise in chunks of that size);
    answered by ``CompactionPlanned``."""

    chunk_tokens: int | None


@dataclass(frozen=True, slots=True)
class AskApply:
    """Ask the history to replace ``replaced`` with ``summary``; answered by ``CompactionApplied``."""

    replaced: tuple[int, ...]
    summary: str


@dataclass(frozen=True, slots=True)
class AskStub:
    """Ask the history to cut old tool outputs to stubs; answered by ``OutputsStubbed``."""


@dataclass(frozen=True, slots=True)
class AskLearnWindow:
    """Ask the history to remember a smaller context window; answered by ``WindowLearned``."""

    tokens: int


@dataclass(frozen=True, slots=True)
class AskStepStatus:
    """Ask the sampler whether it still has ``request_id``; answered by ``StepChecked``."""

    request_id: str


@dataclass(frozen=True, slots=True)
class SendSample:
    """Tell the sampler to run ``request`` as ``request_id``."""

    request_id: str
    memory_key: str
    request: ModelRequest


@dataclass(frozen=True, slots=True)
class StopSample:
    """Tell the sampler to abandon ``request_id`` (it answers ``Cancelled`` if it still had it)."""

    request_id: str


@dataclass(frozen=True, slots=True)
class ArmProbe:
    """In ``delay`` seconds, feed ``ProbeDue(request_id)`` (replacing any earlier probe)."""

    request_id: str
    delay: float


@dataclass(frozen=True, slots=True)
class StartTools:
    """Tell the tool runner to run the batch; it answers ``ToolsFinished`` exactly once."""

    batch_id: str
    invocations: tuple[ToolInvocation, ...]


@dataclass(frozen=True, slots=True)
class StopTools:
    """Tell the tool runner to abort the batch (grace, then kill; it still answers ``ToolsFinished``)."""

    batch_id: str


@dataclass(frozen=True, slots=True)
class StartAuthRefresh:
    """Refresh the credentials in the background; feed ``AuthDone`` when it ends."""


@dataclass(frozen=True, slots=True)
class ScheduleResubmit:
    """In ``delay`` seconds, feed ``ResubmitDue``."""

    delay: float


@dataclass(frozen=True, slots=True)
class Finish:
    """The turn is over: record ``event`` as its end (persisted, then published). Always the last action."""

    event: TurnEnd


TurnAction = (
    AppendMessage
    | Emit
    | Publish
    | TellCalibrate
    | AskBuild
    | AskPlan
    | AskApply
    | AskStub
    | AskLearnWindow
    | AskStepStatus
    | SendSample
    | StopSample
    | ArmProbe
    | StartTools
    | StopTools
    | StartAuthRefresh
    | ScheduleResubmit
    | Finish
)
"""Everything :meth:`~shell.turn.TurnMachine.feed` may ask for."""
