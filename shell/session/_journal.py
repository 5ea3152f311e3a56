"""A turn's journal as the store holds it: its messages and what its events say of its calls and resumes."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import msgspec

from sampler import Message

from .. import events as ev
from .. import turn as tm
from ..messages import UserPrompt
from ..store import StoredEvent

__all__ = ["queued_prompts", "turn_journal"]

logger = logging.getLogger("turnkeep.shell")

_started = msgspec.json.Decoder(ev.ToolCallStarted)
_begun = msgspec.json.Decoder(ev.TurnStarted)
_queued = msgspec.json.Decoder(ev.PromptQueued)


def queued_prompts(events: Iterable[StoredEvent]) -> tuple[tuple[int, UserPrompt], ...]:
    """The waiting prompts the stored ``PromptQueued`` events hold, by turn, each once. One that cannot
    be decoded is left out, with a warning: it cannot be run."""
    found: dict[int, UserPrompt] = {}
    for stored in events:
        try:
            queued = _queued.decode(stored.body)
        except msgspec.DecodeError as exc:
            logger.warning(
                "the waiting prompt of turn %d cannot be read, and is not run: %s", stored.turn, exc
            )
            continue
        found.setdefault(queued.turn, UserPrompt(queued.text, queued.images))
    return tuple(sorted(found.items()))


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
