"""What the session store hands back: sessions, stored messages and stored events."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from sampler.messages import Message

from ..usage import TurnUsage

__all__ = [
    "Backend",
    "ParentLink",
    "SessionRecord",
    "SessionStatus",
    "StoredEvent",
    "StoredMessage",
    "TurnUsageRecord",
    "TurnWrite",
]

SessionStatus: TypeAlias = Literal["idle", "in_turn", "closed", "archived"]
"""``idle`` between turns, ``in_turn`` while a turn runs (and after a crash in one), ``closed`` for good,
``archived`` once a rewind replaced the session by a fork (kept and readable; it takes nothing new until it
is taken out of the archive)."""

Backend: TypeAlias = Literal["sqlite", "postgresql"]
"""The kind of database a store keeps its data in."""


class ParentLink(msgspec.Struct, frozen=True):
    """Where a child session comes from: the ``agent`` tool call ``call`` of turn ``turn`` of the session
    ``session`` runs it, with the agent profile ``profile``.

    A store keeps it with the child when the child is created (:meth:`SessionStore.create_session`), where
    ``session`` named a session of the same store, and never changes it; the child is found from its parent
    with :meth:`SessionStore.children`.
    """

    session: str
    """The parent session's id."""
    turn: int
    """The parent's turn whose tool call runs the child."""
    call: str
    """The id of the parent's ``agent`` tool call."""
    profile: str
    """The name of the agent profile the child runs."""


class SessionRecord(msgspec.Struct, frozen=True):
    """A session's row: identity, status and what the session has learned."""

    id: str
    created_at: float
    """Seconds since the epoch."""
    updated_at: float
    """When anything of the session (row, messages, events) was last written."""
    workspace: str
    model: str
    status: SessionStatus
    current_turn: int
    """The last turn begun (0 before the first)."""
    learned_window: int | None
    """The context window learned from an overflow, in tokens; None until one happened."""
    meta: dict[str, Any]
    forked_from: tuple[str, int] | None = None
    """``(session id, turn)`` of the session this one was forked (or rewound) from, at the end of that turn;
    None for a session opened afresh."""
    owner_epoch: int = 0
    """How many times a host took the session (:meth:`SessionStore.take_session`); 0 if none ever did."""
    parent: ParentLink | None = None
    """The parent link of a child session; None for a session opened by a user (and for a fork, which is a
    session of its own)."""


class StoredMessage(msgspec.Struct, frozen=True):
    """A message of a session's history with its place in it."""

    seq: int
    """1-based, dense, in the order the messages were appended."""
    turn: int
    message: Message
    replaced_by: int | None
    """The seq of the summary that replaced this message in the projection, or None."""
    is_summary: bool


class StoredEvent(msgspec.Struct, frozen=True):
    """An entry of a session's event log; ``body`` is the event's JSON, to be decoded by its reader."""

    seq: int
    """1-based, dense, in the order the events were appended."""
    turn: int
    type: str
    """The event struct's tag, or its class name if it has none."""
    body: bytes
    created_at: float


class TurnUsageRecord(msgspec.Struct, frozen=True):
    """What one ended turn consumed: ``outcome`` is ``completed``, ``failed`` or ``cancelled``."""

    turn: int
    outcome: str
    usage: TurnUsage
    ended_at: float
    """Seconds since the epoch."""


class TurnWrite(msgspec.Struct, frozen=True):
    """The seqs one :meth:`SessionStore.write_turn` gave, in the order its messages and events were given."""

    messages: tuple[int, ...] = ()
    events: tuple[int, ...] = ()
