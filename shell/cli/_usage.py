"""How the CLI writes usage: token counts and cost of a turn or of a whole session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..store import TurnUsageRecord
from ..usage import TokenUsage, TurnUsage

__all__ = ["describe", "session_totals", "totals_json", "turn_line"]


def session_totals(records: Sequence[TurnUsageRecord]) -> tuple[TokenUsage, float | None]:
    """The tokens of every turn added up (steps and compactions), and their cost: None when no turn had a
    price, else the sum of the priced turns."""
    tokens = TokenUsage()
    costs = [record.usage.cost for record in records if record.usage.cost is not None]
    for record in records:
        tokens = tokens + record.usage.total
    return tokens, (sum(costs) if costs else None)


def describe(tokens: TokenUsage, cost: float | None) -> str:
    """``1200 in (1000 cached), 80 out (12 reasoning), cost 0.0125`` — the parts that are not zero."""
    inputs = f"{tokens.input_tokens} in"
    if tokens.cached_tokens:
        inputs += f" ({tokens.cached_tokens} cached)"
    outputs = f"{tokens.output_tokens} out"
    if tokens.reasoning_tokens:
        outputs += f" ({tokens.reasoning_tokens} reasoning)"
    text = f"{inputs}, {outputs}"
    return text if cost is None else f"{text}, cost {cost:.4f}"


def turn_line(usage: TurnUsage) -> str:
    """A turn's usage on one line, its compactions named apart when there were any."""
    text = describe(usage.total, usage.cost)
    if usage.compaction.reported:
        text += f"; compaction {describe(usage.compaction, None)}"
    return text


def totals_json(records: Sequence[TurnUsageRecord]) -> dict[str, Any]:
    """The session's totals as JSON: the token counts and ``cost`` (null without a price)."""
    tokens, cost = session_totals(records)
    return {**msgspec.to_builtins(tokens), "cost": cost}
