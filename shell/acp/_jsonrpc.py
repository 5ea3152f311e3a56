"""JSON-RPC 2.0 over newline-delimited JSON: splitting the input into lines, reading one line as a
message, and writing messages as lines. Pure: no I/O, no clock.

A line is one JSON value; blank lines are skipped. A line longer than the maximum is never held whole:
its bytes are dropped as they come and it is reported once, as :class:`Oversized`, when its newline
arrives, so one huge line costs no more memory than the maximum and the lines after it are read as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import msgspec

from ._schema import RequestId

__all__ = [
    "AUTH_REQUIRED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "Incoming",
    "Invalid",
    "LineSplitter",
    "Notification",
    "Oversized",
    "Request",
    "Response",
    "RpcError",
    "decode_params",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "parse_message",
]

PARSE_ERROR: Final = -32700
"""The line is not JSON."""
INVALID_REQUEST: Final = -32600
"""The line is JSON but not a JSON-RPC 2.0 message (or it is longer than the maximum)."""
METHOD_NOT_FOUND: Final = -32601
"""No such method."""
INVALID_PARAMS: Final = -32602
"""The method's parameters do not have its shape."""
INTERNAL_ERROR: Final = -32603
"""The agent could not do what was asked (a failed turn among others; ``data`` says what)."""
AUTH_REQUIRED: Final = -32000
"""The provider refused the credentials."""
RESOURCE_NOT_FOUND: Final = -32002
"""No such session."""
REQUEST_CANCELLED: Final = -32800
"""The request was cancelled by ``$/cancel_request``."""


class RpcError(Exception):
    """A JSON-RPC error to answer a request with: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the maximum was dropped; ``size`` is how many bytes it had."""

    size: int


class LineSplitter:
    """Splits a byte stream into lines of at most ``max_line`` bytes (the newline not counted).

    :meth:`feed` returns the complete lines the bytes end (without their newline or a trailing ``\\r``),
    and an :class:`Oversized` for each line that was too long; :meth:`finish` returns what the stream's
    end leaves (a last line without its newline). Memory held never exceeds ``max_line`` plus one read.
    """

    def __init__(self, max_line: int) -> None:
        if max_line < 1:
            raise ValueError(f"the maximum line size must be positive, got {max_line}")
        self.max_line = max_line
        self._buffer = bytearray()
        self._dropped = 0  # > 0 while the bytes of an oversized line are being dropped

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """The lines ``data`` completes, in order."""
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            self._take(data[start:end], out, complete=True)
            start = end + 1
        if start < len(data):
            self._take(data[start:], out, complete=False)
        return out

    def finish(self) -> list[bytes | Oversized]:
        """What is left at the end of the stream: a last line without its newline, or its report."""
        out: list[bytes | Oversized] = []
        if self._dropped:
            out.append(Oversized(self._dropped))
        elif self._buffer.strip():
            out.append(bytes(self._buffer).rstrip(b"\r"))
        self._buffer.clear()
        self._dropped = 0
        return out

    def _take(self, piece: bytes, out: list[bytes | Oversized], *, complete: bool) -> None:
        if self._dropped:
            self._dropped += len(piece)
        else:
            self._buffer += piece
            if len(self._buffer) > self.max_line + 1:  # too long even if it ends in a ``\r``
                self._dropped = len(self._buffer)
                self._buffer.clear()
        if not complete:
            return
        if self._dropped:
            out.append(Oversized(self._dropped))
            self._dropped = 0
            return
        line = bytes(self._buffer)
        self._buffer.clear()
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self.max_line:
            out.append(Oversized(len(line)))
        elif line.strip():
            out.append(line)


# -- reading ------------------------------------------------------------------------------------------


_UNSET: Final = msgspec.UNSET


class _Envelope(msgspec.Struct, frozen=True):
    jsonrpc: Any = _UNSET
    id: Any = _UNSET
    method: Any = _UNSET
    params: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: Any = _UNSET


_envelope = msgspec.json.Decoder(_Envelope)


@dataclass(frozen=True, slots=True)
class Request:
    """A request: it gets exactly one answer with its ``id``. ``params`` is its raw JSON (``b"null"`` when
    it had none)."""

    id: RequestId
    method: str
    params: msgspec.Raw


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification: it gets no answer, not even an error."""

    method: str
    params: msgspec.Raw


@dataclass(frozen=True, slots=True)
class Response:
    """An answer to one of the agent's own requests: ``result`` (raw JSON) or ``error`` (a mapping)."""

    id: RequestId
    result: msgspec.Raw | None
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line that is not a message to act on; ``reply`` is the error to write (its ``id`` is the line's
    own id when it had a usable one, else null)."""

    reply: bytes


Incoming: TypeAlias = Request | Notification | Response | Invalid
"""What one line is."""

_NULL = msgspec.Raw(b"null")


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_message(line: bytes) -> Incoming:
    """What ``line`` (one JSON text) is: a request, a notification, a response, or :class:`Invalid` with
    the error to answer (-32700 for text that is not JSON, -32600 for JSON that is not a JSON-RPC 2.0
    message: a batch, a wrong ``jsonrpc``, an id that is neither a number, a string nor null, a method
    that is not a string)."""
    try:
        envelope = _envelope.decode(line)
    except msgspec.ValidationError:
        # JSON, but not an object (a batch, a number, …).
        return Invalid(encode_error(None, INVALID_REQUEST, "a message must be a JSON object"))
    except msgspec.DecodeError as error:
        return Invalid(encode_error(None, PARSE_ERROR, f"parse error: {error}"))
    has_id = envelope.id is not _UNSET
    request_id: RequestId = envelope.id if has_id and _valid_id(envelope.id) else None
    if envelope.jsonrpc != "2.0":
        return Invalid(encode_error(request_id, INVALID_REQUEST, 'a message must have "jsonrpc": "2.0"'))
    if has_id and not _valid_id(envelope.id):
        return Invalid(encode_error(None, INVALID_REQUEST, "an id must be a number, a string or null"))
    params = envelope.params if len(envelope.params) else _NULL
    if envelope.method is not _UNSET:
        if not isinstance(envelope.method, str):
            return Invalid(encode_error(request_id, INVALID_REQUEST, "a method must be a string"))
        if has_id:
            return Request(request_id, envelope.method, params)
        return Notification(envelope.method, params)
    if has_id and len(envelope.result):
        return Response(request_id, envelope.result, None)
    if has_id and isinstance(envelope.error, dict):
        return Response(request_id, None, envelope.error)
    return Invalid(
        encode_error(request_id, INVALID_REQUEST, "neither a request, a notification nor an answer")
    )


def decode_params(params: msgspec.Raw, shape: type[Any]) -> Any:
    """``params`` as ``shape``; :class:`RpcError` -32602 saying what does not fit."""
    try:
        return msgspec.json.decode(params, type=shape)
    except msgspec.DecodeError as error:
        raise RpcError(INVALID_PARAMS, f"invalid params: {error}") from None


# -- writing ------------------------------------------------------------------------------------------


class _Result(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: RequestId
    result: Any


class _ErrorBody(msgspec.Struct, frozen=True, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Error(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: RequestId
    error: _ErrorBody


class _Notification(msgspec.Struct, frozen=True):
    jsonrpc: str
    method: str
    params: Any


class _Request(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: RequestId
    method: str
    params: Any


_encoder = msgspec.json.Encoder()


def encode_result(request_id: RequestId, result: Any) -> bytes:
    """The line answering ``request_id`` with ``result`` (a struct or plain JSON value), newline included."""
    return _encoder.encode(_Result("2.0", request_id, result)) + b"\n"


def encode_error(request_id: RequestId, code: int, message: str, data: Any = None) -> bytes:
    """The line answering ``request_id`` with an error, newline included."""
    return _encoder.encode(_Error("2.0", request_id, _ErrorBody(code, message, data))) + b"\n"


def encode_notification(method: str, params: Any) -> bytes:
    """A notification line, newline included."""
    return _encoder.encode(_Notification("2.0", method, params)) + b"\n"


def encode_request(request_id: RequestId, method: str, params: Any) -> bytes:
    """A request line, newline included."""
    return _encoder.encode(_Request("2.0", request_id, method, params)) + b"\n"
