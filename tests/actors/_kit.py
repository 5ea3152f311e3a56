"""Small actors and messages shared by the runtime's tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec

from actors import Actor, Down, ExitReason, handles


class Inc(msgspec.Struct, frozen=True, tag=True):
    n: int = 1


class Get(msgspec.Struct, frozen=True, tag=True):
    pass


class Boom(msgspec.Struct, frozen=True, tag=True):
    pass


class CrashOnce(msgspec.Struct, frozen=True, tag=True):
    """Crashes the actor the first time it is handled, and only then."""

    crashed: Any  # threading.Event


def crash_once() -> CrashOnce:
    return CrashOnce(threading.Event())


class Block(msgspec.Struct, frozen=True, tag=True):
    release: Any  # threading.Event


class Journal:
    """A thread-safe record of what actors did, outside any actor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[str] = []
        self.changed = threading.Condition(self._lock)

    def add(self, entry: str) -> None:
        with self.changed:
            self.entries.append(entry)
            self.changed.notify_all()

    def wait_for(self, entry: str, timeout: float = 5.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: entry in self.entries, timeout)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.entries)


class Counter(Actor):
    """Counts increments; crashes on Boom; records its life in a journal."""

    def __init__(self, journal: Journal | None = None, name: str = "counter") -> None:
        super().__init__()
        self.total = 0
        self.journal = journal
        self.name = name

    def _note(self, what: str) -> None:
        if self.journal is not None:
            self.journal.add(f"{self.name}:{what}")

    def on_start(self) -> None:
        self._note(f"start{self.incarnation}")

    def on_stop(self) -> None:
        self._note(f"stop{self.incarnation}")

    @handles(Inc)
    def inc(self, message: Inc) -> int:
        self.total += message.n
        return self.total

    @handles(Get)
    def get(self, _: Get) -> int:
        return self.total

    @handles(Boom)
    def boom(self, _: Boom) -> None:
        raise RuntimeError("boom")

    @handles(CrashOnce)
    def crash_once(self, message: CrashOnce) -> None:
        if not message.crashed.is_set():
            message.crashed.set()
            raise RuntimeError("boom, once")

    @handles(Block)
    def block(self, message: Block) -> str:
        self._note("blocked")
        message.release.wait(10.0)
        return "released"


class Downs:
    """Every ``Down`` a :class:`DownWatcher` heard, in order; thread-safe, with waits on a condition."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.seen: list[Down] = []

    def add(self, notice: Down) -> None:
        with self._changed:
            self.seen.append(notice)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[Down]], bool], timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.seen), timeout)

    def of(self, address: str) -> list[tuple[ExitReason, int]]:
        with self._changed:
            return [(d.reason, d.incarnation) for d in self.seen if d.address == address]


class DownWatcher(Actor):
    """Records each ``Down`` it is told in a :class:`Downs`."""

    def __init__(self, downs: Downs) -> None:
        super().__init__()
        self.downs = downs

    @handles(Down)
    def down(self, message: Down) -> None:
        self.downs.add(message)
