"""What the process holds (threads, child processes, file descriptors), and what a run left behind."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ._workload import _MARK, _THREAD_GRACE

__all__ = ["Resources", "leaks"]


@dataclass(frozen=True, slots=True)
class Resources:
    """What the process holds at one moment: its threads, its child processes (and any process of the
    run, found by ``mark`` in its environment, orphans included) and its open file descriptors."""

    threads: frozenset[tuple[int, str]]
    processes: frozenset[tuple[int, str]]
    fds: frozenset[tuple[int, str]]

    @classmethod
    def take(cls, mark: str | None = None) -> Resources:
        """A snapshot now."""
        threads = frozenset((t.ident or 0, t.name) for t in threading.enumerate())
        return cls(threads, frozenset(_processes(mark)), frozenset(_fds()))


def leaks(before: Resources, after: Resources) -> list[str]:
    """What ``after`` holds that ``before`` did not: each thread, process and file descriptor named."""
    problems = [f"thread {name!r} is still running" for _, name in sorted(after.threads - before.threads)]
    problems += [f"process {pid} ({what}) is still there" for pid, what in sorted(after.processes)]
    problems += [
        f"file descriptor {fd} ({target}) is still open" for fd, target in sorted(after.fds - before.fds)
    ]
    return problems


def _processes(mark: str | None) -> Iterable[tuple[int, str]]:
    me = os.getpid()
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (entry / "stat").read_text()
            # The command name is in parentheses and may hold spaces; the fields after it are plain.
            command = stat[stat.index("(") + 1 : stat.rindex(")")]
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
            ours = int(ppid) == me
            if not ours and mark is not None:
                ours = f"{_MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if ours:
            yield int(entry.name), f"{command}, state {state}"


def _fds() -> Iterable[tuple[int, str]]:
    root = Path("/proc/self/fd")
    if not root.is_dir():
        return
    for name in os.listdir(root):
        try:
            yield int(name), os.readlink(root / name)
        except OSError:
            continue  # the descriptor of the listing itself, closed by now


def _settle(before: Resources, mark: str) -> Resources:
    """A snapshot once the threads that are ending have ended (bounded by ``_THREAD_GRACE``)."""
    deadline = time.monotonic() + _THREAD_GRACE
    while True:
        gc.collect()
        after = Resources.take(mark)
        if not leaks(before, after) or time.monotonic() >= deadline:
            return after
        time.sleep(0.05)
