"""``[agents]``: whether a session's model may hand tasks to child sessions (the ``agent`` tool), the limits
on them, and the ``[agents.NAME]`` profiles a child runs with."""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from ._checks import is_int, is_number

__all__ = ["GENERAL_PROFILE", "MAX_AGENT_DEPTH", "AgentProfile", "AgentsSettings"]

MAX_AGENT_DEPTH = 3
"""The deepest a family of sessions may go: a root session's children are at depth 1."""

_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LIMITS = ("max_depth", "max_children_at_once", "max_children_per_turn", "max_children_per_host")


class AgentProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[agents.NAME]``: how a child session of this profile runs.

    ``model`` (default: the parent's), ``instructions`` (its system prompt), ``tools`` (an allow list of the
    tools it is offered; default: its parent's, less ``agent`` unless its depth allows more children),
    ``max_steps`` (model calls its turn may make; default ``loop_control.max_steps_per_turn``), ``deadline``
    (wall-clock seconds before it is cancelled) and ``workspace`` (``"shared"``: its parent's).
    ``description`` tells the parent's model what the profile is for.
    """

    description: str = ""
    model: str | None = None
    instructions: str = ""
    tools: tuple[str, ...] | None = None
    max_steps: int | None = None
    deadline: float = 600.0
    workspace: Literal["shared"] = "shared"

    def problems(self) -> list[tuple[str, str]]:
        """(key, problem) for each value out of range; empty when the profile is valid."""
        found: list[tuple[str, str]] = []
        if self.model is not None and not self.model.strip():
            found.append(("model", "must be a model name, got an empty one"))
        if self.tools is not None and not all(isinstance(name, str) and name for name in self.tools):
            found.append(("tools", f"must be a list of non-empty names, got {self.tools!r}"))
        if self.max_steps is not None and (not is_int(self.max_steps) or self.max_steps < 1):
            found.append(("max_steps", f"must be a whole number >= 1, got {self.max_steps!r}"))
        if not is_number(self.deadline) or self.deadline <= 0:
            found.append(("deadline", f"must be a number > 0, got {self.deadline!r}"))
        return found


GENERAL_PROFILE = AgentProfile(
    description="A general-purpose agent with its parent's tools, for a self-contained task."
)
"""The built-in ``general`` profile, used unless ``[agents.general]`` replaces it."""


class AgentsSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[agents]``: the ``agent`` tool and the child sessions it runs.

    The tool is offered when ``enabled`` and the session's depth is below ``max_depth`` (1: a root session
    may have children, they may not). A call is refused (an ``is_error`` result) past
    ``max_children_at_once`` running for one parent turn, ``max_children_per_turn`` started by one parent
    turn, or ``max_children_per_host`` running in the host. ``profiles`` are the ``[agents.NAME]``
    tables; ``general`` always exists.
    """

    enabled: bool = True
    max_depth: int = 1
    max_children_at_once: int = 4
    max_children_per_turn: int = 16
    max_children_per_host: int = 32
    profiles: dict[str, AgentProfile] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in _LIMITS:
            value = getattr(self, key)
            if not is_int(value) or value < 1:
                raise ValueError(f"agents.{key}: must be a whole number >= 1, got {value!r}")
        if self.max_depth > MAX_AGENT_DEPTH:
            raise ValueError(f"agents.max_depth: must be at most {MAX_AGENT_DEPTH}, got {self.max_depth}")
        for name, profile in self.profiles.items():
            if not _PROFILE_NAME.fullmatch(name):
                raise ValueError(
                    f"agents.profiles: {name!r} is not a profile name (letters, digits, '_' and '-', 1 to 64)"
                )
            for key, problem in profile.problems():
                raise ValueError(f"agents.{name}.{key}: {problem}")

    def profile(self, name: str) -> AgentProfile | None:
        """The profile called ``name`` (``general`` is built in unless configured), or None."""
        found = self.profiles.get(name)
        if found is None and name == "general":
            return GENERAL_PROFILE
        return found

    def profile_names(self) -> list[str]:
        """Every profile a call may name: ``general`` first, then the configured ones in file order."""
        return ["general", *(name for name in self.profiles if name != "general")]

    def may_spawn(self, depth: int) -> bool:
        """Whether a session at ``depth`` (0 for a root session) is offered the ``agent`` tool."""
        return self.enabled and depth < self.max_depth
