"""Session events: everything a session reports, persisted in its event log and published to subscribers.

Every event names its ``session`` and ``turn``. A turn ends with exactly one of :class:`TurnCompleted`,
:class:`TurnFailed` or :class:`TurnCancelled`, each carrying the turn's :class:`~shell.usage.TurnUsage`.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

import msgspec

from sampler import ImagePart

from .usage import TurnUsage

__all__ = [
    "TERMINAL_EVENTS",
    "AuthRefreshed",
    "CompactionFinished",
    "CompactionStarted",
    "DoomLoopWarning",
    "McpServerStatus",
    "ProjectionFallback",
    "PromptQueued",
    "Queued",
    "Retrying",
    "SessionEvent",
    "StepAnswered",
    "StepUsage",
    "SubagentEvent",
    "SubagentFinished",
    "SubagentStarted",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnResumed",
    "TurnStarted",
    "event_to_json_dict",
]


class TurnStarted(msgspec.Struct, frozen=True, tag=True, omit_defaults=True):
    """A prompt began a turn."""

    session: str
    turn: int
    prompt: str
    traceparent: str | None = None
    """The W3C trace context of the turn's span when telemetry traced it (else None, and left out of the
    JSON): stored with the turn, so a host that finds the turn interrupted continues its trace."""


class PromptQueued(msgspec.Struct, frozen=True, tag=True):
    """A prompt was acknowledged as turn ``turn`` but waits (a turn runs before it, or the host's turn
    limit is reached): it is stored, so that a host taking the session up after the process ended runs it
    in its turn. A prompt that starts its turn at once has none (its ``TurnStarted`` is stored instead)."""

    session: str
    turn: int
    text: str
    images: tuple[ImagePart, ...] = ()


class TurnResumed(msgspec.Struct, frozen=True, tag=True):
    """A host took over a turn that the process running it did not live to end, and goes on with it.

    ``steps_done`` model steps were stored before the process ended and are not requested again; the
    next step is ``steps_done + 1`` unless the last one's tool calls are finished first. ``attempt``
    counts the resumes of this turn (1 for the first). ``rerun`` are the calls without a stored result
    that run again (their tools are read-only or idempotent); ``interrupted`` are those that do not (they
    may have had side effects) and get an error result saying so. The turn still ends exactly once."""

    session: str
    turn: int
    steps_done: int
    attempt: int
    rerun: tuple[str, ...] = ()
    interrupted: tuple[str, ...] = ()


class TextDelta(msgspec.Struct, frozen=True, tag=True):
    """Text the model streamed (published, not stored one by one: the final message is)."""

    session: str
    turn: int
    text: str


class ThoughtDelta(msgspec.Struct, frozen=True, tag=True):
    """Reasoning the model streamed, where its provider streams it (published, never stored: it is not
    part of the answer and is not sent back to the model)."""

    session: str
    turn: int
    text: str


class StepUsage(msgspec.Struct, frozen=True, tag=True):
    """What one model step consumed, as its provider reported it (published, not stored: the turn's end
    carries the sum). The input and output of a step are the context it used."""

    session: str
    turn: int
    step: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


class McpServerStatus(msgspec.Struct, frozen=True, tag=True):
    """An MCP server the session uses became ``unavailable`` (its calls now fail at once; ``message`` says
    why and that it is retried) or came back (``ready``). Published, not stored: it is not part of a turn."""

    session: str
    server: str
    status: str
    restarts: int
    message: str


class Queued(msgspec.Struct, frozen=True, tag=True):
    """A model request of the turn waits at the host's provider gate: ``place`` in line (0: next),
    ``reason`` (``cool_down``, ``budget``, ``concurrency``) and the expected wait in seconds (None: until a
    request in flight ends). Waiting spends no retry attempt."""

    session: str
    turn: int
    place: int
    reason: str
    expected_wait: float | None


class Retrying(msgspec.Struct, frozen=True, tag=True):
    """A transient failure is being retried; text streamed by the failed attempt is void when
    ``discard_partial``."""

    session: str
    turn: int
    attempt: int
    max_attempts: int
    delay: float
    kind: str
    status: int | None
    message: str
    discard_partial: bool


class ProjectionFallback(msgspec.Struct, frozen=True, tag=True):
    """The provider rejected the request's shape; it is re-sent degraded (``projection``)."""

    session: str
    turn: int
    projection: str
    kind: str


class AuthRefreshed(msgspec.Struct, frozen=True, tag=True):
    """The provider refused the credentials; they were refreshed and the request resubmitted."""

    session: str
    turn: int
    attempt: int


class CompactionStarted(msgspec.Struct, frozen=True, tag=True):
    """Older history is being summarised (``reason``: ``proactive`` or ``overflow``)."""

    session: str
    turn: int
    reason: str
    estimated_tokens: int
    window: int


class CompactionFinished(msgspec.Struct, frozen=True, tag=True):
    """A compaction ended; ``ok`` false means it did not shrink the request enough, with the reason."""

    session: str
    turn: int
    ok: bool
    replaced: int
    tokens_before: int
    tokens_after: int
    message: str = ""


class ToolCallStarted(msgspec.Struct, frozen=True, tag=True):
    """The model's tool call began."""

    session: str
    turn: int
    call_id: str
    tool: str
    arguments: str


class ToolCallFinished(msgspec.Struct, frozen=True, tag=True):
    """A tool call ended; its result (error or not) goes back to the model."""

    session: str
    turn: int
    call_id: str
    tool: str
    is_error: bool
    status: str
    preview: str


class StepAnswered(msgspec.Struct, frozen=True, tag=True):
    """A step of the turn ended with an answer that has text and calls tools: ``text`` is what the model
    wrote in that step, stored before the step's tool calls start. With it, a turn's stored events hold
    its whole text (this event for each such step, then the last step's in :class:`TurnCompleted`), so a
    client that resumes from the store shows what a live one saw. Steps without text emit none."""

    session: str
    turn: int
    step: int
    text: str


class DoomLoopWarning(msgspec.Struct, frozen=True, tag=True):
    """The model repeats itself; it was reminded to change approach. A second detection fails the turn."""

    session: str
    turn: int
    reason: str


class TurnCompleted(msgspec.Struct, frozen=True, tag=True):
    """The turn ended with an assistant message without tool calls; ``text`` is that last step's text
    (the text of earlier steps, which called tools, is in their :class:`StepAnswered` events).
    ``finish_reason`` is why the model stopped that last answer, as :class:`sampler.FinishReason` names it:
    ``length`` when it ran into its output limit, so the answer may be cut short. A turn completed by a
    resume from its stored answer, and a turn stored before the field existed, say ``stop``."""

    session: str
    turn: int
    text: str
    steps: int
    usage: TurnUsage = TurnUsage()
    finish_reason: str = "stop"


class TurnFailed(msgspec.Struct, frozen=True, tag=True):
    """The turn failed; ``kind`` names why and ``message`` says what to do."""

    session: str
    turn: int
    kind: str
    message: str
    usage: TurnUsage = TurnUsage()


class TurnCancelled(msgspec.Struct, frozen=True, tag=True):
    """The turn was cancelled: ``user_cancelled``, ``aborted`` (by the program) or ``interrupted`` (the
    process ended while it ran, and the turn was not resumed: resuming is off, or it was resumed
    ``host.max_resumes_per_turn`` times already)."""

    session: str
    turn: int
    reason: str
    usage: TurnUsage = TurnUsage()


class SubagentStarted(msgspec.Struct, frozen=True, tag=True):
    """The ``agent`` tool call ``call_id`` of turn ``turn`` runs the child session ``child`` with the profile
    ``profile`` (or takes it up again: ``reattached``, after a resume of the parent's turn). Exactly one
    :class:`SubagentFinished` with the same ``call_id`` follows, unless the parent's host ends first."""

    session: str
    turn: int
    call_id: str
    child: str
    profile: str
    description: str
    reattached: bool = False


class SubagentFinished(msgspec.Struct, frozen=True, tag=True):
    """The child session of an ``agent`` call ended, and the call has its one result: ``outcome`` is
    ``completed``, ``failed`` (``message`` says its kind and why), ``cancelled`` (with the parent's turn) or
    ``deadline`` (it ran past its profile's deadline and was cancelled). ``usage`` is the child's turn's."""

    session: str
    turn: int
    call_id: str
    child: str
    profile: str
    outcome: str
    message: str = ""
    usage: TurnUsage = TurnUsage()


class SubagentEvent(msgspec.Struct, frozen=True, tag=True):
    """An event of the child session of ``call_id`` (its own ``session`` is ``child``), relayed on its
    parent's stream as ``event`` (its JSON object, with its ``type``); text deltas are not relayed.
    Published, not stored: the child's own log has it."""

    session: str
    turn: int
    call_id: str
    child: str
    event: dict[str, Any]


SessionEvent: TypeAlias = (
    TurnStarted
    | PromptQueued
    | TurnResumed
    | TextDelta
    | ThoughtDelta
    | StepUsage
    | McpServerStatus
    | Queued
    | Retrying
    | ProjectionFallback
    | AuthRefreshed
    | CompactionStarted
    | CompactionFinished
    | ToolCallStarted
    | ToolCallFinished
    | StepAnswered
    | DoomLoopWarning
    | SubagentStarted
    | SubagentFinished
    | SubagentEvent
    | TurnCompleted
    | TurnFailed
    | TurnCancelled
)
"""Every event a session emits."""

TERMINAL_EVENTS = (TurnCompleted, TurnFailed, TurnCancelled)
"""The events that end a turn."""

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def event_to_json_dict(event: msgspec.Struct) -> dict[str, Any]:
    """The event as a JSON object whose ``type`` is its name in snake case (``turn_started``)."""
    body: dict[str, Any] = msgspec.to_builtins(event)
    body.pop("type", None)
    return {"type": _CAMEL.sub("_", type(event).__name__).lower(), **body}
