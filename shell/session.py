"""SessionActor: the session's mailbox address. It performs what the turn machine decides."""

from __future__ import annotations

import itertools
import logging
import queue
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from actors import Actor, ActorError, Address, AskTimeout, Down, ExitReason, Job, Refuse, handles
from sampler import (
    Cancelled,
    CancelSample,
    Completed,
    Delta,
    Failed,
    ProjectionFallback,
    Retrying,
    Sample,
    SamplerRuntime,
    StepStatus,
    TextPart,
    ToolSpec,
    UserMessage,
)
from sampler import EndTurn as ForgetTurn
from tool_bridge.messages import AbortTools, RunTools, ToolAbandoned, ToolCallBegan, ToolsFinished
from tool_bridge.permissions import PermissionDecision, PermissionRequested

from . import events as ev
from . import turn as tm
from ._gate import GateOpen, TurnGate
from ._protocol import (
    Append,
    ApplyCompaction,
    BeginTurn,
    BuildRequest,
    Calibrate,
    EndTurn,
    GetStatus,
    LearnWindow,
    LogEvent,
    PlanCompaction,
    StubToolOutputs,
)
from .bridge import RecoveryBridge
from .credentials import CredentialProvider, CredentialRefreshError
from .doom_loop import DoomLoopDetector
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt

__all__ = ["SessionActor", "SessionOptions", "SessionRuntime"]

logger = logging.getLogger("turnkeep.shell")

_CHAT_TRIES = 5
_STOPPING_ASK_TIMEOUT = 2.0
"""Seconds an ask to the history may take while the session stops (its own stop has a deadline too)."""
_START_TRIES = 3
"""Times a turn's start may fail to be recorded (the history is restarting) before the turn fails."""
_START_RETRY_AFTER = 0.5
_STOPPED = (
    "The session's actors were stopped without the session being closed (after repeated crashes they are "
    "restarted); the turn was stopped. The session stays usable and runs the prompts that were waiting."
)


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How one session runs its turns."""

    session_id: str
    model: str
    max_steps_per_turn: int = 100
    max_output_tokens: int | None = None
    compaction_threshold: float = 0.85
    max_compactions: int = 3
    min_shrink: float = 0.10
    auth_backoff: float = 0.5
    step_probe_after: float = 30.0
    """Seconds a step may stay silent before the session asks the sampler whether it is still running."""

    def turn_settings(self) -> tm.TurnSettings:
        """The limits of each turn of the session."""
        return tm.TurnSettings(
            self.session_id,
            max_steps=self.max_steps_per_turn,
            compaction_threshold=self.compaction_threshold,
            min_shrink=self.min_shrink,
            probe_after=self.step_probe_after,
        )


@dataclass(eq=False)
class SessionRuntime:
    """The session's state that outlives an incarnation of its SessionActor: subscribers, the turn in
    flight and the prompts waiting behind it. Create one per session and capture it in the factory."""

    options: SessionOptions
    credentials: CredentialProvider
    tool_specs: tuple[ToolSpec, ...] = ()
    doom_loop: DoomLoopDetector = field(default_factory=DoomLoopDetector)
    subscribers: list[Any] = field(default_factory=list)
    prompts: deque[UserPrompt] = field(default_factory=deque)
    turn: tm.TurnMachine | None = None
    next_turn: int | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    gate: TurnGate | None = None
    unrecorded: list[Any] = field(default_factory=list)
    """Writes to the history that must not be lost but could not be made (the chat state was down), in
    order: made first thing by the next incarnation, and before any later write."""
    start_failures: int = 0
    generation: int = 0
    """How many times the session's subtree has been started (a restart of the whole subtree counts)."""
    turn_generation: int = 0
    """The generation the turn in flight began in."""
    last_active: float = field(default_factory=time.monotonic)
    sampler: SamplerRuntime | None = None
    """The session's sampler state, when known: only read, for :meth:`describe`."""
    probe: Job | None = None
    closing: bool = False
    """Set by whoever stops the session on purpose (close, shutdown): a turn cut off then is cancelled
    ``aborted``; cut off by its subtree giving up, it fails ``internal``."""
    bridge: RecoveryBridge = field(init=False)

    def __post_init__(self) -> None:
        self.bridge = RecoveryBridge(
            max_compactions=self.options.max_compactions, auth_backoff=self.options.auth_backoff
        )

    def describe(self) -> str:
        """A one-line account of the turn in flight and what waits behind it, for diagnostics."""
        now = "no turn" if self.turn is None else self.turn.describe()
        sampler = self.sampler.describe() if self.sampler is not None else "sampler unknown"
        return f"{now}; {len(self.prompts)} prompts waiting; {sampler}"


class _Init(msgspec.Struct, frozen=True, tag=True):
    pass


class _AuthDone(msgspec.Struct, frozen=True, tag=True):
    turn: int
    error: str | None


class _Resubmit(msgspec.Struct, frozen=True, tag=True):
    turn: int


class _Probe(msgspec.Struct, frozen=True, tag=True):
    request_id: str


class _TurnError(Exception):
    """An action cannot be performed: the turn ends failed with ``kind`` and the message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class SessionActor(Actor):
    """The session's mailbox address and its turn loop.

    One turn at a time; a prompt that arrives mid-turn waits. Each turn steps — sample, run the tool
    calls, append the results, sample again — until an answer without tool calls (``TurnCompleted``), a
    failure (``TurnFailed`` with a kind: a provider error's kind or a :class:`~shell.turn.TurnFailure`) or
    a cancel (``TurnCancelled``). Every event is persisted (except text deltas) and published to
    subscribers. The decisions are the :class:`~shell.turn.TurnMachine`'s; this actor performs them.
    """

    def __init__(self, runtime: SessionRuntime) -> None:
        super().__init__()
        self._rt = runtime
        self._opts = runtime.options

    # -- addresses -----------------------------------------------------------------------------------

    def _sibling(self, name: str) -> Address:
        return self.system.address(self.address.name.rsplit("/", 1)[0] + "/" + name)

    @property
    def _chat_address(self) -> Address:
        return self._sibling("chat_state")

    def _chat(self, message: Any) -> Any:
        """Ask the chat state, riding out its restarts (a crash before handling leaves nothing done)."""
        for attempt in range(_CHAT_TRIES):
            if attempt and self.stopping:
                raise _TurnError("aborted", "the session is stopping")
            try:
                return self._chat_address.ask(
                    message, timeout=_STOPPING_ASK_TIMEOUT if self.stopping else None
                )
            except AskTimeout as exc:
                if exc.delivered or attempt == _CHAT_TRIES - 1:
                    raise _TurnError("internal", f"the session's history did not answer: {exc}") from exc
            except ActorError as exc:
                if attempt == _CHAT_TRIES - 1:
                    raise _TurnError("internal", f"the session's history is unavailable: {exc}") from exc
            except Exception as exc:
                raise _TurnError("store", f"the session store failed: {exc}") from exc
        raise AssertionError("unreachable")

    # -- life ----------------------------------------------------------------------------------------

    def on_start(self) -> None:
        for sibling in ("sampler", "tools"):
            self.system.watch(self._sibling(sibling), self.address)
        # The rest asks the chat state, which its supervisor may have to restart meanwhile: not in
        # on_start, while that supervisor waits for this actor to start.
        self.address.tell(_Init())

    @handles(_Init)
    def _on_init(self, _: _Init) -> None:
        rt = self._rt
        try:
            self._init()
        except _TurnError as exc:
            logger.warning("session %s: could not start: %s", self._opts.session_id, exc)
            if exc.kind != "aborted":
                address = self.address
                self.io.call_later(_START_RETRY_AFTER, lambda: address.tell(_Init()), name="session-init")
            return
        if rt.turn is not None and rt.turn_generation != rt.generation:
            self._feed(tm.Shutdown(_STOPPED))  # the whole subtree was restarted: its work is gone
        elif rt.turn is not None:
            self._feed(tm.Restarted())
        elif rt.prompts:
            self._start_next()

    def _init(self) -> None:
        """Record what an earlier incarnation could not, and learn the next turn's number."""
        rt = self._rt
        while rt.unrecorded:
            self._chat(rt.unrecorded[0])
            rt.unrecorded.pop(0)
        if rt.next_turn is None:
            record = self._chat(GetStatus())
            rt.next_turn = record.current_turn + 1
            if record.status == "in_turn":
                interrupted = tm.CancelReason.INTERRUPTED
                self._emit(ev.TurnCancelled(self._opts.session_id, record.current_turn, interrupted))
                self._chat(EndTurn())

    def on_stop(self) -> None:
        for sibling in ("sampler", "tools"):
            self.system.unwatch(self._sibling(sibling), self.address)
        if self._rt.turn is not None:
            self._feed(self._shutdown())

    def _shutdown(self) -> tm.Shutdown:
        return tm.Shutdown(None if self._rt.closing else _STOPPED)

    # -- the mailbox API -----------------------------------------------------------------------------

    @handles(UserPrompt)
    def _on_prompt(self, message: UserPrompt) -> int:
        rt = self._rt
        rt.last_active = time.monotonic()
        if rt.next_turn is None:
            try:
                self._init()
            except _TurnError as exc:
                raise Refuse(exc) from exc
        assert rt.next_turn is not None
        number = rt.next_turn + len(rt.prompts)  # next_turn already counts a turn in flight
        rt.prompts.append(message)
        if rt.turn is None:
            self._start_next()
        return number

    @handles(GateOpen)
    def _on_gate_open(self, _: GateOpen) -> None:
        if self._rt.turn is None:
            self._start_next(gate_held=True)

    def _start_next(self, *, gate_held: bool = False) -> None:
        """Start the oldest waiting prompt, once the host's turn limit lets this session run one."""
        rt = self._rt
        if not rt.prompts or rt.turn is not None or rt.next_turn is None:
            if gate_held and rt.gate is not None:
                rt.gate.leave(self.address)
            return
        if rt.gate is not None and not gate_held and not rt.gate.enter(self.address):
            return
        if not self._record_start(rt.next_turn, rt.prompts[0]):
            if rt.gate is not None:
                rt.gate.leave(self.address)
            return
        prompt = rt.prompts.popleft()
        rt.turn_generation = rt.generation
        rt.turn = tm.TurnMachine(
            rt.next_turn,
            self._opts.turn_settings(),
            bridge=rt.bridge,
            doom_loop=rt.doom_loop,
            ids=rt.ids.__next__,
        )
        rt.next_turn += 1
        self._feed(tm.Begin(prompt))

    def _record_start(self, number: int, prompt: UserPrompt) -> bool:
        """Store the turn as started with its prompt; False when it must wait (the prompt stays first in
        line, and a start is tried again). After :data:`_START_TRIES` failures it is kept to be stored
        later and the turn goes on, to fail at its first read of the history."""
        rt = self._rt
        writes = [BeginTurn(number), Append(number, UserMessage((TextPart(prompt.text), *prompt.images)))]
        try:
            if rt.unrecorded:
                raise _TurnError("store", "earlier writes wait to be recorded")
            while writes:
                self._chat(writes[0])
                writes.pop(0)
        except _TurnError as exc:
            rt.start_failures += 1
            if rt.start_failures < _START_TRIES or exc.kind == "aborted":
                if exc.kind != "aborted":
                    address = self.address
                    self.io.call_later(_START_RETRY_AFTER, lambda: address.tell(_Init()), name="turn-start")
                return False
            rt.unrecorded += writes
        rt.start_failures = 0
        return True

    @handles(Cancel)
    def _on_cancel(self, message: Cancel) -> bool:
        if self._rt.turn is None:
            return False
        self._feed(tm.CancelRequested(message.reason))
        return True

    @handles(Subscribe)
    def _on_subscribe(self, message: Subscribe) -> None:
        self._rt.subscribers.append(message.subscriber)

    @handles(Unsubscribe)
    def _on_unsubscribe(self, message: Unsubscribe) -> None:
        if message.subscriber in self._rt.subscribers:
            self._rt.subscribers.remove(message.subscriber)

    @handles(PermissionDecision)
    def _on_permission(self, message: PermissionDecision) -> None:
        self._sibling("tools").tell(message)

    @handles(PermissionRequested, ToolAbandoned)
    def _on_tool_notice(self, message: PermissionRequested | ToolAbandoned) -> None:
        self._publish(message)

    # -- what the turn hears -------------------------------------------------------------------------

    @handles(Delta, Retrying, ProjectionFallback, Completed, Failed, Cancelled, ToolCallBegan, ToolsFinished)
    def _on_turn_message(self, message: tm.TurnInput) -> None:
        if self._rt.turn is not None:
            self._feed(message)

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        """A sibling's incarnation ended. A message it was handling may be lost with it."""
        if self._rt.turn is None or message.reason is ExitReason.NORMAL:
            return
        sibling = tm.Sibling(message.address.rsplit("/", 1)[-1])
        self._feed(tm.SiblingDown(sibling, repr(message.error)))

    @handles(_Probe)
    def _on_probe(self, message: _Probe) -> None:
        if self._rt.turn is not None:
            self._feed(tm.ProbeDue(message.request_id))

    @handles(_AuthDone)
    def _on_auth_done(self, message: _AuthDone) -> None:
        turn = self._rt.turn
        if turn is not None and turn.number == message.turn:
            self._feed(tm.AuthDone(message.error))

    @handles(_Resubmit)
    def _on_resubmit(self, message: _Resubmit) -> None:
        turn = self._rt.turn
        if turn is not None and turn.number == message.turn:
            self._feed(tm.ResubmitDue())

    # -- performing ----------------------------------------------------------------------------------

    def _feed(self, message: tm.TurnInput) -> None:
        """Feed the turn ``message`` and perform what it decides, feeding back every answer."""
        turn = self._rt.turn
        pending: deque[tm.TurnInput] = deque([message])
        while pending and turn is not None and self._rt.turn is turn:
            try:
                actions = turn.feed(pending.popleft(), time.monotonic())
            except Exception as exc:
                logger.exception("session %s: the turn machine failed", self._opts.session_id)
                self._end_unexpectedly(turn, f"the session failed unexpectedly: {exc!r}")
                return
            for index, action in enumerate(actions):
                if turn.end is not None:  # only writes that must not be lost, and the Finish, are left
                    self._perform_ending(turn, action)
                    continue
                try:
                    answer = self._perform(turn, action)
                except Exception as exc:
                    pending.append(self._failure(actions[index:], exc))
                    break
                if answer is not None:
                    pending.append(answer)

    def _perform_ending(self, turn: tm.TurnMachine, action: tm.TurnAction) -> None:
        """Perform an action of a turn that has ended: a write that fails is kept to be made later."""
        match action:
            case tm.AppendMessage(message):
                self._record(Append(turn.number, message))
            case tm.Emit(event):
                self._record(LogEvent(turn.number, event))
                self._publish(event)
            case _:
                try:
                    self._perform(turn, action)
                except Exception:
                    logger.exception("session %s: could not perform %r", self._opts.session_id, action)

    def _record(self, write: Any) -> None:
        """Make ``write`` to the history now, or keep it (and every later one, in order) for later."""
        rt = self._rt
        if not rt.unrecorded:
            try:
                self._chat(write)
                return
            except _TurnError:
                logger.warning("session %s: a write waits to be recorded", self._opts.session_id)
        rt.unrecorded.append(write)

    def _failure(self, unperformed: list[tm.TurnAction], exc: Exception) -> tm.TurnInput:
        """What the turn is told when performing ``unperformed[0]`` raised ``exc``."""
        if isinstance(exc, _TurnError):
            if exc.kind == "aborted":
                return self._shutdown()
            return tm.ActionFailed(exc.kind, str(exc), tuple(unperformed))
        logger.error("session %s: performing %r failed", self._opts.session_id, unperformed[0], exc_info=exc)
        message = f"the session failed unexpectedly: {exc!r}"
        return tm.ActionFailed("internal", message, tuple(unperformed))

    def _end_unexpectedly(self, turn: tm.TurnMachine, message: str) -> None:
        """The machine itself failed: end its turn as failed ``internal`` without asking it anything."""
        self._finish(turn, ev.TurnFailed(self._opts.session_id, turn.number, "internal", message))

    def _perform(self, turn: tm.TurnMachine, action: tm.TurnAction) -> tm.TurnInput | None:
        """Perform one action; return the input that answers it, if it is an ask."""
        number = turn.number
        match action:
            case tm.Publish(event):
                self._publish(event)
            case tm.Emit(event):
                self._emit(event)
            case tm.AppendMessage(message):
                self._chat(Append(number, message))
            case tm.TellCalibrate(estimated, reported):
                self._chat_address.tell(Calibrate(estimated, reported))
            case tm.AskBuild():
                opts = self._opts
                return tm.RequestBuilt(
                    self._chat(BuildRequest(opts.model, self._rt.tool_specs, opts.max_output_tokens))
                )
            case tm.AskPlan(chunk_tokens):
                return tm.CompactionPlanned(self._chat(PlanCompaction(self._opts.model, chunk_tokens)))
            case tm.AskApply(replaced, summary):
                return tm.CompactionApplied(*self._chat(ApplyCompaction(number, replaced, summary)))
            case tm.AskStub():
                return tm.OutputsStubbed(self._chat(StubToolOutputs(number)))
            case tm.AskLearnWindow(tokens):
                return tm.WindowLearned(self._chat(LearnWindow(tokens)))
            case tm.AskStepStatus(request_id):
                try:
                    state = self._sibling("sampler").ask(StepStatus(request_id))
                except ActorError:
                    state = None  # the sampler is being restarted: its Down notice covers the step
                return tm.StepChecked(request_id, state)
            case tm.SendSample(request_id, memory_key, request):
                self._sibling("sampler").tell(Sample(request_id, memory_key, request, self.address.name))
            case tm.StopSample(request_id):
                self._sibling("sampler").tell(CancelSample(request_id))
            case tm.ArmProbe(request_id, delay):
                self._arm_probe(request_id, delay)
            case tm.StartTools(batch_id, invocations):
                self._sibling("tools").tell(RunTools(batch_id, invocations, self.address.name))
            case tm.StopTools(batch_id):
                self._sibling("tools").tell(AbortTools(batch_id))
            case tm.StartAuthRefresh():
                self.io.submit(self._refresh, number, name="auth-refresh", owner=self.address)
            case tm.ScheduleResubmit(delay):
                address = self.address
                self.io.call_later(delay, lambda: address.tell(_Resubmit(number)), name="auth-resubmit")
            case tm.Finish(event):
                self._finish(turn, event)
            case _:
                raise TypeError(f"not a turn action: {action!r}")
        return None

    def _arm_probe(self, request_id: str, delay: float) -> None:
        if self._rt.probe is not None:
            self._rt.probe.cancel()
        address = self.address
        self._rt.probe = self.io.call_later(
            delay, lambda: address.tell(_Probe(request_id)), name="step-probe"
        )

    async def _refresh(self, number: int) -> None:
        error: str | None = None
        try:
            async with httpx.AsyncClient(timeout=10.0) as client:
                await self._rt.credentials.refresh(client)
        except CredentialRefreshError as exc:
            error = str(exc)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.address.tell(_AuthDone(number, error))

    def _finish(self, turn: tm.TurnMachine, event: tm.TurnEnd) -> None:
        """Record the turn's end (or keep it to record later), publish it, and start the next prompt."""
        rt = self._rt
        if rt.turn is not turn:
            return
        rt.turn = None
        if rt.probe is not None:
            rt.probe.cancel()
            rt.probe = None
        self._sibling("sampler").tell(ForgetTurn(str(turn.number)))
        self._record(EndTurn())
        self._record(LogEvent(turn.number, event))
        self._publish(event)
        rt.last_active = time.monotonic()
        if rt.gate is not None:
            rt.gate.leave(self.address)
        if rt.prompts and self.address.alive:
            self._start_next()

    # -- events --------------------------------------------------------------------------------------

    def _emit(self, event: Any) -> None:
        """Persist the event, then publish it."""
        turn = getattr(event, "turn", 0)
        try:
            self._chat(LogEvent(turn, event))
        finally:
            self._publish(event)

    def _publish(self, event: Any) -> None:
        for subscriber in list(self._rt.subscribers):
            try:
                if isinstance(subscriber, Address):
                    subscriber.tell(event)
                elif isinstance(subscriber, queue.Queue):
                    subscriber.put_nowait(event)
                else:
                    subscriber(event)
            except Exception:
                logger.exception("session %s: a subscriber failed", self._opts.session_id)
