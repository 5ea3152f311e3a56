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

Concurrency: a store may be used from any number of threads. Writes go through group commit: one writer
thread per store takes every write queued by any thread (at most 256 at once), makes each in a savepoint of
one transaction and commits it; each write method returns only once that transaction has committed, with
its own result or error. A write that fails (an unknown or closed session, a rejected compaction, a
constraint) is undone alone; a transaction that fails to begin or to commit fails every write in it with
the same error, and stores none of them. A write waits at most ``2 * busy_timeout + 30`` seconds for its
transaction, then raises :class:`StoreTimeout`, which says whether it may still have committed.
:meth:`SessionStore.close` refuses new calls and makes the queued writes first. With
``group_commit=False`` each write is instead a transaction of its own, made on the caller's thread.

SQLite: reads share one connection behind a lock, the writer has its own; other processes (or other stores
on the same file) wait up to ``busy_timeout`` seconds for the write lock instead of failing. PostgreSQL: a
pool of at most ``pool_size`` connections, each serving one call at a time (a call waits for a free one),
the writer borrowing one per transaction; writes to one session are serialised by a lock on its row, and
a lock held elsewhere for longer than ``busy_timeout`` seconds fails the write with :class:`StoreBusy`. A
write that loses a deadlock with another database client is made again in the writer's next transaction.

Fencing: a host takes a session with :meth:`SessionStore.take_session`, which increments its owner epoch
and makes that store object write to the session only under that epoch: once another store (another host)
has taken it since, each write of this one is refused with :class:`StaleOwner`, in the transaction of the
write, and stores nothing. A store object that never took a session writes to it unfenced (administration:
fork, rewind, close).

Forks: :meth:`SessionStore.fork_session` copies a session's history as it stood at the end of a turn to a
new session, and :meth:`SessionStore.rewind_session` also archives the source, each in one transaction
(see :mod:`._fork` for which messages a fork holds, and docs/durability.md).

Children: a session created with a :class:`ParentLink` (:meth:`SessionStore.create_session`) is the child
of the session whose ``agent`` tool call runs it; :meth:`SessionStore.children` lists a session's children
in the order they were created. A fork is a session of its own: it has no parent link.

Secrets: every text the store writes (message bodies, event bodies, session metadata) goes through
:func:`shell._secrets.redact` first, so no API key or token reaches the database.

Errors are :class:`StoreError` subclasses. The store never deletes or rewrites anything it cannot read: a
database that is not a session store, or a row that cannot be decoded, raises :class:`StoreCorrupt`, and
one from a newer version of turnkeep raises :class:`StoreVersionError`.
"""

from ._errors import (
    CompactionRejected,
    ForkRejected,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    StaleOwner,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    StoreVersionError,
    TurnRunning,
)
from ._records import (
    Backend,
    ParentLink,
    SessionRecord,
    SessionStatus,
    StoredEvent,
    StoredMessage,
    TurnUsageRecord,
    TurnWrite,
)
from ._store import SessionStore, open_store

__all__ = [
    "Backend",
    "CompactionRejected",
    "ForkRejected",
    "ParentLink",
    "SessionArchived",
    "SessionClosed",
    "SessionExists",
    "SessionNotFound",
    "SessionRecord",
    "SessionStatus",
    "SessionStore",
    "StaleOwner",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "StoreVersionError",
    "StoredEvent",
    "StoredMessage",
    "TurnRunning",
    "TurnUsageRecord",
    "TurnWrite",
    "open_store",
]
