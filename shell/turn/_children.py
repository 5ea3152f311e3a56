"""The child sessions a turn's ``agent`` calls run, as the turn keeps account of them: which began and have
not ended (each gets one ``SubagentFinished``, at the latest when the turn ends) and what each consumed."""

from __future__ import annotations

from .. import events as ev
from ..messages import SubagentBegan, SubagentEnded
from ..usage import ChildUsage

__all__ = ["Children"]


class Children:
    """The children of one turn. Pure: each method returns the events to emit."""

    def __init__(self, session_id: str, turn: int) -> None:
        self._session_id = session_id
        self._turn = turn
        self._open: dict[str, SubagentBegan] = {}
        self._ended: set[str] = set()
        self.usage: list[ChildUsage] = []
        """The usage of each child that ended, in the order they ended."""

    def began(self, message: SubagentBegan) -> list[ev.SubagentStarted]:
        """A child runs: its ``SubagentStarted`` (none for a call seen before, or for another turn)."""
        call_id = message.call_id
        if message.turn != self._turn or call_id in self._open or call_id in self._ended:
            return []
        self._open[call_id] = message
        return [
            ev.SubagentStarted(
                self._session_id,
                self._turn,
                call_id,
                message.child,
                message.profile,
                message.description,
                message.reattached,
            )
        ]

    def ended(self, message: SubagentEnded) -> list[ev.SubagentFinished]:
        """A child ended: its ``SubagentFinished`` (none for a call that did not begin, or ended already)."""
        call_id = message.call_id
        if message.turn != self._turn or self._open.pop(call_id, None) is None:
            return []
        self._ended.add(call_id)
        usage = message.usage
        tokens = usage.steps + usage.compaction
        self.usage.append(
            ChildUsage(
                call_id=call_id,
                child=message.child,
                profile=message.profile,
                model=usage.model,
                tokens=tokens,
                cost=usage.cost,
            )
        )
        return [
            ev.SubagentFinished(
                self._session_id,
                self._turn,
                call_id,
                message.child,
                message.profile,
                message.outcome,
                message.message,
                usage,
            )
        ]

    def left_open(self, why: str) -> list[ev.SubagentFinished]:
        """The turn ends: a ``SubagentFinished`` ``cancelled`` for each child still open (its own stream
        holds how it ended), so that every ``SubagentStarted`` of the turn has its one end."""
        events = [
            ev.SubagentFinished(
                self._session_id, self._turn, call_id, began.child, began.profile, "cancelled", why
            )
            for call_id, began in self._open.items()
        ]
        self._ended.update(self._open)
        self._open.clear()
        return events
