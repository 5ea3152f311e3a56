"""Whether, and after how long, a failed step of an LLM request is tried again. Pure functions, no I/O."""

from __future__ import annotations

import math
import os
import random
import re
from collections.abc import Mapping

import msgspec

from .errors import LlmError, LlmErrorKind

__all__ = ["RetryDecision", "RetryPolicy", "backoff_delay", "decide", "is_retryable"]

_MAX_ATTEMPTS_ENV = "TURNKEEP_MAX_ATTEMPTS_PER_STEP"
_WHOLE_NUMBER = re.compile(r"[0-9]+")

_ALWAYS_RETRIED = frozenset(
    {
        LlmErrorKind.CONNECTION,
        LlmErrorKind.TIMEOUT,
        LlmErrorKind.RATE_LIMIT,
        LlmErrorKind.OVERLOADED,
        LlmErrorKind.EMPTY_RESPONSE,
    }
)


class RetryPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How often and how patiently one step is retried; immutable, and decodable from configuration.

    ``max_attempts`` counts every attempt of the step, the first included. The wait after the n-th failed
    attempt is ``base_delay * factor ** (n - 1)``, capped at ``max_delay``, plus a random extra of up to
    ``jitter`` times that. HTTP ``status`` errors are retried only for ``retryable_statuses``; a wait the
    provider asks for that is longer than ``max_retry_after`` seconds is not waited out. Construction (and
    decoding) raises ``ValueError`` naming the field when a value is out of range.
    """

    max_attempts: int = 10
    base_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 32.0
    jitter: float = 0.25
    retryable_statuses: tuple[int, ...] = (408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529)
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if not _is_int(self.max_attempts) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be a whole number >= 1, got {self.max_attempts!r}")
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not _is_number(value) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if not _is_number(self.factor) or not self.factor >= 1:
            raise ValueError(f"factor must be a number >= 1, got {self.factor!r}")
        if not _is_number(self.jitter) or not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be a number between 0 and 1, got {self.jitter!r}")
        if not all(_is_int(status) and 100 <= status <= 599 for status in self.retryable_statuses):
            raise ValueError(f"retryable_statuses must be HTTP statuses, got {self.retryable_statuses!r}")

    @classmethod
    def from_env(
        cls, base: RetryPolicy | None = None, environ: Mapping[str, str] | None = None
    ) -> RetryPolicy:
        """Return ``base`` (the defaults if None) with overrides from the environment applied.

        ``TURNKEEP_MAX_ATTEMPTS_PER_STEP`` sets ``max_attempts`` (a whole number >= 1; unset or blank leaves
        it alone). ``environ`` defaults to ``os.environ``. An invalid value raises ``ValueError`` naming
        the variable.
        """
        policy = cls() if base is None else base
        env = os.environ if environ is None else environ
        raw = env.get(_MAX_ATTEMPTS_ENV)
        if raw is None or not raw.strip():
            return policy
        text = raw.strip()
        if not _WHOLE_NUMBER.fullmatch(text) or int(text) < 1:
            raise ValueError(f"{_MAX_ATTEMPTS_ENV} must be a whole number >= 1, got {raw!r}")
        return msgspec.structs.replace(policy, max_attempts=int(text))


class RetryDecision(msgspec.Struct, frozen=True, tag=True):
    """What to do after a failed attempt: retry after ``delay`` seconds, or stop and report ``error``.

    When ``retry`` is true, ``error`` is the failure being retried; when false, it is the final error to
    report and ``delay`` is 0.
    """

    retry: bool
    error: LlmError
    delay: float = 0.0


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Return the wait in seconds after the ``attempt``-th failed attempt (1-based).

    The result lies in ``[d, d * (1 + policy.jitter)]`` with ``d = min(base_delay * factor ** (attempt - 1),
    max_delay)``; the random part comes from ``rng`` only, so a seeded ``rng`` gives a repeatable sequence.
    Raises ``ValueError`` if ``attempt`` is below 1.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt!r}")
    try:
        raw = policy.base_delay * policy.factor ** (attempt - 1)
    except OverflowError:
        raw = math.inf if policy.base_delay > 0 else 0.0
    delay = min(raw, policy.max_delay)
    return delay + delay * policy.jitter * rng.random()


def is_retryable(error: LlmError, policy: RetryPolicy) -> bool:
    """Whether trying the same request again can succeed.

    Connection, timeout, rate-limit, overloaded and empty-response errors are retried, and ``status``
    errors whose status is in ``policy.retryable_statuses``. Errors involving a content filter never are,
    nor are the kinds that need a different request or human help: context overflow, request too large,
    image format, request structure, quota, auth, syntax, abort, provider and unknown.
    """
    if error.filtered:
        return False
    if error.kind in _ALWAYS_RETRIED:
        return True
    return error.kind is LlmErrorKind.STATUS and error.status in policy.retryable_statuses


def decide(error: LlmError, attempt: int, policy: RetryPolicy, rng: random.Random) -> RetryDecision:
    """Decide what follows the ``attempt``-th (1-based) failed attempt of a step.

    A non-retryable error stops with the error unchanged. Once ``attempt`` reaches ``policy.max_attempts``
    the step stops, the message saying how many attempts were made. Otherwise the step is retried after the
    provider's ``retry_after`` if it gave one, else after :func:`backoff_delay`; a ``retry_after`` above
    ``policy.max_retry_after`` is not waited out: the step stops with a ``rate_limit`` error naming the
    wait. Raises ``ValueError`` if ``attempt`` is below 1.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt!r}")
    if not is_retryable(error, policy):
        return RetryDecision(retry=False, error=error)
    if attempt >= policy.max_attempts:
        plural = "" if attempt == 1 else "s"
        note = f"gave up after {attempt} attempt{plural}"
        message = f"{error.message} ({note})" if error.message else note
        return RetryDecision(retry=False, error=msgspec.structs.replace(error, message=message))
    if error.retry_after is not None:
        if error.retry_after > policy.max_retry_after:
            wait = (
                f"provider asked to retry after {error.retry_after:g} s, "
                f"more than the {policy.max_retry_after:g} s limit"
            )
            message = f"{wait}: {error.message}" if error.message else wait
            stopped = msgspec.structs.replace(error, kind=LlmErrorKind.RATE_LIMIT, message=message)
            return RetryDecision(retry=False, error=stopped)
        return RetryDecision(retry=True, error=error, delay=max(0.0, error.retry_after))
    return RetryDecision(retry=True, error=error, delay=backoff_delay(policy, attempt, rng))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
