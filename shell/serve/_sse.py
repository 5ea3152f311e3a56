"""Server-Sent Events framing: one event, its type, its JSON and (when it is stored) its id."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["comment", "frame"]


def frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One SSE message: ``event:`` then ``id:`` (omitted when None) then the JSON ``data:`` on one line."""
    head = f"event: {event}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return head.encode() + b"data: " + msgspec.json.encode(data) + b"\n\n"


def comment(text: str) -> bytes:
    """An SSE comment line, ignored by clients: keeps an idle connection's write path tested."""
    return f": {text}\n\n".encode()
