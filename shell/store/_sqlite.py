"""The SQLite backend of the session store: one file, one connection behind a lock, WAL mode; the group
writer has a connection of its own.

The file's version is ``PRAGMA user_version`` and ``PRAGMA application_id`` marks it as a turnkeep store
(see :mod:`shell._schema`). A file that is refused is never written to.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal

from . import _schema
from ._db import Db, T
from ._errors import StoreBusy, StoreClosed, StoreCorrupt, StoreError, StoreVersionError

__all__ = ["SqliteBackend", "SqliteWriter"]

_SQLITE_HEADER = b"SQLite format 3\x00"


class _Connection:
    """The store's view of a connection: queries that return rows, statements that return a count."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._connection.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._connection.execute(sql, params).rowcount


class _SqliteDialect:
    """What the backend and the group writer's connection say alike about the store's file at ``_path``."""

    _path: Path

    def translate(self) -> AbstractContextManager[None]:
        """Turns a :mod:`sqlite3` error raised in the block into the :class:`StoreError` it means."""
        return self._translate()

    def renew_savepoint(self, db: Db, name: str) -> None:
        """Release the savepoint ``name`` and set it again."""
        # sqlite3 runs one statement per call; in-process, two calls cost next to nothing.
        db.run(f"RELEASE SAVEPOINT {name}")
        db.run(f"SAVEPOINT {name}")

    def is_conflict(self, error: BaseException) -> bool:
        """Never: one transaction at a time holds the file's write lock, so transactions cannot deadlock."""
        return False

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise self._meaning(error) from error

    def _meaning(self, error: sqlite3.Error) -> StoreError:
        """The :class:`StoreError` a :mod:`sqlite3` error means."""
        if isinstance(error, sqlite3.OperationalError):
            if _is_busy(error):
                return StoreBusy(f"{self._path} stayed locked by another process: {error}")
            return StoreError(f"{self._path}: {error}")
        if isinstance(error, sqlite3.DatabaseError):
            return StoreCorrupt(f"{self._path} is unreadable: {error}", path=self._path)
        return StoreError(f"{self._path}: {error}")

    def _write_one(self, connection: sqlite3.Connection, op: Callable[[Db], T]) -> T:
        """``op`` in a write transaction of its own on ``connection``, committed when this returns."""
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                value = op(_Connection(connection))
                connection.execute("COMMIT")
            except BaseException:
                # A COMMIT refused (a deferred constraint) leaves the transaction open.
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise self._meaning(error) from error
        return value


class SqliteBackend(_SqliteDialect):
    """A session store file, opened, checked and migrated; safe to share by threads."""

    kind: Literal["sqlite"] = "sqlite"
    row_lock = ""
    """Nothing: a write transaction (``BEGIN IMMEDIATE``) already holds the file's write lock."""

    def __init__(self, path: Path, *, synchronous: Literal["NORMAL", "FULL"], busy_timeout: float) -> None:
        """Open (or create) the file at ``path`` and bring it to the current schema version."""
        self._path = path
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._check_header()
        connection = sqlite3.connect(
            self._path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            with self._translate():
                self._prepare(connection, synchronous, busy_timeout)
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    @property
    def path(self) -> Path:
        """The store's file."""
        return self._path

    @property
    def location(self) -> str:
        """The store's file, as text."""
        return str(self._path)

    def close(self) -> None:
        """Close the connection, after any call in progress; calling it again does nothing."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    @contextmanager
    def read(self) -> Iterator[_Connection]:
        """The connection, for reads."""
        with self._lock, self._translate():
            yield _Connection(self._live())

    @contextmanager
    def write(self) -> Iterator[_Connection]:
        """The connection in a write transaction, committed at the end of the block."""
        with self._lock, self._translate(), _transaction(self._live()) as db:
            yield db

    def write_one(self, op: Callable[[Db], T]) -> T:
        """``op`` in a write transaction of its own, committed when this returns."""
        with self._lock:
            return self._write_one(self._live(), op)

    def writer(self) -> SqliteWriter:
        """A connection of its own for the store's group writer to write with."""
        with self._translate():
            return SqliteWriter(self._path, self._synchronous, self._busy_timeout)

    def _live(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreClosed(f"the session store {self._path} is closed")
        return self._connection

    def _check_header(self) -> None:
        try:
            with self._path.open("rb") as file:
                header = file.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            return
        except OSError as error:
            raise StoreError(f"cannot read session store {self._path}: {error}") from error
        # An empty file is an empty database to SQLite.
        if header and header != _SQLITE_HEADER:
            raise StoreCorrupt(f"{self._path} is not a SQLite database", path=self._path)

    def _prepare(self, connection: sqlite3.Connection, synchronous: str, busy_timeout: float) -> None:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # Read-only checks first: a file that is refused must not be touched. They read one snapshot, so
        # another process creating the schema at this moment is seen either before or after, never half.
        connection.execute("BEGIN")
        try:
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            (application_id,) = connection.execute("PRAGMA application_id").fetchone()
            (tables,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            connection.execute("COMMIT")
        if application_id not in (0, _schema.APPLICATION_ID) or (version == 0 and tables):
            raise StoreCorrupt(f"{self._path} is a SQLite database but not a session store", path=self._path)
        if version > _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._path} has schema version {version}, newer than the {_schema.SCHEMA_VERSION} this"
                " version of turnkeep knows; upgrade turnkeep to open it",
                path=self._path,
                found=version,
                supported=_schema.SCHEMA_VERSION,
            )
        (mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot put {self._path} in WAL mode (journal mode is {mode!r})")
        _configure(connection, synchronous, busy_timeout)
        for target in _schema.pending(version):
            try:
                _migrate(connection, target)
            except sqlite3.OperationalError as error:
                if _is_busy(error):
                    raise
                raise StoreCorrupt(
                    f"{self._path} cannot be migrated to schema version {target}: {error}", path=self._path
                ) from error


class SqliteWriter(_SqliteDialect):
    """A connection to the store's file for the group writer: used by one transaction at a time, from
    whichever thread makes it."""

    def __init__(self, path: Path, synchronous: str, busy_timeout: float) -> None:
        self._path = path
        self._connection: sqlite3.Connection | None = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            _configure(self._connection, synchronous, busy_timeout)
        except BaseException:
            self.close()
            raise

    @contextmanager
    def write(self) -> Iterator[_Connection]:
        """The connection in a write transaction, committed at the end of the block."""
        if self._connection is None:
            raise StoreClosed("the session store's writer is closed")
        with self._translate(), _transaction(self._connection) as db:
            yield db

    def write_one(self, op: Callable[[Db], T]) -> T:
        """``op`` in a write transaction of its own, committed when this returns."""
        if self._connection is None:
            raise StoreClosed("the session store's writer is closed")
        return self._write_one(self._connection, op)

    def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[_Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield _Connection(db)
        db.execute("COMMIT")
    except BaseException:
        # A COMMIT refused (a deferred constraint) leaves the transaction open.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _configure(connection: sqlite3.Connection, synchronous: str, busy_timeout: float) -> None:
    """The settings every connection to a store file has (WAL mode is the file's own)."""
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    connection.execute("PRAGMA foreign_keys = ON")


def _migrate(connection: sqlite3.Connection, target: int) -> None:
    """Take the file from ``target - 1`` to ``target`` in one transaction; on error nothing changes.

    The version is re-read under the write lock, so two processes opening the same file migrate it once.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        if version == target - 1:
            for statement in _schema.SQLITE_MIGRATIONS[target - 1]:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {int(target)}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text
