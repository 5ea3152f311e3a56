"""``turnkeep sessions list | show ID | events ID | fork ID | rewind ID``: what the session store holds, read
without a host, and forks of its sessions made in it."""

from __future__ import annotations

import argparse
import datetime
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import msgspec

from sampler import AssistantMessage, ImagePart, Message, SystemMessage, TextPart, ToolMessage, UserMessage

from .. import events as ev
from ..store import (
    ForkRejected,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    SessionRecord,
    SessionStore,
    StoredEvent,
    StoredMessage,
    StoreError,
    TurnRunning,
    TurnUsageRecord,
)
from ._settings import CliUsageError, settings_from
from ._usage import describe, session_totals, totals_json, turn_line

__all__ = ["run"]

_event_decoder = msgspec.json.Decoder(ev.SessionEvent)
_raw_decoder = msgspec.json.Decoder(dict[str, Any])


def run(options: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print what the store holds; 0, or :class:`~shell.cli._settings.CliUsageError` for an unknown
    session or a file that is not a session store."""
    stream = out or sys.stdout
    path = Path(settings_from(options).store.path)
    if not path.exists():
        # Reading must not create a store where there was none.
        if options.view == "list":
            return 0
        raise CliUsageError(f"there is no session {options.id!r}: {path} does not exist")
    with _opened(path) as store:
        if options.view == "list":
            _list(store, stream, json=options.json)
            return 0
        try:
            record = store.get_session(options.id)
        except SessionNotFound:
            raise CliUsageError(f"there is no session {options.id!r} in {path}") from None
        if options.view == "show":
            usage = store.turn_usage(record.id)
            children = store.children(record.id)
            _show(record, store.load_messages(record.id), usage, children, stream, json=options.json)
        elif options.view == "events":
            _events(store.load_events(record.id), stream, json=options.json)
        else:
            made = _fork(store, options)
            if options.json:
                _json_line(stream, _summary(made))
            else:
                stream.write(f"{made.id}\n")
    return 0


def _fork(store: SessionStore, options: argparse.Namespace) -> SessionRecord:
    """The fork (or rewind) the options ask for, made in the store; a refusal is a usage error."""
    new_id = options.new_id or uuid.uuid4().hex[:12]
    workspace = None
    if options.workspace is not None:
        path = Path(options.workspace).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        workspace = str(path)
    try:
        if options.view == "fork":
            return store.fork_session(options.id, new_id, at_turn=options.at, workspace=workspace)
        return store.rewind_session(options.id, new_id, to_turn=options.to, workspace=workspace)
    except (ForkRejected, TurnRunning, SessionExists, SessionClosed, SessionArchived) as error:
        raise CliUsageError(str(error)) from None


@contextmanager
def _opened(path: Path) -> Iterator[SessionStore]:
    try:
        store = SessionStore.open(path)
    except StoreError as error:
        raise CliUsageError(f"cannot read the session store {path}: {error}") from None
    with store:
        yield store


def _list(store: SessionStore, out: TextIO, *, json: bool) -> None:
    records = store.list_sessions()
    usage = store.usage_by_session()
    if json:
        for record in records:
            _json_line(out, {**_summary(record), "usage": totals_json(usage.get(record.id, []))})
        return
    if not records:
        return
    width = max(len("ID"), *(len(record.id) for record in records))
    origins = {record.id: _parent(record) for record in records}
    origin_width = max(len("FORKED FROM"), *(len(origin) for origin in origins.values()))
    header = (
        f"{'ID':<{width}}  {'STATUS':<8} {'TURNS':>5} {'IN':>9} {'OUT':>8} {'COST':>9}  {'UPDATED':<19}"
        f"  {'FORKED FROM':<{origin_width}}  CHILD OF\n"
    )
    out.write(header)
    for record in records:
        updated = _local(record.updated_at)
        tokens, cost = session_totals(usage.get(record.id, []))
        priced = "-" if cost is None else f"{cost:.4f}"
        out.write(
            f"{record.id:<{width}}  {record.status:<8} {record.current_turn:>5} {tokens.input_tokens:>9}"
            f" {tokens.output_tokens:>8} {priced:>9}  {updated:<19}  {origins[record.id]:<{origin_width}}"
            f"  {_child_of(record)}\n"
        )


def _parent(record: SessionRecord) -> str:
    """Where the session was forked from, ``ID at turn K``, or ``-``."""
    if record.forked_from is None:
        return "-"
    parent, turn = record.forked_from
    return f"{parent} at turn {turn}"


def _child_of(record: SessionRecord, *, call: bool = False) -> str:
    """The session whose ``agent`` tool call runs this one, ``ID (turn N, agent PROFILE)`` (with the call's
    id too when ``call``), or ``-`` for a session opened by a user."""
    link = record.parent
    if link is None:
        return "-"
    called = f", call {link.call}" if call else ""
    return f"{link.session} (turn {link.turn}{called}, agent {link.profile})"


def _summary(record: SessionRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": record.status,
        "turns": record.current_turn,
        "updated": _iso(record.updated_at),
        "created": _iso(record.created_at),
        "workspace": record.workspace,
        "model": record.model,
        "forked_from": (
            None
            if record.forked_from is None
            else {"session": record.forked_from[0], "turn": record.forked_from[1]}
        ),
        "parent": None if record.parent is None else msgspec.to_builtins(record.parent),
    }


def _show(
    record: SessionRecord,
    history: list[StoredMessage],
    usage: list[TurnUsageRecord],
    children: list[SessionRecord],
    out: TextIO,
    *,
    json: bool,
) -> None:
    if json:
        body = {
            "session": {
                **_summary(record),
                "learned_window": record.learned_window,
                "meta": record.meta,
            },
            "usage": {
                "total": totals_json(usage),
                "turns": [
                    {"turn": turn.turn, "outcome": turn.outcome, **msgspec.to_builtins(turn.usage)}
                    for turn in usage
                ],
            },
            "history": [
                {
                    "seq": stored.seq,
                    "turn": stored.turn,
                    "is_summary": stored.is_summary,
                    "message": msgspec.to_builtins(stored.message),
                }
                for stored in history
            ],
            "children": [_summary(child) for child in children],
        }
        _json_line(out, body)
        return
    learned = "none" if record.learned_window is None else f"{record.learned_window} tokens"
    for label, value in (
        ("session", record.id),
        ("status", record.status),
        ("turns", record.current_turn),
        ("workspace", record.workspace),
        ("model", record.model),
        ("created", _local(record.created_at)),
        ("updated", _local(record.updated_at)),
        ("learned window", learned),
        ("forked from", _parent(record)),
        ("child of", _child_of(record, call=True)),
        ("usage", describe(*session_totals(usage))),
    ):
        out.write(f"{label + ':':<16}{value}\n")
    if usage:
        out.write("\nusage by turn:\n")
        for turn in usage:
            out.write(f"turn {turn.turn} {turn.outcome}: {turn_line(turn.usage)}\n")
    if children:
        out.write(f"\nchildren ({len(children)}):\n")
        width = max(len(child.id) for child in children)
        for child in children:
            link = child.parent
            called = "" if link is None else f" turn {link.turn} agent {link.profile} (call {link.call})"
            out.write(f"{child.id:<{width}}  {child.status:<8}{called}\n")
    out.write(f"\nhistory ({len(history)} messages, as the model sees it):\n")
    for stored in history:
        summary = " (summary)" if stored.is_summary else ""
        role, text = _message_text(stored.message)
        lines = text.splitlines() or [""]
        out.write(f"#{stored.seq} turn {stored.turn} {role}{summary}: {lines[0]}\n")
        for line in lines[1:]:
            out.write(f"    {line}\n")


def _message_text(message: Message) -> tuple[str, str]:
    """(role, text) of a message, tool calls and media written out."""
    if isinstance(message, SystemMessage):
        return "system", message.content
    if isinstance(message, UserMessage):
        parts = [
            part.text if isinstance(part, TextPart) else f"[{part.media_type} image]"
            for part in message.parts
            if isinstance(part, TextPart | ImagePart)
        ]
        return "user", " ".join(parts)
    if isinstance(message, AssistantMessage):
        lines = [message.text] if message.text else []
        lines += [f"-> {call.name} {call.arguments} ({call.id})" for call in message.tool_calls]
        if message.interrupted:
            lines.append("(interrupted)")
        return "assistant", "\n".join(lines)
    assert isinstance(message, ToolMessage)
    result = message.result
    return f"tool {result.call_id}{' error' if result.is_error else ''}", result.content


def _events(events: list[StoredEvent], out: TextIO, *, json: bool) -> None:
    for stored in events:
        body = _event_body(stored)
        if json:
            _json_line(out, {"seq": stored.seq, **body, "created": _iso(stored.created_at)})
            continue
        kind = body.pop("type")
        body.pop("session", None)
        body.pop("turn", None)
        fields = " ".join(f"{key}={value!r}" for key, value in body.items())
        out.write(f"{stored.seq:>4}  turn {stored.turn:<3} {kind} {fields}\n")


def _event_body(stored: StoredEvent) -> dict[str, Any]:
    """The event as ``turnkeep run --json`` writes it, or as stored when it is of no known kind."""
    try:
        return ev.event_to_json_dict(_event_decoder.decode(stored.body))
    except msgspec.DecodeError:
        raw = _raw_decoder.decode(stored.body)
        raw.pop("type", None)
        return {"type": stored.type, **raw}


def _json_line(out: TextIO, value: Any) -> None:
    out.write(msgspec.json.encode(value).decode() + "\n")


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat(timespec="seconds")


def _local(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")
