"""The error kinds and the classified error: the vocabulary every other part of the sampler speaks."""

from __future__ import annotations

import enum

import msgspec

__all__ = ["LlmError", "LlmErrorKind", "LlmRequestError"]


class LlmErrorKind(enum.StrEnum):
    """The kinds of LLM request failure. The values are stable: they are persisted and shown to users."""

    SYNTAX = "syntax"
    """The response could not be parsed (broken JSON, broken SSE framing)."""
    ABORT = "abort"
    """The request was cancelled by us (cancel scope, interrupt); not the provider's doing."""
    CONNECTION = "connection"
    """The connection could not be made or broke off."""
    TIMEOUT = "timeout"
    """Connecting, sending, reading or the whole request took too long."""
    STATUS = "status"
    """The provider answered 408, 409 or 5xx without saying anything more specific."""
    RATE_LIMIT = "rate_limit"
    """Too many requests or tokens for now; waiting helps."""
    QUOTA_EXHAUSTED = "quota_exhausted"
    """The account's credit, budget, billing or quota limit is used up; waiting does not help, so the request
    is sent once and the turn fails saying so, with the provider's words."""
    OVERLOADED = "overloaded"
    """The provider is overloaded (HTTP 529 or an ``overloaded_error``)."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The conversation does not fit into the model's context window."""
    REQUEST_TOO_LARGE = "request_too_large"
    """The request body is larger than the provider (or a proxy) accepts (HTTP 413)."""
    REQUEST_STRUCTURE = "request_structure"
    """The messages are malformed: tool calls and results unpaired, roles out of order."""
    IMAGE_FORMAT = "image_format"
    """An image in the request was rejected (format, size, could not be decoded)."""
    EMPTY_RESPONSE = "empty_response"
    """The provider ended the response without producing anything."""
    AUTH = "auth"
    """The credentials were refused (401, 403, an invalid API key)."""
    PROVIDER = "provider"
    """The provider rejected the request for another reason (other 4xx)."""
    UNKNOWN = "unknown"
    """Nothing above fits."""


class LlmError(msgspec.Struct, frozen=True, tag=True):
    """One classified failure of an LLM request; immutable, serialisable, safe to send between actors.

    ``status`` is the HTTP status (for an error inside a stream, the status its type implies), ``message``
    the provider's own words, trimmed to a readable length, ``code`` the provider's error code or type,
    ``retry_after`` the wait in seconds the provider asked for, and ``filtered`` whether a content filter
    was involved.
    """

    kind: LlmErrorKind
    status: int | None = None
    message: str = ""
    code: str | None = None
    retry_after: float | None = None
    filtered: bool = False


class LlmRequestError(Exception):
    """Raised by code that reports an LLM failure as an exception; ``.error`` is the classified failure."""

    def __init__(self, error: LlmError) -> None:
        super().__init__(error)
        self.error = error

    def __str__(self) -> str:
        if self.error.status is None:
            return f"{self.error.kind}: {self.error.message}"
        return f"{self.error.kind} (HTTP {self.error.status}): {self.error.message}"
