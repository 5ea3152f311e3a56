"""Group commit: one thread per store makes the writes of every caller in shared transactions.

A caller's write is queued and the caller waits; the writer thread takes every write queued (up to
:data:`BATCH_LIMIT`), runs each in a savepoint of one transaction, commits, and only then tells each caller
its own result or error. Nothing waits for company: a caller that finds no transaction in progress and no
write waiting makes its write itself, in a transaction of its own on its own thread (no hand-over to the
writer thread and back); the writes that arrive while a transaction is in progress share the next one. A
write that fails is rolled back to its savepoint and fails alone; a transaction that fails (to begin, or to
commit) fails every write in it, and nothing of it is stored. :mod:`._batch` decides; this module only
performs, waits and wakes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from actors import blocking

from ._batch import Batches, Failed, Outcome, Pending, Succeeded
from ._db import Db, Transactions
from ._errors import StoreClosed, StoreError, StoreTimeout

__all__ = ["ACK_GRACE", "BATCH_LIMIT", "GroupWriter", "WriterStats", "ack_timeout"]

T = TypeVar("T")

BATCH_LIMIT = 256
"""The most writes one transaction holds, so that each stays short."""

ACK_GRACE = 30.0
"""Seconds a caller waits for its write beyond the time two transactions may wait for locks."""

_SAVEPOINT = "turnkeep_write"
_IDLE_WAKE = 60.0
"""An idle writer is woken by a write or by closing; this only bounds each of its waits."""


def ack_timeout(busy_timeout: float) -> float:
    """How long a caller waits for the transaction of its write: the one in progress and its own may each
    wait ``busy_timeout`` for a lock, plus :data:`ACK_GRACE` seconds."""
    return 2 * busy_timeout + ACK_GRACE


@dataclass(frozen=True)
class WriterStats:
    """What a group writer has done: transactions committed, writes they held, the largest batch."""

    commits: int = 0
    writes: int = 0
    largest: int = 0


class _Call(Pending):
    def __init__(self, op: Callable[[Db], object]) -> None:
        super().__init__(op)
        self.done = threading.Event()


def _result(outcome: Outcome) -> Any:
    """What a write's caller gets: its value, or its error raised."""
    if isinstance(outcome, Failed):
        raise outcome.error
    return outcome.value


class GroupWriter:
    """The writer thread of one store, and the door callers' writes go through.

    ``transactions`` is called by the first to make a transaction (the writer thread, or a caller making its
    write itself) to get what writes are made with, again after it failed to; one transaction at a time
    uses it.
    :meth:`submit` returns once the write's transaction has committed, or raises the write's own error, the
    error that failed its transaction, :class:`StoreClosed` after :meth:`close`, or :class:`StoreTimeout`
    after ``ack_timeout`` seconds, stating whether the write may yet commit.
    """

    def __init__(
        self,
        transactions: Callable[[], Transactions],
        *,
        location: str,
        ack_timeout: float,
        limit: int = BATCH_LIMIT,
    ) -> None:
        self._open = transactions
        self._location = location
        self._ack_timeout = ack_timeout
        self._batches = Batches(limit)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._commits = self._writes = self._largest = 0
        self._running = 0
        """Writes in the transaction in progress (0: none is); one transaction at a time, by the writer
        thread or by a caller making its write itself."""
        self._transactions: Transactions | None = None
        """What transactions are made with, opened by the first to make one."""
        self._inside = threading.local()
        self._thread = threading.Thread(target=self._run, name=f"store writer {location}", daemon=True)
        self._thread.start()

    @property
    def stats(self) -> WriterStats:
        """The transactions committed so far, and the writes they held."""
        with self._lock:
            return WriterStats(self._commits, self._writes, self._largest)

    @property
    def waiting(self) -> int:
        """How many writes wait for a transaction (not those in one)."""
        with self._lock:
            return self._batches.waiting

    @property
    def running(self) -> int:
        """How many writes the transaction in progress holds; 0 between transactions."""
        with self._lock:
            return self._running

    @property
    def closed(self) -> bool:
        """Whether new writes are refused: :meth:`close` was called, or the writer thread ended."""
        with self._lock:
            return self._batches.closed

    @property
    def alive(self) -> bool:
        """Whether the writer thread runs: from the store's opening until it is closed."""
        return self._thread.is_alive()

    def submit(self, op: Callable[[Db], T]) -> T:
        """Run ``op`` in a transaction shared with other writes; return its result once committed."""
        if threading.current_thread() is self._thread or getattr(self._inside, "write", False):
            # The write would wait for itself: no store write path does this, and none may.
            raise StoreError(f"{self._location}: a store write was made from inside another write")
        with self._lock:
            if self._batches.closed:
                raise StoreClosed(f"the session store {self._location} is closed")
            alone = not self._batches.waiting and not self._running
            if alone:
                self._running = 1
        if alone:
            outcome = self._make_own(op)
            if not (isinstance(outcome, Failed) and outcome.conflict):
                return cast(T, _result(outcome))
        return self._queued(op, conflicts=int(alone))

    def _make_own(self, op: Callable[[Db], object]) -> Outcome:
        """Make ``op`` in a transaction of its own on the caller's thread, which has set ``_running``."""
        outcome: Outcome
        committed = False
        self._inside.write = True
        try:
            with blocking():
                if self._transactions is None:
                    self._transactions = self._open()
                outcome = self._make_alone(self._transactions, op)
                committed = True
        except BaseException as error:
            outcome = Failed(error)
        finally:
            self._inside.write = False
        with self._lock:
            self._running = 0
            if self._batches.waiting or self._batches.closed:
                self._work.notify_all()
            if committed:
                self._commits += 1
                self._writes += 1
                self._largest = max(self._largest, 1)
        return outcome

    def _queued(self, op: Callable[[Db], T], *, conflicts: int) -> T:
        """Queue ``op`` for the writer thread's next transaction and wait for its outcome."""
        call = _Call(op)
        call.conflicts = conflicts
        with self._lock:
            if not self._batches.add(call):
                raise StoreClosed(f"the session store {self._location} is closed")
            self._work.notify()
        with blocking():
            done = call.done.wait(self._ack_timeout)
        if not done:
            with self._lock:
                withdrawn = self._batches.withdraw(call)
            if call.outcome is None:
                raise self._timeout(withdrawn)
        outcome = call.outcome
        assert outcome is not None
        return cast(T, _result(outcome))

    def close(self) -> None:
        """Refuse new writes, and wait (at most ``ack_timeout`` seconds) for the queued ones to be made;
        those still queued then fail with :class:`StoreClosed`, unwritten. Calling it again does nothing."""
        with self._lock:
            self._batches.close()
            self._work.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(self._ack_timeout)
        self._drop_queued()

    # --- The writer thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while (batch := self._next_batch()) is not None:
                self._transact(batch)
        finally:
            with self._lock:
                self._batches.close()
                # A caller may still be making its own write with the transactions: let it end first.
                if self._running:
                    self._work.wait_for(lambda: not self._running, self._ack_timeout)
                transactions, self._transactions = self._transactions, None
            if transactions is not None:
                with suppress(Exception):
                    transactions.close()
            self._drop_queued()

    def _next_batch(self) -> list[Pending] | None:
        with self._lock:
            while not self._batches.waiting or self._running:
                if self._batches.closed and not self._batches.waiting:
                    return None
                self._work.wait(_IDLE_WAKE)
            batch = self._batches.next_batch()
            self._running = len(batch)
            return batch

    def _transact(self, batch: Sequence[Pending]) -> None:
        """Make ``batch`` in one transaction and tell its callers; the caller has set ``_running``."""
        outcomes: list[Outcome] | None = None
        failure: BaseException | None = None
        self._inside.write = True
        try:
            if self._transactions is None:
                self._transactions = self._open()
            outcomes = self._make(self._transactions, batch)
        except BaseException as error:
            failure = error
        finally:
            self._inside.write = False
        self._settle(batch, outcomes, failure)

    def _make(self, transactions: Transactions, batch: Sequence[Pending]) -> list[Outcome]:
        """Run each write of ``batch`` after a savepoint and commit; a write that fails is rolled back to
        its savepoint, which stays for the next write. An error undoing it (the transaction itself is
        lost), or committing, escapes and fails the batch."""
        if len(batch) == 1:
            return [self._make_alone(transactions, batch[0].op)]
        outcomes: list[Outcome] = []
        with transactions.write() as db:
            db.run(f"SAVEPOINT {_SAVEPOINT}")
            for pending in batch:
                if outcomes and isinstance(outcomes[-1], Succeeded):
                    transactions.renew_savepoint(db, _SAVEPOINT)
                try:
                    with transactions.translate():
                        value = pending.op(db)
                except Exception as error:
                    db.run(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
                    outcomes.append(Failed(error, conflict=transactions.is_conflict(error)))
                else:
                    outcomes.append(Succeeded(value))
        return outcomes

    def _make_alone(self, transactions: Transactions, op: Callable[[Db], object]) -> Outcome:
        """One write in a transaction of its own, with no savepoint: a write that fails (or whose commit
        fails) rolls the whole transaction back and has its error as its outcome."""
        try:
            return Succeeded(transactions.write_one(op))
        except Exception as error:
            return Failed(error, conflict=transactions.is_conflict(error))

    def _settle(
        self, batch: Sequence[Pending], outcomes: list[Outcome] | None, failure: BaseException | None
    ) -> None:
        with self._lock:
            settled = self._batches.settle(batch, outcomes, failure)
            self._running = 0
            if self._batches.waiting or self._batches.closed:
                self._work.notify_all()  # the next batch may start, or the closing writer may end
            if failure is None:
                self._commits += 1
                self._writes += len(batch)
                self._largest = max(self._largest, len(batch))
        for pending in settled:
            cast(_Call, pending).done.set()

    def _drop_queued(self) -> None:
        def closed() -> StoreError:
            return StoreClosed(
                f"the session store {self._location} was closed before this write was made;"
                " it was not written"
            )

        with self._lock:
            dropped = self._batches.fail_queued(closed)
        for pending in dropped:
            cast(_Call, pending).done.set()

    def _timeout(self, withdrawn: bool) -> StoreTimeout:
        waited = f"{self._location}: a write was not confirmed within {self._ack_timeout:g} s"
        if withdrawn:
            return StoreTimeout(
                f"{waited}; it had not started and was withdrawn: it was not written",
                may_have_committed=False,
            )
        return StoreTimeout(
            f"{waited}; its transaction was still in progress: it may or may not have been written",
            may_have_committed=True,
        )
