"""What the store asks of a backend: connections for reads, and transactions for writes.

Three protocols shared by :mod:`._store`, which encodes and decodes, and :mod:`._group`, which batches
writes: :class:`Db` (one connection inside a call), :class:`Transactions` (what makes a write transaction)
and :class:`StoreBackend` (a database opened and migrated, with its connections).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ._records import Backend

__all__ = ["Db", "StoreBackend", "Transactions"]

T = TypeVar("T")


class Db(Protocol):
    """One connection inside a call; SQL uses ``?`` placeholders and no ``%``."""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute a statement that returns no rows; returns the number of rows it changed."""
        ...


class Transactions(Protocol):
    """A connection (or a source of them) for write transactions."""

    def write(self) -> AbstractContextManager[Db]:
        """A connection in a transaction that commits when the block ends, and rolls back on error; driver
        errors (the commit's included) leave it as :class:`~shell.store.StoreError`."""
        ...

    def translate(self) -> AbstractContextManager[None]:
        """Turns a driver error raised in the block into the :class:`~shell.store.StoreError` it means."""
        ...

    def write_one(self, op: Callable[[Db], T]) -> T:
        """``op`` in a transaction of its own, committed when this returns (as ``op`` inside
        :meth:`write` and :meth:`translate`): an error of ``op`` or of the commit rolls it back and is
        raised, a driver error as the :class:`~shell.store.StoreError` it means."""
        ...

    def renew_savepoint(self, db: Db, name: str) -> None:
        """Release the savepoint ``name`` of ``db``'s transaction and set it again where the transaction
        now is (as one round trip where the driver allows)."""
        ...

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` (translated) failed a statement only because another transaction held what it
        needed in a cycle (a deadlock): the same write may succeed in a later transaction."""
        ...

    def close(self) -> None:
        """Release what the transactions hold; calling it again does nothing."""
        ...


class StoreBackend(Transactions, Protocol):
    """A database holding the store's tables at the current schema version, ready for use."""

    @property
    def kind(self) -> Backend: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def location(self) -> str: ...

    @property
    def row_lock(self) -> str:
        """What follows a ``SELECT`` of a session's row in a write to lock the row until commit."""
        ...

    def read(self) -> AbstractContextManager[Db]:
        """A connection for reads, translating driver errors to :class:`~shell.store.StoreError`."""
        ...

    def writer(self) -> Transactions:
        """Transactions for the store's one group writer, to be used by one thread only; the SQLite
        backend opens a connection of the writer's own, the PostgreSQL one lends a pooled one per
        transaction."""
        ...
