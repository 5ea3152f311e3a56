"""Helpers of the group-commit specifications: holding a store's write path from outside so that writes
queue up behind it, calls made on threads of their own, and bounded waits."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from shell.store import SessionStore

GATE = "gate"
"""The session whose write the held write path blocks (PostgreSQL holds that session's row)."""


@contextmanager
def held_write_path(target: Path | str) -> Iterator[Callable[[], None]]:
    """Hold, from another connection, what the store's next transaction needs: the file's write lock, or the
    row of session :data:`GATE` (which must exist). Yields ``release``; leaving the block releases too."""
    if isinstance(target, Path):
        raw: Any = sqlite3.connect(target, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        release = lambda: raw.in_transaction and raw.execute("ROLLBACK")  # noqa: E731
    else:
        import psycopg

        raw = psycopg.connect(target)
        raw.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (GATE,))
        release = raw.rollback
    try:
        yield release
    finally:
        release()
        raw.close()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Return once ``condition()`` holds; fail the test if it does not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        pause.wait(0.002)


class Calls:
    """Store calls made on threads of their own; each outcome is its value or the exception it raised."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self.outcomes: dict[str, object] = {}

    def start(self, name: str, call: Callable[[], object]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = call()
            except BaseException as error:
                self.outcomes[name] = error

        thread = threading.Thread(target=run, name=name)
        self._threads.append(thread)
        thread.start()

    def join(self, timeout: float = 30.0) -> dict[str, object]:
        """Wait for every call (each at most ``timeout`` seconds); their outcomes by name."""
        for thread in self._threads:
            thread.join(timeout)
            assert not thread.is_alive(), f"{thread.name} did not return"
        return self.outcomes


def writer_of(store: SessionStore) -> Any:
    """The store's group writer."""
    assert store._writer is not None
    return store._writer
