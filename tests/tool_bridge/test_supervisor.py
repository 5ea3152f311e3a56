"""The ToolSupervisor: every batch ends in one ToolsFinished, one outcome per call, in call order —
whatever the calls are, whatever the policy says, whatever the tools do."""

from __future__ import annotations

import queue

import msgspec
import pytest
import trio

from actors import ChaosPolicy, ChaosVerdict, DeadLetter, WhichChildren
from tests._waiting import wait_until
from tool_bridge import (
    PermissionPolicy,
    PermissionRequested,
    PermissionRule,
    RunTools,
    Tool,
    ToolBridgeSettings,
    ToolBridgeSettingsError,
    ToolCallBegan,
    ToolCallEnded,
    ToolContext,
    ToolError,
    ToolInvocation,
    ToolRegistry,
    ToolStatus,
    process_group_alive,
)
from tool_bridge._protocol import RunCall

from .conftest import MakeRig, call, read_pid


class Meet(msgspec.Struct, frozen=True):
    me: str
    other: str


class Step(msgspec.Struct, frozen=True):
    label: str
    seconds: float = 0.05


def meeting_tool() -> Tool[Meet]:
    """A parallel-safe tool whose calls each wait (up to 3 s) for the other call to have started."""
    arrived: dict[str, trio.Event] = {}

    async def meet(args: Meet, context: ToolContext) -> str:
        arrived.setdefault(args.me, trio.Event()).set()
        with trio.move_on_after(3):
            await arrived.setdefault(args.other, trio.Event()).wait()
            return f"{args.me} met {args.other}"
        return f"{args.me} waited alone"

    return Tool(name="meet", description="Meet another call.", args_type=Meet, fn=meet, parallel_safe=True)


def journal_tools(journal: list[str]) -> tuple[Tool[Step], Tool[Step]]:
    """``step`` (runs alone) and ``pstep`` (parallel-safe), which note when each call starts and ends."""

    async def step(args: Step, context: ToolContext) -> str:
        journal.append(f"{args.label}+")
        await trio.sleep(args.seconds)
        journal.append(f"{args.label}-")
        return args.label

    return (
        Tool(name="step", description="A step.", args_type=Step, fn=step),
        Tool(name="pstep", description="A step.", args_type=Step, fn=step, parallel_safe=True),
    )


async def _fails(args: Step, context: ToolContext) -> str:
    raise ToolError(f"{args.label}: disk full")


async def _hangs(args: Step, context: ToolContext) -> str:
    await trio.sleep(60)
    return "late"


FAILS = Tool(name="fails", description="Always fails.", args_type=Step, fn=_fails)
HANGS = Tool(name="hangs", description="Never ends in time.", args_type=Step, fn=_hangs, timeout=0.2)


def dead_letters(rig) -> queue.Queue[DeadLetter]:
    letters: queue.Queue[DeadLetter] = queue.Queue()
    rig.system.dead_letters.subscribe(letters.put)
    return letters


# -- batches ---------------------------------------------------------------------------------------


def test_a_batch_reports_one_outcome_per_call_in_call_order(make_rig: MakeRig) -> None:
    rig = make_rig()
    rig.run(
        call("c1", "nap", seconds=0.05, text="first"),
        call("c2", "pnap", text="second"),
        call("c3", "nap", text="third"),
    )
    finished = rig.finished()
    assert [(o.call_id, o.content, o.status) for o in finished.outcomes] == [
        ("c1", "first", ToolStatus.OK),
        ("c2", "second", ToolStatus.OK),
        ("c3", "third", ToolStatus.OK),
    ]
    assert not any(o.is_error for o in finished.outcomes)


def test_each_call_is_announced_when_its_tool_starts_and_again_when_it_has_its_outcome(
    make_rig: MakeRig,
) -> None:
    rig = make_rig()
    rig.run(call("c1", "nap"), call("c2", "pnap"))
    finished = rig.finished()
    first, second = finished.outcomes
    assert rig.heard == [
        ToolCallBegan("b1", "c1", "nap"),
        ToolCallEnded("b1", first),
        ToolCallBegan("b1", "c2", "pnap"),
        ToolCallEnded("b1", second),
        finished,
    ]


def test_a_call_refused_before_it_runs_has_its_outcome_told_at_once(make_rig: MakeRig) -> None:
    rig = make_rig()
    rig.run(call("c1", "no_such_tool"), call("c2", "nap"))
    finished = rig.finished()
    refused, ran = finished.outcomes
    assert refused.status is ToolStatus.INVALID
    assert [m for m in rig.heard if isinstance(m, ToolCallEnded)] == [
        ToolCallEnded("b1", refused),
        ToolCallEnded("b1", ran),
    ]


def test_an_empty_batch_finishes_at_once(make_rig: MakeRig) -> None:
    rig = make_rig()
    rig.run()
    assert rig.finished().outcomes == ()


def test_unknown_tools_malformed_json_and_schema_mismatches_are_invalid_and_the_batch_goes_on(
    make_rig: MakeRig,
) -> None:
    rig = make_rig()
    rig.run(
        call("c1", "teleport", to="mars"),
        ToolInvocation("c2", "nap", "{not json"),
        call("c3", "nap", seconds="soon"),
        call("c4", "nap", text="still runs"),
    )
    unknown, malformed, mismatch, valid = rig.finished().outcomes
    assert all(o.status is ToolStatus.INVALID and o.is_error for o in (unknown, malformed, mismatch))
    assert unknown.content.startswith("unknown tool `teleport`; available tools: `nap`")
    assert "not valid JSON" in malformed.content
    assert mismatch.content.startswith("invalid arguments for `nap`") and "$.seconds" in mismatch.content
    assert (valid.status, valid.content) == (ToolStatus.OK, "still runs")
    assert [m.call_id for m in rig.all_heard(ToolCallBegan)] == ["c4"]


def test_a_repeated_call_id_is_invalid_and_not_run(make_rig: MakeRig) -> None:
    rig = make_rig()
    rig.run(call("c1", "nap", text="once"), call("c1", "nap", text="twice"))
    first, second = rig.finished().outcomes
    assert (first.status, first.content) == (ToolStatus.OK, "once")
    assert second.status is ToolStatus.INVALID and "repeats an earlier call" in second.content
    assert len(rig.all_heard(ToolCallBegan)) == 1


def test_a_failing_tool_is_an_error_outcome_not_an_exception(make_rig: MakeRig) -> None:
    rig = make_rig([FAILS])
    rig.run(call("c1", "fails", label="write"), call("c2", "nap"))
    failed, after = rig.finished().outcomes
    assert (failed.status, failed.is_error, failed.content) == (ToolStatus.ERROR, True, "write: disk full")
    assert after.status is ToolStatus.OK


def test_a_call_past_its_tools_timeout_is_timed_out(make_rig: MakeRig) -> None:
    rig = make_rig([HANGS])
    rig.run(call("c1", "hangs", label="x"))
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.is_error, outcome.interrupted) == (ToolStatus.TIMED_OUT, True, True)
    assert outcome.content == "timed out after 0.2 s"


def test_a_process_tool_runs_in_the_workspace(make_rig: MakeRig, tmp_path) -> None:
    rig = make_rig()
    rig.run(call("c1", "shell", command="pwd; echo oops >&2; exit 3"))
    (outcome,) = rig.finished().outcomes
    assert outcome.status is ToolStatus.ERROR
    assert outcome.content.splitlines() == ["exit code 3", str(tmp_path / "workspace"), "[stderr]", "oops"]


def test_every_call_actor_is_gone_once_its_batch_has_finished_and_its_address_is_not_kept(
    make_rig: MakeRig,
) -> None:
    rig = make_rig()
    rig.run(call("c1", "nap"), call("c2", "pnap"), call("c3", "pnap"))
    rig.finished()
    assert wait_until(lambda: rig.tools.ask(WhichChildren()) == ())
    # A call's name is never used again: the system drops its address (asked for, it is a fresh one).
    kept = rig.system._debug_state()
    assert wait_until(lambda: not any("/call-" in name for name in rig.system._debug_state()), 5), kept
    assert rig.system.address("tools/call-c1").status == "unbound"


def test_a_second_run_of_a_batch_still_running_is_refused(make_rig: MakeRig) -> None:
    rig = make_rig()
    letters = dead_letters(rig)
    rig.run(call("c1", "nap", seconds=0.2, text="the first"))
    rig.run(call("c1", "nap", text="the second"))
    letter = letters.get(timeout=5)
    assert isinstance(letter.message, RunTools) and "already running" in letter.reason
    assert rig.finished().outcomes[0].content == "the first"
    rig.run(call("c2", "nap"), batch="b2")
    rig.finished("b2")
    assert len([m for m in rig.heard if getattr(m, "batch_id", None) == "b1" and hasattr(m, "outcomes")]) == 1


# -- concurrency -------------------------------------------------------------------------------------


def test_parallel_safe_calls_run_at_the_same_time(make_rig: MakeRig) -> None:
    rig = make_rig([meeting_tool()])
    rig.run(call("c1", "meet", me="ann", other="bob"), call("c2", "meet", me="bob", other="ann"))
    assert [o.content for o in rig.finished().outcomes] == ["ann met bob", "bob met ann"]


def test_other_calls_run_alone_after_the_calls_before_them(make_rig: MakeRig) -> None:
    journal: list[str] = []
    rig = make_rig(journal_tools(journal))
    rig.run(
        call("c1", "pstep", label="a"),
        call("c2", "pstep", label="b"),
        call("c3", "step", label="c"),
        call("c4", "step", label="d"),
        call("c5", "pstep", label="e"),
        call("c6", "pstep", label="f"),
    )
    outcomes = rig.finished().outcomes
    assert [o.content for o in outcomes] == ["a", "b", "c", "d", "e", "f"]
    at = journal.index
    assert max(at("a+"), at("b+")) < min(at("a-"), at("b-"))  # a and b overlapped
    assert at("c+") > max(at("a-"), at("b-"))
    assert journal[at("c+") : at("d-") + 1] == ["c+", "c-", "d+", "d-"]
    assert max(at("e+"), at("f+")) < min(at("e-"), at("f-"))


# -- crashes ---------------------------------------------------------------------------------------


def test_a_tool_actor_crash_is_a_crashed_outcome_and_the_batch_goes_on(make_rig: MakeRig) -> None:
    chaos = ChaosPolicy(seed=7, crash_probability=0.5, crash_on=(RunCall,))

    def crashes(call_id: str) -> bool:
        verdict, _ = chaos.for_incarnation(f"tools/call-{call_id}", 1).roll(RunCall(call_id))
        return verdict is ChaosVerdict.CRASH

    candidates = [f"x{n}" for n in range(50)]
    doomed = next(c for c in candidates if crashes(c))
    lucky = [c for c in candidates if not crashes(c)][:2]
    rig = make_rig(chaos=chaos)
    rig.run(call(lucky[0], "nap", text="before"), call(doomed, "nap"), call(lucky[1], "nap", text="after"))
    before, crashed, after = rig.finished().outcomes
    assert (before.content, after.content) == ("before", "after")
    assert (crashed.call_id, crashed.status, crashed.is_error) == (doomed, ToolStatus.CRASHED, True)
    assert crashed.content.startswith("the tool crashed: ") and "RunCall" in crashed.content


def test_a_tool_actor_that_never_starts_its_call_is_a_crashed_outcome(make_rig: MakeRig) -> None:
    chaos = ChaosPolicy(drop_probability=1.0, drop_on=(RunCall,))
    rig = make_rig(chaos=chaos, settings=ToolBridgeSettings(start_timeout=0.2))
    rig.run(call("c1", "nap"), call("c2", "invalid-tool"))
    lost, invalid = rig.finished().outcomes
    assert (lost.status, lost.content) == (
        ToolStatus.CRASHED,
        "the tool crashed: it did not start within 0.2 s",
    )
    assert invalid.status is ToolStatus.INVALID
    assert wait_until(lambda: rig.tools.ask(WhichChildren()) == ())


class FragileRegistry(ToolRegistry):
    """Breaks the supervisor's handler on a call to ``boom``."""

    def decode_call(self, name, arguments):
        if name == "boom":
            raise RuntimeError("the registry broke")
        return super().decode_call(name, arguments)


def test_a_crash_of_the_supervisor_itself_still_reports_every_batch_and_kills_its_processes(
    make_rig: MakeRig, tmp_path
) -> None:
    rig = make_rig(registry_type=FragileRegistry)
    rig.run(call("c1", "shell", command="echo $$ > pid; exec sleep 600"), batch="b1")
    pgid = read_pid(tmp_path / "workspace" / "pid")
    rig.run(call("c2", "boom"), batch="b2")
    for batch in ("b1", "b2"):
        (outcome,) = rig.finished(batch).outcomes
        assert outcome.status is ToolStatus.CRASHED
        assert outcome.content == "the tool supervisor crashed: RuntimeError('the registry broke')"
    assert wait_until(lambda: not process_group_alive(pgid))
    rig.run(call("c3", "nap", text="the next incarnation works"), batch="b3")
    assert rig.finished("b3").outcomes[0].content == "the next incarnation works"


# -- permissions -----------------------------------------------------------------------------------


def asking(**kwargs) -> PermissionPolicy:
    return PermissionPolicy(
        [PermissionRule("nap", "ask")], default="allow", use_default_rules=False, **kwargs
    )


def test_a_call_allowed_by_the_policy_runs_without_asking(make_rig: MakeRig) -> None:
    rig = make_rig(policy=PermissionPolicy([PermissionRule("nap", "allow")], default="deny"))
    rig.run(call("c1", "nap"))
    assert rig.finished().outcomes[0].status is ToolStatus.OK
    assert rig.all_heard(PermissionRequested) == []


def test_a_call_denied_by_the_policy_never_runs(make_rig: MakeRig) -> None:
    rig = make_rig(policy=PermissionPolicy([PermissionRule("nap", "deny")], default="allow"))
    rig.run(call("c1", "nap"), call("c2", "pnap"))
    denied, allowed = rig.finished().outcomes
    assert (denied.status, denied.is_error, denied.content) == (
        ToolStatus.DENIED,
        True,
        "denied: rule `deny nap`",
    )
    assert allowed.status is ToolStatus.OK
    assert [m.call_id for m in rig.all_heard(ToolCallBegan)] == ["c2"]


def test_an_asked_call_waits_for_the_answer_and_runs_when_allowed(make_rig: MakeRig) -> None:
    rig = make_rig(policy=asking())
    rig.run(call("c1", "nap", text="allowed"))
    request = rig.expect(PermissionRequested)
    assert request == PermissionRequested("c1", "nap", '{"text": "allowed"}', "rule `ask nap`")
    assert rig.all_heard(ToolCallBegan) == []
    rig.answer("c1", "allow_once")
    rig.expect(ToolCallBegan)
    assert rig.finished().outcomes[0].content == "allowed"
    assert rig.policy.grants == ()


def test_an_asked_call_refused_by_the_host_is_denied_with_its_reason(make_rig: MakeRig) -> None:
    rig = make_rig(policy=asking())
    rig.run(call("c1", "nap"), call("c2", "pnap", text="goes on"))
    rig.expect(PermissionRequested)
    rig.answer("c1", "deny", reason="not now")
    denied, after = rig.finished().outcomes
    assert (denied.status, denied.content) == (ToolStatus.DENIED, "denied: not now")
    assert after.content == "goes on"


def test_an_unanswered_call_is_denied_at_the_deadline_and_a_late_answer_is_a_dead_letter(
    make_rig: MakeRig,
) -> None:
    rig = make_rig(policy=asking(), settings=ToolBridgeSettings(permission_timeout=0.2))
    letters = dead_letters(rig)
    rig.run(call("c1", "nap"))
    rig.expect(PermissionRequested)
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.content) == (ToolStatus.DENIED, "denied: no answer within 0.2 s")
    rig.answer("c1", "allow_once")
    letter = letters.get(timeout=5)
    assert letter.address == "tools" and "no call 'c1' is waiting for permission" in letter.reason
    assert rig.all_heard(ToolCallBegan) == []


def test_allow_always_is_remembered_for_the_rest_of_the_session(make_rig: MakeRig) -> None:
    rig = make_rig(policy=asking())
    rig.run(call("c1", "nap", text="one"), call("c2", "nap", text="two"))
    rig.expect(PermissionRequested)
    rig.answer("c1", "allow_always")
    assert [o.content for o in rig.finished().outcomes] == ["one", "two"]
    rig.run(call("c3", "nap", text="three"), batch="b2")
    assert rig.finished("b2").outcomes[0].content == "three"
    assert [r.call_id for r in rig.all_heard(PermissionRequested)] == ["c1"]
    assert rig.policy.grants == (PermissionRule("nap", "allow"),)


def test_a_pre_tool_hook_denies_a_call_before_it_is_asked_or_run(make_rig: MakeRig) -> None:
    def no_long_naps(tool: str, args: object) -> str | None:
        return "naps over a second are not allowed" if getattr(args, "seconds", 0) > 1 else None

    rig = make_rig(policy=asking(hooks=[no_long_naps]))
    rig.run(call("c1", "nap", seconds=30))
    (outcome,) = rig.finished().outcomes
    assert (outcome.status, outcome.content) == (
        ToolStatus.DENIED,
        "denied: naps over a second are not allowed",
    )
    assert rig.all_heard(PermissionRequested) == [] and rig.all_heard(ToolCallBegan) == []


# -- settings --------------------------------------------------------------------------------------


def test_the_defaults_are_a_2_5_s_grace_a_10_s_kill_and_a_60_s_permission_deadline() -> None:
    settings = ToolBridgeSettings()
    assert (settings.abort_grace, settings.kill_after, settings.permission_timeout) == (2.5, 10.0, 60.0)
    assert settings.output_cap == 30_000 and settings.limits.output_cap == 30_000


@pytest.mark.parametrize(
    "bad",
    [
        {"abort_grace": -1.0},
        {"abort_grace": 5.0, "kill_after": 1.0},
        {"permission_timeout": 0.0},
        {"start_timeout": 0.0},
        {"terminate_grace": -0.5},
        {"output_cap": -1},
    ],
)
def test_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ToolBridgeSettingsError):
        ToolBridgeSettings(**bad)  # type: ignore[arg-type]


def test_with_a_redactor_outcomes_and_echoed_arguments_pass_through_it(make_rig: MakeRig) -> None:
    def hide(text: str) -> str:
        return text.replace("hunter2-secret", "[redacted:PASSWORD]")

    policy = PermissionPolicy([PermissionRule("shell", "ask")], default="allow", use_default_rules=False)
    rig = make_rig(policy=policy, redact=hide)
    rig.run(call("c1", "nap", text="the hunter2-secret"), call("c2", "shell", command="echo hunter2-secret"))
    request = rig.expect(PermissionRequested)
    assert "hunter2-secret" not in request.arguments and "[redacted:PASSWORD]" in request.arguments
    rig.answer("c2", "allow_once")
    finished = rig.finished()
    assert [o.content for o in finished.outcomes] == ["the [redacted:PASSWORD]", "[redacted:PASSWORD]"]
