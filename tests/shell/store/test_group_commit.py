"""Specification of group commit: the writes of all threads share transactions made by one writer, each
caller is answered only once its transaction has committed, with its own result or error; a transaction
that fails fails all its writes; a closed store refuses writes. The same for SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from sampler.messages import TextPart, UserMessage
from shell.store import (
    CompactionRejected,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    SessionRecord,
    SessionStore,
    StoreClosed,
    StoreError,
    open_store,
)
from tests.shell.store._holding import GATE, Calls, held_write_path, wait_until, writer_of


class Noted(msgspec.Struct, frozen=True, tag="noted"):
    text: str


def text(content: str) -> UserMessage:
    return UserMessage.of_text(content)


def contents(store: SessionStore, session_id: str) -> list[str]:
    out = []
    for stored in store.load_messages(session_id, include_replaced=True):
        assert isinstance(stored.message, UserMessage) and isinstance(stored.message.parts[0], TextPart)
        out.append(stored.message.parts[0].text)
    return out


def queue_behind_the_gate(store: SessionStore, calls: Calls, writes: dict[str, Callable[[], object]]) -> None:
    """Start a write of session GATE, which blocks on the held write path, then ``writes``, and return
    once they all wait for the next transaction."""
    writer = writer_of(store)
    calls.start("gate", lambda: store.append_message(GATE, 1, text("gate")))
    wait_until(lambda: writer.running == 1, "the gate's write is in a transaction")
    for name, write in writes.items():
        calls.start(name, write)
    wait_until(lambda: writer.waiting == len(writes), f"{len(writes)} writes wait for the next transaction")


def install_poison(target: Path | str) -> None:
    """Make a transaction that stores a message containing ``poison`` fail at its COMMIT, and only there: a
    deferred constraint, checked when the transaction commits."""
    if isinstance(target, Path):
        raw = sqlite3.connect(target)
        raw.executescript(
            """
            CREATE TABLE poison_marks (
                session_id TEXT REFERENCES sessions (id) DEFERRABLE INITIALLY DEFERRED
            );
            CREATE TRIGGER poison AFTER INSERT ON messages
            WHEN CAST(NEW.body AS TEXT) LIKE '%poison%'
            BEGIN INSERT INTO poison_marks VALUES ('no such session'); END;
            """
        )
        raw.close()
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as raw:
        raw.execute(
            """
            CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF convert_from(NEW.body, 'UTF8') LIKE '%poison%' THEN RAISE EXCEPTION 'poisoned'; END IF;
                RETURN NULL;
            END $$
            """
        )
        raw.execute(
            "CREATE CONSTRAINT TRIGGER poison AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED"
            " FOR EACH ROW EXECUTE FUNCTION poison()"
        )


# --- Concurrent writers -----------------------------------------------------------------------------------


def test_many_threads_appending_at_once_get_consecutive_seqs_and_every_append_is_stored(store_target):
    threads, sessions, per_thread = 40, 10, 25
    with open_store(store_target) as store:
        for n in range(sessions):
            store.create_session(f"s{n}", workspace="/w", model="m")
        acknowledged: list[tuple[str, int, str]] = []
        lock = threading.Lock()

        def append(thread: int) -> Callable[[], object]:
            def run() -> object:
                session_id = f"s{thread % sessions}"
                for n in range(per_thread):
                    content = f"t{thread}-{n}"
                    seq = store.append_message(session_id, 1, text(content))
                    with lock:
                        acknowledged.append((session_id, seq, content))
                return None

            return run

        calls = Calls()
        for thread in range(threads):
            calls.start(f"t{thread}", append(thread))
        assert set(calls.join().values()) == {None}

        per_session = threads // sessions * per_thread
        for n in range(sessions):
            stored = store.load_messages(f"s{n}")
            assert [s.seq for s in stored] == list(range(1, per_session + 1))
        stored_contents = {f"s{n}": contents(store, f"s{n}") for n in range(sessions)}
        for session_id, seq, content in acknowledged:
            assert stored_contents[session_id][seq - 1] == content
        assert len(acknowledged) == threads * per_thread
        assert writer_of(store).stats.writes >= threads * per_thread


def test_writes_that_wait_together_are_committed_in_one_transaction(store_target):
    with open_store(store_target, busy_timeout=30) as store:
        for session_id in [GATE, "a", "b"]:
            store.create_session(session_id, workspace="/w", model="m")
        writer = writer_of(store)
        before = writer.stats
        calls = Calls()
        with held_write_path(store_target) as release:
            queue_behind_the_gate(
                store,
                calls,
                {
                    f"w{n}": (lambda n=n: store.append_message("ab"[n % 2], 1, text(f"w{n}")))  # type: ignore[misc]
                    for n in range(20)
                },
            )
            release()
            outcomes = calls.join()

        after = writer.stats
        assert (after.commits - before.commits, after.writes - before.writes) == (2, 21)
        assert after.largest == 20
        assert outcomes["gate"] == 1
        assert sorted(outcomes[f"w{n}"] for n in range(0, 20, 2)) == list(range(1, 11))  # type: ignore[type-var]
        assert sorted(contents(store, "a")) == sorted(f"w{n}" for n in range(0, 20, 2))
        assert len(contents(store, "b")) == 10


def test_an_idle_store_commits_each_write_at_once_without_waiting_for_company(store_target):
    with open_store(store_target) as store:
        store.create_session("s", workspace="/w", model="m")
        writer = writer_of(store)
        before = writer.stats

        for n in range(5):
            assert store.append_message("s", 1, text(f"m{n}")) == n + 1

        assert writer.stats.commits - before.commits == 5


# --- Failures ---------------------------------------------------------------------------------------------


def test_a_write_that_fails_in_a_shared_transaction_fails_alone(store_target):
    with open_store(store_target, busy_timeout=30) as store:
        for session_id in [GATE, "s", "t", "done"]:
            store.create_session(session_id, workspace="/w", model="m")
        store.close_session("done")
        writer = writer_of(store)
        before = writer.stats
        calls = Calls()
        with held_write_path(store_target) as release:
            queue_behind_the_gate(
                store,
                calls,
                {
                    "first": lambda: store.append_message("s", 1, text("first")),
                    "unknown": lambda: store.append_message("nope", 1, text("x")),
                    "closed": lambda: store.append_message("done", 1, text("x")),
                    "rejected": lambda: store.apply_compaction("t", replaced=[99], summary=text("x"), turn=1),
                    "duplicate": lambda: store.create_session("s", workspace="/other", model="m"),
                    "created": lambda: store.create_session("fresh", workspace="/w", model="m"),
                    "turn": lambda: store.begin_turn("t", 3),
                    "event": lambda: store.append_event("t", 3, Noted("hello")),
                },
            )
            release()
            outcomes = calls.join()

        assert writer.stats.commits - before.commits == 2
        assert outcomes["first"] == 1
        assert isinstance(outcomes["unknown"], SessionNotFound)
        assert isinstance(outcomes["closed"], SessionClosed)
        assert isinstance(outcomes["rejected"], CompactionRejected)
        assert isinstance(outcomes["duplicate"], SessionExists)
        assert isinstance(outcomes["created"], SessionRecord) and outcomes["created"].id == "fresh"
        assert outcomes["turn"] is None
        assert outcomes["event"] == 1
        assert contents(store, "s") == ["first"]
        assert store.get_session("s").workspace == "/w"
        assert contents(store, "done") == []
        assert (store.get_session("t").status, store.get_session("t").current_turn) == ("in_turn", 3)
        assert [e.type for e in store.load_events("t")] == ["noted"]


def test_a_transaction_that_cannot_commit_fails_every_write_in_it_and_stores_none_of_them(store_target):
    with open_store(store_target, busy_timeout=30) as store:
        for session_id in [GATE, "s", "t"]:
            store.create_session(session_id, workspace="/w", model="m")
        install_poison(store_target)
        writer = writer_of(store)
        before = writer.stats
        calls = Calls()
        with held_write_path(store_target) as release:
            queue_behind_the_gate(
                store,
                calls,
                {
                    "good": lambda: store.append_message("s", 1, text("good")),
                    "poison": lambda: store.append_message("t", 1, text("poison")),
                    "created": lambda: store.create_session("fresh", workspace="/w", model="m"),
                    "turn": lambda: store.begin_turn("s", 2),
                },
            )
            release()
            outcomes = calls.join()

        assert outcomes["gate"] == 1
        failures = [outcomes[name] for name in ["good", "poison", "created", "turn"]]
        assert all(isinstance(failure, StoreError) for failure in failures)
        assert len({type(failure) for failure in failures}) == 1
        assert len({id(failure) for failure in failures}) == 4
        assert writer.stats.commits - before.commits == 1
        assert contents(store, "s") == [] and contents(store, "t") == []
        assert store.get_session("s").status == "idle"
        with pytest.raises(SessionNotFound):
            store.get_session("fresh")
        # The store goes on: the next transaction commits.
        assert store.append_message("s", 1, text("after")) == 1


# --- Closing ----------------------------------------------------------------------------------------------


def test_a_closed_store_refuses_writes_and_its_writer_thread_ends(store_target):
    store = open_store(store_target)
    store.create_session("s", workspace="/w", model="m")
    writer = writer_of(store)
    assert writer.alive

    store.close()

    assert not writer.alive
    with pytest.raises(StoreClosed, match="closed"):
        store.append_message("s", 1, text("late"))
    with pytest.raises(StoreClosed):
        store.create_session("t", workspace="/w", model="m")


def test_closing_makes_the_writes_already_queued_before_it_returns(store_target):
    store = open_store(store_target, busy_timeout=30)
    for session_id in [GATE, "s"]:
        store.create_session(session_id, workspace="/w", model="m")
    writer = writer_of(store)
    calls = Calls()
    with held_write_path(store_target) as release:
        queue_behind_the_gate(
            store,
            calls,
            {f"w{n}": (lambda n=n: store.append_message("s", 1, text(f"w{n}"))) for n in range(8)},
        )
        closing = threading.Thread(target=store.close)
        closing.start()
        wait_until(lambda: writer.closed, "the store refuses new writes")
        with pytest.raises(StoreClosed):
            store.append_message("s", 1, text("late"))
        release()
        closing.join(timeout=30)
        assert not closing.is_alive()

    outcomes = calls.join()
    assert sorted(outcomes[f"w{n}"] for n in range(8)) == list(range(1, 9))  # type: ignore[type-var]
    with open_store(store_target) as reopened:
        assert sorted(contents(reopened, "s")) == sorted(f"w{n}" for n in range(8))


# --- Without group commit ---------------------------------------------------------------------------------


def writer_threads() -> int:
    return sum(thread.name.startswith("store writer") for thread in threading.enumerate())


def test_without_group_commit_each_write_is_made_on_its_callers_thread(store_target):
    before = writer_threads()
    with open_store(store_target, group_commit=False) as store:
        assert not store.group_commit
        assert writer_threads() == before
        store.create_session("s", workspace="/w", model="m")
        calls = Calls()
        for n in range(8):
            calls.start(
                f"w{n}", lambda n=n: [store.append_message("s", 1, text(f"w{n}-{k}")) for k in range(5)]
            )
        calls.join()

        assert [s.seq for s in store.load_messages("s")] == list(range(1, 41))


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_group_commit_is_true_or_false(tmp_path, value):
    with pytest.raises(ValueError, match="group_commit"):
        open_store(tmp_path / "s.db", group_commit=value)
