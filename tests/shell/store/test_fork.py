"""Specification of forks and rewinds in the store: which messages a fork at turn K holds (a pure
decision, then on both backends), what else it copies, what it records of its parent, and what it refuses."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sampler.messages import AssistantMessage, ToolCall, ToolMessage, ToolResult, UserMessage
from shell import events as ev
from shell.store import (
    ForkRejected,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    SessionStore,
    TurnRunning,
    open_store,
)
from shell.store._fork import MessageRow, cut_history, fork_turn, last_converged_turn
from shell.store._schema import SCHEMA_VERSION, SQLITE_MIGRATIONS
from shell.usage import TokenUsage, TurnUsage

# --- The pure decisions -------------------------------------------------------------------------------------


def rows(*spec: tuple[int, int, int | None, bool]) -> list[MessageRow]:
    return [MessageRow(*row) for row in spec]


# Turn 1: seqs 1-3; turn 2: seqs 4-5, then a summary (6, of turn 1) replacing 1-2; turn 3: seqs 7-8, then a
# repair (9, of turn 2) replacing 4.
HISTORY = rows(
    (1, 1, 6, False),
    (2, 1, 6, False),
    (3, 1, None, False),
    (4, 2, 9, False),
    (5, 2, None, False),
    (6, 1, None, True),
    (7, 3, None, False),
    (8, 3, None, False),
    (9, 2, None, True),
)


def test_a_cut_keeps_what_was_stored_before_the_next_turn_began():
    assert cut_history(HISTORY, 0).rows(HISTORY) == []
    assert cut_history(HISTORY, 1).rows(HISTORY) == rows(
        (1, 1, None, False), (2, 1, None, False), (3, 1, None, False)
    )


def test_a_compaction_made_in_the_turn_is_kept_and_one_made_later_undone():
    # The summary 6 was made in turn 2 although its turn is 1: the cut after turn 2 keeps it, the cut after
    # turn 1 gives the originals back.
    assert cut_history(HISTORY, 2).rows(HISTORY) == rows(
        (1, 1, 6, False),
        (2, 1, 6, False),
        (3, 1, None, False),
        (4, 2, None, False),
        (5, 2, None, False),
        (6, 1, None, True),
    )
    assert cut_history(HISTORY, 3).rows(HISTORY) == HISTORY
    assert cut_history(HISTORY, 3).boundary is None


def test_a_cut_does_not_depend_on_the_rows_order():
    assert cut_history(list(reversed(HISTORY)), 2) == cut_history(HISTORY, 2)


def test_the_fork_turn_is_the_last_converged_one_unless_asked():
    assert last_converged_turn("idle", 5) == 5
    assert last_converged_turn("in_turn", 5) == 4
    assert last_converged_turn("archived", 5) == 5
    assert fork_turn("s", "idle", 5, None) == 5
    assert fork_turn("s", "in_turn", 5, None) == 4
    assert fork_turn("s", "idle", 5, 0) == 0


@pytest.mark.parametrize(
    ("status", "turn", "asked", "message"),
    [
        ("idle", 5, -1, "turns are numbered from 0"),
        ("idle", 5, 6, "its last converged turn is 5$"),
        ("in_turn", 5, 5, "its last converged turn is 4; turn 5 is still running"),
        ("idle", 5, 2.0, "must be a whole number"),
        ("idle", 5, True, "must be a whole number"),
    ],
)
def test_a_fork_turn_out_of_range_is_refused_by_name(status, turn, asked, message):
    with pytest.raises(ForkRejected, match=message) as caught:
        fork_turn("s", status, turn, asked)
    assert isinstance(caught.value, ValueError)
    assert caught.value.last_turn == last_converged_turn(status, turn)


# --- On both backends ---------------------------------------------------------------------------------------


@pytest.fixture
def store(store_target: Path | str) -> Iterator[SessionStore]:
    with open_store(store_target) as opened:
        yield opened


def call(turn: int) -> ToolCall:
    return ToolCall(f"c{turn}", "read_file", f'{{"path": "f{turn}"}}')


def usage(turn: int) -> TurnUsage:
    return TurnUsage(model="m", steps=TokenUsage(input_tokens=10 * turn, output_tokens=turn, reported=1))


def run_turn(store: SessionStore, turn: int, *, compact: list[int] | None = None) -> None:
    """A turn with a tool call and its result, compacting ``compact`` (seqs) after its prompt."""
    store.start_turn("src", turn, UserMessage.of_text(f"prompt {turn}"))
    store.append_event("src", turn, ev.TurnStarted("src", turn, f"prompt {turn}"))
    if compact:
        store.apply_compaction(
            "src", replaced=compact, summary=AssistantMessage(f"summary in {turn}"), turn=1
        )
    store.append_message("src", turn, AssistantMessage("", (call(turn),)))
    store.append_message("src", turn, ToolMessage(ToolResult(f"c{turn}", f"content {turn}")))
    store.append_message("src", turn, AssistantMessage(f"answer {turn}"))
    store.finish_turn("src", turn, ev.TurnCompleted("src", turn, f"answer {turn}", 2, usage(turn)))


def dump(store: SessionStore, session_id: str) -> list[Any]:
    return [
        (m.seq, m.turn, m.message, m.replaced_by, m.is_summary)
        for m in store.load_messages(session_id, include_replaced=True)
    ]


def projection(store: SessionStore, session_id: str) -> list[Any]:
    return [(m.seq, m.message) for m in store.load_messages(session_id)]


@pytest.fixture
def five_turns(store: SessionStore) -> dict[int, tuple[list[Any], list[Any]]]:
    """Five turns, turn 4 compacting turn 1 and turn 5 compacting turns 2-3; what the store held (every
    message, and the projection) at the end of each turn."""
    store.create_session("src", workspace="/work", model="m", meta={"k": "v"})
    store.set_learned_window("src", 5000)
    seen = {0: (dump(store, "src"), projection(store, "src"))}
    for turn in range(1, 6):
        compact = {4: [1, 2, 3, 4], 5: [5, 6, 7, 8, 9, 10, 11, 12]}.get(turn)
        run_turn(store, turn, compact=compact)
        seen[turn] = (dump(store, "src"), projection(store, "src"))
    return seen


def test_a_fork_at_each_turn_has_the_history_as_it_was_at_that_turns_end(store, five_turns):
    before = (dump(store, "src"), store.load_events("src"), store.turn_usage("src"), store.get_session("src"))
    for k in range(6):
        record = store.fork_session("src", f"f{k}", at_turn=k)

        assert (record.current_turn, record.status, record.forked_from) == (k, "idle", ("src", k))
        assert (record.workspace, record.model, record.meta, record.learned_window) == (
            "/work",
            "m",
            {"k": "v"},
            5000,
        )
        assert dump(store, f"f{k}") == five_turns[k][0]
        assert projection(store, f"f{k}") == five_turns[k][1]
    assert (
        dump(store, "src"),
        store.load_events("src"),
        store.turn_usage("src"),
        store.get_session("src"),
    ) == before


def test_a_fork_before_a_later_compaction_has_the_originals(store, five_turns):
    store.fork_session("src", "f3", at_turn=3)

    texts = [m.message for m in store.load_messages("f3")]
    assert not any(isinstance(m, AssistantMessage) and m.text.startswith("summary") for m in texts)
    assert texts[0] == UserMessage.of_text("prompt 1")
    assert all(m.replaced_by is None for m in store.load_messages("f3", include_replaced=True))
    # The source still has them replaced.
    assert store.load_messages("src")[0].message == AssistantMessage("summary in 4")


def test_a_fork_copies_the_events_and_usage_of_its_turns_naming_itself(store, five_turns):
    store.fork_session("src", "f2", at_turn=2)

    events = store.load_events("f2")
    assert [(e.seq, e.turn, e.type) for e in events] == [
        (1, 1, "TurnStarted"),
        (2, 1, "TurnCompleted"),
        (3, 2, "TurnStarted"),
        (4, 2, "TurnCompleted"),
    ]
    decoded = [msgspec.json.decode(e.body, type=ev.SessionEvent) for e in events]
    assert all(event.session == "f2" for event in decoded)
    assert decoded[1] == ev.TurnCompleted("f2", 1, "answer 1", 2, usage(1))
    assert [(u.turn, u.usage) for u in store.turn_usage("f2")] == [(1, usage(1)), (2, usage(2))]


def test_a_fork_without_a_turn_takes_every_converged_turn_and_continues_after_it(store, five_turns):
    record = store.fork_session("src", "all", workspace="/elsewhere")

    assert (record.current_turn, record.forked_from, record.workspace) == (5, ("src", 5), "/elsewhere")
    assert dump(store, "all") == five_turns[5][0]
    store.start_turn("all", 6, UserMessage.of_text("prompt 6"))
    assert store.load_messages("all")[-1].seq == len(five_turns[5][0]) + 1
    assert len(store.load_messages("src", include_replaced=True)) == len(five_turns[5][0])


def test_an_empty_fork_at_turn_0(store, five_turns):
    record = store.fork_session("src", "empty", at_turn=0)

    assert record.current_turn == 0
    assert (dump(store, "empty"), store.load_events("empty"), store.turn_usage("empty")) == ([], [], [])


def test_a_fork_of_a_session_in_a_turn_is_taken_at_its_last_converged_turn(store, five_turns):
    store.start_turn("src", 6, UserMessage.of_text("prompt 6"))
    store.append_message("src", 6, AssistantMessage("", (call(6),)))

    record = store.fork_session("src", "mid")

    assert (record.current_turn, record.forked_from) == (5, ("src", 5))
    assert dump(store, "mid") == five_turns[5][0]
    with pytest.raises(ForkRejected, match="last converged turn is 5; turn 6 is still running"):
        store.fork_session("src", "late", at_turn=6)


def test_a_fork_refuses_a_turn_out_of_range_and_a_taken_id(store, five_turns):
    with pytest.raises(ForkRejected, match="last converged turn is 5"):
        store.fork_session("src", "x", at_turn=6)
    with pytest.raises(ForkRejected, match="numbered from 0"):
        store.fork_session("src", "x", at_turn=-1)
    store.create_session("taken", workspace="/w", model="m")
    with pytest.raises(SessionExists):
        store.fork_session("src", "taken", at_turn=1)
    with pytest.raises(SessionNotFound):
        store.fork_session("nobody", "x")
    assert [r.id for r in store.list_sessions()] == ["src", "taken"]


def test_a_rewind_forks_and_archives_the_source_at_once(store, five_turns):
    record = store.rewind_session("src", "back", to_turn=2)

    assert (record.current_turn, record.forked_from, record.status) == (2, ("src", 2), "idle")
    assert dump(store, "back") == five_turns[2][0]
    assert store.get_session("src").status == "archived"
    assert dump(store, "src") == five_turns[5][0]
    with pytest.raises(SessionArchived, match="archived"):
        store.start_turn("src", 6, UserMessage.of_text("again"))
    with pytest.raises(SessionArchived, match="archived already"):
        store.rewind_session("src", "back2", to_turn=1)
    # An archived session can still be forked, and taken out of the archive.
    assert store.fork_session("src", "copy", at_turn=1).forked_from == ("src", 1)
    assert store.unarchive_session("src").status == "idle"
    store.start_turn("src", 6, UserMessage.of_text("again"))


def test_a_rewind_is_refused_while_a_turn_runs_and_changes_nothing(store, five_turns):
    store.start_turn("src", 6, UserMessage.of_text("prompt 6"))

    with pytest.raises(TurnRunning, match="turn 6 running") as caught:
        store.rewind_session("src", "back", to_turn=2)

    assert (caught.value.session_id, caught.value.turn) == ("src", 6)
    assert store.get_session("src").status == "in_turn"
    assert [r.id for r in store.list_sessions()] == ["src"]


def test_a_rewind_of_a_closed_session_is_refused(store, five_turns):
    store.close_session("src")

    with pytest.raises(SessionClosed, match="fork it instead"):
        store.rewind_session("src", "back", to_turn=2)
    assert store.fork_session("src", "f", at_turn=2).current_turn == 2


def test_a_failed_fork_stores_nothing_of_itself(store, five_turns, monkeypatch):
    from shell.store import _fork

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("copy failed")

    monkeypatch.setattr(_fork, "copy_fork", broken)
    with pytest.raises(RuntimeError, match="copy failed"):
        store.rewind_session("src", "back", to_turn=2)

    assert [r.id for r in store.list_sessions()] == ["src"]
    assert store.get_session("src").status == "idle"


def test_a_fork_taken_while_the_source_appends_is_at_a_turn_boundary(store_target):
    """Forks taken from another thread while turns are written: each fork holds whole turns only, a
    prefix of the source's history, with every tool call answered."""
    with open_store(store_target) as writer, open_store(store_target) as reader:
        writer.create_session("src", workspace="/w", model="m")
        forks: list[str] = []
        stop = threading.Event()

        def fork_repeatedly() -> None:
            while not stop.is_set():
                name = f"f{len(forks)}"
                reader.fork_session("src", name)
                forks.append(name)

        thread = threading.Thread(target=fork_repeatedly)
        thread.start()
        try:
            for turn in range(1, 16):
                run_turn(writer, turn)
        finally:
            stop.set()
            thread.join(60)
        full = dump(writer, "src")
        assert forks
        for name in forks:
            record = reader.get_session(name)
            mine = dump(reader, name)
            assert mine == full[: 4 * record.current_turn]
            assert [e.turn for e in reader.load_events(name)] == [
                t for t in range(1, record.current_turn + 1) for _ in (0, 1)
            ]


def test_a_version_3_sqlite_store_is_upgraded_and_its_sessions_have_no_parent(tmp_path):
    path = tmp_path / "v3.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for version in SQLITE_MIGRATIONS[:3]:
        for statement in version:
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 3")
    raw.execute(
        "INSERT INTO sessions (id, created_at, updated_at, workspace, model) VALUES ('old', 1, 2, '/w', 'm')"
    )
    raw.close()

    with open_store(path) as store:
        assert store.get_session("old").forked_from is None
        assert store.fork_session("old", "new").forked_from == ("old", 0)

    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert raw.execute("SELECT forked_from, forked_at_turn FROM sessions WHERE id = 'new'").fetchone() == (
        "old",
        0,
    )
    raw.close()


def test_a_version_3_postgresql_store_is_upgraded_and_its_sessions_have_no_parent(
    postgres_store_url, postgres_admin, postgres_schema
):
    from shell.store._schema import POSTGRES_MIGRATIONS

    postgres_admin.execute(f'SET search_path TO "{postgres_schema}"')
    try:
        for version in POSTGRES_MIGRATIONS[:3]:
            for statement in version:
                postgres_admin.execute(statement)
        postgres_admin.execute("UPDATE turnkeep_store SET schema_version = 3")
        postgres_admin.execute(
            "INSERT INTO sessions (id, created_at, updated_at, workspace, model)"
            " VALUES ('old', 1, 2, '/w', 'm')"
        )
    finally:
        postgres_admin.execute("SET search_path TO DEFAULT")

    with open_store(postgres_store_url) as store:
        assert store.get_session("old").forked_from is None
        assert store.fork_session("old", "new").forked_from == ("old", 0)
    version = postgres_admin.execute(
        f'SELECT schema_version FROM "{postgres_schema}".turnkeep_store'
    ).fetchone()
    assert version == (SCHEMA_VERSION,)
