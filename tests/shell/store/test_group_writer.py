"""Specification of the group writer's thread over transactions that record what they do: bounded waits
that state a write's fate, no deadlock on a write from inside a write, retries after a conflict, and a
writer that recovers when it cannot get a connection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

import pytest

from shell.store import StoreError, StoreTimeout, StoreUnavailable
from shell.store._db import Db
from shell.store._group import ACK_GRACE, GroupWriter, ack_timeout
from tests.shell.store._holding import Calls, wait_until

T = TypeVar("T")


class Deadlock(StoreError):
    pass


class RecordingDb:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return []

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self.log.append(sql.split()[0])
        return 0


class RecordingTransactions:
    """Transactions that only record BEGIN, savepoint statements, COMMIT, and UNDONE for a transaction
    rolled back."""

    def __init__(self) -> None:
        self.log: list[str] = []

    @contextmanager
    def write(self) -> Iterator[Db]:
        self.log.append("BEGIN")
        try:
            yield RecordingDb(self.log)
        except BaseException:
            self.log.append("UNDONE")
            raise
        self.log.append("COMMIT")

    def translate(self) -> AbstractContextManager[None]:
        return nullcontext()

    def write_one(self, op: Callable[[Db], T]) -> T:
        with self.write() as db:
            return op(db)

    def renew_savepoint(self, db: Db, name: str) -> None:
        db.run(f"RENEW {name}")

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(error, Deadlock)

    def close(self) -> None:
        self.log.append("CLOSE")


@pytest.fixture
def transactions() -> RecordingTransactions:
    return RecordingTransactions()


@contextmanager
def group_writer(transactions: RecordingTransactions, ack: float = 10.0) -> Iterator[GroupWriter]:
    writer = GroupWriter(lambda: transactions, location="test", ack_timeout=ack)
    try:
        yield writer
    finally:
        writer.close()


def test_a_caller_waits_twice_the_busy_timeout_and_a_grace_at_most():
    assert ack_timeout(5.0) == 10.0 + ACK_GRACE


def test_a_lone_write_runs_in_a_transaction_of_its_own_with_no_savepoint(transactions):
    with group_writer(transactions) as writer:
        assert writer.submit(lambda db: 42) == 42

    assert transactions.log == ["BEGIN", "COMMIT", "CLOSE"]


def test_a_savepoint_is_set_again_after_each_write_that_succeeded_and_kept_after_one_that_failed(
    transactions,
):
    finish = threading.Event()
    calls = Calls()

    def fail(db: Db) -> None:
        db.run("INSERT")
        raise KeyError("refused")

    with group_writer(transactions) as writer:
        calls.start("first", lambda: writer.submit(lambda db: finish.wait(10)))
        wait_until(lambda: writer.running == 1, "the first write is in a transaction")
        writes = [("ok", lambda db: db.run("INSERT")), ("bad", fail), ("last", lambda db: db.run("INSERT"))]
        for queued, (name, op) in enumerate(writes, start=1):
            calls.start(name, lambda op=op: writer.submit(op))
            wait_until(lambda queued=queued: writer.waiting == queued, f"{name} waits")
        finish.set()
        outcomes = calls.join()

    assert isinstance(outcomes["bad"], KeyError)
    second = transactions.log[transactions.log.index("COMMIT") + 1 :]
    assert second == [
        "BEGIN",
        "SAVEPOINT",
        "INSERT",
        "RENEW",
        "INSERT",
        "ROLLBACK",
        "INSERT",
        "COMMIT",
        "CLOSE",
    ]


def test_a_lone_write_that_fails_is_rolled_back_with_its_transaction_and_its_error_reaches_its_caller(
    transactions,
):
    def fail(db: Db) -> None:
        db.run("INSERT")
        raise KeyError("no such row")

    with group_writer(transactions) as writer:
        with pytest.raises(KeyError, match="no such row"):
            writer.submit(fail)
        assert writer.submit(lambda db: 7) == 7  # the writer goes on

    assert transactions.log == ["BEGIN", "INSERT", "UNDONE", "BEGIN", "COMMIT", "CLOSE"]


def test_a_write_still_in_its_transaction_when_the_wait_ends_may_or_may_not_have_committed(transactions):
    first_may_end, finish = threading.Event(), threading.Event()
    calls = Calls()
    with group_writer(transactions, ack=0.5) as writer:
        try:
            calls.start("first", lambda: writer.submit(lambda db: first_may_end.wait(10)))
            wait_until(lambda: writer.running == 1, "the first write is in a transaction")
            calls.start("second", lambda: writer.submit(lambda db: finish.wait(10)))
            wait_until(lambda: writer.waiting == 1, "the second write waits for the next transaction")
            first_may_end.set()
            outcome = calls.join()["second"]
        finally:
            first_may_end.set()
            finish.set()

    assert isinstance(outcome, StoreTimeout) and "may or may not have been written" in str(outcome)
    assert outcome.may_have_committed is True


def test_a_write_made_alone_is_made_on_its_callers_thread_in_a_transaction_of_its_own(transactions):
    with group_writer(transactions) as writer:
        writer_thread = writer._thread
        made_on = writer.submit(lambda db: threading.current_thread())

    assert made_on is threading.current_thread() and made_on is not writer_thread
    assert transactions.log.count("BEGIN") == 1 and transactions.log.count("COMMIT") == 1


def test_a_write_still_queued_when_the_wait_ends_is_withdrawn_and_never_made(transactions):
    finish = threading.Event()
    made: list[str] = []
    calls = Calls()
    with group_writer(transactions, ack=0.3) as writer:
        try:
            calls.start("first", lambda: writer.submit(lambda db: finish.wait(10)))
            wait_until(lambda: writer.running == 1, "the first write is in a transaction")
            with pytest.raises(StoreTimeout, match="was not written") as caught:
                writer.submit(lambda db: made.append("second"))
        finally:
            finish.set()
        calls.join()

    assert caught.value.may_have_committed is False
    assert made == []
    assert transactions.log.count("BEGIN") == 1


def test_a_write_made_from_inside_a_write_fails_at_once_instead_of_waiting_for_itself(transactions):
    with group_writer(transactions, ack=30.0) as writer:
        with pytest.raises(StoreError, match="from inside another write") as caught:
            writer.submit(lambda db: writer.submit(lambda inner: 1))
        assert not isinstance(caught.value, StoreTimeout)

        assert writer.submit(lambda db: "still writing") == "still writing"


def test_a_write_that_lost_a_deadlock_is_made_again_first_in_the_next_transaction(transactions):
    attempts: list[int] = []

    def write(db: Db) -> str:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise Deadlock("deadlock detected")
        return "made"

    with group_writer(transactions) as writer:
        assert writer.submit(write) == "made"
        stats = writer.stats

    assert attempts == [0, 1]
    assert (stats.commits, stats.writes) == (2, 2)


def test_a_writer_that_cannot_get_a_connection_fails_that_batch_and_tries_again_for_the_next():
    opened: list[RecordingTransactions] = []

    def connect() -> RecordingTransactions:
        if not opened:
            opened.append(RecordingTransactions())
            raise StoreUnavailable("the server is down")
        return opened[0]

    writer = GroupWriter(connect, location="test", ack_timeout=10.0)
    try:
        with pytest.raises(StoreUnavailable, match="down"):
            writer.submit(lambda db: 1)
        assert writer.submit(lambda db: 2) == 2
    finally:
        writer.close()


def test_closing_the_writer_closes_its_connection_on_its_thread_and_refuses_writes(transactions):
    with group_writer(transactions) as writer:
        writer.submit(lambda db: None)
    writer.close()

    assert transactions.log[-1] == "CLOSE"
    assert writer.closed and not writer.alive
