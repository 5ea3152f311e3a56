"""The one result of an ``agent`` call, from how its child's turn ended: a pure mapping."""

from __future__ import annotations

from dataclasses import dataclass

from .. import events as ev
from ..usage import TurnUsage

__all__ = ["ChildResult", "result_of"]

_PARTIAL_KEPT = 2_000
"""Characters of a cut-off child's partial answer kept in the result (its end: the latest text)."""


@dataclass(frozen=True, slots=True)
class ChildResult:
    """What an ``agent`` call returns, and what its ``SubagentFinished`` says."""

    outcome: str
    """``completed``, ``failed``, ``cancelled`` or ``deadline``."""
    message: str
    """Why, for an outcome other than ``completed`` (else empty)."""
    content: str
    """The tool result the parent's model reads."""
    is_error: bool
    usage: TurnUsage


def result_of(
    profile: str,
    end: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled | None,
    *,
    deadline: float | None,
    partial: str,
    output_cap: int,
) -> ChildResult:
    """The result of a call whose child (of profile ``profile``) ended with ``end`` (None: no end was
    heard). ``deadline`` is set when the call cancelled its child for running past it; ``partial`` is the
    text the child streamed so far. A completed child's answer is its result, cut to ``output_cap``
    characters; every other end is an ``is_error`` result saying what happened."""
    usage = end.usage if end is not None else TurnUsage()
    if deadline is not None:
        message = f"ran past its deadline of {deadline:g} s and was cancelled"
        content = f"subagent {profile} {message}" + _partial(partial)
        return ChildResult("deadline", message, content, True, usage)
    if isinstance(end, ev.TurnCompleted):
        return ChildResult("completed", "", _bounded(end.text, output_cap), False, usage)
    if isinstance(end, ev.TurnFailed):
        message = f"{end.kind}: {end.message}"
        return ChildResult("failed", message, f"subagent {profile} failed: {message}", True, usage)
    if isinstance(end, ev.TurnCancelled):
        message = f"cancelled ({end.reason})"
        return ChildResult(
            "cancelled", message, f"subagent {profile} was {message}" + _partial(partial), True, usage
        )
    message = "internal: its turn ended without an end the call could hear"
    return ChildResult("failed", message, f"subagent {profile} failed: {message}", True, usage)


def _partial(text: str) -> str:
    text = text.strip()
    if not text:
        return "; it had no partial answer"
    if len(text) > _PARTIAL_KEPT:
        text = "…" + text[-_PARTIAL_KEPT:]
    return f"; its partial answer:\n{text}"


def _bounded(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n[… {len(text) - cap} more characters of the subagent's answer were cut]"
