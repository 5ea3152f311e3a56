"""The dead-letter log: every message that was not handled, with the reason."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ._reply import Ask
from .errors import ActorUnavailable
from .messages import DeadLetter

__all__ = ["DeadLetterLog"]

logger = logging.getLogger("turnkeep.actors")


class DeadLetterLog:
    """Records dead letters; keeps the newest ``capacity`` in memory and counts them all.

    Recording an ask fails it at once with :class:`ActorUnavailable` (or ``error``), so its asker never
    waits on a message that will not be handled.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._recent: collections.deque[DeadLetter] = collections.deque(maxlen=capacity)
        self._total = 0
        self._listeners: list[Callable[[DeadLetter], None]] = []

    @property
    def total(self) -> int:
        """How many dead letters were recorded since the system started."""
        return self._total

    def recent(self) -> list[DeadLetter]:
        """The newest recorded dead letters, oldest first."""
        with self._lock:
            return list(self._recent)

    def subscribe(self, listener: Callable[[DeadLetter], None]) -> None:
        """Call ``listener`` with every dead letter recorded from now on (from the recording thread)."""
        with self._lock:
            self._listeners.append(listener)

    def record(
        self,
        address: str,
        message: Any,
        reason: str,
        error: BaseException | None = None,
        *,
        was_ask: bool = False,
    ) -> None:
        """Record ``message`` as not handled at ``address``; an ask is failed with ``error`` (or
        :class:`ActorUnavailable` carrying ``reason``)."""
        if isinstance(message, Ask):
            was_ask = True
            message.reject(error or ActorUnavailable(f"{address!r}: {reason}"))
            message = message.message
        letter = DeadLetter(address=address, message=message, reason=reason, at=time.time(), was_ask=was_ask)
        with self._lock:
            self._recent.append(letter)
            self._total += 1
            listeners = list(self._listeners)
        logger.debug("dead letter at %s: %s (%s)", address, type(message).__name__, reason)
        for listener in listeners:
            try:
                listener(letter)
            except Exception:
                logger.exception("dead-letter listener failed")
