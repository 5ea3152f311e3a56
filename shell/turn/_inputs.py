"""What a turn can be told: the answers to its own asks, timers, the user, siblings and the host.

The sampler's and the tool runner's own messages (``StepText``, ``StepRetrying``, ``StepProjectionFallback``,
``Completed``, ``Failed``, ``Cancelled``, ``ToolCallBegan``, ``ToolCallEnded``, ``ToolsFinished``) are inputs
too, as they come.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sampler import (
    Cancelled,
    Completed,
    Failed,
    StepProjectionFallback,
    StepQueued,
    StepRetrying,
    StepState,
    StepText,
    StepThought,
)
from tool_bridge.messages import ToolCallBegan, ToolCallEnded, ToolsFinished

from .. import events as ev
from .._protocol import BuiltRequest, CompactionTask
from ..messages import UserPrompt
from ._resume import ResumePlan

__all__ = [
    "SIBLING_MESSAGES",
    "ActionFailed",
    "AuthDone",
    "Begin",
    "CancelRequested",
    "CompactionApplied",
    "CompactionPlanned",
    "OutputsStubbed",
    "ProbeDue",
    "RequestBuilt",
    "Restarted",
    "ResubmitDue",
    "Resume",
    "Shutdown",
    "Sibling",
    "SiblingDown",
    "StepChecked",
    "TurnInput",
    "WindowLearned",
]


class Sibling(enum.StrEnum):
    """The session's siblings whose crash a turn must ride out."""

    SAMPLER = "sampler"
    TOOLS = "tools"


@dataclass(frozen=True, slots=True)
class Begin:
    """Start the turn; its prompt is already in the history. ``started`` is the turn's ``TurnStarted`` when
    it is stored too (with the prompt): the turn then publishes it as it is, without storing it again."""

    prompt: UserPrompt
    started: ev.TurnStarted | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """Go on with a turn that the process running it did not live to end, as ``plan`` says (see
    :func:`~shell.turn.plan_resume`); its prompt and stored steps are already in the history."""

    plan: ResumePlan


@dataclass(frozen=True, slots=True)
class RequestBuilt:
    """The answer to :class:`~shell.turn.AskBuild`."""

    built: BuiltRequest


@dataclass(frozen=True, slots=True)
class CompactionPlanned:
    """The answer to :class:`~shell.turn.AskPlan`: the summary requests, or None when nothing can be
    compacted."""

    task: CompactionTask | None


@dataclass(frozen=True, slots=True)
class CompactionApplied:
    """The answer to :class:`~shell.turn.AskApply`: the estimated request size before and after."""

    before: int
    after: int


@dataclass(frozen=True, slots=True)
class OutputsStubbed:
    """The answer to :class:`~shell.turn.AskStub`: how many old tool outputs were cut to stubs."""

    count: int


@dataclass(frozen=True, slots=True)
class WindowLearned:
    """The answer to :class:`~shell.turn.AskLearnWindow`: the effective context window now."""

    window: int


@dataclass(frozen=True, slots=True)
class StepChecked:
    """The answer to :class:`~shell.turn.AskStepStatus`; ``state`` None when the sampler did not answer."""

    request_id: str
    state: StepState | None


@dataclass(frozen=True, slots=True)
class ProbeDue:
    """The timer of :class:`~shell.turn.ArmProbe` went off."""

    request_id: str


@dataclass(frozen=True, slots=True)
class AuthDone:
    """The credential refresh of :class:`~shell.turn.StartAuthRefresh` ended; ``error`` None on success."""

    error: str | None


@dataclass(frozen=True, slots=True)
class ResubmitDue:
    """The delay of :class:`~shell.turn.ScheduleResubmit` is over."""


@dataclass(frozen=True, slots=True)
class CancelRequested:
    """The user (or the program) cancels the turn with ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class SiblingDown:
    """An incarnation of a sibling ended abnormally; what it was handling may be lost."""

    sibling: Sibling
    error: str


@dataclass(frozen=True, slots=True)
class Restarted:
    """The SessionActor was restarted: an answer the previous incarnation waited for may be lost."""


@dataclass(frozen=True, slots=True)
class Shutdown:
    """The session is stopping: end the turn now, keeping the history paired. ``failure`` None: it was
    asked to stop (the turn is cancelled ``aborted``); else its subtree is going down on its own (it
    gave up after repeated crashes) and the turn fails ``internal`` with that message. ``unperformed``
    are the actions cut off by the stop, which did not happen."""

    failure: str | None = None
    unperformed: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class ActionFailed:
    """Performing an action failed (the history or its store did not answer): the turn cannot go on.
    ``unperformed`` are that action and the ones after it in its list, which did not happen."""

    kind: str
    message: str
    unperformed: tuple[object, ...] = ()


TurnInput = (
    Begin
    | Resume
    | RequestBuilt
    | CompactionPlanned
    | CompactionApplied
    | OutputsStubbed
    | WindowLearned
    | StepChecked
    | ProbeDue
    | AuthDone
    | ResubmitDue
    | CancelRequested
    | SiblingDown
    | Restarted
    | Shutdown
    | ActionFailed
    | StepText
    | StepThought
    | StepQueued
    | StepRetrying
    | StepProjectionFallback
    | Completed
    | Failed
    | Cancelled
    | ToolCallBegan
    | ToolCallEnded
    | ToolsFinished
    | ev.SubagentStarted
    | ev.SubagentFinished
)
"""Everything :meth:`~shell.turn.TurnMachine.feed` accepts."""

SIBLING_MESSAGES: tuple[type, ...] = (
    StepText,
    StepThought,
    StepQueued,
    StepRetrying,
    StepProjectionFallback,
    Completed,
    Failed,
    Cancelled,
    ToolCallBegan,
    ToolCallEnded,
    ToolsFinished,
    ev.SubagentStarted,
    ev.SubagentFinished,
)
"""The sampler's and the tool supervisor's messages (and the news of the turn's ``agent`` calls) that are
turn inputs as they come: a session hands them to its turn unchanged."""
