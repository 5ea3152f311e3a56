"""An SSE response that ends when its client goes, when the server stops, or when a write is stuck."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable

import trio
from starlette.types import Receive, Scope, Send

from ._sever import sever

__all__ = ["EventStreamResponse"]

logger = logging.getLogger("turnkeep.serve")

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
]


class EventStreamResponse:
    """Sends each chunk of ``frames`` as it comes. A write that has not completed ``write_timeout``
    seconds after it began disconnects the client (its socket is shut down), so a reader that stopped
    reading costs no more than its bounded buffer; ``on_end`` runs however the response ends."""

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        *,
        write_timeout: float,
        stopping: trio.Event,
        on_end: Callable[[], None],
    ) -> None:
        self._frames = frames
        self._write_timeout = write_timeout
        self._stopping = stopping
        self._on_end = on_end
        self._writing_since = math.inf
        self.severed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_disconnect, receive, nursery.cancel_scope)
                nursery.start_soon(self._until_stopping, nursery.cancel_scope)
                nursery.start_soon(self._watchdog, scope, nursery.cancel_scope)
                await self._write(send)
                nursery.cancel_scope.cancel()
        finally:
            self._on_end()
            aclose = getattr(self._frames, "aclose", None)
            if aclose is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await aclose()

    async def _write(self, send: Send) -> None:
        await self._send(send, {"type": "http.response.start", "status": 200, "headers": _HEADERS})
        async for chunk in self._frames:
            await self._send(send, {"type": "http.response.body", "body": chunk, "more_body": True})
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _send(self, send: Send, message: dict[str, object]) -> None:
        self._writing_since = trio.current_time()
        try:
            await send(message)
        finally:
            self._writing_since = math.inf

    async def _until_disconnect(self, receive: Receive, scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async def _until_stopping(self, scope: trio.CancelScope) -> None:
        await self._stopping.wait()
        scope.cancel()

    async def _watchdog(self, asgi: Scope, scope: trio.CancelScope) -> None:
        step = min(1.0, self._write_timeout / 4)
        while True:
            await trio.sleep(step)
            if trio.current_time() - self._writing_since >= self._write_timeout:
                self.severed = sever(asgi.get("client"), asgi.get("server"))
                logger.info("an event-stream reader stopped reading; disconnected it")
                scope.cancel()
                return
