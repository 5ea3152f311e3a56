"""The way past the gate's mailbox, for the requests the gate would let through at once anyway."""

from __future__ import annotations

import threading

__all__ = ["GateShortcut"]


class GateShortcut:
    """Shared by a :class:`~sampler.gate.ProviderGate` and its clients; thread-safe.

    The gate opens it while it knows no limit that could hold a request back (no budget, no ceiling, no
    cool-down, no request waiting, and the provider has answered once without a refusal since); while it
    is open, :meth:`take` lets a request go at once, with no message to the gate and no wait for its
    answer. The gate closes it as soon as it learns otherwise, and counts the requests that went this way
    as in flight (:attr:`in_flight`) in everything it decides and reports.
    """

    __slots__ = ("_in_flight", "_lock", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Requests that went by the shortcut and have not been given back."""
        return self._in_flight

    def take(self) -> bool:
        """Let one request go now (True, counted in flight until :meth:`give_back`), or not (False)."""
        with self._lock:
            if not self._open:
                return False
            self._in_flight += 1
            return True

    def give_back(self) -> None:
        """A request that went by the shortcut has ended."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)

    def set_open(self, is_open: bool) -> None:
        """Open or close the shortcut; only the gate calls this."""
        with self._lock:
            self._open = is_open
