"""The families of meaning an error's evidence can belong to, and the data types of the tables."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Family", "Field", "Meaning", "Wording"]


class Family(enum.Enum):
    """What a piece of evidence says went wrong; the decision turns families into kinds by status."""

    OVERFLOW = "overflow"
    """The conversation does not fit the model's context (or the request alone exceeds a token limit)."""
    OUTPUT_LIMIT = "output_limit"
    """The requested output alone is larger than the model allows: a parameter error, not an overflow
    (a smaller history cannot help)."""
    FIELD_LENGTH = "field_length"
    """A field of the request is longer than the provider allows. Of a field of the conversation (a
    message's content, the list of messages) it is an overflow; of any other field (``user``, a tool's
    name or description, metadata) it is a parameter error that no smaller history can help."""
    MEMORY = "memory"
    """The server lacks the memory to load or run the model: fails at once, compaction cannot help."""
    QUOTA = "quota"
    """The account's credit, budget, billing or quota is used up."""
    RATE_WINDOW = "rate_window"
    """The limit named is per minute or second: a quota in these words is a rate limit (one per hour or
    day is not: no retry within a step's patience can outlast it)."""
    IMAGE = "image"
    """An image or other media part was rejected."""
    STRUCTURE = "structure"
    """Tool calls and results unpaired, or roles out of order."""
    AUTH = "auth"
    """The API key was refused."""
    FILTERED = "filtered"
    """A content filter or safety policy was involved."""
    OVERLOADED = "overloaded"
    """The provider says it is overloaded."""
    RATE_LIMIT = "rate_limit"
    """Too many requests or tokens for now."""


@dataclass(frozen=True, slots=True)
class Field:
    """A structured field value (``code``, ``type``, ``status``, AWS error type) that names a family.

    ``value`` is compared case-insensitively and in full; ``source`` names who sends it and where that is
    documented or reported.
    """

    value: str
    family: Family
    source: str


@dataclass(frozen=True, slots=True)
class Wording:
    """A provider's exact phrase (a regular expression, matched case-insensitively) and its family."""

    pattern: str
    family: Family
    source: str


@dataclass(frozen=True, slots=True)
class Meaning:
    """A family recognised by meaning: one word of each group within ``span`` characters of each other.

    Each group is a regular expression alternation; the groups may appear in any order.
    """

    groups: tuple[str, ...]
    family: Family
    source: str
    span: int = 80
