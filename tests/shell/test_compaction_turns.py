"""Context overflow in whole turns: compact and resubmit, learn the window, and give up clearly."""

from __future__ import annotations

from pathlib import Path

from sampler.fake import Conversation, FakeProvider, Fault, FaultPlan, FinalAnswer, Script, Step, TokenExpiry
from sampler.fake.script import is_summary_request
from shell import events as ev
from shell.credentials import OAuthCredential
from tests._events import without_usage
from tests.actors.conftest import system_threads
from tests.shell._harness import Harness, of


def summarising(keep: float = 0.0, *, size: int | None = None) -> Script:
    """Answers "ok"; a compaction request gets a summary ``keep`` times as long as the transcript, or of
    ``size`` characters."""

    def respond(conversation: Conversation) -> Step:
        if is_summary_request(conversation):
            length = size if size is not None else int(len(conversation.last_user_text) * keep)
            return FinalAnswer("s" * max(1, length))
        return FinalAnswer("ok")

    return Script(respond, name="summarising", summarizes=True)


def test_an_overflow_is_compacted_the_turn_completes_and_the_window_is_learned(tmp_path: Path) -> None:
    before = system_threads()
    with FakeProvider(summarising(0.1), context_window=1_500) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        assert isinstance(harness.turn(session, "first " + "x" * 2_500)[-1], ev.TurnCompleted)
        events = harness.turn(session, "second " + "x" * 2_500)
        later = harness.turn(session, "third " + "y" * 2_500)
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    started, finished = of(events, ev.CompactionStarted), of(events, ev.CompactionFinished)
    assert [s.reason for s in started] == ["overflow"]
    assert finished[0].ok and finished[0].tokens_after < finished[0].tokens_before
    # The learned window makes the next turn compact before it overflows.
    assert isinstance(later[-1], ev.TurnCompleted)
    assert [s.reason for s in of(later, ev.CompactionStarted)] == ["proactive"]
    assert of(later, ev.CompactionStarted)[0].window < 100_000
    with harness.store.__class__.open(harness.store_path) as store:
        record = store.get_session("s1")
    assert record.learned_window is not None and record.learned_window < 100_000
    # The record keeps every message; only the projection changed.
    everything = harness.stored_history(include_replaced=True)
    projection = harness.stored_history()
    assert len(projection) < len(everything)
    assert sum(1 for m in everything if "x" * 100 in str(m)) == 2
    assert sum(1 for m in everything if "y" * 100 in str(m)) == 1
    assert system_threads() - before == set()


def test_a_compaction_that_does_not_shrink_the_request_fails_the_turn_with_advice(tmp_path: Path) -> None:
    with FakeProvider(summarising(size=8_000), context_window=1_500) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        harness.turn(session, "first " + "x" * 2_500)
        events = harness.turn(session, "second " + "x" * 2_500)
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "context_overflow"
    assert "Start a new session or raise the context window" in failed.message
    assert [f.ok for f in of(events, ev.CompactionFinished)] == [False]


def test_a_summary_request_that_itself_overflows_is_summarised_in_chunks(tmp_path: Path) -> None:
    with FakeProvider(summarising(0.5)) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        for n in range(6):
            harness.turn(session, f"{n} " + "x" * 1_000)
        harness.close()
    # The same session, resumed against a model with a much smaller window.
    with FakeProvider(summarising(0.5), context_window=1_500) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        events = harness.turn(session, "last " + "y" * 3_000)
        requests = provider.stats.requests
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    finished = of(events, ev.CompactionFinished)
    assert finished and all(f.ok for f in finished)
    assert finished[0].replaced == 12
    assert requests > 2 + len(finished)  # the first summary went out in several chunk requests


def test_an_overflow_that_three_compactions_cannot_fix_fails_with_the_exact_message(tmp_path: Path) -> None:
    with FakeProvider(summarising(0.5)) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        for n in range(6):
            harness.turn(session, f"{n} " + "x" * 1_000)
        harness.close()
    # Every model call of the next turn overflows; each compaction still shrinks the request.
    faults = FaultPlan.scripted([Fault.context_overflow(), None] * 3 + [Fault.context_overflow()])
    with FakeProvider(summarising(0.5), faults=faults) as provider:
        harness = Harness(tmp_path, provider, compaction_threshold=0.99)
        session = harness.open()
        events = harness.turn(session, "last")
        harness.close()
    finished = of(events, ev.CompactionFinished)
    assert [f.ok for f in finished] == [True, True, True]
    assert without_usage(events[-1]) == ev.TurnFailed(
        "s1",
        7,
        "context_overflow",
        "Compaction failed to bring the context under the model window after 3 attempts.",
    )
    assert [kind for kind, _ in harness.stored_events()][-1] == "TurnFailed"


def test_a_token_that_expires_on_the_summary_request_is_refreshed_and_the_compaction_goes_on(
    tmp_path: Path,
) -> None:
    # Turn 1 spends the token's first use; turn 2 overflows on the second; the summary request is refused.
    expiry = TokenExpiry(requests_per_token=2)
    with FakeProvider(summarising(0.1), context_window=1_500, token_expiry=expiry) as provider:
        credential = OAuthCredential(provider.token_url, expiry.refresh_token, access_token="first-token")
        harness = Harness(tmp_path, provider, credentials=credential)
        session = harness.open()
        assert isinstance(harness.turn(session, "first " + "x" * 2_500)[-1], ev.TurnCompleted)
        events = harness.turn(session, "second " + "x" * 2_500)
        harness.close()
    assert isinstance(events[-1], ev.TurnCompleted), events[-1]
    kinds = [type(e).__name__ for e in events if not isinstance(e, ev.TextDelta)]
    started, refreshed, finished = (
        kinds.index("CompactionStarted"),
        kinds.index("AuthRefreshed"),
        kinds.index("CompactionFinished"),
    )
    assert started < refreshed < finished
    assert of(events, ev.CompactionFinished)[0].ok
    assert credential.current() != "first-token"


def test_a_summary_request_refused_for_another_reason_fails_the_turn_with_that_reason(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([None, Fault.context_overflow(), Fault.insufficient_quota()])
    with FakeProvider(summarising(0.1), faults=faults) as provider:
        harness = Harness(tmp_path, provider)
        session = harness.open()
        assert isinstance(harness.turn(session, "first " + "x" * 2_500)[-1], ev.TurnCompleted)
        events = harness.turn(session, "second")
        harness.close()
    failed = events[-1]
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "quota_exhausted", failed
    assert failed.message.startswith("The compaction's summary request failed:")
    assert [f.ok for f in of(events, ev.CompactionFinished)] == [False]
    assert [kind for kind, _ in harness.stored_events()][-1] == "TurnFailed"
