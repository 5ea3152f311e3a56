"""The reply slot of one ask: whoever claims it first (the handler, or the asker giving up) wins."""

from __future__ import annotations

import threading
import time
from typing import Any

from ._strands import Runner, blocking, wait_helping
from .errors import AskTimeout

_DELIVERED_GRACE = 1.0


class Ask:
    """An ask in flight: the message and a slot for exactly one reply."""

    __slots__ = ("_done", "_error", "_token", "_value", "message")

    def __init__(self, message: Any) -> None:
        self.message = message
        self._done = threading.Lock()
        self._done.acquire()
        # list.pop() is atomic, so exactly one of the handler and the asker can take the token.
        self._token = [True]
        self._value: Any = None
        self._error: BaseException | None = None

    def claim(self) -> bool:
        """Take the right to answer; False when the asker has already given up (or another claimed it)."""
        try:
            self._token.pop()
        except IndexError:
            return False
        return True

    def resolve(self, value: Any) -> None:
        """Answer with a value; only after a successful :meth:`claim`."""
        self._value = value
        self._done.release()

    def fail(self, error: BaseException) -> None:
        """Answer with an error; only after a successful :meth:`claim`."""
        self._error = error
        self._done.release()

    def reject(self, error: BaseException) -> bool:
        """Claim and fail in one step; False when the asker had already given up."""
        if not self.claim():
            return False
        self.fail(error)
        return True

    def _answered(self) -> bool:
        return not self._done.locked()

    def wait(self, timeout: float, address: str, runner: Runner | None = None) -> Any:
        """Block until answered or the deadline passes; never longer than ``timeout`` plus a short grace.
        ``runner`` is the asked actor's place on its strand, when known."""
        deadline = time.monotonic() + timeout
        if runner is not None:
            wait_helping(runner, self._answered, deadline)
        with blocking():
            answered = self._done.acquire(timeout=max(0.0, deadline - time.monotonic()))
        if not answered:
            if self.claim():
                raise AskTimeout(
                    f"no reply from {address!r} within {timeout:g} s; the message was withdrawn unhandled",
                    delivered=False,
                )
            with blocking():
                answered = self._done.acquire(timeout=max(timeout, _DELIVERED_GRACE))
            if not answered:
                raise AskTimeout(
                    f"no reply from {address!r} within {timeout:g} s; its handler is still running, "
                    "so the outcome is unknown",
                    delivered=True,
                )
        if self._error is not None:
            raise self._error
        return self._value
