"""One session's event stream: stored events replayed from the store after a cursor, then live, with
each stored event's id its seq in the session's log, so that no event is missed or repeated at the seam.

Stored events always come from the store, in seq order: a live announcement only says "read the store
now". Announcements are counted so that streamed text stays in place between the stored events around
it; a periodic read picks up anything announced before it was stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from ..store import SessionStore, StoredEvent
from ._buffer import BufferedText, Gap, Notice, Stored
from ._frames import live_frame, stored_frame
from ._sse import comment
from ._wakeup import Inbox

__all__ = ["POLL_INTERVAL", "session_events"]

POLL_INTERVAL = 1.0
"""Seconds between reads of the store when nothing was announced."""
KEEPALIVE_EVERY = 15.0


async def _load(store: SessionStore, session_id: str, since: int) -> list[StoredEvent]:
    return await trio.to_thread.run_sync(lambda: store.load_events(session_id, since=since))


async def session_events(
    store: SessionStore,
    session_id: str,
    after: int,
    inbox: Inbox,
    *,
    is_closed: Callable[[], Any],
    poll: float = POLL_INTERVAL,
) -> AsyncIterator[bytes]:
    """The SSE frames of ``session_id`` after seq ``after``; ``inbox`` must already hear the session, so
    that nothing stored after the replay goes unannounced. Ends once the session is closed (as
    ``is_closed``, called on a worker thread, says) and every stored event was sent."""
    last = after
    for stored in await _load(store, session_id, last):
        last = stored.seq
        yield stored_frame(stored, str(stored.seq))
    credits = 0
    idle = 0.0
    while True:
        entries = await inbox.next(poll)
        if not entries:
            new = await _load(store, session_id, last)
            credits = 0
            for stored in new:
                last = stored.seq
                yield stored_frame(stored, str(stored.seq))
            if not new and await trio.to_thread.run_sync(is_closed):
                return
            idle = 0.0 if new else idle + poll
            if idle >= KEEPALIVE_EVERY:
                idle = 0.0
                yield comment("keepalive")
            continue
        idle = 0.0
        for entry in entries:
            if isinstance(entry, Stored):
                credits += entry.count
                new = await _load(store, session_id, last)
                for stored in new[:credits]:
                    last = stored.seq
                    yield stored_frame(stored, str(stored.seq))
                credits -= min(credits, len(new))
            elif isinstance(entry, BufferedText | Notice | Gap):
                shown = live_frame(entry, str(last))
                if shown is not None:
                    yield shown
