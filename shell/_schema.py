"""The versioned layout of the session store file and the migrations between versions.

``PRAGMA user_version`` holds the version of the layout a file has; ``PRAGMA application_id`` marks the
file as a turnkeep store. Version *n* is reached from version *n - 1* by ``MIGRATIONS[n - 1]``, applied in
one transaction together with the new ``user_version``, so a file is always at exactly one version.

- Version 1: sessions, messages and events, each keyed by session and a per-session sequence number.
- Version 2: compaction. Messages gain ``replaced_by`` (the summary that replaced them in the projection),
  ``is_summary`` and ``position`` (their place in the projection, which a summary takes over from the
  first message it replaces); sessions gain ``learned_window``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "migrate", "pending"]

APPLICATION_ID = 0x544B5353
"""The ``application_id`` of a turnkeep store file ("TKSS")."""

_V1 = (
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

_V2 = (
    "ALTER TABLE messages ADD COLUMN replaced_by INTEGER",
    "ALTER TABLE messages ADD COLUMN is_summary INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE messages ADD COLUMN position INTEGER NOT NULL DEFAULT 0",
    "UPDATE messages SET position = seq",
    "ALTER TABLE sessions ADD COLUMN learned_window INTEGER",
    "CREATE INDEX messages_projection ON messages (session_id, replaced_by, position, seq)",
)

MIGRATIONS: tuple[Sequence[str], ...] = (_V1, _V2)
"""The SQL statements that take a file from version ``i`` to version ``i + 1``, for each ``i``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code reads and writes."""


def pending(version: int) -> range:
    """The versions a file at ``version`` still has to be migrated to, in order."""
    return range(version + 1, SCHEMA_VERSION + 1)


def migrate(connection: sqlite3.Connection, target: int) -> None:
    """Take the file from ``target - 1`` to ``target`` in one transaction; on error nothing changes.

    ``connection`` must be in autocommit mode (``isolation_level=None``) and outside a transaction. The
    version is re-read under the write lock, so two processes opening the same file migrate it once.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        if version == target - 1:
            for statement in MIGRATIONS[target - 1]:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {int(target)}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
