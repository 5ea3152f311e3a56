"""The PostgreSQL backend of the session store, over psycopg 3: a small pool of connections.

The store's tables live in the connection's current schema; the one row of the marker table
``turnkeep_store`` says the schema is a turnkeep store and at which version (see :mod:`shell._schema`).
Each migration step is one transaction (PostgreSQL's DDL is transactional) under an advisory lock, so two
processes opening one schema migrate it once. A schema that is refused is never written to.

The pool holds at most ``pool_size`` connections, opened when first needed and kept while they are
healthy; a connection found broken after a call is dropped, and a later call opens a new one. The store's
group writer borrows one connection from the pool for each of its transactions.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, TypeAlias

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from actors import blocking

from . import _schema
from ._db import Db, T
from ._errors import StoreBusy, StoreClosed, StoreCorrupt, StoreError, StoreUnavailable, StoreVersionError

__all__ = ["PostgresBackend"]

_Conn: TypeAlias = psycopg.Connection[tuple[Any, ...]]

_DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds to wait for a connection when the URL sets no ``connect_timeout`` (libpq waits forever)."""

# Two-argument advisory lock key: a constant for turnkeep, then the schema's hash.
_LOCK_SPACE = 0x544B5353

_RELATIONS = """
    SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""


def _mask(url: str) -> str:
    """``url`` with its password, in the user part or in the query, replaced by ``***``."""
    url = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


class _Connection:
    """The store's view of a connection: ``?`` placeholders, rows or a count of changed rows."""

    def __init__(self, connection: _Conn) -> None:
        self._connection = connection

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._connection.execute(sql.replace("?", "%s"), params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._connection.execute(sql.replace("?", "%s"), params).rowcount


class _Pool:
    """At most ``size`` connections, each lent to one caller at a time; closing waits for the lent ones."""

    def __init__(self, connect: Callable[[], _Conn], size: int, location: str) -> None:
        self._connect = connect
        self._size = size
        self._location = location
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[_Conn] = []
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[_Conn]:
        """A connection for one call; raises :class:`StoreClosed` once the pool is closed."""
        with blocking(), self._slots:
            with self._lock:
                if self._closed:
                    raise StoreClosed(f"the session store {self._location} is closed")
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                connection = self._connect()
            try:
                yield connection
            finally:
                self._give_back(connection)

    def close(self) -> None:
        """Close every connection, once the calls using one have finished; calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Taking every slot waits for the calls in progress; the slots are then freed again so that
        # callers waiting for one see the pool closed instead of waiting forever.
        for _ in range(self._size):
            self._slots.acquire()
        try:
            with self._lock:
                idle, self._idle = self._idle, []
            for connection in idle:
                connection.close()
        finally:
            for _ in range(self._size):
                self._slots.release()

    def _give_back(self, connection: _Conn) -> None:
        healthy = (
            not connection.closed
            and not connection.broken
            and connection.info.transaction_status == TransactionStatus.IDLE
        )
        with self._lock:
            if healthy and not self._closed:
                self._idle.append(connection)
                return
        connection.close()


class PostgresBackend:
    """A session store in a PostgreSQL schema, checked and migrated; safe to share by threads."""

    kind: Literal["postgresql"] = "postgresql"
    row_lock = " FOR UPDATE"
    path = None

    def __init__(
        self, url: str, *, synchronous: Literal["NORMAL", "FULL"], busy_timeout: float, pool_size: int
    ) -> None:
        """Connect to the database ``url`` names and bring its store to the current schema version."""
        self._location = _mask(url)
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as error:
            problem = str(error).replace(url, self._location)
            raise ValueError(f"not a valid PostgreSQL URL: {problem}") from None
        defaults: dict[str, Any] = {
            "application_name": "turnkeep",
            "connect_timeout": _DEFAULT_CONNECT_TIMEOUT,
        }
        self._conninfo = make_conninfo(url, **{k: v for k, v in defaults.items() if k not in params})
        # lock_timeout 0 would mean "wait forever".
        self._settings = {"lock_timeout": f"{max(1, round(busy_timeout * 1000))}ms"}
        if synchronous == "FULL":
            self._settings["synchronous_commit"] = "on"
        self._pool = _Pool(self._connect, pool_size, self._location)
        try:
            with self._translate(), self._pool.connection() as connection:
                self._prepare(connection)
        except BaseException:
            self._pool.close()
            raise

    @property
    def location(self) -> str:
        """The URL without its password."""
        return self._location

    def close(self) -> None:
        """Close every connection, after the calls in progress; calling it again does nothing."""
        self._pool.close()

    @contextmanager
    def read(self) -> Iterator[_Connection]:
        """A connection in autocommit mode, for reads."""
        with self._translate(), self._pool.connection() as connection:
            yield _Connection(connection)

    @contextmanager
    def write(self) -> Iterator[_Connection]:
        """A connection in a transaction, committed at the end of the block."""
        with self._translate(), self._pool.connection() as connection, connection.transaction():
            yield _Connection(connection)

    def translate(self) -> AbstractContextManager[None]:
        """Turns a psycopg error raised in the block into the :class:`StoreError` it means."""
        return self._translate()

    def write_one(self, op: Callable[[Db], T]) -> T:
        """``op`` in a transaction of its own, committed when this returns."""
        with self.write() as db, self._translate():
            return op(db)

    def renew_savepoint(self, db: Db, name: str) -> None:
        """Release the savepoint ``name`` and set it again, in one round trip."""
        db.run(f"RELEASE SAVEPOINT {name}; SAVEPOINT {name}")

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` comes from the server ending a statement to break a deadlock, or a
        serialization failure: the same write may succeed in another transaction."""
        return isinstance(error, StoreError) and isinstance(error.__cause__, errors.TransactionRollback)

    def writer(self) -> _Writer:
        """The store's pool, for its group writer: one pooled connection per transaction."""
        return _Writer(self)

    def _connect(self) -> _Conn:
        connection = psycopg.connect(self._conninfo, autocommit=True)
        try:
            for name, value in self._settings.items():
                connection.execute("SELECT set_config(%s, %s, false)", (name, value))
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: _Conn) -> None:
        # Read-only checks first: a schema that is refused must not be touched.
        version = self._version(connection)
        if version > _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._location} has schema version {version}, newer than the {_schema.SCHEMA_VERSION}"
                " this version of turnkeep knows; upgrade turnkeep to open it",
                location=self._location,
                found=version,
                supported=_schema.SCHEMA_VERSION,
            )
        for target in _schema.pending(version):
            try:
                self._migrate(connection, target)
            except (errors.InsufficientPrivilege, psycopg.OperationalError):
                raise
            except (psycopg.ProgrammingError, psycopg.DataError, psycopg.IntegrityError) as error:
                raise StoreCorrupt(
                    f"{self._location} cannot be migrated to schema version {target}: {error}",
                    location=self._location,
                ) from error

    def _version(self, connection: _Conn) -> int:
        """The schema version of the store in the current schema, 0 for an empty schema."""
        (schema,) = _one(connection.execute("SELECT current_schema()").fetchall())
        if schema is None:
            raise StoreError(
                f"{self._location}: the search_path names no existing schema to keep the store in"
            )
        names = {name for (name,) in connection.execute(_RELATIONS, (schema,)).fetchall()}
        if _schema.MARKER_TABLE not in names:
            if names:
                raise StoreCorrupt(
                    f"{self._location}: schema {schema!r} holds tables but not a session store",
                    location=self._location,
                )
            return 0
        try:
            rows = connection.execute(
                f"SELECT application, schema_version FROM {_schema.MARKER_TABLE}"
            ).fetchall()
        except psycopg.ProgrammingError as error:
            raise self._foreign(schema, str(error)) from error
        if len(rows) != 1 or rows[0][0] != _schema.APPLICATION or not isinstance(rows[0][1], int):
            raise self._foreign(schema, f"{_schema.MARKER_TABLE} holds {rows!r}")
        return int(rows[0][1])

    def _foreign(self, schema: str, detail: str) -> StoreCorrupt:
        return StoreCorrupt(
            f"{self._location}: schema {schema!r} is not a session store ({detail})", location=self._location
        )

    def _migrate(self, connection: _Conn, target: int) -> None:
        """Take the store from ``target - 1`` to ``target`` in one transaction; on error nothing changes."""
        with connection.transaction():
            connection.execute(f"SELECT pg_advisory_xact_lock({_LOCK_SPACE}, hashtext(current_schema()))")
            # Another process may have migrated while this one waited for the lock.
            if self._version(connection) != target - 1:
                return
            for statement in _schema.POSTGRES_MIGRATIONS[target - 1]:
                connection.execute(statement)
            connection.execute(f"UPDATE {_schema.MARKER_TABLE} SET schema_version = %s", (target,))

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except errors.LockNotAvailable as error:
            raise StoreBusy(f"{self._location}: a lock stayed held by another connection: {error}") from error
        except (errors.UndefinedTable, errors.UndefinedColumn) as error:
            raise StoreCorrupt(
                f"{self._location} does not have the tables of a session store: {error}",
                location=self._location,
            ) from error
        except psycopg.OperationalError as error:
            if error.sqlstate is None or error.sqlstate.startswith(("08", "57P")):
                raise StoreUnavailable(f"{self._location} cannot be reached: {error}") from error
            raise StoreError(f"{self._location}: {error}") from error
        except psycopg.Error as error:
            raise StoreError(f"{self._location}: {error}") from error


class _Writer:
    """The group writer's view of the backend: its transactions, without the power to close the pool."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    def write(self) -> AbstractContextManager[_Connection]:
        """As :meth:`PostgresBackend.write`."""
        return self._backend.write()

    def translate(self) -> AbstractContextManager[None]:
        """As :meth:`PostgresBackend.translate`."""
        return self._backend.translate()

    def write_one(self, op: Callable[[Db], T]) -> T:
        """As :meth:`PostgresBackend.write_one`."""
        return self._backend.write_one(op)

    def renew_savepoint(self, db: Db, name: str) -> None:
        """As :meth:`PostgresBackend.renew_savepoint`."""
        self._backend.renew_savepoint(db, name)

    def is_conflict(self, error: BaseException) -> bool:
        """As :meth:`PostgresBackend.is_conflict`."""
        return self._backend.is_conflict(error)

    def close(self) -> None:
        """Nothing: the pool is the backend's to close."""


def _one(rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    (row,) = rows
    return row
