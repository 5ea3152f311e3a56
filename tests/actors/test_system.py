"""The ActorSystem: cooperative shutdown that accounts for every queued message and leaves no thread."""

from __future__ import annotations

import threading

import pytest

from actors import Actor, ActorSystem, ChildSpec, Supervisor, handles
from tests.actors._kit import Block, Counter, Get, Inc, Journal
from tests.actors.conftest import system_threads


def test_shutdown_runs_every_on_stop_and_leaves_no_thread() -> None:
    before = system_threads()
    journal = Journal()
    system = ActorSystem()
    system.spawn(ChildSpec("a", lambda: Counter(journal, "a")))
    system.spawn(ChildSpec("s", lambda: Supervisor([ChildSpec("b", lambda: Counter(journal, "b"))])))
    report = system.shutdown()
    assert report.clean
    assert journal.snapshot()[-2:] == ["b:stop1", "a:stop1"]
    assert system_threads() - before == set()
    assert system.shutdown() is report


def test_shutdown_while_messages_are_queued_handles_or_records_each_one() -> None:
    system = ActorSystem()
    journal = Journal()
    counter = system.spawn(ChildSpec("c", lambda: Counter(journal), shutdown_timeout=0.3))
    release = threading.Event()
    threading.Thread(target=counter.ask, args=(Block(release),), daemon=True).start()
    assert journal.wait_for("counter:blocked")
    for _ in range(100):
        counter.tell(Inc(1))
    threading.Timer(0.5, release.set).start()
    report = system.shutdown(timeout=5)
    # The counter was killed while blocked; the 100 increments it never handled are dead letters.
    assert any(item.startswith("c:") for item in report.forced)
    assert sum(isinstance(d.message, Inc) for d in system.dead_letters.recent()) == 100
    assert report.leftover_threads == ()


def test_messages_after_shutdown_are_dead_letters() -> None:
    system = ActorSystem()
    counter = system.spawn(ChildSpec("c", Counter))
    system.shutdown()
    counter.tell(Inc(1))
    from actors import ActorUnavailable

    with pytest.raises(ActorUnavailable):
        counter.ask(Get())
    assert system.dead_letters.total == 2


def test_shutdown_from_inside_an_actor_is_refused_but_can_be_requested() -> None:
    outcome: list[str] = []

    class Quitter(Actor):
        @handles(Get)
        def get(self, _: Get) -> None:
            try:
                self.system.shutdown()
            except RuntimeError as exc:
                outcome.append(str(exc))
            self.system.request_shutdown("asked by an actor")

    system = ActorSystem()
    system.spawn(ChildSpec("q", Quitter)).ask(Get())
    assert system.wait_terminated(10)
    assert "request_shutdown" in outcome[0]
    assert system.report is not None and system.report.reason == "asked by an actor"
