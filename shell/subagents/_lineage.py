"""Where a session stands in its family (the root session a user opened and the children below it), and how
a child's profile shapes the session it runs as. Pure but for :func:`lineage_of`, which reads the store."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from tool_bridge import Tool, ToolRegistry

from ..config import GENERAL_PROFILE, MAX_AGENT_DEPTH, AgentProfile, Settings
from ..session import ChatStateOptions, SessionOptions
from ..store import SessionStore
from ._tool import AGENT_TOOL

__all__ = ["Lineage", "child_chat", "child_options", "child_tools", "lineage_of"]

logger = logging.getLogger("turnkeep.shell")


@dataclass(frozen=True, slots=True)
class Lineage:
    """A session's place in its family: the family's root session, its depth below it (0: the root) and,
    for a child, the profile it runs with."""

    family: str
    depth: int = 0
    profile: AgentProfile | None = None
    profile_name: str = ""


def lineage_of(store: SessionStore, session_id: str, settings: Settings) -> Lineage:
    """The stored session's lineage, from its parent links. A child whose profile is no longer configured
    runs with the built-in ``general`` one (and the log says so)."""
    record = store.get_session(session_id)
    if record.parent is None:
        return Lineage(session_id)
    name = record.parent.profile
    profile = settings.agents.profile(name)
    if profile is None:
        logger.warning(
            "session %s: its agent profile %r is not configured; it runs as general", session_id, name
        )
        profile = GENERAL_PROFILE
    family, depth = record.parent.session, 1
    while depth <= MAX_AGENT_DEPTH:
        above = store.get_session(family).parent
        if above is None:
            break
        family, depth = above.session, depth + 1
    return Lineage(family, depth, profile, name)


def child_options(options: SessionOptions, lineage: Lineage, settings: Settings) -> SessionOptions:
    """``options`` with the profile's model (priced as configured) and step limit."""
    profile = lineage.profile
    if profile is None:
        return options
    model = profile.model or options.model
    return dataclasses.replace(
        options,
        model=model,
        max_steps_per_turn=profile.max_steps or options.max_steps_per_turn,
        price=settings.pricing.get(model),
    )


def child_chat(chat: ChatStateOptions, lineage: Lineage) -> ChatStateOptions:
    """``chat`` with the profile's instructions as its system prompt."""
    profile = lineage.profile
    if profile is None or not profile.instructions:
        return chat
    return dataclasses.replace(chat, system_prompt=profile.instructions)


def child_tools(
    base: ToolRegistry, lineage: Lineage, agent: Tool[Any] | None
) -> tuple[ToolRegistry, frozenset[str] | None]:
    """The session's own tools, and the names of MCP tools it may be offered (None: all of them).

    A copy of ``base`` limited to the profile's allow list, with ``agent`` added when given (the caller
    gives it when the session's depth allows children) unless the allow list leaves it out.
    """
    profile = lineage.profile
    allowed = None if profile is None or profile.tools is None else frozenset(profile.tools)
    if allowed is None and agent is None:
        return base, None
    tools = [each for each in base if allowed is None or each.name in allowed]
    if agent is not None and (allowed is None or AGENT_TOOL in allowed) and AGENT_TOOL not in base:
        tools.append(agent)
    return ToolRegistry(tools, idempotency=base.idempotency_overrides), allowed
