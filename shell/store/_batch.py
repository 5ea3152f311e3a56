"""The group writer's decisions: which writes share the next transaction, and what each caller gets.

A state machine without threads or I/O. :class:`Batches` keeps the writes waiting for a transaction in the
order they came, cuts the next batch (every write waiting, up to a limit: nothing waits for company), and
settles a batch when its transaction has ended: each write its own result or error if it committed, the
same error for all if it did not. :mod:`._group` performs these decisions on its thread, under one lock.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._db import Db

__all__ = ["Batches", "Failed", "Outcome", "Pending", "Stage", "Succeeded", "own_copy"]

Stage: TypeAlias = Literal["queued", "running", "done", "withdrawn"]
"""Where a write stands: waiting for a batch, in a transaction, settled, or withdrawn by its caller."""


@dataclass(frozen=True)
class Succeeded:
    """The write ran and its transaction committed; ``value`` is what its method returns."""

    value: object


@dataclass(frozen=True)
class Failed:
    """The write did not commit; ``error`` is what its method raises. ``conflict`` marks an error that
    another transaction caused (a deadlock), after which the write may be tried again."""

    error: BaseException
    conflict: bool = False


Outcome: TypeAlias = Succeeded | Failed


class Pending:
    """One write: the operation to run in a transaction, where it stands, and its outcome once settled."""

    def __init__(self, op: Callable[[Db], object]) -> None:
        self.op = op
        self.stage: Stage = "queued"
        self.outcome: Outcome | None = None
        self.conflicts = 0
        self.abandoned = False
        """The caller stopped waiting while the write was in a transaction."""


class Batches:
    """The writes waiting for a transaction, in arrival order; at most ``limit`` in one batch.

    A write that failed on a conflict is put back at the head of the queue, up to ``conflict_retries``
    times, and is then the first of the next transaction; after that its error is its outcome.
    """

    def __init__(self, limit: int, *, conflict_retries: int = 3) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a batch limit is a whole number >= 1, got {limit!r}")
        self._limit = limit
        self._retries = conflict_retries
        self._queue: deque[Pending] = deque()
        self._closed = False

    @property
    def limit(self) -> int:
        """The most writes one batch holds."""
        return self._limit

    @property
    def waiting(self) -> int:
        """How many writes wait for a batch."""
        return len(self._queue)

    @property
    def closed(self) -> bool:
        """Whether new writes are refused."""
        return self._closed

    def add(self, pending: Pending) -> bool:
        """Queue ``pending``; False (and nothing queued) once :meth:`close` was called."""
        if self._closed:
            return False
        pending.stage = "queued"
        self._queue.append(pending)
        return True

    def next_batch(self) -> list[Pending]:
        """Take the writes for the next transaction: all that wait, oldest first, up to the limit. Empty
        when none waits."""
        batch: list[Pending] = []
        while self._queue and len(batch) < self._limit:
            pending = self._queue.popleft()
            pending.stage = "running"
            batch.append(pending)
        return batch

    def settle(
        self, batch: Sequence[Pending], outcomes: Sequence[Outcome] | None, failure: BaseException | None
    ) -> list[Pending]:
        """End ``batch``, whose transaction committed with one outcome per write (``outcomes``), or did not
        commit (``failure``: every write gets a copy of that error, whatever it did in the transaction).
        Returns the writes now settled, whose callers are to be told; a write put back after a conflict
        is not among them."""
        if failure is not None:
            for pending in batch:
                pending.outcome, pending.stage = Failed(own_copy(failure)), "done"
            return list(batch)
        if outcomes is None or len(outcomes) != len(batch):
            raise ValueError("a committed batch needs one outcome per write")
        settled: list[Pending] = []
        again: list[Pending] = []
        for pending, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Failed) and outcome.conflict and self._may_retry(pending):
                pending.conflicts += 1
                pending.stage = "queued"
                again.append(pending)
            else:
                pending.outcome, pending.stage = outcome, "done"
                settled.append(pending)
        self._queue.extendleft(reversed(again))
        return settled

    def withdraw(self, pending: Pending) -> bool:
        """The caller of ``pending`` stops waiting. True if the write was still queued: it is removed and
        will never be made. False if it is in a transaction (its fate is then unknown) or settled."""
        if pending.stage == "queued":
            self._queue.remove(pending)
            pending.stage = "withdrawn"
            return True
        if pending.stage == "running":
            pending.abandoned = True
        return False

    def close(self) -> None:
        """Refuse new writes from now on; the queued ones still get batches."""
        self._closed = True

    def fail_queued(self, error: Callable[[], BaseException]) -> list[Pending]:
        """Settle every queued write with a fresh ``error()`` without making it (the writer is gone);
        returns them."""
        dropped = list(self._queue)
        self._queue.clear()
        for pending in dropped:
            pending.outcome, pending.stage = Failed(error()), "done"
        return dropped

    def _may_retry(self, pending: Pending) -> bool:
        return not pending.abandoned and pending.conflicts < self._retries


def own_copy(error: BaseException) -> BaseException:
    """A copy of ``error`` with the same cause, so that each caller raises an exception of its own; the
    error itself when it cannot be copied."""
    try:
        clone = copy.copy(error)
    except Exception:
        return error
    if type(clone) is not type(error) or clone.args != error.args:
        return error
    clone.__cause__ = error.__cause__
    clone.__context__ = error.__context__
    clone.__traceback__ = error.__traceback__
    return clone
