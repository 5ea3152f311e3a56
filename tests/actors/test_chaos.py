"""ChaosPolicy: seeded crashes, drops and delays; and a supervised ledger that loses nothing under chaos."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import msgspec
import pytest

from actors import (
    Actor,
    ActorError,
    ActorSystem,
    ChaosCrash,
    ChaosPolicy,
    ChaosVerdict,
    ChildSpec,
    MessageDropped,
    RestartIntensity,
    handles,
)
from tests.actors._kit import Counter, Get, Inc
from tests.actors.conftest import system_threads


def verdicts(policy: ChaosPolicy, address: str, incarnation: int, n: int) -> list[ChaosVerdict]:
    dice = policy.for_incarnation(address, incarnation)
    return [dice.roll(Inc())[0] for _ in range(n)]


def test_the_same_seed_replays_the_same_faults() -> None:
    policy = ChaosPolicy(seed=7, crash_probability=0.2, drop_probability=0.1)
    assert verdicts(policy, "a", 1, 200) == verdicts(policy, "a", 1, 200)
    assert verdicts(policy, "a", 1, 200) != verdicts(policy, "a", 2, 200)
    assert verdicts(policy, "a", 1, 200) != verdicts(ChaosPolicy(seed=8, crash_probability=0.2), "a", 1, 200)


def test_crash_on_limits_crashes_to_the_named_message_types() -> None:
    policy = ChaosPolicy(seed=1, crash_probability=1.0, crash_on=(Get,))
    dice = policy.for_incarnation("a", 1)
    assert dice.roll(Inc())[0] is ChaosVerdict.HANDLE
    assert dice.roll(Get())[0] is ChaosVerdict.CRASH


@pytest.mark.parametrize("field", ["crash_probability", "drop_probability", "delay_probability"])
def test_probabilities_outside_zero_to_one_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ChaosPolicy(**{field: 1.5})


def test_a_drop_is_recorded_and_the_asker_told(system: ActorSystem) -> None:
    counter = system.spawn(ChildSpec("c", Counter, chaos=ChaosPolicy(drop_probability=1.0, drop_on=(Inc,))))
    with pytest.raises(MessageDropped):
        counter.ask(Inc(1))
    counter.tell(Inc(1))
    assert counter.ask(Get()) == 0
    assert [d.reason for d in system.dead_letters.recent()] == ["dropped by the chaos policy"] * 2


def test_a_subtree_policy_reaches_every_worker_below_a_supervisor(system: ActorSystem) -> None:
    from actors import Supervisor

    policy = ChaosPolicy(crash_probability=1.0, crash_on=(Inc,))
    system.spawn(ChildSpec("sup", lambda: Supervisor([ChildSpec("w", Counter)], chaos=policy)))
    with pytest.raises(ChaosCrash):
        system.address("sup/w").ask(Inc(1))
    assert system.address("sup/w").ask(Get()) == 0


def test_an_injected_crash_never_uses_up_a_told_message(system: ActorSystem) -> None:
    # Injected crashes happen before the handler runs, so the message is not to blame: three in a row
    # still leave it to be handled, once, by the fourth incarnation.
    def crashes_three_times_then_handles(seed: int) -> bool:
        policy = ChaosPolicy(seed=seed, crash_probability=0.5, crash_on=(Inc,))
        first = [verdicts(policy, "c", incarnation, 1)[0] for incarnation in (1, 2, 3, 4)]
        return first == [ChaosVerdict.CRASH] * 3 + [ChaosVerdict.HANDLE]

    seed = next(s for s in range(10_000) if crashes_three_times_then_handles(s))
    policy = ChaosPolicy(seed=seed, crash_probability=0.5, crash_on=(Inc,))
    counter = system.spawn(ChildSpec("c", Counter, chaos=policy))
    counter.tell(Inc(1))
    assert counter.ask(Get()) == 1
    assert system.metrics()["chaos_crashes"] == 3
    assert system.dead_letters.total == 0


def test_a_told_message_that_injected_crashes_keep_hitting_becomes_a_dead_letter() -> None:
    with ActorSystem(intensity=RestartIntensity(10, 60.0)) as system:
        policy = ChaosPolicy(crash_probability=1.0, crash_on=(Inc,))
        counter = system.spawn(ChildSpec("c", Counter, chaos=policy))
        counter.tell(Inc(1))
        assert counter.ask(Get()) == 0
        [letter] = system.dead_letters.recent()
        assert isinstance(letter.message, Inc)
        assert "injected crashes ended 4 incarnations in a row on it" in letter.reason
        assert system.metrics()["chaos_crashes"] == 4


class Apply(msgspec.Struct, frozen=True, tag=True):
    op_id: int


class Ledger:
    """Stands in for the store: durable, outside every actor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.applied: dict[int, int] = {}

    def apply(self, op_id: int) -> None:
        with self._lock:
            self.applied[op_id] = self.applied.get(op_id, 0) + 1


class LedgerWriter(Actor):
    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    @handles(Apply)
    def apply(self, message: Apply) -> int:
        self.ledger.apply(message.op_id)
        return message.op_id


def test_every_ask_under_chaos_is_applied_exactly_once_or_fails_with_a_named_error() -> None:
    before = system_threads()
    ledger = Ledger()
    total = 5_000
    returned: set[int] = set()
    failed: dict[int, str] = {}
    lock = threading.Lock()
    with ActorSystem(ask_timeout=10.0, restart_wait=5.0) as system:
        spec = ChildSpec(
            "ledger",
            lambda: LedgerWriter(ledger),
            chaos=ChaosPolicy(seed=2026, crash_probability=0.02),
        )
        from actors import Supervisor

        system.spawn(
            ChildSpec("writers", lambda: Supervisor([spec], intensity=RestartIntensity(10_000, 1.0)))
        )
        writer = system.address("writers/ledger")

        def one(op_id: int) -> None:
            try:
                assert writer.ask(Apply(op_id)) == op_id
                with lock:
                    returned.add(op_id)
            except ActorError as exc:
                with lock:
                    failed[op_id] = type(exc).__name__

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(total)))
        crashes = system.metrics().get("chaos_crashes", 0)
    report = system.report
    assert report is not None

    unaccounted = total - len(returned) - len(failed)
    wrongly_applied = [op for op in failed if op in ledger.applied]
    missing = [op for op in returned if ledger.applied.get(op) != 1]
    print(
        f"\nledger under chaos: {total} asks, {len(returned)} returned, {len(failed)} failed "
        f"({sorted(set(failed.values()))}), {crashes} crashes, unaccounted={unaccounted}, "
        f"leftover threads={len(report.leftover_threads)}"
    )
    assert unaccounted == 0
    assert crashes > 50  # about 2 % of 5,000
    assert set(failed.values()) == {"ChaosCrash"}
    assert len(failed) == crashes
    assert wrongly_applied == []
    assert missing == []
    assert sum(ledger.applied.values()) == len(returned)
    assert report.leftover_threads == ()
    assert system_threads() - before == set()
