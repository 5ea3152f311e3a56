"""A session heals instead of being poisoned: whole turns against a strict embedded provider, a real store
and real actors. Also: 429s that no retry can fix are decided on the first request."""

from __future__ import annotations

from pathlib import Path

import msgspec

from sampler import (
    AssistantMessage,
    ImagePart,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from sampler.fake import Conversation, FakeProvider, Fault, FaultPlan, FinalAnswer, Script, Step
from sampler.fake._strict import history_problem
from sampler.fake.script import is_summary_request
from sampler.providers import get_adapter
from shell import events as ev
from shell.bridge import QUOTA_USED_UP
from shell.session._repair import NO_RESULT
from tests.shell._harness import Harness, of


def seed(harness: Harness, *messages: object, turn: int = 1, session_id: str = "s1") -> None:
    """Store an earlier, finished turn holding ``messages``, as a crashed or older program left it."""
    store = harness.store
    workspace = harness.tmp_path / f"ws-{session_id}"
    workspace.mkdir(exist_ok=True)
    store.create_session(session_id, workspace=str(workspace), model="fake-model")
    store.begin_turn(session_id, turn)
    for message in messages:
        store.append_message(session_id, turn, message)  # type: ignore[arg-type]
    store.end_turn(session_id)


def test_a_history_with_an_unpaired_tool_call_is_repaired_and_the_next_turn_completes(tmp_path: Path) -> None:
    call = ToolCall("call_lost", "read_file", '{"path": "notes.txt"}')
    with FakeProvider(Script.text("healed"), strict_history=True) as provider:
        harness = Harness(tmp_path, provider)
        seed(harness, UserMessage.of_text("read my notes"), AssistantMessage("reading", (call,)))
        session = harness.open()
        events = harness.turn(session, "what did they say?")
        stats = provider.stats
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert events[-1].text == "healed"
    assert stats.requests == 1 and not stats.rejections, "the first request was already valid"
    projection = harness.stored_history()
    assert projection[:3] == [
        UserMessage.of_text("read my notes"),
        AssistantMessage("reading", (call,)),
        ToolMessage(ToolResult("call_lost", NO_RESULT, is_error=True)),
    ]
    everything = harness.stored_history(include_replaced=True)
    assert everything[:2] == projection[:2], "the originals stay stored"
    assert sum(isinstance(m, ToolMessage) and m.result.call_id == "call_lost" for m in everything) == 1


def test_a_history_with_an_empty_image_is_repaired_and_the_next_turn_completes(tmp_path: Path) -> None:
    empty = ImagePart("image/png", data="")
    with FakeProvider(Script.text("no image needed"), strict_history=True) as provider:
        harness = Harness(tmp_path, provider)
        seed(harness, UserMessage((TextPart("look at this"), empty)), AssistantMessage("I cannot see it"))
        session = harness.open()
        events = harness.turn(session, "then describe the weather")
        stats = provider.stats
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert not stats.rejections
    projection = harness.stored_history()
    assert projection[0] == UserMessage(
        (TextPart("look at this"), TextPart("[image/png omitted: it was empty]"))
    )
    assert harness.stored_history(include_replaced=True)[0] == UserMessage((TextPart("look at this"), empty))


def test_without_repair_the_strict_provider_would_have_refused_that_history() -> None:
    # The control for the two tests above: the provider really refuses what the store held.
    call = ToolCall("call_lost", "read_file", "{}")
    empty = UserMessage((TextPart("look"), ImagePart("image/png", data="")))
    for messages in ((UserMessage.of_text("a"), AssistantMessage("", (call,))), (empty,)):
        request = ModelRequest(model="m", messages=messages)
        for wire in ("openai", "anthropic"):
            body = msgspec.json.decode(get_adapter(wire).encode_request(request))  # type: ignore[arg-type]
            assert history_problem(wire, body, True, False) is not None, (wire, messages)


def test_successive_prompts_are_merged_for_good_once_the_provider_refused_them(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([Fault.budget_exhausted()])
    with FakeProvider(Script.text("fine"), faults=faults, alternate_roles=True) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        failed = harness.turn(session, "first prompt")
        second = harness.turn(session, "second prompt")
        after_second = provider.stats
        third = harness.turn(session, "third prompt")
        after_third = provider.stats
        harness.close()
    assert isinstance(failed[-1], ev.TurnFailed) and failed[-1].kind == "quota_exhausted"
    assert isinstance(second[-1], ev.TurnCompleted), second[-1]
    assert [f.projection for f in of(second, ev.ProjectionFallback)] == ["strict_structure"]
    assert after_second.rejections.get("bad_request") == 1
    assert isinstance(third[-1], ev.TurnCompleted), third[-1]
    assert not of(third, ev.ProjectionFallback), "the third turn starts from the merged history"
    assert after_third.rejections.get("bad_request") == 1
    projection = harness.stored_history()
    assert projection[0] == UserMessage((TextPart("first prompt"), TextPart("second prompt")))
    everything = harness.stored_history(include_replaced=True)
    assert (
        UserMessage.of_text("first prompt") in everything
        and UserMessage.of_text("second prompt") in everything
    )


def test_a_structure_refused_after_every_repair_fails_the_turn_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    faults = FaultPlan.scripted([Fault.budget_exhausted(), *[Fault.structure_rejected()] * 2])
    with FakeProvider(Script.text("fine"), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        harness.turn(session, "first prompt")
        refused = harness.turn(session, "second prompt")
        usable = harness.turn(session, "third prompt")
        stats = provider.stats
        harness.close()
    failed = refused[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "request_structure", failed
    assert "history had been repaired" in failed.message
    assert "also rejected when re-sent as: strict_structure" in failed.message
    assert "tool_use" in failed.message or "tool_call" in failed.message
    assert stats.faults.get("structure_rejected") == 2
    assert isinstance(usable[-1], ev.TurnCompleted), usable[-1]


def summarising(conversation: Conversation) -> Step:
    if is_summary_request(conversation):
        return FinalAnswer("summary: the user sent a long text")
    return FinalAnswer("ok")


def test_a_request_larger_than_the_per_minute_limit_is_compacted_not_retried(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([None, Fault.request_too_large_tpm()])
    script = Script(summarising, name="summarising", summarizes=True)
    with FakeProvider(script, faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        assert isinstance(harness.turn(session, "first " + "x" * 4_000)[-1], ev.TurnCompleted)
        events = harness.turn(session, "second " + "y" * 400)
        stats = provider.stats
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert not of(events, ev.Retrying)
    assert [s.reason for s in of(events, ev.CompactionStarted)] == ["overflow"]
    assert stats.faults == {"request_too_large_tpm": 1}
    assert stats.requests == 4  # turn 1, the refused request, the summary, the resubmitted request


def test_a_used_up_budget_is_sent_once_and_says_so(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([Fault.budget_exhausted()] * 5)
    with FakeProvider(Script.text("never"), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "hello")
        stats = provider.stats
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "quota_exhausted", failed
    assert failed.message.startswith(QUOTA_USED_UP)
    assert "Budget has been exceeded" in failed.message
    assert stats.requests == 1 and not of(events, ev.Retrying)
