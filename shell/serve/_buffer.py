"""One event-stream reader's bounded buffer, filled from session threads and drained by the stream.

Stored events are not buffered: the buffer only counts that some were announced, and the stream reads
them from the store, so none can be lost however slow the reader. Text deltas are buffered up to a byte
budget, adjacent ones of the same turn coalesced into one; past the budget they are dropped and one
``Gap`` marks where. Tool notices (a permission request, an abandoned tool) are never dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["BufferedText", "Entry", "Gap", "Notice", "Stored", "StreamBuffer"]


@dataclass(slots=True)
class Stored:
    """``count`` stored events were announced by their session (read them from the store)."""

    session: str
    count: int = 1


@dataclass(slots=True)
class BufferedText:
    """Streamed text of one session's turn (not stored)."""

    session: str
    turn: int
    text: str


@dataclass(slots=True)
class Notice:
    """A live-only event that must reach the reader: a permission request, an abandoned tool."""

    session: str
    event: Any


@dataclass(slots=True)
class Gap:
    """Text was dropped here because the reader fell behind; the turn's final text comes in its end."""

    dropped_bytes: int = 0


Entry: TypeAlias = Stored | BufferedText | Notice | Gap


class StreamBuffer:
    """Thread-safe; ``wake`` is called (from the pushing thread) when the buffer stops being empty.

    Guarantees: the text held never exceeds ``max_text_bytes`` (UTF-8); entries come out in the order
    they went in; a ``Stored`` or ``Notice`` entry is never dropped.
    """

    def __init__(self, max_text_bytes: int, wake: Callable[[], None]) -> None:
        self._max = max_text_bytes
        self._wake = wake
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._text_bytes = 0
        self._gap: Gap | None = None
        self._notified = False
        self.dropped_bytes = 0
        """Text bytes dropped since the buffer was made."""

    @property
    def text_bytes(self) -> int:
        """The text held now, in bytes."""
        return self._text_bytes

    @property
    def empty(self) -> bool:
        """Whether nothing waits to be taken."""
        with self._lock:
            return not self._entries

    def stored(self, session: str) -> None:
        """Announce one stored event of ``session``."""
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if isinstance(last, Stored) and last.session == session:
                last.count += 1
            else:
                self._entries.append(Stored(session))
        self._notify()

    def notice(self, session: str, event: Any) -> None:
        """Add a live-only event that must not be dropped."""
        with self._lock:
            self._entries.append(Notice(session, event))
        self._notify()

    def delta(self, session: str, turn: int, text: str) -> None:
        """Add streamed text: coalesced with the text before it, or dropped (with a gap) past the budget."""
        if not text:
            return
        size = len(text.encode())
        with self._lock:
            if self._gap is not None or self._text_bytes + size > self._max:
                self.dropped_bytes += size
                if self._gap is None:
                    self._gap = Gap()
                    self._entries.append(self._gap)
                self._gap.dropped_bytes += size
            else:
                self._text_bytes += size
                last = self._entries[-1] if self._entries else None
                if isinstance(last, BufferedText) and last.session == session and last.turn == turn:
                    last.text += text
                else:
                    self._entries.append(BufferedText(session, turn, text))
        self._notify()

    def take(self) -> list[Entry]:
        """Everything buffered, oldest first, leaving the buffer empty (and ready to wake again)."""
        with self._lock:
            entries, self._entries = self._entries, []
            self._text_bytes = 0
            self._gap = None
            self._notified = False
        return entries

    def _notify(self) -> None:
        with self._lock:
            if self._notified:
                return
            self._notified = True
        self._wake()
