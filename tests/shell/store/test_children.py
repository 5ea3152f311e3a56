"""Specification of child sessions in the store: the parent link a child is created with, how a session's
children are found, what forks and older stores have of it — the same for a SQLite file and a PostgreSQL
schema."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from sampler.messages import UserMessage
from shell.store import ParentLink, SessionExists, SessionNotFound, SessionStore, open_store
from shell.store._schema import POSTGRES_MIGRATIONS, SCHEMA_VERSION, SQLITE_MIGRATIONS


def user_session(store: SessionStore, session_id: str) -> None:
    store.create_session(session_id, workspace="/w", model="m")


def child(store: SessionStore, session_id: str, parent: str, turn: int, call: str, profile: str) -> None:
    store.create_session(
        session_id, workspace="/w", model="m", parent=ParentLink(parent, turn, call, profile)
    )


def one_turn(store: SessionStore, session_id: str, turn: int) -> None:
    store.start_turn(session_id, turn, UserMessage.of_text(f"turn {turn}"))
    store.end_turn(session_id)


# --- The link ---------------------------------------------------------------------------------------------


def test_a_child_reads_back_with_its_parent_link_after_the_store_is_opened_again(store_target):
    link = ParentLink(session="lead", turn=3, call="call_7", profile="explorer")
    with open_store(store_target) as store:
        user_session(store, "lead")
        created = store.create_session("kid", workspace="/w", model="m", meta={"k": 1}, parent=link)
        assert created.parent == link
        assert (created.status, created.current_turn, created.meta) == ("idle", 0, {"k": 1})

    with open_store(store_target) as store:
        assert store.get_session("kid").parent == link
        listed = {record.id: record.parent for record in store.list_sessions()}
        assert listed == {"lead": None, "kid": link}


def test_a_session_opened_by_a_user_has_no_parent(store_target):
    with open_store(store_target) as store:
        assert store.create_session("alone", workspace="/w", model="m").parent is None
        assert store.get_session("alone").parent is None
        assert store.children("alone") == []


def test_a_child_of_an_unknown_session_is_refused_and_nothing_is_created(store_target):
    with open_store(store_target) as store:
        with pytest.raises(SessionNotFound, match="ghost"):
            child(store, "kid", "ghost", 1, "c1", "explorer")
        assert [record.id for record in store.list_sessions()] == []


def test_a_taken_id_is_refused_even_with_a_parent_link(store_target):
    with open_store(store_target) as store:
        user_session(store, "lead")
        child(store, "kid", "lead", 1, "c1", "explorer")
        with pytest.raises(SessionExists):
            child(store, "kid", "lead", 2, "c2", "writer")
        assert store.get_session("kid").parent == ParentLink("lead", 1, "c1", "explorer")


@pytest.mark.parametrize("turn", ["1", True], ids=["text-turn", "bool-turn"])
def test_a_parent_link_of_the_wrong_types_is_refused(tmp_path, turn):
    link = ParentLink("lead", turn, "c1", "explorer")
    with open_store(tmp_path / "s.db") as store:
        user_session(store, "lead")
        with pytest.raises(ValueError, match="parent link"):
            store.create_session("kid", workspace="/w", model="m", parent=link)
        with pytest.raises(SessionNotFound):
            store.get_session("kid")


# --- Children ---------------------------------------------------------------------------------------------


def test_children_are_the_sessions_a_session_runs_in_creation_order_and_not_theirs(store_target):
    with open_store(store_target) as store:
        user_session(store, "lead")
        user_session(store, "other")
        # Ids against the alphabet: only the creation order can put them in this order.
        child(store, "z-first", "lead", 1, "c1", "explorer")
        child(store, "y-of-other", "other", 1, "c9", "explorer")
        child(store, "x-second", "lead", 1, "c2", "writer")
        child(store, "w-grandchild", "z-first", 1, "c3", "explorer")
        child(store, "v-third", "lead", 2, "c4", "explorer")

        kids = store.children("lead")
        assert [record.id for record in kids] == ["z-first", "x-second", "v-third"]
        assert [record.parent for record in kids] == [
            ParentLink("lead", 1, "c1", "explorer"),
            ParentLink("lead", 1, "c2", "writer"),
            ParentLink("lead", 2, "c4", "explorer"),
        ]
        assert [record.id for record in store.children("z-first")] == ["w-grandchild"]
        assert [record.id for record in store.children("other")] == ["y-of-other"]
        assert store.children("w-grandchild") == []


def test_children_show_each_child_as_it_is_now(store_target):
    with open_store(store_target) as store:
        user_session(store, "lead")
        child(store, "kid", "lead", 1, "c1", "explorer")
        one_turn(store, "kid", 1)
        store.close_session("kid")

        (kid,) = store.children("lead")
        assert (kid.id, kid.status, kid.current_turn) == ("kid", "closed", 1)


def test_children_of_an_unknown_session_raise_session_not_found(store_target):
    with open_store(store_target) as store:
        user_session(store, "lead")
        with pytest.raises(SessionNotFound, match="nope"):
            store.children("nope")


def test_children_created_at_the_same_moment_come_by_id(tmp_path):
    path = tmp_path / "s.db"
    with open_store(path) as store:
        user_session(store, "lead")
        for name in ("c", "a", "b"):
            child(store, name, "lead", 1, f"call-{name}", "explorer")
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE sessions SET created_at = 5 WHERE parent_session = 'lead'")
    raw.close()

    with open_store(path) as store:
        assert [record.id for record in store.children("lead")] == ["a", "b", "c"]


def test_children_are_found_through_the_parent_index(tmp_path):
    path = tmp_path / "s.db"
    with open_store(path) as store:
        user_session(store, "lead")
    raw = sqlite3.connect(path)
    plan = " ".join(
        str(row[-1])
        for row in raw.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE parent_session = ? ORDER BY created_at, id",
            ("lead",),
        )
    )
    raw.close()
    assert plan.startswith("SEARCH sessions USING INDEX sessions_by_parent (parent_session=?)"), plan
    assert "TEMP B-TREE" not in plan


# --- Forks ------------------------------------------------------------------------------------------------


def test_a_fork_or_rewind_of_a_child_has_no_parent_link_and_is_not_a_child(store_target):
    link = ParentLink("lead", 1, "c1", "explorer")
    with open_store(store_target) as store:
        user_session(store, "lead")
        store.create_session("kid", workspace="/w", model="m", parent=link)
        one_turn(store, "kid", 1)
        one_turn(store, "kid", 2)

        fork = store.fork_session("kid", "kid-fork", at_turn=1)
        rewound = store.rewind_session("kid", "kid-back", to_turn=1)

        assert (fork.parent, fork.forked_from) == (None, ("kid", 1))
        assert (rewound.parent, rewound.forked_from) == (None, ("kid", 1))
        assert store.get_session("kid-fork").parent is None
        source = store.get_session("kid")
        assert (source.status, source.parent) == ("archived", link)
        assert [record.id for record in store.children("lead")] == ["kid"]
        assert store.children("kid") == []


# --- Older stores -----------------------------------------------------------------------------------------


def test_a_version_5_sqlite_store_is_migrated_and_its_sessions_have_no_parent(tmp_path):
    path = tmp_path / "v5.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for version in SQLITE_MIGRATIONS[:5]:
        for statement in version:
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 5")
    raw.execute(
        "INSERT INTO sessions (id, created_at, updated_at, workspace, model, owner_epoch)"
        " VALUES ('old', 1, 2, '/w', 'm', 4)"
    )
    raw.close()

    with open_store(path) as store:
        old = store.get_session("old")
        assert (old.parent, old.owner_epoch, old.workspace) == (None, 4, "/w")
        assert [record.parent for record in store.list_sessions()] == [None]
        assert store.children("old") == []
        child(store, "kid", "old", 1, "c1", "explorer")
        assert [record.id for record in store.children("old")] == ["kid"]

    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (6,)
    columns = "id, parent_session, parent_turn, parent_call, agent_profile"
    assert raw.execute(f"SELECT {columns} FROM sessions ORDER BY id").fetchall() == [
        ("kid", "old", 1, "c1", "explorer"),
        ("old", None, None, None, None),
    ]
    raw.close()


def test_a_version_5_postgresql_store_is_migrated_and_its_sessions_have_no_parent(
    postgres_store_url: str, postgres_admin: Any, postgres_schema: str
):
    postgres_admin.execute(f'SET search_path TO "{postgres_schema}"')
    try:
        for version in POSTGRES_MIGRATIONS[:5]:
            for statement in version:
                postgres_admin.execute(statement)
        postgres_admin.execute("UPDATE turnkeep_store SET schema_version = 5")
        postgres_admin.execute(
            "INSERT INTO sessions (id, created_at, updated_at, workspace, model)"
            " VALUES ('old', 1, 2, '/w', 'm')"
        )
    finally:
        postgres_admin.execute("SET search_path TO DEFAULT")

    with open_store(postgres_store_url) as store:
        assert store.get_session("old").parent is None
        assert store.children("old") == []
        child(store, "kid", "old", 2, "c1", "explorer")
        assert [(r.id, r.parent) for r in store.children("old")] == [
            ("kid", ParentLink("old", 2, "c1", "explorer"))
        ]
    version = postgres_admin.execute(
        f'SELECT schema_version FROM "{postgres_schema}".turnkeep_store'
    ).fetchone()
    assert version == (SCHEMA_VERSION,) == (6,)
    indexes = postgres_admin.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'sessions'",
        (postgres_schema,),
    ).fetchall()
    assert ("sessions_by_parent",) in indexes
