"""The session store: sessions, their message history and their event log, in one SQLite file.

Durability: every write is committed before the method returns. The file is in WAL mode; with
``synchronous="NORMAL"`` a crash of the process loses nothing committed (a power cut may lose the last
commits), ``"FULL"`` makes each commit survive a power cut too.

Concurrency: a :class:`SessionStore` owns one connection (``check_same_thread=False``) behind a lock, so
its methods may be called from any number of threads; each holds the lock for one short transaction. Other
processes (or other stores on the same file) wait up to ``busy_timeout`` seconds for the write lock instead
of failing with "database is locked".

Secrets: every text the store writes (message bodies, event bodies, session metadata) goes through
:func:`shell._secrets.redact` first, so no API key or token reaches the file.

Errors are :class:`StoreError` subclasses. The store never deletes or rewrites anything it cannot read: a
file that is not a session store, or a row that cannot be decoded, raises :class:`StoreCorrupt`, and a file
from a newer version of turnkeep raises :class:`StoreVersionError`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias

import msgspec

from sampler.messages import Message

from . import _schema
from ._secrets import redact

__all__ = [
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
    "StoreVersionError",
    "StoredEvent",
    "StoredMessage",
]

SessionStatus: TypeAlias = Literal["idle", "in_turn", "closed"]
"""``idle`` between turns, ``in_turn`` while a turn runs (and after a crash in one), ``closed`` for good."""

_SQLITE_HEADER = b"SQLite format 3\x00"


# --- Errors -----------------------------------------------------------------------------------------------


class StoreError(Exception):
    """Base class of every error the session store raises."""


class StoreCorrupt(StoreError):
    """The file is not a turnkeep session store, or a row in it cannot be decoded.

    ``path`` is the file; ``session_id`` and ``seq`` name the bad row when one is to blame (``seq`` is a
    message seq, an event seq, or None for the session row itself). Nothing has been changed on disk.
    """

    def __init__(self, message: str, *, path: Path, session_id: str | None = None, seq: int | None = None):
        super().__init__(message)
        self.path = path
        self.session_id = session_id
        self.seq = seq


class StoreVersionError(StoreError):
    """The file was written by a newer turnkeep (schema ``found``) than this one (``supported``)."""

    def __init__(self, message: str, *, path: Path, found: int, supported: int):
        super().__init__(message)
        self.path = path
        self.found = found
        self.supported = supported


class StoreBusy(StoreError):
    """Another process held the file's write lock for longer than ``busy_timeout``."""


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


# --- Records ----------------------------------------------------------------------------------------------


class SessionRecord(msgspec.Struct, frozen=True):
    """A session's row: identity, status and what the session has learned."""

    id: str
    created_at: float
    """Seconds since the epoch."""
    updated_at: float
    """When anything of the session (row, messages, events) was last written."""
    workspace: str
    model: str
    status: SessionStatus
    current_turn: int
    """The last turn begun (0 before the first)."""
    learned_window: int | None
    """The context window learned from an overflow, in tokens; None until one happened."""
    meta: dict[str, Any]


class StoredMessage(msgspec.Struct, frozen=True):
    """A message of a session's history with its place in it."""

    seq: int
    """1-based, dense, in the order the messages were appended."""
    turn: int
    message: Message
    replaced_by: int | None
    """The seq of the summary that replaced this message in the projection, or None."""
    is_summary: bool


class StoredEvent(msgspec.Struct, frozen=True):
    """An entry of a session's event log; ``body`` is the event's JSON, to be decoded by its reader."""

    seq: int
    """1-based, dense, in the order the events were appended."""
    turn: int
    type: str
    """The event struct's tag, or its class name if it has none."""
    body: bytes
    created_at: float


# --- Encoding ---------------------------------------------------------------------------------------------

_message_decoder = msgspec.json.Decoder(Message)
_meta_decoder = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


def _redact_tree(value: Any) -> Any:
    """``value`` (builtins from ``msgspec.to_builtins``) with every string redacted, image data aside."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_tree(item) for item in value]
    if isinstance(value, dict):
        # Base64 image bytes are not text: redacting them could only corrupt the image.
        if value.get("type") == "ImagePart":
            return {key: item if key == "data" else _redact_tree(item) for key, item in value.items()}
        return {key: _redact_tree(item) for key, item in value.items()}
    return value


def _encode(value: Any) -> bytes:
    return _encoder.encode(_redact_tree(msgspec.to_builtins(value)))


def _event_type(event: msgspec.Struct) -> str:
    tag = type(event).__struct_config__.tag
    return type(event).__name__ if tag is None else str(tag)


_SESSION_COLUMNS = "id, created_at, updated_at, workspace, model, status, current_turn, learned_window, meta"


# --- The store --------------------------------------------------------------------------------------------


class SessionStore:
    """Sessions, their messages and their events, persisted in one SQLite file; safe to share by threads.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`. Every method that writes
    has committed when it returns; every method raises :class:`StoreClosed` after :meth:`close`,
    :class:`SessionNotFound` for an unknown session, and :class:`StoreCorrupt` for a row it cannot decode.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
    ) -> None:
        """Open (or create) the store at ``path``; the same as :meth:`open`."""
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if not busy_timeout >= 0:
            raise ValueError(f"busy_timeout must be >= 0 seconds, got {busy_timeout!r}")
        self._path = Path(path).expanduser()
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

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
    ) -> SessionStore:
        """Open the store at ``path``, creating the file and its parent directories if needed.

        A file of an older schema is migrated (each step in one transaction). Raises
        :class:`StoreCorrupt` if the file is not a turnkeep session store, :class:`StoreVersionError` if it
        comes from a newer turnkeep, :class:`StoreBusy` if another process keeps it locked beyond
        ``busy_timeout`` seconds; in each case the file is left as it was.
        """
        return cls(path, synchronous=synchronous, busy_timeout=busy_timeout)

    @property
    def path(self) -> Path:
        """The store's file."""
        return self._path

    def close(self) -> None:
        """Close the connection, after any call in progress; calling it again does nothing."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- Sessions -----------------------------------------------------------------------------------------

    def create_session(
        self, session_id: str, *, workspace: str, model: str, meta: Mapping[str, Any] | None = None
    ) -> SessionRecord:
        """Create an idle session at turn 0 and return its record; :class:`SessionExists` if taken."""
        meta_json = _encode(dict(meta or {}))
        now = time.time()
        with self._write() as db:
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionExists(f"session {session_id!r} already exists")
            db.execute(
                "INSERT INTO sessions (id, created_at, updated_at, workspace, model, status, current_turn,"
                " learned_window, meta) VALUES (?, ?, ?, ?, ?, 'idle', 0, NULL, ?)",
                (session_id, now, now, redact(workspace), redact(model), meta_json.decode()),
            )
            row = self._session_row(db, session_id)
        return self._decode_session(row)

    def get_session(self, session_id: str) -> SessionRecord:
        """The session's record."""
        with self._read() as db:
            row = self._session_row(db, session_id)
        return self._decode_session(row)

    def list_sessions(self) -> list[SessionRecord]:
        """Every session, closed ones included, oldest first."""
        with self._read() as db:
            rows = db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, id").fetchall()
        return [self._decode_session(row) for row in rows]

    def close_session(self, session_id: str) -> None:
        """Mark the session closed; it stays readable. Closing a closed session does nothing."""
        with self._write() as db:
            self._session_row(db, session_id)
            db.execute(
                "UPDATE sessions SET status = 'closed', updated_at = ? WHERE id = ? AND status != 'closed'",
                (time.time(), session_id),
            )

    def begin_turn(self, session_id: str, turn: int) -> None:
        """Record that ``turn`` is running: status ``in_turn``, ``current_turn = turn``."""
        with self._write() as db:
            self._open_session(db, session_id)
            db.execute(
                "UPDATE sessions SET status = 'in_turn', current_turn = ?, updated_at = ? WHERE id = ?",
                (turn, time.time(), session_id),
            )

    def end_turn(self, session_id: str) -> None:
        """Record that no turn is running: status ``idle``."""
        with self._write() as db:
            self._open_session(db, session_id)
            db.execute(
                "UPDATE sessions SET status = 'idle', updated_at = ? WHERE id = ?", (time.time(), session_id)
            )

    def interrupted_turn(self, session_id: str) -> int | None:
        """The turn that was begun and never ended (the process stopped during it), or None."""
        record = self.get_session(session_id)
        return record.current_turn if record.status == "in_turn" else None

    def set_learned_window(self, session_id: str, tokens: int) -> None:
        """Record the context window, in tokens (> 0), learned for the session's model."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"tokens must be a whole number >= 1, got {tokens!r}")
        with self._write() as db:
            self._open_session(db, session_id)
            db.execute(
                "UPDATE sessions SET learned_window = ?, updated_at = ? WHERE id = ?",
                (tokens, time.time(), session_id),
            )

    # --- Messages -----------------------------------------------------------------------------------------

    def append_message(self, session_id: str, turn: int, message: Message) -> int:
        """Append ``message`` (redacted) to the session's history; returns its seq."""
        body = _encode(message)
        now = time.time()
        with self._write() as db:
            self._open_session(db, session_id)
            seq = self._next_seq(db, "messages", session_id)
            db.execute(
                "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary,"
                " position) VALUES (?, ?, ?, ?, ?, NULL, 0, ?)",
                (session_id, seq, turn, body, now, seq),
            )
            self._touch(db, session_id, now)
        return seq

    def apply_compaction(
        self, session_id: str, *, replaced: Sequence[int], summary: Message, turn: int
    ) -> int:
        """Replace messages by ``summary`` in the projection, atomically; returns the summary's seq.

        The summary is appended (``is_summary``) and takes, in the projection, the place of the earliest
        of the ``replaced`` messages, which are marked ``replaced_by`` the summary and stay in the store.
        Raises :class:`CompactionRejected` (and changes nothing) if ``replaced`` is empty or names a message
        that does not exist or is already replaced.
        """
        seqs = sorted(set(replaced))
        if not seqs:
            raise CompactionRejected("a compaction must replace at least one message")
        body = _encode(summary)
        now = time.time()
        with self._write() as db:
            self._open_session(db, session_id)
            marks = ",".join("?" * len(seqs))
            rows = db.execute(
                f"SELECT seq, replaced_by, position FROM messages WHERE session_id = ? AND seq IN ({marks})",
                (session_id, *seqs),
            ).fetchall()
            missing = sorted(set(seqs) - {row[0] for row in rows})
            if missing:
                raise CompactionRejected(f"session {session_id!r} has no message with seq {missing}")
            taken = sorted(row[0] for row in rows if row[1] is not None)
            if taken:
                raise CompactionRejected(f"messages {taken} of session {session_id!r} are already replaced")
            position = min(row[2] for row in rows)
            seq = self._next_seq(db, "messages", session_id)
            db.execute(
                "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary,"
                " position) VALUES (?, ?, ?, ?, ?, NULL, 1, ?)",
                (session_id, seq, turn, body, now, position),
            )
            db.execute(
                f"UPDATE messages SET replaced_by = ? WHERE session_id = ? AND seq IN ({marks})",
                (seq, session_id, *seqs),
            )
            self._touch(db, session_id, now)
        return seq

    def load_messages(self, session_id: str, *, include_replaced: bool = False) -> list[StoredMessage]:
        """The session's messages.

        By default the projection, the history as the model sees it: the messages not replaced and the
        summaries, each summary where the first message it replaced was. With ``include_replaced``, every
        message ever appended, in seq order.
        """
        where, order = ("", "seq") if include_replaced else ("AND replaced_by IS NULL", "position, seq")
        with self._read() as db:
            self._session_row(db, session_id)
            rows = db.execute(
                f"SELECT seq, turn, body, replaced_by, is_summary FROM messages WHERE session_id = ? {where}"
                f" ORDER BY {order}",
                (session_id,),
            ).fetchall()
        return [self._decode_message(session_id, row) for row in rows]

    # --- Events -------------------------------------------------------------------------------------------

    def append_event(self, session_id: str, turn: int, event: msgspec.Struct) -> int:
        """Append ``event`` (its JSON, redacted) to the session's event log; returns its seq."""
        body = _encode(event)
        now = time.time()
        with self._write() as db:
            self._open_session(db, session_id)
            seq = self._next_seq(db, "events", session_id)
            db.execute(
                "INSERT INTO events (session_id, seq, turn, type, body, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, seq, turn, _event_type(event), body, now),
            )
            self._touch(db, session_id, now)
        return seq

    def load_events(self, session_id: str, *, since: int = 0) -> list[StoredEvent]:
        """The session's events with a seq greater than ``since``, in seq order."""
        with self._read() as db:
            self._session_row(db, session_id)
            rows = db.execute(
                "SELECT seq, turn, type, body, created_at FROM events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq",
                (session_id, since),
            ).fetchall()
        return [self._decode_event(session_id, row) for row in rows]

    # --- Internals ----------------------------------------------------------------------------------------

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
        # Read-only checks first: a file that is refused must not be touched.
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        (application_id,) = connection.execute("PRAGMA application_id").fetchone()
        (tables,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
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
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        connection.execute("PRAGMA foreign_keys = ON")
        for target in _schema.pending(version):
            try:
                _schema.migrate(connection, target)
            except sqlite3.OperationalError as error:
                if _is_busy(error):
                    raise
                raise StoreCorrupt(
                    f"{self._path} cannot be migrated to schema version {target}: {error}", path=self._path
                ) from error

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as error:
            if _is_busy(error):
                raise StoreBusy(f"{self._path} stayed locked by another process: {error}") from error
            raise StoreError(f"{self._path}: {error}") from error
        except sqlite3.DatabaseError as error:
            raise StoreCorrupt(f"{self._path} is unreadable: {error}", path=self._path) from error
        except sqlite3.Error as error:
            raise StoreError(f"{self._path}: {error}") from error

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translate():
            yield self._live()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translate():
            db = self._live()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _live(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreClosed(f"the session store {self._path} is closed")
        return self._connection

    def _session_row(self, db: sqlite3.Connection, session_id: str) -> tuple[Any, ...]:
        row: tuple[Any, ...] | None = db.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return row

    def _open_session(self, db: sqlite3.Connection, session_id: str) -> None:
        if self._session_row(db, session_id)[5] == "closed":
            raise SessionClosed(f"session {session_id!r} is closed")

    def _touch(self, db: sqlite3.Connection, session_id: str, now: float) -> None:
        db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

    def _next_seq(self, db: sqlite3.Connection, table: str, session_id: str) -> int:
        (last,) = db.execute(f"SELECT max(seq) FROM {table} WHERE session_id = ?", (session_id,)).fetchone()
        return 1 if last is None else int(last) + 1

    def _corrupt(self, what: str, session_id: str, seq: int | None, error: Exception) -> StoreCorrupt:
        where = f"session {session_id!r}" if seq is None else f"session {session_id!r}, seq {seq}"
        return StoreCorrupt(
            f"{self._path}: {what} of {where} cannot be decoded: {error}",
            path=self._path,
            session_id=session_id,
            seq=seq,
        )

    def _decode_session(self, row: tuple[Any, ...]) -> SessionRecord:
        session_id = str(row[0])
        try:
            meta = _meta_decoder.decode(row[8])
            return msgspec.convert(
                {
                    **dict(zip(_SESSION_COLUMNS.split(", "), row, strict=True)),
                    "meta": meta,
                },
                SessionRecord,
            )
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as error:
            raise self._corrupt("the row", session_id, None, error) from error

    def _decode_message(self, session_id: str, row: tuple[Any, ...]) -> StoredMessage:
        seq, turn, body, replaced_by, is_summary = row
        try:
            if not isinstance(body, bytes | str):
                raise TypeError(f"body is a {type(body).__name__}, not JSON")
            message = _message_decoder.decode(body)
            return StoredMessage(
                seq=seq,
                turn=msgspec.convert(turn, int),
                message=message,
                replaced_by=msgspec.convert(replaced_by, int | None),
                is_summary=bool(is_summary),
            )
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as error:
            raise self._corrupt("the message", session_id, seq, error) from error

    def _decode_event(self, session_id: str, row: tuple[Any, ...]) -> StoredEvent:
        seq, turn, kind, body, created_at = row
        try:
            if isinstance(body, str):
                body = body.encode()
            if not isinstance(body, bytes):
                raise TypeError(f"body is a {type(body).__name__}, not JSON")
            return StoredEvent(
                seq=seq,
                turn=msgspec.convert(turn, int),
                type=msgspec.convert(kind, str),
                body=body,
                created_at=msgspec.convert(created_at, float),
            )
        except (msgspec.ValidationError, TypeError) as error:
            raise self._corrupt("the event", session_id, seq, error) from error


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text
