"""Subagents: a session's model hands a task to a child session through the ``agent`` tool.

A child is a session of its own (its history, its events, its row in the store, linked to the parent
session, turn and call that run it), started in its parent's host; its one turn runs in its parent's turn
slot and takes its family's turns at the provider gate. :class:`Subagents` runs each call's child to exactly
one result within the limits of ``[agents]``; the rest of this package decides what a child is made of.
"""

from ._ids import child_session_id
from ._limits import ChildCounts, refusal
from ._lineage import Lineage, child_chat, child_options, child_tools, lineage_of
from ._outcome import ChildResult, result_of
from ._run import ChildStart, OpenChild, Subagents
from ._tool import AGENT_TOOL, AgentArgs, ParentSide, agent_tool

__all__ = [
    "AGENT_TOOL",
    "AgentArgs",
    "ChildCounts",
    "ChildResult",
    "ChildStart",
    "Lineage",
    "OpenChild",
    "ParentSide",
    "Subagents",
    "agent_tool",
    "child_chat",
    "child_options",
    "child_session_id",
    "child_tools",
    "lineage_of",
    "refusal",
    "result_of",
]
