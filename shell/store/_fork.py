"""Fork a session at a turn boundary: which turn, which rows, and the copy, in one write transaction.

Two pure decisions, tested on their own, then the copy that performs them:

- :func:`fork_turn` — the turn a fork is taken at: the one asked for, or the source's last converged turn
  (the last that ended; a turn still running is not one), refusing a turn below 0 or past it.
- :func:`cut_history` — which stored messages belong to the fork: the history exactly as it stood when
  turn K ended. Messages are stored in the order they were made, each turn's prompt first (its turn begins
  with it), and a compaction or repair appends its replacements after everything stored before it. So the
  history at the end of turn K is every message stored before the first message of a later turn (its
  *boundary*), and a message counts as replaced only if what replaced it is among those: a compaction made
  after turn K restores its originals in the fork, one made in turn K or before is kept with its summary.
  Summaries and repairs are left out of the boundary's search: a summary takes the turn of the oldest
  message it stands for, not the turn it was made in.

:func:`copy_fork` makes the copy inside one write of the store: the fork's row, its messages (the same
seqs, the same bodies), its events of turns <= K (renumbered from 1, naming the fork) and its turns'
usage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from . import _usage
from ._db import Db
from ._errors import ForkRejected

__all__ = ["ForkCut", "MessageRow", "copy_fork", "cut_history", "fork_turn", "last_converged_turn"]

_event_decoder = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


def last_converged_turn(status: str, current_turn: int) -> int:
    """The last turn of a session that ended: ``current_turn``, or the one before while it runs
    (``in_turn``; also a turn a stopped process left running, which only ends when the session resumes)."""
    return current_turn - 1 if status == "in_turn" else current_turn


def fork_turn(session_id: str, status: str, current_turn: int, at_turn: int | None) -> int:
    """The turn a fork of the session is taken at: ``at_turn``, or the last converged turn when None.

    Raises :class:`ForkRejected` for a turn that is not a whole number, is below 0, or lies past the last
    converged turn (the message names it, and the turn running, if any).
    """
    last = last_converged_turn(status, current_turn)
    if at_turn is None:
        return last
    if isinstance(at_turn, bool) or not isinstance(at_turn, int):
        raise ForkRejected(
            f"a fork's turn must be a whole number, got {at_turn!r}",
            session_id=session_id,
            at_turn=None,
            last_turn=last,
        )
    if at_turn < 0:
        raise ForkRejected(
            f"cannot fork session {session_id!r} at turn {at_turn}: turns are numbered from 0"
            " (0 is an empty fork)",
            session_id=session_id,
            at_turn=at_turn,
            last_turn=last,
        )
    if at_turn > last:
        running = f"; turn {current_turn} is still running" if status == "in_turn" else ""
        raise ForkRejected(
            f"cannot fork session {session_id!r} at turn {at_turn}: its last converged turn is {last}"
            f"{running}",
            session_id=session_id,
            at_turn=at_turn,
            last_turn=last,
        )
    return at_turn


class MessageRow(NamedTuple):
    """What :func:`cut_history` reads of a stored message: its place, turn, and replacement."""

    seq: int
    turn: int
    replaced_by: int | None
    is_summary: bool


@dataclass(frozen=True)
class ForkCut:
    """The fork's share of a history: every message whose seq is below ``boundary`` (all of them when
    None), each replaced only by a message also below it."""

    at_turn: int
    boundary: int | None

    def keeps(self, seq: int) -> bool:
        """Whether the message ``seq`` belongs to the fork."""
        return self.boundary is None or seq < self.boundary

    def replaced_by(self, replaced_by: int | None) -> int | None:
        """What replaces a kept message in the fork: its replacement if the fork keeps it, else None (the
        message is the original again)."""
        return replaced_by if replaced_by is not None and self.keeps(replaced_by) else None

    def rows(self, rows: Sequence[MessageRow]) -> list[MessageRow]:
        """``rows`` as the fork has them: the kept ones, in order, with their replacement in the fork."""
        return [
            row._replace(replaced_by=self.replaced_by(row.replaced_by)) for row in rows if self.keeps(row.seq)
        ]


def cut_history(rows: Sequence[MessageRow], at_turn: int) -> ForkCut:
    """The cut of a history (``rows``, every stored message, in any order) at the end of ``at_turn``: the
    boundary is the seq of the first message of a turn after it, summaries and repairs aside."""
    later = [row.seq for row in rows if row.turn > at_turn and not row.is_summary]
    return ForkCut(at_turn, min(later) if later else None)


def copy_fork(
    db: Db,
    *,
    source_id: str,
    fork_id: str,
    cut: ForkCut,
    created_at: float | None = None,
) -> None:
    """Copy the source's messages, events and usage that belong to a fork at ``cut.at_turn`` to the
    fork's (already inserted) row, in the caller's transaction. Messages keep their seqs, bodies, turns and
    times; events of turns <= K are renumbered 1, 2, … in their order, their ``session`` naming the fork,
    stored at ``created_at`` (now when None) so that a reader of every session's events sees them as new;
    usage rows of turns <= K are copied as they are."""
    now = time.time() if created_at is None else created_at
    boundary = cut.boundary
    keep = "" if boundary is None else " AND seq < ?"
    kept = "" if boundary is None else " AND replaced_by < ?"
    params: tuple[Any, ...] = (
        (fork_id, source_id) if boundary is None else (fork_id, boundary, source_id, boundary)
    )
    db.run(
        "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary, position)"
        " SELECT ?, seq, turn, body, created_at,"
        f" CASE WHEN replaced_by IS NOT NULL{kept} THEN replaced_by ELSE NULL END, is_summary, position"
        f" FROM messages WHERE session_id = ?{keep}",
        params,
    )
    events = db.query(
        "SELECT turn, type, body FROM events WHERE session_id = ? AND turn <= ? ORDER BY seq",
        (source_id, cut.at_turn),
    )
    for seq, (turn, kind, body) in enumerate(events, start=1):
        db.run(
            "INSERT INTO events (session_id, seq, turn, type, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (fork_id, seq, turn, kind, _renamed(body, source_id, fork_id), now),
        )
    columns = _usage.COLUMNS.split(", ")
    db.run(
        f"INSERT INTO turn_usage ({_usage.COLUMNS}) SELECT ?, {', '.join(columns[1:])} FROM turn_usage"
        " WHERE session_id = ? AND turn <= ?",
        (fork_id, source_id, cut.at_turn),
    )


def _renamed(body: Any, source_id: str, fork_id: str) -> bytes:
    """An event's JSON with its ``session`` naming the fork; a body that is not a JSON object, or names
    another session, is copied as it is."""
    raw = bytes(body) if not isinstance(body, str) else body.encode()
    try:
        decoded = _event_decoder.decode(raw)
    except msgspec.DecodeError:
        return raw
    if decoded.get("session") != source_id:
        return raw
    decoded["session"] = fork_id
    return _encoder.encode(decoded)
