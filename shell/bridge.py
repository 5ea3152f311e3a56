"""Translate a sampler ``Failed`` into what the session does next: a recovery, or a clear failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from sampler import FILTERED_MESSAGE, LlmError, LlmErrorKind

__all__ = [
    "COMPACTION_GAVE_UP",
    "MAX_AUTH_REFRESHES",
    "CompactAndResubmit",
    "FailTurn",
    "RecoveryAction",
    "RecoveryBridge",
    "RefreshAuthAndResubmit",
]

MAX_AUTH_REFRESHES = 2
"""Refreshes tried within one step before an auth failure ends the turn."""

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


RecoveryAction: TypeAlias = RefreshAuthAndResubmit | CompactAndResubmit | FailTurn


class RecoveryBridge:
    """Decides, per step, how a failure is recovered — with bounded tries, never a loop.

    ``auth`` → :class:`RefreshAuthAndResubmit` up to :data:`MAX_AUTH_REFRESHES` times; ``context_overflow``
    (and ``request_too_large`` when the estimate is at least half the window) → :class:`CompactAndResubmit`
    up to ``max_compactions`` consecutive cycles, learning the window as 85 % of the estimate; a filtered
    answer → ``provider_filtered``; anything else fails the turn with the error's kind and message.
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
            return FailTurn("provider_filtered", FILTERED_MESSAGE)
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
        return FailTurn(str(error.kind), message)

    def auth_refresh_failed(self, reason: str) -> FailTurn:
        """The refresh itself failed: the turn ends with advice."""
        return FailTurn(
            "auth", f"Refreshing the credentials failed: {reason}. Log in again or fix the API key."
        )
