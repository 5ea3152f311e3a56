"""A script's step, cut into the pieces a stream sends: the wire-neutral reply."""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

from .script import Conversation, FinalAnswer, Step

Finish = Literal["stop", "length", "tool_calls", "content_filter"]


class ToolCallOut(msgspec.Struct, frozen=True):
    """One tool call of a reply: its arguments as JSON text, and the pieces that text streams in."""

    id: str
    name: str
    arguments: str
    pieces: tuple[str, ...]


class Reply(msgspec.Struct, frozen=True):
    """Everything one answer says, already cut into stream pieces."""

    text_pieces: tuple[str, ...]
    tool_calls: tuple[ToolCallOut, ...]
    finish: Finish
    completion_tokens: int
    thought_pieces: tuple[str, ...] = ()
    """The reasoning streamed before the answer (in streamed replies only)."""

    @property
    def text(self) -> str:
        return "".join(self.text_pieces)


def estimate_tokens(chars: int) -> int:
    """Tokens for `chars` characters: chars / 4, rounded up."""
    return -(-chars // 4)


def render(step: Step, conversation: Conversation, *, chunk_chars: int, id_prefix: str) -> Reply:
    """The reply for `step`; tool call ids depend only on the conversation and the step."""
    if isinstance(step, FinalAnswer):
        pieces = _split_exact(step.text, step.chunks) if step.chunks else _split(step.text, chunk_chars)
        finish: Finish = "length" if step.finish == "length" else "stop"
        thought = _split(step.thought, chunk_chars) if step.thought else ()
        return Reply(pieces, (), finish, estimate_tokens(sum_len(pieces)), thought)
    text_pieces = _split(step.text, chunk_chars)
    base = f"{conversation.key}:{len(conversation.user_texts)}:{conversation.tool_rounds}"
    calls = []
    for index, (name, arguments) in enumerate(step.calls):
        encoded = msgspec.json.encode(arguments).decode()
        call_id = id_prefix + hashlib.blake2b(f"{base}:{index}".encode(), digest_size=12).hexdigest()
        calls.append(ToolCallOut(call_id, name, encoded, _split(encoded, chunk_chars)))
    chars = len(step.text) + sum(len(call.arguments) + len(call.name) for call in calls)
    thought = _split(step.thought, chunk_chars) if step.thought else ()
    return Reply(text_pieces, tuple(calls), "tool_calls", estimate_tokens(chars), thought)


def filtered(reply: Reply, keep: int) -> Reply:
    """`reply` cut off by a content filter after `keep` text pieces, without its tool calls."""
    pieces = reply.text_pieces[:keep]
    return Reply(pieces, (), "content_filter", estimate_tokens(sum_len(pieces)))


def sum_len(pieces: tuple[str, ...]) -> int:
    return sum(len(piece) for piece in pieces)


def _split(text: str, size: int) -> tuple[str, ...]:
    return tuple(text[start : start + size] for start in range(0, len(text), size))


def _split_exact(text: str, count: int) -> tuple[str, ...]:
    source = text or "lorem "
    if len(source) < count:
        unit = source if source.endswith(" ") else source + " "
        source = unit * -(-count // len(unit))
    size, extra = divmod(len(source), count)
    pieces = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(source[start:end])
        start = end
    return tuple(pieces)
