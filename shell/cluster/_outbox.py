"""A replica's outbox: its sessions' events, numbered, kept until the pool acknowledges them."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque

__all__ = ["Outbox"]


class Outbox:
    """Events in the order they were put, numbered from 1.

    :meth:`take` returns what follows the number it is given and forgets everything up to that number,
    so an answer lost on the way is sent again by the next take with the same number: nothing is lost,
    nothing is repeated once acknowledged. Safe to use from any number of threads.
    """

    def __init__(self) -> None:
        self._items: deque[tuple[int, str, bytes]] = deque()
        self._last = 0
        self._ready = threading.Condition()

    @property
    def last(self) -> int:
        """The number of the newest event put (0 before the first)."""
        with self._ready:
            return self._last

    def put(self, session_id: str, event: bytes) -> None:
        """Add one event of ``session_id`` (its encoded bytes). Never blocks on a reader."""
        with self._ready:
            self._last += 1
            self._items.append((self._last, session_id, event))
            self._ready.notify_all()

    def take(self, after: int, wait: float, *, limit: int = 4096) -> list[tuple[int, str, bytes]]:
        """At most ``limit`` events numbered above ``after``, oldest first, waiting up to ``wait`` seconds
        for the first one (an empty list when none came). Events up to ``after`` are forgotten."""
        deadline = time.monotonic() + max(wait, 0.0)
        with self._ready:
            while self._items and self._items[0][0] <= after:
                self._items.popleft()
            while not self._items:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._ready.wait(remaining)
            return list(itertools.islice(self._items, limit))
