"""Comparing session events by what a test states, leaving out the usage the provider reported, and
checking what every event stream promises."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import msgspec

from shell.events import ToolCallFinished, ToolCallStarted
from shell.usage import TurnUsage

E = TypeVar("E")


def without_usage(event: E) -> E:
    """``event`` with an empty usage when it carries one (a turn's end), else ``event`` itself."""
    if isinstance(event, msgspec.Struct) and hasattr(event, "usage"):
        return msgspec.structs.replace(event, usage=TurnUsage())  # type: ignore[return-value]
    return event


def finished_before_started(events: Iterable[object]) -> list[str]:
    """The call ids of the ``ToolCallFinished`` events in ``events`` that no earlier ``ToolCallStarted`` of
    the same call id announced, in order: a client would draw a call that never began."""
    started: set[str] = set()
    unannounced: list[str] = []
    for event in events:
        if isinstance(event, ToolCallStarted):
            started.add(event.call_id)
        elif isinstance(event, ToolCallFinished) and event.call_id not in started:
            unannounced.append(event.call_id)
    return unannounced
