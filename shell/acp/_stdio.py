"""``turnkeep acp`` as a process: the protocol on stdin and stdout, the host in the same process.

Before the host starts, the process keeps private copies of its stdin and stdout (not inherited by any
child) and puts ``/dev/null`` on fd 0 and stderr on fd 1: whatever a tool, an MCP server, a library or a
stray ``print`` writes to "stdout" goes to stderr, and only protocol lines reach the client. The agent
runs as a job on the host's trio loop; the main thread waits for it, for SIGINT/SIGTERM, or for the
parent's death, then lets the agent stop its turns (``aborted``) and write what it owes, and shuts the
host down.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import trio

from .._signals import on_stop_signals
from ..facade import Host
from ._agent import AcpAgent
from ._jsonrpc import LineSplitter, Oversized
from ._settings import AcpSettings

__all__ = ["StdioClaim", "claim_stdio", "serve_stdio"]

logger = logging.getLogger("turnkeep.acp")

_READ = 1 << 20
_PARENT_CHECK = 0.5
_HOST_SHUTDOWN = 5.0


class StdioClaim:
    """The private descriptors of the protocol's input and output."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd


def claim_stdio() -> StdioClaim:
    """Take fds 0 and 1 for the protocol (see the module): returns their private, non-inheritable
    copies; fd 0 becomes ``/dev/null`` and fd 1 a copy of stderr."""
    sys.stdout.flush()
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return StdioClaim(read_fd, write_fd)


def serve_stdio(make_host: Callable[[], Host], settings: AcpSettings, claim: StdioClaim | None = None) -> int:
    """Run the agent on the process's stdin and stdout until the input ends, SIGINT or SIGTERM, or the
    parent dies; return 0. ``make_host`` is called once stdio is claimed (so that no child the host
    starts inherits the protocol's output). Raises what ``make_host`` raises."""
    claim = claim or claim_stdio()
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="turnkeep acp: %(levelname)s %(message)s"
    )
    wake = threading.Event()
    with on_stop_signals(wake.set):
        host = make_host()
        try:
            loop = host.agent_host.system.io
            holder: dict[str, AcpAgent] = {}
            job = loop.submit(_main, host, settings, claim, holder, wake, name="turnkeep-acp")
            parent = os.getppid()
            while not job.done:
                wake.wait(_PARENT_CHECK)
                if job.done:
                    break
                if wake.is_set() or os.getppid() != parent:
                    agent = holder.get("agent")
                    if agent is not None:
                        with suppress(trio.RunFinishedError, RuntimeError):
                            loop.trio_token.run_sync_soon(agent.stop)
                    with suppress(TimeoutError, Exception):
                        job.wait(settings.abort_grace + 2.0)
                    break
            if job.error is not None:
                logger.error("the agent ended with an error: %r", job.error)
        finally:
            host.backend.shutdown(timeout=_HOST_SHUTDOWN)
            for fd in (claim.read_fd, claim.write_fd):
                with suppress(OSError):
                    os.close(fd)
    return 0


async def _main(
    host: Host, settings: AcpSettings, claim: StdioClaim, holder: dict[str, Any], wake: threading.Event
) -> None:
    write = _writer(claim.write_fd)
    agent = AcpAgent(host.agent_host, settings, write)
    holder["agent"] = agent
    send, receive = trio.open_memory_channel[bytes | Oversized | None](0)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_lines, claim.read_fd, settings.max_line_bytes, send)
            await agent.run(receive)
            nursery.cancel_scope.cancel()
    finally:
        wake.set()


async def _read_lines(fd: int, max_line: int, send: trio.MemorySendChannel[bytes | Oversized | None]) -> None:
    """The input's lines, then None at its end. Reads run on a worker thread (stdin may be a pipe, a
    file or a terminal, and is never made non-blocking)."""
    splitter = LineSplitter(max_line)
    async with send:
        while True:
            try:
                data = await trio.to_thread.run_sync(os.read, fd, _READ, abandon_on_cancel=True)
            except OSError as error:
                logger.warning("reading stdin failed: %s", error)
                data = b""
            if not data:
                for line in splitter.finish():
                    await send.send(line)
                await send.send(None)
                return
            for line in splitter.feed(data):
                await send.send(line)


def _writer(fd: int) -> Callable[[bytes], Any]:
    """Writes whole lines on ``fd`` in order; each returns False once the reader is gone. A pipe or a
    socket is written from the loop itself; anything else from a worker thread."""
    lock = trio.Lock()
    mode = os.fstat(fd).st_mode
    stream = trio.lowlevel.FdStream(os.dup(fd)) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None
    broken = False

    async def write(line: bytes) -> bool:
        nonlocal broken
        if broken:
            return False
        async with lock:
            try:
                if stream is not None:
                    await stream.send_all(line)
                else:
                    await trio.to_thread.run_sync(_write_all, fd, line)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                broken = True
                return False
        return True

    return write


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
