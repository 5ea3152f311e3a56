"""Strands: actors share a small pool of worker threads; a session's actors run as one serial strand.

Actors of one strand never run at the same time and hand each other messages on the same thread; a wait
declared with ``blocking()`` lets the strand and the pool go on; a handler stuck past ``stuck_after``
ends its incarnation as a crash and its worker is replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from actors import (
    Actor,
    ActorSystem,
    Address,
    ChildSpec,
    StuckHandler,
    Supervisor,
    WhichChildren,
    blocking,
    handles,
)
from tests._waiting import wait_until
from tests.actors.conftest import system_threads


@dataclass(frozen=True)
class Relay:
    """Tell ``hops`` more relays, alternating between two actors."""

    hops: int


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class AskPeer:
    peer: str


@dataclass(frozen=True)
class AskPeerThread:
    """Ask ``peer`` which thread it runs on; answered with (the asker's thread, the peer's)."""

    peer: str


@dataclass(frozen=True)
class WhichThread:
    pass


@dataclass(frozen=True)
class AwaitThenRecord:
    """Wait (declared, at most 5 s) for ``event``, then record whether it came."""

    event: threading.Event
    seen: list[bool]


@dataclass(frozen=True)
class WakeAfterAsking:
    """Tell ``sleeper`` to wait for ``event``, ask ``peer``, then set ``event``."""

    sleeper: str
    peer: str
    event: threading.Event
    seen: list[bool]


@dataclass(frozen=True)
class WaitFor:
    event: threading.Event
    declared: bool = True
    entered: threading.Event | None = None


@dataclass(frozen=True)
class TellThenWait:
    """Tell ``peer`` to set ``event``, then wait for it (declared)."""

    peer: str
    event: threading.Event
    entered: threading.Event


@dataclass(frozen=True)
class SetEvent:
    event: threading.Event


@dataclass(frozen=True)
class Count:
    trace: Trace


@dataclass(frozen=True)
class Record:
    """Append the handling actor's name to ``seen``."""

    seen: list[str]


@dataclass
class Trace:
    lock: threading.Lock = field(default_factory=threading.Lock)
    inside: int = 0
    most_inside: int = 0
    threads: list[int] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


class Mate(Actor):
    def __init__(self, trace: Trace, peer: str = "") -> None:
        super().__init__()
        self.trace = trace
        self.peer = peer

    def _enter(self) -> None:
        with self.trace.lock:
            self.trace.inside += 1
            self.trace.most_inside = max(self.trace.most_inside, self.trace.inside)
            self.trace.threads.append(threading.get_ident())

    def _leave(self) -> None:
        with self.trace.lock:
            self.trace.inside -= 1

    @handles(Relay)
    def _relay(self, message: Relay) -> None:
        self._enter()
        try:
            if message.hops == 0:
                self.trace.done.set()
            else:
                self.system.address(self.peer).tell(Relay(message.hops - 1))
        finally:
            self._leave()

    @handles(Ping)
    def _ping(self, _: Ping) -> str:
        return f"pong from {self.address.name}"

    @handles(AskPeer)
    def _ask_peer(self, message: AskPeer) -> Any:
        return self.system.address(message.peer).ask(Ping(), timeout=5.0)

    @handles(AskPeerThread)
    def _ask_peer_thread(self, message: AskPeerThread) -> tuple[int, int]:
        return threading.get_ident(), self.system.address(message.peer).ask(WhichThread(), timeout=5.0)

    @handles(AwaitThenRecord)
    def _await_then_record(self, message: AwaitThenRecord) -> None:
        with blocking():
            message.seen.append(message.event.wait(5.0))

    @handles(WakeAfterAsking)
    def _wake_after_asking(self, message: WakeAfterAsking) -> None:
        self.system.address(message.sleeper).tell(AwaitThenRecord(message.event, message.seen))
        self.system.address(message.peer).ask(Ping(), timeout=10.0)
        message.event.set()

    @handles(WhichThread)
    def _which_thread(self, _: WhichThread) -> int:
        return threading.get_ident()

    @handles(WaitFor)
    def _wait_for(self, message: WaitFor) -> bool:
        if message.entered is not None:
            message.entered.set()
        if message.declared:
            with blocking():
                return message.event.wait(10.0)
        return message.event.wait(10.0)

    @handles(Count)
    def _count(self, message: Count) -> int:
        with message.trace.lock:
            return len(message.trace.threads)

    @handles(TellThenWait)
    def _tell_then_wait(self, message: TellThenWait) -> bool:
        self.system.address(message.peer).tell(SetEvent(message.event))
        message.entered.set()
        with blocking():
            return message.event.wait(10.0)

    @handles(SetEvent)
    def _set(self, message: SetEvent) -> None:
        message.event.set()

    @handles(Record)
    def _record(self, message: Record) -> None:
        message.seen.append(self.address.name)


def pair(system: ActorSystem, trace: Trace, *, shared: bool) -> tuple[Address, Address]:
    children = [
        ChildSpec("a", lambda: Mate(trace, "pair/b"), shares_strand=shared),
        ChildSpec("b", lambda: Mate(trace, "pair/a"), shares_strand=shared),
    ]
    system.spawn(ChildSpec("pair", lambda: Supervisor(children)))
    return system.address("pair/a"), system.address("pair/b")


def test_actors_of_one_strand_never_run_at_once_and_hand_over_on_one_thread(system: ActorSystem) -> None:
    trace = Trace()
    a, _ = pair(system, trace, shared=True)
    for _ in range(20):
        a.tell(Relay(50))
    a.tell(Relay(1001))
    assert trace.done.wait(10.0)
    assert wait_until(lambda: len(trace.threads) == 20 * 51 + 1002)
    assert trace.most_inside == 1
    # A strand yields its worker every few dozen messages, so the relay may move; it moves rarely.
    switches = sum(
        1 for before, after in zip(trace.threads, trace.threads[1:], strict=False) if before != after
    )
    assert switches < len(trace.threads) / 10


def test_actors_of_their_own_strands_may_run_at_once(system: ActorSystem) -> None:
    trace = Trace()
    a, b = pair(system, trace, shared=False)
    release = threading.Event()
    a.tell(WaitFor(release, declared=False))
    # b runs although a's handler holds a worker and never declared its wait.
    assert b.ask(Ping(), timeout=5.0) == "pong from pair/b"
    release.set()


def test_an_actor_asking_a_strand_mate_gets_its_answer(system: ActorSystem) -> None:
    trace = Trace()
    a, _ = pair(system, trace, shared=True)
    assert a.ask(AskPeer("pair/b"), timeout=5.0) == "pong from pair/b"


def test_an_ask_of_a_strand_mate_is_answered_on_the_asking_thread(one_worker: ActorSystem) -> None:
    families = []
    for n in range(30):
        children = [
            ChildSpec("a", lambda: Mate(Trace()), shares_strand=True),
            ChildSpec("b", lambda: Mate(Trace()), shares_strand=True),
        ]
        one_worker.spawn(ChildSpec(f"f{n}", lambda children=children: Supervisor(children)))
        families.append(one_worker.address(f"f{n}/a"))
    assert all(address.ask(Ping(), timeout=5.0) for address in families)
    workers = one_worker.pool.workers  # supervisors waiting for their children may have added some
    answers: list[tuple[int, int]] = []
    lock = threading.Lock()

    def ask(address: Address) -> None:
        answer = address.ask(AskPeerThread(address.name.replace("/a", "/b")), timeout=10.0)
        with lock:
            answers.append(answer)

    askers = [threading.Thread(target=ask, args=(address,)) for address in families]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(15.0)
    assert len(answers) == 30
    assert all(asker_thread == mate_thread for asker_thread, mate_thread in answers)
    assert one_worker.pool.workers <= workers  # no asker needed a worker of its own to wait on


def test_an_asker_runs_only_the_actor_it_asked_never_a_mate_that_waits_on_it(system: ActorSystem) -> None:
    children = [ChildSpec(name, lambda: Mate(Trace()), shares_strand=True) for name in ("a", "b", "c")]
    system.spawn(ChildSpec("trio", lambda: Supervisor(children)))
    event, seen = threading.Event(), []
    system.address("trio/a").ask(WakeAfterAsking("trio/c", "trio/b", event, seen), timeout=10.0)
    # c waits for what a does after its ask: run below a's ask, c would have waited its 5 s for nothing.
    assert wait_until(lambda: seen != [], timeout=5.0)
    assert seen == [True]


def test_a_declared_wait_lets_the_rest_of_the_strand_go_on(system: ActorSystem) -> None:
    trace = Trace()
    a, b = pair(system, trace, shared=True)
    event = threading.Event()
    answer: list[bool] = []
    waiter = threading.Thread(target=lambda: answer.append(a.ask(WaitFor(event), timeout=10.0)))
    waiter.start()
    b.tell(SetEvent(event))  # b shares a's strand, and runs while a waits
    waiter.join(10.0)
    assert answer == [True]


def test_a_strand_mate_that_waited_is_run_for_a_holder_waiting_on_it(system: ActorSystem) -> None:
    trace = Trace()
    a, b = pair(system, trace, shared=True)
    first, second = threading.Event(), threading.Event()
    a_waits, b_waits = threading.Event(), threading.Event()
    a.tell(WaitFor(first, entered=a_waits))
    assert a_waits.wait(5.0)
    # b takes the strand while a waits; it tells a to set `second`, and waits for it.
    answer: list[bool] = []
    asker = threading.Thread(target=lambda: answer.append(b.ask(TellThenWait("pair/a", second, b_waits))))
    asker.start()
    assert b_waits.wait(5.0)
    first.set()  # a's handler returns; its next message must run although b holds the strand, waiting
    asker.join(15.0)
    assert answer == [True]
    assert second.is_set()


@pytest.fixture
def one_worker() -> Iterator[ActorSystem]:
    before = system_threads()
    system = ActorSystem(ask_timeout=5.0, restart_wait=1.0, workers=1, stuck_after=0.5)
    try:
        yield system
    finally:
        report = system.shutdown(timeout=10.0)
    assert report.leftover_threads == ()
    assert system_threads() - before == set()


def test_the_pool_grows_while_its_workers_wait(one_worker: ActorSystem) -> None:
    trace = Trace()
    a, b = pair(one_worker, trace, shared=False)
    first, second = threading.Event(), threading.Event()
    a.tell(WaitFor(first))
    b.tell(WaitFor(second))
    # Both wait on workers of their own; a third actor still runs, and sets both.
    c = one_worker.spawn(ChildSpec("c", lambda: Mate(trace)))
    c.tell(SetEvent(first))
    c.tell(SetEvent(second))
    assert wait_until(lambda: first.is_set() and second.is_set())
    assert one_worker.pool.workers >= 2


def test_a_stuck_handler_ends_its_incarnation_and_its_worker_is_replaced(one_worker: ActorSystem) -> None:
    trace = Trace()
    a, b = pair(one_worker, trace, shared=False)
    release = threading.Event()
    with pytest.raises(StuckHandler, match="WaitFor"):
        a.ask(WaitFor(release, declared=False), timeout=5.0)
    # The supervisor restarted a; both actors answer (on the replacement worker) while the old one waits.
    assert wait_until(
        lambda: {c.name: c.incarnation for c in one_worker.address("pair").ask(WhichChildren())}["a"] == 2
    )
    assert a.ask(Ping(), timeout=5.0) == "pong from pair/a"
    assert b.ask(Ping(), timeout=5.0) == "pong from pair/b"
    assert one_worker.metrics()["stuck"] == 1
    release.set()  # the stuck handler returns; what it returns goes nowhere


def test_a_declared_wait_is_never_stuck(one_worker: ActorSystem) -> None:
    trace = Trace()
    a, _ = pair(one_worker, trace, shared=False)
    event = threading.Event()
    timer = one_worker.io.call_later(1.5, event.set)  # three times stuck_after
    assert a.ask(WaitFor(event), timeout=5.0) is True
    timer.wait(5.0)
    assert "stuck" not in one_worker.metrics()


def test_a_busy_strand_yields_its_worker_to_the_others(one_worker: ActorSystem) -> None:
    trace = Trace()
    children = [ChildSpec("loop", lambda: Mate(trace, "solo/loop")), ChildSpec("other", lambda: Mate(trace))]
    one_worker.spawn(ChildSpec("solo", lambda: Supervisor(children)))
    one_worker.address("solo/loop").tell(Relay(20_000))  # it tells itself, 20,000 times
    seen = one_worker.address("solo/other").ask(Count(trace), timeout=5.0)
    # One worker: the other actor was served between two slices of the loop, long before its end.
    assert seen < 5_000
    assert trace.done.wait(10.0)


def test_many_actors_run_on_the_pools_threads(system: ActorSystem) -> None:
    before = threading.active_count()
    trace = Trace()
    children = [ChildSpec(f"m{i}", lambda: Mate(trace)) for i in range(200)]
    system.spawn(ChildSpec("many", lambda: Supervisor(children)))
    for i in range(200):
        assert system.address(f"many/m{i}").ask(Ping(), timeout=5.0) == f"pong from many/m{i}"
    assert threading.active_count() - before <= system.pool.size + 2


@pytest.fixture
def one_patient_worker() -> Iterator[ActorSystem]:
    """One worker, never declared stuck during a test: it may be held on purpose."""
    system = ActorSystem(ask_timeout=5.0, restart_wait=1.0, workers=1, stuck_after=60.0)
    try:
        yield system
    finally:
        system.shutdown(timeout=10.0)


def queue_behind_held_workers(
    system: ActorSystem, told_normally: list[str], told_by_io: list[str]
) -> list[str]:
    """Hold every worker, tell each actor of ``told_normally`` from this thread, then each of
    ``told_by_io`` from the I/O loop's thread, and release one worker: the order the actors ran in."""
    trace = Trace()
    spare_holders = [f"holder-{i}" for i in range(8)]
    names = [*spare_holders, *told_normally, *told_by_io]
    system.spawn(ChildSpec("q", lambda: Supervisor([ChildSpec(n, lambda: Mate(trace)) for n in names])))
    for name in names:  # every actor started and idle
        assert system.address(f"q/{name}").ask(Ping(), timeout=5.0)
    holders = spare_holders[: system.pool.workers]  # starting the actors added workers for a while
    assert len(holders) == system.pool.workers
    releases = [threading.Event() for _ in holders]
    for holder, release in zip(holders, releases, strict=True):
        entered = threading.Event()
        system.address(f"q/{holder}").tell(WaitFor(release, declared=False, entered=entered))
        assert entered.wait(5.0)
    seen: list[str] = []
    told = threading.Event()
    for name in told_normally:
        system.address(f"q/{name}").tell(Record(seen))

    async def tell_from_the_loop() -> None:
        for name in told_by_io:
            system.address(f"q/{name}").tell(Record(seen))
        told.set()

    system.io.submit(tell_from_the_loop)
    assert told.wait(5.0)
    releases[0].set()  # one worker: the ready strands run one after another
    assert wait_until(lambda: len(seen) == len(told_normally) + len(told_by_io))
    for release in releases:
        release.set()
    return [name.removeprefix("q/") for name in seen]


def test_strands_woken_by_io_run_before_strands_woken_by_other_threads(
    one_patient_worker: ActorSystem,
) -> None:
    order = queue_behind_held_workers(one_patient_worker, ["new-1", "new-2", "new-3"], ["answer"])
    assert order == ["answer", "new-1", "new-2", "new-3"]


def test_strands_woken_by_io_never_hold_the_others_back_for_more_than_eight_in_a_row(
    one_patient_worker: ActorSystem,
) -> None:
    answers = [f"answer-{i}" for i in range(12)]
    order = queue_behind_held_workers(one_patient_worker, ["new"], answers)
    assert order == [*answers[:8], "new", *answers[8:]]
