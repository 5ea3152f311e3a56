"""The children of a turn, as the turn keeps account of them. Each ``SubagentStarted`` its calls tell is
recorded once and each ``SubagentFinished`` once (news of another turn, repeats, and ends of calls that
never began are ignored); each ended child's usage is itemised
in the turn's usage (its tokens: steps and compactions together); and a turn that ends with a child still
open emits one ``SubagentFinished`` ``cancelled`` for it before its ``Finish``, so that every started child
has exactly one end."""

from __future__ import annotations

from sampler import AssistantMessage, Completed, FinishReason, ModelRequest, ToolCall, UserMessage
from shell import events as ev
from shell import turn as tm
from shell._protocol import BuiltRequest
from shell.bridge import RecoveryBridge
from shell.doom_loop import DoomLoopDetector
from shell.messages import UserPrompt
from shell.turn._children import Children
from shell.usage import ChildUsage, TokenUsage, TurnUsage
from tool_bridge.messages import ToolsFinished
from tool_bridge.results import ToolOutcome, ToolStatus

REQUEST = ModelRequest("m", (UserMessage.of_text("hi"),))
CHILD_USAGE = TurnUsage(
    model="child-model",
    steps=TokenUsage(input_tokens=100, output_tokens=20, cached_tokens=10, reported=2),
    compaction=TokenUsage(input_tokens=50, output_tokens=5, reported=1),
    cost=0.25,
)


def began(call_id: str = "c1", turn: int = 7, *, reattached: bool = False) -> ev.SubagentStarted:
    return ev.SubagentStarted(
        "s", turn, call_id, f"s.agent-{call_id}", "reviewer", f"task {call_id}", reattached
    )


def ended(call_id: str = "c1", turn: int = 7, usage: TurnUsage = CHILD_USAGE) -> ev.SubagentFinished:
    return ev.SubagentFinished("s", turn, call_id, f"s.agent-{call_id}", "reviewer", "completed", "", usage)


def started_event(call_id: str = "c1", *, reattached: bool = False) -> ev.SubagentStarted:
    return ev.SubagentStarted(
        "s", 7, call_id, f"s.agent-{call_id}", "reviewer", f"task {call_id}", reattached
    )


def finished_event(call_id: str = "c1", usage: TurnUsage = CHILD_USAGE) -> ev.SubagentFinished:
    return ev.SubagentFinished("s", 7, call_id, f"s.agent-{call_id}", "reviewer", "completed", "", usage)


# --- Children ---------------------------------------------------------------------------------------------


def test_a_child_that_begins_is_started_once_and_one_that_ends_is_finished_once() -> None:
    children = Children(7)
    assert children.began(began()) == [started_event()]
    assert children.ended(ended()) == [finished_event()]
    assert children.left_open("the turn ended") == []


def test_a_reattached_child_is_started_as_reattached() -> None:
    assert Children(7).began(began(reattached=True)) == [started_event(reattached=True)]


def test_news_of_another_turn_is_ignored() -> None:
    children = Children(7)
    assert children.began(began(turn=6)) == []
    assert children.ended(ended(turn=6)) == []
    children.began(began())
    assert children.ended(ended(turn=8)) == []
    assert children.usage == []
    assert len(children.left_open("why")) == 1, "the call of this turn is still open"


def test_repeats_are_ignored_and_a_call_that_ended_does_not_begin_again() -> None:
    children = Children(7)
    children.began(began())
    assert children.began(began()) == []
    children.ended(ended())
    assert children.ended(ended()) == []
    assert children.began(began()) == []
    assert len(children.usage) == 1


def test_the_end_of_a_call_that_never_began_is_ignored() -> None:
    children = Children(7)
    assert children.ended(ended("nobody")) == []
    assert children.usage == []


def test_each_ended_child_s_usage_is_itemised_in_the_order_they_ended() -> None:
    children = Children(7)
    for call_id in ("c1", "c2", "c3"):
        children.began(began(call_id))
    cheap = TurnUsage(model="small", steps=TokenUsage(input_tokens=1, output_tokens=1, reported=1))
    children.ended(ended("c2", usage=cheap))
    children.ended(ended("c1"))
    assert children.usage == [
        ChildUsage(
            call_id="c2",
            child="s.agent-c2",
            profile="reviewer",
            model="small",
            tokens=TokenUsage(input_tokens=1, output_tokens=1, reported=1),
            cost=None,
        ),
        ChildUsage(
            call_id="c1",
            child="s.agent-c1",
            profile="reviewer",
            model="child-model",
            tokens=TokenUsage(input_tokens=150, output_tokens=25, cached_tokens=10, reported=3),
            cost=0.25,
        ),
    ]


def test_children_left_open_when_the_turn_ends_are_finished_cancelled_once() -> None:
    children = Children(7)
    children.began(began("c1"))
    children.began(began("c2"))
    children.ended(ended("c1"))
    assert children.left_open("the parent's turn ended first") == [
        ev.SubagentFinished(
            "s", 7, "c2", "s.agent-c2", "reviewer", "cancelled", "the parent's turn ended first"
        )
    ]
    assert children.left_open("again") == []
    assert children.ended(ended("c2")) == [], "its end, heard late, is not a second one"
    assert [usage.call_id for usage in children.usage] == ["c1"]


# --- Through the turn machine -----------------------------------------------------------------------------


def machine() -> tm.TurnMachine:
    return tm.TurnMachine(
        7,
        tm.TurnSettings("s", model="m"),
        bridge=RecoveryBridge(max_compactions=2),
        doom_loop=DoomLoopDetector(),
    )


def running_agent_calls(turn: tm.TurnMachine, *call_ids: str) -> str:
    """Begin ``turn`` and answer its first step with ``agent`` calls; the batch id of its tools."""
    turn.feed(tm.Begin(UserPrompt("go")), 0.0)
    (send,) = [
        action
        for action in turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, 10, 1000)), 0.0)
        if isinstance(action, tm.SendSample)
    ]
    calls = tuple(ToolCall(call_id, "agent", '{"description": "d", "prompt": "p"}') for call_id in call_ids)
    answer = AssistantMessage(text="", tool_calls=calls)
    actions = turn.feed(Completed(send.request_id, answer, None, FinishReason.TOOL_CALLS, 1), 0.0)
    (start,) = [action for action in actions if isinstance(action, tm.StartTools)]
    return start.batch_id


def agent_results(batch_id: str, *call_ids: str) -> ToolsFinished:
    return ToolsFinished(
        batch_id, tuple(ToolOutcome(call_id, "agent", "done", False, ToolStatus.OK) for call_id in call_ids)
    )


def test_the_turn_emits_subagent_started_and_finished_as_it_hears_of_its_children() -> None:
    turn = machine()
    running_agent_calls(turn, "c1")
    assert turn.feed(began(), 1.0) == [tm.Emit(started_event())]
    assert turn.feed(began(), 1.5) == []
    assert turn.feed(ended(), 2.0) == [tm.Emit(finished_event())]
    assert turn.feed(ended(), 2.5) == []


def test_the_turn_s_end_itemises_the_usage_of_the_children_that_ended() -> None:
    turn = machine()
    batch = running_agent_calls(turn, "c1", "c2")
    for call_id in ("c1", "c2"):
        turn.feed(began(call_id), 1.0)
    turn.feed(ended("c2"), 2.0)
    turn.feed(ended("c1"), 2.0)
    actions = turn.feed(agent_results(batch, "c1", "c2"), 3.0)
    (send,) = [
        action
        for action in actions + turn.feed(tm.RequestBuilt(BuiltRequest(REQUEST, 10, 1000)), 3.0)
        if isinstance(action, tm.SendSample)
    ]
    actions = turn.feed(
        Completed(send.request_id, AssistantMessage(text="all done"), None, FinishReason.STOP, 1), 4.0
    )
    (finish,) = [action for action in actions if isinstance(action, tm.Finish)]
    assert isinstance(finish.event, ev.TurnCompleted)
    assert [child.call_id for child in finish.event.usage.children] == ["c2", "c1"]
    assert finish.event.usage.children[1].tokens == CHILD_USAGE.steps + CHILD_USAGE.compaction
    assert finish.event.usage.steps == TokenUsage(), "a child's tokens are not the parent's steps'"
    assert turn.usage.children == finish.event.usage.children


def test_a_turn_cancelled_with_a_child_open_finishes_it_cancelled_before_its_own_finish() -> None:
    turn = machine()
    batch = running_agent_calls(turn, "c1", "c2")
    turn.feed(began("c1"), 1.0)
    turn.feed(began("c2"), 1.0)
    turn.feed(ended("c1"), 1.5)
    assert turn.feed(tm.CancelRequested("user_cancelled"), 2.0) == [tm.StopTools(batch)]
    actions = turn.feed(agent_results(batch, "c1", "c2"), 3.0)
    finished = [
        action.event
        for action in actions
        if isinstance(action, tm.Emit) and isinstance(action.event, ev.SubagentFinished)
    ]
    assert finished == [
        ev.SubagentFinished(
            "s",
            7,
            "c2",
            "s.agent-c2",
            "reviewer",
            "cancelled",
            "the parent's turn was cancelled (user_cancelled) first",
        )
    ]
    assert actions.index(tm.Emit(finished[0])) == len(actions) - 2
    finish = actions[-1]
    assert isinstance(finish, tm.Finish) and isinstance(finish.event, ev.TurnCancelled)
    assert [child.call_id for child in finish.event.usage.children] == ["c1"]
    assert turn.feed(ended("c2"), 4.0) == [], "nothing after the turn's finish"


def test_a_turn_that_fails_with_a_child_open_says_so_in_the_child_s_end() -> None:
    turn = machine()
    running_agent_calls(turn, "c1")
    turn.feed(began("c1"), 1.0)
    actions = turn.feed(tm.ActionFailed("store", "the store is gone", ()), 2.0)
    assert actions[-2:] == [
        tm.Emit(
            ev.SubagentFinished(
                "s", 7, "c1", "s.agent-c1", "reviewer", "cancelled", "the parent's turn failed (store) first"
            )
        ),
        tm.Finish(ev.TurnFailed("s", 7, "store", "the store is gone", usage=turn.usage)),
    ]
