"""The API's JSON shapes (request bodies, answers) and its error: what clients send and get back."""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

__all__ = [
    "SESSION_ID",
    "ActorNode",
    "ApiError",
    "CancelAnswer",
    "CreateSession",
    "DeadLetterView",
    "ErrorBody",
    "ForkBody",
    "ForkOrigin",
    "GateView",
    "Health",
    "HistoryMessage",
    "HistoryView",
    "McpServerView",
    "ParentOrigin",
    "PendingPermission",
    "PermissionAnswer",
    "PermissionTaken",
    "PromptBody",
    "RewindBody",
    "SessionList",
    "SessionView",
    "Supervision",
    "TurnAccepted",
]

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""What a client-chosen session id may look like."""


class ApiError(Exception):
    """A request the API refuses: ``status`` is the HTTP status, ``kind`` a stable name clients can test
    (``malformed_json``, ``invalid_body``, ``body_too_large``, ``unauthorized``, ``not_found``,
    ``session_closed``, ``session_archived``, ``session_exists``, ``stale_permission``,
    ``workspace_refused``, ``invalid_cursor``, ``invalid_turn``, ``turn_running``; 503 ``host_error`` or
    ``unavailable`` when the host or its store cannot do it now; 500 ``internal``), ``message`` what was
    wrong, for a person."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


class _Body(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A request body: unknown fields are refused, not ignored."""


class CreateSession(_Body, frozen=True):
    """``POST /v1/sessions``: a new session in ``workspace`` (under the workspace root; created when
    missing), with ``id`` when the client chooses it."""

    workspace: str
    id: str | None = None
    priority: Literal["interactive", "background"] = "interactive"
    """The session's place at the provider gate: interactive requests go first."""


class ForkBody(_Body, frozen=True):
    """``POST /v1/sessions/{id}/fork``: a new session with the source's history at the end of turn
    ``at_turn`` (null: its last converged turn), in ``workspace`` (under the workspace root; null: the
    source's), with ``id`` when the client chooses it."""

    at_turn: int | None = None
    workspace: str | None = None
    id: str | None = None


class RewindBody(_Body, frozen=True):
    """``POST /v1/sessions/{id}/rewind``: a fork at the end of turn ``to_turn``, the source archived."""

    to_turn: int
    workspace: str | None = None
    id: str | None = None


class PromptBody(_Body, frozen=True):
    """``POST /v1/sessions/{id}/prompts``: the text that starts (or queues) a turn."""

    text: str


class PermissionAnswer(_Body, frozen=True):
    """``POST /v1/sessions/{id}/permissions/{request_id}``: the answer to a waiting permission request."""

    decision: Literal["allow_once", "allow_always", "deny"]
    reason: str = ""
    pattern: str | None = None


class ErrorBody(msgspec.Struct, frozen=True):
    """Every 4xx and 5xx answer of the API."""

    kind: str
    message: str


class PendingPermission(msgspec.Struct, frozen=True):
    """A tool call waiting for a permission answer; ``request_id`` is the call's id."""

    request_id: str
    tool: str
    arguments: str
    reason: str


class SessionUsage(msgspec.Struct, frozen=True):
    """The tokens a session's ended turns consumed, their compactions' summaries included, as the provider
    reported them; ``cost`` when the model has a price in ``[pricing]``."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost: float | None


class ForkOrigin(msgspec.Struct, frozen=True):
    """The session a fork was copied from, and the turn whose end it was taken at."""

    session: str
    turn: int


class ParentOrigin(msgspec.Struct, frozen=True):
    """The session, turn and ``agent`` tool call whose child a session is, and the profile it runs."""

    session: str
    turn: int
    call: str
    profile: str


class SessionView(msgspec.Struct, frozen=True):
    """A session as the store and the host know it. ``turns`` is the last turn begun; ``active`` says
    whether its actors run now (not passivated); ``usage`` sums its ended turns (null before the first);
    ``forked_from`` names its parent when it is a fork (null otherwise); ``parent`` the call that runs it
    when it is a subagent's session (null otherwise), and ``children`` the ids of the sessions its own
    ``agent`` calls ran, oldest first (their streams are read like any session's)."""

    id: str
    workspace: str
    model: str
    status: str
    turns: int
    active: bool
    created_at: float
    updated_at: float
    learned_window: int | None
    pending_permissions: list[PendingPermission]
    usage: SessionUsage | None = None
    forked_from: ForkOrigin | None = None
    parent: ParentOrigin | None = None
    children: list[str] = msgspec.field(default_factory=list)


class SessionList(msgspec.Struct, frozen=True):
    """``GET /v1/sessions``."""

    sessions: list[SessionView]


class TurnAccepted(msgspec.Struct, frozen=True):
    """``202``: the prompt was accepted as turn ``turn`` (it runs in the host, or waits its turn)."""

    turn: int


class CancelAnswer(msgspec.Struct, frozen=True):
    """Whether a running turn took the cancel (false: none was running)."""

    cancelled: bool


class PermissionTaken(msgspec.Struct, frozen=True):
    """The answer was handed to the waiting tool call."""

    request_id: str
    decision: str


class HistoryMessage(msgspec.Struct, frozen=True):
    """One stored message; ``replaced_by`` names the summary that replaced it in what the model sees."""

    seq: int
    turn: int
    message: Any
    replaced_by: int | None
    is_summary: bool


class HistoryView(msgspec.Struct, frozen=True):
    """``GET /v1/sessions/{id}/history``: every stored message, in order."""

    messages: list[HistoryMessage]


class Health(msgspec.Struct, frozen=True):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


class ActorNode(msgspec.Struct, frozen=True):
    """One actor of the host's tree; ``restarts`` counts its incarnations after the first."""

    name: str
    address: str
    status: str
    restarts: int
    children: list[ActorNode] = msgspec.field(default_factory=list)


class DeadLetterView(msgspec.Struct, frozen=True):
    """A message no actor handled, and why."""

    address: str
    message: str
    reason: str
    at: float


class GateView(msgspec.Struct, frozen=True):
    """The provider gate's state: requests in flight, requests ``waiting`` by priority (its key; 0 the
    most urgent), seconds of shared ``cool_down`` left (0: none), and the per-minute budgets left (None:
    no such budget)."""

    in_flight: int
    waiting: dict[str, int]
    cool_down: float
    requests_remaining: float | None
    tokens_remaining: float | None


class McpServerView(msgspec.Struct, frozen=True):
    """One MCP server: ``status`` (``starting``, ``ready``, ``restarting``, ``unavailable``, ``stopped``),
    the tools it offers, its restarts and, when it is not ready, its last error's first line."""

    name: str
    status: str
    tools: int
    restarts: int
    last_error: str = ""


class Supervision(msgspec.Struct, frozen=True):
    """``GET /v1/supervision``: the host's actor tree and its recent dead letters."""

    tree: list[ActorNode]
    restarts: int
    crashes: int
    dead_letters: int
    recent_dead_letters: list[DeadLetterView]
    turns_running: int
    """Turns holding a place under the host's ``max_concurrent_turns`` gate."""
    turns_waiting: int
    """Sessions waiting for a place."""
    provider_gate: str = ""
    """The provider gate's state in one line: requests in flight, waiting by priority, cool-down, budgets."""
    mcp_servers: list[str] = []
    """Each MCP server of the host and of its open sessions: ``NAME: status, N tools, N restarts``."""
    gate: GateView | None = None
    """The provider gate's state field by field (None: the host has no provider gate)."""
    mcp: list[McpServerView] = []
    """Each MCP server of ``mcp_servers``, field by field."""
