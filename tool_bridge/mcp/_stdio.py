"""A stdio MCP server as a process in its own group, bridged to the SDK's message streams.

The SDK's own stdio transport hides the process; this one keeps it, so its exit code reaches the calls in
flight, its stderr is kept (bounded) for error messages and the log, and its whole group can be killed.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types
import trio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from tool_bridge._process import kill_process_group, process_group_alive

__all__ = ["ServerProcess", "open_stdio"]

_READ_SIZE = 65536
_MAX_LINE = 16 * 1024 * 1024
_LOGGED_LINES = 200
_LOGGED_LINE_CHARS = 500
_TERMINATE_GRACE = 2.0
_REAP_WAIT = 2.0
_EXIT_AFTER_EOF = 1.0


@dataclass(eq=False)
class ServerProcess:
    """The running server: its process, its stderr tail, and why its conversation ended.

    ``ended`` is set once, by the first of: the process exited, it wrote something that is not a JSON-RPC
    message, or its stdout or stdin closed; ``reason`` then says which (``exited (code 3)``…). A closed
    stdout or stdin is the reason only when the process has not exited within a second of it: a server
    killed mid-call is reported by its signal, whichever of its pipes broke first.
    """

    name: str
    process: trio.Process
    tail_chars: int
    ended: trio.Event = field(default_factory=trio.Event)
    reason: str = ""
    _tail: deque[str] = field(default_factory=deque)
    _tail_size: int = 0

    @property
    def pid(self) -> int:
        """The server's process id, which is also its process group's id."""
        return self.process.pid

    def stderr_tail(self) -> str:
        """The last characters the server wrote to stderr (at most ``tail_chars``)."""
        return "".join(self._tail)[-self.tail_chars :] if self.tail_chars else ""

    def end(self, reason: str) -> None:
        """Record why the conversation ended, the first time only."""
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()

    def keep_unread_stderr(self) -> None:
        """Keep what the server wrote to stderr that has not been read yet, without waiting.

        An error composed right after a deadline then carries what the server said before it, however
        late the reading task would have come to it on a busy machine.
        """
        stderr = self.process.stderr
        if not isinstance(stderr, trio.lowlevel.FdStream):
            return
        try:
            while data := os.read(stderr.fileno(), _READ_SIZE):
                self.keep_stderr(data.decode(errors="replace"))
        except (BlockingIOError, OSError, ValueError):  # nothing more now, or the pipe is closed
            pass

    def keep_stderr(self, text: str) -> None:
        self._tail.append(text)
        self._tail_size += len(text)
        while self._tail and self._tail_size - len(self._tail[0]) >= self.tail_chars:
            self._tail_size -= len(self._tail.popleft())

    def alive(self) -> bool:
        """Whether any process of the server's group still runs."""
        return process_group_alive(self.pid)

    def kill(self) -> None:
        """SIGKILL the whole process group now."""
        kill_process_group(self.pid, signal.SIGKILL)


def describe_exit(code: int | None) -> str:
    """``exited (code 3)`` or ``was killed by signal 9 (SIGKILL)``."""
    if code is None:
        return "exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-code} ({name})"
    return f"exited (code {code})"


@asynccontextmanager
async def open_stdio(
    name: str,
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    tail_chars: int,
    logger: logging.Logger,
) -> AsyncIterator[tuple[TransportStreams, ServerProcess]]:
    """Start ``argv`` in a new process group and yield the SDK's streams and the `ServerProcess`.

    On exit (normal or cancelled) the server's stdin is closed and its group terminated, then killed
    after a grace; no process of the group is left behind. Raises OSError when it cannot be started.
    """
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=str(cwd),
        start_new_session=True,
    )
    server = ServerProcess(name, process, tail_chars)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](16)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_stdout, server, to_session)
            nursery.start_soon(_write_stdin, server, from_session)
            nursery.start_soon(_read_stderr, server, logger)
            nursery.start_soon(_wait_exit, server)
            try:
                yield (read_stream, write_stream), server
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(server)
            for stream in (read_stream, write_stream, to_session, from_session):
                await stream.aclose()


async def _read_stdout(
    server: ServerProcess, out: anyio.abc.ObjectSendStream[SessionMessage | Exception]
) -> None:
    stdout = server.process.stdout
    assert stdout is not None
    buffer = b""
    try:
        while data := await stdout.receive_some(_READ_SIZE):
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_LINE:
                server.end(f"wrote a line of more than {_MAX_LINE} bytes on stdout")
                return
            for line in lines:
                if not line.strip():
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    server.end(f"wrote something that is not a JSON-RPC message on stdout: {line[:200]!r}")
                    return
                await out.send(SessionMessage(message))
    except (trio.ClosedResourceError, trio.BrokenResourceError, anyio.BrokenResourceError, OSError):
        pass
    finally:
        await out.aclose()
    await _end_unless_it_exits(server, "closed its stdout")


async def _write_stdin(server: ServerProcess, source: anyio.abc.ObjectReceiveStream[SessionMessage]) -> None:
    stdin = server.process.stdin
    assert stdin is not None
    try:
        async for message in source:
            text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            await stdin.send_all(text.encode() + b"\n")
    except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
        await _end_unless_it_exits(server, "stopped reading its stdin")


async def _end_unless_it_exits(server: ServerProcess, reason: str) -> None:
    """End the conversation for ``reason`` (a pipe of the server broke) unless the server's exit, which
    says more and usually follows at once (a server that dies breaks its pipes too), ends it within
    :data:`_EXIT_AFTER_EOF` seconds."""
    with trio.move_on_after(_EXIT_AFTER_EOF):
        await server.ended.wait()
    server.end(reason)


async def _read_stderr(server: ServerProcess, logger: logging.Logger) -> None:
    stderr = server.process.stderr
    assert stderr is not None
    logged = 0
    pending = b""
    try:
        while data := await stderr.receive_some(_READ_SIZE):
            server.keep_stderr(data.decode(errors="replace"))
            pending += data
            *lines, pending = pending.split(b"\n")
            pending = pending[-_LOGGED_LINE_CHARS:]
            for line in lines:
                logged += 1
                if logged <= _LOGGED_LINES:
                    logger.info("%s: %s", server.name, line.decode(errors="replace")[:_LOGGED_LINE_CHARS])
                elif logged == _LOGGED_LINES + 1:
                    logger.info("%s: (more stderr not logged; the last part is kept)", server.name)
    except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
        pass


async def _wait_exit(server: ServerProcess) -> None:
    code = await server.process.wait()
    server.end(describe_exit(code))


async def _stop(server: ServerProcess) -> None:
    """Close stdin, terminate the group, kill it after a grace, reap the server; every wait bounded."""
    process = server.process
    if process.stdin is not None:
        with trio.move_on_after(0.5):
            await process.stdin.aclose()
    if process.returncode is None or server.alive():
        kill_process_group(server.pid, signal.SIGTERM)
        with trio.move_on_after(_TERMINATE_GRACE):
            await process.wait()
            while server.alive():
                await trio.sleep(0.05)
        if server.alive() or process.returncode is None:
            server.kill()
    with trio.move_on_after(_REAP_WAIT):
        await process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with trio.move_on_after(0.5):
                await stream.aclose()
    if os.name == "posix" and server.alive():
        server.kill()
