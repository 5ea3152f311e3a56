"""The trace context a turn was stored with: read back from its ``TurnStarted`` event."""

from __future__ import annotations

import msgspec

from .. import events as ev
from ..store import SessionStore

__all__ = ["stored_traceparent"]

_STARTED = "TurnStarted"
_decoder = msgspec.json.Decoder(ev.TurnStarted)


def stored_traceparent(store: SessionStore, session_id: str, number: int) -> str | None:
    """The ``traceparent`` of turn ``number``'s ``TurnStarted`` event in ``store``; None when the turn
    has no such event, it was stored without one (telemetry was off) or it cannot be decoded. Raises what
    the store raises (:class:`~shell.store.SessionNotFound` for an unknown session)."""
    for stored in reversed(store.load_events(session_id)):
        if stored.turn == number and stored.type == _STARTED:
            try:
                return _decoder.decode(stored.body).traceparent
            except msgspec.DecodeError:
                return None
    return None
