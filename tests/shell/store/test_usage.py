"""The store keeps each ended turn's usage, in SQLite and PostgreSQL alike, with the event that ended it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shell import events as ev
from shell.store import SessionNotFound, SessionStore, TurnUsageRecord, open_store
from shell.usage import TokenUsage, TurnUsage

STEPS = TokenUsage(input_tokens=1200, output_tokens=80, cached_tokens=1000, reasoning_tokens=12, reported=3)
SUMMARY = TokenUsage(input_tokens=900, output_tokens=60, reported=1)
USAGE = TurnUsage(model="m", steps=STEPS, compaction=SUMMARY, cost=0.0125)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        target: Path | str = tmp_path / "sessions.db"
    else:
        target = str(request.getfixturevalue("postgres_store_url"))
    with open_store(target) as opened:
        opened.create_session("s", workspace="/work", model="m")
        yield opened


def test_the_event_that_ends_a_turn_records_its_usage(store: SessionStore) -> None:
    store.append_event("s", 1, ev.TurnStarted("s", 1, "go"))
    store.append_event("s", 1, ev.TurnCompleted("s", 1, "done", 2, USAGE))
    (record,) = store.turn_usage("s")
    assert isinstance(record, TurnUsageRecord)
    assert (record.turn, record.outcome, record.usage) == (1, "completed", USAGE)
    assert record.ended_at > 0


def test_failed_and_cancelled_turns_are_recorded_with_their_outcome_and_no_cost_without_a_price(
    store: SessionStore,
) -> None:
    unpriced = TurnUsage(model="m", steps=STEPS)
    store.append_event("s", 1, ev.TurnFailed("s", 1, "overloaded", "try later", unpriced))
    store.append_event("s", 2, ev.TurnCancelled("s", 2, "user_cancelled", unpriced))
    records = store.turn_usage("s")
    assert [(r.turn, r.outcome, r.usage.cost) for r in records] == [
        (1, "failed", None),
        (2, "cancelled", None),
    ]


def test_a_turn_ended_again_keeps_only_its_last_usage(store: SessionStore) -> None:
    store.append_event("s", 1, ev.TurnCancelled("s", 1, "interrupted"))
    store.append_event("s", 1, ev.TurnCompleted("s", 1, "done", 1, USAGE))
    assert [r.usage for r in store.turn_usage("s")] == [USAGE]


def test_usage_by_session_groups_every_sessions_turns(store: SessionStore) -> None:
    store.create_session("t", workspace="/work", model="m")
    store.append_event("s", 1, ev.TurnCompleted("s", 1, "a", 1, USAGE))
    store.append_event("t", 1, ev.TurnCompleted("t", 1, "b", 1, USAGE))
    store.append_event("t", 2, ev.TurnCompleted("t", 2, "c", 1, USAGE))
    grouped = store.usage_by_session()
    assert {key: [r.turn for r in records] for key, records in grouped.items()} == {"s": [1], "t": [1, 2]}


def test_the_usage_of_an_unknown_session_is_an_error(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.turn_usage("nobody")


def test_other_events_record_no_usage(store: SessionStore) -> None:
    store.append_event("s", 1, ev.TurnStarted("s", 1, "go"))
    store.append_event("s", 1, ev.ToolCallStarted("s", 1, "c1", "shell", "{}"))
    assert store.turn_usage("s") == []
