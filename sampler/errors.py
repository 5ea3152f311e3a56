"""What went wrong with an LLM request, in terms the retry policy and the session can act on.

Providers report failures in a dozen shapes (JSON of several dialects, HTML from a proxy, plain text, an
error event inside a 200 stream, or an exception from the transport). The functions here turn all of them
into one :class:`LlmError` with a :class:`LlmErrorKind`. They are pure and total: whatever the input, they
return an ``LlmError`` and never raise.
"""

from __future__ import annotations

import datetime
import email.utils
import enum
import html
import http
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx
import msgspec
import trio

from ._wordings import (
    _BAD_API_KEY,
    _CONTEXT_OVERFLOW,
    _CONTROL,
    _DURATION_PART,
    _FILTERED,
    _GENERIC_MESSAGES,
    _HTML,
    _HTML_H1,
    _HTML_HIDDEN,
    _HTML_TAG,
    _HTML_TITLE,
    _IMAGE,
    _MAX_DEPTH,
    _MAX_HAYSTACK,
    _MAX_MESSAGE,
    _MAX_TEXT,
    _NUMBER,
    _OVERFLOW_STATUSES,
    _OVERLOADED,
    _OVERLOADED_CODE,
    _QUOTA,
    _RATE_LIMIT,
    _RETRY_HINT,
    _SHAPE_STATUSES,
    _STATUS_BY_TYPE,
    _STRUCTURE,
    _WHITESPACE,
)

__all__ = [
    "LlmError",
    "LlmErrorKind",
    "LlmRequestError",
    "classify_exception",
    "classify_http_error",
    "classify_stream_error",
    "parse_retry_after",
]


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
    """The account's quota, credit or billing limit is used up; waiting does not help."""
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


# ---------------------------------------------------------------------------------------------------------
# Public API


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


def classify_http_error(status: int, body: bytes | str, headers: Mapping[str, str]) -> LlmError:
    """Classify a non-2xx HTTP response from an LLM provider, judging by its status and its message.

    The body may be JSON of any provider's shape, HTML from a proxy, plain text or empty; the provider's
    message, code and any requested wait (``Retry-After`` headers first, then hints in the body) are carried
    over. Never raises.
    """
    try:
        details = _details_from_body(body)
        return _build(status, details, parse_retry_after(headers))
    except Exception:
        if isinstance(status, int) and not isinstance(status, bool):
            return LlmError(kind=_kind_from_status_alone(status), status=status, message=_status_text(status))
        return LlmError(kind=LlmErrorKind.UNKNOWN, message="unreadable error response")


def classify_stream_error(payload: bytes | str | Mapping[str, object], event: str | None = None) -> LlmError:
    """Classify an error reported inside a 200 stream, the same way as :func:`classify_http_error`.

    ``payload`` is the event's data: a JSON object (raw, or already decoded) such as OpenAI's
    ``{"error": {...}}`` or Anthropic's ``{"type": "error", "error": {...}}``; ``event`` is the SSE event
    name, if any. The status is inferred from the error's type or code (``overloaded_error`` is 529,
    ``rate_limit_error`` 429, ``invalid_request_error`` 400, ...); without one, the wording alone decides.
    Never raises.
    """
    try:
        if isinstance(payload, Mapping):
            details = _Details()
            _read(dict(payload), details, 0)
        else:
            details = _details_from_body(_sse_data(payload))
        status = _infer_status(details)
        if not details.messages and event:
            details.messages.append(f"{event} event in the response stream")
        return _build(status, details, None)
    except Exception:
        return LlmError(kind=LlmErrorKind.UNKNOWN, message="unreadable error event in the response stream")


def classify_exception(exc: BaseException) -> LlmError:
    """Classify an exception raised while sending a request or reading its response. Never raises.

    httpx timeouts and ``trio.TooSlowError`` are ``timeout``; connection failures and resets ``connection``;
    undecodable data ``syntax``; cancellation and interrupts ``abort``; an ``httpx.HTTPStatusError`` is
    classified by its response; an :class:`LlmRequestError` keeps its error; an exception group by its
    leaves (an abort among them wins). Anything else is ``unknown``.
    """
    try:
        return _classify_exception(exc)
    except Exception:
        return LlmError(kind=LlmErrorKind.UNKNOWN, message=type(exc).__name__)


# ---------------------------------------------------------------------------------------------------------
# Reading bodies


@dataclass(slots=True)
class _Details:
    messages: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    numeric_codes: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    retry_hint: float | None = None


def _details_from_body(body: bytes | str | None) -> _Details:
    details = _Details()
    if body is None:
        return details
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else str(body)
    _read_text(text[:_MAX_TEXT], details, 0)
    return details


def _read_text(text: str, details: _Details, depth: int) -> None:
    stripped = text.strip()
    if not stripped:
        return
    if stripped[0] in "{[" and depth <= _MAX_DEPTH:
        try:
            decoded = msgspec.json.decode(stripped)
        except msgspec.DecodeError:
            pass
        else:
            if isinstance(decoded, dict | list):
                _read(decoded, details, depth + 1)
                return
    if _HTML.search(stripped[:2048]):
        _read_html(stripped, details)
        return
    details.messages.append(stripped)
    details.texts.append(stripped)


def _read_html(text: str, details: _Details) -> None:
    headline = _HTML_TITLE.search(text) or _HTML_H1.search(text)
    visible = _collapse(html.unescape(_HTML_TAG.sub(" ", _HTML_HIDDEN.sub(" ", text))))
    title = _collapse(html.unescape(_HTML_TAG.sub(" ", headline.group(1)))) if headline else ""
    details.messages.append(title or visible[:200])
    details.texts.append(f"{title} {visible}")


def _read(value: object, details: _Details, depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        _read_text(value, details, depth)
    elif isinstance(value, list):
        _read_list(value, details, depth)
    elif isinstance(value, dict):
        _read_dict(value, details, depth)


def _read_list(items: list[object], details: _Details, depth: int) -> None:
    field_messages = [
        item["msg"] for item in items[:5] if isinstance(item, dict) and isinstance(item.get("msg"), str)
    ]
    if field_messages:  # FastAPI / pydantic validation errors (Mistral, vLLM)
        details.messages.append("; ".join(field_messages))
        details.texts.extend(field_messages)
        return
    for item in items[:8]:
        found = len(details.messages)
        _read(item, details, depth + 1)
        if len(details.messages) > found:
            return


def _read_dict(obj: dict[str, object], details: _Details, depth: int) -> None:
    error = obj.get("error")
    if isinstance(error, dict | list | str):
        _read(error, details, depth + 1)
    for key in ("message", "msg", "detail", "error_message"):
        value = obj.get(key)
        if isinstance(value, str | dict | list):
            _read(value, details, depth + 1)
    errors = obj.get("errors")
    if isinstance(errors, list):
        if details.messages:
            details.texts.extend(_strings_of(errors))
        else:
            _read(errors, details, depth + 1)
    _read_code(obj.get("code"), details)
    kind = obj.get("type")
    if isinstance(kind, str) and kind and kind != "error":
        details.types.append(kind)
        details.texts.append(kind)
    status = obj.get("status")
    if isinstance(status, str) and status:
        details.statuses.append(status)
        details.texts.append(status)
    elif isinstance(status, int) and not isinstance(status, bool):
        details.numeric_codes.append(status)
    for key in ("reason", "innererror"):
        details.texts.extend(_strings_of(obj.get(key)))
    if details.retry_hint is None:
        details.retry_hint = _retry_info(obj.get("details"))
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):  # OpenRouter passes the upstream provider's own body in metadata.raw
        raw = metadata.get("raw")
        if isinstance(raw, str | dict | list):
            _read(raw, details, depth + 1)


def _read_code(code: object, details: _Details) -> None:
    if isinstance(code, bool):
        return
    if isinstance(code, int):
        details.numeric_codes.append(code)
    elif isinstance(code, str) and code:
        details.texts.append(code)
        if code.isdigit():
            details.numeric_codes.append(int(code))
        else:
            details.codes.append(code)


def _strings_of(value: object, depth: int = 0) -> list[str]:
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value[:8] for text in _strings_of(item, depth + 1)]
    if isinstance(value, dict):
        return [text for item in list(value.values())[:16] for text in _strings_of(item, depth + 1)]
    return []


def _retry_info(value: object) -> float | None:
    """The delay of a Google ``RetryInfo`` entry in an error's ``details`` list."""
    if not isinstance(value, list):
        return None
    for entry in value[:16]:
        if isinstance(entry, dict) and "RetryInfo" in str(entry.get("@type", "")):
            delay = entry.get("retryDelay")
            if isinstance(delay, str):
                return _parse_duration(delay)
            if isinstance(delay, dict):
                seconds, nanos = delay.get("seconds", 0), delay.get("nanos", 0)
                if isinstance(seconds, int | str) and isinstance(nanos, int):
                    total = float(seconds) + nanos / 1e9
                    return total if math.isfinite(total) and total >= 0 else None
    return None


def _sse_data(payload: bytes | str) -> str:
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes | bytearray) else str(payload)
    lines = text.splitlines()
    data = [line[5:].lstrip() for line in lines if line.startswith("data:")]
    if data:
        return "\n".join(data)
    if any(line.startswith("event:") for line in lines):
        return ""
    return text


# ---------------------------------------------------------------------------------------------------------
# Deciding


def _build(status: int | None, details: _Details, header_retry: float | None) -> LlmError:
    haystack = " ".join(details.texts + details.codes + details.types)[:_MAX_HAYSTACK]
    retry_after = header_retry
    if retry_after is None:
        retry_after = details.retry_hint if details.retry_hint is not None else _retry_hint(haystack)
    kind = _kind(status, haystack, retry_after is not None)
    return LlmError(
        kind=kind,
        status=status,
        message=_message(details, status),
        code=_code(details),
        retry_after=retry_after,
        filtered=_FILTERED.search(haystack) is not None,
    )


def _kind(status: int | None, haystack: str, retry_hinted: bool) -> LlmErrorKind:
    if status is None:
        return _kind_from_wording(haystack, retry_hinted)
    if status == 529 or _OVERLOADED_CODE.search(haystack):
        return LlmErrorKind.OVERLOADED
    if status in _OVERFLOW_STATUSES and _CONTEXT_OVERFLOW.search(haystack):
        return LlmErrorKind.CONTEXT_OVERFLOW
    if 400 <= status < 500 and status != 429 and _FILTERED.search(haystack):
        return LlmErrorKind.PROVIDER
    if status == 402 or (status in (400, 403, 429) and _QUOTA.search(haystack)):
        # A provider that says when to come back describes a temporary limit, whatever its wording.
        if retry_hinted and status in (402, 429):
            return LlmErrorKind.RATE_LIMIT
        return LlmErrorKind.QUOTA_EXHAUSTED
    if status == 413:
        return LlmErrorKind.REQUEST_TOO_LARGE
    if status in _SHAPE_STATUSES and _IMAGE.search(haystack):
        return LlmErrorKind.IMAGE_FORMAT
    if status in _SHAPE_STATUSES and _STRUCTURE.search(haystack):
        return LlmErrorKind.REQUEST_STRUCTURE
    if status == 400 and _BAD_API_KEY.search(haystack):
        return LlmErrorKind.AUTH
    if 500 <= status < 600 and _OVERLOADED.search(haystack):
        return LlmErrorKind.OVERLOADED
    return _kind_from_status_alone(status)


def _kind_from_status_alone(status: int) -> LlmErrorKind:
    if status == 529:
        return LlmErrorKind.OVERLOADED
    if status == 413:
        return LlmErrorKind.REQUEST_TOO_LARGE
    if status == 429:
        return LlmErrorKind.RATE_LIMIT
    if status == 402:
        return LlmErrorKind.QUOTA_EXHAUSTED
    if status in (401, 403):
        return LlmErrorKind.AUTH
    if status in (408, 409) or 500 <= status < 600:
        return LlmErrorKind.STATUS
    if 400 <= status < 500:
        return LlmErrorKind.PROVIDER
    return LlmErrorKind.UNKNOWN


def _kind_from_wording(haystack: str, retry_hinted: bool) -> LlmErrorKind:
    if _OVERLOADED.search(haystack):
        return LlmErrorKind.OVERLOADED
    if _CONTEXT_OVERFLOW.search(haystack):
        return LlmErrorKind.CONTEXT_OVERFLOW
    if _QUOTA.search(haystack):
        return LlmErrorKind.RATE_LIMIT if retry_hinted else LlmErrorKind.QUOTA_EXHAUSTED
    if _IMAGE.search(haystack):
        return LlmErrorKind.IMAGE_FORMAT
    if _STRUCTURE.search(haystack):
        return LlmErrorKind.REQUEST_STRUCTURE
    if _RATE_LIMIT.search(haystack):
        return LlmErrorKind.RATE_LIMIT
    return LlmErrorKind.UNKNOWN


def _infer_status(details: _Details) -> int | None:
    for name in details.types + details.codes + details.statuses:
        status = _STATUS_BY_TYPE.get(name.lower())
        if status is not None:
            return status
    for number in details.numeric_codes:
        if 400 <= number < 600:
            return number
    return None


def _message(details: _Details, status: int | None) -> str:
    candidates = [_collapse(text) for text in details.messages]
    candidates = [text for text in candidates if text]
    specific = [text for text in candidates if text.lower().rstrip(".") not in _GENERIC_MESSAGES]
    chosen = (specific or candidates or [_code(details) or ""])[0]
    if not chosen:
        chosen = _status_text(status) if status is not None else "error in the response stream"
    return _trim(chosen)


def _code(details: _Details) -> str | None:
    for group in (details.codes, details.types, details.statuses):
        if group:
            return group[0][:100]
    return str(details.numeric_codes[0]) if details.numeric_codes else None


def _status_text(status: int | None) -> str:
    if status is None:
        return "unknown error"
    try:
        return f"HTTP {status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", _CONTROL.sub(" ", text)).strip()


def _trim(text: str) -> str:
    text = _collapse(text)
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3].rstrip() + "..."


# ---------------------------------------------------------------------------------------------------------
# Waits


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


def _parse_duration(text: str) -> float | None:
    total = 0.0
    found = False
    for number, unit in _DURATION_PART.findall(text):
        scale = _unit_seconds(unit.lower())
        if scale is None:
            return None
        total += float(number) * scale
        found = True
    return total if found and math.isfinite(total) else None


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


def _retry_hint(haystack: str) -> float | None:
    match = _RETRY_HINT.search(haystack)
    return _parse_duration(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------------------
# Exceptions


def _classify_exception(exc: BaseException) -> LlmError:
    if isinstance(exc, LlmRequestError):
        return exc.error
    if isinstance(exc, BaseExceptionGroup):
        return _classify_group(exc)
    if isinstance(exc, trio.Cancelled | KeyboardInterrupt | SystemExit):
        return _from_exception(LlmErrorKind.ABORT, exc)
    if isinstance(exc, httpx.HTTPStatusError):
        return _from_status_error(exc)
    if isinstance(exc, httpx.TimeoutException | trio.TooSlowError | TimeoutError):
        return _from_exception(LlmErrorKind.TIMEOUT, exc)
    if isinstance(exc, httpx.DecodingError):
        return _from_exception(LlmErrorKind.SYNTAX, exc)
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol):
        return _from_exception(LlmErrorKind.UNKNOWN, exc)
    if isinstance(exc, httpx.TransportError | trio.BrokenResourceError | trio.ClosedResourceError | OSError):
        return _from_exception(LlmErrorKind.CONNECTION, exc)
    if isinstance(exc, msgspec.DecodeError | ValueError):
        return _from_exception(LlmErrorKind.SYNTAX, exc)
    return _from_exception(LlmErrorKind.UNKNOWN, exc)


def _classify_group(group: BaseExceptionGroup[BaseException]) -> LlmError:
    leaves = [_classify_exception(leaf) for leaf in group.exceptions]
    for wanted in (LlmErrorKind.ABORT, None):
        for error in leaves:
            if error.kind is wanted or (wanted is None and error.kind is not LlmErrorKind.UNKNOWN):
                return error
    return leaves[0] if leaves else _from_exception(LlmErrorKind.UNKNOWN, group)


def _from_status_error(exc: httpx.HTTPStatusError) -> LlmError:
    response = exc.response
    try:
        body: bytes = response.content
    except httpx.ResponseNotRead:
        body = b""
    return classify_http_error(response.status_code, body, response.headers)


def _from_exception(kind: LlmErrorKind, exc: BaseException) -> LlmError:
    name = type(exc).__name__
    text = str(exc).strip()
    return LlmError(kind=kind, message=_trim(f"{name}: {text}" if text else name), code=name)
