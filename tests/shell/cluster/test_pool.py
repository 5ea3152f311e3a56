"""Sessions on a pool of host replicas on a local Ray cluster (127.0.0.1 only, two replicas, a shared
SQLite store, the embedded provider in this process): placement, routing, event streams, and what happens
to sessions and turns when a replica's process dies."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from shell.cluster._outbox import Outbox

# Ray picks the address it listens on when it is imported: loopback only, before the import.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="the host pool runs on Ray: pip install 'turnkeep[ray]'")

from sampler import AssistantMessage, Message, TextPart, ToolMessage, UserMessage  # noqa: E402
from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep  # noqa: E402
from shell import events as ev  # noqa: E402
from shell.cluster import (  # noqa: E402
    ClusterSettings,
    HostPool,
    PoolHost,
    connect,
    load_cluster_settings,
)
from shell.config import Settings  # noqa: E402
from shell.facade import AsyncSession, Host, Session  # noqa: E402
from shell.host import HostError  # noqa: E402
from shell.messages import Cancel, Subscribe, Unsubscribe, UserPrompt  # noqa: E402
from shell.store import SessionStore  # noqa: E402
from shell.turn import INTERRUPTED_CALL  # noqa: E402
from tests._events import without_usage  # noqa: E402
from tests.shell._settings import settings_for as shared_settings_for  # noqa: E402

SLOW = Script.task([ToolStep([("shell", {"command": "sleep 4"})]), FinalAnswer("slept")])
"""A turn that spends 4 s in a tool: long enough to kill its replica under it."""
TERMINAL_TYPES = ("TurnCompleted", "TurnFailed", "TurnCancelled")
QUICK = " [[script:echo]]"
"""Appended to a prompt after a slow one: the fake model answers the newest directive."""

PATIENCE = 60.0
"""Seconds a test waits for the pool to notice a silent replica, restart it and move its sessions."""

CLUSTER = ClusterSettings(backend="ray", replicas=2, replica_cpus=0.5, call_timeout=15.0, restart_wait=15.0)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(Script.echo(), scripts={"slow": SLOW, "echo": Script.echo()}) as fake:
        yield fake


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        namespace="turnkeep-tests",
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pool")


def settings_for(provider: FakeProvider, directory: Path) -> Settings:
    return shared_settings_for(provider, directory, TURNKEEP_TOOLS__ALLOW="shell")


@pytest.fixture(scope="module")
def host(provider: FakeProvider, local_ray: None, store_dir: Path) -> Iterator[PoolHost]:
    with PoolHost(settings_for(provider, store_dir), cluster=CLUSTER) as pool_host:
        yield pool_host


def user_texts(messages: Iterable[Message]) -> list[str]:
    return [
        part.text
        for message in messages
        if isinstance(message, UserMessage)
        for part in message.parts
        if isinstance(part, TextPart)
    ]


def replica_of(pool: HostPool, session_id: str) -> Any:
    name = pool.placement(session_id)
    return next(status for status in pool.replicas() if status.name == name)


def kill_when_tool_starts(session: Session, text: str, kill: Any) -> list[Any]:
    """The events of a turn, killing the replica under it once its tool is running."""
    events = []
    for event in session.prompt(text, event_timeout=30):
        events.append(event)
        if isinstance(event, ev.ToolCallStarted):
            kill()
    return events


def wait_until_up(pool: HostPool, name: str, deadline: float = 30.0) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        status = next(s for s in pool.replicas() if s.name == name)
        if status.up:
            return status
        time.sleep(0.05)
    raise AssertionError(f"{name} did not come back")


# -- placement and routing ---------------------------------------------------------------------------------


def test_sessions_spread_over_both_replicas(host: PoolHost, store_dir: Path) -> None:
    # Earlier tests may have left sessions on the replicas: each new session must go to a replica
    # that held the fewest sessions just before it was opened.
    def loads() -> dict[str, int]:
        return {status.name: len(status.sessions) for status in host.pool.replicas()}

    before = loads()
    assert len(before) == 2
    for i in range(4):
        current = loads()
        session = host.open(store_dir / f"spread-{i}")
        assert current[host.pool.placement(session.id)] == min(current.values())
    after = loads()
    assert sum(after.values()) == sum(before.values()) + 4
    low, high = sorted(after.values())
    assert high - low <= max(1, max(before.values()) - min(before.values()) - 4)
    assert len({status.pid for status in host.pool.replicas()}) == 2
    assert os.getpid() not in {status.pid for status in host.pool.replicas()}
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}


def test_a_prompt_through_the_pool_streams_its_turn_and_the_shared_store_keeps_it(
    host: PoolHost, store_dir: Path
) -> None:
    session = host.open(store_dir / "stream")
    events = list(session.prompt("hello pool"))
    assert isinstance(events[0], ev.TurnStarted) and events[0].turn == 1
    assert any(isinstance(e, ev.TextDelta) for e in events)
    assert without_usage(events[-1]) == ev.TurnCompleted(session.id, 1, "echo: hello pool", 1)
    assert [type(m) for m in session.history()] == [UserMessage, AssistantMessage]
    with SessionStore.open(store_dir / "store.db") as store:
        stored = [m.message for m in store.load_messages(session.id)]
        assert user_texts(stored) == ["hello pool"]
        assert store.get_session(session.id).status == "idle"
    assert session.id in {record.id for record in host.sessions()}


def test_a_pool_address_takes_the_mailbox_messages_of_a_local_one(host: PoolHost, store_dir: Path) -> None:
    address = host.pool.open(store_dir / "mailbox")
    events: queue.Queue[Any] = queue.Queue()
    assert address.ask(Subscribe(events)) is None
    assert address.ask(Cancel()) is False
    assert address.ask(UserPrompt("over the wire")) == 1
    received = [events.get(timeout=15)]
    while not isinstance(received[-1], ev.TERMINAL_EVENTS):
        received.append(events.get(timeout=15))
    assert without_usage(received[-1]) == ev.TurnCompleted(address.session_id, 1, "echo: over the wire", 1)
    address.ask(Unsubscribe(events))
    address.tell(UserPrompt("told"))
    deadline = time.monotonic() + 15
    while len([m for m in host.pool.history(address.session_id) if isinstance(m, AssistantMessage)]) < 2:
        assert time.monotonic() < deadline, "the told prompt never ran"
        time.sleep(0.05)
    assert events.empty()


def test_a_session_resumed_through_the_pool_keeps_its_history(host: PoolHost, store_dir: Path) -> None:
    first = host.open(store_dir / "resume")
    first.run("remember this")
    again = host.resume(first.id)
    reply = again.run("and this")
    assert without_usage(reply) == ev.TurnCompleted(first.id, 2, "echo: and this", 1)
    assert user_texts(again.history()) == ["remember this", "and this"]


def test_an_unknown_session_is_refused_as_a_host_error(host: PoolHost) -> None:
    with pytest.raises(HostError):
        host.resume("no-such-session")
    with pytest.raises(HostError):
        host.pool.ask("never-opened", UserPrompt("hi"))


# -- losing a replica --------------------------------------------------------------------------------------


def test_killing_a_replica_mid_turn_resumes_the_turn_from_its_stored_steps_and_its_sessions_go_on(
    host: PoolHost, store_dir: Path
) -> None:
    pool = host.pool
    sessions = [host.open(store_dir / f"kill-{i}") for i in range(4)]
    for session in sessions:
        session.run("before")
    # Four sessions on two replicas: one replica has at least two of them, the victim and a bystander.
    victim = next(
        s for s in sessions if [pool.placement(o.id) for o in sessions].count(pool.placement(s.id)) > 1
    )
    doomed = replica_of(pool, victim.id)

    started = time.monotonic()
    events = kill_when_tool_starts(
        victim, "work [[script:slow]]", lambda: os.kill(doomed.pid, signal.SIGKILL)
    )
    # The model's stored step is not asked again; the shell call it made may have run, so it is not run
    # again and the model is told so; its next step ends the turn.
    assert without_usage(events[-1]) == ev.TurnCompleted(victim.id, 2, "slept", 2)
    (resumed,) = [e for e in events if isinstance(e, ev.TurnResumed)]
    assert (resumed.turn, resumed.steps_done, resumed.attempt, resumed.rerun) == (2, 1, 1, ())
    assert len(resumed.interrupted) == 1
    assert time.monotonic() - started < 30
    assert len([e for e in events if isinstance(e, ev.TERMINAL_EVENTS)]) == 1

    with SessionStore.open(store_dir / "store.db") as store:
        record = store.get_session(victim.id)
        stored = [m.message for m in store.load_messages(victim.id)]
        logged = [e.type for e in store.load_events(victim.id) if e.turn == 2]
    assert record.status == "idle" and record.current_turn == 2
    assert user_texts(stored) == ["before", "work [[script:slow]]"]
    results = [m.result for m in stored if isinstance(m, ToolMessage)]
    assert [(r.call_id, r.content, r.is_error) for r in results] == [
        (resumed.interrupted[0], INTERRUPTED_CALL, True)
    ]
    assert logged.count("TurnResumed") == 1 and logged[-1] == "TurnCompleted"

    restarted = wait_until_up(pool, doomed.name)
    assert restarted.pid != doomed.pid and restarted.incarnation != doomed.incarnation
    for session in sessions:
        assert isinstance(session.run("after" + QUICK), ev.TurnCompleted)


def test_a_replica_restarted_by_ray_mid_turn_converges_the_turn_and_serves_again(
    host: PoolHost, store_dir: Path
) -> None:
    pool = host.pool
    session = host.open(store_dir / "restart")
    doomed = replica_of(pool, session.id)
    events = kill_when_tool_starts(session, "work [[script:slow]]", lambda: pool.restart_replica(doomed.name))
    terminal = without_usage(events[-1])
    assert terminal == ev.TurnCompleted(session.id, 1, "slept", 2)  # resumed, or ended before the restart
    assert wait_until_up(pool, doomed.name).incarnation != doomed.incarnation
    assert isinstance(session.run("after" + QUICK), ev.TurnCompleted)


def test_a_prompt_waiting_behind_a_resumed_turn_runs_once_the_session_has_moved(
    host: PoolHost, store_dir: Path
) -> None:
    pool = host.pool
    session = host.open(store_dir / "queued")
    doomed = replica_of(pool, session.id)
    inbox: queue.Queue[Any] = queue.Queue()
    session.address.ask(Subscribe(inbox))
    assert session.address.ask(UserPrompt("work [[script:slow]]")) == 1
    assert session.address.ask(UserPrompt("then this" + QUICK)) == 2
    ends: dict[int, Any] = {}
    while len(ends) < 2:
        event = inbox.get(timeout=30)
        if isinstance(event, ev.ToolCallStarted) and event.turn == 1:
            os.kill(doomed.pid, signal.SIGKILL)
        if isinstance(event, ev.TERMINAL_EVENTS):
            assert event.turn not in ends, "a turn ended twice"
            ends[event.turn] = event
    assert without_usage(ends[1]) == ev.TurnCompleted(session.id, 1, "slept", 2)
    assert isinstance(ends[2], ev.TurnCompleted) and ends[2].turn == 2
    wait_until_up(pool, doomed.name)


def test_a_replica_gone_for_good_hands_its_sessions_to_the_other(
    provider: FakeProvider, local_ray: None, tmp_path: Path
) -> None:
    cluster = ClusterSettings(
        backend="ray", replicas=2, replica_cpus=0.25, call_timeout=10.0, restart_wait=10.0
    )
    with PoolHost(settings_for(provider, tmp_path), cluster=cluster) as pooled:
        pool = pooled.pool
        first, second = pooled.open(tmp_path / "first"), pooled.open(tmp_path / "second")
        first.run("before")
        doomed = replica_of(pool, first.id)
        assert pool.placement(second.id) != doomed.name
        ray.kill(ray.get_actor(doomed.name, namespace=cluster.namespace), no_restart=True)
        deadline = time.monotonic() + 15
        while pool.placement(first.id) in (doomed.name, None):
            assert time.monotonic() < deadline, "the session never moved"
            time.sleep(0.05)
        assert without_usage(first.run("after")) == ev.TurnCompleted(first.id, 2, "echo: after", 1)
        assert pool.placement(first.id) == pool.placement(second.id)
        assert [s.up for s in pool.replicas() if s.name == doomed.name] == [False]


def test_a_replica_frozen_mid_turn_is_replaced_and_the_turn_ends_once_written_by_one_owner(
    provider: FakeProvider, local_ray: None, tmp_path: Path
) -> None:
    # Long enough for a busy machine's replicas to answer and to start: only the frozen one is silent.
    cluster = ClusterSettings(
        backend="ray", replicas=2, replica_cpus=0.25, call_timeout=10.0, restart_wait=3.0
    )
    with PoolHost(settings_for(provider, tmp_path), cluster=cluster) as pooled:
        pool = pooled.pool
        session = pooled.open(tmp_path / "silent")
        session.run("before")
        doomed = replica_of(pool, session.id)
        try:
            events = kill_when_tool_starts(
                session, "work [[script:slow]]", lambda: os.kill(doomed.pid, signal.SIGSTOP)
            )
        finally:
            # Continued: if it outlived its replacement, its writes are refused (the session moved on).
            with contextlib.suppress(ProcessLookupError):
                os.kill(doomed.pid, signal.SIGCONT)
        assert pool.placement(session.id) not in (doomed.name, None)
        assert without_usage(events[-1]) == ev.TurnCompleted(session.id, 2, "slept", 2)
        assert len([e for e in events if isinstance(e, ev.TERMINAL_EVENTS)]) == 1
        assert without_usage(session.run("after" + QUICK)) == ev.TurnCompleted(
            session.id, 3, "echo: after", 1
        )
        restarted = wait_until_up(pool, doomed.name, PATIENCE)
        assert restarted.incarnation != doomed.incarnation
        assert restarted.pid not in (doomed.pid, None)
        with SessionStore.open(tmp_path / "store.db") as store:
            ends = [e.turn for e in store.load_events(session.id) if e.type in TERMINAL_TYPES]
            results = [
                m.message.result
                for m in store.load_messages(session.id)
                if isinstance(m.message, ToolMessage)
            ]
            epoch = store.get_session(session.id).owner_epoch
        assert ends == [1, 2, 3]  # each turn ended once
        assert [(r.content, r.is_error) for r in results] == [(INTERRUPTED_CALL, True)]  # the owner's result
        assert epoch >= 2


# -- the same ways in --------------------------------------------------------------------------------------


def test_connect_picks_a_local_host_or_a_pool_from_the_cluster_settings(
    provider: FakeProvider, local_ray: None, tmp_path: Path
) -> None:
    settings = settings_for(provider, tmp_path)
    with connect(settings) as local:
        assert isinstance(local, Host)
        assert isinstance(local.open(tmp_path / "local").run("hi"), ev.TurnCompleted)
    config = tmp_path / "cluster.toml"
    config.write_text('[cluster]\nbackend = "ray"\nreplicas = 1\nreplica_cpus = 0.25\n')
    with connect(settings, cluster=config) as pooled:
        assert isinstance(pooled, PoolHost)
        assert len(pooled.pool.replicas()) == 1
        session = pooled.resume(pooled.sessions()[0].id)
        assert without_usage(session.run("again")) == ev.TurnCompleted(session.id, 2, "echo: again", 1)
        slow = session.prompt("work [[script:slow]]")
        assert isinstance(next(slow), ev.TurnStarted)
    assert without_usage(list(slow)[-1]) == ev.TurnCancelled(session.id, 3, "aborted")


@pytest.mark.trio
async def test_the_trio_face_streams_a_turn_from_the_pool(host: PoolHost, store_dir: Path) -> None:
    session = AsyncSession(await trio.to_thread.run_sync(lambda: host.open(store_dir / "trio")))
    events = [event async for event in session.prompt("from trio")]
    assert without_usage(events[-1]) == ev.TurnCompleted(session.id, 1, "echo: from trio", 1)
    assert not await session.cancel()


def test_cluster_settings_refuse_a_wrong_value_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cluster\.replicas"):
        ClusterSettings(replicas=0)
    config = tmp_path / "cluster.toml"
    config.write_text("[cluster]\ncall_timeout = -1\n")
    with pytest.raises(ValueError, match=r"cluster\.call_timeout"):
        load_cluster_settings(config)
    plain = tmp_path / "plain.toml"
    plain.write_text("[store]\npath = 'elsewhere.db'\n")
    assert load_cluster_settings(plain) == ClusterSettings()


# -- the replica's outbox ----------------------------------------------------------------------------------


def test_an_outbox_sends_again_what_was_not_acknowledged_and_forgets_what_was() -> None:
    outbox = Outbox()
    for n in range(3):
        outbox.put("s", bytes([n]))
    assert [seq for seq, _, _ in outbox.take(0, 0)] == [1, 2, 3]
    assert [seq for seq, _, _ in outbox.take(0, 0)] == [1, 2, 3]
    assert [seq for seq, _, _ in outbox.take(2, 0)] == [3]
    assert outbox.take(3, 0) == []
    assert outbox.take(0, 0) == []
