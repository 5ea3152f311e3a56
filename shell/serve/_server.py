"""Running the application with hypercorn's trio worker on the host's own trio loop (its IoLoop)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIFramework

from actors import Job

from ..config import ServeSettings
from ..host import AgentHost
from ._app import build_app
from ._auth import ServeRefused
from ._context import ServeContext

__all__ = ["RunningServer", "start_server"]

logger = logging.getLogger("turnkeep.serve")

_GRACE = 2.0
"""Seconds open connections get to finish when the server stops (event streams end at once)."""


class RunningServer:
    """A server listening on :attr:`url`; :meth:`stop` ends it (the host stays up: shut it down after)."""

    def __init__(self, job: Job, ctx: ServeContext, host: str, port: int, stop: trio.Event) -> None:
        self._job = job
        self._stop = stop
        self.context = ctx
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server still serves."""
        return not self._job.done

    def wait(self, timeout: float) -> bool:
        """Whether the server ended within ``timeout`` seconds."""
        try:
            self._job.wait(timeout)
        except TimeoutError:
            return False
        except Exception:
            return True
        return True

    def resume_interrupted(self) -> list[str]:
        """Resume every session the store says was mid-turn or has prompts waiting (the process ended
        meanwhile): each goes on with its turn (or ends it ``interrupted`` when it may not be resumed) and
        runs its waiting prompts, so that readers see those turns end. Returns their ids; blocking."""
        resumed = []
        host = self.context.host
        for record in host.list_sessions():
            waiting = record.status == "idle" and bool(host.store.load_queued_prompts(record.id))
            if record.status == "in_turn" or waiting:
                try:
                    self.context.taps.ensure(record.id)
                except Exception:
                    logger.exception("could not resume session %s", record.id)
                    continue
                resumed.append(record.id)
        return resumed

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, end the event streams, let requests finish for a moment; idempotent."""
        loop = self.context.host.system.io
        if self._job.done:
            self.context.taps.close()
            return

        def signal() -> None:
            self.context.stopping.set()
            self._stop.set()

        try:
            loop.trio_token.run_sync_soon(signal)
        except (trio.RunFinishedError, RuntimeError):
            return
        if not self.wait(timeout):
            self._job.cancel()
            self.wait(1.0)
        self.context.taps.close()


def start_server(
    host: AgentHost, settings: ServeSettings, *, token: str, workspace_root: Path, timeout: float = 10.0
) -> RunningServer:
    """Serve ``host`` on ``settings.host``/``settings.port`` (0: a free port) and return once it listens.
    Raises :class:`ServeRefused` when it cannot listen there (the address in use, for instance)."""
    ready = threading.Event()
    found: dict[str, object] = {}

    async def main() -> None:
        ctx = ServeContext(host, settings, token, workspace_root)
        stop = trio.Event()
        config = Config()
        config.bind = [_bind(settings.host, settings.port)]
        config.accesslog = None
        config.errorlog = logger
        config.graceful_timeout = _GRACE
        config.include_server_header = False
        try:
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(
                    lambda task_status: serve(
                        cast(ASGIFramework, build_app(ctx)),
                        config,
                        shutdown_trigger=stop.wait,
                        task_status=task_status,
                    )
                )
                found.update(ctx=ctx, stop=stop, binds=binds)
                ready.set()
        except BaseException as error:
            found.setdefault("error", error)
            raise
        finally:
            ready.set()

    job = host.system.io.submit(main, name="turnkeep-serve")
    if not ready.wait(timeout):
        job.cancel()
        raise ServeRefused(f"the server did not start listening within {timeout:g} s")
    if "error" in found or "binds" not in found:
        raise ServeRefused(f"cannot listen on {settings.host}:{settings.port}: {_cause(found.get('error'))}")
    port = _port(found["binds"])
    ctx, stop = found["ctx"], found["stop"]
    assert isinstance(ctx, ServeContext) and isinstance(stop, trio.Event)
    return RunningServer(job, ctx, settings.host, port, stop)


def _bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _port(binds: object) -> int:
    assert isinstance(binds, list) and binds
    return int(str(binds[0]).rsplit(":", 1)[1])


def _cause(error: object) -> str:
    """The first leaf of an exception group (trio wraps what a nursery raised), as a line."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return f"{type(error).__name__}: {error}"
