"""Resuming a turn its process did not live to end: the plan read from its journal, and what the machine
does with it; and each tool result is journaled as it comes, in call order."""

from __future__ import annotations

import pytest

from sampler import (
    AssistantMessage,
    Completed,
    FinishReason,
    ModelRequest,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from shell import events as ev
from shell import turn as tm
from shell._protocol import BuiltRequest
from shell.bridge import RecoveryBridge
from shell.doom_loop import DoomLoopDetector
from shell.messages import UserPrompt
from tool_bridge.idempotency import Idempotency
from tool_bridge.messages import ToolCallEnded, ToolInvocation, ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

PROMPT = UserMessage.of_text("do it")
READ = ToolCall("r1", "read_file", '{"path": "a"}')
WRITE = ToolCall("w1", "write_file", '{"path": "a", "content": "x"}')
SHELL = ToolCall("s1", "shell", '{"command": "echo hi >> log"}')
CLASSES = {
    "read_file": Idempotency.READ_ONLY,
    "write_file": Idempotency.IDEMPOTENT,
    "shell": Idempotency.SIDE_EFFECTING,
}


def classes(name: str) -> Idempotency:
    return CLASSES.get(name, Idempotency.SIDE_EFFECTING)


def plan(*messages: object, started: frozenset[str] = frozenset(), resumes: int = 0, **options: object):
    journal = tm.TurnJournal(3, tuple(messages), started, resumes)  # type: ignore[arg-type]
    settings = {"enabled": True, "max_resumes": 2, "idempotency_of": classes} | options
    return tm.plan_resume(journal, **settings)  # type: ignore[arg-type]


def result(call: ToolCall, content: str = "done") -> ToolMessage:
    return ToolMessage(ToolResult(call.id, content, False))


# -- the plan ----------------------------------------------------------------------------------------


def test_a_turn_with_only_its_prompt_stored_requests_its_first_step() -> None:
    assert plan(PROMPT) == tm.ResumePlan(0, 1)


def test_stored_steps_are_not_requested_again_and_the_next_step_follows_them() -> None:
    step1 = AssistantMessage(tool_calls=(READ,))
    decided = plan(PROMPT, step1, result(READ))
    assert decided == tm.ResumePlan(1, 1)
    assert isinstance(decided, tm.ResumePlan) and decided.open_calls == ()


def test_a_stored_answer_without_tool_calls_completes_the_turn_with_it() -> None:
    decided = plan(
        PROMPT, AssistantMessage(tool_calls=(READ,)), result(READ), AssistantMessage(text="all done")
    )
    assert decided == tm.ResumePlan(2, 1, answer="all done")


def test_calls_without_a_result_rerun_when_read_only_or_idempotent_and_are_interrupted_otherwise() -> None:
    step = AssistantMessage(tool_calls=(READ, SHELL, WRITE))
    decided = plan(PROMPT, step, started=frozenset({"s1", "w1"}))
    assert isinstance(decided, tm.ResumePlan)
    assert decided.steps_done == 1 and decided.open_calls == (READ, SHELL, WRITE)
    assert decided.rerun == {"r1", "w1"} and decided.interrupted == ("s1",)
    assert decided.started == {"s1", "w1"}


def test_a_side_effecting_call_not_journaled_as_started_is_still_not_run_again() -> None:
    # Its tool may have run before its start was stored: only its class can make running it again safe.
    decided = plan(PROMPT, AssistantMessage(tool_calls=(SHELL,)))
    assert isinstance(decided, tm.ResumePlan) and decided.interrupted == ("s1",) and not decided.rerun


def test_calls_with_a_stored_result_are_not_open() -> None:
    decided = plan(PROMPT, AssistantMessage(tool_calls=(READ, SHELL)), result(READ))
    assert isinstance(decided, tm.ResumePlan) and decided.open_calls == (SHELL,)


def test_a_turn_is_resumed_at_most_max_resumes_times() -> None:
    assert isinstance(plan(PROMPT, resumes=1), tm.ResumePlan)
    assert plan(PROMPT, resumes=1).attempt == 2  # type: ignore[union-attr]
    ended = plan(PROMPT, resumes=2)
    assert isinstance(ended, tm.EndInterrupted) and "max_resumes_per_turn = 2" in ended.why
    assert isinstance(plan(PROMPT, max_resumes=0), tm.EndInterrupted)


def test_no_turn_is_resumed_when_resuming_is_off() -> None:
    ended = plan(PROMPT, enabled=False)
    assert isinstance(ended, tm.EndInterrupted) and "resume_interrupted_turns" in ended.why


def test_a_turn_that_was_being_cancelled_or_stored_nothing_ends_interrupted() -> None:
    assert isinstance(plan(PROMPT, AssistantMessage(text="par", interrupted=True)), tm.EndInterrupted)
    assert isinstance(plan(), tm.EndInterrupted)


# -- the machine -------------------------------------------------------------------------------------


def machine() -> tm.TurnMachine:
    return tm.TurnMachine(3, tm.TurnSettings("s"), bridge=RecoveryBridge(), doom_loop=DoomLoopDetector())


def test_a_resumed_turn_says_so_and_requests_the_step_after_the_stored_ones() -> None:
    m = machine()
    actions = m.feed(tm.Resume(tm.ResumePlan(2, 1)), 0.0)
    assert actions == [tm.Emit(ev.TurnResumed("s", 3, 2, 1)), tm.AskBuild()]
    request = ModelRequest("m", (PROMPT,))
    sent = m.feed(tm.RequestBuilt(BuiltRequest(request, 10, 1000)), 0.0)
    assert isinstance(sent[0], tm.SendSample) and m.step == 3
    answer = AssistantMessage(text="fine")
    done = m.feed(Completed(sent[0].request_id, answer, None, FinishReason.STOP, 1), 1.0)
    assert done[-1] == tm.Finish(ev.TurnCompleted("s", 3, "fine", 3))
    assert m.feed(tm.Begin(UserPrompt("again")), 2.0) == []


def test_a_resumed_turn_with_a_stored_answer_completes_without_a_request() -> None:
    m = machine()
    actions = m.feed(tm.Resume(tm.ResumePlan(2, 1, answer="done")), 0.0)
    assert actions == [
        tm.Emit(ev.TurnResumed("s", 3, 2, 1)),
        tm.Finish(ev.TurnCompleted("s", 3, "done", 2)),
    ]


def test_open_calls_rerun_or_get_the_interrupted_error_in_call_order() -> None:
    m = machine()
    resume = tm.ResumePlan(1, 1, open_calls=(READ, SHELL, WRITE), rerun=frozenset({"r1", "w1"}))
    actions = m.feed(tm.Resume(resume), 0.0)
    assert actions[0] == tm.Emit(ev.TurnResumed("s", 3, 1, 1, ("r1", "w1"), ("s1",)))
    # Nothing is journaled yet: the interrupted call waits behind the first call, which runs again.
    assert actions[1:] == [
        tm.StartTools(
            m.batch_id,
            (
                ToolInvocation("r1", "read_file", READ.arguments),
                ToolInvocation("w1", "write_file", WRITE.arguments),
            ),
        )
    ]
    read = ToolOutcome("r1", "read_file", "text", False, ToolStatus.OK)
    journaled = m.feed(ToolCallEnded(m.batch_id, read), 1.0)
    appended = [a.message for a in journaled if isinstance(a, tm.AppendMessage)]
    assert appended == [
        ToolMessage(ToolResult("r1", "text", False)),
        ToolMessage(ToolResult("s1", tm.INTERRUPTED_CALL, True)),
    ]
    written = ToolOutcome("w1", "write_file", "wrote", False, ToolStatus.OK)
    rest = m.feed(ToolsFinished(m.batch_id, (read, written)), 2.0)
    assert [a.message for a in rest if isinstance(a, tm.AppendMessage)] == [
        ToolMessage(ToolResult("w1", "wrote", False))
    ]
    assert rest[-1] == tm.AskBuild() and m.step == 2


def test_a_resume_whose_open_calls_are_all_interrupted_answers_them_and_goes_on() -> None:
    m = machine()
    actions = m.feed(tm.Resume(tm.ResumePlan(1, 1, open_calls=(SHELL,), started=frozenset({"s1"}))), 0.0)
    started = [a for a in actions if isinstance(a, tm.Emit) and isinstance(a.event, ev.ToolCallStarted)]
    assert started == []  # it was reported started before the process ended
    finished = [
        a.event for a in actions if isinstance(a, tm.Emit) and isinstance(a.event, ev.ToolCallFinished)
    ]
    assert [(f.call_id, f.is_error, f.status) for f in finished] == [("s1", True, "aborted")]
    assert actions[-1] == tm.AskBuild()


# -- results as they come ----------------------------------------------------------------------------


def test_each_result_is_appended_once_it_and_the_calls_before_it_have_an_outcome() -> None:
    m = machine()
    m.feed(tm.Begin(UserPrompt("do it")), 0.0)
    sent = m.feed(tm.RequestBuilt(BuiltRequest(ModelRequest("m", (PROMPT,)), 10, 1000)), 0.0)
    assert isinstance(sent[0], tm.SendSample)
    m.feed(
        Completed(sent[0].request_id, AssistantMessage(tool_calls=(READ, WRITE)), None, FinishReason.STOP, 1),
        1.0,
    )
    written = ToolOutcome("w1", "write_file", "wrote", False, ToolStatus.OK)
    assert m.feed(ToolCallEnded(m.batch_id, written), 2.0) == []  # waits for r1, which comes first
    read = ToolOutcome("r1", "read_file", "text", False, ToolStatus.OK)
    both = m.feed(ToolCallEnded(m.batch_id, read), 3.0)
    assert [a.message.result.call_id for a in both if isinstance(a, tm.AppendMessage)] == ["r1", "w1"]  # type: ignore[union-attr]
    assert m.feed(ToolCallEnded(m.batch_id, read), 3.5) == []  # told twice: journaled once
    rest = m.feed(ToolsFinished(m.batch_id, (read, written)), 4.0)
    assert not [a for a in rest if isinstance(a, tm.AppendMessage)] and rest[-1] == tm.AskBuild()


@pytest.mark.parametrize("stale", ["other-batch", "unknown-call"])
def test_an_outcome_of_another_batch_or_call_is_ignored(stale: str) -> None:
    m = machine()
    m.feed(tm.Begin(UserPrompt("do it")), 0.0)
    sent = m.feed(tm.RequestBuilt(BuiltRequest(ModelRequest("m", (PROMPT,)), 10, 1000)), 0.0)
    assert isinstance(sent[0], tm.SendSample)
    m.feed(
        Completed(sent[0].request_id, AssistantMessage(tool_calls=(READ,)), None, FinishReason.STOP, 1), 1.0
    )
    batch = "nope" if stale == "other-batch" else m.batch_id
    call_id = "r1" if stale == "other-batch" else "zz"
    assert (
        m.feed(ToolCallEnded(batch, ToolOutcome(call_id, "read_file", "x", False, ToolStatus.OK)), 2.0) == []
    )


def test_a_turn_whose_start_was_never_stored_is_announced_before_it_goes_on() -> None:
    journal = tm.TurnJournal(3, (PROMPT,), announced=False)
    decided = tm.plan_resume(journal, enabled=True, max_resumes=2, idempotency_of=classes)
    assert decided == tm.ResumePlan(0, 1, announce="do it")
    actions = machine().feed(tm.Resume(decided), 0.0)
    assert actions == [
        tm.Emit(ev.TurnStarted("s", 3, "do it")),
        tm.Emit(ev.TurnResumed("s", 3, 0, 1)),
        tm.AskBuild(),
    ]
