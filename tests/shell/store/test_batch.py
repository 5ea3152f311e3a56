"""Specification of the group writer's decisions, without threads: which writes share the next
transaction, and what each caller gets when it has ended."""

from __future__ import annotations

import pytest

from shell.store import SessionClosed, StoreBusy, StoreError, StoreVersionError
from shell.store._batch import Batches, Failed, Pending, Succeeded, own_copy


def pendings(count: int) -> list[Pending]:
    return [Pending(lambda db: None) for _ in range(count)]


def queued(batches: Batches, count: int) -> list[Pending]:
    writes = pendings(count)
    for write in writes:
        assert batches.add(write)
    return writes


def test_the_next_batch_is_every_waiting_write_oldest_first():
    batches = Batches(256)
    writes = queued(batches, 5)

    assert batches.next_batch() == writes
    assert [write.stage for write in writes] == ["running"] * 5
    assert batches.waiting == 0


def test_a_batch_never_holds_more_than_the_limit_and_the_rest_wait_their_turn():
    batches = Batches(3)
    writes = queued(batches, 7)

    assert batches.next_batch() == writes[:3]
    assert batches.waiting == 4
    assert batches.next_batch() == writes[3:6]
    assert batches.next_batch() == writes[6:]


def test_no_batch_is_cut_when_nothing_waits():
    assert Batches(4).next_batch() == []


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_a_batch_limit_is_a_whole_number_of_at_least_one(limit):
    with pytest.raises(ValueError, match="limit"):
        Batches(limit)


def test_a_committed_batch_gives_each_write_its_own_outcome():
    batches = Batches(8)
    writes = queued(batches, 3)
    batch = batches.next_batch()
    refused = SessionClosed("session 's' is closed")
    outcomes = [Succeeded(1), Failed(refused), Succeeded(None)]

    settled = batches.settle(batch, outcomes, None)

    assert settled == writes
    assert [write.outcome for write in writes] == outcomes
    assert [write.stage for write in writes] == ["done"] * 3


def test_a_batch_that_did_not_commit_gives_every_write_the_failure_even_those_that_had_succeeded():
    batches = Batches(8)
    writes = queued(batches, 3)
    batch = batches.next_batch()
    failure = StoreBusy("locked")

    settled = batches.settle(batch, None, failure)

    assert settled == writes
    errors = [write.outcome.error for write in writes if isinstance(write.outcome, Failed)]
    assert len(errors) == 3
    assert all(type(error) is StoreBusy and str(error) == "locked" for error in errors)
    # Each caller raises an exception object of its own.
    assert len({id(error) for error in errors}) == 3


def test_a_committed_batch_needs_exactly_one_outcome_per_write():
    batches = Batches(8)
    queued(batches, 2)
    batch = batches.next_batch()

    with pytest.raises(ValueError, match="one outcome per write"):
        batches.settle(batch, [Succeeded(1)], None)
    with pytest.raises(ValueError, match="one outcome per write"):
        batches.settle(batch, None, None)


def test_a_write_failed_by_a_conflict_is_put_back_first_for_the_next_transaction():
    batches = Batches(8)
    first, second, third = queued(batches, 3)
    batch = batches.next_batch()
    later = queued(batches, 1)

    settled = batches.settle(
        batch, [Succeeded(1), Failed(StoreError("deadlock"), conflict=True), Succeeded(3)], None
    )

    assert settled == [first, third]
    assert second.stage == "queued" and second.outcome is None
    assert batches.next_batch() == [second, *later]


def test_a_write_that_keeps_conflicting_fails_with_its_error_after_the_retries():
    batches = Batches(8, conflict_retries=2)
    (write,) = queued(batches, 1)
    conflict = Failed(StoreError("deadlock"), conflict=True)

    for _ in range(2):
        assert batches.settle(batches.next_batch(), [conflict], None) == []
    assert batches.settle(batches.next_batch(), [conflict], None) == [write]

    assert write.outcome == conflict


def test_a_queued_write_withdrawn_by_its_caller_is_never_made():
    batches = Batches(8)
    first, second, third = queued(batches, 3)

    assert batches.withdraw(second) is True

    assert second.stage == "withdrawn"
    assert batches.next_batch() == [first, third]


def test_a_write_in_a_transaction_cannot_be_withdrawn_and_is_not_retried_for_a_caller_who_left():
    batches = Batches(8)
    (write,) = queued(batches, 1)
    batch = batches.next_batch()

    assert batches.withdraw(write) is False

    assert batches.settle(batch, [Failed(StoreError("deadlock"), conflict=True)], None) == [write]
    assert batches.waiting == 0


def test_a_settled_write_cannot_be_withdrawn():
    batches = Batches(8)
    (write,) = queued(batches, 1)
    batches.settle(batches.next_batch(), [Succeeded(1)], None)

    assert batches.withdraw(write) is False
    assert write.outcome == Succeeded(1)


def test_closed_batches_refuse_new_writes_but_still_batch_the_queued_ones():
    batches = Batches(8)
    writes = queued(batches, 2)

    batches.close()

    assert batches.closed
    assert batches.add(Pending(lambda db: None)) is False
    assert batches.next_batch() == writes


def test_queued_writes_can_be_failed_unmade_when_the_writer_is_gone():
    batches = Batches(8)
    running = queued(batches, 1)
    batches.next_batch()
    waiting = queued(batches, 2)

    dropped = batches.fail_queued(lambda: StoreError("gone"))

    assert dropped == waiting
    assert all(isinstance(w.outcome, Failed) and str(w.outcome.error) == "gone" for w in waiting)
    assert running[0].stage == "running"
    assert batches.waiting == 0


def test_an_error_that_cannot_be_copied_is_shared_rather_than_lost():
    error = StoreVersionError("newer", found=9, supported=3)

    assert own_copy(error) is error


def test_a_copied_error_keeps_its_attributes_and_cause():
    try:
        try:
            raise OSError("disk")
        except OSError as cause:
            raise StoreBusy("locked") from cause
    except StoreBusy as caught:
        error = caught

    copied = own_copy(error)

    assert copied is not error
    assert type(copied) is StoreBusy and copied.args == ("locked",)
    assert isinstance(copied.__cause__, OSError)
