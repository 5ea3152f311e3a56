"""The supervised subtree of one session: chat state, sampler, tools and the turn loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from actors import ChaosPolicy, ChildSpec, RestartIntensity, Strategy, Supervisor
from sampler import SamplerActor, SamplerRuntime, SamplerSettings, ToolSpec
from sampler.gate import GateClient
from tool_bridge import PermissionPolicy, ToolBridgeSettings, ToolRegistry, ToolSupervisor

from .._secrets import redact_known
from ..credentials import CredentialProvider
from ..doom_loop import DoomLoopDetector
from ..store import SessionStore
from ._actor import SessionActor
from ._chat_state import ChatStateActor, ChatStateOptions
from ._state import SessionOptions, SessionRuntime
from ._tokens import TokenEstimator
from ._turn_gate import TurnGate

__all__ = ["SessionChaos", "SessionParts", "session_runtime", "session_spec", "tool_specs"]


@dataclass(frozen=True, slots=True)
class SessionChaos:
    """Fault injection per actor of a session subtree (for chaos runs)."""

    session: ChaosPolicy | None = None
    chat_state: ChaosPolicy | None = None
    sampler: ChaosPolicy | None = None
    tools: ChaosPolicy | None = None
    provider_gate: ChaosPolicy | None = None
    """The host's provider gate, shared by the sessions: a host given this chaos crashes it too."""
    mcp: ChaosPolicy | None = None
    """Crashes the MCP server actors (host and session scope alike)."""
    children: Mapping[str, SessionChaos] = field(default_factory=dict)
    """The fault injection of child sessions by their agent profile (one not named here gets this one)."""


@dataclass(frozen=True)
class SessionParts:
    """Everything a session subtree is made of."""

    options: SessionOptions
    chat: ChatStateOptions
    sampler: SamplerSettings
    store: SessionStore
    workspace: Path
    credentials: CredentialProvider
    registry: ToolRegistry
    policy: PermissionPolicy
    tools: ToolBridgeSettings = field(default_factory=ToolBridgeSettings)
    doom_loop: DoomLoopDetector = field(default_factory=DoomLoopDetector)
    chaos: SessionChaos = field(default_factory=SessionChaos)
    gate: GateClient | None = None
    """The session's way through the host's provider gate (None: requests go straight out)."""
    redact_tool_output: Callable[[str], str] | None = redact_known
    """Applied to every tool result and echoed tool argument before the session sees it: by default the
    process's known secrets are replaced by their markers."""
    mcp: ChildSpec | None = None
    """The supervisor of the session's own MCP servers (``scope = "session"``), started before its tools."""
    intensity: RestartIntensity = field(default_factory=lambda: RestartIntensity(30, 5.0))
    """A session's actors restart cheaply (state lives in the store and outside the actors), so a burst of
    crashes is ridden out; beyond it the subtree restarts as a whole under the host."""


_SESSION_STOP_TIMEOUT = 15.0
"""The SessionActor may be in the middle of an ask to a history that is restarting (up to its restart
wait) when its stop arrives; then it ends its turn."""


def tool_specs(registry: ToolRegistry) -> tuple[ToolSpec, ...]:
    """The tools of ``registry`` as the model is offered them, in registration order."""
    tools = [registry.get(name) for name in registry.names()]
    # The tools' own schemas, not copies: a ToolSpec is frozen and nothing changes what it holds.
    return tuple(ToolSpec(t.name, t.description, t.parameters) for t in tools if t is not None)


def session_runtime(
    parts: SessionParts, gate: TurnGate | None = None, specs: tuple[ToolSpec, ...] | None = None
) -> SessionRuntime:
    """The turn loop's state for a session made of ``parts``: subscribers, the turn in flight, waiting
    prompts. It outlives the SessionActor's incarnations (and, in a host, passivation). ``specs`` are
    ``tool_specs(parts.registry)``, given when the caller shares them between sessions."""
    specs = tool_specs(parts.registry) if specs is None else specs
    runtime = SessionRuntime(parts.options, parts.credentials, specs, parts.doom_loop, gate=gate)
    runtime.idempotency_of = parts.registry.idempotency_of
    return runtime


def session_spec(name: str, parts: SessionParts, runtime: SessionRuntime | None = None) -> ChildSpec:
    """A child spec for the session's supervisor (``one_for_one``): ChatStateActor, SamplerActor,
    ToolSupervisor and SessionActor, started in that order. State that must survive a child's restart
    (the sampler's request in flight, the turn in flight, subscribers) lives outside the actors."""
    estimator = TokenEstimator()
    sampler_runtime = SamplerRuntime(parts.sampler, api_key=parts.credentials.current, gate=parts.gate)
    session_runtime_ = runtime or session_runtime(parts)
    session_runtime_.sampler = sampler_runtime
    chaos = parts.chaos
    children = [
        ChildSpec(
            "chat_state",
            lambda: ChatStateActor(parts.store, parts.chat, estimator),
            chaos=chaos.chat_state,
            shares_strand=True,
        ),
        ChildSpec("sampler", lambda: SamplerActor(sampler_runtime), chaos=chaos.sampler, shares_strand=True),
        *([parts.mcp] if parts.mcp is not None else []),
        ChildSpec(
            "tools",
            lambda: ToolSupervisor(
                parts.registry,
                parts.policy,
                parts.workspace,
                settings=parts.tools,
                chaos_for_tools=chaos.tools,
                redact=parts.redact_tool_output,
            ),
            shutdown_timeout=parts.tools.kill_after + 5.0,
            shares_strand=True,
        ),
        ChildSpec(
            "session",
            lambda: SessionActor(session_runtime_),
            chaos=chaos.session,
            shutdown_timeout=_SESSION_STOP_TIMEOUT,
            shares_strand=True,
        ),
    ]

    def subtree() -> Supervisor:
        session_runtime_.generation += 1
        return Supervisor(children, strategy=Strategy.ONE_FOR_ONE, intensity=parts.intensity)

    return ChildSpec(name, subtree, shutdown_timeout=parts.tools.kill_after + 15.0)
