"""SessionActor: the turn loop. Every turn ends completed, failed with a clear reason, or cancelled."""

from __future__ import annotations

import itertools
import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from actors import Actor, ActorError, Address, AskTimeout, Down, ExitReason, Job, Refuse, handles
from sampler import (
    AssistantMessage,
    Cancelled,
    CancelSample,
    Completed,
    Delta,
    Failed,
    LlmErrorKind,
    ProjectionFallback,
    Retrying,
    Sample,
    SamplerRuntime,
    StepState,
    StepStatus,
    TextPart,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from sampler import EndTurn as ForgetTurn
from tool_bridge.messages import (
    AbortTools,
    RunTools,
    ToolAbandoned,
    ToolCallBegan,
    ToolInvocation,
    ToolsFinished,
)
from tool_bridge.permissions import PermissionDecision, PermissionRequested
from tool_bridge.results import ToolOutcome, ToolStatus

from . import events as ev
from ._gate import GateOpen, TurnGate
from ._protocol import (
    Append,
    ApplyCompaction,
    BeginTurn,
    BuildRequest,
    BuiltRequest,
    Calibrate,
    CompactionTask,
    EndTurn,
    GetStatus,
    LearnWindow,
    LogEvent,
    PlanCompaction,
    StubToolOutputs,
)
from .bridge import CompactAndResubmit, FailTurn, RecoveryBridge, RefreshAuthAndResubmit
from .compaction import shrank_enough
from .credentials import CredentialProvider, CredentialRefreshError
from .doom_loop import DOOM_LOOP_REMINDER, DoomLoopDetector, DoomLoopVerdict
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt

__all__ = ["SessionActor", "SessionOptions", "SessionRuntime"]

logger = logging.getLogger("turnkeep.shell")

_CHAT_TRIES = 5
_MAX_LOST_STEPS = 3
_LOST_MESSAGE = (
    "The model's answer was lost on its way to the session {n} times; the turn was stopped. The session "
    "stays usable; see the log for the actors' crashes."
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


@dataclass(eq=False)
class _Turn:
    number: int
    prompt: str
    step: int = 0
    phase: str = "starting"
    request_id: str = ""
    batch_id: str = ""
    built: BuiltRequest | None = None
    cancelling: str | None = None
    compaction: CompactionTask | None = None
    summaries: list[str] = field(default_factory=list)
    chunked: bool = False
    emergency_done: bool = False
    window: int = 0
    proactive_done: bool = False
    calls: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    auth_attempt: int = 0
    auth_delay: float = 0.0
    resume: str = "sampling"
    """The phase a credentials refresh interrupted: ``sampling`` or ``compacting``."""
    heard: float = 0.0
    """When the sampler last spoke of the step in flight (``time.monotonic()``)."""
    probe: Job | None = None
    lost: int = 0
    """Steps whose outcome never arrived (found by the probe)."""


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
    turn: _Turn | None = None
    next_turn: int | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    gate: TurnGate | None = None
    unrecorded: list[Any] = field(default_factory=list)
    """Turn endings published but not yet stored (the chat state was down); stored on the next start."""
    last_active: float = field(default_factory=time.monotonic)
    sampler: SamplerRuntime | None = None
    """The session's sampler state, when known: only read, for :meth:`describe`."""
    bridge: RecoveryBridge = field(init=False)

    def __post_init__(self) -> None:
        self.bridge = RecoveryBridge(
            max_compactions=self.options.max_compactions, auth_backoff=self.options.auth_backoff
        )

    def describe(self) -> str:
        """A one-line account of the turn in flight and what waits behind it, for diagnostics."""
        turn = self.turn
        if turn is None:
            now = "no turn"
        else:
            now = (
                f"turn {turn.number} step {turn.step} {turn.phase} (request {turn.request_id or '-'}, "
                f"batch {turn.batch_id or '-'}, cancelling {turn.cancelling})"
            )
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
    """A turn cannot go on: it ends failed with ``kind`` and the message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class SessionActor(Actor):
    """The session's mailbox address and its turn loop.

    One turn at a time; a prompt that arrives mid-turn waits. Each turn steps — sample, run the tool
    calls, append the results, sample again — until an answer without tool calls (``TurnCompleted``), a
    failure (``TurnFailed`` with a kind: a provider error's kind, ``max_steps``, ``doom_loop``,
    ``context_overflow``, ``auth``, ``provider_filtered``, ``store``, ``internal``) or a cancel
    (``TurnCancelled``). Every event is persisted (except text deltas) and published to subscribers.
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
                return self._chat_address.ask(message)
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
        self._guard(self._init)

    def _init(self) -> None:
        rt = self._rt
        while rt.unrecorded:
            event = rt.unrecorded[0]
            self._chat(EndTurn())
            self._chat(LogEvent(event.turn, event))
            rt.unrecorded.pop(0)
        if rt.next_turn is None:
            record = self._chat(GetStatus())
            rt.next_turn = record.current_turn + 1
            if record.status == "in_turn":
                self._emit(ev.TurnCancelled(self._opts.session_id, record.current_turn, "interrupted"))
                self._chat(EndTurn())
        turn = rt.turn
        if turn is not None and turn.phase in ("sampling", "compacting"):
            # This incarnation replaces one that crashed mid-step: abandon its request, send the step again.
            self._sibling("sampler").tell(CancelSample(turn.request_id))
            self._resubmit()
        elif turn is None and rt.prompts:
            self._start_next()

    def on_stop(self) -> None:
        for sibling in ("sampler", "tools"):
            self.system.unwatch(self._sibling(sibling), self.address)
        turn = self._rt.turn
        if turn is not None:
            self._guard(lambda: self._abort_for_stop(turn))

    def _abort_for_stop(self, turn: _Turn) -> None:
        """The session is stopping: end the turn now, as ``aborted``, keeping the history paired."""
        if turn.phase in ("sampling", "compacting"):
            self._sibling("sampler").tell(CancelSample(turn.request_id))
            if turn.phase == "sampling" and turn.text:
                self._chat(Append(turn.number, AssistantMessage(text=turn.text, interrupted=True)))
        elif turn.phase == "tools":
            self._sibling("tools").tell(AbortTools(turn.batch_id))
            for call_id in turn.calls:
                result = ToolResult(call_id, "aborted: the session was shut down", is_error=True)
                self._chat(Append(turn.number, ToolMessage(result)))
        self._finish(ev.TurnCancelled(self._opts.session_id, turn.number, "aborted"))

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
        if not rt.prompts or rt.turn is not None:
            if gate_held and rt.gate is not None:
                rt.gate.leave(self.address)
            return
        if rt.gate is not None and not gate_held and not rt.gate.enter(self.address):
            return
        prompt = rt.prompts.popleft()
        self._guard(lambda: self._start(prompt))

    @handles(Cancel)
    def _on_cancel(self, message: Cancel) -> bool:
        if self._rt.turn is None:
            return False
        self._guard(lambda: self._cancel(message.reason))
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

    # -- the sampler ---------------------------------------------------------------------------------

    def _current(self, request_id: str) -> _Turn | None:
        turn = self._rt.turn
        if turn is None or turn.request_id != request_id or turn.phase not in ("sampling", "compacting"):
            return None
        turn.heard = time.monotonic()
        return turn

    @handles(Delta)
    def _on_delta(self, message: Delta) -> None:
        turn = self._current(message.request_id)
        if turn is not None and turn.phase == "sampling":
            turn.text += message.text
            self._publish(ev.TextDelta(self._opts.session_id, turn.number, message.text))

    @handles(Retrying)
    def _on_retrying(self, message: Retrying) -> None:
        turn = self._current(message.request_id)
        if turn is None:
            return
        if message.discard_partial:
            turn.text = ""
        self._emit(
            ev.Retrying(
                self._opts.session_id,
                turn.number,
                message.attempt,
                message.max_attempts,
                message.delay,
                str(message.kind),
                message.status,
                message.message,
                message.discard_partial,
            )
        )

    @handles(ProjectionFallback)
    def _on_fallback(self, message: ProjectionFallback) -> None:
        turn = self._current(message.request_id)
        if turn is not None:
            turn.text = ""
            self._emit(
                ev.ProjectionFallback(
                    self._opts.session_id, turn.number, str(message.projection), str(message.kind)
                )
            )

    @handles(Completed)
    def _on_completed(self, message: Completed) -> None:
        turn = self._current(message.request_id)
        if turn is None:
            return
        self._guard(lambda: self._completed(turn, message))

    @handles(Failed)
    def _on_failed(self, message: Failed) -> None:
        turn = self._current(message.request_id)
        if turn is None:
            return
        self._guard(lambda: self._failed(turn, message))

    @handles(Cancelled)
    def _on_cancelled(self, message: Cancelled) -> None:
        turn = self._current(message.request_id)
        if turn is None:
            return
        self._guard(lambda: self._sampler_cancelled(turn, message))

    # -- tools ---------------------------------------------------------------------------------------

    @handles(ToolCallBegan)
    def _on_tool_began(self, message: ToolCallBegan) -> None:
        turn = self._rt.turn
        if turn is None or turn.batch_id != message.batch_id:
            return
        call = turn.calls.get(message.call_id)
        arguments = call.arguments if call is not None else ""
        self._emit(
            ev.ToolCallStarted(self._opts.session_id, turn.number, message.call_id, message.tool, arguments)
        )

    @handles(PermissionRequested)
    def _on_permission_requested(self, message: PermissionRequested) -> None:
        self._publish(message)

    @handles(ToolAbandoned)
    def _on_abandoned(self, message: ToolAbandoned) -> None:
        self._publish(message)

    @handles(ToolsFinished)
    def _on_tools_finished(self, message: ToolsFinished) -> None:
        turn = self._rt.turn
        if turn is None or turn.phase != "tools" or turn.batch_id != message.batch_id:
            return
        self._guard(lambda: self._tools_finished(turn, message))

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        """A sibling's incarnation ended. A message it was handling may be lost with it, so the step in
        flight is sent again (sampler) or its calls are recorded as crashed (tools)."""
        turn = self._rt.turn
        if turn is None or message.reason is ExitReason.NORMAL:
            return
        which = message.address.rsplit("/", 1)[-1]
        if which == "sampler" and turn.phase in ("sampling", "compacting"):
            self._step_lost(turn)
        elif which == "tools" and turn.phase == "tools":
            outcomes = tuple(
                ToolOutcome(
                    call_id,
                    call.name,
                    f"the tool runner crashed: {message.error!r}",
                    True,
                    ToolStatus.CRASHED,
                )
                for call_id, call in turn.calls.items()
            )
            self._guard(lambda: self._tools_finished(turn, ToolsFinished(turn.batch_id, outcomes)))

    @handles(_Probe)
    def _on_probe(self, message: _Probe) -> None:
        """The step has been silent a while: make sure the sampler still has it (its outcome may have
        been lost on the way), and send it again when it does not."""
        turn = self._rt.turn
        if turn is None or turn.request_id != message.request_id:
            return
        if turn.phase not in ("sampling", "compacting"):
            return
        after = self._opts.step_probe_after
        quiet = time.monotonic() - turn.heard
        if quiet < after:
            self._arm_probe(turn, after - quiet)
            return
        try:
            state = self._sibling("sampler").ask(StepStatus(message.request_id))
        except ActorError:
            state = None  # the sampler is being restarted: its Down notice covers the step
        if state is StepState.UNKNOWN:
            logger.warning(
                "session %s: step %s ended but its outcome never arrived; sending it again",
                self._opts.session_id,
                message.request_id,
            )
            turn.lost += 1
            if turn.lost > _MAX_LOST_STEPS:
                self._fail_hard("internal", _LOST_MESSAGE.format(n=turn.lost))
                return
            self._step_lost(turn)
            return
        self._arm_probe(turn, after)

    def _step_lost(self, turn: _Turn) -> None:
        """The step's outcome will never arrive: a cancelled turn ends, any other sends the step again."""
        if turn.cancelling is not None:
            reason = turn.cancelling
            self._guard(lambda: self._finish(ev.TurnCancelled(self._opts.session_id, turn.number, reason)))
            return
        self._sibling("sampler").tell(CancelSample(turn.request_id))
        self._guard(self._resubmit)

    def _arm_probe(self, turn: _Turn, delay: float) -> None:
        if turn.probe is not None:
            turn.probe.cancel()
        address, request_id = self.address, turn.request_id
        turn.probe = self.io.call_later(delay, lambda: address.tell(_Probe(request_id)), name="step-probe")

    # -- internal ------------------------------------------------------------------------------------

    @handles(_AuthDone)
    def _on_auth_done(self, message: _AuthDone) -> None:
        turn = self._rt.turn
        if turn is None or turn.number != message.turn or turn.phase != "auth":
            return
        if message.error is not None:
            action = self._rt.bridge.auth_refresh_failed(message.error)
            self._guard(
                lambda: self._finish(
                    ev.TurnFailed(self._opts.session_id, turn.number, action.kind, action.message)
                )
            )
            return
        self._emit(ev.AuthRefreshed(self._opts.session_id, turn.number, turn.auth_attempt))
        turn.phase = "waiting"
        address, number = self.address, turn.number
        self.io.call_later(turn.auth_delay, lambda: address.tell(_Resubmit(number)))

    @handles(_Resubmit)
    def _on_resubmit(self, message: _Resubmit) -> None:
        turn = self._rt.turn
        if turn is None or turn.number != message.turn or turn.phase != "waiting":
            return
        task = turn.compaction
        if turn.resume == "compacting" and task is not None:
            request = task.requests[len(turn.summaries)]
            self._guard(lambda: self._sample(turn, request, "compacting", f"{turn.number}:compaction"))
        else:
            self._guard(self._resubmit)

    # -- the turn ------------------------------------------------------------------------------------

    def _guard(self, action: Callable[[], None]) -> None:
        """Run a turn transition; whatever goes wrong ends the turn with a clear reason."""
        try:
            action()
        except _TurnError as exc:
            self._fail_hard(exc.kind, str(exc))
        except Exception as exc:
            logger.exception("session %s: turn transition failed", self._opts.session_id)
            self._fail_hard("internal", f"the session failed unexpectedly: {exc!r}")

    def _fail_hard(self, kind: str, message: str) -> None:
        turn = self._rt.turn
        if turn is None:
            return
        end: ev.TurnFailed | ev.TurnCancelled = (
            ev.TurnCancelled(self._opts.session_id, turn.number, "aborted")
            if kind == "aborted"  # the session is stopping: the program cut the turn off
            else ev.TurnFailed(self._opts.session_id, turn.number, kind, message)
        )
        try:
            self._finish(end)
        except Exception:
            logger.exception(
                "session %s: could not record the end of turn %s", self._opts.session_id, turn.number
            )
            self._rt.turn = None
            self._publish(end)

    def _start(self, prompt: UserPrompt) -> None:
        rt = self._rt
        assert rt.next_turn is not None
        turn = _Turn(rt.next_turn, prompt.text)
        rt.next_turn += 1
        rt.turn = turn
        rt.doom_loop.reset()
        rt.bridge.step_succeeded()
        self._chat(BeginTurn(turn.number))
        self._chat(Append(turn.number, UserMessage((TextPart(prompt.text), *prompt.images))))
        self._emit(ev.TurnStarted(self._opts.session_id, turn.number, prompt.text))
        self._next_step(turn)

    def _next_step(self, turn: _Turn) -> None:
        turn.step += 1
        turn.proactive_done = False
        if turn.step > self._opts.max_steps_per_turn:
            limit = self._opts.max_steps_per_turn
            raise _TurnError(
                "max_steps",
                f"The turn reached the limit of {limit} steps without finishing. Raise it with "
                "loop_control.max_steps_per_turn in the config "
                "(or TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN).",
            )
        self._resubmit()

    def _resubmit(self) -> None:
        """Build the step's request from the history and send it (compacting first when it is too big)."""
        turn = self._rt.turn
        assert turn is not None
        built: BuiltRequest = self._chat(
            BuildRequest(self._opts.model, self._rt.tool_specs, self._opts.max_output_tokens)
        )
        turn.built = built
        if (
            not turn.proactive_done
            and built.estimated_tokens > self._opts.compaction_threshold * built.window
        ):
            turn.proactive_done = True
            if self._compact(turn, "proactive"):
                return
        self._sample(turn, built.request, "sampling", str(turn.number))

    def _sample(self, turn: _Turn, request: Any, phase: str, memory_key: str) -> None:
        turn.phase = phase
        turn.text = ""
        turn.request_id = f"{self._opts.session_id}:{turn.number}:{next(self._rt.ids)}"
        turn.heard = time.monotonic()
        self._arm_probe(turn, self._opts.step_probe_after)
        self._sibling("sampler").tell(Sample(turn.request_id, memory_key, request, self.address.name))

    def _completed(self, turn: _Turn, message: Completed) -> None:
        if turn.phase == "compacting":
            task = turn.compaction
            assert task is not None
            turn.summaries.append(message.message.text)
            if len(turn.summaries) < len(task.requests):
                self._sample(
                    turn, task.requests[len(turn.summaries)], "compacting", f"{turn.number}:compaction"
                )
            else:
                self._compaction_done(turn, "\n\n".join(turn.summaries))
            return
        self._rt.bridge.step_succeeded()
        if message.usage is not None and turn.built is not None:
            self._chat_address.tell(Calibrate(turn.built.estimated_tokens, message.usage.input_tokens))
        self._chat(Append(turn.number, message.message))
        if message.message.tool_calls:
            self._run_tools(turn, message.message)
        else:
            self._finish(
                ev.TurnCompleted(self._opts.session_id, turn.number, message.message.text, turn.step)
            )

    def _failed(self, turn: _Turn, message: Failed) -> None:
        error = message.error
        if turn.phase == "compacting":
            overflow = error.kind in (LlmErrorKind.CONTEXT_OVERFLOW, LlmErrorKind.REQUEST_TOO_LARGE)
            if overflow and not turn.chunked:
                # The summary request itself is too big: summarise in smaller chunks instead.
                turn.chunked = True
                window = turn.window or (turn.built.window if turn.built else 0)
                if self._compact(turn, "", chunk_tokens=max(256, window * 2 // 5)):
                    return
            if overflow and not turn.emergency_done:
                turn.emergency_done = True
                cut = self._chat(StubToolOutputs(turn.number))
                if cut:
                    self._compaction_finished(turn, True, f"cut {cut} old tool outputs to stubs")
                    self._resubmit()
                    return
            if not overflow:
                action = self._rt.bridge.on_failed(error, estimated_tokens=0, window=0)
                if isinstance(action, RefreshAuthAndResubmit):
                    self._refresh_auth(turn, action)
                    return
                assert isinstance(action, FailTurn)
                self._compaction_finished(turn, False, f"the summary request failed: {error.message}")
                raise _TurnError(action.kind, f"The compaction's summary request failed: {action.message}")
            self._compaction_finished(turn, False, f"the summary request failed: {error.message}")
            raise _TurnError(
                "context_overflow",
                f"Compaction failed ({error.kind}: {error.message}). Start a new session or raise the "
                "context window.",
            )
        built = turn.built
        estimated = built.estimated_tokens if built is not None else 0
        window = built.window if built is not None else 0
        action = self._rt.bridge.on_failed(error, estimated_tokens=estimated, window=window)
        if isinstance(action, FailTurn):
            raise _TurnError(action.kind, action.message)
        if isinstance(action, RefreshAuthAndResubmit):
            self._refresh_auth(turn, action)
            return
        assert isinstance(action, CompactAndResubmit)
        if action.learned_window is not None:
            turn.window = self._chat(LearnWindow(action.learned_window))
        turn.chunked = turn.emergency_done = False
        if not self._compact(turn, "overflow"):
            raise _TurnError(
                "context_overflow",
                "The request is larger than the model's context window and there is nothing left to "
                "compact. Start a new session or raise the context window.",
            )

    def _refresh_auth(self, turn: _Turn, action: RefreshAuthAndResubmit) -> None:
        """Refresh the credentials, then send the failed request again (a compaction's summary request
        resumes the compaction)."""
        turn.resume = "compacting" if turn.phase == "compacting" else "sampling"
        turn.phase = "auth"
        turn.auth_attempt = action.attempt
        turn.auth_delay = action.delay
        self.io.submit(self._refresh, turn.number, name="auth-refresh", owner=self.address)

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

    def _compact(self, turn: _Turn, reason: str, *, chunk_tokens: int | None = None) -> bool:
        """Start a compaction (``reason`` empty: a retry of the current one in chunks); False when
        there is nothing to compact."""
        built = turn.built
        task: CompactionTask | None = self._chat(PlanCompaction(self._opts.model, chunk_tokens))
        if task is None:
            return False
        if reason:
            self._emit(
                ev.CompactionStarted(
                    self._opts.session_id,
                    turn.number,
                    reason,
                    built.estimated_tokens if built else 0,
                    turn.window or (built.window if built else 0),
                )
            )
        turn.compaction = task
        turn.summaries = []
        self._sample(turn, task.requests[0], "compacting", f"{turn.number}:compaction")
        return True

    def _compaction_done(self, turn: _Turn, summary: str) -> None:
        task = turn.compaction
        assert task is not None
        before, after = self._chat(ApplyCompaction(turn.number, task.replaced, summary))
        ok = shrank_enough(before, after, self._opts.min_shrink)
        self._compaction_finished(
            turn,
            ok,
            f"replaced {len(task.replaced)} messages",
            replaced=len(task.replaced),
            sizes=(before, after),
        )
        if not ok:
            raise _TurnError(
                "context_overflow",
                f"Compaction did not shrink the request enough ({before} → {after} estimated tokens). "
                "Start a new session or raise the context window.",
            )
        self._resubmit()

    def _compaction_finished(
        self, turn: _Turn, ok: bool, note: str, *, replaced: int = 0, sizes: tuple[int, int] = (0, 0)
    ) -> None:
        turn.compaction = None
        self._emit(
            ev.CompactionFinished(self._opts.session_id, turn.number, ok, replaced, sizes[0], sizes[1], note)
        )

    def _sampler_cancelled(self, turn: _Turn, message: Cancelled) -> None:
        if turn.cancelling is None:
            # Not asked for (the sampler was restarted under us): send the step again.
            self._resubmit()
            return
        partial = message.partial
        if turn.phase == "sampling" and (partial.text or turn.text):
            salvaged = AssistantMessage(text=partial.text or turn.text, interrupted=True)
            self._chat(Append(turn.number, salvaged))
        self._finish(ev.TurnCancelled(self._opts.session_id, turn.number, turn.cancelling))

    def _run_tools(self, turn: _Turn, message: AssistantMessage) -> None:
        turn.phase = "tools"
        turn.batch_id = f"{self._opts.session_id}:{turn.number}:{next(self._rt.ids)}"
        turn.calls = {call.id: call for call in message.tool_calls}
        invocations = tuple(ToolInvocation(c.id, c.name, c.arguments) for c in message.tool_calls)
        self._sibling("tools").tell(RunTools(turn.batch_id, invocations, self.address.name))

    def _tools_finished(self, turn: _Turn, message: ToolsFinished) -> None:
        verdict_fail: str | None = None
        warned = False
        for outcome in message.outcomes:
            result = ToolResult(outcome.call_id, outcome.content, outcome.is_error)
            self._chat(Append(turn.number, ToolMessage(result)))
            preview = outcome.content[:200]
            self._emit(
                ev.ToolCallFinished(
                    self._opts.session_id,
                    turn.number,
                    outcome.call_id,
                    outcome.tool,
                    outcome.is_error,
                    str(outcome.status),
                    preview,
                )
            )
            call = turn.calls.get(outcome.call_id)
            if call is None or verdict_fail is not None:
                continue
            verdict = self._rt.doom_loop.observe(call, result)
            if verdict.verdict is DoomLoopVerdict.FAIL:
                verdict_fail = verdict.reason
            elif verdict.verdict is DoomLoopVerdict.WARN and not warned:
                warned = True
                self._emit(ev.DoomLoopWarning(self._opts.session_id, turn.number, verdict.reason))
        if turn.cancelling is not None:
            self._finish(ev.TurnCancelled(self._opts.session_id, turn.number, turn.cancelling))
            return
        if verdict_fail is not None:
            raise _TurnError(
                "doom_loop",
                f"The model is repeating itself ({verdict_fail}). The turn was stopped so you can step in; "
                "the session stays usable.",
            )
        if warned:
            self._chat(Append(turn.number, UserMessage.of_text(DOOM_LOOP_REMINDER)))
        self._next_step(turn)

    def _cancel(self, reason: str) -> None:
        turn = self._rt.turn
        assert turn is not None
        if turn.cancelling is not None:
            return
        turn.cancelling = reason
        if turn.phase in ("sampling", "compacting"):
            self._sibling("sampler").tell(CancelSample(turn.request_id))
        elif turn.phase == "tools":
            self._sibling("tools").tell(AbortTools(turn.batch_id))
        else:
            self._finish(ev.TurnCancelled(self._opts.session_id, turn.number, reason))

    def _finish(self, event: ev.TurnCompleted | ev.TurnFailed | ev.TurnCancelled) -> None:
        rt = self._rt
        turn = rt.turn
        assert turn is not None
        rt.turn = None
        if turn.probe is not None:
            turn.probe.cancel()
        self._sibling("sampler").tell(ForgetTurn(str(turn.number)))
        try:
            self._chat(EndTurn())
            self._chat(LogEvent(turn.number, event))
        except _TurnError:
            # Kept until the chat state is back: the next incarnation records it first thing.
            logger.warning(
                "session %s: the end of turn %s waits to be recorded", self._opts.session_id, turn.number
            )
            rt.unrecorded.append(event)
        self._publish(event)
        rt.last_active = time.monotonic()
        if rt.gate is not None:
            rt.gate.leave(self.address)
        if rt.prompts and self.address.alive:
            self._start_next()

    # -- events --------------------------------------------------------------------------------------

    def _emit(self, event: msgspec.Struct) -> None:
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
