"""A turn's journal as the store holds it: its messages and what its events say of its calls and resumes."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from sampler import Message

from .. import events as ev
from .. import turn as tm
from ..store import StoredEvent

__all__ = ["turn_journal"]

_started = msgspec.json.Decoder(ev.ToolCallStarted)
_begun = msgspec.json.Decoder(ev.TurnStarted)


def turn_journal(turn: int, messages: Iterable[Message], events: Iterable[StoredEvent]) -> tm.TurnJournal:
    """The journal of turn ``turn`` from its stored ``messages`` (in order) and ``events``. An event that
    cannot be decoded says nothing of its call (a call not known to have started is treated as the resume
    treats any call without a result); a resume is counted by its event's type alone."""
    started: set[str] = set()
    resumes = 0
    traceparent: str | None = None
    announced = False
    for stored in events:
        announced |= stored.type == "TurnStarted"
        if stored.type == "TurnResumed":
            resumes += 1
            continue
        try:
            if stored.type == "ToolCallStarted":
                started.add(_started.decode(stored.body).call_id)
            elif stored.type == "TurnStarted":
                traceparent = _begun.decode(stored.body).traceparent
        except msgspec.DecodeError:
            continue
    return tm.TurnJournal(turn, tuple(messages), frozenset(started), resumes, traceparent, announced)
