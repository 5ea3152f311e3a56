"""A session's subscriber for an ACP connection: its events carried to the connection's trio loop."""

from __future__ import annotations

import threading
from collections import deque
from contextlib import suppress
from typing import Any

import trio

__all__ = ["Forward"]


class Forward:
    """A session's events sent into the agent's event channel, in order, until :meth:`detach`: a
    connection that let the session go hears nothing more of it through this subscriber (one taken up
    again gets a new one). Events that come while the loop has not taken the earlier ones yet go with them:
    one wake of the loop for a burst, not one per event."""

    def __init__(
        self, session_id: str, token: trio.lowlevel.TrioToken, send: trio.MemorySendChannel[Any]
    ) -> None:
        self._session_id = session_id
        self._token = token
        self._send = send
        self._attached = True
        self._lock = threading.Lock()
        self._pending: deque[Any] = deque()

    def detach(self) -> None:
        """Send nothing more, from now on (events not yet taken by the loop are dropped)."""
        self._attached = False

    def _deliver(self) -> None:
        with self._lock:
            events, self._pending = self._pending, deque()
        if not self._attached:
            return
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            for event in events:
                self._send.send_nowait((self._session_id, event))

    def __call__(self, event: Any) -> None:
        """Carry ``event`` to the loop, after the ones before it (call from any thread)."""
        if not self._attached:
            return
        with self._lock:
            wake = not self._pending
            self._pending.append(event)
        if wake:
            with suppress(trio.RunFinishedError, RuntimeError):
                self._token.run_sync_soon(self._deliver)
