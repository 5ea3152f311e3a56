"""The fake provider's deterministic "model": a script maps a conversation to one reply.

A script never keeps state between requests. What it answers depends only on the request's messages,
so a retried request gets the same answer, and any number of sessions can share one provider.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = [
    "SUMMARY_MARKER",
    "SUMMARY_PREFIX",
    "Conversation",
    "FinalAnswer",
    "Script",
    "Step",
    "ToolStep",
    "is_summary_request",
    "script_directive",
    "summarize",
]

SUMMARY_MARKER = "Summarize the conversation"
"""A request whose last user message or system prompt contains this (any case) is a compaction request."""

SUMMARY_PREFIX = "Conversation summary:"
"""Every summary the provider writes starts with this."""

_DIRECTIVE = re.compile(r"\[\[script:([A-Za-z0-9_.\-]+)\]\]")
_CLIP = 100


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    """What a script may look at: a wire-neutral view of one request's messages.

    `user_texts` holds the text of every user message that starts a turn (tool results do not), oldest
    first. `tool_rounds` counts the assistant messages with tool calls since the last such user message;
    `tool_results` holds the tool results sent since then, oldest first.
    """

    system: str = ""
    user_texts: tuple[str, ...] = ()
    tool_rounds: int = 0
    tool_results: tuple[str, ...] = ()
    message_count: int = 0

    @property
    def last_user_text(self) -> str:
        """The text of the newest user message, or "" when there is none."""
        return self.user_texts[-1] if self.user_texts else ""

    @property
    def key(self) -> str:
        """A short stable digest that tells conversations (and their turns) apart."""
        digest = hashlib.blake2b(digest_size=8)
        digest.update(self.system.encode())
        for text in self.user_texts:
            digest.update(b"\x00")
            digest.update(text.encode())
        return digest.hexdigest()


class ToolStep(msgspec.Struct, frozen=True):
    """One model step that calls tools: `calls` are (tool name, arguments) pairs, in order.

    `text`, when not empty, is streamed before the tool calls; `thought`, when not empty, before both, as
    the model's reasoning.
    """

    calls: Sequence[tuple[str, Mapping[str, Any]]]
    text: str = ""
    thought: str = ""


class FinalAnswer(msgspec.Struct, frozen=True):
    """One model step that ends the turn with `text`.

    With `chunks=N` the answer streams as exactly N content chunks: the text is split evenly, and repeated
    first when it has fewer than N characters (so `FinalAnswer("x", chunks=20_000)` is a long answer).
    With `finish="length"` the answer ends as one cut off by the output token limit. `thought`, when not
    empty, is streamed first as the model's reasoning (as providers that stream reasoning send it).
    """

    text: str = "done"
    chunks: int | None = None
    finish: str = "stop"
    thought: str = ""

    def __post_init__(self) -> None:
        if self.chunks is not None and self.chunks < 1:
            raise ValueError(f"chunks must be at least 1, got {self.chunks}")
        if self.finish not in ("stop", "length"):
            raise ValueError(f"finish must be 'stop' or 'length', got {self.finish!r}")


Step = ToolStep | FinalAnswer
"""What a script answers for one request."""


class Script:
    """A deterministic model: `respond(conversation)` returns the step to answer with.

    Any callable from `Conversation` to `Step` makes a script; the class methods build the common ones.
    The callable must be pure (same conversation, same step), or retries stop being deterministic.
    """

    def __init__(
        self, respond: Callable[[Conversation], Step], *, name: str = "custom", summarizes: bool = False
    ) -> None:
        self._respond = respond
        self.name = name
        self.summarizes = summarizes
        """Whether this script answers compaction requests itself (else the provider's summary does)."""

    def respond(self, conversation: Conversation) -> Step:
        """The step this script answers `conversation` with."""
        return self._respond(conversation)

    def __repr__(self) -> str:
        return f"Script({self.name})"

    @classmethod
    def task(cls, steps: Sequence[Step]) -> Script:
        """A multi-step task: the Nth tool-call round since the last user message answers `steps[N]`.

        Once the steps are used up, the last step answers again if it is a `FinalAnswer`, otherwise
        `FinalAnswer("done")` does.
        """
        if not steps:
            raise ValueError("a task needs at least one step")
        frozen = tuple(steps)
        tail = frozen[-1] if isinstance(frozen[-1], FinalAnswer) else FinalAnswer("done")

        def respond(conversation: Conversation) -> Step:
            index = conversation.tool_rounds
            return frozen[index] if index < len(frozen) else tail

        return cls(respond, name=f"task[{len(frozen)}]")

    @classmethod
    def echo(cls, *, chunks: int | None = None) -> Script:
        """Answers "echo: " followed by the last user message, without script directives."""

        def respond(conversation: Conversation) -> Step:
            text = _DIRECTIVE.sub("", conversation.last_user_text).strip()
            return FinalAnswer(f"echo: {text}", chunks=chunks)

        return cls(respond, name="echo")

    @classmethod
    def text(cls, text: str, *, chunks: int | None = None) -> Script:
        """Always answers `text` (see `FinalAnswer` for `chunks`)."""
        answer = FinalAnswer(text, chunks=chunks)
        return cls(lambda _conversation: answer, name="text")


def script_directive(conversation: Conversation) -> str | None:
    """The script name a `[[script:NAME]]` directive asks for: the newest user message's wins, then the
    system prompt's; None when there is no directive."""
    for text in reversed(conversation.user_texts):
        found = _DIRECTIVE.findall(text)
        if found:
            return str(found[-1])
    found = _DIRECTIVE.findall(conversation.system)
    return str(found[-1]) if found else None


def is_summary_request(conversation: Conversation) -> bool:
    """Whether the conversation asks for a compaction summary (see `SUMMARY_MARKER`)."""
    marker = SUMMARY_MARKER.lower()
    return marker in conversation.last_user_text.lower() or marker in conversation.system.lower()


def summarize(conversation: Conversation) -> FinalAnswer:
    """A short summary that depends only on the conversation.

    It keeps the conversation's script directive, so a compacted history still selects the same script.
    """
    marker = SUMMARY_MARKER.lower()
    requests = [text for text in conversation.user_texts if marker not in text.lower()]
    first = _clip(requests[0]) if requests else "nothing"
    latest = _clip(requests[-1]) if requests else "nothing"
    text = (
        f"{SUMMARY_PREFIX} {conversation.message_count} messages so far. "
        f"The user first asked: {first}. Latest request: {latest}."
    )
    directive = script_directive(conversation)
    if directive is not None:
        text += f" [[script:{directive}]]"
    return FinalAnswer(text)


def _clip(text: str) -> str:
    flat = " ".join(_DIRECTIVE.sub("", text).split())
    return flat if len(flat) <= _CLIP else flat[: _CLIP - 3] + "..."
