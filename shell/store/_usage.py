"""The rows of ``turn_usage``: a turn's usage written with its end, and read back per turn or per session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..events import TurnCancelled, TurnCompleted, TurnFailed
from ..usage import TokenUsage, TurnUsage
from ._records import TurnUsageRecord

__all__ = ["COLUMNS", "decode_row", "row_of", "turn_outcome"]

_TOKENS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "reported")

COLUMNS = ", ".join(
    (
        "session_id",
        "turn",
        "outcome",
        "model",
        *_TOKENS,
        *(f"compaction_{name}" for name in _TOKENS),
        "cost",
        "ended_at",
    )
)
"""The table's columns in the order :func:`row_of` gives and :func:`decode_row` takes them."""

_OUTCOMES: dict[type[msgspec.Struct], str] = {
    TurnCompleted: "completed",
    TurnFailed: "failed",
    TurnCancelled: "cancelled",
}


def turn_outcome(event: msgspec.Struct) -> tuple[str, TurnUsage] | None:
    """``(outcome, usage)`` when ``event`` ends a turn (outcome ``completed``, ``failed`` or
    ``cancelled``), else None."""
    outcome = _OUTCOMES.get(type(event))
    usage = getattr(event, "usage", None)
    if outcome is None or not isinstance(usage, TurnUsage):
        return None
    return outcome, usage


def row_of(session_id: str, turn: int, outcome: str, usage: TurnUsage, ended_at: float) -> tuple[Any, ...]:
    """The row recording ``usage`` for the turn."""
    steps, compaction = usage.steps, usage.compaction
    return (
        session_id,
        turn,
        outcome,
        usage.model,
        *(getattr(steps, name) for name in _TOKENS),
        *(getattr(compaction, name) for name in _TOKENS),
        usage.cost,
        ended_at,
    )


def decode_row(row: Sequence[Any]) -> TurnUsageRecord:
    """The record of a row read with :data:`COLUMNS` (``msgspec.ValidationError`` when it is not one)."""
    counts = len(_TOKENS)
    steps = dict(zip(_TOKENS, row[4 : 4 + counts], strict=True))
    compaction = dict(zip(_TOKENS, row[4 + counts : 4 + 2 * counts], strict=True))
    usage = TurnUsage(
        model=msgspec.convert(row[3], str),
        steps=msgspec.convert(steps, TokenUsage),
        compaction=msgspec.convert(compaction, TokenUsage),
        cost=msgspec.convert(row[-2], float | None),
    )
    return TurnUsageRecord(
        turn=msgspec.convert(row[1], int),
        outcome=msgspec.convert(row[2], str),
        usage=usage,
        ended_at=msgspec.convert(row[-1], float),
    )
