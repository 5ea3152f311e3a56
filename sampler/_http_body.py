"""HTTP/1.1 response body framing, decoded in one pass per read: ``chunked`` and ``Content-Length``.

A streamed model answer arrives as one small HTTP chunk per token or so; decoding the framing with a
byte-level loop here, instead of one state-machine event per chunk, is what keeps a read cheap. Pure: bytes
in, payload out, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BodyFramingError",
    "ChunkedBody",
    "Framing",
    "LengthBody",
    "UntilClose",
    "framing_of",
    "message_framing",
]

_MAX_LINE: Final = 4096
"""The longest chunk-size or trailer line accepted (with its extensions)."""
_HEX_DIGITS: Final = b"0123456789abcdefABCDEF"


class BodyFramingError(ValueError):
    """The body's framing is malformed: a chunk size that is not hexadecimal, a chunk not followed by
    CRLF, a line longer than 4,096 bytes, or more body than the ``Content-Length`` announced."""


class ChunkedBody:
    """Decodes a ``Transfer-Encoding: chunked`` body fed in pieces split anywhere.

    :meth:`feed` returns the payload completed so far; once the last chunk and the trailers have arrived,
    :attr:`done` is true and :attr:`leftover` holds whatever followed the body (nothing, on a connection
    that may be used again).
    """

    __slots__ = ("_buffer", "_in_trailers", "_remaining", "done", "leftover")

    def __init__(self) -> None:
        self._buffer = b""
        self._remaining = -1
        """Payload bytes still due in the current chunk; -1 while a size line is awaited, -2 while the
        CRLF after a chunk's data is."""
        self._in_trailers = False
        self.done = False
        self.leftover = b""

    def feed(self, data: bytes) -> bytes:
        """The payload ``data`` completes (possibly empty). Raises :class:`BodyFramingError`."""
        if self.done:
            self.leftover += data
            return b""
        buffer = self._buffer + data if self._buffer else data
        payload: list[bytes] = []
        position = 0
        size = len(buffer)
        while position < size:
            remaining = self._remaining
            if remaining > 0:
                end = position + remaining
                payload.append(buffer[position:end])
                if end > size:
                    self._remaining = end - size
                    position = size
                    break
                position = end
                self._remaining = -2
            elif remaining == -2:
                if size - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise BodyFramingError("a chunk's data is not followed by CRLF")
                position += 2
                self._remaining = -1
            else:
                newline = buffer.find(b"\r\n", position)
                if newline < 0:
                    if size - position > _MAX_LINE:
                        raise BodyFramingError("a chunk-size line is longer than 4,096 bytes")
                    break
                line = buffer[position:newline]
                position = newline + 2
                if self._in_trailers:
                    if not line:
                        self.done = True
                        self.leftover = buffer[position:]
                        position = size
                        break
                    continue
                self._remaining = _chunk_size(line)
                if self._remaining == 0:
                    self._in_trailers = True
                    self._remaining = -1
        self._buffer = buffer[position:] if position < size else b""
        if len(payload) == 1:
            return payload[0]
        return b"".join(payload)


class LengthBody:
    """Decodes a body of ``Content-Length`` bytes fed in pieces; :attr:`done` once all have arrived."""

    __slots__ = ("_remaining", "done", "leftover")

    def __init__(self, length: int) -> None:
        if length < 0:
            raise BodyFramingError(f"a negative Content-Length: {length}")
        self._remaining = length
        self.done = length == 0
        self.leftover = b""

    def feed(self, data: bytes) -> bytes:
        """The payload in ``data``; anything beyond the announced length is kept as :attr:`leftover`."""
        if self.done:
            self.leftover += data
            return b""
        if len(data) < self._remaining:
            self._remaining -= len(data)
            return data
        payload, self.leftover = data[: self._remaining], data[self._remaining :]
        self._remaining = 0
        self.done = True
        return payload

    @property
    def remaining(self) -> int:
        """Payload bytes still due."""
        return self._remaining


class UntilClose:
    """A body that ends where the connection closes (no length and not chunked): every byte is payload;
    :meth:`close` marks it :attr:`done`. The connection cannot serve another request."""

    __slots__ = ("done", "leftover")

    def __init__(self) -> None:
        self.done = False
        self.leftover = b""

    def feed(self, data: bytes) -> bytes:
        """The payload in ``data``: all of it."""
        return data

    def close(self) -> None:
        """The connection closed: the body is complete."""
        self.done = True


@dataclass(frozen=True)
class Framing:
    """How a response's body is framed: its decoder, and whether the connection may serve another request
    once the body has been read."""

    body: ChunkedBody | LengthBody | UntilClose
    keep_alive: bool


def framing_of(
    method: str, status: int, http_version: bytes, headers: Iterable[tuple[bytes, bytes]]
) -> Framing | None:
    """The framing of a response to ``method`` from its head (header names lower-case, as h11 gives them):
    chunked, or ``Content-Length`` (chunked wins when both are given); None when it has no body (a HEAD,
    204 or 304) or is read until the connection closes."""
    if method == "HEAD" or status in (204, 304):
        return None
    framing = message_framing(method, status, http_version, headers)
    return None if type(framing.body) is UntilClose else framing


def message_framing(
    method: str, status: int, http_version: bytes, headers: Iterable[tuple[bytes, bytes]]
) -> Framing:
    """The framing of a final response to ``method`` from its head (header names lower-case), whatever it
    is: no bytes for a HEAD, 204 or 304, chunked, ``Content-Length`` (chunked wins when both are given),
    or else until the connection closes."""
    chunked = False
    length: int | None = None
    keep_alive = http_version == b"1.1"
    for name, value in headers:
        if name == b"transfer-encoding":
            chunked = True  # no transfer coding but "chunked" reaches here
        elif name == b"content-length":
            length = int(value)
        elif name == b"connection" and b"close" in value.lower():
            keep_alive = False
    if method == "HEAD" or status in (204, 304):
        return Framing(LengthBody(0), keep_alive)
    if chunked:
        return Framing(ChunkedBody(), keep_alive)
    if length is not None:
        return Framing(LengthBody(length), keep_alive)
    return Framing(UntilClose(), False)


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].rstrip(b" \t")
    if not size or len(size) > 16 or size.translate(None, _HEX_DIGITS):
        raise BodyFramingError(f"a malformed chunk size {line[:40]!r}")
    return int(size, 16)
