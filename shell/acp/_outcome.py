"""How a turn's end answers its ``session/prompt``: a stop reason, or a JSON-RPC error. Pure.

| the turn ended                                   | the answer                                     |
| ------------------------------------------------ | ---------------------------------------------- |
| after a ``session/cancel`` was read for it       | ``cancelled``, whatever the outcome            |
| ``TurnCancelled`` (any reason)                   | ``cancelled``                                  |
| ``TurnCompleted``, last step stopped on length  | ``max_tokens``                                 |
| ``TurnCompleted``                                | ``end_turn``                                   |
| ``TurnFailed`` ``max_steps`` or ``doom_loop``    | ``max_turn_requests``                          |
| ``TurnFailed`` ``context_overflow``              | ``max_tokens``                                 |
| ``TurnFailed`` ``auth``                          | error -32000                                   |
| ``TurnFailed`` any other kind                    | error -32603 with ``data`` (below)             |

The ``data`` of an error is ``{kind, message, retryable, session, turn}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .. import events as ev
from .._secrets import redact_known
from ._jsonrpc import AUTH_REQUIRED, INTERNAL_ERROR
from ._schema import StopReason

__all__ = ["RETRYABLE_KINDS", "Failure", "Outcome", "Stop", "failure_data", "outcome_of"]

RETRYABLE_KINDS: Final = frozenset(
    {
        "connection",
        "timeout",
        "status",
        "rate_limit",
        "overloaded",
        "empty_response",
        "syntax",
        "internal",
        "store",
        "fenced",
        "aborted",
    }
)
"""Failure kinds after which sending the same prompt again may well succeed (the cause was transient or
the agent's own); the others (quota, a refused request, a filter, …) need something changed first."""


@dataclass(frozen=True, slots=True)
class Stop:
    """A ``session/prompt`` answered with ``{"stopReason": reason}``."""

    reason: StopReason


@dataclass(frozen=True, slots=True)
class Failure:
    """A ``session/prompt`` answered with a JSON-RPC error."""

    code: int
    message: str
    data: dict[str, Any]


Outcome: TypeAlias = Stop | Failure
"""The one answer of a prompt."""


def failure_data(kind: str, message: str, *, session: str, turn: int | None) -> dict[str, Any]:
    """The ``data`` of an error answer: what failed, in words with known secrets replaced by markers,
    whether trying again may help, and which session and turn."""
    return {
        "kind": kind,
        "message": redact_known(message),
        "retryable": kind in RETRYABLE_KINDS,
        "session": session,
        "turn": turn,
    }


def outcome_of(event: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled, *, cancel_read: bool) -> Outcome:
    """The answer of the prompt whose turn ended with ``event``; ``cancel_read`` says whether a cancel of
    it was read before its end was (then it is ``cancelled``, whatever the turn did)."""
    if cancel_read or isinstance(event, ev.TurnCancelled):
        return Stop("cancelled")
    if isinstance(event, ev.TurnCompleted):
        return Stop("max_tokens" if event.finish_reason == "length" else "end_turn")
    kind = event.kind
    if kind in ("max_steps", "doom_loop"):
        return Stop("max_turn_requests")
    if kind == "context_overflow":
        return Stop("max_tokens")
    data = failure_data(kind, event.message, session=event.session, turn=event.turn)
    if kind == "auth":
        return Failure(AUTH_REQUIRED, f"authentication required: {data['message']}", data)
    return Failure(INTERNAL_ERROR, f"the turn failed ({kind}): {data['message']}", data)
