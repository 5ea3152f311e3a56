"""Addresses: stable names, bounded waits across restarts, deadlines on every ask, no silent loss."""

from __future__ import annotations

import threading
import time

import pytest

from actors import ActorSystem, ActorUnavailable, AskTimeout, ChildSpec, RestartIntensity
from tests._waiting import wait_until
from tests.actors._kit import Block, Counter, CrashOnce, Get, Inc, Journal, crash_once


def test_an_address_outlives_its_incarnations(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("counter", Counter))
    assert system.address("counter") is counter
    counter.tell(crash_once())
    assert counter.ask(Inc(1)) == 1
    assert counter.status == "running"


def test_messages_to_a_name_without_actor_are_dead_letters_at_once(system: ActorSystem) -> None:
    nobody = system.address("nobody")
    nobody.tell(Inc(1))
    started = time.monotonic()
    with pytest.raises(ActorUnavailable, match="no actor has been started"):
        nobody.ask(Get(), timeout=5)
    assert time.monotonic() - started < 1
    assert [d.reason for d in system.dead_letters.recent()] == [
        "no actor has been started at this address"
    ] * 2


def test_messages_sent_while_restarting_wait_and_arrive_in_order() -> None:
    release = threading.Event()
    journal = Journal()

    class SlowRestart(Counter):
        def on_start(self) -> None:
            if self.incarnation > 1:
                release.wait(5)
            super().on_start()

        def inc(self, message: Inc) -> int:  # type: ignore[override]
            journal.add(str(message.n))
            return super().inc(message)

    with ActorSystem(restart_wait=5.0) as system:
        counter = system.spawn(ChildSpec("slow", SlowRestart))
        counter.tell(crash_once())
        for n in range(20):
            counter.tell(Inc(n))
        release.set()
        assert counter.ask(Get(), timeout=5) == sum(range(20))
        assert journal.snapshot() == [str(n) for n in range(20)]
        assert system.dead_letters.total == 0


def test_past_the_restart_bound_tells_become_dead_letters_and_asks_fail() -> None:
    release = threading.Event()

    class NeverBack(Counter):
        def on_start(self) -> None:
            if self.incarnation > 1:
                release.wait(10)

    with ActorSystem(restart_wait=0.2) as system:
        counter = system.spawn(ChildSpec("stuck", NeverBack, start_timeout=3.0))
        counter.tell(crash_once())
        counter.tell(Inc(1))
        with pytest.raises(ActorUnavailable, match=r"did not come back within 0.2 s"):
            counter.ask(Get(), timeout=5)
        letters = system.dead_letters.recent()
        assert [type(d.message) for d in letters] == [CrashOnce, Inc, Get]
        release.set()


def test_an_ask_that_times_out_before_delivery_is_never_handled(system: ActorSystem) -> None:
    journal = Journal()
    counter = system.spawn(ChildSpec("counter", lambda: Counter(journal)))
    release = threading.Event()
    threading.Thread(target=counter.ask, args=(Block(release),), daemon=True).start()
    assert journal.wait_for("counter:blocked")
    with pytest.raises(AskTimeout) as info:
        counter.ask(Inc(7), timeout=0.05)
    assert info.value.delivered is False
    release.set()
    assert counter.ask(Get()) == 0
    assert any("asker gave up" in d.reason for d in system.dead_letters.recent())


def test_asks_racing_a_stop_each_end_with_a_reply_or_a_named_error(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("counter", Counter))
    outcomes: list[str] = []
    lock = threading.Lock()
    racing = threading.Barrier(5)

    def hammer() -> None:
        racing.wait(5)
        for _ in range(200):
            try:
                counter.ask(Inc(1), timeout=5)
                result = "ok"
            except ActorUnavailable:
                result = "unavailable"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    racing.wait(5)  # every thread is about to ask as the stop begins
    system.stop("counter")
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert len(outcomes) == 800
    assert outcomes.count("unavailable") == system.dead_letters.total


def test_a_stopped_address_with_an_activator_starts_an_actor_on_demand(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("lazy", Counter))
    system.stop("lazy")
    activations: list[str] = []

    def activate(address: object) -> None:
        activations.append(str(address))
        threading.Thread(target=system.spawn, args=(ChildSpec("lazy", Counter),)).start()

    counter.set_activator(activate)
    counter.tell(Inc(2))
    assert counter.ask(Inc(3)) == 5
    assert activations == ["turnkeep.Address('lazy')"]
    assert system.dead_letters.total == 0


def test_a_message_told_while_an_activatable_actor_stops_waits_for_the_actor_started_after(
    system: ActorSystem,
) -> None:
    counter = system.spawn(ChildSpec("lazy", Counter))
    counter.set_activator(
        lambda _: threading.Thread(target=system.spawn, args=(ChildSpec("lazy", Counter),)).start()
    )
    release = threading.Event()
    counter.tell(Block(release))
    stopping = threading.Thread(target=system.stop, args=("lazy",))
    stopping.start()
    assert wait_until(lambda: counter.status == "stopping")
    counter.tell(Inc(2))  # the stopping incarnation will not see it
    release.set()
    stopping.join(10)
    assert counter.ask(Get(), timeout=10) == 2
    assert system.dead_letters.total == 0


def test_every_message_waiting_for_an_actor_that_never_comes_is_dead_lettered_in_time() -> None:
    with ActorSystem(restart_wait=0.2) as system:
        counter = system.spawn(ChildSpec("never", Counter))
        system.stop("never")
        counter.set_activator(lambda _: None)  # asked to come back, it never does
        expired: list[threading.Event] = [threading.Event(), threading.Event()]
        system.dead_letters.subscribe(lambda letter: expired[letter.message.n].set())
        counter.tell(Inc(0))
        assert expired[0].wait(5)
        # Queued after the first expiry: a timer of its own bounds its wait too.
        counter.tell(Inc(1))
        assert expired[1].wait(5)
        assert [d.reason for d in system.dead_letters.recent()] == [
            "the actor did not come back within 0.2 s"
        ] * 2


def test_starting_and_stopping_actors_leaves_no_timer_behind() -> None:
    with ActorSystem(restart_wait=60.0, intensity=RestartIntensity(100, 60.0)) as system:
        for n in range(20):
            counter = system.spawn(ChildSpec(f"c{n}", Counter))
            assert counter.ask(Inc(1)) == 1
            counter.tell(crash_once())
            assert counter.ask(Get()) == 0  # served by the next incarnation, after waiting for it
            system.stop(f"c{n}")

        def timers() -> list[str]:
            return [name for name in system.io.pending_timers() if name == "restart-wait"]

        deadline = time.monotonic() + 5
        while timers() and time.monotonic() < deadline:
            system.io.call_later(0.0, lambda: None).wait(5)
        assert timers() == []
