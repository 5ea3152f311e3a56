"""The host's supervision view: its actor tree with restart counts, and the recent dead letters."""

from __future__ import annotations

from actors import ActorError, ChildInfo, WhichChildren
from sampler.gate import GateSnapshot, GetGateStatus
from tool_bridge.mcp import McpServerState

from ..host import AgentHost
from ._api import ActorNode, DeadLetterView, GateView, McpServerView, Supervision

__all__ = ["supervision"]

_RECENT = 20
_ASK_TIMEOUT = 2.0
_CLIP = 200


def _children(host: AgentHost, address: str) -> tuple[ChildInfo, ...]:
    try:
        found: tuple[ChildInfo, ...] = host.system.address(address).ask(WhichChildren(), timeout=_ASK_TIMEOUT)
    except ActorError:
        return ()
    return found


def _is_session(info: ChildInfo) -> bool:
    return info.name.startswith("session/")


def _node(info: ChildInfo, children: list[ActorNode]) -> ActorNode:
    return ActorNode(info.name, info.address, info.status, max(0, info.incarnation - 1), children)


def _gate(host: AgentHost) -> GateView | None:
    if host.provider_gate is None:
        return None
    try:
        snapshot: GateSnapshot = host.provider_gate.ask(GetGateStatus(), timeout=_ASK_TIMEOUT)
    except ActorError:
        return None
    waiting = {str(priority): count for priority, count in sorted(snapshot.waiting.items())}
    remaining = (snapshot.requests_remaining, snapshot.tokens_remaining)
    return GateView(snapshot.in_flight, waiting, snapshot.cool_down, *remaining)


def _mcp(state: McpServerState) -> McpServerView:
    error = state.last_error.splitlines()[0][:_CLIP] if state.last_error and state.status != "ready" else ""
    return McpServerView(state.name, str(state.status), state.tools, state.restarts, error)


def supervision(host: AgentHost) -> Supervision:
    """The host supervisor's children (one subtree per running session) and their children, each with
    how often it was restarted, the dead letters and the turn gate; blocking (asks the supervisors, each
    within a deadline)."""
    tree: list[ActorNode] = []
    for child in _children(host, host.supervisor.name):
        # Only session subtrees are supervisors; asking any other actor would leave a dead letter.
        inner = [_node(c, []) for c in _children(host, child.address)] if _is_session(child) else []
        tree.append(_node(child, inner))
    states = [handle.state() for handle in host.mcp_servers()]
    counters = host.system.metrics()
    recent = host.system.dead_letters.recent()[-_RECENT:]
    letters = [
        DeadLetterView(d.address, repr(d.message)[:_CLIP], d.reason[:_CLIP], d.at) for d in reversed(recent)
    ]
    return Supervision(
        tree,
        counters.get("restarts", 0),
        counters.get("crashes", 0),
        counters["dead_letters"],
        letters,
        host.gate.running,
        host.gate.waiting,
        host.describe_gate(),
        [state.describe() for state in states],
        _gate(host),
        [_mcp(state) for state in states],
    )
