"""How the pool reaches one replica, whatever carries the bytes."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ReplicaGone", "ReplicaHandle", "ReplicaUnreachable"]


class ReplicaUnreachable(Exception):
    """The replica did not answer in time, or its process is gone and may be coming back."""


class ReplicaGone(Exception):
    """The replica is gone for good: it will not be restarted."""


class ReplicaHandle(Protocol):
    """One replica, seen from the pool."""

    @property
    def name(self) -> str:
        """A name for logs and reports."""
        ...

    def call(self, request: bytes, timeout: float) -> bytes:
        """Send an encoded request and return the encoded reply within ``timeout`` seconds; raises
        :class:`ReplicaUnreachable` or :class:`ReplicaGone`."""
        ...

    def restart(self) -> None:
        """Have the replica's process ended and started again (it may still answer for a moment)."""
        ...

    def stop(self) -> None:
        """End the replica for good."""
        ...
