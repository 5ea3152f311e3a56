"""What a sampling step reports, as frozen messages: text and notices on the way, then one outcome.

The notices are named for the step (``StepText``, ``StepRetrying``...): the session turns them into its own
events (:class:`shell.events.TextDelta`, :class:`shell.events.Retrying`...), which are stored and published.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import msgspec

from .errors import LlmError, LlmErrorKind
from .messages import AssistantMessage, FinishReason, Usage

__all__ = [
    "Cancelled",
    "Completed",
    "Failed",
    "Outcome",
    "Projection",
    "SamplerEvent",
    "StepProjectionFallback",
    "StepQueued",
    "StepRetrying",
    "StepText",
    "StepThought",
]


class Projection(enum.StrEnum):
    """How a request was re-shaped so that the provider accepts it."""

    DEGRADED_MEDIA = "degraded_media"
    """Only the 2 newest media parts kept; older ones replaced by a placeholder."""
    STRIPPED_MEDIA = "stripped_media"
    """Every media part replaced by a placeholder."""
    STRICT_STRUCTURE = "strict_structure"
    """Tool results moved next to their calls, orphans turned to text, roles merged."""


class StepText(msgspec.Struct, frozen=True, tag=True):
    """Text streamed by the current attempt (several tokens coalesced)."""

    request_id: str
    text: str


class StepThought(msgspec.Struct, frozen=True, tag=True):
    """Reasoning streamed by the current attempt, where the provider streams it (several pieces
    coalesced). It is shown, never part of the answer, and not sent back to the model."""

    request_id: str
    text: str


class StepQueued(msgspec.Struct, frozen=True, tag=True):
    """The request has waited at the host's provider gate longer than its threshold: ``place`` in line (0:
    next), ``reason`` (``cool_down``, ``budget`` or ``concurrency``) and the expected wait in seconds (None:
    until a request in flight ends). Waiting spends no retry attempt."""

    request_id: str
    place: int
    reason: str
    expected_wait: float | None


class StepRetrying(msgspec.Struct, frozen=True, tag=True):
    """Attempt ``attempt`` of ``max_attempts`` failed with a transient error; the next starts after
    ``delay`` seconds. When ``discard_partial`` is true, text streamed by the failed attempt is void."""

    request_id: str
    attempt: int
    max_attempts: int
    delay: float
    kind: LlmErrorKind
    status: int | None
    message: str
    discard_partial: bool
    usage: Usage | None = None
    """What the failed attempt consumed, when the provider reported it (the account pays for it)."""


class StepProjectionFallback(msgspec.Struct, frozen=True, tag=True):
    """The provider rejected the request's shape; it is re-sent with ``projection``, without spending a
    retry attempt. Text streamed before it is void."""

    request_id: str
    projection: Projection
    kind: LlmErrorKind
    usage: Usage | None = None
    """What the rejected attempt consumed, when the provider reported it."""


class Completed(msgspec.Struct, frozen=True, tag=True):
    """The step produced an assistant message; ``usage`` is its last attempt's (earlier attempts' usage
    came with their :class:`StepRetrying` or :class:`StepProjectionFallback`)."""

    request_id: str
    message: AssistantMessage
    usage: Usage | None
    finish_reason: FinishReason
    attempts: int
    projections: tuple[Projection, ...] = ()
    response_model: str | None = None
    """The model that answered, as the provider named it (None when it did not)."""


class Failed(msgspec.Struct, frozen=True, tag=True):
    """The step failed for good: not retryable, or out of attempts. ``error.kind`` says why."""

    request_id: str
    error: LlmError
    attempts: int
    usage: Usage | None = None
    """What the last attempt consumed, when the provider reported it (earlier ones: their StepRetrying)."""


class Cancelled(msgspec.Struct, frozen=True, tag=True):
    """The step was cancelled; ``partial`` is what the current attempt had streamed (marked interrupted)."""

    request_id: str
    partial: AssistantMessage
    attempts: int
    usage: Usage | None = None
    """What the cut attempt had consumed, when the provider had reported it."""


Outcome: TypeAlias = Completed | Failed | Cancelled
"""How a step ends: exactly one of these."""

SamplerEvent: TypeAlias = (
    StepText
    | StepThought
    | StepQueued
    | StepRetrying
    | StepProjectionFallback
    | Completed
    | Failed
    | Cancelled
)
"""Everything a step reports."""
