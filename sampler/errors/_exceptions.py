"""Exceptions raised while sending a request or reading its response, turned into classified errors."""

from __future__ import annotations

import httpx
import msgspec
import trio

from ._body import trim
from ._classify import classify_http_error
from ._types import LlmError, LlmErrorKind, LlmRequestError

__all__ = ["classify_exception"]


def classify_exception(exc: BaseException) -> LlmError:
    """Classify an exception raised while sending a request or reading its response. Never raises.

    httpx timeouts and ``trio.TooSlowError`` are ``timeout``; connection failures and resets ``connection``;
    undecodable data ``syntax``; cancellation and interrupts ``abort``; an ``httpx.HTTPStatusError`` is
    classified by its response; an :class:`LlmRequestError` keeps its error; an exception group by its
    leaves (an abort among them wins). Anything else is ``unknown``.
    """
    try:
        return _classify(exc)
    except Exception:
        return LlmError(kind=LlmErrorKind.UNKNOWN, message=type(exc).__name__)


def _classify(exc: BaseException) -> LlmError:
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
    leaves = [_classify(leaf) for leaf in group.exceptions]
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
    return LlmError(kind=kind, message=trim(f"{name}: {text}" if text else name), code=name)
