"""Model check of the turn machine: whatever it is told, in any order, duplicated or stale, a turn ends
exactly once, says nothing after its end, stays within its step limit, and ends when the world answers;
begun afresh or resumed from a stored journal with calls left open."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sampler import (
    AssistantMessage,
    Cancelled,
    Completed,
    Failed,
    FinishReason,
    LlmError,
    LlmErrorKind,
    ModelRequest,
    Projection,
    StepProjectionFallback,
    StepRetrying,
    StepState,
    StepText,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from shell import events as ev
from shell import turn as tm
from shell._protocol import BuiltRequest, CompactionTask
from shell.bridge import RecoveryBridge
from shell.doom_loop import DoomLoopDetector
from shell.messages import UserPrompt
from tool_bridge.messages import ToolCallBegan, ToolCallEnded, ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

MAX_STEPS = 4
PROBE_AFTER = 30.0
WINDOW = 1000
EMPTY = ModelRequest("m", (UserMessage.of_text("hi"),))
ASKS = (tm.AskBuild, tm.AskPlan, tm.AskApply, tm.AskStub, tm.AskLearnWindow, tm.AskStepStatus)

error_kinds = st.sampled_from(list(LlmErrorKind))
tool_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.sampled_from(["c1", "c2", "c3"]),
        name=st.sampled_from(["read_file", "shell"]),
        arguments=st.sampled_from(["{}", '{"path": "a"}']),
    ),
    max_size=2,
    unique_by=lambda call: call.id,
)


OPEN_CALLS = (
    ToolCall("c1", "read_file", '{"path": "a"}'),
    ToolCall("c2", "shell", "{}"),
    ToolCall("c3", "write_file", "{}"),
)


@st.composite
def resume_plans(draw: st.DrawFn) -> tm.ResumePlan:
    """What a turn found running after its process ended may be told to do: go on after some stored
    steps, complete with a stored answer, or finish its last step's open calls first."""
    steps = draw(st.integers(min_value=0, max_value=MAX_STEPS))
    kind = draw(st.sampled_from(["next step", "answer", "open calls"]))
    if kind == "answer":
        return tm.ResumePlan(max(steps, 1), 1, answer="stored")
    if kind == "next step" or steps == 0:
        return tm.ResumePlan(steps, 1)
    calls = draw(st.lists(st.sampled_from(OPEN_CALLS), min_size=1, max_size=3, unique_by=lambda c: c.id))
    ids = [call.id for call in calls]
    rerun = draw(st.sets(st.sampled_from(ids)))
    started = draw(st.sets(st.sampled_from(ids)))
    return tm.ResumePlan(
        steps, 1, open_calls=tuple(calls), rerun=frozenset(rerun), started=frozenset(started)
    )


def built(tokens: int) -> tm.RequestBuilt:
    return tm.RequestBuilt(BuiltRequest(EMPTY, tokens, WINDOW))


def answer_to(ask: Any, *, big: bool = False) -> tm.TurnInput:
    """The answer the world gives to ``ask`` (``big``: a request that calls for a compaction)."""
    match ask:
        case tm.AskBuild():
            return built(WINDOW if big else 10)
        case tm.AskPlan():
            return tm.CompactionPlanned(None if big else CompactionTask((1, 2), (EMPTY, EMPTY), 900))
        case tm.AskApply():
            return tm.CompactionApplied(900, 900 if big else 100)
        case tm.AskStub():
            return tm.OutputsStubbed(0 if big else 2)
        case tm.AskLearnWindow(tokens):
            return tm.WindowLearned(tokens)
        case tm.AskStepStatus(request_id):
            return tm.StepChecked(request_id, StepState.UNKNOWN if big else StepState.RUNNING)
    raise AssertionError(f"not an ask: {ask!r}")


class TurnModel(RuleBasedStateMachine):
    """Feeds a turn machine random inputs and checks its promises after each."""

    def __init__(self) -> None:
        super().__init__()
        self.machine = tm.TurnMachine(
            1,
            tm.TurnSettings("s", max_steps=MAX_STEPS, probe_after=PROBE_AFTER),
            bridge=RecoveryBridge(max_compactions=2),
            doom_loop=DoomLoopDetector(),
        )
        self.now = 0.0
        self.fed: list[tm.TurnInput] = []
        self.finishes = 0
        self.sent: set[str] = set()
        self.asked: Any = None
        self.open_request: str | None = None
        self.open_calls: set[str] = set()
        self.started: set[str] = set()

    def feed(self, message: tm.TurnInput) -> list[tm.TurnAction]:
        was_ended = self.machine.ended
        actions = self.machine.feed(message, self.now)
        self.fed.append(message)
        if isinstance(message, tm.Resume) and message.plan.answer is not None:
            # A stored final answer completes the turn: no request, no build.
            assert not any(isinstance(a, tm.SendSample | tm.AskBuild) for a in actions), actions
        if was_ended:
            assert actions == [], f"the turn spoke after its end: {actions}"
        if isinstance(message, (Completed, Failed, Cancelled)) and message.request_id == self.open_request:
            self.open_request = None
        for index, action in enumerate(actions):
            if isinstance(action, (*ASKS, tm.Finish)):
                assert index == len(actions) - 1, f"{action} is not the last action of {actions}"
            self.check_history(action)
            self.check_one_step_at_a_time(action)
            self.check_calls_start_before_they_finish(action)
            if isinstance(action, tm.Finish):
                self.finishes += 1
        if actions and isinstance(actions[-1], ASKS):
            self.asked = actions[-1]
        return actions

    @initialize(resumed=st.none() | resume_plans())
    def begin(self, resumed: tm.ResumePlan | None) -> None:
        if resumed is None:
            self.feed(tm.Begin(UserPrompt("do it")))
            return
        # The stored history holds the last step's calls, some reported started before the process ended.
        self.open_calls = {call.id for call in resumed.open_calls}
        self.started = set(resumed.started)
        self.feed(tm.Resume(resumed))

    # -- the world, answering or not ------------------------------------------------------------------

    @precondition(lambda self: self.asked is not None)
    @rule(big=st.booleans())
    def answer_the_ask(self, big: bool) -> None:
        ask, self.asked = self.asked, None
        self.feed(answer_to(ask, big=big))

    @rule(calls=tool_calls, big=st.booleans())
    def the_world_answers(self, calls: list[ToolCall], big: bool) -> None:
        """What a working world says next: the answer asked for, the step's outcome, the tools' results."""
        self.feed(self.cooperative_input(calls, big=big))

    @rule(calls=tool_calls)
    def the_world_answers_again(self, calls: list[ToolCall]) -> None:
        self.feed(self.cooperative_input(calls))

    @rule(
        which=st.sampled_from(["current", "stale"]),
        text=st.text(max_size=3),
        calls=tool_calls,
        usage=st.booleans(),
    )
    def sampler_completes(self, which: str, text: str, calls: list[ToolCall], usage: bool) -> None:
        answer = AssistantMessage(text=text, tool_calls=tuple(calls))
        reported = Usage(5, 1) if usage else None
        self.feed(Completed(self.request(which), answer, reported, FinishReason.STOP, 1))

    @rule(which=st.sampled_from(["current", "stale"]), kind=error_kinds, filtered=st.booleans())
    def sampler_fails(self, which: str, kind: LlmErrorKind, filtered: bool) -> None:
        self.feed(Failed(self.request(which), LlmError(kind, 400, "no", filtered=filtered), 1))

    @rule(which=st.sampled_from(["current", "stale"]), text=st.text(max_size=2))
    def sampler_cancels(self, which: str, text: str) -> None:
        self.feed(Cancelled(self.request(which), AssistantMessage(text=text), 1))

    @rule(which=st.sampled_from(["current", "stale"]), kind=st.sampled_from(["delta", "retry", "fallback"]))
    def sampler_speaks(self, which: str, kind: str) -> None:
        rid = self.request(which)
        message: tm.TurnInput = {
            "delta": StepText(rid, "x"),
            "retry": StepRetrying(rid, 1, 3, 0.5, LlmErrorKind.RATE_LIMIT, 429, "slow down", True),
            "fallback": StepProjectionFallback(rid, next(iter(Projection)), LlmErrorKind.IMAGE_FORMAT),
        }[kind]
        self.feed(message)

    @rule(
        which=st.sampled_from(["current", "stale"]),
        some=st.booleans(),
        status=st.sampled_from(list(ToolStatus)),
    )
    def tools_finish(self, which: str, some: bool, status: ToolStatus) -> None:
        batch = self.machine.batch_id if which == "current" else "old-batch"
        outcomes = (ToolOutcome("c1", "shell", "out", status is not ToolStatus.OK, status),) if some else ()
        self.feed(ToolsFinished(batch, outcomes))

    @rule()
    def tool_begins(self) -> None:
        self.feed(ToolCallBegan(self.machine.batch_id, "c1", "shell"))

    @rule(
        which=st.sampled_from(["current", "stale"]),
        call_id=st.sampled_from(["c1", "c2", "c3"]),
        status=st.sampled_from(list(ToolStatus)),
    )
    def a_call_ends(self, which: str, call_id: str, status: ToolStatus) -> None:
        batch = self.machine.batch_id if which == "current" else "old-batch"
        outcome = ToolOutcome(call_id, "shell", "out", status is not ToolStatus.OK, status)
        self.feed(ToolCallEnded(batch, outcome))

    @rule(reason=st.sampled_from(["user_cancelled", "aborted"]))
    def user_cancels(self, reason: str) -> None:
        self.feed(tm.CancelRequested(reason))

    @rule(sibling=st.sampled_from(list(tm.Sibling)))
    def sibling_crashes(self, sibling: tm.Sibling) -> None:
        self.feed(tm.SiblingDown(sibling, "ChaosCrash()"))

    @rule()
    def session_restarts(self) -> None:
        self.asked = None  # the old incarnation's asks are lost with it
        self.feed(tm.Restarted())

    @rule(later=st.floats(min_value=0, max_value=2 * PROBE_AFTER))
    def probe_fires(self, later: float) -> None:
        self.now += later
        self.feed(tm.ProbeDue(self.machine.request_id))

    @rule(error=st.none() | st.just("refresh token revoked"))
    def auth_ends(self, error: str | None) -> None:
        self.feed(tm.AuthDone(error))

    @rule()
    def resubmit_due(self) -> None:
        self.feed(tm.ResubmitDue())

    @rule(failure=st.none() | st.just("gave up"))
    def session_stops(self, failure: str | None) -> None:
        self.feed(tm.Shutdown(failure))

    @rule(kind=st.sampled_from(["store", "internal"]))
    def an_action_fails(self, kind: str) -> None:
        self.feed(tm.ActionFailed(kind, "the store is gone"))

    @precondition(lambda self: bool(self.fed))
    @rule(data=st.data())
    def an_old_message_arrives_again(self, data: st.DataObject) -> None:
        self.feed(data.draw(st.sampled_from(self.fed)))

    def check_history(self, action: tm.TurnAction) -> None:
        """Every tool call gets exactly one result, before the next model call and before the turn ends."""
        if isinstance(action, tm.AppendMessage):
            message = action.message
            if isinstance(message, AssistantMessage):
                assert not self.open_calls, f"a new answer while calls {self.open_calls} have no result"
                self.open_calls = {call.id for call in message.tool_calls}
            elif isinstance(message, ToolMessage):
                call_id = message.result.call_id
                assert call_id in self.open_calls, f"a result for {call_id}, which is not an open call"
                self.open_calls.remove(call_id)
        if isinstance(action, (tm.SendSample, tm.Finish)):
            assert not self.open_calls, (
                f"{type(action).__name__} while calls {self.open_calls} have no result"
            )

    def check_calls_start_before_they_finish(self, action: tm.TurnAction) -> None:
        """Every call of an answer the turn reports finished, it reported started before, once."""
        if isinstance(action, tm.AppendMessage) and isinstance(action.message, AssistantMessage):
            self.started = set()
        if isinstance(action, tm.Emit) and isinstance(action.event, ev.ToolCallStarted):
            assert action.event.call_id not in self.started, f"{action.event.call_id} started twice"
            self.started.add(action.event.call_id)
        if isinstance(action, tm.Emit) and isinstance(action.event, ev.ToolCallFinished):
            assert action.event.call_id in self.started, f"{action.event.call_id} finished, never started"

    def check_one_step_at_a_time(self, action: tm.TurnAction) -> None:
        """A request is sent only when the previous one has its outcome or was stopped; ids are unique."""
        if isinstance(action, tm.StopSample) and action.request_id == self.open_request:
            self.open_request = None
        if isinstance(action, tm.SendSample):
            assert self.open_request is None, f"{action.request_id} sent while {self.open_request} runs"
            assert action.request_id not in self.sent, "a request id was used twice"
            self.sent.add(action.request_id)
            self.open_request = action.request_id
        if isinstance(action, tm.Finish):
            assert self.open_request is None, f"the turn ended with {self.open_request} still running"

    def request(self, which: str) -> str:
        return self.machine.request_id if which == "current" else "s:1:999"

    # -- the promises ----------------------------------------------------------------------------------

    @invariant()
    def ends_at_most_once(self) -> None:
        assert self.finishes <= 1
        assert self.machine.ended == (self.finishes == 1)

    @invariant()
    def stays_within_its_steps(self) -> None:
        assert self.machine.step <= MAX_STEPS + 1

    def teardown(self) -> None:
        """A world that answers everything ends the turn, with exactly one end."""
        for _ in range(200):
            if self.machine.ended:
                break
            self.feed(self.cooperative_input())
        assert self.machine.ended, f"the turn did not end: {self.machine.describe()}"
        assert self.finishes == 1
        end = self.machine.end
        assert end is not None and end.turn == 1

    def cooperative_input(self, calls: list[ToolCall] | None = None, *, big: bool = False) -> tm.TurnInput:
        m = self.machine
        if self.asked is not None and m.phase is tm.Phase.PREPARING:
            ask, self.asked = self.asked, None
            return answer_to(ask, big=big)
        match m.phase:
            case tm.Phase.SAMPLING | tm.Phase.COMPACTING:
                answer = AssistantMessage(text="done", tool_calls=tuple(calls or ()))
                return Completed(m.request_id, answer, None, FinishReason.STOP, 1)
            case tm.Phase.TOOLS:
                outcomes = tuple(ToolOutcome(c, "shell", "ok", False, ToolStatus.OK) for c in self.open_calls)
                return ToolsFinished(m.batch_id, outcomes)
            case tm.Phase.AUTH:
                return tm.AuthDone(None)
            case tm.Phase.WAITING:
                return tm.ResubmitDue()
            case _:
                return tm.Restarted()  # an answer was lost: only a restart of the session loses one


TurnModel.TestCase.settings = settings(
    max_examples=400, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_the_turn_machine_keeps_its_promises = TurnModel.TestCase
