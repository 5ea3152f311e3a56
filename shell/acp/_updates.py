"""Session events as ACP session updates, live and replayed. Pure: no I/O, no clock (times are given).

:class:`UpdateBuilder` keeps what one session's updates depend on: which tool calls were announced (a
call is announced, as ``tool_call``, before anything else is said about it, a permission request
included) and the context window the usage is measured against. Every text an update carries is clipped
to ``max_text`` characters, so that no line the agent writes outgrows the maximum line size.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from tool_bridge import PermissionRequested

from .. import events as ev
from ._schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    Cost,
    PermissionOption,
    PermissionToolCall,
    RequestPermissionRequest,
    SessionInfoUpdate,
    SessionUpdate,
    TextContent,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "PERMISSION_OPTIONS",
    "REJECT",
    "UpdateBuilder",
    "clip",
    "decode_stored",
    "iso_time",
    "tool_kind",
]

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT: Final = "reject"

PERMISSION_OPTIONS: Final = (
    PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
    PermissionOption(option_id=ALLOW_ALWAYS, name="Allow always in this session", kind="allow_always"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
)
"""The answers a permission request offers: their option ids are what :mod:`._permissions` reads."""

_KINDS: Final[dict[str, ToolKind]] = {
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "list_dir": "search",
    "shell": "execute",
    "agent": "think",
}

_FINAL_STATUS: Final[dict[str, ToolCallStatus]] = {"ok": "completed"}


def tool_kind(tool: str) -> ToolKind:
    """The ACP kind of a turnkeep tool (``other`` for an MCP server's tools and unknown ones)."""
    return _KINDS.get(tool, "other")


def clip(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    note = f"\n[… {len(text) - limit} more characters]"
    return text[: max(0, limit - len(note))] + note


def iso_time(timestamp: float) -> str:
    """Seconds since the epoch as an ISO 8601 time in UTC."""
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat().replace("+00:00", "Z")


def _arguments(text: str, limit: int) -> Any:
    """A call's JSON arguments as a value (as text when they are not JSON or too long)."""
    if len(text) > limit:
        return clip(text, limit)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _title(tool: str, arguments: str) -> str:
    """A short title for a call: the tool and its first argument's value."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    if isinstance(value, dict) and value:
        first = next(iter(value.values()))
        if isinstance(first, str | int | float):
            shown = " ".join(str(first).split())
            return f"{tool} {shown[:80] + '…' if len(shown) > 80 else shown}"
    return tool


@dataclass(slots=True)
class UpdateBuilder:
    """The updates one session's events make; one builder per session, fed its events in order."""

    context_window: int
    max_text: int = 1 << 20
    _announced: set[str] = field(default_factory=set)

    def live(self, event: Any, *, now: float) -> list[SessionUpdate]:
        """The updates a live event makes (none for what the client is not told: retries, queueing,
        compaction and the like stay in the store)."""
        match event:
            case ev.TextDelta(text=text):
                return [AgentMessageChunk(content=TextContent(text=clip(text, self.max_text)))]
            case ev.StepUsage(input_tokens=used_in, output_tokens=used_out):
                used = min(used_in + used_out, self.context_window)
                return [UsageUpdate(used=used, size=self.context_window)]
            case ev.ThoughtDelta(text=text):
                return [AgentThoughtChunk(content=TextContent(text=clip(text, self.max_text)))]
            case ev.ToolCallStarted():
                return [self._started(event)]
            case ev.ToolCallFinished():
                return self._finished(event)
            case ev.TurnStarted(turn=turn, prompt=prompt):
                title = clip(" ".join(prompt.split()), 120) if turn == 1 else None
                return [SessionInfoUpdate(title=title, updated_at=iso_time(now))]
            case ev.TurnCompleted() | ev.TurnFailed() | ev.TurnCancelled():
                self._announced.clear()
                return [self.usage(event.usage)]
        return []

    def permission(self, session_id: str, request: PermissionRequested) -> tuple[list[SessionUpdate], Any]:
        """The updates that must precede the permission request (the call's announcement, if it was not
        announced yet) and the request's params."""
        before: list[SessionUpdate] = []
        if request.call_id not in self._announced:
            self._announced.add(request.call_id)
            before.append(
                ToolCall(
                    tool_call_id=request.call_id,
                    title=_title(request.tool, request.arguments),
                    kind=tool_kind(request.tool),
                    status="pending",
                    raw_input=_arguments(request.arguments, self.max_text),
                )
            )
        params = RequestPermissionRequest(
            session_id=session_id,
            tool_call=PermissionToolCall(
                tool_call_id=request.call_id,
                title=_title(request.tool, request.arguments),
                kind=tool_kind(request.tool),
                status="pending",
            ),
            options=list(PERMISSION_OPTIONS),
        )
        return before, params

    def usage(self, usage: Any) -> UsageUpdate:
        """The context used, as the mean context of the turn's model calls (input and output tokens per
        reported call), against the window; with the turn's cost when its model has a price."""
        tokens = usage.steps
        calls = max(tokens.reported, 1)
        used = (tokens.input_tokens + tokens.output_tokens) // calls
        cost = None if usage.cost is None else Cost(amount=float(usage.cost), currency="USD")
        return UsageUpdate(used=min(used, self.context_window), size=self.context_window, cost=cost)

    def replay(self, events: Iterable[Any], *, running_turn: int | None = None) -> list[SessionUpdate]:
        """The updates that tell a client what the stored ``events`` hold, in order: each prompt, each
        step's text, each tool call with its final status, each turn's end; a turn with no stored end
        (other than ``running_turn``) is shown as interrupted, and its open calls as failed."""
        out: list[SessionUpdate] = []
        open_calls: list[str] = []
        open_turn: int | None = None

        def interrupted() -> None:
            for call_id in open_calls:
                out.append(
                    ToolCallUpdate(tool_call_id=call_id, status="failed", content=[self._text("interrupted")])
                )
            open_calls.clear()
            out.append(AgentMessageChunk(content=TextContent(text="\n[interrupted]")))

        for event in events:
            match event:
                case ev.TurnStarted(turn=turn, prompt=prompt):
                    if open_turn is not None:
                        interrupted()
                    open_turn = turn
                    out.append(UserMessageChunk(content=TextContent(text=clip(prompt, self.max_text))))
                case ev.StepAnswered(text=text) if text:
                    out.append(AgentMessageChunk(content=TextContent(text=clip(text, self.max_text))))
                case ev.ToolCallStarted(call_id=call_id):
                    open_calls.append(call_id)
                    out.append(self._started(event, replayed=True))
                case ev.ToolCallFinished(call_id=call_id):
                    if call_id in open_calls:
                        open_calls.remove(call_id)
                    out.extend(self._finished(event))
                case ev.TurnCompleted(text=text):
                    if text:
                        out.append(AgentMessageChunk(content=TextContent(text=clip(text, self.max_text))))
                    out.append(self.usage(event.usage))
                    open_turn, open_calls = None, []
                case ev.TurnFailed(kind=kind, message=message):
                    note = clip(f"\n[failed: {kind}: {message}]", self.max_text)
                    out.append(AgentMessageChunk(content=TextContent(text=note)))
                    open_turn, open_calls = None, []
                case ev.TurnCancelled(reason=reason):
                    for call_id in open_calls:
                        out.append(ToolCallUpdate(tool_call_id=call_id, status="failed"))
                    out.append(AgentMessageChunk(content=TextContent(text=f"\n[cancelled: {reason}]")))
                    open_turn, open_calls = None, []
        if open_turn is not None and open_turn != running_turn:
            interrupted()
        self._announced.clear()
        return out

    def _text(self, text: str) -> ContentToolCallContent:
        return ContentToolCallContent(content=TextContent(text=clip(text, self.max_text)))

    def _started(self, event: ev.ToolCallStarted, *, replayed: bool = False) -> SessionUpdate:
        arguments = _arguments(event.arguments, self.max_text)
        if event.call_id in self._announced and not replayed:
            return ToolCallUpdate(tool_call_id=event.call_id, status="in_progress", raw_input=arguments)
        self._announced.add(event.call_id)
        return ToolCall(
            tool_call_id=event.call_id,
            title=_title(event.tool, event.arguments),
            kind=tool_kind(event.tool),
            status="in_progress",
            raw_input=arguments,
        )

    def _finished(self, event: ev.ToolCallFinished) -> list[SessionUpdate]:
        out: list[SessionUpdate] = []
        if event.call_id not in self._announced:
            self._announced.add(event.call_id)
            out.append(ToolCall(tool_call_id=event.call_id, title=event.tool, kind=tool_kind(event.tool)))
        status = _FINAL_STATUS.get(event.status, "failed")
        content = [self._text(event.preview)] if event.preview else None
        out.append(ToolCallUpdate(tool_call_id=event.call_id, status=status, content=content))
        return out


def decode_stored(bodies: Iterable[bytes]) -> list[Any]:
    """Stored event bodies as events; a body this version cannot read is skipped."""
    decoder = msgspec.json.Decoder(ev.SessionEvent)
    out = []
    for body in bodies:
        try:
            out.append(decoder.decode(body))
        except msgspec.DecodeError:
            continue
    return out
