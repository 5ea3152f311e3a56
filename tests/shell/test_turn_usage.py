"""A turn's usage: every reported attempt of its model calls is added up, compactions apart, and priced."""

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
    Projection,
    StepProjectionFallback,
    StepRetrying,
    ToolCall,
    Usage,
    UserMessage,
)
from shell import events as ev
from shell import turn as tm
from shell._protocol import BuiltRequest, CompactionTask
from shell.bridge import RecoveryBridge
from shell.doom_loop import DoomLoopDetector
from shell.messages import UserPrompt
from shell.usage import Price, TokenUsage, cost_of
from tool_bridge.messages import ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

WINDOW = 1000
REQUEST = ModelRequest("m", (UserMessage.of_text("hi"),))


def machine(price: Price | None = None) -> tm.TurnMachine:
    return tm.TurnMachine(
        1,
        tm.TurnSettings("s", model="m", price=price),
        bridge=RecoveryBridge(max_compactions=2),
        doom_loop=DoomLoopDetector(),
    )


def sent(actions: list[tm.TurnAction]) -> str:
    (send,) = [action for action in actions if isinstance(action, tm.SendSample)]
    return send.request_id


def begin(turn: tm.TurnMachine, tokens: int = 10) -> str:
    turn.feed(tm.Begin(UserPrompt("go")), 0.0)
    return sent(turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, tokens, WINDOW)), 0.0))


def finish(actions: list[tm.TurnAction]) -> tm.TurnEnd:
    (end,) = [action.event for action in actions if isinstance(action, tm.Finish)]
    return end


def retrying(request_id: str, usage: Usage | None) -> StepRetrying:
    return StepRetrying(request_id, 1, 3, 0.0, LlmErrorKind.OVERLOADED, 500, "boom", True, usage)


def completed(request_id: str, usage: Usage | None, calls: tuple[ToolCall, ...] = ()) -> Completed:
    message = AssistantMessage("ok", calls)
    reason = FinishReason.TOOL_CALLS if calls else FinishReason.STOP
    return Completed(request_id, message, usage, reason, 1)


def test_a_completed_turn_carries_the_sum_of_every_reported_attempt_of_every_step() -> None:
    turn = machine()
    first = begin(turn)
    turn.feed(retrying(first, Usage(100, 5, 0)), 0.0)  # a discarded attempt still counts
    turn.feed(StepProjectionFallback(first, Projection.STRIPPED_MEDIA, LlmErrorKind.IMAGE_FORMAT, None), 0.0)
    call = ToolCall("c1", "read_file", "{}")
    actions = turn.feed(completed(first, Usage(100, 7, 40, 2), (call,)), 0.0)
    (start,) = [action for action in actions if isinstance(action, tm.StartTools)]
    outcome = ToolOutcome("c1", "read_file", "text", False, ToolStatus.OK)
    turn.feed(ToolsFinished(start.batch_id, (outcome,)), 0.0)
    second = sent(turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, 10, WINDOW)), 0.0))
    end = finish(turn.feed(completed(second, Usage(120, 9, 100)), 0.0))
    assert isinstance(end, ev.TurnCompleted)
    assert end.usage.model == "m"
    assert end.usage.steps == TokenUsage(
        input_tokens=320, output_tokens=21, cached_tokens=140, reasoning_tokens=2, reported=3
    )
    assert end.usage.compaction == TokenUsage()
    assert end.usage.cost is None


def test_a_compactions_summary_requests_are_counted_apart_from_the_steps() -> None:
    turn = machine()
    turn.feed(tm.Begin(UserPrompt("go")), 0.0)
    turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, WINDOW, WINDOW)), 0.0)  # too big: compact first
    summary = sent(turn.feed(tm.CompactionPlanned(CompactionTask((1, 2), (REQUEST,), 900)), 0.0))
    turn.feed(completed(summary, Usage(900, 50)), 0.0)
    turn.feed(tm.CompactionApplied(900, 100), 0.0)
    step = sent(turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, 100, WINDOW)), 0.0))
    end = finish(turn.feed(completed(step, Usage(100, 10)), 0.0))
    assert end.usage.compaction == TokenUsage(input_tokens=900, output_tokens=50, reported=1)
    assert end.usage.steps == TokenUsage(input_tokens=100, output_tokens=10, reported=1)
    assert end.usage.total.input_tokens == 1000


def test_a_failed_turn_carries_what_its_failed_attempts_consumed() -> None:
    turn = machine()
    request = begin(turn)
    turn.feed(retrying(request, Usage(50, 3)), 0.0)
    failure = Failed(request, LlmError(LlmErrorKind.OVERLOADED, message="down"), 2, Usage(50, 4))
    end = finish(turn.feed(failure, 0.0))
    assert isinstance(end, ev.TurnFailed)
    assert end.usage.steps == TokenUsage(input_tokens=100, output_tokens=7, reported=2)


def test_a_cancelled_turn_carries_the_usage_of_the_cut_attempt() -> None:
    turn = machine()
    request = begin(turn)
    turn.feed(tm.CancelRequested("user_cancelled"), 0.0)
    cut = Cancelled(request, AssistantMessage("par", interrupted=True), 1, Usage(70, 2))
    end = finish(turn.feed(cut, 0.0))
    assert isinstance(end, ev.TurnCancelled)
    assert end.usage.steps.input_tokens == 70


def test_an_attempt_without_a_usage_report_adds_nothing_and_is_not_counted_as_reported() -> None:
    turn = machine()
    request = begin(turn)
    turn.feed(retrying(request, None), 0.0)
    end = finish(turn.feed(completed(request, None), 0.0))
    assert end.usage.steps == TokenUsage()


def test_a_stale_attempts_usage_is_not_added() -> None:
    turn = machine()
    request = begin(turn)
    turn.feed(retrying("s:1:999", Usage(1000, 1000)), 0.0)
    end = finish(turn.feed(completed(request, Usage(10, 1)), 0.0))
    assert end.usage.steps.input_tokens == 10


def test_with_a_price_the_turn_has_a_cost_with_cached_input_at_its_own_price() -> None:
    price = Price(input=2.0, output=10.0, cached_input=0.5)
    turn = machine(price)
    request = begin(turn)
    end = finish(turn.feed(completed(request, Usage(1_000_000, 100_000, 400_000)), 0.0))
    assert end.usage.cost == 600_000 * 2.0 / 1e6 + 400_000 * 0.5 / 1e6 + 100_000 * 10.0 / 1e6


def test_cached_input_without_its_own_price_costs_the_input_price() -> None:
    tokens = TokenUsage(input_tokens=1_000_000, output_tokens=0, cached_tokens=500_000)
    assert cost_of(tokens, Price(input=3.0, output=1.0)) == 3.0


def test_a_price_must_be_a_finite_number_not_below_zero() -> None:
    import pytest

    with pytest.raises(ValueError, match="input"):
        Price(input=-1.0, output=1.0)
    with pytest.raises(ValueError, match="cached_input"):
        Price(input=1.0, output=1.0, cached_input=float("nan"))
