"""Classifying an HTTP error response or an error event inside a stream: evidence in, one error out."""

from __future__ import annotations

import http
from collections.abc import Mapping

from ._body import Evidence, collapse, evidence_from_body, read_value, sse_data, trim
from ._decide import families_in, filtered, kind_for, kind_from_status
from ._types import LlmError, LlmErrorKind
from ._waits import parse_retry_after, retry_hint

__all__ = ["classify_http_error", "classify_stream_error"]

_AWS_ERROR_TYPE = "x-amzn-errortype"
_GENERIC_MESSAGES = frozenset(
    {
        "error",
        "provider returned error",
        "upstream error",
        "bad request",
        "internal server error",
        "unknown error",
    }
)

# Error types (Anthropic, OpenAI, vLLM, llama.cpp) and Google RPC statuses, with the HTTP status they stand
# for; used when an error arrives inside a 200 stream.
_STATUS_BY_TYPE: dict[str, int] = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "authentication_error": 401,
    "permission_error": 403,
    "invalid_request_error": 400,
    "request_too_large": 413,
    "not_found_error": 404,
    "billing_error": 402,
    "timeout_error": 504,
    "server_error": 500,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "budget_exceeded": 429,
    "tokens": 429,
    "requests": 429,
    "context_length_exceeded": 400,
    "exceed_context_size_error": 400,
    "invalid_request_message_order": 400,
    "content_filter": 400,
    "badrequesterror": 400,
    "notfounderror": 404,
    "internalservererror": 500,
    "unavailable_error": 503,
    "invalid_argument": 400,
    "failed_precondition": 400,
    "out_of_range": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "resource_exhausted": 429,
    "internal": 500,
    "unavailable": 503,
    "deadline_exceeded": 504,
    "throttlingexception": 429,
    "validationexception": 400,
}


def classify_http_error(status: int, body: bytes | str, headers: Mapping[str, str]) -> LlmError:
    """Classify a non-2xx HTTP response from an LLM provider, judging by its status and its evidence.

    The body may be JSON of any provider's shape, HTML from a proxy, plain text or empty. Structured fields
    decide first, then the provider's words (exact phrases, then families matched by meaning), then the
    status; an HTML page's boilerplate never decides. The provider's message, code and any requested wait
    (``Retry-After`` headers first, then hints in the body) are carried over. Never raises, whatever the
    status, headers or bytes.
    """
    try:
        evidence = evidence_from_body(body)
        aws_type = _header(headers, _AWS_ERROR_TYPE)
        if aws_type:
            evidence.codes.append(aws_type.split(":", 1)[0].strip())
        return _build(status, evidence, parse_retry_after(headers))
    except Exception:
        if isinstance(status, int) and not isinstance(status, bool):
            return LlmError(kind=kind_from_status(status), status=status, message=_status_text(status))
        return LlmError(kind=LlmErrorKind.UNKNOWN, message="unreadable error response")


def classify_stream_error(payload: bytes | str | Mapping[str, object], event: str | None = None) -> LlmError:
    """Classify an error reported inside a 200 stream, the same way as :func:`classify_http_error`.

    ``payload`` is the event's data: a JSON object (raw, or already decoded) such as OpenAI's
    ``{"error": {...}}`` or Anthropic's ``{"type": "error", "error": {...}}``; ``event`` is the SSE event
    name, if any. The status is inferred from the error's type or code (``overloaded_error`` is 529,
    ``rate_limit_error`` 429, ``invalid_request_error`` 400, ...); without one, the evidence alone decides.
    Never raises.
    """
    try:
        if isinstance(payload, Mapping):
            evidence = Evidence()
            read_value(dict(payload), evidence)
        else:
            evidence = evidence_from_body(sse_data(payload))
        status = _infer_status(evidence)
        if not evidence.messages and event:
            evidence.messages.append(f"{event} event in the response stream")
        return _build(status, evidence, None)
    except Exception:
        return LlmError(kind=LlmErrorKind.UNKNOWN, message="unreadable error event in the response stream")


def _build(status: int | None, evidence: Evidence, header_retry: float | None) -> LlmError:
    retry_after = header_retry
    if retry_after is None:
        retry_after = evidence.retry_hint
    if retry_after is None:
        retry_after = retry_hint(" ".join(evidence.texts)[: 64 * 1024])
    by_fields, by_words = families_in(evidence)
    return LlmError(
        kind=kind_for(status, by_fields, by_words, retry_hinted=retry_after is not None),
        status=status,
        message=_message(evidence, status),
        code=_code(evidence),
        retry_after=retry_after,
        filtered=filtered(by_fields, by_words),
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if str(key).lower() == name and isinstance(value, str):
            return value
    return None


def _infer_status(evidence: Evidence) -> int | None:
    for name in evidence.fields():
        status = _STATUS_BY_TYPE.get(name.lower())
        if status is not None:
            return status
    for number in evidence.numeric_codes:
        if 400 <= number < 600:
            return number
    return None


def _message(evidence: Evidence, status: int | None) -> str:
    candidates = [collapse(text) for text in evidence.messages]
    candidates = [text for text in candidates if text]
    specific = [text for text in candidates if text.lower().rstrip(".") not in _GENERIC_MESSAGES]
    chosen = (specific or candidates or [_code(evidence) or ""])[0]
    if not chosen:
        chosen = _status_text(status) if status is not None else "error in the response stream"
    return trim(chosen)


def _code(evidence: Evidence) -> str | None:
    for group in (evidence.codes, evidence.types, evidence.statuses):
        if group:
            return group[0][:100]
    return str(evidence.numeric_codes[0]) if evidence.numeric_codes else None


def _status_text(status: int | None) -> str:
    if status is None:
        return "unknown error"
    try:
        return f"HTTP {status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"
