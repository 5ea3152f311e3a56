"""What a turn consumed: token counts summed over its model calls, and their cost under a price table.

A turn's usage is the sum of what the provider reported for every attempt of its model calls, retried
and discarded attempts included (the account pays for them); the summary requests of a compaction are
counted apart from the steps. Nothing here is estimated: a call whose provider reported no usage adds
nothing but is not counted in ``reported``.
"""

from __future__ import annotations

import math

import msgspec

from sampler.messages import Usage

__all__ = ["ChildUsage", "Price", "TokenUsage", "TurnUsage", "cost_of"]


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens added up over model calls; ``cached_tokens`` is part of ``input_tokens`` and
    ``reasoning_tokens`` part of ``output_tokens``; ``reported`` counts the attempts that reported usage."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    reported: int = 0

    def add(self, usage: Usage) -> TokenUsage:
        """These counts with one more reported attempt's ``usage``."""
        return TokenUsage(
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            cached_tokens=self.cached_tokens + usage.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + usage.reasoning_tokens,
            reported=self.reported + 1,
        )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        """Both counts, field by field."""
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            reported=self.reported + other.reported,
        )


class ChildUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What the child session of one ``agent`` call consumed: its turn's tokens and cost (None: no price)."""

    call_id: str
    child: str
    profile: str
    model: str = ""
    tokens: TokenUsage = TokenUsage()
    cost: float | None = None


class TurnUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's usage: its steps' model calls and, apart, its compactions' summary requests, with the
    cost of both when the model has a price (None when it has none). ``children`` itemises the child
    sessions its ``agent`` calls ran (their tokens are not in ``steps``: each child's turn counts its own).
    """

    model: str = ""
    steps: TokenUsage = TokenUsage()
    compaction: TokenUsage = TokenUsage()
    cost: float | None = None
    children: tuple[ChildUsage, ...] = ()

    @property
    def total(self) -> TokenUsage:
        """Steps and compactions together."""
        return self.steps + self.compaction


class Price(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a model costs per million tokens: uncached input, output and cached input (the input price
    when not given). Any currency: the cost is in the same one."""

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"a price's {name} must be a finite number >= 0, got {value!r}")


def cost_of(tokens: TokenUsage, price: Price) -> float:
    """The cost of ``tokens`` at ``price``: cached input at the cached price, the rest of the input at
    the input price, output (reasoning included) at the output price."""
    cached_price = price.input if price.cached_input is None else price.cached_input
    uncached = max(tokens.input_tokens - tokens.cached_tokens, 0)
    return (
        uncached * price.input + tokens.cached_tokens * cached_price + tokens.output_tokens * price.output
    ) / 1_000_000
