"""The garbage collector in a host: what is alive when a session starts is frozen out of the collector's
passes, a full collection runs when sessions stopped or the frozen objects doubled, and the collector is
as it was once the last host has stopped."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from sampler.fake import FakeProvider, Script
from shell import _collector
from shell import events as ev
from shell.credentials import StaticKey
from shell.facade import Host
from tests.shell._settings import settings_for

KEY = StaticKey(env_var="K", environ={"K": "sk-collector-test-1234"})


@pytest.fixture
def untuned() -> Iterator[tuple[int, int, int]]:
    """The collector as the test found it, checked to be so again afterwards."""
    before = gc.get_threshold()
    gc.unfreeze()
    yield before
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    ("stopped", "live", "frozen", "after_last", "due"),
    [
        (0, 400, 190_000, 180_000, False),  # sessions running, the heap steady: never a full pass
        (31, 10, 0, 0, False),  # fewer than 32 stopped
        (32, 10, 0, 0, True),
        (99, 400, 0, 0, False),  # a quarter of the live sessions is the bar once it is above 32
        (100, 400, 0, 0, True),
        (0, 10, 100_001, 0, True),  # the frozen objects doubled past the 50,000 floor
        (0, 10, 100_000, 0, False),
        (0, 10, 360_001, 180_000, True),
        (0, 10, 360_000, 180_000, False),
    ],
)
def test_a_full_collection_is_due_when_sessions_stopped_or_the_frozen_objects_doubled(
    stopped: int, live: int, frozen: int, after_last: int, due: bool
) -> None:
    assert _collector.full_collection_due(stopped, live, frozen, after_last) is due


def test_holding_tunes_the_collector_and_the_last_release_restores_it(untuned: tuple[int, int, int]) -> None:
    _collector.hold()
    _collector.hold()  # a second host in the same process
    try:
        assert gc.get_threshold()[0] == max(_collector.YOUNG_THRESHOLD, untuned[0])
        assert gc.get_threshold()[1:] == untuned[1:]
        _collector.session_started()
        assert gc.get_freeze_count() > 0
        _collector.release()
        assert gc.get_threshold()[0] == max(_collector.YOUNG_THRESHOLD, untuned[0])  # one host still holds
        assert gc.get_freeze_count() > 0
    finally:
        _collector.release()
    assert gc.get_threshold() == untuned
    assert gc.get_freeze_count() == 0
    _collector.release()  # more releases than holds change nothing
    assert gc.get_threshold() == untuned


def test_sessions_started_without_a_holder_freeze_nothing(untuned: tuple[int, int, int]) -> None:
    _collector.session_started()
    _collector.session_stopped()
    assert gc.get_freeze_count() == 0


def test_garbage_left_by_stopped_sessions_is_collected_after_enough_of_them_stopped(
    untuned: tuple[int, int, int],
) -> None:
    class Cyclic:
        def __init__(self) -> None:
            self.me = self

    _collector.hold()
    try:
        garbage = Cyclic()
        dead = weakref.ref(garbage)
        _collector.session_started()  # the cycle is frozen with everything alive
        del garbage
        gc.collect()
        assert dead() is not None  # no pass of the collector's own reaches what is frozen
        for _ in range(31):
            _collector.session_stopped()
        assert dead() is not None
        _collector.session_stopped()  # the 32nd: a full collection, frozen objects included
        assert dead() is None
    finally:
        _collector.release()


def test_a_host_holds_the_collector_while_it_runs_unless_told_not_to(
    tmp_path: Path, untuned: tuple[int, int, int]
) -> None:
    with FakeProvider(Script.echo()) as provider:
        with Host(settings_for(provider, tmp_path), credentials=KEY) as host:
            assert isinstance(host.open(tmp_path / "ws").run("hello"), ev.TurnCompleted)
            assert gc.get_threshold()[0] == max(_collector.YOUNG_THRESHOLD, untuned[0])
            assert gc.get_freeze_count() > 0  # its session's start froze what was alive
        assert gc.get_threshold() == untuned
        settings = settings_for(provider, tmp_path / "off", TURNKEEP_HOST__COLLECTOR="false")
        with Host(settings, credentials=KEY) as host:
            assert isinstance(host.open(tmp_path / "ws2").run("hello"), ev.TurnCompleted)
            assert gc.get_threshold() == untuned
            assert gc.get_freeze_count() == 0
