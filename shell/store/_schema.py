"""The versioned layout of the session store and the migrations between versions, for each backend.

Both backends go through the same versions; version *n* is reached from version *n - 1* by the statements
``SQLITE_MIGRATIONS[n - 1]`` or ``POSTGRES_MIGRATIONS[n - 1]``, applied in one transaction together with the
new version number, so a store is always at exactly one version.

- Version 1: sessions, messages and events, each keyed by session and a per-session sequence number.
- Version 2: compaction. Messages gain ``replaced_by`` (the summary that replaced them in the projection),
  ``is_summary`` and ``position`` (their place in the projection, which a summary takes over from the
  first message it replaces); sessions gain ``learned_window``.
- Version 3: usage. ``turn_usage`` keeps one row per ended turn: how it ended, its model, the tokens of
  its steps and, apart, of its compactions' summary requests, and its cost (NULL without a price).
- Version 4: forks. Sessions gain ``forked_from`` and ``forked_at_turn``: the session a fork was copied
  from and the turn it was taken at (both NULL for a session opened afresh).
- Version 5: fencing. Sessions gain ``owner_epoch``: incremented each time a host takes the session; a
  write made for an older epoch is refused.
- Version 6: subagents. Sessions gain ``parent_session``, ``parent_turn``, ``parent_call`` and
  ``agent_profile``: the session, turn and tool call whose ``agent`` tool call runs this session as its
  child, and the profile it runs (all NULL for a session opened by a user); the index
  ``sessions_by_parent`` finds a session's children without a scan.

Where the version is kept: in SQLite, ``PRAGMA user_version``, with ``PRAGMA application_id`` marking the
file as a turnkeep store; in PostgreSQL, the one row of the marker table ``turnkeep_store``
(``application``, ``schema_version``), in the schema the store's tables live in.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "APPLICATION",
    "APPLICATION_ID",
    "MARKER_TABLE",
    "POSTGRES_MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_MIGRATIONS",
    "pending",
]

APPLICATION_ID = 0x544B5353
"""The ``application_id`` of a turnkeep SQLite store file ("TKSS")."""

MARKER_TABLE = "turnkeep_store"
"""The PostgreSQL table whose one row marks a schema as a turnkeep store and holds its version."""

APPLICATION = "turnkeep"
"""The ``application`` of the marker row."""

_SQLITE_V1 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        workspace TEXT NOT NULL,
        model TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'idle',
        current_turn INTEGER NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}'
    )
    """,
    """
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        body BLOB NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    """
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        type TEXT NOT NULL,
        body BLOB NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    "CREATE INDEX sessions_by_created ON sessions (created_at, id)",
)

_SQLITE_V2 = (
    "ALTER TABLE messages ADD COLUMN replaced_by INTEGER",
    "ALTER TABLE messages ADD COLUMN is_summary INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE messages ADD COLUMN position INTEGER NOT NULL DEFAULT 0",
    "UPDATE messages SET position = seq",
    "ALTER TABLE sessions ADD COLUMN learned_window INTEGER",
    "CREATE INDEX messages_projection ON messages (session_id, replaced_by, position, seq)",
)

_SQLITE_V3 = (
    """
    CREATE TABLE turn_usage (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        turn INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cached_tokens INTEGER NOT NULL,
        reasoning_tokens INTEGER NOT NULL,
        reported INTEGER NOT NULL,
        compaction_input_tokens INTEGER NOT NULL,
        compaction_output_tokens INTEGER NOT NULL,
        compaction_cached_tokens INTEGER NOT NULL,
        compaction_reasoning_tokens INTEGER NOT NULL,
        compaction_reported INTEGER NOT NULL,
        cost REAL,
        ended_at REAL NOT NULL,
        PRIMARY KEY (session_id, turn)
    )
    """,
)

_SQLITE_V4 = (
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
    "ALTER TABLE sessions ADD COLUMN forked_at_turn INTEGER",
)

_SQLITE_V5 = ("ALTER TABLE sessions ADD COLUMN owner_epoch INTEGER NOT NULL DEFAULT 0",)

_SQLITE_V6 = (
    "ALTER TABLE sessions ADD COLUMN parent_session TEXT",
    "ALTER TABLE sessions ADD COLUMN parent_turn INTEGER",
    "ALTER TABLE sessions ADD COLUMN parent_call TEXT",
    "ALTER TABLE sessions ADD COLUMN agent_profile TEXT",
    "CREATE INDEX sessions_by_parent ON sessions (parent_session, created_at, id)",
)

_POSTGRES_V1 = (
    f"CREATE TABLE {MARKER_TABLE} (application TEXT NOT NULL, schema_version INTEGER NOT NULL)",
    f"INSERT INTO {MARKER_TABLE} (application, schema_version) VALUES ('{APPLICATION}', 0)",
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        workspace TEXT NOT NULL,
        model TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'idle',
        current_turn BIGINT NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}'
    )
    """,
    """
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq BIGINT NOT NULL,
        turn BIGINT NOT NULL,
        body BYTEA NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    """
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq BIGINT NOT NULL,
        turn BIGINT NOT NULL,
        type TEXT NOT NULL,
        body BYTEA NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    "CREATE INDEX sessions_by_created ON sessions (created_at, id)",
)

_POSTGRES_V2 = (
    "ALTER TABLE messages ADD COLUMN replaced_by BIGINT",
    "ALTER TABLE messages ADD COLUMN is_summary BOOLEAN NOT NULL DEFAULT FALSE",
    "ALTER TABLE messages ADD COLUMN position BIGINT NOT NULL DEFAULT 0",
    "UPDATE messages SET position = seq",
    "ALTER TABLE sessions ADD COLUMN learned_window BIGINT",
    "CREATE INDEX messages_projection ON messages (session_id, replaced_by, position, seq)",
)

_POSTGRES_V3 = (
    """
    CREATE TABLE turn_usage (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        turn BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL,
        reasoning_tokens BIGINT NOT NULL,
        reported BIGINT NOT NULL,
        compaction_input_tokens BIGINT NOT NULL,
        compaction_output_tokens BIGINT NOT NULL,
        compaction_cached_tokens BIGINT NOT NULL,
        compaction_reasoning_tokens BIGINT NOT NULL,
        compaction_reported BIGINT NOT NULL,
        cost DOUBLE PRECISION,
        ended_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, turn)
    )
    """,
)

_POSTGRES_V4 = (
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
    "ALTER TABLE sessions ADD COLUMN forked_at_turn BIGINT",
)

_POSTGRES_V5 = ("ALTER TABLE sessions ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0",)

_POSTGRES_V6 = (
    "ALTER TABLE sessions ADD COLUMN parent_session TEXT",
    "ALTER TABLE sessions ADD COLUMN parent_turn BIGINT",
    "ALTER TABLE sessions ADD COLUMN parent_call TEXT",
    "ALTER TABLE sessions ADD COLUMN agent_profile TEXT",
    "CREATE INDEX sessions_by_parent ON sessions (parent_session, created_at, id)",
)

SQLITE_MIGRATIONS: tuple[Sequence[str], ...] = (
    _SQLITE_V1,
    _SQLITE_V2,
    _SQLITE_V3,
    _SQLITE_V4,
    _SQLITE_V5,
    _SQLITE_V6,
)
"""The SQLite statements that take a file from version ``i`` to version ``i + 1``, for each ``i``."""

POSTGRES_MIGRATIONS: tuple[Sequence[str], ...] = (
    _POSTGRES_V1,
    _POSTGRES_V2,
    _POSTGRES_V3,
    _POSTGRES_V4,
    _POSTGRES_V5,
    _POSTGRES_V6,
)
"""The PostgreSQL statements that take a schema from version ``i`` to version ``i + 1``, for each ``i``."""

SCHEMA_VERSION = len(SQLITE_MIGRATIONS)
"""The version this code reads and writes."""

if len(POSTGRES_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a mistake in this file
    raise AssertionError("every backend must have a migration to every version")


def pending(version: int) -> range:
    """The versions a store at ``version`` still has to be migrated to, in order."""
    return range(version + 1, SCHEMA_VERSION + 1)
