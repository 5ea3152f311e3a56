"""Supervisors: OTP strategies, restart types, restart intensity, ordered start and reverse stop."""

from __future__ import annotations

import threading

import pytest

from actors import (
    Actor,
    ActorSystem,
    ActorUnavailable,
    ChildSpec,
    ChildStartError,
    Restart,
    RestartIntensity,
    Strategy,
    Supervisor,
    WhichChildren,
    handles,
)
from tests._waiting import wait_until
from tests.actors._kit import Block, Boom, Counter, Get, Inc, Journal, crash_once


def trio_of(journal: Journal, **spec: object) -> list[ChildSpec]:
    return [
        ChildSpec(name, lambda name=name: Counter(journal, name), **spec)  # type: ignore[misc, arg-type]
        for name in ("a", "b", "c")
    ]


def incarnations(system: ActorSystem, supervisor: str) -> dict[str, int]:
    children = system.address(supervisor).ask(WhichChildren())
    return {child.name: child.incarnation for child in children}


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (Strategy.ONE_FOR_ONE, {"a": 1, "b": 2, "c": 1}),
        (Strategy.ONE_FOR_ALL, {"a": 2, "b": 2, "c": 2}),
        (Strategy.REST_FOR_ONE, {"a": 1, "b": 2, "c": 2}),
    ],
)
def test_a_crash_restarts_the_children_its_strategy_names(
    system: ActorSystem, strategy: Strategy, expected: dict[str, int]
) -> None:
    journal = Journal()
    system.spawn(ChildSpec("sup", lambda: Supervisor(trio_of(journal), strategy=strategy)))
    with pytest.raises(RuntimeError):
        system.address("sup/b").ask(Boom())
    assert system.address("sup/b").ask(Get()) == 0
    assert wait_until(lambda: incarnations(system, "sup") == expected)


def test_one_for_all_stops_the_others_in_reverse_order_then_starts_all_in_order(system: ActorSystem) -> None:
    journal = Journal()
    system.spawn(ChildSpec("sup", lambda: Supervisor(trio_of(journal), strategy=Strategy.ONE_FOR_ALL)))
    system.address("sup/a").tell(crash_once())
    assert journal.wait_for("c:start2")
    assert journal.snapshot() == [
        "a:start1", "b:start1", "c:start1",
        "c:stop1", "b:stop1",
        "a:start2", "b:start2", "c:start2",
    ]  # fmt: skip


def test_children_stop_in_reverse_start_order(system: ActorSystem) -> None:
    journal = Journal()
    system.spawn(ChildSpec("sup", lambda: Supervisor(trio_of(journal))))
    assert system.stop("sup")
    assert journal.snapshot()[3:] == ["c:stop1", "b:stop1", "a:stop1"]


def test_a_transient_child_that_stops_normally_is_not_restarted(system: ActorSystem) -> None:
    class Quits(Actor):
        @handles_get
        def get(self, _: Get) -> None:
            self.stop_self()

    system.spawn(ChildSpec("quits", Quits, restart=Restart.TRANSIENT))
    system.address("quits").ask(Get())
    assert wait_until(lambda: system.address("quits").status == "stopped")
    with pytest.raises(ActorUnavailable):
        system.address("quits").ask(Get())


def test_a_permanent_child_that_stops_normally_is_restarted(system: ActorSystem) -> None:
    class Quits(Actor):
        @handles_get
        def get(self, _: Get) -> int:
            self.stop_self()
            return self.incarnation

    system.spawn(ChildSpec("quits", Quits))
    assert system.address("quits").ask(Get()) == 1
    assert system.address("quits").ask(Get()) == 2


def test_a_temporary_child_is_never_restarted(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("temp", Counter, restart=Restart.TEMPORARY))
    counter.tell(crash_once())
    assert wait_until(lambda: counter.status == "stopped")
    with pytest.raises(ActorUnavailable):
        counter.ask(Get())
    assert system.root.ask(WhichChildren()) == ()


def test_exceeding_the_restart_intensity_escalates_to_the_parent(system: ActorSystem) -> None:
    journal = Journal()
    inner = lambda: Supervisor(  # noqa: E731
        [ChildSpec("w", lambda: Counter(journal, "w"))], intensity=RestartIntensity(2, 10.0)
    )
    system.spawn(ChildSpec("outer", lambda: Supervisor([ChildSpec("inner", inner)])))
    worker = system.address("outer/inner/w")
    for _ in range(2):
        with pytest.raises(RuntimeError):
            worker.ask(Boom())
        worker.ask(Get())
    with pytest.raises(RuntimeError):
        worker.ask(Boom())
    # The inner supervisor gave up; the outer one restarted it, and with it a fresh worker.
    assert wait_until(lambda: incarnations(system, "outer") == {"inner": 2})
    assert worker.ask(Get()) == 0
    assert journal.snapshot().count("w:start1") == 2


def test_the_root_escalating_shuts_the_system_down_with_the_reason() -> None:
    system = ActorSystem(intensity=RestartIntensity(1, 10.0))
    counter = system.spawn(ChildSpec("counter", Counter))
    counter.tell(crash_once())
    assert wait_until(lambda: counter.ask(Get()) == 0)
    counter.tell(crash_once())
    assert system.wait_terminated(10)
    assert system.report is not None
    assert "root supervisor failed" in system.report.reason
    assert "SupervisorEscalation" in system.report.reason
    assert system.report.leftover_threads == ()


def test_a_child_that_does_not_stop_within_its_timeout_is_killed_and_reported(system: ActorSystem) -> None:
    release, journal = threading.Event(), Journal()
    counter = system.spawn(ChildSpec("slow", lambda: Counter(journal, "slow"), shutdown_timeout=0.2))
    threading.Thread(target=counter.ask, args=(Block(release),), daemon=True).start()
    counter.tell(Inc(1))
    assert journal.wait_for("slow:blocked")  # the stop now waits behind the Block
    assert system.stop("slow")
    assert system._forced == ["slow: did not stop within 0.2 s and was killed"]
    release.set()
    # The Inc queued behind the stop was not lost silently.
    assert wait_until(lambda: any(isinstance(d.message, Inc) for d in system.dead_letters.recent()))


def test_children_can_be_added_at_run_time_and_nested(system: ActorSystem) -> None:
    session = system.spawn(ChildSpec("session/42", Supervisor))
    chat = system.spawn(ChildSpec("chat_state", Counter), parent=session)
    assert chat.name == "session/42/chat_state"
    assert chat.ask(Inc(3)) == 3
    with pytest.raises(ValueError, match="already has a child"):
        system.spawn(ChildSpec("chat_state", Counter), parent=session)


def test_a_start_failure_during_restart_counts_toward_the_intensity(system: ActorSystem) -> None:
    attempts: list[int] = []

    class FailsAfterFirst(Counter):
        def on_start(self) -> None:
            attempts.append(1)
            if len(attempts) in (2, 3):
                raise OSError("cannot reopen")

    sup = system.spawn(
        ChildSpec(
            "sup",
            lambda: Supervisor([ChildSpec("w", FailsAfterFirst)], intensity=RestartIntensity(3, 10.0)),
        )
    )
    system.address("sup/w").tell(crash_once())
    # Two failed restarts and a third that worked: three restarts, within the intensity.
    assert system.address("sup/w").ask(Get()) == 0
    assert incarnations(system, "sup") == {"w": 4}
    assert incarnations(system, "root") == {"sup": 1}
    assert len(attempts) == 4
    # One more crash is one restart too many.
    system.address("sup/w").tell(crash_once())
    assert wait_until(lambda: incarnations(system, "root") == {"sup": 2})
    assert sup.ask(WhichChildren())[0].incarnation == 1


def handles_get(method):  # a tiny alias keeps the inline actors above readable
    from actors import handles

    return handles(Get)(method)


def test_a_child_whose_on_start_overruns_its_start_timeout_is_killed_and_reported(
    system: ActorSystem,
) -> None:
    release = threading.Event()

    class Stuck(Counter):
        def on_start(self) -> None:
            release.wait(10)

    with pytest.raises(ChildStartError, match=r"on_start did not finish within 0\.2 s"):
        system.spawn(ChildSpec("stuck", Stuck, start_timeout=0.2))
    release.set()
    assert system._forced == ["stuck: on_start did not finish within 0.2 s and was killed"]


class _Hire:
    """Told to a Workshop: start a Counter named ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name


class _CloseShop:
    """Told to a Workshop: stop every child."""


class Workshop(Supervisor):
    """A supervisor subclass that starts and stops children from its own handlers."""

    @handles(_Hire)
    def _hire(self, message: _Hire) -> str:
        return self.start_child(ChildSpec(message.name, Counter)).name

    @handles(_CloseShop)
    def _close(self, message: _CloseShop) -> None:
        self.stop_children()


def test_a_subclass_starts_and_stops_children_from_its_own_handlers(system: ActorSystem) -> None:
    shop = system.spawn(ChildSpec("shop", Workshop))
    assert shop.ask(_Hire("a")) == "shop/a"
    counter = system.address("shop/a")
    counter.ask(Inc())
    assert counter.ask(Get()) == 1
    with pytest.raises(ValueError, match="already has a child named 'a'"):
        shop.ask(_Hire("a"))
    shop.ask(_CloseShop())
    assert shop.ask(WhichChildren()) == ()
    assert wait_until(lambda: counter.status == "stopped")
