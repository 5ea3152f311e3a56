"""Cancelling a batch: running calls get a grace to end, are recorded aborted after it, and whatever
still runs at the kill deadline is killed. Nothing is left running, nothing is hidden."""

from __future__ import annotations

import queue
import threading
import time

import msgspec

from actors import ChaosPolicy, DeadLetter, WhichChildren
from tests._waiting import wait_until
from tool_bridge import (
    ABORTED_CONTENT,
    SHUTDOWN_CONTENT,
    PermissionPolicy,
    PermissionRequested,
    PermissionRule,
    Tool,
    ToolAbandoned,
    ToolBridgeSettings,
    ToolCallBegan,
    ToolContext,
    ToolKind,
    ToolsFinished,
    ToolStatus,
    process_group_alive,
)
from tool_bridge._protocol import AbortCall

from .conftest import MakeRig, Rig, call, read_pid


def began(rig: Rig, *call_ids: str) -> None:
    for call_id in call_ids:
        rig.expect(ToolCallBegan, lambda m, c=call_id: m.call_id == c)


def test_sleep_600_in_the_shell_ends_at_the_abort_with_its_whole_process_group(make_rig: MakeRig, tmp_path):
    rig = make_rig()
    rig.run(call("c1", "shell", command="echo $$ > pid; sleep 600 & sleep 600; wait"))
    pgid = read_pid(tmp_path / "workspace" / "pid")
    assert process_group_alive(pgid)
    aborted_at = rig.abort()
    (outcome,) = rig.finished(timeout=10).outcomes
    assert time.monotonic() - aborted_at < 2.0  # it ended on SIGTERM; nothing waited for the grace
    assert (outcome.status, outcome.is_error, outcome.interrupted) == (ToolStatus.ABORTED, True, True)
    assert outcome.content.startswith(f"{ABORTED_CONTENT}\naborted; the process group was killed")
    assert not process_group_alive(pgid)


def test_a_call_ending_within_the_grace_keeps_its_result_and_a_slower_one_is_aborted(make_rig: MakeRig):
    rig = make_rig(settings=ToolBridgeSettings(abort_grace=0.5))
    rig.run(
        call("c1", "stubborn", seconds=0.2, text="finished in time"),
        call("c2", "stubborn", seconds=1.2, text="too late"),
    )
    began(rig, "c1", "c2")
    aborted_at = rig.abort()
    fast, slow = rig.finished().outcomes
    assert 0.5 <= time.monotonic() - aborted_at < 1.1
    assert (fast.status, fast.is_error, fast.content) == (ToolStatus.OK, False, "finished in time")
    assert (slow.status, slow.is_error, slow.interrupted) == (ToolStatus.ABORTED, True, True)
    assert slow.content == ABORTED_CONTENT
    # The slow call's own result arrives later, and is discarded: the batch was reported once.
    assert wait_until(lambda: rig.tools.ask(WhichChildren()) == ())
    assert len(rig.all_heard(ToolsFinished)) == 1


def test_with_the_default_grace_the_batch_is_reported_2_5_s_after_the_abort(make_rig: MakeRig, tmp_path):
    # terminate_grace keeps the soft abort from killing `hold`: only the 10 s kill (or a stop) does.
    settings = ToolBridgeSettings(terminate_grace=30.0)
    assert (settings.abort_grace, settings.kill_after) == (2.5, 10.0)
    rig = make_rig(settings=settings)
    pidfile = tmp_path / "workspace" / "pid"
    rig.run(call("c1", "stubborn", seconds=1.0, text="kept"), call("c2", "hold", pidfile=str(pidfile)))
    began(rig, "c1", "c2")
    pgid = read_pid(pidfile)
    aborted_at = rig.abort()
    kept, held = rig.finished(timeout=10).outcomes
    assert 2.5 <= time.monotonic() - aborted_at < 3.5
    assert (kept.status, kept.content) == (ToolStatus.OK, "kept")
    assert (held.status, held.content, held.interrupted) == (ToolStatus.ABORTED, ABORTED_CONTENT, True)
    assert process_group_alive(pgid)  # it ignores SIGTERM and its kill is not due yet
    assert rig.system.shutdown().clean
    assert not process_group_alive(pgid)


def test_what_ignores_the_abort_is_killed_at_kill_after(make_rig: MakeRig, tmp_path):
    rig = make_rig(settings=ToolBridgeSettings(abort_grace=0.2, kill_after=1.0, terminate_grace=30.0))
    pidfile = tmp_path / "workspace" / "pid"
    rig.run(call("c1", "hold", pidfile=str(pidfile)))
    pgid = read_pid(pidfile)
    aborted_at = rig.abort()
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.content) == (ToolStatus.ABORTED, ABORTED_CONTENT)
    assert process_group_alive(pgid)
    assert wait_until(lambda: not process_group_alive(pgid), timeout=5)
    assert time.monotonic() - aborted_at >= 1.0
    assert wait_until(lambda: rig.tools.ask(WhichChildren()) == ())  # its actor, stopped, is gone
    assert rig.tools.ask(WhichChildren()) == ()


def test_calls_not_started_yet_are_aborted_at_once(make_rig: MakeRig):
    rig = make_rig(settings=ToolBridgeSettings(abort_grace=30.0, kill_after=30.0))
    rig.run(call("c1", "nap", seconds=30), call("c2", "nap"))
    began(rig, "c1")
    rig.abort()
    running, waiting = rig.finished().outcomes  # well before the 30 s grace
    assert (running.status, running.interrupted) == (ToolStatus.ABORTED, True)
    assert running.content == f"{ABORTED_CONTENT}\naborted before completion"
    assert (waiting.status, waiting.content, waiting.interrupted) == (
        ToolStatus.ABORTED,
        ABORTED_CONTENT,
        False,
    )
    assert waiting.duration == 0.0
    assert [m.call_id for m in rig.all_heard(ToolCallBegan)] == ["c1"]


def test_a_call_waiting_for_permission_is_aborted_at_once_and_a_late_answer_runs_nothing(make_rig: MakeRig):
    policy = PermissionPolicy([PermissionRule("nap", "ask")], use_default_rules=False)
    rig = make_rig(policy=policy, settings=ToolBridgeSettings(abort_grace=30.0, kill_after=30.0))
    letters: queue.Queue[DeadLetter] = queue.Queue()
    rig.system.dead_letters.subscribe(letters.put)
    rig.run(call("c1", "nap"))
    rig.expect(PermissionRequested)
    rig.abort()
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.content, outcome.interrupted) == (
        ToolStatus.ABORTED,
        ABORTED_CONTENT,
        False,
    )
    rig.answer("c1", "allow_once")
    assert "waiting for permission" in letters.get(timeout=5).reason
    assert rig.all_heard(ToolCallBegan) == []


class Wait(msgspec.Struct, frozen=True):
    pass


def test_a_thread_tool_that_cannot_be_stopped_is_reported_abandoned(make_rig: MakeRig):
    release = threading.Event()

    def blocks(args: Wait, context: ToolContext) -> str:
        release.wait(10)
        return "released"

    rig = make_rig(
        [Tool(name="block", description="Block.", args_type=Wait, fn=blocks, kind=ToolKind.THREAD)]
    )
    try:
        rig.run(call("c1", "block"))
        began(rig, "c1")
        rig.abort()
        abandoned = rig.expect(ToolAbandoned)
        (outcome,) = rig.finished().outcomes
    finally:
        release.set()
    assert (abandoned.batch_id, abandoned.call_id, abandoned.tool) == ("b1", "c1", "block")
    assert "discarded" in abandoned.reason
    assert (outcome.status, outcome.interrupted) == (ToolStatus.ABORTED, True)
    assert outcome.content.startswith(ABORTED_CONTENT)


def test_a_tool_actor_crashing_while_its_process_runs_leaves_no_process_behind(make_rig: MakeRig, tmp_path):
    rig = make_rig(chaos=ChaosPolicy(crash_probability=1.0, crash_on=(AbortCall,)))
    rig.run(call("c1", "shell", command="echo $$ > pid; exec sleep 600"))
    pgid = read_pid(tmp_path / "workspace" / "pid")
    rig.abort()
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.is_error) == (ToolStatus.CRASHED, True)
    assert outcome.content.startswith("the tool crashed: ") and "AbortCall" in outcome.content
    assert wait_until(lambda: not process_group_alive(pgid))


def test_an_abort_of_a_finished_or_unknown_batch_changes_nothing(make_rig: MakeRig):
    rig = make_rig()
    rig.run(call("c1", "nap", text="done"))
    assert rig.finished().outcomes[0].content == "done"
    rig.abort("b1")
    rig.abort("never-ran")
    rig.run(call("c2", "nap", text="next"), batch="b2")
    assert rig.finished("b2").outcomes[0].content == "next"
    assert [m.batch_id for m in rig.all_heard(ToolsFinished)] == ["b1", "b2"]


def test_stopping_the_tool_supervisor_ends_every_batch_in_flight_and_kills_its_processes(
    make_rig: MakeRig, tmp_path
):
    rig = make_rig()
    rig.run(call("c1", "shell", command="echo $$ > pid; exec sleep 600"), call("c2", "nap"))
    rig.run(call("c3", "stubborn", seconds=0.1), batch="b2")
    pgid = read_pid(tmp_path / "workspace" / "pid")
    rig.finished("b2")
    report = rig.system.shutdown()
    assert report.clean, report
    running, waiting = rig.finished(timeout=0).outcomes
    assert (running.status, running.content, running.interrupted) == (
        ToolStatus.ABORTED,
        SHUTDOWN_CONTENT,
        True,
    )
    assert (waiting.status, waiting.content, waiting.interrupted) == (
        ToolStatus.ABORTED,
        SHUTDOWN_CONTENT,
        False,
    )
    assert not process_group_alive(pgid)
    assert [m.batch_id for m in rig.all_heard(ToolsFinished)] == ["b2", "b1"]
