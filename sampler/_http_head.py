"""HTTP/1.1 message heads as bytes: a request head built and checked once, a response head parsed strictly.

A model call sends the same head, but for its length, to the same provider many times; building it once
and checking it once is what keeps a request cheap. Pure: no I/O.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["HeadError", "RequestHead", "ResponseHead", "head_end", "header_line", "parse_response_head"]

MAX_HEAD: Final = 64 * 1024
"""The largest response head accepted (status line and header lines), in bytes."""

_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE: Final = re.compile(rb"[\x21-\x7e\x80-\xff]([\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?")
_STATUS_LINE: Final = re.compile(rb"HTTP/(\d\.\d) (\d{3})(?: ([\t\x20-\x7e\x80-\xff]*))?")
_TARGET: Final = re.compile(r"/[\x21-\x7e]*")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_MANAGED: Final = frozenset({b"host", b"content-length", b"transfer-encoding", b"connection"})


class HeadError(ValueError):
    """A head that may not be sent or was received malformed: a header name that is not a token, a value
    with a control character or not ASCII, a status line that is not HTTP/1.x, a folded or colon-less
    header line, or a head longer than 64 KiB. The message says which."""


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request head checked once: ``origin`` is (scheme, host, port) and ``prefix`` the request line,
    ``Host`` and the headers, each line CRLF-terminated; :meth:`encode` ends it for a body of given length.

    Headers that the framing owns (``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Connection``)
    may not be given: the head sets them itself."""

    origin: tuple[str, str, int]
    method: str
    prefix: bytes

    @classmethod
    def build(cls, method: str, url: str, headers: Iterable[tuple[str, str]]) -> RequestHead:
        """The head of a ``method`` request for ``url`` with ``headers`` (in order). Raises
        :class:`HeadError` for a URL that is not absolute http(s), or a header that may not be sent."""
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise HeadError(f"only http and https URLs can be requested, not {url!r}")
        if not _TOKEN.fullmatch(method.encode("ascii", "replace")):
            raise HeadError(f"{method!r} is not an HTTP method")
        try:
            host = parts.hostname or ""
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError as exc:
            raise HeadError(f"the URL {url!r} has a malformed port") from exc
        if not host or any(c in host for c in " \t\r\n/\\@"):
            raise HeadError(f"the URL {url!r} names no valid host")
        try:
            ascii_host = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise HeadError(f"the URL {url!r} names a host that is not a valid name: {exc}") from exc
        if (
            not all(0 < len(label) < 64 for label in ascii_host.rstrip(".").split("."))
            and ":" not in ascii_host
        ):
            raise HeadError(f"the URL {url!r} names a host that is not a valid name")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if not _TARGET.fullmatch(target):
            raise HeadError(f"the URL {url!r} has characters a request target may not hold")
        shown = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
        authority = shown if port == _DEFAULT_PORTS[scheme] else f"{shown}:{port}"
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {authority}\r\n".encode("ascii")]
        lines += [header_line(name, value) for name, value in headers]
        return cls((scheme, ascii_host, port), method, b"".join(lines))

    def encode(self, length: int, extra: Iterable[tuple[str, str]] = ()) -> bytes:
        """The whole head for a body of ``length`` bytes, with ``extra`` headers (checked here) last."""
        more = b"".join(header_line(name, value) for name, value in extra)
        return b"%s%sContent-Length: %d\r\n\r\n" % (self.prefix, more, length)


def header_line(name: str, value: str) -> bytes:
    """``name: value`` and CRLF, as sent. Raises :class:`HeadError` for a header that may not be sent."""
    raw_name = name.encode("ascii", "replace")
    if not _TOKEN.fullmatch(raw_name):
        raise HeadError(f"{name!r} is not a valid header name")
    if raw_name.lower() in _MANAGED:
        raise HeadError(f"the {name} header is set by the transport, not by the caller")
    try:
        raw_value = value.encode("ascii")
    except UnicodeEncodeError:
        raise HeadError(f"the value of the {name} header is not ASCII") from None
    if raw_value and not _FIELD_VALUE.fullmatch(raw_value):
        raise HeadError(f"the value of the {name} header holds a control character or edge whitespace")
    return b"%s: %s\r\n" % (raw_name, raw_value)


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """A response's status line and headers, as received: ``headers`` keeps names as sent, in order."""

    http_version: bytes
    """``b"1.1"`` or ``b"1.0"``."""
    status_code: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]

    def lowered(self) -> list[tuple[bytes, bytes]]:
        """The headers with lower-case names."""
        return [(name.lower(), value) for name, value in self.headers]


def head_end(buffer: bytes | bytearray) -> int:
    """Where the head at the start of ``buffer`` ends (just past its blank line), or -1 while it is
    incomplete. Raises :class:`HeadError` when it is past 64 KiB and still incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise HeadError("the response head is longer than 64 KiB")
        return -1
    if end + 4 > MAX_HEAD:
        raise HeadError("the response head is longer than 64 KiB")
    return end + 4


def parse_response_head(head: bytes) -> ResponseHead:
    """The response head ``head`` (from its status line to its blank line, as :func:`head_end` found it).
    Raises :class:`HeadError` when it is malformed."""
    lines = head[:-4].split(b"\r\n")
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        raise HeadError(f"a malformed status line {lines[0][:80]!r}")
    version, code, reason = status.groups()
    if code < b"100":
        raise HeadError(f"a status code below 100: {code.decode()}")
    if version not in (b"1.0", b"1.1"):
        raise HeadError(f"a response in HTTP/{version.decode()}, not HTTP/1.x")
    headers: list[tuple[bytes, bytes]] = []
    length: bytes | None = None
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            raise HeadError("a folded header line (obsolete line folding is not accepted)")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HeadError(f"a malformed header line {line[:80]!r}")
        value = value.strip(b" \t")
        if value and not _FIELD_VALUE.fullmatch(value):
            raise HeadError(f"a control character in the value of the {name.decode()} header")
        lowered = name.lower()
        if lowered == b"content-length":
            value = _one_length(value, length)
            if length is not None:
                continue  # the same length again: one header says it
            length = value
        elif lowered == b"transfer-encoding" and value.lower() != b"chunked":
            raise HeadError(f"a transfer coding other than chunked: {value[:40]!r}")
        headers.append((name, value))
    return ResponseHead(version, int(code), reason or b"", headers)


def _one_length(value: bytes, earlier: bytes | None) -> bytes:
    """The length a ``Content-Length`` value (a list of equal numbers, as some servers repeat it) says,
    the same as ``earlier`` when a length came before. Raises :class:`HeadError` otherwise."""
    lengths = {part.strip(b" \t") for part in value.split(b",")}
    if earlier is not None:
        lengths.add(earlier)
    if len(lengths) > 1:
        raise HeadError("Content-Length headers that disagree")
    length = lengths.pop()
    if not length.isdigit() or len(length) > 18:
        raise HeadError(f"a malformed Content-Length {value[:40]!r}")
    return length
