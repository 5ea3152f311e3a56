"""The invariants of families (sessions whose ``agent`` calls ran children), checked in the store after a
chaos run: every child call ends exactly once, no child outlives its parent's turn, nothing of a child is
left open."""

from __future__ import annotations

import collections
from collections.abc import Iterable

import msgspec

from .. import events as ev
from ..store import SessionRecord, SessionStore, StoredEvent

__all__ = ["family_violations"]

_ENDS = frozenset(cls.__name__ for cls in ev.TERMINAL_EVENTS)


def family_violations(store: SessionStore, session_ids: Iterable[str], *, outlive: float) -> list[str]:
    """What is wrong with the families of ``session_ids`` (each a root session): each child ran at most
    one turn, and a turn it ran has one end, stored at most ``outlive`` seconds after its parent's turn
    ended (the abort grace and kill time of the child's tools, and slack); the child is closed; and in the
    parent's log every ``SubagentStarted`` of a call has exactly one ``SubagentFinished``, in the same
    turn."""
    problems: list[str] = []
    pending = list(session_ids)
    while pending:
        parent = pending.pop()
        children = store.children(parent)
        if not children:
            continue
        events = store.load_events(parent)
        problems += [f"{parent}: {p}" for p in _pairing(events)]
        ends = {e.turn: e.created_at for e in events if e.type in _ENDS}
        for child in children:
            found = _child(store, child, ends, outlive)
            problems += [f"{child.id} (child of {parent}): {p}" for p in found]
            pending.append(child.id)
    return problems


def _pairing(events: list[StoredEvent]) -> list[str]:
    started: collections.Counter[tuple[int, str]] = collections.Counter()
    finished: collections.Counter[tuple[int, str]] = collections.Counter()
    for stored in events:
        if stored.type == "SubagentStarted":
            started[stored.turn, msgspec.json.decode(stored.body, type=ev.SubagentStarted).call_id] += 1
        elif stored.type == "SubagentFinished":
            finished[stored.turn, msgspec.json.decode(stored.body, type=ev.SubagentFinished).call_id] += 1
    problems = []
    for key in sorted(started.keys() | finished.keys()):
        if (started[key], finished[key]) != (1, 1):
            turn, call = key
            problems.append(
                f"turn {turn}, call {call}: {started[key]} subagent_started and {finished[key]} "
                "subagent_finished, not one each"
            )
    return problems


def _child(
    store: SessionStore, child: SessionRecord, parent_ends: dict[int, float], outlive: float
) -> list[str]:
    problems = []
    events = store.load_events(child.id)
    ends = [e for e in events if e.type in _ENDS]
    if child.current_turn > 1 or any(e.turn != 1 for e in events):
        problems.append(f"it ran {child.current_turn} turns, not one")
    # A child whose prompt was never taken (its call was cancelled first, or it could not be started) has
    # no turn; one that took it has one end.
    if len(ends) != (1 if child.current_turn else 0):
        problems.append(f"its turn {child.current_turn} has {len(ends)} ends")
    if child.status != "closed":
        problems.append(f"it is {child.status}, not closed")
    link = child.parent
    parent_end = None if link is None else parent_ends.get(link.turn)
    if ends and parent_end is not None and ends[0].created_at > parent_end + outlive:
        late = ends[0].created_at - parent_end
        problems.append(f"it ended {late:.1f} s after its parent's turn did")
    return problems
