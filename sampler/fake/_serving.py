"""Serving the provider's ASGI app with hypercorn's asyncio worker on a listening socket, in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from typing import cast

from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.typing import ASGIFramework
from hypercorn.utils import wrap_app

from ._app import ProviderApp
from ._http import Receive, Scope, Send

__all__ = ["ServingThread"]

logger = logging.getLogger("turnkeep.sampler.fake")


class ServingThread:
    """Serves `app` on `listener` (bound and listening) from a thread with an asyncio loop of its own.

    The socket is the thread's from `start()` on: it is closed when the thread ends, whatever ends it.
    """

    def __init__(self, app: ProviderApp, listener: socket.socket, *, name: str, grace: float) -> None:
        self._app = app
        self._listener = listener
        self._config = _config(grace)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ended_or_serving = threading.Event()
        self._serving = False
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = False

    @property
    def failure(self) -> BaseException | None:
        """What ended the serving loop with an error, if anything has."""
        return self._failure

    def start(self, timeout: float) -> bool:
        """Start the thread; True once hypercorn serves the socket, False if the thread ended first or
        `timeout` seconds passed (stop it then)."""
        self._thread.start()
        return self._ended_or_serving.wait(timeout) and self._serving

    def stop(self, timeout: float) -> bool:
        """Stop accepting, end stalled responses, give the others the grace period and cancel the rest,
        close the socket; True once the thread has ended, within `timeout` seconds.

        Safe from any thread but its own, before or after the loop began, and more than once. Raises
        RuntimeError from its own thread.
        """
        if self._thread is threading.current_thread():
            raise RuntimeError("a serving thread cannot stop itself")
        with self._lock:
            self._stop_requested = True
            loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                loop.call_soon_threadsafe(self._begin_stop)
        if self._thread.ident is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _begin_stop(self) -> None:
        assert self._loop is not None and self._stop is not None
        if self._stop.is_set():
            return
        # Stop accepting now: hypercorn closes its server a few loop turns later, and a connection that
        # attaches to a closed asyncio server leaks its socket (Python 3.11).
        if self._listener.fileno() != -1:
            self._loop.remove_reader(self._listener.fileno())
        self._app.begin_close()
        self._stop.set()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._failure = exc
        finally:
            self._listener.close()
            self._ended_or_serving.set()

    async def _serve(self) -> None:
        stop = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._stop = stop
            if self._stop_requested:
                stop.set()
        # worker_serve, unlike serve, takes sockets: hypercorn serves this one without a second owner of
        # its descriptor (a bind of "fd://N" would wrap it in another socket object that closes it too).
        app = wrap_app(cast(ASGIFramework, self._asgi), self._config.wsgi_max_body_size, "asgi")
        sockets = Sockets(secure_sockets=[], insecure_sockets=[self._listener], quic_sockets=[])
        await worker_serve(app, self._config, sockets=sockets, shutdown_trigger=stop.wait)

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        else:
            await self._app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # hypercorn serves the socket as soon as the startup completes, waiting on nothing else; and as
        # the socket listens already, a connection made from then on waits at most in its backlog.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                self._serving = True
                self._ended_or_serving.set()
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def _config(grace: float) -> Config:
    config = Config()
    config.accesslog = None
    config.errorlog = logger
    config.graceful_timeout = grace
    config.include_server_header = False
    config.include_date_header = False
    return config
