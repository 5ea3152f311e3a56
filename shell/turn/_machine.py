"""The turn machine: a turn's decisions, with no I/O, no threads and no clock of its own.

:meth:`TurnMachine.feed` maps the turn's state and one input to the next state and the actions to perform.
The SessionActor performs them and feeds back what they answer. The machine guarantees, for any sequence
of inputs (duplicated, reordered, lost, stale):

- it returns exactly one :class:`~shell.turn.Finish` in its life, and nothing at all after it;
- every turn is bounded: at most ``max_steps`` model steps, a bounded number of recoveries per step
  (credential refreshes and compactions by the :class:`~shell.bridge.RecoveryBridge`, lost steps by
  :data:`MAX_LOST_STEPS`), so a world that keeps answering ends it;
- an ``Ask…`` action or ``Finish`` is always the last action of a list;
- every tool call it reports finished (``ToolCallFinished``) it reported started before, once, even a call
  refused, invalid or stopped before its tool ran;
- a step's tool results are appended in call order, each as soon as it and the calls before it have their
  outcome (so a result is stored as it comes, not at the end of the batch);
- a resumed turn (:class:`~shell.turn.Resume`) requests no stored step again and runs again only the
  calls its plan says.

It is one module, longer than most, because it is one state machine: its transitions share the turn's
state, and splitting them would spread one table of phases over several files.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from sampler import (
    AssistantMessage,
    Cancelled,
    Completed,
    Failed,
    LlmError,
    ModelRequest,
    StepProjectionFallback,
    StepQueued,
    StepRetrying,
    StepState,
    StepText,
    StepThought,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from tool_bridge.messages import ToolCallBegan, ToolCallEnded, ToolInvocation, ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

from .. import events as ev
from .._protocol import BuiltRequest, CompactionTask
from ..bridge import (
    CompactAndResubmit,
    FailTurn,
    RecoveryBridge,
    RefreshAuthAndResubmit,
    StubOldOutputs,
    SummariseInChunks,
    SummaryRecovery,
)
from ..compaction import shrank_enough
from ..doom_loop import DOOM_LOOP_REMINDER, DoomLoopDetector, DoomLoopVerdict
from ..usage import Price, TokenUsage, TurnUsage, cost_of
from ._actions import (
    AppendMessage,
    ArmProbe,
    AskApply,
    AskBuild,
    AskLearnWindow,
    AskPlan,
    AskStepStatus,
    AskStub,
    Emit,
    Finish,
    Publish,
    ScheduleResubmit,
    SendSample,
    StartAuthRefresh,
    StartTools,
    StopSample,
    StopTools,
    TellCalibrate,
    TurnAction,
    TurnEnd,
)
from ._children import Children
from ._inputs import (
    ActionFailed,
    AuthDone,
    Begin,
    CancelRequested,
    CompactionApplied,
    CompactionPlanned,
    OutputsStubbed,
    ProbeDue,
    RequestBuilt,
    Restarted,
    ResubmitDue,
    Resume,
    Shutdown,
    Sibling,
    SiblingDown,
    StepChecked,
    TurnInput,
    WindowLearned,
)
from ._resume import INTERRUPTED_CALL, ResumePlan

__all__ = ["MAX_LOST_STEPS", "CancelReason", "Phase", "TurnFailure", "TurnMachine", "TurnSettings"]

MAX_LOST_STEPS = 10
"""Times one step may be lost (its sampler crashed, or its answer never arrived) before the turn fails."""

_LOST_MESSAGE = (
    "The model step was lost {n} times (the sampler crashed or its answer never arrived); the turn was "
    "stopped. The session stays usable; see the log for the actors' crashes."
)


class Phase(enum.StrEnum):
    """Where a turn is. The values are stable (``describe()`` shows them)."""

    NEW = "new"
    """Not begun."""
    PREPARING = "preparing"
    """An ``Ask…`` to the history is in flight."""
    SAMPLING = "sampling"
    """A model step is in flight."""
    COMPACTING = "compacting"
    """A compaction's summary request is in flight."""
    TOOLS = "tools"
    """The step's tool calls are running."""
    AUTH = "auth"
    """The credentials are being refreshed."""
    WAITING = "waiting"
    """Waiting to send the step again after a refresh."""
    ENDED = "ended"
    """Finished: completed, failed or cancelled."""


class TurnFailure(enum.StrEnum):
    """The session's own failure kinds of ``TurnFailed.kind`` (a provider failure keeps the sampler's
    error kind). The values are stable."""

    MAX_STEPS = "max_steps"
    DOOM_LOOP = "doom_loop"
    CONTEXT_OVERFLOW = "context_overflow"
    AUTH = "auth"
    PROVIDER_FILTERED = "provider_filtered"
    STORE = "store"
    FENCED = "fenced"
    """Another host took the session over; this one stopped its copy (the turn goes on there)."""
    INTERNAL = "internal"


class CancelReason(enum.StrEnum):
    """The reasons of ``TurnCancelled``. The values are stable."""

    USER_CANCELLED = "user_cancelled"
    ABORTED = "aborted"
    """The program cut the turn off (a cancel by the program, or the session stopping)."""
    INTERRUPTED = "interrupted"
    """The process running the turn ended; the turn was found unfinished in the store."""


class _Purpose(enum.Enum):
    """Why a compaction is planned: decides what an empty plan means."""

    PROACTIVE = enum.auto()
    OVERFLOW = enum.auto()
    CHUNKED = enum.auto()


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """The limits a turn runs under."""

    session_id: str
    max_steps: int = 100
    compaction_threshold: float = 0.85
    min_shrink: float = 0.10
    probe_after: float = 30.0
    """Seconds a step may stay silent before the sampler is asked whether it still has it."""
    model: str = ""
    price: Price | None = None
    """The model's price, to put a cost on the turn's usage; None: no cost."""


class TurnMachine:
    """One turn's state and decisions. Feed it inputs; perform what it returns, in order."""

    def __init__(
        self,
        number: int,
        settings: TurnSettings,
        *,
        bridge: RecoveryBridge,
        doom_loop: DoomLoopDetector,
        ids: Callable[[], int] | None = None,
    ) -> None:
        self.number = number
        self.settings = settings
        self.phase = Phase.NEW
        self.step = 0
        self.request_id = ""
        self.batch_id = ""
        self.text = ""
        """The answer streamed so far in the step in flight (salvaged on cancel)."""
        self.cancelling: str | None = None
        self.stopping = False
        self._stop_failure: str | None = None
        self.heard = 0.0
        """When the sampler last spoke of the step in flight (the ``now`` of that input)."""
        self.lost = 0
        self.end: TurnEnd | None = None
        self._bridge = bridge
        self._doom = doom_loop
        self._ids = ids or itertools.count(1).__next__
        self._built: BuiltRequest | None = None
        self._window = 0
        self._proactive_done = False
        self._calls: dict[str, ToolCall] = {}
        self._started: set[str] = set()
        """The calls of ``_calls`` whose start was reported (a ``ToolCallStarted`` emitted)."""
        self._outcomes: dict[str, ToolOutcome] = {}
        """The outcomes the calls of ``_calls`` have so far."""
        self._journaled = 0
        """How many of ``_calls``, in call order, have their result appended."""
        self._compaction: CompactionTask | None = None
        self._summaries: list[str] = []
        self._purpose = _Purpose.PROACTIVE
        self._chunked = False
        self._emergency_done = False
        self._error: LlmError | None = None
        self._resume = Phase.SAMPLING
        self._auth_attempt = 0
        self._auth_delay = 0.0
        self._compaction_open = False
        self._open_request: str | None = None
        """The request the sampler may still be running for this turn."""
        self._open_calls: dict[str, ToolCall] = {}
        """Tool calls in the history that have no result yet."""
        self._awaiting: type | None = None
        """The answer the ``Ask…`` in flight expects (PREPARING only)."""
        self._steps_usage = TokenUsage()
        self._compaction_usage = TokenUsage()
        self._children = Children(number)

    def _subagent_started(self, message: ev.SubagentStarted, _now: float) -> list[TurnAction]:
        return [Emit(e) for e in self._children.began(message)]

    def _subagent_finished(self, message: ev.SubagentFinished, _now: float) -> list[TurnAction]:
        return [Emit(e) for e in self._children.ended(message)]

    @property
    def ended(self) -> bool:
        """Whether the turn has finished (its :class:`Finish` was returned)."""
        return self.phase is Phase.ENDED

    def feed(self, message: TurnInput, now: float) -> list[TurnAction]:
        """The actions ``message`` calls for, at monotonic time ``now``; none once the turn has ended or
        for a message that is not about the step in flight. Raises ``TypeError`` for a non-input."""
        if self.phase is Phase.ENDED:
            return []
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise TypeError(f"not a turn input: {type(message).__name__}")
        return handler(self, message, now)

    @property
    def usage(self) -> TurnUsage:
        """What the turn's model calls consumed so far, as reported by the provider, and its cost."""
        steps, compaction = self._steps_usage, self._compaction_usage
        price = self.settings.price
        cost = None if price is None else cost_of(steps + compaction, price)
        children = tuple(self._children.usage)
        return TurnUsage(
            model=self.settings.model, steps=steps, compaction=compaction, cost=cost, children=children
        )

    def _account(self, usage: Usage | None) -> None:
        """Add a reported attempt's usage to the steps or, during a compaction, to the compaction."""
        if usage is None:
            return
        if self.phase is Phase.COMPACTING:
            self._compaction_usage = self._compaction_usage.add(usage)
        else:
            self._steps_usage = self._steps_usage.add(usage)

    def describe(self) -> str:
        """A one-line account of where the turn is, for diagnostics."""
        return (
            f"turn {self.number} step {self.step} {self.phase} (request {self.request_id or '-'}, "
            f"batch {self.batch_id or '-'}, cancelling {self.cancelling})"
        )

    # -- endings -------------------------------------------------------------------------------------

    def _finish(self, event: TurnEnd, before: list[TurnAction] | None = None) -> list[TurnAction]:
        """End the turn with ``event`` after ``before``, leaving nothing running and the history paired."""
        actions = list(before or ())
        if self._open_request is not None:
            actions.append(StopSample(self._open_request))
            self._open_request = None
        if self._open_calls:
            if self.phase is Phase.TOOLS:
                actions.append(StopTools(self.batch_id))
            actions += self._unanswered(f"not run to the end: the turn {_ended_how(event)}")
        actions += [Emit(e) for e in self._children.left_open(f"the parent's turn {_ended_how(event)} first")]
        self.phase = Phase.ENDED
        event = msgspec.structs.replace(event, usage=self.usage)
        self.end = event
        return [*actions, Finish(event)]

    def _unanswered(self, why: str) -> list[TurnAction]:
        """Error results for the calls still without one."""
        results: list[TurnAction] = [
            AppendMessage(ToolMessage(ToolResult(call_id, why, is_error=True)))
            for call_id in self._open_calls
        ]
        self._open_calls = {}
        return results

    def _fail(self, kind: str, message: str, before: list[TurnAction] | None = None) -> list[TurnAction]:
        if self.stopping:
            return self._stopped(before)
        return self._finish(ev.TurnFailed(self.settings.session_id, self.number, str(kind), message), before)

    def _stopped(self, before: list[TurnAction] | None = None) -> list[TurnAction]:
        if self._stop_failure is None:
            return self._cancelled(CancelReason.ABORTED, before)
        failed = ev.TurnFailed(
            self.settings.session_id, self.number, TurnFailure.INTERNAL.value, self._stop_failure
        )
        return self._finish(failed, before)

    def _cancelled(self, reason: str, before: list[TurnAction] | None = None) -> list[TurnAction]:
        return self._finish(ev.TurnCancelled(self.settings.session_id, self.number, str(reason)), before)

    # -- steps ---------------------------------------------------------------------------------------

    def _begin(self, message: Begin, now: float) -> list[TurnAction]:
        if self.phase is not Phase.NEW:
            return []
        self._doom.reset()
        self._bridge.step_succeeded()
        if message.started is not None:
            return [Publish(message.started), *self._next_step()]
        started = ev.TurnStarted(self.settings.session_id, self.number, message.prompt.text)
        return [Emit(started), *self._next_step()]

    def _resumed(self, message: Resume, now: float) -> list[TurnAction]:
        if self.phase is not Phase.NEW:
            return []
        plan: ResumePlan = message.plan
        self._doom.reset()
        self._bridge.step_succeeded()
        self.step = plan.steps_done
        resumed = ev.TurnResumed(
            self.settings.session_id,
            self.number,
            plan.steps_done,
            plan.attempt,
            tuple(call.id for call in plan.open_calls if call.id in plan.rerun),
            plan.interrupted,
        )
        actions: list[TurnAction] = [Emit(resumed)]
        if plan.announce is not None:  # its process ended before it could store that the turn began
            actions.insert(0, Emit(ev.TurnStarted(self.settings.session_id, self.number, plan.announce)))
        if plan.answer is not None:
            done = ev.TurnCompleted(self.settings.session_id, self.number, plan.answer, plan.steps_done)
            return self._finish(done, actions)
        if not plan.open_calls:
            return [*actions, *self._next_step()]
        self._calls = {call.id: call for call in plan.open_calls}
        self._started = set(plan.started)
        self._open_calls = dict(self._calls)
        aborted = ToolStatus.ABORTED
        self._outcomes = {
            c.id: ToolOutcome(c.id, c.name, INTERRUPTED_CALL, True, aborted, interrupted=True)
            for c in plan.open_calls
            if c.id not in plan.rerun
        }
        self._journaled = 0
        actions += self._journal_results()
        rerun = tuple(
            ToolInvocation(c.id, c.name, c.arguments) for c in plan.open_calls if c.id in plan.rerun
        )
        if not rerun:
            return self._tools_done(actions)
        self.phase = Phase.TOOLS
        self.batch_id = f"{self.settings.session_id}:{self.number}:{self._ids()}"
        return [*actions, StartTools(self.batch_id, rerun)]

    def _next_step(self) -> list[TurnAction]:
        self.step += 1
        self.lost = 0
        self._proactive_done = False
        if self.step > self.settings.max_steps:
            limit = self.settings.max_steps
            return self._fail(
                TurnFailure.MAX_STEPS,
                f"The turn reached the limit of {limit} steps without finishing. Raise it with "
                "loop_control.max_steps_per_turn in the config "
                "(or TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN).",
            )
        return self._build()

    def _ask(self, action: TurnAction, answer: type) -> list[TurnAction]:
        self.phase = Phase.PREPARING
        self._awaiting = answer
        return [action]

    def _answers(self, message: object) -> bool:
        """Whether ``message`` is the answer the turn waits for (a stale or duplicated one is not)."""
        if self.phase is not Phase.PREPARING or type(message) is not self._awaiting:
            return False
        self._awaiting = None
        return True

    def _build(self) -> list[TurnAction]:
        self._purpose = _Purpose.PROACTIVE
        return self._ask(AskBuild(), RequestBuilt)

    def _request_built(self, message: RequestBuilt, now: float) -> list[TurnAction]:
        if not self._answers(message):
            return []
        built = self._built = message.built
        if not self._proactive_done and built.estimated_tokens > self.settings.compaction_threshold * (
            built.window
        ):
            self._proactive_done = True
            return self._plan(_Purpose.PROACTIVE, None)
        return self._sample(built.request, Phase.SAMPLING, str(self.number), now)

    def _sample(self, request: ModelRequest, phase: Phase, memory_key: str, now: float) -> list[TurnAction]:
        self.phase = phase
        self.text = ""
        self.heard = now
        self.request_id = f"{self.settings.session_id}:{self.number}:{self._ids()}"
        self._open_request = self.request_id
        return [
            SendSample(self.request_id, memory_key, request),
            ArmProbe(self.request_id, self.settings.probe_after),
        ]

    def _current(self, request_id: str, now: float) -> bool:
        """Whether ``request_id`` is the step in flight (and note that the sampler spoke of it)."""
        if self.request_id != request_id or self.phase not in (Phase.SAMPLING, Phase.COMPACTING):
            return False
        self.heard = now
        return True

    def _step_lost(self) -> list[TurnAction]:
        """The step's outcome will never arrive: a cancelled turn ends, any other sends the step again."""
        stop: list[TurnAction] = [StopSample(self.request_id)]
        self._open_request = None
        if self.cancelling is not None:
            return self._cancelled(self.cancelling, stop)
        self.lost += 1
        abandoned: list[TurnAction] = []
        if self.phase is Phase.COMPACTING:
            abandoned = self._compaction_finished(
                False, "the summary request was lost; the step is sent again"
            )
        if self.lost > MAX_LOST_STEPS:
            return self._fail(TurnFailure.INTERNAL, _LOST_MESSAGE.format(n=self.lost), stop + abandoned)
        return [*stop, *abandoned, *self._build()]

    # -- the sampler ---------------------------------------------------------------------------------

    def _delta(self, message: StepText, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now) or self.phase is not Phase.SAMPLING:
            return []
        self.text += message.text
        return [Publish(ev.TextDelta(self.settings.session_id, self.number, message.text))]

    def _thought(self, message: StepThought, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now) or self.phase is not Phase.SAMPLING:
            return []
        return [Publish(ev.ThoughtDelta(self.settings.session_id, self.number, message.text))]

    def _queued(self, message: StepQueued, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        event = ev.Queued(
            self.settings.session_id, self.number, message.place, message.reason, message.expected_wait
        )
        return [Emit(event)]

    def _retrying(self, message: StepRetrying, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        self._account(message.usage)
        if message.discard_partial:
            self.text = ""
        return [
            Emit(
                ev.Retrying(
                    self.settings.session_id,
                    self.number,
                    message.attempt,
                    message.max_attempts,
                    message.delay,
                    str(message.kind),
                    message.status,
                    message.message,
                    message.discard_partial,
                )
            )
        ]

    def _fallback(self, message: StepProjectionFallback, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        self._account(message.usage)
        self.text = ""
        event = ev.ProjectionFallback(
            self.settings.session_id, self.number, str(message.projection), str(message.kind)
        )
        return [Emit(event)]

    def _completed(self, message: Completed, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        self._account(message.usage)
        self._open_request = None
        if self.phase is Phase.COMPACTING:
            task = self._compaction
            assert task is not None
            self._summaries.append(message.message.text)
            if len(self._summaries) < len(task.requests):
                return self._next_summary(now)
            return self._ask(AskApply(task.replaced, "\n\n".join(self._summaries)), CompactionApplied)
        self._bridge.step_succeeded()
        actions: list[TurnAction] = []
        usage = message.usage
        if usage is not None:
            if self._built is not None:
                actions.append(TellCalibrate(self._built.estimated_tokens, usage.input_tokens))
            step = ev.StepUsage(
                self.settings.session_id,
                self.number,
                self.step,
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_tokens,
            )
            actions.append(Publish(step))
        answer = message.message
        actions.append(AppendMessage(answer))
        self._calls = {call.id: call for call in answer.tool_calls}
        self._started = set()
        self._outcomes = {}
        self._journaled = 0
        self._open_calls = dict(self._calls)
        if self.cancelling is not None:
            return self._cancelled(self.cancelling, actions)
        if not answer.tool_calls:
            done = ev.TurnCompleted(
                self.settings.session_id,
                self.number,
                answer.text,
                self.step,
                finish_reason=str(message.finish_reason),
            )
            return self._finish(done, actions)
        if answer.text:  # stored, so that the turn's stored events hold its whole text
            said = ev.StepAnswered(self.settings.session_id, self.number, self.step, answer.text)
            actions.append(Emit(said))
        self.phase = Phase.TOOLS
        self.batch_id = f"{self.settings.session_id}:{self.number}:{self._ids()}"
        invocations = tuple(ToolInvocation(c.id, c.name, c.arguments) for c in answer.tool_calls)
        return [*actions, StartTools(self.batch_id, invocations)]

    def _failed(self, message: Failed, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        self._account(message.usage)
        self._open_request = None
        if self.cancelling is not None:
            return self._cancelled(self.cancelling)
        error = message.error
        if self.phase is Phase.COMPACTING:
            return self._summary_failed(error)
        built = self._built
        estimated = built.estimated_tokens if built is not None else 0
        window = built.window if built is not None else 0
        action = self._bridge.on_failed(error, estimated_tokens=estimated, window=window)
        if isinstance(action, FailTurn):
            return self._fail(action.kind, action.message)
        if isinstance(action, RefreshAuthAndResubmit):
            return self._refresh(action)
        assert isinstance(action, CompactAndResubmit)
        self._chunked = self._emergency_done = False
        if action.learned_window is not None:
            return self._ask(AskLearnWindow(action.learned_window), WindowLearned)
        return self._plan(_Purpose.OVERFLOW, None)

    def _sampler_cancelled(self, message: Cancelled, now: float) -> list[TurnAction]:
        if not self._current(message.request_id, now):
            return []
        self._account(message.usage)
        self._open_request = None
        if self.cancelling is None:
            # Not asked for (the sampler was restarted under us): the step is lost.
            return self._step_lost()
        salvage: list[TurnAction] = []
        text = message.partial.text or self.text
        if self.phase is Phase.SAMPLING and text:
            salvage.append(AppendMessage(AssistantMessage(text=text, interrupted=True)))
        return self._cancelled(self.cancelling, salvage)

    def _step_checked(self, message: StepChecked, now: float) -> list[TurnAction]:
        if message.request_id != self.request_id or self.phase not in (Phase.SAMPLING, Phase.COMPACTING):
            return []
        if message.state is StepState.UNKNOWN:
            return self._step_lost()
        return [ArmProbe(self.request_id, self.settings.probe_after)]

    def _probe_due(self, message: ProbeDue, now: float) -> list[TurnAction]:
        if message.request_id != self.request_id or self.phase not in (Phase.SAMPLING, Phase.COMPACTING):
            return []
        quiet = now - self.heard
        if quiet < self.settings.probe_after:
            return [ArmProbe(self.request_id, self.settings.probe_after - quiet)]
        return [AskStepStatus(self.request_id)]

    # -- credentials ---------------------------------------------------------------------------------

    def _refresh(self, action: RefreshAuthAndResubmit) -> list[TurnAction]:
        self._resume = Phase.COMPACTING if self.phase is Phase.COMPACTING else Phase.SAMPLING
        self.phase = Phase.AUTH
        self._auth_attempt = action.attempt
        self._auth_delay = action.delay
        return [StartAuthRefresh()]

    def _auth_done(self, message: AuthDone, now: float) -> list[TurnAction]:
        if self.phase is not Phase.AUTH:
            return []
        if message.error is not None:
            failure = self._bridge.auth_refresh_failed(message.error)
            return self._fail(failure.kind, failure.message)
        self.phase = Phase.WAITING
        refreshed = Emit(ev.AuthRefreshed(self.settings.session_id, self.number, self._auth_attempt))
        return [refreshed, ScheduleResubmit(self._auth_delay)]

    def _resubmit_due(self, message: ResubmitDue, now: float) -> list[TurnAction]:
        if self.phase is not Phase.WAITING:
            return []
        if self._resume is Phase.COMPACTING and self._compaction is not None:
            return self._next_summary(now)
        return self._build()

    # -- compaction ----------------------------------------------------------------------------------

    def _plan(self, purpose: _Purpose, chunk_tokens: int | None) -> list[TurnAction]:
        self._purpose = purpose
        return self._ask(AskPlan(chunk_tokens), CompactionPlanned)

    def _window_learned(self, message: WindowLearned, now: float) -> list[TurnAction]:
        if not self._answers(message):
            return []
        self._window = message.window
        return self._plan(_Purpose.OVERFLOW, None)

    def _compaction_planned(self, message: CompactionPlanned, now: float) -> list[TurnAction]:
        if not self._answers(message):
            return []
        task, purpose, built = message.task, self._purpose, self._built
        if task is None:
            if purpose is _Purpose.PROACTIVE and built is not None:
                return self._sample(built.request, Phase.SAMPLING, str(self.number), now)
            if purpose is _Purpose.CHUNKED:
                return self._emergency()
            failure = self._bridge.nothing_to_compact()
            return self._fail(failure.kind, failure.message)
        actions: list[TurnAction] = []
        if not self._compaction_open:
            self._compaction_open = True
            estimated = built.estimated_tokens if built else 0
            window = self._window or (built.window if built else 0)
            reason = "proactive" if purpose is _Purpose.PROACTIVE else "overflow"
            actions.append(
                Emit(ev.CompactionStarted(self.settings.session_id, self.number, reason, estimated, window))
            )
        self._compaction = task
        self._summaries = []
        return [*actions, *self._next_summary(now)]

    def _next_summary(self, now: float) -> list[TurnAction]:
        task = self._compaction
        assert task is not None
        request = task.requests[len(self._summaries)]
        return self._sample(request, Phase.COMPACTING, f"{self.number}:compaction", now)

    def _summary_failed(self, error: LlmError) -> list[TurnAction]:
        self._error = error
        window = self._window or (self._built.window if self._built else 0)
        action = self._bridge.on_summary_failed(
            error, chunked=self._chunked, stubbed=self._emergency_done, window=window
        )
        return self._recover_summary(action)

    def _recover_summary(self, action: SummaryRecovery) -> list[TurnAction]:
        match action:
            case RefreshAuthAndResubmit():
                return self._refresh(action)
            case SummariseInChunks(chunk_tokens):
                self._chunked = True
                return self._plan(_Purpose.CHUNKED, chunk_tokens)
            case StubOldOutputs():
                self._emergency_done = True
                return self._ask(AskStub(), OutputsStubbed)
            case FailTurn(kind, message):
                error = self._error
                said = error.message if error is not None else "nothing to summarise"
                note = self._compaction_finished(False, f"the summary request failed: {said}")
                return self._fail(kind, message, note)
        raise TypeError(f"not a summary recovery: {action!r}")

    def _emergency(self) -> list[TurnAction]:
        """Summaries cannot be had: cut old tool outputs to stubs, once, else give up."""
        return self._recover_summary(
            self._bridge.nothing_to_summarise(self._error, stubbed=self._emergency_done)
        )

    def _outputs_stubbed(self, message: OutputsStubbed, now: float) -> list[TurnAction]:
        if not self._answers(message):
            return []
        if message.count:
            note = self._compaction_finished(True, f"cut {message.count} old tool outputs to stubs")
            return [*note, *self._build()]
        return self._emergency()

    def _compaction_applied(self, message: CompactionApplied, now: float) -> list[TurnAction]:
        task = self._compaction
        if not self._answers(message) or task is None:
            return []
        before, after = message.before, message.after
        ok = shrank_enough(before, after, self.settings.min_shrink)
        note = self._compaction_finished(
            ok, f"replaced {len(task.replaced)} messages", replaced=len(task.replaced), sizes=(before, after)
        )
        if not ok:
            failure = self._bridge.compaction_too_small(before, after)
            return self._fail(failure.kind, failure.message, note)
        return [*note, *self._build()]

    def _compaction_finished(
        self, ok: bool, note: str, *, replaced: int = 0, sizes: tuple[int, int] = (0, 0)
    ) -> list[TurnAction]:
        if not self._compaction_open:
            return []
        self._compaction_open = False
        self._compaction = None
        event = ev.CompactionFinished(
            self.settings.session_id, self.number, ok, replaced, sizes[0], sizes[1], note
        )
        return [Emit(event)]

    # -- tools ---------------------------------------------------------------------------------------

    def _tool_began(self, message: ToolCallBegan, now: float) -> list[TurnAction]:
        if self.phase is not Phase.TOOLS or message.batch_id != self.batch_id:
            return []
        return self._report_started(message.call_id, message.tool)

    def _report_started(self, call_id: str, tool: str) -> list[TurnAction]:
        """A ``ToolCallStarted`` for the call, unless one was reported already: each call starts once."""
        if call_id in self._started:
            return []
        self._started.add(call_id)
        call = self._calls.get(call_id)
        arguments = call.arguments if call is not None else ""
        return [Emit(ev.ToolCallStarted(self.settings.session_id, self.number, call_id, tool, arguments))]

    def _tool_ended(self, message: ToolCallEnded, now: float) -> list[TurnAction]:
        outcome = message.outcome
        if (
            self.phase is not Phase.TOOLS
            or message.batch_id != self.batch_id
            or outcome.call_id not in self._calls
            or outcome.call_id in self._outcomes
        ):
            return []
        self._outcomes[outcome.call_id] = outcome
        return self._journal_results()

    def _journal_results(self) -> list[TurnAction]:
        """Append the results of the calls, in call order, that have an outcome and every call before them
        too; report each finished."""
        actions: list[TurnAction] = []
        calls = list(self._calls.values())
        while self._journaled < len(calls) and calls[self._journaled].id in self._outcomes:
            call = calls[self._journaled]
            self._journaled += 1
            outcome = self._outcomes[call.id]
            self._open_calls.pop(call.id, None)
            actions.append(AppendMessage(ToolMessage(ToolResult(call.id, outcome.content, outcome.is_error))))
            # A call refused, invalid or stopped before its tool ran was never reported started.
            actions += self._report_started(call.id, outcome.tool)
            finished = ev.ToolCallFinished(
                self.settings.session_id,
                self.number,
                call.id,
                outcome.tool,
                outcome.is_error,
                str(outcome.status),
                outcome.content[:200],
            )
            actions.append(Emit(finished))
        return actions

    def _tools_finished(self, message: ToolsFinished, now: float) -> list[TurnAction]:
        if self.phase is not Phase.TOOLS or message.batch_id != self.batch_id:
            return []
        outcomes = {outcome.call_id: outcome for outcome in message.outcomes}
        for call_id, call in self._calls.items():
            if call_id not in self._outcomes:
                self._outcomes[call_id] = outcomes.get(call_id) or ToolOutcome(
                    call_id, call.name, "no result was recorded for this call", True, ToolStatus.CRASHED
                )
        return self._tools_done(self._journal_results())

    def _tools_done(self, actions: list[TurnAction]) -> list[TurnAction]:
        """Every call of the step has its result appended (after ``actions``): look for a doom loop, then
        end the turn if it is cancelled or go on to the next step."""
        failure: str | None = None
        warned = False
        for call_id, call in self._calls.items():
            outcome = self._outcomes[call_id]
            verdict = self._doom.observe(call, ToolResult(call_id, outcome.content, outcome.is_error))
            if verdict.verdict is DoomLoopVerdict.FAIL:
                failure = verdict.reason
                break
            if verdict.verdict is DoomLoopVerdict.WARN and not warned:
                warned = True
                actions.append(
                    Emit(ev.DoomLoopWarning(self.settings.session_id, self.number, verdict.reason))
                )
        if self.cancelling is not None:
            return self._cancelled(self.cancelling, actions)
        if failure is not None:
            return self._fail(
                TurnFailure.DOOM_LOOP,
                f"The model is repeating itself ({failure}). The turn was stopped so you can step in; "
                "the session stays usable.",
                actions,
            )
        if warned:
            actions.append(AppendMessage(UserMessage.of_text(DOOM_LOOP_REMINDER)))
        return [*actions, *self._next_step()]

    # -- the user, the siblings, the session ---------------------------------------------------------

    def _cancel_requested(self, message: CancelRequested, now: float) -> list[TurnAction]:
        if self.cancelling is not None:
            return []
        self.cancelling = message.reason
        if self.phase in (Phase.SAMPLING, Phase.COMPACTING):
            return [StopSample(self.request_id)]
        if self.phase is Phase.TOOLS:
            return [StopTools(self.batch_id)]
        return self._cancelled(message.reason)

    def _sibling_down(self, message: SiblingDown, now: float) -> list[TurnAction]:
        if message.sibling is Sibling.SAMPLER and self.phase in (Phase.SAMPLING, Phase.COMPACTING):
            return self._step_lost()
        if message.sibling is Sibling.TOOLS and self.phase is Phase.TOOLS:
            outcomes = tuple(
                ToolOutcome(
                    call_id, call.name, f"the tool runner crashed: {message.error}", True, ToolStatus.CRASHED
                )
                for call_id, call in self._calls.items()
            )
            return self._tools_finished(ToolsFinished(self.batch_id, outcomes), now)
        return []

    def _restarted(self, message: Restarted, now: float) -> list[TurnAction]:
        """A new SessionActor took over: whatever the old one waited for on its own thread is lost."""
        if self.phase is Phase.NEW:
            return []
        if self.phase in (Phase.SAMPLING, Phase.COMPACTING):
            return self._step_lost()
        if self.phase is Phase.PREPARING:
            if self.cancelling is not None:
                return self._cancelled(self.cancelling)
            abandoned = self._compaction_finished(False, "interrupted by a restart; the step is sent again")
            return [*abandoned, *self._build()]
        return []

    def _shutdown(self, message: Shutdown, now: float) -> list[TurnAction]:
        self.stopping = True
        self._stop_failure = message.failure
        self._not_done(message.unperformed)
        actions: list[TurnAction] = []
        if self.phase is Phase.SAMPLING and self._open_request is not None and self.text:
            actions.append(AppendMessage(AssistantMessage(text=self.text, interrupted=True)))
        return self._stopped(actions)

    def _action_failed(self, message: ActionFailed, now: float) -> list[TurnAction]:
        self._not_done(message.unperformed)
        return self._fail(message.kind, message.message)

    def _not_done(self, unperformed: tuple[object, ...]) -> None:
        """Keep the record of open calls true to the history when ``unperformed`` did not happen."""
        for action in unperformed:
            if not isinstance(action, AppendMessage):
                continue
            written = action.message
            if isinstance(written, AssistantMessage):  # its calls never reached the history
                for call in written.tool_calls:
                    self._open_calls.pop(call.id, None)
            elif isinstance(written, ToolMessage) and written.result.call_id in self._calls:
                self._open_calls[written.result.call_id] = self._calls[written.result.call_id]


_HANDLERS: dict[type, Callable[[TurnMachine, Any, float], list[TurnAction]]] = {
    Begin: TurnMachine._begin,
    Resume: TurnMachine._resumed,
    RequestBuilt: TurnMachine._request_built,
    CompactionPlanned: TurnMachine._compaction_planned,
    CompactionApplied: TurnMachine._compaction_applied,
    OutputsStubbed: TurnMachine._outputs_stubbed,
    WindowLearned: TurnMachine._window_learned,
    StepChecked: TurnMachine._step_checked,
    ProbeDue: TurnMachine._probe_due,
    AuthDone: TurnMachine._auth_done,
    ResubmitDue: TurnMachine._resubmit_due,
    CancelRequested: TurnMachine._cancel_requested,
    SiblingDown: TurnMachine._sibling_down,
    Restarted: TurnMachine._restarted,
    Shutdown: TurnMachine._shutdown,
    ActionFailed: TurnMachine._action_failed,
    StepText: TurnMachine._delta,
    StepThought: TurnMachine._thought,
    StepQueued: TurnMachine._queued,
    StepRetrying: TurnMachine._retrying,
    StepProjectionFallback: TurnMachine._fallback,
    Completed: TurnMachine._completed,
    Failed: TurnMachine._failed,
    Cancelled: TurnMachine._sampler_cancelled,
    ToolCallBegan: TurnMachine._tool_began,
    ToolCallEnded: TurnMachine._tool_ended,
    ToolsFinished: TurnMachine._tools_finished,
    ev.SubagentStarted: TurnMachine._subagent_started,
    ev.SubagentFinished: TurnMachine._subagent_finished,
}
"""The method of :class:`TurnMachine` that handles each kind of input."""


def _ended_how(event: TurnEnd) -> str:
    if isinstance(event, ev.TurnCancelled):
        return f"was cancelled ({event.reason})"
    if isinstance(event, ev.TurnFailed):
        return f"failed ({event.kind})"
    return "ended"
