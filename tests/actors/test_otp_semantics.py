"""Conformance with OTP's documented supervisor behaviour (``supervisor`` module docs, supervisor_SUITE).

Each test names the OTP rule it checks. Where turnkeep promises more than OTP (addresses that outlive
incarnations, no silent loss of a told message), the test says so.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors import (
    Actor,
    ActorSystem,
    Address,
    ChildSpec,
    ChildStartError,
    ExitReason,
    Restart,
    RestartIntensity,
    StartChild,
    Strategy,
    Supervisor,
    SupervisorEscalation,
    WhichChildren,
    handles,
)
from actors.supervisor import _Restarts
from tests._waiting import wait_until
from tests.actors._kit import Boom, Counter, Downs, DownWatcher, Get, Journal, crash_once


class Quit(msgspec.Struct, frozen=True, tag=True):
    """Makes a :class:`Worker` stop normally (cooperatively, ``on_stop`` runs)."""


class Worker(Counter):
    """A counter that can also stop itself normally."""

    @handles(Quit)
    def quit(self, _: Quit) -> None:
        self.stop_self()


def worker(journal: Journal, name: str, restart: Restart = Restart.PERMANENT, **spec: Any) -> ChildSpec:
    return ChildSpec(name, lambda: Worker(journal, name), restart=restart, **spec)


def children(system: ActorSystem, supervisor: str) -> dict[str, tuple[int, str]]:
    """Each child of ``supervisor``: its incarnation number and status."""
    return {c.name: (c.incarnation, c.status) for c in system.address(supervisor).ask(WhichChildren())}


@pytest.fixture
def downs(system: ActorSystem) -> Downs:
    return Downs()


@pytest.fixture
def watcher(system: ActorSystem, downs: Downs) -> Address:
    return system.spawn(ChildSpec("watcher", lambda: DownWatcher(downs)))


# -- the five deviations, reproduced -----------------------------------------------------------------


def test_a_supervisor_that_gives_up_escalates_once_and_its_successor_leaves_no_orphan(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: past its restart intensity a supervisor terminates its children, then itself, once; the
    restarted supervisor starts from its child specs and never acts on its predecessor's exit notices."""
    journal = Journal()
    inner = lambda: Supervisor([worker(journal, "w")], intensity=RestartIntensity(0, 10.0))  # noqa: E731
    system.spawn(ChildSpec("outer", lambda: Supervisor([ChildSpec("inner", inner)])))
    system.watch(system.address("outer/inner"), watcher)
    system.address("outer/inner/w").tell(crash_once())
    assert wait_until(lambda: children(system, "outer") == {"inner": (2, "running")})
    # Anything the new supervisor was handed by its predecessor is handled before this ask.
    assert children(system, "outer/inner") == {"w": (1, "running")}
    assert system.address("outer/inner/w").ask(Get()) == 0
    assert system.stop("outer")
    assert journal.snapshot() == ["w:start1", "w:start1", "w:stop1"]
    assert downs.wait_for(lambda seen: len(seen) == 2)
    assert downs.of("outer/inner") == [(ExitReason.CRASHED, 1), (ExitReason.NORMAL, 2)]
    assert isinstance(downs.seen[0].error, SupervisorEscalation)


def test_a_supervisor_that_crashes_stops_its_children_before_it_is_restarted(system: ActorSystem) -> None:
    """OTP: children are linked to their supervisor; when it terminates, for any reason, so do they —
    a restarted supervisor never finds its predecessor's children still running."""

    class Fragile(Supervisor):
        @handles(Boom)
        def boom(self, _: Boom) -> None:
            raise RuntimeError("a bug in the supervisor")

    journal = Journal()
    system.spawn(ChildSpec("fragile", lambda: Fragile([worker(journal, "w")])))
    with pytest.raises(RuntimeError, match="a bug in the supervisor"):
        system.address("fragile").ask(Boom())
    assert wait_until(lambda: children(system, "root") == {"fragile": (2, "running")})
    assert journal.snapshot() == ["w:start1", "w:stop1", "w:start1"]


class Tagged(msgspec.Struct, frozen=True, tag=True):
    n: int


class Ledger:
    """Which tagged messages were handled and which became dead letters, outside any actor."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.handled: list[int] = []
        self.dead: list[int] = []

    def note(self, into: list[int], n: int) -> None:
        with self._changed:
            into.append(n)
            self._changed.notify_all()

    def wait_for_all(self, total: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.handled) + len(self.dead) >= total, timeout)


class Tally(Actor):
    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    @handles(Tagged)
    def tagged(self, message: Tagged) -> None:
        self.ledger.note(self.ledger.handled, message.n)

    @handles(type(crash_once()))
    def crash(self, message: Any) -> None:
        if not message.crashed.is_set():
            message.crashed.set()
            raise RuntimeError("crash")


@pytest.fixture
def short_switch_interval() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


@pytest.mark.usefixtures("short_switch_interval")
def test_every_tell_racing_the_end_of_an_incarnation_is_handled_or_a_dead_letter() -> None:
    """Beyond OTP (where a message to a process that has just died is silently dropped): a message told
    to an address as its incarnation ends is handled by the next one, or recorded as a dead letter."""
    senders, per_sender, crashes = 4, 500, 200
    ledger = Ledger()
    with ActorSystem(restart_wait=5.0, intensity=RestartIntensity(10 * crashes, 60.0)) as system:
        system.dead_letters.subscribe(
            lambda letter: (
                ledger.note(ledger.dead, letter.message.n) if isinstance(letter.message, Tagged) else None
            )
        )
        tally = system.spawn(ChildSpec("tally", lambda: Tally(ledger), start_timeout=10.0))
        go = threading.Barrier(senders + 1)

        def send(first: int) -> None:
            go.wait(30)
            for n in range(first, first + per_sender):
                tally.tell(Tagged(n))

        def crash() -> None:
            go.wait(30)
            for _ in range(crashes):
                tally.tell(crash_once())

        threads = [threading.Thread(target=send, args=(i * per_sender,)) for i in range(senders)]
        threads.append(threading.Thread(target=crash))
        for thread in threads:
            thread.start()
        total = senders * per_sender
        # Bounded by the work, not by how busy the machine is: under load each restart takes far longer.
        assert ledger.wait_for_all(total, timeout=100.0), (
            f"{total - len(ledger.handled) - len(ledger.dead)} of {total} tells were neither handled "
            "nor recorded as dead letters"
        )
        assert sorted(ledger.handled + ledger.dead) == list(range(total))
        assert system.metrics()["restarts"] >= 1
        for thread in threads:
            thread.join(30)


def test_watching_an_address_that_was_never_started_delivers_noproc_at_once(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: monitoring a process that does not exist delivers 'DOWN' with reason noproc at once."""
    system.watch(system.address("nobody"), watcher)
    assert downs.wait_for(lambda seen: len(seen) == 1)
    assert downs.of("nobody") == [(ExitReason.NOPROC, 0)]


def test_watching_an_address_that_has_stopped_delivers_noproc_at_once(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: monitoring a process that has exited delivers 'DOWN' with reason noproc at once."""
    counter = system.spawn(ChildSpec("counter", Counter))
    assert system.stop("counter")
    system.watch(counter, watcher)
    assert downs.wait_for(lambda seen: len(seen) == 1)
    assert downs.of("counter") == [(ExitReason.NOPROC, 0)]


def test_a_watch_placed_after_an_incarnation_ended_and_before_its_address_closed_hears_noproc(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: a monitor placed on a process that has already exited delivers noproc — also when the exit
    is so recent that the supervisor has not yet handled it."""

    class Late(Supervisor):
        @handles(Get)
        def spawn_and_watch(self, _: Get) -> None:
            address = self._add(worker(Journal(), "t", Restart.TEMPORARY))
            address.tell(Quit())
            child = self._find("t")
            assert child is not None and child.actor is not None
            assert child.actor._tk.exited.wait(5)
            # This supervisor hears of the exit only after this handler returns.
            self.system.watch(address, watcher)

    system.spawn(ChildSpec("late", Late)).ask(Get())
    assert downs.wait_for(lambda seen: len(seen) == 1)
    assert downs.of("late/t") == [(ExitReason.NOPROC, 0)]


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_a_transient_child_that_ended_normally_keeps_its_spec_and_a_group_restart_starts_it(
    system: ActorSystem, strategy: Strategy
) -> None:
    """OTP: a transient child that terminates normally is not restarted but its child spec is kept (no
    process); a later one_for_all / rest_for_one restart starts it again with the others."""
    journal = Journal()
    specs = [worker(journal, "a"), worker(journal, "t", Restart.TRANSIENT), worker(journal, "c")]
    system.spawn(ChildSpec("sup", lambda: Supervisor(specs, strategy=strategy)))
    system.address("sup/t").tell(Quit())
    assert journal.wait_for("t:stop1")
    assert wait_until(lambda: children(system, "sup")["t"] == (1, "stopped"))
    system.address("sup/a").tell(crash_once())
    assert journal.wait_for("t:start2")
    assert system.address("sup/t").ask(Get()) == 0
    expected = {"a": (2, "running"), "t": (2, "running"), "c": (2, "running")}
    if strategy is Strategy.REST_FOR_ONE:
        expected["a"] = (2, "running")
    assert children(system, "sup") == expected


def test_a_transient_child_supervisor_that_gives_up_is_not_restarted(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: a supervisor past its restart intensity terminates with reason shutdown, so its parent does
    not restart a transient entry for it; the entry stays, without a process."""
    journal = Journal()
    inner = lambda: Supervisor([worker(journal, "w")], intensity=RestartIntensity(0, 10.0))  # noqa: E731
    system.spawn(
        ChildSpec("outer", lambda: Supervisor([ChildSpec("inner", inner, restart=Restart.TRANSIENT)]))
    )
    system.watch(system.address("outer/inner"), watcher)
    system.address("outer/inner/w").tell(crash_once())
    assert downs.wait_for(lambda seen: len(seen) == 1)
    assert isinstance(downs.seen[0].error, SupervisorEscalation)
    assert wait_until(lambda: children(system, "outer") == {"inner": (1, "stopped")})
    assert journal.snapshot() == ["w:start1"]
    assert system.address("outer/inner").status == "stopped"


# -- the rest of the documented behaviour -------------------------------------------------------------


class FailsToStart(Actor):
    def on_start(self) -> None:
        raise RuntimeError("cannot start")


def test_a_child_that_fails_to_start_stops_the_siblings_already_started_and_the_start_fails(
    system: ActorSystem,
) -> None:
    """OTP: if a child fails to start while its supervisor starts, the supervisor terminates the children
    it already started (in reverse order) and fails to start itself, with the child's reason."""
    journal = Journal()
    specs = [worker(journal, "a"), worker(journal, "b"), ChildSpec("bad", FailsToStart)]
    with pytest.raises(ChildStartError, match="cannot start"):
        system.spawn(ChildSpec("sup", lambda: Supervisor(specs)))
    assert journal.snapshot() == ["a:start1", "b:start1", "b:stop1", "a:stop1"]
    assert system.root.ask(WhichChildren()) == ()


def test_a_start_child_that_fails_leaves_the_supervisor_and_its_other_children_running(
    system: ActorSystem,
) -> None:
    """OTP: start_child returns {error, Reason} when the child's start fails; nothing else changes."""
    journal = Journal()
    system.spawn(ChildSpec("sup", lambda: Supervisor([worker(journal, "a")])))
    with pytest.raises(ChildStartError, match="cannot start"):
        system.address("sup").ask(StartChild(ChildSpec("bad", FailsToStart)))
    assert children(system, "sup") == {"a": (1, "running")}
    assert system.address("sup/a").ask(Get()) == 0


def test_a_watcher_hears_one_down_per_incarnation_in_order(
    system: ActorSystem, downs: Downs, watcher: Address
) -> None:
    """OTP: a monitor delivers exactly one 'DOWN' per monitored process; an address's watch spans its
    incarnations, so it hears each one's end once, with its number and reason."""
    counter = system.spawn(ChildSpec("counter", lambda: Worker(Journal(), "counter")))
    system.watch(counter, watcher)
    counter.tell(crash_once())
    assert downs.wait_for(lambda seen: len(seen) == 1)
    assert counter.ask(Get()) == 0
    counter.tell(Quit())
    assert downs.wait_for(lambda seen: len(seen) == 2)
    assert counter.ask(Get()) == 0
    assert system.stop("counter")
    assert downs.wait_for(lambda seen: len(seen) == 3)
    assert downs.of("counter") == [(ExitReason.CRASHED, 1), (ExitReason.NORMAL, 2), (ExitReason.NORMAL, 3)]


def test_one_for_all_ends_temporary_siblings_for_good(system: ActorSystem) -> None:
    """OTP: under one_for_all a temporary child is terminated with its siblings and never restarted."""
    journal = Journal()
    specs = [worker(journal, "a"), worker(journal, "temp", Restart.TEMPORARY), worker(journal, "c")]
    system.spawn(ChildSpec("sup", lambda: Supervisor(specs, strategy=Strategy.ONE_FOR_ALL)))
    system.address("sup/a").tell(crash_once())
    assert journal.wait_for("c:start2")
    assert children(system, "sup") == {"a": (2, "running"), "c": (2, "running")}
    assert journal.snapshot().count("temp:start1") == 1


def test_restarts_older_than_the_period_no_longer_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTP: a supervisor gives up only when more than MaxR restarts happen within MaxT seconds; restarts
    that lie further back are forgotten."""
    now = [1000.0]
    monkeypatch.setattr("actors.supervisor.time.monotonic", lambda: now[0])
    restarts = _Restarts(RestartIntensity(max_restarts=2, within=10.0))
    assert restarts.allow() and restarts.allow()
    now[0] += 9.0
    assert not restarts.allow()
    now[0] += 1.5  # the first two now lie more than 10 s back
    assert restarts.allow() and restarts.allow()
    assert not restarts.allow()


def test_an_intensity_of_zero_gives_up_on_the_first_crash(system: ActorSystem) -> None:
    """OTP: with MaxR = 0 any crash makes the supervisor terminate its children and itself."""
    journal = Journal()
    inner = lambda: Supervisor(  # noqa: E731
        [worker(journal, "a"), worker(journal, "b")], intensity=RestartIntensity(0, 10.0)
    )
    system.spawn(ChildSpec("outer", lambda: Supervisor([ChildSpec("inner", inner)])))
    system.address("outer/inner/b").tell(crash_once())
    assert journal.wait_for("b:start1") and journal.wait_for("a:stop1")
    assert wait_until(lambda: children(system, "outer") == {"inner": (2, "running")})
    assert children(system, "outer/inner") == {"a": (1, "running"), "b": (1, "running")}
    assert journal.snapshot() == ["a:start1", "b:start1", "a:stop1", "a:start1", "b:start1"]
