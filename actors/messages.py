"""Messages the runtime itself delivers: monitors' ``Down`` notices, dead letters and job failures."""

from __future__ import annotations

import enum
from typing import Any

import msgspec

__all__ = ["DeadLetter", "Down", "ExitReason", "JobFailed"]


class ExitReason(enum.StrEnum):
    """Why an actor's incarnation ended."""

    NORMAL = "normal"
    """It stopped cooperatively: its ``on_stop`` ran."""
    CRASHED = "crashed"
    """A handler, ``on_start`` or ``on_stop`` raised."""
    KILLED = "killed"
    """It did not stop within its shutdown timeout and was cut off; messages still queued were recorded as
    dead letters."""
    NOPROC = "noproc"
    """No incarnation was running when the watch was placed, and none was about to start (the address was
    never started, or has stopped for good)."""


class Down(msgspec.Struct, frozen=True, tag=True):
    """Told to every watcher of ``address`` each time an incarnation there ends, and once, with reason
    ``NOPROC`` and incarnation 0, to a watcher that started watching while no incarnation was there."""

    address: str
    reason: ExitReason
    error: Any = None
    """The exception of a crash, else ``None``."""
    incarnation: int = 0


class DeadLetter(msgspec.Struct, frozen=True, tag=True):
    """A message that was not handled, with the reason. Recorded by the system, never silently dropped."""

    address: str
    message: Any
    reason: str
    at: float
    """``time.time()`` when it was recorded."""
    was_ask: bool = False


class JobFailed(msgspec.Struct, frozen=True, tag=True):
    """Told to a job's owner when an IoLoop job raised instead of finishing."""

    job_id: int
    name: str
    error: Any
