"""A StreamBuffer seen from the event loop: wait for entries with a deadline, woken from any thread."""

from __future__ import annotations

import contextlib

import trio

from ._buffer import Entry, StreamBuffer

__all__ = ["Inbox"]


class Inbox:
    """Owns one :class:`StreamBuffer` whose pushes (from session threads) wake :meth:`next`. Make it on
    the event loop's thread."""

    def __init__(self, max_text_bytes: int) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._event = trio.Event()
        self.buffer = StreamBuffer(max_text_bytes, self._wake)

    def _wake(self) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # the loop has ended: nobody is waiting
            self._token.run_sync_soon(self._set)

    def _set(self) -> None:
        self._event.set()

    async def next(self, timeout: float) -> list[Entry]:
        """The buffered entries, waiting up to ``timeout`` seconds for some; [] when none came."""
        self._event = trio.Event()
        entries = self.buffer.take()
        if entries:
            return entries
        with trio.move_on_after(timeout):
            await self._event.wait()
        self._event = trio.Event()
        return self.buffer.take()
