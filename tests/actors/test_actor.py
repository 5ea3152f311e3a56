"""Actors: typed handlers, one crash rule for tell and ask, dead letters for what has no handler."""

from __future__ import annotations

import threading

import msgspec
import pytest

from actors import (
    Actor,
    ActorSystem,
    ChildSpec,
    ChildStartError,
    Down,
    ExitReason,
    UnhandledMessage,
    handles,
)
from tests.actors._kit import Block, Boom, Counter, Get, Inc, Journal, crash_once


class Watcher(Actor):
    def __init__(self, seen: list[Down], event: threading.Event) -> None:
        super().__init__()
        self.seen = seen
        self.event = event

    @handles(Down)
    def down(self, message: Down) -> None:
        self.seen.append(message)
        self.event.set()


def test_the_reply_to_an_ask_is_the_handlers_return_value(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("counter", Counter))
    assert counter.ask(Inc(2)) == 2
    assert counter.ask(Inc(3)) == 5


def test_dispatch_follows_the_message_types_base_classes(system: ActorSystem) -> None:
    class Base(msgspec.Struct, frozen=True):
        pass

    class Derived(Base, frozen=True):
        pass

    class Echo(Actor):
        @handles(Base)
        def base(self, message: Base) -> str:
            return type(message).__name__

    echo = system.spawn(ChildSpec("echo", Echo))
    assert echo.ask(Derived()) == "Derived"


def test_a_message_without_handler_is_a_dead_letter_and_the_actor_keeps_running(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("counter", Counter))
    counter.tell("not a message it knows")
    with pytest.raises(UnhandledMessage, match="no handler for int"):
        counter.ask(42)
    assert counter.ask(Inc(1)) == 1
    letters = system.dead_letters.recent()
    assert [(d.message, d.was_ask) for d in letters] == [("not a message it knows", False), (42, True)]
    assert all("no handler" in d.reason for d in letters)


def test_a_handler_that_raises_on_an_ask_is_a_crash_and_the_asker_gets_the_error(system: ActorSystem) -> None:
    journal = Journal()
    counter = system.spawn(ChildSpec("counter", lambda: Counter(journal)))
    counter.ask(Inc(5))
    with pytest.raises(RuntimeError, match="boom"):
        counter.ask(Boom())
    # A fresh incarnation: state is gone, on_start ran again, on_stop did not run for the crash.
    assert counter.ask(Get()) == 0
    assert journal.snapshot() == ["counter:start1", "counter:start2"]
    assert system.metrics()["crashes"] == 1


def test_a_handler_that_raises_on_a_tell_is_the_same_crash(system: ActorSystem) -> None:
    journal = Journal()
    counter = system.spawn(ChildSpec("counter", lambda: Counter(journal)))
    counter.ask(Inc(5))
    counter.tell(crash_once())
    assert counter.ask(Get()) == 0
    assert journal.snapshot() == ["counter:start1", "counter:start2"]
    assert system.dead_letters.total == 0  # the next incarnation handled the message


def test_a_told_message_that_crashes_twice_becomes_a_dead_letter(system: ActorSystem) -> None:
    journal = Journal()
    counter = system.spawn(ChildSpec("counter", lambda: Counter(journal)))
    counter.tell(Boom())
    assert counter.ask(Get()) == 0
    assert journal.snapshot() == ["counter:start1", "counter:start2", "counter:start3"]
    [letter] = system.dead_letters.recent()
    assert isinstance(letter.message, Boom)
    assert "crashed twice while handling it" in letter.reason


def test_system_exit_in_a_handler_crashes_only_that_actor(system: ActorSystem) -> None:
    class Quitter(Actor):
        @handles(Boom)
        def quit(self, _: Boom) -> None:
            raise SystemExit(3)

        @handles(Get)
        def get(self, _: Get) -> int:
            return self.incarnation

    quitter = system.spawn(ChildSpec("quitter", Quitter))
    counter = system.spawn(ChildSpec("counter", Counter))
    with pytest.raises(SystemExit):
        quitter.ask(Boom())
    assert counter.ask(Inc(1)) == 1
    assert quitter.ask(Get()) == 2


def test_messages_queued_behind_a_crash_go_to_the_next_incarnation(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("counter", Counter))
    release = threading.Event()
    blocked = threading.Thread(target=counter.ask, args=(Block(release),))
    blocked.start()
    counter.tell(crash_once())
    for _ in range(10):
        counter.tell(Inc(1))
    release.set()
    blocked.join(5)
    assert counter.ask(Get()) == 10
    assert system.dead_letters.total == 0


def test_a_crash_in_on_start_fails_the_spawn_with_the_cause(system: ActorSystem) -> None:
    class BadStart(Actor):
        def on_start(self) -> None:
            raise ValueError("cannot open")

    with pytest.raises(ChildStartError, match="cannot open") as info:
        system.spawn(ChildSpec("bad", BadStart))
    assert isinstance(info.value.__cause__, ValueError)
    assert system.address("bad").status == "stopped"


def test_a_factory_that_raises_or_returns_a_non_actor_fails_the_spawn(system: ActorSystem) -> None:
    def broken() -> Actor:
        raise OSError("no disk")

    with pytest.raises(ChildStartError, match="no disk"):
        system.spawn(ChildSpec("broken", broken))
    with pytest.raises(ChildStartError, match=r"not a turnkeep\.Actor"):
        system.spawn(ChildSpec("wrong", lambda: object()))  # type: ignore[arg-type,return-value]


def test_a_crash_in_on_stop_is_reported_to_watchers(system: ActorSystem) -> None:
    class BadStop(Actor):
        def on_stop(self) -> None:
            raise RuntimeError("flush failed")

    seen: list[Down] = []
    event = threading.Event()
    watcher = system.spawn(ChildSpec("watcher", lambda: Watcher(seen, event)))
    target = system.spawn(ChildSpec("bad-stop", BadStop))
    system.watch(target, watcher)
    assert system.stop("bad-stop")
    assert event.wait(5)
    assert seen[0].reason is ExitReason.CRASHED
    assert "flush failed" in repr(seen[0].error)


def test_watchers_hear_of_every_crash_and_of_the_final_stop(system: ActorSystem) -> None:
    seen: list[Down] = []
    event = threading.Event()
    watcher = system.spawn(ChildSpec("watcher", lambda: Watcher(seen, event)))
    counter = system.spawn(ChildSpec("counter", Counter))
    system.watch(counter, watcher)
    counter.tell(crash_once())
    assert event.wait(5)
    event.clear()
    assert counter.ask(Get()) == 0
    system.stop("counter")
    assert event.wait(5)
    assert [(d.address, d.reason, d.incarnation) for d in seen] == [
        ("counter", ExitReason.CRASHED, 1),
        ("counter", ExitReason.NORMAL, 2),
    ]
    assert isinstance(seen[0].error, RuntimeError)
