"""What a provider's answer says about its limits: rate-limit headers and Retry-After, read leniently."""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Budget", "Observation", "observe"]

_MAX_WAIT = 24 * 3600.0
"""No header can make the gate wait longer than a day: a larger value is a mistake, not a plan."""

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class Budget:
    """One budget the provider reported: ``remaining`` of ``limit`` until it is full again in ``reset_in``
    seconds (None when the provider did not say)."""

    limit: float | None
    remaining: float
    reset_in: float | None


@dataclass(frozen=True)
class Observation:
    """What one answer taught the gate. ``retry_after`` is the pause the provider asked for (seconds from
    now); ``requests`` and ``tokens`` the budgets its headers reported; all None when it said nothing."""

    status: int
    retry_after: float | None = None
    requests: Budget | None = None
    tokens: Budget | None = None

    @property
    def refused_for_rate(self) -> bool:
        """Whether the answer was a refusal for load (429, 529)."""
        return self.status in (429, 529)


def observe(status: int, headers: Mapping[str, str], now: float) -> Observation:
    """Read ``headers`` of an answer with ``status`` received at wall-clock ``now`` (seconds since the
    epoch). Understands ``retry-after`` (seconds or an HTTP date), ``retry-after-ms``, OpenAI's
    ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` and Anthropic's
    ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``. A value it
    cannot read is ignored; it never raises."""
    lower = {str(key).lower(): str(value) for key, value in _items(headers)}
    return Observation(
        status=status,
        retry_after=_retry_after(lower, now),
        requests=_budget(lower, "requests", now),
        tokens=_tokens(lower, now),
    )


def _items(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    try:
        return list(headers.items())
    except Exception:
        return []


def _retry_after(headers: dict[str, str], now: float) -> float | None:
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return _bounded(millis / 1000.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return _bounded(seconds)
    return _until(raw, now)


def _budget(headers: dict[str, str], what: str, now: float) -> Budget | None:
    for limit_key, remaining_key, reset_key in (
        (f"x-ratelimit-limit-{what}", f"x-ratelimit-remaining-{what}", f"x-ratelimit-reset-{what}"),
        (
            f"anthropic-ratelimit-{what}-limit",
            f"anthropic-ratelimit-{what}-remaining",
            f"anthropic-ratelimit-{what}-reset",
        ),
    ):
        remaining = _number(headers.get(remaining_key))
        if remaining is None:
            continue
        reset = headers.get(reset_key)
        return Budget(
            _number(headers.get(limit_key)), remaining, None if reset is None else _reset_in(reset, now)
        )
    return None


def _tokens(headers: dict[str, str], now: float) -> Budget | None:
    """The tightest token budget reported: total tokens, or Anthropic's input and output budgets."""
    found = [
        budget
        for what in ("tokens", "input-tokens", "output-tokens")
        if (budget := _budget(headers, what, now)) is not None
    ]
    return min(found, key=lambda budget: budget.remaining) if found else None


def _reset_in(raw: str, now: float) -> float | None:
    """A reset given as seconds (``"1.5"``), a duration (``"6m0s"``, ``"20ms"``) or a timestamp."""
    seconds = _number(raw)
    if seconds is not None:
        return _bounded(seconds)
    text = raw.strip().lower()
    parts = _DURATION_PART.findall(text)
    if parts and "".join(number + unit for number, unit in parts) == text:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return _bounded(sum(float(number) * scale[unit] for number, unit in parts))
    return _until(raw, now)


def _until(raw: str, now: float) -> float | None:
    """Seconds from ``now`` until the HTTP date or RFC 3339 timestamp ``raw``."""
    when: float | None = None
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
        when = parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        when = _rfc3339(raw)
    if when is None:
        return None
    return _bounded(when - now)


def _rfc3339(raw: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(raw.strip().replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except (ValueError, AttributeError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _bounded(seconds: float) -> float | None:
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), _MAX_WAIT)
