"""ChatStateActor: a session's history, its projection, its token estimate, and its persistence."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from actors import Actor, Refuse, handles
from sampler import Message, ModelRequest, SystemMessage, ToolSpec

from .. import events as ev
from .. import turn as tm
from .._protocol import (
    Append,
    AppendAll,
    ApplyCompaction,
    BeginTurn,
    BuildRequest,
    BuiltRequest,
    Calibrate,
    CompactionTask,
    EndTurn,
    FinishTurn,
    GetHistory,
    GetQueuedPrompts,
    GetStatus,
    GetTurnJournal,
    LearnWindow,
    LogEvent,
    PlanCompaction,
    StartTurn,
    StubToolOutputs,
)
from ..compaction import (
    build_summary_request,
    chunk_for_summary,
    plan_compaction,
    stub_tool_outputs,
    summary_message,
)
from ..messages import UserPrompt
from ..store import SessionRecord, SessionStore, StoreError
from ._journal import queued_prompts, turn_journal
from ._repair import Soundness, plan_repair
from ._tokens import TokenEstimator, effective_window

__all__ = ["ChatStateActor", "ChatStateOptions", "Write", "write_to_store"]

logger = logging.getLogger("turnkeep.shell")

T = TypeVar("T")

Write: TypeAlias = Append | LogEvent | BeginTurn | EndTurn
"""The history's writes that a session keeps when they cannot be made at once."""


def write_to_store(store: SessionStore, session_id: str, write: Write) -> int | None:
    """Make ``write`` in ``store`` as the chat state would (the appended message's or event's sequence
    number, else ``None``); for a session whose chat state is not running. Raises
    :class:`~shell.store.StoreError`."""
    match write:
        case Append(turn, message):
            return store.append_message(session_id, turn, message)
        case LogEvent(turn, event):
            return store.append_event(session_id, turn, event)
        case BeginTurn(turn):
            store.begin_turn(session_id, turn)
        case EndTurn():
            store.end_turn(session_id)
        case _:
            raise TypeError(f"not a write to the history: {write!r}")
    return None


@dataclass(frozen=True, slots=True)
class ChatStateOptions:
    """What the chat state needs to know about its session."""

    session_id: str
    context_window: int = 128_000
    keep_recent_turns: int = 2
    system_prompt: str = ""


class ChatStateActor(Actor):
    """Owns one session's history. Every append is in the store before it is acknowledged; a new
    incarnation reloads everything from the store, so a crash loses nothing that was acknowledged.
    Compaction changes only the projection (what the model is sent): the original messages stay stored,
    linked to the summary that replaced them. Store failures are answered as errors, never swallowed."""

    def __init__(self, store: SessionStore, options: ChatStateOptions, estimator: TokenEstimator) -> None:
        super().__init__()
        self._store = store
        self._options = options
        self._estimator = estimator
        self._entries: list[tuple[int, int, Message]] = []
        self._soundness = Soundness()
        self._weight = (0, 0)
        """What the entries add to a request's estimate (TokenEstimator.weigh), kept as they change."""
        self._learned: int | None = None
        self._tools: tuple[ToolSpec, ...] = ()
        self._merge_roles = False
        self._drop_images = False

    def on_start(self) -> None:
        record = self._store.get_session(self._options.session_id)
        self._learned = record.learned_window
        self._reload()

    def _reload(self) -> None:
        stored = self._store.load_messages(self._options.session_id)
        self._entries = [(m.seq, m.turn, m.message) for m in stored]
        self._soundness = Soundness([m for _, _, m in self._entries])
        self._weight = (0, 0)
        for _, _, entry in self._entries:
            self._add_weight(entry)

    def _add_weight(self, message: Message) -> None:
        fixed, text_bytes = self._estimator.weigh(message)
        self._weight = (self._weight[0] + fixed, self._weight[1] + text_bytes)

    @property
    def _window(self) -> int:
        return effective_window(self._options.context_window, self._learned)

    def _messages(self) -> list[Message]:
        messages: list[Message] = [m for _, _, m in self._entries]
        if self._options.system_prompt:
            messages.insert(0, SystemMessage(self._options.system_prompt))
        return messages

    @handles(Append)
    def _append(self, message: Append) -> int:
        seq = self._write(
            lambda: self._store.append_message(self._options.session_id, message.turn, message.message)
        )
        self._appended(seq, message.turn, message.message)
        return seq

    def _appended(self, seq: int, turn: int, message: Message) -> None:
        self._entries.append((seq, turn, message))
        self._soundness.add(message)
        self._add_weight(message)

    @handles(StartTurn)
    def _start_turn(self, message: StartTurn) -> int:
        for event in message.events:
            self._noticed(event)
        written = self._write(
            lambda: self._store.write_turn(
                self._options.session_id,
                message.turn,
                messages=(message.prompt,),
                events=message.events,
                begins=True,
            )
        )
        seq = written.messages[0]
        self._appended(seq, message.turn, message.prompt)
        return seq

    @handles(AppendAll, FinishTurn)
    def _append_all(self, message: AppendAll | FinishTurn) -> None:
        ends = isinstance(message, FinishTurn)
        if isinstance(message, FinishTurn):
            writes: tuple[Append | LogEvent, ...] = (*message.before, LogEvent(message.turn, message.event))
        else:
            writes = message.writes
        messages = [write.message for write in writes if isinstance(write, Append)]
        events = [write.event for write in writes if isinstance(write, LogEvent)]
        for event in events:
            self._noticed(event)
        written = self._write(
            lambda: self._store.write_turn(
                self._options.session_id, message.turn, messages=messages, events=events, ends=ends
            )
        )
        for seq, appended in zip(written.messages, messages, strict=True):
            self._appended(seq, message.turn, appended)

    @handles(LogEvent, BeginTurn, EndTurn)
    def _record(self, message: Write) -> int | None:
        if isinstance(message, LogEvent):
            self._noticed(message.event)
        return self._write(lambda: write_to_store(self._store, self._options.session_id, message))

    def _noticed(self, event: object) -> None:
        """Learn what a logged event says about how requests must be built."""
        if isinstance(event, ev.ProjectionFallback):
            # The provider rejected the history's shape: the next request is built from a mended one.
            self._merge_roles |= event.projection == "strict_structure"
            self._drop_images |= event.kind == "image_format"

    @handles(GetStatus)
    def _status(self, _: GetStatus) -> SessionRecord:
        return self._write(lambda: self._store.get_session(self._options.session_id))

    @handles(GetTurnJournal)
    def _journal(self, message: GetTurnJournal) -> tm.TurnJournal:
        events = self._write(lambda: self._store.load_turn_events(self._options.session_id, message.turn))
        return turn_journal(message.turn, (m for _, t, m in self._entries if t == message.turn), events)

    @handles(GetQueuedPrompts)
    def _queued(self, _: GetQueuedPrompts) -> tuple[tuple[int, UserPrompt], ...]:
        return queued_prompts(self._write(lambda: self._store.load_queued_prompts(self._options.session_id)))

    @handles(BuildRequest)
    def _build(self, message: BuildRequest) -> BuiltRequest:
        self._repair()
        messages = self._messages()
        request = ModelRequest(
            model=message.model, messages=tuple(messages), tools=message.tools, max_tokens=message.max_tokens
        )
        self._tools = message.tools
        fixed, text_bytes = self._weight
        if self._options.system_prompt:
            more_fixed, more_bytes = self._estimator.weigh(messages[0])
            fixed, text_bytes = fixed + more_fixed, text_bytes + more_bytes
        estimate = self._estimator.estimate_weighed(fixed, text_bytes, message.tools)
        return BuiltRequest(request, estimate, self._window)

    @handles(Calibrate)
    def _calibrate(self, message: Calibrate) -> None:
        self._estimator.calibrate(message.estimated, message.reported)

    @handles(LearnWindow)
    def _learn(self, message: LearnWindow) -> int:
        learned = min(message.tokens, self._learned or message.tokens)
        self._write(lambda: self._store.set_learned_window(self._options.session_id, learned))
        self._learned = learned
        return self._window

    @handles(PlanCompaction)
    def _plan(self, message: PlanCompaction) -> CompactionTask | None:
        plan = plan_compaction(
            self._entries,
            keep_recent_turns=self._options.keep_recent_turns,
            estimator=self._estimator,
            target_tokens=int(self._window * 0.5),
        )
        if plan is None:
            return None
        if message.chunk_tokens is None:
            requests: tuple[ModelRequest, ...] = (
                ModelRequest(model=message.model, messages=plan.summary_request_messages),
            )
        else:
            replaced = set(plan.replaced)
            chosen = [m for seq, _, m in self._entries if seq in replaced]
            chunks = chunk_for_summary(chosen, message.chunk_tokens, self._estimator)
            requests = tuple(
                ModelRequest(model=message.model, messages=build_summary_request(chunk)) for chunk in chunks
            )
        return CompactionTask(plan.replaced, requests, plan.estimated_before)

    @handles(ApplyCompaction)
    def _apply(self, message: ApplyCompaction) -> tuple[int, int]:
        before = self._estimator.estimate(self._messages(), self._tools)
        summary = summary_message(message.summary, len(message.replaced))
        # The summary belongs to the oldest turn it stands for, so a later compaction sees it as old.
        replaced = set(message.replaced)
        turn = min((t for seq, t, _ in self._entries if seq in replaced), default=message.turn)
        self._write(
            lambda: self._store.apply_compaction(
                self._options.session_id, replaced=message.replaced, summary=summary, turn=turn
            )
        )
        self._reload()
        return before, self._estimator.estimate(self._messages(), self._tools)

    @handles(StubToolOutputs)
    def _stub(self, message: StubToolOutputs) -> int:
        stubs = stub_tool_outputs(self._entries, self._options.keep_recent_turns)
        for seq, stub in stubs:
            self._write(
                lambda seq=seq, stub=stub: self._store.apply_compaction(  # type: ignore[misc]
                    self._options.session_id, replaced=(seq,), summary=stub, turn=message.turn
                )
            )
        self._reload()
        return len(stubs)

    @handles(GetHistory)
    def _history(self, message: GetHistory) -> tuple[Message, ...]:
        if not message.include_replaced:
            return tuple(m for _, _, m in self._entries)
        stored = self._write(
            lambda: self._store.load_messages(self._options.session_id, include_replaced=True)
        )
        return tuple(m.message for m in stored)

    def _repair(self) -> None:
        """Mend the projection where no provider would accept it (see :mod:`shell.session._repair`), in the
        store: the mended messages take the place of the originals, which stay stored."""
        if self._soundness.sound and not (self._merge_roles or self._drop_images):
            return
        repair = plan_repair(self._entries, merge_roles=self._merge_roles, drop_images=self._drop_images)
        if repair is not None:
            self._write(
                lambda: self._store.apply_repair(
                    self._options.session_id, replaced=repair.replaced, messages=repair.messages
                )
            )
            self._reload()
        self._merge_roles = self._drop_images = False
        if repair is None:
            return
        logger.info("session %s: history repaired: %s", self._options.session_id, "; ".join(repair.done))

    def _write(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except StoreError as exc:
            raise Refuse(exc) from exc
