"""Repairing a session's projection so that every provider accepts its structure: pure planning.

A history can hold what no provider accepts: a tool call whose result was never recorded (a crash between
the call and its result, an imported or hand-edited store), a result without its call, an image with no
bytes. Left alone, every later request of the session is rejected the same way. :func:`plan_repair` finds
such defects in the projection and returns how to mend it; the chat state stores the mended messages in
the projection, in place of the ones they mend — the originals stay in the store, as with compaction.

Always repaired: unpaired tool calls get an ``is_error`` result saying that no result was recorded; a
result that answers no earlier call (or answers one a second time) is dropped; a result separated from its
call is moved next to it; an image without data becomes a text placeholder. Repaired only once the provider
has rejected the structure (``merge_roles``): consecutive user messages, and consecutive assistant messages
without tool calls, are merged into one, and messages left empty are dropped. Repaired only once the
provider has rejected an image (``drop_images``): every image becomes a text placeholder.

The projection is given as entries ``(seq, turn, message)``, oldest first (see :mod:`shell.compaction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sampler.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolMessage,
    ToolResult,
    UserMessage,
    UserPart,
)

from ..compaction import Entry

__all__ = ["EMPTIED", "NO_RESULT", "Repair", "Soundness", "plan_repair"]

NO_RESULT = "no result was recorded for this tool call; it may or may not have run"
"""The content of the ``is_error`` result that answers an unpaired tool call."""

EMPTIED = "[the history held only tool results without their calls; they were dropped]"
"""The user text that stands for a projection whose every message was dropped."""


@dataclass(frozen=True, slots=True)
class Repair:
    """How to mend a projection: the messages ``replaced`` (seqs, a tail of the projection) give way to
    ``messages`` (``(turn, message)`` pairs, in order); ``done`` says what was mended, in words."""

    replaced: tuple[int, ...]
    messages: tuple[tuple[int, Message], ...]
    done: tuple[str, ...]


@dataclass(slots=True)
class _Mended:
    """One message of the mended projection: the originals it stands for (``seqs``, none for a synthetic
    result), where it is anchored in the original order (``anchor``), and whether it differs."""

    seqs: list[int]
    anchor: int
    turn: int
    message: Message | None
    """``None``: dropped."""
    changed: bool


@dataclass(slots=True)
class _Tally:
    answered: int = 0
    dropped: int = 0
    moved: int = 0
    images: int = 0
    merged: int = 0
    emptied: int = 0

    def words(self) -> tuple[str, ...]:
        said = [
            (self.answered, "unpaired tool call(s) answered with an error result"),
            (self.dropped, "orphan tool result(s) dropped"),
            (self.moved, "tool result(s) moved next to their call"),
            (self.images, "image(s) replaced by a placeholder"),
            (self.merged, "consecutive same-role message(s) merged"),
            (self.emptied, "empty message(s) dropped"),
        ]
        return tuple(f"{count} {what}" for count, what in said if count)


def plan_repair(
    entries: Sequence[Entry], *, merge_roles: bool = False, drop_images: bool = False
) -> Repair | None:
    """The repair the projection ``entries`` needs, or ``None`` when it needs none.

    Guarantees on the mended projection: every tool call of an assistant message is answered by exactly
    one result, placed in the run of tool messages right after it (a run that needed no change keeps its
    order, which need not be the calls' order; a mended run is in call order); no result lacks its call;
    no image lacks data; with ``merge_roles``, no two user messages and no two assistant messages (the
    first without tool calls) follow each other, and no message is empty; with ``drop_images``, no image
    is left. Merged messages keep every part; what leaves the projection (a dropped orphan result, an
    empty message) stays in the store. ``replaced`` is the tail of the projection from the first mended
    message on (at least one message, so that the mended ones have a place to take).
    """
    tally = _Tally()
    mended = _pair_results(entries, tally)
    mended = [_mend_images(item, drop_images, tally) for item in mended]
    if merge_roles:
        mended = _merge(mended, tally)
    changed = [item.anchor for item in mended if item.changed]
    if not changed:
        return None
    start = min(changed)
    tail = [item for item in mended if item.anchor >= start]
    while start > 0 and not any(item.message is not None for item in tail):
        start -= 1
        tail = [item for item in mended if item.anchor >= start]
    messages = tuple((item.turn, item.message) for item in tail if item.message is not None)
    if not messages:  # nothing at all survives: a note keeps the replaced messages' place
        messages = ((entries[0][1], UserMessage.of_text(EMPTIED)),)
    replaced = tuple(seq for seq, _, _ in entries[start:])
    return Repair(replaced, messages, tally.words())


class Soundness:
    """Whether a projection surely needs no repair, kept up to date one appended message at a time, so
    that the common request skips :func:`plan_repair`'s pass over the whole history.

    Guarantee: while :attr:`sound` is True, :func:`plan_repair` of the messages given so far (without
    ``merge_roles`` and ``drop_images``) returns None. It is False whenever that is not certain; then
    :func:`plan_repair` decides. It holds while every assistant message's tool calls are answered, each
    once, by the run of tool messages right after it, no tool message is anywhere else, no call id is used
    twice, and no image lacks data.
    """

    __slots__ = ("_broken", "_calls", "_in_run", "_open")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._calls: set[str] = set()
        self._open: set[str] = set()
        self._in_run = False
        self._broken = False
        for message in messages:
            self.add(message)

    @property
    def sound(self) -> bool:
        """True when the projection surely needs no repair."""
        return not self._broken and not self._open

    def add(self, message: Message) -> None:
        """The projection now ends with ``message``."""
        if self._broken:
            return
        if isinstance(message, ToolMessage):
            call_id = message.result.call_id
            if self._in_run and call_id in self._open:
                self._open.discard(call_id)
            else:
                self._broken = True
            return
        if self._open:
            self._broken = True
            return
        self._in_run = False
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [call.id for call in message.tool_calls]
            if len(set(ids)) != len(ids) or not self._calls.isdisjoint(ids):
                self._broken = True
                return
            self._calls.update(ids)
            self._open = set(ids)
            self._in_run = True
        elif isinstance(message, UserMessage):
            self._broken = any(isinstance(p, ImagePart) and not (p.data or p.url) for p in message.parts)


def _pair_results(entries: Sequence[Entry], tally: _Tally) -> list[_Mended]:
    calls_at: dict[str, int] = {}
    for index, (_, _, message) in enumerate(entries):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                calls_at.setdefault(call.id, index)
    result_for: dict[str, int] = {}
    for index, (_, _, message) in enumerate(entries):
        if isinstance(message, ToolMessage) and calls_at.get(message.result.call_id, len(entries)) < index:
            result_for.setdefault(message.result.call_id, index)
    out: list[_Mended] = []
    for index, (seq, turn, message) in enumerate(entries):
        if isinstance(message, ToolMessage):
            call_id = message.result.call_id
            if result_for.get(call_id) != index:
                tally.dropped += 1
                out.append(_Mended([seq], index, turn, None, changed=True))
            continue  # a kept result is placed after its call
        out.append(_Mended([seq], index, turn, message, changed=False))
        if isinstance(message, AssistantMessage):
            out += _answers(entries, index, message, calls_at, result_for, tally)
    return out


def _answers(
    entries: Sequence[Entry],
    index: int,
    message: AssistantMessage,
    calls_at: dict[str, int],
    result_for: dict[str, int],
    tally: _Tally,
) -> list[_Mended]:
    """The results of ``message``'s calls right after it (the anchor ``index``). When every call is answered
    in the run of tool messages that follows it, that run stays as it is, in its order; otherwise results
    from elsewhere are moved there, a call without any result gets a synthetic one, and the run is laid out
    in call order."""
    run_end = index + 1
    while run_end < len(entries) and isinstance(entries[run_end][2], ToolMessage):
        run_end += 1
    own = [call.id for call in message.tool_calls if calls_at.get(call.id) == index]  # first holder answers
    in_place = {result_for[c] for c in own if index < result_for.get(c, -1) < run_end}
    if len(in_place) == len(own):
        return [_Mended([entries[i][0]], i, entries[i][1], entries[i][2], False) for i in sorted(in_place)]
    out: list[_Mended] = []  # something changes here: every result is laid out in call order
    for call_id in own:
        found = result_for.get(call_id)
        if found is None:
            tally.answered += 1
            synthetic = ToolMessage(ToolResult(call_id, NO_RESULT, is_error=True))
            out.append(_Mended([], index, entries[index][1], synthetic, changed=True))
            continue
        moved = found not in in_place
        tally.moved += moved
        seq, turn, result = entries[found]
        out.append(_Mended([seq], index if moved else found, turn, result, changed=moved))
    return out


def _mend_images(item: _Mended, drop_all: bool, tally: _Tally) -> _Mended:
    message = item.message
    if not isinstance(message, UserMessage) or not any(isinstance(p, ImagePart) for p in message.parts):
        return item
    parts: list[UserPart] = []
    for part in message.parts:
        if isinstance(part, ImagePart) and (drop_all or not (part.data or part.url)):
            tally.images += 1
            why = "the provider rejected it" if (part.data or part.url) else "it was empty"
            parts.append(TextPart(f"[{part.media_type} omitted: {why}]"))
        else:
            parts.append(part)
    if parts == list(message.parts):
        return item
    return _Mended(item.seqs, item.anchor, item.turn, UserMessage(tuple(parts)), changed=True)


def _merge(items: list[_Mended], tally: _Tally) -> list[_Mended]:
    out: list[_Mended] = []
    for item in items:
        message = item.message
        if message is not None and _empty(message):
            tally.emptied += 1
            item = _Mended(item.seqs, item.anchor, item.turn, None, changed=True)
        if item.message is None:
            out.append(item)
            continue
        previous = next((o for o in reversed(out) if o.message is not None), None)
        joined = _joined(previous.message, item.message) if previous and previous.message else None
        if previous is None or joined is None:
            out.append(item)
            continue
        tally.merged += 1
        previous.seqs = previous.seqs + item.seqs
        previous.turn = max(previous.turn, item.turn)
        previous.message = joined
        previous.changed = True
        out.append(_Mended([], item.anchor, item.turn, None, changed=True))  # its place, now empty
    return out


def _joined(earlier: Message, later: Message) -> Message | None:
    if isinstance(earlier, UserMessage) and isinstance(later, UserMessage):
        return UserMessage(earlier.parts + later.parts)
    if (
        isinstance(earlier, AssistantMessage)
        and isinstance(later, AssistantMessage)
        and not earlier.tool_calls
    ):
        text = "\n\n".join(t for t in (earlier.text, later.text) if t)
        return AssistantMessage(text, later.tool_calls, earlier.interrupted or later.interrupted)
    return None


def _empty(message: Message) -> bool:
    if isinstance(message, UserMessage):
        return not any(isinstance(p, ImagePart) or p.text.strip() for p in message.parts)
    if isinstance(message, AssistantMessage):
        return not message.text.strip() and not message.tool_calls
    return False
