"""A turn's trace: one invoke_agent span, a chat child per model call, an execute_tool child per tool call,
the compaction with its summary calls, retries as events, and one trace whatever crashed on the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from actors import ChaosPolicy
from sampler import Completed, Sample, StepText
from sampler.fake import Conversation, FakeProvider, FaultPlan, FinalAnswer, Script, Step, ToolStep
from sampler.fake.faults import Fault
from sampler.fake.script import is_summary_request
from shell import events as ev
from shell.config import TelemetrySettings
from shell.session import SessionChaos
from tests.shell._harness import Harness
from tests.shell.telemetry.conftest import Recorded, record

WRITE = ("write_file", {"path": "notes.txt", "content": "hello"})
SECRET = "sk-proj-Tq8Zr3Lm5Xv7Nb2Kc4Jd6Hf9Gs1Aa0Ww"


def tool_then_answer(conversation: Conversation) -> Step:
    """A summary for a compaction; a tool call for a prompt that asks for one, then the answer."""
    if is_summary_request(conversation):
        return FinalAnswer("summary of what came before")
    if conversation.last_user_text.startswith("use the tool") and conversation.tool_rounds == 0:
        return ToolStep([WRITE], text="Writing. ")
    return FinalAnswer("All done.")


SCRIPT = Script(tool_then_answer, name="tool_then_answer", summarizes=True)


def run_turn_with_retry_tool_and_compaction(tmp_path: Path, recorded: Recorded) -> tuple[list, tuple]:
    # Requests: turn 1; turn 2: the summary, the step (a 500, then again), the step after the tool.
    faults = FaultPlan.scripted([None, None, Fault.server_error()])
    with FakeProvider(SCRIPT, faults=faults) as provider:
        harness = Harness(tmp_path, provider, context_window=1_500, telemetry=recorded.telemetry)
        session = harness.open()
        first = harness.turn(session, "first " + "x" * 2_500)
        before = provider.stats
        events = harness.turn(session, "use the tool " + "y" * 2_500)
        after = provider.stats
        harness.close()
    assert isinstance(first[-1], ev.TurnCompleted)
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    reported = (
        after.input_tokens - before.input_tokens,
        after.cached_tokens - before.cached_tokens,
        after.output_tokens - before.output_tokens,
    )
    return events, reported


def test_a_turn_with_a_retry_a_tool_call_and_a_compaction_gives_one_span_tree(
    tmp_path: Path, recorded: Recorded
) -> None:
    events, _ = run_turn_with_retry_tool_and_compaction(tmp_path, recorded)
    turns = recorded.named("invoke_agent")
    assert len(turns) == 2
    turn = next(span for span in turns if span.attributes["turnkeep.turn"] == 2)
    trace_id = turn.context.trace_id
    in_trace = [span for span in recorded.spans() if span.context.trace_id == trace_id]
    by_name = {span.name: span for span in in_trace}
    assert set(by_name) == {"invoke_agent", "compaction", "chat fake-model", "execute_tool write_file"}
    chats = [span for span in in_trace if span.name == "chat fake-model"]
    assert len(chats) == 3  # the summary and the two steps; the retry is inside its call's span
    compaction = by_name["compaction"]
    summary = [span for span in chats if span.attributes["turnkeep.compaction"]]
    assert [span.parent.span_id for span in summary] == [compaction.context.span_id]
    steps = [span for span in chats if not span.attributes["turnkeep.compaction"]]
    assert all(span.parent.span_id == turn.context.span_id for span in steps)
    assert compaction.parent.span_id == turn.context.span_id
    tool = by_name["execute_tool write_file"]
    assert tool.parent.span_id == turn.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "write_file"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.status.status_code is StatusCode.UNSET

    retried = next(span for span in steps if any(e.name == "retry" for e in span.events))
    (retry,) = [e for e in retried.events if e.name == "retry"]
    assert (retry.attributes["error.type"], retry.attributes["status"]) == (retry_kind(), 500)
    assert retried.attributes["turnkeep.attempts"] == 2
    assert retried.kind is SpanKind.CLIENT
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.response.model"] == "fake-model"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.status.status_code is StatusCode.UNSET
    in_order = sorted(steps, key=lambda span: span.start_time or 0)
    reasons = [span.attributes["gen_ai.response.finish_reasons"] for span in in_order]
    assert reasons == [("tool_calls",), ("stop",)]
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.conversation.id"] == "s1"
    assert turn.attributes["turnkeep.outcome"] == "completed"
    end = events[-1]
    assert turn.attributes["gen_ai.usage.input_tokens"] == end.usage.total.input_tokens
    assert recorded.telemetry.recorder.open_turns() == 0


def retry_kind() -> str:
    """The error kind a plain 500 is classified as."""
    from sampler.errors import classify_http_error

    return str(classify_http_error(500, b'{"error": {"message": "boom"}}', {}).kind)


def test_the_turns_usage_adds_up_to_what_the_embedded_provider_reported(
    tmp_path: Path, recorded: Recorded
) -> None:
    events, (inputs, cached, outputs) = run_turn_with_retry_tool_and_compaction(tmp_path, recorded)
    usage = events[-1].usage
    assert usage.compaction.reported == 1 and usage.steps.reported == 2
    total = usage.total
    assert (total.input_tokens, total.cached_tokens, total.output_tokens) == (inputs, cached, outputs)
    first = next(span for span in recorded.named("invoke_agent") if span.attributes["turnkeep.turn"] == 1)
    both_turns = total.input_tokens + first.attributes["gen_ai.usage.input_tokens"]
    assert recorded.total("turnkeep.tokens", direction="input", model="fake-model") == both_turns
    assert recorded.total("turnkeep.tokens", direction="cached_input") == cached


def test_the_metrics_count_the_turn_its_calls_retry_tool_and_compaction(
    tmp_path: Path, recorded: Recorded
) -> None:
    run_turn_with_retry_tool_and_compaction(tmp_path, recorded)
    assert recorded.total("turnkeep.turns", outcome="completed") == 2
    assert recorded.total("turnkeep.model_calls", outcome="completed") == 4
    assert recorded.total("turnkeep.retries") == 1
    assert recorded.total("turnkeep.tool_calls", tool="write_file", outcome="ok") == 1
    assert recorded.total("turnkeep.compactions", ok="true") == 1
    durations = recorded.points("turnkeep.turn.duration")
    assert sum(point.count for _, point in durations) == 2
    latencies = recorded.points("gen_ai.client.operation.duration")
    assert sum(point.count for _, point in latencies) == 4
    first_tokens = recorded.points("turnkeep.model_call.time_to_first_token")
    assert sum(point.count for _, point in first_tokens) >= 1


def test_a_sampler_crash_mid_turn_ends_the_lost_call_in_error_and_keeps_one_trace(tmp_path: Path) -> None:
    recorded = record()
    chaos = SessionChaos(sampler=ChaosPolicy(seed=2, crash_probability=0.3, crash_on=(Sample,)))
    script = Script.task(
        [
            ToolStep([WRITE], text="Writing. "),
            ToolStep([("read_file", {"path": "notes.txt"})]),
            FinalAnswer("All done."),
        ]
    )
    with FakeProvider(script) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos, telemetry=recorded.telemetry)
        session = harness.open()
        events = harness.turn(session, "write notes")
        crashes = harness.system.metrics().get("chaos_crashes", 0)
        harness.close()
    recorded.telemetry.shutdown()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert crashes >= 1
    (turn,) = recorded.named("invoke_agent")
    assert {span.context.trace_id for span in recorded.spans()} == {turn.context.trace_id}
    chats = recorded.named("chat ")
    lost = [span for span in chats if span.status.status_code is StatusCode.ERROR]
    assert len(lost) >= 1
    assert all(span.attributes["error.type"] == "step_lost" for span in lost)
    assert len(chats) - len(lost) == 3  # the three steps that were answered
    assert any(event.name == "sibling_down" for event in turn.events)
    assert recorded.total("turnkeep.actor.restarts", actor_kind="sampler") >= 1
    assert recorded.total("turnkeep.actor.crashes", actor_kind="sampler") >= 1


def test_a_failed_model_call_carries_its_failure_kind_as_error_type(
    tmp_path: Path, recorded: Recorded
) -> None:
    faults = FaultPlan.scripted([Fault.insufficient_quota()])
    with FakeProvider(Script.echo(), faults=faults) as provider:
        harness = Harness(tmp_path, provider, telemetry=recorded.telemetry)
        session = harness.open()
        events = harness.turn(session, "hello")
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed)
    (chat,) = recorded.named("chat ")
    assert chat.attributes["error.type"] == failed.kind
    assert chat.status.status_code is StatusCode.ERROR
    (turn,) = recorded.named("invoke_agent")
    assert turn.attributes["error.type"] == failed.kind
    assert recorded.total("turnkeep.turns", outcome="failed", kind=failed.kind) == 1


def test_content_stays_out_of_spans_unless_asked_and_secrets_never_go_in(tmp_path: Path) -> None:
    for record_content in (False, True):
        recorded = record(TelemetrySettings(enabled=True, record_content=record_content))
        with FakeProvider(Script.echo()) as provider:
            harness = Harness(tmp_path / str(record_content), provider, telemetry=recorded.telemetry)
            session = harness.open()
            harness.turn(session, f"my key is {SECRET} keep it")
            harness.close()
        recorded.telemetry.shutdown()
        texts = [
            str(value)
            for span in recorded.spans()
            for value in [*span.attributes.values(), *(v for e in span.events for v in e.attributes.values())]
        ]
        assert not any(SECRET in text for text in texts)
        assert any("keep it" in text for text in texts) is record_content


def test_spans_still_open_when_telemetry_stops_end_with_an_error_status(recorded: Recorded) -> None:
    from sampler import ModelRequest, UserMessage
    from shell import turn as tm
    from shell.messages import UserPrompt

    request = ModelRequest("m", (UserMessage.of_text("hi"),))
    recorder = recorded.telemetry.recorder
    recorder.observe("s", 1, tm.Begin(UserPrompt("go")), [tm.SendSample("s:1:1", "1", request)])
    assert recorder.open_turns() == 1
    recorded.telemetry.shutdown()
    spans = {span.name: span for span in recorded.spans()}
    assert spans["invoke_agent"].status.status_code is StatusCode.ERROR
    assert spans["chat m"].status.status_code is StatusCode.ERROR
    assert spans["chat m"].attributes["error.type"] == "abandoned"


def test_a_turn_prepared_before_its_start_is_stored_has_one_span_whose_context_was_given_out(
    recorded: Recorded,
) -> None:
    from shell import turn as tm
    from shell.messages import UserPrompt

    recorder = recorded.telemetry.recorder
    begin = tm.Begin(UserPrompt("go"))
    given = recorder.prepare("s", 1, begin)
    assert given is not None and recorder.prepare("s", 1, begin) == given
    assert recorder.traceparent("s", 1) == given
    recorder.observe("s", 1, begin, [tm.Publish(ev.TurnStarted("s", 1, "go"))])
    recorder.observe("s", 1, begin, [tm.Finish(ev.TurnCompleted("s", 1, "done", 1))])
    assert recorder.open_turns() == 0
    recorded.telemetry.shutdown()
    (turn,) = recorded.named("invoke_agent")
    assert turn.context is not None
    assert given.startswith(f"00-{turn.context.trace_id:032x}-{turn.context.span_id:016x}-")
    assert turn.status.status_code is not StatusCode.ERROR


@pytest.mark.parametrize("seed", [5, 9])
def test_a_session_actor_restarted_mid_turn_continues_the_same_trace(tmp_path: Path, seed: int) -> None:
    recorded = record()
    chaos = SessionChaos(session=ChaosPolicy(seed=seed, crash_probability=0.5, crash_on=(Completed,)))
    with FakeProvider(SCRIPT) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos, telemetry=recorded.telemetry)
        session = harness.open()
        events = harness.turn(session, "use the tool now")
        crashes = harness.system.metrics().get("chaos_crashes", 0)
        harness.close()
    recorded.telemetry.shutdown()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert crashes >= 1
    (turn,) = recorded.named("invoke_agent")
    assert {span.context.trace_id for span in recorded.spans()} == {turn.context.trace_id}
    assert turn.status.status_code is StatusCode.UNSET
    assert recorded.named("execute_tool write_file")
    assert recorded.total("turnkeep.actor.restarts", actor_kind="session") >= 1


def test_a_model_call_measures_its_first_token_once_however_many_deltas_follow(
    tmp_path: Path, recorded: Recorded
) -> None:
    told: list[tuple[object, list[Any]]] = []
    capture = record()
    observe = capture.telemetry.observe

    def spy(session_id: str, number: int, message: object, actions: list[Any]) -> None:
        told.append((message, list(actions)))
        observe(session_id, number, message, actions)

    capture.telemetry.observe = spy  # type: ignore[method-assign]
    with FakeProvider(Script.echo()) as provider:
        harness = Harness(tmp_path, provider, telemetry=capture.telemetry)
        events = harness.turn(harness.open(), "say something")
        harness.close()
    capture.telemetry.shutdown()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    first_delta = next(index for index, (message, _) in enumerate(told) if isinstance(message, StepText))
    streamed = told[: first_delta + 1] + [told[first_delta]] * 20 + told[first_delta + 1 :]
    for number in (1, 2):  # the same request ids again: what a finished call left must not hide them
        for message, actions in streamed:
            recorded.telemetry.observe("s1", number, message, actions)
    first_tokens = recorded.points("turnkeep.model_call.time_to_first_token")
    assert sum(point.count for _, point in first_tokens) == 2
    chats = recorded.named("chat ")
    assert len(chats) == 2 and all(span.end_time is not None for span in chats)
    assert recorded.telemetry.recorder.open_turns() == 0
