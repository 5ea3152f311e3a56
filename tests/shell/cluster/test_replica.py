"""A host replica answering the pool's requests in this process (no Ray): what its settlement of a moved
session reports, and what it leaves to the session's events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sampler.fake import FakeProvider, Script
from shell import events as ev
from shell.cluster import _wire as wire
from shell.cluster._replica import ReplicaCore
from shell.messages import UserPrompt
from tests.shell._settings import settings_for

EVENT_DEADLINE = 30.0


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(Script.echo()) as fake:
        yield fake


@pytest.fixture
def replicas(provider: FakeProvider, tmp_path: Path) -> Iterator[list[ReplicaCore]]:
    """Replicas of one store, started on demand by :func:`start`; each shut down at the end."""
    started: list[ReplicaCore] = []
    yield started
    for core in reversed(started):
        core.call(wire.encode(wire.Shutdown(10.0)))


def start(replicas: list[ReplicaCore], provider: FakeProvider, directory: Path) -> ReplicaCore:
    core = ReplicaCore(msgspec.msgpack.encode(settings_for(provider, directory)))
    replicas.append(core)
    return core


def ask(core: ReplicaCore, request: wire.Request, kind: Any = Any) -> Any:
    reply = wire.decode_reply(core.call(wire.encode(request)))
    assert reply.failure is None, reply.failure
    return msgspec.msgpack.decode(reply.value, type=kind)


def events_until_end(core: ReplicaCore, session_id: str) -> list[Any]:
    """The session's events in the replica's outbox, up to the first end of a turn."""
    events: list[Any] = []
    cursor = 0
    deadline = time.monotonic() + EVENT_DEADLINE
    while time.monotonic() < deadline:
        batch = ask(core, wire.Poll(core.incarnation, cursor, 1.0), wire.Batch)
        for item in batch.items:
            cursor = item.seq
            if item.session_id == session_id:
                events.append(wire.decode_event(item.event))
                if isinstance(events[-1], ev.TERMINAL_EVENTS):
                    return events
    raise AssertionError(f"no end of a turn within {EVENT_DEADLINE} s: {events}")


def one_turn(core: ReplicaCore, workspace: Path) -> tuple[int, list[Any]]:
    """Open the session ``moved`` on ``core`` and run one turn: its number and its events."""
    ask(core, wire.OpenSession("moved", str(workspace)))
    turn = ask(core, wire.Deliver("moved", UserPrompt("hello")))
    return turn, events_until_end(core, "moved")


def test_a_turn_whose_events_a_replica_published_is_left_to_its_events_by_the_settlement(
    replicas: list[ReplicaCore], provider: FakeProvider, tmp_path: Path
) -> None:
    core = start(replicas, provider, tmp_path)
    turn, events = one_turn(core, tmp_path / "work")
    assert isinstance(events[-1], ev.TurnCompleted) and events[-1].turn == turn

    settled = ask(core, wire.Settle("moved", (turn,)), wire.Settled)
    # Its end is in the outbox after the turn's other events: reported here, it would overtake them.
    assert settled.outcomes == []
    assert settled.ended_here == [turn]
    assert not settled.running


def test_a_turn_that_ended_elsewhere_is_reported_by_the_settlement_from_the_store(
    replicas: list[ReplicaCore], provider: FakeProvider, tmp_path: Path
) -> None:
    turn, events = one_turn(start(replicas, provider, tmp_path), tmp_path / "work")
    end = events[-1]

    second = start(replicas, provider, tmp_path)
    ask(second, wire.ResumeSession("moved"))
    settled = ask(second, wire.Settle("moved", (turn,)), wire.Settled)
    assert settled.outcomes == [end]
    assert settled.ended_here == []
