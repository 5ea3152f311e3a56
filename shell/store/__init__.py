"""The session store: sessions, their message history and their event log, in SQLite or PostgreSQL.

Backends: :func:`open_store` (or :meth:`SessionStore.open`) takes a *target*. A file path, or a URL
``sqlite://PATH``, opens one SQLite file, the embedded default. A URL ``postgresql://…`` (or
``postgres://…``, any libpq connection URL) opens a PostgreSQL database through psycopg, which comes with
``turnkeep[postgres]``; the store's tables live in the connection's current schema (the first existing
schema of its ``search_path``, ``public`` unless the URL says otherwise, e.g. with
``?options=-csearch_path%3Dturnkeep``). Both backends have the same methods, records, errors, schema
versions and guarantees.

Durability: every write is committed before the method returns. SQLite is in WAL mode; with
``synchronous="NORMAL"`` a crash of the process loses nothing committed (a power cut may lose the last
commits), ``"FULL"`` makes each commit survive a power cut too. In PostgreSQL, ``"NORMAL"`` leaves
``synchronous_commit`` as the server has it, ``"FULL"`` sets it to ``on`` for the store's connections, so
each commit is on the server's disk before the method returns.

Concurrency: a store may be used from any number of threads. SQLite: one connection behind a lock; each
call holds it for one short transaction, and other processes (or other stores on the same file) wait up to
``busy_timeout`` seconds for the write lock instead of failing. PostgreSQL: a pool of at most
``pool_size`` connections, each serving one call at a time (a call waits for a free one); writes to one
session are serialised by a lock on its row, writes to different sessions run in parallel, and a lock
held elsewhere for longer than ``busy_timeout`` seconds fails the call with :class:`StoreBusy`.

Secrets: every text the store writes (message bodies, event bodies, session metadata) goes through
:func:`shell._secrets.redact` first, so no API key or token reaches the database.

Errors are :class:`StoreError` subclasses. The store never deletes or rewrites anything it cannot read: a
database that is not a session store, or a row that cannot be decoded, raises :class:`StoreCorrupt`, and
one from a newer version of turnkeep raises :class:`StoreVersionError`.
"""

from ._errors import (
    CompactionRejected,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    StoreVersionError,
)
from ._records import Backend, SessionRecord, SessionStatus, StoredEvent, StoredMessage, TurnUsageRecord
from ._store import SessionStore, open_store

__all__ = [
    "Backend",
    "CompactionRejected",
    "SessionClosed",
    "SessionExists",
    "SessionNotFound",
    "SessionRecord",
    "SessionStatus",
    "SessionStore",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "StoreVersionError",
    "StoredEvent",
    "StoredMessage",
    "TurnUsageRecord",
    "open_store",
]
