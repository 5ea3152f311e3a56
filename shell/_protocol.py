"""Messages between the actors of one session (not part of the embedding API)."""

from __future__ import annotations

import msgspec

from sampler import Message, ModelRequest, ToolSpec


class Passivate(msgspec.Struct, frozen=True, tag=True):
    """Asked of a session before its subtree is stopped for being idle: True when it has been settled for
    more than ``idle_for`` seconds, after which it starts no turn until its next incarnation (prompts it
    takes meanwhile wait for that one); False when it is busy, was active since, or reads the question
    after ``deadline`` (``time.monotonic()``), when the asker no longer waits for the answer."""

    idle_for: float
    deadline: float


class BeginTurn(msgspec.Struct, frozen=True, tag=True):
    """Record that ``turn`` is in flight (so a crash of the process leaves it marked interrupted)."""

    turn: int


class StartTurn(msgspec.Struct, frozen=True, tag=True):
    """Record that ``turn`` is in flight and append its prompt, then log ``events`` (the turn's
    ``TurnStarted``), in one transaction; acknowledged with the prompt's seq."""

    turn: int
    prompt: Message
    events: tuple[msgspec.Struct, ...] = ()


class EndTurn(msgspec.Struct, frozen=True, tag=True):
    """Record that the turn in flight has ended."""


class Append(msgspec.Struct, frozen=True, tag=True):
    """Persist ``message`` to the history, then acknowledge with its seq."""

    turn: int
    message: Message


class LogEvent(msgspec.Struct, frozen=True, tag=True):
    """Persist an event to the session's event log."""

    turn: int
    event: msgspec.Struct


class AppendAll(msgspec.Struct, frozen=True, tag=True):
    """Persist ``writes`` (messages and events of ``turn``, in order) in one transaction: all or none; then
    acknowledge."""

    turn: int
    writes: tuple[Append | LogEvent, ...]


class FinishTurn(msgspec.Struct, frozen=True, tag=True):
    """Persist ``before`` (messages and events of ``turn``, in order), record that ``turn`` has ended and log
    the ``event`` that ended it, in one transaction: all or none."""

    turn: int
    event: msgspec.Struct
    before: tuple[Append | LogEvent, ...] = ()


class BuildRequest(msgspec.Struct, frozen=True, tag=True):
    """Ask for the request of the next step: the projection with the tools."""

    model: str
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None


class BuiltRequest(msgspec.Struct, frozen=True):
    """The next step's request, its estimated size, and the effective context window."""

    request: ModelRequest
    estimated_tokens: int
    window: int


class PlanCompaction(msgspec.Struct, frozen=True, tag=True):
    """Ask which messages to summarise; the reply is a :class:`CompactionTask` or ``None``. With
    ``chunk_tokens``, the summary is asked for in chunks of at most that many tokens each."""

    model: str
    chunk_tokens: int | None = None


class CompactionTask(msgspec.Struct, frozen=True):
    """What to summarise and the requests (one per chunk) that summarise it."""

    replaced: tuple[int, ...]
    requests: tuple[ModelRequest, ...]
    tokens_before: int


class ApplyCompaction(msgspec.Struct, frozen=True, tag=True):
    """Replace ``replaced`` in the projection by a summary of them; the reply is the new estimate."""

    turn: int
    replaced: tuple[int, ...]
    summary: str


class StubToolOutputs(msgspec.Struct, frozen=True, tag=True):
    """Emergency compaction: cut old long tool outputs to stubs; the reply is how many were cut."""

    turn: int


class LearnWindow(msgspec.Struct, frozen=True, tag=True):
    """Remember a smaller context window learned from an overflow; the reply is the effective window."""

    tokens: int


class Calibrate(msgspec.Struct, frozen=True, tag=True):
    """The provider reported ``reported`` input tokens for a request estimated at ``estimated``."""

    estimated: int
    reported: int


class GetHistory(msgspec.Struct, frozen=True, tag=True):
    """Ask for the projection (or, with ``include_replaced``, every stored message)."""

    include_replaced: bool = False


class GetTurnJournal(msgspec.Struct, frozen=True, tag=True):
    """Ask for what the store holds of turn ``turn`` (a :class:`~shell.turn.TurnJournal`)."""

    turn: int


class GetQueuedPrompts(msgspec.Struct, frozen=True, tag=True):
    """Ask for the prompts acknowledged and stored as waiting, not begun yet: ``(turn, UserPrompt)``
    pairs in the order they were acknowledged."""


class GetStatus(msgspec.Struct, frozen=True, tag=True):
    """Ask for the session's stored record (turn counter, interrupted turn)."""


class ToolServerChanged(msgspec.Struct, frozen=True, tag=True):
    """Told by the host to a session: one of the MCP servers it uses became unavailable, or came back."""

    server: str
    status: str
    restarts: int
    message: str
