"""The turn machine, case by case: what a turn does for each thing it is told."""

from __future__ import annotations

from sampler import (
    AssistantMessage,
    Cancelled,
    Completed,
    Failed,
    FinishReason,
    LlmError,
    LlmErrorKind,
    ModelRequest,
    StepText,
    StepThought,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from shell import events as ev
from shell import turn as tm
from shell._protocol import BuiltRequest, CompactionTask
from shell.bridge import RecoveryBridge
from shell.doom_loop import DoomLoopDetector
from shell.messages import UserPrompt
from tool_bridge.messages import ToolInvocation, ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

REQUEST = ModelRequest("m", (UserMessage.of_text("hi"),))
CALL = ToolCall("c1", "read_file", '{"path": "a"}')


def machine(**limits: object) -> tm.TurnMachine:
    return tm.TurnMachine(
        7,
        tm.TurnSettings("s", **limits),  # type: ignore[arg-type]
        bridge=RecoveryBridge(max_compactions=2),
        doom_loop=DoomLoopDetector(),
    )


def sampling(m: tm.TurnMachine, tokens: int = 10, window: int = 1000) -> str:
    """Begin ``m`` and answer its request build; the id of the request it sends."""
    assert m.feed(tm.Begin(UserPrompt("hi")), 0.0) == [
        tm.Emit(ev.TurnStarted("s", 7, "hi")),
        tm.AskBuild(),
    ]
    actions = m.feed(tm.RequestBuilt(BuiltRequest(REQUEST, tokens, window)), 0.0)
    assert isinstance(actions[0], tm.SendSample)
    return actions[0].request_id


def completed(request_id: str, *calls: ToolCall, text: str = "") -> Completed:
    return Completed(request_id, AssistantMessage(text=text, tool_calls=calls), None, FinishReason.STOP, 1)


def test_a_turn_whose_start_was_stored_with_its_prompt_publishes_it_without_storing_it_again() -> None:
    started = ev.TurnStarted("s", 7, "hi", traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")
    assert machine().feed(tm.Begin(UserPrompt("hi"), started), 0.0) == [tm.Publish(started), tm.AskBuild()]


def test_an_answer_without_tool_calls_completes_the_turn() -> None:
    m = machine()
    rid = sampling(m)
    answer = AssistantMessage(text="hello")
    actions = m.feed(Completed(rid, answer, None, FinishReason.STOP, 1), 1.0)
    assert actions == [tm.AppendMessage(answer), tm.Finish(ev.TurnCompleted("s", 7, "hello", 1))]
    assert m.ended and m.feed(completed(rid), 2.0) == []


def test_a_completed_turn_says_why_its_last_answer_stopped() -> None:
    m = machine()
    rid = sampling(m)
    answer = AssistantMessage(text="and then the")
    actions = m.feed(Completed(rid, answer, None, FinishReason.LENGTH, 1), 1.0)
    assert actions[-1] == tm.Finish(ev.TurnCompleted("s", 7, "and then the", 1, finish_reason="length"))


def test_each_step_publishes_the_usage_its_provider_reported() -> None:
    m = machine()
    rid = sampling(m)
    actions = m.feed(
        Completed(rid, AssistantMessage(text="hi"), Usage(120, 8, 100), FinishReason.STOP, 1), 1.0
    )
    published = [a.event for a in actions if isinstance(a, tm.Publish)]
    assert published == [ev.StepUsage("s", 7, 1, 120, 8, 100)]
    silent = machine()
    assert not [a for a in silent.feed(completed(sampling(silent)), 1.0) if isinstance(a, tm.Publish)]


def test_streamed_reasoning_is_published_and_never_part_of_the_answer() -> None:
    m = machine()
    rid = sampling(m)
    assert m.feed(StepThought(rid, "pondering"), 0.5) == [tm.Publish(ev.ThoughtDelta("s", 7, "pondering"))]
    assert m.feed(StepThought("another request", "stale"), 0.5) == []
    assert m.feed(StepText(rid, "hel"), 0.6) == [tm.Publish(ev.TextDelta("s", 7, "hel"))]
    assert m.text == "hel"


def test_a_request_is_sent_with_a_probe_armed() -> None:
    m = machine(probe_after=30.0)
    rid = sampling(m)
    assert rid.startswith("s:7:") and m.phase is tm.Phase.SAMPLING
    assert m.feed(tm.ProbeDue(rid), 10.0) == [tm.ArmProbe(rid, 20.0)]
    assert m.feed(tm.ProbeDue(rid), 40.0) == [tm.AskStepStatus(rid)]


def test_tool_calls_run_then_their_results_go_back_to_the_model() -> None:
    m = machine()
    rid = sampling(m)
    actions = m.feed(completed(rid, CALL), 1.0)
    assert actions[-1] == tm.StartTools(m.batch_id, (ToolInvocation("c1", "read_file", CALL.arguments),))
    outcome = ToolOutcome("c1", "read_file", "contents", False, ToolStatus.OK)
    actions = m.feed(ToolsFinished(m.batch_id, (outcome,)), 2.0)
    assert actions[0] == tm.AppendMessage(ToolMessage(ToolResult("c1", "contents", False)))
    assert actions[-1] == tm.AskBuild() and m.step == 2


def test_a_step_that_writes_text_and_calls_tools_stores_its_text_before_the_tools_start() -> None:
    m = machine()
    rid = sampling(m)
    answer = AssistantMessage(text="let me look", tool_calls=(CALL,))
    actions = m.feed(Completed(rid, answer, None, FinishReason.STOP, 1), 1.0)
    assert actions == [
        tm.AppendMessage(answer),
        tm.Emit(ev.StepAnswered("s", 7, 1, "let me look")),
        tm.StartTools(m.batch_id, (ToolInvocation("c1", "read_file", CALL.arguments),)),
    ]
    silent = machine()
    actions = silent.feed(completed(sampling(silent), CALL), 1.0)
    assert not any(isinstance(a, tm.Emit) for a in actions), "a step without text stores no StepAnswered"


def test_outcomes_of_other_requests_and_batches_are_ignored() -> None:
    m = machine()
    rid = sampling(m)
    assert m.feed(completed("s:7:999", text="stale"), 1.0) == []
    m.feed(completed(rid, CALL), 1.0)
    assert m.feed(ToolsFinished("another batch", ()), 2.0) == []
    assert m.phase is tm.Phase.TOOLS


def test_a_cancel_while_sampling_stops_the_request_and_salvages_the_partial_answer() -> None:
    m = machine()
    rid = sampling(m)
    assert m.feed(tm.CancelRequested("user_cancelled"), 1.0) == [tm.StopSample(rid)]
    actions = m.feed(Cancelled(rid, AssistantMessage(text="half"), 1), 2.0)
    assert actions == [
        tm.AppendMessage(AssistantMessage(text="half", interrupted=True)),
        tm.Finish(ev.TurnCancelled("s", 7, "user_cancelled")),
    ]


def test_an_answer_that_arrives_after_a_cancel_is_kept_but_its_tools_do_not_run() -> None:
    m = machine()
    rid = sampling(m)
    m.feed(tm.CancelRequested("user_cancelled"), 1.0)
    actions = m.feed(completed(rid, CALL), 2.0)
    assert not any(isinstance(a, tm.StartTools) for a in actions)
    assert isinstance(actions[1], tm.AppendMessage) and isinstance(actions[1].message, ToolMessage)
    assert actions[1].message.result.is_error
    assert actions[-1] == tm.Finish(ev.TurnCancelled("s", 7, "user_cancelled"))


def test_expired_credentials_are_refreshed_then_the_step_is_sent_again() -> None:
    m = machine()
    rid = sampling(m)
    assert m.feed(Failed(rid, LlmError(LlmErrorKind.AUTH, 401, "expired"), 1), 1.0) == [tm.StartAuthRefresh()]
    actions = m.feed(tm.AuthDone(None), 2.0)
    assert actions == [tm.Emit(ev.AuthRefreshed("s", 7, 1)), tm.ScheduleResubmit(0.5)]
    assert m.feed(tm.ResubmitDue(), 3.0) == [tm.AskBuild()]


def test_a_failed_refresh_fails_the_turn_with_advice() -> None:
    m = machine()
    rid = sampling(m)
    m.feed(Failed(rid, LlmError(LlmErrorKind.AUTH, 401, "expired"), 1), 1.0)
    [finish] = m.feed(tm.AuthDone("revoked"), 2.0)
    assert isinstance(finish, tm.Finish) and isinstance(finish.event, ev.TurnFailed)
    assert finish.event.kind == tm.TurnFailure.AUTH and "revoked" in finish.event.message


def test_an_overflow_learns_the_window_compacts_and_sends_the_step_again() -> None:
    m = machine()
    rid = sampling(m, tokens=800)
    overflow = LlmError(LlmErrorKind.CONTEXT_OVERFLOW, 400, "too long")
    assert m.feed(Failed(rid, overflow, 1), 1.0) == [tm.AskLearnWindow(680)]
    assert m.feed(tm.WindowLearned(680), 1.0) == [tm.AskPlan(None)]
    task = CompactionTask((1, 2), (REQUEST,), 900)
    actions = m.feed(tm.CompactionPlanned(task), 1.0)
    assert actions[0] == tm.Emit(ev.CompactionStarted("s", 7, "overflow", 800, 680))
    summary = actions[1]
    assert isinstance(summary, tm.SendSample) and summary.memory_key == "7:compaction"
    assert m.feed(completed(summary.request_id, text="short"), 2.0) == [tm.AskApply((1, 2), "short")]
    actions = m.feed(tm.CompactionApplied(900, 100), 2.0)
    assert actions == [
        tm.Emit(ev.CompactionFinished("s", 7, True, 2, 900, 100, "replaced 2 messages")),
        tm.AskBuild(),
    ]


def test_a_compaction_that_does_not_shrink_enough_fails_the_turn() -> None:
    m = machine()
    rid = sampling(m, tokens=800)
    m.feed(Failed(rid, LlmError(LlmErrorKind.CONTEXT_OVERFLOW, 400, "too long"), 1), 1.0)
    m.feed(tm.WindowLearned(680), 1.0)
    [_, summary, _] = m.feed(tm.CompactionPlanned(CompactionTask((1,), (REQUEST,), 900)), 1.0)
    assert isinstance(summary, tm.SendSample)
    m.feed(completed(summary.request_id, text="long"), 2.0)
    actions = m.feed(tm.CompactionApplied(900, 890), 2.0)
    end = actions[-1]
    assert isinstance(end, tm.Finish) and isinstance(end.event, ev.TurnFailed)
    assert end.event.kind == tm.TurnFailure.CONTEXT_OVERFLOW


def test_a_crashed_tool_runner_records_its_calls_as_crashed_and_the_turn_goes_on() -> None:
    m = machine()
    m.feed(completed(sampling(m), CALL), 1.0)
    actions = m.feed(tm.SiblingDown(tm.Sibling.TOOLS, "ChaosCrash()"), 2.0)
    result = actions[0]
    assert isinstance(result, tm.AppendMessage) and isinstance(result.message, ToolMessage)
    assert result.message.result.is_error and "crashed" in result.message.result.content
    assert actions[-1] == tm.AskBuild()


def test_a_lost_step_is_sent_again_a_bounded_number_of_times() -> None:
    m = machine()
    rid = sampling(m)
    for _ in range(tm.MAX_LOST_STEPS):
        actions = m.feed(tm.SiblingDown(tm.Sibling.SAMPLER, "ChaosCrash()"), 1.0)
        assert actions == [tm.StopSample(rid), tm.AskBuild()]
        rid = sampling_again(m)
    actions = m.feed(tm.SiblingDown(tm.Sibling.SAMPLER, "ChaosCrash()"), 1.0)
    end = actions[-1]
    assert isinstance(end, tm.Finish) and isinstance(end.event, ev.TurnFailed)
    assert end.event.kind == tm.TurnFailure.INTERNAL


def sampling_again(m: tm.TurnMachine) -> str:
    send = m.feed(tm.RequestBuilt(BuiltRequest(REQUEST, 10, 1000)), 1.0)[0]
    assert isinstance(send, tm.SendSample)
    return send.request_id


def test_a_stop_during_tools_aborts_them_and_answers_every_call() -> None:
    m = machine()
    m.feed(completed(sampling(m), CALL), 1.0)
    actions = m.feed(tm.Shutdown(), 2.0)
    assert actions[0] == tm.StopTools(m.batch_id)
    assert isinstance(actions[1], tm.AppendMessage) and isinstance(actions[1].message, ToolMessage)
    assert actions[-1] == tm.Finish(ev.TurnCancelled("s", 7, "aborted"))


def test_a_subtree_that_gave_up_fails_the_turn_as_internal() -> None:
    m = machine()
    sampling(m)
    end = m.feed(tm.Shutdown("the actors were restarted"), 1.0)[-1]
    assert end == tm.Finish(ev.TurnFailed("s", 7, "internal", "the actors were restarted"))


def test_the_step_limit_fails_the_turn() -> None:
    m = machine(max_steps=1)
    m.feed(completed(sampling(m), CALL), 1.0)
    actions = m.feed(ToolsFinished(m.batch_id, ()), 2.0)
    end = actions[-1]
    assert isinstance(end, tm.Finish) and isinstance(end.event, ev.TurnFailed)
    assert end.event.kind == tm.TurnFailure.MAX_STEPS


def test_a_failed_action_fails_the_turn_and_nothing_follows() -> None:
    m = machine()
    rid = sampling(m)
    actions = m.feed(tm.ActionFailed("store", "disk full"), 1.0)
    assert actions == [tm.StopSample(rid), tm.Finish(ev.TurnFailed("s", 7, "store", "disk full"))]
    assert m.feed(tm.CancelRequested("user_cancelled"), 2.0) == []


def test_calls_whose_answer_was_never_written_get_no_results() -> None:
    m = machine()
    actions = m.feed(completed(sampling(m), CALL), 1.0)
    unperformed = tuple(actions[actions.index(tm.AppendMessage(AssistantMessage(tool_calls=(CALL,)))) :])
    end = m.feed(tm.ActionFailed("store", "disk full", unperformed), 2.0)
    assert not any(isinstance(a, tm.AppendMessage) for a in end)
    assert end[-1] == tm.Finish(ev.TurnFailed("s", 7, "store", "disk full"))


def test_a_result_that_was_never_written_is_answered_as_an_error_at_the_end() -> None:
    m = machine()
    m.feed(completed(sampling(m), CALL), 1.0)
    outcome = ToolOutcome("c1", "read_file", "contents", False, ToolStatus.OK)
    actions = m.feed(ToolsFinished(m.batch_id, (outcome,)), 2.0)
    end = m.feed(tm.ActionFailed("store", "disk full", tuple(actions)), 3.0)
    [result] = [a for a in end if isinstance(a, tm.AppendMessage)]
    assert isinstance(result.message, ToolMessage) and result.message.result.call_id == "c1"
    assert result.message.result.is_error


def test_a_stop_that_cuts_off_writing_an_answer_leaves_its_calls_without_results() -> None:
    m = machine()
    actions = m.feed(completed(sampling(m), CALL), 1.0)
    end = m.feed(tm.Shutdown("restarted", tuple(actions[-2:])), 2.0)
    assert not any(isinstance(a, tm.AppendMessage) for a in end)
