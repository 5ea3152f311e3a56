"""Every session's events in one stream, for dashboards, resumable like a session's own stream.

Its order is the events' order of storing across sessions: by (stored at, session, seq). An event is
sent only once it is :data:`SETTLE` seconds old, so no event committed later can sort before one already
sent; resuming after the id ``SESSION/SEQ`` then means "every event that sorts after that one", exactly.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import trio

from ..store import SessionNotFound, SessionStore, StoredEvent
from ._api import ApiError
from ._buffer import BufferedText, Gap, Notice, Stored
from ._frames import live_frame, stored_frame
from ._sse import comment
from ._wakeup import Inbox

__all__ = ["SETTLE", "firehose", "firehose_start"]

SETTLE = 0.5
"""Seconds an event waits before the all-sessions stream sends it (longer than any commit takes)."""
_POLL = 0.25
_IDLE_SCAN = 1.0
"""Seconds between reads of the store when no session announced anything (sessions this server does not
hear, written by another process on the same store, are found this way)."""
_KEEPALIVE_EVERY = 15.0

_Key = tuple[float, str, int]


def _key(session: str, stored: StoredEvent) -> _Key:
    return (stored.created_at, session, stored.seq)


def _parse(cursor: str) -> tuple[str, int]:
    session, sep, seq = cursor.rpartition("/")
    if not sep or not session or not seq.isdigit():
        raise ApiError(400, "invalid_cursor", f"not an event id of this stream: {cursor!r} (SESSION/SEQ)")
    return session, int(seq)


def firehose_start(store: SessionStore, cursor: str | None) -> _Key:
    """The key to stream after: the event ``cursor`` names, or now. Blocking (reads the store); raises
    :class:`ApiError` for a cursor that names no stored event."""
    if cursor is None:
        return (time.time() - SETTLE, "", 0)
    session, seq = _parse(cursor)
    try:
        found = store.load_events(session, since=seq - 1)[:1] if seq > 0 else []
    except SessionNotFound:
        found = []
    if not found or found[0].seq != seq:
        raise ApiError(400, "invalid_cursor", f"no stored event {cursor!r} to resume after")
    return _key(session, found[0])


class _Scan:
    """What the stream has seen of each session, so a read asks only for what is new."""

    def __init__(self, store: SessionStore, floor: _Key) -> None:
        self._store = store
        self.floor = floor
        self._seen: dict[str, int] = {}
        self.unsettled = False
        """Whether the last read found events too young to send yet."""

    def ready(self) -> list[tuple[str, StoredEvent]]:
        """Events after the floor that are settled, in key order; the floor moves past them. Blocking."""
        now = time.time()
        self.unsettled = False
        found: list[tuple[str, StoredEvent]] = []
        for record in self._store.list_sessions():
            if record.updated_at < self.floor[0] - SETTLE:
                continue
            try:
                events = self._store.load_events(record.id, since=self._seen.get(record.id, 0))
            except SessionNotFound:
                continue
            for stored in events:
                if stored.created_at > now - SETTLE:
                    self.unsettled = True
                    break  # not settled: read again next time
                self._seen[record.id] = stored.seq
                if _key(record.id, stored) > self.floor:
                    found.append((record.id, stored))
        found.sort(key=lambda item: _key(*item))
        if found:
            self.floor = _key(*found[-1])
        return found


async def firehose(store: SessionStore, start: _Key, inbox: Inbox) -> AsyncIterator[bytes]:
    """SSE frames of every session after ``start``; stored events with the id ``SESSION/SEQ``, live
    text and notices of the sessions this server hears without one. Never ends by itself."""
    scan = _Scan(store, start)
    idle = 0.0
    last_id: str | None = None
    next_scan = trio.current_time()
    while True:
        if trio.current_time() >= next_scan:
            for session, stored in await trio.to_thread.run_sync(scan.ready):
                last_id = f"{session}/{stored.seq}"
                idle = 0.0
                yield stored_frame(stored, last_id)
            next_scan = trio.current_time() + (_POLL if scan.unsettled else _IDLE_SCAN)
        entries = await inbox.next(max(0.0, min(_POLL, next_scan - trio.current_time())))
        for entry in entries:
            idle = 0.0
            if isinstance(entry, Stored):
                next_scan = min(next_scan, trio.current_time() + SETTLE)
            elif isinstance(entry, BufferedText | Notice | Gap):
                shown = live_frame(entry, last_id)
                if shown is not None:
                    yield shown
        if not entries:
            idle += _POLL
            if idle >= _KEEPALIVE_EVERY:
                idle = 0.0
                yield comment("keepalive")
