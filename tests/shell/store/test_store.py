"""Specification of the session store: sessions, history and projection, events, turns, durability,
schema versions, corruption, secrets and concurrent use — the same for a SQLite file and a PostgreSQL
database, then what is particular to each backend and to choosing one."""

from __future__ import annotations

import socket
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sampler.messages import AssistantMessage, ImagePart, SystemMessage, TextPart, ToolCall, UserMessage
from shell import events as ev
from shell.store import (
    CompactionRejected,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    SessionRecord,
    SessionStore,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    StoreVersionError,
    open_store,
)
from shell.store._schema import SCHEMA_VERSION
from shell.usage import TokenUsage, TurnUsage
from tests._postgres import with_options

ANTHROPIC_KEY = "sk-ant-api03-Zx9Qm2Lk7Wv4Rt8Yp1Bn6Hc3Jd5Fg0Sa"


class TurnStarted(msgspec.Struct, frozen=True, tag=True):
    prompt: str


class Retrying(msgspec.Struct, frozen=True, tag="retrying"):
    attempt: int
    detail: str = ""


class Untagged(msgspec.Struct, frozen=True):
    value: int


def text(n: int) -> UserMessage:
    return UserMessage.of_text(f"m{n}")


def texts(store: SessionStore, session_id: str, **options: bool) -> list[str]:
    out = []
    for stored in store.load_messages(session_id, **options):
        message = stored.message
        if isinstance(message, AssistantMessage):
            out.append(message.text)
        else:
            assert isinstance(message, UserMessage) and isinstance(message.parts[0], TextPart)
            out.append(message.parts[0].text)
    return out


# --- Backends: what the shared specification runs against --------------------------------------------------


class SqliteRaw:
    """Direct access to a store file, behind the store's back."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def execute(self, sql: str, *params: object) -> None:
        raw = sqlite3.connect(self.path)
        try:
            raw.execute(sql, params)
            raw.commit()
        finally:
            raw.close()

    def scalar(self, sql: str) -> Any:
        raw = sqlite3.connect(self.path)
        try:
            return raw.execute(sql).fetchone()[0]
        finally:
            raw.close()

    def content(self) -> bytes:
        """Every byte the store has written."""
        return b"".join(p.read_bytes() for p in (self.path, Path(f"{self.path}-wal")) if p.exists())


class PostgresRaw:
    """Direct access to a store's schema, behind the store's back; SQL with ``?`` placeholders."""

    def __init__(self, url: str) -> None:
        self.url = url

    def execute(self, sql: str, *params: object) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as raw:
            raw.execute(sql.replace("?", "%s"), params)

    def scalar(self, sql: str) -> Any:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as raw:
            row = raw.execute(sql).fetchone()
            assert row is not None
            return row[0]

    def content(self) -> bytes:
        """The name of every table of the schema, and every value of every row in it."""
        import psycopg

        out = []
        with psycopg.connect(self.url, autocommit=True) as raw:
            tables = raw.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
            ).fetchall()
            for (table,) in tables:
                out.append(f"table {table}".encode())
                for row in raw.execute(f'SELECT * FROM "{table}" ORDER BY 1, 2').fetchall():
                    out += [value if isinstance(value, bytes) else str(value).encode() for value in row]
        return b"\n".join(out)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.db"


@pytest.fixture
def target(backend: str, path: Path, request: pytest.FixtureRequest) -> Path | str:
    """Where a store of the backend under test is: a file path, or a URL with a fresh schema."""
    if backend == "sqlite":
        return path
    return str(request.getfixturevalue("postgres_store_url"))


@pytest.fixture
def raw(target: Path | str) -> SqliteRaw | PostgresRaw:
    return SqliteRaw(target) if isinstance(target, Path) else PostgresRaw(target)


@pytest.fixture
def store(target: Path | str) -> Iterator[SessionStore]:
    with open_store(target) as opened:
        opened.create_session("s", workspace="/work", model="m")
        yield opened


@pytest.fixture
def sqlite_store(path: Path) -> Iterator[SessionStore]:
    with open_store(path) as opened:
        opened.create_session("s", workspace="/work", model="m")
        yield opened


# --- Sessions ---------------------------------------------------------------------------------------------


def test_a_new_session_is_idle_at_turn_zero_with_its_metadata(target):
    with open_store(target) as store:
        record = store.create_session("a", workspace="/w", model="gpt", meta={"title": "hello", "n": 1})

        assert record == store.get_session("a")
        assert isinstance(record, SessionRecord)
        assert (record.id, record.workspace, record.model) == ("a", "/w", "gpt")
        assert (record.status, record.current_turn, record.learned_window) == ("idle", 0, None)
        assert record.meta == {"title": "hello", "n": 1}
        assert record.updated_at == record.created_at


def test_a_duplicate_session_id_is_refused(store):
    with pytest.raises(SessionExists, match="'s'"):
        store.create_session("s", workspace="/other", model="m")

    assert store.get_session("s").workspace == "/work"


def test_an_unknown_session_is_not_found_by_every_method(store):
    calls: list[Callable[[], object]] = [
        lambda: store.get_session("nope"),
        lambda: store.append_message("nope", 1, text(1)),
        lambda: store.load_messages("nope"),
        lambda: store.append_event("nope", 1, TurnStarted("x")),
        lambda: store.load_events("nope"),
        lambda: store.begin_turn("nope", 1),
        lambda: store.close_session("nope"),
    ]
    for call in calls:
        with pytest.raises(SessionNotFound, match="'nope'"):
            call()


def test_sessions_are_listed_oldest_first(target):
    with open_store(target) as store:
        for name in ("c", "a", "b"):
            store.create_session(name, workspace="/w", model="m")

        assert [record.id for record in store.list_sessions()] == ["c", "a", "b"]


def test_a_closed_session_stays_readable_but_takes_nothing_more(store):
    store.append_message("s", 1, text(1))

    store.close_session("s")
    store.close_session("s")

    assert store.get_session("s").status == "closed"
    assert texts(store, "s") == ["m1"]
    calls: list[Callable[[], object]] = [
        lambda: store.append_message("s", 1, text(2)),
        lambda: store.append_event("s", 1, TurnStarted("x")),
        lambda: store.begin_turn("s", 2),
        lambda: store.apply_compaction("s", replaced=[1], summary=AssistantMessage("sum"), turn=1),
    ]
    for call in calls:
        with pytest.raises(SessionClosed):
            call()


def test_the_learned_window_is_part_of_the_record(store):
    store.set_learned_window("s", 30000)

    assert store.get_session("s").learned_window == 30000
    with pytest.raises(ValueError, match="tokens"):
        store.set_learned_window("s", 0)


def test_writes_move_updated_at_forward(store):
    before = store.get_session("s").updated_at

    store.append_message("s", 1, text(1))

    assert store.get_session("s").updated_at >= before


# --- Messages and the projection --------------------------------------------------------------------------


def test_messages_get_dense_seqs_from_one_and_round_trip(store):
    messages = [
        SystemMessage("be brief"),
        UserMessage.of_text("hi"),
        AssistantMessage("", tool_calls=(ToolCall("c1", "read", '{"path": "a"}'),)),
        UserMessage((ImagePart("image/png", data="iVBORw0KGgo="),)),
    ]

    seqs = [store.append_message("s", 1, message) for message in messages]

    assert seqs == [1, 2, 3, 4]
    loaded = store.load_messages("s")
    assert [stored.message for stored in loaded] == messages
    assert [(s.seq, s.turn, s.replaced_by, s.is_summary) for s in loaded] == [
        (n, 1, None, False) for n in (1, 2, 3, 4)
    ]


def test_seqs_are_per_session(store):
    store.create_session("t", workspace="/w", model="m")

    assert store.append_message("s", 1, text(1)) == 1
    assert store.append_message("t", 1, text(1)) == 1
    assert store.append_message("s", 1, text(2)) == 2


def test_a_summary_takes_the_place_of_the_messages_it_replaces_in_the_projection(store):
    for n in range(1, 7):
        store.append_message("s", 1, text(n))

    seq = store.apply_compaction("s", replaced=[2, 3, 4], summary=AssistantMessage("summary"), turn=2)

    assert seq == 7
    assert texts(store, "s") == ["m1", "summary", "m5", "m6"]
    projection = store.load_messages("s")
    assert [(s.seq, s.is_summary) for s in projection] == [(1, False), (7, True), (5, False), (6, False)]


def test_messages_appended_after_a_compaction_follow_the_projection(store):
    for n in range(1, 4):
        store.append_message("s", 1, text(n))
    store.apply_compaction("s", replaced=[1, 2], summary=AssistantMessage("summary"), turn=1)

    store.append_message("s", 2, text(4))

    assert texts(store, "s") == ["summary", "m3", "m4"]


def test_compaction_never_deletes_the_record(store):
    for n in range(1, 5):
        store.append_message("s", 1, text(n))

    store.apply_compaction("s", replaced=[2, 3], summary=AssistantMessage("summary"), turn=1)

    everything = store.load_messages("s", include_replaced=True)
    assert [s.seq for s in everything] == [1, 2, 3, 4, 5]
    assert [s.replaced_by for s in everything] == [None, 5, 5, None, None]
    assert texts(store, "s", include_replaced=True) == ["m1", "m2", "m3", "m4", "summary"]


def test_a_summary_can_itself_be_compacted(store):
    for n in range(1, 6):
        store.append_message("s", 1, text(n))
    first = store.apply_compaction("s", replaced=[2, 3], summary=AssistantMessage("first"), turn=1)

    store.apply_compaction("s", replaced=[first, 4], summary=AssistantMessage("second"), turn=2)

    assert texts(store, "s") == ["m1", "second", "m5"]


@pytest.mark.parametrize(
    ("replaced", "reason"), [([], "at least one"), ([2, 9], "no message with seq \\[9\\]"), ([1], "already")]
)
def test_an_invalid_compaction_is_rejected_and_changes_nothing(store, replaced, reason):
    for n in range(1, 4):
        store.append_message("s", 1, text(n))
    store.apply_compaction("s", replaced=[1], summary=AssistantMessage("summary"), turn=1)
    before = store.load_messages("s", include_replaced=True)

    with pytest.raises(CompactionRejected, match=reason):
        store.apply_compaction("s", replaced=replaced, summary=AssistantMessage("again"), turn=2)

    assert store.load_messages("s", include_replaced=True) == before


# --- Events -----------------------------------------------------------------------------------------------


def test_events_are_stored_as_json_under_their_tag_or_class_name(store):
    seqs = [
        store.append_event("s", 1, TurnStarted("hi")),
        store.append_event("s", 1, Retrying(attempt=2)),
        store.append_event("s", 2, Untagged(5)),
    ]

    events = store.load_events("s")

    assert seqs == [1, 2, 3]
    assert [(e.seq, e.turn, e.type) for e in events] == [
        (1, 1, "TurnStarted"),
        (2, 1, "retrying"),
        (3, 2, "Untagged"),
    ]
    assert msgspec.json.decode(events[1].body, type=Retrying) == Retrying(attempt=2)
    assert all(isinstance(e.body, bytes) and e.created_at > 0 for e in events)


def test_events_can_be_read_from_a_seq_on(store):
    for n in range(5):
        store.append_event("s", 1, Untagged(n))

    assert [e.seq for e in store.load_events("s", since=3)] == [4, 5]


# --- Turns ------------------------------------------------------------------------------------------------


def test_a_turn_in_flight_is_in_turn_and_ending_it_makes_the_session_idle(store):
    store.begin_turn("s", 1)
    assert (store.get_session("s").status, store.get_session("s").current_turn) == ("in_turn", 1)
    assert store.interrupted_turn("s") == 1

    store.end_turn("s")

    assert (store.get_session("s").status, store.get_session("s").current_turn) == ("idle", 1)
    assert store.interrupted_turn("s") is None


def test_starting_a_turn_marks_it_in_flight_and_appends_its_prompt_together(store):
    store.append_message("s", 0, UserMessage((TextPart("before"),)))

    seq = store.start_turn("s", 1, UserMessage((TextPart("go on"),)))

    assert (store.get_session("s").status, store.get_session("s").current_turn) == ("in_turn", 1)
    assert seq == 2
    last = store.load_messages("s")[-1]
    assert (last.seq, last.turn, last.message) == (2, 1, UserMessage((TextPart("go on"),)))


def test_starting_a_turn_of_a_closed_session_stores_neither_the_turn_nor_the_prompt(store):
    store.close_session("s")

    with pytest.raises(SessionClosed):
        store.start_turn("s", 1, UserMessage((TextPart("go on"),)))

    assert store.get_session("s").current_turn == 0
    assert store.load_messages("s") == []


def test_finishing_a_turn_makes_the_session_idle_and_logs_the_end_with_its_usage_together(store):
    store.start_turn("s", 1, UserMessage((TextPart("go on"),)))
    usage = TurnUsage(model="m", steps=TokenUsage(input_tokens=12, output_tokens=3, reported=1))

    seq = store.finish_turn("s", 1, ev.TurnCompleted("s", 1, "done", 1, usage))

    assert store.get_session("s").status == "idle"
    assert [(e.seq, e.type) for e in store.load_events("s")] == [(seq, "TurnCompleted")]
    assert [(u.turn, u.outcome, u.usage) for u in store.turn_usage("s")] == [(1, "completed", usage)]


def test_finishing_a_turn_of_a_closed_session_stores_neither_the_end_nor_the_event(store):
    store.start_turn("s", 1, UserMessage((TextPart("go on"),)))
    store.close_session("s")

    with pytest.raises(SessionClosed):
        store.finish_turn("s", 1, ev.TurnCompleted("s", 1, "done", 1))

    assert store.load_events("s") == []
    assert store.turn_usage("s") == []


def test_a_turn_never_ended_is_detected_as_interrupted_after_reopening(target):
    with open_store(target) as store:
        store.create_session("s", workspace="/w", model="m")
        store.begin_turn("s", 1)
        store.end_turn("s")
        store.begin_turn("s", 2)

    with open_store(target) as store:
        assert store.interrupted_turn("s") == 2


# --- Durability and settings ------------------------------------------------------------------------------


def test_reopening_keeps_everything(target):
    with open_store(target) as store:
        store.create_session("s", workspace="/w", model="m", meta={"k": [1, 2]})
        for n in range(1, 4):
            store.append_message("s", 1, text(n))
        store.apply_compaction("s", replaced=[1], summary=AssistantMessage("summary"), turn=1)
        store.append_event("s", 1, TurnStarted("hi"))
        store.set_learned_window("s", 1000)
        record = store.get_session("s")
        messages = store.load_messages("s", include_replaced=True)
        events = store.load_events("s")

    with open_store(target) as store:
        assert store.get_session("s") == record
        assert store.load_messages("s", include_replaced=True) == messages
        assert store.load_events("s") == events
        assert texts(store, "s") == ["summary", "m2", "m3"]


def test_a_write_is_visible_to_another_store_as_soon_as_it_returns(target):
    with open_store(target) as writer, open_store(target) as reader:
        writer.create_session("s", workspace="/w", model="m")

        seq = writer.append_message("s", 1, text(1))

        assert [s.seq for s in reader.load_messages("s")] == [seq]


def test_invalid_open_options_are_refused(target):
    with pytest.raises(ValueError, match="synchronous"):
        open_store(target, synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="busy_timeout"):
        open_store(target, busy_timeout=-1)
    with pytest.raises(ValueError, match="pool_size"):
        open_store(target, pool_size=0)


def test_a_closed_store_refuses_use_and_closing_again_is_harmless(target):
    store = open_store(target)
    store.close()
    store.close()

    with pytest.raises(StoreClosed):
        store.list_sessions()


# --- Corruption -------------------------------------------------------------------------------------------


def test_an_undecodable_message_row_is_corrupt_naming_session_and_seq(store, raw):
    store.append_message("s", 1, text(1))
    raw.execute(
        "INSERT INTO messages (session_id, seq, turn, body, created_at, position)"
        " VALUES ('s', 2, 1, ?, 0, 2)",
        b"\x00garbage{",
    )

    with pytest.raises(StoreCorrupt, match="session 's', seq 2") as caught:
        store.load_messages("s")

    assert (caught.value.session_id, caught.value.seq) == ("s", 2)
    assert (caught.value.path, caught.value.location) == (store.path, store.location)
    assert raw.scalar("SELECT count(*) FROM messages") == 2


def test_a_message_row_of_the_wrong_shape_is_corrupt(store, raw):
    raw.execute(
        "INSERT INTO messages (session_id, seq, turn, body, created_at, position)"
        " VALUES ('s', 1, 1, ?, 0, 1)",
        b'{"type": "NoSuchMessage"}',
    )

    with pytest.raises(StoreCorrupt, match="seq 1"):
        store.load_messages("s", include_replaced=True)


def test_an_undecodable_session_row_is_corrupt_naming_the_session(store, raw):
    raw.execute("UPDATE sessions SET meta = 'not json' WHERE id = 's'")

    with pytest.raises(StoreCorrupt, match="session 's'") as caught:
        store.get_session("s")

    assert (caught.value.session_id, caught.value.seq) == ("s", None)


def test_every_store_error_is_a_store_error():
    for error in (
        StoreCorrupt,
        StoreVersionError,
        StoreBusy,
        StoreUnavailable,
        StoreTimeout,
        StoreClosed,
        SessionNotFound,
        SessionExists,
        SessionClosed,
        CompactionRejected,
    ):
        assert issubclass(error, StoreError)


# --- Secrets ----------------------------------------------------------------------------------------------


def test_a_key_in_a_message_or_event_never_reaches_the_database(store, raw):
    store.append_message("s", 1, UserMessage.of_text(f"here is my key {ANTHROPIC_KEY}"))
    store.append_message(
        "s",
        1,
        AssistantMessage("", tool_calls=(ToolCall("c", "http", f'{{"x-api-key": "{ANTHROPIC_KEY}"}}'),)),
    )
    store.append_event("s", 1, Retrying(attempt=1, detail=f"401 for Bearer {ANTHROPIC_KEY}"))
    store.create_session("t", workspace="/w", model="m", meta={"note": f"api_key={ANTHROPIC_KEY}"})

    assert b"here is my key [redacted]" in raw.content()
    assert ANTHROPIC_KEY.encode() not in raw.content()
    first, second = (stored.message for stored in store.load_messages("s"))
    assert first == UserMessage.of_text("here is my key [redacted]")
    assert isinstance(second, AssistantMessage)
    assert second.tool_calls[0].arguments == '{"x-api-key": "[redacted]"}'
    assert b"Bearer [redacted]" in store.load_events("s")[0].body

    store.close()
    assert ANTHROPIC_KEY.encode() not in raw.content()


def test_image_data_is_stored_unchanged(store):
    # Base64 that happens to look like an AWS key id between "+" signs.
    image = ImagePart("image/png", data="ab+AKIAIOSFODNN7EXAMPLE+cd")
    store.append_message("s", 1, UserMessage((image,)))

    assert store.load_messages("s")[0].message == UserMessage((image,))


# --- Concurrency ------------------------------------------------------------------------------------------


def run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            start.wait()
            try:
                target()
            except BaseException as error:
                errors.append(error)

        return run

    threads = [threading.Thread(target=wrap(target)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def appender(store: SessionStore, session_id: str, count: int, seqs: list[int]) -> Callable[[], None]:
    def run() -> None:
        for n in range(count):
            seqs.append(store.append_message(session_id, 1, text(n)))
            if n % 5 == 0:
                store.append_event(session_id, 1, Untagged(n))

    return run


def test_many_threads_append_without_locking_errors_and_seqs_stay_unique_and_dense(target):
    per_thread = 40
    with open_store(target) as store:
        names = [f"s{n}" for n in range(8)] + ["shared"]
        for name in names:
            store.create_session(name, workspace="/w", model="m")
        seqs: dict[str, list[int]] = {name: [] for name in names}
        targets = [appender(store, f"s{n}", per_thread, seqs[f"s{n}"]) for n in range(8)]
        targets += [appender(store, "shared", per_thread, seqs["shared"]) for _ in range(2)]

        errors = run_threads(targets)

        assert errors == []
        for name in names:
            expected = per_thread * (2 if name == "shared" else 1)
            assert sorted(seqs[name]) == list(range(1, expected + 1))
            assert [s.seq for s in store.load_messages(name)] == list(range(1, expected + 1))
            assert [e.seq for e in store.load_events(name)] == list(range(1, expected // 5 + 1))


def test_two_stores_on_one_database_wait_for_each_other_instead_of_failing(target):
    with open_store(target) as first, open_store(target) as second:
        first.create_session("shared", workspace="/w", model="m")
        seqs: list[int] = []
        targets = [appender(store, "shared", 30, seqs) for store in (first, second, first, second)]

        errors = run_threads(targets)

        assert errors == []
        assert sorted(seqs) == list(range(1, 121))


def test_concurrent_creates_of_one_session_id_make_one_session(target):
    outcomes: list[str] = []
    with open_store(target) as first, open_store(target) as second:

        def create(store: SessionStore) -> Callable[[], None]:
            def run() -> None:
                try:
                    store.create_session("one", workspace="/w", model="m")
                    outcomes.append("created")
                except SessionExists:
                    outcomes.append("exists")

            return run

        errors = run_threads([create(store) for store in (first, second, first, second)])

        assert errors == []
        assert sorted(outcomes) == ["created", "exists", "exists", "exists"]
        assert [record.id for record in first.list_sessions()] == ["one"]


def test_closing_while_threads_append_keeps_every_acknowledged_write_and_refuses_the_rest(target):
    store = open_store(target)
    store.create_session("s", workspace="/w", model="m")
    acknowledged: list[int] = []
    outcomes: list[str] = []
    enough = threading.Event()

    def append_until_closed() -> None:
        try:
            while True:
                acknowledged.append(store.append_message("s", 1, text(0)))
                if len(acknowledged) >= 40:
                    enough.set()
        except StoreClosed:
            outcomes.append("closed")
        except BaseException as error:
            outcomes.append(repr(error))

    threads = [threading.Thread(target=append_until_closed) for _ in range(4)]
    for thread in threads:
        thread.start()
    assert enough.wait(timeout=10)
    store.close()
    for thread in threads:
        thread.join(timeout=10)

    assert outcomes == ["closed"] * 4
    with open_store(target) as reopened:
        assert [s.seq for s in reopened.load_messages("s")] == sorted(acknowledged)


# --- Choosing a backend -----------------------------------------------------------------------------------


def test_a_plain_path_or_a_sqlite_url_opens_a_sqlite_file(tmp_path):
    for target, expected in [
        (str(tmp_path / "a.db"), tmp_path / "a.db"),
        (tmp_path / "b.db", tmp_path / "b.db"),
        (f"sqlite://{tmp_path}/c.db", tmp_path / "c.db"),
        (f"sqlite://{tmp_path}/with%20space.db", tmp_path / "with space.db"),
    ]:
        with open_store(target) as store:
            assert (store.backend, store.path, store.location) == ("sqlite", expected, str(expected))
        assert expected.is_file()


def test_session_store_open_takes_a_postgresql_url_too(postgres_store_url):
    with SessionStore.open(postgres_store_url) as store:
        assert (store.backend, store.path) == ("postgresql", None)


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("mysql://localhost/db", "unsupported store URL scheme 'mysql'"),
        ("sqlite://", "needs a path"),
        ("sqlite:///tmp/s.db?mode=ro", "path only"),
        (Path("postgresql://localhost/db"), "went through Path"),
        (Path("sqlite:///tmp/s.db"), "went through Path"),
    ],
)
def test_a_target_that_names_no_backend_clearly_is_refused(target, reason):
    with pytest.raises(ValueError, match=reason):
        open_store(target)


def test_a_postgresql_url_without_psycopg_installed_is_a_store_error_saying_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "shell.store._postgres", raising=False)

    with pytest.raises(StoreError, match=r"turnkeep\[postgres\]"):
        open_store("postgresql://127.0.0.1/db")


def test_the_pool_size_is_an_option_of_postgresql_only(path):
    with pytest.raises(ValueError, match="PostgreSQL stores only"):
        open_store(path, pool_size=2)

    assert not path.exists()


# --- SQLite ---------------------------------------------------------------------------------------------


def test_a_sqlite_store_creates_its_file_and_parent_directories(path):
    with SessionStore.open(path) as store:
        assert store.path == path

    assert path.is_file()


def test_the_file_is_in_wal_mode(sqlite_store, path):
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        raw.close()


@pytest.mark.parametrize(("synchronous", "level"), [("NORMAL", 1), ("FULL", 2)])
def test_sqlite_synchronous_is_normal_by_default_and_full_on_request(path, synchronous, level):
    options = {} if synchronous == "NORMAL" else {"synchronous": synchronous}
    # synchronous is a per-connection setting, so only the store's own connection can tell.
    with SessionStore.open(path, **options) as store, store._backend.read() as db:
        assert db.query("PRAGMA synchronous") == [(level,)]


def test_a_write_lock_held_too_long_by_another_process_is_store_busy(path):
    with SessionStore.open(path, busy_timeout=0.05) as store:
        store.create_session("s", workspace="/w", model="m")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusy):
                store.append_message("s", 1, text(1))
        finally:
            other.execute("ROLLBACK")
            other.close()

        assert store.append_message("s", 1, text(1)) == 1


def test_an_event_row_of_the_wrong_shape_is_corrupt_naming_session_and_seq(sqlite_store, path):
    # SQLite columns take a value of any type; PostgreSQL ones refuse it on the way in.
    SqliteRaw(path).execute("INSERT INTO events VALUES ('s', 1, 1, 'X', 12345, 0)")

    with pytest.raises(StoreCorrupt, match="session 's', seq 1"):
        sqlite_store.load_events("s")


VERSION_1 = [
    """CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        workspace TEXT NOT NULL, model TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'idle',
        current_turn INTEGER NOT NULL DEFAULT 0, meta TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE messages (session_id TEXT NOT NULL REFERENCES sessions (id), seq INTEGER NOT NULL,
        turn INTEGER NOT NULL, body BLOB NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq))""",
    """CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions (id), seq INTEGER NOT NULL,
        turn INTEGER NOT NULL, type TEXT NOT NULL, body BLOB NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq))""",
    "PRAGMA user_version = 1",
]


def make_version_1_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = sqlite3.connect(path)
    for statement in VERSION_1:
        raw.execute(statement)
    raw.execute("INSERT INTO sessions VALUES ('old', 1.0, 2.0, '/w', 'm', 'in_turn', 3, '{\"a\": 1}')")
    for seq in (1, 2, 3):
        body = msgspec.json.encode(text(seq))
        raw.execute("INSERT INTO messages VALUES ('old', ?, 3, ?, 1.5)", (seq, body))
    raw.execute("INSERT INTO events VALUES ('old', 1, 3, 'TurnStarted', ?, 1.6)", (b'{"prompt":"x"}',))
    raw.commit()
    raw.close()


def assert_version_1_content_is_kept(store: SessionStore) -> None:
    record = store.get_session("old")
    assert (record.status, record.current_turn, record.learned_window, record.meta) == (
        "in_turn",
        3,
        None,
        {"a": 1},
    )
    assert texts(store, "old") == ["m1", "m2", "m3"]
    assert [e.type for e in store.load_events("old")] == ["TurnStarted"]
    store.apply_compaction("old", replaced=[1, 2], summary=AssistantMessage("summary"), turn=3)
    assert texts(store, "old") == ["summary", "m3"]


def test_a_version_1_file_is_migrated_and_keeps_its_content(path):
    make_version_1_file(path)

    with SessionStore.open(path) as store:
        assert_version_1_content_is_kept(store)

    assert SqliteRaw(path).scalar("PRAGMA user_version") == SCHEMA_VERSION


def test_a_migration_that_fails_is_rolled_back_entirely(path):
    make_version_1_file(path)
    # A column version 2 adds, already there: the migration fails after its first statement.
    SqliteRaw(path).execute("ALTER TABLE messages ADD COLUMN is_summary INTEGER")

    with pytest.raises(StoreCorrupt, match="cannot be migrated to schema version 2"):
        SessionStore.open(path)

    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA user_version").fetchone() == (1,)
        columns = [row[1] for row in raw.execute("PRAGMA table_info(messages)")]
        assert "replaced_by" not in columns
        assert raw.execute("SELECT count(*) FROM messages").fetchone() == (3,)
    finally:
        raw.close()


def test_a_file_from_a_newer_schema_is_refused_and_left_untouched(path):
    with SessionStore.open(path):
        pass
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    before = path.read_bytes()

    with pytest.raises(StoreVersionError, match="99") as caught:
        SessionStore.open(path)

    assert (caught.value.found, caught.value.supported) == (99, SCHEMA_VERSION)
    assert path.read_bytes() == before


def test_a_file_that_is_not_sqlite_is_corrupt_and_left_untouched(path):
    path.parent.mkdir(parents=True)
    garbage = b"this is not a database\n" * 100
    path.write_bytes(garbage)

    with pytest.raises(StoreCorrupt, match="not a SQLite database") as caught:
        SessionStore.open(path)

    assert caught.value.path == path
    assert str(path) in str(caught.value)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_sqlite_file_of_another_application_is_refused_and_left_untouched(path):
    path.parent.mkdir(parents=True)
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE accounts (id INTEGER)")
    raw.commit()
    raw.close()
    before = path.read_bytes()

    with pytest.raises(StoreCorrupt, match="not a session store"):
        SessionStore.open(path)

    assert path.read_bytes() == before


# --- PostgreSQL -------------------------------------------------------------------------------------------

PG_VERSION_1 = [
    "CREATE TABLE turnkeep_store (application TEXT NOT NULL, schema_version INTEGER NOT NULL)",
    "INSERT INTO turnkeep_store VALUES ('turnkeep', 1)",
    """CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, workspace TEXT NOT NULL, model TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'idle', current_turn BIGINT NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}')""",
    """CREATE TABLE messages (session_id TEXT NOT NULL REFERENCES sessions (id), seq BIGINT NOT NULL,
        turn BIGINT NOT NULL, body BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, seq))""",
    """CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions (id), seq BIGINT NOT NULL,
        turn BIGINT NOT NULL, type TEXT NOT NULL, body BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, seq))""",
    "INSERT INTO sessions VALUES ('old', 1.0, 2.0, '/w', 'm', 'in_turn', 3, '{\"a\": 1}')",
    "INSERT INTO events VALUES ('old', 1, 3, 'TurnStarted', '{\"prompt\":\"x\"}'::bytea, 1.6)",
]


@pytest.fixture
def pg(postgres_store_url: str) -> PostgresRaw:
    return PostgresRaw(postgres_store_url)


def make_version_1_schema(pg: PostgresRaw) -> None:
    for statement in PG_VERSION_1:
        pg.execute(statement)
    for seq in (1, 2, 3):
        pg.execute("INSERT INTO messages VALUES ('old', ?, 3, ?, 1.5)", seq, msgspec.json.encode(text(seq)))


def pg_columns(pg: PostgresRaw, table: str) -> list[str]:
    names = pg.scalar(
        "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns"
        f" WHERE table_schema = current_schema() AND table_name = '{table}'"
    )
    return str(names or "").split(",")


def test_a_postgresql_store_creates_its_tables_in_the_current_schema(postgres_store_url, postgres_schema, pg):
    with open_store(postgres_store_url) as store:
        assert (store.backend, store.path) == ("postgresql", None)
        assert postgres_schema in store.location

    assert pg.scalar("SELECT schema_version FROM turnkeep_store") == SCHEMA_VERSION
    assert (
        pg.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == 5
    )  # turn_usage too


def test_a_postgresql_store_in_a_fresh_database_uses_its_public_schema(postgres_url, postgres_admin):
    postgres_admin.execute("CREATE DATABASE fresh")
    url = postgres_url.rsplit("/", 1)[0] + "/fresh"

    with open_store(url) as store:
        store.create_session("s", workspace="/w", model="m")

    assert PostgresRaw(url).scalar("SELECT count(*) FROM public.sessions") == 1


def test_a_postgresql_version_1_schema_is_migrated_and_keeps_its_content(postgres_store_url, pg):
    make_version_1_schema(pg)

    with open_store(postgres_store_url) as store:
        assert_version_1_content_is_kept(store)

    assert pg.scalar("SELECT schema_version FROM turnkeep_store") == SCHEMA_VERSION


def test_a_postgresql_migration_that_fails_is_rolled_back_entirely(postgres_store_url, pg):
    make_version_1_schema(pg)
    pg.execute("ALTER TABLE messages ADD COLUMN is_summary INTEGER")

    with pytest.raises(StoreCorrupt, match="cannot be migrated to schema version 2"):
        open_store(postgres_store_url)

    assert pg.scalar("SELECT schema_version FROM turnkeep_store") == 1
    assert "replaced_by" not in pg_columns(pg, "messages")
    assert "learned_window" not in pg_columns(pg, "sessions")
    assert pg.scalar("SELECT count(*) FROM messages") == 3


def test_a_postgresql_store_of_a_newer_schema_is_refused_and_left_untouched(postgres_store_url, pg):
    with open_store(postgres_store_url):
        pass
    pg.execute("UPDATE turnkeep_store SET schema_version = 99")
    before = pg.content()

    with pytest.raises(StoreVersionError, match="99") as caught:
        open_store(postgres_store_url)

    assert (caught.value.found, caught.value.supported) == (99, SCHEMA_VERSION)
    assert (caught.value.path, caught.value.location) == (None, postgres_store_url)
    assert pg.content() == before


def test_a_postgresql_schema_of_another_application_is_corrupt_and_left_untouched(postgres_store_url, pg):
    pg.execute("CREATE TABLE accounts (id INTEGER)")

    with pytest.raises(StoreCorrupt, match="not a session store"):
        open_store(postgres_store_url)

    assert pg.scalar(
        "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = current_schema()"
    ) == ("accounts")


@pytest.mark.parametrize(
    "marker",
    [
        "CREATE TABLE turnkeep_store (application TEXT, schema_version INTEGER)",
        "CREATE TABLE turnkeep_store AS SELECT 'someone else' AS application, 1 AS schema_version",
        "CREATE TABLE turnkeep_store (version TEXT)",
    ],
)
def test_a_postgresql_marker_table_without_the_turnkeep_row_is_corrupt(postgres_store_url, pg, marker):
    pg.execute(marker)

    with pytest.raises(StoreCorrupt, match="not a session store"):
        open_store(postgres_store_url)


def test_a_postgresql_search_path_naming_no_existing_schema_is_refused(postgres_url):
    with pytest.raises(StoreError, match="no existing schema"):
        open_store(with_options(postgres_url, ("search_path", "missing")))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_postgresql_server_is_store_unavailable_and_the_error_hides_the_password():
    pytest.importorskip("psycopg")
    url = f"postgresql://someone:hunter2@127.0.0.1:{free_port()}/db?connect_timeout=5&password=hunter3"

    with pytest.raises(StoreUnavailable, match="cannot be reached") as caught:
        open_store(url)

    assert "hunter2" not in str(caught.value) and "hunter3" not in str(caught.value)


def test_a_malformed_postgresql_url_is_refused_without_showing_the_password():
    pytest.importorskip("psycopg")

    with pytest.raises(ValueError, match="not a valid PostgreSQL URL") as caught:
        open_store("postgresql://someone:hunter2@[::1/db")

    assert "hunter2" not in str(caught.value)


def test_the_location_of_a_postgresql_store_never_shows_the_password(postgres_url, postgres_schema):
    url = with_options(
        postgres_url.replace("turnkeep@", "turnkeep:hunter2@"), ("search_path", postgres_schema)
    )

    with open_store(url) as store:
        assert "hunter2" not in store.location
        assert store.location.startswith("postgresql://turnkeep:***@127.0.0.1:")
        assert "hunter2" not in repr(store)


def test_a_postgresql_row_lock_held_too_long_by_another_connection_is_store_busy(postgres_store_url):
    import psycopg

    with open_store(postgres_store_url, busy_timeout=0.05) as store:
        store.create_session("s", workspace="/w", model="m")
        with psycopg.connect(postgres_store_url) as other:
            other.execute("SELECT * FROM sessions WHERE id = 's' FOR UPDATE")
            with pytest.raises(StoreBusy):
                store.append_message("s", 1, text(1))
            other.rollback()

        assert store.append_message("s", 1, text(1)) == 1


@pytest.mark.parametrize(("synchronous", "expected"), [("NORMAL", "off"), ("FULL", "on")])
def test_postgresql_full_turns_synchronous_commit_on_and_normal_leaves_it(
    postgres_url, postgres_schema, synchronous, expected
):
    url = with_options(postgres_url, ("search_path", postgres_schema), ("synchronous_commit", "off"))

    with open_store(url, synchronous=synchronous) as store, store._backend.read() as db:
        assert db.query("SHOW synchronous_commit") == [(expected,)]


def test_a_postgresql_store_never_holds_more_connections_than_its_pool_size(
    postgres_url, postgres_schema, postgres_admin
):
    url = with_options(postgres_url, ("search_path", postgres_schema), application_name="pool-test")
    peak = 0

    def count() -> int:
        row = postgres_admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pool-test'"
        ).fetchone()
        return int(row[0])

    with open_store(url, pool_size=2) as store:
        store.create_session("s", workspace="/w", model="m")
        seqs: list[int] = []
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, count())

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            assert run_threads([appender(store, "s", 20, seqs) for _ in range(6)]) == []
        finally:
            done.set()
            watcher.join()

        assert sorted(seqs) == list(range(1, 121))
        assert 1 <= peak <= 2


def test_a_lost_postgresql_connection_fails_one_call_and_the_next_reconnects(
    postgres_url, postgres_schema, postgres_admin
):
    url = with_options(postgres_url, ("search_path", postgres_schema), application_name="lost-test")
    with open_store(url, pool_size=1) as store:
        store.create_session("s", workspace="/w", model="m")
        postgres_admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lost-test'"
        )

        with pytest.raises(StoreUnavailable):
            store.append_message("s", 1, text(1))

        assert store.append_message("s", 1, text(1)) == 1
        assert texts(store, "s") == ["m1"]


def test_stores_opening_an_empty_postgresql_schema_at_once_create_it_once(postgres_store_url, pg):
    stores: list[SessionStore] = []

    def opener() -> None:
        stores.append(open_store(postgres_store_url))

    try:
        errors = run_threads([opener for _ in range(4)])
    finally:
        for opened in stores:
            opened.close()

    assert errors == []
    assert pg.scalar("SELECT count(*) FROM turnkeep_store") == 1
    assert pg.scalar("SELECT schema_version FROM turnkeep_store") == SCHEMA_VERSION
