"""Every recovery decision of a turn in one place: what a sampler ``Failed`` or a failed compaction leads
to — a recovery with bounded tries, or a clear failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from sampler import FILTERED_MESSAGE, LlmError, LlmErrorKind

__all__ = [
    "COMPACTION_GAVE_UP",
    "MAX_AUTH_REFRESHES",
    "QUOTA_USED_UP",
    "CompactAndResubmit",
    "FailTurn",
    "RecoveryAction",
    "RecoveryBridge",
    "RefreshAuthAndResubmit",
    "StubOldOutputs",
    "SummariseInChunks",
    "SummaryRecovery",
]

MAX_AUTH_REFRESHES = 2
"""Refreshes tried within one step before an auth failure ends the turn."""

QUOTA_USED_UP = "The account's credit or budget is used up: top it up or raise the limit, then try again."
"""How a ``quota_exhausted`` turn failure begins; the provider's own words follow."""

COMPACTION_GAVE_UP = "Compaction failed to bring the context under the model window after {n} attempts."


@dataclass(frozen=True, slots=True)
class RefreshAuthAndResubmit:
    """Refresh the credentials, wait ``delay`` seconds, and send the same step again."""

    attempt: int
    delay: float


@dataclass(frozen=True, slots=True)
class CompactAndResubmit:
    """Compact the history and send the step again; ``learned_window`` is the window to remember."""

    cycle: int
    learned_window: int | None


@dataclass(frozen=True, slots=True)
class FailTurn:
    """End the turn as failed, with ``kind`` and a message that says what to do."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class SummariseInChunks:
    """The summary request was itself too large: summarise again in chunks of ``chunk_tokens``."""

    chunk_tokens: int


@dataclass(frozen=True, slots=True)
class StubOldOutputs:
    """No summary can be had: cut old tool outputs to short stubs instead (done at most once)."""


RecoveryAction: TypeAlias = RefreshAuthAndResubmit | CompactAndResubmit | FailTurn
SummaryRecovery: TypeAlias = RefreshAuthAndResubmit | SummariseInChunks | StubOldOutputs | FailTurn

_START_OVER = "Start a new session or raise the context window."

_AFTER_REPAIR = {
    LlmErrorKind.REQUEST_STRUCTURE: (
        "The provider rejected the conversation's structure although the history had been repaired (every "
        "tool call paired with one result, orphan results dropped, empty images replaced) and the request "
        "re-sent in the strictest structure where that changed it. The turn failed; the session stays "
        "usable, and the next request is built from the merged history."
    ),
    LlmErrorKind.IMAGE_FORMAT: (
        "The provider rejected an image although images had been repaired (empty ones replaced) and the "
        "request re-sent without media where it had any. The turn failed; the session stays usable, and "
        "the next request replaces the history's images by placeholders."
    ),
}


class RecoveryBridge:
    """Decides, per step, how a failure is recovered — with bounded tries, never a loop.

    ``auth`` → :class:`RefreshAuthAndResubmit` up to :data:`MAX_AUTH_REFRESHES` times; ``context_overflow``
    (and ``request_too_large`` when the estimate is at least half the window) → :class:`CompactAndResubmit`
    up to ``max_compactions`` consecutive cycles, learning the window as 85 % of the estimate; a filtered
    answer → ``provider_filtered`` with the provider's own message; ``quota_exhausted`` says that the
    account's credit or budget is used up, in the provider's words; ``request_structure`` and
    ``image_format`` (which reach the session only after the sampler's re-shaped requests failed too) say
    which repairs were tried; anything else fails the turn with the error's kind and message.
    Call :meth:`step_succeeded` when a step completes, so the counters start again.
    """

    def __init__(self, *, max_compactions: int = 3, auth_backoff: float = 0.5) -> None:
        self._max_compactions = max_compactions
        self._auth_backoff = auth_backoff
        self._auth_tries = 0
        self._compactions = 0

    def step_succeeded(self) -> None:
        """A step completed: the next failure starts from zero tries."""
        self._auth_tries = 0
        self._compactions = 0

    def on_failed(self, error: LlmError, *, estimated_tokens: int, window: int) -> RecoveryAction:
        """The action for ``error``, given the request's estimated size and the effective window."""
        if error.filtered:
            return FailTurn("provider_filtered", error.message or FILTERED_MESSAGE)
        if error.kind is LlmErrorKind.AUTH:
            if self._auth_tries >= MAX_AUTH_REFRESHES:
                return FailTurn(
                    "auth",
                    "The provider still refuses the credentials after refreshing them "
                    f"{self._auth_tries} times ({error.message}). Log in again or fix the API key.",
                )
            self._auth_tries += 1
            return RefreshAuthAndResubmit(self._auth_tries, self._auth_backoff * self._auth_tries)
        overflow = error.kind is LlmErrorKind.CONTEXT_OVERFLOW or (
            error.kind is LlmErrorKind.REQUEST_TOO_LARGE and estimated_tokens >= 0.5 * window
        )
        if overflow:
            if self._compactions >= self._max_compactions:
                return FailTurn("context_overflow", COMPACTION_GAVE_UP.format(n=self._max_compactions))
            self._compactions += 1
            learned = int(estimated_tokens * 0.85) if error.kind is LlmErrorKind.CONTEXT_OVERFLOW else None
            return CompactAndResubmit(self._compactions, learned)
        message = error.message or f"the provider failed ({error.kind})"
        if error.status is not None and str(error.status) not in message:
            message = f"{message} (HTTP {error.status})"
        if error.kind is LlmErrorKind.QUOTA_EXHAUSTED:
            message = f"{QUOTA_USED_UP} The provider said: {message}"
        elif error.kind in _AFTER_REPAIR:
            message = f"{_AFTER_REPAIR[error.kind]} The provider said: {message}"
        return FailTurn(str(error.kind), message)

    def on_summary_failed(
        self, error: LlmError, *, chunked: bool, stubbed: bool, window: int
    ) -> SummaryRecovery:
        """The action when a compaction's summary request failed with ``error``: too large → summarise in
        chunks (once), then stub old outputs (once), then give up as ``context_overflow``; an auth failure
        → the same refreshes as a step; anything else fails the turn with what the provider said."""
        if error.kind not in (LlmErrorKind.CONTEXT_OVERFLOW, LlmErrorKind.REQUEST_TOO_LARGE):
            action = self.on_failed(error, estimated_tokens=0, window=0)
            if isinstance(action, RefreshAuthAndResubmit):
                return action
            assert isinstance(action, FailTurn)
            return FailTurn(action.kind, f"The compaction's summary request failed: {action.message}")
        if not chunked:
            return SummariseInChunks(max(256, window * 2 // 5))
        return self.nothing_to_summarise(error, stubbed=stubbed)

    def nothing_to_summarise(self, error: LlmError | None, *, stubbed: bool) -> StubOldOutputs | FailTurn:
        """No summary can be made (the last failure was ``error``, if any): stub old outputs once, then
        give up as ``context_overflow``."""
        if not stubbed:
            return StubOldOutputs()
        said = f"{error.kind}: {error.message}" if error is not None else "no summary could be made"
        return FailTurn("context_overflow", f"Compaction failed ({said}). {_START_OVER}")

    @staticmethod
    def nothing_to_compact() -> FailTurn:
        """The request overflows and the history has nothing left to compact."""
        return FailTurn(
            "context_overflow",
            f"The request is larger than the model's context window and there is nothing left to compact. "
            f"{_START_OVER}",
        )

    @staticmethod
    def compaction_too_small(before: int, after: int) -> FailTurn:
        """A compaction did not shrink the request enough to go on."""
        return FailTurn(
            "context_overflow",
            f"Compaction did not shrink the request enough ({before} → {after} estimated tokens). "
            f"{_START_OVER}",
        )

    def auth_refresh_failed(self, reason: str) -> FailTurn:
        """The refresh itself failed: the turn ends with advice."""
        return FailTurn(
            "auth", f"Refreshing the credentials failed: {reason}. Log in again or fix the API key."
        )
