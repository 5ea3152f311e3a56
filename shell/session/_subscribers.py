"""Handing an event to a session's subscribers: addresses, queues and callables alike."""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterable
from typing import Any

from .._secrets import redact_known_struct

__all__ = ["publish"]

logger = logging.getLogger("turnkeep.shell")


def publish(subscribers: Iterable[Any], event: Any, *, session_id: str) -> None:
    """Give ``event`` to each subscriber: an object with ``tell`` (an address) is told it, a
    ``queue.Queue`` gets it put, anything else is called with it. A subscriber that fails is logged and
    never stops the others. A known secret in the event is replaced by its marker first."""
    event = redact_known_struct(event)
    for subscriber in list(subscribers):
        try:
            if isinstance(subscriber, queue.Queue):
                subscriber.put_nowait(event)
            elif hasattr(subscriber, "tell"):
                subscriber.tell(event)
            else:
                subscriber(event)
        except Exception:
            logger.exception("session %s: a subscriber failed", session_id)
