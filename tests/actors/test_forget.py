"""``ActorSystem.forget``: a long-running system need not keep an address for every actor that ever ended.
Addresses at and below a name where nothing runs, waits or is watched, and no activator is set, are dropped;
a name asked for again is a fresh, unbound address; the others are kept as they are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Actor, ActorSystem, ChildSpec, Restart, StopChild, Supervisor
from tests._waiting import wait_until


class Idle(Actor):
    """Does nothing but live."""


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    with ActorSystem() as made:
        yield made


def _names(system: ActorSystem) -> set[str]:
    return set(system._debug_state())


def test_a_stopped_subtree_is_dropped_with_everything_below_it_and_nothing_beside_it(
    system: ActorSystem,
) -> None:
    tree = system.spawn(ChildSpec("tree", lambda: Supervisor([ChildSpec("leaf", Idle)])))
    beside = system.spawn(ChildSpec("tree-2", Idle))
    assert {"tree", "tree/leaf", "tree-2"} <= _names(system)
    assert system.forget("tree") == 0  # still running
    assert system.root.ask(StopChild("tree"))
    assert system.forget("tree") == 2
    assert "tree" not in _names(system) and "tree/leaf" not in _names(system)
    assert beside.alive and "tree-2" in _names(system)
    fresh = system.address("tree/leaf")
    assert fresh is not tree and fresh.status == "unbound"
    tree.tell("late")  # a dropped address still held works: its messages are dead letters
    assert wait_until(lambda: any(letter.address == "tree" for letter in system.dead_letters.recent()), 5)


def test_a_watched_address_or_one_with_an_activator_is_kept(system: ActorSystem) -> None:
    watcher = system.spawn(ChildSpec("watcher", Idle))
    watched = system.spawn(ChildSpec("watched", Idle, restart=Restart.TEMPORARY))
    activated = system.spawn(ChildSpec("activated", Idle, restart=Restart.TEMPORARY))
    system.watch(watched, watcher)
    activated.set_activator(lambda _: None)
    for name in ("watched", "activated"):
        assert system.root.ask(StopChild(name))
    assert system.forget("watched") == 0 and system.forget("activated") == 0
    system.unwatch(watched, watcher)
    activated.set_activator(None)
    assert system.forget("watched") == 1 and system.forget("activated") == 1


def test_a_name_no_actor_ever_had_is_dropped_and_an_unknown_name_drops_nothing(system: ActorSystem) -> None:
    system.address("never/started")
    assert system.forget("never") == 1
    assert system.forget("nobody") == 0
