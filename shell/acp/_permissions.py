"""The client's answer to ``session/request_permission`` as the session's :class:`PermissionDecision`.
Pure. Anything but a selected allow option is a denial: a reject, a cancelled question, an error answer,
an answer that does not have the schema's shape, an option the agent did not offer, no answer in time."""

from __future__ import annotations

from typing import Any

import msgspec

from tool_bridge import PermissionDecision

from ._schema import PermissionOutcomeSelected, RequestPermissionResponse
from ._updates import ALLOW_ALWAYS, ALLOW_ONCE

__all__ = ["decision_from_answer", "denial"]

_decoder = msgspec.json.Decoder(RequestPermissionResponse)


def denial(call_id: str, reason: str) -> PermissionDecision:
    """A denial of the call ``call_id`` saying why."""
    return PermissionDecision(call_id, "deny", reason=reason)


def decision_from_answer(
    call_id: str, result: msgspec.Raw | None, error: dict[str, Any] | None
) -> PermissionDecision:
    """The decision the client's answer (its ``result`` JSON, or its ``error``) makes for ``call_id``."""
    if error is not None or result is None:
        message = error.get("message", "") if isinstance(error, dict) else ""
        return denial(
            call_id, f"the editor answered the permission request with an error: {message}".rstrip(": ")
        )
    try:
        answer = _decoder.decode(result)
    except msgspec.DecodeError:
        return denial(call_id, "the editor's answer to the permission request could not be read")
    outcome = answer.outcome
    if not isinstance(outcome, PermissionOutcomeSelected):
        return denial(call_id, "the permission request was cancelled")
    if outcome.option_id == ALLOW_ONCE:
        return PermissionDecision(call_id, "allow_once")
    if outcome.option_id == ALLOW_ALWAYS:
        return PermissionDecision(call_id, "allow_always")
    return denial(call_id, "the user rejected it")
