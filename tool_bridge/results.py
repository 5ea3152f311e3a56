"""What a tool call ends as: one `ToolOutcome`, whatever happened."""

from __future__ import annotations

import enum

import msgspec

__all__ = ["ToolOutcome", "ToolResultError", "ToolStatus"]


class ToolStatus(enum.StrEnum):
    """How a tool call ended.

    ``ok`` is the only status whose outcome is not an error for the model.
    """

    OK = "ok"
    """The tool ran to completion and reported success."""
    ERROR = "error"
    """The tool ran and failed: it raised, or (for a process) exited non-zero."""
    DENIED = "denied"
    """A permission rule, the host, or a pre-tool hook refused the call; the tool never ran."""
    TIMED_OUT = "timed_out"
    """The call exceeded its time limit and was stopped."""
    ABORTED = "aborted"
    """The call was asked to stop early (a cancelled turn) and stopped."""
    INVALID = "invalid"
    """The call could not be decoded: unknown tool, malformed JSON, or arguments not matching the schema."""
    CRASHED = "crashed"
    """Whatever was running the call died before it could report an outcome."""


class ToolOutcome(msgspec.Struct, frozen=True, tag=True):
    """The result of one tool call, as it goes back to the model and into the session's history.

    ``is_error`` is true for every status except ``ok``; ``content`` is what the model reads.
    ``interrupted`` says the call was stopped before it finished (timeout, abort), in which case
    ``content`` holds whatever output it had produced by then.  ``duration`` is in seconds.
    """

    call_id: str
    tool: str
    content: str
    is_error: bool
    status: ToolStatus
    interrupted: bool = False
    duration: float = 0.0


class ToolResultError(msgspec.Struct, frozen=True):
    """A tool call refused before it could run, carrying the message the model is shown.

    It is not an exception: `ToolRegistry.decode_call` returns it so that a bad call becomes an
    ``is_error`` result the model can correct, never a raised error.
    """

    tool: str
    message: str
    status: ToolStatus = ToolStatus.INVALID

    def to_outcome(self, call_id: str, *, duration: float = 0.0) -> ToolOutcome:
        """Return the `ToolOutcome` reporting this refusal for the call ``call_id``."""
        return ToolOutcome(
            call_id=call_id,
            tool=self.tool,
            content=self.message,
            is_error=True,
            status=self.status,
            duration=duration,
        )
