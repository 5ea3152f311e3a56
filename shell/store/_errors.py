"""What can go wrong in the session store: every error is a :class:`StoreError`."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CompactionRejected",
    "ForkRejected",
    "SessionArchived",
    "SessionClosed",
    "SessionExists",
    "SessionNotFound",
    "StaleOwner",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "StoreVersionError",
    "TurnRunning",
]


class StoreError(Exception):
    """Base class of every error the session store raises."""


class StoreCorrupt(StoreError):
    """The database is not a turnkeep session store, or a row in it cannot be decoded.

    ``location`` says where the store is (the file, or the URL without its password); ``path`` is the file
    of a SQLite store, None for PostgreSQL. ``session_id`` and ``seq`` name the bad row when one is to blame
    (``seq`` is a message seq, an event seq, or None for the session row itself). Nothing has been changed.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        location: str | None = None,
        session_id: str | None = None,
        seq: int | None = None,
    ):
        super().__init__(message)
        self.path = path
        self.location = location if location is not None else str(path or "")
        self.session_id = session_id
        self.seq = seq


class StoreVersionError(StoreError):
    """The store was written by a newer turnkeep (schema ``found``) than this one (``supported``).

    ``location`` and ``path`` are as for :class:`StoreCorrupt`.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        location: str | None = None,
        found: int,
        supported: int,
    ):
        super().__init__(message)
        self.path = path
        self.location = location if location is not None else str(path or "")
        self.found = found
        self.supported = supported


class StoreBusy(StoreError):
    """Another process or connection held a lock the call needed for longer than ``busy_timeout``."""


class StoreUnavailable(StoreError):
    """The PostgreSQL server cannot be reached, or the connection to it was lost during the call.

    A write that fails this way may or may not have been committed; the next call opens a new connection.
    """


class StoreTimeout(StoreError):
    """A write was not confirmed in time: its transaction had not committed when the caller's wait ended.

    ``may_have_committed`` states the write's fate. False: the write had not started; it was withdrawn and
    nothing of it is or will be in the store. True: it was in a transaction that had not ended; it may have
    committed, or may commit later, or not at all. Read the store to learn which before writing it again.
    """

    def __init__(self, message: str, *, may_have_committed: bool):
        super().__init__(message)
        self.may_have_committed = may_have_committed


class StoreClosed(StoreError):
    """The store was used after :meth:`SessionStore.close`."""


class SessionNotFound(StoreError, LookupError):
    """No session has the given id."""


class SessionExists(StoreError):
    """A session with the given id already exists."""


class SessionClosed(StoreError):
    """The session is closed: it can still be read, but nothing can be added to it."""


class CompactionRejected(StoreError, ValueError):
    """A compaction named no message, or one that does not exist or is already replaced."""


class SessionArchived(StoreError):
    """The session is archived (a rewind replaced it): it can be read and forked, but nothing can be added
    to it until it is taken out of the archive (:meth:`SessionStore.unarchive_session`)."""


class StaleOwner(StoreError):
    """Another host took the session (its owner epoch moved past ``epoch``, the one this store took it
    with): this store may not write to it again. Nothing was written."""

    def __init__(self, message: str, *, session_id: str, epoch: int, current: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.epoch = epoch
        self.current = current


class TurnRunning(StoreError):
    """The session has a turn running, and the operation (a rewind) needs it between turns; ``turn`` is
    the running turn. Try again once it has ended."""

    def __init__(self, message: str, *, session_id: str, turn: int):
        super().__init__(message)
        self.session_id = session_id
        self.turn = turn


class ForkRejected(StoreError, ValueError):
    """A fork (or rewind) asked for a turn the session cannot be forked at: not a whole number, below 0,
    or past its last converged turn (the last that ended: a turn still running is not one).

    ``session_id`` is the source, ``at_turn`` the turn asked for (None when it was not a number) and
    ``last_turn`` the last converged turn, the highest a fork may take. Nothing has been changed.
    """

    def __init__(self, message: str, *, session_id: str, at_turn: int | None, last_turn: int):
        super().__init__(message)
        self.session_id = session_id
        self.at_turn = at_turn
        self.last_turn = last_turn
