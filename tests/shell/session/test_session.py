"""Whole turns through real actors against the embedded provider: every branch converges, nothing is lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ChaosPolicy
from sampler import FILTERED_MESSAGE, AssistantMessage, Completed, ToolMessage, UserMessage
from sampler.fake import FakeProvider, Fault, FaultPlan, FinalAnswer, Script, TokenExpiry, ToolStep
from shell import events as ev
from shell.credentials import OAuthCredential
from shell.messages import Cancel, SetModel
from shell.session import SessionChaos
from shell.turn import MAX_LOST_STEPS
from tests._events import finished_before_started, without_usage
from tests.actors.conftest import system_threads
from tests.shell._harness import Harness, of
from tool_bridge import PermissionPolicy, PermissionRule

WRITE_THEN_ANSWER = Script.task(
    [
        ToolStep([("write_file", {"path": "notes.txt", "content": "hello"})], text="Writing. "),
        ToolStep([("read_file", {"path": "notes.txt"})]),
        FinalAnswer("All done."),
    ]
)


@pytest.fixture
def leak_check() -> Iterator[None]:
    before = system_threads()
    yield
    assert system_threads() - before == set()


def talk_until_text(harness: Harness, session: Any) -> list[Any]:
    """Prompt ``session`` and return its events up to the first ``TextDelta``: its turn is streaming."""
    harness.prompt(session, "talk")
    inbox = harness.inboxes["s1"]
    seen: list[Any] = []
    while not of(seen, ev.TextDelta):
        seen.append(inbox.get(timeout=10))
    return seen


def stored_types(harness: Harness) -> list[str]:
    return [kind for kind, _ in harness.stored_events()]


def test_a_turn_with_tools_completes_and_everything_is_stored(tmp_path: Path, leak_check: None) -> None:
    with FakeProvider(WRITE_THEN_ANSWER) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "please write notes")
        report = harness.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    assert events[-1].text == "All done."
    assert events[-1].steps == 3
    assert (tmp_path / "ws-s1" / "notes.txt").read_text() == "hello"
    finished = of(events, ev.ToolCallFinished)
    assert [(f.tool, f.is_error) for f in finished] == [("write_file", False), ("read_file", False)]
    history = harness.stored_history()
    kinds = ["UserMessage"] + ["AssistantMessage", "ToolMessage"] * 2 + ["AssistantMessage"]
    assert [type(m).__name__ for m in history] == kinds
    assert stored_types(harness)[0] == "TurnStarted"
    assert stored_types(harness)[-1] == "TurnCompleted"
    assert "TextDelta" not in stored_types(harness)
    assert report.clean


def test_a_turn_is_begun_with_its_prompt_and_its_announcement_in_one_write(tmp_path: Path) -> None:
    with FakeProvider(Script.task([FinalAnswer("Hi.")])) as provider:
        harness = Harness(tmp_path, provider)
        writes: list[tuple[list[str], list[str], bool]] = []
        write_turn = harness.store.write_turn

        def recording(session_id: str, turn: int, **kwargs: Any) -> Any:
            messages, events = kwargs.get("messages", ()), kwargs.get("events", ())
            names = ([type(m).__name__ for m in messages], [type(e).__name__ for e in events])
            writes.append((*names, kwargs.get("begins", False)))
            return write_turn(session_id, turn, **kwargs)

        harness.store.write_turn = recording  # type: ignore[method-assign]
        session = harness.open()
        events = harness.turn(session, "hello")
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    assert of(events, ev.TurnStarted) == [ev.TurnStarted("s1", 1, "hello")]
    assert writes[0] == (["UserMessage"], ["TurnStarted"], True)
    assert len(writes) == 2  # the start, and the answer with the turn's end
    assert stored_types(harness) == ["TurnStarted", "TurnCompleted"]


def test_every_tool_call_reported_finished_was_reported_started_whatever_ended_it(
    tmp_path: Path, leak_check: None
) -> None:
    calls = ToolStep(
        [
            ("write_file", {"path": "refused.txt", "content": "no"}),
            ("no_such_tool", {}),
            ("read_file", {"not_a_path": 1}),
            ("write_file", {"path": "refused.txt", "content": "no"}),
            ("read_file", {"path": "notes.txt"}),
        ]
    )
    refusing = PermissionPolicy([PermissionRule("write_file", "deny"), PermissionRule("*", "allow")])
    with FakeProvider(Script.task([calls, FinalAnswer("Tried.")])) as provider:
        harness = Harness(tmp_path, provider, policy=refusing)
        session = harness.open()
        (tmp_path / "ws-s1" / "notes.txt").write_text("hello")
        events = harness.turn(session, "try everything")
        harness.close()
    finished = of(events, ev.ToolCallFinished)
    assert [(f.tool, f.is_error) for f in finished] == [
        ("write_file", True),
        ("no_such_tool", True),
        ("read_file", True),
        ("write_file", True),
        ("read_file", False),
    ]
    assert finished_before_started(events) == []
    started = [e.call_id for e in of(events, ev.ToolCallStarted)]
    assert sorted(started) == sorted(f.call_id for f in finished), "each call is started once"


def test_an_expired_token_is_refreshed_and_the_turn_completes(tmp_path: Path, leak_check: None) -> None:
    expiry = TokenExpiry(requests_per_token=2)
    with FakeProvider(WRITE_THEN_ANSWER, token_expiry=expiry) as provider:
        credential = OAuthCredential(provider.token_url, expiry.refresh_token, access_token="first-token")
        harness = Harness(tmp_path, provider, credentials=credential)
        session = harness.open()
        events = harness.turn(session, "write notes")
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert len(of(events, ev.AuthRefreshed)) >= 1
    assert "AuthRefreshed" in stored_types(harness)
    assert credential.current() != "first-token"


def test_an_auth_failure_that_a_refresh_cannot_fix_fails_with_advice(
    tmp_path: Path, leak_check: None
) -> None:
    with FakeProvider(Script.text("never"), token_expiry=TokenExpiry(requests_per_token=1)) as provider:
        credential = OAuthCredential(provider.token_url, "not-the-refresh-token", access_token="t")
        harness = Harness(tmp_path, provider, credentials=credential)
        session = harness.open()
        harness.turn(session, "warm up the token")  # uses the token's one request
        events = harness.turn(session, "now it is expired")
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed)
    assert failed.kind == "auth"
    assert "Log in again or fix the API key" in failed.message


def test_a_filtered_answer_fails_the_turn_as_provider_filtered(tmp_path: Path, leak_check: None) -> None:
    with FakeProvider(
        Script.text("bad words"), faults=FaultPlan.scripted([Fault.content_filter()])
    ) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "say something")
        again = harness.turn(session, "try again")
        harness.close()
    end = events[-1]
    assert isinstance(end, ev.TurnFailed)
    assert (end.kind, end.message) == ("provider_filtered", FILTERED_MESSAGE)
    assert end.usage.steps.reported == 1  # the withheld answer is paid for all the same
    assert isinstance(again[-1], ev.TurnCompleted)


def test_transient_faults_are_absorbed_and_recorded(tmp_path: Path, leak_check: None) -> None:
    faults = FaultPlan.scripted(
        [Fault.rate_limit(retry_after_ms=10), Fault.reset(after_chunks=2), Fault.empty()]
    )
    with FakeProvider(Script.text("fine"), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "hello")
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    assert [r.kind for r in of(events, ev.Retrying)] == ["rate_limit", "connection", "empty_response"]
    assert stored_types(harness).count("Retrying") == 3


def test_exceeding_max_steps_fails_with_how_to_raise_it(tmp_path: Path, leak_check: None) -> None:
    loop = Script.task([ToolStep([("list_dir", {"path": "."})])] * 10)
    with FakeProvider(loop) as provider:
        harness = Harness(tmp_path, provider, max_steps=3)
        session = harness.open()
        events = harness.turn(session, "loop")
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "max_steps"
    assert "loop_control.max_steps_per_turn" in failed.message


def test_a_doom_loop_is_warned_then_failed_and_the_session_stays_usable(
    tmp_path: Path, leak_check: None
) -> None:
    same = ToolStep([("read_file", {"path": "missing.txt"})])
    scripts = {"loop": Script.task([same] * 20), "ok": Script.text("fine now")}
    with FakeProvider(Script.echo(), scripts=scripts) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "[[script:loop]] read it")
        after = harness.turn(session, "[[script:ok]] something else")
        harness.close()
    assert len(of(events, ev.DoomLoopWarning)) == 1
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "doom_loop"
    assert isinstance(after[-1], ev.TurnCompleted)
    assert "DoomLoopWarning" in stored_types(harness)


def test_cancel_mid_stream_salvages_the_partial_answer_and_the_next_turn_works(
    tmp_path: Path, leak_check: None
) -> None:
    faults = FaultPlan.scripted([Fault.stall(after_chunks=4, hang=True)])
    with FakeProvider(Script.text("A fairly long answer that stalls."), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        seen = talk_until_text(harness, session)
        assert session.ask(Cancel())
        events = seen + harness.until_end()
        after = harness.turn(session, "again")
        harness.close()
    assert without_usage(events[-1]) == ev.TurnCancelled("s1", 1, "user_cancelled")
    salvaged = [m for m in harness.stored_history() if isinstance(m, AssistantMessage) and m.interrupted]
    assert len(salvaged) == 1 and "A fairly long answer".startswith(salvaged[0].text)
    assert isinstance(after[-1], ev.TurnCompleted)


def test_a_model_switch_applies_from_the_next_turn_and_the_turn_in_flight_keeps_its_model(
    tmp_path: Path, leak_check: None
) -> None:
    faults = FaultPlan.scripted([Fault.stall(after_chunks=4, hang=True)])
    with FakeProvider(Script.text("A fairly long answer that stalls."), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        seen = talk_until_text(harness, session)
        assert session.ask(SetModel("fake-large")) == "fake-large"
        assert session.ask(Cancel())
        first = seen + harness.until_end()
        second = harness.turn(session, "again")
        with pytest.raises(ValueError, match="non-empty"):
            session.ask(SetModel(""))
        third = harness.turn(session, "once more")
        harness.close()
    assert [events[-1].usage.model for events in (first, second, third)] == [
        "fake-model",
        "fake-large",
        "fake-large",
    ]
    assert isinstance(second[-1], ev.TurnCompleted) and isinstance(third[-1], ev.TurnCompleted)


def test_a_cancel_right_after_the_prompt_ends_every_turn_whatever_step_it_reaches(
    tmp_path: Path, leak_check: None
) -> None:
    # The cancel meets the first request anywhere: queued, connecting, streaming or already answered.
    with FakeProvider(Script.echo()) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        ends = []
        for n in range(30):
            harness.prompt(session, f"race {n}")
            session.ask(Cancel())
            ends.append(harness.until_end(timeout=10)[-1])
        harness.close()
    assert {type(end) for end in ends} <= {ev.TurnCancelled, ev.TurnCompleted}
    assert [end.turn for end in ends] == list(range(1, 31))


def test_cancel_during_tools_aborts_them_and_keeps_the_history_paired(
    tmp_path: Path, leak_check: None
) -> None:
    slow = Script.task([ToolStep([("shell", {"command": "sleep 600"})]), FinalAnswer("done")])
    with FakeProvider(slow) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        harness.prompt(session, "run it")
        inbox = harness.inboxes["s1"]
        seen: list[Any] = []
        while not of(seen, ev.ToolCallStarted):
            seen.append(inbox.get(timeout=10))
        session.ask(Cancel())
        events = seen + harness.until_end()
        harness.close()
    assert without_usage(events[-1]) == ev.TurnCancelled("s1", 1, "user_cancelled")
    finished = of(events, ev.ToolCallFinished)
    assert len(finished) == 1 and finished[0].is_error and finished[0].status == "aborted"
    history = harness.stored_history()
    assert isinstance(history[-1], ToolMessage) and history[-1].result.is_error


def test_a_chat_state_crash_mid_turn_restarts_it_with_the_history_intact(
    tmp_path: Path, leak_check: None
) -> None:
    from shell._protocol import Append, AppendAll, FinishTurn

    chaos = SessionChaos(
        chat_state=ChaosPolicy(seed=3, crash_probability=0.3, crash_on=(Append, AppendAll, FinishTurn))
    )
    with FakeProvider(WRITE_THEN_ANSWER) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos)
        session = harness.open()
        events = harness.turn(session, "write notes")
        crashes = harness.system.metrics().get("chaos_crashes", 0)
        harness.close()
    assert crashes >= 1
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    history = harness.stored_history()
    assert len(history) == 6
    assert isinstance(history[0], UserMessage)


def test_a_process_restart_resumes_from_the_store(tmp_path: Path, leak_check: None) -> None:
    with FakeProvider(Script.echo()) as provider:
        first = Harness(tmp_path, provider)
        session = first.open()
        first.turn(session, "remember the word kiwi")
        # A turn in flight when the process died: the store still says in_turn.
        first.store.begin_turn("s1", 2)
        first.close()
        second = Harness(tmp_path, provider)
        resumed = second.open()
        events = second.turn(resumed, "what was the word?")
        second.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    assert events[-1].turn == 3
    stored = second.stored_events()
    interrupted = {"type": "TurnCancelled", "session": "s1", "turn": 2, "reason": "interrupted"}
    assert any(
        kind == "TurnCancelled" and {key: body[key] for key in interrupted} == interrupted
        for kind, body in stored
    )
    texts = [m.parts[0].text for m in second.stored_history() if isinstance(m, UserMessage)]
    assert texts == ["remember the word kiwi", "what was the word?"]


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_a_sampler_crash_on_the_step_request_is_ridden_out(
    tmp_path: Path, leak_check: None, seed: int
) -> None:
    from sampler import Sample

    chaos = SessionChaos(sampler=ChaosPolicy(seed=seed, crash_probability=0.3, crash_on=(Sample,)))
    with FakeProvider(WRITE_THEN_ANSWER) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos)
        session = harness.open()
        events = harness.turn(session, "write notes")
        crashes = harness.system.metrics().get("chaos_crashes", 0)
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    assert len(harness.stored_history()) == 6
    assert crashes >= 1


def test_a_tool_actor_crash_is_an_error_result_and_the_turn_goes_on(tmp_path: Path, leak_check: None) -> None:
    chaos = SessionChaos(tools=ChaosPolicy(seed=1, crash_probability=1.0))
    with FakeProvider(WRITE_THEN_ANSWER) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos)
        session = harness.open()
        events = harness.turn(session, "write notes")
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted)
    finished = of(events, ev.ToolCallFinished)
    assert finished and all(f.is_error and f.status == "crashed" for f in finished)


def test_a_prompt_sent_mid_turn_waits_and_is_answered_with_its_own_turn_number(
    tmp_path: Path, leak_check: None
) -> None:
    faults = FaultPlan.scripted([Fault.stall(seconds=0.3, after_chunks=2)])
    with FakeProvider(Script.echo(), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        first = harness.prompt(session, "first")
        second = harness.prompt(session, "second")
        ends = [harness.until_end()[-1], harness.until_end()[-1]]
        harness.close()
    assert (first, second) == (1, 2)
    assert [(e.turn, type(e)) for e in ends] == [(1, ev.TurnCompleted), (2, ev.TurnCompleted)]


def test_a_step_whose_answer_keeps_getting_lost_is_sent_again_then_fails_the_turn(
    tmp_path: Path, leak_check: None
) -> None:
    # Every Completed reaching the session is dropped; the probe finds the sampler done with the step.
    chaos = SessionChaos(session=ChaosPolicy(drop_probability=1.0, drop_on=(Completed,)))
    with FakeProvider(Script.text("an answer that never arrives")) as provider:
        harness = Harness(tmp_path, provider, chaos=chaos, step_probe_after=0.2)
        session = harness.open()
        events = harness.turn(session, "hello")
        requests = provider.stats.requests
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "internal", failed
    assert f"lost {MAX_LOST_STEPS + 1} times" in failed.message
    assert requests == MAX_LOST_STEPS + 1  # the first request and each time it was sent again
    assert [type(m).__name__ for m in harness.stored_history()] == ["UserMessage"]
    assert stored_types(harness)[-1] == "TurnFailed"
