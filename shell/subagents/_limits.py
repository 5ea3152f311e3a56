"""Whether one more child may start: the limits of ``[agents]`` as a pure decision."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import AgentsSettings

__all__ = ["ChildCounts", "refusal"]


@dataclass(frozen=True, slots=True)
class ChildCounts:
    """The children that count against the limits when a call asks for one more."""

    depth: int
    """The depth of the calling session (0: a root session)."""
    running_in_turn: int
    """Children of the calling turn running now."""
    started_in_turn: int
    """Children the calling turn has started so far (running or ended)."""
    running_in_host: int
    """Children running in the host, of every session."""


def refusal(counts: ChildCounts, limits: AgentsSettings, *, new: bool) -> str | None:
    """Why one more child may not run (the ``is_error`` result the model reads), or None when it may.
    ``new`` is false for a call that takes up its existing child again, which the total per turn
    already counted."""
    if not limits.enabled:
        return "subagent refused: subagents are switched off ([agents] enabled = false)"
    if counts.depth >= limits.max_depth:
        return (
            f"subagent refused: this session is at depth {counts.depth} and agents.max_depth is "
            f"{limits.max_depth}, so it may not start children; do the task yourself"
        )
    if counts.running_in_turn >= limits.max_children_at_once:
        return (
            f"subagent refused: {counts.running_in_turn} children of this turn are running, the most "
            f"allowed at once (agents.max_children_at_once); call again once one has finished"
        )
    if new and counts.started_in_turn >= limits.max_children_per_turn:
        return (
            f"subagent refused: this turn has started {counts.started_in_turn} children, the most allowed "
            f"per turn (agents.max_children_per_turn); do the rest yourself"
        )
    if counts.running_in_host >= limits.max_children_per_host:
        return (
            f"subagent refused: {counts.running_in_host} children are running in this host, the most "
            f"allowed (agents.max_children_per_host); call again later"
        )
    return None
