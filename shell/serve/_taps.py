"""The server's one subscription to each session, fanned out to the event-stream readers' buffers, and
the permission requests that wait for an answer."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from tool_bridge import PermissionRequested, ToolAbandoned

from .. import events as ev
from ..host import AgentHost
from ._api import PendingPermission
from ._buffer import StreamBuffer

__all__ = ["Taps"]

logger = logging.getLogger("turnkeep.serve")


_UNSTORED = (ev.StepUsage, ev.ThoughtDelta)
"""Events published and never stored that the service's streams do not carry."""


class Taps:
    """Subscribes once per session (:meth:`ensure`, blocking: call it off the event loop) and hands each
    event to the buffers registered for that session or for all sessions. Thread-safe."""

    def __init__(self, host: AgentHost) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._tapped: set[str] = set()
        self._readers: dict[str | None, set[StreamBuffer]] = {}
        self._pending: dict[str, dict[str, PermissionRequested]] = {}
        self._subscribers: dict[str, Callable[[Any], None]] = {}

    def ensure(self, session_id: str) -> None:
        """Make sure this server hears the session's events (resuming it from the store if needed).
        Raises :class:`~shell.host.HostError` for a session the store does not hold."""
        with self._lock:
            if session_id in self._tapped:
                return
            self._tapped.add(session_id)
        subscriber = functools.partial(self._heard, session_id)
        try:
            # Subscribed before the session starts: a turn it resumes is heard from its first event.
            self._host.resume(session_id, subscribers=[subscriber])
            with self._lock:
                self._subscribers[session_id] = subscriber
        except BaseException:
            with self._lock:
                self._tapped.discard(session_id)
            raise

    def close(self) -> None:
        """Unsubscribe from every running session (blocking: call it off the event loop, once the server
        has stopped). A passivated session is not woken for this, and one that does not answer keeps a
        subscription that feeds nobody."""
        with self._lock:
            tapped, self._tapped = set(self._tapped), set()
            subscribers, self._subscribers = dict(self._subscribers), {}
        for session_id in tapped & set(self._host.active()):
            subscriber = subscribers.get(session_id)
            if subscriber is None:
                continue
            try:
                self._host.unsubscribe(session_id, subscriber)
            except Exception as error:
                logger.debug("session %s: could not unsubscribe: %s", session_id, error)

    def forget(self, session_id: str) -> None:
        """The session was closed: drop what is known of it (its subscription ended with its actors)."""
        with self._lock:
            self._tapped.discard(session_id)
            self._pending.pop(session_id, None)
            self._subscribers.pop(session_id, None)

    def add(self, buffer: StreamBuffer, session_id: str | None) -> None:
        """Feed ``buffer`` with the session's events (every tapped session's when None)."""
        with self._lock:
            self._readers.setdefault(session_id, set()).add(buffer)

    def remove(self, buffer: StreamBuffer) -> None:
        """Stop feeding ``buffer``."""
        with self._lock:
            for readers in self._readers.values():
                readers.discard(buffer)

    def reader_count(self) -> int:
        """How many stream buffers are fed now."""
        with self._lock:
            return sum(len(readers) for readers in self._readers.values())

    def pending(self, session_id: str) -> list[PendingPermission]:
        """The session's permission requests waiting for an answer, oldest first."""
        with self._lock:
            waiting = list(self._pending.get(session_id, {}).values())
        return [PendingPermission(p.call_id, p.tool, p.arguments, p.reason) for p in waiting]

    def take_pending(self, session_id: str, request_id: str) -> PermissionRequested | None:
        """Claim the waiting request (it can be answered once); None when it no longer waits."""
        with self._lock:
            return self._pending.get(session_id, {}).pop(request_id, None)

    def _heard(self, session_id: str, event: Any) -> None:
        """Called on the session's thread: quick, and never raising into it."""
        with self._lock:
            readers = list(self._readers.get(session_id, ())) + list(self._readers.get(None, ()))
            if isinstance(event, PermissionRequested):
                self._pending.setdefault(session_id, {})[event.call_id] = event
            elif isinstance(event, ev.ToolCallFinished):
                self._pending.get(session_id, {}).pop(event.call_id, None)
            elif isinstance(event, ev.TERMINAL_EVENTS):
                self._pending.pop(session_id, None)
        if isinstance(event, _UNSTORED):
            return  # announcing it would make the stream wait for a stored event that never comes
        for buffer in readers:
            if isinstance(event, ev.TextDelta):
                buffer.delta(session_id, event.turn, event.text)
            elif isinstance(event, PermissionRequested | ToolAbandoned):
                buffer.notice(session_id, event)
            else:
                buffer.stored(session_id)
