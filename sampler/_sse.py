"""An incremental Server-Sent Events parser: bytes in, events out.

It follows the WHATWG event-stream rules: lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a blank line
dispatches the event; ``data:`` lines accumulate (joined with ``\\n``); ``event:`` names the event; ``id:``
and ``retry:`` are recorded on the parser; lines starting with ``:`` are comments; unknown fields are
ignored. Chunks may be split anywhere, even inside a ``\\r\\n`` or a UTF-8 sequence. Invalid UTF-8 is
replaced, never raised.
"""

from __future__ import annotations

import msgspec

__all__ = ["SseEvent", "SseParser"]

_BOM = b"\xef\xbb\xbf"


class SseEvent(msgspec.Struct, frozen=True, gc=False):
    """One dispatched event. ``event`` is ``None`` when the stream gave no ``event:`` field."""

    event: str | None
    data: str


class SseParser:
    """Turns a byte stream, fed in chunks of any size, into :class:`SseEvent` values.

    Events are returned as soon as their terminating blank line has been fed. The parser never raises on
    malformed input: a line it cannot make sense of is ignored.
    """

    __slots__ = ("_data", "_event", "_skip_lf", "_started", "_tail", "last_event_id", "retry")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] = []
        self._event: str | None = None
        self._skip_lf = False
        self._started = False
        self.last_event_id: str | None = None
        """The last ``id:`` seen (it persists across events, as the spec says)."""
        self.retry: int | None = None
        """The last valid ``retry:`` value, in milliseconds."""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by ``chunk``, in stream order."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._tail + chunk if self._tail else chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                self._tail = buffer
                return []
            self._started = True
            if buffer.startswith(_BOM):
                buffer = buffer[len(_BOM) :]
        if b"\r" in buffer:
            # A trailing "\r" ends its line now; a "\n" at the start of the next chunk belongs to it.
            self._skip_lf = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._tail = lines.pop()
        return self._process(lines) if lines else []

    def close(self) -> list[SseEvent]:
        """Ends the stream: the events still pending.

        An event whose final blank line never came is still dispatched, if it had data: a stream cut right
        after its last ``data:`` line loses nothing.
        """
        lines = [self._tail, b""] if self._tail else [b""]
        self._tail = b""
        self._skip_lf = False
        self._started = True
        return self._process(lines)

    def _process(self, lines: list[bytes]) -> list[SseEvent]:
        events: list[SseEvent] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    events.append(SseEvent(self._event, payload.decode("utf-8", "replace")))
                    data.clear()
                self._event = None
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:1] != b":":
                self._field(line)
        return events

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace") or None
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit() and value.isascii():
            self.retry = int(value)
