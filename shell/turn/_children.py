"""The child sessions a turn's ``agent`` calls run, as the turn keeps account of them: which began and have
not ended (each gets one ``SubagentFinished``, at the latest when the turn ends) and what each consumed."""

from __future__ import annotations

from .. import events as ev
from ..usage import ChildUsage

__all__ = ["Children"]


class Children:
    """The children of one turn, told by its ``agent`` calls. Pure: each method returns the events the
    turn records."""

    def __init__(self, turn: int) -> None:
        self._turn = turn
        self._open: dict[str, ev.SubagentStarted] = {}
        self._ended: set[str] = set()
        self.usage: list[ChildUsage] = []
        """The usage of each child that ended, in the order they ended."""

    def began(self, event: ev.SubagentStarted) -> list[ev.SubagentStarted]:
        """A child runs: ``event`` to record (none for a call seen before, or for another turn)."""
        call_id = event.call_id
        if event.turn != self._turn or call_id in self._open or call_id in self._ended:
            return []
        self._open[call_id] = event
        return [event]

    def ended(self, event: ev.SubagentFinished) -> list[ev.SubagentFinished]:
        """A child ended: ``event`` to record (none for a call that did not begin, or ended already)."""
        call_id = event.call_id
        if event.turn != self._turn or self._open.pop(call_id, None) is None:
            return []
        self._ended.add(call_id)
        usage = event.usage
        self.usage.append(
            ChildUsage(
                call_id=call_id,
                child=event.child,
                profile=event.profile,
                model=usage.model,
                tokens=usage.steps + usage.compaction,
                cost=usage.cost,
            )
        )
        return [event]

    def left_open(self, why: str) -> list[ev.SubagentFinished]:
        """The turn ends: a ``SubagentFinished`` ``cancelled`` for each child still open (its own stream
        holds how it ended), so that every ``SubagentStarted`` of the turn has its one end."""
        events = [
            ev.SubagentFinished(
                began.session, self._turn, call_id, began.child, began.profile, "cancelled", why
            )
            for call_id, began in self._open.items()
        ]
        self._ended.update(self._open)
        self._open.clear()
        return events
