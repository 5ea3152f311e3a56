"""What a trio nursery raised, seen as the one exception it stands for."""

from __future__ import annotations

import trio


def _leaves(exc: BaseException) -> list[BaseException]:
    leaves: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    return leaves


def unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of ``group`` that is not a cancellation, else its first cancellation: a nursery whose
    tasks all saw the same cancel stands for that cancel, and one whose task failed stands for the failure."""
    leaves = _leaves(group)
    errors = [leaf for leaf in leaves if not isinstance(leaf, trio.Cancelled)]
    return errors[0] if errors else leaves[0]


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is a trio cancellation: a ``Cancelled``, or a group of nothing but ``Cancelled``."""
    return all(isinstance(leaf, trio.Cancelled) for leaf in _leaves(exc))
