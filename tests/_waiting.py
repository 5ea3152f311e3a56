"""Waiting in tests for a condition that another thread makes true and that has no event to wait on."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether ``predicate`` became true within ``timeout`` seconds, checked every few milliseconds."""
    expired = threading.Event()
    deadline = threading.Timer(timeout, expired.set)
    deadline.daemon = True
    deadline.start()
    try:
        while not expired.is_set():
            if predicate():
                return True
            expired.wait(0.005)
        return predicate()
    finally:
        deadline.cancel()
