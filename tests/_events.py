"""Comparing session events by what a test states, leaving out the usage the provider reported."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from shell.usage import TurnUsage

E = TypeVar("E")


def without_usage(event: E) -> E:
    """``event`` with an empty usage when it carries one (a turn's end), else ``event`` itself."""
    if isinstance(event, msgspec.Struct) and hasattr(event, "usage"):
        return msgspec.structs.replace(event, usage=TurnUsage())  # type: ignore[return-value]
    return event
