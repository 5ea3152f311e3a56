"""The gate as an actor, with real threads: waiters are let through in turn, a wait past its deadline
fails clearly, a cancelled waiter withdraws, and a gate that crashes loses no request and wedges nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from actors import ActorSystem, ChaosPolicy, ChildSpec
from sampler.gate import (
    GateClient,
    GateLimits,
    GateShortcut,
    GateTimeout,
    GetGateStatus,
    ProviderGate,
    QueueInfo,
    WaitReason,
)

DEADLINE = 5.0


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    system = ActorSystem(ask_timeout=5.0)
    yield system
    system.shutdown(timeout=5.0)


def gate(system: ActorSystem, limits: GateLimits, chaos: ChaosPolicy | None = None) -> object:
    return system.spawn(ChildSpec("gate", lambda: ProviderGate(limits), chaos=chaos))


def client(address: object, session: str, **options: float) -> GateClient:
    return GateClient(address, session=session, resend_every=0.05, **options)


@pytest.mark.trio
async def test_a_waiter_goes_when_the_request_before_it_is_released(system: ActorSystem) -> None:
    address = gate(system, GateLimits(max_concurrent=1))
    first, second = client(address, "a"), client(address, "b")
    with trio.fail_after(DEADLINE):
        await first.acquire("a1", 10)
        got: list[str] = []
        async with trio.open_nursery() as nursery:

            async def wait_second() -> None:
                await second.acquire("b1", 10)
                got.append("b1")

            nursery.start_soon(wait_second)
            await trio.sleep(0.1)
            assert got == []
            first.release("a1", 200, {})
    assert got == ["b1"]


@pytest.mark.trio
async def test_a_wait_past_its_deadline_fails_saying_why_and_where_it_waited(system: ActorSystem) -> None:
    address = gate(system, GateLimits(max_concurrent=1))
    holder = client(address, "a")
    waiting = client(address, "b", max_wait=0.5, queued_after=0.1)
    queued: list[QueueInfo] = []
    with trio.fail_after(DEADLINE):
        await holder.acquire("a1", 1)
        with pytest.raises(GateTimeout, match=r"waited 0.5 s in the provider gate \(concurrency\)"):
            await waiting.acquire("b1", 1, queued.append)
    assert queued == [QueueInfo(0, WaitReason.CONCURRENCY, None)]
    assert system.address("gate").ask(GetGateStatus()).waiting == {}


@pytest.mark.trio
async def test_a_cancelled_waiter_withdraws_from_the_queue(system: ActorSystem) -> None:
    address = gate(system, GateLimits(max_concurrent=1))
    with trio.fail_after(DEADLINE):
        await client(address, "a").acquire("a1", 1)
        with trio.move_on_after(0.2):
            await client(address, "b").acquire("b1", 1)
    snapshot = await trio.to_thread.run_sync(system.address("gate").ask, GetGateStatus())
    assert (snapshot.in_flight, snapshot.waiting) == (1, {})


@pytest.mark.trio
async def test_a_gate_that_crashes_loses_no_waiting_request(system: ActorSystem) -> None:
    crash_on_status = ChaosPolicy(seed=1, crash_probability=1.0, crash_on=(GetGateStatus,))
    address = gate(system, GateLimits(max_concurrent=1), crash_on_status)
    granted: list[str] = []
    with trio.fail_after(DEADLINE):
        await client(address, "a").acquire("a1", 1)
        async with trio.open_nursery() as nursery:

            async def wait_second() -> None:
                await client(address, "b").acquire("b1", 1)
                granted.append("b1")

            nursery.start_soon(wait_second)
            await trio.sleep(0.1)
            assert granted == []
            with pytest.raises(Exception):  # noqa: B017 (the injected crash, as the asker sees it)
                await trio.to_thread.run_sync(address.ask, GetGateStatus())
    # The new incarnation knew nothing of a1 in flight: the waiter's repeated ask rebuilt the queue.
    assert granted == ["b1"]


@pytest.mark.trio
async def test_while_the_gate_knows_no_limit_requests_go_by_its_shortcut_and_count_in_flight(
    system: ActorSystem,
) -> None:
    shortcut = GateShortcut()
    address = system.spawn(ChildSpec("gate", lambda: ProviderGate(GateLimits(), shortcut=shortcut)))
    user = GateClient(address, session="a", shortcut=shortcut)
    with trio.fail_after(DEADLINE):
        await user.acquire("a1", 1)  # the provider has not answered yet: through the gate's mailbox
        assert system.address("gate").ask(GetGateStatus()).in_flight == 1
        user.release("a1", 200, {})
        assert system.address("gate").ask(GetGateStatus()).in_flight == 0  # the release was handled
        grant = await user.acquire("a2", 1)
    assert grant.waited == 0.0 and shortcut.in_flight == 1
    assert system.address("gate").ask(GetGateStatus()).in_flight == 1
    user.release("a2", 200, {})
    assert shortcut.in_flight == 0


@pytest.mark.trio
async def test_an_answer_with_something_to_teach_closes_the_shortcut(system: ActorSystem) -> None:
    shortcut = GateShortcut()
    address = system.spawn(ChildSpec("gate", lambda: ProviderGate(GateLimits(), shortcut=shortcut)))
    user = GateClient(address, session="a", shortcut=shortcut, max_wait=0.3, queued_after=0.1)
    with trio.fail_after(DEADLINE):
        await user.acquire("a1", 1)
        user.release("a1", 200, {})
        system.address("gate").ask(GetGateStatus())
        await user.acquire("a2", 1)
        user.release("a2", 429, {"retry-after": "30"})
        assert system.address("gate").ask(GetGateStatus()).cool_down > 25
        with pytest.raises(GateTimeout, match="cool-down"):
            await user.acquire("a3", 1)
    assert shortcut.in_flight == 0


@pytest.mark.trio
async def test_a_restarted_gate_lets_nothing_by_its_shortcut_until_it_has_learned_again(
    system: ActorSystem,
) -> None:
    shortcut = GateShortcut()
    shortcut.set_open(True)
    system.spawn(ChildSpec("gate", lambda: ProviderGate(GateLimits(), shortcut=shortcut)))
    assert system.address("gate").ask(GetGateStatus()).in_flight == 0
    assert not shortcut.take()
