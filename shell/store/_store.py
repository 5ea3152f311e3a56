"""The session store itself: one interface over the SQLite and PostgreSQL backends.

One class, :class:`SessionStore`, whose write methods each are one operation on a connection, made in a
transaction shared with other writes (:mod:`._group`) or in one of its own, with the same encoding,
redaction and error translation for both backends; it stays one module for that reason.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import msgspec

from sampler.messages import Message

from .._secrets import may_hold_secret, redact
from . import _fork, _usage
from ._db import Db, StoreBackend
from ._errors import (
    CompactionRejected,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    StaleOwner,
    StoreCorrupt,
    StoreError,
    TurnRunning,
)
from ._group import GroupWriter, ack_timeout
from ._records import (
    Backend,
    ParentLink,
    SessionRecord,
    StoredEvent,
    StoredMessage,
    TurnUsageRecord,
    TurnWrite,
)
from ._targets import resolve

__all__ = ["SessionStore", "open_store"]

_DEFAULT_POOL_SIZE = 4

T = TypeVar("T")


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
    encoded = _encoder.encode(value)
    if not may_hold_secret(encoded):
        return encoded
    return _encoder.encode(_redact_tree(msgspec.to_builtins(value)))


def _event_type(event: msgspec.Struct) -> str:
    tag = type(event).__struct_config__.tag
    return type(event).__name__ if tag is None else str(tag)


_SESSION_COLUMNS = (
    "id, created_at, updated_at, workspace, model, status, current_turn, learned_window, meta, forked_from,"
    " forked_at_turn, owner_epoch, parent_session, parent_turn, parent_call, agent_profile"
)


def _link_columns(parent: ParentLink) -> tuple[str, int, str, str]:
    """The values of ``parent_session, parent_turn, parent_call, agent_profile`` for ``parent``; raises
    :class:`ValueError` for a link of the wrong types, which could not be read back."""
    if not isinstance(parent, ParentLink):
        raise ValueError(f"parent must be a ParentLink, got {parent!r}")
    try:
        msgspec.convert(msgspec.to_builtins(parent), ParentLink)
    except msgspec.ValidationError as error:
        raise ValueError(f"invalid parent link {parent!r}: {error}") from None
    return parent.session, parent.turn, parent.call, parent.profile


# --- The store --------------------------------------------------------------------------------------------


def open_store(
    target: str | os.PathLike[str],
    *,
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    busy_timeout: float = 5.0,
    pool_size: int | None = None,
    group_commit: bool = True,
) -> SessionStore:
    """Open the store ``target`` names, creating it if needed; the same as :meth:`SessionStore.open`."""
    return SessionStore(
        target,
        synchronous=synchronous,
        busy_timeout=busy_timeout,
        pool_size=pool_size,
        group_commit=group_commit,
    )


class SessionStore:
    """Sessions, their messages and their events, in a SQLite file or a PostgreSQL database.

    Safe to share by threads. Open one with :func:`open_store` or :meth:`open`; use it as a context manager
    or call :meth:`close`. Every method that writes has committed when it returns, or raises
    :class:`StoreTimeout` if its transaction took too long; every method raises :class:`StoreClosed` after
    :meth:`close`, :class:`SessionNotFound` for an unknown session, and :class:`StoreCorrupt` for a row it
    cannot decode.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
        pool_size: int | None = None,
        group_commit: bool = True,
    ) -> None:
        """Open (or create) the store ``target`` names; the same as :meth:`open`."""
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if not (isinstance(busy_timeout, int | float) and busy_timeout >= 0):
            raise ValueError(f"busy_timeout must be >= 0 seconds, got {busy_timeout!r}")
        if pool_size is not None and (
            isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1
        ):
            raise ValueError(f"pool_size must be a whole number >= 1, got {pool_size!r}")
        if not isinstance(group_commit, bool):
            raise ValueError(f"group_commit must be True or False, got {group_commit!r}")
        where = resolve(target)
        self._backend: StoreBackend
        self._fences: dict[str, int] = {}
        """The epoch this store took each session with (:meth:`take_session`)."""
        self._fences_lock = threading.Lock()
        if isinstance(where, Path):
            if pool_size is not None:
                raise ValueError("pool_size applies to PostgreSQL stores only")
            from ._sqlite import SqliteBackend

            self._backend = SqliteBackend(where, synchronous=synchronous, busy_timeout=busy_timeout)
        else:
            try:
                from ._postgres import PostgresBackend
            except ImportError as error:
                raise StoreError(
                    f"a PostgreSQL store needs psycopg 3 ({error}); install turnkeep[postgres]"
                ) from error
            self._backend = PostgresBackend(
                where,
                synchronous=synchronous,
                busy_timeout=busy_timeout,
                pool_size=_DEFAULT_POOL_SIZE if pool_size is None else pool_size,
            )
        self._writer = (
            GroupWriter(self._backend.writer, location=self.location, ack_timeout=ack_timeout(busy_timeout))
            if group_commit
            else None
        )

    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
        pool_size: int | None = None,
        group_commit: bool = True,
    ) -> SessionStore:
        """Open the store ``target`` names, creating it if needed.

        ``target`` is a file path or ``sqlite://PATH`` (everything after ``sqlite://``, percent-decoded,
        with ``~`` expanded: ``sqlite:///var/lib/s.db`` is ``/var/lib/s.db``) for SQLite, whose file and
        parent directories are created; or a ``postgresql://`` URL for PostgreSQL, whose database must
        exist and whose tables are created. A URL passed through :class:`~pathlib.Path` has lost a
        ``/`` and is refused with :class:`ValueError`, as are an unknown URL scheme and invalid options.

        ``synchronous`` and ``busy_timeout`` are as the module says; ``pool_size`` (PostgreSQL only,
        default 4) is the most connections the store holds. With ``group_commit`` (the default) the writes
        of all threads share transactions, made by one writer thread; without it each write is a transaction
        of its own, made on the caller's thread.

        A store of an older schema is migrated (each step in one transaction). Raises :class:`StoreCorrupt`
        if the database is not a turnkeep session store, :class:`StoreVersionError` if it comes from a
        newer turnkeep, :class:`StoreBusy` if another process keeps it locked beyond ``busy_timeout``
        seconds, :class:`StoreUnavailable` if the PostgreSQL server cannot be reached; in each case the
        database is left as it was.
        """
        return cls(
            target,
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            pool_size=pool_size,
            group_commit=group_commit,
        )

    @property
    def backend(self) -> Backend:
        """The kind of database the store is in."""
        return self._backend.kind

    @property
    def path(self) -> Path | None:
        """The store's file, for SQLite; None for PostgreSQL."""
        return self._backend.path

    @property
    def group_commit(self) -> bool:
        """Whether writes share transactions made by the store's writer thread (else each write is a
        transaction of its own, on the caller's thread)."""
        return self._writer is not None

    @property
    def location(self) -> str:
        """Where the store is, fit to show: the file path, or the URL without its password."""
        return self._backend.location

    def close(self) -> None:
        """Refuse new calls, make the writes already queued (waiting as long as one write may), then close
        the store's connections after any call in progress; calling it again does nothing."""
        if self._writer is not None:
            self._writer.close()
        self._backend.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<turnkeep.SessionStore {self.location}>"

    # --- Sessions -----------------------------------------------------------------------------------------

    def create_session(
        self,
        session_id: str,
        *,
        workspace: str,
        model: str,
        meta: Mapping[str, Any] | None = None,
        parent: ParentLink | None = None,
    ) -> SessionRecord:
        """Create an idle session at turn 0 and return its record; :class:`SessionExists` if taken.

        With ``parent`` the session is that session's child, run by its ``agent`` tool call: the link is
        stored with the row, as it is, and :meth:`children` of the parent lists the session. Raises
        :class:`SessionNotFound` (and creates nothing) when ``parent`` names no session of the store, and
        :class:`ValueError` for a link whose fields are not of their types.
        """
        meta_json = _encode(dict(meta or {}))
        now = time.time()
        link = (None, None, None, None) if parent is None else _link_columns(parent)

        def write(db: Db) -> tuple[Any, ...]:
            if parent is not None:
                self._session_row(db, parent.session)
            created = db.run(
                "INSERT INTO sessions (id, created_at, updated_at, workspace, model, status, current_turn,"
                " learned_window, meta, parent_session, parent_turn, parent_call, agent_profile)"
                " VALUES (?, ?, ?, ?, ?, 'idle', 0, NULL, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (session_id, now, now, redact(workspace), redact(model), meta_json.decode(), *link),
            )
            if not created:
                raise SessionExists(f"session {session_id!r} already exists")
            return self._session_row(db, session_id)

        return self._decode_session(self._write(write))

    def get_session(self, session_id: str) -> SessionRecord:
        """The session's record."""
        with self._backend.read() as db:
            row = self._session_row(db, session_id)
        return self._decode_session(row)

    def list_sessions(self) -> list[SessionRecord]:
        """Every session, closed ones included, oldest first."""
        with self._backend.read() as db:
            rows = db.query(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, id")
        return [self._decode_session(row) for row in rows]

    def children(self, session_id: str) -> list[SessionRecord]:
        """The sessions whose parent link names ``session_id`` (its children, not theirs), in the order they
        were created (by creation time, then id); empty for a session without children. Raises
        :class:`SessionNotFound` for an unknown session."""
        with self._backend.read() as db:
            self._session_row(db, session_id)
            rows = db.query(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE parent_session = ? ORDER BY created_at, id",
                (session_id,),
            )
        return [self._decode_session(row) for row in rows]

    def close_session(self, session_id: str) -> None:
        """Mark the session closed; it stays readable. Closing a closed session does nothing."""
        now = time.time()

        def write(db: Db) -> None:
            self._session_row(db, session_id, lock=True)
            db.run(
                "UPDATE sessions SET status = 'closed', updated_at = ? WHERE id = ? AND status != 'closed'",
                (now, session_id),
            )

        self._write(write)

    def take_session(self, session_id: str) -> int:
        """Take the session for this store's writes: increment its owner epoch and return it. From then on
        every write of this store to the session is refused with :class:`StaleOwner` once another store
        has taken it; taking it again makes this store the owner again. Raises :class:`SessionNotFound`."""

        def write(db: Db) -> int:
            self._session_row(db, session_id, lock=True)
            db.run("UPDATE sessions SET owner_epoch = owner_epoch + 1 WHERE id = ?", (session_id,))
            ((epoch,),) = db.query("SELECT owner_epoch FROM sessions WHERE id = ?", (session_id,))
            return int(epoch)

        epoch = self._write(write)
        with self._fences_lock:
            self._fences[session_id] = max(epoch, self._fences.get(session_id, 0))
        return epoch

    def owns(self, session_id: str) -> bool:
        """Whether this store took the session and no other store took it since."""
        with self._fences_lock:
            fence = self._fences.get(session_id)
        return fence is not None and self.get_session(session_id).owner_epoch == fence

    def release_session(self, session_id: str) -> None:
        """Forget the epoch this store took the session with: its writes to it are unfenced again."""
        with self._fences_lock:
            self._fences.pop(session_id, None)

    def begin_turn(self, session_id: str, turn: int) -> None:
        """Record that ``turn`` is running: status ``in_turn``, ``current_turn = turn``."""
        self._update_open(session_id, "status = 'in_turn', current_turn = ?", (turn,))

    def start_turn(self, session_id: str, turn: int, prompt: Message) -> int:
        """:meth:`begin_turn` and :meth:`append_message` of the turn's ``prompt`` in one transaction: both
        or neither are stored. Returns the prompt's seq."""
        return self.write_turn(session_id, turn, messages=(prompt,), begins=True).messages[0]

    def end_turn(self, session_id: str) -> None:
        """Record that no turn is running: status ``idle``."""
        self._update_open(session_id, "status = 'idle'", ())

    def finish_turn(self, session_id: str, turn: int, event: msgspec.Struct) -> int:
        """:meth:`end_turn` and :meth:`append_event` of the event that ended ``turn`` in one transaction:
        both or neither are stored. Returns the event's seq."""
        return self.write_turn(session_id, turn, events=(event,), ends=True).events[0]

    def interrupted_turn(self, session_id: str) -> int | None:
        """The turn that was begun and never ended (the process stopped during it), or None."""
        record = self.get_session(session_id)
        return record.current_turn if record.status == "in_turn" else None

    def set_learned_window(self, session_id: str, tokens: int) -> None:
        """Record the context window, in tokens (> 0), learned for the session's model."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"tokens must be a whole number >= 1, got {tokens!r}")
        self._update_open(session_id, "learned_window = ?", (tokens,))

    # --- Forks --------------------------------------------------------------------------------------------

    def fork_session(
        self,
        source_id: str,
        session_id: str,
        *,
        at_turn: int | None = None,
        workspace: str | None = None,
    ) -> SessionRecord:
        """A new idle session ``session_id`` whose history is the source's as it stood at the end of turn
        ``at_turn`` (its last converged turn when None), made in one transaction; returns its record.

        The fork gets the source's messages of turns <= K exactly as they were when turn K ended (a
        compaction or repair made later is undone in it, one made earlier kept), the events and usage of
        those turns, the source's model, learned window and meta, ``workspace`` (the source's when None),
        ``current_turn = K`` (its next turn is K + 1), ``forked_from = (source_id, K)`` and no parent link
        (a fork is a session of its own, even of a child session, and nobody's child). The source is
        read at a turn boundary, under the lock its writers take, and nothing of it changes; a closed or
        archived source can be forked too. Raises :class:`SessionNotFound`, :class:`SessionExists` for a
        taken ``session_id``, and :class:`ForkRejected` for a turn below 0 or past the last converged one.
        """
        return self._fork(source_id, session_id, at_turn=at_turn, workspace=workspace, archive=False)

    def rewind_session(
        self, source_id: str, session_id: str, *, to_turn: int, workspace: str | None = None
    ) -> SessionRecord:
        """:meth:`fork_session` at ``to_turn`` and the source archived, in one transaction: both or
        neither. Returns the fork's record.

        Raises as :meth:`fork_session` does, and also :class:`TurnRunning` when the source has a turn
        running, :class:`SessionClosed` or :class:`SessionArchived` when it is closed or archived already.
        """
        return self._fork(source_id, session_id, at_turn=to_turn, workspace=workspace, archive=True)

    def unarchive_session(self, session_id: str) -> SessionRecord:
        """Take an archived session out of the archive (status ``idle``: it takes prompts again) and return
        its record; a session that is not archived is left as it is. Raises :class:`SessionNotFound`."""
        now = time.time()

        def write(db: Db) -> tuple[Any, ...]:
            self._session_row(db, session_id, lock=True)
            db.run(
                "UPDATE sessions SET status = 'idle', updated_at = ? WHERE id = ? AND status = 'archived'",
                (now, session_id),
            )
            return self._session_row(db, session_id)

        return self._decode_session(self._write(write))

    def _fork(
        self, source_id: str, session_id: str, *, at_turn: int | None, workspace: str | None, archive: bool
    ) -> SessionRecord:
        now = time.time()

        def write(db: Db) -> tuple[Any, ...]:
            # Locking the source's row waits for (and then keeps out) every write to it: what is read
            # next is the source between two of its writes, and so at a turn boundary.
            source = self._session_row(db, source_id, lock=True)
            status, current_turn = str(source[5]), int(source[6])
            if archive:
                self._check_rewindable(source_id, status, current_turn)
            turn = _fork.fork_turn(source_id, status, current_turn, at_turn)
            created = db.run(
                "INSERT INTO sessions (id, created_at, updated_at, workspace, model, status, current_turn,"
                " learned_window, meta, forked_from, forked_at_turn)"
                " VALUES (?, ?, ?, ?, ?, 'idle', ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (
                    session_id,
                    now,
                    now,
                    source[3] if workspace is None else redact(workspace),
                    source[4],
                    turn,
                    source[7],
                    source[8],
                    source_id,
                    turn,
                ),
            )
            if not created:
                raise SessionExists(f"session {session_id!r} already exists")
            rows = db.query(
                "SELECT seq, turn, replaced_by, is_summary FROM messages WHERE session_id = ?", (source_id,)
            )
            cut = _fork.cut_history(
                [
                    _fork.MessageRow(int(seq), int(turn), None if by is None else int(by), bool(summary))
                    for seq, turn, by, summary in rows
                ],
                turn,
            )
            _fork.copy_fork(db, source_id=source_id, fork_id=session_id, cut=cut, created_at=now)
            if archive:
                db.run(
                    "UPDATE sessions SET status = 'archived', updated_at = ? WHERE id = ?", (now, source_id)
                )
            return self._session_row(db, session_id)

        return self._decode_session(self._write(write))

    @staticmethod
    def _check_rewindable(session_id: str, status: str, current_turn: int) -> None:
        if status == "in_turn":
            raise TurnRunning(
                f"session {session_id!r} has turn {current_turn} running: it can be rewound once the turn"
                " has ended (cancel it to end it now)",
                session_id=session_id,
                turn=current_turn,
            )
        if status == "closed":
            raise SessionClosed(f"session {session_id!r} is closed: fork it instead of rewinding it")
        if status == "archived":
            raise SessionArchived(f"session {session_id!r} is archived already: fork it instead")

    # --- Messages -----------------------------------------------------------------------------------------

    def append_message(self, session_id: str, turn: int, message: Message) -> int:
        """Append ``message`` (redacted) to the session's history; returns its seq."""
        return self.write_turn(session_id, turn, messages=(message,)).messages[0]

    def write_turn(
        self,
        session_id: str,
        turn: int,
        *,
        messages: Sequence[Message] = (),
        events: Sequence[msgspec.Struct] = (),
        begins: bool = False,
        ends: bool = False,
    ) -> TurnWrite:
        """Append ``messages`` (redacted) to the session's history and ``events`` to its event log, all of
        turn ``turn``, in one transaction: all or none are stored. With ``begins`` the turn is recorded as
        running (as :meth:`begin_turn`), with ``ends`` as ended (as :meth:`end_turn`), in the same
        transaction. Returns the seqs given, in the order of ``messages`` and of ``events``; an event that
        ends a turn records its usage as :meth:`append_event` does.

        Raises :class:`ValueError` (and stores nothing) for ``begins`` with ``ends``, or for nothing to
        write."""
        if begins and ends:
            raise ValueError("a write cannot both begin and end a turn")
        if not (messages or events or begins or ends):
            raise ValueError("nothing to write")
        bodies = [_encode(message) for message in messages]
        logged = [(event, _encode(event)) for event in events]
        now = time.time()
        assignments, params = (
            ("status = 'in_turn', current_turn = ?, ", (turn,))
            if begins
            else ("status = 'idle', ", ())
            if ends
            else ("", ())
        )

        def write(db: Db) -> TurnWrite:
            self._claim(db, session_id, now, assignments, params)
            return TurnWrite(
                tuple(self._insert_message(db, session_id, turn, body, now) for body in bodies),
                tuple(self._insert_event(db, session_id, turn, event, body, now) for event, body in logged),
            )

        return self._write(write)

    def _insert_message(self, db: Db, session_id: str, turn: int, body: bytes, now: float) -> int:
        """Insert a message of a session claimed by the transaction (:meth:`_claim`); returns its seq."""
        seq = self._next_seq(db, "messages", session_id)
        db.run(
            "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary,"
            " position) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
            (session_id, seq, turn, body, now, False, seq),
        )
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
        return self._replace(session_id, replaced, [(turn, summary)])[0]

    def apply_repair(
        self, session_id: str, *, replaced: Sequence[int], messages: Sequence[tuple[int, Message]]
    ) -> list[int]:
        """Replace messages by a repaired run of ``messages`` (``(turn, message)`` pairs) in the projection,
        atomically; returns their seqs, in order.

        As :meth:`apply_compaction` does with a summary: the new messages (``is_summary``, being derived)
        take, in their order, the place of the earliest replaced message; the replaced ones stay in the
        store, ``replaced_by`` the first new one. Raises :class:`CompactionRejected` (and changes nothing)
        if ``messages`` or ``replaced`` is empty, or ``replaced`` names a message that does not exist or is
        already replaced.
        """
        if not messages:
            raise CompactionRejected("a repair must put at least one message in place")
        return self._replace(session_id, replaced, messages)

    def _replace(
        self, session_id: str, replaced: Sequence[int], messages: Sequence[tuple[int, Message]]
    ) -> list[int]:
        seqs = sorted(set(replaced))
        if not seqs:
            raise CompactionRejected("a compaction must replace at least one message")
        bodies = [(turn, _encode(message)) for turn, message in messages]
        now = time.time()

        def write(db: Db) -> int:
            self._claim(db, session_id, now)
            marks = ",".join("?" * len(seqs))
            rows = db.query(
                f"SELECT seq, replaced_by, position FROM messages WHERE session_id = ? AND seq IN ({marks})",
                (session_id, *seqs),
            )
            missing = sorted(set(seqs) - {row[0] for row in rows})
            if missing:
                raise CompactionRejected(f"session {session_id!r} has no message with seq {missing}")
            taken = sorted(row[0] for row in rows if row[1] is not None)
            if taken:
                raise CompactionRejected(f"messages {taken} of session {session_id!r} are already replaced")
            position = min(row[2] for row in rows)
            first = self._next_seq(db, "messages", session_id)
            for offset, (turn, body) in enumerate(bodies):
                db.run(
                    "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary,"
                    " position) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
                    (session_id, first + offset, turn, body, now, True, position),
                )
            db.run(
                f"UPDATE messages SET replaced_by = ? WHERE session_id = ? AND seq IN ({marks})",
                (first, session_id, *seqs),
            )
            return first

        first = self._write(write)
        return [first + offset for offset in range(len(bodies))]

    def load_messages(self, session_id: str, *, include_replaced: bool = False) -> list[StoredMessage]:
        """The session's messages.

        By default the projection, the history as the model sees it: the messages not replaced and the
        summaries, each summary where the first message it replaced was. With ``include_replaced``, every
        message ever appended, in seq order.
        """
        where, order = ("", "seq") if include_replaced else ("AND replaced_by IS NULL", "position, seq")
        with self._backend.read() as db:
            self._session_row(db, session_id)
            rows = db.query(
                f"SELECT seq, turn, body, replaced_by, is_summary FROM messages WHERE session_id = ? {where}"
                f" ORDER BY {order}",
                (session_id,),
            )
        return [self._decode_message(session_id, row) for row in rows]

    # --- Events -------------------------------------------------------------------------------------------

    def append_event(self, session_id: str, turn: int, event: msgspec.Struct) -> int:
        """Append ``event`` (its JSON, redacted) to the session's event log; returns its seq. An event that
        ends a turn also records the turn's usage, in the same transaction (a later end replaces it)."""
        return self.write_turn(session_id, turn, events=(event,)).events[0]

    def _insert_event(
        self, db: Db, session_id: str, turn: int, event: msgspec.Struct, body: bytes, now: float
    ) -> int:
        """Insert an event of a session claimed by the transaction (:meth:`_claim`); returns its seq."""
        seq = self._next_seq(db, "events", session_id)
        db.run(
            "INSERT INTO events (session_id, seq, turn, type, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, seq, turn, _event_type(event), body, now),
        )
        ended = _usage.turn_outcome(event)
        if ended is not None:
            row = _usage.row_of(session_id, turn, *ended, now)
            db.run("DELETE FROM turn_usage WHERE session_id = ? AND turn = ?", (session_id, turn))
            marks = ", ".join("?" * len(row))
            db.run(f"INSERT INTO turn_usage ({_usage.COLUMNS}) VALUES ({marks})", row)
        return seq

    def turn_usage(self, session_id: str) -> list[TurnUsageRecord]:
        """The usage of every ended turn of the session, by turn; turns that ended before the store kept
        usage have none."""
        with self._backend.read() as db:
            self._session_row(db, session_id)
            rows = db.query(
                f"SELECT {_usage.COLUMNS} FROM turn_usage WHERE session_id = ? ORDER BY turn", (session_id,)
            )
        return self._decode_usage(rows).get(session_id, [])

    def usage_by_session(self) -> dict[str, list[TurnUsageRecord]]:
        """:meth:`turn_usage` of every session that has any, by session id."""
        with self._backend.read() as db:
            rows = db.query(f"SELECT {_usage.COLUMNS} FROM turn_usage ORDER BY session_id, turn")
        return self._decode_usage(rows)

    def load_events(self, session_id: str, *, since: int = 0) -> list[StoredEvent]:
        """The session's events with a seq greater than ``since``, in seq order."""
        return self._events(session_id, "seq > ?", lambda _: since)

    def load_queued_prompts(self, session_id: str) -> list[StoredEvent]:
        """The ``PromptQueued`` events of the turns not begun yet (after the session's current turn), in
        seq order: the prompts acknowledged that still wait for their turn."""
        return self._events(session_id, "turn > ? AND type = 'PromptQueued'", lambda row: int(row[6]))

    def load_turn_events(self, session_id: str, turn: int) -> list[StoredEvent]:
        """The events of the session's turn ``turn``, in seq order."""
        return self._events(session_id, "turn = ?", lambda _: turn)

    def _events(
        self, session_id: str, condition: str, value: Callable[[tuple[Any, ...]], Any]
    ) -> list[StoredEvent]:
        """The session's events that meet ``condition`` (one placeholder, filled with ``value`` of the
        session's row, read in the same transaction), in seq order."""
        with self._backend.read() as db:
            row = self._session_row(db, session_id)
            rows = db.query(
                "SELECT seq, turn, type, body, created_at FROM events WHERE session_id = ? AND"
                f" {condition} ORDER BY seq",
                (session_id, value(row)),
            )
        return [self._decode_event(session_id, row) for row in rows]

    # --- Internals ----------------------------------------------------------------------------------------

    def _write(self, write: Callable[[Db], T]) -> T:
        """Make ``write`` in a transaction shared with other writes, or in one of its own without group
        commit; either way committed when this returns."""
        if self._writer is not None:
            return self._writer.submit(write)
        return self._backend.write_one(write)

    def _update_open(self, session_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        """Set ``assignments`` (and ``updated_at``) on the row of an open session."""
        now = time.time()
        assignments = f"{assignments}, " if assignments else ""
        self._write(lambda db: self._claim(db, session_id, now, assignments, params))

    def _session_row(self, db: Db, session_id: str, *, lock: bool = False) -> tuple[Any, ...]:
        suffix = self._backend.row_lock if lock else ""
        rows = db.query(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?{suffix}", (session_id,))
        if not rows:
            raise SessionNotFound(f"no session {session_id!r}")
        return rows[0]

    def _claim(
        self, db: Db, session_id: str, now: float, assignments: str = "", params: tuple[Any, ...] = ()
    ) -> None:
        """Take the row of an open session for the transaction's write, in one statement: set
        ``assignments`` (each followed by ``, ``) and ``updated_at = now``, and lock the row until commit.
        The lock also serialises the seq allocation of concurrent writers to the session, and a take by
        another store with this write: the epoch checked here holds until the write commits. Raises
        :class:`StaleOwner`, :class:`SessionClosed`, :class:`SessionArchived` or :class:`SessionNotFound`,
        having changed nothing."""
        fence = self._fences.get(session_id)
        where = "" if fence is None else " AND owner_epoch = ?"
        changed = db.run(
            f"UPDATE sessions SET {assignments}updated_at = ?"
            f" WHERE id = ? AND status NOT IN ('closed', 'archived'){where}",
            (*params, now, session_id) if fence is None else (*params, now, session_id, fence),
        )
        if changed != 1:
            self._refuse(db, session_id, fence)

    def _refuse(self, db: Db, session_id: str, fence: int | None) -> None:
        """Raise what kept a write from claiming the session's row (:meth:`_claim`)."""
        row = self._session_row(db, session_id, lock=True)
        status, epoch = row[5], int(row[11])
        if fence is not None and epoch != fence:
            raise StaleOwner(
                f"session {session_id!r} was taken by another host (owner epoch {epoch}, this host took it"
                f" at {fence}): this host may not write to it any more",
                session_id=session_id,
                epoch=fence,
                current=epoch,
            )
        if status == "closed":
            raise SessionClosed(f"session {session_id!r} is closed")
        if status == "archived":
            raise SessionArchived(f"session {session_id!r} is archived: take it out of the archive to use it")
        raise StoreError(f"session {session_id!r} changed while a write to it was made; nothing was written")

    def _next_seq(self, db: Db, table: str, session_id: str) -> int:
        ((last,),) = db.query(f"SELECT max(seq) FROM {table} WHERE session_id = ?", (session_id,))
        return 1 if last is None else int(last) + 1

    def _corrupt(self, what: str, session_id: str, seq: int | None, error: Exception) -> StoreCorrupt:
        where = f"session {session_id!r}" if seq is None else f"session {session_id!r}, seq {seq}"
        return StoreCorrupt(
            f"{self.location}: {what} of {where} cannot be decoded: {error}",
            path=self.path,
            location=self.location,
            session_id=session_id,
            seq=seq,
        )

    def _decode_session(self, row: tuple[Any, ...]) -> SessionRecord:
        session_id = str(row[0])
        try:
            fields = dict(zip(_SESSION_COLUMNS.split(", "), row, strict=True))
            source, at_turn = fields.pop("forked_from"), fields.pop("forked_at_turn")
            link = {
                "session": fields.pop("parent_session"),
                "turn": fields.pop("parent_turn"),
                "call": fields.pop("parent_call"),
                "profile": fields.pop("agent_profile"),
            }
            return msgspec.convert(
                {
                    **fields,
                    "meta": _meta_decoder.decode(row[8]),
                    "forked_from": None if source is None else (source, at_turn),
                    "parent": None if None in link.values() else link,
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

    def _decode_usage(self, rows: list[tuple[Any, ...]]) -> dict[str, list[TurnUsageRecord]]:
        grouped: dict[str, list[TurnUsageRecord]] = {}
        for row in rows:
            try:
                grouped.setdefault(str(row[0]), []).append(_usage.decode_row(row))
            except (msgspec.ValidationError, TypeError, ValueError) as error:
                raise self._corrupt("the turn usage", str(row[0]), None, error) from error
        return grouped

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
