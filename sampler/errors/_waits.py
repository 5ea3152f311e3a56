"""How long a provider asks us to wait: ``Retry-After`` headers, Google ``RetryInfo``, hints in words."""

from __future__ import annotations

import datetime
import email.utils
import math
import re
import time
from collections.abc import Mapping

__all__ = ["parse_duration", "parse_retry_after", "retry_hint", "retry_info"]

_RETRY_HINT = re.compile(
    r"(?:try again|retry)(?:\s+(?:in|after))?\s+"
    r"((?:\d+(?:\.\d+)?\s*(?:ms|milliseconds?|hours?|h|minutes?|mins?|m|seconds?|secs?|s)(?![a-z])\s*)+)",
    re.IGNORECASE,
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Return the wait in seconds that the response headers ask for, or None when they ask for none.

    ``retry-after-ms`` (milliseconds) wins over ``retry-after``, which may be seconds (integer or decimal)
    or an HTTP date, measured from ``now`` (seconds since the epoch; the current time by default). Header
    names are matched case-insensitively. A negative or unparsable value counts as absent; a date in the
    past means no wait (0.0).
    """
    try:
        lowered = {str(name).lower(): value for name, value in headers.items()}
        milliseconds = _parse_seconds(lowered.get("retry-after-ms"))
        if milliseconds is not None:
            return milliseconds / 1000.0
        raw = lowered.get("retry-after")
        if not isinstance(raw, str):
            return None
        seconds = _parse_seconds(raw)
        if seconds is not None:
            return seconds
        return _parse_http_date(raw, time.time() if now is None else now)
    except Exception:
        return None


def retry_info(value: object) -> float | None:
    """The delay of a Google ``RetryInfo`` entry in an error's ``details`` list, or None."""
    if not isinstance(value, list):
        return None
    for entry in value[:16]:
        if isinstance(entry, dict) and "RetryInfo" in str(entry.get("@type", "")):
            delay = entry.get("retryDelay")
            if isinstance(delay, str):
                return parse_duration(delay)
            if isinstance(delay, dict):
                seconds, nanos = delay.get("seconds", 0), delay.get("nanos", 0)
                if isinstance(seconds, int | str) and isinstance(nanos, int):
                    total = float(seconds) + nanos / 1e9
                    return total if math.isfinite(total) and total >= 0 else None
    return None


def retry_hint(text: str) -> float | None:
    """The wait named in words ("Please try again in 6.5s", "retry after 1m30s"), or None."""
    match = _RETRY_HINT.search(text)
    return parse_duration(match.group(1)) if match else None


def parse_duration(text: str) -> float | None:
    """Seconds in a duration such as ``"1m30s"``, ``"250ms"`` or ``"2 hours"``; None if not one."""
    total = 0.0
    found = False
    for number, unit in _DURATION_PART.findall(text):
        scale = _unit_seconds(unit.lower())
        if scale is None:
            return None
        total += float(number) * scale
        found = True
    return total if found and math.isfinite(total) else None


def _parse_seconds(raw: object) -> float | None:
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _parse_http_date(raw: str, now: float) -> float | None:
    try:
        moment = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0.0, moment.timestamp() - now)


def _unit_seconds(unit: str) -> float | None:
    if unit == "ms" or unit.startswith("milli"):
        return 0.001
    if unit.startswith("h"):
        return 3600.0
    if unit.startswith("m"):
        return 60.0
    if unit.startswith("s"):
        return 1.0
    return None
