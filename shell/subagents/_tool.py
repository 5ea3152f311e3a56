"""The ``agent`` tool: what the model is offered, and the session it is offered to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from tool_bridge import Idempotency, Tool, ToolContext, ToolKind

from ..config import AgentsSettings

if TYPE_CHECKING:
    from ._run import Subagents

__all__ = ["AGENT_TOOL", "AgentArgs", "ParentSide", "agent_tool"]

AGENT_TOOL = "agent"
"""The name the model calls the tool by."""

_SLACK = 30.0
"""Seconds past the longest deadline and the cancel that follows it before the tool bridge gives up on a
call (the call ends itself well before: this only bounds a call that cannot)."""


class AgentArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The arguments of an ``agent`` call."""

    description: Annotated[
        str, msgspec.Meta(min_length=1, description="A short (3 to 5 words) label of the task.")
    ]
    prompt: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            description="The task, complete: the subagent sees nothing of this conversation but this text.",
        ),
    ]
    agent: Annotated[str, msgspec.Meta(description="The profile of the subagent to run.")] = "general"


@dataclass(frozen=True, slots=True)
class ParentSide:
    """The session an ``agent`` tool belongs to, as its calls need it."""

    session_id: str
    depth: int
    """0 for a session opened by a user, its parent's depth + 1 for a child."""
    turn: Callable[[], int]
    """The number of the turn in flight (the one whose call is running)."""
    tell: Callable[[Any], None]
    """Tells the session a message (the news of its children)."""


def agent_tool(subagents: Subagents, parent: ParentSide, settings: AgentsSettings, grace: float) -> Tool[Any]:
    """The ``agent`` tool of ``parent``: each call runs a child session with the profile it names (see
    :class:`~shell.subagents.Subagents`) and returns the child's answer, or one ``is_error`` result saying
    why there is none. Calls of one step run side by side; a call run again takes up the same child
    (its class is ``idempotent``)."""
    names = settings.profile_names()
    listed = "\n".join(f"- {name}: {_described(settings, name)}" for name in names)
    deadline = max((settings.profile(name) or settings.profiles[name]).deadline for name in names)

    async def run(args: AgentArgs, context: ToolContext) -> str:
        return await subagents.run(parent, args, context)

    return Tool(
        name=AGENT_TOOL,
        description=(
            "Hand a self-contained task to a subagent: a new session with its own conversation, which "
            "works on the task alone and answers once. Its final answer is this call's result. Several "
            "calls in one step run at the same time. Profiles:\n" + listed
        ),
        args_type=AgentArgs,
        fn=run,
        kind=ToolKind.ASYNC,
        parallel_safe=True,
        timeout=deadline + grace + _SLACK,
        idempotency=Idempotency.IDEMPOTENT,
    )


def _described(settings: AgentsSettings, name: str) -> str:
    profile = settings.profile(name)
    return (profile.description if profile is not None else "") or "no description"
