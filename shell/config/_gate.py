"""The ``[provider.limits]`` settings: the host-wide provider gate every model request passes through."""

from __future__ import annotations

from typing import Literal

import msgspec

from sampler.gate import GateLimits

from ._checks import is_int, is_positive

__all__ = ["PRIORITIES", "Priority", "ProviderLimits"]

Priority = Literal["interactive", "background"]
"""A session's priority at the provider gate: interactive sessions go first, background ones age in."""

PRIORITIES: dict[str, int] = {"interactive": 0, "background": 1}


class ProviderLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[provider.limits]``: ceilings for a provider that sends no rate-limit headers, and how long a
    request may wait at the gate.

    The gate always obeys what the provider says (Retry-After, rate-limit headers); these add ceilings of
    the operator's own (None: none). ``enabled = false`` lets every session's requests go straight out.
    A request that waits longer than ``queued_after`` seconds is reported as ``queued``; one that waits
    longer than ``max_wait`` fails its step. Waiting never spends a retry attempt.
    """

    enabled: bool = True
    max_concurrent_requests: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_wait: float = 600.0
    queued_after: float = 2.0
    aging: float = 10.0
    """Seconds of waiting that raise a background request one priority level."""

    def __post_init__(self) -> None:
        count = self.max_concurrent_requests
        if count is not None and not (is_int(count) and count >= 1):
            raise ValueError(
                f"provider.limits.max_concurrent_requests: must be a whole number >= 1, got {count!r}"
            )
        for key in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, key)
            if value is not None and not is_positive(value):
                raise ValueError(f"provider.limits.{key}: must be a number > 0, got {value!r}")
        for key in ("max_wait", "queued_after", "aging"):
            if not is_positive(getattr(self, key)):
                raise ValueError(f"provider.limits.{key}: must be a number > 0, got {getattr(self, key)!r}")

    def gate_limits(self) -> GateLimits:
        """These settings as the limits the gate applies."""
        return GateLimits(
            max_concurrent=self.max_concurrent_requests,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            aging=self.aging,
        )
