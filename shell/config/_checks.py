"""The checks every table of the configuration makes of its values, written once."""

from __future__ import annotations

import math
from typing import TypeGuard

__all__ = ["is_int", "is_number", "is_positive"]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a whole number (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite number, whole or decimal (a bool is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_positive(value: object) -> bool:
    """Whether ``value`` is a finite number greater than 0."""
    return is_number(value) and value > 0
