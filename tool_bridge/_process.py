"""Run a command in a process group of its own, and leave nothing of that group behind.

`trio.run_process` signals only the child and waits seconds before escalating; a tool's command is a
whole tree (``bash -c`` and whatever it starts), so here the unit that is signalled, awaited and killed
is the process group.
"""

from __future__ import annotations

import codecs
import math
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec
import trio

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_OUTPUT_CAP",
    "DEFAULT_TERMINATE_GRACE",
    "ProcessResult",
    "kill_process_group",
    "process_group_alive",
    "run_process_group",
]

DEFAULT_OUTPUT_CAP = 30_000
"""Characters kept of each of stdout and stderr."""
DEFAULT_TERMINATE_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when a command is stopped early."""
DEFAULT_DRAIN_TIMEOUT = 0.5
"""Seconds the pipes may stay open after the main process has ended."""

_CLEANUP_TIMEOUT = 2.0
_EOF_AFTER_KILL = 0.2
_GROUP_POLL_INTERVAL = 0.01
_READ_SIZE = 65536

_End = Literal["exited", "timed_out", "aborted"]


class ProcessResult(msgspec.Struct, frozen=True):
    """How a command run by `run_process_group` ended, and what it wrote.

    ``pid`` is the main process's id, which is also its process group id.  ``returncode`` follows
    `subprocess`: negative for death by a signal; ``None`` only if the process could not be reaped
    within the cleanup deadline.  ``stdout``/``stderr`` hold at most the output cap in characters
    (undecodable bytes shown as U+FFFD); ``*_cut_bytes`` count the bytes received beyond it.
    ``timed_out`` and ``aborted`` say the command was stopped early; the output is what it produced
    until then.  ``duration`` is in seconds of trio time.
    """

    pid: int
    returncode: int | None
    stdout: str
    stderr: str
    stdout_cut_bytes: int
    stderr_cut_bytes: int
    timed_out: bool
    aborted: bool
    duration: float

    @property
    def interrupted(self) -> bool:
        """Whether the command was stopped before it ended on its own."""
        return self.timed_out or self.aborted


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to every process of group ``pgid``.

    Returns False when the group no longer exists (nothing to do), True when the signal was sent.
    """
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def process_group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running.

    Members that have died but wait for a parent other than this process to reap them (zombies) do
    not count: they run nothing and hold no resources but their process table entry.  Where the
    processes cannot be inspected (no ``/proc``), an existing group counts as alive.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_running_member(pgid)


def _has_running_member(pgid: int) -> bool:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # The command name is parenthesised and may contain anything, so fields are counted after it.
        fields = stat[stat.rindex(b")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in (b"Z", b"X"):
            return True
    return False


class _Capture:
    """Keeps the first ``cap`` characters of a byte stream and counts the bytes beyond them."""

    def __init__(self, cap: int) -> None:
        # surrogateescape maps every undecodable byte to one character that encodes back to that
        # byte, so the count of bytes cut is exact even for invalid UTF-8.
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._room = cap
        self._parts: list[str] = []
        self._full = False
        self.cut_bytes = 0

    def feed(self, data: bytes | bytearray, *, final: bool = False) -> None:
        if self._full:
            self.cut_bytes += len(data)
            return
        text = self._decoder.decode(data, final)
        if len(text) <= self._room:
            self._parts.append(text)
            self._room -= len(text)
            return
        self._parts.append(text[: self._room])
        self.cut_bytes += len(text[self._room :].encode("utf-8", "surrogateescape"))
        self.cut_bytes += len(self._decoder.getstate()[0])
        self._full = True

    def text(self) -> str:
        self.feed(b"", final=True)
        raw = "".join(self._parts).encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "replace")


async def run_process_group(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    timeout: float | None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    abort: trio.Event | None = None,
    terminate_grace: float = DEFAULT_TERMINATE_GRACE,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
) -> ProcessResult:
    """Run ``argv`` in a new session (so a new process group), capturing stdout and stderr.

    Guarantees:

    * stdin is ``/dev/null``; ``env`` replaces the environment when given.
    * When ``timeout`` seconds pass (``None``: no limit) or ``abort`` is set, the whole group gets
      SIGTERM, then SIGKILL after ``terminate_grace`` seconds; the result is marked ``timed_out`` or
      ``aborted`` and keeps the output produced so far.
    * Once the main process has ended, the pipes get ``drain_timeout`` more seconds to reach end of
      file (background children may hold them open); then the group is killed and the pipes closed.
    * Before returning, and also when cancelled, the group is sent SIGKILL (so no background child
      outlives the call), the main process is reaped and the pipes are closed, within a short shielded
      deadline.  Cancellation then propagates; it is the hard kill, and no result is returned.

    Raises `OSError` when the command cannot be started, and `ValueError` for a negative
    ``output_cap`` or a ``timeout`` that is not positive.
    """
    if output_cap < 0:
        raise ValueError(f"output_cap must be >= 0, got {output_cap}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be > 0 or None, got {timeout}")
    stdout, stderr = _Capture(output_cap), _Capture(output_cap)
    started = trio.current_time()
    proc = await trio.lowlevel.open_process(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        end = await _supervise(proc, stdout, stderr, timeout, abort, terminate_grace, drain_timeout)
    finally:
        await _destroy(proc)
    return ProcessResult(
        pid=proc.pid,
        returncode=proc.returncode,
        stdout=stdout.text(),
        stderr=stderr.text(),
        stdout_cut_bytes=stdout.cut_bytes,
        stderr_cut_bytes=stderr.cut_bytes,
        timed_out=end == "timed_out",
        aborted=end == "aborted",
        duration=trio.current_time() - started,
    )


async def _supervise(
    proc: trio.Process,
    stdout: _Capture,
    stderr: _Capture,
    timeout: float | None,
    abort: trio.Event | None,
    terminate_grace: float,
    drain_timeout: float,
) -> _End:
    assert proc.stdout is not None and proc.stderr is not None
    stdout_done, stderr_done = trio.Event(), trio.Event()
    async with trio.open_nursery() as readers:
        readers.start_soon(_pump, proc.stdout, stdout, stdout_done)
        readers.start_soon(_pump, proc.stderr, stderr, stderr_done)
        end = await _wait_for_end(proc, timeout, abort)
        if end != "exited":
            await _terminate(proc, terminate_grace)
        if not await _both_set(stdout_done, stderr_done, drain_timeout):
            kill_process_group(proc.pid)
            await _both_set(stdout_done, stderr_done, _EOF_AFTER_KILL)
        readers.cancel_scope.cancel()
    return end


async def _pump(stream: trio.abc.ReceiveStream, capture: _Capture, done: trio.Event) -> None:
    while data := await stream.receive_some(_READ_SIZE):
        capture.feed(data)
    done.set()


async def _both_set(first: trio.Event, second: trio.Event, timeout: float) -> bool:
    with trio.move_on_after(timeout):
        await first.wait()
        await second.wait()
        return True
    return False


async def _wait_for_end(proc: trio.Process, timeout: float | None, abort: trio.Event | None) -> _End:
    end: _End = "exited"

    async def watch_abort(event: trio.Event, waiters: trio.Nursery) -> None:
        nonlocal end
        await event.wait()
        end = "aborted"
        waiters.cancel_scope.cancel()

    with trio.move_on_after(math.inf if timeout is None else timeout) as deadline:
        async with trio.open_nursery() as waiters:
            if abort is not None:
                waiters.start_soon(watch_abort, abort, waiters)
            await proc.wait()
            waiters.cancel_scope.cancel()
    if deadline.cancelled_caught:
        end = "timed_out"
    return end


async def _terminate(proc: trio.Process, grace: float) -> None:
    kill_process_group(proc.pid, signal.SIGTERM)
    with trio.move_on_after(grace):
        await proc.wait()
        return
    kill_process_group(proc.pid, signal.SIGKILL)
    with trio.move_on_after(_CLEANUP_TIMEOUT):
        await proc.wait()


async def _destroy(proc: trio.Process) -> None:
    with trio.move_on_after(_CLEANUP_TIMEOUT, shield=True):
        # Safe even once the leader is reaped: Linux does not hand out a pid still in use as a pgid.
        kill_process_group(proc.pid)
        await proc.wait()
        while process_group_alive(proc.pid):
            await trio.sleep(_GROUP_POLL_INTERVAL)
    with trio.CancelScope(shield=True):
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                await stream.aclose()
