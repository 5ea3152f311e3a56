"""The supervision observers: every restart, crash and escalation is told, with the actor's address."""

from __future__ import annotations

import threading

import pytest

from actors import ActorSystem, ChildSpec, RestartIntensity, Supervisor
from tests._waiting import wait_until
from tests.actors._kit import Boom, Counter, Get, Journal


class Facts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []

    def __call__(self, fact: str, address: str) -> None:
        with self._lock:
            self.seen.append((fact, address))

    def of(self, fact: str) -> list[str]:
        with self._lock:
            return [address for kind, address in self.seen if kind == fact]


def test_a_crash_and_its_restart_are_told_with_the_actors_address(system: ActorSystem) -> None:
    facts = Facts()
    system.observe(facts)
    journal = Journal()
    system.spawn(ChildSpec("sup", lambda: Supervisor([ChildSpec("w", lambda: Counter(journal, "w"))])))
    with pytest.raises(RuntimeError):
        system.address("sup/w").ask(Boom())
    assert system.address("sup/w").ask(Get()) == 0
    assert wait_until(lambda: facts.of("restart") == ["sup/w"])
    assert facts.of("crash") == ["sup/w"]
    assert facts.of("escalation") == []


def test_a_supervisor_that_gives_up_is_told_as_an_escalation(system: ActorSystem) -> None:
    facts = Facts()
    system.observe(facts)
    journal = Journal()
    inner = lambda: Supervisor(  # noqa: E731
        [ChildSpec("w", lambda: Counter(journal, "w"))], intensity=RestartIntensity(1, 10.0)
    )
    system.spawn(ChildSpec("outer", lambda: Supervisor([ChildSpec("inner", inner)])))
    worker = system.address("outer/inner/w")
    with pytest.raises(RuntimeError):
        worker.ask(Boom())
    worker.ask(Get())
    with pytest.raises(RuntimeError):
        worker.ask(Boom())
    assert wait_until(lambda: facts.of("escalation") == ["outer/inner"])
    assert wait_until(lambda: "outer/inner" in facts.of("restart"))


def test_an_observer_that_raises_is_logged_and_the_others_are_still_told(
    system: ActorSystem, caplog: pytest.LogCaptureFixture
) -> None:
    facts = Facts()

    def broken(fact: str, address: str) -> None:
        raise ValueError("observer bug")

    system.observe(broken)
    system.observe(facts)
    system.spawn(ChildSpec("sup", lambda: Supervisor([ChildSpec("w", lambda: Counter(Journal(), "w"))])))
    with pytest.raises(RuntimeError):
        system.address("sup/w").ask(Boom())
    assert wait_until(lambda: facts.of("restart") == ["sup/w"])
    assert "a supervision observer failed" in caplog.text
