"""A host-wide limit on turns running at once; sessions beyond it wait in order, they do not fail."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import msgspec

from actors import Address

__all__ = ["GateOpen", "TurnGate"]


class GateOpen(msgspec.Struct, frozen=True, tag=True):
    """Told to a waiting session when a turn slot is free for it."""


class TurnGate:
    """At most ``limit`` sessions hold a slot; the others queue first come, first served. Thread-safe."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the turn limit must be at least 1, got {limit}")
        self._limit = limit
        self._lock = threading.Lock()
        self._holders: set[str] = set()
        self._waiting: deque[Address] = deque()

    @property
    def running(self) -> int:
        """How many slots are held."""
        return len(self._holders)

    @property
    def waiting(self) -> int:
        """How many sessions wait for a slot."""
        return len(self._waiting)

    def enter(self, session: Address) -> bool:
        """Take a slot for ``session``; False means it is queued and will be told :class:`GateOpen`."""
        with self._lock:
            if session.name in self._holders:
                return True
            if len(self._holders) < self._limit and not self._waiting:
                self._holders.add(session.name)
                return True
            if session not in self._waiting:
                self._waiting.append(session)
            return False

    def leave(self, session: Address) -> None:
        """Give back ``session``'s slot (or its place in the queue) and wake the next one in line."""
        woken: Any = None
        with self._lock:
            self._holders.discard(session.name)
            if session in self._waiting:
                self._waiting.remove(session)
            if self._waiting and len(self._holders) < self._limit:
                woken = self._waiting.popleft()
                self._holders.add(woken.name)
        if woken is not None:
            woken.tell(GateOpen())
