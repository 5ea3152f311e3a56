"""SessionActor: the session's mailbox address. It performs what the turn machine decides."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from typing import Any

import msgspec

from actors import Actor, ActorError, Address, Down, ExitReason, Refuse, handles
from sampler import CancelSample, ForgetTurn, Sample, StepStatus, TextPart, UserMessage
from tool_bridge.messages import AbortTools, RunTools, ToolAbandoned
from tool_bridge.permissions import PermissionDecision, PermissionRequested, SetPermissionMode

from .. import events as ev
from .. import turn as tm
from .._protocol import (
    Append,
    Calibrate,
    EndTurn,
    GetQueuedPrompts,
    GetStatus,
    GetTurnJournal,
    LogEvent,
    Passivate,
    ToolServerChanged,
)
from ..credentials import refresh_failure
from ..messages import Cancel, SetModel, Subscribe, Unsubscribe, UserPrompt
from ..store import StaleOwner
from ._history import History, HistoryError
from ._path import SessionPath
from ._state import SessionRuntime
from ._subscribers import publish
from ._turn_gate import GateOpen

__all__ = ["SessionActor"]

logger = logging.getLogger("turnkeep.shell")

_START_TRIES = 3
_SIBLING_TRIES = 3
_SIBLING_ASK_TIMEOUT = 5.0
"""Times a turn's start may fail to be recorded (the history is restarting) before the turn fails."""
_START_RETRY_AFTER = 0.5
_STOPPED = (
    "The session's actors were stopped without the session being closed (after repeated crashes they are "
    "restarted); the turn was stopped. The session stays usable and runs the prompts that were waiting."
)


class _Init(msgspec.Struct, frozen=True, tag=True):
    pass


class _AuthDone(msgspec.Struct, frozen=True, tag=True):
    turn: int
    error: str | None


class _Resubmit(msgspec.Struct, frozen=True, tag=True):
    turn: int


class _Probe(msgspec.Struct, frozen=True, tag=True):
    request_id: str


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
        self._siblings: dict[str, str] = {}
        self._history = History(
            lambda: self._sibling("chat_state"), lambda: self.stopping, runtime.unrecorded, self._fenced
        )

    # -- addresses -----------------------------------------------------------------------------------

    def _sibling(self, name: str) -> Address:
        full = self._siblings.get(name)
        if full is None:
            full = self._siblings[name] = SessionPath.sibling(self.address.name, name)
        return self.system.address(full)

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
        except HistoryError as exc:
            logger.warning("session %s: could not start: %s", self._opts.session_id, exc)
            if exc.kind not in ("aborted", "fenced"):
                self._init_again()
            return
        if rt.turn is not None and rt.turn_generation != rt.generation:
            self._feed(tm.Shutdown(_STOPPED))  # the whole subtree was restarted: its work is gone
        elif rt.turn is not None:
            self._feed(tm.Restarted())
        elif rt.prompts or rt.resuming is not None:
            self._start_next()

    def _init_again(self) -> None:
        """Try :meth:`_init` (and a waiting start) again shortly."""
        address = self.address
        self.io.call_later(_START_RETRY_AFTER, lambda: address.tell(_Init()), name="session-init")

    def _init(self) -> None:
        """Record what an earlier incarnation could not, learn the next turn's number, and decide what
        becomes of a turn the process ended in the middle of."""
        rt = self._rt
        self._history.flush()
        if rt.next_turn is not None:
            return
        record = self._history.ask(GetStatus())
        if record.status == "in_turn":  # the process ended mid-turn
            number = record.current_turn
            journal = self._history.ask(GetTurnJournal(number))
            decision = tm.plan_resume(
                journal,
                enabled=self._opts.resume_interrupted_turns,
                max_resumes=self._opts.max_resumes_per_turn,
                idempotency_of=rt.idempotency_of,
            )
            if isinstance(decision, tm.ResumePlan):
                logger.info(
                    "session %s: turn %d is resumed after step %d",
                    rt.options.session_id,
                    number,
                    decision.steps_done,
                )
                rt.resuming = (number, decision)
            else:
                logger.info(
                    "session %s: turn %d ends interrupted: %s", rt.options.session_id, number, decision.why
                )
                self._end_interrupted(number)
        restored = self._history.ask(GetQueuedPrompts())
        if restored:  # acknowledged by a process that ended before their turns began
            logger.info("session %s: %d waiting prompts are taken up", rt.options.session_id, len(restored))
            rt.prompts.extendleft(prompt for _, prompt in reversed(restored))
        rt.next_turn = record.current_turn + 1

    def _end_interrupted(self, number: int) -> None:
        """Record turn ``number``, which the process ended in the middle of, as cancelled ``interrupted``."""
        event = ev.TurnCancelled(self._opts.session_id, number, tm.CancelReason.INTERRUPTED)
        self._history.kept += [LogEvent(number, event), EndTurn()]
        self._publish(event)
        if self._rt.interrupted is not None:
            self._rt.interrupted(self._opts.session_id, number)
        self._history.flush()

    def _fenced(self, exc: StaleOwner) -> None:
        """The store refused a write: another host took the session. Write nothing more, end what waits
        here (the turn in flight ends as its failed write is answered), and have the host stop this copy."""
        logger.warning(
            "session %s: another host took it over (owner epoch %d, taken here at %d): stopping this copy of"
            " the session, which writes nothing more",
            self._opts.session_id,
            exc.current,
            exc.epoch,
        )
        self._rt.resuming = None
        self._drop_waiting()
        if self._rt.on_fenced is not None:
            self._rt.on_fenced()

    def _drop_waiting(self) -> None:
        """Fail the prompts waiting here: the host that took the session over never heard of them."""
        rt = self._rt
        first = rt.next_turn or 0
        message = self._history.fenced_message()
        for offset in range(len(rt.prompts)):
            kind = tm.TurnFailure.FENCED.value
            self._publish(ev.TurnFailed(self._opts.session_id, first + offset, kind, message))
        rt.prompts.clear()

    def on_stop(self) -> None:
        for sibling in ("sampler", "tools"):
            self.system.unwatch(self._sibling(sibling), self.address)
        if self._rt.turn is not None:
            self._feed(self._shutdown())
        try:
            self._history.flush()
        except HistoryError as exc:
            logger.warning("session %s: writes wait for the next start: %s", self._opts.session_id, exc)

    def _shutdown(self, unperformed: tuple[tm.TurnAction, ...] = ()) -> tm.Shutdown:
        return tm.Shutdown(None if self._rt.closing else _STOPPED, unperformed)

    # -- the mailbox API -----------------------------------------------------------------------------

    @handles(UserPrompt)
    def _on_prompt(self, message: UserPrompt) -> int:
        rt = self._rt
        rt.last_active = time.monotonic()
        if self._history.fenced is not None:
            raise Refuse(HistoryError("fenced", self._history.fenced_message()))
        if rt.next_turn is None:
            try:
                self._init()
            except HistoryError as exc:
                raise Refuse(exc) from exc
        assert rt.next_turn is not None
        number = rt.next_turn + len(rt.prompts)  # next_turn already counts a turn in flight
        rt.prompts.append(message)
        if rt.turn is None and not rt.passivating:
            self._start_next()
        if any(waiting is message for waiting in rt.prompts):
            self._store_waiting(number, message)
        return number

    def _store_waiting(self, number: int, prompt: UserPrompt) -> None:
        """Store ``prompt``, acknowledged as turn ``number`` but waiting, so that it outlives the process;
        when it cannot be stored it is refused (raises :class:`Refuse`), not acknowledged."""
        event = ev.PromptQueued(self._opts.session_id, number, prompt.text, prompt.images)
        try:
            if self._history.kept:
                raise HistoryError("store", "earlier writes wait to be recorded")
            self._history.ask(LogEvent(number, event))
        except HistoryError as exc:
            self._rt.prompts = deque(waiting for waiting in self._rt.prompts if waiting is not prompt)
            raise Refuse(exc) from exc
        self._publish(event)

    @handles(Passivate)
    def _on_passivate(self, message: Passivate) -> bool:
        rt = self._rt
        now = time.monotonic()
        if now >= message.deadline or not rt.settled or now - rt.last_active <= message.idle_for:
            return False
        rt.passivating = True
        return True

    @handles(GateOpen)
    def _on_gate_open(self, _: GateOpen) -> None:
        if self._rt.turn is None:
            self._start_next(gate_held=True)

    def _start_next(self, *, gate_held: bool = False) -> None:
        """Go on with the turn found interrupted, else start the oldest waiting prompt, once the host's
        turn limit lets this session run one."""
        rt = self._rt
        if self._history.fenced is not None:
            self._drop_waiting()
        if (not rt.prompts and rt.resuming is None) or rt.turn is not None or rt.next_turn is None:
            if gate_held and rt.gate is not None:
                rt.gate.leave(self.address)
            return
        if rt.gate is not None and not gate_held and not rt.gate.enter(self.address):
            return
        if rt.resuming is not None:
            number, plan = rt.resuming
            rt.resuming = None
            rt.turn_generation = rt.generation
            rt.turn = self._machine(number)
            self._feed(tm.Resume(plan))
            return
        begin = self._record_start(rt.next_turn, rt.prompts[0])
        if begin is None:
            if rt.gate is not None:
                rt.gate.leave(self.address)
            return
        rt.prompts.popleft()
        rt.turn_generation = rt.generation
        rt.turn = self._machine(rt.next_turn)
        rt.next_turn += 1
        self._feed(begin)

    def _machine(self, number: int) -> tm.TurnMachine:
        rt = self._rt
        settings = self._opts.turn_settings()
        return tm.TurnMachine(number, settings, bridge=rt.bridge, doom_loop=rt.doom_loop, ids=rt.ids.__next__)

    def _record_start(self, number: int, prompt: UserPrompt) -> tm.Begin | None:
        """Store the turn as started with its prompt and its ``TurnStarted`` (with the turn's trace
        context, begun now when the host traces turns); returns what begins the turn, or None when it must
        wait (the prompt stays first in line, and a start is tried again). After :data:`_START_TRIES`
        failures it is kept to be stored later and the turn goes on, to fail at its first read of the
        history."""
        rt = self._rt
        message = UserMessage((TextPart(prompt.text), *prompt.images))
        trace = None
        if rt.prepare_trace is not None:
            trace = rt.prepare_trace(self._opts.session_id, number, tm.Begin(prompt))
        started = ev.TurnStarted(self._opts.session_id, number, prompt.text, traceparent=trace)
        keep = rt.start_failures + 1 >= _START_TRIES
        try:
            self._history.begin_turn(number, message, started, keep_on_failure=keep)
        except HistoryError as exc:
            rt.start_failures += 1
            if exc.kind not in ("aborted", "fenced"):
                self._init_again()
            return None
        rt.start_failures = 0
        return tm.Begin(prompt, started)

    @handles(Cancel)
    def _on_cancel(self, message: Cancel) -> bool:
        if self._rt.turn is None:
            return False
        self._feed(tm.CancelRequested(message.reason))
        return True

    @handles(Subscribe)
    def _on_subscribe(self, message: Subscribe) -> None:
        if message.subscriber not in self._rt.subscribers:
            self._rt.subscribers.append(message.subscriber)

    @handles(ToolServerChanged)
    def _on_tool_server(self, m: ToolServerChanged) -> None:
        notice = ev.McpServerStatus(self._opts.session_id, m.server, m.status, m.restarts, m.message)
        publish(self._rt.subscribers, notice, session_id=self._opts.session_id)

    @handles(Unsubscribe)
    def _on_unsubscribe(self, message: Unsubscribe) -> None:
        if message.subscriber in self._rt.subscribers:
            self._rt.subscribers.remove(message.subscriber)

    @handles(PermissionDecision)
    def _on_permission(self, message: PermissionDecision) -> None:
        self._sibling("tools").tell(message)

    @handles(SetPermissionMode)
    def _on_permission_mode(self, message: SetPermissionMode) -> str:
        """The session's tools take the mode (tried again past a restart of theirs); answers the mode."""
        for attempt in range(_SIBLING_TRIES):
            try:
                self._sibling("tools").ask(message, timeout=_SIBLING_ASK_TIMEOUT)
                return message.mode
            except ActorError as exc:
                if attempt == _SIBLING_TRIES - 1:
                    raise Refuse(exc) from exc
        raise AssertionError("unreachable")

    @handles(SetModel)
    def _on_model(self, message: SetModel) -> str:
        if not (isinstance(message.model, str) and message.model):
            raise Refuse(ValueError(f"a model is a non-empty name, got {message.model!r}"))
        opts = self._opts
        self._opts = self._rt.options = dataclasses.replace(
            opts, model=message.model, price=opts.prices.get(message.model)
        )
        return message.model

    @handles(ev.SubagentEvent)
    def _on_child_event(self, message: ev.SubagentEvent) -> None:
        self._publish(message)

    @handles(PermissionRequested, ToolAbandoned)
    def _on_tool_notice(self, message: PermissionRequested | ToolAbandoned) -> None:
        self._publish(message)

    # -- what the turn hears -------------------------------------------------------------------------

    @handles(*tm.SIBLING_MESSAGES)
    def _on_turn_message(self, message: tm.TurnInput) -> None:
        if self._rt.turn is not None:
            self._feed(message)

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        """A sibling's incarnation ended. A message it was handling may be lost with it."""
        if self._rt.turn is None or message.reason is ExitReason.NORMAL:
            return
        sibling = tm.Sibling(SessionPath.member_of(message.address))
        self._feed(tm.SiblingDown(sibling, repr(message.error)))

    @handles(_Probe)
    def _on_probe(self, message: _Probe) -> None:
        if self._rt.turn is not None:
            self._feed(tm.ProbeDue(message.request_id))

    @handles(_AuthDone, _Resubmit)
    def _on_auth_timer(self, message: _AuthDone | _Resubmit) -> None:
        turn = self._rt.turn
        if turn is not None and turn.number == message.turn:
            self._feed(tm.AuthDone(message.error) if isinstance(message, _AuthDone) else tm.ResubmitDue())

    # -- performing ----------------------------------------------------------------------------------

    def _feed(self, message: tm.TurnInput) -> None:
        """Feed the turn ``message`` and perform what it decides, feeding back every answer."""
        turn = self._rt.turn
        pending: deque[tm.TurnInput] = deque([message])
        while pending and turn is not None and self._rt.turn is turn:
            fed = pending.popleft()
            try:
                actions = turn.feed(fed, time.monotonic())
            except Exception as exc:
                logger.exception("session %s: the turn machine failed", self._opts.session_id)
                why = f"the session failed unexpectedly: {exc!r}"
                failed = ev.TurnFailed(self._opts.session_id, turn.number, "internal", why)
                if self._rt.observer is not None:
                    self._rt.observer(self._opts.session_id, turn.number, fed, [tm.Finish(failed)])
                self._finish(turn, failed)
                return
            if self._rt.observer is not None:
                self._rt.observer(self._opts.session_id, turn.number, fed, actions)
            if turn.end is not None:  # only writes that must not be lost, and the Finish, are left
                self._perform_ending(turn, actions)
                continue
            index = 0
            while index < len(actions):
                run = _writes_at(actions, index)
                try:
                    if len(run) > 1 and self._write_all(turn, run):
                        index += len(run)
                        continue
                    answer = self._perform(turn, actions[index])
                except Exception as exc:
                    pending.append(self._failure(actions[index:], exc))
                    break
                if answer is not None:
                    pending.append(answer)
                index += 1

    def _write_all(self, turn: tm.TurnMachine, run: list[tm.AppendMessage | tm.Emit]) -> bool:
        """Make the writes of ``run`` in one transaction, then publish its events; False (nothing made)
        when they are to be performed one by one, as they are also after a failure of the transaction."""
        writes = tuple(self._write_of(turn.number, action) for action in run)
        try:
            if not self._history.write_all(turn.number, writes):
                return False
        except HistoryError:
            return False  # nothing of it was made: each is made, or fails, on its own
        for write in writes:
            if isinstance(write, LogEvent):
                self._publish(write.event)
        return True

    def _write_of(self, number: int, action: tm.AppendMessage | tm.Emit) -> Append | LogEvent:
        """The write to the history that ``action`` of turn ``number`` makes."""
        if isinstance(action, tm.AppendMessage):
            return Append(number, action.message)
        event = self._traced(action.event, number)
        return LogEvent(getattr(event, "turn", 0), event)

    def _traced(self, event: Any, number: int) -> Any:
        """``event`` with the trace context of turn ``number`` when it is the turn's ``TurnStarted`` and the
        host traces its turns."""
        if isinstance(event, ev.TurnStarted) and self._rt.traceparent is not None:
            return msgspec.structs.replace(event, traceparent=self._traceparent(number))
        return event

    def _perform_ending(self, turn: tm.TurnMachine, actions: list[tm.TurnAction]) -> None:
        """Perform the actions of a turn that has ended: a write that fails is kept to be made later. The
        writes just before the Finish are made with the turn's end, in one transaction."""
        index = 0
        while index < len(actions):
            run = _writes_at(actions, index)
            end = index + len(run)
            finish = actions[end] if end < len(actions) else None
            if isinstance(finish, tm.Finish) and self._rt.turn is turn:
                writes = tuple(self._write_of(turn.number, action) for action in run)
                self._finish(turn, finish.event, before=writes)
                index = end + 1
                continue
            self._perform_ended(turn, actions[index])
            index += 1

    def _perform_ended(self, turn: tm.TurnMachine, action: tm.TurnAction) -> None:
        """Perform one action of a turn that has ended: a write that fails is kept to be made later."""
        match action:
            case tm.AppendMessage(message):
                self._history.record(Append(turn.number, message))
            case tm.Emit(event):
                self._history.record(LogEvent(turn.number, event))
                self._publish(event)
            case _:
                try:
                    self._perform(turn, action)
                except Exception:
                    logger.exception("session %s: could not perform %r", self._opts.session_id, action)

    def _failure(self, unperformed: list[tm.TurnAction], exc: Exception) -> tm.TurnInput:
        """What the turn is told when performing ``unperformed[0]`` raised ``exc``."""
        if isinstance(exc, HistoryError):
            if exc.kind == "aborted":
                return self._shutdown(tuple(unperformed))
            return tm.ActionFailed(exc.kind, str(exc), tuple(unperformed))
        logger.error("session %s: performing %r failed", self._opts.session_id, unperformed[0], exc_info=exc)
        message = f"the session failed unexpectedly: {exc!r}"
        return tm.ActionFailed("internal", message, tuple(unperformed))

    def _perform(self, turn: tm.TurnMachine, action: tm.TurnAction) -> tm.TurnInput | None:
        """Perform one action; return the input that answers it, if it is an ask."""
        number = turn.number
        match action:
            case tm.Publish(event):
                self._publish(event)
            case tm.Emit(event):
                self._emit(self._traced(event, number))
            case tm.AppendMessage(message):
                self._history.ask(Append(number, message))
            case tm.TellCalibrate(estimated, reported):
                self._history.tell(Calibrate(estimated, reported))
            case tm.AskBuild() | tm.AskPlan() | tm.AskApply() | tm.AskStub() | tm.AskLearnWindow():
                opts = self._opts
                return self._history.answer(
                    action,
                    turn=number,
                    model=turn.settings.model,
                    tools=self._rt.tool_specs,
                    max_tokens=opts.max_output_tokens,
                )
            case tm.AskStepStatus(request_id):
                try:
                    state = self._sibling("sampler").ask(StepStatus(request_id))
                except ActorError:
                    state = None  # the sampler is being restarted: its Down notice covers the step
                return tm.StepChecked(request_id, state)
            case tm.SendSample(request_id, memory_key, request):
                sample = Sample(
                    request_id, memory_key, request, self.address.name, self._traceparent(number, request_id)
                )
                self._sibling("sampler").tell(sample)
            case tm.StopSample(request_id):
                self._sibling("sampler").tell(CancelSample(request_id))
            case tm.ArmProbe(request_id, delay):
                if self._rt.probe is not None:
                    self._rt.probe.cancel()
                address = self.address
                self._rt.probe = self.io.call_later(
                    delay, lambda: address.tell(_Probe(request_id)), name="probe"
                )
            case tm.StartTools(batch_id, invocations):
                trace = self._traceparent(number)
                self._sibling("tools").tell(RunTools(batch_id, invocations, self.address.name, trace))
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

    def _traceparent(self, number: int, request_id: str | None = None) -> str | None:
        """The trace context turn ``number`` asks for its work with (None unless the host traces turns)."""
        find = self._rt.traceparent
        return None if find is None else find(self._opts.session_id, number, request_id)

    async def _refresh(self, number: int) -> None:
        self.address.tell(_AuthDone(number, await refresh_failure(self._rt.credentials)))

    def _finish(
        self, turn: tm.TurnMachine, event: tm.TurnEnd, before: tuple[Append | LogEvent, ...] = ()
    ) -> None:
        """Record the writes ``before`` and the turn's end (or keep them to record later), publish the
        events, and start the next prompt."""
        rt = self._rt
        if rt.turn is not turn:
            return
        rt.turn = None
        if rt.probe is not None:
            rt.probe.cancel()
            rt.probe = None
        self._sibling("sampler").tell(ForgetTurn(str(turn.number)))
        self._history.finish_turn(turn.number, event, before)
        for write in before:
            if isinstance(write, LogEvent):
                self._publish(write.event)
        self._publish(event)
        rt.last_active = time.monotonic()
        if rt.gate is not None:
            rt.gate.leave(self.address)
        if rt.prompts and self.address.alive:
            self._start_next()
        elif rt.unrecorded and not self.stopping:
            self._init_again()  # what could not be written is written as soon as it can be

    # -- events --------------------------------------------------------------------------------------

    def _emit(self, event: Any) -> None:
        """Persist the event (or keep it to persist later, and raise), then publish it."""
        turn = getattr(event, "turn", 0)
        try:
            self._history.write(LogEvent(turn, event))
        finally:
            self._publish(event)

    def _publish(self, event: Any) -> None:
        publish(self._rt.subscribers, event, session_id=self._opts.session_id)


def _writes_at(actions: list[tm.TurnAction], index: int) -> list[tm.AppendMessage | tm.Emit]:
    """The run of writes to the history (appended messages, emitted events) that starts at ``index``."""
    run: list[tm.AppendMessage | tm.Emit] = []
    for action in actions[index:]:
        if not isinstance(action, tm.AppendMessage | tm.Emit):
            break
        run.append(action)
    return run
