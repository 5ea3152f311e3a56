"""What the pool and its replicas say to each other: msgspec structs, sent as msgpack bytes.

Mailbox messages and session events cross as themselves (the tagged structs of :mod:`shell.messages`
and :mod:`shell.events`); nothing live (a subscriber, an address, an actor) ever does.
"""

from __future__ import annotations

from typing import Any, TypeAlias, get_args

import msgspec

from tool_bridge.messages import ToolAbandoned
from tool_bridge.permissions import PermissionDecision, PermissionRequested

from .. import events as ev
from ..messages import Cancel, UserPrompt

__all__ = [
    "FORWARDED",
    "Batch",
    "CloseSession",
    "Deliver",
    "Failure",
    "Forwarded",
    "History",
    "Inbound",
    "Item",
    "ListSessions",
    "OpenSession",
    "Ping",
    "Poll",
    "ReplicaInfo",
    "Reply",
    "Request",
    "ResumeSession",
    "Settle",
    "Settled",
    "Shutdown",
    "decode_event",
    "decode_reply",
    "decode_request",
    "encode",
]

Inbound: TypeAlias = UserPrompt | Cancel | PermissionDecision
"""The mailbox messages a pool routes to the replica that runs the session."""

Forwarded: TypeAlias = ev.SessionEvent | PermissionRequested | ToolAbandoned
"""What a session publishes that reaches the pool's subscribers."""

FORWARDED: tuple[type, ...] = get_args(Forwarded)
"""The classes of :data:`Forwarded`, for ``isinstance``."""


# --- Requests: pool -> replica ----------------------------------------------------------------------------


class OpenSession(msgspec.Struct, frozen=True, tag=True):
    """Start a new session; the reply is the replica's incarnation."""

    session_id: str
    workspace: str


class ResumeSession(msgspec.Struct, frozen=True, tag=True):
    """Run a stored session here (it already may); the reply is the replica's incarnation."""

    session_id: str


class Deliver(msgspec.Struct, frozen=True, tag=True):
    """Ask ``message`` of the session; the reply is its answer (a turn number, a bool, or None)."""

    session_id: str
    message: Inbound


class Poll(msgspec.Struct, frozen=True, tag=True):
    """The events after ``after`` (which this acknowledges), waiting up to ``wait`` seconds for one.
    ``after`` counts only if ``incarnation`` is the replica's own."""

    incarnation: str | None
    after: int
    wait: float


class History(msgspec.Struct, frozen=True, tag=True):
    """The session's history: the projection, or every stored message."""

    session_id: str
    include_replaced: bool = False


class Settle(msgspec.Struct, frozen=True, tag=True):
    """The stored end of each of ``turns``, and the session's last begun turn."""

    session_id: str
    turns: tuple[int, ...]


class CloseSession(msgspec.Struct, frozen=True, tag=True):
    """Stop the session and mark it closed in the store."""

    session_id: str


class ListSessions(msgspec.Struct, frozen=True, tag=True):
    """Every session of the store."""


class Ping(msgspec.Struct, frozen=True, tag=True):
    """Who answers: the reply is a :class:`ReplicaInfo`."""


class Shutdown(msgspec.Struct, frozen=True, tag=True):
    """Shut the replica's host down (running turns end ``aborted``) within ``timeout`` seconds."""

    timeout: float


Request: TypeAlias = (
    OpenSession
    | ResumeSession
    | Deliver
    | Poll
    | History
    | Settle
    | CloseSession
    | ListSessions
    | Ping
    | Shutdown
)


# --- Replies: replica -> pool -----------------------------------------------------------------------------


class Failure(msgspec.Struct, frozen=True):
    """The request raised ``kind`` (the exception's class name) with ``message``."""

    kind: str
    message: str


class Reply(msgspec.Struct, frozen=True):
    """The answer to one request: ``value`` (msgpack of the request's result) or ``failure``."""

    value: msgspec.Raw = msgspec.Raw(b"\xc0")
    failure: Failure | None = None


class Item(msgspec.Struct, frozen=True, array_like=True):
    """One event of a session, numbered in the replica's outbox."""

    seq: int
    session_id: str
    event: msgspec.Raw


class Batch(msgspec.Struct, frozen=True):
    """The answer to :class:`Poll`: the outbox's events after the acknowledged one, and who answers (the
    incarnation and the process id of the replica)."""

    incarnation: str
    items: list[Item]
    pid: int | None = None


class ReplicaInfo(msgspec.Struct, frozen=True):
    """Who answers: ``incarnation`` is new each time the replica's process starts."""

    incarnation: str
    pid: int
    sessions: list[str]


class Settled(msgspec.Struct, frozen=True):
    """The answer to :class:`Settle`."""

    outcomes: list[ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled]
    current_turn: int
    running: bool = False
    """Whether ``current_turn`` runs (resumed from its stored steps) and has no stored end yet: its end
    comes with the session's events."""
    queued: list[int] = msgspec.field(default_factory=list)
    """The turns whose prompts are stored as waiting: the session runs them, and their ends come with its
    events."""
    ended_here: list[int] = msgspec.field(default_factory=list)
    """The turns asked about whose ends are stored but left out of ``outcomes``: this replica published
    their events, so their ends come with those events, after the events before them."""


_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(Request)
_reply_decoder = msgspec.msgpack.Decoder(Reply)
_event_decoder = msgspec.msgpack.Decoder(Forwarded)


def encode(value: Any) -> bytes:
    """``value`` as msgpack bytes."""
    return _encoder.encode(value)


def decode_request(data: bytes) -> Request:
    """A request from its bytes; raises :class:`msgspec.DecodeError` for anything else."""
    return _request_decoder.decode(data)


def decode_reply(data: bytes) -> Reply:
    """A reply from its bytes; raises :class:`msgspec.DecodeError` for anything else."""
    return _reply_decoder.decode(data)


def decode_event(data: bytes | msgspec.Raw) -> Forwarded:
    """A forwarded event from its bytes."""
    return _event_decoder.decode(data)
