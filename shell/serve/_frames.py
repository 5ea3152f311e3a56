"""What a stream says for each thing it learns: stored events (with their id), deltas, notices, gaps."""

from __future__ import annotations

import re
from typing import Any, get_args

import msgspec

from tool_bridge import PermissionRequested, ToolAbandoned

from .. import events as ev
from ..store import StoredEvent
from ._buffer import BufferedText, Gap, Notice
from ._sse import frame

__all__ = ["delta_frame", "gap_frame", "notice_frame", "stored_dict", "stored_frame"]

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_EVENT_TYPES = {cls.__name__: cls for cls in get_args(ev.SessionEvent)}


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def stored_dict(stored: StoredEvent) -> dict[str, Any]:
    """The stored event as ``turnkeep run --json`` prints it (``type`` in snake case first)."""
    cls = _EVENT_TYPES.get(stored.type)
    if cls is not None:
        try:
            return ev.event_to_json_dict(msgspec.json.decode(stored.body, type=cls))
        except msgspec.ValidationError:
            pass  # written by another version: shown as it is stored
    body: dict[str, Any] = msgspec.json.decode(stored.body)
    body.pop("type", None)
    return {"type": _snake(stored.type), **body}


def stored_frame(stored: StoredEvent, event_id: str) -> bytes:
    """A stored event with its id."""
    data = stored_dict(stored)
    return frame(str(data["type"]), data, event_id)


def delta_frame(session: str, turn: int, text: str) -> bytes:
    """Streamed text, without an id (deltas are not stored)."""
    return frame("text_delta", {"type": "text_delta", "session": session, "turn": turn, "text": text})


def notice_frame(session: str, event: Any) -> bytes | None:
    """A live-only tool notice, without an id; None for anything else."""
    if isinstance(event, PermissionRequested):
        data = {
            "type": "permission_requested",
            "session": session,
            "request_id": event.call_id,
            "tool": event.tool,
            "arguments": event.arguments,
            "reason": event.reason,
        }
    elif isinstance(event, ToolAbandoned):
        data = {"type": "tool_abandoned", "session": session, "call_id": event.call_id, "tool": event.tool}
        data["reason"] = event.reason
    else:
        return None
    return frame(str(data["type"]), data)


def gap_frame(last_id: str | None, dropped_bytes: int) -> bytes:
    """Text was dropped for a slow reader: it may reconnect from ``last_id`` (stored events are complete
    anyway; a turn's final text is in its terminal event)."""
    data = {"type": "gap", "last_id": last_id, "dropped_bytes": dropped_bytes}
    return frame("gap", data)


def live_frame(entry: BufferedText | Notice | Gap, last_id: str | None) -> bytes | None:
    """The frame of a live entry of a reader's buffer (``last_id``: the last stored event the reader got),
    or None for a notice that is not shown."""
    if isinstance(entry, BufferedText):
        return delta_frame(entry.session, entry.turn, entry.text)
    if isinstance(entry, Notice):
        return notice_frame(entry.session, entry.event)
    return gap_frame(last_id, entry.dropped_bytes)
